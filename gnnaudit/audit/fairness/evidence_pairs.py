"""The cases an auditor looks at: top global counterfactual evidence pairs side by side.

Each pair is two audited nodes whose features and L-hop neighbourhoods look alike (kernel
similarity, CE paper Eq. 7) but whose predictions differ, shown with the features on which they
differ (largest standardised difference first). When the evidence contrast found that the
sensitive attribute separates look-alike nodes with different decisions, the cards lead with the
pairs that differ in it and highlight it.

**Units.** The features are shown in the user's table's own units when the graph records how
its inputs were standardised (``data.feature_mean`` / ``data.feature_scale``, set by the
scaler that made the model inputs: gnnaudit's built-in one when it trained the model on the
table, the one a ``--checkpoint`` carries, or ``--standardize``;
:mod:`~gnnaudit.audit.fairness.feature_units`): a scaled column reads ``raw = x * scale +
mean`` (:func:`~gnnaudit.datasets.scaler.to_raw_units`), every other column as it is. Without
that record the values are the model inputs as given. Only the display changes: the search,
the similarities and the standardised differences are those of the model inputs (a positive
affine map leaves ``|x_u - x_v| / std`` unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gnnaudit._validation import check_class_array, check_int
from gnnaudit.audit.fairness.feature_units import MODEL_UNITS, ORIGINAL_UNITS
from gnnaudit.audit.report.section import Figure, ReportSection
from gnnaudit.audit.search.evidence_table import EVIDENCE_COLUMNS, evidence_frame, graph_user_ids
from gnnaudit.audit.search.inputs import node_features
from gnnaudit.audit.search.results import GlobalEvidence
from gnnaudit.audit.sensitive import known_group_mask
from gnnaudit.audit.unit import AuditResult, AuditUnit
from gnnaudit.datasets.scaler import recorded_inverse, to_raw_units
from gnnaudit.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = [
    "pair_comparison",
    "EvidencePairsResult",
    "EvidencePairsUnit",
    "PAIR_COLUMNS",
    "PAIR_FEATURE_COLUMNS",
    "pair_units_note",
]

#: the evidence-table schema, then the true classes and the number of differing features
PAIR_COLUMNS = [*EVIDENCE_COLUMNS, "label_u", "label_v", "differing_features"]
PAIR_FEATURE_COLUMNS = ["rank", "feature", "value_u", "value_v", "std_difference"]


def pair_comparison(
    data: Any,
    pairs: GlobalEvidence | pd.DataFrame,
    predictions: Any,
    labels: Any = None,
    *,
    top: int = 10,
    max_features: int = 8,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The first ``top`` pairs of ``pairs`` side by side with the features on which they differ.

    Returns ``(pairs_table, features_table)``: ``pairs_table`` has columns :data:`PAIR_COLUMNS`
    (the evidence-table schema, nodes named by ``data.node_ids`` when the graph has them;
    ``rank`` = position in ``pairs``, 1 = first; ``differing_features`` = number of feature
    columns where the two nodes differ); ``features_table`` (long form,
    :data:`PAIR_FEATURE_COLUMNS`) lists for each pair up to ``max_features`` differing features,
    largest standardised difference ``|x_u[f] - x_v[f]| / std(x[f])`` first (std over all
    nodes; 1 for constant columns). ``labels`` may be None (label columns then hold -1).
    ``value_u`` / ``value_v`` are in the table's own units when ``data`` records its
    standardisation (module doc); ``features_table.attrs["units"]`` says which
    (:data:`~gnnaudit.audit.fairness.feature_units.ORIGINAL_UNITS` or ``MODEL_UNITS``).
    """
    top = check_int("top", top, minimum=0)
    max_features = check_int("max_features", max_features, minimum=1)
    x, names = node_features(data)
    n = x.shape[0]
    user_ids = graph_user_ids(data, n)
    if isinstance(pairs, pd.DataFrame):
        pairs = GlobalEvidence.from_frame(pairs, user_ids=user_ids)
    if not isinstance(pairs, GlobalEvidence):
        raise InvalidInputError(
            f"pairs must be a GlobalEvidence or a global-evidence DataFrame, got "
            f"{type(pairs).__name__}"
        )
    pred = check_class_array("predictions", predictions)
    y = np.full(n, -1, dtype=np.int64) if labels is None else check_class_array("labels", labels)
    if pred.shape[0] != n or y.shape[0] != n:
        raise InvalidInputError(
            f"predictions and labels must have one entry per node ({n}), got "
            f"{pred.shape[0]} and {y.shape[0]}"
        )
    head = pairs.head(top)
    u, v = head.node_u, head.node_v
    if u.size and (min(u.min(), v.min()) < 0 or max(u.max(), v.max()) >= n):
        raise InvalidInputError(f"pairs hold node ids outside [0, {n - 1}]")
    ranks = np.arange(1, u.size + 1)
    std = x.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    diff = np.abs(x[u] - x[v]) / std  # (p, d)
    differs = x[u] != x[v]
    table = evidence_frame(
        u,
        v,
        pred[u],
        pred[v],
        head.similarity,
        ranks,
        user_ids=user_ids,
        extra={
            "label_u": y[u],
            "label_v": y[v],
            "differing_features": differs.sum(axis=1).astype(np.int64),
        },
    )
    order = np.argsort(-np.where(differs, diff, -1.0), axis=1, kind="stable")[:, :max_features]
    rows_i = np.repeat(np.arange(u.size), order.shape[1])
    cols_i = order.ravel()
    keep = differs[rows_i, cols_i]
    rows_i, cols_i = rows_i[keep], cols_i[keep]
    (shown_u, shown_v), units = _shown_values(data, x, (u, v))
    features = pd.DataFrame(
        {
            "rank": ranks[rows_i],
            "feature": pd.Series([names[c] for c in cols_i], dtype=object),
            "value_u": shown_u[rows_i, cols_i],
            "value_v": shown_v[rows_i, cols_i],
            "std_difference": diff[rows_i, cols_i],
        },
        columns=PAIR_FEATURE_COLUMNS,
    )
    features.attrs["units"] = units
    return table, features


