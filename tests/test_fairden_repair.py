"""FairDen's default rounding (issues 29, 38): the paper's partition repaired along cheap
dc-distance moves (or surplus points dropped as noise), the candidate with the best density
structure among those reaching ``min_balance``. Oracles for the pieces (dc-distance to a
cluster, count balance, controlled rounding), the promised properties on generated data
(hypothesis) and on pinned data, and ``rounding="pareto"``'s front."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_blobs

from gnnaudit.clustering import FairDen
from gnnaudit.clustering.fairden_candidates import CANDIDATE_COLUMNS
from gnnaudit.clustering.fairden_repair import (
    PATHS,
    cluster_dc_distances,
    counts_balance,
    min_move_quotas,
    pareto_mask,
    round_table,
    smallest_step,
)
from gnnaudit.clustering.fairden_rounding import proportional_quotas
from gnnaudit.clustering.metrics import balance, dcsi
from gnnaudit.graph_ops import DCTree

CREDIT = Path("/work/shared/datasets/nifty/credit/credit.csv")


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Blobs whose sensitive shares differ per blob (the paper's rounding often misses 0.8)."""
    rng = np.random.default_rng(seed)
    c = int(rng.integers(2, 5))
    X, y = make_blobs(
        int(rng.integers(150, 300)),
        n_features=int(rng.integers(2, 4)),
        centers=c,
        cluster_std=rng.uniform(0.5, 1.2),
        random_state=seed,
    )
    s = (rng.random(len(y)) < rng.uniform(0.1, 0.9, c)[y]).astype(int)
    return X, s


def _fit(X, s, **kw) -> FairDen:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return FairDen(**kw).fit(X, sensitive_features=s)


# --------------------------------------------------------------------------- the pieces


@pytest.mark.parametrize("seed", range(6))
def test_cluster_dc_distances_against_the_dense_matrix(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 2))
    X[5] = X[6]  # a duplicate
    tree = DCTree(min_samples=3).fit(X)
    k = 3
    lab = rng.integers(-1, k, 40)
    lab[:k] = np.arange(k)
    D = tree.to_dense()
    got = cluster_dc_distances(tree, lab, k)
    for c in range(k):
        for i in range(40):
            others = np.flatnonzero((lab == c) & (np.arange(40) != i))
            want = D[i, others].min() if others.size else np.inf
            assert got[i, c] == want


@given(st.integers(0, 10_000))
@settings(max_examples=40, deadline=None)
def test_counts_balance_is_the_metric_and_round_table_keeps_margins(seed):
    rng = np.random.default_rng(seed)
    k, g = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    lab, grp = rng.integers(0, k, 60), rng.integers(0, g, 60)
    counts = np.zeros((k, g), dtype=int)
    np.add.at(counts, (lab, grp), 1)
    assert counts_balance(counts) == pytest.approx(balance(lab, grp))
    Q = proportional_quotas(counts.sum(axis=1), counts.sum(axis=0))
    t = float(rng.random())
    T = (1 - t) * counts + t * Q
    R = round_table(T)
    assert np.array_equal(R.sum(axis=1), counts.sum(axis=1))
    assert np.array_equal(R.sum(axis=0), counts.sum(axis=0))
    assert (R >= np.floor(T - 1e-9)).all() and (R <= np.ceil(T + 1e-9)).all()
    target = float(rng.uniform(0.3, 1.0))
    M = min_move_quotas(counts)
    assert np.array_equal(M.sum(axis=0), counts.sum(axis=0))
    assert (M.sum(axis=1) >= np.floor(counts.sum(axis=1) / 2)).all()
    T2 = (1 - t) * counts + t * M  # row sums need not be integers: columns rounded alone
    R2 = round_table(T2)
    assert np.array_equal(R2.sum(axis=0), counts.sum(axis=0))
    assert (R2 >= np.floor(T2 - 1e-9)).all() and (R2 <= np.ceil(T2 + 1e-9)).all()
    for target_table in (Q, M):
        step = smallest_step(counts, target_table, target)
        if counts_balance(counts) >= target:
            assert step == 0.0
        elif step < 1.0:
            T3 = (1 - step) * counts + step * target_table
            assert counts_balance(round_table(T3)) >= target


