"""TreeClustering robustness (issue 18): whole-fit time limit, anytime answers, infeasibility
explanations, soft constraints, lazy pair clauses, the auto solver."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_wine

from gnnaudit.clustering import TreeClustering, generate_constraints
from gnnaudit.clustering.tree_encoding import build_encoding
from gnnaudit.clustering.tree_pairs import smart_pairs
from gnnaudit.clustering.tree_search import SOLVERS
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops import ConstraintGraph, distance_classes


def broken(labels, ml, cl):
    """Independent check: the constraint pairs the labels break."""
    ml, cl = np.asarray(ml).reshape(-1, 2), np.asarray(cl).reshape(-1, 2)
    bad_ml = {tuple(sorted(map(int, p))) for p in ml if labels[p[0]] != labels[p[1]]}
    bad_cl = {tuple(sorted(map(int, p))) for p in cl if labels[p[0]] == labels[p[1]]}
    return bad_ml, bad_cl


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return X[::2], y[::2]  # 89 points


def blobs(seed=0, n=24):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    y = np.arange(n) % 3
    return centres[y] + rng.normal(scale=1.0, size=(n, 2)), y


# ----------------------------------------------------------------------------- anytime, limits


@pytest.mark.parametrize("solver", ["auto", "rc2", "lsu", "binary"])
def test_expired_fit_returns_a_tree_or_unknown(wine, solver):
    X, y = wine
    ml, cl = generate_constraints(y, 0.3, random_state=1)
    m = TreeClustering(3, depth=3, solver=solver, time_limit=0.3).fit(
        X, must_link=ml, cannot_link=cl
    )
    assert m.status_ in {"optimal", "feasible", "feasible_soft", "infeasible"}
    if m.status_ in {"optimal", "feasible"}:
        assert m.labels_ is not None and m.tree_ is not None
        assert broken(m.labels_, ml, cl) == (set(), set())
        assert m.bound_ is None or m.bound_ <= m.cost_
    if m.status_ == "feasible_soft":
        assert m.labels_ is not None and m.tree_ is not None
        assert len(m.violated_constraints_) == sum(map(len, broken(m.labels_, ml, cl))) > 0
    assert m.fit_time_ >= 0


def test_rc2_is_killed_at_the_deadline_and_keeps_the_first_tree(wine, monkeypatch):
    """The RC2 child is stopped at the deadline; the parent's first SAT model is returned."""
    import gnnaudit.clustering.tree_search as ts

    def never(*args):  # an RC2 phase that never answers
        import time

        time.sleep(60)

    monkeypatch.setattr(ts, "_rc2_child", never)
    monkeypatch.setattr(ts, "_rc2_in_process", never)
    X, y = wine
    ml, cl = generate_constraints(y, 0.2, random_state=0)
    m = TreeClustering(3, depth=2, solver="rc2", time_limit=3.0).fit(
        X, must_link=ml, cannot_link=cl
    )
    assert m.status_ in {"feasible", "optimal"}
    assert m.labels_ is not None and broken(m.labels_, ml, cl) == (set(), set())
    assert m.bound_ is not None and m.bound_ <= m.cost_


@pytest.mark.parametrize("objective", ["md", "md-ms"])
def test_all_solvers_and_auto_agree(objective):
    X, y = blobs(1, 21)
    ml, cl = generate_constraints(y, 0.4, random_state=2)
    costs = {
        s: TreeClustering(3, depth=2, objective=objective, epsilon=0.0, solver=s)
        .fit(X, must_link=ml, cannot_link=cl)
        .cost_
        for s in SOLVERS
    }
    assert len(set(costs.values())) == 1, costs
    assert TreeClustering().solver == "auto"


# ----------------------------------------------------------------------------- lazy pairs


