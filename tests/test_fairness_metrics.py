"""Balance (Eq. 6-7), DCSI (App. C.2) and noise-adjusted ARI / NMI."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from gnnaudit.clustering.metrics import (
    adjusted_rand_noise,
    balance,
    dcsi,
    group_mix,
    noise_fraction,
    normalized_mutual_info_noise,
)
from gnnaudit.errors import InvalidInputError


def test_balance_hand_example():
    # data: 6 of group a, 2 of group b (r_a = 3/4, r_b = 1/4)
    s = np.array(["a"] * 6 + ["b"] * 2)
    perfect = np.array([0, 0, 0, 1, 1, 1, 0, 1])
    assert balance(perfect, s) == pytest.approx(1.0)
    # cluster 0 = {a,a,a,a}: r_b(C)=0 -> 0; cluster 1 = {a,a,b,b}: r_a(C)=1/2 -> min(.5/.75, .25/.5)
    lab = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    assert balance(lab, s) == pytest.approx((0.0 + 0.5) / 2)


def test_balance_noise_adjustment_and_all_noise():
    s = np.array([0, 1, 0, 1, 0, 1])
    lab = np.array([0, 0, 1, 1, -1, -1])
    # non-noise clusters are perfectly balanced; 4/6 of the points are not noise
    assert balance(lab, s) == pytest.approx(4 / 6)
    assert balance(np.full(6, -1), s) == 0.0
    assert noise_fraction(lab) == pytest.approx(2 / 6)


def test_balance_multiple_attributes_per_attribute_vs_combined():
    s = np.array([[0, 0], [1, 1], [0, 1], [1, 0]] * 2)
    lab = np.array([0, 0, 1, 1] * 2)
    # each attribute alone is balanced in both clusters, the combined groups are not
    assert balance(lab, s) == pytest.approx(1.0)
    assert balance(lab, s, combined=True) == 0.0


def test_group_mix_table():
    s = np.array(["a", "a", "b", "b", "a"])
    table = group_mix(np.array([0, 0, 1, 1, -1]), s)
    assert list(table["cluster"]) == [-1, 0, 1]
    assert list(table["size"]) == [1, 2, 2]
    assert table.loc[table.cluster == 0, "share_a"].item() == 1.0
    assert np.isnan(table.loc[table.cluster == -1, "balance"].item())


def test_dcsi_separated_vs_overlapping():
    X, y = make_blobs(300, centers=[[0, 0], [10, 0]], cluster_std=0.5, random_state=0)
    good = dcsi(X, y)
    rng = np.random.default_rng(0)
    bad = dcsi(X, rng.integers(0, 2, 300))
    assert good > 0.8 and bad < 0.2
    assert dcsi(X, np.zeros(300, dtype=int)) == 0.0
    # noise adjustment: the same clusters with a third of the points marked noise
    y2 = y.copy()
    y2[:100] = -1
    assert dcsi(X, y2) == pytest.approx(dcsi(X[100:], y[100:]) * 200 / 300)


def test_dcsi_brute_force_small():
    X = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0]])
    lab = np.array([0, 0, 0, 1, 1, 1])
    # minPts=1: eps = median dist to the 2nd neighbour = 2, all points core;
    # conn = 1 (MST edges), sep = 8 -> q = 8 -> 8/9
    assert dcsi(X, lab, min_samples=1) == pytest.approx(8 / 9)


@pytest.mark.parametrize("n", [2, 3, 40, 150, 151, 400])
def test_dcsi_conn_is_the_largest_edge_of_the_euclidean_mst(n):
    """``Conn`` (the largest MST edge of a cluster's core points) against scipy's MST of the
    full distance matrix, on both sides of the dense / Boruvka size rule, with near and exact
    duplicates."""
    from scipy.sparse.csgraph import minimum_spanning_tree
    from scipy.spatial.distance import pdist, squareform

    from gnnaudit.clustering.metrics.fairness import _mst_max_edge

    rng = np.random.default_rng(n)
    P = rng.normal(size=(n, 3))
    P[: n // 5] = np.round(P[: n // 5], 1)  # near-duplicates
    P[n // 2 : n // 2 + n // 10] = P[: n // 10]  # exact duplicates: zero-length edges
    D = squareform(pdist(P))
    oracle = minimum_spanning_tree(np.where(D > 0, D, 1e-300)).toarray().max()  # ties kept
    assert _mst_max_edge(P) == pytest.approx(oracle, rel=1e-12)


def test_noise_adjusted_ari_nmi():
    ref = np.array([0, 0, 0, 1, 1, 1, -1, -1])
    lab = np.array([1, 1, 1, 0, 0, -1, 0, 1])
    # reference noise excluded; labels' noise point excluded and the score scaled by 5/6
    expect = adjusted_rand_score(ref[:5], lab[:5]) * 5 / 6
    assert adjusted_rand_noise(ref, lab) == pytest.approx(expect)
    assert adjusted_rand_noise(ref, ref) == pytest.approx(1.0)
    assert normalized_mutual_info_noise(ref, ref) == pytest.approx(1.0)
    assert adjusted_rand_noise(np.full(8, -1), lab) == 0.0


def test_metric_errors():
    with pytest.raises(InvalidInputError, match="rows"):
        balance(np.array([0, 1]), np.array([0, 1, 1]))
    with pytest.raises(InvalidInputError, match="integer"):
        balance(np.array([0.5, 1.0]), np.array([0, 1]))
    with pytest.raises(InvalidInputError, match="entries"):
        dcsi(np.zeros((3, 2)), np.array([0, 1]))
