"""ks_embedding / KSPropagation / KSEmbedding against a plain-loop implementation of Eq. 5-7."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data
from torch_geometric.nn.conv import MessagePassing

from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import KSEmbedding, ks_embedding
from gnnaudit.graph_ops.neighbourhood import KSGraph, KSPropagation, l_hop_subgraph


def loop_ks(x: np.ndarray, edge_index: np.ndarray, num_hops: int, alpha: float) -> np.ndarray:
    """Eq. 5-7 with plain Python loops: N(v) = set of in-neighbours u != v."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    neigh: list[set[int]] = [set() for _ in range(n)]
    for s, t in np.asarray(edge_index).T:
        if s != t:
            neigh[int(t)].add(int(s))
    cur = x.copy()
    agg = x.copy()
    for _ in range(num_hops):
        nxt = np.zeros_like(cur)
        for v in range(n):
            acc = np.zeros(x.shape[1])
            for u in neigh[v]:
                nv, nu = np.linalg.norm(cur[v]), np.linalg.norm(cur[u])
                cos = 0.0 if nv == 0 or nu == 0 else float(cur[v] @ cur[u]) / (nv * nu)
                acc += cos * cur[u]
            nxt[v] = alpha * cur[v]
            if neigh[v]:
                nxt[v] += (1 - alpha) / len(neigh[v]) * acc
        cur = nxt
        agg += cur
    return agg


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 9))
    d = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    zero_rows = rng.random(n) < 0.25  # zero vectors: cosine 0
    x[zero_rows] = 0.0
    e = draw(st.integers(0, 3 * n))
    ei = rng.integers(0, n, size=(2, e))  # directed, self loops and isolated nodes possible
    if e:
        dup = ei[:, rng.integers(0, e, size=draw(st.integers(0, e)))]  # duplicate edges
        ei = np.concatenate([ei, dup], axis=1)
    hops = draw(st.integers(0, 4))
    alpha = draw(st.sampled_from([0.0, 0.3, 0.5, 1.0]))
    return x, ei, hops, alpha


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_matches_plain_loop(case):
    x, ei, hops, alpha = case
    got = ks_embedding(torch.tensor(x), torch.tensor(ei, dtype=torch.long), hops, alpha)
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), loop_ks(x, ei, hops, alpha), rtol=1e-10, atol=1e-12)


def test_matches_plain_loop_fixed_graph_with_all_corner_cases():
    # node 0: zero row; node 4: isolated; (1,2) duplicated; self loop on 3; directed 2->3 only
    x = np.array([[0.0, 0.0], [1.0, 2.0], [-1.0, 0.5], [3.0, -1.0], [0.2, 0.2]])
    ei = np.array([[1, 1, 1, 0, 3, 2, 2, 3], [2, 2, 2, 1, 3, 3, 1, 1]])
    got = ks_embedding(torch.tensor(x), torch.tensor(ei), num_hops=3, alpha=0.5)
    np.testing.assert_allclose(got.numpy(), loop_ks(x, ei, 3, 0.5), rtol=1e-12)
    # isolated node 4: x^l = 0.5^l x  ->  x^agg = (1 + .5 + .25 + .125) x
    np.testing.assert_allclose(got[4].numpy(), 1.875 * x[4])
    # zero row stays zero
    assert torch.count_nonzero(got[0]) == 0


def test_duplicates_are_coalesced_and_self_loops_ignored():
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.normal(size=(30, 5)))
    ei = torch.tensor(rng.integers(0, 30, size=(2, 80)))
    base = ks_embedding(x, ei)
    noisy = torch.cat([ei, ei[:, :40], torch.arange(30).repeat(2, 1)], dim=1)
    noisy = noisy[:, torch.randperm(noisy.size(1), generator=torch.Generator().manual_seed(0))]
    torch.testing.assert_close(ks_embedding(x, noisy), base, rtol=1e-12, atol=1e-12)


def test_direction_matters():
    x = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    fwd = ks_embedding(x, torch.tensor([[0], [1]]), num_hops=1, alpha=0.5)
    # node 0 has no in-neighbour: 0.5 x0 added; node 1 receives from 0
    torch.testing.assert_close(fwd[0], 1.5 * x[0])
    cos = 1 / np.sqrt(2)
    torch.testing.assert_close(fwd[1], x[1] + 0.5 * x[1] + 0.5 * cos * x[0])


def test_dtype_follows_input_and_float32_close_to_float64():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(50, 6))
    ei = torch.tensor(rng.integers(0, 50, size=(2, 200)))
    out32 = ks_embedding(torch.tensor(x, dtype=torch.float32), ei)
    out64 = ks_embedding(torch.tensor(x), ei)
    assert out32.dtype == torch.float32 and out64.dtype == torch.float64
    np.testing.assert_allclose(out32.numpy(), out64.numpy(), rtol=1e-4, atol=1e-5)
    ints = ks_embedding(torch.ones(3, 2, dtype=torch.long), torch.tensor([[0, 1], [1, 2]]))
    assert ints.dtype == torch.get_default_dtype()
    half = ks_embedding(torch.tensor(x, dtype=torch.bfloat16), ei)
    assert half.dtype == torch.bfloat16
    np.testing.assert_allclose(half.float().numpy(), out64.numpy(), rtol=0.05, atol=0.05)


