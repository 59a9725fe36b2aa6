"""Must-link / cannot-link constraint graph, distance classes and the smart-pairs procedure.

This module holds the graph side of optimal constrained clustering trees (Shati, Cohen and
McIlraith, "Optimal decision trees for interpretable clustering with constraints"):

* :class:`ConstraintGraph` -- must-link (ML) pairs are positive edges, cannot-link (CL) pairs
  negative edges. The connected components of the ML graph (the union-find components of
  the paper) are clustered together; a CL edge between two components makes them mutually
  exclusive. A CL edge inside a component (or a pair that is both ML and CL) makes the
  constraints contradictory: :attr:`ConstraintGraph.is_feasible` is ``False`` and
  :attr:`ConstraintGraph.reason` says why.
* :func:`distance_classes` -- all pairs sorted by Euclidean distance and greedily grouped into
  classes :math:`D_1, \\dots, D_\\mu` whose smallest and largest distances are at most
  :math:`\\epsilon` apart (Sec. 3.1). One :math:`b^-_w` / :math:`b^+_w` variable per class.
* :meth:`ConstraintGraph.smart_pairs` -- App. C, Alg. 1: which ML / CL pairs need the
  unconditional clauses (Eq. 22-26), which pairs need the conditional co-clustering
  (Eq. 30-31) and separating (Eq. 27-29) clauses, and the literals it forces
  (:math:`\\lnot b^+_w`, :math:`b^-_w`). It only *removes* clauses that are implied by the
  remaining ones, so the feasible and optimal solutions never change.

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

Memory: :func:`distance_classes` and :meth:`ConstraintGraph.smart_pairs` hold O(n^2) pair
arrays (about 40 bytes per pair: 1.6 GB for n = 9000); the model they feed is quadratic anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree, shortest_path
from scipy.spatial.distance import pdist

from gnnaudit._validation import check_array, check_float, check_int
from gnnaudit.errors import InfeasibleError, InvalidInputError

__all__ = [
    "ConstraintGraph",
    "DistanceClasses",
    "SmartPairs",
    "as_pairs",
    "condensed_index",
    "distance_classes",
    "pairs_from_condensed",
]


def condensed_index(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Index of the unordered pairs ``(i, j)`` (``i != j``) in ``scipy.spatial.distance.pdist``
    order (row-major upper triangle)."""
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    return n * lo - lo * (lo + 1) // 2 + (hi - lo - 1)


