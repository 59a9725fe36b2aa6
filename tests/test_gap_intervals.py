"""Signed, simultaneous intervals of the group gaps (Newcombe's hybrid score interval with a
Bonferroni adjustment over the group pairs): oracle checks, properties, coverage under null
models, and the group-fairness findings that use them.

The coverage tests fail with the former interval (a stratified bootstrap of max - min, whose
lower end is above 0 for every null model)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from gnnaudit.audit.fairness.group_fairness import EOD_THRESHOLD, group_fairness
from gnnaudit.audit.intervals import largest_gap_interval, newcombe_difference
from gnnaudit.errors import InvalidInputError


# ------------------------------------------------------------------------------ the oracle
def _wilson_oracle(k: int, n: int, confidence: float) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def _newcombe_oracle(k1: int, n1: int, k2: int, n2: int, confidence: float) -> tuple[float, float]:
    """Newcombe (1998) method 10, written out from scipy's Wilson bounds."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = _wilson_oracle(k1, n1, confidence)
    l2, u2 = _wilson_oracle(k2, n2, confidence)
    d = p1 - p2
    return (
        d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2),
        d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2),
    )


@pytest.mark.parametrize(
    ("k1", "n1", "k2", "n2", "confidence"),
    [
        (56, 70, 48, 80, 0.95),
        (9, 10, 3, 10, 0.95),
        (0, 12, 7, 30, 0.90),
        (40, 40, 1, 55, 0.99),
        (17, 250, 31, 260, 0.95),
        (3, 5, 3, 5, 0.8),
        (120, 400, 95, 380, 1 - 0.05 / 6),
    ],
)
def test_newcombe_matches_the_scipy_wilson_oracle(k1, n1, k2, n2, confidence):
    got = newcombe_difference(k1, n1, k2, n2, confidence)
    assert isinstance(got[0], float) and isinstance(got[1], float)
    assert got == pytest.approx(_newcombe_oracle(k1, n1, k2, n2, confidence), abs=1e-10)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # Newcombe (1998), Statistics in Medicine 17, Table II, method 10
        ((56, 70, 48, 80), (0.0524, 0.3339)),
        ((9, 10, 3, 10), (0.1705, 0.8090)),
        ((5, 56, 0, 29), (-0.0381, 0.1926)),
        ((0, 10, 0, 20), (-0.1611, 0.2775)),
        ((0, 10, 0, 10), (-0.2775, 0.2775)),
    ],
)
def test_newcombe_published_examples(counts, expected):
    assert newcombe_difference(*counts) == pytest.approx(expected, abs=5e-5)


def test_newcombe_vectorised_nan_and_mirror():
    k1, n1 = np.array([56, 0, 3, 9]), np.array([70, 0, 8, 10])
    k2, n2 = np.array([48, 2, 0, 3]), np.array([80, 5, 0, 10])
    lo, hi = newcombe_difference(k1, n1, k2, n2)
    assert lo.shape == hi.shape == (4,)
    assert np.isnan(lo[1:3]).all() and np.isnan(hi[1:3]).all()  # a trial count of 0
    for i in (0, 3):
        assert (lo[i], hi[i]) == pytest.approx(newcombe_difference(k1[i], n1[i], k2[i], n2[i]))
    # swapping the groups mirrors the interval
    lo_swap, hi_swap = newcombe_difference(k2, n2, k1, n1)
    np.testing.assert_allclose(lo_swap[[0, 3]], -hi[[0, 3]])
    np.testing.assert_allclose(hi_swap[[0, 3]], -lo[[0, 3]])
    # broadcasting: one reference group against several
    lo_b, _ = newcombe_difference(np.array([10, 20, 30]), 100, 15, 100)
    assert lo_b.shape == (3,)


def test_newcombe_errors_name_the_argument():
    with pytest.raises(InvalidInputError, match="k1 must be whole numbers in"):
        newcombe_difference(5, 3, 1, 2)
    with pytest.raises(InvalidInputError, match="k2 must be whole numbers in"):
        newcombe_difference(1, 3, 1.5, 2)
    with pytest.raises(InvalidInputError, match="must broadcast"):
        newcombe_difference([1, 2], [3, 3, 3], 1, 2)
    with pytest.raises(InvalidInputError, match="confidence"):
        newcombe_difference(1, 3, 1, 2, confidence=1.0)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    n1=st.integers(1, 2000),
    n2=st.integers(1, 2000),
    f1=st.floats(0, 1),
    f2=st.floats(0, 1),
    confidence=st.floats(0.5, 0.9999),
)
def test_newcombe_contains_its_estimate_and_stays_in_range(n1, n2, f1, f2, confidence):
    k1, k2 = round(f1 * n1), round(f2 * n2)
    lo, hi = newcombe_difference(k1, n1, k2, n2, confidence)
    d = k1 / n1 - k2 / n2
    assert -1.0 <= lo <= d <= hi <= 1.0
    wider_lo, wider_hi = newcombe_difference(k1, n1, k2, n2, min(0.99999, confidence + 1e-4))
    assert wider_lo <= lo + 1e-12 and hi <= wider_hi + 1e-12  # nested in the level


