"""LocalCE-I index backend (``IndexSearcher``) against a numpy brute force."""

from __future__ import annotations

import math

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

from gnnaudit.audit.search.base import SearchSpace
from gnnaudit.audit.search.index import IndexSearcher
from gnnaudit.errors import InvalidInputError, NotFittedError


def space_of_ids(x, pred):
    return space_of(x, pred, id_stride=3)


@pytest.fixture(scope="module")
def data():
    return clustered(m=1500, d=32, n_centres=12, n_classes=3, seed=0)


@pytest.fixture(scope="module")
def built(data):
    x, pred = data
    return IndexSearcher(random_state=0, n_partitions=20).build(space_of_ids(x, pred))


def test_local_valid_and_high_recall(data, built) -> None:
    x, pred = data
    q = np.arange(0, x.shape[0], 3)
    sim, pos = positions(built, built.local(q, 10))
    assert_valid(x, pred, q, sim, pos, 10)
    _, ref = brute_local(x, pred, q, 10)
    assert recall(pos, ref) >= 0.9


def test_supplementary_partitions_beat_a_single_partition() -> None:
    # many overlapping blobs: one 10-cluster partition cuts through them
    x, pred = clustered(m=2000, d=32, n_centres=40, n_classes=3, seed=1, spread=1.0)
    q = np.arange(x.shape[0])
    _, ref = brute_local(x, pred, q, 10)
    # the paper's query rule (one cluster per query): the ablation is about the partitions
    full = IndexSearcher(random_state=1, n_partitions=20, max_probe=1).build(space_of_ids(x, pred))
    one = IndexSearcher(random_state=1, supplementary=False, max_probe=1).build(
        space_of_ids(x, pred)
    )
    r_full = recall(positions(full, full.local(q, 10))[1], ref)
    r_one = recall(positions(one, one.local(q, 10))[1], ref)
    assert r_full > r_one + 0.03


def test_margin_entry_rule(data) -> None:
    # well separated blobs: the paper's closest-centroid rule prefers partitions that split a
    # blob; the margin rule does not
    x, pred = data
    q = np.arange(x.shape[0])
    _, ref = brute_local(x, pred, q, 10)
    kw = {"random_state": 1, "n_partitions": 30, "max_probe": 1}
    paper = IndexSearcher(**kw).build(space_of_ids(x, pred))
    margin = IndexSearcher(entry="margin", **kw).build(space_of_ids(x, pred))
    np.testing.assert_array_equal(paper.labels_, margin.labels_)  # same partitions
    r_margin = recall(positions(margin, margin.local(q, 10))[1], ref)
    assert r_margin >= 0.99
    assert r_margin >= recall(positions(paper, paper.local(q, 10))[1], ref)


def test_full_probe_is_exact(data) -> None:
    x, pred = data
    s = IndexSearcher(random_state=0, n_partitions=3, n_probe=10).build(space_of_ids(x, pred))
    q = np.arange(0, x.shape[0], 7)
    sim, pos = positions(s, s.local(q, 5))
    ref_s, ref_p = brute_local(x, pred, q, 5)
    np.testing.assert_array_equal(pos, ref_p)
    np.testing.assert_allclose(sim, ref_s, atol=1e-9)
    g_s, g_u, g_v = pair_positions(s, s.global_pairs(25))
    gs, gu, gv = brute_global(x, pred, 25)
    np.testing.assert_array_equal(g_u, gu)
    np.testing.assert_array_equal(g_v, gv)
    np.testing.assert_allclose(g_s, gs, atol=1e-9)


def test_global_pairs_valid(data, built) -> None:
    x, pred = data
    g = built.global_pairs(40)
    assert len(g) == 40
    g_s, g_u, g_v = pair_positions(built, g)
    assert (g_u < g_v).all()
    assert (pred[g_u] != pred[g_v]).all()
    np.testing.assert_array_equal(g.pred_u, pred[g_u])
    assert len(set(zip(g_u.tolist(), g_v.tolist(), strict=True))) == 40
    assert (np.diff(g_s) <= 0).all()
    _, gu, gv = brute_global(x, pred, 40)
    found = set(zip(g_u.tolist(), g_v.tolist(), strict=True))
    assert len(found & set(zip(gu.tolist(), gv.tolist(), strict=True))) / 40 >= 0.9


