r"""Discrimination scores of feature values from local counterfactual evidences (CE paper, Eq. 12).

For a feature ``f`` and one of its values ``a`` the paper scores how often the top-k local
counterfactual evidences of a test node ``v`` with ``x_v[f] = a`` carry a *different* value:

.. math::

    DS_v(f = a) = \frac{1}{k} \sum_{u \in LCE_k(v)} \mathbb{I}(x_v[f] = a \wedge x_u[f] \neq a),
    \qquad DS(f = a) = \operatorname{mean}_{v \in V_{test},\, x_v[f] = a} DS_v(f = a).

**Values.** Binary columns and categorical columns (whole numbers, at most ``max_values``
distinct values over all nodes) are scored per value. A continuous column would make every
distinct float a "value"; instead it is cut into ``bins`` quantile bins over all nodes
(:func:`~gnnaudit.audit.interventions.quantile_bins`: inner edges at the ``j / bins``
quantiles, repeated edges merged; the bins of the evidence contrast) and ``a`` is a bin,
labelled by its interval ``[lo, hi)``; "carries a different value" then means "falls in another
bin".

**Baseline and lift.** A high score can arise by construction: if value ``a`` is rare among
``v``'s candidates (test nodes with a different prediction), *any* set of evidences mostly
carries another value. The table therefore also reports the **baseline**, the exact expected
score if each node's evidences were drawn uniformly at random from its candidates,

.. math::

    B_v(f = a) = \frac{\#\{u \in C_v : x_u[f] \neq a\}}{|C_v|}, \qquad
    C_v = \{u \in V_{test} : \hat y_u \neq \hat y_v\},

averaged over the same nodes, and the **lift** = score - baseline: how much the similarity-
ranked evidences differ in ``f`` beyond what the candidates' value mix forces.

Measured limitation: on the synthetic credit graph the ranking by Eq. 12 does not single out a
planted sensitive bias (``benchmarks/results/audit.md``); the audit's findings rest on the
counterfactual flip and the evidence contrast instead, and this table is descriptive.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gnnaudit._validation import check_array, check_choice, check_int
from gnnaudit.audit.fairness.discrimination_arrays import (
    DISCRIMINATION_COLUMNS,
    arrays_to_table,
    score_arrays,
)
from gnnaudit.audit.fairness.feature_coding import FeatureCoding, code_features
from gnnaudit.audit.fairness.feature_units import MODEL_UNITS, FeatureUnits, units_note
from gnnaudit.audit.report.section import Figure, ReportSection
from gnnaudit.audit.search.evidence_table import graph_user_ids
from gnnaudit.audit.search.inputs import (
    REQUIRED_LOCAL_COLUMNS,
    check_frame,
    fitted_predictions,
    fitted_test_nodes,
    is_estimator,
    mask_nodes,
    node_features,
)
from gnnaudit.audit.search.results import LocalEvidence
from gnnaudit.audit.unit import AuditResult, AuditUnit
from gnnaudit.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = [
    "discrimination_scores",
    "feature_rank",
    "FeatureCoding",
    "code_features",
    "score_arrays",
    "arrays_to_table",
    "DiscriminationResult",
    "DiscriminationUnit",
    "DISCRIMINATION_COLUMNS",
]

logger = logging.getLogger(__name__)


def discrimination_scores(
    data: Any,
    evidence: Any,
    k: int = 10,
    features: Sequence[str | int] | str | int | None = None,
    *,
    predictions: Any = None,
    mask: Any = None,
    max_values: int = 10,
    bins: int = 4,
    min_support: int = 1,
) -> pd.DataFrame:
    """Discrimination score (Eq. 12) of every value (or quantile bin) of the features.

    Parameters
    ----------
    data : PyG ``Data`` with ``x`` (and optionally ``feature_names``, ``test_mask``).
    evidence : a fitted :class:`~gnnaudit.audit.CounterfactualEvidence` (the local top-``k``
        of all of its test nodes is searched), a :class:`~gnnaudit.audit.LocalEvidence`, or a
        local evidence table with columns ``node_u`` (query), ``node_v`` (evidence), ``rank``
        as ``local_evidence`` returns (the first ``k`` evidences of each query by ``rank`` are
        used; the graph's own ids when ``data.node_ids`` is set).
    k : number of local evidences per test node (the paper uses 10). A node with fewer than
        ``k`` evidences is scored over those returned; nodes without any are not scored.
    features : names (``data.feature_names``) or column indices; default every column.
    predictions : predicted class per node; needed with a LocalEvidence / DataFrame whose
        predictions do not cover every node of ``mask``.
    mask : test nodes (bool mask or ids) forming the candidate pool of the baseline; with a
        LocalEvidence / DataFrame (default ``data.test_mask``).
    max_values : columns with at most this many distinct values are scored per value; others
        are binned.
    bins : quantile bins of a continuous column.
    min_support : drop (feature, value) rows held by fewer scored nodes (1 keeps all, as in
        the paper; values held by one or two nodes get extreme scores by chance).

    Returns
    -------
    DataFrame ``feature, value, score, baseline, lift, support``, one row per (feature, value)
    held by at least ``min_support`` scored nodes, sorted by ``score`` descending (ties:
    larger ``lift``, then feature, value). ``value`` is a readable label: the value of a
    categorical column or the interval of a bin, in the user's units when ``data`` carries
    them (``feature_mean`` / ``feature_scale``, ``feature_categories``, ``feature_onehot``:
    :mod:`~gnnaudit.audit.fairness.feature_units`; a one-hot column ``gender=F`` then reads
    feature ``gender``, value ``F``), else in model-input units; ``table.attrs["units"]`` says
    which.
    """
    k = check_int("k", k, minimum=1)
    min_support = check_int("min_support", min_support, minimum=1)
    x, names = node_features(data)
    n = x.shape[0]
    units = FeatureUnits.from_data(data, x.shape[1])
    coding = code_features(x, names, features, max_values=max_values, bins=bins, units=units)

    if is_estimator(evidence):
        test_nodes = fitted_test_nodes(evidence)
        pred = fitted_predictions(evidence, n)
        local = evidence.search_local(test_nodes, k=k)
    else:
        if isinstance(evidence, pd.DataFrame):
            check_frame("evidence", evidence, REQUIRED_LOCAL_COLUMNS)
            local = LocalEvidence.from_frame(evidence, k=k, user_ids=graph_user_ids(data, n))
        elif isinstance(evidence, LocalEvidence):
            local = evidence.head(k)
        else:
            raise InvalidInputError(
                "evidence must be a fitted CounterfactualEvidence, a LocalEvidence or a "
                f"local-evidence DataFrame, got {type(evidence).__name__}"
            )
        if mask is None:
            mask = getattr(data, "test_mask", None)
            if mask is None:
                raise InvalidInputError(
                    "mask is required with a LocalEvidence / DataFrame when data has no test_mask"
                )
        test_nodes = mask_nodes("mask", mask, n)
        _check_ids(local, n)
        pred = _predictions(predictions, local, n, test_nodes)
    return score_local(coding, local, pred, test_nodes, min_support=min_support)


def _check_ids(local: LocalEvidence, n: int) -> None:
    for name, ids, low in (("query", local.query, 0), ("evidence", local.evidence, -1)):
        if ids.size and (ids.max() >= n or ids.min() < low):
            raise InvalidInputError(
                f"evidence {name} ids lie in [{ids.min()}, {ids.max()}], outside [0, {n - 1}]"
            )


def _predictions(
    predictions: Any, local: LocalEvidence, n: int, test_nodes: np.ndarray
) -> np.ndarray:
    if predictions is not None:
        pred = check_array("predictions", predictions, ndim=1, dtype=None)
        if pred.dtype.kind not in "iub":
            raise InvalidInputError(f"predictions must hold integer classes, got {pred.dtype}")
        if pred.shape[0] != n:
            raise InvalidInputError(
                f"predictions must have one entry per node ({n}), got {pred.shape[0]}"
            )
        return pred.astype(np.int64)
    pred = np.full(n, -1, dtype=np.int64)
    for ids, p in ((local.query, local.query_pred), (local.evidence, local.evidence_pred)):
        ok = (ids >= 0) & (p >= 0)
        if ids.size:
            pred[ids[ok]] = p[ok]
    unknown = test_nodes[pred[test_nodes] < 0]
    if unknown.size and len(local):
        raise InvalidInputError(
            f"predictions is needed: {unknown.size} test node(s) (e.g. {unknown[:5].tolist()}) "
            "have no prediction in the evidence"
        )
    return pred


def score_local(
    coding: FeatureCoding,
    local: LocalEvidence,
    pred: np.ndarray,
    test_nodes: np.ndarray,
    *,
    min_support: int = 1,
) -> pd.DataFrame:
    """Eq. 12 table of the queries of ``local`` that have at least one evidence."""
    _check_ids(local, coding.codes.shape[0])
    has = local.valid.any(axis=1)
    if not has.any():
        logger.warning("no test node has a counterfactual evidence; discrimination table empty")
    arrays = score_arrays(
        coding, local.query[has], local.evidence[has], pred, test_nodes, min_support=min_support
    )
    table = arrays_to_table(arrays, coding)
    table.attrs["units"] = coding.units
    return table


def feature_rank(table: pd.DataFrame, feature: str, by: str = "score") -> int:
    """1-based rank of ``feature`` in a discrimination table ordered by ``by`` (descending).

    A feature's rank is the rank of its best value; ties in ``by`` are broken by ``lift`` /
    ``score`` and then by name. Raises if the feature is absent.
    """
    check_choice("by", by, ("score", "lift", "baseline"))
    check_frame("table", table, DISCRIMINATION_COLUMNS)
    other = "lift" if by != "lift" else "score"
    ordered = table.sort_values(
        [by, other, "feature"], ascending=[False, False, True], kind="stable"
    )
    features = list(dict.fromkeys(ordered["feature"].tolist()))
    if feature not in features:
        raise InvalidInputError(
            f"feature {feature!r} is not in the discrimination table; present: {features[:20]}"
        )
    return features.index(feature) + 1


# ----------------------------------------------------------------------------------------------
# audit unit
# ----------------------------------------------------------------------------------------------
@dataclass
class DiscriminationResult(AuditResult):
    """Eq. 12 table of the audited nodes, with the sensitive attribute's ranks."""

    table: pd.DataFrame
    k: int
    min_support: int
    bins: int
    sensitive_name: str | None = None
    top: int = 15
    units: str = MODEL_UNITS

    def to_frame(self) -> pd.DataFrame:
        return self.table

    def ranks(self) -> dict[str, int]:
        """Rank of the sensitive feature by score and by lift (empty when absent)."""
        name = self.sensitive_name
        if name is None or name not in set(self.table["feature"]):
            return {}
        return {
            "rank_by_score": feature_rank(self.table, name, by="score"),
            "rank_by_lift": feature_rank(self.table, name, by="lift"),
        }

    def report_section(self) -> ReportSection:
        table = self.table
        n_feat = int(table["feature"].nunique()) if len(table) else 0
        if table.empty:
            summary = "No audited node has a counterfactual evidence: the table is empty."
        else:
            top = table.iloc[0]
            summary = (
                f"Highest score: {top['feature']} = {top['value']} ({top['score']:.3f}, "
                f"baseline {top['baseline']:.3f}, lift {top['lift']:+.3f})."
            )
            ranks = self.ranks()
            if ranks:
                summary += (
                    f" {self.sensitive_name} ranks {ranks['rank_by_score']} by score and "
                    f"{ranks['rank_by_lift']} by lift among {n_feat} features."
                )
        chart = table.head(self.top).assign(
            label=lambda t: t["feature"].astype(str) + " = " + t["value"].astype(str)
        )
        highlight = (
            chart.loc[chart["feature"] == self.sensitive_name, "label"].tolist()
            if self.sensitive_name
            else []
        )
        return ReportSection(
            key=DiscriminationUnit.name,
            title="Discrimination scores (CE paper Eq. 12)",
            summary=summary,
            tables={"scores": table},
            figures=[
                Figure(
                    kind="bar",
                    title="Top discrimination scores (tick: baseline)",
                    data=chart[["label", "score", "baseline"]].rename(columns={"score": "value"}),
                    options={"highlight": highlight, "xlabel": "score", "xlim": [0, 1.05]},
                )
            ],
            notes=[
                "score: share of a node's top-k counterfactual evidences with another value, "
                "averaged over the nodes holding the value; baseline: the same share if the "
                "evidences were drawn uniformly from the node's candidates; lift = score - "
                "baseline. A score equal to its baseline says nothing about the model.",
                f"k = {self.k}; values held by fewer than {self.min_support} audited nodes are "
                f"left out; continuous columns are cut into {self.bins} quantile bins.",
                units_note(self.units),
                "Descriptive only: on data with a planted bias this ranking does not single out "
                "the sensitive attribute (benchmarks/results/audit.md); the findings rest on "
                "the counterfactual flip and the evidence contrast.",
            ],
            data={"k": self.k, "features": n_feat, **self.ranks()},
        )


class DiscriminationUnit(AuditUnit):
    """Audit unit: :func:`discrimination_scores` over the audited nodes' local evidences.

    Parameters
    ----------
    min_support : leave out values held by fewer audited nodes (default 5: a value held by one
        or two nodes scores 1.0 by chance; 1 reproduces the paper's table).
    bins, max_values : value coding (see :func:`code_features`).
    features : columns to score (default all).
    """

    name = "discrimination"
    title = "Discrimination scores"
    requires = ("evidence",)
    meaningless_when_degenerate = True

    def __init__(
        self, min_support: int = 5, bins: int = 4, max_values: int = 10, features: Any = None
    ) -> None:
        self.min_support = check_int("min_support", min_support, minimum=1)
        self.bins = check_int("bins", bins, minimum=2)
        self.max_values = check_int("max_values", max_values, minimum=2)
        self.features = features

    def evidence_needed(self, ctx: AuditContext) -> tuple[int, int]:
        return ctx.options.k, 0

    def run(self, ctx: AuditContext) -> DiscriminationResult:
        x, names = ctx.features
        units = FeatureUnits.from_data(ctx.data, x.shape[1])
        coding = code_features(
            x, names, self.features, max_values=self.max_values, bins=self.bins, units=units
        )
        table = score_local(
            coding,
            ctx.local_evidence(),
            ctx.predictions,
            ctx.nodes,
            min_support=self.min_support,
        )
        return DiscriminationResult(
            table=table,
            k=ctx.options.k,
            min_support=self.min_support,
            bins=self.bins,
            sensitive_name=ctx.sensitive_name,
            units=coding.units,
        )
