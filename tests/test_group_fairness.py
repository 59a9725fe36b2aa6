"""Group fairness against hand-computed values and a loop oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gnnaudit.audit.group_fairness import GroupFairness, group_fairness
from gnnaudit.errors import InvalidInputError


def test_hand_built_two_groups():
    # group 0: 4 nodes, group 1: 4 nodes
    pred = np.array([1, 1, 0, 0, 1, 0, 0, 0])
    y = np.array([1, 0, 1, 0, 1, 1, 0, 0])
    s = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    res = group_fairness(pred, y, s)
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
    res = group_fairness(pred, y, s, mask)
    assert res.groups["size"].tolist() == [2, 2]
    # group 0 nodes 0,2: PR 1/2, TPR 1/1; group 1 nodes 1,3: PR 1/2, TPR 1/2
    assert res.statistical_parity_difference == pytest.approx(0.0)
    assert res.equal_opportunity_difference == pytest.approx(0.5)
    same = group_fairness(pred, y, s, np.array([0, 1, 2, 3]))
    assert same.to_dict() == res.to_dict()


@pytest.mark.parametrize("seed", range(5))
def test_multi_group_matches_loop_oracle(seed):
    rng = np.random.default_rng(seed)
    n = 60
    pred, y, s = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, 4, n)
    res = group_fairness(pred, y, s)
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


def test_group_without_positives_is_explicit_nan_and_roundtrips():
    pred = np.array([1, 0, 1, 0])
    y = np.array([1, 0, 0, 0])
    s = np.array([0, 0, 1, 1])
    res = group_fairness(pred, y, s, sensitive_name="gender")
    assert math.isnan(res.groups["true_positive_rate"].iloc[1])
    assert math.isnan(res.equal_opportunity_difference)
    back = GroupFairness.from_dict(res.to_dict())
    assert back.sensitive_name == "gender"
    assert back.statistical_parity_difference == res.statistical_parity_difference
    assert math.isnan(back.equal_opportunity_difference)


def test_errors():
    with pytest.raises(InvalidInputError, match="labels must have the same length"):
        group_fairness([1, 0], [1], [0, 1])
    with pytest.raises(InvalidInputError, match="mask must be a boolean array of shape"):
        group_fairness([1, 0], [1, 0], [0, 1], np.array([True]))
    with pytest.raises(InvalidInputError, match="selects no node"):
        group_fairness([1, 0], [1, 0], [0, 1], np.array([False, False]))
    with pytest.raises(InvalidInputError, match="sensitive must be finite"):
        group_fairness([1, 0], [1, 0], [0, np.nan])
