"""Group fairness of several sensitive attributes: one analysis per attribute and one for their
intersection (every combination of groups that occurs, as fairlearn's ``MetricFrame`` with
several sensitive features).

Each attribute's findings carry its own name; the intersection's findings carry the names
joined by ``" & "`` (e.g. ``"gender & region"``) and its groups are labelled
``"gender=1 & region=north"``. Intervals, thresholds and flags are those of
:func:`~gnnaudit.audit.fairness.group_fairness.group_fairness`: each analysis reports its gaps
with the interval of the signed difference between its highest and lowest group (Newcombe's
score interval), simultaneous over that analysis's own group pairs (Bonferroni over
:math:`g(g-1)/2` pairs, e.g. all pairs of the intersection's combinations), so it contains 0
when that attribute's groups share one true rate. The adjustment is per analysis, not across
the attributes and the intersection (each finding is read on its own, as in fairlearn).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit.audit.report.section import Finding, ReportSection
from gnnaudit.audit.unit import AuditResult

__all__ = ["MultiGroupFairness", "intersection_labels", "multi_group_fairness"]


def intersection_labels(names: Sequence[str], values: Sequence[np.ndarray]) -> np.ndarray:
    """Text label ``"a=x & b=y"`` of every node's combination of groups."""

    def text(v: np.ndarray) -> np.ndarray:
        v = np.asarray(v)
        if v.dtype.kind == "f" and np.all(v == np.round(v)):
            v = v.astype(np.int64)  # 1.0 -> "1"
        return v.astype(str)

    parts = [np.char.add(f"{name}=", text(v)) for name, v in zip(names, values, strict=True)]
    out = parts[0]
    for part in parts[1:]:
        out = np.char.add(np.char.add(out, " & "), part)
    return out


@dataclass
class MultiGroupFairness(AuditResult):
    """One :class:`~gnnaudit.audit.fairness.group_fairness.GroupFairness` per attribute, then
    the intersection's (``results``)."""

    results: list[Any]

    def to_frame(self) -> pd.DataFrame:
        return pd.concat(
            [r.groups.assign(attribute=r.sensitive_name) for r in self.results], ignore_index=True
        )

    def findings(self) -> list[Finding]:
        return [f for r in self.results for f in r.findings()]

    def report_section(self) -> ReportSection:
        parts = [r.report_section() for r in self.results]
        first = parts[0]
        tables: dict[str, pd.DataFrame] = {}
        for r, part in zip(self.results, parts, strict=True):
            for key, table in part.tables.items():
                tables[key if part is first else f"{key} ({r.sensitive_name})"] = table
        return ReportSection(
            key=first.key,
            title="Group fairness (sensitive: "
            + ", ".join(str(r.sensitive_name) for r in self.results)
            + ")",
            summary=" ".join(
                f"{r.sensitive_name}: {p.summary}" for r, p in zip(self.results, parts, strict=True)
            ),
            tables=tables,
            figures=[fig for p in parts for fig in p.figures],
            notes=[*first.notes, "Intersection: every combination of groups that occurs."],
            data={str(r.sensitive_name): p.data for r, p in zip(self.results, parts, strict=True)},
        )


def multi_group_fairness(
    group_fairness: Callable[..., Any],
    y_true: Any,
    y_pred: Any,
    attributes: Sequence[tuple[str, np.ndarray]],
    **options: Any,
) -> MultiGroupFairness:
    """``group_fairness`` (:func:`~gnnaudit.audit.fairness.group_fairness.group_fairness`,
    passed in to keep this module below it) of every ``(name, values)`` attribute and of their
    intersection; ``options`` are its keyword arguments (``sensitive_name`` excepted)."""
    results = [
        group_fairness(y_true, y_pred, sensitive_features=v, sensitive_name=n, **options)
        for n, v in attributes
    ]
    names = [n for n, _ in attributes]
    joint = intersection_labels(names, [v for _, v in attributes])
    results.append(
        group_fairness(
            y_true, y_pred, sensitive_features=joint, sensitive_name=" & ".join(names), **options
        )
    )
    return MultiGroupFairness(results)
