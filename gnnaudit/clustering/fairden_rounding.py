"""Fairness-aware rounding of FairDen's relaxed embedding (an extension of the paper's Alg. 1).

Why. FairDen (Eq. 10-12) relaxes the cluster indicator ``H`` and keeps the fairness constraint
:math:`F^\\top H = 0`. For a true indicator matrix, :math:`F^\\top H = 0` says exactly that every
cluster has the data set's group proportions (balance 1, paper Sec. 2.3); the relaxation keeps
the constraint, but k-means on the rows of the relaxed ``H`` (Alg. 1 line 10) does not, and can
return group-pure clusters (e.g. three moons at ``k = 3``: one moon split along the sensitive
attribute, balance 0.33).

What. :func:`balanced_kmeans_rounding` rounds ``H`` to the nearest (k-means objective) indicator
matrix that satisfies the discrete constraint as closely as integers allow:

.. math::

    \\min_{\\ell, \\mu} \\sum_i \\lVert h_i - \\mu_{\\ell(i)} \\rVert^2
    \\quad \\text{s.t.} \\quad |\\{i : \\ell(i) = c,\\ s(i) = g\\}| = q_{cg}
    \\ \\ \\forall c, g,

with quotas :math:`q_{cg} \\in \\{\\lfloor n_c N_g / N \\rfloor, \\lceil n_c N_g / N \\rceil\\}`
(:func:`proportional_quotas`; row sums the cluster sizes ``n_c``, column sums the group sizes
``N_g``). It alternates, like Lloyd's algorithm, an exact assignment step for fixed centres
(:func:`quota_assignment`) and the centre update; each step cannot increase the objective, so
the objective decreases monotonically and the loop stops when the labels repeat.

The assignment step decouples over the groups: for group ``g`` it is a transportation problem
(``N_g`` unit sources, ``k`` sinks of capacities :math:`q_{\\cdot g}`). It is solved exactly by
cycle cancelling on the ``k``-node *exchange graph*: arc :math:`c \\to c'` costs
:math:`w_{cc'} = \\min_{i \\in c} (C_{ic'} - C_{ic})`. A feasible assignment is optimal iff this
graph has no negative cycle (a negative cycle of the point-level residual network projects to a
negative closed walk of the exchange graph, which contains a negative simple cycle; a negative
simple cycle moves distinct points). Each cancellation moves, along the cycle, the ``t`` best
points of every arc for the largest ``t`` whose marginal gain is still negative, and strictly
lowers the cost, so the loop terminates. Time per cancellation ``O(N_g k + N_g log N_g)``;
memory ``O(N_g k)``.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy.optimize import linprog

from gnnaudit.errors import InfeasibleError, InvalidInputError

__all__ = [
    "proportional_quotas",
    "quota_assignment",
    "solve_quota_assignment",
    "balanced_kmeans_rounding",
    "BalancedRounding",
]

logger = logging.getLogger(__name__)

#: cap on the cycle cancellations of one transportation problem (never reached in practice;
#: the assignment stays feasible and a warning is logged when it is)
MAX_CANCELLATIONS = 100_000


def proportional_quotas(sizes: np.ndarray, group_sizes: np.ndarray) -> np.ndarray:
    """Integer ``(k, G)`` quotas with row sums ``sizes``, column sums ``group_sizes`` and
    every entry the floor or the ceiling of :math:`n_c N_g / N` (controlled rounding).

    The fractional parts are distributed to maximise the total rounded-up remainder: a
    ``k x G`` transportation problem whose constraint matrix is totally unimodular, so the
    simplex vertex HiGHS returns is integral.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    group_sizes = np.asarray(group_sizes, dtype=np.int64)
    total = int(sizes.sum())
    if total != int(group_sizes.sum()) or (sizes < 0).any() or (group_sizes < 0).any():
        raise InvalidInputError(
            f"sizes (sum {total}) and group_sizes (sum {int(group_sizes.sum())}) must be "
            "non-negative with equal sums"
        )
    if total == 0:
        return np.zeros((sizes.size, group_sizes.size), dtype=np.int64)
    # exact rational arithmetic in integers: E = sizes * group_sizes / total
    prod = sizes[:, None] * group_sizes[None, :]
    base = prod // total
    frac = prod - base * total  # numerator of the fractional part
    row_def = sizes - base.sum(axis=1)
    col_def = group_sizes - base.sum(axis=0)
    if row_def.sum() == 0:
        return np.asarray(base)
    k, g = base.shape
    ub = (frac > 0).astype(float).ravel()
    A_eq = np.zeros((k + g, k * g))
    for c in range(k):  # tiny k x G table
        A_eq[c, c * g : (c + 1) * g] = 1.0
    for j in range(g):
        A_eq[k + j, j::g] = 1.0
    res = linprog(
        -frac.ravel().astype(float),
        A_eq=A_eq,
        b_eq=np.concatenate([row_def, col_def]).astype(float),
        bounds=list(zip(np.zeros(k * g), ub, strict=True)),
        method="highs-ds",
    )
    if res.status != 0:  # cannot happen: a controlled rounding always exists
        raise InfeasibleError(f"no integer quota table for sizes {sizes} and {group_sizes}")
    extra = np.rint(res.x).astype(np.int64).reshape(k, g)
    return np.asarray(base + extra)


