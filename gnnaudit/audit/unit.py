"""The shape of the audit (flat: every subpackage's units subclass it): statistics as small
units run over one shared context.

Each audit statistic is an :class:`AuditUnit`: it declares what it needs (labels, a sensitive
attribute, counterfactual evidences ...) and how many evidences, and its :meth:`AuditUnit.run`
takes the shared :class:`~gnnaudit.audit.context.AuditContext` (model, data, options, cached
predictions and evidences) and returns an :class:`AuditResult` with ``to_frame()``,
``report_section()`` and ``findings()``. Unit-specific options go to the unit's constructor;
options every unit shares (seed, bootstrap size, ``k``, search backend) live in
:class:`~gnnaudit.audit.context.AuditOptions`.

:func:`run_units` runs a list of units in order: it fetches the evidences once at the largest
size any unit asked for, skips a unit whose inputs are missing with a section that says why, and
times every unit and counts its work: the model calls it made through the audit's
:class:`~gnnaudit.audit.model_adapter.ModelAdapter` and the node rows they evaluated, in units
of whole-graph passes (the timings and counts go to the report's run information,
``run_info["seconds"]``, ``["model_calls"]`` and ``["model_passes"]``, never to its findings;
with a Dask client the workers' passes are counted in ``run_info["distributed"]`` instead).
``run_audit`` / ``audit_model`` are thin wrappers choosing the list.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from gnnaudit.audit.report.section import Finding, ReportSection
from gnnaudit.audit.result import AuditResult, UnitSkipped
from gnnaudit.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from gnnaudit.audit.context import AuditContext

__all__ = [
    "UnitSkipped",
    "AuditResult",
    "AuditUnit",
    "UnitsOutcome",
    "run_units",
    "describe_units",
    "REQUIREMENTS",
]

logger = logging.getLogger(__name__)

#: what a unit may require of the context (see :meth:`AuditContext.missing`)
REQUIREMENTS = ("labels", "sensitive", "sensitive_feature", "evidence", "train_mask")


class AuditUnit(ABC):
    """One audit statistic. Subclasses set :attr:`name`, :attr:`title`, :attr:`requires` and
    implement :meth:`run`; they may override :meth:`evidence_needed`."""

    #: stable key of the unit's report section
    name: ClassVar[str] = ""
    #: heading of the unit's report section
    title: ClassVar[str] = ""
    #: inputs the unit cannot run without (a subset of :data:`REQUIREMENTS`)
    requires: ClassVar[tuple[str, ...]] = ()
    #: True when the statistic says nothing about a degenerate (near-constant) model: its
    #: section is then marked "not meaningful" and its findings are never flagged
    meaningless_when_degenerate: ClassVar[bool] = False

    def unavailable(self, ctx: AuditContext) -> str | None:
        """Why the unit cannot run on ``ctx`` beyond its :attr:`requires` (e.g. the model is not
        a LightningModule), in plain words; None when it can. Default: None."""
        return None

    def evidence_needed(self, ctx: AuditContext) -> tuple[int, int]:
        """``(local_k, global_k)``: evidences per audited node and global pairs the unit will
        read from the context (0 = none). :func:`run_units` fetches the maximum once."""
        return 0, 0

    def factual_inputs(self, ctx: AuditContext) -> list[tuple[Any, np.ndarray]]:
        """``(layer, rows)`` pairs: inputs of the model's layers at some rows that the unit will
        read from the factual pass (:meth:`AuditContext.factual_input`). :func:`run_units` asks
        the context to keep them before that pass runs. Default: none."""
        return []

    @abstractmethod
    def run(self, ctx: AuditContext) -> AuditResult:
        """Compute the statistic on the shared context."""

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({params})"


@dataclass
class UnitsOutcome:
    """What :func:`run_units` produced, in unit order."""

    sections: list[ReportSection] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    results: dict[str, AuditResult] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    #: stage -> ``{"model_calls": calls, "passes": rows / nodes}``: the model calls each stage
    #: made through the audit's adapter and the rows they evaluated in whole-graph passes
    work: dict[str, dict[str, float]] = field(default_factory=dict)


class _StageWork:
    """Counts the model calls and rows of one stage from the adapter's counters."""

    def __init__(self, ctx: AuditContext) -> None:
        self.adapter = ctx.adapter
        self.nodes = max(1, int(ctx.num_nodes))
        self.calls, self.rows = self.adapter.calls, self.adapter.rows

    def done(self) -> dict[str, float]:
        return {
            "model_calls": self.adapter.calls - self.calls,
            "passes": round((self.adapter.rows - self.rows) / self.nodes, 3),
        }