def test_min_move_quotas_moves_one_way():
    """A compact cluster short of group 1: receiving 36 group-1 points beats exchanging 40."""
    N0 = np.array([[87, 107], [55, 9]])
    M = min_move_quotas(N0)
    assert M.tolist() == [[87, 71], [55, 45]]
    assert np.abs(M - N0).sum() // 2 == 36


def test_pareto_mask_by_brute_force():
    rng = np.random.default_rng(0)
    b, d = rng.integers(0, 4, 30) / 4, rng.integers(0, 4, 30) / 4
    want = [
        not any(
            (b[j] >= b[i]) and (d[j] >= d[i]) and (b[j] > b[i] or d[j] > d[i]) for j in range(30)
        )
        for i in range(30)
    ]
    assert pareto_mask(b, d).tolist() == want


# --------------------------------------------------------------------------- the promises


def _check_promises(model: FairDen) -> None:
    """Never below the paper's balance; the paper's labels where they reach the target;
    otherwise the target with 70% of the paper's DCSI, or the density fallback (no candidate
    reaches the target while keeping 70%: the most balanced one that keeps it). The DCSI
    never falls below 70% of the paper's (the default ``min_dcsi_share``)."""
    assert model.balance_ >= model.paper_balance_ - 1e-12
    assert model.dcsi_ >= 0.7 * model.paper_dcsi_ - 1e-12
    assert model.min_cluster_balance_ <= model.balance_ + 1e-12
    if model.paper_balance_ >= model.min_balance:
        assert np.array_equal(model.labels_, model.paper_labels_)
        assert model.rounding_ == "kmeans" and model.repair_step_ == 0.0
        assert model.repair_path_ is None and len(model.candidates_) == 1
        return
    c = model.candidates_
    if model.balance_ < model.min_balance:  # the fallback: nothing reaches it with the density
        assert not (c["reaches"] & c["keeps_density"]).any()
        assert model.balance_ == c.loc[c["keeps_density"], "balance"].max()


@given(st.integers(0, 10_000), st.sampled_from([2, 3]))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_default_keeps_the_promises_on_generated_data(seed, k):
    X, s = _data(seed)
    model = _fit(X, s, n_clusters=k)
    _check_promises(model)
    paper = _fit(X, s, n_clusters=k, rounding="kmeans")
    assert np.array_equal(paper.labels_, model.paper_labels_)
    assert paper.balance_ == model.paper_balance_ and paper.dcsi_ == model.paper_dcsi_
    keep = model.labels_ >= 0
    want = dcsi(X[keep], model.labels_[keep], model.min_samples_, squared=True)
    assert model.dcsi_ == pytest.approx(want)
    assert model.noise_ratio_ == pytest.approx(1 - keep.mean())


def test_pinned_generated_data():
    """seed 2 of :func:`_data` at k = 2 (189 points): the paper's rounding gives balance 0.758
    (below the target). Every step of the exchange path from 0.64 on reaches 0.8; its end
    (exact group shares, 18 points moved) has the highest DCSI of them, above the paper's.
    seed 5952 (found by hypothesis): a compact, group-skewed cluster beside a wide one; the
    exchange path would cross the density gap both ways and make the moved points core
    points (DCSI 0.65 -> 0.007); the min-moves path only adds points to the compact
    cluster and keeps 0.64."""
    X, s = _data(2)
    model = _fit(X, s, n_clusters=2)
    _check_promises(model)
    assert model.paper_balance_ == pytest.approx(0.7577, abs=1e-3)
    assert model.balance_ == pytest.approx(0.9925, abs=1e-3)
    assert model.dcsi_ > model.paper_dcsi_
    assert model.rounding_ == "repair" and model.repair_path_ == "exchange"
    assert model.repair_step_ == 1.0
    assert np.sum(model.labels_ != model.paper_labels_) == 18  # 10%, not a reshuffle
    X, s = _data(5952)
    model = _fit(X, s, n_clusters=2)
    _check_promises(model)
    assert model.repair_path_ == "min_moves" and model.balance_ >= 0.8
    assert model.dcsi_ == pytest.approx(0.639, abs=2e-3) and model.paper_dcsi_ > 0.65


