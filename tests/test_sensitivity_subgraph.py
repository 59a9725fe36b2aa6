"""Node scope's subgraph passes: the L-hop ball closed by a sink keeps every ball node's
degree, the passes equal whole-graph ones, and a model that merges parallel edges (so the sink
cannot stand in for the missing neighbours) falls back to whole-graph passes, still exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.nn import GCNConv
from torch_geometric.utils import coalesce

import gnnaudit.audit.sensitivity.node_scope as node_scope
from gnnaudit.audit.sensitivity.flip import counterfactual_flip
from gnnaudit.audit.sensitivity.intervener import Intervener, prepare
from gnnaudit.audit.sensitivity.options import FlipOptions
from gnnaudit.audit.sensitivity.receptive_field import hop_adjacency, l_hop_ball
from gnnaudit.datasets import synthetic_credit_graph


class Stack(torch.nn.Module):
    """Two seeded GCN layers; ``merge`` coalesces the edges first (parallel edges become one)."""

    def __init__(self, width: int, merge: bool = False) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.one, self.two = GCNConv(width, 8), GCNConv(8, 2)
        self.merge = merge

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        if self.merge:
            edge_index = coalesce(edge_index, num_nodes=x.size(0))
        return self.two(torch.relu(self.one(x, edge_index)), edge_index)


@pytest.fixture(scope="module")
def graph():
    return synthetic_credit_graph(1500, seed=4)


def test_the_sink_keeps_every_ball_node_degree(graph):
    setup = prepare(Stack(graph.x.size(1)), graph, None, "node", 0, FlipOptions(max_nodes=30))
    eng = Intervener(setup, False, 0)
    adj = hop_adjacency(graph.edge_index, graph.num_nodes)
    local = node_scope.LocalGraph(eng, adj, 2)
    seeds = setup.nodes[:5]
    ball = local.ball(seeds, np.inf)
    want = np.zeros(graph.num_nodes, dtype=bool)
    for v in seeds:
        want |= l_hop_ball(adj, int(v), 2)
    np.testing.assert_array_equal(ball, np.flatnonzero(want))
    sub = local.subgraph(ball).numpy()
    full_in = np.bincount(graph.edge_index[1].numpy(), minlength=graph.num_nodes)
    full_out = np.bincount(graph.edge_index[0].numpy(), minlength=graph.num_nodes)
    np.testing.assert_array_equal(np.bincount(sub[1], minlength=ball.size + 1)[:-1], full_in[ball])
    np.testing.assert_array_equal(np.bincount(sub[0], minlength=ball.size + 1)[:-1], full_out[ball])
    inner = np.flatnonzero(np.isin(ball, seeds))
    touches_sink = np.isin(sub[0], inner) & (sub[1] == ball.size)
    assert not touches_sink.any()  # the chunk's own nodes lose no neighbour


@pytest.mark.parametrize("merge", [False, True])
def test_subgraph_passes_equal_whole_graph_passes_or_fall_back(monkeypatch, graph, merge):
    model = Stack(graph.x.size(1), merge=merge)
    sizes: list[int] = []
    forward = model.forward

    def counting(x, edge_index):
        sizes.append(int(x.size(0)))
        return forward(x, edge_index)

    monkeypatch.setattr(model, "forward", counting)
    kwargs = dict(scope="node", max_nodes=80, n_boot=20, num_hops=2)
    monkeypatch.setattr(node_scope, "LOCAL_MAX_FRACTION", 0.0)
    whole = counterfactual_flip(model, graph, "gender", **kwargs)
    sizes.clear()
    monkeypatch.setattr(node_scope, "LOCAL_MAX_FRACTION", 0.9)
    monkeypatch.setattr(node_scope, "LOCAL_MAX_TOTAL", 100.0)
    local = counterfactual_flip(model, graph, "gender", **kwargs)
    np.testing.assert_array_equal(whole.flipped, local.flipped)
    # equal to float32 rounding: bit for bit on some CPUs, ~1e-8 apart on others (AVX-512
    # kernels sum a node's messages in a smaller graph in another order); a wrong ball, edge or
    # degree moves these deltas by orders of magnitude more
    np.testing.assert_allclose(local.prob_delta, whole.prob_delta, rtol=0, atol=1e-6)
    n = graph.num_nodes
    small = [s for s in sizes if s < n]
    if merge:  # only the one-node check ran on a subgraph, then whole-graph passes
        assert len(small) == 1
    else:
        assert len(small) > 1 and min(small) < max(small)