def run_units(
    ctx: AuditContext, units: Sequence[AuditUnit], *, progress: bool | None = None
) -> UnitsOutcome:
    """Run ``units`` in order on ``ctx`` (see the module docstring).

    A unit whose :attr:`~AuditUnit.requires` are not met, or that raises :class:`UnitSkipped`,
    gets a ``skipped`` section stating the reason in plain words; every other failure propagates
    (a broken statistic is a bug, not a finding).
    """
    from tqdm.auto import tqdm

    names = [u.name for u in units]
    for unit in units:
        if not isinstance(unit, AuditUnit):
            raise InvalidInputError(f"units must be AuditUnit instances, got {type(unit).__name__}")
        if not unit.name:
            raise InvalidInputError(f"{type(unit).__name__} has no name")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidInputError(f"units must have distinct names; repeated: {duplicates}")

    outcome = UnitsOutcome()
    start, work = time.perf_counter(), _StageWork(ctx)
    work.calls = work.rows = 0  # the factual pass (and any before this call) counts here
    for unit in units:
        for layer, rows in unit.factual_inputs(ctx):
            ctx.keep_factual_input(layer, rows)
    _ = ctx.logits
    outcome.seconds["predictions"] = time.perf_counter() - start
    outcome.work["predictions"] = work.done()
    runnable = [u for u in units if _why_not(ctx, u) is None]
    needs = [u.evidence_needed(ctx) for u in runnable]
    local_k = max((n[0] for n in needs), default=0)
    global_k = max((n[1] for n in needs), default=0)
    if (local_k or global_k) and ctx.missing(("evidence",)) is None:
        start, work = time.perf_counter(), _StageWork(ctx)
        ctx.prefetch(local_k=local_k, global_k=global_k)
        outcome.seconds["evidence_search"] = time.perf_counter() - start
        outcome.work["evidence_search"] = work.done()

    show = ctx.options.progress if progress is None else progress
    bar = tqdm(units, desc="audit", disable=not show, leave=False)
    for unit in bar:
        bar.set_postfix_str(unit.name)
        reason = _why_not(ctx, unit)
        if reason is not None:
            logger.info("audit unit %s skipped: %s", unit.name, reason)
            outcome.sections.append(ReportSection.skipped(unit.name, unit.title, reason))
            continue
        start, work = time.perf_counter(), _StageWork(ctx)
        try:
            result = unit.run(ctx)
        except UnitSkipped as skip:
            logger.info("audit unit %s skipped: %s", unit.name, skip)
            outcome.sections.append(ReportSection.skipped(unit.name, unit.title, str(skip)))
            continue
        outcome.seconds[unit.name] = time.perf_counter() - start
        outcome.work[unit.name] = work.done()
        outcome.results[unit.name] = result
        ctx.results[unit.name] = result
        section = result.report_section()
        findings = result.findings()
        degenerate = ctx.degenerate_reason
        if degenerate is not None and unit.meaningless_when_degenerate:
            section, findings = _mark_not_meaningful(section, findings, degenerate)
        findings = _computable(section, findings)
        outcome.sections.append(section)
        outcome.findings.extend(findings)
    bar.close()
    return outcome


def _why_not(ctx: AuditContext, unit: AuditUnit) -> str | None:
    reason = ctx.missing(unit.requires)
    return reason if reason is not None else unit.unavailable(ctx)


def _computable(section: ReportSection, findings: list[Finding]) -> list[Finding]:
    """The findings whose value is a number; each one that is not (its statistic could not be
    computed) is left out of the findings table and named in the section's notes instead, so
    the table never holds a NaN finding."""
    kept = [f for f in findings if math.isfinite(f.value)]
    for f in findings:
        if not math.isfinite(f.value):
            section.notes.append(
                f"{f.finding} ({f.statistic}) of {f.feature or 'the model'} could not be computed "
                "on these nodes and is left out of the findings."
            )
    return kept


def _mark_not_meaningful(
    section: ReportSection, findings: list[Finding], reason: str
) -> tuple[ReportSection, list[Finding]]:
    """A degenerate model makes a statistic uninformative: say so in its section and never
    flag its findings."""
    note = f"Not meaningful for this model: {reason}."
    section.status = "not meaningful"
    section.summary = f"{note} {section.summary}".strip()
    marked = [
        dataclasses.replace(f, flagged=False, explanation=f"{note} {f.explanation}".strip())
        for f in findings
    ]
    return section, marked


def describe_units(units: Sequence[AuditUnit]) -> list[dict[str, Any]]:
    """JSON-safe description of a unit list (for the report's configuration)."""
    return [{"name": u.name, "unit": repr(u)} for u in units]
