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
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClusterMixin

from gnnaudit._params import (
    RANDOM_STATE,
    Integer,
    Options,
    Real,
    Satisfies,
    validate_parameters,
)
from gnnaudit._validation import check_choice, check_int
from gnnaudit.clustering._estimator_input import (
    DenseInputTagsMixin,
    EstimatorNotFittedError,
    validate_fit_input,
    validate_predict_input,
)
from gnnaudit.clustering.tree_diagnosis import Infeasibility, diagnose_constraints
from gnnaudit.clustering.tree_fit import TreeFitSteps, warn_infeasible
from gnnaudit.clustering.tree_inputs import (
    UNIT,
    check_epsilon,
    constraint_graph,
    soft_constraints,
)
from gnnaudit.clustering.tree_model import ClusteringTree, scale_features
from gnnaudit.clustering.tree_warm import greedy_tree
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops.constraints import ConstraintGraph

__all__ = ["ClusteringTree", "Infeasibility", "TreeClustering", "TIME_LIMIT_RANGE"]

logger = logging.getLogger(__name__)

_STATUSES = ("optimal", "feasible", "feasible_soft", "infeasible", "unknown")

#: Accepted ``time_limit`` in seconds (inclusive): below a millisecond no step can run, above
#: about 11.6 days a deadline is no limit (use ``None``).
TIME_LIMIT_RANGE = (1e-3, 1e6)


def _pysat_names(cadical: bool = False) -> set[str]:
    from pysat.solvers import SolverNames

    return {a for k, v in vars(SolverNames).items() if not k.startswith("_")
            and (not cadical or k.startswith("cadical")) for a in v}  # fmt: skip


def _weights_ok(value: Any) -> bool:
    w = np.asarray(value, dtype=float)
    return w.ndim == 1 or (w.ndim == 0 and bool(np.isfinite(w)) and float(w) > 0)