@pytest.mark.parametrize("solver", ["auto", "rc2", "lsu"])
@pytest.mark.parametrize("objective", ["md", "md-ms"])
def test_lazy_pair_clauses_are_exact(solver, objective):
    X, y = blobs(3, 24)
    ml, cl = generate_constraints(y, 0.3, random_state=3)
    kw = dict(depth=2, objective=objective, epsilon=0.0, solver=solver)
    full = TreeClustering(3, **kw).fit(X, must_link=ml, cannot_link=cl)
    lazy = TreeClustering(3, max_pairs=5, **kw).fit(X, must_link=ml, cannot_link=cl)
    assert full.status_ == lazy.status_ == "optimal"
    assert lazy.cost_ == full.cost_
    assert lazy.max_diameter_ == pytest.approx(full.max_diameter_)
    assert lazy.n_clauses_ < full.n_clauses_ and full.n_lazy_pairs_ == 0


def test_lazy_check_repairs_a_model_into_a_full_model():
    X, _ = blobs(4, 15)
    g = ConstraintGraph(15)
    classes = distance_classes(X, 0.0)
    pairs = smart_pairs(g, classes, together=False)
    desc = np.argsort(-pairs.apart_class, kind="stable")
    pairs = pairs.__class__(**{**pairs.__dict__, "apart": pairs.apart[desc],
                               "apart_class": pairs.apart_class[desc]})  # fmt: skip
    enc = build_encoding(X, classes, pairs, n_clusters=2, min_clusters=2, depth=2,
                         objective="md", max_apart=0)  # fmt: skip
    from pysat.solvers import Solver

    with Solver(name="g4", bootstrap_with=enc.hard) as s:
        assert s.solve()
        vals = np.zeros(enc.n_vars + 1, dtype=bool)
        model = np.asarray(s.get_model())
        vals[model[model > 0]] = True
    vals[enc.b_minus] = False  # claims the smallest diameter
    extra = enc.lazy_check(vals)
    lab = vals[enc.x].sum(axis=1)
    same = lab[classes.pairs[:, 0]] == lab[classes.pairs[:, 1]]
    true_lam = int(classes.class_of[same].max()) + 1 if same.any() else 0
    assert extra and int(vals[enc.b_minus].sum()) == true_lam  # repaired to the real cost


# ----------------------------------------------------------------------------- infeasibility


def test_cannot_link_clique_larger_than_k():
    X = np.random.default_rng(0).normal(size=(12, 2))
    m = TreeClustering(2, depth=3).fit(X, cannot_link=[(0, 1), (1, 2), (0, 2)])
    assert m.status_ == "infeasible" and m.labels_ is None
    why = m.infeasibility_
    assert why.cause == "cannot-link-clique"
    assert {(i, j) for i, j, _ in why.pairs} == {(0, 1), (0, 2), (1, 2)}
    assert any("n_clusters >= 3" in r for r in why.remedies)
    assert not any("depth >=" in r for r in why.remedies)  # depth 3 has leaves enough
    assert not any("longer time_limit" in r and "cannot" not in r for r in why.remedies)
    with pytest.raises(InfeasibleError, match="cannot-link-clique"):
        m.predict(X)


def test_clique_with_enough_clusters_but_too_few_leaves():
    X = np.random.default_rng(0).normal(size=(12, 2))
    m = TreeClustering(4, depth=1, min_clusters=2).fit(X, cannot_link=[(0, 1), (1, 2), (0, 2)])
    assert m.infeasibility_.cause == "cannot-link-clique"
    assert any("depth >= 2" in r for r in m.infeasibility_.remedies)
    assert not any("n_clusters" in r for r in m.infeasibility_.remedies)


def test_odd_cycle_with_two_clusters_names_the_cycle():
    X = np.random.default_rng(0).normal(size=(12, 2))
    cyc = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)]
    m = TreeClustering(2, depth=3).fit(X, cannot_link=cyc + [(5, 6)])
    assert m.infeasibility_.cause == "cannot-link-odd-cycle"
    assert {(i, j) for i, j, _ in m.infeasibility_.pairs} == set(cyc)


def test_odd_wheel_is_not_three_colourable_and_its_pairs_are_named():
    """An odd wheel (5-cycle plus a hub) needs 4 colours but holds no 4-clique: the SAT core of
    the colouring names pairs of the wheel, never the unrelated pair."""
    X = np.random.default_rng(0).normal(size=(12, 2))
    rim = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)]
    wheel = rim + [(5, v) for v in range(5)]
    m = TreeClustering(3, depth=2).fit(X, cannot_link=wheel + [(6, 7)])
    assert m.infeasibility_.cause == "cannot-link-colouring"
    named = {(i, j) for i, j, _ in m.infeasibility_.pairs}
    assert named and named <= {tuple(sorted(e)) for e in wheel}
    assert any("n_clusters >= 4" in r for r in m.infeasibility_.remedies)


