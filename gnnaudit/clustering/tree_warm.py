"""A fast greedy clustering tree: the warm start and the anytime fallback of the MaxSAT search.

:func:`greedy_tree` builds, in well under a second for thousands of points, a complete tree of
depth ``d`` that tries to honour the must-link / cannot-link constraints:

1. **Target labels.** k-means on the scaled features; every must-link component takes the
   label most of its points have; cannot-link conflicts between components are then repaired by
   rounds of vectorised recolouring (a component in conflict moves to the label with the fewest
   conflicts among its cannot-link neighbours, the k-means distance breaking ties; only
   components whose id is the largest among their conflicting neighbours move in a round, so the
   rounds cannot oscillate).
2. **Tree.** A CART tree of depth ``d`` (scikit-learn) learns the target labels, the
   constrained points weighing more; it is completed to a full heap-order tree (a leaf above
   depth ``d`` gets a split whose two children keep its cluster).
3. **Leaf labels.** Coordinate descent over the leaves: each leaf takes the cluster that breaks
   the fewest constraints given the other leaves, until no leaf improves (each sweep is
   vectorised over the constraint pairs).

Several targets and weights are tried; the tree breaking the fewest constraints wins (then the
smaller maximum diameter). Its labels are numbered by first appearance (the symmetry breaking of
the encoding, Eq. 19-20), so :func:`phases` turns it into a full truth assignment of the MaxSAT
variables: the solver's preferred phases, and, when it breaks no constraint, a model in hand.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gnnaudit.clustering.tree_encoding import TreeEncoding
from gnnaudit.graph_ops.constraints import ConstraintGraph
from gnnaudit.graph_ops.distance_classes import DistanceClasses

__all__ = ["GreedyTree", "greedy_tree", "greedy_labels", "n_broken", "warm_values"]


@dataclass(frozen=True)
class GreedyTree:
    """A complete heap-order tree on the scaled features (``feature``, ``threshold`` of the
    ``2^d - 1`` branch nodes, ``leaf_cluster`` of the ``2^d`` leaves; empty for ``depth=0`` or
    no tree), the ``labels`` it gives the training points (first-appearance numbering), the
    ``leaf`` of every point and the number of constraint pairs it ``broken``."""

    depth: int
    feature: np.ndarray
    threshold: np.ndarray
    leaf_cluster: np.ndarray
    labels: np.ndarray
    leaf: np.ndarray
    broken: int


def n_broken(labels: np.ndarray, ml: np.ndarray, cl: np.ndarray) -> int:
    """Number of must-link pairs split plus cannot-link pairs joined by ``labels``."""
    bad = int(np.sum(labels[ml[:, 0]] != labels[ml[:, 1]])) if len(ml) else 0
    return bad + (int(np.sum(labels[cl[:, 0]] == labels[cl[:, 1]])) if len(cl) else 0)


def _first_appearance(labels: np.ndarray, k: int) -> np.ndarray:
    """Map of old cluster -> new cluster numbering clusters by their first point (unused
    clusters after the used ones)."""
    _, first = np.unique(labels, return_index=True)
    used = labels[np.sort(first)]
    rest = np.setdiff1d(np.arange(k), used)
    mapping = np.empty(k, dtype=np.int64)
    mapping[np.r_[used, rest]] = np.arange(k)
    return mapping


def _kmeans(Xs: np.ndarray, k: int, seed: int, n_iter: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """k-means (k-means++ seeding, Lloyd iterations in numpy: no thread pool, so it does not
    stall on a busy machine): labels and the ``(n, k)`` squared distances to the centres.
    ``O(n k F)`` per iteration."""
    from sklearn.cluster import kmeans_plusplus

    centres, _ = kmeans_plusplus(Xs, k, random_state=seed)
    sq = np.einsum("ij,ij->i", Xs, Xs)[:, None]
    for _ in range(n_iter):
        d2 = np.maximum(sq - 2.0 * Xs @ centres.T + np.einsum("ij,ij->i", centres, centres), 0)
        lab = np.argmin(d2, axis=1)
        counts = np.bincount(lab, minlength=k)
        sums = np.zeros_like(centres)
        np.add.at(sums, lab, Xs)
        new = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], centres)
        if np.allclose(new, centres):
            break
        centres = new
    d2 = np.maximum(sq - 2.0 * Xs @ centres.T + np.einsum("ij,ij->i", centres, centres), 0)
    return np.argmin(d2, axis=1).astype(np.int64), d2


def greedy_labels(
    Xs: np.ndarray, graph: ConstraintGraph, k: int, seed: int, max_rounds: int = 100
) -> np.ndarray:
    """Target labels: k-means, must-link components by majority, cannot-link conflicts repaired
    by vectorised recolouring rounds (see the module doc). ``O((n + m) k)`` per round."""
    n = len(Xs)
    if k == 1 or n <= k:
        return np.minimum(np.arange(n), k - 1) if n <= k else np.zeros(n, np.int64)
    lab, d2 = _kmeans(Xs, k, seed)
    comp = graph.components
    n_comp = int(comp.max()) + 1
    votes = np.zeros((n_comp, k))
    np.add.at(votes, (comp, lab), 1.0)
    pref = np.zeros((n_comp, k))
    np.add.at(pref, comp, d2)  # summed squared distance of a component to each centre
    clab = np.argmax(votes, axis=1)
    ex = graph.exclusions
    if len(ex):
        adj = sp.coo_matrix(
            (np.ones(2 * len(ex)), (np.r_[ex[:, 0], ex[:, 1]], np.r_[ex[:, 1], ex[:, 0]])),
            shape=(n_comp, n_comp),
        ).tocsr()
        scale = pref.max() + 1.0
        for _ in range(max_rounds):
            bad = clab[ex[:, 0]] == clab[ex[:, 1]]
            if not bad.any():
                break
            conflicted = np.zeros(n_comp, dtype=bool)
            conflicted[ex[bad].ravel()] = True
            # a conflicted component moves only if no conflicting neighbour has a larger id
            top = np.full(n_comp, -1)
            e = ex[bad]
            np.maximum.at(top, e[:, 0], e[:, 1])
            np.maximum.at(top, e[:, 1], e[:, 0])
            move = conflicted & (top < np.arange(n_comp))
            cost = adj @ np.eye(k)[clab] + pref / scale  # conflicts per label, then distance
            clab = np.where(move, np.argmin(cost, axis=1), clab)
    return np.asarray(clab[comp].astype(np.int64))


def _complete(sk_tree: object, Xs: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Heap-order ``feature`` and ``threshold`` of a full depth-``d`` tree from a fitted
    scikit-learn tree; a node the CART tree leaves unsplit splits a non-constant feature at the
    midpoint of its two smallest distinct values (both children keep the node's cluster)."""
    B = 2**depth - 1
    feature = np.zeros(B, np.int64)
    threshold = np.zeros(B)
    cols = np.flatnonzero(np.ptp(Xs, axis=0) > 0)
    f0 = int(cols[0])
    v = np.unique(Xs[:, f0])
    pad = (f0, (v[0] + v[1]) / 2.0)
    left, right = sk_tree.children_left, sk_tree.children_right  # type: ignore[attr-defined]
    node_of = np.full(B, -1)
    node_of[0] = 0
    for t in range(B):  # one step per branch node
        s = node_of[t]
        if s >= 0 and left[s] >= 0:
            feature[t] = sk_tree.feature[s]  # type: ignore[attr-defined]
            threshold[t] = sk_tree.threshold[s]  # type: ignore[attr-defined]
            if 2 * t + 2 < B:
                node_of[2 * t + 1], node_of[2 * t + 2] = left[s], right[s]
        else:
            feature[t], threshold[t] = pad
            if 2 * t + 2 < B:
                node_of[2 * t + 1] = s  # the left child continues the unsplit node
    return feature, threshold


