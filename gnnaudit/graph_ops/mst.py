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
no foreign neighbour among their cached ``k``) use cells instead of growing ``k``: faiss
k-means cells of the points (centre, exact radius, smallest core distance) bound
:math:`d_m(p, q) \\ge \\max(cd(p), m_j, \\|p - c_j\\| - R_j)` for every ``q`` of cell ``j``;
the points with the smallest bounds (likely ends of their component's cheapest edge) are
scanned exactly first, which gives each component a real edge as upper bound; the points
whose bound reaches it are dropped, and the rest scan only the members of the cells whose
bound is below it (exact, difference-based distances; :func:`_cell_prune`,
:func:`_cell_search`). Every lower bound a point gets in a round stays valid in later
rounds (its foreign set only shrinks) and is carried over.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree
from scipy.spatial.distance import cdist, pdist, squareform
from sklearn.neighbors import KDTree

from gnnaudit._validation import check_array
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import rowwise_distances

__all__ = [
    "MSTEdges",
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


def knn_query(
    X: np.ndarray, k: int, *, tree: KDTree | None = None, chunk: int = 65536
) -> tuple[np.ndarray, np.ndarray]:
    """Distances and indices (ascending) of every point's ``k`` nearest neighbours, itself
    included, via a KD-tree; memory ``O(n k)``."""
    X, _ = _points(X)
    tree = tree if tree is not None else KDTree(X)
    n = X.shape[0]
    k = min(k, n)
    nd = np.empty((n, k))
    ni = np.empty((n, k), dtype=np.int64)
    for s in range(0, n, chunk):
        nd[s : s + chunk], ni[s : s + chunk] = tree.query(X[s : s + chunk], k=k)
    return nd, ni


def core_distances(
    X: np.ndarray, min_pts: int, *, tree: KDTree | None = None, chunk: int = 65536
) -> np.ndarray:
    """Distance of every point to its ``min_pts``-th nearest neighbour, itself counted first.

    ``min_pts = 1`` gives zeros (then :math:`d_m` is the Euclidean distance). Memory
    ``O(chunk * min_pts)``.
    """
    X, _ = _points(X)
    n = X.shape[0]
    if min_pts <= 1:
        return np.zeros(n)
    k = min(min_pts, n)
    tree = tree if tree is not None else KDTree(X)
    out = np.empty(n)
    for s in range(0, n, chunk):
        d, _ = tree.query(X[s : s + chunk], k=k)
        out[s : s + chunk] = d[:, -1]
    return out


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
    k_init: int = 16,
    max_complement_trees: int = 16,
    k_max: int = 256,
    chunk: int = 16384,
    n_anchors: int = 256,
    leaf_size: int = 40,
    tree: KDTree | None = None,
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

    Pruning (each step keeps the search exact, see :func:`_anchor_prune`): a component's
    bound is the cheapest edge found from *any* of its points (every found edge is a real
    edge); lower bounds on a point's foreign edges carry over to later rounds (its foreign
    set only shrinks); when more than ``4 * n_anchors`` points are unresolved in a round
    (``cell_prune``), the points are bounded by ``n_cells`` (at most n / 40) k-means cells (faiss) and
    ``n_anchors`` likely boundary points get their exact cheapest edge first, which drops
    the points that cannot beat their component's best edge (:func:`_cell_prune`).
    """
    X, core = _points(X, core)
    n = X.shape[0]
    if n == 1:
        e = np.empty(0, dtype=np.int64)
        return MSTEdges(e, e.copy(), np.empty(0))
    tree = tree if tree is not None else KDTree(X, leaf_size=leaf_size)
    if knn is not None:
        nd, ni = knn
        k0 = nd.shape[1]
    else:
        k0 = int(min(n, max(k_init, 2)))
        nd, ni = tree.query(X, k=k0)  # ascending; column 0 may or may not be the point itself
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
            _cell_prune(X, core, comp, pending, comp_best, best_w, best_v, lb, cells, n_anchors)
            resolved |= best_w <= lb
            pending &= ~resolved & (lb < comp_best[comp])
            _cell_search(X, core, comp, pending, comp_best, best_w, best_v, cells)
            pending[:] = False
        k = k0
        while pending.any():
            idx = np.flatnonzero(pending)
            pcomps = np.unique(comp[idx])
            if pcomps.size <= max_complement_trees or 2 * k > k_max or k >= n:
                for c in pcomps:
                    q = idx[comp[idx] == c]
                    outside = np.flatnonzero(comp != c)
                    _complement_search(
                        X, core, q, outside, comp_best[c], best_w, best_v, leaf_size, n_anchors
                    )
                    comp_best[c] = min(comp_best[c], best_w[q].min())
                pending[:] = False
                continue
            k = min(n, 2 * k)
            for s in range(0, idx.size, chunk):  # memory O(chunk * k)
                sub = idx[s : s + chunk]
                d2, i2 = tree.query(X[sub], k=k)
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
    return _Cells(label, centre, radius, min_core, order, starts)


def _cell_prune(
    X: np.ndarray,
    core: np.ndarray,
    comp: np.ndarray,
    pending: np.ndarray,
    comp_best: np.ndarray,
    best_w: np.ndarray,
    best_v: np.ndarray,
    lb: np.ndarray,
    cells: _Cells,
    n_anchors: int,
    chunk_elems: int = 1 << 22,
) -> None:
    r"""Cell bounds and anchors for the unresolved points (updates the arrays in place).

    1. Bounds. A cell ``j`` (centre :math:`c_j`, radius :math:`R_j`, smallest core distance
       :math:`m_j` of its members) holds only points ``q`` with
       :math:`\|p - q\| \ge \|p - c_j\| - R_j`, hence
       :math:`d_m(p, q) \ge \max(cd(p), m_j, \|p - c_j\| - R_j)`. Cells whose members all
       lie in ``p``'s component hold no foreign point and are skipped, so
       :math:`lb(p) \leftarrow \max(lb(p), cd(p), \min_{j \text{ not pure}(p)}
       \max(m_j, \|p - c_j\| - R_j))` bounds every foreign edge of ``p`` (relative margins
       of ``1e-12`` absorb the rounding of the exact, difference-based distances).
    2. Anchors. In each component with pending points, the ``a`` pending points with the
       smallest bound (``n_anchors`` in all, proportionally to the pending counts, at least
       1 each) -- the likely ends of the component's cheapest edge -- are scanned against
       all points: their exact cheapest foreign edge tightens ``comp_best`` and resolves
       them. The caller then drops every point whose bound reaches its component's best.

    Time ``O((pending * cells + n_anchors * n) * d)``; memory ``chunk_elems`` float64.
    """
    idx = np.flatnonzero(pending)
    n_c = cells.centre.shape[0]
    # cells whose members all lie in one component: that component, else -1
    pure = _pure_cells(comp, cells)
    r_hi = cells.radius * (1 + 1e-12)
    step = max(1, chunk_elems // n_c)
    for s in range(0, idx.size, step):
        t = idx[s : s + step]
        d = cdist(X[t], cells.centre) * (1 - 1e-12)
        bound = np.maximum(d - r_hi[None, :], cells.min_core[None, :])
        bound[pure[None, :] == comp[t, None]] = np.inf
        lb[t] = np.maximum(lb[t], np.maximum(core[t], bound.min(axis=1)))
    # anchors: the smallest bounds of each component
    pc = comp[idx]
    order = np.lexsort((lb[idx], pc))
    comps, first, counts = np.unique(pc[order], return_index=True, return_counts=True)
    share = np.maximum(1, np.floor(n_anchors * counts / idx.size)).astype(np.int64)
    share = np.minimum(share, counts)
    rank = np.arange(idx.size) - np.repeat(first, counts)
    anchors = idx[order[rank < np.repeat(share, counts)]]
    n = X.shape[0]
    step = max(1, chunk_elems // n)
    for s in range(0, anchors.size, step):
        a = anchors[s : s + step]
        d = cdist(X[a], X)
        w = np.where(
            comp[None, :] != comp[a, None], np.maximum(d, np.maximum(core[a, None], core)), np.inf
        )
        j = np.argmin(w, axis=1)
        bw = w[np.arange(a.size), j]
        better = bw < best_w[a]
        best_w[a[better]] = bw[better]
        best_v[a[better]] = j[better]
        lb[a] = np.maximum(lb[a], bw)  # exact: the anchor is resolved
    np.minimum.at(comp_best, comp[anchors], best_w[anchors])


def _pure_cells(comp: np.ndarray, cells: _Cells) -> np.ndarray:
    """Per cell: the component of all its members, or -1 when they span several."""
    cs = comp[cells.order]
    lo = np.minimum.reduceat(cs, cells.starts)
    hi = np.maximum.reduceat(cs, cells.starts)
    return np.where(lo == hi, lo, -1)


def _cell_search(
    X: np.ndarray,
    core: np.ndarray,
    comp: np.ndarray,
    pending: np.ndarray,
    comp_best: np.ndarray,
    best_w: np.ndarray,
    best_v: np.ndarray,
    cells: _Cells,
    chunk_elems: int = 1 << 22,
) -> None:
    r"""Exact cheapest foreign edge of the ``pending`` points below their component's bound.

    Only an edge lighter than ``comp_best`` of ``p``'s component can change the component's
    choice; every foreign ``q`` with :math:`d_m(p, q) <` ``comp_best`` lies in a cell ``j`` with
    :math:`\max(cd(p), m_j, \|p - c_j\| - R_j) <` ``comp_best`` that is not pure in ``p``'s
    component (:func:`_cell_prune`), so scanning the members of those cells with exact
    distances finds it. Points with no such edge keep their (larger) best, which cannot win.
    Memory: at most ``chunk_elems`` (point, cell) bounds and about as many (point, member)
    pairs at a time (more only when one point alone has more candidate members).
    """
    idx = np.flatnonzero(pending)
    if idx.size == 0:
        return
    pure = _pure_cells(comp, cells)
    n_c = cells.centre.shape[0]
    count = np.diff(np.append(cells.starts, comp.size))
    r_hi = cells.radius * (1 + 1e-12)
    step = max(1, chunk_elems // n_c)
    for s in range(0, idx.size, step):
        t = idx[s : s + step]
        d = cdist(X[t], cells.centre) * (1 - 1e-12)
        bound = np.maximum(np.maximum(d - r_hi[None, :], cells.min_core[None, :]), core[t, None])
        bound[pure[None, :] == comp[t, None]] = np.inf
        pr, pj = np.nonzero(bound < comp_best[comp[t]][:, None])  # row-major: grouped by row
        sizes = count[pj]
        per_row = np.bincount(pr, weights=sizes, minlength=t.size)
        # groups of rows whose candidate members fit the budget
        cum = np.cumsum(per_row)
        group = (cum // max(chunk_elems, 1)).astype(np.int64)
        row_group = group[pr]
        for g in np.unique(row_group):
            sel = row_group == g
            gp, gj, gs = pr[sel], pj[sel], sizes[sel]
            total = int(gs.sum())
            if total == 0:
                continue
            rep = np.repeat(t[gp], gs)
            offs = np.arange(total) - np.repeat(np.cumsum(gs) - gs, gs)
            q = cells.order[np.repeat(cells.starts[gj], gs) + offs]
            w = np.maximum(
                rowwise_distances(X[rep], X[q], "euclidean"), np.maximum(core[rep], core[q])
            )
            w[comp[q] == comp[rep]] = np.inf
            # ``rep`` is sorted (rows in order): a segment minimum per point, then its first
            # position
            seg = np.flatnonzero(np.r_[True, rep[1:] != rep[:-1]])
            ww = np.minimum.reduceat(w, seg)
            lens = np.diff(np.append(seg, rep.size))
            at = np.flatnonzero(w == np.repeat(ww, lens))
            seg_of = np.searchsorted(seg, at, side="right") - 1
            first_at = at[np.r_[True, seg_of[1:] != seg_of[:-1]]]
            pp, qq = rep[seg], q[first_at]
            better = ww < best_w[pp]
            best_w[pp[better]] = ww[better]
            best_v[pp[better]] = qq[better]


def _complement_search(
    X: np.ndarray,
    core: np.ndarray,
    q: np.ndarray,
    outside: np.ndarray,
    bound: float,
    best_w: np.ndarray,
    best_v: np.ndarray,
    leaf_size: int,
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
    sub = KDTree(X[outside], leaf_size=leaf_size)

    def exact(todo: np.ndarray, bound: float) -> float:
        m = outside.size
        k = min(m, 8)
        while todo.size:
            d, i = sub.query(X[todo], k=k)
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
    delta = sub.query(X[anchors], k=1)[0][:, 0]
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
