r"""Group fairness of a node classifier with respect to a sensitive attribute.

For every group ``s`` of the sensitive attribute (restricted to ``mask``):

.. math::

    \mathrm{acc}_s = P(\hat y = y \mid s), \quad
    \mathrm{PR}_s = P(\hat y = c^+ \mid s), \quad
    \mathrm{TPR}_s = P(\hat y = c^+ \mid y = c^+, s),

    \Delta_{SP} = \max_s \mathrm{PR}_s - \min_s \mathrm{PR}_s, \qquad
    \Delta_{EO} = \max_s \mathrm{TPR}_s - \min_s \mathrm{TPR}_s, \qquad
    DI = \frac{\min_s \mathrm{PR}_s}{\max_s \mathrm{PR}_s}.

The positive class ``c+`` is ``1`` by default (as in NIFTY / FairGNN: "good credit", "bail
granted" ...). With two groups the differences are the usual ``|PR_0 - PR_1|`` and
``|TPR_0 - TPR_1|`` (statistical parity and equal opportunity differences, FairGNN's SPD and
EOD); with more groups they are the max-minus-min gap. ``DI`` is the disparate-impact ratio of
the four-fifths rule.

Uncertainty: stratified bootstrap (nodes resampled within each group), drawn exactly as one
binomial per group (:mod:`gnnaudit.audit.bootstrap`), seeded by ``random_state``.

Flags (documented, conventional thresholds):

* statistical parity: flagged when the **four-fifths rule** is violated (``DI < 0.8``) and the
  SPD interval excludes 0;
* equal opportunity: flagged when the lower end of the EOD interval exceeds
  :data:`EOD_THRESHOLD` = 0.1 (the common fairness tolerance of +-0.1 used e.g. by AIF360).

Arguments follow scikit-learn / fairlearn: ``group_fairness(y_true, y_pred, *,
sensitive_features=...)``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gnnaudit._validation import (
    MAX_RESAMPLES,
    check_array,
    check_class_array,
    check_float,
    check_int,
)
from gnnaudit.audit.bootstrap import binomial_rates, finite_interval, gap_interval
from gnnaudit.audit.fairness.multi_group import multi_group_fairness
from gnnaudit.audit.fairness.per_class import ClassGaps, per_class_gaps
from gnnaudit.audit.report.section import Figure, Finding, ReportSection
from gnnaudit.audit.unit import AuditResult, AuditUnit
from gnnaudit.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = [
    "GroupFairness",
    "GroupFairnessUnit",
    "group_fairness",
    "GROUP_COLUMNS",
    "FOUR_FIFTHS",
    "EOD_THRESHOLD",
]

logger = logging.getLogger(__name__)

GROUP_COLUMNS = ["group", "size", "positives", "accuracy", "positive_rate", "true_positive_rate"]
GAP_COLUMNS = ["statistic", "value", "ci_low", "ci_high"]

#: the four-fifths rule: a disparate-impact ratio below this is adverse impact
FOUR_FIFTHS = 0.8
#: equal-opportunity differences whose interval lies above this are flagged
EOD_THRESHOLD = 0.1


@dataclass
class GroupFairness(AuditResult):
    """Per-group rates, the gaps between groups and their bootstrap intervals.

    Attributes
    ----------
    groups : DataFrame ``group, size, positives, accuracy, positive_rate, true_positive_rate``;
        ``positives`` = nodes of the group whose true class is the positive class. Without
        labels ``positives``, ``accuracy`` and ``true_positive_rate`` are NaN / -1.
    statistical_parity_difference, spd_ci : max minus min positive rate and its interval.
    equal_opportunity_difference, eod_ci : max minus min true-positive rate over groups with
        positives, and its interval (NaN when fewer than two groups have one or without labels).
    disparate_impact, di_ci : min over max positive rate (NaN when no group has a positive
        prediction), and its interval.
    positive_class, sensitive_name, confidence : as given.
    class_gaps : with more than two classes, the per-class gaps
        (:func:`~gnnaudit.audit.fairness.per_class.per_class_gaps`); the three gap fields then
        hold the largest gap over classes (its class in ``class_gaps.spd_class`` /
        ``eod_class``) and its interval.
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

    # ---------------------------------------------------------------------------- views
    def gaps(self) -> pd.DataFrame:
        """The three gap statistics with their intervals (:data:`GAP_COLUMNS`)."""
        return pd.DataFrame(
            [
                ("statistical parity difference", self.statistical_parity_difference, *self.spd_ci),
                ("equal opportunity difference", self.equal_opportunity_difference, *self.eod_ci),
                ("disparate impact ratio", self.disparate_impact, *self.di_ci),
            ],
            columns=GAP_COLUMNS,
        )

    def to_frame(self) -> pd.DataFrame:
        return self.groups

    @property
    def spd_flagged(self) -> bool:
        """Four-fifths rule violated and the SPD interval excludes 0."""
        return bool(self.disparate_impact < FOUR_FIFTHS and self.spd_ci[0] > 0)

    @property
    def eod_flagged(self) -> bool:
        """Whether the whole equal-opportunity-difference interval lies above ``EOD_THRESHOLD``."""
        return bool(self.eod_ci[0] > EOD_THRESHOLD)

    def _classes(self) -> tuple[str, str]:
        """How the parity and the equal-opportunity findings name their class."""
        cg = self.class_gaps
        if cg is None:
            return str(self.positive_class), str(self.positive_class)
        k = len(cg.table)
        return (
            f"{cg.spd_class} (the largest gap over the {k} classes)",
            f"{cg.eod_class} (the largest gap over the classes with true members in two "
            "groups or more)",
        )

    def findings(self) -> list[Finding]:
        name = self.sensitive_name or "sensitive"
        level = f"{self.confidence:.0%}"
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
                statistic="statistical parity difference",
                value=self.statistical_parity_difference,
                ci_low=lo,
                ci_high=hi,
                flagged=self.spd_flagged,
                explanation=(
                    f"The share of decisions for class {spd_class} differs by "
                    f"{self.statistical_parity_difference:.1%} between the {name} groups "
                    f"({rates}; {level} CI {lo:.1%} to {hi:.1%}); the disparate-impact ratio is "
                    f"{di}. Flagged when the four-fifths rule is broken "
                    f"(ratio < {FOUR_FIFTHS}) and the interval excludes 0."
                ),
            )
        ]
        if np.isfinite(self.equal_opportunity_difference):
            lo, hi = self.eod_ci
            out.append(
                Finding(
                    finding="equal opportunity",
                    feature=name,
                    statistic="equal opportunity difference",
                    value=self.equal_opportunity_difference,
                    ci_low=lo,
                    ci_high=hi,
                    flagged=self.eod_flagged,
                    explanation=(
                        f"Among nodes whose true class is {eod_class}, the share "
                        f"recognised as such differs by {self.equal_opportunity_difference:.1%} "
                        f"between the {name} groups ({level} CI {lo:.1%} to {hi:.1%}). Flagged "
                        f"when the whole interval lies above {EOD_THRESHOLD:.0%}."
                    ),
                )
            )
        return out

    def report_section(self) -> ReportSection:
        name = self.sensitive_name or "sensitive"
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
        return ReportSection(
            key=GroupFairnessUnit.name,
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
                    title=f"Positive-decision rate per {name} group",
                    data=chart,
                    options={"xlabel": f"share predicted {self.positive_class}", "xlim": [0, 1]},
                )
            ],
            notes=[
                f"Positive class = {self.positive_class}. Intervals: {self.confidence:.0%} "
                "stratified bootstrap. Thresholds: four-fifths rule for parity, "
                f"{EOD_THRESHOLD} for equal opportunity."
            ],
            data={
                "statistical_parity_difference": self.statistical_parity_difference,
                "equal_opportunity_difference": self.equal_opportunity_difference,
                "disparate_impact": self.disparate_impact,
                "sensitive_name": self.sensitive_name,
                "positive_class": self.positive_class,
            },
        )


