"""Exact rate intervals: published Clopper-Pearson / Wilson values, the boundary cases and
coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gnnaudit.audit.intervals import binomial_interval, binomial_intervals
from gnnaudit.errors import InvalidInputError


@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    [
        (5, 10, 0.18709, 0.81291),  # textbook Clopper-Pearson values
        (1, 10, 0.0025286, 0.44502),
        (0, 10, 0.0, 0.30850),
        (10, 10, 0.69150, 1.0),
        (2, 20, 0.012349, 0.31698),
    ],
)
def test_clopper_pearson_matches_published_values(k, n, lo, hi):
    got = binomial_interval(k, n, 0.95)
    assert got == pytest.approx((lo, hi), abs=2e-5)


def test_boundaries_have_closed_forms_and_zero_flips_keep_an_upper_bound():
    for n in (1, 7, 300, 10_000):
        lo, hi = binomial_interval(0, n, 0.95)
        assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-9)
        assert hi > 0 and hi == pytest.approx(-math.log(0.025) / n, rel=0.05 if n > 100 else 1)
        lo, hi = binomial_interval(n, n, 0.95)
        assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / n), rel=1e-9)
    assert binomial_interval(0, 1000, 0.95)[1] < 3.7 / 1000 + 1e-4  # about 3/n, never 0


def test_wilson_matches_its_formula():
    lo, hi = binomial_interval(5, 10, 0.95, method="wilson")
    assert (lo, hi) == pytest.approx((0.23659, 0.76341), abs=2e-5)
    lo, hi = binomial_interval(0, 50, 0.95, method="wilson")
    assert lo == 0.0 and hi == pytest.approx(0.07135, abs=1e-4)


def test_vectorised_form_empty_trials_and_bad_input():
    lo, hi = binomial_intervals([0, 3, 0], [10, 10, 0])
    assert np.isnan(lo[2]) and np.isnan(hi[2])
    assert lo[1] == pytest.approx(binomial_interval(3, 10)[0])
    with pytest.raises(InvalidInputError, match="successes"):
        binomial_interval(11, 10)
    with pytest.raises(InvalidInputError, match="method"):
        binomial_interval(1, 10, method="bootstrap")


def test_coverage_is_at_least_nominal():
    rng = np.random.default_rng(0)
    for p in (0.0, 0.01, 0.06, 0.5):
        k = rng.binomial(200, p, size=2000)
        lo, hi = binomial_intervals(k, np.full(k.shape, 200), 0.95)
        assert ((lo <= p) & (p <= hi)).mean() >= 0.95


@pytest.mark.parametrize("method", ["clopper-pearson", "wilson"])
@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.999])
def test_closed_forms_equal_scipy_binomtest(method, confidence):
    """The vectorised intervals are scipy's ``binomtest(k, n).proportion_ci`` (exact /
    Wilson), computed for whole arrays at once."""
    from scipy.stats import binomtest

    scipy_method = {"clopper-pearson": "exact", "wilson": "wilson"}[method]
    pairs = [(k, n) for n in (1, 2, 7, 30, 679) for k in sorted({0, 1, n // 3, n - 1, n})]
    k, n = np.array(pairs).T
    lo, hi = binomial_intervals(k, n, confidence, method=method)
    for i, (kk, nn) in enumerate(pairs):
        ci = binomtest(int(kk), int(nn)).proportion_ci(confidence, method=scipy_method)
        assert (lo[i], hi[i]) == pytest.approx((ci.low, ci.high), abs=1e-9)
