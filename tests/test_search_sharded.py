"""Sharded faiss search (``ShardedSearcher``, ``backend="sharded"``) against the brute-force
oracle: exhaustive probing equals the exact search, ties included; the merge keeps the tie
rule; Dask equals local; bad parameters raise."""

from __future__ import annotations

import numpy as np
import pytest
from dask_cluster import local_dask_client
from hypothesis import given, settings
from hypothesis import strategies as st
from search_oracles import (
    assert_valid,
    brute_global,
    brute_local,
    clustered,
    pair_positions,
    positions,
    quantised_spaces,
    recall,
    space_of,
)

from gnnaudit.audit.search.sharded import ShardedSearcher
from gnnaudit.audit.search.sharded_merge import (
    merge_shard_lists,
    shard_bounds,
    shard_exact,
    tie_tolerance,
)
from gnnaudit.errors import InvalidInputError

pytestmark = pytest.mark.usefixtures("faiss_one_thread")


def exact_answer(searcher, x, pred, q, k):
    """Assert the searcher's local top-k equals the oracle's exactly."""
    sim, pos = positions(searcher, searcher.local(q, k))
    ref_s, ref_p = brute_local(x, pred, q, k)
    np.testing.assert_array_equal(pos, ref_p)
    np.testing.assert_array_equal(sim, ref_s)


# ----------------------------------------------------------------------------- exactness
@settings(max_examples=60, deadline=None)
@given(
    quantised_spaces(max_nodes=40),
    st.integers(1, 12),
    st.integers(1, 5),
    st.integers(1, 4),
    st.sampled_from([1.0, 1.5, 3.0]),
    st.sampled_from([1, 3]),
)
def test_exhaustive_probe_equals_the_oracle(case, k, n_shards, nlist, oversample, stride):
    # entries in {-1, -1/2, 0, 1/2, 1}: float32 products are exact, ties (duplicate and zero
    # rows) plentiful; nprobe = nlist scans every list of every shard
    x, pred = case
    s = ShardedSearcher(
        n_shards=n_shards, nlist=nlist, nprobe=nlist, oversample=oversample, random_state=0
    ).build(space_of(x, pred, id_stride=stride))
    q = np.arange(pred.size)
    exact_answer(s, x, pred, q, k)
    g_s, g_u, g_v = pair_positions(s, s.global_pairs(3 * k))
    ref = brute_global(x, pred, 3 * k)
    np.testing.assert_array_equal(g_s, ref[0])
    np.testing.assert_array_equal(g_u, ref[1])
    np.testing.assert_array_equal(g_v, ref[2])


def test_ties_beyond_the_oversampled_lists_are_resolved():
    # 60 copies of one row of class 1 over 3 IVF shards: each shard's faiss list (k' = k)
    # holds arbitrary copies; the answer must be the copies with the smallest positions
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    dup = rng.choice(np.arange(1, 300), size=60, replace=False)
    x[dup] = x[0]
    pred = np.zeros(300, dtype=np.int64)
    pred[dup] = 1
    pred[rng.choice(300, 100, replace=False)] = 2
    pred[0] = 0
    s = ShardedSearcher(n_shards=3, nlist=4, nprobe=4, oversample=1.0, random_state=0)
    s.build(space_of(x, pred))
    assert s.kinds_ == ["ivf"] * 3
    sim, pos = positions(s, s.local(np.array([0]), 5))
    ref_s, ref_p = brute_local(x, pred, np.array([0]), 5)
    np.testing.assert_array_equal(pos, ref_p)
    np.testing.assert_allclose(sim, ref_s, atol=1e-12)


def test_flat_shard_ties_resolved_by_the_exact_scan():
    # faiss' flat heap returns the tie at the 3rd place as node 3 (similarity -0.5 like
    # node 1): the boundary test must re-answer the shard and put the smaller node 1 there
    x = np.array([[1.0], [-0.5], [1.0], [-0.5], [1.0]], dtype=np.float32)
    pred = np.array([0, 1, 1, 2, 2])
    s = ShardedSearcher(n_shards=1, oversample=1.0).build(space_of(x, pred))
    assert s.kinds_ == ["flat"]
    exact_answer(s, x, pred, np.arange(5), 3)
    _, pos = positions(s, s.local(np.array([0]), 3))
    np.testing.assert_array_equal(pos, [[2, 4, 1]])


def test_exhaustive_probe_exact_on_continuous_data():
    x, pred = clustered(m=2000, d=16, n_centres=20, n_classes=3, seed=1)
    s = ShardedSearcher(n_shards=3, nlist=16, nprobe=16, random_state=0)
    s.build(space_of(x, pred, id_stride=2))
    assert s.kinds_ == ["ivf"] * 3
    q = np.arange(0, 2000, 4)
    sim, pos = positions(s, s.local(q, 10))
    ref_s, ref_p = brute_local(x, pred, q, 10)
    np.testing.assert_array_equal(pos, ref_p)
    np.testing.assert_allclose(sim, ref_s, atol=1e-12)


