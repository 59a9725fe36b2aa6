"""FairFinetune: counterfactual-consistency fine-tuning (issue 15)."""

from __future__ import annotations

import copy
import logging

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GCNConv

from gnnaudit.audit.model_adapter import ModelAdapter, trained_module
from gnnaudit.audit.search.results import GlobalEvidence
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError
from gnnaudit.training import FairFinetune, NodeClassifier, train_node_classifier
from gnnaudit.training.data_module import GraphDataModule
from gnnaudit.training.fair_finetune import (
    consistency_divergence,
    resolve_sensitive_feature,
    sensitive_evidence_pairs,
)
from gnnaudit.training.train import TrainResult, make_trainer, quiet_lightning

GENDER = 10


class OwnGCN(nn.Module):
    """A user's own module (not a LightningModule); ``blind`` zeroes the gender column."""

    def __init__(self, d: int, blind: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.c1, self.c2 = GCNConv(d, 16), GCNConv(16, 2)
        self.blind, self.dropout = blind, dropout
        keep = torch.ones(d)
        if blind:
            keep[GENDER] = 0.0
        self.register_buffer("keep", keep)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.c1(x * self.keep, edge_index))
        h = F.dropout(h, p=self.dropout, training=self.training)
        return self.c2(h, edge_index)


@pytest.fixture(scope="module")
def graph():
    logging.getLogger("lightning").setLevel(logging.ERROR)
    return synthetic_credit_graph(num_nodes=160, bias=3.0, seed=4)


@pytest.fixture(scope="module")
def trained(graph):
    module, _ = train_node_classifier(graph, "sage", max_epochs=40, seed=0, num_layers=2)
    return module


