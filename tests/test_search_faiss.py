"""faiss backend (``FaissSearcher``) against a numpy brute force."""

from __future__ import annotations

import numpy as np
import pytest
from search_oracles import (
    assert_valid,
    brute_global,
    brute_local,
    clustered,
    pair_positions,
    positions,
    recall,
    space_of,
)

from gnnaudit.audit.search.faiss_search import FaissSearcher
from gnnaudit.errors import InvalidInputError, NotFittedError

pytestmark = pytest.mark.usefixtures("faiss_one_thread")


@pytest.fixture(scope="module")
def data():
    return clustered(m=3000, d=32, n_centres=20, n_classes=3, seed=0)


@pytest.mark.parametrize(
    "params", [{"index_type": "hnsw"}, {"index_type": "ivf"}, {"index_type": "ivf", "nlist": 8}]
)
def test_local_valid_and_recall(data, params) -> None:
    x, pred = data
    s = FaissSearcher(random_state=0, **params).build(space_of(x, pred))
    assert all(kind != "flat" for kind in s.index_kinds_)
    q = np.arange(0, x.shape[0], 2)
    sim, pos = positions(s, s.local(q, 10))
    assert_valid(x, pred, q, sim, pos, 10)
    _, ref = brute_local(x, pred, q, 10)
    assert recall(pos, ref) >= 0.95


def test_flat_is_exact_local_and_global(data) -> None:
    x, pred = data
    x, pred = x[:600], pred[:600]
    s = FaissSearcher(index_type="flat").build(space_of(x, pred))
    q = np.arange(0, 600, 5)
    sim, pos = positions(s, s.local(q, 7))
    ref_s, ref_p = brute_local(x, pred, q, 7)
    np.testing.assert_array_equal(pos, ref_p)
    np.testing.assert_allclose(sim, ref_s, atol=1e-9)
    g_s, g_u, g_v = pair_positions(s, s.global_pairs(30))
    gs, gu, gv = brute_global(x, pred, 30)
    np.testing.assert_array_equal(g_u, gu)
    np.testing.assert_array_equal(g_v, gv)
    np.testing.assert_allclose(g_s, gs, atol=1e-9)


def test_global_pairs_hnsw(data) -> None:
    x, pred = data
    s = FaissSearcher(random_state=0).build(space_of(x, pred))
    g_s, g_u, g_v = pair_positions(s, s.global_pairs(50))
    assert (g_u < g_v).all() and (pred[g_u] != pred[g_v]).all()
    assert (np.diff(g_s) <= 0).all()
    assert len(set(zip(g_u.tolist(), g_v.tolist(), strict=True))) == 50
    _, gu, gv = brute_global(x, pred, 50)
    ref = set(zip(gu.tolist(), gv.tolist(), strict=True))
    assert len(ref & set(zip(g_u.tolist(), g_v.tolist(), strict=True))) / 50 >= 0.95


def test_small_classes_fall_back_to_flat_and_pad() -> None:
    x, pred = clustered(m=1200, d=16, n_centres=8, n_classes=2, seed=4)
    pred[:] = 0
    pred[:12] = 1  # a 12-node class
    s = FaissSearcher(index_type="ivf", nlist=64, random_state=0).build(space_of(x, pred))
    assert s.index_kinds_[1] == "flat"
    assert s.index_kinds_[0] == f"ivf{1188 // 39}"  # nlist capped at n // 39
    q = np.arange(0, 1200, 7)
    sim, pos = positions(s, s.local(q, 15))
    n_valid = (pos >= 0).sum(axis=1)
    np.testing.assert_array_equal(n_valid, np.where(pred[q] == 0, 12, 15))
    assert_valid(x, pred, q, sim, pos, 15)
    # an IVF probe of one list may hold fewer than k points: the exact fallback fills up
    s1 = FaissSearcher(index_type="ivf", nlist=30, nprobe=1, random_state=0).build(
        space_of(x, pred)
    )
    sim, pos = positions(s1, s1.local(np.arange(12), 100))
    assert (pos >= 0).all()
    assert_valid(x, pred, np.arange(12), sim, pos, 100)


