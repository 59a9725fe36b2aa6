"""The global merge's first pass from lists already computed (the audit's local evidences):
the same pairs as searching every node again, fewer queries, and the searchers reuse them."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from search_oracles import brute_global, brute_local, clustered, space_of

from gnnaudit.audit.search.faiss_search import FaissSearcher
from gnnaudit.audit.search.global_pairs import global_pairs_from_local


class Counting:
    """An exact local search (the brute-force oracle) that records every query it answers."""

    def __init__(self, x: np.ndarray, pred: np.ndarray) -> None:
        self.x, self.pred, self.asked = x, pred, 0

    def __call__(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        self.asked += q.size
        return brute_local(self.x, self.pred, q, k)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(3, 60),
    k=st.integers(1, 40),
    width=st.integers(1, 20),
    seed=st.integers(0, 10_000),
    ties=st.booleans(),
)
def test_first_lists_give_the_brute_force_pairs(m, k, width, seed, ties):
    # entries in {-1, -1/2, 0, 1/2, 1}: every product is exact whichever BLAS path computes it,
    # so equal pairs compare equal and the tie rule, not rounding, orders them
    rng = np.random.default_rng(seed)
    x = (rng.integers(-2, 3, size=(m, 4)) / 2).astype(np.float32)
    pred = rng.integers(0, 3, size=m)
    if ties:  # repeated rows: equal similarities everywhere
        x = x[np.arange(m) % max(1, m // 3)]
    first = brute_local(x, pred, np.arange(m), width)
    got = global_pairs_from_local(Counting(x, pred), m, k, first=first)
    plain = global_pairs_from_local(Counting(x, pred), m, k)
    ref = brute_global(x, pred, k)
    for a, b, c in zip(got, plain, ref, strict=True):
        np.testing.assert_array_equal(a[: len(c)], c)
        np.testing.assert_array_equal(b[: len(c)], c)
        assert len(a) == len(c)


def test_first_lists_spare_the_second_search_of_every_node():
    x, pred = clustered(400, 8, 6, 2, seed=3)
    plain, reuse = Counting(x, pred), Counting(x, pred)
    global_pairs_from_local(plain, 400, 50)
    global_pairs_from_local(reuse, 400, 50, first=brute_local(x, pred, np.arange(400), 10))
    assert plain.asked >= 400  # every node once, then the open ones again
    assert reuse.asked < plain.asked - 300  # only the nodes whose 10-list may hide a pair
    none = Counting(x, pred)
    global_pairs_from_local(none, 400, 8, first=brute_local(x, pred, np.arange(400), 10))
    assert none.asked == 0  # lists as long as k: nothing to search


def test_a_searcher_reuses_its_last_lists_of_every_node_only():
    x, pred = clustered(300, 8, 5, 2, seed=4)
    searcher = FaissSearcher(random_state=0).build(space_of(x, pred))
    fresh = searcher.global_pairs(40)
    searcher.local(np.arange(150), 10)  # not every node: no reuse
    assert searcher._every_list() is None
    local = searcher.local(np.arange(300), 10)
    kept = searcher._every_list()
    assert kept is not None and kept[1].shape == (300, 10)
    np.testing.assert_array_equal(kept[1] >= 0, local.valid)
    again = searcher.global_pairs(40)
    np.testing.assert_array_equal(again.similarity, fresh.similarity)
    rebuilt = searcher.build(space_of(x, pred))
    assert rebuilt._every_list() is None  # a new space: the old lists are not used
