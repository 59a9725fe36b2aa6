"""Boruvka helpers of :func:`gnnaudit.graph_ops.mst.mst_boruvka`: k-doubling re-queries of
unresolved points, the complement-tree search of large components, and the cycle-free choice
of each round's edges. See the module docstring of :mod:`gnnaudit.graph_ops.mst` for the
correctness argument.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial import cKDTree
from scipy.spatial.distance import cdist

from gnnaudit.graph_ops._knn import kd_tree, query
from gnnaudit.graph_ops._mst_round import BoruvkaOptions, RoundState

__all__ = ["forest_of_choices", "resolve_pending", "complement_search"]


def forest_of_choices(
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
    return np.asarray(by_rank[sel])


def resolve_pending(
    X: np.ndarray,
    core: np.ndarray,
    tree: cKDTree,
    state: RoundState,
    lb: np.ndarray,
    k0: int,
    opts: BoruvkaOptions,
) -> None:
    """Find the cheapest foreign edge of every ``pending`` point that can still improve its
    component's best edge: re-query with doubled ``k`` (memory ``O(chunk * k)``) until the
    found edge is below the point's bound ``lb``; when few components remain or ``k`` would
    pass ``k_max``, search a KD-tree of the component's complement
    (:func:`complement_search`). Updates ``lb`` and ``state`` (``pending``, ``comp_best``,
    ``best_w``, ``best_v``) in place; ``opts`` gives ``k_max``, ``chunk``,
    ``max_complement_trees`` and ``n_anchors``."""
    comp, pending, comp_best = state.comp, state.pending, state.comp_best
    best_w, best_v = state.best_w, state.best_v
    k_max, chunk, n_anchors = opts.k_max, opts.chunk, opts.n_anchors
    max_complement_trees = opts.max_complement_trees
    n = X.shape[0]
    k = k0
    while pending.any():
        idx = np.flatnonzero(pending)
        pcomps = np.unique(comp[idx])
        if pcomps.size <= max_complement_trees or 2 * k > k_max or k >= n:
            for c in pcomps:
                q = idx[comp[idx] == c]
                outside = np.flatnonzero(comp != c)
                complement_search(X, core, q, outside, comp_best[c], best_w, best_v, n_anchors)
                comp_best[c] = min(comp_best[c], best_w[q].min())
            pending[:] = False
            continue
        k = min(n, 2 * k)
        for s in range(0, idx.size, chunk):  # memory O(chunk * k)
            sub = idx[s : s + chunk]
            d2, i2 = query(tree, X[sub], k)
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


def complement_search(
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
            d, i = query(sub, X[todo], k)
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
    delta = query(sub, X[anchors], 1)[0][:, 0]
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