def test_default_probes_recall_and_validity():
    x, pred = clustered(m=4000, d=32, n_centres=20, n_classes=3, seed=0)
    s = ShardedSearcher(shard_rows=1000, random_state=0).build(space_of(x, pred))
    assert s.n_shards_ == 4 and s.kinds_ == ["ivf"] * 4
    q = np.arange(0, 4000, 4)
    sim, pos = positions(s, s.local(q, 10))
    assert_valid(x, pred, q, sim, pos, 10)
    assert recall(pos, brute_local(x, pred, q, 10)[1]) >= 0.95


def test_ivf_pq_above_the_size_threshold():
    x, pred = clustered(m=10_000, d=16, n_centres=20, n_classes=3, seed=3)
    s = ShardedSearcher(n_shards=1, nlist=32, pq_above_bytes=0, random_state=0)
    s.build(space_of(x, pred))
    assert s.kinds_ == ["ivfpq"]
    assert s.shards_[0].index.code_size == 4  # pq_m = d / 4 sub-quantisers of one byte
    assert s.oversample_ == 8.0  # the IVF-PQ default
    q = np.arange(0, 10_000, 50)
    sim, pos = positions(s, s.local(q, 10))
    assert_valid(x, pred, q, sim, pos, 10)  # exact similarities after the re-rank
    assert recall(pos, brute_local(x, pred, q, 10)[1]) >= 0.8
    # below the threshold the same shard is IVF-Flat
    flat = ShardedSearcher(n_shards=1, nlist=32, random_state=0).build(space_of(x, pred))
    assert flat.kinds_ == ["ivf"]


def test_build_is_deterministic_and_shards_contiguous():
    x, pred = clustered(m=1500, d=16, n_centres=10, n_classes=3, seed=2)
    q = np.arange(0, 1500, 5)
    runs = [
        ShardedSearcher(n_shards=4, nlist=8, nprobe=2, random_state=7).build(space_of(x, pred))
        for _ in range(2)
    ]
    a, b = (positions(s, s.local(q, 8)) for s in runs)
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(runs[0].bounds_, [0, 375, 750, 1125, 1500])


def test_zero_queries_and_single_class_shards():
    x, pred = clustered(m=400, d=8, n_centres=5, n_classes=2, seed=5)
    x[[3, 10]] = 0.0
    pred[:200] = 0  # shard 0 holds class 0 only
    s = ShardedSearcher(n_shards=2, nlist=4, nprobe=4, random_state=0).build(space_of(x, pred))
    exact_answer_close(s, x, pred, np.array([3, 10, 11, 250]), 6)


def exact_answer_close(searcher, x, pred, q, k):
    sim, pos = positions(searcher, searcher.local(q, k))
    ref_s, ref_p = brute_local(x, pred, q, k)
    np.testing.assert_array_equal(pos, ref_p)
    np.testing.assert_allclose(sim, ref_s, atol=1e-12)


# ----------------------------------------------------------------------------- merge
def test_merge_keeps_the_tie_rule():
    # two shards (disjoint positions), ties across them, padding, rows of different widths
    a_s = np.array([[0.9, 0.5, -np.inf], [0.7, 0.7, 0.1]])
    a_p = np.array([[8, 3, -1], [5, 9, 2]])
    b_s = np.array([[0.9, 0.5], [0.7, -np.inf]])
    b_p = np.array([[12, 1], [0, -1]])
    sim, pos = merge_shard_lists([(a_s, a_p), (b_s, b_p)], 4)
    np.testing.assert_array_equal(pos, [[8, 12, 1, 3], [0, 5, 9, 2]])
    np.testing.assert_array_equal(sim, [[0.9, 0.9, 0.5, 0.5], [0.7, 0.7, 0.7, 0.1]])
    # fewer candidates than k: padded with -inf / -1
    sim, pos = merge_shard_lists([(a_s[:1], a_p[:1])], 4)
    np.testing.assert_array_equal(pos, [[8, 3, -1, -1]])
    assert np.isneginf(sim[0, 2:]).all()


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 6), st.integers(1, 8))
def test_merge_equals_a_global_sort(seed, n_lists, k):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(200)
    lists, chunks = [], np.array_split(perm[: 6 * n_lists], n_lists)
    for chunk in chunks:
        s = rng.integers(0, 3, size=(2, chunk.size)) / 2.0  # many ties
        p = np.broadcast_to(chunk, s.shape).copy()
        lists.append((s, p))
    sim, pos = merge_shard_lists(lists, k)
    all_s = np.hstack([s for s, _ in lists])
    all_p = np.hstack([p for _, p in lists])
    for r in range(2):
        order = np.lexsort((all_p[r], -all_s[r]))[:k]
        np.testing.assert_array_equal(pos[r, : order.size], all_p[r][order])
        np.testing.assert_array_equal(sim[r, : order.size], all_s[r][order])


