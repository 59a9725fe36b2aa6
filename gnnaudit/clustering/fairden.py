"""FairDen: fair density-based clustering (Krieger, Beer et al., ICLR 2025; Alg. 1).

Pipeline: dc-distance tree of the numerical features (:class:`~gnnaudit.graph_ops.DCTree`),
affinity :math:`A = \\tfrac{d_n}{d}(1 - D_{dc}/\\max D_{dc}) + \\tfrac{d_c}{d} S_G`
(Eq. 1, 15), fairness matrix ``F`` over the *combined* sensitive groups (Sec. 2.2, 2.4), the
constrained normalised-cut embedding (Eq. 12, :mod:`gnnaudit.clustering.fair_spectral`),
k-means on its rows, and Alg. 1's noise loop: clusters with fewer than ``minPts`` points become
noise (-1); while fewer than ``n_clusters`` non-noise clusters remain, k-means is rerun with
``k + 1`` clusters on the *same* embedding (Alg. 1 line 14 and the published code;
``noise_loop="fixed"``, the default). ``noise_loop="recompute"`` instead recomputes the embedding
with ``k + 1`` eigenvectors at every step (measured in ``benchmarks/results/fairden_k.md``).

The loop is capped at ``k <= max(n_clusters, n // minPts)`` (more clusters of at least ``minPts``
points cannot exist) and, with ``noise_loop="recompute"``, at the embedding's maximal dimension;
when the cap is hit the last clustering is returned and a warning logged.

Rounding. k-means on the relaxed embedding (the paper's rounding, ``rounding="kmeans"``) follows
the density structure but can miss balance although :math:`F^\\top H = 0` holds for the
relaxation (three moons at ``k = 3``: balance 0.33). ``rounding="repair"`` (default) starts
from the paper's partition: where it already reaches ``min_balance`` its labels come back
unchanged; otherwise the repair paths (:mod:`gnnaudit.clustering.fairden_repair`: moving the
points that cost the least dc-distance, or dropping the surplus of over-represented groups
as noise) give candidates, and the rule of :mod:`gnnaudit.clustering.fairden_candidates`
picks one: the highest DCSI among those reaching ``min_balance``, unless that keeps less than
``min_dcsi_share`` (0.7) of the paper rounding's DCSI; then the most balanced candidate that
keeps it, with a warning. Each candidate (about 25) is scored with a DCSI, most of the repair's
time (``benchmarks/results/fairden_density.md``). ``rounding="pareto"`` evaluates the same
paths also when the paper's rounding is balanced enough and reports them in
``pareto_front_``. ``rounding="balanced"``
rounds to exact group quotas in every cluster (:mod:`gnnaudit.clustering.fairden_rounding`;
balance near 1, density structure may be lost).

Scores. ``balance_`` (Eq. 6, the mean over clusters), ``min_cluster_balance_`` (the worst
cluster) and ``dcsi_`` are computed on the clustered points; ``noise_ratio_`` is the share of
points labelled -1. The paper's noise-adjusted figures are ``balance_ * (1 - noise_ratio_)``
and ``dcsi_ * (1 - noise_ratio_)``.

A fitted model whose balance is below :data:`BALANCE_WARNING_THRESHOLD` (0.5) warns
(``UserWarning``), naming the group-pure clusters. Data with fewer distinct points than
``n_clusters`` (e.g. all points identical) is refused with
:class:`~gnnaudit.errors.InfeasibleError`. ``n_clusters=1`` puts every (non-excluded) point in
one cluster, as k-means does.

Small groups. A balanced clustering into ``k`` clusters needs every combined sensitive group to
have at least ``k`` members (paper Sec. 2.5). By default a smaller group raises
:class:`~gnnaudit.errors.InfeasibleError`. With ``min_group_size=m`` the points of combined
groups with fewer than ``m`` members are excluded as in the paper's experiments (Sec. 3.3):
they are labelled -1 and flagged in ``excluded_``.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any, Literal

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClusterMixin
from tqdm.auto import tqdm

from gnnaudit._aliases import deprecated_attribute, renamed_keywords, resolve_alias
from gnnaudit._params import Integer, Options, Real, Satisfies, validate_parameters
from gnnaudit.clustering._estimator_input import DenseInputTagsMixin, validate_fit_input
from gnnaudit.clustering._fairden_steps import (
    PARETO_STEPS,
    Alg1Result,
    FitInputs,
    RepairOutcome,
    balanced_rounding,
    relabel,
    repair_rounding,
    run_alg1,
)
from gnnaudit.clustering._fairden_support import (
    check_dc_tree,
    check_distinct_points,
    encode_fit_columns,
    excluded_points,
    unfair_message,
)
from gnnaudit.clustering.fair_spectral import FairEmbedding
from gnnaudit.clustering.fairden_candidates import (
    DENSITY_WARNING_SHARE,
    clustered_scores,
    rule_warnings,
)
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops.dc_tree import DCTree

__all__ = ["FairDen", "BALANCE_WARNING_THRESHOLD", "DENSITY_WARNING_SHARE", "PARETO_STEPS"]

logger = logging.getLogger(__name__)

#: ``solver="auto"`` uses the dense paper construction up to this many points.
AUTO_DENSE_MAX_N = 1000
#: ``solver="dense"`` refuses more points than this (``O(n^3)`` time, ``O(n^2)`` memory).
DENSE_MAX_N = 5000
#: ``fit`` warns when the fitted clustering's balance is below this value.
BALANCE_WARNING_THRESHOLD = 0.5

_SEED = Satisfies(
    lambda v: v is None or isinstance(v, np.random.RandomState) or Integer(0, 2**32 - 1).accepts(v),
    "None, an integer seed in [0, 2**32 - 1] or a numpy RandomState",
)
_BOOL = Satisfies(lambda v: isinstance(v, bool | np.bool_), "True or False")


class FairDen(DenseInputTagsMixin, ClusterMixin, BaseEstimator):
    """Fair density-based clustering (FairDen), a scikit-learn clusterer.

    ``FairDen(...).fit(X, sensitive_features=s)`` clusters the rows of ``X`` so that every
    cluster is balanced w.r.t. the sensitive attribute(s) ``s`` (fairlearn's naming).

    Parameters
    ----------
    n_clusters:
        Number ``k`` of non-noise clusters wanted (``>= 1``; 1 puts every point in one cluster).
    min_samples:
        ``minPts`` (:math:`\\mu`) of the dc-distance and the noise threshold (scikit-learn's
        ``DBSCAN`` name). Default ``max(2, 2 d_n - 1)`` with ``d_n`` the number of numerical
        features (Schubert et al.). ``min_pts=`` is a deprecated spelling (removed in 0.3.0).
    solver:
        ``"dense"`` (paper's Z / Q construction, ``n <= 5000``), ``"matrix_free"`` (eigsh on a
        projected ``LinearOperator``, no ``n x n`` array) or ``"auto"`` (dense up to 1,000
        points).
    random_state:
        Seed of k-means and of the eigensolver's start vector.
    min_group_size:
        ``None`` (default): a combined sensitive group smaller than ``n_clusters`` is an error.
        An int ``m``: points of groups smaller than ``m`` are excluded (label -1).
    n_init:
        k-means restarts.
    rounding:
        How the relaxed embedding becomes clusters (module docstring). ``"repair"``
        (default): the paper's partition when it reaches ``min_balance``, else the repair
        candidate the rule below picks. ``"pareto"``: the same rule over the repair paths
        evaluated in any case, the candidates in ``pareto_front_``. ``"kmeans"``: the paper's
        Alg. 1 exactly. ``"balanced"``: exact group quotas in every cluster (balance near 1).
    min_balance:
        Balance target of ``"repair"`` and ``"pareto"``, in ``[0, 1]`` (default 0.8, in the
        spirit of the four-fifths rule). It targets ``balance_``, the **mean** over the
        clusters; the worst cluster (``min_cluster_balance_``) can sit below it.
    min_dcsi_share:
        Share of the paper rounding's DCSI the choice keeps, in ``[0, 1]`` (default 0.7).
        The rule: among the candidates whose balance reaches ``min_balance``, the one with
        the highest DCSI (ties: higher balance, less noise, fewer moves). When that one
        keeps less than ``min_dcsi_share`` of the paper rounding's DCSI (its clusters touch:
        it is no longer density-based), or no candidate reaches ``min_balance``, the most
        balanced candidate that keeps ``min_dcsi_share`` instead, and a ``UserWarning``
        gives both candidates' balance and DCSI and the ``min_balance`` (with
        ``min_dcsi_share=0``) that forces the other. ``0`` makes ``min_balance`` a hard
        target. The choice is never dominated (higher or equal balance and DCSI, one
        higher) by a candidate in ``candidates_``.
    max_noise:
        Share of the clustered points the noise path may drop, in ``[0, 1]`` (default
        0.1); it drops surplus points only to reach ``min_balance``, the fewest that do.
        ``0`` turns the noise path off.
    noise_loop:
        ``"fixed"`` (default, Alg. 1 line 14 as published): when fewer than ``n_clusters``
        clusters have ``minPts`` points, k-means runs again with ``k + 1`` clusters on the same
        embedding. ``"recompute"``: the embedding is recomputed with ``k + 1`` eigenvectors.
    progress:
        Show a tqdm progress bar over the stages.

    Attributes
    ----------
    labels_ : (n,) cluster ids ``0..n_clusters_-1``, noise and excluded points -1.
    n_clusters_ : number of non-noise clusters found.
    k_ : the ``k`` (k-means clusters) of the final Alg. 1 iteration.
    embedding_ : (n_used, n_clusters) the spectral embedding ``H`` of the clustered points
        (``(n_used, k_)`` with ``noise_loop="recompute"``; one constant column for
        ``n_clusters=1``).
    eigenvalues_ : its constrained generalised eigenvalues (the smallest ones).
    rounding_ : the rounding that produced ``labels_``: ``"kmeans"`` (the paper's labels,
        also when a repair was not needed), ``"repair"``, ``"pareto"`` or ``"balanced"``.
    repair_step_ : the step ``t`` of the chosen repair path (0: the paper's labels; ``nan``
        for ``"kmeans"`` / ``"balanced"``).
    repair_path_ : the chosen repair path, ``"exchange"`` (cluster sizes kept),
        ``"min_moves"`` (fewest moves) or ``"noise"`` (surplus points dropped;
        :mod:`gnnaudit.clustering.fairden_repair`); ``None`` when the paper's labels are kept.
    balance_ : Eq. 6's balance of ``labels_`` over the combined groups on the clustered
        points: the mean over the clusters (what ``min_balance`` targets).
    min_cluster_balance_ : the balance of the worst cluster (same definition).
    dcsi_ : DCSI of ``labels_`` on the clustered points, numerical features, squared
        distances (as the paper's tables), with ``minPts``.
    noise_ratio_ : share of all points labelled -1 (Alg. 1's small clusters, excluded
        points, points the noise path dropped).
    paper_labels_, paper_balance_, paper_dcsi_ : the same for the paper's rounding (Alg. 1).
    candidates_ : ``"repair"`` / ``"pareto"`` (else ``None``): DataFrame, one row per
        candidate, with ``path``, ``t``, ``n_moved``, ``n_noise``, ``noise_ratio``,
        ``balance``, ``min_cluster_balance``, ``dcsi``, ``dcsi_share`` (of the paper's),
        ``reaches`` (``min_balance``), ``keeps_density`` (``min_dcsi_share``), ``pareto``
        (not dominated in balance, DCSI and noise) and ``chosen``; row 0 is the paper's
        rounding, the only row when ``"repair"`` kept it; ``None`` also with one group or
        one cluster.
    candidate_labels_ : ``(len(candidates_), n)`` labels of every candidate, or ``None``.
    pareto_front_ : ``rounding="pareto"`` only (else ``None``): ``candidates_``.
    groups_ : (n,) combined sensitive group code of every point.
    group_values_ : the combined sensitive values of the codes (one row per group).
    excluded_ : (n,) bool, points left out for belonging to a too-small group.
    dc_tree_ : the fitted :class:`~gnnaudit.graph_ops.DCTree` (of the used points).
    min_samples_ : the ``minPts`` used (``min_pts_``: deprecated alias).
    timings_ : seconds per stage (``dc_tree``, ``affinity``, ``eigensolver``, ``kmeans``,
        ``rounding``, ``metrics``; eigensolver and k-means summed over the Alg. 1 iterations).
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "n_clusters": [Integer(1, None)],
        "min_samples": [Integer(1, None), None],
        "solver": [Options("auto", "dense", "matrix_free")],
        "random_state": [_SEED],
        "min_group_size": [Integer(1, None), None],
        "n_init": [Integer(1, None)],
        "rounding": [Options("repair", "pareto", "kmeans", "balanced")],
        "min_balance": [Real(0.0, 1.0)],
        "min_dcsi_share": [Real(0.0, 1.0)],
        "max_noise": [Real(0.0, 1.0)],
        "noise_loop": [Options("fixed", "recompute")],
        "progress": [_BOOL],
    }

    min_pts = deprecated_attribute("min_pts", "min_samples")
    min_pts_ = deprecated_attribute("min_pts_", "min_samples_")

    @renamed_keywords(deprecated={"min_pts": "min_samples"})
    def __init__(  # noqa: PLR0913  # estimator: mirrors its documented parameters
        self,
        n_clusters: int = 2,
        *,
        min_samples: int | None = None,
        solver: Literal["auto", "dense", "matrix_free"] = "auto",
        random_state: int | np.random.RandomState | None = 0,
        min_group_size: int | None = None,
        n_init: int = 10,
        rounding: Literal["repair", "pareto", "kmeans", "balanced"] = "repair",
        min_balance: float = 0.8,
        min_dcsi_share: float = 0.7,
        max_noise: float = 0.1,
        noise_loop: Literal["fixed", "recompute"] = "fixed",
        progress: bool = False,
    ) -> None:
        self.n_clusters = n_clusters
        self.min_samples = min_samples
        self.solver = solver
        self.random_state = random_state
        self.min_group_size = min_group_size
        self.n_init = n_init
        self.rounding = rounding
        self.min_balance = min_balance
        self.min_dcsi_share = min_dcsi_share
        self.max_noise = max_noise
        self.noise_loop = noise_loop
        self.progress = progress

    def fit(
        self,
        X: Any,
        y: Any = None,
        *args: Any,
        sensitive_features: Any = None,
        categorical: Any = None,
        dc_tree: DCTree | None = None,
        sensitive: Any = None,
    ) -> FairDen:
        """Cluster ``X`` (n, d_n numerical) fairly w.r.t. ``sensitive_features``; returns ``self``.

        Warns (``UserWarning``) when the fitted ``balance_`` is below
        :data:`BALANCE_WARNING_THRESHOLD` (0.5), naming the group-pure clusters (or the least
        balanced ones) and the remedy.

        Args:
            X: numerical features (array or DataFrame of numeric columns), validated by
                scikit-learn.
            y: ignored (scikit-learn convention). Deprecated: ``fit(X, s)`` with the sensitive
                attribute in ``y``'s place still reads it as ``sensitive_features`` when that
                is not given, with a ``FutureWarning``; so does a third positional argument
                as ``categorical``.
            sensitive_features: ``(n,)`` or ``(n, a)`` sensitive attribute(s), any hashable
                values; the combined groups (tuples of all values) are balanced. ``None``:
                one group, i.e. plain FairDen clustering without the fairness constraint, with
                a ``UserWarning``. ``sensitive=`` is accepted as an alias.
            categorical: ``(n, d_c)`` categorical attributes (any hashable codes), compared
                with Goodall1 (Eq. 15).
            dc_tree: a fitted :class:`~gnnaudit.graph_ops.DCTree` of the clustered points built
                beforehand (``X``, or ``X`` without the points ``min_group_size`` excludes),
                with ``min_samples`` equal to this estimator's ``minPts`` (capped at the number of
                points); its core distances and MST weights are checked against ``X``
                (:class:`~gnnaudit.errors.InvalidInputError` when they do not match).

        Raises:
            InvalidInputError: a parameter or an input outside what is allowed (named).
            InfeasibleError: a sensitive group smaller than ``n_clusters``, or fewer distinct
                points than ``n_clusters``.
        """
        if args:
            if len(args) > 1:
                raise TypeError(
                    f"FairDen.fit takes at most 3 positional arguments (X, y, categorical), "
                    f"got {2 + len(args)}"
                )
            if categorical is not None:
                raise InvalidInputError("categorical was given both positionally and by name")
            warnings.warn(
                "passing categorical positionally to FairDen.fit is deprecated; use "
                "fit(X, sensitive_features=s, categorical=c)",
                FutureWarning,
                stacklevel=2,
            )
            categorical = args[0]
        sensitive_features = resolve_alias(
            "sensitive_features", sensitive_features, "sensitive", sensitive, where="FairDen.fit: "
        )
        if sensitive_features is None and y is not None:
            warnings.warn(
                "FairDen.fit(X, sensitive) is deprecated: the second positional argument is "
                "scikit-learn's y and will be ignored in a future release; pass "
                "fit(X, sensitive_features=sensitive)",
                FutureWarning,
                stacklevel=2,
            )
            sensitive_features = y
        validate_parameters(self)
        return self._fit(self._inputs(X, sensitive_features, categorical), dc_tree)

    def _inputs(self, X: Any, sensitive: Any, categorical: Any) -> FitInputs:
        """Validate the data (sets only ``n_features_in_`` / ``feature_names_in_``, through
        scikit-learn's ``validate_data``) and derive the groups and the used points."""
        X = validate_fit_input(self, X, min_samples=2)
        n, d_n = X.shape
        groups, group_values, cat = encode_fit_columns(sensitive, categorical, n)
        min_samples = self.min_samples if self.min_samples is not None else max(2, 2 * d_n - 1)
        excluded = excluded_points(groups, self.min_group_size)
        used = np.flatnonzero(~excluded)
        g_used = np.unique(groups[used], return_inverse=True)[1].reshape(-1)
        k0 = self.n_clusters
        used_sizes = np.bincount(g_used)
        if used_sizes.min() < k0:
            raise InfeasibleError(
                f"a balanced clustering into n_clusters={k0} clusters needs every combined "
                f"sensitive group to have at least {k0} members; group sizes are "
                f"{used_sizes.tolist()}. Lower n_clusters or pass min_group_size={k0} to "
                "exclude the small groups (paper Sec. 3.3)"
            )
        check_distinct_points(X[used], None if cat is None else cat[used], k0)
        return FitInputs(X, groups, group_values, cat, min_samples, excluded, used, g_used)

    def _fit(self, inp: FitInputs, dc_tree: DCTree | None) -> FairDen:
        k0, m = self.n_clusters, inp.used.size
        if inp.g_used.max() == 0:
            logger.warning("only one sensitive group: FairDen reduces to unconstrained clustering")
        solver = self.solver
        if solver == "auto":
            solver = "dense" if m <= AUTO_DENSE_MAX_N else "matrix_free"
        if solver == "dense" and m > DENSE_MAX_N:
            raise InvalidInputError(
                f"solver='dense' is limited to n <= {DENSE_MAX_N} points, got {m}; "
                "use solver='matrix_free'"
            )
        timings = dict.fromkeys(("dc_tree", "affinity", "eigensolver", "kmeans"), 0.0)
        bar = tqdm(total=3, desc="FairDen", disable=not self.progress, leave=False)
        t0 = time.perf_counter()
        Xu = inp.X[inp.used]
        if dc_tree is None:
            tree = DCTree(min_samples=min(inp.min_samples, m), progress=self.progress).fit(Xu)
        else:
            tree = check_dc_tree(dc_tree, Xu, min(inp.min_samples, m), inp.X.shape[0])
        timings["dc_tree"] = time.perf_counter() - t0
        bar.update()
        if k0 == 1:
            alg = Alg1Result(
                np.zeros(m, dtype=np.int64),
                np.ones(1, dtype=bool),
                1,
                FairEmbedding(np.full((m, 1), 1.0 / np.sqrt(m)), np.zeros(1)),
            )
        else:
            alg = run_alg1(self, inp, tree, solver, timings, bar)
        bar.close()
        self._round_and_finish(inp, tree, alg, timings)
        self.solver_ = solver
        return self

    def _round_and_finish(
        self, inp: FitInputs, tree: DCTree, alg: Alg1Result, timings: dict[str, float]
    ) -> None:
        """Round (module docstring), relabel, score and set the fitted attributes."""
        t0 = time.perf_counter()
        paper = relabel(alg.lab, alg, inp)
        paper_sc = clustered_scores(inp.X, paper, inp.groups, inp.min_samples)
        timings["metrics"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        labels, used_rounding, step = paper, "kmeans", float("nan")
        self.repair_path_: str | None = None
        self.candidates_: pd.DataFrame | None = None
        self.candidate_labels_: np.ndarray | None = None
        outcome = None
        one_group = inp.g_used.max() == 0 or self.n_clusters == 1
        if self.rounding == "balanced" and not one_group:
            lab, used_rounding = balanced_rounding(alg, inp.g_used)
            labels = relabel(lab, alg, inp)
        elif self.rounding in ("repair", "pareto"):
            step = 0.0
            if not one_group:
                outcome = repair_rounding(self, inp, tree, alg, alg.big[alg.lab], paper_sc)
                labels, step, self.repair_path_ = outcome.labels, outcome.t, outcome.path
                self.candidates_, self.candidate_labels_ = outcome.frame, outcome.all_labels
            repaired = self.repair_path_ is not None
            used_rounding = "pareto" if self.rounding == "pareto" else "kmeans"
            used_rounding = "repair" if repaired and self.rounding == "repair" else used_rounding
        self.pareto_front_ = self.candidates_ if self.rounding == "pareto" else None
        timings["rounding"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        same = np.array_equal(labels, paper)
        sc = paper_sc if same else clustered_scores(inp.X, labels, inp.groups, inp.min_samples)
        timings["metrics"] += time.perf_counter() - t0
        self.paper_labels_, self.paper_balance_, self.paper_dcsi_ = (
            paper,
            paper_sc.balance,
            paper_sc.dcsi,
        )
        self.labels_, self.balance_, self.dcsi_ = labels, sc.balance, sc.dcsi
        self.min_cluster_balance_, self.noise_ratio_ = sc.min_cluster_balance, sc.noise_ratio
        self.n_clusters_ = int(alg.big.sum())
        self.k_ = alg.k
        self.embedding_ = alg.emb.H
        self.eigenvalues_ = alg.emb.eigenvalues
        self.groups_ = inp.groups
        self.group_values_ = inp.group_values
        self.excluded_ = inp.excluded
        self.dc_tree_ = tree
        self.min_samples_ = inp.min_samples
        self.timings_ = timings
        self.rounding_ = used_rounding
        self.repair_step_ = step
        self._warn(inp, outcome)

    def _warn(self, inp: FitInputs, outcome: RepairOutcome | None) -> None:
        """The fitted model's warnings: an unfair clustering; the repair rule's messages."""
        if self.balance_ < BALANCE_WARNING_THRESHOLD and inp.groups.max() > 0:
            msg = unfair_message(
                self.labels_,
                inp.groups,
                inp.group_values,
                self.balance_,
                BALANCE_WARNING_THRESHOLD,
                self.rounding,
            )
            warnings.warn(msg, UserWarning, stacklevel=5)
        if outcome is None:
            return
        for msg in rule_warnings(
            outcome.frame,
            outcome.choice,
            self.paper_balance_,
            self.paper_dcsi_,
            self.min_balance,
            self.min_dcsi_share,
        ):
            warnings.warn(msg, UserWarning, stacklevel=5)

    def fit_predict(self, X: Any, y: Any = None, *args: Any, **kwargs: Any) -> np.ndarray:
        """``fit(X, y, *args, **kwargs)`` and return ``labels_`` (noise and excluded: -1)."""
        return self.fit(X, y, *args, **kwargs).labels_

    def __sklearn_is_fitted__(self) -> bool:
        """scikit-learn's fitted check: ``labels_`` is set."""
        return getattr(self, "labels_", None) is not None