def test_ties_zero_rows_single_class() -> None:
    x = np.zeros((300, 4), dtype=np.float32)
    x[:, 0] = 1.0
    x[7] = 0.0
    pred = np.arange(300) % 2
    s = FaissSearcher(index_type="flat").build(space_of(x, pred))
    _, pos = positions(s, s.local(np.array([0, 7]), 3))
    np.testing.assert_array_equal(pos[0], [1, 3, 5])
    np.testing.assert_array_equal(pos[1], [0, 2, 4])
    s = FaissSearcher().build(space_of(x[:20], np.zeros(20, dtype=np.int64)))
    res = s.local(np.array([0, 1]), 4)
    assert res.evidence.shape == (2, 4)
    assert (res.evidence == -1).all() and np.isneginf(res.similarity).all()
    assert len(s.global_pairs(2)) == 0


@pytest.mark.parametrize("params", [{"index_type": "hnsw"}, {"index_type": "ivf"}])
def test_deterministic(data, params) -> None:
    x, pred = data
    sp = space_of(x, pred)
    q = np.arange(0, 3000, 3)
    a = FaissSearcher(random_state=3, **params).build(sp).local(q, 10)
    b = FaissSearcher(random_state=3, **params).build(sp).local(q, 10)
    np.testing.assert_array_equal(a.evidence, b.evidence)
    np.testing.assert_array_equal(a.similarity, b.similarity)


def test_parameters_change_the_search(data) -> None:
    x, pred = data
    sp = space_of(x, pred)
    q = np.arange(0, 3000, 3)
    _, ref = brute_local(x, pred, q, 10)
    lo = FaissSearcher(index_type="ivf", nlist=60, nprobe=1, random_state=0).build(sp)
    hi = FaissSearcher(index_type="ivf", nlist=60, nprobe=60, random_state=0).build(sp)
    r_lo = recall(positions(lo, lo.local(q, 10))[1], ref)
    r_hi = recall(positions(hi, hi.local(q, 10))[1], ref)
    assert r_hi == pytest.approx(1.0)
    assert r_lo < r_hi


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"index_type": "lsh"}, "index_type"),
        ({"M": 1}, "M"),
        ({"ef_search": 0}, "ef_search"),
        ({"ef_construction": "x"}, "ef_construction"),
        ({"nlist": 0}, "nlist"),
        ({"nprobe": 0}, "nprobe"),
    ],
)
def test_bad_index_params(data, params, key) -> None:
    x, pred = data
    with pytest.raises(InvalidInputError, match=key):
        FaissSearcher(**params).build(space_of(x[:50], pred[:50]))


def test_unknown_key_and_bad_calls(data) -> None:
    with pytest.raises(InvalidInputError, match="efSearch"):
        FaissSearcher(efSearch=10)
    with pytest.raises(NotFittedError):
        FaissSearcher().global_pairs(3)
    x, pred = data
    s = FaissSearcher(index_type="flat").build(space_of(x[:100], pred[:100]))
    with pytest.raises(InvalidInputError, match="queries"):
        s.local(np.array([-1]), 2)
    with pytest.raises(InvalidInputError, match="k"):
        s.global_pairs(0)
    with pytest.raises(InvalidInputError, match="random_state"):
        FaissSearcher(random_state=-2).build(space_of(x[:100], pred[:100]))


@pytest.mark.parametrize("k", [1, 16, 17, 100, 3000])
def test_flat_global_exact_for_any_k(k) -> None:
    # duplicated rows make many equal similarities: the tie rule decides the order
    x, pred = clustered(m=150, d=6, n_centres=4, n_classes=3, seed=9)
    x[50:80] = x[20:50]
    s = FaissSearcher(index_type="flat").build(space_of(x, pred))
    g_s, g_u, g_v = pair_positions(s, s.global_pairs(k))
    gs, gu, gv = brute_global(x, pred, k)
    assert g_s.size == gs.size  # every pair when k exceeds them, no padding
    np.testing.assert_allclose(g_s, gs, atol=1e-9)
    np.testing.assert_array_equal(g_u, gu)
    np.testing.assert_array_equal(g_v, gv)


@pytest.mark.parametrize("index_type", ["hnsw", "ivf", "flat"])
def test_single_query_path_matches_batched(data, index_type) -> None:
    x, pred = data
    s = FaissSearcher(index_type=index_type, random_state=0).build(space_of(x, pred))
    q = np.arange(0, x.shape[0], 17)
    batch = s.local(q, 10)
    for i, v in enumerate(q):
        one = s.local(np.array([v]), 10)
        np.testing.assert_array_equal(one.evidence[0], batch.evidence[i])
        np.testing.assert_allclose(one.similarity[0], batch.similarity[i], atol=1e-12)
    # fewer candidates than k: padded identically
    one = s.local(np.array([3]), 5000)
    np.testing.assert_array_equal(one.evidence, s.local(np.array([3, 4]), 5000).evidence[:1])