def test_shard_exact_keeps_every_row_within_tolerance_of_the_kth():
    x = np.array([[1, 0], [1, 0], [0.6, 0.8], [1, 0], [0, 1], [1, 0]], dtype=np.float32)
    pred = np.array([0, 1, 1, 1, 1, 1])
    s, p = shard_exact(x, pred, 1, 6, np.array([0]), 2, tie_tolerance(2))
    assert sorted(p[0][p[0] >= 0].tolist()) == [1, 3, 5]  # all three ties at the 2nd value
    np.testing.assert_array_equal(shard_bounds(10, 3), [0, 3, 6, 10])


# ----------------------------------------------------------------------------- dask
@pytest.fixture(scope="module")
def client():
    """Threads, not processes: the shards' equality does not depend on the transport."""
    pytest.importorskip("distributed")
    with local_dask_client(processes=False) as dask_client:
        yield dask_client


@pytest.mark.parametrize("from_path", [False, True], ids=["scattered-blocks", "npy-path"])
def test_dask_equals_local(client, tmp_path, from_path):
    x, pred = clustered(m=2400, d=16, n_centres=20, n_classes=3, seed=4)
    params = {"n_shards": 3, "nlist": 12, "nprobe": 2, "random_state": 0}
    path = None
    if from_path:
        path = tmp_path / "emb.npy"
        np.save(path, x)
    local = ShardedSearcher(**params).build(space_of(x, pred))
    remote = ShardedSearcher(client=client, embedding_path=path, **params)
    remote.build(space_of(x, pred))
    assert remote.kinds_ == local.kinds_ == ["ivf"] * 3
    q = np.arange(0, 2400, 3)
    a, b = positions(local, local.local(q, 10)), positions(remote, remote.local(q, 10))
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[0], b[0])


def test_evidence_backend_sharded(client):
    from gnnaudit.audit import CounterfactualEvidence
    from gnnaudit.datasets import synthetic_credit_graph

    data = synthetic_credit_graph(num_nodes=300, seed=1)
    pred = (data.x[:, 0] > 0).long()
    exact = CounterfactualEvidence(backend="exact").fit(data, predictions=pred)
    params = {"n_shards": 3, "nlist": 4, "nprobe": 4}
    for kwargs in ({}, {"client": client}):
        est = CounterfactualEvidence(backend="sharded", index_params=params, **kwargs)
        est.fit(data, predictions=pred)
        assert est.backend_ == "sharded"
        nodes = est.node_ids_[:40]
        a, b = exact.search_local(nodes, 5), est.search_local(nodes, 5)
        np.testing.assert_array_equal(a.evidence, b.evidence)
        np.testing.assert_allclose(a.similarity, b.similarity, atol=1e-6)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_shards": 0}, r"n_shards'\] must be >= 1"),
        ({"n_shards": 2, "shard_rows": 10}, "not both"),
        ({"shard_rows": 2.5}, r"shard_rows'\] must be an integer"),
        ({"nlist": 0}, r"nlist'\] must be >= 1"),
        ({"nlist": 4, "nprobe": 5}, r"nprobe'\] must be <= nlist \(4\)"),
        ({"oversample": 0.5}, r"oversample'\] must be >= 1"),
        ({"oversample": float("nan")}, "oversample"),
        ({"pq_m": 3}, r"pq_m'\] must divide the embedding dimension 8"),
        ({"pq_above_bytes": -1}, "pq_above_bytes"),
        ({"train_rows": 0}, "train_rows"),
        ({"client": "x"}, "client"),
        ({"embedding_path": "/nonexistent/emb.npy"}, "not a readable .npy"),
    ],
)
def test_bad_parameters_raise(params, match):
    x, pred = clustered(m=60, d=8, n_centres=3, n_classes=2, seed=0)
    with pytest.raises(InvalidInputError, match=match):
        ShardedSearcher(**params).build(space_of(x, pred))


def test_bad_embedding_file_and_unknown_key(tmp_path):
    x, pred = clustered(m=60, d=8, n_centres=3, n_classes=2, seed=0)
    np.save(tmp_path / "short.npy", x[:50])
    with pytest.raises(InvalidInputError, match=r"shape \(60, 8\)"):
        ShardedSearcher(embedding_path=tmp_path / "short.npy").build(space_of(x, pred))
    np.save(tmp_path / "other.npy", x[::-1].copy())
    with pytest.raises(InvalidInputError, match="another embedding"):
        ShardedSearcher(embedding_path=tmp_path / "other.npy").build(space_of(x, pred))
    with pytest.raises(InvalidInputError, match="unknown index_params key 'nprobes'"):
        ShardedSearcher(nprobes=3)
