"""Must-link / cannot-link constraint graph: components, exclusions, feasibility.

The graph side of optimal constrained clustering trees (Shati, Cohen and McIlraith, "Optimal
decision trees for interpretable clustering with constraints"): must-link (ML) pairs are
positive edges, cannot-link (CL) pairs negative edges. The connected components of the ML graph
(the union-find components of the paper) are clustered together; a CL edge between two
components makes them mutually exclusive. A CL edge inside a component (or a pair that is both
ML and CL) makes the constraints contradictory: :attr:`ConstraintGraph.is_feasible` is
``False`` and :attr:`ConstraintGraph.reason` says why.

Which pairs of points the MaxSAT model needs clauses for (App. C, Alg. 1) is a detail of the
model and lives in :mod:`gnnaudit.clustering.tree_pairs`; the distance classes of Sec. 3.1 in
:mod:`gnnaudit.graph_ops.distance_classes`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, shortest_path

from gnnaudit._validation import check_int
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops._distances import condensed_index, pairs_from_condensed

__all__ = ["ConstraintGraph", "as_pairs"]


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
