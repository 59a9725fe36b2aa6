"""Which pairs of points the tree-clustering MaxSAT model needs clauses for (App. C, Alg. 1).

:func:`smart_pairs` is the paper's smart-pairs procedure on a
:class:`~gnnaudit.graph_ops.ConstraintGraph` and the
:class:`~gnnaudit.graph_ops.DistanceClasses` of the data: which ML / CL pairs need the
unconditional clauses (Eq. 22-26), which pairs need the conditional co-clustering (Eq. 30-31)
and separating (Eq. 27-29) clauses, and the literals it forces (:math:`\\lnot b^+_w`,
:math:`b^-_w`). It only *removes* clauses that are implied by the remaining ones, so the
feasible and optimal solutions never change. :func:`all_pairs` is the selection without it.

Alg. 1 walks over the pairs one by one with a union-find; here every phase is vectorised:

1. ML pairs in ascending order, keep the non-inner ones: a spanning forest of the ML graph
   (``scipy.sparse.csgraph.minimum_spanning_tree`` with the pair ranks as weights is exactly
   Kruskal's order).
2. CL pairs in descending order, keep the non-crossing ones: the first (longest) CL pair of
   each pair of ML components (``np.unique`` on component keys).
3. All pairs ascending from the ML components, co-clustering the non-inner ones until the first
   crossing pair: the non-inner pairs of Kruskal's run are the edges of the minimum spanning
   tree of the complete graph with the ML forest contracted; the first crossing pair is the
   first of these edges whose addition connects the two ends of a CL pair, found by a binary
   search over ``connected_components`` calls.
4. All pairs descending: stop at the first pair inside an ML component (forcing
   :math:`b^-_w`); before it keep the first pair of each pair of ML components not already
   separated by a CL pair.

Memory: O(n^2) pair arrays, like the distance classes they read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import condensed_index, pairs_from_condensed
from gnnaudit.graph_ops.constraints import ConstraintGraph
from gnnaudit.graph_ops.distance_classes import DistanceClasses

__all__ = ["SmartPairs", "all_pairs", "smart_pairs"]


@dataclass(frozen=True)
class SmartPairs:
    """Which pairs need clauses and which literals are forced (App. C, Alg. 1).

    Attributes:
        must_link: ``(m1, 2)`` ML pairs that need the unconditional co-clustering clauses
            (Eq. 25-26).
        cannot_link: ``(m2, 2)`` CL pairs that need the unconditional separating clauses
            (Eq. 22-24).
        together: ``(p1, 2)`` pairs that need the conditional co-clustering clauses (Eq. 30-31).
        together_class: ``(p1,)`` their distance class (0-based).
        apart: ``(p2, 2)`` pairs that need the conditional separating clauses (Eq. 27-29).
        apart_class: ``(p2,)`` their distance class (0-based).
        forced_not_plus: class ``w`` whose :math:`b^+_w` is forced false (so are all later
            classes, through Eq. 33), or ``None``.
        forced_minus: class ``w`` whose :math:`b^-_w` is forced true (so are all earlier
            classes, through Eq. 32), or ``None``.
    """

    must_link: np.ndarray
    cannot_link: np.ndarray
    together: np.ndarray
    together_class: np.ndarray
    apart: np.ndarray
    apart_class: np.ndarray
    forced_not_plus: int | None
    forced_minus: int | None


def all_pairs(graph: ConstraintGraph, classes: DistanceClasses) -> SmartPairs:
    """The selection without smart pairs: clauses for every constraint and every pair."""
    _check_classes(graph, classes)
    return SmartPairs(
        must_link=graph.must_link,
        cannot_link=graph.cannot_link,
        together=classes.pairs,
        together_class=classes.class_of,
        apart=classes.pairs,
        apart_class=classes.class_of,
        forced_not_plus=None,
        forced_minus=None,
    )


def _check_classes(graph: ConstraintGraph, classes: DistanceClasses) -> None:
    if not isinstance(classes, DistanceClasses):
        raise InvalidInputError(f"classes must be a DistanceClasses, got {type(classes).__name__}")
    if classes.n != graph.n:
        raise InvalidInputError(
            f"classes were built for n={classes.n} points but the graph has n={graph.n}"
        )
    graph.check_feasible()


def smart_pairs(
    graph: ConstraintGraph, classes: DistanceClasses, *, together: bool = True
) -> SmartPairs:
    """App. C, Alg. 1 (vectorised): the pairs that need clauses and the forced literals.

    The order :math:`<^*` is the ascending distance order of ``classes`` (ties by pdist
    index). ``together=False`` skips the conditional co-clustering phase (lines 12-20),
    which the MD objective does not need. Raises
    :class:`~gnnaudit.errors.InfeasibleError` for contradictory constraints (line 8).
    """
    _check_classes(graph, classes)
    n, P = graph.n, len(classes.order)
    rank = np.empty(P, dtype=np.int64)
    rank[classes.order] = np.arange(P, dtype=np.int64)
    comp = graph.components

    # lines 1-5: ML pairs ascending, keep the non-inner ones (a Kruskal spanning forest)
    ml = graph.must_link
    ml_rank = rank[condensed_index(n, ml[:, 0], ml[:, 1])] if len(ml) else np.zeros(0, int)
    if len(ml):
        forest = minimum_spanning_tree(
            sp.csr_matrix((ml_rank + 1.0, (ml[:, 0], ml[:, 1])), shape=(n, n))
        ).tocoo()
        ml_keep = np.sort(np.stack([forest.row, forest.col], axis=1), axis=1)
        ml_keep = ml_keep[np.argsort(forest.data, kind="stable")].astype(np.int64)
    else:
        ml_keep = ml

    # lines 6-11: CL pairs descending, keep the first pair of each pair of components
    cl = graph.cannot_link
    if len(cl):
        cl_rank = rank[condensed_index(n, cl[:, 0], cl[:, 1])]
        desc = np.argsort(-cl_rank, kind="stable")
        ca, cb = comp[cl[desc, 0]], comp[cl[desc, 1]]
        keys = np.minimum(ca, cb) * n + np.maximum(ca, cb)
        _, first = np.unique(keys, return_index=True)
        cl_keep = cl[desc[np.sort(first)]]
        excluded_keys = np.unique(keys)
    else:
        cl_keep = cl
        excluded_keys = np.zeros(0, dtype=np.int64)

    # lines 12-20: conditional co-clustering
    empty = np.zeros((0, 2), dtype=classes.pairs.dtype)
    if together:
        tog, tog_cls, forced_not_plus = _together(graph, classes, rank)
    else:
        tog, tog_cls, forced_not_plus = empty, np.zeros(0, np.int64), None

    # lines 21-29: conditional separation, all pairs descending from the ML components
    pa, pb = classes.pairs[::-1, 0], classes.pairs[::-1, 1]
    ca, cb = comp[pa], comp[pb]
    inner = ca == cb
    forced_minus = None
    stop = P
    if inner.any():
        stop = int(np.argmax(inner))
        forced_minus = int(classes.class_of[P - 1 - stop])
    keys = np.minimum(ca[:stop], cb[:stop]) * n + np.maximum(ca[:stop], cb[:stop])
    ukeys, first = np.unique(keys, return_index=True)
    first = first[~np.isin(ukeys, excluded_keys)]
    pos = P - 1 - np.sort(first)  # sorted positions, descending distance
    return SmartPairs(
        must_link=ml_keep,
        cannot_link=cl_keep,
        together=tog,
        together_class=tog_cls,
        apart=classes.pairs[pos],
        apart_class=classes.class_of[pos],
        forced_not_plus=forced_not_plus,
        forced_minus=forced_minus,
    )


def _together(
    graph: ConstraintGraph, classes: DistanceClasses, rank: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int | None]:
    """Lines 12-20: Kruskal over all pairs from the ML components until the first crossing
    pair. Returns the co-clustering pairs, their classes and the forced :math:`b^+` class."""
    n, P = graph.n, len(classes.order)
    ml = graph.must_link
    # weights: pair rank + 1 (distinct, >= 1); ML pairs 0.5 so Kruskal starts from the ML
    # components. scipy stores no explicit zeros, hence the offsets.
    w = rank.astype(np.float64) + 1.0
    if len(ml):
        w[condensed_index(n, ml[:, 0], ml[:, 1])] = 0.5
    i, j = pairs_from_condensed(n, np.arange(P, dtype=np.int64))
    mst = minimum_spanning_tree(sp.csr_matrix((w, (i, j)), shape=(n, n))).tocoo()
    del w, i, j
    regular = mst.data >= 1.0
    reg_rank = (mst.data[regular] - 1.0).astype(np.int64)
    by_rank = np.argsort(reg_rank, kind="stable")
    reg_rank = reg_rank[by_rank]
    # sorted position == rank, so the pair and its class come straight from `classes`
    edges = classes.pairs[reg_rank]
    edge_cls = classes.class_of[reg_rank]
    cl = graph.cannot_link
    if not len(cl):
        return edges, edge_cls, None
    ml_forest_r = mst.row[~regular]
    ml_forest_c = mst.col[~regular]

    def connects_cl(k: int) -> bool:
        """Do the ML forest and the first k regular MST edges connect a CL pair?"""
        r = np.r_[ml_forest_r, edges[:k, 0]]
        c = np.r_[ml_forest_c, edges[:k, 1]]
        g = sp.csr_matrix((np.ones(len(r)), (r, c)), shape=(n, n))
        _, lab = connected_components(g, directed=False)
        return bool(np.any(lab[cl[:, 0]] == lab[cl[:, 1]]))

    lo, hi = 0, len(edges)  # connects_cl(0) is False (feasible), connects_cl(all) True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if connects_cl(mid):
            hi = mid
        else:
            lo = mid
    # the hi-th edge (index hi - 1) is the first crossing pair
    return edges[: hi - 1], edge_cls[: hi - 1], int(edge_cls[hi - 1])
