"""FairDen: fair density-based clustering (Krieger, Beer et al., ICLR 2025; Alg. 1).

Pipeline: dc-distance tree of the numerical features (:class:`~gnnaudit.graph_ops.DCTree`),
affinity :math:`A = \\tfrac{d_n}{d}(1 - D_{dc}/\\max D_{dc}) + \\tfrac{d_c}{d} S_G`
(Eq. 1, 15), fairness matrix ``F`` over the *combined* sensitive groups (Sec. 2.2, 2.4), the
constrained normalised-cut embedding (Eq. 12, :mod:`gnnaudit.clustering.fair_spectral`),
k-means on its rows, and Alg. 1's noise loop: clusters with fewer than ``minPts`` points become
noise (-1); while fewer than ``n_clusters`` non-noise clusters remain, k-means is rerun with
``k + 1`` clusters on the *same* embedding (Alg. 1 line 14 and the published code;
``noise_loop="fixed"``, the default). ``noise_loop="recompute"`` instead recomputes the embedding
with ``k + 1`` eigenvectors at every step (gnnaudit's behaviour before issue 16; measured in
``benchmarks/results/fairden_k.md``).

The loop is capped at ``k <= max(n_clusters, n // minPts)`` (more clusters of at least ``minPts``
points cannot exist) and, with ``noise_loop="recompute"``, at the embedding's maximal dimension;
when the cap is hit the last clustering is returned and a warning logged.

Rounding (extension of the paper). k-means on the relaxed embedding can separate the sensitive
groups although :math:`F^\top H = 0` holds for the relaxation (three moons at ``k = 3``: balance
0.33). ``rounding="balanced"`` (default) rounds the same embedding to the k-means-nearest
partition that meets the discrete form of the constraint, the data's group proportions in every
cluster (:mod:`gnnaudit.clustering.fairden_rounding`), starting from Alg. 1's partition and
keeping its cluster sizes and noise; the k-means partition is kept when it is already at least as
balanced, so the balanced rounding never lowers balance. ``rounding="kmeans"`` is the paper's
Alg. 1 exactly.

A fitted model whose balance is below :data:`BALANCE_WARNING_THRESHOLD` (0.5) warns
(``UserWarning``), naming the group-pure clusters.

Small groups. A balanced clustering into ``k`` clusters needs every combined sensitive group to
have at least ``k`` members (paper Sec. 2.5). By default a smaller group raises
:class:`~gnnaudit.errors.InfeasibleError`. With ``min_group_size=m`` the points of combined
groups with fewer than ``m`` members are excluded as in the paper's experiments (Sec. 3.3):
they are labelled -1 and flagged in ``excluded_``.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any, Literal

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.cluster import KMeans
from sklearn.utils import check_random_state
from tqdm.auto import tqdm

from gnnaudit._validation import check_choice, check_int
from gnnaudit.clustering._estimator_input import (
    DenseInputTagsMixin,
    check_random_state_param,
    validate_fit_input,
)
from gnnaudit.clustering.fair_spectral import (
    AffinityOperator,
    fair_embedding_dense,
    fair_embedding_matrix_free,
    fairness_matrix,
)
from gnnaudit.clustering.fairden_rounding import balanced_kmeans_rounding
from gnnaudit.clustering.goodall import Goodall1, encode_columns
from gnnaudit.clustering.metrics.fairness import balance, group_mix
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops._distances import rowwise_distances
from gnnaudit.graph_ops.dc_tree import DCTree
from gnnaudit.graph_ops.mst import core_distances

__all__ = ["FairDen", "BALANCE_WARNING_THRESHOLD"]

logger = logging.getLogger(__name__)

#: ``solver="auto"`` uses the dense paper construction up to this many points.
AUTO_DENSE_MAX_N = 1000
#: ``solver="dense"`` refuses more points than this (``O(n^3)`` time, ``O(n^2)`` memory).
DENSE_MAX_N = 5000
#: ``fit`` warns when the fitted clustering's balance is below this value.
BALANCE_WARNING_THRESHOLD = 0.5


class FairDen(DenseInputTagsMixin, ClusterMixin, BaseEstimator):
    """Fair density-based clustering (FairDen), a scikit-learn clusterer.

    ``FairDen(...).fit(X, sensitive_features=s)`` clusters the rows of ``X`` so that every
    cluster is balanced w.r.t. the sensitive attribute(s) ``s`` (fairlearn's naming).

    Parameters
    ----------
    n_clusters:
        Number ``k`` of non-noise clusters wanted (``>= 2``).
    min_pts:
        ``minPts`` (:math:`\\mu`) of the dc-distance and the noise threshold. Default
        ``max(2, 2 d_n - 1)`` with ``d_n`` the number of numerical features (Schubert et al.).
    solver:
        ``"dense"`` (paper's Z / Q construction, ``n <= 5000``), ``"matrix_free"`` (eigsh on a
        projected ``LinearOperator``, no ``n x n`` array) or ``"auto"`` (dense up to 1,000
        points).
    random_state:
        Seed of k-means and of the eigensolver's start vector.
    min_group_size:
        ``None`` (default): a combined sensitive group smaller than ``n_clusters`` is an error.
        An int ``m``: points of groups smaller than ``m`` are excluded (label -1).
    n_init:
        k-means restarts.
    rounding:
        How the relaxed embedding becomes clusters. ``"balanced"`` (default, an extension of
        the paper): Alg. 1's k-means partition is re-rounded to the k-means-nearest partition
        with the data's combined-group proportions in every cluster (exact per-cluster group
        quotas, :func:`~gnnaudit.clustering.fairden_rounding.balanced_kmeans_rounding`), same
        cluster sizes and noise; kept only when it raises the balance. ``"kmeans"``: the
        paper's Alg. 1 (k-means on ``H``).
    noise_loop:
        ``"fixed"`` (default, Alg. 1 line 14 as published): when fewer than ``n_clusters``
        clusters have ``minPts`` points, k-means runs again with ``k + 1`` clusters on the same
        embedding. ``"recompute"``: the embedding is recomputed with ``k + 1`` eigenvectors.
    progress:
        Show a tqdm progress bar over the stages.

    Attributes
    ----------
    labels_ : (n,) cluster ids ``0..n_clusters_-1``, noise and excluded points -1.
    n_clusters_ : number of non-noise clusters found.
    k_ : the ``k`` (k-means clusters) of the final Alg. 1 iteration.
    embedding_ : (n_used, n_clusters) the spectral embedding ``H`` of the clustered points
        (``(n_used, k_)`` with ``noise_loop="recompute"``).
    eigenvalues_ : its constrained generalised eigenvalues (the smallest ones).
    rounding_ : ``"balanced"`` when the balanced rounding produced ``labels_``, ``"kmeans"``
        when Alg. 1's k-means partition did (``rounding="kmeans"``, or already as balanced).
    balance_ : noise-adjusted balance of ``labels_`` over the combined groups.
    groups_ : (n,) combined sensitive group code of every point.
    excluded_ : (n,) bool, points left out for belonging to a too-small group.
    dc_tree_ : the fitted :class:`~gnnaudit.graph_ops.DCTree` (of the used points).
    min_pts_ : the ``minPts`` used.
    timings_ : seconds per stage (``dc_tree``, ``affinity``, ``eigensolver``, ``kmeans``,
        ``rounding``; eigensolver and k-means summed over the Alg. 1 iterations).
    """

    def __init__(
        self,
        n_clusters: int = 2,
        min_pts: int | None = None,
        solver: Literal["auto", "dense", "matrix_free"] = "auto",
        random_state: int | np.random.RandomState | None = 0,
        min_group_size: int | None = None,
        n_init: int = 10,
        rounding: Literal["balanced", "kmeans"] = "balanced",
        noise_loop: Literal["fixed", "recompute"] = "fixed",
        progress: bool = False,
    ) -> None:
        self.n_clusters = n_clusters
        self.min_pts = min_pts
        self.solver = solver
        self.random_state = random_state
        self.min_group_size = min_group_size
        self.n_init = n_init
        self.rounding = rounding
        self.noise_loop = noise_loop
        self.progress = progress

    def _validate(self, X: Any, sensitive: Any, categorical: Any) -> tuple:
        X = validate_fit_input(self, X, min_samples=2)
        k = check_int("n_clusters", self.n_clusters, minimum=2)
        check_choice("solver", self.solver, ("auto", "dense", "matrix_free"))
        check_int("n_init", self.n_init, minimum=1)
        check_choice("rounding", self.rounding, ("balanced", "kmeans"))
        check_choice("noise_loop", self.noise_loop, ("fixed", "recompute"))
        check_random_state_param(self.random_state)
        n, d_n = X.shape
        if sensitive is None:
            warnings.warn(
                "FairDen.fit got no sensitive_features: clustering with one group, i.e. "
                "without a fairness constraint; pass sensitive_features=... to balance the "
                "clusters",
                UserWarning,
                stacklevel=3,
            )
            sensitive = np.zeros(n, dtype=np.int64)
        groups_raw = encode_columns("sensitive_features", sensitive)
        if groups_raw.shape[0] != n:
            raise InvalidInputError(
                f"sensitive_features has {groups_raw.shape[0]} rows but X has {n}"
            )
        group_values, groups = np.unique(groups_raw, axis=0, return_inverse=True)
        groups = groups.reshape(-1)
        cat = None
        if categorical is not None:
            cat = encode_columns("categorical", categorical)
            if cat.shape[0] != n:
                raise InvalidInputError(f"categorical has {cat.shape[0]} rows but X has {n}")
            if cat.shape[1] == 0:
                cat = None
        min_pts = self.min_pts if self.min_pts is not None else max(2, 2 * d_n - 1)
        min_pts = check_int("min_pts", min_pts, minimum=1)
        self._group_values = group_values
        return k, X, groups, cat, min_pts

    def fit(
        self,
        X: Any,
        y: Any = None,
        *args: Any,
        sensitive_features: Any = None,
        categorical: Any = None,
        dc_tree: DCTree | None = None,
    ) -> FairDen:
        """Cluster ``X`` (n, d_n numerical) fairly w.r.t. ``sensitive_features``; returns ``self``.

        Warns (``UserWarning``) when the fitted ``balance_`` is below
        :data:`BALANCE_WARNING_THRESHOLD` (0.5), naming the group-pure clusters (or the least
        balanced ones) and the remedy.

        Args:
            X: numerical features (array or DataFrame of numeric columns), validated by
                scikit-learn.
            y: ignored (scikit-learn convention). Deprecated: ``fit(X, s)`` with the sensitive
                attribute in ``y``'s place still reads it as ``sensitive_features`` when that
                is not given, with a ``FutureWarning``; so does a third positional argument
                as ``categorical``.
            sensitive_features: ``(n,)`` or ``(n, a)`` sensitive attribute(s), any hashable
                values; the combined groups (tuples of all values) are balanced. ``None``:
                one group, i.e. plain FairDen clustering without the fairness constraint, with
                a ``UserWarning``.
            categorical: ``(n, d_c)`` categorical attributes (any hashable codes), compared
                with Goodall1 (Eq. 15).
            dc_tree: a fitted :class:`~gnnaudit.graph_ops.DCTree` of the clustered points built
                beforehand (``X``, or ``X`` without the points ``min_group_size`` excludes),
                with ``min_pts`` equal to this estimator's ``minPts`` (capped at the number of
                points); its core distances and MST weights are checked against ``X``
                (:class:`~gnnaudit.errors.InvalidInputError` when they do not match).
        """
        if args:
            if len(args) > 1:
                raise TypeError(
                    f"FairDen.fit takes at most 3 positional arguments (X, y, categorical), "
                    f"got {2 + len(args)}"
                )
            if categorical is not None:
                raise InvalidInputError("categorical was given both positionally and by name")
            warnings.warn(
                "passing categorical positionally to FairDen.fit is deprecated; use "
                "fit(X, sensitive_features=s, categorical=c)",
                FutureWarning,
                stacklevel=2,
            )
            categorical = args[0]
        if sensitive_features is None and y is not None:
            warnings.warn(
                "FairDen.fit(X, sensitive) is deprecated: the second positional argument is "
                "scikit-learn's y and will be ignored in a future release; pass "
                "fit(X, sensitive_features=sensitive)",
                FutureWarning,
                stacklevel=2,
            )
            sensitive_features = y
        return self._fit(X, sensitive_features, categorical, dc_tree)

    def _fit(self, X: Any, sensitive: Any, categorical: Any, dc_tree: DCTree | None) -> FairDen:
        k0, X, groups, cat, min_pts = self._validate(X, sensitive, categorical)
        n = X.shape[0]
        rng = check_random_state(self.random_state)
        sizes = np.bincount(groups)
        excluded = np.zeros(n, dtype=bool)
        if self.min_group_size is not None:
            mgs = check_int("min_group_size", self.min_group_size, minimum=1)
            excluded = sizes[groups] < mgs
            if excluded.all():
                raise InfeasibleError(
                    f"every combined sensitive group has fewer than min_group_size={mgs} "
                    f"members (group sizes {sizes.tolist()})"
                )
            if excluded.any():
                logger.warning(
                    "excluding %d points of %d sensitive group(s) smaller than %d",
                    int(excluded.sum()),
                    int((sizes < mgs).sum()),
                    mgs,
                )
        used = np.flatnonzero(~excluded)
        g_used = np.unique(groups[used], return_inverse=True)[1].reshape(-1)
        used_sizes = np.bincount(g_used)
        if used_sizes.min() < k0:
            raise InfeasibleError(
                f"a balanced clustering into n_clusters={k0} clusters needs every combined "
                f"sensitive group to have at least {k0} members; group sizes are "
                f"{used_sizes.tolist()}. Lower n_clusters or pass min_group_size={k0} to "
                "exclude the small groups (paper Sec. 3.3)"
            )
        if used_sizes.size == 1:
            logger.warning("only one sensitive group: FairDen reduces to unconstrained clustering")
        m = used.size
        Xu = X[used]
        solver = self.solver
        if solver == "auto":
            solver = "dense" if m <= AUTO_DENSE_MAX_N else "matrix_free"
        if solver == "dense" and m > DENSE_MAX_N:
            raise InvalidInputError(
                f"solver='dense' is limited to n <= {DENSE_MAX_N} points, got {m}; "
                "use solver='matrix_free'"
            )
        timings = {"dc_tree": 0.0, "affinity": 0.0, "eigensolver": 0.0, "kmeans": 0.0}
        timings["rounding"] = 0.0
        bar = tqdm(total=3, desc="FairDen", disable=not self.progress, leave=False)
        t0 = time.perf_counter()
        if dc_tree is None:
            tree = DCTree(min_pts=min(min_pts, m), progress=self.progress).fit(Xu)
        else:
            tree = self._check_dc_tree(dc_tree, Xu, min(min_pts, m), n)
        timings["dc_tree"] = time.perf_counter() - t0
        bar.set_postfix_str("dc-tree done")
        bar.update()
        t0 = time.perf_counter()
        d_n = X.shape[1]
        d_c = 0 if cat is None else cat.shape[1]
        goodall = Goodall1(cat[used]) if cat is not None else None
        op = AffinityOperator(tree, goodall, d_n / (d_n + d_c), d_c / (d_n + d_c))
        F = fairness_matrix(g_used)
        emb_cap = m - F.shape[1] - 1  # largest embedding dimension
        if emb_cap < k0:
            raise InfeasibleError(
                f"n_clusters={k0} is too large for {m} points with {F.shape[1]} fairness "
                "constraints"
            )
        k_cap = min(max(k0, m // min_pts), m)
        if self.noise_loop == "recompute":
            k_cap = min(k_cap, emb_cap)
        A_dense = op.to_dense() if solver == "dense" else None
        timings["affinity"] = time.perf_counter() - t0
        bar.update()

        def embed(dim: int) -> Any:
            t = time.perf_counter()
            if A_dense is not None:
                out = fair_embedding_dense(A_dense, F, dim)
            else:
                out = fair_embedding_matrix_free(op, F, dim, random_state=rng)
            timings["eigensolver"] += time.perf_counter() - t
            return out

        k = k0
        emb = embed(k0)
        while True:
            if k > k0 and self.noise_loop == "recompute":
                emb = embed(k)
            t1 = time.perf_counter()
            km = KMeans(n_clusters=k, n_init=self.n_init, random_state=rng).fit(emb.H)
            timings["kmeans"] += time.perf_counter() - t1
            bar.set_postfix_str(f"k={k}")
            lab = km.labels_
            counts = np.bincount(lab, minlength=k)
            big = counts >= min_pts
            if big.sum() >= k0 or k >= k_cap:
                if big.sum() < k0:
                    logger.warning(
                        "FairDen: only %d clusters with >= minPts=%d points at the cap k=%d",
                        int(big.sum()),
                        min_pts,
                        k,
                    )
                break
            logger.info(
                "FairDen: k=%d gave %d non-noise clusters; trying k=%d", k, big.sum(), k + 1
            )
            k += 1
        bar.update()
        bar.close()
        t0 = time.perf_counter()
        lab, rounding_used = self._round(emb.H, lab, big, g_used)
        timings["rounding"] = time.perf_counter() - t0
        # relabel surviving clusters 0..m-1 in order of first appearance, small ones -> noise
        new_id = np.full(k, -1, dtype=np.int64)
        survivors = np.flatnonzero(big)
        first = np.unique(lab, return_index=True)[1][survivors]  # labels are 0..k-1
        new_id[survivors[np.argsort(first)]] = np.arange(survivors.size)
        labels = np.full(n, -1, dtype=np.int64)
        labels[used] = new_id[lab]
        self.labels_ = labels
        self.n_clusters_ = int(survivors.size)
        self.k_ = k
        self.embedding_ = emb.H
        self.eigenvalues_ = emb.eigenvalues
        self.groups_ = groups
        self.excluded_ = excluded
        self.dc_tree_ = tree
        self.min_pts_ = min_pts
        self.solver_ = solver
        self.timings_ = timings
        self.rounding_ = rounding_used
        self.balance_ = balance(labels, groups)
        if self.balance_ < BALANCE_WARNING_THRESHOLD and groups.max() > 0:
            warnings.warn(self._unfair_message(labels, groups), UserWarning, stacklevel=3)
        return self

    def _round(
        self, H: np.ndarray, lab: np.ndarray, big: np.ndarray, groups: np.ndarray
    ) -> tuple[np.ndarray, str]:
        """Alg. 1's k-means labels ``lab`` (ids ``0..k-1``, clusters with ``big`` false become
        noise), re-rounded when ``rounding="balanced"`` and that raises the balance."""
        if self.rounding == "kmeans" or groups.max() == 0:
            return lab, "kmeans"
        keep = big[lab]
        ids = np.flatnonzero(big)
        compact = np.searchsorted(ids, lab[keep])
        result = balanced_kmeans_rounding(H[keep], compact, groups[keep])
        new = lab.copy()
        new[keep] = ids[result.labels]
        if balance(np.where(keep, new, -1), groups) > balance(np.where(keep, lab, -1), groups):
            return new, "balanced"
        return lab, "kmeans"

    def _unfair_message(self, labels: np.ndarray, groups: np.ndarray) -> str:
        """Plain-words warning for a clustering with balance below the threshold."""
        names = np.array(
            ["/".join(map(str, row)) if len(row) > 1 else str(row[0]) for row in self._group_values]
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
            "use rounding='balanced' (the default), which gives every cluster the data's group "
            "proportions"
            if self.rounding == "kmeans"
            else "try fewer clusters (n_clusters) or a smaller min_pts"
        )
        return (
            f"FairDen: the clustering is unfair, balance {self.balance_:.3f} is below "
            f"{BALANCE_WARNING_THRESHOLD} ({what}). To fix it, {remedy}."
        )

    @staticmethod
    def _check_dc_tree(tree: Any, Xu: np.ndarray, min_pts: int, n: int) -> DCTree:
        """``tree`` if it is a fitted DCTree of the points ``Xu`` with ``min_pts``."""
        if not isinstance(tree, DCTree):
            raise InvalidInputError(
                f"dc_tree must be a gnnaudit.graph_ops.DCTree, got {type(tree).__name__}"
            )
        if getattr(tree, "mst_", None) is None or getattr(tree, "core_distances_", None) is None:
            raise InvalidInputError("dc_tree is not fitted; call DCTree(min_pts=...).fit(X)")
        m = Xu.shape[0]
        if tree.n_ != m:
            extra = f" ({n - m} points of too-small groups are excluded)" if m < n else ""
            raise InvalidInputError(
                f"dc_tree was fitted on {tree.n_} points but FairDen clusters {m}{extra}"
            )
        if tree.min_pts != min_pts:
            raise InvalidInputError(
                f"dc_tree was built with min_pts={tree.min_pts} but FairDen uses minPts="
                f"{min_pts}; build it with DCTree(min_pts={min_pts}) or set FairDen(min_pts=...)"
            )
        cd = core_distances(Xu, min_pts)
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

    def fit_predict(self, X: Any, y: Any = None, *args: Any, **kwargs: Any) -> np.ndarray:
        """``fit(X, y, *args, **kwargs)`` and return ``labels_`` (noise and excluded: -1)."""
        return self.fit(X, y, *args, **kwargs).labels_

    def __sklearn_is_fitted__(self) -> bool:
        """scikit-learn's fitted check: ``labels_`` is set."""
        return getattr(self, "labels_", None) is not None