def _same_state(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_lambda_zero_equals_plain_lightning_finetuning(graph, trained):
    # only the consistency term targeted, its weight 0, no selection: plain fine-tuning
    tuned = FairFinetune.finetune(
        trained,
        graph,
        "gender",
        targets="cf",
        lambda_cf=0.0,
        epochs=7,
        lr=0.02,
        random_state=3,
        select=False,
    )
    # plain fine-tuning of the NodeClassifier by its own training_step, same Trainer and seed
    plain = copy.deepcopy(trained)
    plain.hparams["lr"] = 0.02
    with quiet_lightning(False):
        L.seed_everything(3, workers=True, verbose=False)
        trainer = make_trainer(7, limit_val_batches=0)
        plain.train()
        trainer.fit(plain, datamodule=GraphDataModule(graph, seed=3))
    assert _same_state(tuned, plain.eval())
    assert not _same_state(tuned, trained)  # it did train


def test_lambda_zero_equals_hand_written_adam_loop(graph):
    torch.manual_seed(0)
    model = OwnGCN(graph.x.size(1))
    tuned = FairFinetune.finetune(
        model,
        graph,
        GENDER,
        lambda_cf=0.0,
        lambda_ev=0.0,
        lambda_cov=0.0,
        lambda_eo=0.0,
        epochs=5,
        lr=0.01,
        weight_decay=1e-3,
        select=False,
    )
    oracle = copy.deepcopy(model)
    opt = torch.optim.Adam(oracle.parameters(), lr=0.01, weight_decay=1e-3)
    for _ in range(5):
        opt.zero_grad()
        out = oracle(graph.x, graph.edge_index)
        F.cross_entropy(out[graph.train_mask], graph.y[graph.train_mask]).backward()
        opt.step()
    for (k, a), b in zip(tuned.state_dict().items(), oracle.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=k)


def test_original_model_is_never_modified(graph, trained):
    before = copy.deepcopy(trained.state_dict())
    trained.train()
    tuned = FairFinetune.finetune(trained, graph, "gender", lambda_cf=2.0, epochs=3, select=False)
    assert tuned is not trained and not tuned.training
    assert trained.training  # its mode is left as it was
    trained.eval()
    for k, v in trained.state_dict().items():
        assert torch.equal(v, before[k])
    assert not _same_state(tuned, trained)


def test_consistency_is_zero_for_a_model_that_ignores_the_attribute(graph):
    torch.manual_seed(1)
    blind = OwnGCN(graph.x.size(1), blind=True, dropout=0.5)
    wrapper = FairFinetune(blind, graph, "gender", targets="cf", lambda_cf=1.0, num_hops=2)
    blind.eval()
    logits = blind(graph.x, graph.edge_index)
    for step in range(3):
        assert (
            float(wrapper.consistency_loss(graph.x, graph.edge_index, logits, step).detach()) == 0.0
        )
    # in training mode, dropout included: the step's loss is exactly the task loss
    blind.train()
    torch.manual_seed(7)
    loss = wrapper.training_step(graph, 0)
    torch.manual_seed(7)
    out = blind(graph.x, graph.edge_index)
    task = F.cross_entropy(out[graph.train_mask], graph.y[graph.train_mask])
    assert float(loss) == pytest.approx(float(task), abs=1e-7)
    # a model that reads the attribute has a positive consistency loss
    torch.manual_seed(1)
    sighted = OwnGCN(graph.x.size(1)).eval()
    wrapper = FairFinetune(sighted, graph, "gender", targets="cf", lambda_cf=1.0, num_hops=2)
    out = sighted(graph.x, graph.edge_index)
    assert float(wrapper.consistency_loss(graph.x, graph.edge_index, out, 0)) > 0.0


def test_node_scope_term_equals_one_node_at_a_time(graph):
    torch.manual_seed(2)
    model = OwnGCN(graph.x.size(1)).eval()
    wrapper = FairFinetune(model, graph, "gender", scopes=("node",), num_hops=2)
    x, ei = graph.x, graph.edge_index
    with torch.no_grad():
        base = model(x, ei)
        for step in range(3):
            batch = wrapper.node_batches[step % len(wrapper.node_batches)]
            oracle = []
            for v in batch:  # brute force: flip node v alone
                x_cf = x.clone()
                x_cf[v, GENDER] = 1.0 - x_cf[v, GENDER]
                oracle.append(consistency_divergence(base[[v]], model(x_cf, ei)[[v]]))
            got = wrapper.consistency_loss(x, ei, base, step)
            assert float(got) == pytest.approx(float(torch.cat(oracle).mean()), rel=1e-5)


def test_graph_scope_term_and_divergences(graph):
    torch.manual_seed(3)
    model = OwnGCN(graph.x.size(1)).eval()
    x, ei = graph.x, graph.edge_index
    x_cf = x.clone()
    x_cf[:, GENDER] = 1.0 - x_cf[:, GENDER]
    with torch.no_grad():
        a, b = model(x, ei), model(x_cf, ei)
        for div in ("sym_kl", "logit_l2"):
            wrapper = FairFinetune(model, graph, "gender", scopes=("graph",), divergence=div)
            got = float(wrapper.consistency_loss(x, ei, a, 0))
            assert got == pytest.approx(float(consistency_divergence(a, b, div).mean()), rel=1e-6)
    # symmetric KL by its definition, row by row
    p, q = a.softmax(1).double(), b.softmax(1).double()
    kl = 0.5 * ((p * (p / q).log()).sum(1) + (q * (q / p).log()).sum(1))
    torch.testing.assert_close(consistency_divergence(a, b).double(), kl, rtol=1e-4, atol=1e-7)


def test_mitigation_lowers_the_dependence_of_a_users_module(graph):
    torch.manual_seed(0)
    model = OwnGCN(graph.x.size(1))
    # plain training first (no term, no selection), then the consistency term alone
    plain = {"targets": "cf", "select": False}
    model = FairFinetune.finetune(model, graph, GENDER, lambda_cf=0.0, epochs=100, lr=0.02, **plain)
    tuned = FairFinetune.finetune(model, graph, GENDER, lambda_cf=4.0, epochs=40, lr=0.01, **plain)
    x_cf = graph.x.clone()
    x_cf[:, GENDER] = 1.0 - x_cf[:, GENDER]

    def gap(m: nn.Module) -> float:
        with torch.no_grad():
            a, b = m(graph.x, graph.edge_index), m(x_cf, graph.edge_index)
        return float(consistency_divergence(a, b).mean())

    assert gap(tuned) < 0.25 * gap(model)


def test_deterministic_for_a_seed(graph, trained):
    a = FairFinetune.finetune(trained, graph, "gender", epochs=4, random_state=5)
    b = FairFinetune.finetune(trained, graph, "gender", epochs=4, random_state=5)
    assert _same_state(a, b)


def test_the_trainers_result_is_taken_as_its_module(graph, trained):
    """``train_node_classifier`` returns a ``(module, metrics)`` pair: ``finetune``, the
    constructor and the audit take the pair as its module (the same weights, the same result)."""
    pair = TrainResult(trained, {"val_auroc": 0.5})
    a = FairFinetune.finetune(trained, graph, "gender", epochs=4, random_state=5)
    b = FairFinetune.finetune(pair, graph, "gender", epochs=4, random_state=5)
    assert _same_state(a, b)
    assert FairFinetune(pair, graph, "gender").model is trained
    assert ModelAdapter(pair).model is trained
    plain = (trained, {})
    assert trained_module(plain) is plain  # a plain tuple is not a trainer's result
    with pytest.raises(InvalidInputError, match="got tuple"):
        FairFinetune.finetune((trained, {}), graph, "gender", epochs=1)


def test_the_attribute_as_a_vector_of_the_nodes(graph):
    """A vector of one value per node that is a column of ``x`` (as is, or relabelled) is that
    column; one that is no column, and a graph whose own attribute is no column, are refused
    with the reason."""
    spec = resolve_sensitive_feature(graph, "gender")
    column = graph.x[:, GENDER]
    assert resolve_sensitive_feature(graph, column).columns == spec.columns
    labels = np.where(column.numpy() > 0, "F", "M")
    assert resolve_sensitive_feature(graph, pd.Series(labels)).columns == spec.columns
    assert resolve_sensitive_feature(graph, None).columns == spec.columns  # data.sensitive_name
    unnamed = graph.clone()
    del unnamed.feature_names, unnamed.sensitive_name
    unnamed.sensitive = column.long()  # no names: found by its values
    assert resolve_sensitive_feature(unnamed, None).columns == spec.columns
    other = np.arange(graph.num_nodes) % 3
    with pytest.raises(InvalidInputError, match="not a column of data.x"):
        resolve_sensitive_feature(graph, other)
    unnamed.sensitive = torch.as_tensor(other)
    with pytest.raises(InvalidInputError, match="the data's own attribute .* not a column"):
        resolve_sensitive_feature(unnamed, None)


def test_evidence_pairs_screen_by_sensitive_share():
    data = synthetic_credit_graph(num_nodes=60, seed=0)
    spec = resolve_sensitive_feature(data, None)
    x = data.x.clone()
    x[1] = x[0]
    x[1, GENDER] = 1.0 - x[0, GENDER]  # differs only in gender
    x[3] = x[2]
    x[3, 1] += 5.0  # differs only in income
    x[5] = x[4]  # identical: gender equal
    x[7] = x[6]
    x[7, GENDER] = 1.0 - x[6, GENDER]
    x[7, 1] += 50.0  # gender differs but income dominates
    data.x = x
    u = np.array([0, 2, 4, 6])
    v = np.array([1, 3, 5, 7])
    pairs = GlobalEvidence(u, v, np.ones(4), np.zeros(4, int), np.ones(4, int))
    kept = sensitive_evidence_pairs(data, pairs, spec, min_share=0.5)
    assert kept.tolist() == [[0, 1]]
    assert sensitive_evidence_pairs(data, pairs, spec, min_share=0.0).tolist() == [[0, 1], [6, 7]]


def test_evidence_term_pulls_pairs_together(graph, trained):
    frame = pd.DataFrame({"node_u": [0, 2], "node_v": [1, 3], "similarity": [0.9, 0.8]})
    x = graph.x.clone()
    x[1] = x[0]
    x[1, GENDER] = 1.0 - x[0, GENDER]
    data = graph.clone()
    data.x = x
    wrapper = FairFinetune(trained, data, "gender", lambda_cf=0.0, lambda_ev=1.0, evidence=frame)
    assert wrapper.ev_pairs.tolist() == [[0, 1]]
    logits = trained.eval()(data.x, data.edge_index)
    expected = consistency_divergence(logits[[0]], logits[[1]]).mean()
    assert float(wrapper.evidence_loss(logits)) == pytest.approx(float(expected))


class _NoMessagePassing(nn.Module):
    """Called as model(x, edge_index) but without a MessagePassing layer: no receptive field."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(11, 2)

    def forward(self, x, edge_index):
        return self.lin(x)


def test_bad_input_is_refused(graph, trained):
    with pytest.raises(InvalidInputError, match="lambda_cf"):
        FairFinetune.finetune(trained, graph, "gender", lambda_cf=-1.0)
    with pytest.raises(InvalidInputError, match="sensitive"):
        FairFinetune.finetune(trained, graph, "religion")
    with pytest.raises(InvalidInputError, match="nn.Module"):
        FairFinetune.finetune(lambda x, e: x, graph, "gender")
    with pytest.raises(InvalidInputError, match="scopes"):
        FairFinetune(trained, graph, "gender", scopes=("world",))
    with pytest.raises(InvalidInputError, match=r"model\(x, edge_index\).*Linear"):
        FairFinetune(nn.Linear(11, 2), graph, "gender")
    with pytest.raises(InvalidInputError, match="num_hops"):
        FairFinetune(_NoMessagePassing(), graph, "gender")
    with pytest.raises(InvalidInputError, match="epochs"):
        FairFinetune.finetune(trained, graph, "gender", epochs=0)
    with pytest.raises(InvalidInputError, match="unexpected keyword"):
        FairFinetune.finetune(trained, graph, "gender", learning_rate=0.1)
    assert isinstance(trained, NodeClassifier)
