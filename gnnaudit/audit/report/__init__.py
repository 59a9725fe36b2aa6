"""The audit report: :class:`AuditReport` (findings, verdict, sections, JSON / Markdown / HTML),
its building blocks (:class:`ReportSection`, :class:`Finding`, :class:`Figure`), the renderers,
the figures and the verdict composed from the findings.

Imports nothing else of :mod:`gnnaudit.audit` (the bottom layer of the audit, beside
:mod:`gnnaudit.audit.search`). ``gnnaudit.audit.report`` was one module before 0.2; its public
names (``AuditReport``, ``FORMAT_VERSION``) are still importable from here.
"""

from gnnaudit.audit.report.audit_report import FORMAT_VERSION, AuditReport
from gnnaudit.audit.report.section import Figure, Finding, ReportSection
from gnnaudit.audit.report.verdict import compose_verdict

__all__ = [
    "AuditReport",
    "FORMAT_VERSION",
    "Figure",
    "Finding",
    "ReportSection",
    "compose_verdict",
]
