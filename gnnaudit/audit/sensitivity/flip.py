r"""Counterfactual sensitivity of a node classifier to one feature, or to every feature.

The intervention (NIFTY's counterfactual test, Agarwal et al. 2021, generalised): change a
feature's value and re-predict. For an audited node ``v`` with factual prediction
:math:`\hat y_v` and a counterfactual input :math:`\tilde X`,

.. math::

    \text{flip}_v = \mathbb I\bigl[\arg\max M(\tilde X)_v \neq \hat y_v\bigr], \qquad
    \Delta p_v = \bigl|\operatorname{softmax}(M(\tilde X)_v)_{\hat y_v}
                 - \operatorname{softmax}(M(X)_v)_{\hat y_v}\bigr|,

and the statistics are the **flip rate** :math:`\frac1m \sum_v \text{flip}_v` (the share of
audited nodes whose predicted class changes), with the exact Clopper-Pearson interval
(:mod:`gnnaudit.audit.intervals`; 0 flips out of m give an upper bound of about 3.7/m at 95%,
never ``[0, 0]``), and the mean probability change :math:`\frac1m \sum_v \Delta p_v` (a
continuous secondary effect) with a percentile bootstrap interval over nodes
(:mod:`gnnaudit.audit.bootstrap`).

Interventions (:mod:`gnnaudit.audit.interventions`): a binary feature is flipped; a categorical
column or a one-hot group is moved to **each** other value and a node counts as flipped when
**any** alternative changes its predicted class (:math:`\Delta p_v` is then the largest change);
a continuous column gets the opposite-quantile swap :math:`x \mapsto F^{-1}(1 - F(x))`.

Two scopes:

``scope="node"``
    Only the audited node's own value changes, each node alone: :math:`\tilde X` differs from
    :math:`X` in row ``v`` only. The result equals one forward pass per node (the oracle) at far
    lower cost: audited nodes more than L hops apart (L = receptive-field radius) share a forward
    pass on the full graph (:mod:`gnnaudit.audit.sensitivity.receptive_field`), so the number of passes per
    counterfactual value is the number of batches, at most :math:`\Delta + 1` (:math:`\Delta` =
    the most audited nodes within L hops of one audited node), instead of m. Full-graph passes
    keep every degree normalisation exact. L is ``num_hops`` or inferred from the model's
    ``MessagePassing`` submodules. **Exactness safeguard**: :data:`SAFEGUARD_NODES` seeded
    audited nodes are re-predicted with all audited features changed at once (in one pass
    when they are more than L hops apart, else in as few passes as keep them so); if the
    change moves the output of any node outside their L-hop neighbourhood (beyond a relative
    tolerance of 1e-5, for GPU rounding), or, with a single feature, the node's own output
    differs from its batched one, :class:`InvalidInputError` says the receptive field exceeds
    ``num_hops``. Above ``max_nodes`` audited nodes (default :data:`MAX_NODES`) a seeded uniform
    sample of ``max_nodes`` of them is audited: the interval then also covers the sampling
    (bootstrap over the sample estimates the rate of all audited nodes), and the number of
    passes stays near :math:`1 + \text{max\_nodes} \cdot b_L / n` for L-hop balls of ``b_L``
    nodes: a few passes on a graph of a million nodes.
``scope="graph"``
    Every node of the graph gets the changed value at once (for a categorical feature: every
    node is set to value ``t``, one world per value; node ``v`` compares the worlds
    ``t != x_v``); one forward pass per counterfactual value. The effect includes what reaches
    a node through message passing from its changed neighbours. ``max_nodes`` does not apply
    (one pass covers every node).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit._distributed import check_client
from gnnaudit._validation import MAX_RESAMPLES, check_choice, check_int
from gnnaudit.audit.bootstrap import bootstrap_mean, check_confidence
from gnnaudit.audit.intervals import binomial_interval, binomial_intervals
from gnnaudit.audit.interventions import (
    MAX_CATEGORIES,
    FeatureSpec,
    resolve_feature,
    resolve_features,
)
from gnnaudit.audit.sensitivity.engine import (
    SAFEGUARD_NODES,
    AuditedGraph,
    FlipArrays,
    prepare,
    run_interventions,
    seeded,
)
from gnnaudit.audit.sensitivity.options import MAX_NODES, FlipOptions
from gnnaudit.audit.sensitivity.receptive_field import BatchPlan
from gnnaudit.errors import InvalidInputError

__all__ = [
    "FlipResult",
    "counterfactual_flip",
    "sensitivity_results",
    "sensitivity_table",
    "feature_sensitivity",
    "SCOPES",
    "MAX_NODES",
    "SAFEGUARD_NODES",
    "SENSITIVITY_COLUMNS",
    "FlipOptions",
]

logger = logging.getLogger(__name__)

SCOPES = ("node", "graph")
#: columns of :func:`feature_sensitivity`
SENSITIVITY_COLUMNS = [
    "feature",
    "kind",
    "effect",
    "ci_low",
    "ci_high",
    "rank",
    "prob_change",
    "prob_ci_low",
    "prob_ci_high",
    "n_nodes",
    "n_alternatives",
    "n_forward",
]
#: first seed stream of the bootstrap (streams 0-2: sample, batching plan, safeguard)
_BOOT = 3


@dataclass
class FlipResult:
    """Counterfactual flip of one feature (see the module docstring).

    Attributes
    ----------
    feature, kind, columns : the feature's name, kind and columns in ``data.x``.
    scope : ``"node"`` or ``"graph"``.
    rate, ci_low, ci_high : flip rate and its exact (Clopper-Pearson) interval.
    prob_change, prob_ci_low, prob_ci_high : mean absolute change of the softmax probability of
        the factual predicted class, and its interval.
    changed : node ids whose predicted class changes.
    nodes, flipped, prob_delta : audited node ids and, per node, the flip indicator and the
        probability change.
    by_group : ``group, size, rate, ci_low, ci_high`` per sensitive group (None without a
        sensitive attribute).
    n_nodes : audited nodes used (after sampling); n_audited : before sampling.
    n_forward : forward passes run for this result (the factual pass and the safeguard's
        passes included when :func:`counterfactual_flip` ran them).
    n_batches, num_hops : node-scope batches and the radius they are exact for (None at graph
        scope).
    extra : ``n_alternatives`` (counterfactual values per node) and ``batch`` (node scope: the
        batch of each audited node, aligned with ``nodes``).
    """

    feature: str
    kind: str
    columns: tuple[int, ...]
    scope: str
    rate: float
    ci_low: float
    ci_high: float
    prob_change: float
    prob_ci_low: float
    prob_ci_high: float
    changed: np.ndarray
    nodes: np.ndarray
    flipped: np.ndarray
    prob_delta: np.ndarray
    by_group: pd.DataFrame | None
    n_nodes: int
    n_audited: int
    n_forward: int
    n_batches: int | None
    num_hops: int | None
    confidence: float
    n_boot: int
    sensitive_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def sampled(self) -> bool:
        """True when a sample of the audited nodes was used (``max_nodes``)."""
        return self.n_nodes < self.n_audited

    def to_frame(self) -> pd.DataFrame:
        """One row for all audited nodes (``group = "all"``) then one per sensitive group:
        ``feature, scope, group, size, rate, ci_low, ci_high``."""
        rows = [
            {
                "group": "all",
                "size": self.n_nodes,
                "rate": self.rate,
                "ci_low": self.ci_low,
                "ci_high": self.ci_high,
            }
        ]
        if self.by_group is not None:
            rows += self.by_group.assign(group=self.by_group["group"].astype(str)).to_dict(
                orient="records"
            )
        frame = pd.DataFrame(rows, columns=["group", "size", "rate", "ci_low", "ci_high"])
        frame.insert(0, "scope", self.scope)
        frame.insert(0, "feature", self.feature)
        return frame


@dataclass(frozen=True)
class _Run:
    """What every feature's result of one :func:`sensitivity_results` call shares."""

    setup: AuditedGraph
    arrays: FlipArrays
    plan: BatchPlan | None
    scope: str
    n_boot: int
    random_state: int
    confidence: float


