"""Seeded uncertainty for audit statistics: bootstrap confidence intervals of rates and gaps.

Every audit figure a decision rests on carries an interval. For a rate (the mean of 0/1
indicators over ``m`` nodes) the nonparametric bootstrap distribution is exactly
``Binomial(m, p_hat) / m``, so it is drawn directly instead of resampling index matrices: the
same distribution at O(n_boot) cost and memory. Group statistics use the *stratified*
bootstrap (nodes resampled within each group, group sizes fixed), whose distribution is one
independent binomial per group. Intervals are percentile intervals at level ``confidence``.
"""

from __future__ import annotations

import numpy as np

from gnnaudit._validation import check_float, check_int
from gnnaudit.errors import InvalidInputError

__all__ = ["binomial_rates", "percentile_interval", "rate_interval", "gap_interval"]


def binomial_rates(
    successes: np.ndarray | int,
    trials: np.ndarray | int,
    n_boot: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``(n_boot, g)`` bootstrap replicates of ``g`` rates ``successes / trials`` (stratified:
    one independent ``Binomial(trials, p_hat) / trials`` per entry; ``trials == 0`` gives NaN)."""
    n_boot = check_int("n_boot", n_boot, minimum=1)
    s = np.atleast_1d(np.asarray(successes, dtype=np.int64))
    t = np.atleast_1d(np.asarray(trials, dtype=np.int64))
    if s.shape != t.shape or np.any(s < 0) or np.any(s > t):
        raise InvalidInputError(
            f"successes must lie in [0, trials] elementwise, got {s.tolist()} of {t.tolist()}"
        )
    p = np.divide(s, t, out=np.zeros(s.shape), where=t > 0)
    draws = rng.binomial(np.maximum(t, 0), p, size=(n_boot, s.size)).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(t > 0, draws / np.maximum(t, 1), np.nan)


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    """``(low, high)`` percentile interval of finite bootstrap replicates (NaN when none)."""
    confidence = check_float(
        "confidence", confidence, minimum=0.5, maximum=1.0, inclusive=(True, False)
    )
    vals = np.asarray(replicates, dtype=np.float64).ravel()
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(vals, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def rate_interval(
    successes: int,
    trials: int,
    *,
    n_boot: int,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Bootstrap interval of the rate ``successes / trials`` (NaN when ``trials == 0``)."""
    if trials <= 0:
        return float("nan"), float("nan")
    reps = binomial_rates(successes, trials, n_boot, rng)[:, 0]
    return percentile_interval(reps, confidence)


def gap_interval(
    successes: np.ndarray,
    trials: np.ndarray,
    *,
    n_boot: int,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Stratified bootstrap interval of ``max - min`` of the group rates ``successes /
    trials`` over the groups with ``trials > 0`` (NaN when fewer than two such groups)."""
    s = np.asarray(successes, dtype=np.int64)
    t = np.asarray(trials, dtype=np.int64)
    keep = t > 0
    if keep.sum() < 2:
        return float("nan"), float("nan")
    reps = binomial_rates(s[keep], t[keep], n_boot, rng)
    return percentile_interval(reps.max(axis=1) - reps.min(axis=1), confidence)
