"""Mitigation in the audit: fine-tune a copy of the model with :class:`FairFinetune` against
what the audit found, re-audit it, and report the two side by side.

**Targets from the findings** (:func:`mitigation_targets`, defined in
:mod:`gnnaudit.audit.report.summary`, whose summary card names them as the next step): a
flagged statistical parity gap -> ``"dsp"``, a flagged equal-opportunity gap -> ``"deo"``, a
flagged counterfactual flip at either scope -> ``"cf"`` (the consistency term then runs at ``lambda_cf``; without it the
consistency weight is 0); nothing flagged -> all three. ``FairFinetune.finetune`` selects the
copy on the validation nodes (the lowest sum of the targeted gaps within its AUROC budget, the
model as given always a candidate), and its warning, when no candidate lowers a targeted gap,
is logged and kept in the section's notes.

:func:`mitigation_metrics` (:mod:`gnnaudit.training.before_after`) measures, each with its
interval, what the fair-GNN literature reports: the counterfactual flip rate at node and graph
scope, the statistical parity and equal opportunity differences, the AUROC of the class-1
probability and the accuracy on the audited nodes.

:class:`MitigationUnit` runs it on the audited model and on its mitigated copy and produces the
"Before / after mitigation" section: the table of both columns with intervals and a ``worse``
column flagging every figure that got worse (a gap or flip up, AUROC or accuracy down), a
plain-words summary naming the targets and why, and the trade-off figure of accuracy against
flip rate for the consistency term alone over a small grid of ``lambda_cf`` (``targets=("cf",)``,
no selection; ``lambda_cf = 0`` is plain fine-tuning, the control). The mitigated model's
``state_dict`` is attached to the report as ``mitigated_model.pt`` (written beside
``report.json`` by :meth:`~gnnaudit.audit.AuditReport.save`, readable with ``torch.load(path,
weights_only=True)``). The unit adds no finding: the findings and the verdict describe the
audited model, never its mitigated copy.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from gnnaudit._validation import check_float
from gnnaudit.audit.report.section import Figure, ReportSection
from gnnaudit.audit.report.summary import mitigation_targets
from gnnaudit.audit.unit import AuditResult, AuditUnit
from gnnaudit.errors import InvalidInputError
from gnnaudit.training.before_after import HIGHER_IS_BETTER, METRIC_COLUMNS, mitigation_metrics
from gnnaudit.training.fair_finetune import (
    DEFAULT_EPOCHS,
    DEFAULT_LAMBDA_CF,
    FairFinetune,
    resolve_sensitive_feature,
)

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = [
    "METRIC_COLUMNS",
    "CHECKPOINT_NAME",
    "DEFAULT_GRID",
    "mitigation_metrics",
    "mitigation_targets",
    "MitigationResult",
    "MitigationUnit",
]

logger = logging.getLogger(__name__)

#: file name of the mitigated model's state_dict beside the report
CHECKPOINT_NAME = "mitigated_model.pt"
#: ``lambda_cf`` values of the trade-off figure
DEFAULT_GRID: tuple[float, ...] = (0.0, 0.5, 1.0, 4.0)


@dataclass
class MitigationResult(AuditResult):
    """Before / after mitigation (see the module docstring).

    Attributes
    ----------
    before, after : :func:`mitigation_metrics` of the audited model and of its mitigated copy.
    tradeoff : one row per grid value: ``lambda_cf, scope, flip_rate, accuracy``.
    settings : the fine-tuning settings (``lambda_cf``, ``lambda_ev``, ``epochs`` ...).
    state_dict : the mitigated model's weights (CPU tensors).
    sensitive_name, confidence : as audited.
    selection_gain : the returned candidate's validation gain per targeted gap, with its paired
        bootstrap interval (``FairFinetune.finetune``'s ``selection_gain_``; empty when absent).
    """

    before: pd.DataFrame
    after: pd.DataFrame
    tradeoff: pd.DataFrame
    settings: dict[str, Any]
    state_dict: dict[str, torch.Tensor] = field(repr=False, default_factory=dict)
    sensitive_name: str = "sensitive"
    confidence: float = 0.95
    selection_gain: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def checkpoints(self) -> dict[str, dict[str, torch.Tensor]]:
        """Files to write beside the report: ``{CHECKPOINT_NAME: state_dict}``."""
        return {CHECKPOINT_NAME: self.state_dict}

    def to_frame(self) -> pd.DataFrame:
        """``metric, scope, before, before_ci_low, before_ci_high, after, after_ci_low,
        after_ci_high, change`` (after minus before)."""
        b = self.before.rename(
            columns={"value": "before", "ci_low": "before_ci_low", "ci_high": "before_ci_high"}
        )
        a = self.after.rename(
            columns={"value": "after", "ci_low": "after_ci_low", "ci_high": "after_ci_high"}
        )
        frame = b.merge(a, on=["metric", "scope"], how="left", sort=False)
        frame["change"] = frame["after"] - frame["before"]
        better_up = frame["metric"].map(HIGHER_IS_BETTER).fillna(False).astype(bool)
        frame["worse"] = np.where(better_up, frame["change"] < 0, frame["change"] > 0)
        return frame

    def worse(self) -> list[str]:
        """``"metric (scope): before -> after"`` for every metric the mitigation made worse."""
        frame = self.to_frame()
        return [
            f"{r.metric}{f' ({r.scope} scope)' if r.scope else ''}: {r.before:.3f} -> {r.after:.3f}"
            for r in frame[frame["worse"]].itertuples()
        ]

    def _value(self, frame: pd.DataFrame, metric: str, scope: str = "") -> float:
        row = frame[(frame["metric"] == metric) & (frame["scope"] == scope)]
        return float(row["value"].iloc[0]) if len(row) else math.nan

    def _sentence(self, metric: str, scope: str, label: str) -> str:
        b, a = self._value(self.before, metric, scope), self._value(self.after, metric, scope)
        if not (math.isfinite(b) and math.isfinite(a)):
            return f"{label}: {b:.3f} before, {a:.3f} after."
        rel = f" ({(a - b) / b:+.0%})" if b > 0 else ""
        return f"{label}: {b:.3f} before, {a:.3f} after{rel}."

    def _gain_sentence(self) -> str:
        """The validation gain of the targeted gaps' sum with its interval, in words ("" when
        the selection left no gain table)."""
        gain = self.selection_gain
        if not len(gain) or "sum" not in set(gain["gap"]):
            return ""
        row = gain[gain["gap"] == "sum"].iloc[0]
        if float(row["reduction"]) == 0.0:
            return ""
        verdict = "more than chance" if bool(row["established"]) else "not more than chance"
        return (
            "On the nodes that chose it (ΔEO: validation nodes; ΔSP and flips: every node "
            "outside the test set), the copy lowers the sum of the targeted gaps by "
            f"{float(row['reduction']):.3f} (95% paired bootstrap interval "
            f"{float(row['ci_low']):.3f} to {float(row['ci_high']):.3f}): {verdict}, before "
            "allowing for the choice among candidates (table selection_gain)."
        )

    def report_section(self) -> ReportSection:
        name = self.sensitive_name
        s = self.settings
        level = f"{self.confidence:.0%}"
        worse = self.worse()
        parts = [
            f"A copy of the model was fine-tuned against the gaps of {name} "
            f"({s.get('targets_reason', 'targets ' + ', '.join(s.get('targets', ())))}; "
            f"FairFinetune, {s['epochs']} epochs, selected on the validation nodes within "
            "its AUROC budget) and audited again.",
            _remedy_sentence(s, name),
            self._sentence(
                "flip rate",
                "node",
                f"Share of decisions that change when a node's own {name} is changed",
            ),
            self._sentence("flip rate", "graph", f"When every node's {name} is changed"),
            self._sentence("statistical parity difference", "", "Statistical parity difference"),
            self._sentence("equal opportunity difference", "", "Equal opportunity difference"),
            self._sentence("auroc", "", "AUROC"),
            self._sentence("accuracy", "", "Accuracy on the audited nodes"),
            (f"Got worse: {'; '.join(worse)}." if worse else "No figure got worse."),
            self._gain_sentence(),
        ]
        summary = " ".join(part for part in parts if part)
        curve = self.tradeoff.rename(columns={"flip_rate": "x", "accuracy": "y", "scope": "series"})
        curve["series"] = [f"{sc} scope" for sc in curve["series"]]
        return ReportSection(
            key=MitigationUnit.name,
            title=f"Before / after mitigation (sensitive: {name})",
            summary=summary,
            tables={
                "before_after": self.to_frame(),
                "tradeoff": self.tradeoff,
                **({"selection_gain": self.selection_gain} if len(self.selection_gain) else {}),
            },
            figures=[
                Figure(
                    kind="curve",
                    title=f"Accuracy against {name} flip rate over lambda_cf "
                    f"{', '.join(f'{v:g}' for v in sorted(self.tradeoff['lambda_cf'].unique()))}",
                    data=curve[["x", "y", "series"]],
                    options={"xlabel": f"{name} flip rate", "ylabel": "accuracy (audited nodes)"},
                )
            ],
            notes=[
                f"Intervals: {level}; exact for the flip rates, Newcombe's score interval of the "
                "signed difference for the two gaps, bootstrap for AUROC and accuracy. The "
                "fine-tuned model is a copy; the findings and the verdict above describe the "
                "audited model. A figure that got worse is flagged in the table (worse).",
                "Labels that encode a bias reward using the sensitive attribute, so removing the "
                "dependence can lower accuracy against them; the trade-off figure shows how "
                "much for the consistency term alone (targets cf, no selection), with "
                "lambda_cf = 0 (plain fine-tuning) as the control.",
                *[f"FairFinetune warned: {w}" for w in s.get("warnings", [])],
                f"The mitigated weights are saved beside the report as {CHECKPOINT_NAME} (a "
                "state_dict; load it with torch.load(path, weights_only=True)).",
            ],
            data={
                "settings": dict(s),
                "checkpoint": CHECKPOINT_NAME,
                "sensitive_name": name,
                "targets": list(s.get("targets", ())),
                "worse": worse,
            },
        )


def _chosen_candidate(model: torch.nn.Module) -> str:
    """The name of the candidate :meth:`FairFinetune.finetune` returned (its ``selection_``)."""
    table = getattr(model, "selection_", None)
    if not isinstance(table, pd.DataFrame) or "chosen" not in table:
        return ""
    return str(table.loc[table["chosen"].astype(bool), "candidate"].iloc[0])


def _chosen_offset(model: torch.nn.Module) -> float:
    """The decision offset folded into the returned candidate (``selection_``'s ``offset``; 0.0
    when absent: argmax decisions)."""
    table = getattr(model, "selection_", None)
    if not isinstance(table, pd.DataFrame) or "offset" not in table or "chosen" not in table:
        return 0.0
    return float(table.loc[table["chosen"].astype(bool), "offset"].iloc[0])


def _selection_gain(model: torch.nn.Module) -> pd.DataFrame:
    """The ``selection_gain_`` table :meth:`FairFinetune.finetune` attached (empty if none)."""
    table = getattr(model, "selection_gain_", None)
    return table.copy() if isinstance(table, pd.DataFrame) else pd.DataFrame()


def _remedy_sentence(settings: Mapping[str, Any], name: str) -> str:
    """What the returned candidate is, in words (blinded, a consistency run, the model as
    given)."""
    chosen = str(settings.get("chosen", ""))
    lam = settings.get("lambda_cf")
    weight = f"lambda_cf = {lam:g}" if isinstance(lam, int | float) else "its default weights"
    offset = float(settings.get("offset", 0.0) or 0.0)
    kept = (
        f" Its class-1 margin is shifted by {offset:+.3g}, so that it gives class 1 to as many "
        "nodes outside the test set as the model did (keep_rate): the remedy changes who gets "
        "class 1, not how many."
        if offset
        else ""
    )
    if chosen.startswith("blind"):
        return (
            f"The chosen candidate ({chosen}) is blinded to {name}: its input weights of {name} "
            "are 0, so changing it changes no decision; the other weights were fine-tuned for "
            "the task and the targeted gaps." + kept
        )
    if chosen == "vanilla":
        return "No fine-tuned candidate was fairer within the AUROC budget: the model as given."
    return f"The chosen candidate ({chosen}) was fine-tuned with {weight}.{kept}" if chosen else ""


class MitigationUnit(AuditUnit):
    """Audit unit: fine-tune a copy of the model with :class:`FairFinetune` and compare.

    Parameters
    ----------
    lambda_cf : weight of the consistency term; None (default): FairFinetune's default remedy
        (input blinding first, the consistency term at
        :data:`~gnnaudit.training.fair_finetune.DEFAULT_LAMBDA_CF` when it runs); a value asks
        for consistency runs at that weight (no blinding).
    lambda_ev, epochs : :meth:`FairFinetune.finetune` settings of the mitigated model.
    grid : ``lambda_cf`` values of the trade-off figure (``lambda_cf``, or its default, is
        always included; empty: no figure beyond that point).
    finetune_kwargs : further :meth:`FairFinetune.finetune` options (``scopes``, ``lr`` ...).
    """

    name = "mitigation"
    title = "Before / after mitigation"
    requires = ("labels", "train_mask", "sensitive_feature")

    def __init__(
        self,
        lambda_cf: float | None = None,
        lambda_ev: float = 0.0,
        epochs: int = DEFAULT_EPOCHS,
        grid: Sequence[float] = DEFAULT_GRID,
        **finetune_kwargs: Any,
    ) -> None:
        self.lambda_cf = (
            None if lambda_cf is None else check_float("lambda_cf", lambda_cf, minimum=0.0)
        )
        self.lambda_ev = check_float("lambda_ev", lambda_ev, minimum=0.0)
        self.epochs = epochs
        self.grid = tuple(check_float("grid entry", g, minimum=0.0) for g in grid)
        self.finetune_kwargs = dict(finetune_kwargs)

    def unavailable(self, ctx: AuditContext) -> str | None:
        model = ctx.adapter.model
        if not isinstance(model, torch.nn.Module) or ctx.adapter.predict_fn is not None:
            return "mitigation fine-tunes an nn.Module called as model(x, edge_index)"
        if ctx.adapter.forward_kwargs:
            return "mitigation calls the model as model(x, edge_index) without forward_kwargs"
        for split in ("val_mask", "test_mask"):
            if getattr(ctx.data, split, None) is None:
                return f"the graph has no {split}"
        return None

    def evidence_needed(self, ctx: AuditContext) -> tuple[int, int]:
        return (0, int(self.finetune_kwargs.get("ev_pairs", 500))) if self.lambda_ev > 0 else (0, 0)

    def run(self, ctx: AuditContext) -> MitigationResult:
        opts = ctx.options
        model = ctx.adapter.model
        spec = resolve_sensitive_feature(ctx.data, ctx.sensitive_column)
        name = ctx.sensitive_name or spec.name
        kwargs = dict(self.finetune_kwargs)
        kwargs.setdefault("progress", opts.progress)
        if self.lambda_ev > 0:
            kwargs.setdefault("evidence", ctx.global_evidence(int(kwargs.get("ev_pairs", 500))))
        findings = [f for result in ctx.results.values() for f in result.findings()]
        targets, reason = mitigation_targets(findings, name)
        if "targets" in kwargs:  # the user's choice wins over the findings
            targets, reason = tuple(kwargs.pop("targets")), "targets as given"
        sensitive = spec.columns[0] if len(spec.columns) == 1 else list(spec.columns)

        def tune(lam: float | None, **extra: Any) -> torch.nn.Module:
            try:
                return FairFinetune.finetune(
                    model,
                    ctx.data,
                    sensitive,
                    lambda_cf=lam,
                    lambda_ev=self.lambda_ev,
                    epochs=self.epochs,
                    random_state=opts.random_state,
                    **{**kwargs, **extra},
                )
            except TypeError as exc:
                raise InvalidInputError(f"MitigationUnit options not accepted: {exc}") from exc

        def measure(m: torch.nn.Module, n_boot: int) -> pd.DataFrame:
            return mitigation_metrics(
                m,
                ctx.data,
                spec,
                nodes=ctx.nodes,
                n_boot=n_boot,
                confidence=opts.confidence,
                random_state=opts.random_state,
                num_hops=kwargs.get("num_hops"),
            )

        before = measure(model, opts.n_boot)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # the consistency term only when a flip is targeted: the remedy aims at the findings
            mitigated = tune(self.lambda_cf if "cf" in targets else 0.0, targets=targets)
        said = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        for text in said:
            logger.warning("mitigation: %s", text)
        chosen = _chosen_candidate(mitigated)
        after = measure(mitigated, opts.n_boot)
        tradeoff = self._tradeoff(tune, measure)
        settings = {
            "lambda_cf": self.lambda_cf,
            "lambda_ev": self.lambda_ev,
            "epochs": self.epochs,
            "targets": list(targets),
            "targets_reason": reason,
            "chosen": chosen,
            "offset": _chosen_offset(mitigated),
            "warnings": said,
            **{
                k: v
                for k, v in kwargs.items()
                if isinstance(v, (int, float, str, bool, tuple, list))
            },
        }
        state = {k: v.detach().cpu().clone() for k, v in mitigated.state_dict().items()}
        return MitigationResult(
            before=before,
            after=after,
            tradeoff=tradeoff,
            settings=settings,
            state_dict=state,
            sensitive_name=name,
            confidence=opts.confidence,
            selection_gain=_selection_gain(mitigated),
        )

    def _tradeoff(self, tune: Any, measure: Any) -> pd.DataFrame:
        """Flip rate and accuracy of the consistency term alone (``targets=("cf",)``, no
        selection) at each ``lambda_cf`` of the grid: the trade-off figure."""
        rows = []
        own = DEFAULT_LAMBDA_CF if self.lambda_cf is None else self.lambda_cf
        for lam in sorted(set(self.grid) | {own}):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                metrics = measure(tune(lam, targets=("cf",), select=False), 1)
            for scope in ("node", "graph"):
                flip = metrics[(metrics["metric"] == "flip rate") & (metrics["scope"] == scope)]
                acc = metrics[metrics["metric"] == "accuracy"]
                rows.append((lam, scope, float(flip["value"].iloc[0]), float(acc["value"].iloc[0])))
        return pd.DataFrame(rows, columns=["lambda_cf", "scope", "flip_rate", "accuracy"])
