"""Input blinding: the weights through which a model reads the sensitive attribute, zeroed;
FairFinetune's blinded runs (CF exactly 0) and the ``blind`` choices of ``finetune``."""

from __future__ import annotations

import copy
import logging
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from gnnaudit.audit.interventions import alternatives
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError
from gnnaudit.training import FairFinetune, NodeClassifier, train_node_classifier
from gnnaudit.training.data_module import GraphDataModule
from gnnaudit.training.fair_runs import blind_modes
from gnnaudit.training.fair_selection import resolve_sensitive_feature, validation_metrics
from gnnaudit.training.input_blinding import find_input_slices, is_blind, zero_input_slices
from gnnaudit.training.train import make_trainer, quiet_lightning


@pytest.fixture(scope="module")
def graph():
    logging.getLogger("lightning").setLevel(logging.ERROR)
    return synthetic_credit_graph(num_nodes=300, bias=1.5, seed=1)


def _flip_all(data, spec) -> torch.Tensor:
    """The oracle's counterfactual graph: the binary attribute flipped at every node."""
    x = data.x.clone()
    col = spec.columns[0]
    x[:, col] = 1.0 - x[:, col]
    return x


def _outputs_move(model, data, spec) -> bool:
    model.eval()
    with torch.no_grad():
        a = model(data.x, data.edge_index)
        b = model(_flip_all(data, spec), data.edge_index)
    return not torch.equal(a, b)


@pytest.mark.parametrize("arch", ["gcn", "sage", "gin", "gat"])
def test_first_layer_slices_make_the_model_blind(graph, arch):
    torch.manual_seed(0)
    model = NodeClassifier(graph.num_features, 2, backbone=arch, hidden_channels=8, num_layers=2)
    spec = resolve_sensitive_feature(graph, "gender")
    alts = alternatives(graph, spec)
    assert _outputs_move(model, graph, spec)
    slices = find_input_slices(model, graph.x, graph.edge_index, spec.columns, alts)
    assert slices is not None and slices.columns == tuple(spec.columns)
    assert all(name.startswith(("convs.0.", "layers.0.")) or ".0." in name for name in slices.names)
    before = copy.deepcopy(model.state_dict())
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # not modified
    zero_input_slices(model, slices)
    assert not _outputs_move(model, graph, spec)
    assert is_blind(model, graph.x, graph.edge_index, spec.columns, alts)
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert sorted(changed) == sorted(slices.names)


def test_a_later_layer_as_wide_as_the_input_is_left_alone(graph):
    torch.manual_seed(0)
    width = graph.num_features  # the hidden layer's weight is (F, F): also a candidate
    model = NodeClassifier(
        graph.num_features, 2, backbone="gcn", hidden_channels=width, num_layers=3
    )
    spec = resolve_sensitive_feature(graph, "gender")
    candidates = [n for n, p in model.named_parameters() if p.dim() == 2 and p.shape[-1] == width]
    assert len(candidates) >= 2
    slices = find_input_slices(
        model, graph.x, graph.edge_index, spec.columns, alternatives(graph, spec)
    )
    assert slices is not None and len(slices.names) == 1 and slices.names[0] == candidates[0]


class SquaredInput(nn.Module):
    """Reads the attribute through a non-linearity before any weight: cannot be blinded."""

    def __init__(self, n_features: int, col: int) -> None:
        super().__init__()
        self.col = col
        self.lin = nn.Linear(n_features + 1, 2)

    def forward(self, x, edge_index):
        return self.lin(torch.cat([x, 3.0 * x[:, [self.col]] ** 2], dim=1))


def test_a_model_without_input_slices_is_refused(graph):
    spec = resolve_sensitive_feature(graph, "gender")
    model = SquaredInput(graph.num_features, spec.columns[0])
    assert find_input_slices(model, graph.x, graph.edge_index, spec.columns, alternatives(graph, spec)) is None  # fmt: skip
    with pytest.raises(InvalidInputError, match="blind=True.*SquaredInput.*'gender'.*blind=False"):
        FairFinetune(model, graph, "gender", blind=True)
    assert blind_modes("auto", ("cf", "dsp"), model, graph, "gender") == [False]
    with pytest.raises(InvalidInputError, match="blind must be 'auto', True or False, got 'yes'"):
        blind_modes("yes", ("cf",), model, graph, "gender")
    with pytest.raises(InvalidInputError, match="blind must be True or False, got 1"):
        FairFinetune(model, graph, "gender", blind=1)