def test_cliques_through_must_link_components():
    X = np.random.default_rng(0).normal(size=(12, 2))
    ml = [(0, 5), (1, 6)]  # groups {0,5}, {1,6}, {2}
    cl = [(5, 6), (6, 2), (0, 2)]
    m = TreeClustering(2, depth=2).fit(X, must_link=ml, cannot_link=cl)
    assert m.infeasibility_.cause == "cannot-link-clique"
    assert {(i, j) for i, j, _ in m.infeasibility_.pairs} == {tuple(sorted(p)) for p in cl}


def test_must_link_chain_joining_a_cannot_link_pair_raises_with_pairs():
    X = np.random.default_rng(0).normal(size=(8, 2))
    m = TreeClustering(2)
    with pytest.raises(InfeasibleError, match="must-link chain 0 - 1 - 2") as err:
        m.fit(X, must_link=[(0, 1), (1, 2)], cannot_link=[(0, 2), (3, 4)])
    why = err.value.infeasibility
    assert why.cause == "contradiction" and why.pairs == ((0, 2, "cannot-link"),)
    assert m.infeasibility_ is why


def test_identical_points_cannot_be_separated_by_any_tree():
    X = np.random.default_rng(0).normal(size=(10, 2))
    X[7] = X[2]
    m = TreeClustering(2, depth=4).fit(X, must_link=[(2, 3)], cannot_link=[(3, 7)])
    assert m.infeasibility_.cause == "identical-points"
    assert m.infeasibility_.pairs == ((3, 7, "cannot-link"),)
    cc = TreeClustering(2, depth=4, tree=False).fit(X, must_link=[(2, 3)], cannot_link=[(3, 7)])
    assert cc.status_ == "optimal"


def test_depth_too_small_names_the_pairs():
    X = np.arange(8, dtype=float)[:, None]
    m = TreeClustering(2, depth=1).fit(X, must_link=[(0, 2)], cannot_link=[(0, 1)])
    why = m.infeasibility_
    assert why.cause == "depth"
    assert set(why.pairs) == {(0, 2, "must-link"), (0, 1, "cannot-link")}
    assert any("depth >= 2" in r for r in why.remedies)


def test_too_few_groups_for_min_clusters():
    X = np.random.default_rng(0).normal(size=(6, 2))
    ml = [(0, 1), (1, 2), (3, 4), (4, 5)]
    m = TreeClustering(3, depth=2).fit(X, must_link=ml)
    assert m.infeasibility_.cause == "too-few-groups"
    assert any("min_clusters <= 2" in r for r in m.infeasibility_.remedies)


# ----------------------------------------------------------------------------- soft constraints


def test_soft_constraints_report_violations_checked_on_labels(wine):
    X, y = wine
    rng = np.random.default_rng(0)
    noisy = y.copy()
    flip = rng.random(len(y)) < 0.2
    noisy[flip] = (noisy[flip] + 1) % 3
    ml, cl = generate_constraints(noisy, 0.5, random_state=0)
    m = TreeClustering(3, depth=2, constraint_weight=1.0).fit(X, must_link=ml, cannot_link=cl)
    assert m.status_ in {"optimal", "feasible"} and m.solver_used_ == "rc2"
    v = m.violated_constraints_
    got_ml = {
        (int(i), int(j)) for i, j, k in zip(v.i, v.j, v.kind, strict=True) if k == "must-link"
    }
    got_cl = {
        (int(i), int(j)) for i, j, k in zip(v.i, v.j, v.kind, strict=True) if k == "cannot-link"
    }
    assert (got_ml, got_cl) == broken(m.labels_, ml, cl)
    assert (v.weight == 1.0).all()