def _exchange_weights(C: np.ndarray, lab: np.ndarray, k: int) -> np.ndarray:
    """``W[c, c'] = min_{i in c} C[i, c'] - C[i, c]`` (``inf`` on the diagonal and for empty
    clusters)."""
    D = C - C[np.arange(lab.size), lab][:, None]
    W = np.full((k, k), np.inf)
    for c in range(k):  # loop over clusters (few)
        rows = D[lab == c]
        if rows.shape[0]:
            W[c] = rows.min(axis=0)
    np.fill_diagonal(W, np.inf)
    return W


def _pred_cycle(pred: np.ndarray, W: np.ndarray) -> tuple[float, list[int]]:
    """The most negative cycle of the predecessor graph ``v <- pred[v]`` (``inf`` if none)."""
    k = pred.size
    best: tuple[float, list[int]] = (np.inf, [])
    state = np.zeros(k, dtype=np.int64)  # 0 new, 1 on the current walk, 2 done
    for s in range(k):  # k nodes: O(k) walks of O(k) steps
        walk = []
        v = s
        while v >= 0 and state[v] == 0:
            state[v] = 1
            walk.append(v)
            v = int(pred[v])
        if v >= 0 and state[v] == 1:  # closed a new cycle
            cyc = walk[walk.index(v) :][::-1]  # pred[a] = b means arc b -> a
            w = sum(W[cyc[j], cyc[(j + 1) % len(cyc)]] for j in range(len(cyc)))
            if w < best[0]:
                best = (float(w), cyc)
        for u in walk:
            state[u] = 2
    return best


def _negative_cycle(W: np.ndarray, tol: float) -> tuple[list[int] | None, np.ndarray]:
    """A simple cycle of ``W`` of weight ``< -tol`` as a node list (arcs ``cycle[j] ->
    cycle[j + 1]``, wrapping), or ``None`` when there is none, and the distances. Without a
    negative cycle the distances are dual prices: every point's cluster ``c`` minimises
    ``C[i, c] - dist[c]`` (since ``C[i, c'] - C[i, c] >= W[c, c'] >= dist[c'] - dist[c]``).

    Bellman-Ford from a virtual source joined to every node: while distances still improve,
    the predecessor graph is inspected; a cycle there is negative, and one appears when a
    negative cycle exists (otherwise the distances would be weights of acyclic predecessor
    paths, bounded below). ``k`` nodes: ``O(k^2)`` per round.
    """
    k = W.shape[0]
    dist = np.zeros(k)
    pred = np.full(k, -1)
    finite = np.isfinite(W)
    Wf = np.where(finite, W, 0.0)
    for _ in range(50 * k + 50):
        cand = dist[:, None] + Wf
        cand[~finite] = np.inf
        best_from = cand.argmin(axis=0)
        best = cand[best_from, np.arange(k)]
        upd = best < dist - tol
        if not upd.any():
            return None, dist
        dist[upd] = best[upd]
        pred[upd] = best_from[upd]
        weight, cycle = _pred_cycle(pred, W)
        if weight < -tol:
            return cycle, dist
    logger.warning("negative-cycle search did not settle; assignment may be suboptimal")
    return None, dist


