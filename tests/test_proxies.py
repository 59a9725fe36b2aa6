"""The proxy unit: mutual-information ranking, the proxies' own flip rates, the hidden probe,
and the verdict when the attribute is not a model input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnaudit.audit.fairness.group_fairness import GroupFairnessUnit
from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.proxies import PROXY_SHARE, ProxyUnit, rank_proxies
from gnnaudit.audit.quality_unit import ModelQuality
from gnnaudit.audit.sensitive import known_group_mask
from gnnaudit.audit.sensitivity.unit import SensitivityUnit
from gnnaudit.datasets import synthetic_credit_graph

GENDER, SAVINGS = 10, 9


@pytest.fixture(scope="module")
def hidden_gender():
    """gender removed from x; savings_account replaced by a 95% copy of it."""
    data = synthetic_credit_graph(num_nodes=400, bias=2.0, seed=7)
    gender = data.x[:, GENDER].clone()
    x = data.x.clone()
    noisy = gender.clone()
    noisy[::20] = 1 - noisy[::20]
    x[:, SAVINGS] = noisy
    x[:, GENDER] = 0.0
    out = data.clone()
    out.x = x
    del out.sensitive, out.sensitive_name
    return out, gender.numpy().astype(int)


class ProxyModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = torch.nn.Linear(11, 4)
        self.out = torch.nn.Linear(4, 2)
        with torch.no_grad():
            self.hidden.weight.zero_()
            self.hidden.bias.zero_()
            self.hidden.weight[0, SAVINGS] = 3.0
            self.hidden.weight[1, 1] = 1.0
            self.out.weight.copy_(torch.tensor([[0.0, 0, 0, 0], [1.0, 0.5, 0, 0]]))
            self.out.bias.copy_(torch.tensor([0.0, -1.5]))

    def forward(self, x, edge_index):
        return self.out(torch.relu(self.hidden(x)))


def test_mutual_information_ranks_the_planted_proxy_first():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 2, 600)
    x = np.column_stack(
        [rng.normal(size=600), s + 0.1 * rng.normal(size=600), rng.integers(0, 3, 600)]
    )
    table = rank_proxies(x, ["noise", "copy", "cat"], s)
    assert table["feature"].iloc[0] == "copy"
    assert table["entropy_share"].iloc[0] > 0.8 and table["entropy_share"].iloc[-1] < 0.05


def test_absent_attribute_with_a_strong_proxy_names_it_and_says_no_direct_test(hidden_gender):
    data, gender = hidden_gender
    units = [
        ModelQuality(),
        SensitivityUnit(num_hops=0),
        GroupFairnessUnit(),
        ProxyUnit(num_hops=0),
    ]
    report = run_audit(ProxyModel(), data, gender, units=units, n_boot=100, progress=False)
    proxy = report.finding("proxies", "sensitive")
    assert proxy["flagged"] and proxy["value"] >= PROXY_SHARE
    assert proxy["explanation"].startswith(
        "The inputs that best predict sensitive are savings_account"
    )
    assert "balanced accuracy" in proxy["explanation"]
    ranking = report.table("proxies", "proxies")
    assert ranking["feature"].iloc[0] == "savings_account"
    assert ranking["flip_node"].iloc[0] > 0.05 and ranking["flip_graph"].iloc[0] > 0.05
    assert report.section("proxies").data["probe_accuracy"] > 0.8
    assert "a direct test of its use was impossible" in report.verdict
    assert "savings_account" in report.verdict
    assert not report.findings["value"].isna().any()


def test_a_callable_model_skips_the_probe_with_a_note(hidden_gender):
    data, gender = hidden_gender
    model = ProxyModel()

    def fn(x, edge_index):
        return model(x, edge_index)

    report = run_audit(fn, data, gender, units=[ProxyUnit(num_hops=0)], n_boot=50, progress=False)
    assert any("probe skipped" in n for n in report.section("proxies").notes)
    assert np.isnan(report.section("proxies").data["probe_accuracy"] or np.nan)


def test_nodes_of_unknown_group_are_left_out_of_the_ranking():
    """Where the data marks unknown values of its attribute (``sensitive_mask`` false, stored as
    group 0 by the FairGNN loaders), the proxies are ranked on the known nodes only (oracle:
    :func:`rank_proxies` on those rows); an audit of another attribute keeps every node."""
    data = synthetic_credit_graph(num_nodes=400, bias=2.0, seed=7)
    unknown = np.arange(0, 400, 3)
    data.x[unknown, GENDER] = 0.0
    data.sensitive = data.x[:, GENDER].long()
    data.sensitive_mask = torch.ones(400, dtype=torch.bool)
    data.sensitive_mask[unknown] = False
    known = data.sensitive_mask.numpy()
    units = [ProxyUnit(num_hops=0, probe=False)]
    report = run_audit(ProxyModel(), data, "gender", units=units, n_boot=50, progress=False)
    got = report.table("proxies", "proxies").set_index("feature")["mutual_information"]
    keep = [j for j in range(data.x.size(1)) if j != GENDER]
    names = [data.feature_names[j] for j in keep]
    x = data.x.numpy()
    want = rank_proxies(x[known][:, keep], names, x[known, GENDER].astype(int), 0)
    assert got.loc[want["feature"]].to_numpy() == pytest.approx(want["mutual_information"])
    every = rank_proxies(x[:, keep], names, x[:, GENDER].astype(int), 0)  # the test can fail
    assert not np.allclose(got.loc[every["feature"]], every["mutual_information"])
    assert known_group_mask(data, 400, "gender").tolist() == known.tolist()
    assert known_group_mask(data, 400, "age").all()  # not the attribute the mask is about
    # the audited nodes (the test mask) hold unknown ones: the report says so
    n_unknown = int((~known & data.test_mask.numpy()).sum())
    want_note = f"{n_unknown} of the {int(data.test_mask.sum())} audited nodes have an unknown"
    assert n_unknown > 0 and any(want_note in n for n in report.run_info["notes"])
    clean = run_audit(
        ProxyModel(), data, "gender", mask=data.test_mask & data.sensitive_mask, units=units,
        n_boot=50, progress=False,
    )  # fmt: skip
    assert not any("unknown value" in n for n in clean.run_info.get("notes", []))
