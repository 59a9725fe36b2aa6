"""One-class labels trigger the degenerate-model guard; a model whose number of outputs differs
from the number of label classes is refused, naming both."""

from __future__ import annotations

import pytest
import torch

from gnnaudit.audit.fairness.group_fairness import GroupFairnessUnit
from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.quality_unit import ModelQuality
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError


@pytest.fixture(scope="module")
def data():
    return synthetic_credit_graph(num_nodes=120, seed=4)


def income(x, edge_index):
    return torch.stack([torch.zeros(x.size(0)), x[:, 1]], dim=1)


def test_one_class_labels_make_the_model_degenerate(data):
    one = data.clone()
    one.y = torch.zeros_like(data.y)
    report = run_audit(
        income, one, units=[ModelQuality(), GroupFairnessUnit()], n_boot=50, progress=False
    )
    assert report.finding("degenerate model")["flagged"]
    assert "single class" in report.verdict


def test_a_model_with_the_wrong_number_of_outputs_is_refused(data):
    def six(x, edge_index):
        return torch.zeros(x.size(0), 6)

    with pytest.raises(InvalidInputError, match="outputs 6 scores .* hold 2 classes"):
        run_audit(six, data, units=[ModelQuality()], n_boot=50, progress=False)
