r"""Parity gaps of a multi-class classifier, one per class, and the largest one.

With ``C > 2`` classes no single class is "the" positive decision, so the gaps of
:mod:`~gnnaudit.audit.fairness.group_fairness` are computed for every class ``c`` (each class
in turn playing the positive class):

.. math::

    \Delta_{SP}(c) = \max_s P(\hat y = c \mid s) - \min_s P(\hat y = c \mid s), \qquad
    \Delta_{EO}(c) = \max_s P(\hat y = c \mid y = c, s) - \min_s P(\hat y = c \mid y = c, s),

and the findings lead with the largest, :math:`\max_c \Delta(c)`, naming its class and the
two groups behind it, ``hi`` (highest rate) and ``lo`` (lowest). Its interval is that of the
**signed** difference :math:`P(\hat y = c^* \mid hi) - P(\hat y = c^* \mid lo)` (so it can
contain 0, which an interval of a max-minus-min gap never does): Newcombe's hybrid score
interval, simultaneous over every pair of groups of every class,

.. math::

    m = \sum_c \binom{g_c}{2} \quad (= C\, g(g-1)/2 \text{ for parity}), \qquad
    \text{each pair at level } 1 - (1 - \text{confidence}) / m,

(Bonferroni, :func:`~gnnaudit.audit.intervals.largest_gap_interval`), so it accounts for having
picked the largest of the ``C`` gaps and its pair, whatever the dependence between the classes
(the per-class rates of one group are multinomial, not independent; Bonferroni does not need
them to be). :math:`\Delta_{EO}(c)` is defined for classes with true members in at least two
groups (``g_c`` counts the groups with true members of ``c``); classes without are left out
(never NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gnnaudit.audit.intervals import GapInterval, largest_gap_interval

__all__ = ["ClassGaps", "per_class_gaps", "CLASS_GAP_COLUMNS"]

CLASS_GAP_COLUMNS = [
    "class",
    "statistical_parity_difference",
    "disparate_impact",
    "equal_opportunity_difference",
]


@dataclass(frozen=True)
class ClassGaps:
    """Per-class gaps (``table``, columns :data:`CLASS_GAP_COLUMNS`) and the largest ones.

    ``spd_class`` / ``eod_class``: the class of the largest gap (-1 when none is defined);
    ``spd``, ``spd_ci``, ``eod``, ``eod_ci``: the largest gap and the simultaneous Newcombe
    interval of its signed difference (module docstring); ``di``: the disparate-impact ratio of
    ``spd_class``; ``spd_gap`` / ``eod_gap``: the full
    :class:`~gnnaudit.audit.intervals.GapInterval` (the group indices ``hi`` and ``lo`` behind
    the gap, the number of comparisons).
    """

    table: pd.DataFrame
    spd_class: int
    spd: float
    spd_ci: tuple[float, float]
    di: float
    eod_class: int
    eod: float
    eod_ci: tuple[float, float]
    spd_gap: GapInterval
    eod_gap: GapInterval


def _gap(rates: np.ndarray) -> np.ndarray:
    """max - min over the last axis, ignoring NaN (NaN when fewer than two finite entries)."""
    finite = np.isfinite(rates)
    enough = finite.sum(axis=-1) >= 2
    hi = np.where(finite, rates, -np.inf).max(axis=-1)
    lo = np.where(finite, rates, np.inf).min(axis=-1)
    return np.where(enough, hi - lo, np.nan)


def per_class_gaps(
    pred: np.ndarray,
    y: np.ndarray | None,
    code: np.ndarray,
    g: int,
    n_classes: int,
    *,
    confidence: float,
) -> ClassGaps:
    """The per-class gaps of ``pred`` (and ``y``) between the ``g`` groups ``code`` (module
    docstring). Memory: a few ``g x n_classes`` count arrays."""
    size = np.bincount(code, minlength=g)
    # counts[s, c]: nodes of group s predicted c; no loop over nodes or classes
    counts = np.bincount(code * n_classes + pred, minlength=g * n_classes).reshape(g, n_classes)
    pr = counts / size[:, None]
    spd = _gap(pr.T)
    with np.errstate(invalid="ignore", divide="ignore"):
        di = np.where(pr.max(axis=0) > 0, pr.min(axis=0) / pr.max(axis=0), np.nan)
    spd_gap = largest_gap_interval(counts.T, np.broadcast_to(size, (n_classes, g)), confidence)
    eod = np.full(n_classes, np.nan)
    true = np.zeros((g, n_classes), dtype=np.int64)
    tp = np.zeros((g, n_classes), dtype=np.int64)
    if y is not None:
        true = np.bincount(code * n_classes + y, minlength=g * n_classes).reshape(g, n_classes)
        hit = y == pred
        tp = np.bincount(code[hit] * n_classes + y[hit], minlength=g * n_classes).reshape(
            g, n_classes
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            tpr = np.where(true > 0, tp / np.maximum(true, 1), np.nan)
        eod = _gap(tpr.T)
    # groups without true members of a class are left out of that class's pairs
    eod_gap = largest_gap_interval(tp.T, true.T, confidence)
    table = pd.DataFrame(
        {
            "class": np.arange(n_classes),
            "statistical_parity_difference": spd,
            "disparate_impact": di,
            "equal_opportunity_difference": eod,
        }
    )
    return ClassGaps(
        table=table,
        spd_class=spd_gap.cls,
        spd=spd_gap.difference,
        spd_ci=spd_gap.interval,
        di=float(di[spd_gap.cls]),
        eod_class=eod_gap.cls,
        eod=eod_gap.difference,
        eod_ci=eod_gap.interval,
        spd_gap=spd_gap,
        eod_gap=eod_gap,
    )
