"""Estimators on graph objects built beforehand: CoreGraph, DCTree, ConstraintGraph."""

from __future__ import annotations

import numpy as np
import pytest

from gnnaudit.clustering import ExDBSCAN, FairDen, TreeClustering, generate_constraints
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import ConstraintGraph, CoreGraph, DCTree

# ----------------------------------------------------------------------------- ExDBSCAN


@pytest.fixture(scope="module")
def blobs3(blobs_dbscan):
    return blobs_dbscan[0]


def test_exdbscan_on_a_core_graph_equals_the_internal_one(blobs3):
    X = blobs3
    inner = ExDBSCAN(eps=0.4, min_samples=5, n_counterfactuals=3).fit(X)
    cg = CoreGraph.from_dbscan(X, 0.4, 5)
    outer = ExDBSCAN(eps=0.4, min_samples=5, n_counterfactuals=3).fit(X, core_graph=cg)
    assert outer.core_graph_ is cg
    np.testing.assert_array_equal(inner.labels_, outer.labels_)
    np.testing.assert_array_equal(inner.core_sample_indices_, outer.core_sample_indices_)
    noise = np.flatnonzero(inner.labels_ == -1)[:3]
    for i in noise:
        a, b = inner.explain(int(i), target=1), outer.explain(int(i), target=1)
        np.testing.assert_array_equal(a.counterfactuals, b.counterfactuals)
        np.testing.assert_array_equal(a.reference_cores, b.reference_cores)
        assert a.energy == b.energy


@pytest.mark.parametrize(
    "build, params, match",
    [
        (lambda X: CoreGraph.from_dbscan(X, 0.3, 5), {}, "eps=0.3"),
        (lambda X: CoreGraph.from_dbscan(X, 0.4, 4), {}, "min_samples=4"),
        (lambda X: CoreGraph.from_dbscan(X, 0.4, 5, "manhattan"), {}, "metric='manhattan'"),
        (lambda X: CoreGraph.from_dbscan(X[:-1], 0.4, 5), {}, "shape"),
        (lambda X: CoreGraph.from_dbscan(X + 1e-3, 0.4, 5), {}, "other data"),
        (lambda X: "graph", {}, "CoreGraph"),
    ],
)
def test_exdbscan_rejects_a_mismatched_core_graph(blobs3, build, params, match):
    with pytest.raises(InvalidInputError, match=match):
        ExDBSCAN(eps=0.4, min_samples=5, **params).fit(blobs3, core_graph=build(blobs3))


def test_exdbscan_core_graph_and_dbscan_are_exclusive(blobs3):
    from sklearn.cluster import DBSCAN

    db = DBSCAN(eps=0.4, min_samples=5).fit(blobs3)
    cg = CoreGraph.from_dbscan(blobs3, 0.4, 5)
    with pytest.raises(InvalidInputError, match="not both"):
        ExDBSCAN(eps=0.4, min_samples=5).fit(blobs3, dbscan=db, core_graph=cg)


# ----------------------------------------------------------------------------- FairDen


@pytest.mark.parametrize("solver", ["dense", "matrix_free"])
def test_fairden_on_a_dc_tree_equals_the_internal_one(fair_blobs, solver):
    X, s = fair_blobs
    inner = FairDen(n_clusters=2, solver=solver).fit(X, sensitive_features=s)
    tree = DCTree(min_samples=5).fit(X)  # default minPts = 2 * 3 - 1
    outer = FairDen(n_clusters=2, solver=solver).fit(X, sensitive_features=s, dc_tree=tree)
    assert outer.dc_tree_ is tree
    np.testing.assert_array_equal(inner.labels_, outer.labels_)
    np.testing.assert_allclose(inner.eigenvalues_, outer.eigenvalues_)
    # a tree from precomputed MST edges (Boruvka) serves as well
    boruvka = DCTree(min_samples=5, mst_method="boruvka").fit(X)
    again = FairDen(n_clusters=2, solver=solver).fit(X, sensitive_features=s, dc_tree=boruvka)
    np.testing.assert_array_equal(inner.labels_, again.labels_)


def test_fairden_dc_tree_of_the_used_points_when_groups_are_excluded(fair_blobs):
    X, s = fair_blobs
    s = s.copy()
    s[:2] = 5  # a group of two points, excluded by min_group_size=3
    model = FairDen(n_clusters=2, min_group_size=3)
    inner = model.fit(X, sensitive_features=s).labels_
    tree = DCTree(min_samples=5).fit(X[2:])
    np.testing.assert_array_equal(model.fit(X, sensitive_features=s, dc_tree=tree).labels_, inner)
    with pytest.raises(InvalidInputError, match="excluded"):
        model.fit(X, sensitive_features=s, dc_tree=DCTree(min_samples=5).fit(X))


@pytest.mark.parametrize(
    "tree, match",
    [
        (lambda X: DCTree(min_samples=5).fit(X[:-1]), "239 points"),
        (lambda X: DCTree(min_samples=4).fit(X), "min_samples=4"),
        (lambda X: DCTree(min_samples=5).fit(X[::-1]), "does not match"),
        (lambda X: DCTree(min_samples=5).fit(X * 1.01), "does not match"),
        (lambda X: DCTree(min_samples=5), "not fitted"),
        (lambda X: X, "DCTree"),
    ],
)
def test_fairden_rejects_a_mismatched_dc_tree(fair_blobs, tree, match):
    X, s = fair_blobs
    with pytest.raises(InvalidInputError, match=match):
        FairDen(n_clusters=2).fit(X, sensitive_features=s, dc_tree=tree(X))


# ----------------------------------------------------------------------------- TreeClustering


def test_tree_clustering_on_a_constraint_graph_equals_pairs(iris):
    X, y = iris[0][::3], iris[1][::3]
    ml, cl = generate_constraints(y, 0.5, random_state=2)
    kw = dict(depth=2, objective="md-ms", epsilon=0.5)
    a = TreeClustering(3, **kw).fit(X, must_link=ml, cannot_link=cl)
    b = TreeClustering(3, **kw).fit(X, constraints=ConstraintGraph(len(X), ml, cl))
    assert a.status_ == b.status_ == "optimal"
    assert a.cost_ == b.cost_ and a.n_clauses_ == b.n_clauses_
    np.testing.assert_array_equal(a.labels_, b.labels_)


def test_tree_clustering_rejects_a_mismatched_constraint_graph():
    X = np.random.default_rng(0).normal(size=(8, 2))
    with pytest.raises(InvalidInputError, match="n=9"):
        TreeClustering(2).fit(X, constraints=ConstraintGraph(9, [(0, 1)]))
    with pytest.raises(InvalidInputError, match="not both"):
        TreeClustering(2).fit(X, must_link=[(0, 1)], constraints=ConstraintGraph(8))
    with pytest.raises(InvalidInputError, match="ConstraintGraph"):
        TreeClustering(2).fit(X, constraints=[(0, 1)])
