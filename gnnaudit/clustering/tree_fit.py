"""The solve pipeline behind :meth:`TreeClustering.fit`: encode, warm-start, solve, and turn the
outcome -- a MaxSAT model, a proof, or the greedy fallback -- into the fitted attributes.

Every step keeps the deadline: the encoding steps cannot be interrupted, so a step predicted
not to finish before it is not started; the SAT / MaxSAT searches are interrupted or killed at
it. Whatever stops the search, the greedy tree of :mod:`~gnnaudit.clustering.tree_warm` is in
hand, so a fit without a proof of infeasibility always returns a tree.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from gnnaudit.clustering.tree_diagnosis import Infeasibility, diagnose_depth
from gnnaudit.clustering.tree_encoding import SoftPairs, TreeEncoding, build_encoding
from gnnaudit.clustering.tree_inputs import UNIT, lazy_split
from gnnaudit.clustering.tree_model import (
    ClusteringTree,
    diameter_and_split,
    single_leaf,
    tree_from_splits,
)
from gnnaudit.clustering.tree_pairs import SmartPairs, all_pairs, smart_pairs
from gnnaudit.clustering.tree_search import SOLVERS
from gnnaudit.clustering.tree_warm import GreedyTree, warm_values
from gnnaudit.graph_ops.constraints import ConstraintGraph
from gnnaudit.graph_ops.distance_classes import DistanceClasses, distance_classes

__all__ = ["TreeFitSteps", "warn_infeasible"]

logger = logging.getLogger(__name__)


def _no_pairs(classes: Any) -> SmartPairs:
    """No objective pair clauses (the feasibility model of the depth diagnosis)."""
    e2, e1 = np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
    return SmartPairs(e2, e2, e2, e1, e2, e1, None, None)


def warn_infeasible(why: Any) -> None:
    """A ``UserWarning`` for a fit that proved no clustering exists (``status_ ==
    "infeasible"``, ``labels_`` None): the diagnosis' message with its remedies, so the first
    sign is not a ``None``."""
    warnings.warn(
        f"TreeClustering: no clustering exists (status_='infeasible', labels_ is None): "
        f"{why.message} (details in infeasibility_)",
        UserWarning,
        stacklevel=4,
    )


def _fits(deadline: float | None, seconds: float) -> bool:
    """Can a step predicted to take ``seconds`` still finish before the deadline? (With a 1.5x
    margin: timings on a shared machine vary.)"""
    return deadline is None or time.perf_counter() + 1.5 * seconds < deadline


def estimate_classes(Xs: np.ndarray, eps: float) -> float:
    """Predicted seconds of :func:`distance_classes` on ``Xs``: time it on a sample of at most
    600 rows and scale by :math:`P \\log P`."""
    n = len(Xs)
    m = min(n, 600)
    t = time.perf_counter()
    distance_classes(Xs[:: max(1, n // m)][:m], eps)
    dt = time.perf_counter() - t
    P, Pm = n * (n - 1) / 2, m * (m - 1) / 2
    return float(dt * (P / Pm) * (np.log2(P + 2) / np.log2(Pm + 2)))


class TreeFitSteps:
    """The steps of ``fit`` after validation (a mixin of :class:`TreeClustering`: each step
    reads the estimator's parameters and sets only trailing-underscore attributes)."""

    objective: str
    epsilon: float
    smart_pairs: bool
    tree: bool
    solver: str
    sat_solver: str
    max_pairs: int | None
    constraint_weight: Any
    labels_: np.ndarray | None
    status_: str | None
    infeasibility_: Infeasibility | None
    tree_: ClusteringTree | None
    max_diameter_: float | None
    min_split_: float | None
    lambda_minus_: int | None
    lambda_plus_: int | None
    cost_: int | None
    bound_: int | None
    solver_used_: str | None
    timings_: dict[str, float]
    clause_counts_: dict[str, int]
    build_time_: float
    solve_time_: float
    fit_time_: float

    def _encode_and_solve(
        self, X: np.ndarray, Xs: np.ndarray, hard_graph: ConstraintGraph,
        soft: tuple[np.ndarray, ...] | None, warm: GreedyTree | None,
        sizes: tuple[int, int, int], deadline: float | None, t_start: float,
    ) -> None:  # fmt: skip
        """Distance classes, pairs, encoding (each only if predicted to finish before the
        deadline), the warm start, the search, and the result."""
        k, depth, k_min = sizes
        t0 = time.perf_counter()
        pareto = self.objective == "md-ms"
        eps = float(self.epsilon)
        if not _fits(deadline, estimate_classes(Xs, eps) if deadline is not None else 0.0):
            return self._finish_greedy(warm, X, Xs, None, None, None, t_start)
        classes = distance_classes(Xs, eps)
        t_classes = time.perf_counter() - t0
        self.n_distance_classes_ = classes.n_classes
        if not _fits(deadline, (2.0 if self.smart_pairs else 0.5) * t_classes):
            return self._finish_greedy(warm, X, Xs, None, None, classes, t_start)
        pairs = (
            smart_pairs(hard_graph, classes, together=pareto)
            if self.smart_pairs
            else all_pairs(hard_graph, classes)
        )
        pairs, max_apart = lazy_split(pairs, self.max_pairs)
        t_pairs = time.perf_counter() - t0 - t_classes
        n_tree = (2**depth - 1) * X.shape[1] * len(X) if self.tree else 0
        n_pairs = len(pairs.apart) if max_apart is None else max_apart
        if not _fits(deadline, 0.5 * t_classes + 1e-6 * (n_tree + 3 * k * n_pairs)):
            return self._finish_greedy(warm, X, Xs, None, None, classes, t_start)

        def build(soft_pairs: SoftPairs, **kw: Any) -> TreeEncoding:
            return build_encoding(
                Xs, classes, kw.pop("pairs", pairs), n_clusters=k, min_clusters=k_min,
                depth=depth, objective=self.objective, tree=bool(self.tree), soft=soft_pairs,
                **kw,
            )  # fmt: skip

        def diagnose(core_deadline: float | None) -> Infeasibility:
            """The depth diagnosis: the constraints as soft pairs, no objective clauses."""
            return diagnose_depth(lambda a, b: build(SoftPairs(a, b), pairs=_no_pairs(classes)),
                                  hard_graph, depth, core_deadline)  # fmt: skip

        s_ml, s_cl, w_ml, w_cl = soft if soft is not None else (None,) * 4
        enc = build(SoftPairs(s_ml, s_cl, w_ml, w_cl, UNIT if soft else 1), max_apart=max_apart)
        self.build_time_ = time.perf_counter() - t0
        self.timings_.update({"distance classes": t_classes, "pairs": t_pairs,
                              "encoding": self.build_time_ - t_classes - t_pairs})  # fmt: skip
        self.n_vars_, self.n_clauses_ = enc.n_vars, enc.n_clauses
        self.clause_counts_ = dict(enc.counts)
        logger.info(
            "TreeClustering: %d vars, %d clauses, %d distance classes, %d lazy pairs, built in "
            "%.3fs", enc.n_vars, enc.n_clauses, classes.n_classes, len(enc.lazy_pairs),
            self.build_time_,
        )  # fmt: skip
        warm_vals = None
        if warm is not None:  # the greedy tree as the oracles' preferred phases
            warm_vals = warm_values(enc, warm, Xs, classes)
            ids = np.arange(1, enc.n_vars + 1)
            enc.phases = np.where(warm_vals[1:], ids, -ids).tolist()
        if not _fits(deadline, 0.3 * self.build_time_):  # loading the SAT oracle
            return self._finish_greedy(warm, X, Xs, enc, warm_vals, classes, t_start)
        self._search(enc, diagnose, classes, warm, warm_vals, X, Xs, deadline, t_start)

    def _search(
        self, enc: TreeEncoding, diagnose: Callable[[float | None], Infeasibility],
        classes: DistanceClasses, warm: GreedyTree | None, warm_vals: np.ndarray | None,
        X: np.ndarray, Xs: np.ndarray, deadline: float | None, t_start: float,
    ) -> None:  # fmt: skip
        """Run the chosen search and keep its model, its proof (``diagnose(deadline)`` names
        the cause), or the greedy tree."""
        soft = self.constraint_weight is not None
        res = SOLVERS[self.solver](enc, deadline, self.sat_solver)
        self.solve_time_ = res.time
        self.timings_["solve"] = res.time
        self.solver_used_ = res.solver
        self.bound_ = res.bound
        self.n_lazy_pairs_ = enc.lazy_added
        greedy_ok = warm is not None and warm_vals is not None and (soft or warm.broken == 0)
        if res.values is not None:
            if (
                greedy_ok
                and warm_vals is not None
                and res.status != "optimal"
                and enc.cost(warm_vals) < (res.cost or 0)
            ):
                return self._finish_greedy(warm, X, Xs, enc, warm_vals, classes, t_start)
            self.status_ = res.status
            self.cost_ = res.cost
            return self._keep_model(res.values, enc, X, Xs, classes, t_start)
        if res.status == "infeasible" and not soft:
            # the core needs a second model: only when it fits before the deadline
            core_deadline = deadline
            if not _fits(deadline, 1.5 * self.build_time_):
                core_deadline = time.perf_counter()
            why = diagnose(core_deadline)
            if not self.tree:
                why = Infeasibility(
                    "cannot-link-colouring", why.pairs,
                    (f"use n_clusters > {enc.x.shape[1] + 1}", "or remove one of the listed pairs"),
                    f"no clustering into at most {enc.x.shape[1] + 1} clusters honours the "
                    "constraints",
                )  # fmt: skip
            warn_infeasible(why)
            self.status_, self.infeasibility_ = "infeasible", why
            self.fit_time_ = time.perf_counter() - t_start
            return None
        logger.info("TreeClustering: no model from the search (%s)", res.status)
        return self._finish_greedy(warm, X, Xs, enc, warm_vals, classes, t_start)

    def _keep_model(
        self, vals: np.ndarray, enc: TreeEncoding, X: np.ndarray, Xs: np.ndarray,
        classes: DistanceClasses, t_start: float,
    ) -> None:  # fmt: skip
        """Decode a model of the encoding into ``labels_``, ``tree_`` and the objective values."""
        labels = vals[enc.x].sum(axis=1).astype(np.int64)
        self.lambda_minus_ = int(vals[enc.b_minus].sum())
        self.lambda_plus_ = int(vals[enc.b_plus].sum()) if self.objective == "md-ms" else None
        if self.tree:
            depth = int(enc.z.shape[1]).bit_length() - 1
            tree = tree_from_splits(
                np.argmax(vals[enc.a], axis=1),  # exactly one true per node (Eq. 7-8)
                vals[enc.s], vals[enc.g].sum(axis=1), np.argmax(vals[enc.z], axis=1), X, Xs,
                depth,
            )  # fmt: skip
            if not np.array_equal(tree.predict(X), labels):  # pragma: no cover - invariant
                raise RuntimeError("internal error: tree routing disagrees with the SAT labels")
            self.tree_ = tree
        self.labels_ = labels
        same = labels[classes.pairs[:, 0]] == labels[classes.pairs[:, 1]]
        self.max_diameter_ = float(classes.distances[same].max()) if same.any() else 0.0
        self.min_split_ = float(classes.distances[~same].min()) if (~same).any() else np.inf
        self.fit_time_ = time.perf_counter() - t_start

    def _finish_greedy(
        self, warm: GreedyTree | None, X: np.ndarray, Xs: np.ndarray, enc: TreeEncoding | None,
        vals: np.ndarray | None, classes: DistanceClasses | None, t_start: float,
    ) -> None:  # fmt: skip
        """The search gave no model in time: return the greedy tree. ``feasible`` when it
        honours every hard constraint (or the constraints are soft), else ``feasible_soft``
        (``violated_constraints_`` lists what it breaks); ``unknown`` only without one."""
        self.fit_time_ = time.perf_counter() - t_start
        if warm is None:
            self.status_ = "unknown"
            logger.info("TreeClustering: no tree within the time limit")
            return
        soft = self.constraint_weight is not None
        self.status_ = "feasible" if (soft or warm.broken == 0) else "feasible_soft"
        self.solver_used_ = "greedy"
        if self.tree:
            left = Xs[:, warm.feature] <= warm.threshold[None, :]
            self.tree_ = tree_from_splits(warm.feature, left, warm.leaf_cluster, warm.leaf, X,
                                          Xs, warm.depth)  # fmt: skip
        self.labels_ = warm.labels
        if enc is not None and vals is not None:
            self.cost_ = enc.cost(vals) if self.status_ == "feasible" else None
            self.lambda_minus_ = int(vals[enc.b_minus].sum())
            self.lambda_plus_ = int(vals[enc.b_plus].sum()) if len(enc.b_plus) else None
        if classes is not None:
            same = warm.labels[classes.pairs[:, 0]] == warm.labels[classes.pairs[:, 1]]
            self.max_diameter_ = float(classes.distances[same].max()) if same.any() else 0.0
            self.min_split_ = float(classes.distances[~same].min()) if (~same).any() else np.inf
        else:
            self.max_diameter_, self.min_split_ = diameter_and_split(Xs, warm.labels)
        if self.status_ == "feasible_soft":
            warnings.warn(
                f"TreeClustering: no tree honouring every hard constraint was found within the "
                f"time limit; returning the greedy tree, which breaks {warm.broken} constraint "
                "pair(s) (status_='feasible_soft', see violated_constraints_); raise time_limit "
                "or make the constraints soft (constraint_weight=...)",
                UserWarning,
                stacklevel=4,
            )
        self.fit_time_ = time.perf_counter() - t_start

    def _fit_single_cluster(self, Xs: np.ndarray, t_start: float) -> None:
        """``n_clusters=1``: every point in cluster 0 (one leaf), as KMeans(n_clusters=1)."""
        n = len(Xs)
        self.labels_ = np.zeros(n, np.int64)
        self.tree_ = single_leaf(n) if self.tree else None
        self.status_ = "optimal"
        self.solver_used_ = "none"
        self.max_diameter_, self.min_split_ = diameter_and_split(Xs, self.labels_)
        self.fit_time_ = time.perf_counter() - t_start
