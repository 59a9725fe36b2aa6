"""The summary card that opens ``report.html`` and ``report.md``: what was found, how sure it
is, and what to do, readable in ten seconds.

:func:`summary_card` composes it from the report alone (findings, verdict, sections, run
information), so the JSON, Markdown and HTML say the same thing:

* the **verdict** (:mod:`gnnaudit.audit.report.verdict`);
* three to five **headline figures** (:func:`headline_findings`), flagged first: a flagged
  degenerate-model finding, the flagged flips and group gaps of the primary sensitive
  attribute, other flagged findings in table order, then its unflagged flips and gaps, filled
  up to three with findings that have an interval;
* one **chart** (:func:`gap_chart`): the flip rates at node and graph scope and the statistical
  parity and equal-opportunity gaps of the primary attribute, each with its interval, against
  the thresholds of :mod:`gnnaudit.audit.report.thresholds` (the level the interval's lower
  end must pass, and for the flips the material level its upper end must reach);
* the single **next step** (:func:`next_step`): improve a degenerate model; name a sensitive
  attribute; say that nothing is flagged; or mitigate with the targets ``--mitigate`` would use
  (:func:`mitigation_targets`: a flagged parity gap -> ``dsp``, a flagged equal-opportunity gap
  -> ``deo``, a flagged flip at either scope -> ``cf``), as the command to run
  (:func:`mitigate_command`, built from the audit's own command line when the CLI recorded it
  in ``run_info["command"]``).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from gnnaudit.audit.report.literature import LITERATURE_ALIASES, literature_statistic
from gnnaudit.audit.report.section import (
    FINDING_COLUMNS,
    Figure,
    Finding,
    ReportSection,
    clean_json,
)
from gnnaudit.audit.report.thresholds import EOD_THRESHOLD, MIN_FLIP_EFFECT, NEGLIGIBLE_FLIP

__all__ = [
    "SummaryCard",
    "NextStep",
    "summary_card",
    "headline_findings",
    "gap_chart",
    "next_step",
    "mitigation_targets",
    "mitigate_command",
    "TARGET_OF",
    "MIN_HEADLINE",
    "MAX_HEADLINE",
]

#: fewest and most headline figures of the card
MIN_HEADLINE, MAX_HEADLINE = 3, 5
#: finding -> the mitigation target (``FairFinetune`` / ``--mitigate``) that answers it
TARGET_OF = {
    "statistical parity": "dsp",
    "equal opportunity": "deo",
    "counterfactual flip (node scope)": "cf",
    "counterfactual flip (graph scope)": "cf",
}
_WHY = {"dsp": "statistical parity", "deo": "equal opportunity", "cf": "a counterfactual flip"}
#: the flips and gaps of the chart, in its order: finding -> (label, lower-end threshold,
#: material level the upper end must reach or NaN)
_CHART = {
    "counterfactual flip (node scope)": ("flip, node scope", NEGLIGIBLE_FLIP, MIN_FLIP_EFFECT),
    "counterfactual flip (graph scope)": ("flip, graph scope", NEGLIGIBLE_FLIP, MIN_FLIP_EFFECT),
    "statistical parity": ("parity gap", 0.0, math.nan),
    "equal opportunity": ("equal-opportunity gap", EOD_THRESHOLD, math.nan),
}
_SHORT = {"dsp": "ΔSP", "deo": "ΔEO", "cf": "CF"}
#: the skip reason of a sensitive attribute that is not a model input
_NOT_INPUT = "is not one of the model's input features"


class _Report(Protocol):
    """What the card reads of an :class:`~gnnaudit.audit.AuditReport`."""

    findings: pd.DataFrame
    verdict: str
    dataset: dict[str, Any]
    sections: list[ReportSection]
    run_info: dict[str, Any]
    config: dict[str, Any]


def mitigation_targets(findings: Sequence[Any], name: str) -> tuple[tuple[str, ...], str]:
    """The :class:`~gnnaudit.training.FairFinetune` targets that answer the flagged findings
    about ``name`` (statistical parity -> ``"dsp"``, equal opportunity -> ``"deo"``, a
    counterfactual flip at either scope -> ``"cf"``), in the order ``cf, dsp, deo``, and the
    reason in words; all three when none is flagged (the default remedy)."""
    flagged = {
        TARGET_OF[f.finding]
        for f in findings
        if f.flagged and f.feature == name and f.finding in TARGET_OF
    }
    if not flagged:
        return ("cf", "dsp", "deo"), (
            f"no finding about {name} was flagged, so the remedy targets all three gaps"
        )
    targets = tuple(t for t in ("cf", "dsp", "deo") if t in flagged)
    return targets, "targets " + ", ".join(f"{t} ({_WHY[t]} of {name} flagged)" for t in targets)


def _as_findings(frame: pd.DataFrame) -> list[Finding]:
    return [
        Finding(**{c: getattr(row, c) for c in FINDING_COLUMNS})
        for row in frame[FINDING_COLUMNS].itertuples(index=False)
    ]


def headline_findings(findings: Sequence[Finding], name: str | None) -> list[Finding]:
    """The card's three to five headline findings, flagged first (module docstring)."""
    core = [
        next((f for f in findings if f.finding == finding and f.feature == name), None)
        for finding in _CHART
    ]
    tiers = [
        [f for f in findings if f.finding == "degenerate model" and f.flagged],
        [f for f in core if f is not None and f.flagged],
        [f for f in findings if f.flagged],
        [f for f in core if f is not None],
    ]
    chosen: list[Finding] = []
    for tier in tiers:
        chosen += [f for f in tier if f not in chosen][: MAX_HEADLINE - len(chosen)]
    with_interval = [f for f in findings if math.isfinite(f.ci_low) and math.isfinite(f.ci_high)]
    chosen += [f for f in with_interval if f not in chosen][: max(0, MIN_HEADLINE - len(chosen))]
    return chosen