def _node_ids(mask: Any, n: int) -> np.ndarray:
    m = mask.detach().cpu().numpy() if hasattr(mask, "detach") else np.asarray(mask)
    if m.dtype == bool:
        if m.shape != (n,):
            raise InvalidInputError(f"mask must be a boolean array of shape ({n},), got {m.shape}")
        return np.flatnonzero(m)
    idx = check_class_array("mask", m)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise InvalidInputError(f"mask holds node ids outside [0, {n - 1}]")
    return idx


def _group_array(values: Any) -> np.ndarray:
    """``sensitive_features`` as a 1-D array: text labels kept as text, numbers as float64."""
    raw = values.detach().cpu().numpy() if hasattr(values, "detach") else np.asarray(values)
    if raw.dtype.kind in "OUS":
        if raw.ndim != 1:
            raise InvalidInputError(f"sensitive_features must be 1-D, got shape {raw.shape}")
        if bool(pd.isna(raw).any()):
            raise InvalidInputError("sensitive_features holds missing values (None / NaN)")
        return raw.astype(str)
    return check_array("sensitive_features", raw, ndim=1, dtype=np.float64)


def _group_counts(
    pred: np.ndarray, y: np.ndarray | None, code: np.ndarray, g: int, positive_class: int
) -> tuple[np.ndarray, ...]:
    """Per group (``code`` in ``[0, g)``): size, predicted positives, positives, true
    positives, true-positive rate and accuracy (the last three NaN and positives -1 without
    labels ``y``)."""
    size = np.bincount(code, minlength=g)
    pos_pred = np.bincount(code, weights=(pred == positive_class), minlength=g).astype(np.int64)
    if y is None:
        nan = np.full(g, np.nan)
        return size, pos_pred, np.full(g, -1, dtype=np.int64), np.zeros(g, np.int64), nan, nan
    correct = np.bincount(code, weights=(pred == y), minlength=g)
    is_pos = y == positive_class
    positives = np.bincount(code[is_pos], minlength=g)
    tp = np.bincount(code[is_pos], weights=(pred[is_pos] == positive_class), minlength=g)
    tp = tp.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpr = np.where(positives > 0, tp / np.maximum(positives, 1), np.nan)
    return size, pos_pred, positives, tp, tpr, correct / size