def _apply(Xs: np.ndarray, feature: np.ndarray, threshold: np.ndarray, depth: int) -> np.ndarray:
    node = np.zeros(len(Xs), np.int64)
    rows = np.arange(len(Xs))
    for _ in range(depth):
        node = 2 * node + 1 + (Xs[rows, feature[node]] > threshold[node])
    return np.asarray(node - (2**depth - 1))


def _relabel_leaves(
    leaf: np.ndarray, leaf_cluster: np.ndarray, ml: np.ndarray, cl: np.ndarray, k: int
) -> np.ndarray:
    """Coordinate descent on the leaf clusters: each leaf in turn takes the cluster breaking
    the fewest constraints (ties keep the current cluster); stops when a sweep changes
    nothing. Each leaf step is vectorised over its constraint pairs."""
    lc = leaf_cluster.copy()
    pairs = [(ml, True), (cl, False)]
    ends = {
        t: [(p[:, 1 - e][leaf[p[:, e]] == t], same) for p, same in pairs for e in (0, 1)]
        for t in np.unique(leaf[np.r_[ml.ravel(), cl.ravel()].astype(np.int64)])
    }
    for _ in range(20):
        changed = False
        for t, lists in ends.items():  # one step per leaf that holds a constrained point
            cost = np.zeros(k)
            for other, same in lists:
                lab_other = lc[leaf[other]]
                inside = leaf[other] == t  # pairs inside the leaf do not depend on its cluster
                cnt = np.bincount(lab_other[~inside], minlength=k)
                cost += (len(lab_other[~inside]) - cnt) if same else cnt
            best = int(np.argmin(cost))
            if cost[best] < cost[lc[t]]:
                lc[t], changed = best, True
        if not changed:
            break
    return lc


