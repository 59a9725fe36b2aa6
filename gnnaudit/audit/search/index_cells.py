r"""The member tables of the paper's index (LocalCE-I) and the probe geometry its queries read.

After the partitions are built (:mod:`gnnaudit.audit.search.index_build`), every (partition,
cluster, predicted class) cell is a contiguous slice of its partition's member table, sorted
by the angle to the centroid (:func:`cell_layout`, :class:`CellLayout`). A query of
:class:`~gnnaudit.audit.search.index.IndexSearcher` then reads:

* the clusters of its entry partition in probe order (:func:`probe_order`: the entry cluster
  first, then by decreasing similarity to the centroid);
* each cluster's cap bound (:func:`probe_bounds`): with :math:`r_j` the largest angle between
  the centroid :math:`\mu_j` and a member of another class, no such member is more similar to
  the query than :math:`\cos(\max(0, \angle(x_q, \mu_j) - r_j))`;
* the members of another class within an annulus of angles to the centroid
  (:meth:`CellLayout.candidates`; the triangle inequality on the sphere), a sub-slice per
  class cell.

Angles carry a slack :data:`ANGLE_SLACK` for the float32 rounding of the cosines, so the
bounds never drop a true answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CellLayout", "cell_layout", "probe_order", "probe_bounds", "ANGLE_SLACK"]

#: radians: arccos of a float32 cosine off by <= 1e-5 is off by < this
ANGLE_SLACK = 5e-3


def probe_order(csim: np.ndarray, entry: Any) -> np.ndarray:
    """Clusters in probe order: the entry cluster first, then by decreasing similarity of the
    query to the centroid (stable). ``csim``: ``(n_clusters,)`` or ``(q, n_clusters)``."""
    key = -csim.astype(np.float64)
    if key.ndim == 1:
        key[entry] = -np.inf
        return np.argsort(key, kind="stable")
    key[np.arange(key.shape[0]), entry] = -np.inf
    return np.argsort(key, axis=1, kind="stable")


def probe_bounds(csim: np.ndarray, rad: np.ndarray, n_cand: np.ndarray) -> np.ndarray:
    """Cap bound on the similarity of any candidate of each cluster:
    :math:`\\cos(\\max(0, \\angle(x_q, \\mu_j) - r_j))` (``-inf``: no candidate)."""
    ang = np.arccos(np.clip(csim.astype(np.float64), -1.0, 1.0))
    with np.errstate(invalid="ignore"):
        bound = np.cos(np.maximum(0.0, ang - rad))
    return np.where(n_cand > 0, bound, -np.inf)


@dataclass(frozen=True)
class CellLayout:
    """Member tables and cap radii of every (partition, cluster, class) cell (see
    :func:`cell_layout`)."""

    members: np.ndarray
    member_angle: np.ndarray
    cell_offsets: np.ndarray
    cluster_radius: np.ndarray
    probe_radius: np.ndarray
    n_candidates: np.ndarray
    n_total: np.ndarray

    def candidates(self, p: int, j: int, skip: int, lo: float, hi: float) -> np.ndarray:
        """Positions of the members of cluster ``j`` of partition ``p`` not of class ``skip``
        (``-1``: every class) whose angle to the centroid lies in ``[lo, hi]``: one
        sub-slice per class cell of the partition's member table."""
        n_cls = self.n_total.size
        off = self.cell_offsets[p]
        mem, ang = self.members[p], self.member_angle[p]
        if lo <= 0.0 and hi >= self.cluster_radius[p, j]:  # the annulus covers the cluster
            first, last = off[j * n_cls], off[(j + 1) * n_cls]
            if skip < 0:
                return mem[first:last]
            b, e = off[j * n_cls + skip], off[j * n_cls + skip + 1]
            if b == first:
                return mem[e:last]
            if e == last:
                return mem[first:b]
            return np.concatenate((mem[first:b], mem[e:last]))
        parts = []
        for c in range(n_cls):
            a, b = off[j * n_cls + c], off[j * n_cls + c + 1]
            if c == skip or a == b:
                continue
            if lo > 0.0 or hi < math.pi:  # annulus of the triangle inequality
                seg = ang[a:b]
                a, b = a + int(np.searchsorted(seg, lo)), a + int(np.searchsorted(seg, hi, "right"))
            if b > a:
                parts.append(mem[a:b])
        if not parts:
            return mem[:0]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def cell_layout(
    labels: np.ndarray, own_cos: np.ndarray, k_cl: int, class_index: np.ndarray, n_classes: int
) -> CellLayout:
    """Member tables and cap radii of every (partition, cluster, class) cell.

    ``members[p]``: positions sorted by (cluster, class, angle to the centroid), so the
    candidates of a query of class c in cluster j are contiguous slices (``cell_offsets[p]``
    their bounds) and the members within an angle range of a cell are a sub-slice
    (``member_angle[p]`` the sorted angles). ``probe_radius[p, j, c]``: the largest angle
    between the centroid of cluster j and a member of a class other than c (plus a rounding
    slack), ``n_candidates`` the number of such members. Memory:
    ``O(n_partitions * (m + n_clusters * n_classes))``.
    """
    n_part, m = labels.shape
    n_cls = n_classes
    cell = labels.astype(np.int64) * n_cls + class_index[None, :]
    ang = np.arccos(np.clip(own_cos.astype(np.float64), -1.0, 1.0))
    members = np.stack([np.lexsort((ang[p], cell[p])) for p in range(n_part)])
    member_angle = np.take_along_axis(ang, members, axis=1)
    counts = np.stack([np.bincount(c, minlength=k_cl * n_cls) for c in cell])
    cell_offsets = np.concatenate([np.zeros((n_part, 1), np.int64), counts.cumsum(axis=1)], axis=1)
    radius = np.full((n_part, k_cl * n_cls), -np.inf)
    for p in range(n_part):  # max angle per cell: the last member of each sorted cell
        nz = np.flatnonzero(counts[p])
        radius[p, nz] = member_angle[p, cell_offsets[p, nz + 1] - 1]
    radius3 = radius.reshape(n_part, k_cl, n_cls)
    cluster_radius = radius3.max(axis=2) + ANGLE_SLACK  # (-inf: empty cluster)
    counts3 = counts.reshape(n_part, k_cl, n_cls)
    probe_radius = np.full_like(radius3, -np.inf)
    for c in range(n_cls):
        others = np.delete(radius3, c, axis=2)
        if others.shape[2]:
            probe_radius[:, :, c] = others.max(axis=2) + ANGLE_SLACK
    n_candidates = counts3.sum(axis=2, keepdims=True) - counts3
    sizes = np.bincount(class_index, minlength=n_cls)
    n_total = (m - sizes).astype(np.int64)
    return CellLayout(
        members, member_angle, cell_offsets, cluster_radius, probe_radius, n_candidates, n_total
    )
