"""Scale-safe distances (issue 27): data at 1e-160 (squares underflow) or 1e160 (squares
overflow) give the clustering of the same data at scale 1 in DCTree, FairDen and ExDBSCAN,
and the distances are the scaled ones up to relative 1e-12."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_blobs

from gnnaudit.clustering import ExDBSCAN, FairDen
from gnnaudit.graph_ops import CoreGraph, DCTree
from gnnaudit.graph_ops._distances import metric_distances, power_of_two_scale, rowwise_distances
from gnnaudit.graph_ops.mst import core_distances, mst_boruvka, mst_dense, mutual_reachability

SCALES = [1e-160, 1e-100, 1.0, 1e100, 1e160]


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(120, n_features=3, centers=3, cluster_std=0.6, random_state=2)
    s = np.random.default_rng(2).integers(0, 2, 120)
    return X, s


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("method", ["dense", "boruvka"])
def test_dc_tree_core_distances_and_cut(blobs, scale, method):
    X, _ = blobs
    base = DCTree(min_samples=5, mst_method=method).fit(X)
    tree = DCTree(min_samples=5, mst_method=method).fit(X * scale)
    np.testing.assert_allclose(tree.core_distances_ / scale, base.core_distances_, rtol=1e-12)
    np.testing.assert_allclose(
        np.sort(tree.mst_.weight) / scale, np.sort(base.mst_.weight), rtol=1e-12
    )
    w = np.unique(base.mst_.weight)
    eps = float(0.5 * (w[w.size // 2] + w[w.size // 2 + 1]))  # between two weights: no tie
    np.testing.assert_array_equal(tree.cut(eps * scale), base.cut(eps))
    assert tree.max_distance_ > 0


@pytest.mark.parametrize("scale", SCALES)
def test_mst_functions(blobs, scale):
    X, _ = blobs
    Xs = X * scale
    cd, cds = core_distances(X, 4), core_distances(Xs, 4)
    np.testing.assert_allclose(cds / scale, cd, rtol=1e-12)
    np.testing.assert_allclose(
        mutual_reachability(Xs, cds) / scale, mutual_reachability(X, cd), rtol=1e-12
    )
    for mst in (mst_dense, mst_boruvka):
        np.testing.assert_allclose(
            mst(Xs, cds).total_weight / scale, mst(X, cd).total_weight, rtol=1e-12
        )


@pytest.mark.parametrize("scale", SCALES)
def test_fairden_labels(blobs, scale):
    X, s = blobs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        base = FairDen(n_clusters=3).fit(X, sensitive_features=s)
        model = FairDen(n_clusters=3).fit(X * scale, sensitive_features=s)
    np.testing.assert_array_equal(model.labels_, base.labels_)
    assert model.n_clusters_ == 3
    np.testing.assert_allclose(
        model.dc_tree_.core_distances_ / scale, base.dc_tree_.core_distances_, rtol=1e-12
    )
    assert model.dcsi_ == pytest.approx(base.dcsi_, rel=1e-9)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("metric", ["euclidean", "manhattan", "chebyshev", "cosine"])
def test_exdbscan_labels_and_core_graph(blobs, scale, metric):
    X, _ = blobs
    eps = 0.02 if metric == "cosine" else 0.9
    e_scale = 1.0 if metric == "cosine" else scale
    base = ExDBSCAN(eps=eps, min_samples=5, metric=metric).fit(X)
    model = ExDBSCAN(eps=eps * e_scale, min_samples=5, metric=metric).fit(X * scale)
    np.testing.assert_array_equal(model.labels_, base.labels_)
    assert len(set(base.labels_) - {-1}) >= 2
    cg0 = CoreGraph.from_dbscan(X, eps, 5, metric)
    cg = CoreGraph.from_dbscan(X * scale, eps * e_scale, 5, metric)
    np.testing.assert_array_equal(cg.core_indices, cg0.core_indices)
    d0, i0 = cg0.nearest_cores(X[:10] + 0.01, k=3)
    d, i = cg.nearest_cores((X[:10] + 0.01) * scale, k=3)
    np.testing.assert_array_equal(i, i0)
    # cosine distance is 1 - similarity: absolute rounding ~1e-16 whatever the scale
    np.testing.assert_allclose(d / e_scale, d0, rtol=1e-12, atol=1e-15 if metric == "cosine" else 0)


@given(
    st.integers(0, 2**31),
    st.sampled_from(["euclidean", "manhattan", "chebyshev", "cosine"]),
    st.integers(-300, 300),
)
@settings(max_examples=60, deadline=None)
def test_rowwise_distances_scale_exactly(seed, metric, exponent):
    """d(a s, b s) = s d(a, b) (cosine: unchanged) up to relative 1e-12, s = 10**exponent,
    wherever the scaled coordinates and their differences are finite and normal."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(20, 4)), rng.normal(size=(20, 4))
    b[0] = a[0]  # a zero distance
    s = 10.0**exponent
    if not np.isfinite(np.abs(a - b).max() * s * 4) or np.abs(a).min() * s < 1e-290:
        return
    want = rowwise_distances(a, b, metric) * (1.0 if metric == "cosine" else s)
    got = rowwise_distances(a * s, b * s, metric)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15 if metric == "cosine" else 0)
    np.testing.assert_allclose(
        metric_distances(a * s, b * s, metric)[np.arange(20), np.arange(20)], got, rtol=1e-12
    )


def test_power_of_two_scale():
    assert power_of_two_scale(np.array([[3.0, -5.0]])) == 4.0
    assert power_of_two_scale(np.zeros((2, 2))) == 1.0
    assert power_of_two_scale(np.array([1e308])) == 2.0**1023
    for v in (1e-160, 1e160, 0.75):
        p = power_of_two_scale(np.array([v]))
        assert 1.0 <= v / p < 2.0 and np.log2(p) == int(np.log2(p))