def test_soft_constraints_accept_contradictions_and_per_pair_weights():
    X, _ = blobs(0, 12)
    ml, cl = [(0, 1)], [(0, 1), (0, 3)]  # weights: in units of one distance class
    m = TreeClustering(3, depth=2, constraint_weight=[1e4, 1.0, 1.0]).fit(
        X, must_link=ml, cannot_link=cl
    )
    assert m.status_ == "optimal"
    assert m.labels_[0] == m.labels_[1]  # the heavier must-link wins
    v = m.violated_constraints_
    assert ((v.kind == "cannot-link") & (v.i == 0) & (v.j == 1)).any()
    # a huge weight makes a soft constraint behave like a hard one
    hard = TreeClustering(3, depth=2, epsilon=0.0).fit(X, cannot_link=[(0, 3)])
    heavy = TreeClustering(3, depth=2, epsilon=0.0, constraint_weight=1e4).fit(
        X, cannot_link=[(0, 3)]
    )
    assert heavy.labels_[0] != heavy.labels_[3]
    assert heavy.max_diameter_ == pytest.approx(hard.max_diameter_)
    assert len(hard.violated_constraints_) == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(constraint_weight=-1.0), "constraint_weight"),
        (dict(constraint_weight=[1.0]), "one weight per pair"),
        (dict(constraint_weight=1.0, solver="binary"), "soft constraints"),
        (dict(max_pairs=0), "max_pairs"),
    ],
)
def test_new_parameter_validation(kwargs, match):
    X, _ = blobs(0, 12)
    with pytest.raises(InvalidInputError, match=match):
        TreeClustering(3, depth=2, **kwargs).fit(X, must_link=[(0, 1)], cannot_link=[(0, 3)])


def test_an_encoding_step_that_cannot_finish_is_not_started(monkeypatch):
    """The distance classes would overrun the limit: not started; the greedy tree comes back
    (no constraints, so it honours them all: ``feasible``)."""
    import gnnaudit.clustering.tree_fit as tf

    X, y = blobs(0, 30)
    monkeypatch.setattr(tf, "estimate_classes", lambda Xs, eps: 1e9)
    m = TreeClustering(3, depth=2, time_limit=5.0).fit(X)
    assert m.status_ == "feasible" and m.solver_used_ == "greedy" and m.infeasibility_ is None
    np.testing.assert_array_equal(m.predict(X), m.labels_)
    assert m.n_vars_ == 0 and m.max_diameter_ > 0
    assert TreeClustering(3, depth=2).fit(X).status_ == "optimal"  # no limit: no estimate


def test_a_search_that_ignores_its_interrupt_is_killed_with_its_progress():
    import time

    import gnnaudit.clustering.tree_search as ts

    X, _ = blobs(0, 12)
    classes = distance_classes(X, 0.0)
    enc = build_encoding(X, classes, smart_pairs(ConstraintGraph(12), classes, together=False),
                         n_clusters=2, min_clusters=2, depth=1, objective="md")  # fmt: skip

    def stubborn(enc, deadline, sat_solver, report=ts.silent):
        report("bound", 3)
        time.sleep(60)

    t = time.perf_counter()
    res = ts._stoppable(stubborn, "stub")(enc, time.perf_counter() + 0.5, "g4")
    assert time.perf_counter() - t < 30  # killed, not waited for
    assert res.status == "unknown" and res.values is None and res.bound == 3


@pytest.mark.parametrize("solver", ["auto", "rc2", "lsu"])
def test_without_child_processes_the_searches_run_in_process(monkeypatch, solver):
    """Inside a daemonic process (a Dask worker) no child can be forked."""
    import gnnaudit.clustering.tree_search as ts

    monkeypatch.setattr(ts, "can_fork", lambda: False)
    X, y = blobs(1, 21)
    ml, cl = generate_constraints(y, 0.4, random_state=2)
    kw = dict(depth=2, epsilon=0.0, time_limit=20.0)
    ref = TreeClustering(3, depth=2, epsilon=0.0).fit(X, must_link=ml, cannot_link=cl)
    m = TreeClustering(3, solver=solver, **kw).fit(X, must_link=ml, cannot_link=cl)
    assert m.status_ == "optimal" and m.cost_ == ref.cost_
    soft = TreeClustering(3, constraint_weight=1.0, **kw).fit(X, must_link=ml, cannot_link=cl)
    assert soft.status_ == "optimal" and soft.labels_ is not None
