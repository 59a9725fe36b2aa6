"""Density-connectivity (dc) distance as an ultrametric tree (Beer et al. 2023; FairDen, App. B.2).

.. math::

    cd(x) &= \\text{distance of } x \\text{ to its } minPts\\text{-th nearest neighbour
    (} x \\text{ counts as the first)} \\\\
    d_m(x, y) &= \\max\\big(cd(x),\\, cd(y),\\, \\|x - y\\|\\big) \\\\
    d_{dc}(x, y) &= \\min_{P \\in \\mathcal{P}(x, y)} \\max_{e \\in P} |e|_{d_m}, \\qquad
    d_{dc}(x, x) = 0

The minimax path distance equals the largest edge on the path between ``x`` and ``y`` in a
minimum spanning tree (MST) of the complete :math:`d_m` graph, and the single-linkage dendrogram
of that MST is the ultrametric tree: :math:`d_{dc}(x, y)` is the height of the lowest common
ancestor of the leaves ``x`` and ``y``.

Representation. The dendrogram's leaves are laid out in the order of :func:`scipy.cluster.
hierarchy.leaves_list`, so every subtree is a contiguous range ``[lo, hi)`` of positions. Then

* ``distance(i, j)`` is a range maximum over the ``n - 1`` "gap heights" between neighbouring
  leaves (sparse table, ``O(n log n)`` memory, ``O(1)`` per query, vectorised);
* ``matvec(V)`` uses :math:`(D V)_i = \\sum_{c} h_{p(c)} (S_{p(c)} - S_c)` over the nodes ``c``
  on the path from leaf ``i`` to the root (``p(c)`` the parent, ``S`` subtree sums of ``V``):
  subtree sums are differences of one cumulative sum, and the path sums are one more cumulative
  sum over a difference array, i.e. ``O(n * columns)`` time and memory, no Python loop.

Building the dendrogram from the sorted MST edges is one union-find pass (``O(n alpha(n))``,
done once per fit); everything after that is vectorised numpy / scipy.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from scipy.cluster.hierarchy import fcluster, leaves_list
from tqdm.auto import tqdm

from gnnaudit._aliases import deprecated_attribute, renamed_keywords
from gnnaudit._validation import check_array, check_choice, check_fitted, check_float, check_int
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import power_of_two_scale
from gnnaudit.graph_ops.mst import (
    BORUVKA_KNN,
    MSTEdges,
    core_distances,
    kd_tree,
    knn_query,
    mst_boruvka,
    mst_dense,
)

__all__ = ["DCTree", "DENSE_MAX_N"]

logger = logging.getLogger(__name__)

#: ``mst_method="auto"`` uses the dense MST up to this many points: the measured crossover
#: (``benchmarks/results/mst_crossover.md``: in 2, 5 and 10 dimensions the two are within 5%
#: of each other at 150 points (0.1 ms apart), the dense method is faster at 100 and below,
#: Boruvka from 200 on and 18-28x faster at 2,000)
DENSE_MAX_N = 150


def _single_linkage(n: int, mst: MSTEdges) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Children ``(n-1, 2)``, heights and sizes of the single-linkage merges of an MST.

    One union-find pass over the sorted edges. Not ``scipy.cluster.hierarchy.linkage``: it
    needs the ``O(n^2)`` condensed distance matrix the Boruvka MST avoids (its dendrogram on
    that matrix is the same, see the tests). Not ``scipy.cluster.hierarchy.DisjointSet``: the
    same merges (tests), but its per-call overhead made this pass 3.7x slower (3.4 s against
    0.9 s on a 200,000-point tree)."""
    order = np.argsort(mst.weight, kind="stable")
    us = mst.u[order].tolist()
    vs = mst.v[order].tolist()
    heights = mst.weight[order].astype(np.float64)
    parent = list(range(n))
    node_of = list(range(n))
    size = [1] * n
    children = np.empty((n - 1, 2), dtype=np.int64)
    sizes = np.empty(n - 1, dtype=np.int64)
    for t in range(n - 1):  # one union-find pass over the n - 1 merges (build only)
        a = us[t]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        b = vs[t]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        children[t, 0] = node_of[a]
        children[t, 1] = node_of[b]
        if size[a] < size[b]:
            a, b = b, a
        parent[b] = a
        size[a] += size[b]
        sizes[t] = size[a]
        node_of[a] = n + t
    return children, heights, sizes