def test_pinned_conflict_between_balance_and_density():
    """seed 707 at k = 3: three separated blobs with group shares 24/76, 79/21, 84/16 (paper's
    balance 0.41). Balance 0.8 needs about 46 of 244 points inside a foreign blob, where they
    become core points of their new cluster: no step of either moving path reaches 0.8 with
    70% of the paper's DCSI (the exchange path keeps it up to 0.756). The noise path continued
    from there drops 14 surplus points (5.7%) and reaches 0.802 at DCSI 0.665 (98% of the
    paper's): the default, without a warning."""
    X, s = _data(707)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = FairDen(n_clusters=3).fit(X, sensitive_features=s)
    _check_promises(model)
    assert model.paper_balance_ == pytest.approx(0.408, abs=1e-3)
    c = model.candidates_
    moving = c[c["path"].isin(PATHS[:2])]
    assert not (moving["reaches"] & moving["keeps_density"]).any()
    assert model.repair_path_ == "exchange+noise" and model.balance_ >= 0.8
    assert model.dcsi_ >= 0.95 * model.paper_dcsi_
    assert model.noise_ratio_ == pytest.approx(14 / len(X))
    # forcing the balance target on the moving paths alone gives up the density
    moved = _fit(X, s, n_clusters=3, max_noise=0.0, min_dcsi_share=0.0)
    assert moved.balance_ >= 0.8 and moved.dcsi_ < 0.7 * model.paper_dcsi_


@pytest.mark.skipif(not CREDIT.exists(), reason="NIFTY credit table not available")
@pytest.mark.parametrize("k", [2, 3, 4])
def test_real_table_credit(k):
    """UCI credit defaulters (NIFTY's table), 600 rows, sensitive attribute Age."""
    df = pd.read_csv(CREDIT)
    rows = np.random.default_rng(0).choice(len(df), 600, replace=False)
    s = df["Age"].to_numpy()[rows]
    X = df.drop(columns=["NoDefaultNextMonth", "Age", "Single", "Married"]).to_numpy(float)[rows]
    X = X[:, X.std(axis=0) > 0]
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    model = _fit(X, s, n_clusters=k)
    _check_promises(model)


def test_min_balance_extremes():
    X, s = _data(1)
    paper = _fit(X, s, n_clusters=2, rounding="kmeans")
    zero = _fit(X, s, n_clusters=2, min_balance=0.0)
    assert np.array_equal(zero.labels_, paper.labels_) and zero.rounding_ == "kmeans"
    with pytest.warns(UserWarning, match="no repair candidate reaches min_balance=1;"):
        full = FairDen(n_clusters=2, min_balance=1.0).fit(X, sensitive_features=s)
    assert full.repair_step_ == 1.0 and full.balance_ > 0.95


# --------------------------------------------------------------------------- pareto


def test_pareto_front_and_choice():
    X, s = _data(4)
    model = _fit(X, s, n_clusters=2, rounding="pareto")
    front = model.pareto_front_
    assert front is model.candidates_
    assert list(front.columns) == list(CANDIDATE_COLUMNS)
    first = front.iloc[0]
    assert first["path"] == "paper" and first["t"] == 0.0 and first["n_moved"] == 0
    assert (front["path"] == "paper").sum() == 1 and set(front["path"]) <= {"paper", *PATHS}
    for path in PATHS:
        assert front.loc[front["path"] == path, "t"].is_monotonic_increasing
    assert first["balance"] == pytest.approx(model.paper_balance_)
    assert first["dcsi"] == pytest.approx(model.paper_dcsi_)
    want = pareto_mask(front["balance"], front["dcsi"], front["noise_ratio"])
    assert front["pareto"].tolist() == want.tolist()
    chosen = front[front["chosen"]].iloc[0]
    ok = front[front["balance"] >= 0.8]
    assert chosen["dcsi"] == ok["dcsi"].max() and chosen["balance"] >= 0.8
    assert chosen["pareto"]
    assert model.balance_ == pytest.approx(chosen["balance"])
    assert model.dcsi_ == pytest.approx(chosen["dcsi"])
    assert model.repair_step_ == chosen["t"] and model.rounding_ == "pareto"
    assert model.repair_path_ == chosen["path"]
    assert _fit(X, s, n_clusters=2).pareto_front_ is None