def test_k_results_with_tiny_clusters_and_padding() -> None:
    x, pred = clustered(m=120, d=8, n_centres=6, n_classes=2, seed=3)
    pred[:] = 0
    pred[::10] = 1  # 12 nodes of class 1
    s = IndexSearcher(random_state=0, n_clusters=40, n_partitions=5).build(space_of_ids(x, pred))
    q = np.arange(120)
    sim, pos = positions(s, s.local(q, 10))
    assert (pos >= 0).all()  # every query has >= 10 candidates
    assert_valid(x, pred, q, sim, pos, 10)
    res = s.local(q, 15)
    sim, pos = positions(s, res)
    n_valid = (pos >= 0).sum(axis=1)
    np.testing.assert_array_equal(n_valid, np.where(pred == 0, 12, 15))
    np.testing.assert_array_equal(res.valid, pos >= 0)
    assert_valid(x, pred, q, sim, pos, 15)
    g = s.global_pairs(10_000)  # more than the 12 * 108 pairs that exist: no padding
    assert len(g) == 12 * 108 and np.isfinite(g.similarity).all()


def test_ties_prefer_smaller_position_and_zero_rows() -> None:
    x = np.zeros((10, 4), dtype=np.float32)
    x[:, 0] = 1.0  # all identical
    x[7] = 0.0  # a zero row
    pred = np.array([0, 1, 0, 1, 0, 1, 0, 1, 0, 1])
    s = IndexSearcher(random_state=0, n_clusters=3, n_partitions=4).build(space_of_ids(x, pred))
    sim, pos = positions(s, s.local(np.array([0, 1, 7]), 3))
    np.testing.assert_array_equal(pos[0], [1, 3, 5])
    np.testing.assert_array_equal(pos[1], [0, 2, 4])
    np.testing.assert_array_equal(pos[2], [0, 2, 4])
    np.testing.assert_allclose(sim[2], 0.0)


def test_single_class_returns_padding() -> None:
    x, _ = clustered(m=50, d=5, n_centres=3, n_classes=1, seed=0)
    s = IndexSearcher(random_state=0).build(space_of_ids(x, np.zeros(50, dtype=np.int64)))
    res = s.local(np.array([0, 1]), 4)
    assert res.evidence.shape == (2, 4)
    assert (res.evidence == -1).all() and np.isneginf(res.similarity).all()
    assert len(s.global_pairs(3)) == 0


def test_ablation_switches_change_the_build() -> None:
    x, pred = clustered(m=400, d=3, n_centres=8, n_classes=2, seed=5, spread=0.8)
    sp = space_of_ids(x, pred)
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
    sp = space_of_ids(x, pred)
    a = IndexSearcher(random_state=7, n_partitions=5).build(sp)
    b = IndexSearcher(random_state=7, n_partitions=5).build(sp)
    c = IndexSearcher(random_state=8, n_partitions=5).build(sp)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.centroids_, b.centroids_)
    q = np.arange(0, 1500, 11)
    np.testing.assert_array_equal(a.local(q, 5).evidence, b.local(q, 5).evidence)
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
        ({"max_probe": 0}, "max_probe"),
        ({"entry": "closest"}, "entry"),
    ],
)
def test_bad_index_params(data, params, key) -> None:
    x, pred = data
    with pytest.raises(InvalidInputError, match=key):
        IndexSearcher(random_state=0, **params).build(space_of_ids(x[:50], pred[:50]))


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
        space_of_ids(x, pred)
    )
    assert np.isfinite(s.node_weights_).all()
    sim, pos = positions(s, s.local(np.arange(300), 3))
    assert_valid(x, pred, np.arange(300), sim, pos, 3)


