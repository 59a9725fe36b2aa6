r"""Parity gaps of a multi-class classifier, one per class, and the largest one.

With ``C > 2`` classes no single class is "the" positive decision, so the gaps of
:mod:`~gnnaudit.audit.fairness.group_fairness` are computed for every class ``c`` (each class
in turn playing the positive class):

.. math::

    \Delta_{SP}(c) = \max_s P(\hat y = c \mid s) - \min_s P(\hat y = c \mid s), \qquad
    \Delta_{EO}(c) = \max_s P(\hat y = c \mid y = c, s) - \min_s P(\hat y = c \mid y = c, s),

and the findings lead with the largest, :math:`\max_c \Delta(c)`, naming its class. Its
interval is a stratified bootstrap of :math:`\max_c \Delta(c)` itself (every class's group
rates resampled by the binomial shortcut, the maximum taken in each replicate), so it accounts
for having picked the largest of ``C`` gaps. :math:`\Delta_{EO}(c)` is defined for classes with
true members in at least two groups; classes without are left out (never NaN). Note: the
per-class group rates are resampled independently across classes (a conservative
simplification of the multinomial within each group).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gnnaudit.audit.bootstrap import binomial_rates, finite_interval

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
    ``spd``, ``spd_ci``, ``eod``, ``eod_ci``: the largest gap and the bootstrap interval of the
    maximum over classes; ``di``: the disparate-impact ratio of ``spd_class``.
    """

    table: pd.DataFrame
    spd_class: int
    spd: float
    spd_ci: tuple[float, float]
    di: float
    eod_class: int
    eod: float
    eod_ci: tuple[float, float]


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
    n_boot: int,
    confidence: float,
    rng: np.random.Generator,
) -> ClassGaps:
    """The per-class gaps of ``pred`` (and ``y``) between the ``g`` groups ``code`` (module
    docstring). Memory: ``n_boot x g`` per class."""
    size = np.bincount(code, minlength=g)
    # counts[s, c]: nodes of group s predicted c; loops below run over classes, never nodes
    counts = np.bincount(code * n_classes + pred, minlength=g * n_classes).reshape(g, n_classes)
    pr = counts / size[:, None]
    spd = _gap(pr.T)
    with np.errstate(invalid="ignore", divide="ignore"):
        di = np.where(pr.max(axis=0) > 0, pr.min(axis=0) / pr.max(axis=0), np.nan)
    spd_reps = np.stack(
        [_gap(binomial_rates(counts[:, c], size, n_boot, rng)) for c in range(n_classes)], axis=1
    )
    eod = np.full(n_classes, np.nan)
    eod_reps = np.full((n_boot, n_classes), np.nan)
    if y is not None:
        true = np.bincount(code * n_classes + y, minlength=g * n_classes).reshape(g, n_classes)
        hit = y == pred
        tp = np.bincount(code[hit] * n_classes + y[hit], minlength=g * n_classes).reshape(
            g, n_classes
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            tpr = np.where(true > 0, tp / np.maximum(true, 1), np.nan)
        eod = _gap(tpr.T)
        for c in np.flatnonzero(np.isfinite(eod)):
            keep = true[:, c] > 0
            eod_reps[:, c] = _gap(binomial_rates(tp[keep, c], true[keep, c], n_boot, rng))
    table = pd.DataFrame(
        {
            "class": np.arange(n_classes),
            "statistical_parity_difference": spd,
            "disparate_impact": di,
            "equal_opportunity_difference": eod,
        }
    )
    spd_class = int(np.argmax(spd))
    defined = np.isfinite(eod)
    eod_class = int(np.flatnonzero(defined)[np.argmax(eod[defined])]) if defined.any() else -1
    return ClassGaps(
        table=table,
        spd_class=spd_class,
        spd=float(spd[spd_class]),
        spd_ci=finite_interval(np.nanmax(spd_reps, axis=1), confidence),
        di=float(di[spd_class]),
        eod_class=eod_class,
        eod=float(eod[eod_class]) if eod_class >= 0 else math.nan,
        eod_ci=(
            finite_interval(np.nanmax(eod_reps[:, defined], axis=1), confidence)
            if eod_class >= 0
            else (math.nan, math.nan)
        ),
    )
