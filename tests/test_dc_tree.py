"""DCTree: exact dc-distances, MST methods agree, tree matvec, DBSCAN* cut, PyG transform."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.cluster import DBSCAN
from sklearn.metrics import adjusted_rand_score
from torch_geometric.data import Data

from gnnaudit.errors import InvalidInputError, NotFittedError
from gnnaudit.graph_ops import DCTree, DCTreeTransform
from gnnaudit.graph_ops.mst import core_distances, mst_boruvka, mst_dense, mutual_reachability


def brute_dc(X: np.ndarray, min_pts: int) -> np.ndarray:
    """Minimax path distances on the complete d_m graph (Floyd-Warshall style), O(n^3)."""
    n = X.shape[0]
    diff = X[:, None, :] - X[None, :, :]
    d = np.sqrt((diff**2).sum(-1))
    cd = np.sort(d, axis=1)[:, min(min_pts, n) - 1]
    D = np.maximum(d, np.maximum(cd[:, None], cd[None, :]))
    np.fill_diagonal(D, 0.0)
    for k in range(n):
        D = np.minimum(D, np.maximum(D[:, k, None], D[None, k, :]))
    return D


points = st.integers(1, 25).flatmap(
    lambda n: st.lists(st.lists(st.integers(-3, 3), min_size=2, max_size=2), min_size=n, max_size=n)
)


@settings(max_examples=60, deadline=None)
@given(points, st.integers(1, 6), st.sampled_from(["dense", "boruvka"]))
def test_dc_distance_equals_brute_force_minimax(pts, min_pts, method):
    X = np.asarray(pts, dtype=float) * 0.5  # integer grid: many duplicates and ties
    tree = DCTree(min_samples=min_pts, mst_method=method).fit(X)
    D = tree.to_dense()
    np.testing.assert_allclose(D, brute_dc(X, min_pts), atol=1e-12)
    n = X.shape[0]
    assert np.all(np.diag(D) == 0) and np.allclose(D, D.T)
    # ultrametric inequality d(i,j) <= max(d(i,k), d(k,j))
    assert np.all(D[:, None, :] <= np.maximum(D[:, :, None], D[None, :, :]) + 1e-12)
    V = np.random.default_rng(n).normal(size=(n, 3))
    np.testing.assert_allclose(tree.matvec(V), D @ V, atol=1e-9)
    np.testing.assert_allclose(tree.matvec(V[:, 0]), D @ V[:, 0], atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 40),
    st.integers(1, 3),
    st.integers(1, 7),
    st.integers(0, 10_000),
    # (max_complement_trees, k_max): complement trees only / kNN expansion only / mixed
    st.sampled_from([(0, 256), (10**9, 10**9), (2, 4)]),
)
def test_boruvka_equals_dense_on_random_gaussians(n, d, min_pts, seed, mode):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[: n // 3] = X[n - n // 3 :]  # exact duplicates
    cd = core_distances(X, min_pts)
    a = mst_dense(X, cd)
    b = mst_boruvka(X, cd, k_init=2, max_complement_trees=mode[0], k_max=mode[1], chunk=7)
    assert a.u.size == b.u.size == n - 1
    assert a.total_weight == pytest.approx(b.total_weight, rel=1e-12, abs=1e-12)
    # a spanning tree: n - 1 edges connecting everything
    g = coo_matrix((np.ones(n - 1), (b.u, b.v)), shape=(n, n))
    assert connected_components(g, directed=False)[0] == 1


def test_boruvka_equals_dense_on_separated_blobs_with_duplicates():
    rng = np.random.default_rng(1)
    centers = np.array([[0, 0, 0], [20, 0, 0], [0, 30, 0], [50, 50, 50]], dtype=float)
    X = np.vstack([c + rng.normal(size=(300, 3)) for c in centers])
    X[100:160] = X[:60]
    X = np.vstack([X, rng.uniform(-10, 60, size=(20, 3))])  # sparse noise
    dense = DCTree(min_samples=7, mst_method="dense").fit(X)
    boruvka = DCTree(min_samples=7, mst_method="boruvka").fit(X)
    assert boruvka.mst_.total_weight == pytest.approx(dense.mst_.total_weight, rel=1e-12)
    np.testing.assert_allclose(boruvka.to_dense(), dense.to_dense(), atol=1e-12)
    # anchor pruning of the complement search (components larger than 4 anchors)
    few = mst_boruvka(X, dense.core_distances_, n_anchors=4, max_complement_trees=10**6)
    assert few.total_weight == pytest.approx(dense.mst_.total_weight, rel=1e-12)
    # pairwise queries agree with the dense matrix and with mutual reachability on MST edges
    i = rng.integers(0, X.shape[0], 500)
    j = rng.integers(0, X.shape[0], 500)
    np.testing.assert_allclose(boruvka.distance(i, j), dense.to_dense()[i, j])
    mr = mutual_reachability(X, dense.core_distances_)
    np.testing.assert_allclose(dense.mst_.weight, mr[dense.mst_.u, dense.mst_.v], atol=1e-9)


def test_matvec_on_larger_tree_matches_dense():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(700, 4))
    tree = DCTree(min_samples=5).fit(X)
    V = rng.normal(size=(700, 5))
    np.testing.assert_allclose(tree.matvec(V), tree.to_dense() @ V, rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("eps", [0.15, 0.3, 0.6])
def test_cut_matches_dbscan_core_points(eps):
    rng = np.random.default_rng(4)
    X = np.vstack([rng.normal(size=(150, 2)) * 0.3, rng.normal(size=(150, 2)) * 0.3 + 3])
    tree = DCTree(min_samples=5).fit(X)
    labels = tree.cut(eps)
    db = DBSCAN(eps=eps, min_samples=5).fit(X)
    core = np.zeros(X.shape[0], dtype=bool)
    core[db.core_sample_indices_] = True
    np.testing.assert_array_equal(labels != -1, core)
    if core.any():
        assert adjusted_rand_score(db.labels_[core], labels[core]) == pytest.approx(1.0)


def test_single_point_and_identical_points():
    t = DCTree(min_samples=3).fit(np.zeros((1, 2)))
    assert t.max_distance_ == 0.0 and t.to_dense().shape == (1, 1)
    np.testing.assert_array_equal(t.matvec(np.ones(1)), [0.0])
    t = DCTree(min_samples=3).fit(np.ones((6, 2)))
    assert t.max_distance_ == 0.0
    np.testing.assert_array_equal(t.to_dense(), np.zeros((6, 6)))
    np.testing.assert_array_equal(t.cut(0.0), np.zeros(6, dtype=int))


def test_errors():
    with pytest.raises(NotFittedError):
        DCTree().distance(0, 1)
    with pytest.raises(InvalidInputError, match="min_samples"):
        DCTree(min_samples=0).fit(np.zeros((3, 2)))
    with pytest.raises(InvalidInputError, match="finite"):
        DCTree().fit(np.array([[0.0, np.nan], [1.0, 2.0]]))
    with pytest.raises(InvalidInputError, match="mst_method"):
        DCTree(mst_method="prim").fit(np.zeros((3, 2)))
    t = DCTree(min_samples=2).fit(np.random.default_rng(0).normal(size=(10, 2)))
    with pytest.raises(InvalidInputError, match="must lie in"):
        t.distance(0, 10)
    with pytest.raises(InvalidInputError, match="V must have shape"):
        t.matvec(np.ones(9))
    with pytest.raises(InvalidInputError, match="max_n"):
        t.to_dense(max_n=5)


def test_transform_writes_mst_and_keeps_input():
    x = torch.randn(30, 3, generator=torch.Generator().manual_seed(0))
    data = Data(x=x)
    out = DCTreeTransform(min_samples=4)(data)
    assert not hasattr(data, "mst_edge_index") or data.mst_edge_index is None
    assert out.mst_edge_index.shape == (2, 58) and out.mst_weight.shape == (58,)
    assert out.core_distance.shape == (30,)
    tree = DCTree(min_samples=4).fit(x.numpy())
    assert float(out.mst_weight.sum()) / 2 == pytest.approx(tree.mst_.total_weight, rel=1e-5)
    with pytest.raises(InvalidInputError, match="no attribute"):
        DCTreeTransform(attr="pos")(data)


def test_dendrogram_equals_scipy_single_linkage_and_disjoint_set():
    """The dendrogram of the MST is scipy's single linkage of the mutual-reachability
    distances (heights and merge sizes; no ties on continuous data), and its union-find pass
    merges as scipy's ``DisjointSet`` does."""
    from scipy.cluster.hierarchy import DisjointSet, linkage
    from scipy.spatial.distance import squareform

    from gnnaudit.graph_ops.dc_tree import _single_linkage

    rng = np.random.default_rng(7)
    X = rng.normal(size=(60, 3))
    tree = DCTree(min_samples=4, mst_method="dense").fit(X)
    d = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    cd = core_distances(X, 4)
    reach = np.maximum(d, np.maximum(cd[:, None], cd[None, :]))
    np.fill_diagonal(reach, 0.0)
    ref = linkage(squareform(reach, checks=False), method="single")
    np.testing.assert_allclose(tree.linkage_[:, 2], ref[:, 2])
    np.testing.assert_array_equal(tree.linkage_[:, 3], ref[:, 3])

    mst = tree.mst_
    children, _, sizes = _single_linkage(60, mst)
    order = np.argsort(mst.weight, kind="stable")
    ds, node_of = DisjointSet(range(60)), list(range(60))
    for t, (u, v) in enumerate(zip(mst.u[order], mst.v[order], strict=True)):
        a, b = ds[int(u)], ds[int(v)]
        assert {children[t, 0], children[t, 1]} == {node_of[a], node_of[b]}
        ds.merge(a, b)
        assert sizes[t] == ds.subset_size(a)
        node_of[ds[a]] = 60 + t
