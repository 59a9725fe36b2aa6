"""The memory-lean graph builds against plain oracles: KS graph keys, chunked membership and
halo ids, the symmetric hop adjacency, and the partition blocks built from them."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnaudit.audit.distributed.block import ForwardBlock
from gnnaudit.audit.sensitivity.receptive_field import hop_adjacency
from gnnaudit.graph_ops import ks_halo
from gnnaudit.graph_ops.ks_halo import HaloBlock, edge_chunks, is_member, outside_ids
from gnnaudit.graph_ops.ks_propagation import KSGraph


@st.composite
def graphs(draw: st.DrawFn) -> tuple[torch.Tensor, int]:
    n = draw(st.integers(1, 30))
    e = draw(st.integers(0, 120))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (2, e), generator=gen), n


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_ks_graph_equals_the_unique_keys_oracle(case):
    """Self loops dropped, duplicates merged, sorted by (target, source); input untouched."""
    ei, n = case
    before = ei.clone()
    graph = KSGraph.from_edge_index(ei, n)
    assert torch.equal(ei, before)
    pairs = sorted({(int(d), int(s)) for s, d in ei.t().tolist() if s != d})
    assert graph.row.tolist() == [d for d, _ in pairs]
    assert graph.col.tolist() == [s for _, s in pairs]
    assert graph.crow.tolist() == [sum(1 for d, _ in pairs if d < v) for v in range(n + 1)]


def test_ks_graph_from_keys_handles_no_edges_and_only_loops():
    empty = KSGraph.from_keys(torch.empty(0, dtype=torch.long), 4)
    assert empty.num_edges == 0 and empty.crow.tolist() == [0] * 5
    loops = KSGraph.from_edge_index(torch.tensor([[0, 2, 2], [0, 2, 2]]), 3)
    assert loops.num_edges == 0


@settings(max_examples=60, deadline=None)
@given(graphs(), st.integers(1, 7))
def test_membership_and_halo_ids_match_isin_in_any_chunking(case, chunk):
    """Chunked binary-search membership equals ``torch.isin``; the halo ids are the sorted
    distinct sources outside the partition, whatever the chunk size."""
    ei, n = case
    gen = torch.Generator().manual_seed(n)
    own = torch.nonzero(torch.rand(n, generator=gen) < 0.4).view(-1)
    src = ei[0]
    old = ks_halo.EDGE_CHUNK
    try:
        ks_halo.EDGE_CHUNK = chunk
        got = is_member(src, own)
        halo = outside_ids(src, own)
    finally:
        ks_halo.EDGE_CHUNK = old
    assert torch.equal(got, torch.isin(src, own))
    assert torch.equal(halo, torch.unique(src[~torch.isin(src, own)]))


def test_edge_chunks_cover_the_range_once():
    assert edge_chunks(0, 3) == []
    assert edge_chunks(7, 3) == [(0, 3), (3, 6), (6, 7)]
    assert edge_chunks(6, 3) == [(0, 3), (3, 6)]


@settings(max_examples=60, deadline=None)
@given(graphs(), st.integers(1, 9))
def test_hop_adjacency_equals_the_coordinate_oracle(case, chunk):
    """``A + A^T + I`` as a boolean pattern with sorted indices, as the plain COO build, in
    any chunking of the key pass."""
    import gnnaudit.audit.sensitivity.receptive_field as rf

    ei, n = case
    e = ei.numpy()
    loops = np.arange(n)
    oracle = sp.csr_matrix(
        (
            np.ones(2 * e.shape[1] + n, dtype=bool),
            (np.concatenate([e[0], e[1], loops]), np.concatenate([e[1], e[0], loops])),
        ),
        shape=(n, n),
    )
    oracle.sum_duplicates()
    old = rf.ADJ_CHUNK
    try:
        rf.ADJ_CHUNK = chunk
        adj = hop_adjacency(ei, n)
    finally:
        rf.ADJ_CHUNK = old
    assert adj.dtype == bool and adj.has_sorted_indices
    assert np.array_equal(adj.indptr, oracle.indptr)
    assert np.array_equal(adj.indices, oracle.indices)


@settings(max_examples=40, deadline=None)
@given(graphs())
def test_partition_blocks_hold_exactly_the_edges_into_their_rows(case):
    """Both blocks of a partition (the KS plan and the forward block) list, per own row, the
    in-neighbours of the oracle (KS: distinct, no self loops; forward: every edge, in order)."""
    ei, n = case
    own = torch.arange(n // 2, n)
    into = torch.isin(ei[1], own)
    edges = ei[:, into]
    ks = HaloBlock.build(own, edges.clone())
    fwd_local = torch.cat([own, ks.halo]).sort().values  # the local order: global order
    for i, v in enumerate(own.tolist()):
        want = sorted({int(s) for s, d in edges.t().tolist() if d == v and s != v})
        row = int(ks.own_local[i])
        got = fwd_local[ks.graph.col[ks.graph.crow[row] : ks.graph.crow[row + 1]]].tolist()
        assert got == want
    block = _forward_block(own, edges)
    assert torch.equal(block.halo, ks.halo)
    for i, v in enumerate(own.tolist()):
        want = [int(s) for s, d in edges.t().tolist() if d == v]
        got = fwd_local[block.src[block.ptr[i] : block.ptr[i + 1]].long()].tolist()
        assert got == want


def _forward_block(own: torch.Tensor, edges: torch.Tensor) -> ForwardBlock:
    """ForwardBlock.load's build on an in-memory partition (load reads it from a store)."""
    import gnnaudit.audit.distributed.block as db

    part = {"own": own, "x": torch.zeros(own.numel(), 1), "edge_index": edges}
    original = db.load_part
    try:
        db.load_part = lambda store, p: dict(part)
        return ForwardBlock.load(None, 0)  # type: ignore[arg-type]
    finally:
        db.load_part = original


@settings(max_examples=50, deadline=None)
@given(
    graphs(),
    st.integers(1, 12),
    st.sampled_from([torch.float32, torch.float64]),
    st.sampled_from(["plain", "huge", "zeros"]),
    st.integers(1, 40),
)
def test_ks_hop_in_chunks_equals_one_piece(case, d, dtype, rows, budget):
    """A KS hop run in chunks of target rows (any edge budget) equals the one-piece hop bit
    for bit, including rows that need the exact rescaling and zero rows."""
    from gnnaudit.graph_ops.ks_propagation import KSPropagation

    ei, n = case
    gen = torch.Generator().manual_seed(n * 31 + d)
    x = torch.randn(n, d, generator=gen, dtype=dtype)
    if rows == "huge":
        x[: (n + 1) // 2] *= 1e30 if dtype == torch.float32 else 1e200
    elif rows == "zeros":
        x[::2] = 0
    graph = KSGraph.from_edge_index(ei, n)
    layer = KSPropagation(0.3)
    with torch.no_grad():
        whole = layer(x, graph, max_edges=10**9)
        chunked = layer(x, graph, max_edges=budget)
    assert torch.equal(whole, chunked)
