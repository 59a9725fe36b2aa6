"""FairDen's balanced rounding (issue 16): exact quota assignment against brute force, quotas,
the balanced k-means rounding, FairDen at k = 3 on three moons, the low-balance warning, the
paper's k-means rounding pinned to the previous behaviour, and DCSI squared vs Euclidean."""

from __future__ import annotations

import hashlib
import itertools
import warnings

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import cdist
from sklearn.datasets import make_blobs

from gnnaudit.clustering import FairDen
from gnnaudit.clustering.fairden_rounding import (
    balanced_kmeans_rounding,
    proportional_quotas,
    quota_assignment,
)
from gnnaudit.clustering.metrics import dcsi
from gnnaudit.datasets.tabular import three_moons
from gnnaudit.errors import InvalidInputError


def _all_assignments(n: int, k: int) -> np.ndarray:
    return np.array(list(itertools.product(range(k), repeat=n)), dtype=np.int64).reshape(-1, n)


def _counts(assign: np.ndarray, k: int) -> np.ndarray:
    return np.stack([(assign == c).sum(axis=1) for c in range(k)], axis=1)


@pytest.mark.parametrize("seed", range(40))
def test_quota_assignment_is_optimal_and_exact_by_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 8)), int(rng.integers(1, 4))
    # ties (small integer costs) on even seeds, continuous costs on odd ones
    C = rng.integers(0, 3, (n, k)).astype(float) if seed % 2 == 0 else rng.normal(size=(n, k))
    q = np.bincount(rng.integers(0, k, n), minlength=k)
    lab = quota_assignment(C, q, init=rng.integers(0, k, n))
    assert np.array_equal(np.bincount(lab, minlength=k), q)
    every = _all_assignments(n, k)
    feasible = every[(_counts(every, k) == q).all(axis=1)]
    best = C[np.arange(n), feasible].sum(axis=1).min()
    assert C[np.arange(n), lab].sum() == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize("seed", range(30))
def test_proportional_quotas_margins_and_rounding(seed):
    rng = np.random.default_rng(seed)
    k, g = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sizes = rng.integers(0, 7, k)
    groups = np.bincount(rng.integers(0, g, sizes.sum()), minlength=g)
    Q = proportional_quotas(sizes, groups)
    assert np.array_equal(Q.sum(axis=1), sizes) and np.array_equal(Q.sum(axis=0), groups)
    E = sizes[:, None] * groups[None, :] / max(sizes.sum(), 1)
    assert (Q >= np.floor(E)).all() and (Q <= np.ceil(E)).all()
    # brute force over all floor/ceil tables with these margins: Q takes the largest
    # total fractional part when rounding up
    lo = np.floor(E).astype(int).ravel()
    up = [c for c in range(lo.size) if E.ravel()[c] > lo[c]]
    frac = (E - np.floor(E)).ravel()
    best = -1.0
    for pick in itertools.product((0, 1), repeat=len(up)):
        T = lo.copy()
        T[up] += np.array(pick, dtype=int)
        T = T.reshape(k, g)
        if np.array_equal(T.sum(axis=1), sizes) and np.array_equal(T.sum(axis=0), groups):
            best = max(best, float(frac[np.array(up, dtype=int)] @ np.array(pick)))
    got = (Q - np.floor(E)).ravel()
    assert float(frac @ got) == pytest.approx(best)


@pytest.mark.parametrize("seed", range(6))
def test_balanced_rounding_meets_quotas_and_is_assignment_optimal(seed):
    rng = np.random.default_rng(seed)
    n, k = 9, 3
    H = rng.normal(size=(n, 2))
    groups = rng.permutation(np.arange(n) % 2)
    init = rng.permutation(np.arange(n) % k)
    res = balanced_kmeans_rounding(H, init, groups, tol=0.0)
    table = np.zeros((k, 2), dtype=int)
    np.add.at(table, (res.labels, groups), 1)
    assert np.array_equal(table, res.quotas)
    assert np.array_equal(res.quotas, proportional_quotas(np.bincount(init), np.bincount(groups)))
    # brute force: no assignment with the same quotas is cheaper for the final centres, and
    # the centres are the means of their clusters (a fixed point of the alternation)
    every = _all_assignments(n, k)
    ok = np.ones(len(every), dtype=bool)
    for g in (0, 1):
        ok &= (_counts(np.where(groups == g, every, -1), k) == res.quotas[:, g]).all(axis=1)
    D = ((H[:, None, :] - res.centers[None]) ** 2).sum(axis=2)
    best = D[np.arange(n), every[ok]].sum(axis=1).min()
    assert D[np.arange(n), res.labels].sum() == pytest.approx(best, abs=1e-12)
    for c in range(k):
        assert np.allclose(res.centers[c], H[res.labels == c].mean(axis=0))
    assert res.inertia == pytest.approx(D[np.arange(n), res.labels].sum())


