"""The anchored parity surrogate of FairFinetune's covariance terms (issue 36): the soft
decisions at the threshold the candidates are decided at."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from gnnaudit.errors import InvalidInputError
from gnnaudit.training import FairFinetune
from gnnaudit.training.decision_offset import margins, rate_offset
from gnnaudit.training.fair_losses import covariance_of
from gnnaudit.training.fair_selection import label_free_nodes
from gnnaudit.training.parity_surrogate import (
    SHARPNESS,
    ParitySurrogate,
    decision_parity,
    resolve_parity,
)


class _Linear(nn.Module):
    def __init__(self, n_in: int, classes: int = 2) -> None:
        super().__init__()
        self.lin = nn.Linear(n_in, classes)

    def forward(self, x, edge_index):
        return self.lin(x)


def _oracle_scores(margin: np.ndarray, free: np.ndarray, rate: float | None) -> np.ndarray:
    """Brute force of the module docstring: tau from the sorted free margins, the sample
    standard deviation over the free nodes, the logistic of the scaled distance."""
    on_free = np.sort(margin[free])
    n = on_free.size
    k = None if rate is None else int(round(rate * n))
    if k is None:
        tau = 0.0
    elif k == 0:
        tau = on_free[-1] + 1.0
    elif k == n:
        tau = on_free[0] - 1.0
    else:
        tau = (on_free[n - k - 1] + on_free[n - k]) / 2
    sd = np.std(on_free, ddof=1)
    return 1.0 / (1.0 + np.exp(-SHARPNESS * (margin - tau) / sd))


@pytest.mark.parametrize("parity", ["rate", "argmax"])
def test_scores_match_the_brute_force_oracle(fair_graph, fair_gcn, parity):
    surrogate = ParitySurrogate(fair_gcn, fair_graph, parity)
    logits = fair_gcn.eval()(fair_graph.x, fair_graph.edge_index).detach()
    free = label_free_nodes(fair_graph)
    m = (logits[:, 1] - logits[:, 0]).numpy().astype(np.float64)
    rate = float((m[free] > 0).mean()) if parity == "rate" else None
    assert surrogate.rate == (pytest.approx(rate) if rate is not None else None)
    got = surrogate(logits).squeeze(1).numpy()
    np.testing.assert_allclose(got, _oracle_scores(m, free, rate), rtol=1e-4, atol=1e-5)


def test_rate_anchor_keeps_the_share_of_the_model_as_given(fair_graph, fair_gcn):
    surrogate = ParitySurrogate(fair_gcn, fair_graph, "rate")
    logits = fair_gcn.eval()(fair_graph.x, fair_graph.edge_index).detach()
    free = torch.from_numpy(label_free_nodes(fair_graph))
    # the model as given decides exactly its own share at the threshold: scores > 1/2 there
    decided = (surrogate(logits).squeeze(1) > 0.5)[free].float().mean()
    assert float(decided) == pytest.approx(surrogate.rate, abs=1.0 / int(free.sum()))


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.floats(-20.0, 20.0),
    st.floats(0.05, 20.0),
)
def test_rate_term_ignores_a_common_shift_and_scale_of_the_margins(seed, shift, scale):
    """What the softmax term rewards (every score on one side) does not lower the anchored
    term: a constant added to every margin, or a common scale, leaves it unchanged."""
    rng = np.random.default_rng(seed)
    n = 60
    s = torch.from_numpy(rng.integers(0, 2, (n, 1))).float()
    logits = torch.from_numpy(rng.normal(0, 2, (n, 2)) + s.numpy() * [0.0, 1.0]).float()
    surrogate = ParitySurrogate.__new__(ParitySurrogate)
    surrogate.parity, surrogate.rate = "rate", 0.4
    surrogate.free = torch.arange(n)
    base = float(covariance_of(surrogate(logits), s))
    moved = logits.clone()
    moved[:, 1] = logits[:, 0] + scale * (logits[:, 1] - logits[:, 0]) + shift
    assert float(covariance_of(surrogate(moved), s)) == pytest.approx(base, rel=1e-3, abs=1e-5)


def test_softmax_term_falls_when_every_score_moves_to_one_side(fair_graph, fair_gcn):
    """The loophole the anchor closes: the softmax covariance of the same ranking falls as
    every margin is pushed up, the anchored one does not."""
    logits = fair_gcn.eval()(fair_graph.x, fair_graph.edge_index).detach()
    s = fair_graph.x[:, [int(fair_graph.sensitive_index)]].float()
    shifted = logits.clone()
    shifted[:, 1] += 8.0
    soft = ParitySurrogate(fair_gcn, fair_graph, "softmax")
    rate = ParitySurrogate(fair_gcn, fair_graph, "rate")
    assert float(covariance_of(soft(shifted), s)) < 0.2 * float(covariance_of(soft(logits), s))
    assert float(covariance_of(rate(shifted), s)) == pytest.approx(
        float(covariance_of(rate(logits), s)), rel=1e-4
    )


def test_parity_choice_resolution(fair_graph, fair_gcn):
    assert resolve_parity("auto", 2) == "rate"
    assert resolve_parity("auto", 3) == "softmax"
    assert resolve_parity("softmax", 5) == "softmax"
    with pytest.raises(InvalidInputError, match="parity='rate'.*3 output classes"):
        resolve_parity("rate", 3)
    with pytest.raises(InvalidInputError, match="parity"):
        resolve_parity("hard", 2)
    # the default is FairGNN's softmax form (measured: parity_surrogate's docstring)
    assert FairFinetune(fair_gcn, fair_graph, "gender").parity.parity == "softmax"
    assert FairFinetune(fair_gcn, fair_graph, "gender", parity="auto").parity.parity == "rate"
    assert decision_parity("auto", True, fair_gcn, fair_graph) == "rate"
    assert decision_parity("auto", False, fair_gcn, fair_graph) == "argmax"
    assert decision_parity("softmax", True, fair_gcn, fair_graph) == "softmax"
    torch.manual_seed(0)
    three = _Linear(fair_graph.num_features, classes=3)
    assert decision_parity("auto", True, three, fair_graph) == "softmax"
    with pytest.raises(InvalidInputError, match="parity"):
        FairFinetune(three, fair_graph, "gender", parity="argmax")


def test_blinding_keeps_the_rate_of_the_model_as_given(fair_graph, fair_gcn):
    plain = FairFinetune(fair_gcn, fair_graph, "gender", parity="rate")
    blinded = FairFinetune(copy.deepcopy(fair_gcn), fair_graph, "gender", blind=True, parity="rate")
    m = margins(fair_gcn, fair_graph.x, fair_graph.edge_index).numpy()
    free = label_free_nodes(fair_graph)
    assert plain.parity.rate == blinded.parity.rate == pytest.approx(float((m[free] > 0).mean()))
    # and the threshold follows rate_offset's
    tau, _ = plain.parity.threshold(torch.from_numpy(m))
    assert float(tau) == pytest.approx(-rate_offset(m[free], plain.parity.rate), abs=1e-5)


def _gap_at_kept_rate(model, graph, rate: float) -> float:
    """ΔSP of the decisions at the threshold that keeps ``rate`` on the label-free nodes."""
    m = margins(model, graph.x, graph.edge_index).numpy()
    free = label_free_nodes(graph)
    decided = (m + rate_offset(m[free], rate)) > 0
    s = graph.x[:, int(graph.sensitive_index)].numpy() > 0.5
    return abs(decided[free & s].mean() - decided[free & ~s].mean())


@pytest.mark.filterwarnings("ignore::UserWarning")  # select=False: the runs as trained
def test_rate_term_lowers_the_gap_of_the_kept_rate_decisions(fair_graph, fair_gcn):
    """Trained with the anchored term, the decisions at the kept rate move towards parity;
    plain fine-tuning of the same length does not get there."""
    rate = ParitySurrogate(fair_gcn, fair_graph, "rate").rate
    common = {"targets": "dsp", "epochs": 40, "lr": 0.02, "random_state": 0, "select": False}
    plain = FairFinetune.finetune(fair_gcn, fair_graph, "gender", lambda_cov=0.0, **common)
    anchored = FairFinetune.finetune(
        fair_gcn, fair_graph, "gender", lambda_cov=50.0, parity="rate", **common
    )
    before = _gap_at_kept_rate(fair_gcn, fair_graph, rate)
    assert _gap_at_kept_rate(anchored, fair_graph, rate) < 0.5 * before
    assert _gap_at_kept_rate(plain, fair_graph, rate) > 0.7 * before