# -------------------------------------------------------------- the largest gap, simultaneous
def test_two_groups_give_the_plain_newcombe_interval():
    gap = largest_gap_interval([30, 45], [100, 90])
    assert (gap.hi, gap.lo, gap.comparisons) == (1, 0, 1)
    assert gap.difference == pytest.approx(45 / 90 - 30 / 100)
    assert gap.interval == pytest.approx(newcombe_difference(45, 90, 30, 100))


def test_several_groups_are_bonferroni_over_the_pairs():
    k, n = np.array([30, 45, 38, 20]), np.array([100, 90, 120, 80])
    gap = largest_gap_interval(k, n, 0.9)
    rates = k / n
    assert (gap.hi, gap.lo) == (int(rates.argmax()), int(rates.argmin()))
    assert gap.comparisons == 6
    assert gap.pair_confidence == pytest.approx(1 - 0.1 / 6)
    expected = _newcombe_oracle(45, 90, 20, 80, 1 - 0.1 / 6)
    assert gap.interval == pytest.approx(expected, abs=1e-10)
    assert gap.ci_low < newcombe_difference(45, 90, 20, 80, 0.9)[0]  # wider than unadjusted


def test_classes_are_bonferroni_over_all_pairs_of_every_class():
    # rows: classes; columns: groups; class 1 has the largest gap, group 2 has no trial there
    k = np.array([[10, 12, 11], [5, 40, 0], [3, 3, 3]])
    n = np.array([[50, 50, 50], [50, 50, 0], [50, 50, 50]])
    gap = largest_gap_interval(k, n)
    assert (gap.cls, gap.hi, gap.lo) == (1, 1, 0)
    assert gap.comparisons == 3 + 1 + 3
    assert gap.interval == pytest.approx(_newcombe_oracle(40, 50, 5, 50, 1 - 0.05 / 7), abs=1e-10)


def test_ties_undefined_gaps_and_errors():
    tie = largest_gap_interval([5, 5, 5], [10, 10, 10])
    assert tie.difference == 0.0 and tie.hi != tie.lo
    assert tie.ci_low < 0 < tie.ci_high
    # groups without trials are left out; fewer than two groups left: undefined
    none = largest_gap_interval([3, 0, 0], [9, 0, 0])
    assert math.isnan(none.difference) and (none.hi, none.lo, none.comparisons) == (-1, -1, 0)
    assert math.isnan(none.ci_low) and math.isnan(none.ci_high)
    left_out = largest_gap_interval([3, 0, 8], [9, 0, 10])
    assert (left_out.hi, left_out.lo, left_out.comparisons) == (2, 0, 1)
    with pytest.raises(InvalidInputError, match="successes must be whole numbers in"):
        largest_gap_interval([3, 12], [9, 10])
    with pytest.raises(InvalidInputError, match="trials must have the shape of successes"):
        largest_gap_interval([3, 1], [9, 10, 4])
    with pytest.raises(InvalidInputError, match="successes must be 1-d"):
        largest_gap_interval(np.zeros((2, 2, 2)), np.ones((2, 2, 2)))


# ------------------------------------------------------------------- coverage under the null
def _null_predictions(rng, n_groups):
    sizes = rng.integers(50, 401, n_groups)
    s = np.repeat(np.arange(n_groups), sizes)
    p = rng.uniform(0.1, 0.9)
    pred = (rng.random(s.size) < p).astype(np.int64)
    return s, pred


@pytest.mark.parametrize("n_groups", [2, 3])
def test_parity_interval_of_null_models_contains_zero(n_groups):
    """Same true positive rate in every group: the signed interval contains 0 in >= 90 of 100
    null models at 95% (the bootstrap of max - min never did)."""
    contains, flagged = 0, 0
    for seed in range(100):
        s, pred = _null_predictions(np.random.default_rng([seed, n_groups]), n_groups)
        res = group_fairness(None, pred, sensitive_features=s, n_boot=50, random_state=seed)
        assert res.spd_comparisons == n_groups * (n_groups - 1) // 2
        lo, hi = res.spd_ci
        assert lo <= res.statistical_parity_difference <= hi
        contains += lo <= 0.0 <= hi
        flagged += res.spd_flagged
    assert contains >= 90
    assert flagged <= 5