def test_rounding_input_errors():
    with pytest.raises(InvalidInputError, match="quotas"):
        quota_assignment(np.zeros((3, 2)), np.array([1, 1]))
    with pytest.raises(InvalidInputError, match="finite"):
        quota_assignment(np.full((2, 2), np.nan), np.array([1, 1]))
    with pytest.raises(InvalidInputError, match="equal sums"):
        proportional_quotas(np.array([2, 2]), np.array([3]))
    with pytest.raises(InvalidInputError, match="init_labels"):
        balanced_kmeans_rounding(np.zeros((3, 2)), np.array([0, 1]), np.array([0, 1, 0]))
    with pytest.raises(InvalidInputError, match="rounding"):
        FairDen(rounding="greedy").fit(np.zeros((10, 2)), sensitive_features=np.arange(10) % 2)
    with pytest.raises(InvalidInputError, match="noise_loop"):
        FairDen(noise_loop="x").fit(np.zeros((10, 2)), sensitive_features=np.arange(10) % 2)


# --- FairDen at every k ---


@pytest.fixture(scope="module")
def moons_other_seed():
    # a seed (and size) no other test uses
    return three_moons(n_per_moon=150, noise=0.05, seed=11)


def test_three_moons_k3_is_fair_with_the_default_rounding(moons_other_seed):
    d = moons_other_seed
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a fair result must not warn
        model = FairDen(n_clusters=3, rounding="balanced").fit(d.X, sensitive_features=d.sensitive)
        repaired = FairDen(n_clusters=3).fit(d.X, sensitive_features=d.sensitive)
    # the default repairs the paper's 0.33 past the four-fifths target (the candidate with the
    # best DCSI), short of the exact quotas
    assert repaired.rounding_ == "repair" and 0.8 <= repaired.balance_ < model.balance_
    assert model.n_clusters_ == 3 and model.rounding_ == "balanced"
    assert model.balance_ >= 0.9
    # every cluster holds the data's group shares up to integer rounding (floor or ceiling)
    keep = model.labels_ >= 0
    table = np.zeros((3, 2), dtype=int)
    np.add.at(table, (model.labels_[keep], d.sensitive[keep]), 1)
    E = table.sum(axis=1)[:, None] * table.sum(axis=0)[None, :] / keep.sum()
    assert (table >= np.floor(E)).all() and (table <= np.ceil(E)).all()
    k2 = FairDen(n_clusters=2, rounding="balanced").fit(d.X, sensitive_features=d.sensitive)
    assert k2.balance_ >= 0.99


def test_group_pure_clusters_trigger_the_warning(moons_other_seed):
    d = moons_other_seed
    with pytest.warns(UserWarning, match="unfair, balance 0.33") as rec:
        model = FairDen(n_clusters=3, rounding="kmeans").fit(d.X, sensitive_features=d.sensitive)
    msg = str(rec[0].message)
    assert "group-pure clusters" in msg and "rounding='balanced'" in msg
    keep = model.labels_ >= 0
    pure = [
        c
        for c in range(model.n_clusters_)
        if np.unique(d.sensitive[keep][model.labels_[keep] == c]).size == 1
    ]
    assert pure  # the paper's rounding splits the half/half moon along the groups
    for c in range(model.n_clusters_):
        assert (f"cluster {c} holds only group" in msg) == (c in pure)


def _digest(labels: np.ndarray) -> str:
    return hashlib.sha256(np.asarray(labels, dtype=np.int64).tobytes()).hexdigest()[:16]


