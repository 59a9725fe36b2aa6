"""Vectorised gathers of several index ranges at once (no Python loop over the ranges)."""

from __future__ import annotations

import numpy as np

__all__ = ["expand_ranges"]


def expand_ranges(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ranges ``starts[i] : starts[i] + lengths[i]`` concatenated, as ``(positions,
    owner)``: ``positions`` the indices in range order, ``owner[j]`` the range ``j`` came from.

    Example: ``expand_ranges([5, 0], [2, 3])`` gives ``([5, 6, 0, 1, 2], [0, 0, 1, 1, 1])``.
    Memory ``O(sum(lengths))``.
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    owner = np.repeat(np.arange(lengths.size), lengths)
    offset = np.arange(owner.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return starts[owner] + offset, owner
