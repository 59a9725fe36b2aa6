"""The fitted clustering tree: :class:`ClusteringTree` (routing, text export) and the helpers
that build it from a split pattern, plus the [0, 100] feature scaling of the method."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist

from gnnaudit._validation import check_array
from gnnaudit.errors import InvalidInputError

__all__ = [
    "ClusteringTree",
    "scale_features",
    "tree_from_splits",
    "single_leaf",
    "diameter_and_split",
]


@dataclass(frozen=True)
class ClusteringTree:
    """A complete binary clustering tree in heap order (root 0, children ``2t+1``, ``2t+2``).

    A point goes left at branch node ``t`` iff ``x[feature[t]] <= threshold[t]``. The threshold
    is the midpoint between the largest value sent left and the smallest value sent right
    (over the training points) of the chosen feature.

    Attributes:
        depth: tree depth ``d``.
        feature: ``(2^d - 1,)`` feature index of each branch node.
        threshold: ``(2^d - 1,)`` thresholds in the original feature units.
        threshold_scaled: ``(2^d - 1,)`` the same thresholds on the [0, 100] scale.
        leaf_cluster: ``(2^d,)`` cluster of each leaf (left to right).
        leaf_size: ``(2^d,)`` number of training points reaching each leaf.
    """

    depth: int
    feature: np.ndarray
    threshold: np.ndarray
    threshold_scaled: np.ndarray
    leaf_cluster: np.ndarray
    leaf_size: np.ndarray

    @property
    def n_leaves(self) -> int:
        """Number of leaves, ``2 ** depth``."""
        return int(2**self.depth)

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Leaf index (0 .. 2^d - 1) of every row of ``X`` (original units); one vectorised
        step per tree level."""
        X = check_array("X", X, ndim=2, min_rows=0)
        if X.shape[1] <= int(self.feature.max(initial=0)):
            raise InvalidInputError(
                f"X has {X.shape[1]} features but the tree splits on feature "
                f"{int(self.feature.max(initial=0))}"
            )
        node = np.zeros(len(X), dtype=np.int64)
        rows = np.arange(len(X))
        for _ in range(self.depth):
            go_right = X[rows, self.feature[node]] > self.threshold[node]
            node = 2 * node + 1 + go_right
        return np.asarray(node - (2**self.depth - 1))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Cluster of every row of ``X`` (original units)."""
        return np.asarray(self.leaf_cluster[self.apply(X)])

    def export_text(
        self, feature_names: list[str] | None = None, decimals: int = 3, show_empty: bool = False
    ) -> str:
        """The tree as indented text, one line per split side and per leaf.

        Split lines name the feature (``feature_names[j]``, else ``x[j]``) and the threshold;
        leaf lines give the cluster and the number of training points. Leaves no training
        point reaches, and split sides leading only to such leaves, are left out unless
        ``show_empty``.
        """
        names = feature_names
        lines: list[str] = []
        first_leaf = 2**self.depth - 1
        size = np.zeros(2 * first_leaf + 1, dtype=np.int64)  # training points per node
        size[first_leaf:] = self.leaf_size
        for t in range(first_leaf - 1, -1, -1):
            size[t] = size[2 * t + 1] + size[2 * t + 2]

        def walk(t: int, level: int) -> None:
            pad = "|   " * level + "|--- "
            if t >= first_leaf:
                leaf = t - first_leaf
                lines.append(
                    f"{pad}cluster {int(self.leaf_cluster[leaf])} (n={int(self.leaf_size[leaf])})"
                )
                return
            f = int(self.feature[t])
            name = names[f] if names is not None else f"x[{f}]"
            thr = f"{self.threshold[t]:.{decimals}f}"
            for child, op in ((2 * t + 1, "<= "), (2 * t + 2, ">  ")):
                if size[child] or show_empty:
                    lines.append(f"{pad}{name} {op}{thr}")
                    walk(child, level + 1)

        walk(0, 0)
        return "\n".join(lines)


def scale_features(X: np.ndarray, lo: np.ndarray, rng: np.ndarray) -> np.ndarray:
    """Min-max scale the columns of ``X`` to [0, 100] (the paper's feature scale), given each
    column's minimum ``lo`` and range ``rng``; constant columns become 0."""
    safe = np.where(rng > 0, rng, 1.0)
    return np.where(rng > 0, (X - lo) / safe * 100.0, 0.0)


def tree_from_splits(
    feature: np.ndarray,
    left: np.ndarray,
    leaf_cluster: np.ndarray,
    leaf_of: np.ndarray,
    X: np.ndarray,
    Xs: np.ndarray,
    depth: int,
) -> ClusteringTree:
    """The :class:`ClusteringTree` of a split pattern: ``feature`` ``(B,)`` of each branch node,
    ``left`` ``(n, B)`` whether each training point goes left there (a threshold pattern along
    the feature, both sides non-empty over all points), the cluster of each leaf and the leaf of
    each point. Thresholds are midpoints between the largest value sent left and the smallest
    sent right, in original and in scaled units."""
    n_nodes = len(feature)
    thr = np.empty(n_nodes)
    thr_s = np.empty(n_nodes)
    for t in range(n_nodes):  # one step per branch node (2^d - 1 of them)
        f = feature[t]
        lm = left[:, t]
        thr[t] = (X[lm, f].max() + X[~lm, f].min()) / 2.0
        thr_s[t] = (Xs[lm, f].max() + Xs[~lm, f].min()) / 2.0
    return ClusteringTree(
        depth=depth,
        feature=np.asarray(feature, np.int64),
        threshold=thr,
        threshold_scaled=thr_s,
        leaf_cluster=np.asarray(leaf_cluster, np.int64),
        leaf_size=np.bincount(leaf_of, minlength=2**depth),
    )


def single_leaf(n: int) -> ClusteringTree:
    """The depth-0 tree of ``n_clusters=1``: one leaf, cluster 0, holding all ``n`` points."""
    return ClusteringTree(
        depth=0,
        feature=np.zeros(0, np.int64),
        threshold=np.zeros(0),
        threshold_scaled=np.zeros(0),
        leaf_cluster=np.zeros(1, np.int64),
        leaf_size=np.array([n], np.int64),
    )


def diameter_and_split(
    Xs: np.ndarray, labels: np.ndarray, chunk: int = 1024
) -> tuple[float, float]:
    """Maximum intra-cluster distance MD and minimum inter-cluster distance MS of ``labels`` on
    ``Xs`` (MD 0 for singletons only, MS inf for one cluster). Exact, ``O(n^2 F)`` time in
    row chunks: memory ``chunk * n`` floats."""
    md, ms = 0.0, float("inf")
    for lo in range(0, len(Xs), chunk):  # one step per chunk of rows
        d = cdist(Xs[lo : lo + chunk], Xs)
        same = labels[lo : lo + chunk, None] == labels[None, :]
        if same.any():
            md = max(md, float(d[same].max()))
        if (~same).any():
            ms = min(ms, float(d[~same].min()))
    return md, ms
