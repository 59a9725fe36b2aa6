"""ExDBSCAN: valid, proximal and diverse counterfactuals for a DBSCAN clustering.

Given a point :math:`x` and a target cluster :math:`C` of a fixed DBSCAN clustering, ExDBSCAN
selects :math:`k` reference core points :math:`S \\subseteq V_C` minimising the energy
(paper Eq. 2-3, normalisation App. A.4)

.. math::

    E(S) = \\alpha \\sum_{s \\in S} d(x, s)^2
         + (1 - \\alpha) \\frac{d_{\\min}}{\\bar w} \\sum_{\\{s, t\\} \\subseteq S} \\frac{1}{D(s, t)},

with :math:`d` the metric of the clustering, :math:`d_{\\min}` the distance from :math:`x` to its
nearest eligible target core, :math:`\\bar w` the mean edge weight of the target core graph
and :math:`D` the shortest-path distance in it (:class:`~gnnaudit.graph_ops.CoreGraph`).
The greedy solver starts with the nearest core (optimal for :math:`k = 1`, Prop. 3.3) and
adds the candidate of least energy; each step is one vector operation over all candidates and
one Dijkstra run from the newly selected core. Each reference core :math:`q` yields the
counterfactual (Eq. 4)

.. math::  c = q + \\varepsilon \\frac{x - q}{\\|x - q\\|},

placed strictly inside the ball (radius :math:`\\varepsilon (1 - 10^{-9})`) and verified with the
same exact distance computation as :meth:`CoreGraph.assign` -- nearest core in the target
cluster and within :math:`\\varepsilon` -- shrinking toward the core until it holds, so validity
(Theorem 3.5) is guaranteed in floating point. (A sphere point can lie nearer to a core of
another cluster than to :math:`q`; "nearest core decides", so such a counterfactual is moved
toward :math:`q` -- or dropped and replaced if even the closest admissible point fails.)
Without a target (App. A.2.3) the candidates are the cores of every other cluster and
repulsion acts only within a cluster.

Note on units: the attraction term scales as :math:`L^2` and the repulsion term as
:math:`L^{-1}` (:math:`d_{\\min}/\\bar w` is dimensionless), so rescaling the data by
:math:`s` changes their balance by :math:`s^3`; standardise features first (as the paper does).

Cost per query (k counterfactuals, n_C candidate cores, E_C target-graph edges):
O(n_C d) distances, k-1 Dijkstra runs O(E_C + n_C log n_C), O(k n_C) greedy updates; memory
O(n_C (d + k)).

Modules: this one holds the estimator; one query, once its point, targets and constraints are
resolved, runs in :mod:`gnnaudit.clustering.exdbscan_query`; the energy and its minimisers live
in :mod:`gnnaudit.clustering._exdbscan_energy`, the placement and validity check in
:mod:`gnnaudit.clustering._exdbscan_placement`, the result type in
:mod:`gnnaudit.clustering.counterfactual_set`.
"""

from __future__ import annotations

import logging
import numbers
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin

from gnnaudit._distributed import check_client, map_blocks, n_workers, split_blocks
from gnnaudit._params import Integer, Options, Real, Satisfies, validate_parameters
from gnnaudit._validation import check_array, check_bool, check_choice, check_int
from gnnaudit.clustering._estimator_input import (
    DenseInputTagsMixin,
    EstimatorNotFittedError,
    validate_fit_input,
    validate_predict_input,
)
from gnnaudit.clustering.counterfactual_set import CounterfactualSet
from gnnaudit.clustering.exdbscan_constraints import parse_constraints
from gnnaudit.clustering.exdbscan_query import SelectionRule, counterfactual_set
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops._distances import canonical_metric
from gnnaudit.graph_ops.core_graph import CoreGraph

__all__ = ["ExDBSCAN", "CounterfactualSet", "STRATEGIES"]

logger = logging.getLogger(__name__)

