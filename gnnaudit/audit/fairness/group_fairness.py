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

Uncertainty of the gaps: an interval of :math:`\max - \min` itself cannot contain 0 (the
estimate is never negative, so e.g. its bootstrap lies above 0 even for a model whose groups
have the same true rate). The audit therefore names the pair behind each gap, the highest group
``hi`` and the lowest ``lo`` (``spd_groups``, ``eod_groups``), and ``spd_ci`` / ``eod_ci`` are
intervals of the **signed** differences

.. math::

    \mathrm{PR}_{hi} - \mathrm{PR}_{lo}, \qquad \mathrm{TPR}_{hi} - \mathrm{TPR}_{lo},

Newcombe's hybrid score interval (Newcombe 1998, method 10) from the Wilson intervals of the
two rates; with ``g > 2`` groups it is **simultaneous** over the :math:`m = g(g-1)/2` pairs
(Bonferroni, each pair at level :math:`1 - (1 - c)/m`), as the pair was picked for having the
largest gap (:func:`~gnnaudit.audit.intervals.largest_gap_interval`). The reported values stay
the max-minus-min gaps (the literature's :math:`\Delta_{SP}`, :math:`\Delta_{EO}`), which are the
point estimates of those signed differences; with class 1 favourable the findings name them so
(``"statistical parity difference (NIFTY's ΔSP)"``, :mod:`gnnaudit.audit.report.literature`),
and the fair-GNN literature unit does not repeat them. The disparate-impact ratio keeps a
stratified bootstrap interval (nodes resampled within each group, drawn as one binomial per group,
:mod:`gnnaudit.audit.bootstrap`, seeded by ``random_state``).

Flags (documented, conventional thresholds):

* statistical parity: flagged when the **four-fifths rule** is violated (``DI < 0.8``) and the
  signed interval's lower end is above 0 (the higher group is higher beyond chance);
* equal opportunity: flagged when the lower end of the signed EOD interval exceeds
  :data:`EOD_THRESHOLD` = 0.1 (the common fairness tolerance of +-0.1 used e.g. by AIF360).

Arguments follow scikit-learn / fairlearn: ``group_fairness(y_true, y_pred, *,
sensitive_features=...)``.
"""

from __future__ import annotations

import logging
import math
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
from gnnaudit.audit.bootstrap import binomial_rates, finite_interval
from gnnaudit.audit.fairness.group_result import (
    EOD_THRESHOLD,
    FOUR_FIFTHS,
    GROUP_COLUMNS,
    UNIT_NAME,
    GroupFairness,
)
from gnnaudit.audit.fairness.multi_group import multi_group_fairness
from gnnaudit.audit.fairness.per_class import ClassGaps, per_class_gaps
from gnnaudit.audit.intervals import GapInterval, largest_gap_interval
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
) -> tuple[GapInterval, float, tuple[float, float], GapInterval]:
    """``spd, di, di_ci, eod`` of the positive class from the per-group ``(predicted
    positives, size, positives, true positives, true-positive rate)``: the two gaps with their
    simultaneous signed intervals (:func:`~gnnaudit.audit.intervals.largest_gap_interval`),
    the disparate-impact ratio with its stratified bootstrap interval."""
    pos_pred, size, positives, tp, tpr = counts
    pr = pos_pred / size
    spd = largest_gap_interval(pos_pred, size, confidence)
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
    # groups without positives (trials 0) are left out; without labels nothing is defined
    eod = largest_gap_interval(tp, np.where(defined, positives, 0), confidence)
    return spd, di, di_ci, eod


def _class_gaps(
    pred: np.ndarray,
    y: np.ndarray | None,
    code: np.ndarray,
    g: int,
    n_classes: int | None,
    confidence: float,
) -> ClassGaps | None:
    """Per-class gaps when there are more than two classes (``n_classes`` or inferred)."""
    width = max(int(pred.max()), -1 if y is None or not y.size else int(y.max())) + 1
    n_classes = width if n_classes is None else max(width, check_int("n_classes", n_classes))
    if n_classes <= 2:
        return None
    return per_class_gaps(pred, y, code, g, n_classes, confidence=confidence)


def _pair(gap: GapInterval, group_values: list[Any]) -> tuple[Any, Any] | None:
    """``(hi, lo)`` group names of ``gap`` (None when it is undefined)."""
    if gap.hi < 0:
        return None
    return group_values[gap.hi], group_values[gap.lo]


def _evaluated(
    y_true: Any, y_pred: Any, sensitive_features: Any, mask: Any
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """``(pred, y, s)`` checked (same length, whole classes) and restricted to ``mask``."""
    pred = check_class_array("y_pred", y_pred)
    n = pred.shape[0]
    y = None if y_true is None else check_class_array("y_true", y_true)
    s = _group_array(sensitive_features)
    for name, arr in (("y_true", y), ("sensitive_features", s)):
        if arr is not None and arr.shape[0] != n:
            raise InvalidInputError(
                f"{name} must have the same length as y_pred ({n}), got {arr.shape[0]}"
            )
    if mask is not None:
        idx = _node_ids(mask, n)
        pred, s = pred[idx], s[idx]
        y = None if y is None else y[idx]
    if pred.size == 0:
        raise InvalidInputError("mask selects no node; group fairness needs at least one node")
    return pred, y, s


def _group_table(
    pred: np.ndarray, y: np.ndarray | None, s: np.ndarray, positive_class: int
) -> tuple[pd.DataFrame, tuple[np.ndarray, ...], np.ndarray, list[Any]]:
    """The per-group table (``group, size, positives, accuracy, positive_rate,
    true_positive_rate``), the counts ``(positive predictions, size, positives, true
    positives, true-positive rate)`` per group, each node's group index and the group names;
    at least two groups, else an :class:`~gnnaudit.errors.InvalidInputError`."""
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
    table = pd.DataFrame(
        {
            "group": group_values,
            "size": size.astype(np.int64),
            "positives": positives.astype(np.int64),
            "accuracy": accuracy,
            "positive_rate": pos_pred / size,
            "true_positive_rate": tpr,
        }
    )
    return table, (pos_pred, size, positives, tp, tpr), code, group_values


def group_fairness(  # noqa: PLR0913  # fairlearn-style keywords, each one documented
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
    class_names: list[str] | None = None,
) -> GroupFairness:
    """Per-group accuracy, positive rate and true-positive rate, the parity gaps and their
    intervals (see the module docstring).

    Parameters
    ----------
    y_true : (n,) true classes, or None (label-free: only statistical parity and the
        disparate-impact ratio).
    y_pred : (n,) predicted classes (whole numbers; probabilities are refused).
    sensitive_features : (n,) group of each node (any numeric coding, e.g. 0/1 gender, or text
        labels, kept as the group names).
    mask : optional boolean mask or node ids selecting the evaluated nodes (e.g. test mask).
    positive_class : the favourable class.
    n_boot, confidence, random_state : bootstrap replicates (disparate-impact ratio), interval
        level (every interval; simultaneous over the group pairs for the gaps) and seed.
    n_classes : number of classes (default: inferred from ``y_pred`` and ``y_true``); above 2
        the gaps are computed per class and the findings lead with the largest
        (:mod:`~gnnaudit.audit.fairness.per_class`).
    class_names : the label values by class id (e.g. ``data.class_names``), or None; the
        findings then name classes by them ("'yes' (class 1)" instead of "class 1").
    """
    pred, y, s = _evaluated(y_true, y_pred, sensitive_features, mask)
    positive_class = check_int("positive_class", positive_class)
    n_boot = check_int("n_boot", n_boot, minimum=1, maximum=MAX_RESAMPLES)
    confidence = check_float(
        "confidence", confidence, minimum=0.5, maximum=1.0, inclusive=(True, False)
    )
    random_state = check_int("random_state", random_state, minimum=0)
    table, counts, code, group_values = _group_table(pred, y, s, positive_class)
    g = len(group_values)
    rng = np.random.default_rng([random_state, 17])
    spd, di, di_ci, eod = _binary_gaps(counts, group_values, y is not None, n_boot, confidence, rng)
    class_gaps = _class_gaps(pred, y, code, g, n_classes, confidence)
    if class_gaps is not None:  # more than two classes: the largest gap over classes
        spd, eod, di, di_ci = class_gaps.spd_gap, class_gaps.eod_gap, class_gaps.di, (math.nan,) * 2
    return GroupFairness(
        groups=table,
        statistical_parity_difference=spd.difference,
        equal_opportunity_difference=eod.difference,
        spd_ci=spd.interval,
        eod_ci=eod.interval,
        disparate_impact=di,
        di_ci=di_ci,
        positive_class=positive_class,
        sensitive_name=sensitive_name,
        confidence=confidence,
        class_gaps=class_gaps,
        spd_groups=_pair(spd, group_values),
        eod_groups=_pair(eod, group_values),
        spd_comparisons=spd.comparisons,
        eod_comparisons=eod.comparisons,
        class_names=None if class_names is None else [str(n) for n in class_names],
    )


class GroupFairnessUnit(AuditUnit):
    """Audit unit: :func:`group_fairness` of the model's predictions on the audited nodes.

    Parameters
    ----------
    positive_class : the favourable class (default 1).
    """

    name = UNIT_NAME
    title = "Group fairness"
    requires = ("sensitive",)

    def __init__(self, positive_class: int = 1) -> None:
        self.positive_class = check_int("positive_class", positive_class)

    def run(self, ctx: AuditContext) -> AuditResult:
        options: dict[str, Any] = {
            "mask": ctx.group_nodes,
            "positive_class": self.positive_class,
            "n_boot": ctx.options.n_boot,
            "confidence": ctx.options.confidence,
            "random_state": ctx.options.random_state,
            "n_classes": int(ctx.logits.shape[1]),
            "class_names": ctx.class_names,
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
