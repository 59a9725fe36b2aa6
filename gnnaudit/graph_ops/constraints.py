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

    Cost: time and memory proportional to the number ``m`` of pairs (``O(m log m)``), not to
    ``n``: only the points that appear in a must-link pair enter the component search, every
    other point is its own component. Only :attr:`components` (an array over all ``n`` points)
    is ``O(n)``, computed on first access; :meth:`component_of` answers for given points.

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
        components: ``(n,)`` ML component of every point, numbered ``0 ..`` in the order of
            each component's smallest point (scipy's numbering).
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
        # the ML graph over the points that appear in a must-link pair only (O(m), not O(n))
        self._nodes = np.unique(ml)
        local = np.searchsorted(self._nodes, ml)
        size = self._nodes.size
        self._local_graph = sp.csr_matrix(
            (np.ones(len(ml)), (local[:, 0], local[:, 1])), shape=(size, size)
        )
        n_local, lab = connected_components(self._local_graph, directed=False)
        first = np.full(n_local, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, lab, self._nodes)
        self._node_root = first[lab]  # smallest point of each node's component
        # points that are not the smallest of their component, sorted
        self._merged = np.sort(self._nodes[self._node_root != self._nodes])
        self.n_components = int(self.n - self._merged.size)
        self._components: np.ndarray | None = None
        cl = self.cannot_link
        ca, cb = self.component_of(cl[:, 0]), self.component_of(cl[:, 1])
        lo, hi = np.minimum(ca, cb), np.maximum(ca, cb)
        keep = lo != hi
        ex = np.stack([lo[keep], hi[keep]], axis=1)
        self.exclusions = np.unique(ex, axis=0).reshape(-1, 2) if len(ex) else ex.reshape(-1, 2)
        self.reason = self._find_contradiction()
        self.is_feasible = self.reason is None

    def component_of(self, points: Any) -> np.ndarray:
        """ML component ids of ``points`` (integer point ids in ``[0, n)``), as in
        :attr:`components`; ``O(len(points) log m)``."""
        p = np.asarray(points)
        if p.dtype.kind not in "iu":
            raise InvalidInputError(f"points must hold integer point ids, got dtype {p.dtype}")
        p = p.astype(np.int64)
        if p.size and (p.min() < 0 or p.max() >= self.n):
            raise InvalidInputError(
                f"points hold ids in [{p.min()}, {p.max()}] but must lie in [0, {self.n - 1}]"
            )
        pos = np.searchsorted(self._nodes, p)
        inside = pos < self._nodes.size
        inside[inside] = self._nodes[pos[inside]] == p[inside]
        root = p.copy()
        root[inside] = self._node_root[pos[inside]]
        # components are numbered by their smallest point: count the smaller roots
        return root - np.searchsorted(self._merged, root)

    @property
    def components(self) -> np.ndarray:
        """``(n,)`` ML component of every point (``O(n)``, computed on first access)."""
        if self._components is None:
            self._components = self.component_of(np.arange(self.n, dtype=np.int64))
        return self._components

    def __repr__(self) -> str:
        return (
            f"ConstraintGraph(n={self.n}, must_link={len(self.must_link)}, "
            f"cannot_link={len(self.cannot_link)}, n_components={self.n_components}, "
            f"feasible={self.is_feasible})"
        )

    def _find_contradiction(self) -> str | None:
        ml, cl = self.must_link, self.cannot_link
        if len(ml) and len(cl):
            pairs, counts = np.unique(np.vstack([ml, cl]), axis=0, return_counts=True)
            if (counts > 1).any():  # each list is unique: a repeated pair is in both
                i, j = (int(v) for v in pairs[int(np.argmax(counts > 1))])
                return f"pair ({i}, {j}) is both a must-link and a cannot-link"
        inner = self.component_of(cl[:, 0]) == self.component_of(cl[:, 1])
        if inner.any():
            i, j = (int(v) for v in cl[np.flatnonzero(inner)[0]])
            li, lj = np.searchsorted(self._nodes, [i, j])
            _, pred = shortest_path(
                self._local_graph, directed=False, unweighted=True, indices=int(li),
                return_predecessors=True,
            )  # fmt: skip
            path = [int(lj)]
            while path[-1] != li and len(path) <= self._nodes.size:
                path.append(int(pred[path[-1]]))
            chain = " - ".join(str(int(self._nodes[v])) for v in reversed(path))
            return (
                f"cannot-link ({i}, {j}) joins two points of one must-link component "
                f"(must-link chain {chain})"
            )
        return None

    def check_feasible(self) -> None:
        """Raise :class:`~gnnaudit.errors.InfeasibleError` (with the reason) if contradictory."""
        if not self.is_feasible:
            raise InfeasibleError(f"contradictory constraints: {self.reason}")