def _shown_values(
    data: Any, x: np.ndarray, rows: tuple[np.ndarray, ...]
) -> tuple[list[np.ndarray], str]:
    """``(values, units)``: the model inputs ``x[r]`` of each of ``rows`` with the
    standardisation ``data`` records undone (module doc), or as they are in model-input
    units."""
    inverse = recorded_inverse(data, x.shape[1])
    if inverse is None:
        return [x[r] for r in rows], MODEL_UNITS
    magnitude = np.abs(x).max(axis=0)
    return [to_raw_units(x[r], *inverse, magnitude=magnitude) for r in rows], ORIGINAL_UNITS


def pair_units_note(units: str) -> str:
    """The report's sentence on the units of the evidence pairs' feature values."""
    if units == ORIGINAL_UNITS:
        return (
            "Feature values are in the table's own units (the standardisation of the model "
            "inputs undone; other columns as given)."
        )
    return (
        "Feature values are the model's inputs as given (the graph records no standardisation "
        "to undo: see gnnaudit.audit.fairness.feature_units)."
    )


def sensitive_first(
    pairs: GlobalEvidence, sensitive: np.ndarray, known: np.ndarray | None = None
) -> GlobalEvidence:
    """The same pairs, those whose two nodes differ in ``sensitive`` first (order kept within
    each part); with ``known`` (a boolean per node,
    :func:`~gnnaudit.audit.sensitive.known_group_mask`) a pair with a node of unknown group is
    not among those that differ."""
    differs = sensitive[pairs.node_u] != sensitive[pairs.node_v]
    if known is not None:
        differs &= known[pairs.node_u] & known[pairs.node_v]
    order = np.argsort(~differs, kind="stable")
    return GlobalEvidence(
        pairs.node_u[order],
        pairs.node_v[order],
        pairs.similarity[order],
        pairs.pred_u[order],
        pairs.pred_v[order],
        user_ids=pairs.user_ids,
    )


