"""Numerics of the KS embedding and the evidence search: no NaN or inf from extreme but finite
input, exact rescaling, a named bound where the output itself cannot be represented."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import Data

from gnnaudit.audit import CounterfactualEvidence
from gnnaudit.audit.search.results import GlobalEvidence, LocalEvidence
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import ks_embedding
from gnnaudit.graph_ops.neighbourhood import (
    KSGraph,
    KSPropagation,
    ks_input_bound,
    rescale_rows,
)


def graph(n: int = 40, d: int = 5, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    x = torch.tensor(rng.normal(size=(n, d)))
    x[3] = 0.0  # a zero row
    return x, torch.tensor(rng.integers(0, n, size=(2, 4 * n)))


def cosines(t: torch.Tensor) -> torch.Tensor:
    """All pairwise cosines of the rows, computed safely in float64."""
    u = rescale_rows(t.to(torch.float64))
    norm = torch.linalg.vector_norm(u, dim=1, keepdim=True)
    u = torch.where(norm > 0, u / norm.clamp_min(1e-300), 0.0)
    return u @ u.T


@pytest.mark.parametrize(
    ("dtype", "scale", "atol"),
    [
        (torch.float32, 1e20, 1e-5),
        (torch.float32, 1e-30, 1e-5),
        (torch.float64, 1e200, 1e-12),
        (torch.float64, 1e-250, 1e-12),
    ],
)
def test_extreme_magnitudes_give_the_same_kernel_similarity(dtype, scale, atol):
    x, ei = graph()
    big = (x * scale).to(dtype)
    out = ks_embedding(big, ei)
    assert out.dtype == dtype and torch.isfinite(out).all()
    reference = ks_embedding(x.to(dtype), ei)
    torch.testing.assert_close(cosines(out), cosines(reference), rtol=0, atol=atol)
    # with the scale undone (in float64) the embedding itself agrees
    torch.testing.assert_close(
        out.to(torch.float64) / scale, reference.to(torch.float64), rtol=1e-5, atol=1e-300
    )


@pytest.mark.parametrize(
    ("dtype", "power"), [(torch.float32, 100), (torch.float32, -100), (torch.float64, 700)]
)
def test_rescaled_path_is_exact(dtype, power):
    # multiplying x by 2**power is exact and forces the rescaled cosine path: the output must
    # be the unscaled output times 2**power, bit for bit
    x, ei = graph(seed=1)
    x = x.to(dtype)
    factor = 2.0**power
    torch.testing.assert_close(
        ks_embedding(x * factor, ei, 3, 0.3), ks_embedding(x, ei, 3, 0.3) * factor, rtol=0, atol=0
    )


def test_output_overflow_is_rejected_with_the_bound():
    x, ei = graph(seed=2)
    x32 = x.to(torch.float32) / x.abs().max().float() * 3e38
    with pytest.raises(InvalidInputError, match=r"max \|x\| <= .*4\.25e\+37"):
        ks_embedding(x32, ei)  # num_hops=3: finfo(float32).max / 8
    assert ks_input_bound(torch.float32, 3) == pytest.approx(torch.finfo(torch.float32).max / 8)
    assert torch.isfinite(ks_embedding(x32, ei, num_hops=0)).all()  # bound max/2: accepted
    just_in = x.to(torch.float32) / x.abs().max().float() * ks_input_bound(torch.float32, 3)
    assert torch.isfinite(ks_embedding(just_in, ei)).all()
    half = (x / x.abs().max() * 2e4).to(torch.float16)
    with pytest.raises(InvalidInputError, match="float16"):
        ks_embedding(half, ei)
    assert torch.isfinite(ks_embedding(half, ei, num_hops=0)).all()


def test_rescale_rows():
    x = torch.tensor([[3e38, -1.0, 0.0], [0.0, 0.0, 0.0], [1e-40, 0.0, -2e-41], [0.75, 0.1, 0.0]])
    out = rescale_rows(x)
    row_max = out.abs().amax(dim=1)
    assert torch.equal(out[1], x[1])  # zero row
    assert ((row_max[[0, 2, 3]] >= 0.5) & (row_max[[0, 2, 3]] < 1)).all()
    torch.testing.assert_close(out[3], x[3], rtol=0, atol=0)  # already in range
    ratio = out[0, 0].double() / x[0, 0].double()
    assert float(ratio) == 2.0 ** round(float(torch.log2(ratio)))  # a power of two
    with pytest.raises(InvalidInputError, match="finite"):
        rescale_rows(torch.tensor([[1.0, float("nan")]]))


def test_propagation_layer_checks_finiteness():
    x, ei = graph(seed=3)
    graph_ = KSGraph.from_edge_index(ei, x.size(0))
    bad = x.clone()
    bad[5, 2] = float("inf")
    layer = KSPropagation(alpha=0.5)
    with pytest.raises(InvalidInputError, match="finite"):
        layer(bad, graph_)
    with pytest.raises(InvalidInputError, match="finite"):
        layer.edge_cosine(bad, graph_)
    empty = KSGraph.from_edge_index(torch.empty(2, 0, dtype=torch.long), x.size(0))
    with pytest.raises(InvalidInputError, match="finite"):
        layer(bad, empty)


def test_evidence_on_features_too_large_for_float32(caplog):
    x, ei = graph(n=60, seed=4)
    rng = np.random.default_rng(4)
    pred = rng.integers(0, 3, 60)
    unit = x.to(torch.float32) / x.abs().max().float()
    base = CounterfactualEvidence().fit(Data(x=unit, edge_index=ei), predictions=pred)
    huge = Data(x=unit * 3e38, edge_index=ei)
    with caplog.at_level(logging.INFO, logger="gnnaudit.audit.search"):
        ce = CounterfactualEvidence().fit(huge, predictions=pred)
    assert "float64" in caplog.text and ce.ks_.dtype == torch.float64
    nodes = ce.node_ids_
    a, b = ce.local_evidence(nodes, 5), base.local_evidence(nodes, 5)
    pd.testing.assert_frame_equal(a.drop(columns="similarity"), b.drop(columns="similarity"))
    np.testing.assert_allclose(a["similarity"], b["similarity"], atol=1e-5)
    assert np.isfinite(ce.similarity(nodes, nodes[::-1])).all()


def test_evidence_on_float64_features_of_1e200():
    x, ei = graph(n=60, seed=5)
    pred = np.random.default_rng(5).integers(0, 3, 60)
    base = CounterfactualEvidence().fit(Data(x=x, edge_index=ei), predictions=pred)
    ce = CounterfactualEvidence().fit(Data(x=x * 1e200, edge_index=ei), predictions=pred)
    assert np.isfinite(ce.space_.embedding).all()
    np.testing.assert_allclose(ce.space_.embedding, base.space_.embedding, atol=1e-6)
    pd.testing.assert_frame_equal(ce.global_evidence(30), base.global_evidence(30))
    np.testing.assert_allclose(
        ce.similarity([1, 2, 3], [4, 5, 6]), base.similarity([1, 2, 3], [4, 5, 6]), rtol=1e-12
    )


def test_results_refuse_nan():
    ids = np.array([1, 2])
    with pytest.raises(InvalidInputError, match="similarity"):
        LocalEvidence(ids, np.array([[2], [1]]), np.array([[0.5], [np.nan]]), ids, ids[::-1, None])
    with pytest.raises(InvalidInputError, match="similarity"):
        GlobalEvidence(ids[:1], ids[1:], np.array([np.inf]), ids[:1], ids[1:])
    frame = pd.DataFrame(
        {"node_u": [1, 1], "node_v": [2, 3], "rank": [1, 2], "similarity": [0.5, np.nan]}
    )
    with pytest.raises(InvalidInputError, match="finite"):
        CounterfactualEvidence.average_similarity(frame)
