"""FairDen: paper example, dense vs matrix-free solvers, constraints, Goodall1, edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import subspace_angles
from sklearn.cluster import DBSCAN
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from gnnaudit.clustering import FairDen
from gnnaudit.clustering.fair_spectral import (
    AffinityOperator,
    fair_embedding_dense,
    fair_embedding_matrix_free,
    fairness_matrix,
)
from gnnaudit.clustering.goodall import Goodall1
from gnnaudit.clustering.metrics import balance
from gnnaudit.datasets.tabular import three_moons
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops import DCTree


@pytest.fixture(scope="module")
def moons():
    return three_moons(n_per_moon=300, noise=0.05, seed=0)


def test_three_moons_fair_where_dbscan_is_not(moons):
    model = FairDen(n_clusters=2, solver="matrix_free").fit(
        moons.X, sensitive_features=moons.sensitive
    )
    assert model.n_clusters_ == 2
    assert model.balance_ >= 0.95
    assert set(np.unique(model.labels_)) <= {-1, 0, 1}
    db = DBSCAN(eps=0.2, min_samples=5).fit(moons.X).labels_
    assert len(set(db) - {-1}) == 3
    assert balance(db, moons.sensitive) <= 0.5
    # the fair clusters are unions of moons: each moon lies in one cluster
    for moon in range(3):
        lab = model.labels_[moons.labels == moon]
        assert np.bincount(lab[lab >= 0]).max() >= 0.95 * lab.size


def _blobs(n, seed, n_groups=2):
    X, y = make_blobs(n, n_features=5, centers=4, cluster_std=1.0, random_state=seed)
    rng = np.random.default_rng(seed)
    # sensitive attribute correlated with the blobs (so the constraint matters)
    s = np.where(rng.random(n) < 0.8, y % n_groups, rng.integers(0, n_groups, n))
    return X, s


@pytest.mark.parametrize("n_groups,k", [(2, 2), (3, 3)])
def test_dense_and_matrix_free_solvers_agree(n_groups, k):
    X, s = _blobs(400, seed=n_groups, n_groups=n_groups)
    tree = DCTree(min_samples=9).fit(X)
    op = AffinityOperator(tree, None, 1.0, 0.0)
    F = fairness_matrix(s)
    dense = fair_embedding_dense(op.to_dense(), F, k)
    mf = fair_embedding_matrix_free(op, F, k, tol=1e-12)
    np.testing.assert_allclose(dense.eigenvalues, mf.eigenvalues, atol=1e-8)
    assert np.max(subspace_angles(dense.H, mf.H)) < 1e-4
    A = op.to_dense()
    D = np.diag(A.sum(1))
    for emb in (dense, mf):
        np.testing.assert_allclose(F.T @ emb.H, 0.0, atol=1e-8)  # fairness constraint
        np.testing.assert_allclose(emb.H.T @ D @ emb.H, np.eye(k), atol=1e-8)
        # KKT: L H - D H diag(mu) lies in range(F) (the constraint's multipliers)
        R = (D - A) @ emb.H - D @ emb.H * emb.eigenvalues
        P = np.eye(A.shape[0]) - F @ np.linalg.pinv(F)
        assert np.abs(P @ R).max() < 1e-8 * np.abs(A).sum(1).max()


def test_fairden_solvers_give_the_same_clustering():
    X, s = _blobs(600, seed=7)
    a = FairDen(n_clusters=3, solver="dense").fit(X, sensitive_features=s)
    b = FairDen(n_clusters=3, solver="matrix_free").fit(X, sensitive_features=s)
    assert a.k_ == b.k_
    assert adjusted_rand_score(a.labels_, b.labels_) >= 0.99
    assert np.max(subspace_angles(a.embedding_, b.embedding_)) < 1e-4


def test_fair_clustering_beats_unconstrained_balance():
    X, s = _blobs(500, seed=3)
    fair = FairDen(n_clusters=2).fit(X, sensitive_features=s)
    tree = DCTree(min_samples=9).fit(X)
    op = AffinityOperator(tree, None, 1.0, 0.0)
    plain = fair_embedding_matrix_free(op, np.zeros((500, 0)), 2)
    from sklearn.cluster import KMeans

    lab = KMeans(2, n_init=10, random_state=0).fit(plain.H).labels_
    assert fair.balance_ > balance(lab, s) + 0.2


def test_goodall1_against_definition():
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(0, 3, 40), rng.choice([0, 0, 0, 1, 2, 2, 5], 40)])
    g = Goodall1(np.unique(codes, axis=0, return_inverse=False) if False else codes)
    n, dc = codes.shape
    S = np.zeros((n, n))
    for k in range(dc):
        vals, cnt = np.unique(codes[:, k], return_counts=True)
        p = dict(zip(vals, cnt / n, strict=True))
        p2 = dict(zip(vals, cnt * (cnt - 1) / (n * (n - 1)), strict=True))
        for i in range(n):
            for j in range(n):
                if codes[i, k] == codes[j, k]:
                    a = codes[i, k]
                    S[i, j] += (1 - sum(p2[q] for q in vals if p[q] <= p[a])) / dc
    np.testing.assert_allclose(g.to_dense(), S, atol=1e-12)
    np.testing.assert_allclose(g.diagonal, np.diag(S))
    V = rng.normal(size=(n, 2))
    np.testing.assert_allclose(g.matvec(V), S @ V, atol=1e-12)


def test_mixed_affinity_matvec_matches_dense():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 3))
    cat = rng.integers(0, 4, size=(120, 2))
    op = AffinityOperator(DCTree(min_samples=5).fit(X), Goodall1(cat), 0.6, 0.4)
    A = op.to_dense()
    assert np.all(np.diag(A) == 0) and np.allclose(A, A.T) and A.min() >= 0
    V = rng.normal(size=(120, 3))
    np.testing.assert_allclose(op.matvec(V), A @ V, atol=1e-10)
    np.testing.assert_allclose(op.degree, A.sum(1), atol=1e-10)


def test_mixed_data_and_several_sensitive_attributes(moons):
    rng = np.random.default_rng(0)
    n = moons.X.shape[0]
    cat = np.column_stack([moons.labels % 2, rng.integers(0, 3, n)])
    sens = np.column_stack([moons.sensitive, rng.integers(0, 2, n)])
    model = FairDen(n_clusters=2).fit(moons.X, sensitive_features=sens, categorical=cat)
    assert model.n_clusters_ >= 2
    assert len(np.unique(model.groups_)) == 4
    F = fairness_matrix(np.unique(model.groups_, return_inverse=True)[1])
    np.testing.assert_allclose(F.T @ model.embedding_, 0.0, atol=1e-7)
    assert 0.0 <= model.balance_ <= 1.0


def test_noise_loop_marks_small_clusters_as_noise():
    rng = np.random.default_rng(2)
    X = np.vstack([rng.normal(size=(200, 2)) * 0.2, rng.normal(size=(200, 2)) * 0.2 + 4])
    X = np.vstack([X, [[30.0, 30.0], [-30.0, 30.0]]])  # two far outliers
    s = np.concatenate([np.tile([0, 1], 200), [0, 1]])
    model = FairDen(n_clusters=3, min_samples=5).fit(X, sensitive_features=s)
    # Alg. 1: k=3 spends one cluster on the outliers (< minPts -> noise), so k grows
    assert model.k_ > 3 and model.n_clusters_ >= 3
    assert np.all(np.bincount(model.labels_[model.labels_ >= 0]) >= 5)
    assert np.all(model.labels_[-2:] == -1)


def test_duplicates_constant_features_and_single_group():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(60, 2)), rng.normal(size=(60, 2)) + 5])
    X = np.vstack([X, X[:30]])  # duplicated points
    X = np.column_stack([X, np.full(X.shape[0], 3.0)])  # constant feature
    s = rng.integers(0, 2, X.shape[0])
    model = FairDen(n_clusters=2).fit(X, sensitive_features=s)
    assert np.isfinite(model.embedding_).all() and model.n_clusters_ >= 2
    with pytest.warns(UserWarning, match="takes a single value on every point"):
        single = FairDen(n_clusters=2).fit(X, sensitive_features=np.zeros(X.shape[0], dtype=int))
    # balance on the clustered points; the noise share apart (issue 38)
    assert single.n_clusters_ >= 2 and single.balance_ == 1.0
    assert single.noise_ratio_ == pytest.approx(np.mean(single.labels_ == -1))
    # identical points cannot be put apart: refused, as tree-cluster refuses them
    with pytest.raises(InfeasibleError, match=r"identical-points.*all 12 points.*n_clusters <= 1"):
        FairDen(n_clusters=2, min_samples=2).fit(
            np.ones((12, 2)), sensitive_features=np.tile([0, 1], 6)
        )
    same = FairDen(n_clusters=1, min_samples=2).fit(
        np.ones((12, 2)), sensitive_features=np.tile([0, 1], 6)
    )
    assert np.array_equal(same.labels_, np.zeros(12)) and same.balance_ == 1.0


def test_small_groups_error_or_exclusion():
    X, s = _blobs(200, seed=1)
    s = s.copy()
    s[:2] = 7  # a group of two points
    with pytest.raises(InfeasibleError, match="at least 3 members"):
        FairDen(n_clusters=3).fit(X, sensitive_features=s)
    model = FairDen(n_clusters=3, min_group_size=3).fit(X, sensitive_features=s)
    assert model.excluded_[:2].all() and not model.excluded_[2:].any()
    assert np.all(model.labels_[:2] == -1)


def test_parameter_and_input_errors():
    X, s = _blobs(50, seed=0)
    with pytest.raises(InvalidInputError, match="n_clusters must be an integer >= 1; got 0"):
        FairDen(n_clusters=0).fit(X, sensitive_features=s)
    with pytest.raises(InvalidInputError, match="solver"):
        FairDen(solver="qr").fit(X, sensitive_features=s)
    with pytest.raises(InvalidInputError, match="rows"):
        FairDen().fit(X, sensitive_features=s[:-1])
    with pytest.raises(InvalidInputError, match="finite"):
        FairDen().fit(np.full((5, 2), np.nan), sensitive_features=np.zeros(5))
    with pytest.raises(InvalidInputError, match="categorical"):
        FairDen().fit(X, sensitive_features=s, categorical=np.zeros((3, 1)))