def _group_rates(flipped: np.ndarray, groups: Any, confidence: float) -> pd.DataFrame:
    """``group, size, rate, ci_low, ci_high`` of the flip indicator per group (groups sorted),
    exact binomial intervals (:mod:`gnnaudit.audit.intervals`)."""
    g = np.asarray(groups.detach().cpu().numpy() if hasattr(groups, "detach") else groups)
    labels, codes = np.unique(g, return_inverse=True)
    codes = codes.reshape(-1)
    sizes = np.bincount(codes, minlength=labels.size)
    hits = np.bincount(codes, weights=flipped.astype(np.float64), minlength=labels.size)
    lo, hi = binomial_intervals(np.round(hits), sizes, confidence)
    return pd.DataFrame(
        {
            "group": labels,
            "size": sizes.astype(np.int64),
            "rate": hits / sizes,
            "ci_low": lo,
            "ci_high": hi,
        }
    )


def _result(spec: FeatureSpec, f: int, run: _Run) -> FlipResult:
    """The :class:`FlipResult` of feature number ``f``: rates and bootstrap intervals (seed
    streams ``3 + 2 c`` overall and ``4 + 2 c`` by group, ``c`` = the feature's first column,
    so a feature's interval does not depend on which other features are audited with it)."""
    setup, arrays, plan, scope = run.setup, run.arrays, run.plan, run.scope
    n_boot, random_state, confidence = run.n_boot, run.random_state, run.confidence
    flipped, delta = arrays.flipped[f], arrays.delta[f]
    stream = _BOOT + 2 * min(spec.columns)
    rng = seeded(random_state, stream)
    n_flipped = int(np.count_nonzero(flipped))
    ci_low, ci_high = binomial_interval(n_flipped, int(flipped.size), confidence)
    prob = bootstrap_mean(delta, n_boot, rng, confidence)
    by_group = None
    if setup.groups is not None:
        by_group = _group_rates(flipped, setup.groups, confidence)
    return FlipResult(
        feature=spec.name,
        kind=spec.kind,
        columns=spec.columns,
        scope=scope,
        rate=n_flipped / flipped.size,
        ci_low=ci_low,
        ci_high=ci_high,
        prob_change=prob.estimate,
        prob_ci_low=prob.ci_low,
        prob_ci_high=prob.ci_high,
        changed=setup.nodes[flipped],
        nodes=setup.nodes,
        flipped=flipped,
        prob_delta=delta,
        by_group=by_group,
        n_nodes=int(setup.nodes.size),
        n_audited=int(setup.n_audited),
        n_forward=int(arrays.passes[f]),
        n_batches=None if plan is None else plan.n_batches,
        num_hops=None if plan is None else plan.num_hops,
        confidence=confidence,
        n_boot=n_boot,
        sensitive_name=setup.sensitive_name,
        extra={
            "n_alternatives": arrays.n_alternatives[f],
            "batch": None if plan is None else plan.colours,
        },
    )


