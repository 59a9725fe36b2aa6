"""device= on the KS propagation and the evidence search: same results on every device."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from search_oracles import (
    brute_global,
    brute_local,
    clustered,
    pair_positions,
    positions,
    quantised_spaces,
    space_of,
)

from gnnaudit.audit import CounterfactualEvidence
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.neighbourhood import ks_embedding

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(scope="module")
def data():
    return synthetic_credit_graph(num_nodes=200, seed=3)


def test_explicit_cpu_equals_the_default(data):
    auto = ks_embedding(data.x, data.edge_index)
    cpu = ks_embedding(data.x, data.edge_index, device="cpu")
    assert auto.device.type == "cpu" and torch.equal(auto, cpu)


@pytest.mark.parametrize("device", ["nope", "cuda:99" if torch.cuda.is_available() else "cuda"])
def test_bad_device_is_named(data, device):
    with pytest.raises(InvalidInputError, match="device"):
        ks_embedding(data.x, data.edge_index, device=device)


def test_evidence_device_parameter(data):
    pred = torch.arange(data.num_nodes) % 2
    a = CounterfactualEvidence().fit(data, predictions=pred)
    b = CounterfactualEvidence(device="cpu").fit(data, predictions=pred)
    assert b.get_params()["device"] == "cpu"
    assert torch.equal(a.ks_, b.ks_)
    assert a.global_evidence(k=5).equals(b.global_evidence(k=5))


@cuda
def test_cuda_propagation_matches_cpu(data):
    cpu = ks_embedding(data.x.double(), data.edge_index)
    gpu = ks_embedding(data.x.double(), data.edge_index, device="cuda")
    assert gpu.device.type == "cuda"
    np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=1e-10, atol=1e-12)


@cuda
def test_cuda_evidence_matches_cpu(data):
    pred = torch.arange(data.num_nodes) % 2
    cpu = CounterfactualEvidence().fit(data, predictions=pred).global_evidence(k=10)
    gpu = CounterfactualEvidence(device="cuda").fit(data, predictions=pred).global_evidence(k=10)
    assert gpu[["node_u", "node_v"]].equals(cpu[["node_u", "node_v"]])
    np.testing.assert_allclose(gpu["similarity"], cpu["similarity"], atol=1e-5)


def _space(seed=0, m=120):
    from gnnaudit.audit.search.base import SearchSpace

    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(m, 6)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return SearchSpace(emb, rng.integers(0, 3, m), np.arange(m) * 2)


def test_exact_searcher_cpu_device_is_the_numpy_path():
    from gnnaudit.audit.search.exact import ExactSearcher

    space = _space()
    a = ExactSearcher().build(space)
    b = ExactSearcher(device="cpu").build(space)
    q = np.arange(space.size)
    assert np.array_equal(a.local(q, 7).evidence, b.local(q, 7).evidence)
    assert np.array_equal(a.global_pairs(25).node_u, b.global_pairs(25).node_u)
    with pytest.raises(InvalidInputError, match="device"):
        ExactSearcher(device="nope").build(space)


@cuda
def test_exact_searcher_on_cuda_matches_cpu():
    from gnnaudit.audit.search.exact import ExactSearcher

    space = _space(1, 500)
    cpu = ExactSearcher().build(space)
    gpu = ExactSearcher(device="cuda").build(space)
    q = np.arange(space.size)
    np.testing.assert_allclose(gpu.local(q, 5).similarity, cpu.local(q, 5).similarity, atol=1e-5)
    np.testing.assert_allclose(
        gpu.global_pairs(50).similarity, cpu.global_pairs(50).similarity, atol=1e-5
    )


def _torch_blocks(searcher, budget):
    """The searcher with its blocks computed and selected by torch (here on the CPU: the
    code path a CUDA device runs), in blocks of ``budget`` bytes."""
    from gnnaudit.audit.search.similarity_blocks import DeviceBlocks

    searcher.blocks_ = DeviceBlocks(searcher.sorted_embedding_, "cpu")
    searcher.block_budget_ = budget
    return searcher


@settings(max_examples=60, deadline=None)
@given(
    space=quantised_spaces(max_nodes=30),
    k=st.integers(1, 12),
    budget=st.sampled_from([8, 64, 4096]),
)
def test_torch_block_selection_equals_brute_force(space, k, budget):
    """Ties are exact and plentiful: the device-side candidate selection keeps every tie at
    the k-th value, so the final answers equal the brute-force oracle, position for position."""
    from gnnaudit.audit.search.exact import ExactSearcher

    emb, pred = space
    searcher = _torch_blocks(ExactSearcher().build(space_of(emb, pred)), budget)
    q = np.arange(emb.shape[0])
    sim, pos = positions(searcher, searcher.local(q, k))
    ref_sim, ref_pos = brute_local(emb, pred, q, k)
    np.testing.assert_array_equal(pos, ref_pos)
    np.testing.assert_allclose(sim, ref_sim, atol=1e-6)
    gsim, gu, gv = pair_positions(searcher, searcher.global_pairs(k))
    ref_s, ref_u, ref_v = brute_global(emb, pred, k)
    np.testing.assert_array_equal(gu, ref_u)
    np.testing.assert_array_equal(gv, ref_v)
    np.testing.assert_allclose(gsim, ref_s, atol=1e-6)


def test_torch_blocks_equal_host_blocks_on_clustered_data():
    from gnnaudit.audit.search.exact import ExactSearcher

    x, pred = clustered(900, 8, 6, 3, seed=4)
    host = ExactSearcher(block_bytes=4 * 900 * 20).build(space_of(x, pred))
    dev = _torch_blocks(ExactSearcher().build(space_of(x, pred)), 4 * 900 * 20)
    q = np.arange(0, 900, 7)
    a, b = host.local(q, 10), dev.local(q, 10)
    assert np.array_equal(a.evidence, b.evidence)
    assert np.array_equal(host.global_pairs(40).node_u, dev.global_pairs(40).node_u)
    assert np.array_equal(host.global_pairs(40).node_v, dev.global_pairs(40).node_v)
