r"""Audit unit: the fair-GNN literature's six figures on the audited (test) nodes, with intervals.

NIFTY (Agarwal, Lakkaraju & Zitnik, UAI 2021) and FairGNN (Dai & Wang, WSDM 2021) report, on
the test nodes :math:`T` of a binary node classifier with predictions :math:`\hat y_v`, scores
:math:`r_v` (here :math:`z_{v1} - z_{v0}`, monotone in the softmax probability of class 1),
labels :math:`y_v` and a binary sensitive attribute :math:`s_v`:

.. math::

    \mathrm{AUROC} &= P(r_i > r_j) + \tfrac12 P(r_i = r_j), \quad i \sim T \cap \{y = 1\},\
        j \sim T \cap \{y = 0\},

    F_1 &= \frac{2\,TP}{2\,TP + FP + FN} \quad (\text{class 1 positive}),

    \Delta_{SP} &= \bigl|P(\hat y = 1 \mid s = 0) - P(\hat y = 1 \mid s = 1)\bigr|,

    \Delta_{EO} &= \bigl|P(\hat y = 1 \mid y = 1, s = 0) - P(\hat y = 1 \mid y = 1, s = 1)\bigr|,

    \text{unfairness} &= \frac{1}{|T|} \sum_{v \in T}
        \mathbb I\bigl[\hat y_v(X) \ne \hat y_v(\tilde X)\bigr], \quad
        \tilde X = X \text{ with } s \mapsto 1 - s \text{ for every node at once},

    \text{instability} &= \frac{1}{|T|} \sum_{v \in T}
        \mathbb I\bigl[\hat y_v(X) \ne \hat y_v(X + E)\bigr], \quad
        E_{ij} \sim \mathcal N(0, \sigma^2) \text{ i.i.d.}, \ \sigma = 1.

**Counterfactual unfairness is exactly gnnaudit's graph-scope flip rate of the sensitive
attribute on the audited nodes** (:func:`~gnnaudit.audit.counterfactual_flip` with
``scope="graph"``: a binary feature is swapped between its two values for every node at once,
which for a 0/1 column is :math:`1 - s`). The unit therefore reads the graph-scope
:class:`~gnnaudit.audit.sensitivity.flip.FlipResult` that the sensitivity unit already cached in
``ctx.results["sensitivity"]`` and computes it (one forward pass) only when that unit did not
run; the tests check the equality against NIFTY's formula on a GCN trained outside gnnaudit.
The noise of the instability is drawn on the CPU from ``torch.Generator().manual_seed(
random_state)`` (the audit's seed) in the features' shape and dtype, every entry including the
sensitive column, as :func:`~gnnaudit.audit.fairness.literature_metrics.instability`; it costs
one forward pass.

Beyond the binary case (said in the section's notes): with more than two classes AUROC is the
macro one-vs-rest mean over the classes with members and non-members among the audited nodes
(softmax probabilities as scores) and F1 the macro mean over the classes present in the labels
or the predictions; :math:`\Delta_{SP}` and :math:`\Delta_{EO}` are the largest gap over the
classes and, with more than two sensitive groups, the max-minus-min gap over the groups (both as
the group-fairness unit, whose figures these are); counterfactual unfairness of a categorical
attribute counts a node when moving it to any other value (for every node) changes its decision.

Intervals (level and resamples: the audit's ``confidence`` and ``n_boot``, seed
``random_state``): AUROC and F1 a percentile bootstrap over the audited nodes
(:mod:`~gnnaudit.audit.fairness.literature_intervals`); :math:`\Delta_{SP}` and
:math:`\Delta_{EO}` the interval of
:func:`~gnnaudit.audit.fairness.group_fairness.group_fairness`: Newcombe's hybrid score
interval of the **signed** difference between the group with the higher and the group with the
lower rate (e.g. :math:`P(\hat y = 1 \mid s = 1) - P(\hat y = 1 \mid s = 0)`), simultaneous
over all group pairs (Bonferroni) with more than two groups or classes. It can reach below 0 (a
bootstrap of the absolute difference never does, even for a model whose groups share one true
rate); the reported value stays NIFTY's absolute difference, the point estimate of that signed
difference. The two rates (counterfactual unfairness, instability) the exact Clopper-Pearson
interval, the project's rule for rates (:mod:`gnnaudit.audit.intervals`: the percentile
bootstrap of a rate collapses to ``[0, 0]`` when no decision changes).

Flags (the project's documented thresholds, never new ones): :math:`\Delta_{SP}` and
:math:`\Delta_{EO}` as the group-fairness unit (four-fifths rule broken and the signed
interval's lower end above 0; the whole signed interval above
:data:`~gnnaudit.audit.fairness.group_fairness.EOD_THRESHOLD`), counterfactual unfairness as
the flip test (:func:`~gnnaudit.audit.report.thresholds.flip_flagged`); AUROC, F1 and
instability have no documented threshold and are informational. A model that predicts one
class on every audited node gets no finding (its F1, gaps and flip rates describe a constant
decision): the section says so and keeps the figures in its table for reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gnnaudit._validation import check_float
from gnnaudit.audit.fairness.literature_rows import compute_rows
from gnnaudit.audit.report.section import Figure, Finding, ReportSection
from gnnaudit.audit.unit import AuditResult, AuditUnit

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = ["LiteratureMetricsUnit", "LiteratureMetricsResult", "LITERATURE_COLUMNS"]

#: columns of :meth:`LiteratureMetricsResult.to_frame`
LITERATURE_COLUMNS = ["metric", "name", "value", "ci_low", "ci_high", "interval", "flagged"]
#: metrics about the sensitive attribute (their findings name it as their feature)
_ABOUT_SENSITIVE = ("dsp", "deo", "cf")


@dataclass
class LiteratureMetricsResult(AuditResult):
    """What :class:`LiteratureMetricsUnit` found.

    Attributes
    ----------
    table : one row per computed metric, columns :data:`LITERATURE_COLUMNS` (``metric`` is the
        key of :data:`~gnnaudit.audit.fairness.literature_metrics.METRICS`).
    explanations : metric key -> the finding's plain-words sentence.
    sensitive_name : the (primary) sensitive attribute, or None.
    n_nodes, n_classes, confidence : audited nodes, model classes, interval level.
    single_class : the class predicted on every audited node, or None (then no finding).
    notes : conventions used, metrics left out and why.
    """

    table: pd.DataFrame
    explanations: dict[str, str]
    sensitive_name: str | None
    n_nodes: int
    n_classes: int
    confidence: float
    single_class: int | None = None
    notes: list[str] = field(default_factory=list)

    def value(self, metric: str) -> float:
        """The estimate of ``metric`` (NaN when it was not computed)."""
        hit = self.table.loc[self.table["metric"] == metric, "value"]
        return float(hit.iloc[0]) if len(hit) else math.nan

    def to_frame(self) -> pd.DataFrame:
        return self.table

    def findings(self) -> list[Finding]:
        if self.single_class is not None:
            return []
        out = []
        for row in self.table.itertuples(index=False):
            about = self.sensitive_name if row.metric in _ABOUT_SENSITIVE else None
            out.append(
                Finding(
                    finding=f"literature: {row.name}",
                    feature=about or "",
                    statistic=str(row.name),
                    value=float(row.value),
                    ci_low=float(row.ci_low),
                    ci_high=float(row.ci_high),
                    flagged=bool(row.flagged),
                    explanation=self.explanations[row.metric],
                )
            )
        return out

    def report_section(self) -> ReportSection:
        title = LiteratureMetricsUnit.title + (
            f" (sensitive: {self.sensitive_name})" if self.sensitive_name else ""
        )
        level = f"{self.confidence:.0%}"
        parts = [
            f"{r.name} {r.value:.3f} ({r.ci_low:.3f} to {r.ci_high:.3f})"
            for r in self.table.itertuples(index=False)
        ]
        summary = f"On the {self.n_nodes:,} audited nodes ({level} CIs): {'; '.join(parts)}."
        status = "ok"
        if self.single_class is not None:
            status = "not meaningful"
            summary = (
                f"The model predicts class {self.single_class} on every audited node, so F1, the "
                "group gaps, counterfactual unfairness and instability describe a constant "
                "decision and none is reported as a finding (values in the table for reference). "
                + summary
            )
        else:
            flagged = self.table.loc[self.table["flagged"], "name"].tolist()
            summary += (
                f" Flagged: {', '.join(flagged)}."
                if flagged
                else " None crosses a documented threshold."
            )
        chart = self.table[["name", "value", "ci_low", "ci_high"]].rename(columns={"name": "label"})
        return ReportSection(
            key=LiteratureMetricsUnit.name,
            title=title,
            summary=summary,
            tables={"metrics": self.table},
            figures=[
                Figure(
                    kind="bar",
                    title="Fair-GNN literature metrics on the audited nodes",
                    data=chart,
                    options={"xlabel": "value", "xlim": [0, 1]},
                )
            ],
            notes=list(self.notes),
            status=status,
            data={str(r.metric): float(r.value) for r in self.table.itertuples(index=False)},
        )


class LiteratureMetricsUnit(AuditUnit):
    """Audit unit: AUROC, F1, ΔSP, ΔEO, counterfactual unfairness and instability on the
    audited nodes, each with an interval (module docstring).

    Parameters
    ----------
    noise_std : standard deviation :math:`\\sigma` of the instability noise (NIFTY: 1).
    """

    name = "literature"
    title = "Fair-GNN literature metrics"
    requires = ("labels",)
    meaningless_when_degenerate = True

    def __init__(self, noise_std: float = 1.0) -> None:
        self.noise_std = check_float("noise_std", noise_std, minimum=0.0)

    def run(self, ctx: AuditContext) -> LiteratureMetricsResult:
        rows, explanations, notes = compute_rows(ctx, self.noise_std)
        pred = ctx.predictions[ctx.nodes]
        classes = np.unique(pred)
        return LiteratureMetricsResult(
            table=pd.DataFrame(rows, columns=LITERATURE_COLUMNS),
            explanations=explanations,
            sensitive_name=ctx.sensitive_name,
            n_nodes=int(ctx.nodes.size),
            n_classes=int(ctx.logits.shape[1]),
            confidence=ctx.options.confidence,
            single_class=int(classes[0]) if classes.size == 1 else None,
            notes=notes,
        )