def pairs_from_condensed(n: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`condensed_index` (vectorised, exact for every n < 2**26)."""
    idx = np.asarray(idx, dtype=np.int64)
    # row i starts at s(i) = i*n - i*(i+1)/2; invert the quadratic, then fix rounding.
    b = 2 * n - 1
    i = np.floor((b - np.sqrt(np.maximum(b * b - 8.0 * idx, 0.0))) / 2).astype(np.int64)
    i = np.clip(i, 0, n - 2)
    start = i * n - i * (i + 1) // 2
    too_far = start > idx
    i[too_far] -= 1
    start = i * n - i * (i + 1) // 2
    nxt = (i + 1) * n - (i + 1) * (i + 2) // 2
    short = nxt <= idx
    i[short] += 1
    start = i * n - i * (i + 1) // 2
    j = idx - start + i + 1
    return i, j


def as_pairs(name: str, pairs: Any, n: int, *, allow_self: bool) -> np.ndarray:
    """Validate constraint pairs and return them canonical (``i < j``), unique, shape (m, 2).

    Accepts ``None``, a list of pairs or an integer array of shape (m, 2) with ids in
    ``[0, n)``. Self pairs ``(i, i)`` are dropped when ``allow_self`` (a must-link of a point
    with itself is trivially true) and rejected otherwise.
    """
    if pairs is None:
        return np.zeros((0, 2), dtype=np.int64)
    if hasattr(pairs, "detach") and hasattr(pairs, "cpu"):
        pairs = pairs.detach().cpu().numpy()
    arr = np.asarray(pairs)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise InvalidInputError(
            f"{name} must have shape (m, 2) (one pair of point indices per row), got shape "
            f"{arr.shape}"
        )
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or not np.all(arr == np.round(arr)):
            raise InvalidInputError(f"{name} must hold integer point indices, got {arr.dtype}")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise InvalidInputError(f"{name} must hold integer point indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= n:
        raise InvalidInputError(
            f"{name} holds point indices in [{lo}, {hi}] but they must lie in [0, {n - 1}]"
        )
    self_pairs = arr[:, 0] == arr[:, 1]
    if self_pairs.any():
        if not allow_self:
            k = int(np.flatnonzero(self_pairs)[0])
            raise InvalidInputError(
                f"{name} holds the self pair ({arr[k, 0]}, {arr[k, 1]}) at row {k}: a point "
                "cannot be separated from itself; remove it"
            )
        arr = arr[~self_pairs]
    arr = np.sort(arr, axis=1)
    if len(arr):
        arr = np.unique(arr, axis=0)
    return arr.reshape(-1, 2)


@dataclass(frozen=True)
class DistanceClasses:
    """All pairs of points sorted by distance and grouped into distance classes (Sec. 3.1).

    Attributes:
        n: number of points.
        epsilon: the largest span (max - min distance) allowed inside one class.
        order: ``(P,)`` condensed (``pdist``) index of the pair at each sorted position.
        pairs: ``(P, 2)`` the pairs ``(i, j)``, ``i < j``, ascending by distance (stable).
        distances: ``(P,)`` their Euclidean distances, ascending.
        class_of: ``(P,)`` the class (0-based :math:`w - 1`) of each sorted pair, non-decreasing.
        bounds: ``(mu, 2)`` the smallest and largest distance in each class.
    """

    n: int
    epsilon: float
    order: np.ndarray
    pairs: np.ndarray
    distances: np.ndarray
    class_of: np.ndarray
    bounds: np.ndarray

    @property
    def n_classes(self) -> int:
        """:math:`\\mu`, the number of distance classes."""
        return int(self.bounds.shape[0])

    def class_of_distance(self, d: float) -> int:
        """The class holding a pair at distance ``d`` (``d`` must be one of the distances)."""
        w = int(np.searchsorted(self.bounds[:, 0], d, side="right")) - 1
        return max(w, 0)


def _greedy_class_starts(ds: np.ndarray, epsilon: float) -> np.ndarray:
    """Start positions of the greedy classes of the ascending distances ``ds``."""
    gaps = np.diff(ds)
    gaps = gaps[gaps > 0]
    if epsilon == 0.0 or epsilon < (gaps.min() if gaps.size else np.inf):
        # every class holds exactly one distance value
        return np.flatnonzero(np.r_[True, ds[1:] != ds[:-1]])
    starts = []
    s, p = 0, len(ds)
    # one iteration per class (mu <= (max - min) / epsilon + 1), each a binary search
    while s < p:
        starts.append(s)
        s = int(np.searchsorted(ds, ds[s] + epsilon, side="right"))
    return np.asarray(starts, dtype=np.int64)


def distance_classes(X: Any, epsilon: float) -> DistanceClasses:
    """Sort all pairs of rows of ``X`` by Euclidean distance and group them into classes.

    The greedy procedure of Sec. 3.1: walk the pairs from the shortest to the longest distance
    and open a new class whenever the current distance exceeds the first distance of the open
    class by more than ``epsilon``. Every class :math:`D_w` then satisfies
    :math:`\\max D_w - \\min D_w \\le \\epsilon`, and classes do not overlap. With
    ``epsilon = 0`` each class holds the pairs of one distance value (exact optimisation).

    ``epsilon`` is in the units of ``X`` (TreeClustering passes features scaled to [0, 100], as
    the paper does). Time O(P log P) with P = n(n-1)/2; memory O(P).
    """
    X = check_array("X", X, ndim=2, min_rows=2)
    epsilon = check_float("epsilon", epsilon, minimum=0.0)
    n = X.shape[0]
    d = pdist(X)
    order = np.argsort(d, kind="stable")
    ds = d[order]
    i, j = pairs_from_condensed(n, order)
    idx_dtype = np.int32 if n < 2**31 else np.int64
    pairs = np.stack([i, j], axis=1).astype(idx_dtype)
    starts = _greedy_class_starts(ds, epsilon)
    class_of = np.zeros(len(ds), dtype=np.int64)
    class_of[starts[1:]] = 1
    class_of = np.cumsum(class_of)
    ends = np.r_[starts[1:], len(ds)] - 1
    bounds = np.stack([ds[starts], ds[ends]], axis=1)
    return DistanceClasses(
        n=n,
        epsilon=epsilon,
        order=order.astype(np.int64),
        pairs=pairs,
        distances=ds,
        class_of=class_of,
        bounds=bounds,
    )


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


class ConstraintGraph:
    """Must-link / cannot-link constraints over ``n`` points as a signed graph.

    Must-link pairs are positive edges; their connected components (the union-find components
    of the paper, computed with ``scipy.sparse.csgraph.connected_components``) must share a
    cluster. Cannot-link pairs are negative edges; between two components they make the
    components mutually exclusive (:attr:`exclusions`).

    Args:
        n: number of points.
        must_link: ``None``, a list of pairs or an integer array of shape (m, 2) in ``[0, n)``.
            Self pairs ``(i, i)`` are dropped; duplicates and orientation are ignored.
        cannot_link: same, but a self pair raises :class:`~gnnaudit.errors.InvalidInputError`.

    Attributes:
        n: number of points.
        must_link: canonical unique ML pairs ``(i < j)``.
        cannot_link: canonical unique CL pairs ``(i < j)``.
        n_components: number of ML components (singletons included).
        components: ``(n,)`` ML component of every point.
        exclusions: ``(e, 2)`` unique pairs of mutually exclusive components ``(a < b)``.
        is_feasible: ``False`` when a pair is both ML and CL, or a CL pair lies inside an ML
            component (the only contradictions detectable without solving; a set of CL
            components that cannot be coloured with ``k`` clusters is left to the solver).
        reason: why the constraints are infeasible, or ``None``.
    """

    def __init__(self, n: int, must_link: Any = None, cannot_link: Any = None) -> None:
        self.n = check_int("n", n, minimum=1)
        self.must_link = as_pairs("must_link", must_link, self.n, allow_self=True)
        self.cannot_link = as_pairs("cannot_link", cannot_link, self.n, allow_self=False)
        ml = self.must_link
        self._ml_graph = sp.csr_matrix(
            (np.ones(len(ml)), (ml[:, 0], ml[:, 1])), shape=(self.n, self.n)
        )
        self.n_components, comps = connected_components(self._ml_graph, directed=False)
        self.components = comps.astype(np.int64)
        cl = self.cannot_link
        ca, cb = self.components[cl[:, 0]], self.components[cl[:, 1]]
        lo, hi = np.minimum(ca, cb), np.maximum(ca, cb)
        keep = lo != hi
        ex = np.stack([lo[keep], hi[keep]], axis=1)
        self.exclusions = np.unique(ex, axis=0).reshape(-1, 2) if len(ex) else ex.reshape(-1, 2)
        self.reason = self._find_contradiction()
        self.is_feasible = self.reason is None

    def __repr__(self) -> str:
        return (
            f"ConstraintGraph(n={self.n}, must_link={len(self.must_link)}, "
            f"cannot_link={len(self.cannot_link)}, n_components={self.n_components}, "
            f"feasible={self.is_feasible})"
        )

    def _find_contradiction(self) -> str | None:
        ml, cl = self.must_link, self.cannot_link
        if len(ml) and len(cl):
            both = np.intersect1d(
                condensed_index(self.n, ml[:, 0], ml[:, 1]),
                condensed_index(self.n, cl[:, 0], cl[:, 1]),
            )
            if len(both):
                i, j = pairs_from_condensed(self.n, both[:1])
                return f"pair ({int(i[0])}, {int(j[0])}) is both a must-link and a cannot-link"
        inner = self.components[cl[:, 0]] == self.components[cl[:, 1]]
        if inner.any():
            i, j = (int(v) for v in cl[np.flatnonzero(inner)[0]])
            _, pred = shortest_path(
                self._ml_graph, directed=False, unweighted=True, indices=i,
                return_predecessors=True,
            )  # fmt: skip
            path = [j]
            while path[-1] != i and len(path) <= self.n:
                path.append(int(pred[path[-1]]))
            chain = " - ".join(str(v) for v in reversed(path))
            return (
                f"cannot-link ({i}, {j}) joins two points of one must-link component "
                f"(must-link chain {chain})"
            )
        return None

    def check_feasible(self) -> None:
        """Raise :class:`~gnnaudit.errors.InfeasibleError` (with the reason) if contradictory."""
        if not self.is_feasible:
            raise InfeasibleError(f"contradictory constraints: {self.reason}")

    # ------------------------------------------------------------------ pair selection
    def all_pairs(self, classes: DistanceClasses) -> SmartPairs:
        """The selection without smart pairs: clauses for every constraint and every pair."""
        self._check_classes(classes)
        return SmartPairs(
            must_link=self.must_link,
            cannot_link=self.cannot_link,
            together=classes.pairs,
            together_class=classes.class_of,
            apart=classes.pairs,
            apart_class=classes.class_of,
            forced_not_plus=None,
            forced_minus=None,
        )

    def _check_classes(self, classes: DistanceClasses) -> None:
        if not isinstance(classes, DistanceClasses):
            raise InvalidInputError(
                f"classes must be a DistanceClasses, got {type(classes).__name__}"
            )
        if classes.n != self.n:
            raise InvalidInputError(
                f"classes were built for n={classes.n} points but the graph has n={self.n}"
            )
        self.check_feasible()

    def smart_pairs(self, classes: DistanceClasses, *, together: bool = True) -> SmartPairs:
        """App. C, Alg. 1 (vectorised): the pairs that need clauses and the forced literals.

        The order :math:`<^*` is the ascending distance order of ``classes`` (ties by pdist
        index). ``together=False`` skips the conditional co-clustering phase (lines 12-20),
        which the MD objective does not need. Raises
        :class:`~gnnaudit.errors.InfeasibleError` for contradictory constraints (line 8).
        """
        self._check_classes(classes)
        n, P = self.n, len(classes.order)
        rank = np.empty(P, dtype=np.int64)
        rank[classes.order] = np.arange(P, dtype=np.int64)
        comp = self.components

        # lines 1-5: ML pairs ascending, keep the non-inner ones (a Kruskal spanning forest)
        ml = self.must_link
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
        cl = self.cannot_link
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
            tog, tog_cls, forced_not_plus = self._together(classes, rank, ml_rank)
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
        self, classes: DistanceClasses, rank: np.ndarray, ml_rank: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, int | None]:
        """Lines 12-20: Kruskal over all pairs from the ML components until the first crossing
        pair. Returns the co-clustering pairs, their classes and the forced :math:`b^+` class."""
        n, P = self.n, len(classes.order)
        ml = self.must_link
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
        cl = self.cannot_link
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
