"""ExDBSCAN: validity against an independent membership oracle, energy, strategies, errors."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from clustering_oracles import dbscan_membership, distances_to_rows
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import floyd_warshall
from sklearn.cluster import DBSCAN
from sklearn.datasets import make_blobs, make_moons

from gnnaudit.clustering import CounterfactualSet, ExDBSCAN
from gnnaudit.clustering.metrics import dpp_diversity, proximity, sparsity, validity
from gnnaudit.errors import InfeasibleError, InvalidInputError, NotFittedError

# ----------------------------------------------------------------------------- oracle


def assert_all_valid(res, X, db, metric="euclidean"):
    assert len(res) >= 1
    cores = X[db.core_sample_indices_]
    labs = db.labels_[db.core_sample_indices_]
    for c, t in zip(res.counterfactuals, res.targets, strict=True):
        assert np.isfinite(c).all()
        assert dbscan_membership(c, X, db, metric) == t
        assert (distances_to_rows(c, cores[labs == t], metric) <= db.eps).any()
    assert res.valid.all()


def pick_noise_and_target(model):
    noise = np.flatnonzero(model.labels_ == -1)
    clusters = np.unique(model.labels_[model.labels_ >= 0])
    return noise, clusters


# ----------------------------------------------------------------------------- validity


def test_noise_to_cluster_and_cluster_to_cluster_are_valid(blobs_dbscan):
    X, db = blobs_dbscan
    model = ExDBSCAN(n_counterfactuals=5).fit(X, dbscan=db)
    noise, clusters = pick_noise_and_target(model)
    assert noise.size and clusters.size >= 3
    for i in list(noise[:5]) + [int(np.flatnonzero(model.labels_ == clusters[0])[0])]:
        for t in clusters:
            if t == model.labels_[i]:
                continue
            res = model.explain(int(i), target=int(t))
            assert len(res) == 5
            assert_all_valid(res, X, db)
            assert (res.targets == t).all()
            assert (db.labels_[res.reference_cores] == t).all()
            assert np.isin(res.reference_cores, db.core_sample_indices_).all()


def test_no_target_explains_toward_every_other_cluster(blobs_dbscan):
    X, db = blobs_dbscan
    model = ExDBSCAN(n_counterfactuals=6).fit(X, dbscan=db)
    i = int(np.flatnonzero(model.labels_ == 0)[0])
    res = model.explain(i)
    assert_all_valid(res, X, db)
    assert 0 not in set(res.targets.tolist())
    assert res.source_label == 0
    # repulsion only inside a cluster: cross-cluster kernel entries are 0
    D = np.full((len(res), len(res)), np.inf)
    np.fill_diagonal(D, 0.0)
    cg = model.core_graph_
    for a, b in itertools.combinations(range(len(res)), 2):
        if res.targets[a] == res.targets[b]:
            cols = list(cg.cluster_cores(int(res.targets[a])))
            d = cg.shortest_paths([res.reference_cores[a]])[0, cols.index(res.reference_cores[b])]
            D[a, b] = D[b, a] = d
    assert res.diversity == pytest.approx(dpp_diversity(D))


def test_new_point_coordinates(blobs_dbscan):
    X, db = blobs_dbscan
    model = ExDBSCAN().fit(X, dbscan=db)
    x = np.array([-20.0, 30.0])
    res = model.explain(x, target=1)
    assert res.source_label == -1
    assert_all_valid(res, X, db)
    np.testing.assert_array_equal(res.x, x)


@pytest.mark.parametrize("scale", [1e-8, 1.0, 1e8])
def test_validity_at_extreme_scales(scale):
    X, _ = make_blobs(300, centers=3, n_features=3, cluster_std=0.5, random_state=7)
    X = X * scale
    db = DBSCAN(eps=0.5 * scale, min_samples=5, algorithm="ball_tree").fit(X)
    model = ExDBSCAN(n_counterfactuals=4).fit(X, dbscan=db)
    noise, clusters = pick_noise_and_target(model)
    queries = list(noise[:3]) + [int(np.flatnonzero(model.labels_ == clusters[0])[0])]
    for i in queries:
        for t in clusters:
            if t != model.labels_[i]:
                assert_all_valid(model.explain(int(i), target=int(t)), X, db)


def test_validity_at_large_offset():
    X, _ = make_blobs(300, centers=3, n_features=2, cluster_std=0.5, random_state=2)
    X = X + 1e8
    db = DBSCAN(eps=0.4, min_samples=5, algorithm="ball_tree").fit(X)
    model = ExDBSCAN(n_counterfactuals=3).fit(X, dbscan=db)
    noise, clusters = pick_noise_and_target(model)
    for i in noise[:4]:
        for t in clusters:
            assert_all_valid(model.explain(int(i), target=int(t)), X, db)


def test_points_exactly_at_eps_on_a_grid():
    # two grid clusters with unit spacing, eps = 1 exactly; many distances are exactly eps
    g = np.array(list(itertools.product(range(4), range(4))), dtype=float)
    X = np.vstack([g, g + [10.0, 0.0], [[5.0, 0.0], [5.0, 5.0]]])
    db = DBSCAN(eps=1.0, min_samples=3).fit(X)
    model = ExDBSCAN(eps=1.0, min_samples=3, n_counterfactuals=4).fit(X, dbscan=db)
    for i in (32, 33, 0):
        for t in (0, 1):
            if t != model.labels_[i]:
                assert_all_valid(model.explain(i, target=t), X, db)
    # a point exactly eps away from a core is already in the cluster
    assert model.core_graph_.assign(np.array([[4.0, 0.0]]))[0] == 0


def test_duplicated_points():
    X, _ = make_blobs(150, centers=2, n_features=2, cluster_std=0.4, random_state=5)
    X = np.vstack([X, X, [[20.0, 20.0], [20.0, 20.0]]])
    db = DBSCAN(eps=0.3, min_samples=4).fit(X)
    model = ExDBSCAN(n_counterfactuals=5).fit(X, dbscan=db)
    noise, clusters = pick_noise_and_target(model)
    res = model.explain(len(X) - 1, target=int(clusters[0]))
    assert_all_valid(res, X, db)
    assert np.isfinite(res.energy) and np.isfinite(res.diversity)
    # the greedy does not pick two duplicates (huge repulsion) when alternatives exist
    assert len({tuple(X[r]) for r in res.reference_cores}) == len(res)


@pytest.mark.parametrize(
    ("metric", "eps"), [("manhattan", 0.5), ("chebyshev", 0.3), ("cosine", 0.001)]
)
def test_other_metrics_are_valid(metric, eps):
    X, _ = make_blobs(400, centers=3, n_features=3, cluster_std=0.5, random_state=11)
    X = X + 15.0
    db = DBSCAN(eps=eps, min_samples=5, metric=metric).fit(X)
    model = ExDBSCAN(n_counterfactuals=3).fit(X, dbscan=db)
    assert model.metric_ == metric
    noise, clusters = pick_noise_and_target(model)
    assert clusters.size >= 2
    for i in list(noise[:3]) + [int(np.flatnonzero(model.labels_ == clusters[0])[0])]:
        for t in clusters:
            if t != model.labels_[i]:
                res = model.explain(int(i), target=int(t))
                assert_all_valid(res, X, db, metric)
                assert res.proximity == pytest.approx(
                    np.mean(distances_to_rows(res.x, res.counterfactuals, metric))
                )


def test_counterfactual_lies_on_the_sphere_toward_x(blobs_dbscan):
    X, db = blobs_dbscan
    model = ExDBSCAN(n_counterfactuals=3).fit(X, dbscan=db)
    noise, clusters = pick_noise_and_target(model)
    x_i = int(noise[0])
    res = model.explain(x_i, target=int(clusters[1]))
    x = X[x_i]
    for c, q in zip(res.counterfactuals, X[res.reference_cores], strict=True):
        expected = q + db.eps * (x - q) / np.linalg.norm(x - q)  # paper Eq. 4
        np.testing.assert_allclose(c, expected, atol=1e-8 * db.eps)
        assert np.linalg.norm(c - q) < db.eps


# ----------------------------------------------------------------------------- energy


def brute_energy(model, res, x):
    cg = model.core_graph_
    t = int(res.targets[0])
    cores = cg.cluster_cores(t)
    P = cg.X[cores]
    W = np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1))
    A = (W <= cg.eps) & ~np.eye(len(P), dtype=bool)
    D = floyd_warshall(np.where(A, np.maximum(W, cg.min_weight), 0.0), directed=False)
    pos = [list(cores).index(r) for r in res.reference_cores]
    d = np.sqrt(((cg.X[res.reference_cores] - x) ** 2).sum(1))
    d_min = np.sqrt(((P - x) ** 2).sum(1)).min()
    w_mean = W[A].mean()
    rep = sum(1.0 / D[a, b] for a, b in itertools.combinations(pos, 2))
    return model.alpha * (d**2).sum() + (1 - model.alpha) * d_min / w_mean * rep


def test_energy_matches_brute_force_formula(blobs_dbscan):
    X, db = blobs_dbscan
    model = ExDBSCAN(n_counterfactuals=4).fit(X, dbscan=db)
    noise, clusters = pick_noise_and_target(model)
    for i in noise[:3]:
        res = model.explain(int(i), target=int(clusters[0]))
        assert res.energy == pytest.approx(brute_energy(model, res, X[i]), rel=1e-9)


def test_one_counterfactual_is_the_nearest_core(blobs_dbscan):
    X, db = blobs_dbscan
    model = ExDBSCAN(n_counterfactuals=1).fit(X, dbscan=db)
    noise, clusters = pick_noise_and_target(model)
    for i in noise[:5]:
        for t in clusters:
            res = model.explain(int(i), target=int(t))
            cores = db.core_sample_indices_[db.labels_[db.core_sample_indices_] == t]
            nearest = cores[np.argmin(np.linalg.norm(X[cores] - X[i], axis=1))]
            assert res.reference_cores.tolist() == [nearest]
            assert res.diversity == pytest.approx(1.0)


def small_problem():
    X, _ = make_moons(160, noise=0.05, random_state=1)
    db = DBSCAN(eps=0.2, min_samples=4).fit(X)
    return X, db


def test_exact_and_swap_never_worse_than_greedy():
    X, db = small_problem()
    model = ExDBSCAN(n_counterfactuals=3, alpha=0.3).fit(X, dbscan=db)
    rng = np.random.default_rng(0)
    clusters = np.unique(db.labels_[db.labels_ >= 0])
    gaps = []
    for x in rng.uniform([-1.2, -0.8], [2.2, 1.3], size=(6, 2)):
        src = model.core_graph_.assign(x)[0]
        t = int([c for c in clusters if c != src][0])
        greedy = model.explain(x, target=t)
        exact = model.explain(x, target=t, exact=True)
        swap = model.explain(x, target=t, refine="swap")
        assert exact.energy <= greedy.energy * (1 + 1e-12)
        assert exact.energy <= swap.energy * (1 + 1e-12)
        assert swap.energy <= greedy.energy * (1 + 1e-12)
        assert exact.greedy_energy == pytest.approx(greedy.energy)
        assert_all_valid(exact, X, db)
        gaps.append(greedy.energy / exact.energy)
    assert min(gaps) >= 1.0 - 1e-12


def test_exact_refuses_huge_candidate_sets(blobs_dbscan):
    X, db = blobs_dbscan
    model = ExDBSCAN(n_counterfactuals=5, max_exact_combinations=1000).fit(X, dbscan=db)
    noise, clusters = pick_noise_and_target(model)
    with pytest.raises(InvalidInputError, match="max_exact_combinations"):
        model.explain(int(noise[0]), target=int(clusters[0]), exact=True)


def test_greedy_beats_random_on_average_and_strategies_are_valid(blobs_dbscan):
    X, db = blobs_dbscan
    noise, _ = pick_noise_and_target(ExDBSCAN().fit(X, dbscan=db))
    clusters = np.unique(db.labels_[db.labels_ >= 0])
    res = {}
    for strategy in ("energy", "random", "nearest", "furthest"):
        model = ExDBSCAN(n_counterfactuals=4, strategy=strategy, random_state=1).fit(X, dbscan=db)
        out = [model.explain(int(i), target=int(t)) for i in noise[:8] for t in clusters]
        for r in out:
            assert_all_valid(r, X, db)
            assert r.strategy == strategy
        res[strategy] = out
    e = {s: np.mean([r.energy for r in v]) for s, v in res.items()}
    assert e["energy"] <= e["random"]
    assert e["energy"] <= e["furthest"]
    prox = {s: np.mean([r.proximity for r in v]) for s, v in res.items()}
    assert prox["nearest"] <= prox["energy"] + 1e-12
    assert prox["nearest"] <= prox["random"]


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(1, 5),
    alpha=st.floats(0.0, 1.0),
    scale=st.sampled_from([1e-3, 1.0, 1e3]),
)
def test_hypothesis_random_blobs_valid_and_greedy_le_random(seed, k, alpha, scale):
    # three separated centres (a random rotation of a fixed triangle): always >= 2 clusters
    rot = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))[0]
    centers = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 0.0], [0.0, 6.0, 0.0]]) @ rot
    X, _ = make_blobs(250, centers=centers, cluster_std=0.6, random_state=seed)
    X = X * scale
    db = DBSCAN(eps=0.5 * scale, min_samples=4).fit(X)
    clusters = np.unique(db.labels_[db.labels_ >= 0])
    assert clusters.size >= 2
    greedy = ExDBSCAN(n_counterfactuals=k, alpha=alpha).fit(X, dbscan=db)
    rand = ExDBSCAN(n_counterfactuals=k, alpha=alpha, strategy="random").fit(X, dbscan=db)
    rng = np.random.default_rng(seed)
    i = int(rng.integers(len(X)))
    t = int([c for c in clusters if c != db.labels_[i]][0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        g = greedy.explain(i, target=t)
        r = rand.explain(i, target=t)
    assert_all_valid(g, X, db)
    assert_all_valid(r, X, db)
    if k == 1:
        assert g.energy <= r.energy * (1 + 1e-12)


# ----------------------------------------------------------------------------- API


def test_result_frames_and_metrics(blobs_dbscan):
    X, db = blobs_dbscan
    frame = pd.DataFrame(X, columns=["income", "debt"])
    model = ExDBSCAN(n_counterfactuals=3).fit(frame, dbscan=db)
    noise, clusters = pick_noise_and_target(model)
    res = model.explain(int(noise[0]), target=int(clusters[0]))
    assert isinstance(res, CounterfactualSet)
    changes = res.to_frame()
    assert list(changes.columns) == [
        "counterfactual",
        "target",
        "valid",
        "feature",
        "original",
        "new",
        "change",
    ]
    assert set(changes["feature"]) <= {"income", "debt"}
    np.testing.assert_allclose(changes["new"] - changes["original"], changes["change"])
    summ = res.summary()
    assert summ["valid"].all() and len(summ) == 3
    assert validity(res.counterfactuals, res.targets, model.core_graph_) == 1.0
    assert proximity(res.x, res.counterfactuals) == pytest.approx(res.proximity)
    assert sparsity(res.x, res.counterfactuals) == 2.0
    assert sparsity(res.x, res.counterfactuals, per_counterfactual=True).tolist() == [2, 2, 2]
    assert dpp_diversity(np.zeros((1, 1))) == 1.0
    assert dpp_diversity(np.array([[0, np.inf], [np.inf, 0]])) == 1.0
    assert dpp_diversity(np.array([[0, 1.0], [1.0, 0]])) == pytest.approx(0.75)


def test_explain_many_and_fit_variants(blobs_dbscan):
    X, db = blobs_dbscan
    a = ExDBSCAN(eps=0.5, min_samples=5).fit(X)
    b = ExDBSCAN().fit(X, dbscan=db)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.core_sample_indices_, np.sort(db.core_sample_indices_))
    noise, clusters = pick_noise_and_target(a)
    many = a.explain_many(noise[:4], target=int(clusters[0]))
    assert len(many) == 4
    for i, r in zip(noise[:4], many, strict=True):
        single = a.explain(int(i), target=int(clusters[0]))
        np.testing.assert_array_equal(r.counterfactuals, single.counterfactuals)
    assert np.array_equal(a.fit_predict(X), a.labels_)


def test_fewer_eligible_cores_warns():
    X = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1], [5.0, 5.0], [5.1, 5.0], [5.0, 5.1]])
    model = ExDBSCAN(eps=0.2, min_samples=3, n_counterfactuals=5).fit(X)
    with pytest.warns(UserWarning, match="only 3 eligible"):
        res = model.explain(np.array([2.0, 2.0]), target=1)
    assert len(res) == 3


# ----------------------------------------------------------------------------- errors


def test_bad_input_errors(blobs_dbscan):
    X, db = blobs_dbscan
    model = ExDBSCAN().fit(X, dbscan=db)
    member = int(np.flatnonzero(model.labels_ == 0)[0])
    noise, _ = pick_noise_and_target(model)
    with pytest.raises(InvalidInputError, match="own cluster"):
        model.explain(member, target=0)
    with pytest.raises(InvalidInputError, match="unknown target cluster 42"):
        model.explain(member, target=42)
    with pytest.raises(InvalidInputError, match="noise"):
        model.explain(member, target=-1)
    core = X[db.core_sample_indices_[db.labels_[db.core_sample_indices_] == 2][0]]
    with pytest.raises(InvalidInputError, match="already in"):
        model.explain(core + 1e-3, target=2)
    with pytest.raises(InvalidInputError, match="finite"):
        model.explain(np.array([np.nan, 0.0]), target=1)
    with pytest.raises(InvalidInputError, match="outside"):
        model.explain(10_000, target=1)
    with pytest.raises(InvalidInputError, match="n_counterfactuals"):
        model.explain(int(noise[0]), target=1, n_counterfactuals=0)
    with pytest.raises(InvalidInputError, match="refine"):
        model.explain(int(noise[0]), target=1, refine="anneal")
    with pytest.raises(InvalidInputError, match="features"):
        model.explain(np.zeros(3), target=1)
    bad = X.copy()
    bad[7, 0] = np.inf
    with pytest.raises(InvalidInputError, match="finite"):
        ExDBSCAN().fit(bad)
    with pytest.raises(InvalidInputError, match="strategy"):
        ExDBSCAN(strategy="best").fit(X)
    with pytest.raises(InvalidInputError, match="alpha"):
        ExDBSCAN(alpha=2.0).fit(X)
    with pytest.raises(NotFittedError):
        ExDBSCAN().explain(0)


def test_no_cluster_and_single_cluster():
    X = np.arange(20.0).reshape(10, 2) * 10
    with pytest.warns(UserWarning, match="no cluster"):
        model = ExDBSCAN(eps=0.5, min_samples=3).fit(X)
    with pytest.raises(InfeasibleError, match="no cluster"):
        model.explain(0)
    Y = np.vstack([np.zeros((5, 2)) + np.arange(5)[:, None] * 0.1, [[9.0, 9.0]]])
    single = ExDBSCAN(eps=0.15, min_samples=2).fit(Y)
    with pytest.raises(InfeasibleError, match="only cluster"):
        single.explain(0)
    res = single.explain(5)  # noise -> the one cluster
    assert (res.targets == 0).all()


def test_sklearn_estimator_contract(blobs_dbscan):
    from sklearn.base import clone

    X, db = blobs_dbscan
    model = ExDBSCAN(eps=0.5, n_counterfactuals=2, strategy="nearest")
    assert model.get_params()["strategy"] == "nearest"
    twin = clone(model)
    assert not hasattr(twin, "labels_")
    assert twin.fit(X) is twin
    assert twin.set_params(alpha=0.2).alpha == 0.2


def test_greedy_steps_minimise_the_brute_force_energy():
    X, db = small_problem()
    model = ExDBSCAN(n_counterfactuals=4, alpha=0.4).fit(X, dbscan=db)
    cg = model.core_graph_
    x = np.array([0.5, 0.3])
    t = int(cg.assign(x)[0] == 0)  # a cluster x is not in
    cores = cg.cluster_cores(t)
    P = cg.X[cores]
    W = np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1))
    A = (W <= cg.eps) & ~np.eye(len(P), dtype=bool)
    D = floyd_warshall(np.where(A, np.maximum(W, cg.min_weight), 0.0), directed=False)
    d = np.sqrt(((P - x) ** 2).sum(1))
    coef = (1 - model.alpha) * d.min() / W[A].mean()

    def energy(pos):
        rep = sum(1.0 / D[a, b] for a, b in itertools.combinations(pos, 2))
        return model.alpha * (d[pos] ** 2).sum() + coef * rep

    full = model.explain(x, target=t).reference_cores.tolist()
    chosen = [list(cores).index(r) for r in full]
    assert chosen[0] == int(np.argmin(d))
    for j in range(1, 4):
        prefix = chosen[:j]
        scores = [energy(prefix + [v]) if v not in prefix else np.inf for v in range(len(P))]
        assert scores[chosen[j]] == pytest.approx(min(scores), rel=1e-12)
        sub = model.explain(x, target=t, n_counterfactuals=j).reference_cores.tolist()
        assert sub == full[:j]
