"""ConstraintGraph, distance classes and the vectorised smart pairs (App. C, Alg. 1)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist

from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops import ConstraintGraph, distance_classes
from gnnaudit.graph_ops.constraints import condensed_index, pairs_from_condensed

# ----------------------------------------------------------------------------- helpers


class _UF:
    def __init__(self, n: int) -> None:
        self.p = list(range(n))

    def find(self, a: int) -> int:
        while self.p[a] != a:
            self.p[a] = self.p[self.p[a]]
            a = self.p[a]
        return a

    def union(self, a: int, b: int) -> None:
        self.p[self.find(a)] = self.find(b)

    def copy(self) -> _UF:
        u = _UF(0)
        u.p = list(self.p)
        return u


def reference_smart_pairs(n, ml, cl, classes):
    """Alg. 1 literally: one pair at a time, union-find, exclusion edges scanned each time."""
    pos_of = {(int(i), int(j)): p for p, (i, j) in enumerate(classes.pairs)}
    cls = classes.class_of

    def rank(pair):
        return pos_of[(min(pair), max(pair))]

    uf = _UF(n)
    ml_keep = []
    for i, j in sorted(map(tuple, ml), key=rank):
        if uf.find(i) != uf.find(j):
            uf.union(i, j)
            ml_keep.append((min(i, j), max(i, j)))
    uf_ml = uf.copy()

    def crossing(u, e_minus, i, j):
        a, b = u.find(i), u.find(j)
        return any({u.find(x), u.find(y)} == {a, b} for x, y in e_minus) and a != b

    e_minus = []
    cl_keep = []
    for i, j in sorted(map(tuple, cl), key=rank, reverse=True):
        if uf.find(i) == uf.find(j):
            return None
        if not crossing(uf, e_minus, i, j):
            e_minus.append((i, j))
            cl_keep.append((min(i, j), max(i, j)))

    u3 = uf_ml.copy()
    together, forced_not_plus = [], None
    for p, (i, j) in enumerate(classes.pairs.tolist()):
        if crossing(u3, e_minus, i, j):
            forced_not_plus = int(cls[p])
            break
        if u3.find(i) != u3.find(j):
            u3.union(i, j)
            together.append((i, j, int(cls[p])))

    u4 = uf_ml.copy()
    e4 = list(e_minus)
    apart, forced_minus = [], None
    for p in range(len(classes.pairs) - 1, -1, -1):
        i, j = (int(v) for v in classes.pairs[p])
        if u4.find(i) == u4.find(j):
            forced_minus = int(cls[p])
            break
        if not crossing(u4, e4, i, j):
            e4.append((i, j))
            apart.append((i, j, int(cls[p])))
    return set(ml_keep), set(cl_keep), set(together), forced_not_plus, set(apart), forced_minus


def _random_constraints(rng, y, m):
    n = len(y)
    i, j = rng.integers(0, n, size=(2, m))
    keep = i != j
    i, j = i[keep], j[keep]
    same = y[i] == y[j]
    return np.stack([i[same], j[same]], 1), np.stack([i[~same], j[~same]], 1)


# ----------------------------------------------------------------------------- basics


def test_components_exclusions_and_canonical_pairs():
    g = ConstraintGraph(6, must_link=[[1, 0], [1, 2], [2, 1], [4, 4]], cannot_link=[(3, 0), (5, 2)])
    assert g.must_link.tolist() == [[0, 1], [1, 2]]  # self pair dropped, duplicates merged
    assert g.cannot_link.tolist() == [[0, 3], [2, 5]]
    assert g.n_components == 4
    assert g.components[0] == g.components[1] == g.components[2]
    assert len({g.components[3], g.components[4], g.components[5], g.components[0]}) == 4
    assert len(g.exclusions) == 2
    assert g.is_feasible and g.reason is None
    g.check_feasible()


def test_pair_both_must_and_cannot_link_is_infeasible():
    g = ConstraintGraph(4, must_link=[(0, 1)], cannot_link=[(1, 0)])
    assert not g.is_feasible
    assert "(0, 1)" in g.reason and "both" in g.reason
    with pytest.raises(InfeasibleError, match="both"):
        g.check_feasible()


def test_cannot_link_inside_must_link_component_names_the_chain():
    g = ConstraintGraph(5, must_link=[(0, 1), (1, 2), (2, 3)], cannot_link=[(0, 3)])
    assert not g.is_feasible
    assert "0 - 1 - 2 - 3" in g.reason
    X = np.random.default_rng(0).normal(size=(5, 2))
    with pytest.raises(InfeasibleError):
        g.smart_pairs(distance_classes(X, 0.1))


@pytest.mark.parametrize(
    "ml, cl, match",
    [
        ([(0, 5)], None, r"\[0, 4\]"),
        ([(-1, 2)], None, "must lie in"),
        ([(0, 1, 2)], None, r"shape \(m, 2\)"),
        (None, [(2, 2)], "self pair"),
        ([(0.5, 1)], None, "integer"),
        ([("a", "b")], None, "integer"),
    ],
)
def test_bad_pairs_are_rejected(ml, cl, match):
    with pytest.raises(InvalidInputError, match=match):
        ConstraintGraph(5, must_link=ml, cannot_link=cl)


def test_empty_constraints_accepted_in_every_form():
    for empty in (None, [], np.zeros((0, 2), int)):
        g = ConstraintGraph(3, must_link=empty, cannot_link=empty)
        assert g.must_link.shape == (0, 2) and g.n_components == 3 and g.is_feasible


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 300), st.data())
def test_condensed_index_round_trip(n, data):
    P = n * (n - 1) // 2
    idx = np.array(data.draw(st.lists(st.integers(0, P - 1), min_size=1, max_size=20)))
    i, j = pairs_from_condensed(n, idx)
    assert np.all(i < j) and np.all(j < n)
    assert np.array_equal(condensed_index(n, i, j), idx)
    ti, tj = np.triu_indices(n, 1)
    assert np.array_equal(ti[idx], i) and np.array_equal(tj[idx], j)


# ----------------------------------------------------------------------------- distance classes


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 25),
    st.sampled_from([0.0, 0.05, 0.5, 3.0, 1000.0]),
    st.integers(0, 10_000),
)
def test_distance_classes_are_greedy_and_within_epsilon(n, eps, seed):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 6, size=(n, 2)).astype(float)  # many tied distances
    dc = distance_classes(X, eps)
    d = pdist(X)
    assert np.array_equal(np.sort(d), dc.distances)
    assert np.array_equal(d[dc.order], dc.distances)
    ti, tj = np.triu_indices(n, 1)
    assert np.array_equal(dc.pairs[:, 0], ti[dc.order]) and np.array_equal(
        dc.pairs[:, 1], tj[dc.order]
    )
    assert np.all(np.diff(dc.class_of) >= 0) and dc.class_of[0] == 0
    span = dc.bounds[:, 1] - dc.bounds[:, 0]
    assert np.all(span <= eps)
    # greedy: the next class starts beyond epsilon from the current class start
    assert np.all(dc.bounds[1:, 0] - dc.bounds[:-1, 0] > eps)
    for w in range(dc.n_classes):
        members = dc.distances[dc.class_of == w]
        assert members.min() == dc.bounds[w, 0] and members.max() == dc.bounds[w, 1]
    if eps == 0.0:
        assert dc.n_classes == len(np.unique(d))


def test_distance_classes_validation():
    with pytest.raises(InvalidInputError, match="epsilon"):
        distance_classes(np.zeros((3, 2)), -0.1)
    with pytest.raises(InvalidInputError, match="finite"):
        distance_classes(np.array([[0.0], [np.nan]]), 0.1)
    with pytest.raises(InvalidInputError, match="at least 2"):
        distance_classes(np.zeros((1, 2)), 0.1)


# ----------------------------------------------------------------------------- smart pairs


@settings(max_examples=60, deadline=None)
@given(
    st.integers(3, 14),
    st.integers(0, 12),
    st.sampled_from([0.0, 2.0, 15.0]),
    st.integers(2, 3),
    st.integers(0, 10_000),
)
def test_vectorised_smart_pairs_equal_literal_algorithm_1(n, m, eps, k, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)) * 20
    y = rng.integers(0, k, size=n)
    ml, cl = _random_constraints(rng, y, m)
    g = ConstraintGraph(n, ml, cl)
    dc = distance_classes(X, eps)
    ref = reference_smart_pairs(n, g.must_link, g.cannot_link, dc)
    assert ref is not None and g.is_feasible
    sp = g.smart_pairs(dc)
    r_ml, r_cl, r_tog, r_fnp, r_apart, r_fm = ref
    assert set(map(tuple, sp.must_link.tolist())) == r_ml
    assert set(map(tuple, sp.cannot_link.tolist())) == r_cl
    tog = {
        (int(i), int(j), int(w)) for (i, j), w in zip(sp.together, sp.together_class, strict=True)
    }
    assert tog == r_tog
    assert sp.forced_not_plus == r_fnp
    apart = {(int(i), int(j), int(w)) for (i, j), w in zip(sp.apart, sp.apart_class, strict=True)}
    assert apart == r_apart
    assert sp.forced_minus == r_fm


def test_smart_pairs_shrink_the_pair_lists():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    y = rng.integers(0, 3, size=40)
    ml, cl = _random_constraints(rng, y, 40)
    g = ConstraintGraph(40, ml, cl)
    dc = distance_classes(X, 0.1)
    full, smart = g.all_pairs(dc), g.smart_pairs(dc)
    assert len(full.together) == len(full.apart) == 40 * 39 // 2
    assert len(smart.together) <= 39  # a spanning forest, cut at the first crossing pair
    assert len(smart.apart) < len(full.apart)
    assert len(smart.must_link) <= len(g.must_link)
    assert smart.forced_not_plus is not None  # CL pairs exist
    assert smart.forced_minus is not None  # ML pairs exist


def test_smart_pairs_without_constraints():
    X = np.arange(6, dtype=float)[:, None]
    g = ConstraintGraph(6)
    sp = g.smart_pairs(distance_classes(X, 0.0))
    assert len(sp.together) == 5 and sp.forced_not_plus is None and sp.forced_minus is None
    assert len(sp.apart) == 15  # singletons: nothing is implied for separation


def test_smart_pairs_rejects_mismatched_classes():
    g = ConstraintGraph(4)
    with pytest.raises(InvalidInputError, match="n=5"):
        g.smart_pairs(distance_classes(np.zeros((5, 1)), 0.0))
