"""KD-tree neighbour search and the MST edge record shared by the MST modules.

:func:`kd_tree` builds scipy's compiled ``cKDTree`` with the measured leaf size,
:func:`knn_query` returns every point's ``k`` nearest neighbours (itself included) in input
order, and :class:`MSTEdges` holds a spanning tree's edges. Public names are re-exported by
:mod:`gnnaudit.graph_ops.mst`.

Scale. A KD-tree squares coordinate differences internally, which under- or overflows for
magnitudes below about ``1e-154`` or above ``1e154``. :func:`knn_query` without a ``tree``
searches the points divided by :func:`~gnnaudit.graph_ops._distances.power_of_two_scale`
(exact) and multiplies the distances back, so every scale gives the same neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, overload

import numpy as np
from scipy.spatial import cKDTree

from gnnaudit._validation import check_array
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import power_of_two_scale

__all__ = ["BORUVKA_KNN", "LEAF_SIZE", "MSTEdges", "kd_tree", "knn_query", "query"]


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
def points(X: Any, core: None = None) -> tuple[np.ndarray, None]: ...
@overload
def points(X: Any, core: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
def points(X: Any, core: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
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


def query(tree: cKDTree, pts: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
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
    100,000 10-D points, and the rows are put back in input order. Without ``tree`` the search
    runs on ``X`` divided by a power of two (exact; scale-safe, module docstring); a given
    ``tree`` must hold the coordinates of ``X`` as passed.
    """
    X, _ = points(X)
    p = 1.0
    if tree is None:
        p = power_of_two_scale(X)
        X = X / p if p != 1.0 else X
        tree = kd_tree(X)
    n = X.shape[0]
    k = min(k, n)
    nd = np.empty((n, k))
    ni = np.empty((n, k), dtype=np.int64)
    walk = np.asarray(tree.indices, dtype=np.int64)
    for s in range(0, n, chunk):
        rows = walk[s : s + chunk]
        nd[rows], ni[rows] = query(tree, X[rows], k)
    if p != 1.0:
        nd *= p
    return nd, ni
