"""The pieces an audit report is made of: findings, sections and figures.

An audit statistic returns a result whose :meth:`report_section` is a :class:`ReportSection`
(title, one plain-words summary, named tables, figures, notes, status) and whose ``findings``
are :class:`Finding` rows. :class:`~gnnaudit.audit.AuditReport` stores both and renders them to
JSON, Markdown and HTML with one generic renderer: a statistic never writes HTML itself.

Everything here is JSON-serialisable through ``to_dict`` / ``from_dict`` (DataFrames as
``{columns, dtypes, data}``; NaN and inf become ``null``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit.errors import InvalidInputError

__all__ = [
    "Finding",
    "Figure",
    "ReportSection",
    "FINDING_COLUMNS",
    "SECTION_STATUSES",
    "findings_frame",
    "clean_json",
    "frame_to_json",
    "frame_from_json",
    "class_label",
]

#: columns of :attr:`AuditReport.findings <gnnaudit.audit.AuditReport.findings>`
FINDING_COLUMNS = [
    "finding",
    "feature",
    "statistic",
    "value",
    "ci_low",
    "ci_high",
    "p_value",
    "flagged",
    "explanation",
]

#: ``ok``: computed and meaningful; ``skipped``: not computed (missing input, e.g. no labels);
#: ``not meaningful``: computed, but the model or data make it uninformative (e.g. a model that
#: predicts one class), so it must not be read as a finding.
SECTION_STATUSES = ("ok", "skipped", "not meaningful")


# ----------------------------------------------------------------------------------------------
# JSON helpers (shared by every report piece)
# ----------------------------------------------------------------------------------------------
def clean_json(value: Any) -> Any:
    """A JSON-safe copy of ``value``: numpy scalars and arrays to Python, NaN / inf to None."""
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return [clean_json(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def frame_to_json(frame: pd.DataFrame | None) -> dict[str, Any] | None:
    """``{columns, dtypes, data}`` of a DataFrame (None stays None)."""
    if frame is None:
        return None
    return {
        "columns": [str(c) for c in frame.columns],
        "dtypes": [str(t) for t in frame.dtypes],
        "data": clean_json(frame.to_numpy(dtype=object).tolist()),
    }


def frame_from_json(payload: dict[str, Any] | None) -> pd.DataFrame | None:
    """Inverse of :func:`frame_to_json` (``null`` in a float column becomes NaN)."""
    if payload is None:
        return None
    frame = pd.DataFrame(payload["data"], columns=payload["columns"])
    for col, dtype in zip(payload["columns"], payload["dtypes"], strict=True):
        try:
            frame[col] = frame[col].astype(dtype)
        except (TypeError, ValueError):
            frame[col] = frame[col].astype(object)
    return frame


def class_label(c: int, class_names: Any = None, *, bare: bool = False) -> str:
    """Class ``c`` as the report's sentences name it: ``"'yes' (class 1)"`` when
    ``class_names`` (the user's label values, ``data.class_names``) names it, else
    ``"class 1"`` (``bare``: ``"1"``)."""
    if class_names is not None and 0 <= int(c) < len(class_names):
        return f"'{class_names[int(c)]}' (class {int(c)})"
    return str(c) if bare else f"class {c}"


def _optional_float(value: Any) -> float:
    if value is None:
        return math.nan
    return float(value)


# ----------------------------------------------------------------------------------------------
# findings
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    """One decision-relevant statement of the audit (a row of ``AuditReport.findings``).

    Attributes
    ----------
    finding : short name, e.g. ``"counterfactual flip (node scope)"``.
    feature : the feature it concerns (usually the sensitive attribute), or ``""``.
    statistic : what ``value`` measures, e.g. ``"flip rate"``, ``"statistical parity difference"``.
    value, ci_low, ci_high : the estimate and its confidence interval (NaN when none applies).
    p_value : permutation / test p-value (NaN when none applies).
    flagged : True when the documented threshold of the statistic is crossed.
    explanation : one or two sentences in plain words a non-statistician can act on, stating
        the threshold used.
    """

    finding: str
    feature: str
    statistic: str
    value: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_value: float = math.nan
    flagged: bool = False
    explanation: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The finding as a JSON-ready dict (what ``report.json`` stores)."""
        return clean_json({name: getattr(self, name) for name in FINDING_COLUMNS})

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Finding:
        """The finding stored by :meth:`to_dict`."""
        return cls(
            finding=str(payload["finding"]),
            feature=str(payload.get("feature") or ""),
            statistic=str(payload["statistic"]),
            value=_optional_float(payload.get("value")),
            ci_low=_optional_float(payload.get("ci_low")),
            ci_high=_optional_float(payload.get("ci_high")),
            p_value=_optional_float(payload.get("p_value")),
            flagged=bool(payload.get("flagged", False)),
            explanation=str(payload.get("explanation") or ""),
        )


def findings_frame(findings: list[Finding] | tuple[Finding, ...]) -> pd.DataFrame:
    """A DataFrame with :data:`FINDING_COLUMNS`, one row per finding, in the given order."""
    rows = [[getattr(f, c) for c in FINDING_COLUMNS] for f in findings]
    frame = pd.DataFrame(rows, columns=FINDING_COLUMNS)
    return frame.astype(
        {
            "finding": object,
            "feature": object,
            "statistic": object,
            "value": np.float64,
            "ci_low": np.float64,
            "ci_high": np.float64,
            "p_value": np.float64,
            "flagged": bool,
            "explanation": object,
        }
    )


# ----------------------------------------------------------------------------------------------
# figures and sections
# ----------------------------------------------------------------------------------------------
@dataclass
class Figure:
    """A chart described by data, drawn by the report renderer (never by the statistic).

    Attributes
    ----------
    kind : the renderer's chart type, e.g. ``"bar"`` (``label``, ``value`` columns, optional
        ``ci_low`` / ``ci_high`` whiskers), ``"curve"`` (``x``, ``y`` and optional ``series``),
        ``"scatter"`` (``x``, ``y``, optional ``color`` and ``marker``), ``"pair_cards"``
        (evidence pairs; reads the section's ``pairs`` and ``pair_features`` tables).
    title : caption and alt text.
    data : the plotted values (may be empty for ``pair_cards``).
    options : JSON-safe rendering hints (axis labels, ``highlight`` label, reference lines ...).
    """

    kind: str
    title: str
    data: pd.DataFrame = field(default_factory=pd.DataFrame)
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The figure as a JSON-ready dict (its data as records)."""
        return {
            "kind": self.kind,
            "title": self.title,
            "data": frame_to_json(self.data),
            "options": clean_json(self.options),
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Figure:
        """The figure stored by :meth:`to_dict`."""
        data = frame_from_json(payload.get("data"))
        return cls(
            kind=str(payload["kind"]),
            title=str(payload.get("title", "")),
            data=data if data is not None else pd.DataFrame(),
            options=dict(payload.get("options") or {}),
        )


@dataclass
class ReportSection:
    """One section of the audit report, produced by one audit statistic.

    Attributes
    ----------
    key : stable identifier (the statistic's ``name``), e.g. ``"discrimination"``.
    title : heading.
    summary : the section's conclusion in plain words (one short paragraph).
    tables : named DataFrames, rendered in insertion order.
    figures : charts (see :class:`Figure`).
    notes : caveats and method notes (thresholds, what was skipped and why).
    status : one of :data:`SECTION_STATUSES`.
    data : JSON-safe key figures of the section (for programmatic use of the report).
    """

    key: str
    title: str
    summary: str = ""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    status: str = "ok"
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in SECTION_STATUSES:
            raise InvalidInputError(
                f"status must be one of {', '.join(map(repr, SECTION_STATUSES))}; got {self.status!r}"
            )

    @classmethod
    def skipped(cls, key: str, title: str, reason: str) -> ReportSection:
        """A section that was not computed, with the reason in plain words."""
        return cls(
            key=key,
            title=title,
            summary=f"Not computed: {reason}",
            status="skipped",
            data={"skipped_reason": reason},
        )

    def table(self, name: str) -> pd.DataFrame | None:
        """The table ``name`` of this section, or ``None`` when it has none by that name."""
        return self.tables.get(name)

    def to_dict(self) -> dict[str, Any]:
        """The section as a JSON-ready dict (tables as records)."""
        return {
            "key": self.key,
            "title": self.title,
            "summary": self.summary,
            "status": self.status,
            "tables": {name: frame_to_json(frame) for name, frame in self.tables.items()},
            "figures": [fig.to_dict() for fig in self.figures],
            "notes": list(self.notes),
            "data": clean_json(self.data),
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> ReportSection:
        """The section stored by :meth:`to_dict`."""
        tables = {}
        for name, frame in (payload.get("tables") or {}).items():
            restored = frame_from_json(frame)
            if restored is not None:
                tables[str(name)] = restored
        return cls(
            key=str(payload["key"]),
            title=str(payload.get("title", payload["key"])),
            summary=str(payload.get("summary", "")),
            tables=tables,
            figures=[Figure.from_dict(f) for f in payload.get("figures") or []],
            notes=[str(n) for n in payload.get("notes") or []],
            status=str(payload.get("status", "ok")),
            data=dict(payload.get("data") or {}),
        )