STRATEGIES: tuple[str, ...] = ("energy", "random", "nearest", "furthest")

#: Rows per block of :meth:`ExDBSCAN.predict` (memory: this many rows times 4 neighbours).
PREDICT_CHUNK = 65_536


def _known_metric(value: Any) -> bool:
    return isinstance(value, str) and bool(canonical_metric(value))


class ExDBSCAN(DenseInputTagsMixin, ClusterMixin, BaseEstimator):
    """Counterfactual explanations of a DBSCAN clustering (ExDBSCAN, scikit-learn style).

    Parameters
    ----------
    eps, min_samples, metric
        DBSCAN parameters (ignored for the clustering when ``fit(X, dbscan=fitted)`` is given:
        the fitted estimator's own parameters are used). ``metric`` is one of
        ``euclidean, manhattan, chebyshev, cosine`` (App. A.5).
    n_counterfactuals : int
        Default ``k``.
    strategy : {"energy", "random", "nearest", "furthest"}
        ``energy``: greedy minimisation of :math:`E` (paper); ``random``: uniform reference
        cores (``random_state``); ``nearest``: attraction only (the k nearest cores);
        ``furthest``: repulsion only (greedy from a random first core).
    alpha : float in [0, 1]
        Weight of the attraction term.
    random_state : int
        Seed of the ``random`` and ``furthest`` strategies (each query reseeds it).
    max_exact_combinations : int
        Largest number of subsets ``explain(exact=True)`` enumerates.

    Notes
    -----
    Parameters are checked declaratively at the start of ``fit`` (``_parameter_constraints``,
    :mod:`gnnaudit._params`). ``predict(X)`` assigns new points to the cluster of their nearest
    core point within ``eps`` (else ``-1``), the rule the counterfactuals' validity rests on.

    Attributes
    ----------
    labels_, core_sample_indices_ : sklearn DBSCAN semantics.
    core_graph_ : :class:`~gnnaudit.graph_ops.CoreGraph`
    eps_, min_samples_, metric_ : parameters of the explained clustering.
    n_features_in_, feature_names_in_
    """

    def __init__(
        self,
        eps: float = 0.5,
        *,
        min_samples: int = 5,
        metric: str = "euclidean",
        n_counterfactuals: int = 5,
        strategy: str = "energy",
        alpha: float = 0.5,
        random_state: int | None = 0,
        max_exact_combinations: int = 500_000,
    ) -> None:
        self.eps = eps
        self.min_samples = min_samples
        self.metric = metric
        self.n_counterfactuals = n_counterfactuals
        self.strategy = strategy
        self.alpha = alpha
        self.random_state = random_state
        self.max_exact_combinations = max_exact_combinations

    _parameter_constraints: dict[str, list[Any]] = {
        "eps": [Real(0, None, closed="neither")],
        "min_samples": [Integer(1, None)],
        "metric": [Satisfies(_known_metric, "one of 'euclidean', 'manhattan', 'chebyshev', "
                             "'cosine' (or a scipy / scikit-learn alias of one)")],
        "n_counterfactuals": [Integer(1, None)],
        "strategy": [Options(*STRATEGIES)],
        "alpha": [Real(0, 1)],
        "random_state": [Integer(0, 2**32 - 1), None],
        "max_exact_combinations": [Integer(1, None)],
    }  # fmt: skip

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        X: Any,
        y: Any = None,
        dbscan: Any = None,
        feature_names: Sequence[str] | None = None,
        *,
        core_graph: CoreGraph | None = None,
    ) -> ExDBSCAN:
        """Cluster ``X`` with DBSCAN and build its core graph; returns ``self``.

        ``X`` may be a pandas DataFrame of numeric columns (its columns name the features, as
        do ``feature_names``). ``y`` is ignored. Input is validated by scikit-learn
        (:class:`~gnnaudit.errors.InvalidInputError` for sparse, complex, non-numeric,
        non-finite or ragged input).
        The clustering comes from, in this order of preference:

        * ``core_graph``: a :class:`~gnnaudit.graph_ops.CoreGraph` built beforehand (e.g.
          ``CoreGraph.from_dbscan(X, eps, min_samples, metric)``); it must have been built on
          ``X`` (same rows, same values) with this estimator's ``eps``, ``min_samples`` and
          ``metric``, else :class:`~gnnaudit.errors.InvalidInputError`;
        * ``dbscan``: a fitted ``sklearn.cluster.DBSCAN`` (its own parameters are used);
        * otherwise DBSCAN runs here with the estimator's parameters.
        """
        validate_parameters(self)
        X = validate_fit_input(self, X, feature_names=feature_names)
        if core_graph is not None:
            if dbscan is not None:
                raise InvalidInputError(
                    "pass either dbscan= (a fitted sklearn DBSCAN) or core_graph= (a CoreGraph), "
                    "not both"
                )
            cg = self._check_core_graph(core_graph, X)
        elif dbscan is None:
            cg = CoreGraph.from_dbscan(X, self.eps, self.min_samples, self.metric)
        else:
            cg = CoreGraph.from_fitted(X, dbscan)
        self.core_graph_ = cg
        self.labels_ = cg.labels.copy()
        self.core_sample_indices_ = np.flatnonzero(cg.core_mask)
        self.eps_, self.min_samples_, self.metric_ = cg.eps, cg.min_samples, cg.metric
        if cg.n_clusters == 0:
            warnings.warn(
                f"DBSCAN(eps={cg.eps}, min_samples={cg.min_samples}) found no cluster: every "
                "point is noise, so nothing can be explained",
                UserWarning,
                stacklevel=2,
            )
        return self

    def _check_core_graph(self, core_graph: Any, X: np.ndarray) -> CoreGraph:
        """``core_graph`` if it is a CoreGraph of ``X`` under this estimator's parameters."""
        if not isinstance(core_graph, CoreGraph):
            raise InvalidInputError(
                f"core_graph must be a gnnaudit.graph_ops.CoreGraph, got "
                f"{type(core_graph).__name__}"
            )
        if core_graph.X.shape != X.shape:
            raise InvalidInputError(
                f"core_graph was built on data of shape {core_graph.X.shape} but X has shape "
                f"{X.shape}"
            )
        if not np.array_equal(core_graph.X, X):
            raise InvalidInputError(
                "core_graph was built on other data than X (same shape, different values); "
                "build it with CoreGraph.from_dbscan(X, ...) on this X"
            )
        mine = {
            "eps": float(self.eps),
            "min_samples": int(self.min_samples),
            "metric": canonical_metric(self.metric),
        }
        theirs = {
            "eps": core_graph.eps,
            "min_samples": core_graph.min_samples,
            "metric": core_graph.metric,
        }
        for name, value in mine.items():
            if theirs[name] != value:
                raise InvalidInputError(
                    f"core_graph was built with {name}={theirs[name]!r} but this ExDBSCAN has "
                    f"{name}={value!r}; build the graph with the estimator's parameters or "
                    f"set_params({name}={theirs[name]!r})"
                )
        return core_graph

    def fit_predict(self, X: Any, y: Any = None, **kwargs: Any) -> np.ndarray:
        """``fit(X, **kwargs)`` and return ``labels_`` (DBSCAN labels, ``-1`` noise)."""
        return self.fit(X, **kwargs).labels_

    def predict(self, X: Any) -> np.ndarray:
        """Cluster of new points: the cluster of the nearest core point when it lies within
        ``eps_`` (distance ``<= eps_``, in the clustering's metric), else ``-1`` (noise) -- the
        assignment rule the validity of the counterfactuals rests on
        (:meth:`~gnnaudit.graph_ops.CoreGraph.assign`). Exact distance ties go to the lower
        cluster id.

        A training core point gets its own label back. A training border point gets its
        nearest core's cluster, which may differ from ``labels_`` (scikit-learn keeps the
        first cluster that reached it). Vectorised: a nearest-neighbour index over the core
        points, queried in blocks of :data:`PREDICT_CHUNK` rows, so memory is
        ``O(PREDICT_CHUNK)`` beyond the input and the output.
        """
        if getattr(self, "core_graph_", None) is None:
            raise EstimatorNotFittedError("ExDBSCAN is not fitted yet; call fit first")
        X = validate_predict_input(self, X)
        cg = self.core_graph_
        out = np.full(len(X), -1, dtype=np.int64)
        if cg.n_cores == 0:  # every point was noise: so is every new one
            return out
        for lo in range(0, len(X), PREDICT_CHUNK):  # one step per block of rows
            out[lo : lo + PREDICT_CHUNK] = cg.assign(X[lo : lo + PREDICT_CHUNK])
        return out

    def _feature_names(self) -> list[str]:
        if getattr(self, "feature_names_in_", None) is not None:
            return list(self.feature_names_in_)
        return [f"x{i}" for i in range(self.n_features_in_)]

    # ------------------------------------------------------------------ explaining
    def _resolve_point(self, x_or_index: Any) -> tuple[np.ndarray, int, bool]:
        cg = self.core_graph_
        if isinstance(x_or_index, (numbers.Integral,)) and not isinstance(x_or_index, bool):
            i = int(x_or_index)
            n = cg.X.shape[0]
            if not 0 <= i < n:
                raise InvalidInputError(f"x_or_index: index {i} is outside [0, {n - 1}]")
            return cg.X[i].copy(), int(cg.labels[i]), True
        if hasattr(x_or_index, "to_numpy"):
            x_or_index = x_or_index.to_numpy(dtype=np.float64)
        x = check_array("x", x_or_index, ndim=(1, 2))
        if x.ndim == 2:
            if x.shape[0] != 1:
                raise InvalidInputError(f"x must be one point, got shape {x.shape}")
            x = x[0]
        if x.shape[0] != self.n_features_in_:
            raise InvalidInputError(f"x must have {self.n_features_in_} features, got {x.shape[0]}")
        x = np.array(x, dtype=np.float64)
        return x, int(cg.assign(x)[0]), False

    def _resolve_targets(self, target: Any, source: int, x: np.ndarray, indexed: bool) -> list[int]:
        cg = self.core_graph_
        clusters = cg.clusters.tolist()
        if not clusters:
            raise InfeasibleError(
                f"the clustering has no cluster (DBSCAN eps={cg.eps}, min_samples="
                f"{cg.min_samples} labelled every point noise); nothing to explain toward"
            )
        if target is None:
            others = [c for c in clusters if c != source]
            if not others:
                raise InfeasibleError(
                    f"the point is in cluster {source}, the only cluster; there is no other "
                    "cluster to explain toward"
                )
            return others
        if isinstance(target, bool) or not isinstance(target, numbers.Integral):
            raise InvalidInputError(f"target must be a cluster id (int) or None, got {target!r}")
        target = int(target)
        if target == -1:
            raise InvalidInputError(
                f"target=-1 is noise, not a cluster; allowed targets are {clusters}"
            )
        if target not in clusters:
            raise InvalidInputError(f"unknown target cluster {target}; clusters are {clusters}")
        if target == source:
            what = "the point's own cluster" if indexed else "the cluster the point is already in"
            raise InvalidInputError(
                f"target={target} is {what}; choose another cluster among "
                f"{[c for c in clusters if c != source]} (or target=None)"
            )
        return [target]

    def explain(
        self,
        x_or_index: Any,
        target: int | None = None,
        n_counterfactuals: int | None = None,
        immutable: Any = (),
        monotone: dict[Any, Any] | None = None,
        correlated: Iterable[tuple[Any, Any, int]] | None = None,
        refine: str | None = None,
        exact: bool = False,
    ) -> CounterfactualSet:
        """Counterfactuals of a point (data index or coordinates) toward ``target``.

        ``target=None`` explains toward any other cluster (App. A.2.3). Constraints:
        ``immutable`` (feature names or indices), ``monotone={"age": "increase"}`` or with a
        bound ``{"age": ("decrease", 5.0)}``, ``correlated=[("rooms", "bedrooms", +1)]``.
        ``refine="swap"`` improves the greedy set by best-improvement swaps (App. A.3);
        ``exact=True`` returns the exhaustive minimum of :math:`E` (small candidate sets).

        If fewer eligible cores than ``n_counterfactuals`` exist, fewer counterfactuals are
        returned and a ``UserWarning`` is issued.

        Raises
        ------
        InvalidInputError
            bad point, target (noise, unknown, the point's own cluster) or constraint.
        InfeasibleError
            no cluster to explain toward, or no eligible core under the constraints (the
            message names the excluding constraint).
        """
        if getattr(self, "core_graph_", None) is None:
            raise EstimatorNotFittedError(
                "ExDBSCAN is not fitted yet (missing core_graph_); call fit first"
            )
        cg = self.core_graph_
        k = self.n_counterfactuals if n_counterfactuals is None else n_counterfactuals
        k = check_int("n_counterfactuals", k, minimum=1)
        if refine is not None:
            check_choice("refine", refine, ("swap",))
        exact = check_bool("exact", exact)
        x, source, indexed = self._resolve_point(x_or_index)
        targets = self._resolve_targets(target, source, x, indexed)
        cons = parse_constraints(
            self.n_features_in_,
            self._feature_names() if getattr(self, "feature_names_in_", None) is not None else None,
            immutable,
            monotone,
            correlated,
        )
        rule = SelectionRule(
            k=k,
            strategy=self.strategy,
            alpha=float(self.alpha),
            random_state=self.random_state,
            refine=refine,
            exact=bool(exact),
            max_exact_combinations=self.max_exact_combinations,
        )
        return counterfactual_set(cg, x, source, targets, cons, self._feature_names(), rule)

    def explain_many(
        self,
        indices: Iterable[Any],
        target: int | None = None,
        progress: bool = False,
        client: Any = None,
        **kwargs: Any,
    ) -> list[CounterfactualSet]:
        """:meth:`explain` for a batch of points (indices or coordinate rows), same options.

        ``client``: a ``dask.distributed.Client`` (optional extra ``gnnaudit[distributed]``);
        the points are split into contiguous blocks explained on its workers (the fitted
        estimator is scattered once). The answers are the same objects, in the same order, as
        without a client (each query is independent and seeded alike); warnings raised on the
        workers are re-issued here, and the first error is raised as it would be here.
        """
        from tqdm.auto import tqdm

        client = check_client(client)
        items = list(indices)
        if client is None or len(items) < 2:
            return [
                self.explain(i, target=target, **kwargs)
                for i in tqdm(items, desc="ExDBSCAN", disable=not progress)
            ]
        if getattr(self, "core_graph_", None) is None:
            raise EstimatorNotFittedError(
                "ExDBSCAN is not fitted yet (missing core_graph_); call fit first"
            )
        blocks = split_blocks(items, 4 * n_workers(client))
        parts = map_blocks(client, _explain_block, blocks, self, target, kwargs)
        out: list[CounterfactualSet] = []
        for answers, caught in parts:
            for category, message in caught:
                warnings.warn(message, category, stacklevel=2)
            out.extend(answers)
        return out


def _explain_block(
    items: list[Any], est: ExDBSCAN, target: int | None, kwargs: dict[str, Any]
) -> tuple[list[CounterfactualSet], list[tuple[type[Warning], str]]]:
    """Worker task of :meth:`ExDBSCAN.explain_many`: the answers of a block of points and the
    warnings they raised (category, message), in order."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        answers = [est.explain(i, target=target, **kwargs) for i in items]
    return answers, [(w.category, str(w.message)) for w in caught]