def test_equal_opportunity_interval_of_null_models_contains_zero():
    contains = 0
    for seed in range(100):
        rng = np.random.default_rng([seed, 99])
        s, _ = _null_predictions(rng, 3)
        y = (rng.random(s.size) < 0.4).astype(np.int64)
        tpr, fpr = rng.uniform(0.3, 0.9), rng.uniform(0.05, 0.3)
        pred = (rng.random(s.size) < np.where(y == 1, tpr, fpr)).astype(np.int64)
        res = group_fairness(y, pred, sensitive_features=s, n_boot=50, random_state=seed)
        lo, hi = res.eod_ci
        contains += lo <= 0.0 <= hi
        assert not res.eod_flagged
    assert contains >= 90


def test_multiclass_null_models_contain_zero_with_all_class_pairs():
    contains = 0
    for seed in range(60):
        rng = np.random.default_rng([seed, 7])
        s, _ = _null_predictions(rng, 3)
        pred = rng.integers(0, 4, s.size)
        res = group_fairness(None, pred, sensitive_features=s, n_boot=20, n_classes=4)
        assert res.class_gaps is not None
        assert res.spd_comparisons == 4 * 3
        contains += res.spd_ci[0] <= 0.0 <= res.spd_ci[1]
    assert contains >= 55


# ------------------------------------------------------------------ the group-fairness unit
def test_null_model_is_not_flagged_and_says_what_the_interval_is_of():
    rng = np.random.default_rng(11)
    n = 800
    s = np.where(rng.random(n) < 0.5, "F", "M")
    y = rng.integers(0, 2, n)
    pred = (rng.random(n) < 0.4).astype(np.int64)
    res = group_fairness(y, pred, sensitive_features=s, sensitive_name="gender")
    assert res.spd_ci[0] <= 0.0 <= res.spd_ci[1]
    assert not res.spd_flagged and not res.eod_flagged
    hi, lo = res.spd_groups
    rates = res.groups.set_index("group")["positive_rate"]
    assert rates[hi] >= rates[lo] and {hi, lo} == {"F", "M"}
    assert res.statistical_parity_difference == pytest.approx(rates[hi] - rates[lo])
    parity, opportunity = res.findings()
    assert f"PR({hi}) - PR({lo}) = +" in parity.explanation
    assert "signed difference" in parity.explanation
    assert "simultaneous" not in parity.explanation  # two groups: plain Newcombe
    assert f"TPR({res.eod_groups[0]}) - TPR({res.eod_groups[1]})" in opportunity.explanation
    gaps = res.gaps().set_index("statistic")
    assert gaps.loc["statistical parity difference", "ci_low"] == res.spd_ci[0]
    assert "Newcombe" in gaps.loc["statistical parity difference", "interval"]
    assert "Newcombe" in " ".join(res.report_section().notes)


def test_strongly_biased_model_is_flagged_with_its_groups_in_order():
    rng = np.random.default_rng(12)
    n = 1500
    s = rng.integers(0, 3, n)
    y = rng.integers(0, 2, n)
    # group 2 gets the positive decision (and is recognised) far more often than group 0
    p = np.array([0.15, 0.4, 0.75])[s]
    pred = (rng.random(n) < p).astype(np.int64)
    res = group_fairness(y, pred, sensitive_features=s, sensitive_name="region")
    assert res.spd_groups == (2, 0) and res.eod_groups == (2, 0)
    assert res.spd_comparisons == 3 and res.eod_comparisons == 3
    assert res.disparate_impact < 0.8 and res.spd_ci[0] > 0 and res.spd_flagged
    assert res.eod_ci[0] > EOD_THRESHOLD and res.eod_flagged
    parity = res.findings()[0]
    assert "PR(region=2) - PR(region=0)" in parity.explanation
    assert "simultaneous over the 3 group pairs (Bonferroni" in parity.explanation
    size = res.groups.set_index("group")["size"]
    k = np.bincount(s, weights=pred, minlength=3).astype(int)
    assert res.spd_ci == pytest.approx(
        _newcombe_oracle(k[2], size[2], k[0], size[0], 1 - 0.05 / 3), abs=1e-10
    )
