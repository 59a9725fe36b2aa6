"""TreeClustering (MaxSAT, Eq. 7-39) against brute force and independent checkers."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from clustering_oracles import honours, labelled_pairs
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist, squareform

from gnnaudit.clustering import TreeClustering, generate_constraints
from gnnaudit.clustering.tree_clustering import scale_features
from gnnaudit.errors import InfeasibleError, InvalidInputError, NotFittedError

# ----------------------------------------------------------------------------- oracles


def scaled(X):
    lo, hi = X.min(0), X.max(0)
    return scale_features(X, lo, hi - lo)


def md_ms(D, labels):
    """Batched MD / MS of labelings ``labels`` (M, n) under the distance matrix ``D``."""
    same = labels[:, :, None] == labels[:, None, :]
    iu = np.triu_indices(D.shape[0], 1)
    s = same[:, iu[0], iu[1]]
    d = D[iu]
    md = np.where(s, d, -np.inf).max(1)
    ms = np.where(~s, d, np.inf).min(1)
    return np.maximum(md, 0.0), ms


def brute_force(X, k, depth, ml=(), cl=(), tree=True):
    """All depth-``depth`` trees (thresholds between consecutive distinct values, as Eq. 14-15
    force them non-trivial) with every leaf->cluster map, or every labeling (tree=False).
    Returns (MD, MS) arrays of the labelings that use all k clusters and honour ML / CL."""
    n, F = X.shape
    Xs = scaled(X)
    D = squareform(pdist(Xs))
    if tree:
        options = []
        for j in range(F):
            v = np.unique(X[:, j])
            options += [(j, t) for t in (v[:-1] + v[1:]) / 2]
        n_nodes, n_leaves = 2**depth - 1, 2**depth
        maps = np.array(list(itertools.product(range(k), repeat=n_leaves)))
        labelings = []
        for nodes in itertools.product(options, repeat=n_nodes):
            node = np.zeros(n, dtype=int)
            for _ in range(depth):
                f = np.array([nodes[t][0] for t in node])
                thr = np.array([nodes[t][1] for t in node])
                node = 2 * node + 1 + (X[np.arange(n), f] > thr)
            leaf = node - n_nodes
            labelings.append(maps[:, leaf])
        labels = np.unique(np.concatenate(labelings), axis=0)
    else:
        labels = np.array(list(itertools.product(range(k), repeat=n)))
    used = np.array([len(np.unique(r)) for r in labels]) == k
    ok = used.copy()
    for i, j in np.asarray(ml, dtype=int).reshape(-1, 2):
        ok &= labels[:, i] == labels[:, j]
    for i, j in np.asarray(cl, dtype=int).reshape(-1, 2):
        ok &= labels[:, i] != labels[:, j]
    labels = labels[ok]
    if not len(labels):
        return None, None, D
    md, ms = md_ms(D, labels)
    return md, ms, D


def class_rank(D, values):
    """0-based epsilon=0 distance class of each value (distinct distance values)."""
    u = np.unique(D[np.triu_indices(D.shape[0], 1)])
    return np.searchsorted(u, values)


def random_instance(rng, n, F, k, m):
    X = rng.integers(0, 9, size=(n, F)).astype(float)
    y = rng.integers(0, k, size=n)
    ml, cl = labelled_pairs(rng, y, m)
    return X, ml, cl


# ----------------------------------------------------------------------------- optimality


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("depth, k", [(1, 2), (2, 2), (2, 3)])
def test_epsilon_zero_equals_brute_force_over_all_trees(seed, depth, k):
    rng = np.random.default_rng(100 * seed + 10 * depth + k)
    n = int(rng.integers(5, 8))
    X, ml, cl = random_instance(rng, n, 2, k, int(rng.integers(0, 4)))
    bf_md, bf_ms, D = brute_force(X, k, depth, ml, cl)
    for objective in ("md", "md-ms"):
        m = TreeClustering(k, depth=depth, objective=objective, epsilon=0.0).fit(
            X, must_link=ml, cannot_link=cl
        )
        if bf_md is None:
            assert m.status_ == "infeasible" and m.labels_ is None
            continue
        assert m.status_ == "optimal"
        assert honours(m.labels_, ml, cl) and len(np.unique(m.labels_)) == k
        if objective == "md":
            assert m.max_diameter_ == pytest.approx(bf_md.min(), abs=1e-9)
        else:
            best = (class_rank(D, bf_md) - class_rank(D, bf_ms)).min()
            got = class_rank(D, m.max_diameter_) - class_rank(D, m.min_split_)
            assert got == best
            assert m.cost_ == m.n_distance_classes_ + best + 1  # lambda- + mu - lambda+


@pytest.mark.parametrize("seed", range(4))
def test_cc_baseline_equals_brute_force_over_all_labelings(seed):
    rng = np.random.default_rng(seed)
    X, ml, cl = random_instance(rng, 7, 2, 3, 4)
    bf_md, _, _ = brute_force(X, 3, 0, ml, cl, tree=False)
    m = TreeClustering(3, objective="md", epsilon=0.0, tree=False).fit(
        X, must_link=ml, cannot_link=cl
    )
    assert m.status_ == "optimal" and m.tree_ is None
    assert m.max_diameter_ == pytest.approx(bf_md.min(), abs=1e-9)
    tree_md, _, _ = brute_force(X, 3, 2, ml, cl)
    if tree_md is not None:  # the CC baseline is at least as good as any tree
        assert bf_md.min() <= tree_md.min() + 1e-12


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from(["md", "md-ms"]),
    st.sampled_from([0.0, 5.0, 30.0]),
    st.booleans(),
)
def test_smart_pairs_never_change_the_optimum(seed, objective, eps, tree):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 13))
    X, ml, cl = random_instance(rng, n, 2, 3, int(rng.integers(0, 8)))
    kw = dict(depth=2, objective=objective, epsilon=eps, tree=tree)
    a = TreeClustering(3, smart_pairs=True, **kw).fit(X, must_link=ml, cannot_link=cl)
    b = TreeClustering(3, smart_pairs=False, **kw).fit(X, must_link=ml, cannot_link=cl)
    assert a.status_ == b.status_
    assert a.cost_ == b.cost_
    assert a.n_clauses_ <= b.n_clauses_
    if eps == 0.0 and objective == "md" and a.labels_ is not None:
        assert a.max_diameter_ == b.max_diameter_


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["md", "md-ms"]))
def test_all_solvers_agree(seed, objective):
    rng = np.random.default_rng(seed)
    X, ml, cl = random_instance(rng, 12, 3, 3, 6)
    a = TreeClustering(3, depth=2, objective=objective, solver="rc2").fit(
        X, must_link=ml, cannot_link=cl
    )
    b = TreeClustering(3, depth=2, objective=objective, solver="lsu").fit(
        X, must_link=ml, cannot_link=cl
    )
    c = TreeClustering(3, depth=2, objective=objective, solver="binary").fit(
        X, must_link=ml, cannot_link=cl
    )
    assert a.status_ == b.status_ == c.status_ and a.cost_ == b.cost_ == c.cost_


def test_epsilon_bound_on_the_diameter(iris):
    X = iris[0][::3]
    exact = TreeClustering(3, depth=2, objective="md", epsilon=0.0).fit(X)
    for eps in (0.5, 5.0):
        approx = TreeClustering(3, depth=2, objective="md", epsilon=eps).fit(X)
        assert approx.max_diameter_ <= exact.max_diameter_ + eps + 1e-9
        assert approx.n_distance_classes_ < exact.n_distance_classes_


# ----------------------------------------------------------------------------- invariants


@pytest.fixture(scope="module")
def iris_fit(iris):
    X, y = iris
    ml, cl = generate_constraints(y, 0.5, random_state=3)
    m = TreeClustering(3, depth=3, objective="md-ms", epsilon=0.1).fit(
        X, must_link=ml, cannot_link=cl
    )
    return X, y, ml, cl, m


def test_iris_constraints_predict_and_objectives(iris_fit):
    X, y, ml, cl, m = iris_fit
    assert m.status_ == "optimal"
    assert honours(m.labels_, ml, cl)
    assert np.array_equal(m.predict(X), m.labels_)
    md, ms = md_ms(squareform(pdist(scaled(X))), m.labels_[None])
    assert m.max_diameter_ == pytest.approx(md[0]) and m.min_split_ == pytest.approx(ms[0])
    assert sorted(np.unique(m.labels_)) == [0, 1, 2] and m.labels_[0] == 0
    tree = m.tree_
    assert tree.feature.shape == (7,) and tree.leaf_cluster.shape == (8,)
    assert tree.leaf_size.sum() == len(X)
    # thresholds lie strictly inside the value range of their feature
    lo, hi = X.min(0)[tree.feature], X.max(0)[tree.feature]
    assert np.all((tree.threshold > lo) & (tree.threshold < hi))
    assert np.all((tree.threshold_scaled > 0) & (tree.threshold_scaled < 100))
    assert m.n_vars_ > 0 and m.n_clauses_ == sum(m.clause_counts_.values())
    assert m.solve_time_ >= 0 and m.build_time_ >= 0
    assert m.lambda_plus_ <= m.lambda_minus_


def test_export_text(iris_fit):
    X, _, _, _, m = iris_fit
    names = ["sepal length", "sepal width", "petal length", "petal width"]
    full = m.export_text(feature_names=names, show_empty=True).splitlines()
    assert len(full) == 2 * 7 + 8
    assert sum("cluster" in ln for ln in full) == 8
    assert names[m.tree_.feature[0]] in full[0]
    # by default leaves no training point reaches (and splits leading only to them) are left out
    lines = m.export_text(feature_names=names).splitlines()
    sizes = [int(ln.rsplit("(n=", 1)[1].rstrip(")")) for ln in lines if "cluster" in ln]
    assert sizes == [int(v) for v in m.tree_.leaf_size if v > 0]
    assert sum(sizes) == len(X) and "(n=0)" not in "\n".join(lines)
    assert "x[" in m.export_text()
    with pytest.raises(InvalidInputError, match="feature_names"):
        m.export_text(feature_names=["a"])


def test_export_text_uses_the_fitted_column_names_and_drops_empty_leaves():
    X = pd.DataFrame({"income": [0.0, 1.0, 2.0, 10.0, 11.0, 12.0], "age": [5.0] * 6})
    m = TreeClustering(2, depth=3, objective="md", epsilon=0.0).fit(X)
    assert m.status_ == "optimal" and list(m.feature_names_in_) == ["income", "age"]
    text = m.export_text()
    assert "income" in text and "x[" not in text
    assert (m.tree_.leaf_size == 0).any()  # 6 points, 8 leaves
    assert "(n=0)" not in text and "(n=0)" in m.export_text(show_empty=True)
    assert text.count("cluster") == int((m.tree_.leaf_size > 0).sum())


def test_predict_routes_new_points_by_thresholds(iris_fit):
    X, _, _, _, m = iris_fit
    t = m.tree_
    f, thr = t.feature[0], t.threshold[0]
    x = X[:1].copy()
    x[0, f] = thr  # on the threshold: goes left
    left = t.apply(x)[0]
    x[0, f] = np.nextafter(thr, np.inf)
    right = t.apply(x)[0]
    assert left < t.n_leaves // 2 <= right
    with pytest.raises(InvalidInputError, match="features"):
        m.predict(X[:, :3])
    with pytest.raises(InvalidInputError, match="finite"):
        m.predict(np.full((1, 4), np.nan))


def test_min_clusters_allows_fewer_clusters():
    X = np.array([[0.0], [1.0], [2.0], [50.0], [51.0], [100.0]])
    m = TreeClustering(4, depth=2, objective="md", epsilon=0.0, min_clusters=2).fit(X)
    assert 2 <= len(np.unique(m.labels_)) <= 4
    full = TreeClustering(4, depth=2, objective="md", epsilon=0.0).fit(X)
    assert len(np.unique(full.labels_)) == 4
    assert m.max_diameter_ >= full.max_diameter_ - 1e-12


# ----------------------------------------------------------------------------- infeasibility


def test_depth_too_small_for_constraints_is_infeasible():
    X = np.arange(8, dtype=float)[:, None]
    ml, cl = [(0, 2)], [(0, 1)]  # 0 and 2 together, 1 in between apart: needs two splits
    with pytest.warns(UserWarning, match=r"no clustering exists \(status_='infeasible'"):
        m = TreeClustering(2, depth=1).fit(X, must_link=ml, cannot_link=cl)
    assert m.status_ == "infeasible" and m.labels_ is None and m.tree_ is None
    with pytest.raises(InfeasibleError, match="infeasible"):
        m.predict(X)
    deeper = TreeClustering(2, depth=2).fit(X, must_link=ml, cannot_link=cl)
    assert deeper.status_ == "optimal" and honours(deeper.labels_, ml, cl)
    cc = TreeClustering(2, depth=1, tree=False).fit(X, must_link=ml, cannot_link=cl)
    assert cc.status_ == "optimal" and honours(cc.labels_, ml, cl)


@pytest.mark.parametrize("smart", [True, False])
def test_contradictory_constraints_raise_before_solving(smart):
    X = np.random.default_rng(0).normal(size=(6, 2))
    with pytest.raises(InfeasibleError, match="both"):
        TreeClustering(2, smart_pairs=smart).fit(X, must_link=[(0, 1)], cannot_link=[(1, 0)])
    with pytest.raises(InfeasibleError, match="must-link component"):
        TreeClustering(2, smart_pairs=smart).fit(
            X, must_link=[(0, 1), (1, 2)], cannot_link=[(2, 0)]
        )
    m = TreeClustering(2)
    with pytest.raises(InfeasibleError):
        m.fit(X, must_link=[(0, 1)], cannot_link=[(0, 1)])
    assert getattr(m, "status_", None) is None  # nothing was solved


def test_uncolourable_cannot_links_are_infeasible_not_one_cluster():
    X = np.random.default_rng(0).normal(size=(5, 2))
    cl = [(0, 1), (1, 2), (0, 2)]  # a triangle cannot be 2-coloured
    m = TreeClustering(2, depth=2, tree=False).fit(X, cannot_link=cl)
    assert m.status_ == "infeasible"


def test_time_limit_statuses(iris):
    X, y = iris
    ml, cl = generate_constraints(y, 0.25, random_state=0)
    for solver in ("rc2", "lsu", "binary"):
        m = TreeClustering(3, depth=3, solver=solver, time_limit=1e-3).fit(
            X, must_link=ml, cannot_link=cl
        )
        # a tiny limit still returns a tree: the greedy start (never None labels)
        assert m.status_ in {"optimal", "feasible", "feasible_soft"}
        assert m.labels_ is not None and m.tree_ is not None
        np.testing.assert_array_equal(m.predict(X), m.labels_)
        bad = m.violated_constraints_
        if m.status_ == "feasible_soft":
            assert len(bad) > 0 and not honours(m.labels_, ml, cl)
            assert set(bad["kind"]) <= {"must-link", "cannot-link"} and bad["weight"].isna().all()
        else:
            assert honours(m.labels_, ml, cl) and len(bad) == 0


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_clusters=0), "n_clusters"),
        (dict(n_clusters=2.5), "n_clusters"),
        (dict(n_clusters=2, depth=0), "depth"),
        (dict(n_clusters=5, depth=2), "leaves"),
        (dict(n_clusters=3, objective="ms"), "objective"),
        (dict(n_clusters=3, epsilon=-1.0), "epsilon"),
        (dict(n_clusters=3, epsilon=float("nan")), "epsilon"),
        (dict(n_clusters=3, min_clusters=0), "min_clusters"),
        (dict(n_clusters=3, min_clusters=4), "min_clusters"),
        (dict(n_clusters=3, solver="loandra"), "solver"),
        (dict(n_clusters=3, time_limit=0), "time_limit"),
        (dict(n_clusters=3, time_limit=1e-9), "time_limit"),
        (dict(n_clusters=3, time_limit=1e308), "time_limit"),
        (dict(n_clusters=3, time_limit=float("inf")), "time_limit"),
        (dict(n_clusters=3, smart_pairs="yes"), "smart_pairs"),
        (dict(n_clusters=9, depth=4), "n_samples"),
        (dict(n_clusters=3, sat_solver="nope"), "sat_solver"),
        (dict(n_clusters=3, sat_solver="cd19", time_limit=5.0), "interrupted"),
    ],
)
def test_parameter_validation(kwargs, match):
    X = np.random.default_rng(0).normal(size=(8, 2))
    with pytest.raises(InvalidInputError, match=match):
        TreeClustering(**kwargs).fit(X)


def test_input_validation():
    m = TreeClustering(2)
    with pytest.raises(InvalidInputError, match="finite"):
        m.fit(np.array([[0.0, 1.0], [np.nan, 2.0], [3.0, 4.0]]))
    with pytest.raises(InvalidInputError, match="2D array"):
        m.fit(np.zeros(5))
    with pytest.raises(InvalidInputError, match="must_link"):
        m.fit(np.zeros((4, 2)), must_link=[(0, 4)])
    with pytest.raises(InvalidInputError, match="self pair"):
        m.fit(np.zeros((4, 2)), cannot_link=[(1, 1)])
    ok = TreeClustering(2, depth=1, epsilon=0.0).fit(
        np.array([[0.0], [1.0], [5.0], [6.0]]), must_link=[(2, 2)]
    )  # ML self pairs are harmless
    assert ok.status_ == "optimal"
    with pytest.raises(NotFittedError):
        TreeClustering(2).predict(np.zeros((2, 2)))


def test_constant_features_and_duplicates():
    X = np.array([[1.0, 7.0], [1.0, 7.0], [1.0, 9.0], [1.0, 9.0]])
    m = TreeClustering(2, depth=1, epsilon=0.0).fit(X)
    assert m.status_ == "optimal" and m.tree_.feature[0] == 1  # feature 0 is constant
    assert m.labels_.tolist() == [0, 0, 1, 1]
    bad = TreeClustering(2, depth=2).fit(X, cannot_link=[(0, 1)])  # duplicates cannot split
    assert bad.status_ == "infeasible"


@pytest.mark.parametrize("seed", range(4))
def test_depth_three_recovers_a_planted_tree(seed):
    """Labels made by a random depth-3 tree: constraints drawn from them are always feasible."""
    rng = np.random.default_rng(seed)
    y = np.zeros(1)
    while len(np.unique(y)) < 3:  # draw until the planted tree uses all three clusters
        X = rng.uniform(0, 10, size=(28, 2))
        feature = rng.integers(0, 2, size=7)
        threshold = rng.uniform(2, 8, size=7)
        leaf_cluster = rng.permutation(np.r_[0, 1, 2, rng.integers(0, 3, size=5)])
        node = np.zeros(len(X), dtype=int)
        for _ in range(3):
            node = 2 * node + 1 + (X[np.arange(len(X)), feature[node]] > threshold[node])
        y = leaf_cluster[node - 7]
    ml, cl = generate_constraints(y, 3.0, random_state=seed)
    m = TreeClustering(3, depth=3, objective="md-ms", epsilon=1.0).fit(
        X, must_link=ml, cannot_link=cl
    )
    assert m.status_ == "optimal"
    assert honours(m.labels_, ml, cl) and np.array_equal(m.predict(X), m.labels_)


# ----------------------------------------------------------------------------- constraints


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 60), st.floats(0.0, 3.0), st.integers(0, 1000))
def test_generate_constraints_protocol(n, kappa, seed):
    y = np.random.default_rng(seed).integers(0, 3, size=n)
    kappa = min(kappa, (n - 1) / 2)
    ml, cl = generate_constraints(y, kappa, random_state=seed)
    pairs = np.concatenate([ml, cl])
    assert ml.dtype == cl.dtype == np.int64 and ml.shape[1] == cl.shape[1] == 2
    assert len(pairs) == min(round(kappa * n), n * (n - 1) // 2)
    assert np.all(pairs[:, 0] < pairs[:, 1]) and np.all(pairs[:, 1] < n)
    assert len(np.unique(pairs, axis=0)) == len(pairs)  # distinct pairs
    assert np.all(y[ml[:, 0]] == y[ml[:, 1]]) and np.all(y[cl[:, 0]] != y[cl[:, 1]])
    again = generate_constraints(y, kappa, random_state=seed)
    assert np.array_equal(again.must_link, ml) and np.array_equal(again.cannot_link, cl)


def test_generate_constraints_validation():
    y = np.array([0, 1, 1, 0])
    assert generate_constraints(y, 1.5, random_state=0).must_link.shape[1] == 2  # all 6 pairs
    with pytest.raises(InvalidInputError, match="kappa"):
        generate_constraints(y, 1.6)
    with pytest.raises(InvalidInputError, match="kappa"):
        generate_constraints(y, -0.1)
    with pytest.raises(InvalidInputError, match="NaN"):
        generate_constraints(np.array([0.0, np.nan, 1.0]), 0.5)
    with pytest.raises(InvalidInputError, match="random_state"):
        generate_constraints(y, 0.5, random_state="seed")
    labels = np.array(["a", "b", "a", "b", "c"])
    ml, cl = generate_constraints(labels, 2.0, random_state=1)
    assert len(ml) + len(cl) == 10 and len(ml) == 2
