r"""Audit unit: the fair-GNN literature's figures that no other finding gives, with intervals.

NIFTY (Agarwal, Lakkaraju & Zitnik, UAI 2021) and FairGNN (Dai & Wang, WSDM 2021) report six
figures on the test nodes :math:`T` of a node classifier. Three of them are findings of other
units and are reported there once, under both names
(:mod:`gnnaudit.audit.report.literature`; ``report.json``'s ``aliases`` entry finds them):
:math:`\Delta_{SP}` is the ``statistical parity`` finding, :math:`\Delta_{EO}` the ``equal
opportunity`` finding (group fairness, class 1 favourable) and NIFTY's counterfactual
unfairness the ``counterfactual flip (graph scope)`` finding (sensitivity). This unit adds the
other three, with predictions :math:`\hat y_v`, scores :math:`r_v` (:math:`z_{v1} - z_{v0}`,
monotone in the softmax probability of class 1) and labels :math:`y_v`:

.. math::

    \mathrm{AUROC} &= P(r_i > r_j) + \tfrac12 P(r_i = r_j), \quad i \sim T \cap \{y = 1\},\
        j \sim T \cap \{y = 0\},

    F_1 &= \frac{2\,TP}{2\,TP + FP + FN} \quad (\text{class 1 positive}),

    \text{instability} &= \frac{1}{|T|} \sum_{v \in T}
        \mathbb I\bigl[\hat y_v(X) \ne \hat y_v(X + E)\bigr], \quad
        E_{ij} \sim \mathcal N(0, \sigma^2) \text{ i.i.d.}, \ \sigma = 1.

The noise of the instability is drawn on the CPU from ``torch.Generator().manual_seed(
random_state)`` (the audit's seed) in the features' shape and dtype, every entry including the
sensitive column, as :func:`~gnnaudit.audit.fairness.literature_metrics.instability`; it costs
one forward pass (on a cluster, the noise goes to the graph store and each worker adds its
rows). With more than two classes AUROC is the macro one-vs-rest mean over the classes with
members and non-members among the audited nodes (softmax probabilities as scores) and F1 the
macro mean over the classes present in the labels or the predictions (both said in the
section's notes).

Intervals (the audit's ``confidence`` and ``n_boot``, seed ``random_state``): AUROC and F1 a
percentile bootstrap over the audited nodes
(:mod:`~gnnaudit.audit.fairness.literature_intervals`); instability the exact Clopper-Pearson
interval, the project's rule for rates (:mod:`gnnaudit.audit.intervals`). The three figures
have no documented threshold and are never flagged (informational). A model that predicts one
class on every audited node gets no finding: the section says so and keeps the figures in its
table for reference.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from gnnaudit._validation import check_float
from gnnaudit.audit.fairness.literature_intervals import auroc_interval, f1_interval
from gnnaudit.audit.intervals import binomial_interval
from gnnaudit.audit.report.literature import LITERATURE_ALIASES
from gnnaudit.audit.report.section import Figure, Finding, ReportSection, class_label
from gnnaudit.audit.unit import AuditResult, AuditUnit
from gnnaudit.errors import WorkerLostError

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = ["LiteratureMetricsUnit", "LiteratureMetricsResult", "LITERATURE_COLUMNS", "METRIC_NAMES"]

logger = logging.getLogger(__name__)

#: columns of :meth:`LiteratureMetricsResult.to_frame`
LITERATURE_COLUMNS = ["metric", "name", "value", "ci_low", "ci_high", "interval", "flagged"]
#: display name of each metric key of the unit
METRIC_NAMES = {"auroc": "AUROC", "f1": "F1", "instability": "instability"}
#: seed streams of the AUROC and F1 bootstraps (``AuditOptions.rng(offset)``)
_AUROC_STREAM, _F1_STREAM = 41, 42
#: where the section points for the literature figures that are findings of other units
_ELSEWHERE = "; ".join(
    f"{key} = the '{finding}' finding" for key, (finding, _, _) in LITERATURE_ALIASES.items()
)


class _Rows:
    """Collects the table rows, the explanations and the notes of one run."""

    def __init__(self, confidence: float) -> None:
        self.rows: list[dict[str, Any]] = []
        self.explanations: dict[str, str] = {}
        self.notes: list[str] = []
        self.level = f"{confidence:.0%}"

    def add(
        self, metric: str, estimate: tuple[float, float, float], interval: str, explanation: str
    ) -> None:
        value, lo, hi = (float(v) for v in estimate)
        self.rows.append(
            {
                "metric": metric,
                "name": METRIC_NAMES[metric],
                "value": value,
                "ci_low": lo,
                "ci_high": hi,
                "interval": interval,
                "flagged": False,  # no documented threshold: informational
            }
        )
        self.explanations[metric] = explanation

    def ci(self, lo: float, hi: float) -> str:
        return f"{self.level} CI {lo:.3f} to {hi:.3f}"


def _auroc_row(ctx: AuditContext, out: _Rows) -> None:
    """AUROC of the model on the audited nodes (module docstring)."""
    opts, nodes = ctx.options, ctx.nodes
    assert ctx.labels is not None  # guaranteed by requires
    y = ctx.labels[nodes]
    width = int(ctx.logits.shape[1])
    logits = ctx.logits[torch.as_tensor(nodes)].to(torch.float64)
    present = np.unique(y)
    if present.size < 2:
        out.notes.append("AUROC left out: the audited nodes' labels hold a single class.")
        return
    if width == 2:
        scores, positives = [(logits[:, 1] - logits[:, 0]).numpy()], [y == 1]
        one, zero = class_label(1, ctx.class_names), class_label(0, ctx.class_names)
        what = f"the model's score for {one} ranks a random audited node of {one} above"
        what += f" a random one of {zero}"
    else:
        probs = torch.softmax(logits, dim=1).numpy()
        scores = [probs[:, c] for c in present]
        positives = [y == c for c in present]
        what = "averaged over the classes (one-vs-rest), the model's probability of a class "
        what += "ranks a random audited member of it above a random non-member"
        if present.size < width:
            out.notes.append(
                f"Macro AUROC averages the {present.size} classes present among the audited "
                f"labels ({present.tolist()}) of the model's {width}."
            )
    est = auroc_interval(
        scores,
        positives,
        n_boot=opts.n_boot,
        confidence=opts.confidence,
        rng=opts.rng(_AUROC_STREAM),
    )
    out.add(
        "auroc",
        est,
        "percentile bootstrap",
        f"AUROC {est[0]:.3f} ({out.ci(est[1], est[2])}): {what} with this probability; 0.5 "
        "is chance, 1 a perfect ranking. Informational (no documented threshold).",
    )


def _f1_row(ctx: AuditContext, out: _Rows) -> None:
    """F1 of class 1 (binary) or macro F1 on the audited nodes (module docstring)."""
    opts, nodes = ctx.options, ctx.nodes
    assert ctx.labels is not None  # guaranteed by requires
    y, pred = ctx.labels[nodes], ctx.predictions[nodes]
    k = max(int(ctx.logits.shape[1]), int(y.max()) + 1, int(pred.max()) + 1)
    est = f1_interval(
        y, pred, k, n_boot=opts.n_boot, confidence=opts.confidence, rng=opts.rng(_F1_STREAM)
    )
    what = f"of {class_label(1, ctx.class_names)}" if k == 2 else "macro-averaged over the classes"
    out.add(
        "f1",
        est,
        "percentile bootstrap",
        f"F1 {what} {est[0]:.3f} ({out.ci(est[1], est[2])}): the harmonic mean of precision "
        "and recall on the audited nodes. Informational (no documented threshold).",
    )


def _instability_row(ctx: AuditContext, noise_std: float, out: _Rows) -> None:
    """Share of audited decisions changed by seeded N(0, noise_std^2) feature noise."""
    opts, nodes, x = ctx.options, ctx.nodes, ctx.data.x
    gen = torch.Generator().manual_seed(int(opts.random_state))
    noise = torch.randn(tuple(x.shape), generator=gen, dtype=x.dtype) * noise_std
    try:
        noisy = _noisy_logits(ctx, noise)
    except WorkerLostError:  # the cluster failed, not the model: the audit stops
        raise
    except Exception as exc:  # noqa: BLE001  # deliberate: noisy inputs leave the data's domain
        # a model may accept only the values its inputs take (codes it embeds, one-hot
        # lookups); the noise leaves that domain, so the figure is undefined, not a bug
        logger.warning("instability left out: the model failed on noisy features: %s", exc)
        out.notes.append(
            "Instability left out: the model cannot be evaluated on noisy features "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})."
        )
        return
    changed = noisy.argmax(dim=1).numpy()[nodes] != ctx.predictions[nodes]
    k, m = int(changed.sum()), int(nodes.size)
    lo, hi = binomial_interval(k, m, opts.confidence)
    out.add(
        "instability",
        (k / m, lo, hi),
        "exact (Clopper-Pearson)",
        f"Adding independent N(0, {noise_std:g}^2) noise (seed {opts.random_state}) to every "
        f"input feature, {ctx.sensitive_name or 'the sensitive one'} included, changes the "
        f"decision of {k / m:.1%} of the audited nodes ({out.ci(lo, hi)}): NIFTY's "
        "instability. Informational (no documented threshold; it depends on the features' "
        "scale).",
    )


def _noisy_logits(ctx: AuditContext, noise: torch.Tensor) -> torch.Tensor:
    """The model's logits on ``x + noise``: in this process, or on the cluster's partitions
    (the noise written once to the graph store's shared folder, each worker reading its
    rows) when the audit is distributed."""
    if ctx.distributed is None:
        return ctx.adapter.logits(
            ctx.data.x + noise.to(ctx.data.x.device),
            ctx.data.edge_index,
            stage="the instability's noisy pass",
        )
    from gnnaudit.audit.distributed.store import AddRows

    path = Path(ctx.distributed.store.folder) / "instability-noise.npy"
    np.save(path, noise.cpu().numpy())
    try:
        out: torch.Tensor = ctx.remote([AddRows(str(path))])
    finally:
        path.unlink(missing_ok=True)
    return out


def compute_rows(
    ctx: AuditContext, noise_std: float
) -> tuple[list[dict[str, Any]], dict[str, str], list[str]]:
    """Rows, explanations and notes of every metric of the unit that can be computed."""
    out = _Rows(ctx.options.confidence)
    _auroc_row(ctx, out)
    _f1_row(ctx, out)
    _instability_row(ctx, noise_std, out)
    out.notes.append(
        "NIFTY's other three figures are findings of other units, reported once under both "
        f"names ({_ELSEWHERE}; report.json's 'aliases' entry gives their values and intervals)."
    )
    out.notes.append(
        "Intervals: AUROC and F1 percentile bootstrap over the audited nodes; instability exact "
        "(Clopper-Pearson). Definitions: NIFTY (Agarwal et al. 2021), see the module "
        "gnnaudit.audit.fairness.literature_unit."
    )
    return out.rows, out.explanations, out.notes


@dataclass
class LiteratureMetricsResult(AuditResult):
    """What :class:`LiteratureMetricsUnit` found.

    Attributes
    ----------
    table : one row per computed metric, columns :data:`LITERATURE_COLUMNS` (``metric`` is a
        key of :data:`METRIC_NAMES`).
    explanations : metric key -> the finding's plain-words sentence.
    sensitive_name : the (primary) sensitive attribute, or None.
    n_nodes, n_classes, confidence : audited nodes, model classes, interval level.
    single_class : the class predicted on every audited node, or None (then no finding).
    class_names : the user's label values by class id (``data.class_names``), or None.
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
    class_names: list[str] | None = None

    def value(self, metric: str) -> float:
        """The estimate of ``metric`` (NaN when it was not computed)."""
        hit = self.table.loc[self.table["metric"] == metric, "value"]
        return float(hit.iloc[0]) if len(hit) else math.nan

    def to_frame(self) -> pd.DataFrame:
        return self.table

    def findings(self) -> list[Finding]:
        if self.single_class is not None:
            return []
        return [
            Finding(
                finding=f"literature: {row.name}",
                feature="",
                statistic=str(row.name),
                value=float(row.value),
                ci_low=float(row.ci_low),
                ci_high=float(row.ci_high),
                flagged=bool(row.flagged),
                explanation=self.explanations[row.metric],
            )
            for row in self.table.itertuples(index=False)
        ]

    def report_section(self) -> ReportSection:
        level = f"{self.confidence:.0%}"
        parts = [
            f"{r.name} {r.value:.3f} ({r.ci_low:.3f} to {r.ci_high:.3f})"
            for r in self.table.itertuples(index=False)
        ]
        summary = (
            f"On the {self.n_nodes:,} audited nodes ({level} CIs): {'; '.join(parts)}. "
            "Informational (no documented threshold). NIFTY's delta SP, delta EO and "
            "counterfactual unfairness are the findings statistical parity, equal opportunity "
            "and counterfactual flip (graph scope)."
        )
        status = "ok"
        if self.single_class is not None:
            status = "not meaningful"
            summary = (
                f"The model predicts {class_label(self.single_class, self.class_names)} on every "
                "audited node, so F1 and instability describe a constant decision and none is "
                "reported as a finding (values in the table for reference). " + summary
            )
        chart = self.table[["name", "value", "ci_low", "ci_high"]].rename(columns={"name": "label"})
        return ReportSection(
            key=LiteratureMetricsUnit.name,
            title=LiteratureMetricsUnit.title,
            summary=summary,
            tables={"metrics": self.table},
            figures=[
                Figure(
                    kind="bar",
                    title="AUROC, F1 and instability on the audited nodes",
                    data=chart,
                    options={"xlabel": "value", "xlim": [0, 1]},
                )
            ],
            notes=list(self.notes),
            status=status,
            data={str(r.metric): float(r.value) for r in self.table.itertuples(index=False)},
        )


