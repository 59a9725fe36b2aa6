"""A model that changes its input in place is refused, and the caller's data is restored."""

from __future__ import annotations

import pytest
import torch

from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.audit.pipeline import run_audit
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError


class Doubler(torch.nn.Module):
    """Scales x in place before a linear layer."""

    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(n_features, 2)

    def forward(self, x, edge_index):
        x.mul_(2.0)
        return self.lin(x)


class EdgeDropper(torch.nn.Module):
    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(n_features, 2)

    def forward(self, x, edge_index):
        edge_index[0].zero_()
        return self.lin(x)


@pytest.mark.parametrize(("model_cls", "arg"), [(Doubler, "x"), (EdgeDropper, "edge_index")])
def test_in_place_change_is_refused_and_undone(model_cls, arg):
    data = synthetic_credit_graph(num_nodes=80, seed=0)
    x0, ei0 = data.x.clone(), data.edge_index.clone()
    with pytest.raises(InvalidInputError, match=rf"changed its input {arg} in place.*restored"):
        run_audit(model_cls(data.num_features), data, n_boot=20, progress=False)
    assert torch.equal(data.x, x0) and torch.equal(data.edge_index, ei0)


class Plain(torch.nn.Module):
    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(n_features, 2)

    def forward(self, x, edge_index):
        return self.lin(x)


def test_a_model_that_leaves_its_inputs_alone_passes():
    data = synthetic_credit_graph(num_nodes=50, seed=0)
    torch.manual_seed(0)
    adapter = ModelAdapter(Plain(data.num_features))
    first = adapter.logits(data.x, data.edge_index)
    second = adapter.logits(data.x, data.edge_index)
    assert torch.equal(first, second) and adapter.calls == 2
