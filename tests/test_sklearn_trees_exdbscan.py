"""TreeClustering and ExDBSCAN as scikit-learn estimators (issue 28), ExDBSCAN.predict against
scikit-learn's DBSCAN cores (issue 29 item 4), and the trees' anytime answer (issue 29 item 2):
the greedy warm start, ``feasible_soft``, ``n_clusters=1``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist
from sklearn.base import clone
from sklearn.cluster import DBSCAN
from sklearn.utils.estimator_checks import parametrize_with_checks

from gnnaudit.clustering import ExDBSCAN, TreeClustering, generate_constraints
from gnnaudit.errors import InvalidInputError, NotFittedError

# ----------------------------------------------------------------------------- estimator checks


@parametrize_with_checks([ExDBSCAN(), TreeClustering(depth=2)])
def test_sklearn_estimator_checks_without_expected_failures(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ExDBSCAN: "found no cluster"
        check(estimator)


@pytest.mark.parametrize(
    "est, name, value",
    [
        (ExDBSCAN(), "eps", 0.7),
        (TreeClustering(), "n_clusters", 1),
        (TreeClustering(), "time_limit", 5.0),
    ],
    ids=repr,
)
def test_set_params_takes_effect_and_fit_adds_only_fitted_attributes(est, name, value):
    X = np.random.default_rng(0).normal(size=(30, 2))
    twin = clone(est).set_params(**{name: value})
    assert getattr(twin, name) == value
    before = set(vars(twin))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        twin.fit(X)
    added = {k for k in set(vars(twin)) - before if not k.startswith("_")}
    assert added and all(k.endswith("_") for k in added)
    assert twin.get_params()[name] == value


@pytest.mark.parametrize(
    "est, kwargs, match",
    [
        (ExDBSCAN, dict(eps=0.0), "ExDBSCAN: eps"),
        (ExDBSCAN, dict(min_samples=0), "ExDBSCAN: min_samples"),
        (ExDBSCAN, dict(metric="hamming"), "ExDBSCAN: metric"),
        (ExDBSCAN, dict(alpha=1.5), "ExDBSCAN: alpha"),
        (ExDBSCAN, dict(strategy="best"), "ExDBSCAN: strategy"),
        (TreeClustering, dict(time_limit=1e-9), "TreeClustering: time_limit"),
        (TreeClustering, dict(time_limit=1e308), "TreeClustering: time_limit"),
        (TreeClustering, dict(depth=13), "TreeClustering: depth"),
        (TreeClustering, dict(random_state=-1), "TreeClustering: random_state"),
    ],
)
def test_declarative_validation_names_the_class_and_parameter(est, kwargs, match):
    X = np.random.default_rng(0).normal(size=(12, 2))
    with pytest.raises(InvalidInputError, match=match):
        est(**kwargs).fit(X)


# ----------------------------------------------------------------------------- ExDBSCAN.predict


def dbscan_oracle(X, eps, min_samples, Q):
    """scikit-learn's DBSCAN cores; a query takes the cluster of its nearest core within eps
    (brute force), else -1. Also returns a mask of queries whose nearest-core distance ties
    between two clusters (left out of the comparison)."""
    db = DBSCAN(eps=eps, min_samples=min_samples).fit(X)
    core = db.core_sample_indices_
    if not len(core):
        return np.full(len(Q), -1), np.zeros(len(Q), bool), db
    d = cdist(Q, X[core])
    near = np.argmin(d, axis=1)
    dmin = d[np.arange(len(Q)), near]
    out = np.where(dmin <= eps, db.labels_[core][near], -1)
    at_min = np.isclose(d, dmin[:, None], rtol=0, atol=1e-12)
    tie = np.array([len(set(db.labels_[core][row])) > 1 for row in at_min])
    return out, tie, db


def same_partition_on(ours, theirs, mapping):
    mapped = np.array([mapping.get(int(t), -2) if t >= 0 else -1 for t in theirs])
    return np.array_equal(ours, mapped)


def test_predict_matches_sklearn_dbscan_cores(blobs_dbscan):
    X = blobs_dbscan[0] if isinstance(blobs_dbscan, tuple) else blobs_dbscan
    eps, ms = 0.5, 5
    rng = np.random.default_rng(0)
    lo, hi = X.min(0) - 1, X.max(0) + 1
    Q = np.r_[rng.uniform(lo, hi, size=(2000, X.shape[1])), X + rng.normal(0, 0.1, X.shape)]
    model = ExDBSCAN(eps=eps, min_samples=ms).fit(X)
    expected, tie, db = dbscan_oracle(X, eps, ms, Q)
    core = db.core_sample_indices_
    mapping = dict(zip(db.labels_[core].tolist(), model.labels_[core].tolist(), strict=True))
    assert len(set(mapping.values())) == len(mapping)  # a bijection between cluster ids
    got = model.predict(Q)
    assert same_partition_on(got[~tie], expected[~tie], mapping)
    assert (got == -1).any() and (got >= 0).any()
    # training core points get their own labels back
    np.testing.assert_array_equal(model.predict(X[core]), model.labels_[core])


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(5, 60),
    eps=st.floats(0.2, 2.0),
    min_samples=st.integers(1, 6),
)
def test_predict_matches_the_dbscan_oracle_on_random_data(seed, n, eps, min_samples):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=2.0, size=(n, 2))
    Q = rng.normal(scale=2.5, size=(50, 2))
    model = ExDBSCAN(eps=eps, min_samples=min_samples).fit(X)
    expected, tie, db = dbscan_oracle(X, eps, min_samples, Q)
    core = db.core_sample_indices_
    mapping = dict(zip(db.labels_[core].tolist(), model.labels_[core].tolist(), strict=True))
    got = model.predict(Q)
    assert same_partition_on(got[~tie], expected[~tie], mapping)
    if len(core):
        np.testing.assert_array_equal(model.predict(X[core]), model.labels_[core])
    else:
        assert (got == -1).all()


def test_predict_chunks_give_the_same_answer(monkeypatch):
    import gnnaudit.clustering.exdbscan as ex

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    Q = rng.normal(size=(500, 3))
    model = ExDBSCAN(eps=0.6, min_samples=4).fit(X)
    whole = model.predict(Q)
    monkeypatch.setattr(ex, "PREDICT_CHUNK", 7)
    np.testing.assert_array_equal(model.predict(Q), whole)


def test_predict_errors():
    X = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.raises(NotFittedError):
        ExDBSCAN().predict(X)
    model = ExDBSCAN(eps=0.8).fit(X)
    with pytest.raises(InvalidInputError):
        model.predict(X[:, :1])
    with pytest.raises(InvalidInputError):
        model.predict(np.array([[np.nan, 0.0]]))
    with pytest.warns(UserWarning, match="no cluster"):
        lonely = ExDBSCAN(eps=1e-6, min_samples=3).fit(X)
    assert (lonely.predict(X) == -1).all()


# ----------------------------------------------------------------------------- trees answer


def test_n_clusters_one_is_a_single_leaf():
    X = np.random.default_rng(0).normal(size=(25, 3))
    m = TreeClustering(n_clusters=1, depth=2).fit(X)
    assert m.status_ == "optimal" and (m.labels_ == 0).all()
    assert m.tree_.depth == 0 and m.tree_.n_leaves == 1 and (m.predict(X) == 0).all()
    Xs = (X - X.min(0)) / (X.max(0) - X.min(0)) * 100
    assert m.max_diameter_ == pytest.approx(cdist(Xs, Xs).max()) and m.min_split_ == np.inf
    assert "cluster 0 (n=25)" in m.export_text()
    # one cluster cannot honour a cannot-link: a proof, no labels
    bad = TreeClustering(n_clusters=1).fit(X, cannot_link=[(0, 1)])
    assert bad.status_ == "infeasible" and bad.labels_ is None
    soft = TreeClustering(n_clusters=1, constraint_weight=1.0).fit(X, cannot_link=[(0, 1)])
    assert soft.labels_ is not None and len(soft.violated_constraints_) == 1


def _unknown_search(enc, deadline, sat_solver):
    from gnnaudit.clustering.tree_search import SolveResult

    return SolveResult("unknown", None, None, 0.0, enc.lower_bound, "stub")


@pytest.mark.parametrize("tree", [True, False])
def test_an_expired_search_returns_the_greedy_tree_with_what_it_breaks(iris, monkeypatch, tree):
    """The search finds nothing (stubbed): the greedy tree comes back, feasible_soft when it
    breaks a constraint, and violated_constraints_ lists exactly the broken pairs."""
    import gnnaudit.clustering.tree_fit as tf

    X, y = iris
    monkeypatch.setitem(tf.SOLVERS, "auto", _unknown_search)
    ml, cl = generate_constraints(y, 1.0, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = TreeClustering(3, depth=2, tree=tree, time_limit=30.0).fit(
            X, must_link=ml, cannot_link=cl
        )
    assert m.labels_ is not None and m.solver_used_ == "greedy"
    broken = {(int(a), int(b)) for a, b in ml if m.labels_[a] != m.labels_[b]}
    broken |= {(int(a), int(b)) for a, b in cl if m.labels_[a] == m.labels_[b]}
    soft = [w for w in caught if "feasible_soft" in str(w.message)]
    # a tree that breaks hard constraints is announced as a UserWarning naming the count
    assert len(soft) == (1 if broken else 0)
    if broken:
        assert soft[0].category is UserWarning and f"breaks {len(broken)} constraint" in str(
            soft[0].message
        )
    got = m.violated_constraints_
    assert set(zip(got["i"].tolist(), got["j"].tolist(), strict=True)) == broken
    assert m.status_ == ("feasible_soft" if broken else "feasible")
    if tree:
        np.testing.assert_array_equal(m.predict(X), m.labels_)
    assert len(np.unique(m.labels_)) == 3  # min_clusters = n_clusters non-empty clusters


def test_greedy_tree_without_broken_constraints_is_a_model_of_the_encoding(iris):
    """warm_values of a greedy tree that breaks nothing satisfies every hard clause (checked by
    a SAT oracle under the full assignment as assumptions), and its cost is what
    TreeEncoding.cost says; otherwise the assumptions are refuted."""
    from pysat.solvers import Solver

    from gnnaudit.clustering.tree_encoding import build_encoding
    from gnnaudit.clustering.tree_model import scale_features
    from gnnaudit.clustering.tree_pairs import smart_pairs
    from gnnaudit.clustering.tree_warm import greedy_tree, warm_values
    from gnnaudit.graph_ops.constraints import ConstraintGraph
    from gnnaudit.graph_ops.distance_classes import distance_classes

    X, y = iris
    Xs = scale_features(X, X.min(0), np.ptp(X, axis=0))
    classes = distance_classes(Xs, 0.5)
    seen = set()
    for kappa, seed in ((0.0, 0), (0.1, 0), (2.0, 1)):
        ml, cl = generate_constraints(y, kappa, random_state=seed)
        graph = ConstraintGraph(len(X), ml, cl)
        warm = greedy_tree(Xs, graph, n_clusters=3, min_clusters=3, depth=2)
        enc = build_encoding(Xs, classes, smart_pairs(graph, classes, together=True),
                             n_clusters=3, min_clusters=3, depth=2, objective="md-ms")  # fmt: skip
        vals = warm_values(enc, warm, Xs, classes)
        ids = np.arange(1, enc.n_vars + 1)
        with Solver(name="g4", bootstrap_with=enc.hard) as oracle:
            ok = oracle.solve(assumptions=np.where(vals[1:], ids, -ids).tolist())
        assert ok == (warm.broken == 0), (kappa, warm.broken)
        seen.add(warm.broken == 0)
    assert seen == {True, False}  # both branches exercised


def test_cli_time_limit_bounds_and_identical_rows(tmp_path, capsys):
    from gnnaudit.cli.main import main

    data = tmp_path / "d.csv"
    data.write_text("a,b\n" + "1,2\n" * 6)
    for bad in ("1e-9", "1e308", "nan"):
        assert main(["tree-cluster", str(data), "--n-clusters", "2", "--time-limit", bad]) == 2
        assert "--time-limit" in capsys.readouterr().err
    assert main(["tree-cluster", str(data), "--n-clusters", "2"]) == 2  # identical rows: a proof
    assert "infeasible" in capsys.readouterr().err
    assert main(["tree-cluster", str(data), "--n-clusters", "1"]) == 0


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(6, 40),
    k=st.integers(2, 4),
    depth=st.integers(1, 3),
    kappa=st.floats(0.0, 2.0),
)
def test_greedy_tree_invariants(seed, n, k, depth, kappa):
    """The greedy tree routes every point to its label, numbers clusters by first appearance,
    puts empty leaves in cluster 0, opens min_clusters clusters and counts its broken pairs
    right (independent count)."""
    from gnnaudit.clustering.tree_model import scale_features
    from gnnaudit.clustering.tree_warm import greedy_tree
    from gnnaudit.graph_ops.constraints import ConstraintGraph

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = rng.integers(0, k, n)
    ml, cl = generate_constraints(y, kappa, random_state=seed)
    Xs = scale_features(X, X.min(0), np.ptp(X, axis=0))
    k_min = min(k, 2**depth)
    g = greedy_tree(Xs, ConstraintGraph(n, ml, cl), n_clusters=k, min_clusters=k_min, depth=depth)
    assert g is not None  # the median-split fallback opens k_min clusters
    node = np.zeros(n, np.int64)
    for _ in range(depth):
        node = 2 * node + 1 + (Xs[np.arange(n), g.feature[node]] > g.threshold[node])
    leaf = node - (2**depth - 1)
    np.testing.assert_array_equal(leaf, g.leaf)
    np.testing.assert_array_equal(g.leaf_cluster[leaf], g.labels)
    _, first = np.unique(g.labels, return_index=True)
    assert g.labels[np.sort(first)].tolist() == list(range(len(first)))
    assert len(first) >= k_min and g.labels.max() < k
    empty = np.bincount(leaf, minlength=2**depth) == 0
    assert (g.leaf_cluster[empty] == 0).all()
    bad = sum(g.labels[a] != g.labels[b] for a, b in ml) + sum(
        g.labels[a] == g.labels[b] for a, b in cl
    )
    assert g.broken == bad