class LiteratureMetricsUnit(AuditUnit):
    """Audit unit: AUROC, F1 and instability on the audited nodes, each with an interval
    (module docstring; ΔSP, ΔEO and counterfactual unfairness are other units' findings).

    Parameters
    ----------
    noise_std : standard deviation :math:`\\sigma` of the instability noise (NIFTY: 1).
    """

    name = "literature"
    title = "Fair-GNN literature metrics: AUROC, F1, instability"
    requires = ("labels",)
    meaningless_when_degenerate = True

    def __init__(self, noise_std: float = 1.0) -> None:
        self.noise_std = check_float("noise_std", noise_std, minimum=0.0)

    def run(self, ctx: AuditContext) -> LiteratureMetricsResult:
        rows, explanations, notes = compute_rows(ctx, self.noise_std)
        classes = np.unique(ctx.predictions[ctx.nodes])
        return LiteratureMetricsResult(
            table=pd.DataFrame(rows, columns=LITERATURE_COLUMNS),
            explanations=explanations,
            sensitive_name=ctx.sensitive_name,
            n_nodes=int(ctx.nodes.size),
            n_classes=int(ctx.logits.shape[1]),
            confidence=ctx.options.confidence,
            single_class=int(classes[0]) if classes.size == 1 else None,
            notes=notes,
            class_names=ctx.class_names,
        )