def _refine(
    Xs: np.ndarray, feature: np.ndarray, threshold: np.ndarray, target: np.ndarray,
    graph: ConstraintGraph, k: int, depth: int, until: float, n_thresholds: int = 32,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Constraint-aware split search: each branch node in turn takes the (feature, threshold)
    that breaks the fewest constraints when every leaf takes the majority target label of
    the constrained points reaching it; thresholds are ``n_thresholds`` evenly spaced
    midpoints between consecutive distinct values of each feature (so the smallest value goes
    left and the largest right, as Eq. 14-15 ask). Only the constrained points are routed:
    ``O(B F n_thresholds (d m + L k))`` per sweep; stops at ``until`` (perf_counter)."""
    ml, cl = graph.must_link, graph.cannot_link
    pts, local = np.unique(np.r_[ml.ravel(), cl.ravel()].astype(np.int64), return_inverse=True)
    if not len(pts):
        return feature, threshold
    local = local.reshape(-1)
    mlc, clc = local[: ml.size].reshape(-1, 2), local[ml.size :].reshape(-1, 2)
    Xc, tc = Xs[pts], target[pts]
    L = 2**depth

    def score(feat: np.ndarray, thr: np.ndarray) -> int:
        leaf = _apply(Xc, feat, thr, depth)
        votes = np.zeros((L, k))
        np.add.at(votes, (leaf, tc), 1.0)
        return n_broken(np.argmax(votes, axis=1)[leaf], mlc, clc)

    grids = []
    for f in range(Xs.shape[1]):  # one step per feature: its candidate thresholds
        v = np.unique(Xs[:, f])
        mids = (v[:-1] + v[1:]) / 2.0
        take = np.unique(np.linspace(0, len(mids) - 1, min(n_thresholds, len(mids))).astype(int))
        grids.append(mids[take] if len(mids) else mids)
    feature, threshold = feature.copy(), threshold.copy()
    best = score(feature, threshold)
    for _ in range(3):  # sweeps
        improved = False
        for t in range(len(feature)):  # one step per branch node
            for f, grid in enumerate(grids):
                if time.perf_counter() > until or best == 0:
                    return feature, threshold
                for thr in grid:  # one step per candidate threshold (at most n_thresholds)
                    old = feature[t], threshold[t]
                    feature[t], threshold[t] = f, thr
                    val = score(feature, threshold)
                    if val < best:
                        best, improved = val, True
                    else:
                        feature[t], threshold[t] = old
        if not improved:
            break
    return feature, threshold


def _finish(
    Xs: np.ndarray, feature: np.ndarray, threshold: np.ndarray, target: np.ndarray,
    weight: np.ndarray, graph: ConstraintGraph, k: int, k_min: int, depth: int,
) -> GreedyTree | None:  # fmt: skip
    """The greedy tree of a split pattern: leaf clusters by weighted target votes, improved by
    :func:`_relabel_leaves`, at least ``k_min`` clusters opened (else ``None``), clusters
    numbered by first appearance, empty leaves in cluster 0."""
    ml, cl = graph.must_link, graph.cannot_link
    leaf = _apply(Xs, feature, threshold, depth)
    L = 2**depth
    votes = np.zeros((L, k))
    np.add.at(votes, (leaf, target), weight)
    lc = _relabel_leaves(leaf, np.argmax(votes, axis=1), ml, cl, k)
    labels = lc[leaf]
    if len(np.unique(labels)) < k_min:  # open clusters on the largest leaves of used clusters
        size = np.bincount(leaf, minlength=L)
        for t in np.argsort(-size, kind="stable"):
            if len(np.unique(lc[leaf])) >= k_min or size[t] == 0:
                break
            if np.sum(lc[leaf] == lc[t]) > size[t]:  # its cluster lives on elsewhere
                lc[t] = np.setdiff1d(np.arange(k), lc[leaf])[0]
        labels = lc[leaf]
        if len(np.unique(labels)) < k_min:
            return None
    mapping = _first_appearance(labels, k)
    lc = mapping[lc]
    lc[np.bincount(leaf, minlength=L) == 0] = 0  # empty leaves: cluster 0 (leaf symmetry)
    labels = lc[leaf]
    return GreedyTree(depth, feature, threshold, lc, labels, leaf, n_broken(labels, ml, cl))


def _median_tree(Xs: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """A split pattern that keeps leaves apart: each node splits the feature with the widest
    spread among its points at the midpoint nearest their median distinct value (a node with
    one distinct row gets the padding split). The fallback when no CART candidate can open
    ``min_clusters`` clusters."""
    B = 2**depth - 1
    feature = np.zeros(B, np.int64)
    threshold = np.zeros(B)
    f0 = int(np.argmax(np.ptp(Xs, axis=0)))
    v0 = np.unique(Xs[:, f0])
    node = np.zeros(len(Xs), np.int64)
    for t in range(B):  # one step per branch node
        pts = Xs[node == t]
        spread = np.ptp(pts, axis=0) if len(pts) else np.zeros(Xs.shape[1])
        if spread.max(initial=0.0) > 0:
            f = int(np.argmax(spread))
            v = np.unique(pts[:, f])
            i = max(0, (len(v) - 1) // 2)
            feature[t], threshold[t] = f, (v[i] + v[i + 1]) / 2.0
        else:
            feature[t], threshold[t] = f0, (v0[0] + v0[1]) / 2.0
        mine = node == t
        node[mine] = 2 * t + 1 + (Xs[mine, feature[t]] > threshold[t])
    return feature, threshold


def _cart(Xs: np.ndarray, target: np.ndarray, weight: np.ndarray, depth: int,
          seed: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """A weighted CART tree of depth ``depth`` on the target labels, completed to heap order."""
    from sklearn.tree import DecisionTreeClassifier

    cart = DecisionTreeClassifier(max_depth=depth, random_state=seed)
    cart.fit(Xs, target, sample_weight=weight)
    return _complete(cart.tree_, Xs, depth)


def greedy_tree(
    Xs: np.ndarray,
    graph: ConstraintGraph,
    *,
    n_clusters: int,
    min_clusters: int,
    depth: int,
    tree: bool = True,
    seed: int = 0,
    time_budget: float = 2.0,
) -> GreedyTree | None:
    """The greedy tree breaking the fewest constraints, or ``None`` when the data cannot hold
    ``min_clusters`` clusters in a tree (no feature takes two values, or the candidates cannot
    open ``min_clusters`` clusters). With ``tree=False`` the repaired target labels themselves
    (no tree).

    Candidates: 2 k-means seeds x CART weights 1 and 10 on the constrained points; their
    splits are then improved by :func:`_refine`, fewest broken first, until ``time_budget``
    seconds have passed since the start (the first candidate always runs). Cost: a few k-means and CART fits,
    ``O(n F log n)`` each, the leaf descent (``O(m)`` per leaf step) and the split search."""
    t0 = time.perf_counter()
    k, n = n_clusters, len(Xs)
    ml, cl = graph.must_link, graph.cannot_link
    if tree and not (np.ptp(Xs, axis=0) > 0).any():
        return None
    best: GreedyTree | None = None
    fits: list[tuple[GreedyTree, np.ndarray, np.ndarray]] = []
    constrained = np.zeros(n, bool)
    constrained[np.r_[ml.ravel(), cl.ravel()].astype(np.int64)] = True
    for s in range(2):  # k-means seeds
        if best is not None and (best.broken == 0 or time.perf_counter() - t0 > time_budget):
            break
        target = greedy_labels(Xs, graph, k, seed + s)
        for w in (1.0, 10.0) if tree else ():
            weight = np.where(constrained, w, 1.0)
            feature, threshold = _cart(Xs, target, weight, depth, seed)
            cand = _finish(Xs, feature, threshold, target, weight, graph, k, min_clusters, depth)
            if cand is not None:
                fits.append((cand, target, weight))
                best = cand if best is None or cand.broken < best.broken else best
        if not tree:
            labels = _first_appearance(target, k)[target]
            if len(np.unique(labels)) >= min_clusters:
                flat = GreedyTree(0, np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64),
                                  labels, np.zeros(n, np.int64), n_broken(labels, ml, cl))  # fmt: skip
                best = flat if best is None or flat.broken < best.broken else best
    if tree and best is None:  # no CART tree opened min_clusters clusters
        target = greedy_labels(Xs, graph, k, seed)
        feature, threshold = _median_tree(Xs, depth)
        weight = np.ones(n)
        best = _finish(Xs, feature, threshold, target, weight, graph, k, min_clusters, depth)
        if best is not None:
            fits.append((best, target, weight))
    if best is None:
        return None
    return _refined(Xs, graph, fits, best, (k, min_clusters, depth), until=t0 + time_budget)


def _refined(
    Xs: np.ndarray,
    graph: ConstraintGraph,
    fits: list[tuple[GreedyTree, np.ndarray, np.ndarray]],
    best: GreedyTree,
    shape: tuple[int, int, int],
    until: float,
) -> GreedyTree:
    """The best of ``best`` and the candidates ``fits`` improved by :func:`_refine`, fewest
    broken first, until none is broken or the clock passes ``until``; ``shape`` is
    ``(n_clusters, min_clusters, depth)``."""
    k, min_clusters, depth = shape
    for start, target, weight in sorted(fits, key=lambda f: f[0].broken):  # fewest broken first
        if best.broken == 0 or time.perf_counter() > until:
            break
        feature, threshold = _refine(Xs, start.feature, start.threshold, target, graph, k, depth,
                                     until=until)  # fmt: skip
        cand = _finish(Xs, feature, threshold, target, weight, graph, k, min_clusters, depth)
        if cand is not None and cand.broken < best.broken:
            best = cand
    return best


def warm_values(enc: TreeEncoding, warm: GreedyTree, Xs: np.ndarray,
                classes: DistanceClasses) -> np.ndarray:  # fmt: skip
    """The truth assignment (index 0 unused) that the greedy tree gives every variable of
    ``enc``: the tree (``a``, ``s``, ``z``, ``g``), the labels (``x`` and the prefix-or ``u``),
    the class variables from the tree's diameter and split (:math:`b^-_w` for every class up to
    the largest one inside a cluster, :math:`b^+_w` for every class below the smallest one
    between clusters) and the soft-constraint selectors (true where the pair is honoured). A
    model of the hard clauses when the greedy tree breaks no hard constraint; in any case the
    SAT oracle's preferred phases."""
    vals = np.zeros(enc.n_vars + 1, dtype=bool)
    lab = warm.labels
    k1 = enc.x.shape[1]
    cuts = np.arange(k1)
    if enc.a.size:
        B = enc.a.shape[0]
        vals[enc.a[np.arange(B), warm.feature]] = True
        vals[enc.s] = Xs[:, warm.feature] <= warm.threshold[None, :]
        vals[enc.z[np.arange(len(lab)), warm.leaf]] = True
        vals[enc.g] = warm.leaf_cluster[:, None] > cuts[None, :]
    xv = lab[:, None] > cuts[None, :]
    vals[enc.x] = xv
    if enc.u.size:  # u[p, c] = some point before p is in cluster >= c + 1
        before = np.zeros_like(xv[:, :-1])
        before[1:] = np.logical_or.accumulate(xv[:-1, :-1], axis=0)
        vals[enc.u[1:]] = before[1:]
    same = lab[classes.pairs[:, 0]] == lab[classes.pairs[:, 1]]
    lam = int(classes.class_of[same].max()) + 1 if same.any() else 0
    vals[enc.b_minus[:lam]] = True
    if len(enc.b_plus):
        low = int(classes.class_of[~same].min()) if (~same).any() else len(enc.b_plus)
        vals[enc.b_plus[:low]] = True
    if len(enc.sel_ml):
        vals[enc.sel_ml] = lab[enc.soft_ml[:, 0]] == lab[enc.soft_ml[:, 1]]
    if len(enc.sel_cl):
        vals[enc.sel_cl] = lab[enc.soft_cl[:, 0]] != lab[enc.soft_cl[:, 1]]
    return vals
