"""Dask support (``client=``): every distributed result equals the single-process one exactly.

One LocalCluster of two single-threaded worker processes (conftest's ``client``) serves
every test here and in the other Dask modules; ``make test`` runs them on one xdist worker
(their ``xdist_group("dask")`` mark).
"""

from __future__ import annotations

import dataclasses
import site
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.xdist_group("dask")  # one worker, one cluster (conftest)

from sklearn.datasets import make_blobs  # noqa: E402
from torch_geometric.nn.models import GraphSAGE  # noqa: E402

from gnnaudit._distributed import check_client, map_blocks, split_blocks  # noqa: E402
from gnnaudit.audit import CounterfactualEvidence  # noqa: E402
from gnnaudit.audit.search.base import SearchSpace  # noqa: E402
from gnnaudit.audit.search.exact import ExactSearcher  # noqa: E402
from gnnaudit.audit.sensitivity.flip import feature_sensitivity  # noqa: E402
from gnnaudit.clustering import ExDBSCAN  # noqa: E402
from gnnaudit.datasets import synthetic_credit_graph  # noqa: E402
from gnnaudit.errors import InvalidInputError  # noqa: E402

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _space(m: int = 900, d: int = 6, seed: int = 0) -> SearchSpace:
    """Unit rows with exact ties (rounded rows, duplicated rows) and three classes."""
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(m, d)).astype(np.float32)
    emb[: m // 10] = np.round(emb[: m // 10])
    emb[m // 10 : m // 5] = emb[m // 5 : m // 5 + m // 10]
    emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    emb[7] = 0.0  # a zero row
    return SearchSpace(emb.astype(np.float32), rng.integers(0, 3, m), np.arange(m) * 3 + 1)


def _same(a, b) -> None:
    """Two result dataclasses with equal arrays (values and dtypes) and equal scalars."""
    assert type(a) is type(b)
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


# --------------------------------------------------------------------------- exact search
@pytest.mark.parametrize("block_bytes", [4096, 1 << 20])
def test_exact_global_topk_equals_local_process(client, block_bytes):
    space = _space()
    here = ExactSearcher(block_bytes=block_bytes).build(space)
    there = ExactSearcher(block_bytes=block_bytes, client=client).build(space)
    for k in (1, 9, 300):
        a, b = here.global_pairs(k), there.global_pairs(k)
        assert np.array_equal(a.node_u, b.node_u) and np.array_equal(a.node_v, b.node_v)
        assert np.array_equal(a.similarity, b.similarity)
        _same(a, b)


def test_exact_local_batched_queries_equal_local_process(client):
    space = _space()
    here = ExactSearcher(block_bytes=4096).build(space)
    there = ExactSearcher(block_bytes=4096, client=client).build(space)
    queries = np.r_[np.arange(space.size), [7, 3, 3]]
    for k in (1, 5, 700):  # 700 > candidates of some classes: padded rows
        a, b = here.local(queries, k), there.local(queries, k)
        assert np.array_equal(a.evidence, b.evidence)
        assert np.array_equal(a.similarity, b.similarity)
        _same(a, b)


def test_counterfactual_evidence_threads_client(client):
    data = synthetic_credit_graph(num_nodes=400, seed=2)
    pred = (data.x[:, 0] > data.x[:, 0].median()).long()
    here = CounterfactualEvidence().fit(data, predictions=pred)
    there = CounterfactualEvidence(client=client).fit(data, predictions=pred)
    assert there.searcher_.client is client
    pd.testing.assert_frame_equal(here.global_evidence(50), there.global_evidence(50))
    nodes = here.node_ids_
    pd.testing.assert_frame_equal(here.local_evidence(nodes, k=4), there.local_evidence(nodes, k=4))


# --------------------------------------------------------------------------- sensitivity
@pytest.fixture(scope="module")
def graph_and_model():
    data = synthetic_credit_graph(num_nodes=300, seed=1)
    torch.manual_seed(0)
    model = GraphSAGE(data.num_features, 16, num_layers=2, out_channels=2)
    return data, model


@pytest.mark.parametrize("scope", ["graph", "node"])
def test_feature_sensitivity_equals_local_process(client, graph_and_model, scope):
    data, model = graph_and_model
    kw = dict(scope=scope, n_boot=50, random_state=4)
    here = feature_sensitivity(model, data, **kw)
    there = feature_sensitivity(model, data, client=client, **kw)
    pd.testing.assert_frame_equal(here, there, check_exact=True)
    assert here.attrs == there.attrs


# --------------------------------------------------------------------------- ExDBSCAN
def test_exdbscan_explain_many_equals_local_process(client):
    X, _ = make_blobs(n_samples=240, centers=3, cluster_std=0.8, random_state=3)
    est = ExDBSCAN(eps=0.9, min_samples=5, n_counterfactuals=3).fit(X)
    queries = list(range(0, 240, 9)) + [X[5] + 0.1]
    here = est.explain_many(queries)
    there = est.explain_many(queries, client=client)
    assert len(here) == len(there) == len(queries)
    for a, b in zip(here, there, strict=True):
        _same(a, b)
    rnd = ExDBSCAN(eps=0.9, min_samples=5, n_counterfactuals=2, strategy="random").fit(X)
    for a, b in zip(
        rnd.explain_many(queries[:10], target=None),
        rnd.explain_many(queries[:10], target=None, client=client),
        strict=True,
    ):
        _same(a, b)
    with pytest.raises(InvalidInputError, match="target"):  # a worker's error is raised here
        est.explain_many([0, 1, 2], target=99, client=client)


# --------------------------------------------------------------------------- grid helper
def _square_plus(cell, offset):
    return [cell * cell + offset, cell]


def test_map_blocks_order_and_shared(client):
    cells = list(range(23))
    shared = np.arange(10.0)[1:]  # an unaligned-offset view is fine too
    assert map_blocks(client, _square_plus, cells, 0.5) == map_blocks(
        None, _square_plus, cells, 0.5
    )
    out = map_blocks(client, np.dot, [shared, shared * 2], shared)
    assert out == [shared @ shared, 2 * shared @ shared]
    assert split_blocks(list(range(7)), 3) == [[0, 1], [2, 3], [4, 5, 6]]
    assert split_blocks([1], 5) == [[1]]
    assert map_blocks(client, _square_plus, [], 1) == []


def test_tree_clustering_grid_equals_local_process(client):
    sys.path.insert(0, str(BENCH))
    try:
        import bench_tree_clustering as bench
    finally:
        sys.path.remove(str(BENCH))
    client.run(site.addsitedir, str(BENCH))  # the workers import the cell function
    args = (["iris"], 2, 60.0, "rc2", False)
    here = bench.table2_raw(*args, kappas=(0.1,))
    there = bench.table2_raw(*args, client=client, kappas=(0.1,))
    timing = ["time", "build"]
    assert len(here) == 4
    pd.testing.assert_frame_equal(here.drop(columns=timing), there.drop(columns=timing))


# --------------------------------------------------------------------------- bad input
def test_bad_client_is_named(graph_and_model):
    with pytest.raises(InvalidInputError, match="client must be a dask.distributed.Client"):
        check_client("x")
    assert check_client(None) is None
    with pytest.raises(InvalidInputError, match="client"):
        ExactSearcher(client="x").build(_space(50))
    data, model = graph_and_model
    pred = (data.x[:, 0] > 0).long()
    with pytest.raises(InvalidInputError, match="client"):
        CounterfactualEvidence(client="x").fit(data, predictions=pred)
    with pytest.raises(InvalidInputError, match="client"):
        feature_sensitivity(model, data, scope="graph", client="x")
    X, _ = make_blobs(n_samples=60, centers=2, random_state=0)
    est = ExDBSCAN(eps=1.0, min_samples=4).fit(X)
    with pytest.raises(InvalidInputError, match="client"):
        est.explain_many([0, 1], client="x")


def test_client_with_an_approximate_backend_is_rejected(client):
    data = synthetic_credit_graph(num_nodes=60, seed=0)
    pred = (data.x[:, 0] > 0).long()
    with pytest.raises(InvalidInputError, match="backend='exact' and 'sharded' only"):
        CounterfactualEvidence(backend="sorted", client=client).fit(data, predictions=pred)
