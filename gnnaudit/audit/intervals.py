r"""Exact intervals of rates: the audit's flip rates, accuracies and per-group shares.

A rate :math:`\hat p = k / n` (``k`` successes out of ``n`` independent trials) has a closed-form
interval, so the audit does not bootstrap it. The percentile bootstrap of a rate collapses at
the boundary (0 flips out of ``n`` give ``[0, 0]``, stating no upper bound); the exact intervals
below do not.

Clopper-Pearson (default, exact: its coverage is at least the nominal level for every ``p``)
    With :math:`\alpha = 1 - c` for confidence ``c``,

    .. math::

        p_{lo} = B^{-1}\!\left(\tfrac{\alpha}{2};\, k,\, n - k + 1\right), \qquad
        p_{hi} = B^{-1}\!\left(1 - \tfrac{\alpha}{2};\, k + 1,\, n - k\right),

    with :math:`B^{-1}(q; a, b)` the ``q`` quantile of the Beta(a, b) distribution,
    :math:`p_{lo} = 0` at ``k = 0`` and :math:`p_{hi} = 1` at ``k = n``. At ``k = 0`` the upper
    bound is :math:`1 - (\alpha/2)^{1/n} \approx -\ln(\alpha/2)/n` (3.7/n at 95%, the two-sided
    form of the "rule of three").

Wilson score interval (``method="wilson"``, approximate, shorter)
    With :math:`z` the :math:`1 - \alpha/2` normal quantile,

    .. math::

        \frac{\hat p + \frac{z^2}{2n} \pm z \sqrt{\frac{\hat p (1 - \hat p)}{n}
        + \frac{z^2}{4n^2}}}{1 + \frac{z^2}{n}}.

A rate estimated on a uniform sample without replacement of a finite population (the
node-scope sample of the flip test) gets the same interval: the hypergeometric spread is
smaller than the binomial one, so the interval is conservative. ``n = 0`` gives ``(nan, nan)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from gnnaudit._validation import check_choice
from gnnaudit.audit.bootstrap import check_confidence
from gnnaudit.errors import InvalidInputError

__all__ = ["binomial_interval", "binomial_intervals", "INTERVAL_METHODS"]

INTERVAL_METHODS = ("clopper-pearson", "wilson")


def binomial_intervals(
    successes: Any, trials: Any, confidence: float = 0.95, *, method: str = "clopper-pearson"
) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise ``(ci_low, ci_high)`` of the rates ``successes / trials`` (module
    docstring); NaN where ``trials == 0``."""
    confidence = check_confidence(confidence)
    method = check_choice("method", method, INTERVAL_METHODS)
    k = np.atleast_1d(np.asarray(successes, dtype=np.float64))
    n = np.atleast_1d(np.asarray(trials, dtype=np.float64))
    if k.shape != n.shape or np.any(k < 0) or np.any(k > n) or np.any(k != np.round(k)):
        raise InvalidInputError(
            f"successes must be whole numbers in [0, trials] elementwise, got {k.tolist()} of "
            f"{n.tolist()}"
        )
    alpha = 1.0 - confidence
    empty = n <= 0
    safe_n = np.where(empty, 1.0, n)
    if method == "clopper-pearson":
        with np.errstate(invalid="ignore", divide="ignore"):
            lo = stats.beta.ppf(alpha / 2, k, safe_n - k + 1)
            hi = stats.beta.ppf(1 - alpha / 2, k + 1, safe_n - k)
    else:
        z = float(stats.norm.ppf(1 - alpha / 2))
        p = k / safe_n
        centre = (p + z * z / (2 * safe_n)) / (1 + z * z / safe_n)
        half = z * np.sqrt(p * (1 - p) / safe_n + z * z / (4 * safe_n**2)) / (1 + z * z / safe_n)
        lo, hi = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    lo = np.where(k == 0, 0.0, lo)  # exact at the boundary (both methods)
    hi = np.where(k == safe_n, 1.0, hi)
    lo = np.where(empty, np.nan, lo).astype(np.float64)
    hi = np.where(empty, np.nan, hi).astype(np.float64)
    return lo, hi


def binomial_interval(
    successes: int, trials: int, confidence: float = 0.95, *, method: str = "clopper-pearson"
) -> tuple[float, float]:
    """``(ci_low, ci_high)`` of the rate ``successes / trials`` (module docstring)."""
    lo, hi = binomial_intervals(successes, trials, confidence, method=method)
    return float(lo[0]), float(hi[0])
