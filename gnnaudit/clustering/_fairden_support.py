"""FairDen's checks and messages: a user-supplied dc-tree against the data, the refusal of
data without enough distinct points, and the plain-words warning of an unfair clustering.

Private helpers of :class:`gnnaudit.clustering.FairDen` (kept apart so each module has one
job).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np

from gnnaudit.clustering.goodall import encode_columns
from gnnaudit.clustering.metrics.fairness import group_mix
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops._distances import rowwise_distances
from gnnaudit.graph_ops.dc_tree import DCTree
from gnnaudit.graph_ops.mst import core_distances

__all__ = [
    "check_dc_tree",
    "check_distinct_points",
    "encode_fit_columns",
    "excluded_points",
    "unfair_message",
]

logger = logging.getLogger("gnnaudit.clustering.fairden")


def encode_fit_columns(
    sensitive: Any, categorical: Any, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Combined sensitive group codes ``(n,)``, their values (one row per group) and the
    categorical codes (``None`` when there are none) of ``n`` rows. No sensitive attribute,
    or one with a single value, warns (``UserWarning``): no fairness constraint then."""
    defaulted = sensitive is None
    if defaulted:
        warnings.warn(
            "FairDen.fit got no sensitive_features: clustering with one group, i.e. "
            "without a fairness constraint; pass sensitive_features=... to balance the "
            "clusters",
            UserWarning,
            stacklevel=4,
        )
        sensitive = np.zeros(n, dtype=np.int64)
    groups_raw = encode_columns("sensitive_features", sensitive)
    if groups_raw.shape[0] != n:
        raise InvalidInputError(f"sensitive_features has {groups_raw.shape[0]} rows but X has {n}")
    group_values, groups = np.unique(groups_raw, axis=0, return_inverse=True)
    if not defaulted and group_values.shape[0] == 1:
        warnings.warn(
            "FairDen.fit: sensitive_features takes a single value on every point, so the "
            "clustering has no fairness constraint (one group: balance is 1 by "
            "definition); pass an attribute with at least two groups to balance",
            UserWarning,
            stacklevel=4,
        )
    cat = None
    if categorical is not None:
        cat = encode_columns("categorical", categorical)
        if cat.shape[0] != n:
            raise InvalidInputError(f"categorical has {cat.shape[0]} rows but X has {n}")
        if cat.shape[1] == 0:
            cat = None
    return groups.reshape(-1), group_values, cat


def excluded_points(groups: np.ndarray, min_group_size: int | None) -> np.ndarray:
    """Points of combined groups smaller than ``min_group_size`` (none when ``None``); an
    :class:`~gnnaudit.errors.InfeasibleError` when that is every point."""
    excluded = np.zeros(groups.size, dtype=bool)
    if min_group_size is None:
        return excluded
    sizes = np.bincount(groups)
    excluded = sizes[groups] < min_group_size
    if excluded.all():
        raise InfeasibleError(
            f"every combined sensitive group has fewer than min_group_size={min_group_size} "
            f"members (group sizes {sizes.tolist()})"
        )
    if excluded.any():
        logger.warning(
            "excluding %d points of %d sensitive group(s) smaller than %d",
            int(excluded.sum()),
            int((sizes < min_group_size).sum()),
            min_group_size,
        )
    return np.asarray(excluded)


def check_distinct_points(X: np.ndarray, cat: np.ndarray | None, n_clusters: int) -> None:
    """Refuse (:class:`~gnnaudit.errors.InfeasibleError`) data with fewer distinct points
    (numerical and categorical features together) than ``n_clusters``: identical points get
    identical dc-distances and affinities, so no clustering can put them apart (tree-cluster
    refuses the same case)."""
    if n_clusters <= 1 or X.shape[0] == 0:
        return
    rows = X if cat is None else np.column_stack([X, cat.astype(np.float64)])
    distinct = np.unique(rows, axis=0).shape[0]
    if distinct < n_clusters:
        what = (
            f"all {X.shape[0]} points have identical features"
            if distinct == 1
            else f"the {X.shape[0]} points have only {distinct} distinct feature vectors"
        )
        raise InfeasibleError(
            f"FairDen: infeasible (identical-points): {what}, so only {distinct} group(s) of "
            f"points can be apart but n_clusters={n_clusters} clusters are asked; remedies: "
            f"use n_clusters <= {distinct}, or check the data (a constant or duplicated table)"
        )


