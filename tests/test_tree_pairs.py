"""Smart pairs (App. C, Alg. 1): the vectorised selection against the literal algorithm."""

from __future__ import annotations

import numpy as np
import pytest
from clustering_oracles import labelled_pairs
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnaudit.clustering.tree_pairs import all_pairs, smart_pairs
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import ConstraintGraph, distance_classes

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


def reference_smart_pairs(n, ml, cl, classes):  # noqa: C901  # Alg. 1 verbatim: the oracle
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
    ml, cl = labelled_pairs(rng, y, m)
    g = ConstraintGraph(n, ml, cl)
    dc = distance_classes(X, eps)
    ref = reference_smart_pairs(n, g.must_link, g.cannot_link, dc)
    assert ref is not None and g.is_feasible
    sp = smart_pairs(g, dc)
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
    ml, cl = labelled_pairs(rng, y, 40)
    g = ConstraintGraph(40, ml, cl)
    dc = distance_classes(X, 0.1)
    full, smart = all_pairs(g, dc), smart_pairs(g, dc)
    assert len(full.together) == len(full.apart) == 40 * 39 // 2
    assert len(smart.together) <= 39  # a spanning forest, cut at the first crossing pair
    assert len(smart.apart) < len(full.apart)
    assert len(smart.must_link) <= len(g.must_link)
    assert smart.forced_not_plus is not None  # CL pairs exist
    assert smart.forced_minus is not None  # ML pairs exist


def test_smart_pairs_without_constraints():
    X = np.arange(6, dtype=float)[:, None]
    g = ConstraintGraph(6)
    sp = smart_pairs(g, distance_classes(X, 0.0))
    assert len(sp.together) == 5 and sp.forced_not_plus is None and sp.forced_minus is None
    assert len(sp.apart) == 15  # singletons: nothing is implied for separation


def test_smart_pairs_rejects_mismatched_classes():
    g = ConstraintGraph(4)
    with pytest.raises(InvalidInputError, match="n=5"):
        smart_pairs(g, distance_classes(np.zeros((5, 1)), 0.0))
