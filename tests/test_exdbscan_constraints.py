"""ExDBSCAN actionability constraints: immutable, monotone, correlated (App. A.8, A.12)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from clustering_oracles import dbscan_membership
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import DBSCAN
from sklearn.datasets import make_blobs

from gnnaudit.clustering import ExDBSCAN
from gnnaudit.clustering.exdbscan_constraints import parse_constraints
from gnnaudit.errors import InfeasibleError, InvalidInputError

NAMES = ["age", "income", "rooms", "bedrooms"]


@pytest.fixture(scope="module")
def data():
    X, y = make_blobs(
        800, centers=[[0, 0, 0, 0], [3, 3, 3, 3], [0, 4, 0, 4]], cluster_std=0.5, random_state=0
    )
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    db = DBSCAN(eps=0.8, min_samples=5).fit(X)
    # blob i is cluster i (the test relies on it)
    for b in range(3):
        assert np.bincount(db.labels_[y == b] + 1).argmax() == b + 1
    model = ExDBSCAN(n_counterfactuals=4).fit(pd.DataFrame(X, columns=NAMES), dbscan=db)
    return X, db, model


def queries(model, target):
    rng = np.random.default_rng(0)
    idx = np.flatnonzero(model.labels_ != target)
    return rng.choice(idx, 12, replace=False)


def check(res, X, db):
    for c, t in zip(res.counterfactuals, res.targets, strict=True):
        assert dbscan_membership(c, X, db) == t
    assert res.valid.all()


def test_immutable_features_unchanged_bit_for_bit(data):
    X, db, model = data
    n_ok = 0
    # blob 0 -> blob 2 ([0, 4, 0, 4]): age and rooms need not change
    for i in queries(model, 2):
        try:
            res = model.explain(int(i), target=2, immutable=["age", 2])
        except InfeasibleError:
            continue
        n_ok += 1
        check(res, X, db)
        for c in res.counterfactuals:
            assert c[0].tobytes() == X[i, 0].tobytes()
            assert c[2].tobytes() == X[i, 2].tobytes()
        assert set(res.to_frame()["feature"]) <= {"income", "bedrooms"}
    assert n_ok >= 6


def test_immutable_matches_paper_placement(data):
    """With immutable features only, c[A] moves from q[A] toward x[A] up to radius
    sqrt(eps^2 - ||x[NA] - q[NA]||^2) (App. A.8)."""
    X, db, model = data
    eps = db.eps
    n_checked = 0
    for i in np.flatnonzero(model.labels_ == 0)[:6]:
        res = model.explain(int(i), target=2, immutable=[0])
        x = X[i]
        for c, r in zip(res.counterfactuals, res.reference_cores, strict=True):
            q = X[r]
            assert abs(x[0] - q[0]) <= eps
            if np.linalg.norm(c - q) > 0.999 * eps:  # not shrunk away from a foreign core
                rho = np.sqrt(eps**2 - (x[0] - q[0]) ** 2)
                a = [1, 2, 3]
                expected = q[a] + rho * (x[a] - q[a]) / np.linalg.norm(x[a] - q[a])
                np.testing.assert_allclose(c[a], expected, atol=1e-7)
                n_checked += 1
    assert n_checked >= 10


def test_monotone_with_and_without_bound(data):
    X, db, model = data
    n_ok = 0
    # blob 2 ([0, 4, 0, 4]) -> blob 1 ([3, 3, 3, 3]): age grows, income shrinks
    for i in np.flatnonzero(model.labels_ == 2)[:10]:
        for spec in ("increase", ("increase", 5.0), ("increase", 2.8)):
            try:
                res = model.explain(int(i), target=1, monotone={"age": spec, "income": "decrease"})
            except InfeasibleError as exc:
                assert "monotone" in str(exc)
                continue
            n_ok += 1
            check(res, X, db)
            assert (res.counterfactuals[:, 0] >= X[i, 0]).all()
            assert (res.counterfactuals[:, 1] <= X[i, 1]).all()
            if isinstance(spec, tuple):
                assert (res.counterfactuals[:, 0] <= X[i, 0] + spec[1]).all()
    assert n_ok >= 20


def test_correlated_pairs(data):
    X, db, model = data
    n_ok = 0
    for target, corr, (f, g, sign) in [
        (1, [("rooms", "bedrooms", +1)], (2, 3, 1)),
        (2, [("income", "rooms", -1)], (1, 2, -1)),
    ]:
        for i in queries(model, target):
            try:
                res = model.explain(int(i), target=target, correlated=corr)
            except InfeasibleError as exc:
                assert "correlated" in str(exc)
                continue
            n_ok += 1
            check(res, X, db)
            d = res.counterfactuals - X[i]
            assert (sign * d[:, f] * d[:, g] >= 0).all()
    assert n_ok >= 12
    # going from blob 0 to blob 1 every feature grows: age and income cannot move apart
    i = int(np.flatnonzero(model.labels_ == 0)[0])
    with pytest.raises(InfeasibleError, match="correlated"):
        model.explain(i, target=1, correlated=[("age", "income", -1)])


def test_infeasible_names_the_constraint(data):
    X, db, model = data
    i = int(np.flatnonzero(model.labels_ == 0)[0])
    # cluster 1 is around 2 in every feature; a bound of 0.01 on age excludes every core
    with pytest.raises(InfeasibleError, match="monotone"):
        model.explain(i, target=1, monotone={"age": ("increase", 0.01)}, immutable=[])
    x = X[i].copy()
    x[0] = -50.0
    with pytest.raises(InfeasibleError, match=r"immutable=\['age'\]"):
        model.explain(x, target=1, immutable=["age"])
    with pytest.raises(InfeasibleError, match="decrease|monotone"):
        model.explain(
            i,
            target=1,
            monotone={
                "age": "decrease",
                "income": "decrease",
                "rooms": "decrease",
                "bedrooms": "decrease",
            },
        )


def test_constraint_validation(data):
    X, db, model = data
    with pytest.raises(InvalidInputError, match="unknown feature 'height'"):
        model.explain(0, target=1, immutable=["height"])
    with pytest.raises(InvalidInputError, match="outside"):
        model.explain(0, target=1, immutable=[9])
    with pytest.raises(InvalidInputError, match="direction"):
        model.explain(0, target=1, monotone={"age": "up"})
    with pytest.raises(InvalidInputError, match="bound"):
        model.explain(0, target=1, monotone={"age": ("increase", -1.0)})
    with pytest.raises(InvalidInputError, match="sign"):
        model.explain(0, target=1, correlated=[("rooms", "bedrooms", 2)])
    with pytest.raises(InvalidInputError, match="twice"):
        model.explain(0, target=1, correlated=[("rooms", "rooms", 1)])
    with pytest.raises(InvalidInputError, match="also immutable"):
        model.explain(0, target=1, immutable=["age"], monotone={"age": "increase"})
    unnamed = ExDBSCAN().fit(X, dbscan=db)
    with pytest.raises(InvalidInputError, match="no feature names"):
        unnamed.explain(0, target=1, immutable=["age"])


def test_parse_constraints_boxes():
    cons = parse_constraints(
        3, None, immutable=[0], monotone={1: ("decrease", 2.0)}, correlated=[(1, 2, -1)]
    )
    stages = cons.stage_boxes()
    assert [s for s, _, _ in stages] == ["immutable", "monotone", "correlated"]
    lo, hi = stages[-1][1], stages[-1][2]
    assert lo.shape == (2, 3)
    assert (lo <= 0).all() and (hi >= 0).all()
    x = np.zeros(3)
    assert cons.satisfied(x, np.array([[0.0, -1.0, 1.0]]))[0]
    assert not cons.satisfied(x, np.array([[0.0, -1.0, -1.0]]))[0]
    assert not cons.satisfied(x, np.array([[0.0, -3.0, 1.0]]))[0]


def allowed_boxes(d, immutable, monotone, correlated):
    """The allowed region of the change c - x as a union of boxes, one per sign assignment of
    all d features (closed orthants), independently of the implementation's per-pair boxes.
    A sign assignment that breaks a correlated pair is skipped: its feasible part lies on the
    boundary, inside the closed orthants that are kept."""
    for signs in itertools.product((-1, 1), repeat=d):
        s = np.array(signs)
        lo = np.where(s > 0, 0.0, -np.inf)
        hi = np.where(s > 0, np.inf, 0.0)
        lo[immutable] = np.maximum(lo[immutable], 0.0)
        hi[immutable] = np.minimum(hi[immutable], 0.0)
        for f, spec in monotone.items():
            direction, bound = (spec, np.inf) if isinstance(spec, str) else spec
            if direction == "increase":
                lo[f], hi[f] = max(lo[f], 0.0), min(hi[f], bound)
            else:
                lo[f], hi[f] = max(lo[f], -bound), min(hi[f], 0.0)
        if (lo > hi).any() or any(s[f] * s[g] != sign for f, g, sign in correlated or ()):
            continue
        yield lo, hi


def brute_force_eligible(X, db, x, target, boxes):
    """Distance from every target core to the allowed region (exact: per-box clipping)."""
    cores = X[db.core_sample_indices_][db.labels_[db.core_sample_indices_] == target]
    best = np.full(len(cores), np.inf)
    for lo, hi in boxes:
        best = np.minimum(best, np.linalg.norm(cores - np.clip(cores, x + lo, x + hi), axis=1))
    return best


def brute_force_valid_point(X, db, x, target, boxes, grid=15):
    """Search a grid over (allowed box) x (eps-ball of each target core) for a point the fitted
    clustering puts in ``target``; ``None`` if there is none at this resolution."""
    cores = X[db.core_sample_indices_]
    labs = db.labels_[db.core_sample_indices_]
    for q in cores[labs == target]:
        for lo, hi in boxes:
            a, b = np.maximum(q - db.eps, x + lo), np.minimum(q + db.eps, x + hi)
            if (a > b).any():
                continue
            axes = [
                np.array([x[f]]) if lo[f] == hi[f] else np.linspace(a[f], b[f], grid)
                for f in range(len(x))
            ]
            P = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(x))
            P = P[np.linalg.norm(P - q, axis=1) <= db.eps]
            D = np.sqrt(((P[:, None, :] - cores[None]) ** 2).sum(-1))
            j = D.argmin(axis=1)
            ok = (labs[j] == target) & (D[np.arange(len(P)), j] <= db.eps)
            if ok.any():
                return P[ok][0]
    return None


BLOB_CENTERS = [[0, 0, 0, 0], [3, 3, 3, 3], [0, 4, 0, 4]]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 5000),
    n_imm=st.integers(0, 2),
    direction=st.sampled_from(["increase", "decrease"]),
    bound=st.one_of(st.none(), st.floats(0.5, 5.0)),
    corr_sign=st.sampled_from([1, -1, 0]),
)
def test_hypothesis_constraints_hold(seed, n_imm, direction, bound, corr_sign):
    """Every case is checked: a result obeys the constraints and is valid; an infeasible
    answer is confirmed by brute force over the allowed region (tiny data: 90 points, 4-D)."""
    X, _ = make_blobs(90, centers=BLOB_CENTERS, cluster_std=0.5, random_state=seed)
    db = DBSCAN(eps=0.9, min_samples=4).fit(X)
    clusters = np.unique(db.labels_[db.labels_ >= 0])
    assert clusters.size >= 2  # three separated blobs: at least two clusters by construction
    model = ExDBSCAN(n_counterfactuals=3).fit(X, dbscan=db)
    rng = np.random.default_rng(seed)
    i = int(rng.integers(len(X)))
    t = int([c for c in clusters if c != db.labels_[i]][0])
    imm = list(range(n_imm))
    mono = {2: direction if bound is None else (direction, bound)}
    corr = [(2, 3, corr_sign)] if corr_sign else None
    boxes = list(allowed_boxes(4, imm, mono, corr))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            res = model.explain(i, target=t, immutable=imm, monotone=mono, correlated=corr)
    except InfeasibleError as exc:
        reach = brute_force_eligible(X, db, X[i], t, boxes)
        if "no eligible core" in str(exc):
            assert "constraint" in str(exc)
            assert reach.min() > db.eps * (1 - 1e-9)  # no target ball meets the region
        else:  # eligible cores exist, but no point of region and ball joins the target
            assert reach.min() <= db.eps * (1 - 1e-9)
            assert "no reference core yields a valid counterfactual" in str(exc)
            assert brute_force_valid_point(X, db, X[i], t, boxes) is None
    else:
        cons = parse_constraints(4, None, imm, mono, corr)
        assert len(res) >= 1
        assert cons.satisfied(X[i], res.counterfactuals).all()
        for c, tt in zip(res.counterfactuals, res.targets, strict=True):
            assert dbscan_membership(c, X, db) == tt == t
            for f in imm:
                assert c[f].tobytes() == X[i, f].tobytes()
            # every counterfactual lies in the brute-force region
            assert any(np.all((c - X[i] >= lo) & (c - X[i] <= hi)) for lo, hi in boxes)


def test_eligible_but_no_valid_counterfactual_is_truly_infeasible():
    """A case found by a random search: a target core reaches the allowed region, but every
    point there is nearer to a core of another cluster; brute force agrees."""
    X, _ = make_blobs(90, centers=BLOB_CENTERS, cluster_std=0.5, random_state=3032)
    db = DBSCAN(eps=0.9, min_samples=4).fit(X)
    model = ExDBSCAN(n_counterfactuals=3).fit(X, dbscan=db)
    imm, mono, corr = [0, 1], {2: "decrease"}, [(2, 3, 1)]
    with pytest.raises(InfeasibleError, match="no reference core yields a valid"):
        model.explain(52, target=0, immutable=imm, monotone=mono, correlated=corr)
    boxes = list(allowed_boxes(4, imm, mono, corr))
    assert brute_force_eligible(X, db, X[52], 0, boxes).min() <= db.eps
    assert brute_force_valid_point(X, db, X[52], 0, boxes, grid=25) is None
    # without the monotone and correlated constraints brute force finds a valid point: the
    # projection of the one eligible core is nearer to another cluster, and the fallback
    # placement (convex problem in the ball) finds one too
    free = list(allowed_boxes(4, imm, {}, None))
    assert brute_force_valid_point(X, db, X[52], 0, free) is not None
    with pytest.warns(UserWarning, match="only 1 eligible"):
        res = model.explain(52, target=0, immutable=imm)
    assert len(res) == 1
    check(res, X, db)
    for f in imm:
        assert res.counterfactuals[0, f].tobytes() == X[52, f].tobytes()


@pytest.mark.parametrize("metric", ["manhattan", "chebyshev"])
def test_constraints_with_other_metrics(data, metric):
    X, _, _ = data
    db = DBSCAN(eps=1.2 if metric == "manhattan" else 0.6, min_samples=5, metric=metric).fit(X)
    model = ExDBSCAN(n_counterfactuals=3).fit(X, dbscan=db)
    n_ok = 0
    for i in np.flatnonzero(db.labels_ == 0)[:8]:
        try:
            res = model.explain(int(i), target=2, immutable=[0], monotone={1: "increase"})
        except InfeasibleError:
            continue
        n_ok += 1
        cores = X[db.core_sample_indices_]
        labs = db.labels_[db.core_sample_indices_]
        for c, t in zip(res.counterfactuals, res.targets, strict=True):
            diff = np.abs(cores - c)
            d = diff.sum(1) if metric == "manhattan" else diff.max(1)
            j = int(np.argmin(d))
            assert d[j] <= db.eps and labs[j] == t
            assert c[0].tobytes() == X[i, 0].tobytes() and c[1] >= X[i, 1]
    assert n_ok >= 4
