"""The audit's counted work: model calls and rows evaluated per stage, pinned as a budget.

The default audit of a fixed small graph and model makes exactly the calls below. A change that
raises a stage's count must raise its budget here in the same commit, with a line in the
CHANGELOG; one that lowers it updates the budget too, so the table always describes today's
code. Counts, not timings: deterministic on every machine.
"""

from __future__ import annotations

import pytest
import torch
from torch_geometric.nn import SimpleConv

from gnnaudit.audit.pipeline import run_audit
from gnnaudit.datasets import synthetic_credit_graph

#: stage -> (model calls, rows evaluated in whole-graph passes) of the default audit below
BUDGET = {
    "predictions": (1, 1.0),
    "evidence_search": (0, 0.0),
    "model_quality": (0, 0.0),
    "sensitivity": (57, 40.433),
    "group_fairness": (0, 0.0),
    "literature": (1, 1.0),
    "proxies": (0, 0.0),  # no strong proxy on this graph: no flip pass (see below)
    "evidence_contrast": (0, 0.0),
    "discrimination": (0, 0.0),
    "error_verification": (0, 0.0),
    "evidence_pairs": (0, 0.0),
}


class Scorer(torch.nn.Module):
    """A fixed one-hop model: class-1 logit = income-like minus debt-like inputs, own and
    neighbours' mean (a ``SimpleConv``, so the receptive field is inferred), plus gender."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = SimpleConv(aggr="mean")

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = x + self.conv(x, edge_index)
        score = h[:, 1] - 0.5 * h[:, 5] + 0.4 * x[:, 10] - 0.2
        return torch.stack([torch.zeros_like(score), score], dim=1)


@pytest.fixture(scope="module")
def report():
    data = synthetic_credit_graph(num_nodes=300, bias=1.5, seed=0)
    report = run_audit(Scorer(), data, n_boot=100, k=5, progress=False)
    assert "degenerate" not in report.verdict  # every unit runs
    return report


def test_every_stage_is_counted(report):
    calls, passes = report.run_info["model_calls"], report.run_info["model_passes"]
    assert set(calls) == set(passes) == set(report.run_info["seconds"])


def test_the_default_audit_stays_within_its_budget(report):
    calls, passes = report.run_info["model_calls"], report.run_info["model_passes"]
    got = {stage: (calls[stage], passes[stage]) for stage in calls}
    assert got == BUDGET


#: the proxies stage when the graph has a strong proxy: savings_account replaced by a 95% copy
#: of gender, the only input among the top 3 that explains a fifth of its entropy: its node- and
#: graph-scope flips (the sensitivity unit's node sample and plan) and nothing for the others
PROXY_BUDGET = (7, 4.633)


def test_only_strong_proxies_are_flipped():
    data = synthetic_credit_graph(num_nodes=300, bias=1.5, seed=0)
    gender = data.x[:, 10].clone()
    noisy = gender.clone()
    noisy[::20] = 1 - noisy[::20]
    data.x[:, 9] = noisy
    report = run_audit(Scorer(), data, n_boot=100, k=5, progress=False)
    calls, passes = report.run_info["model_calls"], report.run_info["model_passes"]
    assert (calls["proxies"], passes["proxies"]) == PROXY_BUDGET
    ranking = report.table("proxies", "proxies")
    strong = ranking["entropy_share"] >= 0.2
    assert ranking["feature"][strong].tolist() == ["savings_account"]
    assert ranking.loc[strong, "flip_graph"].notna().all()
    assert ranking.loc[~strong, ["flip_node", "flip_graph"]].isna().all().all()