def _literature_key(f: Finding) -> str | None:
    return next(
        (k for k in LITERATURE_ALIASES if f.statistic == literature_statistic(k)),
        None,
    )


def gap_chart(findings: Sequence[Finding], name: str | None) -> Figure | None:
    """The card's chart: the flips and gaps of ``name`` with their intervals against their
    thresholds (an ``"interval"`` figure of :mod:`gnnaudit.audit.report.plots`); None when
    the report has none of them."""
    rows = []
    for finding, (label, threshold, material) in _CHART.items():
        f = next((f for f in findings if f.finding == finding and f.feature == name), None)
        if f is None:
            continue
        key = _literature_key(f)
        rows.append(
            {
                "label": f"{label} ({_SHORT[key]})" if key else label,
                "value": f.value,
                "ci_low": f.ci_low,
                "ci_high": f.ci_high,
                "flagged": bool(f.flagged),
                "threshold": threshold,
                "material": material,
            }
        )
    if not rows:
        return None
    return Figure(
        kind="interval",
        title=f"Flip rates and group gaps of {name} against their thresholds",
        data=pd.DataFrame(rows),
        options={"xlabel": "share of audited nodes (flip rate or gap between groups)"},
    )


@dataclass(frozen=True)
class NextStep:
    """The card's next step: a sentence, and the command (CLI) or call (Python) to run, with
    the mitigation targets it would use (empty when the step is not a mitigation)."""

    text: str
    command: str | None = None
    python: str | None = None
    targets: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The step as a JSON-ready dict (``report.json``'s ``summary.next_step``)."""
        return {
            "text": self.text,
            "command": self.command,
            "python": self.python,
            "targets": list(self.targets),
        }


def mitigate_command(command: str | None) -> str:
    """The audit's command line with ``--mitigate`` added, ``--force`` dropped and ``--out
    DIR`` moved to ``DIR-mitigated`` (so the first report stays); ``gnnaudit audit ...
    --mitigate`` when the command is unknown (a Python audit)."""
    if not command:
        return "gnnaudit audit ... --mitigate"
    tokens = shlex.split(command)
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in ("--force", "--mitigate"):
            pass
        elif token == "--out" and i + 1 < len(tokens):
            out += [token, f"{tokens[i + 1].rstrip('/')}-mitigated"]
            i += 1
        elif token.startswith("--out="):
            out.append(f"{token.rstrip('/')}-mitigated")
        else:
            out.append(token)
        i += 1
    return shlex.join([*out, "--mitigate"])


def next_step(
    findings: Sequence[Finding],
    name: str | None,
    sections: Sequence[ReportSection],
    command: str | None = None,
) -> NextStep:
    """The single next step of the card (module docstring)."""
    if any(f.finding == "degenerate model" and f.flagged for f in findings):
        cause = next(
            (str(c) for s in sections if (c := (s.data or {}).get("degenerate_cause"))), None
        )
        return NextStep(
            "Improve the model first: it is degenerate (see Model quality), so its fairness "
            "figures carry no information about how it decides; retrain it and audit it again."
            + (f" {cause}" if cause else "")
        )
    if not name:
        return NextStep(
            "Name the sensitive attribute (CLI: --sensitive NAME; Python: sensitive=NAME) to "
            "test whether the decisions depend on it."
        )
    flagged = [f for f in findings if f.flagged and f.feature == name and f.finding in TARGET_OF]
    if not flagged:
        return NextStep(
            f"Nothing to mitigate: no flip or group gap of {name} crosses its documented "
            "threshold, so no fairness fix is called for at these thresholds."
        )
    targets, _ = mitigation_targets(findings, name)
    why = ", ".join(f"{t} for {_WHY[t]} of {name}" for t in targets)
    by_key = {s.key: s for s in sections}
    skipped = by_key.get("sensitivity")
    if skipped is not None and _NOT_INPUT in str(skipped.data.get("skipped_reason", "")):
        return NextStep(
            f"Look at the inputs that carry {name}: it is not a model input, so --mitigate "
            f"(fine-tuning against changes of {name}) cannot run; the Proxies section names "
            "the inputs that predict it."
        )
    done = by_key.get("mitigation")
    if done is not None and done.status == "ok":
        checkpoint = done.data.get("checkpoint", "mitigated_model.pt")
        return NextStep(
            f"Compare before and after: a copy of the model was fine-tuned against what was "
            f"flagged ({why}); the Before / after mitigation section shows both, and its weights "
            f"are {checkpoint}.",
            targets=targets,
        )
    return NextStep(
        "Mitigate: run the audit again with --mitigate. It fine-tunes a copy of the model "
        f"against what was flagged (targets {why}), audits the copy beside the original and "
        "saves its weights as mitigated_model.pt.",
        command=mitigate_command(command),
        python=None if command else f"audit_model(model, data, sensitive={name!r}, mitigate=True)",
        targets=targets,
    )


@dataclass
class SummaryCard:
    """The card of :func:`summary_card` (module docstring)."""

    verdict: str
    headline: list[Finding]
    chart: Figure | None
    next_step: NextStep
    confidence: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The card without its chart, JSON-ready (``report.json``'s ``summary`` entry)."""
        return {
            "verdict": self.verdict,
            "headline": [f.to_dict() for f in self.headline],
            "next_step": self.next_step.to_dict(),
            "confidence": clean_json(self.confidence),
        }


def summary_card(report: _Report) -> SummaryCard:
    """The summary card of ``report`` (module docstring)."""
    findings = _as_findings(report.findings)
    name = report.dataset.get("sensitive_name")
    name = str(name) if name else None
    confidence = report.config.get("confidence")
    return SummaryCard(
        verdict=report.verdict,
        headline=headline_findings(findings, name),
        chart=gap_chart(findings, name),
        next_step=next_step(findings, name, report.sections, report.run_info.get("command")),
        confidence=float(confidence) if isinstance(confidence, (int, float)) else None,
    )
