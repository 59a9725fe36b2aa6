"""Numerics and bounds of graph_ops and the clustering estimators (issue 19 items 3 and 5):
translation invariance, finiteness checks, constructors proportional to their input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import adjusted_rand_score

from gnnaudit.clustering import ExDBSCAN, FairDen, TreeClustering, generate_constraints
from gnnaudit.clustering.exdbscan_constraints import parse_constraints
from gnnaudit.clustering.fair_spectral import AffinityOperator, fair_embedding_dense
from gnnaudit.clustering.goodall import Goodall1
from gnnaudit.datasets.tabular import three_moons
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import ConstraintGraph, CoreGraph, DCTree
from gnnaudit.graph_ops._distances import metric_distances, rowwise_distances
from gnnaudit.graph_ops.mst import core_distances, mst_boruvka, mst_dense, mutual_reachability

OFFSET = 1e8

# ----------------------------------------------------------------------------- translation


@pytest.mark.parametrize("method", ["dense", "boruvka"])
def test_dc_distances_do_not_depend_on_translation(method):
    X = np.random.default_rng(0).normal(size=(60, 2))
    near = DCTree(min_samples=3, mst_method=method).fit(X)
    far = DCTree(min_samples=3, mst_method=method).fit(X + OFFSET)
    # X + 1e8 itself is rounded to multiples of 1.5e-8: that is the only difference left
    np.testing.assert_allclose(far.to_dense(), near.to_dense(), rtol=0, atol=1e-7)
    np.testing.assert_allclose(far.core_distances_, near.core_distances_, rtol=0, atol=1e-7)
    assert far.mst_.total_weight == pytest.approx(near.mst_.total_weight, abs=1e-6)


def test_mutual_reachability_and_complement_search_far_from_the_origin():
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(size=(150, 3)), rng.normal(size=(150, 3)) + 8]) + OFFSET
    cd = core_distances(X, 5)
    M = mutual_reachability(X, cd)
    diff = X[:, None, :] - X[None, :, :]
    brute = np.maximum(np.sqrt((diff**2).sum(-1)), np.maximum(cd[:, None], cd[None, :]))
    np.fill_diagonal(brute, 0.0)
    np.testing.assert_allclose(M, brute, rtol=1e-12, atol=0)
    dense = mst_dense(X, cd)
    # complement trees with anchor pruning (the bound uses exact differences)
    pruned = mst_boruvka(X, cd, n_anchors=4, max_complement_trees=10**6)
    assert pruned.total_weight == pytest.approx(dense.total_weight, rel=1e-12)


def test_fairden_labels_do_not_depend_on_translation():
    moons = three_moons(n_per_moon=100, noise=0.05, seed=0)
    for solver in ("dense", "matrix_free"):
        near = FairDen(solver=solver).fit(moons.X, sensitive_features=moons.sensitive)
        far = FairDen(solver=solver).fit(moons.X + OFFSET, sensitive_features=moons.sensitive)
        assert adjusted_rand_score(near.labels_, far.labels_) == 1.0
        np.testing.assert_array_equal(near.labels_, far.labels_)


def test_exdbscan_is_exact_far_from_the_origin():
    X = np.random.default_rng(2).normal(size=(200, 2)) * 0.3
    X[100:] += 3.0
    near = ExDBSCAN(eps=0.3, min_samples=4).fit(X)
    far = ExDBSCAN(eps=0.3, min_samples=4).fit(X + OFFSET)
    np.testing.assert_array_equal(near.labels_, far.labels_)
    i = int(np.flatnonzero(far.labels_ == 0)[0])
    res = far.explain(i, target=1)
    assert res.valid.all()
    cores = far.core_graph_.core_points
    for c, t in zip(res.counterfactuals, res.targets, strict=True):
        d = np.sqrt(((cores - c) ** 2).sum(1))  # brute force: nearest core decides
        j = int(np.argmin(d))
        assert d[j] <= 0.3 and far.core_graph_.core_labels[j] == t


# ----------------------------------------------------------------------------- finiteness


@pytest.fixture(scope="module")
def fitted():
    X = np.random.default_rng(3).normal(size=(40, 2))
    X[20:] += 4
    return X, DCTree(min_samples=3).fit(X), CoreGraph.from_dbscan(X, 0.8, 3)


def _nan_like(shape):
    V = np.ones(shape)
    V.flat[1] = np.nan
    return V


def test_graph_ops_refuse_non_finite_arrays(fitted):
    X, tree, cg = fitted
    bad = X.copy()
    bad[3, 1] = np.inf
    calls = {
        "DCTree.matvec": lambda: tree.matvec(_nan_like(40)),
        "DCTree.matvec 2-D": lambda: tree.matvec(_nan_like((40, 2))),
        "CoreGraph.distances": lambda: cg.distances(np.array([np.nan, 0.0]), [0, 1]),
        "CoreGraph.assign": lambda: cg.assign(np.array([[0.0, np.inf]])),
        "core_distances": lambda: core_distances(bad, 3),
        "mst_dense": lambda: mst_dense(bad, np.zeros(40)),
        "mst_boruvka": lambda: mst_boruvka(X, _nan_like(40)),
        "mutual_reachability": lambda: mutual_reachability(bad, np.zeros(40)),
        "metric_distances": lambda: metric_distances(bad, X, "euclidean"),
        "rowwise_distances": lambda: rowwise_distances(bad, X, "manhattan"),
        "rowwise overflow": lambda: rowwise_distances(
            np.array([[1e308]]), np.array([[-1e308]]), "euclidean"
        ),
        "DCTree.from_mst": lambda: DCTree.from_mst(
            tree.core_distances_,
            type(tree.mst_)(tree.mst_.u, tree.mst_.v, _nan_like(tree.mst_.weight.shape)),
        ),
    }
    for name, call in calls.items():
        with pytest.raises(InvalidInputError, match="finite|NaN|inf"):
            call()
            pytest.fail(f"{name} accepted a NaN / inf")


def test_index_arguments_are_checked(fitted):
    _, _, cg = fitted
    with pytest.raises(InvalidInputError, match="integer"):
        cg.distances(np.zeros(2), np.array([0.5]))
    with pytest.raises(InvalidInputError, match="must lie in"):
        cg.shortest_paths([10_000])
    with pytest.raises(InvalidInputError, match="core points"):
        cg.local_positions(np.flatnonzero(~cg.core_mask)[:1])


def test_clustering_helpers_refuse_non_finite_arrays(fitted, iris):
    X, tree, _ = fitted
    op = AffinityOperator(tree, None, 1.0, 0.0)
    goodall = Goodall1(np.arange(40)[:, None] % 3)
    cons = parse_constraints(2, None, immutable=[0])
    model = TreeClustering(3, depth=2).fit(iris[0])
    calls = [
        lambda: op.matvec(_nan_like(40)),
        lambda: goodall.matvec(_nan_like((40, 2))),
        lambda: fair_embedding_dense(_nan_like((40, 40)), np.zeros((40, 0)), 2),
        lambda: cons.satisfied(np.zeros(2), np.array([[np.nan, 1.0]])),
        lambda: model.tree_.apply(_nan_like((2, 4))),
        lambda: model.predict(_nan_like((2, 4))),
    ]
    for call in calls:
        with pytest.raises(InvalidInputError, match="finite|NaN"):
            call()


# ----------------------------------------------------------------------------- bounds


def test_constraint_graph_is_proportional_to_the_pairs():
    n = 10**12  # an O(n) constructor would need terabytes here
    g = ConstraintGraph(n, must_link=[(3, 10**11)], cannot_link=[(3, 7), (5, 7)])
    assert g.n_components == n - 1 and g.is_feasible
    assert g.component_of(np.array([3, 10**11, 4, n - 1])).tolist() == [3, 3, 4, n - 2]
    assert g.exclusions.tolist() == [[3, 7], [5, 7]]  # 10**11 joins 3: ids below it unchanged
    bad = ConstraintGraph(n, must_link=[(0, 10**11), (10**11, 2)], cannot_link=[(0, 2)])
    assert not bad.is_feasible and f"0 - {10**11} - 2" in bad.reason


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.data())
def test_constraint_graph_components_equal_scipy_on_the_full_graph(n, data):
    pair = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))
    ml = data.draw(st.lists(pair, max_size=12))
    cl = [p for p in data.draw(st.lists(pair, max_size=8)) if p[0] != p[1]]
    g = ConstraintGraph(n, ml, cl)
    A = sp.coo_matrix((np.ones(len(ml)), ([a for a, _ in ml], [b for _, b in ml])), shape=(n, n))
    n_comp, comp = connected_components(A, directed=False)
    assert g.n_components == n_comp
    np.testing.assert_array_equal(g.components, comp)
    ex = {tuple(sorted((comp[a], comp[b]))) for a, b in cl if comp[a] != comp[b]}
    assert set(map(tuple, g.exclusions.tolist())) == ex
    contradiction = any(comp[a] == comp[b] for a, b in cl)
    assert g.is_feasible == (not contradiction)


# ----------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("bad", ["x", -1, 2**32, 1.5, True])
def test_random_state_errors(bad, fair_blobs):
    X, s = fair_blobs
    with pytest.raises(InvalidInputError, match="random_state"):
        FairDen(random_state=bad).fit(X, sensitive_features=s)


def test_generate_constraints_random_state_errors():
    y = np.array([0, 1, 0, 1, 1])
    for bad in (-1, "seed", 1.5, True):
        with pytest.raises(InvalidInputError, match="random_state"):
            generate_constraints(y, 1.0, random_state=bad)
    a = generate_constraints(y, 1.0, random_state=np.random.default_rng(4))
    b = generate_constraints(y, 1.0, random_state=4)
    assert np.array_equal(a.must_link, b.must_link)


@pytest.mark.parametrize(
    "estimator",
    [ExDBSCAN(), FairDen(), TreeClustering(depth=1)],
    ids=lambda e: type(e).__name__,
)
def test_dataframe_with_a_string_column_names_it(estimator):
    frame = pd.DataFrame(
        {"income": np.arange(12.0), "city": ["Paris", "Lyon"] * 6, "age": np.arange(12.0) % 5}
    )
    with pytest.raises(InvalidInputError, match=r"'city' \((object|str)"):
        estimator.fit(frame)
