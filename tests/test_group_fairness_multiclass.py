"""Parity and equal opportunity per class with 6 classes and 4 text-labelled groups."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gnnaudit.audit.fairness.group_fairness import group_fairness


def _data(seed=0, n=1200):
    rng = np.random.default_rng(seed)
    s = rng.choice(np.array(["north", "south", "east", "west"]), size=n)
    y = rng.integers(0, 6, n)
    pred = np.where(rng.random(n) < 0.6, y, rng.integers(0, 6, n))
    # group "north" is pushed to class 3: the largest gap is class 3's
    push = (s == "north") & (rng.random(n) < 0.5)
    pred[push] = 3
    return y, pred, s


def _oracle(y, pred, s):
    frame = pd.DataFrame({"y": y, "p": pred, "s": s})
    spd = {c: (frame["p"] == c).groupby(frame["s"]).mean() for c in range(6)}
    spd = {c: r.max() - r.min() for c, r in spd.items()}
    eod = {}
    for c in range(6):
        sub = frame[frame["y"] == c]
        r = (sub["p"] == c).groupby(sub["s"]).mean()
        if len(r) >= 2:
            eod[c] = r.max() - r.min()
    return spd, eod


def test_largest_gap_and_its_class_lead_the_findings():
    y, pred, s = _data()
    res = group_fairness(y, pred, sensitive_features=s, sensitive_name="region", n_boot=300)
    spd, eod = _oracle(y, pred, s)
    top = max(spd, key=spd.get)
    assert top == 3 and res.class_gaps.spd_class == 3
    assert res.statistical_parity_difference == pytest.approx(spd[3])
    assert res.equal_opportunity_difference == pytest.approx(max(eod.values()))
    assert res.class_gaps.eod_class == max(eod, key=eod.get)
    np.testing.assert_allclose(
        res.class_gaps.table["statistical_parity_difference"], [spd[c] for c in range(6)]
    )
    findings = {f.finding: f for f in res.findings()}
    parity = findings["statistical parity"]
    assert parity.flagged and "class 3 (the largest gap over the 6 classes)" in parity.explanation
    assert parity.ci_low <= parity.value <= parity.ci_high
    for f in findings.values():
        assert np.isfinite([f.value, f.ci_low, f.ci_high]).all()
    assert sorted(res.groups["group"]) == ["east", "north", "south", "west"]
    assert "per_class" in res.report_section().tables


def test_a_class_without_true_members_in_two_groups_is_left_out_not_nan():
    y, pred, s = _data(seed=1)
    y = np.where((y == 5) & (s != "east"), 0, y)  # class 5 only in "east"
    res = group_fairness(y, pred, sensitive_features=s, n_boot=100)
    table = res.class_gaps.table
    assert np.isnan(table.loc[5, "equal_opportunity_difference"])
    assert res.class_gaps.eod_class != 5
    assert all(np.isfinite(f.value) for f in res.findings())


def test_two_classes_keep_the_positive_class_reading():
    rng = np.random.default_rng(2)
    y, pred, s = rng.integers(0, 2, 300), rng.integers(0, 2, 300), rng.integers(0, 2, 300)
    res = group_fairness(y, pred, sensitive_features=s, n_boot=100)
    assert res.class_gaps is None
    assert "class 1 differs" in res.findings()[0].explanation


def test_audit_of_a_six_class_model_on_four_groups_has_no_nan_finding():
    import torch
    from torch_geometric.data import Data

    from gnnaudit.audit.pipeline import run_audit

    rng = np.random.default_rng(4)
    n = 400
    region = rng.integers(0, 4, n)
    x = torch.tensor(np.column_stack([rng.normal(size=(n, 3)), region]), dtype=torch.float32)
    edges = torch.tensor(rng.integers(0, n, (2, 1600)))
    y = torch.tensor(rng.integers(0, 6, n))
    data = Data(x=x, edge_index=edges, y=y, feature_names=["a", "b", "c", "region"])

    def model(x, edge_index):  # region 0 pushed to class 5
        logits = torch.nn.functional.one_hot(y, 6).float() * 1.0
        logits[:, 5] += 2.0 * (x[:, 3] == 0).float()
        return logits + 0.5 * x[:, :1]

    report = run_audit(model, data, sensitive="region", n_boot=200, progress=False, k=3)
    assert not report.findings["value"].isna().any()
    parity = report.finding("statistical parity", "region")
    assert parity["flagged"] and "class 5" in parity["explanation"]
    assert report.finding("equal opportunity", "region")["value"] > 0