def sensitivity_results(
    model: Any,
    data: Any,
    specs: list[FeatureSpec],
    mask: Any = None,
    scope: str = "node",
    n_boot: int = 1000,
    random_state: int = 0,
    options: FlipOptions | None = None,
) -> tuple[list[FlipResult], int]:
    """One :class:`FlipResult` per resolved feature (``specs`` from
    :func:`~gnnaudit.audit.interventions.resolve_features`), sharing the factual pass, the
    node-scope batching plan and the safeguard; ``options`` as in :func:`counterfactual_flip`.
    Returns ``(results, total_forward_passes)``; each result's ``n_forward`` counts its own
    counterfactual passes only.
    """
    opts = FlipOptions.resolve("sensitivity_results", options)
    scope = check_choice("scope", scope, SCOPES)
    n_boot = check_int("n_boot", n_boot, minimum=1, maximum=MAX_RESAMPLES)
    random_state = check_int("random_state", random_state, minimum=0)
    check_int("max_nodes", opts.max_nodes, minimum=1)
    confidence = check_confidence(opts.confidence)
    check_client(opts.client)
    if not specs:
        raise InvalidInputError("features must name at least one feature")
    setup = prepare(model, data, mask, scope, random_state, opts)
    arrays, plan, total = run_interventions(setup, data, specs, scope, random_state, opts)
    run = _Run(setup, arrays, plan, scope, n_boot, random_state, confidence)
    return [_result(spec, f, run) for f, spec in enumerate(specs)], total