class DCTree:
    """Exact dc-distance ultrametric of a point set, with fast queries and matvecs.

    Parameters
    ----------
    min_samples:
        ``minPts`` of the core distance (the point itself counts), ``>= 1`` (scikit-learn's
        ``DBSCAN`` name; ``min_pts=`` is a deprecated spelling, removed in 0.3.0).
    mst_method:
        ``"dense"`` (full :math:`d_m` matrix, scipy MST; ``O(n^2)`` memory),
        ``"boruvka"`` (KD-tree Boruvka, ``O(n k)`` memory) or ``"auto"`` (dense up to
        ``dense_max_n`` points).
    dense_max_n:
        Size limit of ``"auto"`` for the dense method (default :data:`DENSE_MAX_N`, the
        measured crossover).
    progress:
        Show a tqdm progress bar over the three stages.

    Attributes
    ----------
    core_distances_ : (n,) core distances.
    mst_ : :class:`~gnnaudit.graph_ops.mst.MSTEdges`, the ``n - 1`` MST edges.
    linkage_ : (n-1, 4) scipy linkage matrix of the dendrogram (children, height, size).
    order_ : (n,) leaf order (every subtree is a contiguous range of it).
    max_distance_ : largest dc-distance (the root height; 0 for a single point).
    timings_ : seconds spent on core distances, the MST and the tree.
    """

    @renamed_keywords(deprecated={"min_pts": "min_samples"})
    def __init__(
        self,
        min_samples: int = 5,
        *,
        mst_method: Literal["auto", "dense", "boruvka"] = "auto",
        dense_max_n: int = DENSE_MAX_N,
        progress: bool = False,
    ) -> None:
        self.min_samples = min_samples
        self.mst_method = mst_method
        self.dense_max_n = dense_max_n
        self.progress = progress

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any) -> DCTree:
        """Compute core distances, the exact :math:`d_m` MST and the ultrametric tree.

        Scale-safe: the work runs on ``X`` divided by a power of two (exact, see
        :func:`~gnnaudit.graph_ops._distances.power_of_two_scale`) and the core distances and
        MST weights are multiplied back, so data at ``1e-160`` or ``1e160`` give the tree of
        the same data at scale 1, scaled."""
        min_samples = check_int("min_samples", self.min_samples, minimum=1)
        check_choice("mst_method", self.mst_method, ("auto", "dense", "boruvka"))
        check_int("dense_max_n", self.dense_max_n, minimum=1)
        X = check_array("X", X, ndim=2, min_rows=1)
        if X.shape[1] == 0:
            raise InvalidInputError("X must have at least one column, got shape (n, 0)")
        X = np.ascontiguousarray(X, dtype=np.float64)
        scale = power_of_two_scale(X)
        if scale != 1.0:
            X = X / scale
        n = X.shape[0]
        self.n_ = n
        method = self.mst_method
        if method == "auto":
            method = "dense" if n <= self.dense_max_n else "boruvka"
        self.mst_method_: str = method  # "dense" or "boruvka"; "given" from from_mst
        logger.info("dc-tree: n=%d, minPts=%d, MST method %s", n, min_samples, method)
        timings: dict[str, float] = {}
        bar = tqdm(total=3, desc="dc-tree", disable=not self.progress, leave=False)
        t0 = time.perf_counter()
        if method == "dense":
            self.core_distances_ = core_distances(X, min_samples)
            timings["core_distances"] = time.perf_counter() - t0
            bar.update()
            self.mst_ = mst_dense(X, self.core_distances_)
        else:
            tree = kd_tree(X)
            nd, ni = knn_query(X, max(min_samples, BORUVKA_KNN), tree=tree)
            self.core_distances_ = (
                nd[:, min(min_samples, n) - 1].copy() if min_samples > 1 else np.zeros(n)
            )
            timings["core_distances"] = time.perf_counter() - t0
            bar.update()
            self.mst_ = mst_boruvka(X, self.core_distances_, tree=tree, knn=(nd, ni))
            del nd, ni
        bar.update()
        if scale != 1.0:  # exact: powers of two
            self.core_distances_ = self.core_distances_ * scale
            self.mst_ = MSTEdges(self.mst_.u, self.mst_.v, self.mst_.weight * scale)
        t1 = time.perf_counter()
        timings["mst"] = t1 - t0 - timings["core_distances"]
        self._build_tree()
        timings["tree"] = time.perf_counter() - t1
        bar.update()
        bar.close()
        self.timings_ = timings
        return self

    min_pts = deprecated_attribute("min_pts", "min_samples")

    @classmethod
    @renamed_keywords(deprecated={"min_pts": "min_samples"})
    def from_mst(cls, core_distances: Any, mst: MSTEdges, min_samples: int = 5) -> DCTree:
        """Build the tree from precomputed core distances and an exact :math:`d_m` MST (e.g. from
        :func:`~gnnaudit.graph_ops.mst.mst_boruvka`); skips the neighbour search."""
        core = check_array("core_distances", core_distances, ndim=1)
        n = core.size
        if not isinstance(mst, MSTEdges) or mst.u.size != n - 1:
            raise InvalidInputError(f"mst must be an MSTEdges with n - 1 = {n - 1} edges")
        check_array("mst.weight", mst.weight, ndim=1, min_rows=0)
        for name, ends in (("mst.u", mst.u), ("mst.v", mst.v)):
            ends = np.asarray(ends)
            if ends.dtype.kind not in "iu" or (ends.size and (ends.min() < 0 or ends.max() >= n)):
                raise InvalidInputError(f"{name} must hold point ids in [0, {n - 1}]")
        tree = cls(min_samples=min_samples)
        tree.n_, tree.core_distances_, tree.mst_, tree.mst_method_ = n, core, mst, "given"
        t0 = time.perf_counter()
        tree._build_tree()
        tree.timings_ = {"tree": time.perf_counter() - t0}
        return tree

    def _build_tree(self) -> None:
        n = self.n_
        if n == 1:
            self.linkage_ = np.empty((0, 4))
            self.order_ = np.zeros(1, dtype=np.int64)
            self._pos = np.zeros(1, dtype=np.int64)
            self.max_distance_ = 0.0
            self._gap_table = np.empty((1, 0))
            return
        children, heights, sizes = _single_linkage(n, self.mst_)
        self.linkage_ = np.column_stack([children.astype(np.float64), heights, sizes])
        self.max_distance_ = float(heights[-1])
        order = leaves_list(self.linkage_).astype(np.int64)
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n)
        self.order_, self._pos = order, pos
        m = 2 * n - 1
        parent = np.full(m, -1, dtype=np.int64)
        parent[children[:, 0]] = np.arange(n, m)
        parent[children[:, 1]] = np.arange(n, m)
        # leftmost leaf of every node by pointer jumping along "first child" links (log depth)
        first = np.arange(m)
        first[n:] = children[:, 0]
        while True:
            nxt = first[first]
            if np.array_equal(nxt, first):
                break
            first = nxt
        node_size = np.ones(m, dtype=np.int64)
        node_size[n:] = sizes
        lo = pos[first]
        hi = lo + node_size
        height = np.zeros(m)
        height[n:] = heights
        # each merge owns the gap between its first child's last leaf and its second child's first
        gap = np.empty(n - 1)
        gap[lo[n:] + node_size[children[:, 0]] - 1] = heights
        self._lo, self._hi, self._parent, self._height = lo, hi, parent, height
        # sparse table for range maxima over the gap heights
        levels = [gap]
        span = 1
        while 2 * span <= n - 1:
            prev = levels[-1]
            levels.append(np.maximum(prev[:-span], prev[span:]))
            span *= 2
        table = np.full((len(levels), n - 1), -np.inf)
        for j, lev in enumerate(levels):
            table[j, : lev.size] = lev
        self._gap_table = table
        # difference-array operator for the top-down path sums of matvec
        nonroot = np.flatnonzero(parent >= 0)
        rows = np.concatenate([lo[nonroot], hi[nonroot]])
        cols = np.concatenate([nonroot, nonroot])
        vals = np.concatenate([np.ones(nonroot.size), -np.ones(nonroot.size)])
        keep = rows < n
        self._path_op = sp.csr_matrix(
            (vals[keep], (rows[keep], cols[keep])), shape=(n, m), dtype=np.float64
        )
        self._nonroot = nonroot

    # -------------------------------------------------------------- queries
    def _check(self) -> None:
        check_fitted(self, ("mst_", "core_distances_"))

    def _index(self, name: str, value: Any) -> np.ndarray:
        arr = np.asarray(value)
        if arr.dtype.kind not in "iu":
            raise InvalidInputError(f"{name} must hold integer point ids, got dtype {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() >= self.n_):
            raise InvalidInputError(
                f"{name} holds ids in [{arr.min()}, {arr.max()}] but must lie in [0, {self.n_ - 1}]"
            )
        return arr.astype(np.int64)

    def distance(self, i: Any, j: Any) -> np.ndarray:
        """dc-distances between points ``i`` and ``j`` (broadcast arrays of ids). ``O(1)`` each."""
        self._check()
        i, j = np.broadcast_arrays(self._index("i", i), self._index("j", j))
        a, b = self._pos[i], self._pos[j]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        out = np.zeros(lo.shape)
        diff = hi > lo
        if diff.any():
            length = (hi - lo)[diff]
            lev = np.floor(np.log2(length)).astype(np.int64)
            s, e = lo[diff], hi[diff] - (1 << lev)
            out[diff] = np.maximum(self._gap_table[lev, s], self._gap_table[lev, e])
        return out

    def to_dense(self, max_n: int = 10000) -> np.ndarray:
        """Full :math:`n \\times n` dc-distance matrix (``O(n^2)`` memory; refuses ``n > max_n``)."""
        self._check()
        n = self.n_
        if n > max_n:
            raise InvalidInputError(f"to_dense needs n <= max_n={max_n}, got n={n}")
        out = np.empty((n, n))
        cols = np.arange(n)
        step = max(1, 4_000_000 // n)
        for s in range(0, n, step):
            rows = np.arange(s, min(n, s + step))
            out[rows] = self.distance(rows[:, None], cols[None, :])
        return out

    def matvec(self, V: Any) -> np.ndarray:
        """:math:`D_{dc} V` through the tree in ``O(n * columns)`` time and memory."""
        self._check()
        V = check_array("V", V, ndim=(1, 2), min_rows=0)
        if V.shape[0] != self.n_:
            raise InvalidInputError(
                f"V must have shape (n,) or (n, c) with n={self.n_}, got {V.shape}"
            )
        if self.n_ == 1:
            return np.zeros_like(V)
        vec = V.ndim == 1
        Vo = V[self.order_].reshape(self.n_, -1)
        csum = np.zeros((self.n_ + 1, Vo.shape[1]))
        np.cumsum(Vo, axis=0, out=csum[1:])
        S = csum[self._hi] - csum[self._lo]  # subtree sums of every node
        c = self._nonroot
        p = self._parent[c]
        val = np.zeros_like(S)
        val[c] = self._height[p, None] * (S[p] - S[c])
        out_o = np.cumsum(self._path_op @ val, axis=0)
        out = np.empty_like(out_o)
        out[self.order_] = out_o
        return out[:, 0] if vec else out

    def cut(self, eps: float) -> np.ndarray:
        """DBSCAN*-style labels at radius ``eps``: points with ``cd > eps`` are noise (-1); the
        others are grouped by ``d_dc <= eps`` and numbered ``0, 1, ...`` by first occurrence."""
        self._check()
        eps = check_float("eps", eps, minimum=0.0)
        n = self.n_
        core = self.core_distances_ <= eps
        if n == 1:
            return np.where(core, 0, -1)
        flat = fcluster(self.linkage_, t=eps, criterion="distance")
        labels = np.full(n, -1, dtype=np.int64)
        if core.any():
            _, first_idx, inv = np.unique(flat[core], return_index=True, return_inverse=True)
            rank = np.empty(first_idx.size, dtype=np.int64)
            rank[np.argsort(first_idx)] = np.arange(first_idx.size)
            labels[core] = rank[inv]
        return labels
