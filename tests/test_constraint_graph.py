"""ConstraintGraph (components, exclusions, feasibility), pdist pair indices, distance classes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist

from gnnaudit.clustering.tree_pairs import smart_pairs
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops import ConstraintGraph, distance_classes
from gnnaudit.graph_ops._distances import condensed_index, pairs_from_condensed

# ----------------------------------------------------------------------------- helpers


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
        smart_pairs(g, distance_classes(X, 0.1))


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
