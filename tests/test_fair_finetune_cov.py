"""FairFinetune's covariance term (FairGNN's covariance constraint, issue 24)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError
from gnnaudit.training import FairFinetune, train_node_classifier


@pytest.fixture(scope="module")
def graph():
    logging.getLogger("lightning").setLevel(logging.ERROR)
    return synthetic_credit_graph(num_nodes=160, bias=3.0, seed=4)


@pytest.fixture(scope="module")
def trained(graph):
    module, _ = train_node_classifier(graph, "gcn", max_epochs=40, seed=0, num_layers=2)
    return module


def _cov_oracle(s: np.ndarray, logits: np.ndarray) -> float:
    """Brute force: mean over classes c and sensitive columns j of |Cov(s_j, p_c)|."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    n, terms = s.shape[0], []
    for c in range(p.shape[1]):
        for j in range(s.shape[1]):
            acc = 0.0
            for v in range(n):
                acc += (s[v, j] - s[:, j].mean()) * (p[v, c] - p[:, c].mean())
            terms.append(abs(acc / n))
    return float(np.mean(terms))


def test_covariance_loss_matches_oracle(graph, trained):
    # FairGNN's term as published: the softmax probabilities (the default anchors them to the
    # decision threshold: tests/test_parity_surrogate.py)
    ff = FairFinetune(trained, graph, "gender", lambda_cf=0.0, lambda_cov=1.0, parity="softmax")
    with torch.no_grad():
        logits = trained.eval()(graph.x, graph.edge_index)
    s = graph.x[:, ff.spec.columns].numpy().astype(np.float64)
    got = float(ff.covariance_loss(logits))
    assert got == pytest.approx(_cov_oracle(s, logits.numpy().astype(np.float64)), rel=1e-4)
    assert got > 0
    # a prediction independent of s has zero covariance
    assert float(ff.covariance_loss(torch.zeros_like(logits))) == pytest.approx(0.0, abs=1e-7)


def _covariance(model, graph, ff) -> float:
    with torch.no_grad():
        return float(ff.covariance_loss(model.eval()(graph.x, graph.edge_index)))


def test_covariance_term_lowers_the_covariance(graph, trained):
    ff = FairFinetune(trained, graph, "gender", lambda_cf=0.0, lambda_cov=1.0)
    # the terms alone, no validation selection: only "dsp" targeted, lambda_eo stays 0
    plain = FairFinetune.finetune(
        trained,
        graph,
        "gender",
        targets="dsp",
        lambda_cov=0.0,
        epochs=40,
        lr=0.02,
        random_state=0,
        select=False,
    )
    cov = FairFinetune.finetune(
        trained,
        graph,
        "gender",
        targets="dsp",
        lambda_cov=50.0,
        epochs=40,
        lr=0.02,
        random_state=0,
        select=False,
    )
    assert _covariance(cov, graph, ff) < 0.5 * _covariance(plain, graph, ff)


def test_lambda_cov_is_zero_unless_dsp_is_targeted(graph, trained):
    # lambda_cov defaults to 0 when "dsp" is not targeted (DEFAULT_LAMBDA_COV when it is)
    only = {"targets": "cf", "lambda_cf": 0.0, "epochs": 5, "random_state": 1, "select": False}
    a = FairFinetune.finetune(trained, graph, "gender", **only)
    b = FairFinetune.finetune(trained, graph, "gender", lambda_cov=0.0, **only)
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_negative_lambda_cov_is_refused(graph, trained):
    with pytest.raises(InvalidInputError, match="lambda_cov"):
        FairFinetune(trained, graph, "gender", lambda_cov=-1.0)