def test_zero_hops_is_identity_and_input_untouched():
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    before = x.clone()
    ei = torch.tensor([[0, 1, 2], [1, 2, 3]])
    out = ks_embedding(x, ei, num_hops=0)
    torch.testing.assert_close(out, x)
    ks_embedding(x, ei, num_hops=3)
    torch.testing.assert_close(x, before)


def test_empty_edge_index():
    x = torch.randn(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = ks_embedding(x, torch.empty(2, 0, dtype=torch.long), num_hops=2, alpha=0.5)
    torch.testing.assert_close(out, 1.75 * x)


def test_layer_is_message_passing_and_edge_path_agrees_with_fused_path():
    rng = np.random.default_rng(3)
    x = torch.tensor(rng.normal(size=(20, 4)))
    ei = torch.tensor(rng.integers(0, 20, size=(2, 60)))
    graph = KSGraph.from_edge_index(ei, 20)
    layer = KSPropagation(alpha=0.3)
    assert isinstance(layer, MessagePassing)
    fused = layer(x, graph)
    # explicit message() path over the coalesced edges
    w = layer.edge_cosine(x, graph)
    deg = graph.in_degree.to(x.dtype)
    w = w * (0.7 / deg[graph.row])
    explicit = layer.propagate(torch.stack([graph.col, graph.row]), x=x, edge_weight=w)
    torch.testing.assert_close(fused, explicit + 0.3 * x)
    np.testing.assert_allclose(fused.numpy(), loop_ks(x.numpy(), ei.numpy(), 1, 0.3) - x.numpy())


def test_transform_writes_ks_without_mutating_input():
    rng = np.random.default_rng(4)
    data = Data(x=torch.tensor(rng.normal(size=(10, 3))), edge_index=torch.tensor([[0, 1], [1, 2]]))
    out = KSEmbedding(num_hops=2, alpha=0.25)(data)
    assert "ks" not in data
    torch.testing.assert_close(out.ks, ks_embedding(data.x, data.edge_index, 2, 0.25))
    assert out.x is data.x
    assert "KSEmbedding(num_hops=2" in repr(KSEmbedding(2, 0.25))


@pytest.mark.parametrize(
    ("x", "ei", "kwargs", "needle"),
    [
        (torch.ones(3), torch.tensor([[0], [1]]), {}, "x must have shape"),
        (torch.tensor([[1.0], [float("nan")]]), torch.tensor([[0], [1]]), {}, "x must be finite"),
        (torch.tensor([[1.0], [float("inf")]]), torch.tensor([[0], [1]]), {}, "x must be finite"),
        (torch.ones(3, 2), torch.tensor([[0], [3]]), {}, "edge_index"),
        (torch.ones(3, 2), torch.tensor([[0], [-1]]), {}, "edge_index"),
        (torch.ones(3, 2), torch.tensor([0, 1]), {}, "edge_index"),
        (torch.ones(3, 2), torch.tensor([[0.0], [1.0]]), {}, "edge_index"),
        (torch.ones(3, 2), torch.tensor([[0], [1]]), {"alpha": -0.1}, "alpha"),
        (torch.ones(3, 2), torch.tensor([[0], [1]]), {"alpha": 1.5}, "alpha"),
        (torch.ones(3, 2), torch.tensor([[0], [1]]), {"num_hops": -1}, "num_hops"),
        (torch.ones(3, 2), torch.tensor([[0], [1]]), {"num_hops": 1.5}, "num_hops"),
        (torch.ones(0, 2), torch.tensor([[0], [1]]), {}, "x must"),
    ],
)
def test_bad_input_raises_naming_the_argument(x, ei, kwargs, needle):
    with pytest.raises(InvalidInputError, match=needle):
        ks_embedding(x, ei, **kwargs)


def test_transform_rejects_bad_parameters():
    with pytest.raises(InvalidInputError, match="alpha"):
        KSEmbedding(alpha=-1)
    with pytest.raises(InvalidInputError, match="num_hops"):
        KSEmbedding(num_hops=-2)
    with pytest.raises(InvalidInputError, match="data"):
        KSEmbedding()(Data(x=torch.ones(2, 2)))


def test_l_hop_subgraph():
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])  # path 0->1->2->3->4
    subset, edges = l_hop_subgraph(3, 2, ei, 5)
    assert subset.tolist() == [1, 2, 3]
    assert edges.tolist() == [[1, 2], [2, 3]]
    with pytest.raises(InvalidInputError, match="node"):
        l_hop_subgraph(9, 2, ei, 5)
