"""Group fairness against hand-computed values, a loop oracle and interval coverage."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from gnnaudit.audit.fairness.group_fairness import group_fairness
from gnnaudit.errors import InvalidInputError


def test_hand_built_two_groups():
    # group 0: 4 nodes, group 1: 4 nodes
    pred = np.array([1, 1, 0, 0, 1, 0, 0, 0])
    y = np.array([1, 0, 1, 0, 1, 1, 0, 0])
    s = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    res = group_fairness(y, pred, sensitive_features=s)
    g = res.groups.set_index("group")
    assert g.loc[0, "accuracy"] == pytest.approx(2 / 4)
    assert g.loc[1, "accuracy"] == pytest.approx(3 / 4)
    assert g.loc[0, "positive_rate"] == pytest.approx(2 / 4)
    assert g.loc[1, "positive_rate"] == pytest.approx(1 / 4)
    assert g.loc[0, "true_positive_rate"] == pytest.approx(1 / 2)
    assert g.loc[1, "true_positive_rate"] == pytest.approx(1 / 2)
    assert res.statistical_parity_difference == pytest.approx(0.25)
    assert res.equal_opportunity_difference == pytest.approx(0.0)
    assert list(g["size"]) == [4, 4] and list(g["positives"]) == [2, 2]


def test_mask_and_tensors():
    pred = torch.tensor([1, 1, 0, 0, 1, 0])
    y = torch.tensor([1, 1, 0, 1, 1, 0])
    s = torch.tensor([0, 1, 0, 1, 0, 1])
    mask = torch.tensor([True, True, True, True, False, False])
    res = group_fairness(y, pred, sensitive_features=s, mask=mask)
    assert res.groups["size"].tolist() == [2, 2]
    # group 0 nodes 0,2: PR 1/2, TPR 1/1; group 1 nodes 1,3: PR 1/2, TPR 1/2
    assert res.statistical_parity_difference == pytest.approx(0.0)
    assert res.equal_opportunity_difference == pytest.approx(0.5)
    same = group_fairness(y, pred, sensitive_features=s, mask=np.array([0, 1, 2, 3]))
    pd.testing.assert_frame_equal(same.groups, res.groups)
    assert same.gaps().equals(res.gaps())


@pytest.mark.parametrize("seed", range(5))
def test_multi_group_matches_loop_oracle(seed):
    rng = np.random.default_rng(seed)
    n = 60
    pred, y, s = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, 4, n)
    res = group_fairness(y, pred, sensitive_features=s)
    prs, tprs = [], []
    for grp in sorted(set(s.tolist())):
        idx = [i for i in range(n) if s[i] == grp]
        pos = [i for i in idx if y[i] == 1]
        prs.append(sum(pred[i] == 1 for i in idx) / len(idx))
        tprs.append(sum(pred[i] == 1 for i in pos) / len(pos))
        row = res.groups[res.groups["group"] == grp].iloc[0]
        assert row["accuracy"] == pytest.approx(sum(pred[i] == y[i] for i in idx) / len(idx))
    assert res.statistical_parity_difference == pytest.approx(max(prs) - min(prs))
    assert res.equal_opportunity_difference == pytest.approx(max(tprs) - min(tprs))


def test_group_without_positives_is_explicit_nan():
    pred = np.array([1, 0, 1, 0])
    y = np.array([1, 0, 0, 0])
    s = np.array([0, 0, 1, 1])
    res = group_fairness(y, pred, sensitive_features=s, sensitive_name="gender")
    assert math.isnan(res.groups["true_positive_rate"].iloc[1])
    assert math.isnan(res.equal_opportunity_difference)
    assert math.isnan(res.eod_ci[0]) and math.isnan(res.eod_ci[1])
    # no equal-opportunity finding when it is undefined; parity is always reported
    assert [f.finding for f in res.findings()] == ["statistical parity"]


def test_without_labels_only_parity():
    res = group_fairness(None, [1, 1, 0, 0], sensitive_features=[0, 0, 1, 1])
    assert res.statistical_parity_difference == pytest.approx(1.0)
    assert math.isnan(res.equal_opportunity_difference)
    assert res.groups["accuracy"].isna().all()
    assert res.disparate_impact == pytest.approx(0.0)


def test_interval_contains_estimate_and_flags_follow_the_rules():
    rng = np.random.default_rng(0)
    n = 2000
    s = rng.integers(0, 2, n)
    y = rng.integers(0, 2, n)
    # group 1 gets the positive decision far more often: four-fifths rule broken
    pred = (rng.random(n) < np.where(s == 1, 0.7, 0.3)).astype(int)
    res = group_fairness(y, pred, sensitive_features=s, random_state=3)
    lo, hi = res.spd_ci
    assert lo <= res.statistical_parity_difference <= hi and lo > 0.3
    assert res.disparate_impact < 0.8 and res.spd_flagged
    fair = group_fairness(y, rng.integers(0, 2, n), sensitive_features=s, random_state=3)
    assert not fair.spd_flagged and not fair.eod_flagged
    assert fair.spd_ci[0] < 0.05
    # same seed, same intervals
    again = group_fairness(y, pred, sensitive_features=s, random_state=3)
    assert again.spd_ci == res.spd_ci and again.eod_ci == res.eod_ci


def test_spd_interval_covers_the_truth():
    """Simulated coverage of the 95% interval of a two-group parity gap (true gap 0.1): the
    interval is of the signed difference PR(hi) - PR(lo) of the groups it names."""
    covered = 0
    trials = 200
    true_rate = {0: 0.4, 1: 0.5}
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        s = np.repeat([0, 1], 300)
        pred = (rng.random(600) < np.where(s == 1, 0.5, 0.4)).astype(int)
        res = group_fairness(None, pred, sensitive_features=s, n_boot=400, random_state=seed)
        hi, lo = res.spd_groups
        truth = true_rate[hi] - true_rate[lo]
        covered += res.spd_ci[0] <= truth <= res.spd_ci[1]
    # binomial tolerance around 95%: 3 standard errors of a 200-trial proportion
    assert covered / trials >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / trials)


def test_errors():
    with pytest.raises(InvalidInputError, match="y_true must have the same length"):
        group_fairness([1], [1, 0], sensitive_features=[0, 1])
    with pytest.raises(InvalidInputError, match="mask must be a boolean array of shape"):
        group_fairness([1, 0], [1, 0], sensitive_features=[0, 1], mask=np.array([True]))
    with pytest.raises(InvalidInputError, match="selects no node"):
        group_fairness([1, 0], [1, 0], sensitive_features=[0, 1], mask=np.array([False, False]))
    with pytest.raises(InvalidInputError, match="sensitive_features must be finite"):
        group_fairness([1, 0], [1, 0], sensitive_features=[0, np.nan])
    with pytest.raises(InvalidInputError, match="single value"):
        group_fairness([1, 0], [1, 0], sensitive_features=[1, 1])
    # probabilities are refused, never truncated to 0
    with pytest.raises(InvalidInputError, match="whole-number class ids"):
        group_fairness([1, 0], [0.7, 0.2], sensitive_features=[0, 1])
    with pytest.raises(InvalidInputError, match="whole-number class ids"):
        group_fairness([1.0, 0.5], [1, 0], sensitive_features=[0, 1])