@pytest.fixture(scope="module")
def trained(graph):
    model, _ = train_node_classifier(graph, "gcn", max_epochs=60, seed=0, num_layers=2)
    return model


def test_blind_modes(graph, trained):
    assert blind_modes("auto", ("cf", "dsp", "deo"), trained, graph, "gender") == [True, False]
    assert blind_modes("auto", ("dsp", "deo"), trained, graph, "gender") == [False]
    assert blind_modes(True, ("dsp",), trained, graph, "gender") == [True]
    assert blind_modes(False, ("cf",), trained, graph, "gender") == [False]


def test_blinded_training_keeps_the_slices_zero(graph, trained):
    model = copy.deepcopy(trained)
    spec = resolve_sensitive_feature(graph, "gender")
    wrapper = FairFinetune(model, graph, "gender", blind=True, lr=0.05, weight_decay=1e-3)
    assert wrapper.lambda_cf == 0.0 and wrapper.node_batches == []  # the term is 0: not run
    before = copy.deepcopy(model.state_dict())
    with quiet_lightning(False):
        trainer = make_trainer(5, limit_val_batches=0)
        model.train()
        trainer.fit(wrapper, datamodule=GraphDataModule(graph, seed=0))
    params = dict(model.named_parameters())
    for name in wrapper.input_slices.names:
        assert torch.count_nonzero(params[name][:, list(spec.columns)]) == 0
        others = [c for c in range(graph.num_features) if c not in spec.columns]
        assert not torch.equal(params[name][:, others], before[name][:, others])  # trained
    assert not _outputs_move(model, graph, spec)
    assert "consistency_loss" not in trainer.callback_metrics


def test_default_finetune_blinds_a_gcn_and_cf_is_zero(graph, trained):
    spec = resolve_sensitive_feature(graph, "gender")
    assert _outputs_move(copy.deepcopy(trained), graph, spec)
    assert validation_metrics(trained, graph, spec, graph.test_mask)["val_cf"] > 0.02
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # 75 validation nodes: a paired AUROC error of ~0.03, so a budget above the default's
        tuned = FairFinetune.finetune(
            trained, graph, "gender", epochs=30, random_state=0, max_auroc_drop=0.06
        )
    table = tuned.selection_
    chosen = str(table.loc[table["chosen"], "candidate"].iloc[0])
    assert chosen.startswith("blind ")
    names = table["candidate"].iloc[1:]
    assert names.str.startswith("blind ").all()  # a blinded candidate chosen: one round
    assert not _outputs_move(tuned, graph, spec)
    # the oracle: predictions on the test nodes do not change when every node's gender flips
    with torch.no_grad():
        a = tuned(graph.x, graph.edge_index).argmax(1)
        b = tuned(_flip_all(graph, spec), graph.edge_index).argmax(1)
    assert torch.equal(a[graph.test_mask], b[graph.test_mask])
    assert np.isclose(float(table.loc[table["chosen"], "val_cf"].iloc[0]), 0.0)
    # blind=False: the consistency runs only, as before
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = FairFinetune.finetune(
            trained, graph, "gender", epochs=30, random_state=0, blind=False
        )
    assert not plain.selection_["candidate"].str.startswith("blind").any()


def test_auto_falls_back_to_consistency_when_blinding_costs_auroc():
    """A label that leans hard on the attribute (bias 3): every blinded candidate loses more
    than the AUROC budget on validation, so the consistency runs follow and one is chosen."""
    graph = synthetic_credit_graph(num_nodes=300, bias=3.0, seed=1)
    model, _ = train_node_classifier(graph, "gcn", max_epochs=60, seed=0, num_layers=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tuned = FairFinetune.finetune(model, graph, "gender", epochs=30, random_state=0)
    table = tuned.selection_
    blind = table["candidate"].str.startswith("blind ")
    assert blind.sum() == (len(table) - 1) / 2  # both rounds ran, the same grid each
    assert not table.loc[blind, "within_budget"].any()
    chosen = table[table["chosen"]].iloc[0]
    assert not chosen["candidate"].startswith("blind") and chosen["within_budget"]