def _repair(C: np.ndarray, lab: np.ndarray, quotas: np.ndarray) -> np.ndarray:
    """Make ``lab`` meet ``quotas``: repeatedly move the cheapest points from an over-full to
    an under-full cluster (the pair with the cheapest move), ``<= 2k`` moves of blocks."""
    k = quotas.size
    lab = lab.copy()
    while True:
        excess = np.bincount(lab, minlength=k) - quotas
        over, under = np.flatnonzero(excess > 0), np.flatnonzero(excess < 0)
        if over.size == 0:
            return lab
        best: tuple[float, int, int] = (float(np.inf), -1, -1)
        for c in over:  # few clusters
            members = lab == c
            d = (C[members][:, under] - C[members, c][:, None]).min(axis=0)
            j = int(d.argmin())
            if d[j] < best[0]:
                best = (float(d[j]), int(c), int(under[j]))
        _, src, dst = best
        t = int(min(excess[src], -excess[dst]))
        idx = np.flatnonzero(lab == src)
        delta = C[idx, dst] - C[idx, src]
        lab[idx[np.argsort(delta, kind="stable")[:t]]] = dst


def _smallest_sorted(d: np.ndarray, bound: float, cap: int) -> np.ndarray:
    """Indices of the entries of ``d`` below ``bound`` (at most ``cap``), in ascending order of
    ``d`` (ties by index): a partial sort, ``O(len(d) + t log t)``."""
    cand = np.flatnonzero(d < bound)
    if cand.size > cap:
        cand = cand[np.argpartition(d[cand], cap - 1)[:cap]]
    return cand[np.lexsort((cand, d[cand]))]


def quota_assignment(
    C: np.ndarray,
    quotas: np.ndarray,
    init: np.ndarray | None = None,
    prices: np.ndarray | None = None,
) -> np.ndarray:
    """Exact minimum-cost assignment of ``n`` points to ``k`` clusters with exact sizes.

    Args:
        C: ``(n, k)`` finite costs.
        quotas: ``(k,)`` non-negative integers summing to ``n``: cluster ``c`` receives exactly
            ``quotas[c]`` points.
        init: optional start labels (repaired to meet the quotas).
        prices: optional ``(k,)`` dual prices of a similar problem: the start is then
            :math:`\\arg\\min_c C_{ic} - p_c` (repaired), overriding ``init``.

    Returns ``(n,)`` labels minimising :math:`\\sum_i C_{i,\\ell(i)}` subject to the quotas
    (cycle cancelling on the exchange graph, see the module docstring).
    """
    return solve_quota_assignment(C, quotas, init, prices)[0]


