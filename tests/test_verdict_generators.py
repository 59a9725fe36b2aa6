"""The verdict names the mechanism of models built to have it: direct use (strong and weak),
use through the neighbours only, and no use at all."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnaudit.audit.fairness.group_fairness import GroupFairnessUnit
from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.quality_unit import ModelQuality
from gnnaudit.audit.sensitivity.unit import SensitivityUnit
from gnnaudit.datasets import synthetic_credit_graph

GENDER = 10


@pytest.fixture(scope="module")
def data():
    return synthetic_credit_graph(num_nodes=400, bias=1.5, seed=3)


def _base_score(x: torch.Tensor) -> torch.Tensor:
    return x[:, 1] - 0.5 * x[:, 5]


class AddBit(torch.nn.Module):
    """logit of class 1 = base score + ``weight`` * gender (the bit read directly)."""

    def __init__(self, weight: float, shift: float = 0.0) -> None:
        super().__init__()
        self.weight, self.shift = weight, shift

    def forward(self, x, edge_index):
        score = _base_score(x) - self.shift + self.weight * x[:, GENDER]
        return torch.stack([torch.zeros_like(score), score], dim=1)


class NeighbourMean(torch.nn.Module):
    """logit of class 1 = base score + ``weight`` * (mean gender of the neighbours - 1/2);
    the node's own gender is never read."""

    def __init__(self, weight: float) -> None:
        super().__init__()
        self.weight = weight

    def forward(self, x, edge_index):
        src, dst = edge_index
        total = torch.zeros(x.size(0)).index_add_(0, dst, x[src, GENDER])
        deg = torch.zeros(x.size(0)).index_add_(0, dst, torch.ones(src.numel()))
        mean = total / deg.clamp(min=1)
        score = _base_score(x) - 0.3 + self.weight * (mean - 0.5)
        return torch.stack([torch.zeros_like(score), score], dim=1)


def _audit(model, data, hops):
    units = [ModelQuality(), SensitivityUnit(num_hops=hops, rank=False), GroupFairnessUnit()]
    mask = torch.ones(data.num_nodes, dtype=torch.bool)
    report = run_audit(model, data, units=units, mask=mask, n_boot=200, progress=False)
    assert not report.findings["value"].isna().any()
    return report


def _weak_weight(data, share: float) -> tuple[float, float]:
    """(weight, shift) making exactly ``share`` of the nodes flip: flip iff
    ``-weight < score <= 0``, so the weight is just above the right order statistic."""
    score = _base_score(data.x).numpy().astype(np.float64)
    shift = float(np.median(score))
    neg = np.sort(shift - score[score <= shift])
    k = round(share * data.num_nodes)
    return float((neg[k - 1] + neg[k]) / 2), shift


def test_strong_direct_use_is_named_direct(data):
    report = _audit(AddBit(3.0, shift=1.0), data, 0)
    node = report.finding("counterfactual flip (node scope)", "gender")
    assert node["flagged"]
    assert "depend on gender directly" in report.verdict
    assert "through the neighbours" not in report.verdict


def test_direct_use_at_six_percent_is_flagged(data):
    weight, shift = _weak_weight(data, 0.06)
    report = _audit(AddBit(weight, shift), data, 0)
    node = report.finding("counterfactual flip (node scope)", "gender")
    assert node["value"] == pytest.approx(0.06, abs=0.003)
    assert node["flagged"]
    assert "depend on gender directly" in report.verdict


def test_weak_direct_use_is_weak_and_never_blamed_on_proxies(data):
    # 2% of 400 nodes: the interval's lower end lies below the negligible 1%
    weight, shift = _weak_weight(data, 0.02)
    report = _audit(AddBit(weight, shift), data, 0)
    node = report.finding("counterfactual flip (node scope)", "gender")
    assert node["value"] == pytest.approx(0.02, abs=0.003)
    assert not node["flagged"] and node["ci_low"] > 0
    assert "but weakly" in report.verdict
    assert f"CI {node['ci_low']:.3g} to {node['ci_high']:.3g}" in report.verdict
    assert "proxies" not in report.verdict and "not through gender" not in report.verdict


def test_neighbour_only_use_is_named_through_the_neighbours(data):
    report = _audit(NeighbourMean(6.0), data, 1)
    node = report.finding("counterfactual flip (node scope)", "gender")
    graph = report.finding("counterfactual flip (graph scope)", "gender")
    assert node["value"] == 0.0 and not node["flagged"]
    assert graph["flagged"] and graph["value"] > 0.1
    assert "depend on gender through the neighbours" in report.verdict
    assert "directly" not in report.verdict


def test_a_model_ignoring_the_attribute_is_never_said_to_use_it(data):
    report = _audit(AddBit(0.0, shift=0.2), data, 0)
    for scope in ("node", "graph"):
        f = report.finding(f"counterfactual flip ({scope} scope)", "gender")
        assert f["value"] == 0.0 and not f["flagged"]
        assert f["ci_low"] == 0.0 and 0 < f["ci_high"] < 4 / data.num_nodes  # not [0, 0]
    parity = report.finding("statistical parity", "gender")
    assert "depend on gender" not in report.verdict and "weakly" not in report.verdict
    if parity["flagged"]:
        assert "not through gender itself" in report.verdict
    else:
        assert "Outcomes differ" not in report.verdict
        assert report.verdict.startswith("No finding shows")
