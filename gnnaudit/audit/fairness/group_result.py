"""The result of :func:`~gnnaudit.audit.fairness.group_fairness.group_fairness`: the per-group
rates, the gaps with their signed intervals, the flag rules, the findings and the report section
(the statistic and its intervals are documented in
:mod:`gnnaudit.audit.fairness.group_fairness`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit.audit.fairness.per_class import ClassGaps
from gnnaudit.audit.intervals import binomial_intervals
from gnnaudit.audit.report.literature import literature_label, literature_statistic
from gnnaudit.audit.report.section import Figure, Finding, ReportSection, class_label
from gnnaudit.audit.report.thresholds import EOD_THRESHOLD, FOUR_FIFTHS
from gnnaudit.audit.result import AuditResult

__all__ = [
    "GroupFairness",
    "GROUP_COLUMNS",
    "GAP_COLUMNS",
    "FOUR_FIFTHS",
    "EOD_THRESHOLD",
    "UNIT_NAME",
]

#: key of the group-fairness report section (the unit's name)
UNIT_NAME = "group_fairness"
GROUP_COLUMNS = ["group", "size", "positives", "accuracy", "positive_rate", "true_positive_rate"]
GAP_COLUMNS = ["statistic", "value", "ci_low", "ci_high", "interval"]
# FOUR_FIFTHS and EOD_THRESHOLD, the flag thresholds, are defined in the report layer
# (gnnaudit.audit.report.thresholds, read by the summary card too) and re-exported here


@dataclass
class GroupFairness(AuditResult):
    """Per-group rates, the gaps between groups and their intervals (module docstring).

    Attributes
    ----------
    groups : DataFrame ``group, size, positives, accuracy, positive_rate, true_positive_rate``;
        ``positives`` = nodes of the group whose true class is the positive class. Without
        labels ``positives``, ``accuracy`` and ``true_positive_rate`` are NaN / -1.
    statistical_parity_difference, spd_ci : max minus min positive rate, and the interval of
        the signed difference ``PR(spd_groups[0]) - PR(spd_groups[1])`` (Newcombe, simultaneous
        over the ``spd_comparisons`` pairs).
    equal_opportunity_difference, eod_ci : max minus min true-positive rate over groups with
        positives, and the interval of ``TPR(eod_groups[0]) - TPR(eod_groups[1])`` (NaN when
        fewer than two groups have one or without labels).
    disparate_impact, di_ci : min over max positive rate (NaN when no group has a positive
        prediction), and its stratified bootstrap interval.
    positive_class, sensitive_name, confidence : as given.
    class_gaps : with more than two classes, the per-class gaps
        (:func:`~gnnaudit.audit.fairness.per_class.per_class_gaps`); the three gap fields then
        hold the largest gap over classes (its class in ``class_gaps.spd_class`` /
        ``eod_class``) and its interval, simultaneous over the pairs of every class.
    spd_groups, eod_groups : ``(hi, lo)``, the groups with the highest and the lowest rate
        behind each gap (None when the gap is undefined).
    spd_comparisons, eod_comparisons : the number of pairs each interval is simultaneous over
        (1 for two groups and two classes; 0 when the gap is undefined).
    class_names : the user's label values by class id (``data.class_names``), or None; the
        sentences then name classes by them.
    """

    groups: pd.DataFrame
    statistical_parity_difference: float
    equal_opportunity_difference: float
    spd_ci: tuple[float, float] = (math.nan, math.nan)
    eod_ci: tuple[float, float] = (math.nan, math.nan)
    disparate_impact: float = math.nan
    di_ci: tuple[float, float] = (math.nan, math.nan)
    positive_class: int = 1
    sensitive_name: str | None = None
    confidence: float = 0.95
    class_gaps: ClassGaps | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    spd_groups: tuple[Any, Any] | None = None
    eod_groups: tuple[Any, Any] | None = None
    spd_comparisons: int = 0
    eod_comparisons: int = 0
    class_names: list[str] | None = None

    # ---------------------------------------------------------------------------- views
    def gaps(self) -> pd.DataFrame:
        """The three gap statistics with their intervals (:data:`GAP_COLUMNS`; ``interval``
        says what each interval is of)."""
        return pd.DataFrame(
            [
                (
                    "statistical parity difference",
                    self.statistical_parity_difference,
                    *self.spd_ci,
                    self._interval_of("PR", self.spd_groups, self.spd_comparisons),
                ),
                (
                    "equal opportunity difference",
                    self.equal_opportunity_difference,
                    *self.eod_ci,
                    self._interval_of("TPR", self.eod_groups, self.eod_comparisons),
                ),
                (
                    "disparate impact ratio",
                    self.disparate_impact,
                    *self.di_ci,
                    "stratified bootstrap" if np.isfinite(self.di_ci[0]) else "",
                ),
            ],
            columns=GAP_COLUMNS,
        )

    def _label(self, group: Any) -> str:
        """A group as the sentences name it: text labels as they are, numbers as
        ``name=value``."""
        if isinstance(group, str):
            return group
        return f"{self.sensitive_name or 'sensitive'}={group}"

    def _difference(self, rate: str, groups: tuple[Any, Any] | None) -> str:
        """``"PR(hi) - PR(lo)"``."""
        if groups is None:
            return ""
        return f"{rate}({self._label(groups[0])}) - {rate}({self._label(groups[1])})"

    def _interval_of(self, rate: str, groups: tuple[Any, Any] | None, comparisons: int) -> str:
        """The ``interval`` cell of :meth:`gaps`."""
        if groups is None:
            return ""
        simultaneous = f", Bonferroni over {comparisons} pairs" if comparisons > 1 else ""
        return f"Newcombe, signed {self._difference(rate, groups)}{simultaneous}"

    def _signed_sentence(
        self,
        rate: str,
        groups: tuple[Any, Any] | None,
        value: float,
        interval: tuple[float, float],
        comparisons: int,
    ) -> str:
        """The plain-words reading of a gap's interval (module docstring)."""
        lo, hi = interval
        text = (
            f"The interval is for the signed difference of that share ({rate}) between the "
            f"highest and the lowest group, {self._difference(rate, groups)} = {value:+.1%} "
            f"({self.confidence:.0%} CI {lo:+.1%} to {hi:+.1%}, Newcombe's score interval); "
            "where it reaches below 0 the data do not tell which group has the higher rate."
        )
        if comparisons > 1:
            pairs = "group pairs" if self.class_gaps is None else "group pairs of all classes"
            pair_level = 1.0 - (1.0 - self.confidence) / comparisons
            text += (
                f" As this pair was picked for having the largest gap, the interval is "
                f"simultaneous over the {comparisons} {pairs} (Bonferroni: each pair at "
                f"{pair_level:.2%})."
            )
        return text

    def to_frame(self) -> pd.DataFrame:
        return self.groups

    @property
    def spd_flagged(self) -> bool:
        """Four-fifths rule violated and the signed SPD interval's lower end above 0."""
        return bool(self.disparate_impact < FOUR_FIFTHS and self.spd_ci[0] > 0)

    @property
    def eod_flagged(self) -> bool:
        """Whether the whole signed equal-opportunity interval lies above ``EOD_THRESHOLD``."""
        return bool(self.eod_ci[0] > EOD_THRESHOLD)

    def _classes(self) -> tuple[str, str]:
        """How the parity and the equal-opportunity findings name their class."""
        cg, names = self.class_gaps, self.class_names
        if cg is None:
            return (
                class_label(self.positive_class, names),
                class_label(self.positive_class, names, bare=True),
            )
        k = len(cg.table)
        return (
            f"{class_label(cg.spd_class, names)} (the largest gap over the {k} classes)",
            f"{class_label(cg.eod_class, names, bare=True)} (the largest gap over the classes with true members in two "
            "groups or more)",
        )

    @property
    def literature_figures(self) -> bool:
        """Whether the gaps are the fair-GNN literature's ΔSP and ΔEO (class 1 favourable, or
        the largest gaps over several classes): the findings then name them so
        (:mod:`gnnaudit.audit.report.literature`)."""
        return self.class_gaps is not None or self.positive_class == 1

    def _statistic(self, key: str, statistic: str) -> str:
        return literature_statistic(key) if self.literature_figures else statistic

    def _literature(self, key: str) -> str:
        return " " + literature_label(key) if self.literature_figures else ""

    def findings(self) -> list[Finding]:
        name = self.sensitive_name or "sensitive"
        lo, hi = self.spd_ci
        spd_class, eod_class = self._classes()
        rates = (
            ", ".join(
                f"{g}: {r:.1%}"
                for g, r in zip(self.groups["group"], self.groups["positive_rate"], strict=True)
            )
            if self.class_gaps is None
            else "rates per class in the section's table"
        )
        di = (
            f"{self.disparate_impact:.2f}"
            if np.isfinite(self.disparate_impact)
            else "undefined (no group gets that decision)"
        )
        out = [
            Finding(
                finding="statistical parity",
                feature=name,
                statistic=self._statistic("dsp", "statistical parity difference"),
                value=self.statistical_parity_difference,
                ci_low=lo,
                ci_high=hi,
                flagged=self.spd_flagged,
                explanation=(
                    f"The share of decisions for {spd_class} differs by "
                    f"{self.statistical_parity_difference:.1%} between the {name} groups "
                    f"({rates}); the disparate-impact ratio is {di}. "
                    + self._signed_sentence(
                        "PR",
                        self.spd_groups,
                        self.statistical_parity_difference,
                        self.spd_ci,
                        self.spd_comparisons,
                    )
                    + f" Flagged when the four-fifths rule is broken (ratio < {FOUR_FIFTHS}) "
                    "and the interval's lower end is above 0." + self._literature("dsp")
                ),
            )
        ]
        if np.isfinite(self.equal_opportunity_difference):
            lo, hi = self.eod_ci
            out.append(
                Finding(
                    finding="equal opportunity",
                    feature=name,
                    statistic=self._statistic("deo", "equal opportunity difference"),
                    value=self.equal_opportunity_difference,
                    ci_low=lo,
                    ci_high=hi,
                    flagged=self.eod_flagged,
                    explanation=(
                        f"Among nodes whose true class is {eod_class}, the share "
                        f"recognised as such differs by "
                        f"{self.equal_opportunity_difference:.1%} between the {name} groups. "
                        + self._signed_sentence(
                            "TPR",
                            self.eod_groups,
                            self.equal_opportunity_difference,
                            self.eod_ci,
                            self.eod_comparisons,
                        )
                        + f" Flagged when the interval's lower end is above {EOD_THRESHOLD:.0%}."
                        + self._literature("deo")
                    ),
                )
            )
        return out

    def report_section(self) -> ReportSection:
        name = self.sensitive_name or "sensitive"
        positive = class_label(self.positive_class, self.class_names, bare=True)
        flagged = [f.statistic for f in self.findings() if f.flagged]
        verdict = (
            f"Flagged: {', '.join(flagged)}."
            if flagged
            else "No gap crosses its threshold at this confidence."
        )
        chart = self.groups[["group", "positive_rate"]].rename(
            columns={"group": "label", "positive_rate": "value"}
        )
        chart["label"] = [f"{name} = {g}" for g in chart["label"]]
        size = self.groups["size"].to_numpy(dtype=np.float64)  # exact intervals of each rate
        hits = np.round(self.groups["positive_rate"].to_numpy(dtype=np.float64) * size)
        chart["ci_low"], chart["ci_high"] = binomial_intervals(hits, size, self.confidence)
        return ReportSection(
            key=UNIT_NAME,
            title=f"Group fairness (sensitive: {name})",
            summary=(
                f"Statistical parity difference {self.statistical_parity_difference:.3f}, "
                f"equal opportunity difference {self.equal_opportunity_difference:.3f}, "
                f"disparate-impact ratio {self.disparate_impact:.3f}. {verdict}"
            ),
            tables={
                "groups": self.groups,
                "gaps": self.gaps(),
                **({} if self.class_gaps is None else {"per_class": self.class_gaps.table}),
            },
            figures=[
                Figure(
                    kind="bar",
                    title=f"Positive-decision rate per {name} group (exact "
                    f"{self.confidence:.0%} intervals)",
                    data=chart,
                    options={"xlabel": f"share predicted {positive}", "xlim": [0, 1]},
                )
            ],
            notes=[
                f"Positive class = {positive}. Intervals ({self.confidence:.0%}): "
                "the parity and equal-opportunity gaps get Newcombe's score interval of the "
                "signed difference between the highest and the lowest group (it can reach "
                "below 0), simultaneous over all group pairs (Bonferroni) with more than two "
                "groups or classes; the disparate-impact ratio a stratified bootstrap. "
                f"Thresholds: four-fifths rule for parity, {EOD_THRESHOLD} for equal "
                "opportunity."
            ],
            data={
                "statistical_parity_difference": self.statistical_parity_difference,
                "equal_opportunity_difference": self.equal_opportunity_difference,
                "disparate_impact": self.disparate_impact,
                "sensitive_name": self.sensitive_name,
                "positive_class": self.positive_class,
            },
        )
