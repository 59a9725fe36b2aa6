"""Distance classes of the optimal constrained clustering trees (Shati et al., Sec. 3.1).

All pairs of points sorted by Euclidean distance and greedily grouped into classes
:math:`D_1, \\dots, D_\\mu` whose smallest and largest distances are at most :math:`\\epsilon`
apart. The MaxSAT model has one :math:`b^-_w` / :math:`b^+_w` variable per class.

Memory: :func:`distance_classes` holds O(n^2) pair arrays (about 40 bytes per pair: 1.6 GB for
n = 9000); the model they feed is quadratic anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.spatial.distance import pdist

from gnnaudit._validation import check_array, check_float
from gnnaudit.graph_ops._distances import pairs_from_condensed

__all__ = ["DistanceClasses", "distance_classes"]


@dataclass(frozen=True)
class DistanceClasses:
    """All pairs of points sorted by distance and grouped into distance classes (Sec. 3.1).

    Attributes:
        n: number of points.
        epsilon: the largest span (max - min distance) allowed inside one class.
        order: ``(P,)`` condensed (``pdist``) index of the pair at each sorted position.
        pairs: ``(P, 2)`` the pairs ``(i, j)``, ``i < j``, ascending by distance (stable).
        distances: ``(P,)`` their Euclidean distances, ascending.
        class_of: ``(P,)`` the class (0-based :math:`w - 1`) of each sorted pair, non-decreasing.
        bounds: ``(mu, 2)`` the smallest and largest distance in each class.
    """

    n: int
    epsilon: float
    order: np.ndarray
    pairs: np.ndarray
    distances: np.ndarray
    class_of: np.ndarray
    bounds: np.ndarray

    @property
    def n_classes(self) -> int:
        """:math:`\\mu`, the number of distance classes."""
        return int(self.bounds.shape[0])

    def class_of_distance(self, d: float) -> int:
        """The class holding a pair at distance ``d`` (``d`` must be one of the distances)."""
        w = int(np.searchsorted(self.bounds[:, 0], d, side="right")) - 1
        return max(w, 0)


def _greedy_class_starts(ds: np.ndarray, epsilon: float) -> np.ndarray:
    """Start positions of the greedy classes of the ascending distances ``ds``."""
    gaps = np.diff(ds)
    gaps = gaps[gaps > 0]
    if epsilon == 0.0 or epsilon < (gaps.min() if gaps.size else np.inf):
        # every class holds exactly one distance value
        return np.flatnonzero(np.r_[True, ds[1:] != ds[:-1]])
    starts = []
    s, p = 0, len(ds)
    # one iteration per class (mu <= (max - min) / epsilon + 1), each a binary search
    while s < p:
        starts.append(s)
        s = int(np.searchsorted(ds, ds[s] + epsilon, side="right"))
    return np.asarray(starts, dtype=np.int64)


def distance_classes(X: Any, epsilon: float) -> DistanceClasses:
    """Sort all pairs of rows of ``X`` by Euclidean distance and group them into classes.

    The greedy procedure of Sec. 3.1: walk the pairs from the shortest to the longest distance
    and open a new class whenever the current distance exceeds the first distance of the open
    class by more than ``epsilon``. Every class :math:`D_w` then satisfies
    :math:`\\max D_w - \\min D_w \\le \\epsilon`, and classes do not overlap. With
    ``epsilon = 0`` each class holds the pairs of one distance value (exact optimisation).

    ``epsilon`` is in the units of ``X`` (TreeClustering passes features scaled to [0, 100], as
    the paper does). Time O(P log P) with P = n(n-1)/2; memory O(P).
    """
    X = check_array("X", X, ndim=2, min_rows=2)
    epsilon = check_float("epsilon", epsilon, minimum=0.0)
    n = X.shape[0]
    d = pdist(X)
    order = np.argsort(d, kind="stable")
    ds = d[order]
    i, j = pairs_from_condensed(n, order)
    idx_dtype = np.int32 if n < 2**31 else np.int64
    pairs = np.stack([i, j], axis=1).astype(idx_dtype)
    starts = _greedy_class_starts(ds, epsilon)
    class_of = np.zeros(len(ds), dtype=np.int64)
    class_of[starts[1:]] = 1
    class_of = np.cumsum(class_of)
    ends = np.r_[starts[1:], len(ds)] - 1
    bounds = np.stack([ds[starts], ds[ends]], axis=1)
    return DistanceClasses(
        n=n,
        epsilon=epsilon,
        order=order.astype(np.int64),
        pairs=pairs,
        distances=ds,
        class_of=class_of,
        bounds=bounds,
    )
