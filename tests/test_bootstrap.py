"""Seeded bootstrap intervals and the sign-flip permutation test (gnnaudit.audit.bootstrap)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from gnnaudit import InvalidInputError
from gnnaudit.audit.bootstrap import (
    bootstrap_group_rates,
    bootstrap_mean,
    bootstrap_mean_draws,
    bootstrap_rate_difference,
    percentile_interval,
    shared_multiplier_draws,
    sign_flip_pvalue,
)

# 400 intervals at 95%: the share covering the truth is Binomial(400, 0.95) / 400 if exact,
# sd = 0.011; three sd either side, widened by 1 point below for the percentile method's known
# slight under-coverage at n = 250 (measured 0.94-0.95 over 1000 simulations).
SIMULATIONS = 400
COVER_LO, COVER_HI = 0.907, 0.983


def test_binomial_shortcut_matches_explicit_resampling():
    rng = np.random.default_rng(0)
    values = (rng.random(150) < 0.3).astype(float)
    shortcut = bootstrap_mean_draws(values, 4000, 1)
    explicit = values[np.random.default_rng(2).integers(0, 150, (4000, 150))].mean(axis=1)
    assert stats.ks_2samp(shortcut, explicit).pvalue > 0.01
    assert abs(shortcut.std() - np.sqrt(values.mean() * (1 - values.mean()) / 150)) < 0.003


@pytest.mark.parametrize("kind", ["binary", "continuous"])
def test_interval_covers_the_truth_in_simulation(kind):
    rng = np.random.default_rng(10)
    truth = 0.3
    covered = 0
    for sim in range(SIMULATIONS):
        if kind == "binary":
            values = (rng.random(250) < truth).astype(float)
        else:
            values = rng.exponential(truth, 250)  # skewed, mean = truth
        iv = bootstrap_mean(values, n_boot=400, random_state=sim)
        covered += iv.ci_low <= truth <= iv.ci_high
    assert COVER_LO <= covered / SIMULATIONS <= COVER_HI


def test_difference_interval_covers_the_truth_in_simulation():
    rng = np.random.default_rng(11)
    covered = 0
    for sim in range(SIMULATIONS):
        groups = rng.integers(0, 2, 300)
        values = (rng.random(300) < np.where(groups == 1, 0.6, 0.4)).astype(float)
        iv = bootstrap_rate_difference(values, groups, n_boot=400, random_state=sim)
        covered += iv.ci_low <= 0.2 <= iv.ci_high
    assert COVER_LO <= covered / SIMULATIONS <= COVER_HI


def test_bootstrap_is_deterministic_and_seed_dependent():
    values = np.random.default_rng(3).normal(size=80)
    a = bootstrap_mean(values, 300, random_state=5)
    b = bootstrap_mean(values, 300, random_state=5)
    c = bootstrap_mean(values, 300, random_state=6)
    assert a == b
    assert a.as_tuple() != c.as_tuple()
    assert a.estimate == pytest.approx(values.mean())
    assert a.ci_low < a.estimate < a.ci_high


def test_chunked_resampling_bounds_memory_and_keeps_the_distribution():
    values = np.random.default_rng(4).normal(size=50)
    tiny = bootstrap_mean_draws(values, 3000, 0, max_cells=60)  # one resample per chunk
    big = bootstrap_mean_draws(values, 3000, 0)
    assert tiny.shape == big.shape == (3000,)
    assert stats.ks_2samp(tiny, big).pvalue > 0.01


def test_degenerate_rates_give_degenerate_intervals():
    assert bootstrap_mean(np.zeros(40)).as_tuple() == (0.0, 0.0, 0.0)
    assert bootstrap_mean(np.ones(40)).as_tuple() == (1.0, 1.0, 1.0)


def test_group_rates_and_difference():
    values = np.array([1, 1, 0, 0, 1, 0, 0, 0], dtype=float)
    groups = np.array(["a", "a", "a", "a", "b", "b", "b", "b"])
    table = bootstrap_group_rates(values, groups, n_boot=200)
    assert table.columns.tolist() == ["group", "size", "rate", "ci_low", "ci_high"]
    assert table["group"].tolist() == ["a", "b"]
    assert table["size"].tolist() == [4, 4]
    assert table["rate"].tolist() == [0.5, 0.25]
    assert (table["ci_low"] <= table["rate"]).all() and (table["rate"] <= table["ci_high"]).all()
    diff = bootstrap_rate_difference(values, groups, group_a="a", group_b="b", n_boot=200)
    assert diff.estimate == pytest.approx(0.25)
    default = bootstrap_rate_difference(values, groups, n_boot=200)  # larger minus smaller label
    assert default.estimate == pytest.approx(-0.25)


def test_sign_flip_pvalue_is_uniform_under_the_null():
    rng = np.random.default_rng(12)
    pvalues = []
    for seed in range(300):
        a = rng.random(60)
        b = rng.random(60)  # a, b exchangeable within each pair
        pvalues.append(sign_flip_pvalue(a - b, n_perm=199, random_state=seed))
    pvalues = np.array(pvalues)
    assert stats.kstest(pvalues, "uniform").pvalue > 0.01
    # rejections at 5%: Binomial(300, 0.05), mean 15, sd 3.8
    assert 3 <= np.sum(pvalues <= 0.05) <= 27


def test_sign_flip_pvalue_detects_a_shift_and_counts_ties():
    rng = np.random.default_rng(13)
    shifted = rng.normal(0.5, 1.0, 200)
    assert sign_flip_pvalue(shifted, n_perm=999) == pytest.approx(1 / 1000)
    assert sign_flip_pvalue(np.zeros(30), n_perm=99) == 1.0  # every permutation ties
    assert sign_flip_pvalue(-np.abs(shifted), n_perm=99) > 0.9
    # the smallest p-value with n_perm permutations is 1 / (n_perm + 1)
    assert sign_flip_pvalue(np.ones(50), n_perm=9, random_state=1) == pytest.approx(0.1)


def test_shared_multiplier_variance_is_the_overlap_kernel_estimate():
    rng = np.random.default_rng(14)
    m, units = 40, 60
    inc = (rng.random((m, units)) < 0.08).astype(float)
    inc[np.arange(m), rng.integers(0, units, m)] = 1.0  # no empty row
    d = rng.normal(size=m)
    dc = d - d.mean()
    w = inc / np.sqrt(inc.sum(axis=1, keepdims=True))
    kernel_var = dc @ (w @ w.T) @ dc / m**2
    draws = shared_multiplier_draws(d, sp.csr_matrix(inc), 20000, 0)
    assert draws.mean() == pytest.approx(0.0, abs=4 * np.sqrt(kernel_var / 20000))
    assert draws.var() == pytest.approx(kernel_var, rel=0.05)
    # singleton sets: the centred sign-flip multiplier, variance sum(dc^2) / m^2
    single = shared_multiplier_draws(d, sp.identity(m, format="csr"), 20000, 0)
    assert single.var() == pytest.approx(np.sum(dc**2) / m**2, rel=0.05)
    again = shared_multiplier_draws(d, sp.csr_matrix(inc), 20000, 0, max_cells=100)
    assert stats.ks_2samp(draws, again).pvalue > 0.01


def test_shared_multiplier_bad_input():
    with pytest.raises(InvalidInputError, match="one row per difference"):
        shared_multiplier_draws(np.ones(3), sp.identity(4, format="csr"), 10)
    with pytest.raises(InvalidInputError, match="empty row"):
        shared_multiplier_draws(np.ones(2), sp.csr_matrix(np.array([[1.0, 0], [0, 0]])), 10)
    with pytest.raises(InvalidInputError, match="n_draws"):
        shared_multiplier_draws(np.ones(2), sp.identity(2, format="csr"), 0)


def test_percentile_interval_levels():
    draws = np.arange(1001, dtype=float)
    assert percentile_interval(draws, 0.9) == pytest.approx((50.0, 950.0))


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: bootstrap_mean([1.0, 2.0], n_boot=0), "n_boot"),
        (lambda: bootstrap_mean([], n_boot=10), "values"),
        (lambda: bootstrap_mean([1.0, np.nan]), "values"),
        (lambda: bootstrap_mean([1.0], confidence=1.0), "confidence"),
        (lambda: bootstrap_mean([1.0], random_state=-1), "random_state"),
        (lambda: sign_flip_pvalue([1.0, 2.0], n_perm=0), "n_perm"),
        (lambda: bootstrap_rate_difference([1.0, 0.0, 1.0], [0, 1, 2]), "group_a"),
        (lambda: bootstrap_rate_difference([1.0, 0.0], [0, 1], group_a=0, group_b=5), "group_b"),
        (lambda: bootstrap_rate_difference([1.0, 0.0], [0, 1], group_a=0, group_b=0), "different"),
        (lambda: bootstrap_group_rates([1.0, 0.0], [0]), "groups"),
    ],
)
def test_bad_input_is_named(call, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        call()
