"""What an audit unit returns (flat: every unit's result, and the context's, subclass it)
(:class:`AuditResult`) and how it says it cannot run on this input (:class:`UnitSkipped`). Its
own module, below :mod:`gnnaudit.audit.context` and
:mod:`gnnaudit.audit.unit`, so that results computed by the context (model quality) do not
import the units."""

from __future__ import annotations

from abc import ABC, abstractmethod

import pandas as pd

from gnnaudit.audit.report.section import Finding, ReportSection
from gnnaudit.errors import InvalidInputError

__all__ = ["AuditResult", "UnitSkipped"]


class UnitSkipped(InvalidInputError):
    """Raised by :meth:`AuditUnit.run` when the unit cannot produce its statistic on this input
    (found only while computing, e.g. a sensitive group too small for the requested clusters);
    :func:`run_units` turns it into a ``skipped`` section with the message as the reason, and
    the other units still run."""


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