@dataclass
class EvidencePairsResult(AuditResult):
    """The pairs shown, their differing features and whether they lead with the sensitive
    attribute."""

    pairs: pd.DataFrame
    pair_features: pd.DataFrame
    sensitive_name: str | None
    sensitive_first: bool
    pool: int
    #: units of the feature values (``ORIGINAL_UNITS`` or ``MODEL_UNITS``; module doc)
    units: str = MODEL_UNITS

    def to_frame(self) -> pd.DataFrame:
        return self.pairs

    def report_section(self) -> ReportSection:
        if self.pairs.empty:
            summary = "No pair of audited nodes with different predictions exists."
        else:
            summary = (
                f"The {len(self.pairs)} most similar pairs of audited nodes that the model "
                "decides differently, with the features on which they differ. "
                + pair_units_note(self.units)
            )
            if self.sensitive_first:
                n_sens = int(
                    (self.pair_features["feature"] == self.sensitive_name)
                    .groupby(self.pair_features["rank"])
                    .any()
                    .sum()
                )
                summary += (
                    f" The evidence contrast found that {self.sensitive_name} separates "
                    f"look-alike nodes with different decisions, so the {n_sens} pair(s) that "
                    f"differ in it come first (from the top {self.pool} pairs)."
                )
        return ReportSection(
            key=EvidencePairsUnit.name,
            title="Counterfactual evidence pairs",
            summary=summary,
            tables={"pairs": self.pairs, "pair_features": self.pair_features},
            figures=[
                Figure(
                    kind="pair_cards",
                    title="evidence pairs",
                    options={"sensitive": self.sensitive_name},
                )
            ],
            notes=[
                "rank: position among the pairs shown; differing features are listed by "
                "standardised difference |x_u - x_v| / std, the sensitive attribute highlighted."
            ],
            data={"units": self.units},
        )


class EvidencePairsUnit(AuditUnit):
    """Audit unit: the top global evidence pairs as cards.

    Parameters
    ----------
    top : pairs shown.
    pool : when the evidence contrast of the sensitive attribute is significant, the pairs
        differing in it are picked first from the top ``pool`` pairs.
    max_features : differing features listed per pair.
    """

    name = "evidence_pairs"
    title = "Counterfactual evidence pairs"
    requires = ("evidence",)
    meaningless_when_degenerate = True

    def __init__(self, top: int = 10, pool: int = 100, max_features: int = 8) -> None:
        self.top = check_int("top", top, minimum=1)
        self.pool = check_int("pool", pool, minimum=self.top)
        self.max_features = check_int("max_features", max_features, minimum=1)

    def evidence_needed(self, ctx: AuditContext) -> tuple[int, int]:
        return 0, self.pool

    def run(self, ctx: AuditContext) -> EvidencePairsResult:
        contrast = ctx.results.get("evidence_contrast")
        lead = bool(
            ctx.sensitive is not None
            and contrast is not None
            and getattr(contrast, "significant", False)
        )
        pairs = ctx.global_evidence(self.pool if lead else self.top)
        if lead and ctx.sensitive is not None:  # lead implies a sensitive attribute
            known = known_group_mask(ctx.data, ctx.num_nodes, ctx.sensitive_name)
            pairs = sensitive_first(pairs, ctx.sensitive, known)
        table, feats = pair_comparison(
            ctx.data,
            pairs,
            ctx.predictions,
            ctx.labels,
            top=self.top,
            max_features=self.max_features,
        )
        return EvidencePairsResult(
            pairs=table,
            pair_features=feats,
            sensitive_name=ctx.sensitive_name,
            sensitive_first=lead,
            pool=self.pool,
            units=str(feats.attrs.get("units", MODEL_UNITS)),
        )
