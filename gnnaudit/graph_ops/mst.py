"""Exact minimum spanning trees under the mutual-reachability distance.

.. math::

    cd(x) = \\|x - x_{(minPts)}\\| \\quad (x \\text{ itself is its own first neighbour}), \\qquad
    d_m(x, y) = \\max\\big(cd(x), cd(y), \\|x - y\\|\\big)

Two exact methods return a minimum spanning tree (MST) of the complete graph weighted by
:math:`d_m`:

* :func:`mst_dense` builds the full :math:`n \\times n` matrix of :math:`d_m` and hands it to
  :func:`scipy.sparse.csgraph.minimum_spanning_tree` (``O(n^2)`` memory; small ``n``).
* :func:`mst_boruvka` is Boruvka's algorithm where each component's cheapest outgoing
  :math:`d_m` edge is found with KD-tree neighbour queries (``O(n * k_max)`` memory).

Correctness of the Boruvka search. For a point ``p`` whose ``k`` nearest neighbours (by
Euclidean distance, ``d_k`` the largest of them) have been inspected, every point ``q`` not
among them has :math:`\\|p - q\\| \\ge d_k` and therefore
:math:`d_m(p, q) \\ge lb(p) := \\max(cd(p), d_k)`. If the cheapest foreign (other component)
edge among the inspected neighbours is :math:`\\le lb(p)` it is the cheapest foreign edge of
``p``. A point whose bound is already :math:`\\ge` the best edge its component has found
cannot improve it and is skipped. Every other point is re-queried with a larger ``k``; when a
few large components remain (the late rounds, when interior points would need huge ``k``), the
query runs on a KD-tree of the points *outside* the component, where every neighbour is
foreign. Ties: each component picks one minimum-weight outgoing edge; the picked edges form a
graph whose cycles consist of equal-weight edges only (weights cannot increase around a cycle
of "cheapest edge" choices), and a spanning forest of that graph is added, which is the same
forest Boruvka yields under a consistent tie-breaking order. Tests check the total weight and
the resulting dc-distances against the dense method, duplicates and ties included.

Rounds with many unresolved points (late rounds: large components whose interior points have
no foreign neighbour among their cached ``k``) search *cell pairs* instead of growing ``k``
(:func:`_cell_pair_search`): faiss k-means cells of the points (centre, exact radius, smallest
core distance) bound :math:`d_m(p, q) \\ge \\max(cd(p), m_j, \\|p - c_j\\| - R_j)` for every
``q`` of cell ``j``. Per component, the cell pairs with the smallest cell-level bound are
scanned first (real edges: an upper bound on the component's cheapest edge); the other pairs
follow in increasing bound, each point gets its own bound per cell, and only the (point,
cell) pairs below the component's best edge are scanned (exact, difference-based distances).
Every lower bound a point gets in a round stays valid in later rounds (its foreign set only
shrinks) and is carried over. Cheap pre-filter: :math:`\\|p - c_b\\| \\ge \\|c_a - c_b\\| -
\\|p - c_a\\|`, so of each source only the points far enough from their own centre get a
per-cell bound (a suffix of the source sorted by that distance). On 100,000 10-D points (20
blobs) the Boruvka step went from 9.4 s (per-point bounds against every cell, then anchors) to
about 3 s, and the whole MST is 2.8x faster than ``hdbscan``'s (``benchmarks/bench_mst.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree
from scipy.spatial import cKDTree
from scipy.spatial.distance import cdist, pdist, squareform

from gnnaudit._validation import check_array
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import rowwise_distances
from gnnaudit.graph_ops.segments import expand_ranges

__all__ = [
    "BORUVKA_KNN",
    "MSTEdges",
    "kd_tree",
    "knn_query",
    "core_distances",
    "mst_dense",
    "mst_boruvka",
    "mutual_reachability",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MSTEdges:
    """The ``n - 1`` edges of a spanning tree: endpoints ``u``, ``v`` and weights ``weight``."""

    u: np.ndarray
    v: np.ndarray
    weight: np.ndarray

    @property
    def total_weight(self) -> float:
        """Sum of the edge weights (the MST's cost)."""
        return float(self.weight.sum())


@overload
def _points(X: Any, core: None = None) -> tuple[np.ndarray, None]: ...
@overload
def _points(X: Any, core: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
def _points(X: Any, core: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``X`` as a finite float64 (n, d) array and ``core`` as finite (n,) core distances."""
    X = check_array("X", X)
    if core is None:
        return X, None
    core = check_array("core", core, ndim=1)
    if core.size != X.shape[0]:
        raise InvalidInputError(
            f"core must have {X.shape[0]} entries (one per row of X), got {core.size}"
        )
    return X, core


#: neighbours cached per point for Boruvka's first rounds (``k = max(minPts, BORUVKA_KNN)``);
#: see ``benchmarks/bench_mst.py`` for the measurement behind the value
BORUVKA_KNN = 8

#: leaf size of the KD-trees (scipy's cKDTree): 64 was the fastest of 16/32/64/128 for the
#: k-NN of 100,000 10-D points, 1.4x faster than 16 (``benchmarks/bench_mst.py``)
LEAF_SIZE = 64


def kd_tree(X: np.ndarray) -> cKDTree:
    """The KD-tree every neighbour query here runs on (scipy's compiled ``cKDTree``)."""
    return cKDTree(X, leafsize=LEAF_SIZE)


def _query(tree: cKDTree, pts: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n, k)`` distances and int64 indices of the ``k`` nearest tree points (ascending)."""
    d, i = tree.query(pts, k=k)
    if k == 1:
        d, i = d[:, None], i[:, None]
    return d, i.astype(np.int64, copy=False)


def knn_query(
    X: np.ndarray, k: int, *, tree: cKDTree | None = None, chunk: int = 65536
) -> tuple[np.ndarray, np.ndarray]:
    """Distances and indices (ascending) of every point's ``k`` nearest neighbours, itself
    included, via a KD-tree of ``X`` (``tree``, else :func:`kd_tree`); memory ``O(n k)``.

    The points are queried in the tree's own order (``tree.indices``: neighbours in space are
    neighbours in memory), which made the query 1.2-1.4x faster than the input order on
    100,000 10-D points, and the rows are put back in input order.
    """
    X, _ = _points(X)
    tree = tree if tree is not None else kd_tree(X)
    n = X.shape[0]
    k = min(k, n)
    nd = np.empty((n, k))
    ni = np.empty((n, k), dtype=np.int64)
    walk = np.asarray(tree.indices, dtype=np.int64)
    for s in range(0, n, chunk):
        rows = walk[s : s + chunk]
        nd[rows], ni[rows] = _query(tree, X[rows], k)
    return nd, ni


def core_distances(
    X: np.ndarray, min_pts: int, *, tree: cKDTree | None = None, chunk: int = 65536
) -> np.ndarray:
    """Distance of every point to its ``min_pts``-th nearest neighbour, itself counted first.

    ``min_pts = 1`` gives zeros (then :math:`d_m` is the Euclidean distance). Memory
    ``O(chunk * min_pts)``.
    """
    X, _ = _points(X)
    n = X.shape[0]
    if min_pts <= 1:
        return np.zeros(n)
    return knn_query(X, min(min_pts, n), tree=tree, chunk=chunk)[0][:, -1].copy()


def mutual_reachability(X: np.ndarray, core: np.ndarray) -> np.ndarray:
    """Dense :math:`n \\times n` mutual-reachability matrix (diagonal 0). ``O(n^2)`` memory.

    Distances come from coordinate differences (:func:`scipy.spatial.distance.pdist`), so the
    matrix does not depend on where the data sit (no :math:`\\|x\\|^2 - 2xy + \\|y\\|^2`
    cancellation far from the origin).
    """
    X, core = _points(X, core)
    d = squareform(pdist(X))
    np.maximum(d, core[:, None], out=d)
    np.maximum(d, core[None, :], out=d)
    np.fill_diagonal(d, 0.0)
    return d


def _exact_pair_distance(X: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return rowwise_distances(X[a], X[b], "euclidean")


def mst_dense(X: np.ndarray, core: np.ndarray) -> MSTEdges:
    """Exact MST of the complete :math:`d_m` graph via scipy (``O(n^2)`` time and memory).

    The weights handed to scipy are the ranks ``1..n(n-1)/2`` of the :math:`d_m` values: the
    same order (hence the same MSTs) with no zero or sub-tolerance weight that scipy would read
    as a missing edge (duplicates with zero core distance). Distances come from coordinate
    differences (``pdist``), so the tree does not depend on a translation of ``X``.
    """
    X, core = _points(X, core)
    n = X.shape[0]
    if n == 1:
        e = np.empty(0, dtype=np.int64)
        return MSTEdges(e, e.copy(), np.empty(0))
    iu, ju = np.triu_indices(n, k=1)
    w = np.maximum(pdist(X), np.maximum(core[iu], core[ju]))  # condensed d_m, differences
    rank = np.empty(w.size)
    rank[np.argsort(w, kind="stable")] = np.arange(1, w.size + 1, dtype=float)
    t = minimum_spanning_tree(coo_matrix((rank, (iu, ju)), shape=(n, n)).tocsr()).tocoo()
    u, v = t.row.astype(np.int64), t.col.astype(np.int64)
    # recompute the weights exactly from the points (the Gram trick above loses digits)
    w = np.maximum(_exact_pair_distance(X, u, v), np.maximum(core[u], core[v]))
    return MSTEdges(u, v, w)


def _forest_of_choices(
    comp: np.ndarray, cu: np.ndarray, cv: np.ndarray, cw: np.ndarray, n_comp: int
) -> np.ndarray:
    """Indices of a cycle-free subset of the chosen edges (one per component).

    The chosen edges, viewed on the component graph, are reduced to a minimum spanning forest
    (ranks as weights, so zero weights and ties are safe).
    """
    a, b = comp[cu], comp[cv]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    order = np.lexsort((cw, hi, lo))
    key = lo[order] * n_comp + hi[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    keep = order[first]  # cheapest edge per component pair
    rank = np.empty(keep.size)
    rank[np.argsort(cw[keep], kind="stable")] = np.arange(1, keep.size + 1, dtype=float)
    g = coo_matrix((rank, (lo[keep], hi[keep])), shape=(n_comp, n_comp)).tocsr()
    f = minimum_spanning_tree(g).tocoo()
    # map chosen forest edges back to the point edges through their (unique) ranks
    sel = np.rint(f.data).astype(np.int64) - 1
    by_rank = keep[np.argsort(cw[keep], kind="stable")]
    return by_rank[sel]


def mst_boruvka(
    X: np.ndarray,
    core: np.ndarray,
    *,
    k_init: int = BORUVKA_KNN,
    max_complement_trees: int = 16,
    k_max: int = 256,
    chunk: int = 16384,
    n_anchors: int = 256,
    tree: cKDTree | None = None,
    knn: tuple[np.ndarray, np.ndarray] | None = None,
    cell_prune: bool = True,
    n_cells: int = 1024,
) -> MSTEdges:
    """Exact MST of the :math:`d_m` graph by Boruvka with KD-tree neighbour queries.

    Memory ``O(n * k)`` for the cached neighbour lists (``k = max(k_init, minPts)``) plus
    ``O(chunk * k_max)`` for re-queries; time ``O(n log^2 n)`` on well-behaved data (at most
    ``log2 n`` rounds of vectorised work plus KD-tree queries). Points still unresolved when
    ``k`` would exceed ``k_max``, or when at most ``max_complement_trees`` components have
    unresolved points, are searched in a KD-tree of their component's complement
    (``O(n log n)`` per such component). See the module docstring for the correctness
    argument. ``tree`` (a KD-tree of ``X``) and ``knn`` (distances and indices of every point's
    ``k`` nearest neighbours, itself included, ascending) may be passed to reuse the
    core-distance query.

    Pruning (each step keeps the search exact): a component's bound is the cheapest edge
    found from *any* of its points (every found edge is a real edge); lower bounds on a
    point's foreign edges carry over to later rounds (its foreign set only shrinks); when
    more than ``4 * n_anchors`` points are unresolved in a round (``cell_prune``), the
    component's cheapest edges are found by the cell-pair search over ``n_cells`` (at most
    n / 40) faiss k-means cells (:func:`_cell_pair_search`). ``n_anchors`` also sizes the
    anchors of the complement search (:func:`_complement_search`).
    """
    X, core = _points(X, core)
    n = X.shape[0]
    if n == 1:
        e = np.empty(0, dtype=np.int64)
        return MSTEdges(e, e.copy(), np.empty(0))
    tree = tree if tree is not None else kd_tree(X)
    if knn is not None:
        nd, ni = knn
        k0 = nd.shape[1]
    else:
        k0 = int(min(n, max(k_init, 2)))
        nd, ni = knn_query(X, k0, tree=tree)  # column 0 may or may not be the point itself
    nbr_w = np.maximum(nd, np.maximum(core[:, None], core[ni]))
    lb_cached = np.maximum(core, nd[:, -1]) if k0 < n else np.full(n, np.inf)

    comp = np.arange(n)
    n_comp = n
    # nf_low[p] <= d_m of every edge from p to another component; components only grow, so a
    # bound proven in one round (an anchor bound, a query whose k neighbours were all inside)
    # holds in every later round
    nf_low = np.zeros(n)
    cells: _Cells | None = None  # built (faiss k-means) the first time a round needs it
    eu: list[np.ndarray] = []
    ev: list[np.ndarray] = []
    rounds = 0
    while n_comp > 1:
        rounds += 1
        # cheapest foreign edge among the cached neighbours of every point
        foreign = comp[ni] != comp[:, None]
        w = np.where(foreign, nbr_w, np.inf)
        j = np.argmin(w, axis=1)
        best_w = w[np.arange(n), j]
        best_v = ni[np.arange(n), j]
        lb = np.maximum(lb_cached, nf_low)
        resolved = best_w <= lb
        # every found edge is a real edge: the smallest bounds its component's cheapest edge
        comp_best = np.full(n_comp, np.inf)
        np.minimum.at(comp_best, comp, best_w)
        pending = ~resolved & (lb < comp_best[comp])
        if cell_prune and np.count_nonzero(pending) > 4 * n_anchors:
            if cells is None:
                cells = _make_cells(X, core, max(2, min(n_cells, n // 40)))
            low = np.minimum(best_w, lb)
            _cell_pair_search(X, core, comp, pending, low, comp_best, best_w, best_v, cells)
            pending[:] = False
        k = k0
        while pending.any():
            idx = np.flatnonzero(pending)
            pcomps = np.unique(comp[idx])
            if pcomps.size <= max_complement_trees or 2 * k > k_max or k >= n:
                for c in pcomps:
                    q = idx[comp[idx] == c]
                    outside = np.flatnonzero(comp != c)
                    _complement_search(X, core, q, outside, comp_best[c], best_w, best_v, n_anchors)
                    comp_best[c] = min(comp_best[c], best_w[q].min())
                pending[:] = False
                continue
            k = min(n, 2 * k)
            for s in range(0, idx.size, chunk):  # memory O(chunk * k)
                sub = idx[s : s + chunk]
                d2, i2 = _query(tree, X[sub], k)
                w2 = np.maximum(d2, np.maximum(core[sub, None], core[i2]))
                w2 = np.where(comp[i2] != comp[sub, None], w2, np.inf)
                j2 = np.argmin(w2, axis=1)
                rows = np.arange(sub.size)
                bw = w2[rows, j2]
                better = bw < best_w[sub]
                best_w[sub[better]] = bw[better]
                best_v[sub[better]] = i2[rows, j2][better]
                lb[sub] = np.maximum(lb[sub], np.maximum(core[sub], d2[:, -1]) if k < n else np.inf)
            res = best_w[idx] <= lb[idx]
            np.minimum.at(comp_best, comp[idx], best_w[idx])
            pending[idx] = ~res
            pending &= lb < comp_best[comp]
        # each component's chosen edge: its point with the smallest best_w
        order = np.lexsort((best_w, comp))
        first = np.ones(n, dtype=bool)
        first[1:] = comp[order][1:] != comp[order][:-1]
        chosen = order[first]
        cu, cv, cw = chosen, best_v[chosen], best_w[chosen]
        keep = _forest_of_choices(comp, cu, cv, cw, n_comp)
        eu.append(cu[keep])
        ev.append(cv[keep])
        # p's cheapest foreign edge is >= min(best found, bound on the uninspected points)
        nf_low = np.maximum(nf_low, np.minimum(best_w, np.where(np.isfinite(lb), lb, 0.0)))
        u_all, v_all = np.concatenate(eu), np.concatenate(ev)
        g = coo_matrix((np.ones(u_all.size), (u_all, v_all)), shape=(n, n))
        n_comp, comp = connected_components(g, directed=False)
        logger.debug("boruvka round %d: %d components", rounds, n_comp)
    u, v = np.concatenate(eu), np.concatenate(ev)
    w = np.maximum(_exact_pair_distance(X, u, v), np.maximum(core[u], core[v]))
    return MSTEdges(u.astype(np.int64), v.astype(np.int64), w)


@dataclass(frozen=True)
class _Cells:
    """A partition of the points into cells (faiss k-means) with exact radii."""

    label: np.ndarray  # (n,) cell of each point
    centre: np.ndarray  # (c, d) float64 centroids
    radius: np.ndarray  # (c,) largest distance of a member to its centroid (exact)
    min_core: np.ndarray  # (c,) smallest core distance of a member
    order: np.ndarray  # points sorted by cell
    starts: np.ndarray  # first slot of each cell in ``order``
    count: np.ndarray  # (c,) members per cell
    gap: np.ndarray  # (c, c) lower bound on the distance between members of two cells
    centre_dist: np.ndarray  # (c, c) distances between the centroids
    own_rank: np.ndarray  # (n,) rank of each point's distance to its centroid (ascending)
    own_sorted: np.ndarray  # (n,) those distances, sorted


def _make_cells(X: np.ndarray, core: np.ndarray, n_cells: int, seed: int = 0) -> _Cells:
    """k-means cells of ``X`` by faiss (imported lazily; float32 is enough: the radii, not the
    assignment, carry the guarantee), radii recomputed in float64 from differences."""
    import faiss

    n, d = X.shape
    xf = np.ascontiguousarray(X, dtype=np.float32)
    km = faiss.Kmeans(d, n_cells, niter=8, seed=seed, max_points_per_centroid=64)
    km.train(xf)
    _, lab = km.index.search(xf, 1)
    label = lab[:, 0].astype(np.int64)
    used, label = np.unique(label, return_inverse=True)
    n_c = used.size
    centre = np.zeros((n_c, d))
    np.add.at(centre, label, X)
    count = np.bincount(label, minlength=n_c)
    centre /= count[:, None]  # the float64 mean of the members
    dist = rowwise_distances(X, centre[label], "euclidean")
    radius = np.zeros(n_c)
    np.maximum.at(radius, label, dist)
    min_core = np.full(n_c, np.inf)
    np.minimum.at(min_core, label, core)
    order = np.argsort(label, kind="stable")
    starts = np.concatenate([[0], np.cumsum(count)[:-1]])
    # |p - q| >= |c_a - c_b| - R_a - R_b for p in cell a, q in cell b (relative margins absorb
    # the rounding of the difference-based distances)
    r_hi = radius * (1 + 1e-12)
    centre_dist = cdist(centre, centre)
    gap = centre_dist * (1 - 1e-12) - r_hi[:, None] - r_hi[None, :]
    by_dist = np.argsort(dist, kind="stable")
    own_rank = np.empty(n, dtype=np.int64)
    own_rank[by_dist] = np.arange(n)
    return _Cells(
        label,
        centre,
        radius,
        min_core,
        order,
        starts,
        count,
        gap,
        centre_dist,
        own_rank,
        dist[by_dist],
    )


def _pure_cells(comp: np.ndarray, cells: _Cells) -> np.ndarray:
    """Per cell: the component of all its members, or -1 when they span several."""
    cs = comp[cells.order]
    lo = np.minimum.reduceat(cs, cells.starts)
    hi = np.maximum.reduceat(cs, cells.starts)
    return np.where(lo == hi, lo, -1)


def _cell_pair_search(
    X: np.ndarray,
    core: np.ndarray,
    comp: np.ndarray,
    pending: np.ndarray,
    low: np.ndarray,
    comp_best: np.ndarray,
    best_w: np.ndarray,
    best_v: np.ndarray,
    cells: _Cells,
    n_first: int = 4,
    chunk_elems: int = 1 << 23,
) -> None:
    r"""Exact cheapest foreign edge of every component with ``pending`` points, by cell pairs.

    ``low[p]`` bounds every foreign edge of ``p`` from below (the smaller of its best inspected
    edge and its bound on the uninspected points). The pending points are grouped into
    *sources* ``s`` = (cell ``a``, component ``c``). A source and a cell ``b`` holding a point
    outside ``c`` (``b`` not pure in ``c``) can only be joined by edges of weight

    .. math::

        d_m(p, q) \ge LB(s, b) = \max\big(\min_{p \in s} low(p),\ m_b,\
        \|c_a - c_b\| - R_a - R_b\big)

    (``m_b`` the smallest core distance in ``b``). So the component's cheapest edge lies in a
    pair with ``LB < comp_best[c]``: each component's ``n_first`` pairs of smallest bound are
    scanned first (real edges lower ``comp_best``), then the remaining candidates in
    increasing bound, in chunks, each chunk dropping the pairs whose bound reached the
    updated ``comp_best``; before a point gets its own bound
    :math:`\max(low(p), m_b, \|p - c_b\| - R_b)`, the triangle inequality
    :math:`\|p - c_b\| \ge \|c_a - c_b\| - \|p - c_a\|` drops (with one ``searchsorted``
    per pair) the points too close to their own centre. Scanning ``(s, b)`` computes :math:`d_m` of every point of ``s`` with
    every member of ``b`` outside ``c`` (exact, difference-based distances). Boruvka needs only
    each component's minimum: the point of the cheapest edge found gets it as its
    ``best_w`` / ``best_v``; every other point keeps a real edge of its own, so ``best_w``
    stays an upper bound of the inspected edges and the carried bounds stay valid.

    Cost: ``O(sources * cells)`` bounds plus the point pairs of the scanned cell pairs (on
    well-separated data, the cells facing each other across the gaps). Memory: at most
    ``chunk_elems`` bounds, and ``chunk_elems / d`` point pairs per scanned chunk (more only
    when a single cell pair alone has more).
    """
    idx = np.flatnonzero(pending)
    if idx.size == 0:
        return
    n_c = cells.centre.shape[0]
    lab, cmp_ = cells.label[idx], comp[idx]
    # grouped by source (cell, component), each source's points by distance to their centre
    order = np.lexsort((cells.own_rank[idx], cmp_, lab))
    pts, lab, cmp_ = idx[order], lab[order], cmp_[order]
    head = np.flatnonzero(np.r_[True, (lab[1:] != lab[:-1]) | (cmp_[1:] != cmp_[:-1])])
    src_len = np.diff(np.append(head, pts.size))
    src_cell, src_comp = lab[head], cmp_[head]
    src_low = np.minimum.reduceat(low[pts], head)
    pure = _pure_cells(comp, cells)
    parts_s, parts_b, parts_lb = [], [], []
    step = max(1, chunk_elems // n_c)
    for s0 in range(0, head.size, step):
        ss = np.arange(s0, min(head.size, s0 + step))
        bound = np.maximum(cells.gap[src_cell[ss]], cells.min_core[None, :])
        np.maximum(bound, src_low[ss, None], out=bound)
        bound[pure[None, :] == src_comp[ss, None]] = np.inf
        r, b = np.nonzero(bound < comp_best[src_comp[ss]][:, None])
        parts_s.append(ss[r])
        parts_b.append(b)
        parts_lb.append(bound[r, b])
    cand_s, cand_b = np.concatenate(parts_s), np.concatenate(parts_b)
    cand_lb = np.concatenate(parts_lb)
    if cand_s.size == 0:
        return
    cand_c = src_comp[cand_s]
    pair_budget = max(1, chunk_elems // X.shape[1])
    r_hi = cells.radius * (1 + 1e-12)

    def scan(p: np.ndarray, b: np.ndarray) -> None:
        """d_m of each point ``p[i]`` with every member of cell ``b[i]`` (foreign ones)."""
        slots, rep = expand_ranges(cells.starts[b], cells.count[b])
        pp_all, q = p[rep], cells.order[slots]
        w = np.maximum(
            rowwise_distances(X[pp_all], X[q], "euclidean"), np.maximum(core[pp_all], core[q])
        )
        cp = comp[pp_all]
        w[comp[q] == cp] = np.inf
        np.minimum.at(comp_best, cp, w)
        hit = np.flatnonzero(w == comp_best[cp])
        _, first = np.unique(cp[hit], return_index=True)
        hit = hit[first]
        pp, qq, ww = pp_all[hit], q[hit], w[hit]
        better = ww < best_w[pp]
        best_w[pp[better]] = ww[better]
        best_v[pp[better]] = qq[better]

    def scan_sorted(p: np.ndarray, b: np.ndarray, bound: np.ndarray) -> None:
        """Scan (point, cell) pairs in increasing ``bound``, in budgeted chunks, dropping the
        pairs whose bound reached their component's best edge."""
        order = np.argsort(bound, kind="stable")
        p, b, bound = p[order], b[order], bound[order]
        while p.size:
            keep = bound < comp_best[comp[p]]
            p, b, bound = p[keep], b[keep], bound[keep]
            if not p.size:
                break
            take = max(1, int(np.searchsorted(np.cumsum(cells.count[b]), pair_budget, "right")))
            scan(p[:take], b[:take])
            p, b, bound = p[take:], b[take:], bound[take:]

    def expand(sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (point, cell) pairs of the (source, cell) candidates ``sel``."""
        si = cand_s[sel]
        slots, rep = expand_ranges(head[si], src_len[si])
        return pts[slots], cand_b[sel][rep]

    # 1. each component's most promising cell pairs, scanned whole: real edges bound the rest
    order = np.lexsort((cand_lb, cand_c))
    first_of, counts = np.unique(cand_c[order], return_index=True, return_counts=True)[1:]
    rank = np.arange(order.size) - np.repeat(first_of, counts)
    p1, b1 = expand(order[rank < n_first])
    scan_sorted(p1, b1, np.zeros(p1.size))
    # 2. the other cell pairs, in increasing bound: each point gets its own bound per cell,
    #    max(low(p), m_b, |p - c_b| - R_b), and only (point, cell) pairs below the
    #    component's best edge are scanned
    rest = order[rank >= n_first]
    rest = rest[np.argsort(cand_lb[rest], kind="stable")]
    logger.debug("cell pairs: %d pending points, %d candidate cell pairs", idx.size, rest.size)
    # cheap pre-filter: |p - c_b| >= |c_a - c_b| - |p - c_a|, so only the points of a source
    # farther than |c_a - c_b| - R_b - comp_best from their own centre can pass; sorted by
    # that distance, they are a suffix of the source (found by one searchsorted per pair)
    n = X.shape[0]
    key = np.repeat(np.arange(head.size), src_len) * n + cells.own_rank[pts]

    def passing(sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        si, bi = cand_s[sel], cand_b[sel]
        thr = cells.centre_dist[src_cell[si], bi] * (1 - 1e-12) - r_hi[bi] - comp_best[cand_c[sel]]
        thr = np.where(thr > 0, thr * (1 - 1e-11), -np.inf)  # margins: keep, never drop, a tie
        below = np.searchsorted(
            cells.own_sorted, thr, side="right"
        )  # distance to own centroid <= thr
        start = np.searchsorted(key, si * n + below, side="left")
        return start, head[si] + src_len[si] - start

    while rest.size:
        rest = rest[cand_lb[rest] < comp_best[cand_c[rest]]]
        if not rest.size:
            break
        start, cnt = passing(rest)
        live = cnt > 0
        rest, start, cnt = rest[live], start[live], cnt[live]
        if not rest.size:
            break
        take = max(1, int(np.searchsorted(np.cumsum(cnt), pair_budget, "right")))
        sel, start, cnt = rest[:take], start[:take], cnt[:take]
        rest = rest[take:]
        slots, rep = expand_ranges(start, cnt)
        p2, b2 = pts[slots], cand_b[sel][rep]
        d = rowwise_distances(X[p2], cells.centre[b2], "euclidean") * (1 - 1e-12)
        bound = np.maximum(np.maximum(d - r_hi[b2], cells.min_core[b2]), low[p2])
        keep = bound < comp_best[comp[p2]]
        scan_sorted(p2[keep], b2[keep], bound[keep])


def _complement_search(
    X: np.ndarray,
    core: np.ndarray,
    q: np.ndarray,
    outside: np.ndarray,
    bound: float,
    best_w: np.ndarray,
    best_v: np.ndarray,
    n_anchors: int = 256,
    chunk: int = 4096,
) -> None:
    r"""Exact cheapest :math:`d_m` edge from the points ``q`` of one component to ``outside``.

    All neighbours in a KD-tree of ``outside`` are foreign, so a point's search only expands
    ``k`` while the neighbours' core distances keep its best edge above ``max(cd(p), d_k)``
    and that bound is below the component's best edge ``bound``. Large components are pruned
    first with anchors: ``a`` sampled points get their exact Euclidean distance
    :math:`\delta_a` to ``outside``; by the triangle inequality every other point ``p`` has
    :math:`d_m(p, \cdot) \ge \max(cd(p), \max_a(\delta_a - \|p - a\|))`, and points whose
    bound is not below the best edge found so far are skipped (they cannot improve it).
    Memory ``O(chunk * n_anchors)``. Updates ``best_w`` / ``best_v`` in place.
    """
    sub = kd_tree(X[outside])

    def exact(todo: np.ndarray, bound: float) -> float:
        m = outside.size
        k = min(m, 8)
        while todo.size:
            d, i = _query(sub, X[todo], k)
            gi = outside[i]
            w = np.maximum(d, np.maximum(core[todo, None], core[gi]))
            j = np.argmin(w, axis=1)
            bw = w[np.arange(todo.size), j]
            better = bw < best_w[todo]
            best_w[todo[better]] = bw[better]
            best_v[todo[better]] = gi[np.arange(todo.size), j][better]
            bound = min(bound, float(bw.min()))
            if k >= m:
                break
            lb = np.maximum(core[todo], d[:, -1])
            todo = todo[(bw > lb) & (lb < bound)]
            k = min(m, 4 * k)
        return bound

    if q.size <= 4 * n_anchors:
        exact(q, bound)
        return
    is_anchor = np.zeros(q.size, dtype=bool)
    is_anchor[np.linspace(0, q.size - 1, n_anchors).astype(np.int64)] = True
    anchors = q[is_anchor]
    delta = _query(sub, X[anchors], 1)[0][:, 0]
    bound = exact(anchors, bound)
    rest = q[~is_anchor]
    keep = np.zeros(rest.size, dtype=bool)
    XA = X[anchors]
    delta_low = delta * (1 - 1e-12)  # distances from differences are exact to a few ulps:
    for s in range(0, rest.size, chunk):  # relative margins make the bound safe at any offset
        dist = cdist(X[rest[s : s + chunk]], XA) * (1 + 1e-12)
        lb = np.maximum(core[rest[s : s + chunk]], (delta_low[None, :] - dist).max(axis=1))
        keep[s : s + chunk] = lb < bound
    exact(rest[keep], bound)
