"""Random pairwise clustering constraints from ground-truth labels (Wagstaff and Cardie, 2000).

The protocol of the constrained-clustering-trees experiments: draw ``kappa * n`` distinct
unordered pairs of points uniformly at random; a pair becomes a must-link when both points share
their label and a cannot-link otherwise.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from gnnaudit._validation import check_array, check_float, check_int
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import pairs_from_condensed

__all__ = ["Constraints", "generate_constraints"]


class Constraints(NamedTuple):
    """Must-link and cannot-link pairs, each an ``int64`` array of shape (m, 2) with ``i < j``.

    A named tuple, so ``must_link, cannot_link = generate_constraints(...)`` works.
    """

    must_link: np.ndarray
    cannot_link: np.ndarray


def generate_constraints(y: Any, kappa: float, random_state: Any = None) -> Constraints:
    """Draw ``round(kappa * n)`` distinct random pairs and label them by ``y``.

    Args:
        y: ``(n,)`` ground-truth labels (any comparable values, no NaN).
        kappa: constraints per point, ``0 <= kappa <= (n - 1) / 2`` (at most all pairs).
        random_state: ``None``, an int seed ``>= 0`` or a ``numpy.random.Generator``.

    Returns:
        :class:`Constraints` ``(must_link, cannot_link)``; pairs are sampled without
        replacement (uniformly among the ``n(n-1)/2`` unordered pairs), stored with ``i < j``.
    """
    y = check_array("y", y, ndim=1, dtype=None, min_rows=2)
    if y.dtype.kind == "f" and np.isnan(y).any():
        raise InvalidInputError(
            f"y must not contain NaN (found at index {int(np.argmax(np.isnan(y)))})"
        )
    n = len(y)
    n_pairs = n * (n - 1) // 2
    kappa = check_float("kappa", kappa, minimum=0.0, maximum=(n - 1) / 2)
    m = min(round(kappa * n), n_pairs)
    if isinstance(random_state, np.random.Generator):
        rng = random_state
    elif random_state is None:
        rng = np.random.default_rng()
    elif isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        rng = np.random.default_rng(check_int("random_state", random_state, minimum=0))
    else:
        raise InvalidInputError(
            f"random_state must be None, an int seed >= 0 or a numpy Generator, got "
            f"{random_state!r}"
        )
    idx = rng.choice(n_pairs, size=m, replace=False) if m else np.zeros(0, dtype=np.int64)
    i, j = pairs_from_condensed(n, idx)
    pairs = np.stack([i, j], axis=1).astype(np.int64)
    same = y[i] == y[j]
    return Constraints(
        must_link=pairs[same].reshape(-1, 2), cannot_link=pairs[~same].reshape(-1, 2)
    )
