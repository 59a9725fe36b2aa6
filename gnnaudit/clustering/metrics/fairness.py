"""Quality measures for fair density-based clusterings (FairDen paper, Sec. 3.1-3.2, App. C.2).

All measures treat label ``-1`` as noise and are *noise-adjusted* as in the paper: computed on
the non-noise points and multiplied by the fraction of non-noise points.

* :func:`balance` (Eq. 6-7): per cluster
  :math:`\\min_{S} \\min\\big(r_S / r_S(C),\\, r_S(C) / r_S\\big)` with
  :math:`r_S = |S|/n` and :math:`r_S(C) = |S \\cap C| / |C|`; the clustering's balance is the mean
  over clusters (ratios computed on the non-noise points), times the non-noise fraction.
* :func:`dcsi` (Gauss et al. 2024): per cluster ``i``, :math:`\\varepsilon_i` = median distance
  to the :math:`2\\,minPts`-th nearest other member; core points have at least ``minPts`` other
  members within :math:`\\varepsilon_i`; :math:`Sep(C_i, C_j)` = smallest distance between their
  core points, :math:`Conn(C_i)` = largest edge of the Euclidean MST of its core points;
  :math:`DCSI = \\frac{2}{K(K-1)} \\sum_{i<j} \\frac{q}{1+q}`,
  :math:`q = Sep / \\max(Conn_i, Conn_j)`. ``squared=True`` evaluates it on squared Euclidean
  distances, as the FairDen paper's published evaluation does.
* :func:`adjusted_rand_noise`, :func:`normalized_mutual_info_noise`: agreement with a reference
  clustering (typically DBSCAN): points that are noise in the reference are excluded, the score
  is computed on the points that are non-noise in both, and multiplied by the fraction of the
  reference's non-noise points that the evaluated clustering does not call noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.neighbors import NearestNeighbors

from gnnaudit._aliases import renamed_keywords
from gnnaudit._validation import check_array, check_bool, check_int
from gnnaudit.clustering.goodall import encode_columns
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import power_of_two_scale

__all__ = [
    "balance",
    "group_mix",
    "dcsi",
    "adjusted_rand_noise",
    "normalized_mutual_info_noise",
    "noise_fraction",
]


def _labels(name: str, labels: Any, n: int | None = None) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise InvalidInputError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise InvalidInputError(f"{name} must hold integer cluster ids (-1 = noise)")
    if n is not None and arr.size != n:
        raise InvalidInputError(f"{name} has {arr.size} entries, expected {n}")
    return arr.astype(np.int64)


def noise_fraction(labels: Any) -> float:
    """Fraction of points labelled ``-1``."""
    lab = _labels("labels", labels)
    return float((lab == -1).mean()) if lab.size else 0.0


def _sensitive_codes(sensitive: Any, n: int, combined: bool) -> list[np.ndarray]:
    codes = encode_columns("sensitive", sensitive)
    if codes.shape[0] != n:
        raise InvalidInputError(f"sensitive has {codes.shape[0]} rows, labels has {n}")
    if combined and codes.shape[1] > 1:
        return [np.unique(codes, axis=0, return_inverse=True)[1].reshape(-1)]
    return [codes[:, c] for c in range(codes.shape[1])]


@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def balance(labels: Any, sensitive: Any, *, combined: bool = False) -> float:
    """Noise-adjusted balance (Eq. 6-7), in ``[0, 1]``; 1 = every cluster mirrors the data.

    ``sensitive`` (or ``sensitive_features=``, fairlearn's name) is one column or several
    (n, a). By default the minimum runs over the groups
    of every attribute separately (Eq. 6); ``combined=True`` balances the combined groups (the
    tuples of all sensitive values, what FairDen optimises). Returns 0 when there is no
    non-noise cluster.
    """
    lab = _labels("labels", labels)
    attrs = _sensitive_codes(sensitive, lab.size, combined)
    keep = lab != -1
    if not keep.any():
        return 0.0
    lab_k = np.unique(lab[keep], return_inverse=True)[1].reshape(-1)
    n_cl = int(lab_k.max()) + 1
    per_cluster = np.ones(n_cl)
    for g in attrs:  # loop over sensitive attributes (few)
        g_k = np.unique(g[keep], return_inverse=True)[1].reshape(-1)
        n_g = int(g_k.max()) + 1
        counts = np.zeros((n_cl, n_g))
        np.add.at(counts, (lab_k, g_k), 1.0)
        r = counts.sum(axis=0) / counts.sum()
        rc = counts / counts.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.minimum(np.where(rc > 0, r / rc, 0.0), rc / r)
        per_cluster = np.minimum(per_cluster, ratio.min(axis=1))
    return float(per_cluster.mean() * keep.mean())


@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def group_mix(labels: Any, sensitive: Any, *, names: list[str] | None = None) -> pd.DataFrame:
    """Per cluster (noise row ``-1`` included): size, share of every combined sensitive group
    and the cluster's balance (Eq. 6 over the combined groups)."""
    lab = _labels("labels", labels)
    arr = np.asarray(sensitive, dtype=object)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.shape[0] != lab.size:
        raise InvalidInputError(f"sensitive has {arr.shape[0]} rows, labels has {lab.size}")
    keys = ["/".join(map(str, row)) for row in arr] if arr.shape[1] > 1 else arr[:, 0].astype(str)
    df = pd.DataFrame({"cluster": lab, "group": keys})
    table = pd.crosstab(df["cluster"], df["group"])
    share = table.div(table.sum(axis=1), axis=0)
    overall = df.loc[df["cluster"] != -1, "group"].value_counts(normalize=True)
    overall = overall.reindex(table.columns).fillna(0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        bal = np.minimum(
            np.where(share > 0, overall.values / share.values, 0.0), share.values / overall.values
        )
    bal = np.nan_to_num(bal, nan=1.0)
    out = share.add_prefix("share_")
    out.insert(0, "size", table.sum(axis=1))
    out["balance"] = np.where(out.index == -1, np.nan, bal.min(axis=1))
    return out.reset_index()


def _mst_max_edge(P: np.ndarray) -> float:
    """The largest edge of the Euclidean minimum spanning tree of the rows of ``P`` (0 for one
    row): the MST of :class:`~gnnaudit.graph_ops.dc_tree.DCTree` at ``min_samples=1`` (zero
    core distances), by the same rule for dense or Boruvka, without building the tree."""
    from gnnaudit.graph_ops.dc_tree import DENSE_MAX_N
    from gnnaudit.graph_ops.mst import mst_boruvka, mst_dense

    if P.shape[0] < 2:
        return 0.0
    zero = np.zeros(P.shape[0])
    mst = mst_dense(P, zero) if P.shape[0] <= DENSE_MAX_N else mst_boruvka(P, zero)
    return float(mst.weight.max())


@renamed_keywords(deprecated={"min_pts": "min_samples"})
def dcsi(X: Any, labels: Any, min_samples: int = 5, *, squared: bool = False) -> float:
    """Noise-adjusted DCSI (App. C.2, Gauss et al. 2024) in ``[0, 1]``; higher is better.

    .. math::

        DCSI = \\frac{2}{K(K-1)} \\sum_{i<j} \\frac{q_{ij}}{1 + q_{ij}}, \\qquad
        q_{ij} = \\frac{Sep(C_i, C_j)}{\\max(Conn(C_i), Conn(C_j))},

    times the fraction of non-noise points. Per cluster, :math:`\\varepsilon_i` is the median
    distance of its members to their ``2 minPts``-th nearest other member; core points have at
    least ``minPts`` other members within :math:`\\varepsilon_i`; ``Sep`` is the smallest
    distance between core points of two clusters, ``Conn`` the largest edge of the minimum
    spanning tree of a cluster's core points.

    Args:
        squared: ``False`` (default): Euclidean distances, Gauss et al.'s definition.
            ``True``: squared Euclidean distances, as in the evaluation code published with
            the FairDen paper, whose tables (Table 2, Table 4, Fig. 4) therefore report
            ``squared=True`` values. Squaring keeps the minimum spanning trees and the
            nearest-neighbour orders, so it squares ``Sep``, ``Conn`` and the ratio
            (:math:`q \\mapsto q^2`); only :math:`\\varepsilon_i`, a median, may pick a
            slightly different core set (the median of squares of an even number of values is
            not the square of the median).

    ``min_samples`` is :math:`minPts` (``min_pts=``: deprecated spelling, removed in 0.3.0).
    Clusters of one point count as noise (as in the reference implementation); fewer than two
    clusters give 0. A cluster without any core point uses all its members as core points.
    Memory ``O(n * minPts)`` plus one Euclidean MST per cluster.
    """
    X = check_array("X", X, ndim=2)
    X = X / power_of_two_scale(X)  # exact; DCSI is a ratio, the scale cancels (scale-safe)
    lab = _labels("labels", labels, X.shape[0]).copy()
    min_samples = check_int("min_samples", min_samples, minimum=1)
    squared = check_bool("squared", squared)
    power = 2.0 if squared else 1.0
    ids, counts = np.unique(lab[lab != -1], return_counts=True)
    lab[np.isin(lab, ids[counts == 1])] = -1
    keep = lab != -1
    clusters = np.unique(lab[keep])
    if clusters.size < 2:
        return 0.0
    cores, conn = [], []
    for c in clusters:  # loop over clusters (few)
        P = X[lab == c]
        m = P.shape[0]
        kk = min(2 * min_samples, m - 1)
        nn = NearestNeighbors(n_neighbors=kk + 1).fit(P)
        dist = nn.kneighbors(P)[0] ** power
        eps = float(np.median(dist[:, kk]))
        km = min(min_samples, m - 1)
        core = P[dist[:, km] <= eps] if m > min_samples else P[:0]
        if core.shape[0] == 0:
            core = P
        cores.append(core)
        conn.append(_mst_max_edge(core) ** power)
    total, pairs = 0.0, 0
    for a in range(clusters.size):
        nn = NearestNeighbors(n_neighbors=1).fit(cores[a])
        for b in range(a + 1, clusters.size):
            sep = float(nn.kneighbors(cores[b])[0].min()) ** power
            cn = max(conn[a], conn[b])
            q = np.inf if cn == 0 else sep / cn
            total += 1.0 if np.isinf(q) and sep > 0 else (0.0 if np.isinf(q) else q / (1 + q))
            pairs += 1
    return float(total / pairs * keep.mean())


def _noise_adjusted(score_fn: Any, reference: Any, labels: Any) -> float:
    ref = _labels("reference", reference)
    lab = _labels("labels", labels, ref.size)
    base = ref != -1
    if not base.any():
        return 0.0
    both = base & (lab != -1)
    if not both.any():
        return 0.0
    return float(score_fn(ref[both], lab[both]) * both.sum() / base.sum())


def adjusted_rand_noise(reference: Any, labels: Any) -> float:
    """Noise-adjusted ARI of ``labels`` against a ``reference`` clustering (e.g. DBSCAN)."""
    return _noise_adjusted(adjusted_rand_score, reference, labels)


def normalized_mutual_info_noise(reference: Any, labels: Any) -> float:
    """Noise-adjusted NMI of ``labels`` against a ``reference`` clustering (e.g. DBSCAN)."""
    return _noise_adjusted(normalized_mutual_info_score, reference, labels)