def counterfactual_flip(
    model: Any,
    data: Any,
    feature: Any,
    mask: Any = None,
    scope: str = "node",
    n_boot: int = 1000,
    random_state: int = 0,
    *,
    kind: str = "auto",
    max_categories: int = MAX_CATEGORIES,
    options: FlipOptions | None = None,
    **option_kwargs: Any,
) -> FlipResult:
    """Share of audited nodes whose predicted class changes when ``feature`` is changed.

    Parameters
    ----------
    model : ``nn.Module`` / callable ``(x, edge_index) -> logits``, a ``NodeClassifier`` or a
        :class:`~gnnaudit.audit.model_adapter.ModelAdapter` (every call goes through one).
    data : PyG ``Data`` with ``x``, ``edge_index`` (``feature_names``, ``test_mask``,
        ``sensitive`` optional).
    feature : a column name, a column index, or a sequence of names forming a one-hot group.
    mask : audited nodes (bool mask or ids); default ``data.test_mask``, else every node.
    scope : ``"node"`` (each audited node's own value alone) or ``"graph"`` (every node at
        once); see the module docstring.
    n_boot : bootstrap resamples of the intervals.
    random_state : seed of the node sample, the batching priorities, the safeguard's nodes and
        the bootstrap.
    kind : ``"auto"`` (detected), or ``"binary"`` / ``"categorical"`` / ``"one-hot"`` /
        ``"continuous"`` to insist (a mismatch raises :class:`InvalidInputError`).
    max_categories : most values of an integer column treated as categorical.
    options, **option_kwargs : how the passes run, one
        :class:`~gnnaudit.audit.sensitivity.options.FlipOptions` (``num_hops``, ``max_nodes``
        (default 2000), ``sensitive``, ``forward_kwargs``, ``predict_fn``, ``device``,
        ``confidence``, ``base_logits``, ``progress``, ``client``), given as an object, as
        keywords of the same names, or both (the keywords win); another name raises.

    Notes
    -----
    Cost (forward passes): graph scope ``1 + V``; node scope ``1 + B * V + c`` with ``V``
    counterfactual values (1 for binary / continuous, the number of categories otherwise),
    ``B <= Delta + 1`` batches (module docstring) and ``1 <= c <=``
    :data:`SAFEGUARD_NODES` safeguard passes (one unless check nodes lie within L hops of
    each other).
    """
    spec = resolve_feature(data, feature, kind=kind, max_categories=max_categories)
    results, total = sensitivity_results(
        model,
        data,
        [spec],
        mask,
        scope,
        n_boot,
        random_state,
        FlipOptions.resolve("counterfactual_flip", options, option_kwargs),
    )
    result = results[0]
    result.n_forward = total
    return result


