"""Planted bias on the synthetic credit graph: does the audit find it?

Measured (GCN, 200 epochs, seeds 0-2; see benchmarks/RESULTS.md, audit section):
the counterfactual discrimination score (Eq. 12) does NOT rank ``gender`` first at bias=1.5
(rank 5, 5, 4 by score; 4, 4, 2 by lift), nor at bias=3.0, while group fairness shows the
planted effect plainly (statistical parity difference about 0.2 vs 0.0). Reasons measured: the
generator gives ``employed`` a larger effect than gender (weight 0.7 on a standardised binary
with p = 0.8, i.e. 1.75 per unit vs 1.5), rare values of ``late_payments`` score 1.0 by
construction, and KS-nearest evidences share most binary values, so every lift is <= 0.
The issue's claim is kept below as a strict xfail: it fails loudly the day it starts to pass.
"""

from __future__ import annotations

import logging

import pytest
import torch

from gnnaudit.audit import CounterfactualEvidence, discrimination_scores, feature_rank
from gnnaudit.audit.fairness.group_fairness import group_fairness
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import train_node_classifier


def _audit(bias: float, seed: int = 0):
    logging.getLogger("lightning").setLevel(logging.ERROR)
    data = synthetic_credit_graph(num_nodes=1000, bias=bias, seed=seed)
    module, _ = train_node_classifier(data, "gcn", max_epochs=200, seed=seed)
    with torch.no_grad():
        pred = module(data.x, data.edge_index).argmax(-1)
    ce = CounterfactualEvidence().fit(data, predictions=pred)
    table = discrimination_scores(data, ce, k=10)
    fair = group_fairness(data.y, pred, sensitive_features=data.sensitive, mask=data.test_mask)
    return table, fair


@pytest.fixture(scope="module")
def audits():
    return {bias: _audit(bias) for bias in (1.5, 0.0)}


def test_group_fairness_sees_the_planted_bias(audits):
    spd_biased = audits[1.5][1].statistical_parity_difference
    spd_fair = audits[0.0][1].statistical_parity_difference
    assert spd_biased > 0.1
    assert spd_biased > spd_fair + 0.1


def test_gender_is_scored_with_exact_baseline(audits):
    for table, _ in audits.values():
        g = table[table["feature"] == "gender"]
        assert sorted(g["value"]) == ["0", "1"]
        assert g["support"].sum() == 250  # every test node has evidences
        assert ((g["baseline"] > 0.3) & (g["baseline"] < 0.7)).all()  # balanced attribute


@pytest.mark.xfail(
    strict=True,
    reason="measured: Eq. 12 ranks gender 5th (score) / 4th (lift) "
    "at bias=1.5 on this generator; see module docstring",
)
@pytest.mark.parametrize("by", ["score", "lift"])
def test_gender_ranks_first_only_when_biased(audits, by):
    assert feature_rank(audits[1.5][0], "gender", by=by) == 1
    assert feature_rank(audits[0.0][0], "gender", by=by) != 1