def solve_quota_assignment(
    C: np.ndarray,
    quotas: np.ndarray,
    init: np.ndarray | None = None,
    prices: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`quota_assignment` returning ``(labels, prices)``; the prices certify optimality
    (each point's cluster minimises ``C[i, c] - prices[c]``) and warm-start a similar call."""
    C = np.asarray(C, dtype=np.float64)
    quotas = np.asarray(quotas, dtype=np.int64)
    n, k = C.shape
    if quotas.shape != (k,) or (quotas < 0).any() or int(quotas.sum()) != n:
        raise InvalidInputError(
            f"quotas must be {k} non-negative integers summing to n={n}, got {quotas.tolist()}"
        )
    if not np.isfinite(C).all():
        raise InvalidInputError("the assignment costs C must be finite")
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(k)
    if prices is not None:
        lab = (C - np.asarray(prices, dtype=np.float64)[None, :]).argmin(axis=1)
    elif init is not None:
        lab = np.asarray(init, dtype=np.int64).copy()
    else:
        lab = C.argmin(axis=1)
    lab = _repair(C, lab, quotas)
    scale = float(np.abs(C).max()) or 1.0
    tol = 1e-12 * scale * max(1, k)
    for _ in range(MAX_CANCELLATIONS):
        W = _exchange_weights(C, lab, k)
        cycle, dist = _negative_cycle(W, tol)
        if cycle is None:
            return lab, dist
        L = len(cycle)
        arcs = [(cycle[j], cycle[(j + 1) % L]) for j in range(L)]
        w = np.array([W[a, b] for a, b in arcs])
        members = [np.flatnonzero(lab == a) for a, _ in arcs]
        cap = min(m.size for m in members)
        deltas, chosen = [], []
        for j, (a, b) in enumerate(arcs):  # cycle length <= k
            d = C[members[j], b] - C[members[j], a]
            # a point of rank s on arc j helps only if d + (the other arcs' minima) < 0
            o = _smallest_sorted(d, -(w.sum() - w[j]) + tol, cap)
            deltas.append(d[o])
            chosen.append(members[j][o])
        t_max = min(x.size for x in deltas)
        marginal = np.sum([x[:t_max] for x in deltas], axis=0)  # nondecreasing in the rank
        t = max(1, int(np.searchsorted(marginal, -tol, side="left")))
        for j, (_, b) in enumerate(arcs):
            lab[chosen[j][:t]] = b
    logger.warning(
        "quota_assignment: stopped after %d cycle cancellations (feasible, maybe not optimal)",
        MAX_CANCELLATIONS,
    )
    return lab, _negative_cycle(_exchange_weights(C, lab, k), tol)[1]


class BalancedRounding:
    """Result of :func:`balanced_kmeans_rounding`: ``labels`` (n,), ``centers`` (k, d),
    ``inertia`` (k-means objective) and the ``quotas`` (k, G) it met, ``n_iter`` Lloyd steps."""

    def __init__(
        self,
        labels: np.ndarray,
        centers: np.ndarray,
        inertia: float,
        quotas: np.ndarray,
        n_iter: int,
    ) -> None:
        self.labels, self.centers, self.inertia = labels, centers, inertia
        self.quotas, self.n_iter = quotas, n_iter


def _centers(H: np.ndarray, lab: np.ndarray, k: int) -> np.ndarray:
    sums = np.zeros((k, H.shape[1]))
    np.add.at(sums, lab, H)
    counts = np.bincount(lab, minlength=k)
    return sums / np.maximum(counts, 1)[:, None]


def _sq_dist(H: np.ndarray, centers: np.ndarray) -> np.ndarray:
    cross = 2.0 * H @ centers.T
    return np.asarray((H * H).sum(axis=1)[:, None] - cross + (centers * centers).sum(axis=1)[None])


def balanced_kmeans_rounding(
    H: np.ndarray,
    init_labels: np.ndarray,
    groups: np.ndarray,
    *,
    max_iter: int = 50,
    tol: float = 1e-4,
) -> BalancedRounding:
    """Round the rows of ``H`` to clusters with the data's group proportions (module doc).

    Args:
        H: ``(n, d)`` embedding rows to cluster.
        init_labels: ``(n,)`` start partition ``0..k-1`` (FairDen: the k-means labels); it
            fixes the cluster sizes ``n_c`` and the first centres.
        groups: ``(n,)`` combined sensitive group codes.
        max_iter: Lloyd steps at most.
        tol: stop when a step lowers the objective by less than ``tol`` times its value (as
            scikit-learn's k-means stops on a small centre shift), or the labels repeat.

    Every cluster ``c`` receives exactly ``q_{cg}`` points of every group ``g``
    (:func:`proportional_quotas`), so each cluster's balance is as close to 1 as integers
    allow. Each assignment is warm-started from the previous step's dual prices. Time
    ``O(max_iter * (n k d + cancellations * n k))``, memory ``O(n (k + d))``.
    """
    H = np.asarray(H, dtype=np.float64)
    lab = np.asarray(init_labels, dtype=np.int64)
    groups = np.unique(np.asarray(groups), return_inverse=True)[1].reshape(-1)
    n = H.shape[0]
    if lab.shape != (n,) or groups.shape != (n,) or (lab < 0).any():
        raise InvalidInputError(
            f"init_labels and groups must be ({n},) with labels >= 0, got {lab.shape} and "
            f"{groups.shape}"
        )
    k = int(lab.max()) + 1 if n else 0
    n_groups = int(groups.max()) + 1 if n else 0
    sizes = np.bincount(lab, minlength=k)
    quotas = proportional_quotas(sizes, np.bincount(groups, minlength=n_groups))
    members = [np.flatnonzero(groups == g) for g in range(n_groups)]
    prices: list[np.ndarray | None] = [None] * n_groups
    centers = _centers(H, lab, k)
    previous = np.inf
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 (n_iter is reported)
        D = _sq_dist(H, centers)
        new = np.empty_like(lab)
        for g, idx in enumerate(members):  # loop over sensitive groups (few)
            new[idx], prices[g] = solve_quota_assignment(
                D[idx], quotas[:, g], init=lab[idx], prices=prices[g]
            )
        objective = float(np.maximum(D[np.arange(n), new], 0.0).sum())
        changed = not np.array_equal(new, lab)
        lab = new
        centers = _centers(H, lab, k)
        if not changed or previous - objective <= tol * objective:
            break
        previous = objective
    inertia = float(np.maximum(_sq_dist(H, centers)[np.arange(n), lab], 0.0).sum())
    return BalancedRounding(lab, centers, inertia, quotas, n_iter)