def sensitivity_table(results: list[FlipResult]) -> pd.DataFrame:
    """The ranking table of :func:`feature_sensitivity` from per-feature results.

    ``rank`` 1 = largest flip rate; ties broken by the larger probability change, then by the
    order of ``results``.
    """
    frame = pd.DataFrame(
        {
            "feature": [r.feature for r in results],
            "kind": [r.kind for r in results],
            "effect": [r.rate for r in results],
            "ci_low": [r.ci_low for r in results],
            "ci_high": [r.ci_high for r in results],
            "prob_change": [r.prob_change for r in results],
            "prob_ci_low": [r.prob_ci_low for r in results],
            "prob_ci_high": [r.prob_ci_high for r in results],
            "n_nodes": [r.n_nodes for r in results],
            "n_alternatives": [r.extra.get("n_alternatives", 1) for r in results],
            "n_forward": [r.n_forward for r in results],
        }
    )
    order = np.lexsort(
        (np.arange(len(results)), -frame["prob_change"].to_numpy(), -frame["effect"].to_numpy())
    )
    rank = np.empty(len(results), dtype=np.int64)
    rank[order] = np.arange(1, len(results) + 1)
    frame["rank"] = rank
    return frame.iloc[order].reset_index(drop=True)[SENSITIVITY_COLUMNS]


def feature_sensitivity(
    model: Any,
    data: Any,
    features: Any = None,
    mask: Any = None,
    scope: str = "node",
    n_boot: int = 1000,
    random_state: int = 0,
    *,
    kinds: Mapping[str, str] | None = None,
    max_categories: int = MAX_CATEGORIES,
    options: FlipOptions | None = None,
    **option_kwargs: Any,
) -> pd.DataFrame:
    """The counterfactual flip of every feature, ranked (see the module docstring).

    ``features``: names / indices / one-hot groups as nested sequences (default: every
    non-constant column, each alone); ``kinds``: optional ``{name: kind}`` overrides of the detected kinds;
    ``options`` / ``**option_kwargs``: the same
    :class:`~gnnaudit.audit.sensitivity.options.FlipOptions` as :func:`counterfactual_flip`
    (``num_hops, max_nodes, sensitive, forward_kwargs, predict_fn, device, confidence,
    base_logits, progress, client``); with ``client`` (a ``dask.distributed.Client``, optional
    extra ``gnnaudit[distributed]``) each feature's passes are one task on its workers and the
    table equals the single-process table exactly (the model and graph are scattered to the
    workers once, so they must be picklable).
    Binary features are flipped, categorical ones and one-hot groups moved to each other value,
    continuous ones swapped to the opposite quantile :math:`F^{-1}(1 - F(x))`: a rank-based
    move that is comparable across features of any scale and skew, stays inside the observed
    values, and is exactly the flip for a balanced binary column.

    Returns a DataFrame sorted by rank with columns :data:`SENSITIVITY_COLUMNS`: ``feature,
    kind, effect`` (flip rate) ``, ci_low, ci_high, rank`` (1 = largest effect; ties: larger
    ``prob_change``, then column order) ``, prob_change, prob_ci_low, prob_ci_high, n_nodes,
    n_alternatives`` (counterfactual values per node) ``, n_forward`` (this feature's passes).
    ``DataFrame.attrs`` holds ``scope``, ``n_forward_total`` (every pass, the factual one and
    the safeguard's included), ``n_batches`` and ``num_hops`` (node scope).

    Cost: all features share the factual pass, the batching plan and the safeguard; node scope
    runs ``B`` passes per counterfactual value of each feature (``B`` batches, the same for
    every feature), graph scope one.
    """
    specs = resolve_features(data, features, kinds=kinds, max_categories=max_categories)
    opts = FlipOptions.resolve("feature_sensitivity", options, option_kwargs)
    results, total = sensitivity_results(
        model, data, specs, mask, scope, n_boot, random_state, opts
    )
    table = sensitivity_table(results)
    table.attrs.update(
        {
            "scope": scope,
            "n_forward_total": total,
            "n_batches": results[0].n_batches,
            "num_hops": results[0].num_hops,
        }
    )
    return table
