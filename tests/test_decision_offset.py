"""Decision offset: a fine-tuned candidate keeps the model's share of class-1 decisions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from gnnaudit.errors import InvalidInputError
from gnnaudit.training import FairFinetune
from gnnaudit.training.decision_offset import find_output_bias, fold_offset, margins, rate_offset
from gnnaudit.training.fair_selection import label_free_nodes


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=40, unique=True),
    st.floats(0.0, 1.0),
)
def test_rate_offset_decides_exactly_the_rounded_share(values, rate):
    margin = np.asarray(values)
    offset = rate_offset(margin, rate)
    assert int(((margin + offset) > 0).sum()) == round(rate * margin.size)


def test_rate_offset_separates_margins_one_float_apart():
    """Two margins with no float between them (hypothesis's counterexample): the midpoint
    rounds to the upper one, so the threshold is the lower one, and the rounded share holds."""
    margin = np.array([0.0, 50.0, np.nextafter(50.0, 0.0)])
    offset = rate_offset(margin, 0.25)
    assert int(((margin + offset) > 0).sum()) == 1
    assert ((margin + offset) > 0).tolist() == [False, True, False]


def test_rate_offset_edges_and_bad_input():
    assert rate_offset(np.array([]), 0.3) == 0.0
    assert rate_offset(np.array([-1.0, 2.0, 0.5]), 0.0) == -3.0  # one unit past the largest
    assert ((np.array([-1.0, 2.0]) + rate_offset(np.array([-1.0, 2.0]), 1.0)) > 0).all()
    with pytest.raises(InvalidInputError, match="rate"):
        rate_offset(np.array([0.0]), 1.5)
    with pytest.raises(InvalidInputError, match="finite"):
        rate_offset(np.array([0.0, np.nan]), 0.5)


class _HiddenTwo(nn.Module):
    """A hidden layer of width 2 (its bias has shape (2,) but does not shift the margin) and a
    bias-free output layer: no output bias."""

    def __init__(self, n_in: int) -> None:
        super().__init__()
        self.hidden = nn.Linear(n_in, 2)
        self.out = nn.Linear(2, 2, bias=False)

    def forward(self, x, edge_index):
        return self.out(torch.relu(self.hidden(x)))


class _LogSoftmaxHead(nn.Module):
    def __init__(self, n_in: int, classes: int = 2) -> None:
        super().__init__()
        self.lin = nn.Linear(n_in, classes)

    def forward(self, x, edge_index):
        return torch.log_softmax(self.lin(x), dim=1)


def test_find_output_bias_finds_only_a_bias_that_shifts_the_margin(fair_graph, fair_gcn):
    assert find_output_bias(fair_gcn, fair_graph) is not None
    torch.manual_seed(0)
    assert find_output_bias(_HiddenTwo(fair_graph.num_features), fair_graph) is None
    assert find_output_bias(_LogSoftmaxHead(fair_graph.num_features), fair_graph) == "lin.bias"
    assert find_output_bias(_LogSoftmaxHead(fair_graph.num_features, classes=3), fair_graph) is None


def test_find_output_bias_leaves_the_model_bit_for_bit(fair_graph):
    """The probe adds 1 to the bias and takes it back: in float32 0.1 + 1 - 1 is not 0.1, so
    the probe must restore the stored value, not subtract."""
    torch.manual_seed(0)
    model = _LogSoftmaxHead(fair_graph.num_features)
    with torch.no_grad():
        model.lin.bias.copy_(torch.tensor([0.3, 0.1]))
    assert float(torch.tensor(0.1) + 1.0 - 1.0) != float(torch.tensor(0.1))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert find_output_bias(model, fair_graph) == "lin.bias"
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_fold_offset_shifts_every_margin_by_the_offset(fair_graph, fair_gcn):
    import copy

    model = copy.deepcopy(fair_gcn)
    before = margins(model, fair_graph.x, fair_graph.edge_index)
    fold_offset(model, find_output_bias(model, fair_graph), -0.75)
    after = margins(model, fair_graph.x, fair_graph.edge_index)
    assert torch.allclose(after - before, torch.full_like(before, -0.75), atol=1e-5)
    with pytest.raises(InvalidInputError, match="offset"):
        fold_offset(model, "lin.bias", float("nan"))


def _positive_share(model, fair_graph) -> float:
    free = torch.from_numpy(label_free_nodes(fair_graph))
    return float((margins(model, fair_graph.x, fair_graph.edge_index)[free] > 0).float().mean())


def test_finetune_keeps_the_share_of_class_1_decisions(fair_graph, fair_gcn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # one covariance weight: one run per call (the grid's other runs add time, not checks)
        # one parity surrogate for both ("auto" would train each towards its own decisions,
        # tests/test_parity_surrogate.py): the same candidates
        one = {"epochs": 30, "random_state": 0, "lambda_grid": (20.0,), "parity": "rate"}
        kept = FairFinetune.finetune(fair_gcn, fair_graph, "gender", **one)
        argmax = FairFinetune.finetune(fair_gcn, fair_graph, "gender", keep_rate=False, **one)
    n_free = int(label_free_nodes(fair_graph).sum())
    table = kept.selection_
    assert table["offset"].iloc[0] == 0.0  # the model as given decides by its own argmax
    assert (table["offset"].iloc[1:] != 0.0).any()
    assert (
        abs(_positive_share(kept, fair_graph) - _positive_share(fair_gcn, fair_graph))
        <= 1.0 / n_free
    )
    assert (argmax.selection_["offset"] == 0.0).all()
    # the same candidates were fair_gcn: only their decisions differ
    assert argmax.selection_["val_auroc"].tolist() == pytest.approx(table["val_auroc"].tolist())


def test_keep_rate_must_be_a_bool(fair_graph, fair_gcn):
    with pytest.raises(InvalidInputError, match="keep_rate"):
        FairFinetune.finetune(fair_gcn, fair_graph, "gender", epochs=2, keep_rate="yes")
