"""Literature metrics (gnnaudit.audit.fairness.literature_metrics) against brute-force oracles,
NIFTY's own formulas and gnnaudit's graph-scope flip rate."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv

from gnnaudit.audit import counterfactual_flip
from gnnaudit.audit.fairness.literature_metrics import (
    METRICS,
    auroc,
    binary_outputs,
    counterfactual_unfairness,
    equal_opportunity_difference,
    f1,
    instability,
    literature_metrics,
    statistical_parity_difference,
)
from gnnaudit.errors import InvalidInputError


# ---------------------------------------------------------------- brute-force oracles
def _sp_oracle(pred: list[int], sens: list[int]) -> float:
    g0 = [p for p, s in zip(pred, sens, strict=True) if s == 0]
    g1 = [p for p, s in zip(pred, sens, strict=True) if s == 1]
    return abs(sum(g0) / len(g0) - sum(g1) / len(g1))


def _auc_oracle(y: list[int], score: list[float]) -> float:
    pos = [s for s, t in zip(score, y, strict=True) if t == 1]
    neg = [s for s, t in zip(score, y, strict=True) if t == 0]
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def _f1_oracle(y: list[int], pred: list[int]) -> float:
    tp = sum(1 for t, p in zip(y, pred, strict=True) if t == p == 1)
    fp = sum(1 for t, p in zip(y, pred, strict=True) if t == 0 and p == 1)
    fn = sum(1 for t, p in zip(y, pred, strict=True) if t == 1 and p == 0)
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


bits = st.lists(st.integers(0, 1), min_size=4, max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_group_metrics_match_oracles(data: st.DataObject) -> None:
    n = data.draw(st.integers(4, 40))
    pred = data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    y = data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    sens = data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    score = data.draw(st.lists(st.floats(-3, 3), min_size=n, max_size=n))
    if 0 in sens and 1 in sens:
        assert statistical_parity_difference(pred, sens) == pytest.approx(_sp_oracle(pred, sens))
    pos = [i for i in range(n) if y[i] == 1]
    if {sens[i] for i in pos} == {0, 1}:
        eo = _sp_oracle([pred[i] for i in pos], [sens[i] for i in pos])
        assert equal_opportunity_difference(pred, y, sens) == pytest.approx(eo)
    assert f1(y, pred) == pytest.approx(_f1_oracle(y, pred))
    if 0 in y and 1 in y:
        assert auroc(y, score) == pytest.approx(_auc_oracle(y, score))


def test_pinned_values() -> None:
    pred, y, s = [1, 1, 0, 0, 1, 0], [1, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1]
    assert statistical_parity_difference(pred, s) == pytest.approx(2 / 3 - 1 / 3)
    assert equal_opportunity_difference(pred, y, s) == pytest.approx(abs(1 / 2 - 1 / 2))
    assert auroc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)


def test_binary_outputs_one_and_two_columns() -> None:
    z1 = torch.tensor([[-1.0], [2.0], [0.0]])
    pred, score = binary_outputs(z1)
    assert pred.tolist() == [0, 1, 0] and score.tolist() == [-1.0, 2.0, 0.0]
    z2 = torch.tensor([[1.0, 0.0], [0.0, 3.0]])
    pred, score = binary_outputs(z2)
    assert pred.tolist() == [0, 1] and score.tolist() == [-1.0, 3.0]
    with pytest.raises(InvalidInputError, match="binary task"):
        binary_outputs(torch.zeros(3, 3))
    with pytest.raises(InvalidInputError, match="NaN"):
        binary_outputs(torch.tensor([float("nan")]))


def test_bad_inputs_raise() -> None:
    with pytest.raises(InvalidInputError, match="s = 1"):
        statistical_parity_difference([1, 0], [0, 0])
    with pytest.raises(InvalidInputError, match="only 0 and 1"):
        statistical_parity_difference([2, 0], [0, 1])
    with pytest.raises(InvalidInputError, match="same length"):
        f1([0, 1], [0, 1, 1])
    with pytest.raises(InvalidInputError, match="both classes"):
        auroc([1, 1], [0.2, 0.3])


# ---------------------------------------------------------------- models on a graph
class _GCN(nn.Module):
    """A GCN written outside gnnaudit (plain PyG)."""

    def __init__(self, d: int, out: int = 2) -> None:
        super().__init__()
        self.c1, self.c2 = GCNConv(d, 16), GCNConv(16, out)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.c2(F.relu(self.c1(x, edge_index)), edge_index)


def _graph(n: int = 120, seed: int = 0) -> Data:
    g = torch.Generator().manual_seed(seed)
    s = (torch.rand(n, generator=g) < 0.5).float()
    x = torch.cat([s[:, None], torch.randn(n, 4, generator=g)], dim=1)
    y = ((x[:, 1] + 1.5 * s + 0.3 * torch.randn(n, generator=g)) > 0.7).long()
    src = torch.randint(0, n, (3 * n,), generator=g)
    dst = torch.randint(0, n, (3 * n,), generator=g)
    keep = src != dst
    ei = torch.stack([torch.cat([src[keep], dst[keep]]), torch.cat([dst[keep], src[keep]])])
    test = torch.zeros(n, dtype=torch.bool)
    test[n // 2 :] = True
    return Data(
        x=x,
        y=y,
        edge_index=ei,
        test_mask=test,
        train_mask=~test,
        sensitive=s.long(),
        feature_names=["s", "a", "b", "c", "d"],
    )


def _trained(data: Data, out: int = 2, seed: int = 0) -> _GCN:
    torch.manual_seed(seed)
    model = _GCN(data.x.size(1), out)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(60):
        opt.zero_grad()
        z = model(data.x, data.edge_index)[data.train_mask]
        if out == 1:
            loss = F.binary_cross_entropy_with_logits(z[:, 0], data.y[data.train_mask].float())
        else:
            loss = F.cross_entropy(z, data.y[data.train_mask])
        loss.backward()
        opt.step()
    return model.eval()


def _nifty_formula(model: nn.Module, x: torch.Tensor, ei: torch.Tensor, idx_test: torch.Tensor):
    """NIFTY's nifty_sota_gnn.py evaluation, transcribed (argmax for a two-column head)."""
    with torch.no_grad():
        output_preds = model(x, ei).argmax(1)
        counter_features = x.clone()
        counter_features[:, 0] = 1 - counter_features[:, 0]
        counter_preds = model(counter_features, ei).argmax(1)
    return 1 - (output_preds.eq(counter_preds)[idx_test].sum().item() / idx_test.shape[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_counterfactual_unfairness_is_nifty_and_graph_flip(seed: int) -> None:
    data = _graph(seed=seed)
    model = _trained(data, seed=seed)
    idx_test = data.test_mask.nonzero().flatten()
    ours = counterfactual_unfairness(model, data.x, data.edge_index, 0, idx_test)
    assert ours == pytest.approx(_nifty_formula(model, data.x, data.edge_index, idx_test))
    flip = counterfactual_flip(model, data, "s", mask=data.test_mask, scope="graph", n_boot=10)
    assert ours == pytest.approx(flip.rate)
    assert ours == pytest.approx(
        counterfactual_unfairness(model, data.x, data.edge_index, 0, data.test_mask)
    )


def test_counterfactual_unfairness_is_nonzero_for_a_model_that_uses_s() -> None:
    data = _graph(seed=3)

    def uses_s(x: torch.Tensor, ei: torch.Tensor) -> torch.Tensor:
        return (x[:, 0] - 0.5)[:, None]

    assert counterfactual_unfairness(uses_s, data.x, data.edge_index, 0, data.test_mask) == 1.0
    with pytest.raises(InvalidInputError, match="only 0 and 1"):
        counterfactual_unfairness(uses_s, data.x, data.edge_index, 1, data.test_mask)


def test_instability_matches_direct_noise_and_is_seeded() -> None:
    data = _graph(seed=4)
    model = _trained(data, out=1, seed=4)
    idx = data.test_mask.nonzero().flatten()
    noise = torch.randn(tuple(data.x.shape), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        base = model(data.x, data.edge_index)[:, 0] > 0
        noisy = model(data.x + noise, data.edge_index)[:, 0] > 0
    direct = 1 - base.eq(noisy)[idx].float().mean().item()
    ours = instability(model, data.x, data.edge_index, idx, random_state=7)
    assert ours == pytest.approx(direct)
    assert ours == instability(model, data.x, data.edge_index, idx, random_state=7)
    assert instability(model, data.x, data.edge_index, idx, noise_std=0.0) == 0.0


def test_literature_metrics_dict_and_mode_restored() -> None:
    data = _graph(seed=5)
    model = _trained(data, seed=5).train()
    out = literature_metrics(
        model, data.x, data.edge_index, data.y, data.sensitive, 0, data.test_mask
    )
    assert tuple(out) == METRICS and model.training
    assert all(0.0 <= v <= 1.0 for v in out.values())
    with torch.no_grad():
        pred = model.eval()(data.x, data.edge_index).argmax(1).numpy()
    t = data.test_mask.numpy()
    assert out["dsp"] == pytest.approx(
        statistical_parity_difference(pred[t], data.sensitive.numpy()[t])
    )
    assert np.isclose(
        out["cf"], counterfactual_unfairness(model, data.x, data.edge_index, 0, data.test_mask)
    )
    with pytest.raises(InvalidInputError, match="nodes"):
        literature_metrics(model, data.x, data.edge_index, data.y, data.sensitive, 0, [999])


BAIL = "/work/shared/datasets/nifty/bail/bail.csv"


@pytest.mark.skipif(not os.path.exists(BAIL), reason="NIFTY's bail.csv is not available")
def test_bail_gcn_counterfactual_unfairness_is_graph_flip(tmp_path) -> None:
    """The issue's check on the real graph: a GCN trained outside gnnaudit on bail."""
    from gnnaudit.datasets import load_nifty

    root = tmp_path / "nifty"
    (root / "bail").mkdir(parents=True)
    shutil.copy(BAIL, root / "bail" / "bail.csv")
    data = load_nifty("bail", root, split="nifty")
    col = int(data.sensitive_index)
    model = _GCN(data.x.size(1))
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(5):  # a pass costs 0.1 s on bail; after 5 epochs 3.9% of the test nodes flip
        opt.zero_grad()
        z = model(data.x, data.edge_index)[data.train_mask]
        F.cross_entropy(z, data.y[data.train_mask]).backward()
        opt.step()
    model.eval()
    idx_test = data.test_mask.nonzero().flatten()
    with torch.no_grad():
        output_preds = model(data.x, data.edge_index).argmax(1)
        counter_features = data.x.clone()
        counter_features[:, col] = 1 - counter_features[:, col]
        counter_preds = model(counter_features, data.edge_index).argmax(1)
    nifty = 1 - (output_preds.eq(counter_preds)[idx_test].sum().item() / idx_test.shape[0])
    ours = counterfactual_unfairness(model, data.x, data.edge_index, col, idx_test)
    flip = counterfactual_flip(model, data, col, mask=data.test_mask, scope="graph", n_boot=10)
    assert ours == pytest.approx(nifty) and flip.rate == pytest.approx(nifty)
    assert nifty > 0  # the check is not vacuous