def check_dc_tree(tree: Any, Xu: np.ndarray, min_samples: int, n: int) -> DCTree:
    """``tree`` if it is a fitted DCTree of the points ``Xu`` with ``min_samples``; otherwise an
    :class:`~gnnaudit.errors.InvalidInputError` saying what differs."""
    if not isinstance(tree, DCTree):
        raise InvalidInputError(
            f"dc_tree must be a gnnaudit.graph_ops.DCTree, got {type(tree).__name__}"
        )
    if getattr(tree, "mst_", None) is None or getattr(tree, "core_distances_", None) is None:
        raise InvalidInputError("dc_tree is not fitted; call DCTree(min_samples=...).fit(X)")
    m = Xu.shape[0]
    if tree.n_ != m:
        extra = f" ({n - m} points of too-small groups are excluded)" if m < n else ""
        raise InvalidInputError(
            f"dc_tree was fitted on {tree.n_} points but FairDen clusters {m}{extra}"
        )
    if tree.min_samples != min_samples:
        raise InvalidInputError(
            f"dc_tree was built with min_samples={tree.min_samples} but FairDen uses "
            f"min_samples={min_samples}; build it with DCTree(min_samples={min_samples}) or "
            "set FairDen(min_samples=...)"
        )
    cd = core_distances(Xu, min_samples)
    u, v = tree.mst_.u, tree.mst_.v
    w = np.maximum(rowwise_distances(Xu[u], Xu[v], "euclidean"), np.maximum(cd[u], cd[v]))
    scale = max(float(np.abs(cd).max(initial=0.0)), float(np.abs(w).max(initial=0.0)))
    same = np.allclose(tree.core_distances_, cd, rtol=1e-9, atol=1e-12 * scale)
    if not (same and np.allclose(tree.mst_.weight, w, rtol=1e-9, atol=1e-12 * scale)):
        raise InvalidInputError(
            "dc_tree does not match X: its core distances or MST weights differ from those "
            "of X (fitted on other data, or on the rows in another order)"
        )
    return tree


def unfair_message(
    labels: np.ndarray,
    groups: np.ndarray,
    group_values: np.ndarray,
    balance_value: float,
    threshold: float,
    rounding: str,
) -> str:
    """Plain-words warning for a clustering whose balance is below ``threshold``: the
    group-pure (or least balanced) clusters, the noise share and the remedy."""
    names = np.array(
        ["/".join(map(str, row)) if len(row) > 1 else str(row[0]) for row in group_values]
    )
    mix = group_mix(labels, names[groups])
    mix = mix[mix["cluster"] >= 0]
    shares = mix.filter(like="share_")
    pure = mix[(shares.to_numpy() == 1.0).any(axis=1)]
    if mix.empty:
        what = "no point is in a cluster"
    elif len(pure):
        detail = "; ".join(
            f"cluster {int(r['cluster'])} holds only group "
            f"{shares.loc[i].idxmax().removeprefix('share_')} ({int(r['size'])} points)"
            for i, r in pure.iterrows()
        )
        what = f"group-pure clusters: {detail}"
    else:
        worst = mix.nsmallest(3, "balance")
        what = "least balanced clusters: " + ", ".join(
            f"cluster {int(r.cluster)} (balance {r.balance:.2f})" for r in worst.itertuples()
        )
    noise = float(np.mean(labels == -1))
    if noise > 0.5:
        what += f"; {noise:.0%} of the points are noise (balance counts only clustered points)"
    remedy = (
        "use rounding='repair' (the default) with min_balance=..., or rounding='balanced', "
        "which gives every cluster the data's group proportions"
        if rounding == "kmeans"
        else "raise min_balance (with min_dcsi_share=0 when the density rule held the balance "
        "back: see candidates_), try fewer clusters (n_clusters) or a smaller min_samples"
    )
    return (
        f"FairDen: the clustering is unfair, balance {balance_value:.3f} is below "
        f"{threshold} ({what}). To fix it, {remedy}."
    )
