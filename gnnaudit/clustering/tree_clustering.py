"""Optimal constrained clustering trees via MaxSAT (Shati, Cohen and McIlraith).

:class:`TreeClustering` finds a complete decision tree of depth ``d`` whose leaves are labelled
with clusters such that every must-link / cannot-link constraint is honoured and

* ``objective="md"``: the maximum diameter
  :math:`MD = \\max\\{\\lVert x_1 - x_2 \\rVert : \\Theta(x_1) = \\Theta(x_2)\\}` is within
  ``epsilon`` of the optimum (Problem 1), or
* ``objective="md-ms"``: (MD, MS) is within ``epsilon`` of a Pareto optimum of minimising MD
  and maximising the minimum split
  :math:`MS = \\min\\{\\lVert x_1 - x_2 \\rVert : \\Theta(x_1) \\ne \\Theta(x_2)\\}` (Problem 2).

Features are min-max scaled to [0, 100] per feature (constant features become 0), distances are
Euclidean on the scaled features, and ``epsilon``, :attr:`TreeClustering.max_diameter_` and
:attr:`TreeClustering.min_split_` are in those scaled units. Tree thresholds are reported in the
original units (and in scaled units in :attr:`ClusteringTree.threshold_scaled`).

``tree=False`` gives the paper's CC baseline: the same model without the tree (Eq. 39), i.e.
an (epsilon-)optimal constrained clustering with no interpretability requirement.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.spatial.distance import pdist
from sklearn.base import BaseEstimator, ClusterMixin

from gnnaudit._validation import check_array, check_choice, check_float, check_int
from gnnaudit.clustering._estimator_input import (
    DenseInputTagsMixin,
    EstimatorNotFittedError,
    validate_fit_input,
    validate_predict_input,
)
from gnnaudit.clustering.tree_diagnosis import (
    Infeasibility,
    diagnose_constraints,
    diagnose_depth,
)
from gnnaudit.clustering.tree_encoding import TreeEncoding, build_encoding
from gnnaudit.clustering.tree_pairs import SmartPairs, all_pairs, smart_pairs
from gnnaudit.clustering.tree_search import SOLVERS
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops.constraints import ConstraintGraph, as_pairs
from gnnaudit.graph_ops.distance_classes import distance_classes

__all__ = ["ClusteringTree", "Infeasibility", "TreeClustering"]

logger = logging.getLogger(__name__)

_STATUSES = ("optimal", "feasible", "infeasible", "unknown")

#: Objective soft clauses weigh this much; a soft constraint of weight ``w`` weighs
#: ``max(1, round(w * _UNIT))`` (MaxSAT weights are integers).
_UNIT = 100
#: With ``max_pairs=None``, a pool of conditional separating pairs up to this size is encoded
#: at once; above it the ``_LAZY_START`` longest pairs are, the rest lazily.
_ALL_PAIRS_UP_TO = 500_000
_LAZY_START = 100_000


@dataclass(frozen=True)
class ClusteringTree:
    """A complete binary clustering tree in heap order (root 0, children ``2t+1``, ``2t+2``).

    A point goes left at branch node ``t`` iff ``x[feature[t]] <= threshold[t]``. The threshold
    is the midpoint between the largest value sent left and the smallest value sent right
    (over the training points) of the chosen feature.

    Attributes:
        depth: tree depth ``d``.
        feature: ``(2^d - 1,)`` feature index of each branch node.
        threshold: ``(2^d - 1,)`` thresholds in the original feature units.
        threshold_scaled: ``(2^d - 1,)`` the same thresholds on the [0, 100] scale.
        leaf_cluster: ``(2^d,)`` cluster of each leaf (left to right).
        leaf_size: ``(2^d,)`` number of training points reaching each leaf.
    """

    depth: int
    feature: np.ndarray
    threshold: np.ndarray
    threshold_scaled: np.ndarray
    leaf_cluster: np.ndarray
    leaf_size: np.ndarray

    @property
    def n_leaves(self) -> int:
        """Number of leaves, ``2 ** depth``."""
        return 2**self.depth

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Leaf index (0 .. 2^d - 1) of every row of ``X`` (original units); one vectorised
        step per tree level."""
        X = check_array("X", X, ndim=2, min_rows=0)
        if X.shape[1] <= int(self.feature.max(initial=0)):
            raise InvalidInputError(
                f"X has {X.shape[1]} features but the tree splits on feature "
                f"{int(self.feature.max(initial=0))}"
            )
        node = np.zeros(len(X), dtype=np.int64)
        rows = np.arange(len(X))
        for _ in range(self.depth):
            go_right = X[rows, self.feature[node]] > self.threshold[node]
            node = 2 * node + 1 + go_right
        return node - (2**self.depth - 1)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Cluster of every row of ``X`` (original units)."""
        return self.leaf_cluster[self.apply(X)]

    def export_text(
        self, feature_names: list[str] | None = None, decimals: int = 3, show_empty: bool = False
    ) -> str:
        """The tree as indented text, one line per split side and per leaf.

        Split lines name the feature (``feature_names[j]``, else ``x[j]``) and the threshold;
        leaf lines give the cluster and the number of training points. Leaves no training
        point reaches, and split sides leading only to such leaves, are left out unless
        ``show_empty``.
        """
        names = feature_names
        lines: list[str] = []
        first_leaf = 2**self.depth - 1
        size = np.zeros(2 * first_leaf + 1, dtype=np.int64)  # training points per node
        size[first_leaf:] = self.leaf_size
        for t in range(first_leaf - 1, -1, -1):
            size[t] = size[2 * t + 1] + size[2 * t + 2]

        def walk(t: int, level: int) -> None:
            pad = "|   " * level + "|--- "
            if t >= first_leaf:
                leaf = t - first_leaf
                lines.append(
                    f"{pad}cluster {int(self.leaf_cluster[leaf])} (n={int(self.leaf_size[leaf])})"
                )
                return
            f = int(self.feature[t])
            name = names[f] if names is not None else f"x[{f}]"
            thr = f"{self.threshold[t]:.{decimals}f}"
            for child, op in ((2 * t + 1, "<= "), (2 * t + 2, ">  ")):
                if size[child] or show_empty:
                    lines.append(f"{pad}{name} {op}{thr}")
                    walk(child, level + 1)

        walk(0, 0)
        return "\n".join(lines)


def scale_features(X: np.ndarray, lo: np.ndarray, rng: np.ndarray) -> np.ndarray:
    """Min-max scale the columns of ``X`` to [0, 100] (the paper's feature scale), given each
    column's minimum ``lo`` and range ``rng``; constant columns become 0."""
    safe = np.where(rng > 0, rng, 1.0)
    return np.where(rng > 0, (X - lo) / safe * 100.0, 0.0)


def _no_pairs(classes: Any) -> SmartPairs:
    """No objective pair clauses (the feasibility model of the depth diagnosis)."""
    e2, e1 = np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
    return SmartPairs(e2, e2, e2, e1, e2, e1, None, None)


def _md_ms(Xs: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Maximum intra-cluster and minimum inter-cluster distance on ``Xs`` (O(n^2) memory);
    MD = 0 when every cluster is a singleton, MS = inf when there is one cluster."""
    d = pdist(Xs)
    i, j = np.triu_indices(len(Xs), 1)
    same = labels[i] == labels[j]
    md = float(d[same].max()) if same.any() else 0.0
    ms = float(d[~same].min()) if (~same).any() else float("inf")
    return md, ms


class TreeClustering(DenseInputTagsMixin, ClusterMixin, BaseEstimator):
    """Optimal constrained clustering tree of depth ``depth`` (MaxSAT, Eq. 7-38), a
    scikit-learn clusterer.

    Args:
        n_clusters: ``k``, the largest number of clusters (>= 2, default 2).
        depth: tree depth ``d`` (>= 1); the tree has ``2^d`` leaves, several leaves may share a
            cluster. ``2^depth`` must be at least ``min_clusters`` (else
            :class:`~gnnaudit.errors.InvalidInputError`: no tree can use that many clusters).
            Data- or constraint-dependent infeasibility is reported as ``status_ ==
            "infeasible"``.
        objective: ``"md"`` (minimise the maximum diameter) or ``"md-ms"`` (Pareto: minimise MD
            and maximise the minimum split, via :math:`\\lambda^- - \\lambda^+`).
        epsilon: width of the distance classes on the [0, 100] feature scale; the result is
            epsilon-optimal (epsilon-Pareto-optimal). ``0`` is exact.
        min_clusters: ``k'``: at least this many clusters are non-empty (Eq. 21 with ``k'``);
            default ``n_clusters`` (all clusters non-empty). ``2 <= k' <= k``.
        smart_pairs: drop redundant pair clauses and fix implied literals (App. C, Alg. 1);
            never changes the feasible or optimal solutions.
        solver: ``"auto"`` (default: a plain SAT call first -- an early tree or the
            infeasibility proof -- then RC2 in a killable child process, for hard and soft
            constraints; chosen from ``benchmarks/results/tree_scale.md``), ``"rc2"`` (the
            same), ``"lsu"`` (anytime SAT-UNSAT linear search) or ``"binary"`` (anytime
            binary search on the cost); ``lsu`` and ``binary`` need hard constraints. All
            return the same optimal cost; all return the best tree found when the time limit
            stops them (``feasible``).
        time_limit: wall-clock seconds for the whole ``fit`` (validation, encoding, solving);
            ``None``: no limit. Kept within a fraction of a second plus the time of the
            encoding step running when the limit passes.
        constraint_weight: ``None`` (hard constraints), a positive number or one positive
            weight per pair (must-link rows first, then cannot-link rows, as passed): the
            constraints become weighted soft clauses next to the objective; breaking one of
            weight ``w`` costs as much as ``w`` distance classes of the objective. Needs
            ``solver="auto"`` or ``"rc2"``. Contradictory pairs are then allowed.
        max_pairs: how many conditional separating pairs (Eq. 27-29, the longest first) are
            encoded up front; the others are added lazily when a model breaks them (exact:
            a model that breaks none is a model of the full formula, and an unsatisfiable
            subset is unsatisfiable in full). ``None``: all when at most 500,000, else the
            100,000 longest.
        tree: ``False`` for the CC baseline (no tree, Eq. 39); ``predict`` and ``export_text``
            then need the tree and raise.
        sat_solver: the pysat SAT oracle name (default ``"g4"``, Glucose 4).
        random_state: accepted for API symmetry; the encoding and the solvers are deterministic.

    Attributes (after ``fit``; ``None`` when no solution was found):
        labels_: ``(n,)`` cluster of every point (clusters numbered by first appearance).
        tree_: :class:`ClusteringTree` (``None`` for ``tree=False``).
        status_: ``"optimal"``, ``"feasible"`` (time limit, solution found, optimality not
            proven), ``"infeasible"`` (no tree of this depth honours the constraints, proven)
            or ``"unknown"`` (time limit, no solution and no proof).
        infeasibility_: :class:`~gnnaudit.clustering.tree_diagnosis.Infeasibility` (cause,
            offending pairs, remedies, ``message``) when infeasible, else ``None``.
        violated_constraints_: DataFrame ``i, j, kind, weight`` of the constraints
            ``labels_`` breaks (soft constraints; empty for hard ones).
        bound_: proven lower bound on the optimal ``cost_`` (``None`` when unknown).
        solver_used_: the search that ran (``"binary"``, ``"rc2"``, ...).
        n_lazy_pairs_: conditional separating pairs added lazily.
        fit_time_: wall seconds of the whole ``fit``.
        max_diameter_, min_split_: MD and MS of ``labels_`` on the scaled features.
        cost_: MaxSAT cost (:math:`\\lambda^-` or :math:`\\lambda^- + \\mu - \\lambda^+`;
            with soft constraints 100 times that plus 100 times the broken weights).
        lambda_minus_, lambda_plus_: the class indices :math:`\\lambda^-`, :math:`\\lambda^+`.
        n_distance_classes_: :math:`\\mu`.
        n_clauses_, n_vars_: size of the MaxSAT model (hard + soft clauses).
        clause_counts_: hard clauses per equation family.
        build_time_, solve_time_: seconds spent building the model and solving it.
        timings_: seconds per step (distance classes, pairs, encoding, solve).
        n_features_in_: number of features seen in ``fit``.

    Raises (``fit``): :class:`~gnnaudit.errors.InvalidInputError` for bad parameters or input,
    :class:`~gnnaudit.errors.InfeasibleError` for contradictory hard constraints (a pair both
    ML and CL, a CL pair inside an ML component), before any solving; the error's
    ``infeasibility`` (and ``infeasibility_``) names the pairs. Other infeasible inputs give
    ``status_ == "infeasible"`` with ``infeasibility_``.
    """

    def __init__(
        self,
        n_clusters: int = 2,
        depth: int = 3,
        objective: str = "md-ms",
        epsilon: float = 0.1,
        min_clusters: int | None = None,
        smart_pairs: bool = True,
        solver: str = "auto",
        time_limit: float | None = None,
        random_state: int | None = 0,
        tree: bool = True,
        sat_solver: str = "g4",
        constraint_weight: Any = None,
        max_pairs: int | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.depth = depth
        self.objective = objective
        self.epsilon = epsilon
        self.min_clusters = min_clusters
        self.smart_pairs = smart_pairs
        self.solver = solver
        self.time_limit = time_limit
        self.random_state = random_state
        self.tree = tree
        self.sat_solver = sat_solver
        self.constraint_weight = constraint_weight
        self.max_pairs = max_pairs

    # ------------------------------------------------------------------ validation
    def _check_params(self, n: int) -> tuple[int, int, int, float, float | None]:
        k = check_int("n_clusters", self.n_clusters, minimum=2)
        depth = check_int("depth", self.depth, minimum=1, maximum=12)
        check_choice("objective", self.objective, ("md", "md-ms"))
        eps = check_float("epsilon", self.epsilon, minimum=0.0)
        k_min = k if self.min_clusters is None else self.min_clusters
        k_min = check_int("min_clusters", k_min, minimum=2, maximum=k)
        check_choice("smart_pairs", self.smart_pairs, (True, False))
        check_choice("tree", self.tree, (True, False))
        check_choice("solver", self.solver, ("auto", "lsu", "rc2", "binary"))
        if self.max_pairs is not None:
            check_int("max_pairs", self.max_pairs, minimum=1)
        if self.constraint_weight is not None and self.solver in ("lsu", "binary"):
            raise InvalidInputError(
                f"solver={self.solver!r} needs hard constraints (unit objective weights); with "
                "constraint_weight (soft constraints) use solver='auto' or 'rc2'"
            )
        from pysat.solvers import SolverNames

        names = {a for k, v in vars(SolverNames).items() if not k.startswith("_") for a in v}
        if self.sat_solver not in names:
            raise InvalidInputError(
                f"sat_solver must be a pysat solver name such as 'g4', 'g3', 'mgh', 'm22'; "
                f"got {self.sat_solver!r}"
            )
        limit = self.time_limit
        if limit is not None:
            limit = check_float("time_limit", limit, minimum=0.0, inclusive=(False, True))
            no_interrupt = {a for k, v in vars(SolverNames).items() if k.startswith("cadical")
                            for a in v}  # fmt: skip
            if self.sat_solver in no_interrupt:
                raise InvalidInputError(
                    f"sat_solver={self.sat_solver!r} (CaDiCaL) cannot be interrupted, so it "
                    "cannot honour time_limit; use 'g4' or another solver, or time_limit=None"
                )
        if self.random_state is not None:
            check_int("random_state", self.random_state)
        if self.tree and 2**depth < k_min:
            raise InvalidInputError(
                f"depth={depth} gives {2**depth} leaves but min_clusters={k_min} clusters must be "
                f"non-empty; use depth >= {int(np.ceil(np.log2(k_min)))} or fewer clusters"
            )
        if n < k_min:
            raise InvalidInputError(
                f"X has {n} rows but min_clusters={k_min} clusters must be non-empty; "
                "need n_samples >= min_clusters"
            )
        return k, depth, k_min, eps, limit

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        X: Any,
        y: Any = None,
        *,
        must_link: Any = None,
        cannot_link: Any = None,
        constraints: ConstraintGraph | None = None,
    ) -> TreeClustering:
        """Solve the MaxSAT model for ``X`` (n, F) under the constraints; returns ``self``.

        ``time_limit`` bounds the whole call (validation, encoding and solving): the encoding
        phases check the deadline between steps, the SAT oracles are interrupted by a timer
        and RC2 runs in a child process killed at the deadline.

        Args:
            X: numeric features (array or DataFrame of numeric columns), validated by
                scikit-learn; at least two rows.
            y: ignored (scikit-learn convention). A 2-column integer array here is taken for
                constraint pairs passed positionally (the old signature) and refused with a
                hint to use ``must_link=``.
            must_link, cannot_link: ``None``, a list of pairs or an integer array of shape
                (m, 2) with point indices in ``[0, n)`` (e.g. from
                :func:`~gnnaudit.clustering.generate_constraints`).
            constraints: a :class:`~gnnaudit.graph_ops.ConstraintGraph` built beforehand over
                the ``n`` points, instead of the pair lists
                (:class:`~gnnaudit.errors.InvalidInputError` if its ``n`` differs or pair
                lists are given too).
        """
        t_start = time.perf_counter()
        deadline: float | None = None  # t_start + time_limit, set after validation
        if y is not None and np.ndim(y) == 2 and np.shape(y)[1] == 2:
            raise InvalidInputError(
                "fit(X, y): y is ignored, but this looks like constraint pairs of shape (m, 2); "
                "pass them as fit(X, must_link=..., cannot_link=...)"
            )
        X = validate_fit_input(self, X, min_samples=2)
        n = X.shape[0]
        k, depth, k_min, eps, limit = self._check_params(n)
        if limit is not None:
            deadline = t_start + limit
        self.status_ = None
        self.infeasibility_: Infeasibility | None = None
        self.labels_ = self.tree_ = None
        self.max_diameter_ = self.min_split_ = None
        self.lambda_minus_ = self.lambda_plus_ = None
        self.cost_ = self.bound_ = None
        self.solver_used_ = None
        self.n_lazy_pairs_ = 0
        self.n_vars_ = self.n_clauses_ = 0
        self.clause_counts_ = {}
        self.solve_time_ = 0.0
        self.timings_: dict[str, float] = {}

        soft = self.constraint_weight is not None
        graph = self._constraint_graph(n, must_link, cannot_link, constraints)
        if soft:
            soft_ml, soft_cl, w_ml, w_cl = self._soft_constraints(n, must_link, cannot_link, graph)
            self.constraints_: tuple[Any, Any, Any, Any] = (soft_ml, soft_cl, w_ml, w_cl)
            hard_graph = ConstraintGraph(n)
        else:
            soft_ml = soft_cl = np.zeros((0, 2), np.int64)
            w_ml = w_cl = np.zeros(0, np.int64)
            self.constraints_ = (graph.must_link, graph.cannot_link, None, None)
            hard_graph = graph

        lo, hi = X.min(axis=0), X.max(axis=0)
        rng = hi - lo
        Xs = scale_features(X, lo, rng)
        self._scale_min, self._scale_range = lo, rng
        if not soft:
            left = None if deadline is None else deadline - time.perf_counter()
            why = diagnose_constraints(
                graph, Xs, n_clusters=k, min_clusters=k_min, depth=depth, tree=bool(self.tree),
                time_budget=2.0 if left is None else max(0.0, min(2.0, left / 4)),
            )  # fmt: skip
            if why is not None:
                self.infeasibility_ = why
                if why.cause == "contradiction":  # nothing can be solved: raise, as before
                    self.status_ = None
                    err = InfeasibleError(f"contradictory constraints: {why.message}")
                    err.infeasibility = why  # type: ignore[attr-defined]
                    raise err
                logger.warning("TreeClustering: %s", why.message)
                return self._finish_without_solution("infeasible", t_start)

        # The encoding steps cannot be interrupted: a step predicted not to finish before the
        # deadline is not started (status unknown), so the bound holds. Predictions: the
        # distance classes from a timed sample (O(P log P)), the later steps from them.
        t0 = time.perf_counter()
        if not self._fits(deadline, self._estimate_classes(Xs, eps) if limit else 0.0):
            return self._finish_without_solution("unknown", t_start)
        classes = distance_classes(Xs, eps)
        t_classes = time.perf_counter() - t0
        pareto = self.objective == "md-ms"
        if not self._fits(deadline, (2.0 if self.smart_pairs else 0.5) * t_classes):
            return self._finish_without_solution("unknown", t_start)
        pairs = (
            smart_pairs(hard_graph, classes, together=pareto)
            if self.smart_pairs
            else all_pairs(hard_graph, classes)
        )
        pairs, max_apart = self._lazy_split(pairs)
        t_pairs = time.perf_counter() - t0 - t_classes
        n_tree = (2**depth - 1) * X.shape[1] * n if self.tree else 0
        n_pairs = len(pairs.apart) if max_apart is None else max_apart
        if not self._fits(deadline, 0.5 * t_classes + 1e-6 * (n_tree + 3 * k * n_pairs)):
            return self._finish_without_solution("unknown", t_start)

        def build(s_ml: np.ndarray, s_cl: np.ndarray, **kw: Any) -> TreeEncoding:
            return build_encoding(
                Xs, classes, kw.pop("pairs", pairs), n_clusters=k, min_clusters=k_min,
                depth=depth, objective=self.objective, tree=bool(self.tree), soft_ml=s_ml,
                soft_cl=s_cl, **kw,
            )  # fmt: skip

        enc = build(
            soft_ml, soft_cl, w_ml=w_ml, w_cl=w_cl, unit_weight=_UNIT if soft else 1,
            max_apart=max_apart,
        )  # fmt: skip
        self.build_time_ = time.perf_counter() - t0
        self.timings_ = {
            "distance classes": t_classes,
            "pairs": t_pairs,
            "encoding": self.build_time_ - t_classes - t_pairs,
        }
        self.n_vars_ = enc.n_vars
        self.n_clauses_ = enc.n_clauses
        self.clause_counts_ = dict(enc.counts)
        self.n_distance_classes_ = classes.n_classes
        logger.info(
            "TreeClustering: %d vars, %d clauses, %d distance classes, %d lazy pairs, built in "
            "%.3fs", enc.n_vars, enc.n_clauses, classes.n_classes, len(enc.lazy_pairs),
            self.build_time_,
        )  # fmt: skip
        if not self._fits(deadline, 0.3 * self.build_time_):  # loading the SAT oracle
            return self._finish_without_solution("unknown", t_start)

        res = SOLVERS[self.solver](enc, deadline, self.sat_solver)
        self.status_ = res.status
        self.solve_time_ = res.time
        self.timings_["solve"] = res.time
        self.solver_used_ = res.solver
        self.cost_ = res.cost
        self.bound_ = res.bound
        self.n_lazy_pairs_ = enc.lazy_added
        if res.values is None:
            if res.status == "infeasible" and not soft:
                # the core needs a second model: only when it fits before the deadline
                core_deadline = deadline
                if not self._fits(deadline, 1.5 * self.build_time_):
                    core_deadline = time.perf_counter()
                self.infeasibility_ = diagnose_depth(
                    lambda a, b: build(a, b, pairs=_no_pairs(classes)),
                    graph,
                    depth,
                    core_deadline,
                )
                if not self.tree:
                    self.infeasibility_ = Infeasibility(
                        "cannot-link-colouring",
                        self.infeasibility_.pairs,
                        (f"use n_clusters > {k}", "or remove one of the listed pairs"),
                        f"no clustering into at most {k} clusters honours the constraints",
                    )
                logger.warning("TreeClustering: %s", self.infeasibility_.message)
            else:
                logger.info("TreeClustering: no solution (%s)", res.status)
            self.fit_time_ = time.perf_counter() - t_start
            return self
        vals = res.values
        labels = vals[enc.x].sum(axis=1).astype(np.int64)
        self.lambda_minus_ = int(vals[enc.b_minus].sum())
        self.lambda_plus_ = int(vals[enc.b_plus].sum()) if pareto else None
        if self.tree:
            self.tree_ = self._decode_tree(vals, enc, X, Xs, depth)
            routed = self.tree_.predict(X)
            if not np.array_equal(routed, labels):  # pragma: no cover - encoding invariant
                raise RuntimeError("internal error: tree routing disagrees with the SAT labels")
        self.labels_ = labels
        same = labels[classes.pairs[:, 0]] == labels[classes.pairs[:, 1]]
        self.max_diameter_ = float(classes.distances[same].max()) if same.any() else 0.0
        self.min_split_ = float(classes.distances[~same].min()) if (~same).any() else np.inf
        self.fit_time_ = time.perf_counter() - t_start
        return self

    @property
    def violated_constraints_(self) -> pd.DataFrame:
        """The constraint pairs ``labels_`` breaks, checked on the labels: columns ``i``,
        ``j``, ``kind`` (``"must-link"`` / ``"cannot-link"``) and ``weight`` (the soft
        weight, NaN for hard constraints). Empty for hard constraints (they always hold)."""
        self._check_solution()
        assert self.labels_ is not None
        ml, cl, w_ml, w_cl = self.constraints_
        lab = self.labels_
        bad_ml = lab[ml[:, 0]] != lab[ml[:, 1]]
        bad_cl = lab[cl[:, 0]] == lab[cl[:, 1]]
        wm = np.full(len(ml), np.nan) if w_ml is None else w_ml / _UNIT
        wc = np.full(len(cl), np.nan) if w_cl is None else w_cl / _UNIT
        return pd.DataFrame(
            {
                "i": np.r_[ml[bad_ml, 0], cl[bad_cl, 0]].astype(np.int64),
                "j": np.r_[ml[bad_ml, 1], cl[bad_cl, 1]].astype(np.int64),
                "kind": ["must-link"] * int(bad_ml.sum()) + ["cannot-link"] * int(bad_cl.sum()),
                "weight": np.r_[wm[bad_ml], wc[bad_cl]],
            }
        )

    @staticmethod
    def _fits(deadline: float | None, seconds: float) -> bool:
        """Can a step predicted to take ``seconds`` still finish before the deadline? (With a
        1.5x margin: timings on a shared machine vary.)"""
        return deadline is None or time.perf_counter() + 1.5 * seconds < deadline

    @staticmethod
    def _estimate_classes(Xs: np.ndarray, eps: float) -> float:
        """Predicted seconds of :func:`distance_classes` on ``Xs``: time it on a sample of
        at most 600 rows and scale by :math:`P \\log P`."""
        n = len(Xs)
        m = min(n, 600)
        t = time.perf_counter()
        distance_classes(Xs[:: max(1, n // m)][:m], eps)
        dt = time.perf_counter() - t
        P, Pm = n * (n - 1) / 2, m * (m - 1) / 2
        return dt * (P / Pm) * (np.log2(P + 2) / np.log2(Pm + 2))

    def _finish_without_solution(self, status: str, t_start: float) -> TreeClustering:
        self.status_ = status
        if status == "unknown":
            logger.info("TreeClustering: time limit reached while encoding")
        self.fit_time_ = time.perf_counter() - t_start
        return self

    def _lazy_split(self, pairs: SmartPairs) -> tuple[SmartPairs, int | None]:
        """Sort the conditional separating pairs by class (descending) and choose how many to
        encode at once (the rest are generated lazily; exact)."""
        pool = len(pairs.apart)
        if self.max_pairs is None:
            start = None if pool <= _ALL_PAIRS_UP_TO else _LAZY_START
        else:
            start = int(self.max_pairs) if pool > int(self.max_pairs) else None
        if start is None:
            return pairs, None
        desc = np.argsort(-pairs.apart_class, kind="stable")
        return (
            SmartPairs(
                must_link=pairs.must_link,
                cannot_link=pairs.cannot_link,
                together=pairs.together,
                together_class=pairs.together_class,
                apart=pairs.apart[desc],
                apart_class=pairs.apart_class[desc],
                forced_not_plus=pairs.forced_not_plus,
                forced_minus=pairs.forced_minus,
            ),  # fmt: skip
            start,
        )

    def _soft_constraints(
        self, n: int, must_link: Any, cannot_link: Any, graph: ConstraintGraph
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Canonical soft pairs and their integer weights (duplicates add up)."""
        cw = self.constraint_weight
        raw: list[np.ndarray] = []
        if must_link is None and cannot_link is None:  # a ConstraintGraph was given
            raw = [graph.must_link, graph.cannot_link]
        else:
            for name, pairs in (("must_link", must_link), ("cannot_link", cannot_link)):
                as_pairs(name, pairs, n, allow_self=name == "must_link")  # validates
                arr = np.zeros((0, 2), np.int64) if pairs is None else pairs
                if hasattr(arr, "detach"):
                    arr = arr.detach().cpu().numpy()
                raw.append(np.asarray(arr).reshape(-1, 2).astype(np.int64))
        m_total = len(raw[0]) + len(raw[1])
        weights: np.ndarray
        if np.ndim(cw) == 0:
            w0 = check_float("constraint_weight", cw, minimum=0.0, inclusive=(False, True))
            weights = np.full(m_total, w0)
        else:
            weights = np.asarray(cw, dtype=float)
            if weights.ndim != 1 or len(weights) != m_total:
                raise InvalidInputError(
                    f"constraint_weight must be None, a positive number or one weight per pair "
                    f"(must-link rows first, then cannot-link rows: {m_total}); got shape "
                    f"{weights.shape}"
                )
            if not np.all(np.isfinite(weights)) or (weights <= 0).any():
                raise InvalidInputError(
                    "constraint_weight must hold finite positive weights, got "
                    f"min {weights.min() if len(weights) else None}"
                )
        out: list[np.ndarray] = []
        for t, arr in enumerate(raw):
            w: np.ndarray = weights[: len(raw[0])] if t == 0 else weights[len(raw[0]) :]
            keep = arr[:, 0] != arr[:, 1]
            arr, w = np.sort(arr[keep], axis=1), w[keep]
            if len(arr):
                arr, inv = np.unique(arr, axis=0, return_inverse=True)
                agg = np.zeros(len(arr))
                np.add.at(agg, np.asarray(inv).reshape(-1), w)
                w = agg
            out += [arr.reshape(-1, 2), np.maximum(1, np.round(w * _UNIT)).astype(np.int64)]
        return out[0], out[2], out[1], out[3]

    @staticmethod
    def _constraint_graph(
        n: int, must_link: Any, cannot_link: Any, constraints: Any
    ) -> ConstraintGraph:
        if constraints is None:
            return ConstraintGraph(n, must_link, cannot_link)
        if not isinstance(constraints, ConstraintGraph):
            raise InvalidInputError(
                f"constraints must be a gnnaudit.graph_ops.ConstraintGraph, got "
                f"{type(constraints).__name__}"
            )
        if must_link is not None or cannot_link is not None:
            raise InvalidInputError(
                "pass the constraints either as must_link= / cannot_link= pairs or as "
                "constraints= (a ConstraintGraph), not both"
            )
        if constraints.n != n:
            raise InvalidInputError(
                f"constraints is a ConstraintGraph over n={constraints.n} points but X has {n} rows"
            )
        return constraints

    @staticmethod
    def _decode_tree(
        vals: np.ndarray, enc: TreeEncoding, X: np.ndarray, Xs: np.ndarray, depth: int
    ) -> ClusteringTree:
        feature = np.argmax(vals[enc.a], axis=1)  # exactly one true per node (Eq. 7-8)
        left = vals[enc.s]  # (n, B)
        n_nodes = enc.a.shape[0]
        thr = np.empty(n_nodes)
        thr_s = np.empty(n_nodes)
        for t in range(n_nodes):  # one step per branch node (2^d - 1 of them)
            f = feature[t]
            lm = left[:, t]
            thr[t] = (X[lm, f].max() + X[~lm, f].min()) / 2.0
            thr_s[t] = (Xs[lm, f].max() + Xs[~lm, f].min()) / 2.0
        leaf_cluster = vals[enc.g].sum(axis=1).astype(np.int64)
        leaf_of = np.argmax(vals[enc.z], axis=1)
        leaf_size = np.bincount(leaf_of, minlength=2**depth)
        return ClusteringTree(
            depth=depth,
            feature=feature.astype(np.int64),
            threshold=thr,
            threshold_scaled=thr_s,
            leaf_cluster=leaf_cluster,
            leaf_size=leaf_size,
        )

    def fit_predict(self, X: Any, y: Any = None, **kwargs: Any) -> np.ndarray:
        """``fit(X, **kwargs)`` and return ``labels_`` (:class:`InfeasibleError` without a
        solution)."""
        self.fit(X, y, **kwargs)
        self._check_solution()
        assert self.labels_ is not None  # _check_solution raised otherwise
        return self.labels_

    # ------------------------------------------------------------------ using the tree
    def _check_solution(self) -> None:
        if getattr(self, "status_", None) is None:
            raise EstimatorNotFittedError("TreeClustering is not fitted yet; call fit first")
        if self.labels_ is None:
            why = getattr(self, "infeasibility_", None)
            if why is not None:
                raise InfeasibleError(f"TreeClustering found no clustering: {why.message}")
            if self.status_ == "unknown":
                raise InfeasibleError(
                    "TreeClustering found no clustering (status_='unknown'): the time limit "
                    "ran out before any tree was found; use a longer time_limit"
                )
            raise InfeasibleError(f"TreeClustering found no clustering (status_={self.status_!r})")

    def _check_tree(self) -> ClusteringTree:
        self._check_solution()
        if self.tree_ is None:
            raise InvalidInputError(
                "this model was fitted with tree=False (the CC baseline) and has no tree"
            )
        return self.tree_

    def predict(self, X: Any) -> np.ndarray:
        """Route rows of ``X`` (original units) through the tree; ``predict(X_fit) == labels_``."""
        tree = self._check_tree()
        return tree.predict(validate_predict_input(self, X))

    def export_text(
        self, feature_names: list[str] | None = None, decimals: int = 3, show_empty: bool = False
    ) -> str:
        """The fitted tree as text (thresholds in original units; see
        :meth:`ClusteringTree.export_text`). Features are named by ``feature_names``, else by
        the names seen in ``fit`` (``feature_names_in_``, a DataFrame's columns), else
        ``x[j]``."""
        tree = self._check_tree()
        if feature_names is None and getattr(self, "feature_names_in_", None) is not None:
            feature_names = list(self.feature_names_in_)
        if feature_names is not None:
            feature_names = [str(f) for f in feature_names]
            if len(feature_names) != self.n_features_in_:
                raise InvalidInputError(
                    f"feature_names has {len(feature_names)} names but the tree was fitted on "
                    f"{self.n_features_in_} features"
                )
        decimals = check_int("decimals", decimals, minimum=0, maximum=12)
        check_choice("show_empty", show_empty, (True, False))
        return tree.export_text(feature_names, decimals, show_empty)
