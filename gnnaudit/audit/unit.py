"""The shape of the audit: statistics as small units run over one shared context.

Each audit statistic is an :class:`AuditUnit`: it declares what it needs (labels, a sensitive
attribute, counterfactual evidences ...) and how many evidences, and its :meth:`AuditUnit.run`
takes the shared :class:`~gnnaudit.audit.context.AuditContext` (model, data, options, cached
predictions and evidences) and returns an :class:`AuditResult` with ``to_frame()``,
``report_section()`` and ``findings()``. Unit-specific options go to the unit's constructor;
options every unit shares (seed, bootstrap size, ``k``, search backend) live in
:class:`~gnnaudit.audit.context.AuditOptions`.

:func:`run_units` runs a list of units in order: it fetches the evidences once at the largest
size any unit asked for, skips a unit whose inputs are missing with a section that says why, and
times every unit (the timings go to the report's run information, never to its findings).
``run_audit`` / ``audit_model`` are thin wrappers choosing the list.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from gnnaudit.audit.report_section import Finding, ReportSection
from gnnaudit.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = [
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


class AuditResult(ABC):
    """What an audit unit returns."""

    @abstractmethod
    def to_frame(self) -> pd.DataFrame:
        """The result's main table."""

    @abstractmethod
    def report_section(self) -> ReportSection:
        """The result rendered as one report section (title, plain-words summary, tables ...)."""

    def findings(self) -> list[Finding]:
        """Rows for the report's findings table (default: none)."""
        return []


class AuditUnit(ABC):
    """One audit statistic. Subclasses set :attr:`name`, :attr:`title`, :attr:`requires` and
    implement :meth:`run`; they may override :meth:`evidence_needed`."""

    #: stable key of the unit's report section
    name: ClassVar[str] = ""
    #: heading of the unit's report section
    title: ClassVar[str] = ""
    #: inputs the unit cannot run without (a subset of :data:`REQUIREMENTS`)
    requires: ClassVar[tuple[str, ...]] = ()

    def evidence_needed(self, ctx: AuditContext) -> tuple[int, int]:
        """``(local_k, global_k)``: evidences per audited node and global pairs the unit will
        read from the context (0 = none). :func:`run_units` fetches the maximum once."""
        return 0, 0

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


def run_units(
    ctx: AuditContext, units: Sequence[AuditUnit], *, progress: bool | None = None
) -> UnitsOutcome:
    """Run ``units`` in order on ``ctx`` (see the module docstring).

    A unit whose :attr:`~AuditUnit.requires` are not met gets a ``skipped`` section stating the
    reason in plain words; every other failure propagates (a broken statistic is a bug, not a
    finding).
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
    runnable = [u for u in units if ctx.missing(u.requires) is None]
    needs = [u.evidence_needed(ctx) for u in runnable]
    local_k = max((n[0] for n in needs), default=0)
    global_k = max((n[1] for n in needs), default=0)
    if (local_k or global_k) and ctx.missing(("evidence",)) is None:
        start = time.perf_counter()
        ctx.prefetch(local_k=local_k, global_k=global_k)
        outcome.seconds["evidence_search"] = time.perf_counter() - start

    show = ctx.options.progress if progress is None else progress
    bar = tqdm(units, desc="audit", disable=not show, leave=False)
    for unit in bar:
        bar.set_postfix_str(unit.name)
        reason = ctx.missing(unit.requires)
        if reason is not None:
            logger.info("audit unit %s skipped: %s", unit.name, reason)
            outcome.sections.append(ReportSection.skipped(unit.name, unit.title, reason))
            continue
        start = time.perf_counter()
        result = unit.run(ctx)
        outcome.seconds[unit.name] = time.perf_counter() - start
        outcome.results[unit.name] = result
        outcome.sections.append(result.report_section())
        outcome.findings.extend(result.findings())
    bar.close()
    return outcome


def describe_units(units: Sequence[AuditUnit]) -> list[dict[str, Any]]:
    """JSON-safe description of a unit list (for the report's configuration)."""
    return [{"name": u.name, "unit": repr(u)} for u in units]