# ------------------------------------------------------------- bound-based multi-probe
def test_certified_answers_equal_brute_force(data, built) -> None:
    # well separated blobs: the cap bound stops most queries before max_probe; every query
    # it certifies must have exactly the brute-force answer
    x, pred = data
    q = np.arange(x.shape[0])
    res = built.local(q, 10)
    sim, pos = positions(built, res)
    ref_s, ref_p = brute_local(x, pred, q, 10)
    cert = res.certified
    assert cert.mean() >= 0.3
    np.testing.assert_array_equal(pos[cert], ref_p[cert])
    np.testing.assert_allclose(sim[cert], ref_s[cert], atol=1e-9)
    assert (res.n_probed >= 1).all() and (res.n_probed <= built.max_probe).all()


def test_unbounded_probe_is_exact_and_certified() -> None:
    # max_probe = n_clusters: the search only stops by the bound (or after every cluster)
    x, pred = clustered(m=800, d=16, n_centres=10, n_classes=3, seed=6, spread=1.2)
    s = IndexSearcher(random_state=0, n_partitions=8, max_probe=10).build(space_of_ids(x, pred))
    q = np.arange(800)
    res = s.local(q, 7)
    sim, pos = positions(s, res)
    ref_s, ref_p = brute_local(x, pred, q, 7)
    assert res.certified.all()
    np.testing.assert_array_equal(pos, ref_p)
    np.testing.assert_allclose(sim, ref_s, atol=1e-9)
    assert res.n_probed.mean() < 10  # the bound did prune clusters


def test_single_query_path_matches_batched(data, built) -> None:
    x, _ = data
    q = np.arange(0, x.shape[0], 13)
    batch = built.local(q, 10)
    for i, v in enumerate(q):
        one = built.local(np.array([v]), 10)
        np.testing.assert_array_equal(one.evidence[0], batch.evidence[i])
        np.testing.assert_allclose(one.similarity[0], batch.similarity[i], atol=1e-12)
        assert one.n_probed[0] == batch.n_probed[i]
        assert one.certified[0] == batch.certified[i]


def test_recall_floor_on_weakly_clustered_data() -> None:
    # Cora-like: 7 overlapping classes; the paper's one-cluster rule has low recall, the
    # default multi-probe (max_probe=7) keeps recall@10 >= 0.9
    x, pred = clustered(m=700, d=64, n_centres=7, n_classes=7, seed=4, spread=2.0)
    q = np.arange(700)
    _, ref = brute_local(x, pred, q, 10)
    default = IndexSearcher(random_state=0).build(space_of_ids(x, pred)).local(q, 10)
    ps = IndexSearcher(random_state=0, max_probe=1).build(space_of_ids(x, pred))
    paper = ps.local(q, 10)
    assert recall(positions(ps, default)[1], ref) >= 0.9
    assert recall(positions(ps, paper)[1], ref) < 0.8
    # the paper's rule leaves the entry cluster only when it holds fewer than k candidates
    n_entry = ps.n_candidates_[ps.entry_partition_, ps.entry_cluster_, ps.class_index_]
    np.testing.assert_array_equal(paper.n_probed > 1, n_entry < 10)


@pytest.mark.parametrize(("d", "seed", "k"), [(2, 0, 5), (3, 1, 10), (8, 2, 3), (64, 3, 10)])
def test_bound_and_annulus_never_drop_an_answer(d, seed, k) -> None:
    # no probe cap: the cap bound and the annulus are the only pruning, so the answer must
    # be the brute force's in every dimension (low d: wide spread of member angles)
    x, pred = clustered(m=600, d=d, n_centres=9, n_classes=4, seed=seed, spread=0.8)
    s = IndexSearcher(random_state=seed, n_partitions=4, max_probe=10).build(space_of_ids(x, pred))
    q = np.arange(600)
    res = s.local(q, k)
    sim, pos = positions(s, res)
    ref_s, ref_p = brute_local(x, pred, q, k)
    np.testing.assert_allclose(sim, ref_s, atol=1e-9)
    np.testing.assert_array_equal(pos, ref_p)
    assert res.certified.all()
    one = s.local(q[::50], k)  # a smaller batch (12 queries) ...
    np.testing.assert_array_equal(positions(s, one)[1], ref_p[::50])
    for v in q[::97]:  # ... and the single-query path
        np.testing.assert_array_equal(positions(s, s.local(np.array([v]), k))[1][0], ref_p[v])