def _binary_gaps(
    counts: tuple[np.ndarray, ...],
    group_values: list[Any],
    labelled: bool,
    n_boot: int,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[float, tuple[float, float], float, tuple[float, float], float, tuple[float, float]]:
    """``spd, spd_ci, di, di_ci, eod, eod_ci`` of the positive class from the per-group
    ``(predicted positives, size, positives, true positives, true-positive rate)``."""
    pos_pred, size, positives, tp, tpr = counts
    pr = pos_pred / size
    spd = float(pr.max() - pr.min())
    spd_ci = gap_interval(pos_pred, size, n_boot=n_boot, confidence=confidence, rng=rng)
    di = float(pr.min() / pr.max()) if pr.max() > 0 else math.nan
    reps = binomial_rates(pos_pred, size, n_boot, rng)
    with np.errstate(invalid="ignore", divide="ignore"):
        di_reps = reps.min(axis=1) / reps.max(axis=1)
    di_ci = finite_interval(di_reps, confidence)
    defined = np.isfinite(tpr)
    if labelled and (~defined).any():
        logger.warning(
            "group(s) %s have no node of the positive class; their true-positive rate is undefined",
            [group_values[i] for i in np.flatnonzero(~defined)],
        )
    if defined.sum() >= 2:
        eod = float(tpr[defined].max() - tpr[defined].min())
        eod_ci = gap_interval(
            tp[defined], positives[defined], n_boot=n_boot, confidence=confidence, rng=rng
        )
    else:
        eod, eod_ci = math.nan, (math.nan, math.nan)
    return spd, spd_ci, di, di_ci, eod, eod_ci


def _class_gaps(
    pred: np.ndarray,
    y: np.ndarray | None,
    code: np.ndarray,
    g: int,
    n_classes: int | None,
    n_boot: int,
    confidence: float,
    rng: np.random.Generator,
) -> ClassGaps | None:
    """Per-class gaps when there are more than two classes (``n_classes`` or inferred)."""
    width = max(int(pred.max()), -1 if y is None or not y.size else int(y.max())) + 1
    n_classes = width if n_classes is None else max(width, check_int("n_classes", n_classes))
    if n_classes <= 2:
        return None
    return per_class_gaps(
        pred, y, code, g, n_classes, n_boot=n_boot, confidence=confidence, rng=rng
    )


def group_fairness(
    y_true: Any,
    y_pred: Any,
    *,
    sensitive_features: Any,
    mask: Any = None,
    positive_class: int = 1,
    sensitive_name: str | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    random_state: int = 0,
    n_classes: int | None = None,
) -> GroupFairness:
    """Per-group accuracy, positive rate and true-positive rate, the parity gaps and their
    bootstrap intervals (see the module docstring).

    Parameters
    ----------
    y_true : (n,) true classes, or None (label-free: only statistical parity and the
        disparate-impact ratio).
    y_pred : (n,) predicted classes (whole numbers; probabilities are refused).
    sensitive_features : (n,) group of each node (any numeric coding, e.g. 0/1 gender, or text
        labels, kept as the group names).
    mask : optional boolean mask or node ids selecting the evaluated nodes (e.g. test mask).
    positive_class : the favourable class.
    n_boot, confidence, random_state : bootstrap replicates, interval level and seed.
    n_classes : number of classes (default: inferred from ``y_pred`` and ``y_true``); above 2
        the gaps are computed per class and the findings lead with the largest
        (:mod:`~gnnaudit.audit.fairness.per_class`).
    """
    pred = check_class_array("y_pred", y_pred)
    n = pred.shape[0]
    y = None if y_true is None else check_class_array("y_true", y_true)
    s = _group_array(sensitive_features)
    for name, arr in (("y_true", y), ("sensitive_features", s)):
        if arr is not None and arr.shape[0] != n:
            raise InvalidInputError(
                f"{name} must have the same length as y_pred ({n}), got {arr.shape[0]}"
            )
    positive_class = check_int("positive_class", positive_class)
    n_boot = check_int("n_boot", n_boot, minimum=1, maximum=MAX_RESAMPLES)
    confidence = check_float(
        "confidence", confidence, minimum=0.5, maximum=1.0, inclusive=(True, False)
    )
    random_state = check_int("random_state", random_state, minimum=0)
    if mask is not None:
        idx = _node_ids(mask, n)
        pred, s = pred[idx], s[idx]
        y = None if y is None else y[idx]
    if pred.size == 0:
        raise InvalidInputError("mask selects no node; group fairness needs at least one node")

    groups, code = np.unique(s, return_inverse=True)
    code = code.reshape(-1)
    g = groups.size
    if g < 2:
        raise InvalidInputError(
            f"sensitive_features takes the single value {groups[0]!r} on the evaluated nodes; "
            "group fairness needs at least two groups"
        )
    size, pos_pred, positives, tp, tpr, accuracy = _group_counts(pred, y, code, g, positive_class)
    group_values: list[Any] = (
        [str(v) for v in groups]
        if groups.dtype.kind in "OUS"
        else [int(v) if float(v).is_integer() else float(v) for v in groups]
    )
    pr = pos_pred / size
    table = pd.DataFrame(
        {
            "group": group_values,
            "size": size.astype(np.int64),
            "positives": positives.astype(np.int64),
            "accuracy": accuracy,
            "positive_rate": pr,
            "true_positive_rate": tpr,
        }
    )
    rng = np.random.default_rng([random_state, 17])
    spd, spd_ci, di, di_ci, eod, eod_ci = _binary_gaps(
        (pos_pred, size, positives, tp, tpr), group_values, y is not None, n_boot, confidence, rng
    )
    class_gaps = _class_gaps(pred, y, code, g, n_classes, n_boot, confidence, rng)
    if class_gaps is not None:  # more than two classes: the largest gap over classes
        spd, spd_ci, di, di_ci = class_gaps.spd, class_gaps.spd_ci, class_gaps.di, (math.nan,) * 2
        eod, eod_ci = class_gaps.eod, class_gaps.eod_ci
    return GroupFairness(
        groups=table,
        statistical_parity_difference=spd,
        equal_opportunity_difference=eod,
        spd_ci=spd_ci,
        eod_ci=eod_ci,
        disparate_impact=di,
        di_ci=di_ci,
        positive_class=positive_class,
        sensitive_name=sensitive_name,
        confidence=confidence,
        class_gaps=class_gaps,
    )


class GroupFairnessUnit(AuditUnit):
    """Audit unit: :func:`group_fairness` of the model's predictions on the audited nodes.

    Parameters
    ----------
    positive_class : the favourable class (default 1).
    """

    name = "group_fairness"
    title = "Group fairness"
    requires = ("sensitive",)

    def __init__(self, positive_class: int = 1) -> None:
        self.positive_class = check_int("positive_class", positive_class)

    def run(self, ctx: AuditContext) -> AuditResult:
        options: dict[str, Any] = {
            "mask": ctx.nodes,
            "positive_class": self.positive_class,
            "n_boot": ctx.options.n_boot,
            "confidence": ctx.options.confidence,
            "random_state": ctx.options.random_state,
            "n_classes": int(ctx.logits.shape[1]),
        }
        from gnnaudit.audit.sensitive import group_labels

        # the groups as the reader knows them (a text column's names, not its codes)
        pairs = [(a.name, group_labels(ctx.data, a)) for a in ctx.attributes]
        if len(pairs) > 1:  # per attribute and their intersection
            return multi_group_fairness(
                group_fairness, ctx.labels, ctx.predictions, pairs, **options
            )
        return group_fairness(
            ctx.labels,
            ctx.predictions,
            sensitive_features=pairs[0][1] if pairs else ctx.sensitive,
            sensitive_name=ctx.sensitive_name,
            **options,
        )