def test_kmeans_rounding_equals_the_previous_behaviour():
    """Labels pinned from gnnaudit before issue 16 (commit a702bc5)."""
    d = three_moons(n_per_moon=100, noise=0.05, seed=3)
    with pytest.warns(UserWarning, match="unfair"):
        m = FairDen(n_clusters=3, rounding="kmeans").fit(d.X, sensitive_features=d.sensitive)
    assert _digest(m.labels_) == "667fe8845c483e0e" and m.balance_ == pytest.approx(1 / 3)
    X, y = make_blobs(300, n_features=3, centers=4, random_state=5)
    rng = np.random.default_rng(5)
    s = np.where(rng.random(300) < 0.7, y % 2, rng.integers(0, 2, 300))
    with pytest.warns(UserWarning, match="least balanced clusters"):
        m = FairDen(n_clusters=4, rounding="kmeans").fit(X, sensitive_features=s)
    assert _digest(m.labels_) == "e67188e6f8fda973"
    balanced = FairDen(n_clusters=4, rounding="balanced").fit(X, sensitive_features=s)
    assert balanced.balance_ > 0.95 > m.balance_
    # the noise loop: the earlier code recomputed the embedding with k + 1 eigenvectors
    rng = np.random.default_rng(2)
    X = np.vstack([rng.normal(size=(200, 2)) * 0.2, rng.normal(size=(200, 2)) * 0.2 + 4])
    X = np.vstack([X, [[30.0, 30.0], [-30.0, 30.0]]])
    s = np.concatenate([np.tile([0, 1], 200), [0, 1]])
    old = FairDen(n_clusters=3, min_samples=5, rounding="kmeans", noise_loop="recompute")
    old.fit(X, sensitive_features=s)
    assert _digest(old.labels_) == "a928fc5986aa653e" and old.embedding_.shape[1] == old.k_
    # Alg. 1 as published: k-means with k + 1 clusters on the same (k = 3) embedding
    fixed = FairDen(n_clusters=3, min_samples=5, rounding="kmeans").fit(X, sensitive_features=s)
    assert fixed.k_ == 4 and fixed.embedding_.shape == (402, 3)
    assert np.all(fixed.labels_[-2:] == -1) and fixed.n_clusters_ == 3


def test_balanced_rounding_never_lowers_balance():
    for seed in range(3):
        X, y = make_blobs(240, n_features=2, centers=3, cluster_std=0.7, random_state=seed)
        rng = np.random.default_rng(seed)
        s = (rng.random(240) < np.array([0.5, 0.2, 0.8])[y]).astype(int)
        for k in (2, 3):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                paper = FairDen(n_clusters=k, rounding="kmeans").fit(X, sensitive_features=s)
            new = FairDen(n_clusters=k, rounding="balanced").fit(X, sensitive_features=s)
            assert new.balance_ >= paper.balance_ - 1e-12
            if new.rounding_ == "kmeans":
                assert np.array_equal(new.labels_, paper.labels_)


# --- DCSI: Euclidean and squared (the published evaluation) ---


def test_dcsi_squared_hand_computed():
    X = np.array([[0.0], [2.0], [4.0], [7.0], [9.0], [11.0], [100.0]])
    lab = np.array([0, 0, 0, 1, 1, 1, -1])
    # minPts = 1: eps = median distance to the 2nd neighbour = 4 (squared: 16), every point is
    # core; Conn = 2 (MST edges), Sep = 3 (4 -> 7); one noise point of 7
    assert dcsi(X, lab, min_samples=1) == pytest.approx((1.5 / 2.5) * 6 / 7)  # q = 3/2
    assert dcsi(X, lab, min_samples=1, squared=True) == pytest.approx((2.25 / 3.25) * 6 / 7)
    with pytest.raises(InvalidInputError, match="squared"):
        dcsi(X, lab, squared="yes")


def _dcsi_published_oracle(X: np.ndarray, lab: np.ndarray, min_pts: int = 5) -> float:
    """The published evaluation's procedure, written from its description: squared Euclidean
    distance matrix, eps = median distance to the 2 minPts-th neighbour, core points with at
    least minPts others within eps, MST / separation on the core points."""
    keep = lab != -1
    ids = np.unique(lab[keep])
    cores, conn = [], []
    for c in ids:
        P = X[lab == c]
        D = cdist(P, P) ** 2
        eps = np.median(np.sort(D, axis=1)[:, 2 * min_pts])
        core = P[((D <= eps).sum(axis=1) - 1) >= min_pts]
        cores.append(core)
        conn.append(minimum_spanning_tree(cdist(core, core) ** 2).toarray().max())
    total = 0.0
    for a, b in itertools.combinations(range(ids.size), 2):
        q = (cdist(cores[a], cores[b]) ** 2).min() / max(conn[a], conn[b])
        total += q / (1 + q)
    return total / (ids.size * (ids.size - 1) / 2) * keep.mean()


@pytest.mark.parametrize("seed", range(3))
def test_dcsi_squared_matches_the_published_procedure(seed):
    X, y = make_blobs(150, centers=3, cluster_std=1.2, random_state=seed)
    y = y.copy()
    y[:7] = -1
    assert dcsi(X, y, squared=True) == pytest.approx(_dcsi_published_oracle(X, y), rel=1e-9)
    assert dcsi(X, y, squared=False) != pytest.approx(dcsi(X, y, squared=True))
