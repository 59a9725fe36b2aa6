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
        lb = lb_cached.copy()
        # component best among points already resolved (best <= lb)
        resolved = best_w <= lb
        comp_best = np.full(n_comp, np.inf)
        np.minimum.at(comp_best, comp[resolved], best_w[resolved])
        pending = ~resolved & (lb < comp_best[comp])
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
                lb[sub] = np.maximum(core[sub], d2[:, -1]) if k < n else np.inf
            res = best_w[idx] <= lb[idx]
            np.minimum.at(comp_best, comp[idx[res]], best_w[idx[res]])
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
        u_all, v_all = np.concatenate(eu), np.concatenate(ev)
        g = coo_matrix((np.ones(u_all.size), (u_all, v_all)), shape=(n, n))
        n_comp, comp = connected_components(g, directed=False)
        logger.debug("boruvka round %d: %d components", rounds, n_comp)
    u, v = np.concatenate(eu), np.concatenate(ev)
    w = np.maximum(_exact_pair_distance(X, u, v), np.maximum(core[u], core[v]))
    return MSTEdges(u.astype(np.int64), v.astype(np.int64), w)


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
