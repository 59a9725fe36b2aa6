"""Quality metrics of counterfactual explanations (ExDBSCAN paper, Sec. 4 and App. A.5).

* validity: fraction of counterfactuals assigned to their target cluster;
* proximity: mean distance :math:`\\frac{1}{k}\\sum_i d(x, c_i)` (clustering metric);
* DPP diversity: :math:`\\det K` with :math:`K_{ij} = 1 / (1 + D(q_i, q_j))`, :math:`K_{ii} = 1`,
  :math:`D` the shortest-path distance between the reference cores in the core graph
  (:math:`D = \\infty`, :math:`K_{ij} = 0` across clusters);
* sparsity: number of changed features per counterfactual.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnaudit._validation import check_array
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import canonical_metric, rowwise_distances
from gnnaudit.graph_ops.core_graph import CoreGraph

__all__ = ["validity", "proximity", "dpp_diversity", "sparsity"]


def _pair(x: Any, counterfactuals: Any) -> tuple[np.ndarray, np.ndarray]:
    x = check_array("x", x, ndim=1)
    C = check_array("counterfactuals", counterfactuals, ndim=(1, 2), min_rows=0)
    C = np.atleast_2d(C)
    if C.shape[1] != x.shape[0]:
        raise InvalidInputError(
            f"counterfactuals must have {x.shape[0]} features like x, got {C.shape[1]}"
        )
    return x, C


def validity(counterfactuals: Any, target: Any, core_graph: CoreGraph) -> float:
    """Fraction of ``counterfactuals`` whose :meth:`CoreGraph.assign` equals ``target``
    (one cluster id or one per counterfactual). ``0.0`` for an empty set (a failed query)."""
    C = np.atleast_2d(check_array("counterfactuals", counterfactuals, ndim=(1, 2), min_rows=0))
    if C.shape[0] == 0:
        return 0.0
    tgt = np.broadcast_to(np.asarray(target, dtype=np.int64), (C.shape[0],))
    return float(np.mean(core_graph.assign(C) == tgt))


def proximity(x: Any, counterfactuals: Any, metric: str = "euclidean") -> float:
    """Mean distance from ``x`` to the counterfactuals (``nan`` for an empty set)."""
    x, C = _pair(x, counterfactuals)
    if C.shape[0] == 0:
        return float("nan")
    return float(rowwise_distances(x[None, :], C, canonical_metric(metric)).mean())


def dpp_diversity(distances: Any) -> float:
    """:math:`\\det(1 / (1 + D))` of a symmetric matrix of graph distances between the
    reference cores (``inf`` allowed: no path). 1.0 for a single core; higher is more diverse."""
    D = np.asarray(distances, dtype=np.float64)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise InvalidInputError(f"distances must be a square matrix, got shape {D.shape}")
    if np.isnan(D).any() or (D < 0).any():
        raise InvalidInputError("distances must be >= 0 (inf allowed), found NaN or negatives")
    if D.shape[0] == 0:
        return float("nan")
    K = 1.0 / (1.0 + D)
    np.fill_diagonal(K, 1.0)
    return float(np.linalg.det(K))


def sparsity(x: Any, counterfactuals: Any, per_counterfactual: bool = False) -> Any:
    """Number of changed features: mean over counterfactuals (or an array per counterfactual
    with ``per_counterfactual=True``)."""
    x, C = _pair(x, counterfactuals)
    counts = (C != x[None, :]).sum(axis=1)
    if per_counterfactual:
        return counts
    return float(counts.mean()) if counts.size else float("nan")
