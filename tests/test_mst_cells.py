"""Boruvka's cell pruning / cell search (faiss k-means cells) keeps the MST exact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from gnnaudit.graph_ops.mst import core_distances, mst_boruvka, mst_dense

pytestmark = pytest.mark.usefixtures("faiss_one_thread")


def _spanning(n: int, u: np.ndarray, v: np.ndarray) -> bool:
    g = coo_matrix((np.ones(u.size), (u, v)), shape=(n, n))
    return u.size == n - 1 and connected_components(g, directed=False)[0] == 1


@settings(max_examples=40, deadline=None)
@given(
    st.integers(12, 120),
    st.integers(1, 4),
    st.integers(1, 6),
    st.integers(0, 10_000),
    st.sampled_from(["gauss", "grid", "blobs"]),
    st.integers(2, 12),
)
def test_cell_path_equals_dense(n, d, min_pts, seed, kind, n_cells):
    rng = np.random.default_rng(seed)
    if kind == "gauss":
        X = rng.normal(size=(n, d))
        X[: n // 4] = X[n - n // 4 :]  # exact duplicates
    elif kind == "grid":
        X = rng.integers(-2, 3, size=(n, d)).astype(float)  # many duplicates and ties
    else:
        centres = rng.normal(scale=20, size=(4, d))
        X = centres[rng.integers(0, 4, n)] + rng.normal(size=(n, d))
    cd = core_distances(X, min_pts)
    ref = mst_dense(X, cd)
    # n_anchors=1: the cell path runs whenever more than 4 points are unresolved
    got = mst_boruvka(X, cd, k_init=2, n_anchors=1, n_cells=n_cells, chunk=5)
    assert _spanning(n, got.u, got.v)
    assert got.total_weight == pytest.approx(ref.total_weight, rel=1e-12, abs=1e-12)
    w = np.maximum(np.linalg.norm(X[got.u] - X[got.v], axis=1), np.maximum(cd[got.u], cd[got.v]))
    np.testing.assert_allclose(got.weight, w, rtol=1e-12, atol=1e-12)


def test_cell_path_far_from_origin_and_blobs():
    rng = np.random.default_rng(7)
    centres = rng.uniform(-30, 30, size=(12, 5))
    X = centres[rng.integers(0, 12, 3000)] + rng.normal(size=(3000, 5))
    X[:200] = X[200:400]
    cd = core_distances(X, 5)
    ref = mst_dense(X, cd)
    for shift in (0.0, 1e6):
        got = mst_boruvka(X + shift, cd, n_anchors=16, n_cells=64)
        assert got.total_weight == pytest.approx(ref.total_weight, rel=1e-9)
    plain = mst_boruvka(X, cd, cell_prune=False)
    assert plain.total_weight == pytest.approx(ref.total_weight, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(1, 5), st.integers(1, 12), st.integers(0, 10_000))
def test_knn_query_equals_brute_force(n, d, k, seed):
    """The KD-tree k-NN (queried in tree order, rows put back) equals sorting all distances;
    core distances are its minPts-th column."""
    from scipy.spatial.distance import cdist

    from gnnaudit.graph_ops.mst import knn_query

    rng = np.random.default_rng(seed)
    X = rng.integers(-3, 4, size=(n, d)).astype(float)  # duplicates and distance ties
    nd, ni = knn_query(X, k, chunk=7)
    full = np.sort(cdist(X, X), axis=1)[:, : min(k, n)]
    np.testing.assert_allclose(nd, full, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(X[ni] - X[:, None, :], axis=2), nd, atol=1e-12)
    np.testing.assert_allclose(core_distances(X, k), full[:, -1], atol=1e-12)


def test_expand_ranges_equals_a_loop_over_ranges():
    from gnnaudit.graph_ops.segments import expand_ranges

    rng = np.random.default_rng(0)
    starts, lengths = rng.integers(0, 50, 30), rng.integers(0, 6, 30)
    pos, owner = expand_ranges(starts, lengths)
    ref = [
        (s + j, i) for i, (s, n) in enumerate(zip(starts, lengths, strict=True)) for j in range(n)
    ]
    assert pos.tolist() == [a for a, _ in ref] and owner.tolist() == [b for _, b in ref]
    assert expand_ranges([], [])[0].size == 0
