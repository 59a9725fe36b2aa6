"""LocalCE-I index backend (``IndexSearcher``) against a numpy brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gnnaudit.audit.search_base import SearchSpace
from gnnaudit.audit.search_index import IndexSearcher
from gnnaudit.errors import InvalidInputError, NotFittedError


def brute_local(x: np.ndarray, pred: np.ndarray, q: np.ndarray, k: int):
    s = x[q].astype(np.float64) @ x.T.astype(np.float64)
    s[pred[q][:, None] == pred[None, :]] = -np.inf
    cols = np.broadcast_to(np.arange(x.shape[0]), s.shape)
    order = np.lexsort((cols, -s), axis=1)[:, :k]
    sim = np.take_along_axis(s, order, axis=1)
    pos = np.where(np.isfinite(sim), order, -1)
    return sim, pos


def brute_global(x: np.ndarray, pred: np.ndarray, k: int):
    s = x.astype(np.float64) @ x.T.astype(np.float64)
    u, v = np.triu_indices(x.shape[0], 1)
    keep = pred[u] != pred[v]
    u, v, sv = u[keep], v[keep], s[u[keep], v[keep]]
    order = np.lexsort((v, u, -sv))[:k]
    return sv[order], u[order], v[order]


def clustered(m: int, d: int, n_centres: int, n_classes: int, seed: int, spread: float = 0.6):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_centres, d))
    lab = rng.integers(0, n_centres, m)
    x = centres[lab] + spread * rng.standard_normal((m, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    flip = rng.random(m) < 0.3
    pred = np.where(flip, rng.integers(0, n_classes, m), lab % n_classes)
    return x.astype(np.float32), pred.astype(np.int64)


def space_of(x: np.ndarray, pred: np.ndarray) -> SearchSpace:
    return SearchSpace(
        embedding=x.astype(np.float32),
        predictions=pred.astype(np.int64),
        node_ids=np.arange(x.shape[0], dtype=np.int64) * 3 + 1,
    )


def recall(pos: np.ndarray, ref: np.ndarray) -> float:
    hits = [
        len(set(a[a >= 0]) & set(b[b >= 0])) / max(1, (b >= 0).sum())
        for a, b in zip(pos, ref, strict=True)
    ]
    return float(np.mean(hits))


def assert_valid(x, pred, q, sim, pos, k):
    assert sim.shape == pos.shape == (q.size, k)
    for i, qi in enumerate(q):
        p = pos[i][pos[i] >= 0]
        assert (pos[i][: p.size] >= 0).all(), "padding must come last"
        assert np.isneginf(sim[i][p.size :]).all()
        assert qi not in p
        assert (pred[p] != pred[qi]).all()
        assert len(set(p.tolist())) == p.size
        s = sim[i][: p.size]
        assert (np.diff(s) <= 0).all()
        np.testing.assert_allclose(s, x[p].astype(np.float64) @ x[qi].astype(np.float64), atol=1e-6)


@pytest.fixture(scope="module")
def data():
    return clustered(m=1500, d=32, n_centres=12, n_classes=3, seed=0)


@pytest.fixture(scope="module")
def built(data):
    x, pred = data
    return IndexSearcher(random_state=0, n_partitions=20).build(space_of(x, pred))


def test_local_valid_and_high_recall(data, built) -> None:
    x, pred = data
    q = np.arange(0, x.shape[0], 3)
    res = built.local(q, 10)
    assert_valid(x, pred, q, res.similarity, res.position, 10)
    _, ref = brute_local(x, pred, q, 10)
    assert recall(res.position, ref) >= 0.9


def test_supplementary_partitions_beat_a_single_partition() -> None:
    # many overlapping blobs: one 10-cluster partition cuts through them
    x, pred = clustered(m=2000, d=32, n_centres=40, n_classes=3, seed=1, spread=1.0)
    q = np.arange(x.shape[0])
    _, ref = brute_local(x, pred, q, 10)
    full = IndexSearcher(random_state=1, n_partitions=20).build(space_of(x, pred))
    one = IndexSearcher(random_state=1, supplementary=False).build(space_of(x, pred))
    r_full = recall(full.local(q, 10).position, ref)
    r_one = recall(one.local(q, 10).position, ref)
    assert r_full > r_one + 0.03


def test_margin_entry_rule(data) -> None:
    # well separated blobs: the paper's closest-centroid rule prefers partitions that split a
    # blob; the margin rule does not
    x, pred = data
    q = np.arange(x.shape[0])
    _, ref = brute_local(x, pred, q, 10)
    paper = IndexSearcher(random_state=1, n_partitions=30).build(space_of(x, pred))
    margin = IndexSearcher(random_state=1, n_partitions=30, entry="margin").build(space_of(x, pred))
    np.testing.assert_array_equal(paper.labels_, margin.labels_)  # same partitions
    r_margin = recall(margin.local(q, 10).position, ref)
    assert r_margin >= 0.99
    assert r_margin >= recall(paper.local(q, 10).position, ref)


def test_full_probe_is_exact(data) -> None:
    x, pred = data
    s = IndexSearcher(random_state=0, n_partitions=3, n_probe=10).build(space_of(x, pred))
    q = np.arange(0, x.shape[0], 7)
    res = s.local(q, 5)
    ref_s, ref_p = brute_local(x, pred, q, 5)
    np.testing.assert_array_equal(res.position, ref_p)
    np.testing.assert_allclose(res.similarity, ref_s, atol=1e-9)
    g = s.global_pairs(25)
    gs, gu, gv = brute_global(x, pred, 25)
    np.testing.assert_array_equal(g.u, gu)
    np.testing.assert_array_equal(g.v, gv)
    np.testing.assert_allclose(g.similarity, gs, atol=1e-9)


def test_global_pairs_valid(data, built) -> None:
    x, pred = data
    g = built.global_pairs(40)
    assert g.similarity.shape == g.u.shape == g.v.shape == (40,)
    assert (g.u < g.v).all()
    assert (pred[g.u] != pred[g.v]).all()
    assert len(set(zip(g.u.tolist(), g.v.tolist(), strict=True))) == 40
    assert (np.diff(g.similarity) <= 0).all()
    _, gu, gv = brute_global(x, pred, 40)
    found = set(zip(g.u.tolist(), g.v.tolist(), strict=True))
    assert len(found & set(zip(gu.tolist(), gv.tolist(), strict=True))) / 40 >= 0.9


def test_k_results_with_tiny_clusters_and_padding() -> None:
    x, pred = clustered(m=120, d=8, n_centres=6, n_classes=2, seed=3)
    pred[:] = 0
    pred[::10] = 1  # 12 nodes of class 1
    s = IndexSearcher(random_state=0, n_clusters=40, n_partitions=5).build(space_of(x, pred))
    q = np.arange(120)
    res = s.local(q, 10)
    assert (res.position >= 0).all()  # every query has >= 10 candidates
    assert_valid(x, pred, q, res.similarity, res.position, 10)
    res = s.local(q, 15)
    n_valid = (res.position >= 0).sum(axis=1)
    np.testing.assert_array_equal(n_valid, np.where(pred == 0, 12, 15))
    assert_valid(x, pred, q, res.similarity, res.position, 15)
    g = s.global_pairs(10_000)  # more than the 12 * 108 pairs that exist
    assert (g.u >= 0).sum() == 12 * 108
    assert np.isneginf(g.similarity[12 * 108 :]).all()


def test_ties_prefer_smaller_position_and_zero_rows() -> None:
    x = np.zeros((10, 4), dtype=np.float32)
    x[:, 0] = 1.0  # all identical
    x[7] = 0.0  # a zero row
    pred = np.array([0, 1, 0, 1, 0, 1, 0, 1, 0, 1])
    s = IndexSearcher(random_state=0, n_clusters=3, n_partitions=4).build(space_of(x, pred))
    res = s.local(np.array([0, 1, 7]), 3)
    np.testing.assert_array_equal(res.position[0], [1, 3, 5])
    np.testing.assert_array_equal(res.position[1], [0, 2, 4])
    np.testing.assert_array_equal(res.position[2], [0, 2, 4])
    np.testing.assert_allclose(res.similarity[2], 0.0)


def test_single_class_returns_padding() -> None:
    x, _ = clustered(m=50, d=5, n_centres=3, n_classes=1, seed=0)
    s = IndexSearcher(random_state=0).build(space_of(x, np.zeros(50, dtype=np.int64)))
    res = s.local(np.array([0, 1]), 4)
    assert (res.position == -1).all() and np.isneginf(res.similarity).all()
    assert (s.global_pairs(3).u == -1).all()


def test_ablation_switches_change_the_build() -> None:
    x, pred = clustered(m=400, d=3, n_centres=8, n_classes=2, seed=5, spread=0.8)
    sp = space_of(x, pred)
    w = IndexSearcher(random_state=0, n_partitions=6).build(sp)
    u = IndexSearcher(random_state=0, n_partitions=6, weighted=False).build(sp)
    one = IndexSearcher(random_state=0, n_partitions=6, supplementary=False).build(sp)
    assert w.labels_.shape == (6, 400) and one.labels_.shape == (1, 400)
    np.testing.assert_array_equal(w.labels_[0], u.labels_[0])  # same first round
    assert not np.array_equal(w.labels_, u.labels_)
    assert ((w.node_weights_ >= 0) & (w.node_weights_ <= 1)).all()
    assert w.node_weights_.std() > 0.05  # weights are informative in low dimension
    # the index entry is the partition with the smallest weight
    np.testing.assert_array_equal(w.entry_weight_, w.node_weights_.min(axis=0))


def test_deterministic_given_random_state(data) -> None:
    x, pred = data
    sp = space_of(x, pred)
    a = IndexSearcher(random_state=7, n_partitions=5).build(sp)
    b = IndexSearcher(random_state=7, n_partitions=5).build(sp)
    c = IndexSearcher(random_state=8, n_partitions=5).build(sp)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.centroids_, b.centroids_)
    q = np.arange(0, 1500, 11)
    np.testing.assert_array_equal(a.local(q, 5).position, b.local(q, 5).position)
    assert not np.array_equal(a.labels_, c.labels_)


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"n_clusters": 0}, "n_clusters"),
        ({"n_partitions": 2.5}, "n_partitions"),
        ({"theta": 4.0}, "theta"),
        ({"theta": 0.0}, "theta"),
        ({"weighted": "yes"}, "weighted"),
        ({"supplementary": 1}, "supplementary"),
        ({"n_iter": 0}, "n_iter"),
        ({"n_probe": -1}, "n_probe"),
        ({"entry": "closest"}, "entry"),
    ],
)
def test_bad_index_params(data, params, key) -> None:
    x, pred = data
    with pytest.raises(InvalidInputError, match=key):
        IndexSearcher(random_state=0, **params).build(space_of(x[:50], pred[:50]))


def test_unknown_key_and_bad_calls(built) -> None:
    with pytest.raises(InvalidInputError, match="n_cluster"):
        IndexSearcher(n_cluster=3)
    with pytest.raises(NotFittedError):
        IndexSearcher().local(np.array([0]), 3)
    with pytest.raises(InvalidInputError, match="k"):
        built.local(np.array([0]), 0)
    with pytest.raises(InvalidInputError, match="queries"):
        built.local(np.array([1500]), 3)
    with pytest.raises(InvalidInputError, match="queries"):
        built.local(np.array([0.5]), 3)
    bad = SearchSpace(np.full((3, 2), np.nan, np.float32), np.zeros(3, np.int64), np.arange(3))
    with pytest.raises(InvalidInputError, match="embedding"):
        IndexSearcher().build(bad)


def test_theta_above_half_pi_and_high_dimension() -> None:
    x, pred = clustered(m=300, d=600, n_centres=5, n_classes=2, seed=2)
    s = IndexSearcher(random_state=0, theta=2 * math.pi / 3, n_partitions=4).build(
        space_of(x, pred)
    )
    assert np.isfinite(s.node_weights_).all()
    res = s.local(np.arange(300), 3)
    assert_valid(x, pred, np.arange(300), res.similarity, res.position, 3)