class TreeClustering(TreeFitSteps, DenseInputTagsMixin, ClusterMixin, BaseEstimator):
    """Optimal constrained clustering tree of depth ``depth`` (MaxSAT, Eq. 7-38), a
    scikit-learn clusterer.

    Args:
        n_clusters: ``k``, the largest number of clusters (>= 1, default 2). ``1`` gives one
            cluster (a single leaf, ``tree_.depth == 0``), as ``KMeans(n_clusters=1)``.
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
            default ``n_clusters`` (all clusters non-empty). ``1 <= k' <= k``.
        smart_pairs: drop redundant pair clauses and fix implied literals (App. C, Alg. 1);
            never changes the feasible or optimal solutions.
        solver: ``"auto"`` (default: a plain SAT call first -- an early tree or the
            infeasibility proof -- then RC2 in a killable child process, for hard and soft
            constraints; chosen from ``benchmarks/results/tree_scale.md``), ``"rc2"`` (the
            same), ``"lsu"`` (anytime SAT-UNSAT linear search) or ``"binary"`` (anytime
            binary search on the cost); ``lsu`` and ``binary`` need hard constraints. All
            return the same optimal cost; all return the best tree found when the time limit
            stops them (``feasible``). Every search starts from a greedy tree (k-means, a CART
            tree, leaf relabelling; :mod:`~gnnaudit.clustering.tree_warm`) as the SAT
            oracle's preferred phases.
        time_limit: wall-clock seconds for the whole ``fit`` (validation, greedy start,
            encoding, solving), in ``[0.001, 1e6]``; ``None``: no limit. Kept within a fraction
            of a second plus the time of the step running when the limit passes (the greedy
            start, about 0.1-1.5 s for a thousand points, always runs).
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
        random_state: seed of the greedy start's k-means and CART fits (the encoding and the
            solvers are deterministic); ``None`` or an int in ``[0, 2**32 - 1]`` or a numpy
            RandomState / Generator (then seed 0).

    What ``fit`` returns: with a time limit of at least 5 s (and without one), either a tree
    (``labels_`` set) or a proof that none exists (``status_ == "infeasible"``). Hard
    constraints that no tree found in time honours give the best greedy tree instead,
    ``status_ == "feasible_soft"``, with ``violated_constraints_`` listing what it breaks.

    The attributes below are set by ``fit`` (``None`` when no solution was found).

    Attributes:
        labels_: ``(n,)`` cluster of every point (clusters numbered by first appearance);
            ``None`` only for ``infeasible`` (and ``unknown``).
        tree_: :class:`ClusteringTree` (``None`` for ``tree=False``).
        status_: ``"optimal"`` (proven optimal), ``"feasible"`` (honours every hard
            constraint, optimality not proven when the time limit stopped the search),
            ``"feasible_soft"`` (the time limit stopped the search before any tree honouring
            every hard constraint was found, and none is proven impossible: the greedy tree,
            which breaks the constraints in ``violated_constraints_``), ``"infeasible"`` (no
            tree of this depth honours the constraints, proven; ``labels_`` is ``None``) or
            ``"unknown"`` (no tree at all: only when the greedy start cannot build one, e.g.
            fewer distinct rows than ``min_clusters`` that the diagnosis did not catch).
        infeasibility_: :class:`~gnnaudit.clustering.tree_diagnosis.Infeasibility` (cause,
            offending pairs, remedies, ``message``) when infeasible, else ``None``.
        violated_constraints_: DataFrame ``i, j, kind, weight`` of the constraints
            ``labels_`` breaks (soft constraints; hard ones only for ``feasible_soft``, with
            weight NaN; empty otherwise).
        bound_: proven lower bound on the optimal ``cost_`` (``None`` when unknown).
        solver_used_: the search whose result came back (``"binary"``, ``"rc2"``, ...,
            ``"greedy"`` for the greedy tree, ``"none"`` for ``n_clusters=1``).
        n_lazy_pairs_: conditional separating pairs added lazily.
        fit_time_: wall seconds of the whole ``fit``.
        max_diameter_, min_split_: MD and MS of ``labels_`` on the scaled features.
        cost_: MaxSAT cost (:math:`\\lambda^-` or :math:`\\lambda^- + \\mu - \\lambda^+`;
            with soft constraints 100 times that plus 100 times the broken weights); ``None``
            for ``feasible_soft`` and ``n_clusters=1``.
        lambda_minus_, lambda_plus_: the class indices :math:`\\lambda^-`, :math:`\\lambda^+`.
        n_distance_classes_: :math:`\\mu`.
        n_clauses_, n_vars_: size of the MaxSAT model (hard + soft clauses).
        clause_counts_: hard clauses per equation family.
        build_time_, solve_time_: seconds spent building the model and solving it.
        timings_: seconds per step (distance classes, pairs, encoding, solve).
        n_features_in_: number of features seen in ``fit``.
        feature_min_, feature_range_: per-feature minimum and range used for the [0, 100]
            scaling.

    Raises (``fit``): :class:`~gnnaudit.errors.InvalidInputError` for bad parameters or input,
    :class:`~gnnaudit.errors.InfeasibleError` for contradictory hard constraints (a pair both
    ML and CL, a CL pair inside an ML component), before any solving; the error's
    ``infeasibility`` (and ``infeasibility_``) names the pairs. Other infeasible inputs give
    ``status_ == "infeasible"`` with ``infeasibility_``.
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "n_clusters": [Integer(1, None)],
        "depth": [Integer(1, 12)],
        "objective": [Options("md", "md-ms")],
        "epsilon": [Real(0, None)],
        "min_clusters": [Integer(1, None), None],
        "smart_pairs": [Options(True, False)],
        "solver": [Options("auto", "lsu", "rc2", "binary")],
        "time_limit": [Real(*TIME_LIMIT_RANGE), None],
        "random_state": [RANDOM_STATE],
        "tree": [Options(True, False)],
        "sat_solver": [
            Satisfies(
                lambda v: isinstance(v, str) and v in _pysat_names(),
                "a pysat solver name such as 'g4', 'g3', 'mgh', 'm22'",
            )
        ],  # fmt: skip
        "constraint_weight": [
            None,
            Satisfies(_weights_ok, "a positive number or one positive weight per pair"),
        ],
        "max_pairs": [Integer(1, None), None],
    }

    def __init__(  # noqa: PLR0913  # estimator: mirrors its documented parameters
        self,
        n_clusters: int = 2,
        *,
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
    def _check_combination(self, n: int) -> tuple[int, int, int]:
        """The checks that involve several parameters or the data (after the declarative
        ones); returns ``(k, depth, k_min)``."""
        k, depth = int(self.n_clusters), int(self.depth)
        k_min = k if self.min_clusters is None else int(self.min_clusters)
        if k_min > k:
            raise InvalidInputError(
                f"TreeClustering: min_clusters must be <= n_clusters={k}; got {k_min}"
            )
        if self.constraint_weight is not None and self.solver in ("lsu", "binary"):
            raise InvalidInputError(
                f"solver={self.solver!r} needs hard constraints (unit objective weights); with "
                "constraint_weight (soft constraints) use solver='auto' or 'rc2'"
            )
        if self.time_limit is not None and self.sat_solver in _pysat_names(cadical=True):
            raise InvalidInputError(
                f"sat_solver={self.sat_solver!r} (CaDiCaL) cannot be interrupted, so it "
                "cannot honour time_limit; use 'g4' or another solver, or time_limit=None"
            )
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
        return k, depth, k_min

    def _reset(self) -> None:
        self.status_ = None
        self.infeasibility_ = None
        self.labels_ = None
        self.tree_ = None
        self.max_diameter_ = self.min_split_ = None
        self.lambda_minus_ = self.lambda_plus_ = None
        self.cost_ = self.bound_ = None
        self.solver_used_ = None
        self.n_lazy_pairs_ = 0
        self.n_vars_ = self.n_clauses_ = self.n_distance_classes_ = 0
        self.clause_counts_ = {}
        self.build_time_ = self.solve_time_ = 0.0
        self.timings_ = {}

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

        ``time_limit`` bounds the whole call: the greedy start gets at most a tenth of it, up
        to 3 s (2 s without a limit; its first candidate always runs), the encoding phases check the deadline between steps,
        the SAT oracles are interrupted by a timer and RC2 runs in a child process killed at
        the deadline. What comes back: see the class doc (a tree, or a proof of infeasibility).

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
        if y is not None and np.ndim(y) == 2 and np.shape(y)[1] == 2:
            raise InvalidInputError(
                "fit(X, y): y is ignored, but this looks like constraint pairs of shape (m, 2); "
                "pass them as fit(X, must_link=..., cannot_link=...)"
            )
        validate_parameters(self)
        X = validate_fit_input(self, X, min_samples=2)
        n = X.shape[0]
        check_epsilon(self.epsilon, X.shape[1])
        k, depth, k_min = self._check_combination(n)
        deadline = None if self.time_limit is None else t_start + float(self.time_limit)
        self._reset()
        graph = constraint_graph(n, must_link, cannot_link, constraints)
        soft: tuple[np.ndarray, ...] | None = None
        if self.constraint_weight is not None:
            soft = soft_constraints(self.constraint_weight, n, must_link, cannot_link, graph)
            self.constraints_: tuple[Any, Any, Any, Any] = soft
            hard_graph = ConstraintGraph(n)
        else:
            self.constraints_ = (graph.must_link, graph.cannot_link, None, None)
            hard_graph = graph
        lo, hi = X.min(axis=0), X.max(axis=0)
        self.feature_min_, self.feature_range_ = lo, hi - lo
        Xs = scale_features(X, lo, hi - lo)
        if soft is None and self._diagnose(graph, Xs, (k, depth, k_min), deadline, t_start):
            return self
        if k == 1:
            self._fit_single_cluster(Xs, t_start)
            return self
        left = None if deadline is None else deadline - time.perf_counter()
        seed = self.random_state if isinstance(self.random_state, int | np.integer) else 0
        t0 = time.perf_counter()
        warm = greedy_tree(
            Xs, graph, n_clusters=k, min_clusters=k_min, depth=depth, tree=bool(self.tree),
            seed=int(seed), time_budget=2.0 if left is None else max(0.0, min(3.0, left / 10)),
        )  # fmt: skip
        self.timings_["greedy start"] = time.perf_counter() - t0
        self._encode_and_solve(X, Xs, hard_graph, soft, warm, (k, depth, k_min), deadline,
                               t_start)  # fmt: skip
        return self

    def _diagnose(
        self, graph: ConstraintGraph, Xs: np.ndarray, sizes: tuple[int, int, int],
        deadline: float | None, t_start: float,
    ) -> bool:  # fmt: skip
        """Hard constraints: the causes of infeasibility visible on the constraint graph. True
        when one is found (``status_ = "infeasible"``); a contradiction raises."""
        k, depth, k_min = sizes
        left = None if deadline is None else deadline - time.perf_counter()
        why = diagnose_constraints(
            graph, Xs, n_clusters=k, min_clusters=k_min, depth=depth, tree=bool(self.tree),
            time_budget=2.0 if left is None else max(0.0, min(2.0, left / 4)),
        )  # fmt: skip
        if why is None:
            return False
        self.infeasibility_ = why
        if why.cause == "contradiction":  # nothing can be solved: raise, as before
            self.status_ = None
            err = InfeasibleError(f"contradictory constraints: {why.message}")
            err.infeasibility = why  # type: ignore[attr-defined]
            raise err
        warn_infeasible(why)
        self.status_ = "infeasible"
        self.fit_time_ = time.perf_counter() - t_start
        return True

    @property
    def violated_constraints_(self) -> pd.DataFrame:
        """The constraint pairs ``labels_`` breaks, checked on the labels: columns ``i``,
        ``j``, ``kind`` (``"must-link"`` / ``"cannot-link"``) and ``weight`` (the soft
        weight, NaN for hard constraints). Empty for hard constraints except with
        ``status_ == "feasible_soft"``."""
        self._check_solution()
        assert self.labels_ is not None
        ml, cl, w_ml, w_cl = self.constraints_
        lab = self.labels_
        bad_ml = lab[ml[:, 0]] != lab[ml[:, 1]]
        bad_cl = lab[cl[:, 0]] == lab[cl[:, 1]]
        wm = np.full(len(ml), np.nan) if w_ml is None else w_ml / UNIT
        wc = np.full(len(cl), np.nan) if w_cl is None else w_cl / UNIT
        return pd.DataFrame(
            {
                "i": np.r_[ml[bad_ml, 0], cl[bad_cl, 0]].astype(np.int64),
                "j": np.r_[ml[bad_ml, 1], cl[bad_cl, 1]].astype(np.int64),
                "kind": ["must-link"] * int(bad_ml.sum()) + ["cannot-link"] * int(bad_cl.sum()),
                "weight": np.r_[wm[bad_ml], wc[bad_cl]],
            }
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
