r"""The standard error of the difference of two AUROCs measured on the same nodes: DeLong,
DeLong and Clarke-Pearson (1988), *Comparing the areas under two or more correlated receiver
operating characteristic curves*, Biometrics 44(3).

With :math:`m` positive nodes of scores :math:`X_i` and :math:`n` negative ones of scores
:math:`Y_j` under a score function, :math:`\psi(x, y) = \mathbb 1[x > y] + \tfrac12 \mathbb
1[x = y]`, the structural components are

.. math::

    V_{10}(X_i) = \tfrac1n \textstyle\sum_j \psi(X_i, Y_j), \qquad
    V_{01}(Y_j) = \tfrac1m \textstyle\sum_i \psi(X_i, Y_j),

their means are the AUROC, and for two score functions :math:`a, b` on the same nodes

.. math::

    \widehat{\mathrm{Var}}(\mathrm{AUROC}_a - \mathrm{AUROC}_b)
    = \tfrac1m s^2\bigl(V^a_{10} - V^b_{10}\bigr) + \tfrac1n s^2\bigl(V^a_{01} - V^b_{01}\bigr)

(:math:`s^2` the sample variance). The components come from mid-ranks in
:math:`O((m + n) \log(m + n))`: :math:`V_{10}(X_i) = (R(X_i) - R_X(X_i)) / n` with :math:`R` the
rank among all scores and :math:`R_X` among the positives (ties count one half, as in
:math:`\psi`), likewise for :math:`V_{01}`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import rankdata

__all__ = ["delong_components", "paired_auroc_se", "rank_auroc"]


def rank_auroc(positive: np.ndarray, score: np.ndarray) -> float:
    r"""The AUROC of ``score`` for the boolean labels ``positive``, from mid-ranks
    (Mann-Whitney): :math:`\bigl(\sum_{i:\,y_i=1} R(s_i) - m(m+1)/2\bigr) / (m n)` with
    :math:`R` the rank among all scores (ties share their mean rank, so a tie counts one half,
    as :math:`\psi` does), :math:`m` positives and :math:`n` negatives; NaN when a class is
    absent. It equals ``sklearn.metrics.roc_auc_score(positive, score)`` (the area under the ROC
    curve with ties as straight segments) to rounding, without scikit-learn's per-call input
    checks: the trainer evaluates it every validation epoch and ``FairFinetune``'s selection on
    every candidate."""
    positive = np.asarray(positive, dtype=bool).reshape(-1)
    m = int(positive.sum())
    n = positive.size - m
    if m == 0 or n == 0:
        return math.nan
    ranks = rankdata(np.asarray(score, dtype=np.float64).reshape(-1))
    return float((ranks[positive].sum() - m * (m + 1) / 2.0) / (m * n))


def delong_components(y: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(V10, V01)`` of the module docstring for labels ``y`` (positive class 1) and
    ``score``; their means are the AUROC. Empty arrays when a class is absent."""
    y = np.asarray(y).reshape(-1) == 1
    score = np.asarray(score, dtype=np.float64).reshape(-1)
    pos, neg = score[y], score[~y]
    m, n = pos.size, neg.size
    if m == 0 or n == 0:
        return np.empty(0), np.empty(0)
    rank_all = rankdata(np.concatenate([pos, neg]))
    v10 = (rank_all[:m] - rankdata(pos)) / n
    v01 = 1.0 - (rank_all[m:] - rankdata(neg)) / m
    return v10, v01


def paired_auroc_se(y: np.ndarray, score_a: np.ndarray, score_b: np.ndarray) -> float:
    """DeLong's standard error of ``AUROC(score_a) - AUROC(score_b)`` on the same nodes with
    labels ``y`` (module docstring); NaN with fewer than two nodes of a class."""
    a10, a01 = delong_components(y, score_a)
    b10, b01 = delong_components(y, score_b)
    if a10.size < 2 or a01.size < 2:
        return math.nan
    var = np.var(a10 - b10, ddof=1) / a10.size + np.var(a01 - b01, ddof=1) / a01.size
    return float(math.sqrt(max(float(var), 0.0)))
