"""CoreGraph: core mask, eps-graph, shortest paths, assignment, PyG transform."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import floyd_warshall
from sklearn.cluster import DBSCAN
from sklearn.datasets import make_blobs, make_moons
from torch_geometric.data import Data

from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import CoreGraph, CoreGraphTransform
from gnnaudit.graph_ops._distances import metric_distances


@pytest.fixture(scope="module")
def moons():
    X, _ = make_moons(300, noise=0.06, random_state=0)
    return X


def brute_adjacency(X, cores, labels, eps, metric="euclidean"):
    P = X[cores]
    D = metric_distances(P, P, metric)
    A = (D <= eps) & (labels[cores][:, None] == labels[cores][None, :])
    np.fill_diagonal(A, False)
    return A, D


def test_matches_sklearn_and_brute_force_graph(moons):
    eps, ms = 0.15, 5
    cg = CoreGraph.from_dbscan(moons, eps, ms)
    db = DBSCAN(eps=eps, min_samples=ms).fit(moons)
    np.testing.assert_array_equal(cg.labels, db.labels_)
    assert set(np.flatnonzero(cg.core_mask)) == set(db.core_sample_indices_)
    assert cg.n_clusters == len(set(db.labels_) - {-1})
    A, D = brute_adjacency(moons, cg.core_indices, cg.labels, eps)
    adj = cg.adjacency.toarray()
    np.testing.assert_array_equal(adj > 0, A)
    np.testing.assert_allclose(adj[A], D[A], rtol=1e-12)
    # clusters are contiguous diagonal blocks, sorted
    assert np.all(np.diff(cg.core_labels) >= 0)


def test_from_fitted_equals_from_dbscan(moons):
    db = DBSCAN(eps=0.15, min_samples=5).fit(moons)
    a = CoreGraph.from_fitted(moons, db)
    b = CoreGraph.from_dbscan(moons, 0.15, 5)
    np.testing.assert_array_equal(a.core_indices, b.core_indices)
    assert (a.adjacency != b.adjacency).nnz == 0


def test_shortest_paths_match_floyd_warshall(moons):
    cg = CoreGraph.from_dbscan(moons, 0.15, 5)
    for c in cg.clusters:
        cores = cg.cluster_cores(c)
        A, D = brute_adjacency(moons, cores, cg.labels, cg.eps)
        dense = np.where(A, D, 0.0)
        ref = floyd_warshall(dense, directed=False)
        src = cores[[0, len(cores) // 2]]
        got = cg.shortest_paths(src)
        np.testing.assert_allclose(got, ref[[0, len(cores) // 2]], rtol=1e-10)
        assert np.isfinite(got).all()  # a DBSCAN cluster's core graph is connected


def test_duplicate_points_keep_their_edge():
    X = np.array([[0.0, 0.0], [0.0, 0.0], [0.1, 0.0], [0.2, 0.0], [5.0, 5.0]])
    cg = CoreGraph.from_dbscan(X, eps=0.15, min_samples=2)
    assert cg.core_mask[:4].all()
    # the zero-distance pair is an edge with a tiny positive weight
    i, j = cg.global_positions(np.array([0, 1]))
    w = cg.adjacency[i, j]
    assert 0 < w <= cg.eps * 1e-12
    D = cg.shortest_paths([0])
    cols = list(cg.cluster_cores(int(cg.labels[0])))
    assert D[0, cols.index(1)] == pytest.approx(cg.min_weight)
    assert D[0, cols.index(3)] == pytest.approx(0.2)


def brute_assign(points, X, cores, labels, eps):
    D = metric_distances(points, X[cores], "euclidean")
    j = D.argmin(axis=1)
    out = labels[cores][j]
    out[D[np.arange(len(points)), j] > eps] = -1
    return out


def test_assign_matches_brute_force(moons):
    cg = CoreGraph.from_dbscan(moons, 0.15, 5)
    rng = np.random.default_rng(0)
    pts = rng.uniform(-1.5, 2.5, size=(500, 2))
    np.testing.assert_array_equal(
        cg.assign(pts), brute_assign(pts, moons, cg.core_indices, cg.labels, cg.eps)
    )
    # core points are assigned to their own cluster
    np.testing.assert_array_equal(cg.assign(moons[cg.core_indices]), cg.core_labels)


def test_assign_at_exactly_eps_and_large_offset():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [10.0, 0.0]]) + 1e8
    cg = CoreGraph.from_dbscan(X, eps=1.0, min_samples=2)
    pts = np.array([[3.0, 0.0], [3.0 + 1e-6, 0.0], [-1.0, 0.0]]) + 1e8
    np.testing.assert_array_equal(cg.assign(pts), [0, -1, 0])


@pytest.mark.parametrize("metric", ["manhattan", "chebyshev", "cosine"])
def test_other_metrics(metric):
    X, _ = make_blobs(200, centers=3, n_features=3, random_state=1)
    X = X + 20.0  # keep cosine away from the origin
    eps = {"manhattan": 1.5, "chebyshev": 0.8, "cosine": 0.002}[metric]
    cg = CoreGraph.from_dbscan(X, eps, 4, metric=metric)
    db = DBSCAN(eps=eps, min_samples=4, metric=metric).fit(X)
    np.testing.assert_array_equal(cg.labels, db.labels_)
    A, D = brute_adjacency(X, cg.core_indices, cg.labels, eps, metric)
    np.testing.assert_array_equal(cg.adjacency.toarray() > 0, A)


def test_edge_index_and_weights(moons):
    cg = CoreGraph.from_dbscan(moons, 0.15, 5)
    ei, w = cg.edge_index, cg.edge_weight
    assert ei.shape == (2, cg.adjacency.nnz) and w.shape == (ei.shape[1],)
    d = np.sqrt(((moons[ei[0]] - moons[ei[1]]) ** 2).sum(1))
    np.testing.assert_allclose(w, d, rtol=1e-12)
    assert cg.core_mask[ei].all()
    assert (cg.labels[ei[0]] == cg.labels[ei[1]]).all()


def test_transform_writes_attributes_without_mutating(moons):
    data = Data(x=torch.tensor(moons, dtype=torch.float32))
    out = CoreGraphTransform(eps=0.15, min_samples=5)(data)
    assert not hasattr(data, "core_mask") or data.core_mask is None
    assert out.core_mask.dtype == torch.bool and out.core_mask.shape == (300,)
    assert out.cluster.dtype == torch.long
    assert out.core_edge_index.shape[0] == 2 and out.core_edge_index.dtype == torch.long
    assert out.core_edge_weight.shape[0] == out.core_edge_index.shape[1]
    ref = CoreGraph.from_dbscan(moons.astype(np.float32).astype(np.float64), 0.15, 5)
    np.testing.assert_array_equal(out.cluster.numpy(), ref.labels)
    assert "CoreGraphTransform" in repr(CoreGraphTransform(0.1))


def test_bad_input():
    X = np.zeros((5, 2))
    with pytest.raises(InvalidInputError, match="eps"):
        CoreGraph.from_dbscan(X, -1.0, 3)
    with pytest.raises(InvalidInputError, match="metric"):
        CoreGraph.from_dbscan(X, 1.0, 3, metric="mahalanobis")
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(InvalidInputError, match="finite"):
        CoreGraph.from_dbscan(bad, 1.0, 3)
    with pytest.raises(InvalidInputError, match="fitted"):
        CoreGraph.from_fitted(X, DBSCAN())
    cg = CoreGraph.from_dbscan(X, 1.0, 3)
    with pytest.raises(InvalidInputError, match="not a cluster"):
        cg.cluster_cores(7)
    with pytest.raises(InvalidInputError, match="features"):
        cg.assign(np.zeros((1, 3)))
    with pytest.raises(InvalidInputError, match="core"):
        CoreGraph.from_dbscan(np.arange(10.0).reshape(5, 2) * 10, 1.0, 3).assign(np.zeros(2))


def test_mean_edge_weight(moons):
    cg = CoreGraph.from_dbscan(moons, 0.15, 5)
    for c in cg.clusters:
        assert cg.mean_edge_weight(c) == pytest.approx(cg.cluster_graph(c).data.mean())
    assert cg.mean_edge_weight() == pytest.approx(cg.adjacency.data.mean())
    assert cg.mean_edge_weight(list(cg.clusters)) == pytest.approx(cg.adjacency.data.mean())


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), eps=st.floats(0.05, 0.6), ms=st.integers(2, 6))
def test_hypothesis_assign_and_graph_match_brute_force(seed, eps, ms):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(80, 2)), 1)  # rounding creates duplicates and exact ties
    cg = CoreGraph.from_dbscan(X, eps, ms)
    pts = np.round(rng.normal(size=(40, 2)), 1)
    # core points by brute force: at least ms points (itself included) within eps
    n_within = (metric_distances(X, X, "euclidean") <= eps).sum(axis=1)
    np.testing.assert_array_equal(cg.core_mask, n_within >= ms)
    A, _ = brute_adjacency(X, cg.core_indices, cg.labels, eps)
    np.testing.assert_array_equal(cg.adjacency.toarray() > 0, A)
    if cg.n_cores:
        np.testing.assert_array_equal(
            cg.assign(pts), brute_assign(pts, X, cg.core_indices, cg.labels, eps)
        )
    else:  # no core point: nothing to assign to, and the error says so
        with pytest.raises(InvalidInputError, match="no core point"):
            cg.assign(pts)
