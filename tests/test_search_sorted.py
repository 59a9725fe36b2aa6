"""Sorted-similarity backend (``SortedSimilaritySearcher``): reuse of the order across
predictions, the memory cap and its exact fallback, against the exact backend and brute force.
(Equality with the brute-force oracle on generated inputs, ties included, is in
``test_search_conformance.py``.)"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from search_oracles import brute_global, brute_local, pair_positions, positions, space_of

from gnnaudit.audit import CounterfactualEvidence
from gnnaudit.audit.search.base import SearchSpace
from gnnaudit.audit.search.exact import ExactSearcher
from gnnaudit.audit.search.sorted_scan import (
    DEFAULT_MAX_NODES,
    SimilarityOrder,
    SortedSimilaritySearcher,
    embedding_digest,
)
from gnnaudit.errors import InvalidInputError, NotFittedError


def unit_rows(m: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(m, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def assert_same_answers(a, b, space: SearchSpace, k: int) -> None:
    """Two searchers give the same local and global answers on ``space``: identical nodes;
    similarities equal up to float32 rounding (BLAS rounds a product differently for
    different block shapes; the random data here has no near-ties, so the order is the
    same -- exact ties are checked on quantised data in test_search_conformance.py)."""
    q = np.arange(space.size)
    la, lb = a.local(q, k), b.local(q, k)
    np.testing.assert_array_equal(la.evidence, lb.evidence)
    np.testing.assert_allclose(la.similarity, lb.similarity, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(la.evidence_pred, lb.evidence_pred)
    ga, gb = a.global_pairs(3 * k), b.global_pairs(3 * k)
    np.testing.assert_array_equal(ga.node_u, gb.node_u)
    np.testing.assert_array_equal(ga.node_v, gb.node_v)
    np.testing.assert_allclose(ga.similarity, gb.similarity, rtol=0, atol=1e-6)


@pytest.fixture
def count_builds(monkeypatch):
    """Count the sorts of the similarity matrix (``SimilarityOrder.build`` calls)."""
    calls = []
    original = SimilarityOrder.build.__func__

    def counting(cls, *args, **kwargs):
        calls.append(1)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(SimilarityOrder, "build", classmethod(counting))
    return calls


def test_with_predictions_reuses_the_order_and_equals_a_fresh_build(count_builds):
    emb = unit_rows(120, 6, seed=0)
    rng = np.random.default_rng(1)
    ids = np.arange(120) * 2 + 5
    s = SortedSimilaritySearcher().build(SearchSpace(emb, rng.integers(0, 3, 120), ids))
    assert len(count_builds) == 1
    for epoch in range(3):
        pred = rng.integers(0, 2 + epoch, 120)
        twin = s.with_predictions(pred)
        assert twin.order_ is s.order_ and len(count_builds) == 1  # no new sort
        np.testing.assert_array_equal(twin.space_.predictions, pred)
        fresh = ExactSearcher().build(SearchSpace(emb, pred, ids))
        assert_same_answers(twin, fresh, twin.space_, k=7)
    # the original searcher keeps its own predictions
    np.testing.assert_array_equal(s.local(np.arange(3), 2).query, ids[:3])
    assert s.space_.predictions is not twin.space_.predictions


def test_build_on_an_unchanged_embedding_keeps_the_order(count_builds):
    emb = unit_rows(80, 5, seed=2)
    pred = np.arange(80) % 3
    s = SortedSimilaritySearcher().build(SearchSpace(emb, pred, np.arange(80)))
    order = s.order_
    # a copy with the same contents, new predictions and node ids: the order is kept
    s.build(SearchSpace(emb.copy(), pred[::-1].copy(), np.arange(80) + 100))
    assert s.order_ is order and len(count_builds) == 1
    np.testing.assert_array_equal(s.space_.node_ids, np.arange(80) + 100)
    assert_same_answers(s, ExactSearcher().build(s.space_), s.space_, k=5)
    # one changed entry: a new sort
    changed = emb.copy()
    changed[3, 0] = -changed[3, 0]
    s.build(SearchSpace(changed, pred, np.arange(80)))
    assert s.order_ is not order and len(count_builds) == 2
    assert embedding_digest(changed) != embedding_digest(emb)
    assert embedding_digest(emb) == embedding_digest(emb.copy())


def test_above_max_nodes_no_square_array_and_exact_fallback(caplog, count_builds):
    emb = unit_rows(60, 4, seed=3)
    pred = np.random.default_rng(3).integers(0, 3, 60)
    space = SearchSpace(emb, pred, np.arange(60))
    with caplog.at_level(logging.INFO, logger="gnnaudit.audit.search.sorted_scan"):
        s = SortedSimilaritySearcher(max_nodes=59).build(space)
    assert "max_nodes=59" in caplog.text
    assert s.order_ is None and not s.uses_sorted_order and len(count_builds) == 0
    assert isinstance(s.fallback_, ExactSearcher)
    assert_same_answers(s, ExactSearcher().build(space), space, k=6)
    twin = s.with_predictions(pred[::-1].copy())
    assert twin.order_ is None and len(count_builds) == 0
    assert_same_answers(twin, ExactSearcher().build(twin.space_), twin.space_, k=6)
    # at the cap the order is built
    at_cap = SortedSimilaritySearcher(max_nodes=60).build(space)
    assert at_cap.uses_sorted_order and at_cap.fallback_ is None
    assert SortedSimilaritySearcher().max_nodes == DEFAULT_MAX_NODES == 4000


@pytest.mark.parametrize(("m", "dtype"), [(200, np.uint8), (300, np.uint16)])
def test_order_memory(m, dtype):
    s = SortedSimilaritySearcher().build(space_of(unit_rows(m, 3, seed=4), np.arange(m) % 2))
    assert s.order_.order.dtype == dtype and s.order_.order.shape == (m, m)
    assert s.order_.nbytes == m * m * (4 + np.dtype(dtype).itemsize)
    # each row is a permutation sorted by (similarity desc, column asc)
    emb = s.space_.embedding
    sims = emb @ emb.T
    rows = np.arange(m)[:, None]
    np.testing.assert_array_equal(np.sort(s.order_.order, axis=1), np.broadcast_to(rows.T, (m, m)))
    srt = sims[rows, s.order_.order]
    assert (np.diff(srt, axis=1) <= 1e-6).all()
    np.testing.assert_allclose(s.order_.similarity, srt, atol=1e-6)


def test_rare_class_grows_the_scan_window_and_tiny_blocks_change_nothing():
    # rows of the common class find their few candidates deep in their order
    emb = unit_rows(400, 4, seed=5)
    pred = (np.random.default_rng(5).random(400) < 0.02).astype(np.int64)
    space = space_of(emb, pred)
    exact = ExactSearcher().build(space)
    for block in (16, 1024, 64 * 2**20):  # 16 bytes: one row per block and per scan step
        s = SortedSimilaritySearcher(block_bytes=block).build(space)
        for k in (1, 3, 10, 50):
            assert_same_answers(s, exact, space, k)
    sim, pos = positions(s, s.local(np.arange(400), 12))
    ref_s, ref_p = brute_local(emb, pred, np.arange(400), 12)
    np.testing.assert_array_equal(pos, ref_p)
    np.testing.assert_allclose(sim, ref_s, atol=1e-6)


@pytest.mark.parametrize("k", [1, 16, 17, 100, 3000, 10**6])
def test_global_pairs_for_any_k(k):
    # entries in {-1, -1/2, 0, 1/2, 1}: every product is exact in float32, and duplicated
    # rows make many exact ties, which the tie rule (smaller (u, v)) must order
    rng = np.random.default_rng(6)
    emb = (rng.integers(-2, 3, size=(90, 3)) / 2).astype(np.float32)
    emb[40:60] = emb[10:30]
    pred = rng.integers(0, 3, 90)
    s = SortedSimilaritySearcher().build(space_of(emb, pred, id_stride=3))
    g_s, g_u, g_v = pair_positions(s, s.global_pairs(k))
    gs, gu, gv = brute_global(emb, pred, k)
    np.testing.assert_array_equal(g_s, gs)
    np.testing.assert_array_equal(g_u, gu)
    np.testing.assert_array_equal(g_v, gv)


def test_single_class_and_single_node():
    emb = unit_rows(5, 3, seed=7)
    s = SortedSimilaritySearcher().build(space_of(emb, np.zeros(5, dtype=np.int64)))
    res = s.local(np.arange(5), 3)
    assert (res.evidence == -1).all() and np.isneginf(res.similarity).all()
    assert len(s.global_pairs(4)) == 0
    one = SortedSimilaritySearcher().build(space_of(emb[:1], np.zeros(1, dtype=np.int64)))
    assert (one.local(np.array([0]), 2).evidence == -1).all()
    assert len(one.global_pairs(1)) == 0


def test_bad_arguments():
    emb = unit_rows(10, 3, seed=8)
    space = space_of(emb, np.arange(10) % 2)
    with pytest.raises(NotFittedError):
        SortedSimilaritySearcher().local(np.array([0]), 1)
    with pytest.raises(NotFittedError):
        SortedSimilaritySearcher().with_predictions(np.zeros(10, dtype=np.int64))
    with pytest.raises(InvalidInputError, match="max_nodes"):
        SortedSimilaritySearcher(max_nodes=-1).build(space)
    with pytest.raises(InvalidInputError, match="block_bytes"):
        SortedSimilaritySearcher(block_bytes=2.5).build(space)
    s = SortedSimilaritySearcher().build(space)
    with pytest.raises(InvalidInputError, match="predictions"):
        s.with_predictions(np.zeros(9, dtype=np.int64))
    with pytest.raises(InvalidInputError, match="predictions"):
        s.with_predictions(np.zeros(10) + 0.5)
    with pytest.raises(InvalidInputError, match="queries"):
        s.local(np.array([10]), 2)
    with pytest.raises(InvalidInputError, match="k must"):
        s.global_pairs(0)
    bad = SearchSpace(np.full((3, 2), np.inf, np.float32), np.zeros(3, np.int64), np.arange(3))
    with pytest.raises(InvalidInputError, match="embedding"):
        SortedSimilaritySearcher().build(bad)


def test_wired_as_counterfactual_evidence_backend():
    import torch
    from torch_geometric.data import Data

    rng = np.random.default_rng(9)
    data = Data(
        x=torch.tensor(rng.normal(size=(70, 4)), dtype=torch.float32),
        edge_index=torch.tensor(rng.integers(0, 70, size=(2, 200))),
        test_mask=torch.tensor(rng.random(70) < 0.7),
    )
    pred = rng.integers(0, 3, 70)
    exact = CounterfactualEvidence().fit(data, predictions=pred)
    fast = CounterfactualEvidence(backend="sorted").fit(data, predictions=pred)
    assert isinstance(fast.searcher_, SortedSimilaritySearcher) and fast.searcher_.uses_sorted_order
    nodes = exact.node_ids_[::3]
    pd.testing.assert_frame_equal(fast.local_evidence(nodes, k=6), exact.local_evidence(nodes, k=6))
    pd.testing.assert_frame_equal(fast.global_evidence(k=25), exact.global_evidence(k=25))
    capped = CounterfactualEvidence(backend="sorted", index_params={"max_nodes": 10})
    capped.fit(data, predictions=pred)
    assert not capped.searcher_.uses_sorted_order
    pd.testing.assert_frame_equal(capped.global_evidence(k=25), exact.global_evidence(k=25))
    with pytest.raises(InvalidInputError, match="index_params"):
        CounterfactualEvidence(backend="sorted", index_params={"n_clusters": 3}).fit(
            data, predictions=pred
        )
