"""Row-wise candidate selection (``row_candidates``) against a sort-everything oracle, with
ties crossing the cut and ``-inf`` entries."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnaudit.audit.search.topk import row_candidates


def oracle(sim: np.ndarray, k: int):
    """Every entry at or above its row's k-th largest value (all when a row has <= k)."""
    rows, cols = [], []
    for r, row in enumerate(sim):
        kth = np.sort(row)[::-1][k - 1] if row.size > k else -np.inf
        keep = np.flatnonzero(row >= kth)
        rows += [r] * keep.size
        cols += keep.tolist()
    return np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)


@settings(max_examples=120, deadline=None)
@given(
    rows=st.integers(1, 8),
    width=st.integers(1, 40),
    k=st.integers(1, 12),
    levels=st.integers(1, 6),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**31 - 1),
)
def test_row_candidates_keep_every_tie_at_the_cut(rows, width, k, levels, dtype, seed):
    rng = np.random.default_rng(seed)
    sim = rng.integers(0, levels, size=(rows, width)).astype(dtype)  # few levels: many ties
    sim[rng.random((rows, width)) < 0.2] = -np.inf
    rr, cc, ss = row_candidates(sim, k)
    want_r, want_c = oracle(sim, k)
    np.testing.assert_array_equal(rr, want_r)
    np.testing.assert_array_equal(cc, want_c)
    np.testing.assert_array_equal(ss, sim[want_r, want_c])


def test_row_candidates_without_ties_are_the_k_largest():
    sim = np.random.default_rng(1).standard_normal((50, 300)).astype(np.float32)
    rr, cc, _ = row_candidates(sim, 7)
    np.testing.assert_array_equal(np.bincount(rr), np.full(50, 7))
    want = np.sort(np.argsort(-sim, axis=1)[:, :7], axis=1)
    np.testing.assert_array_equal(cc.reshape(50, 7), want)
