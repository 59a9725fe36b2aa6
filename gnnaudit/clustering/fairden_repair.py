"""Balance repair of FairDen's clustering along density-compatible moves (issues 29, 38).

Why. The paper's rounding (k-means on the relaxed embedding, Alg. 1) follows the density
structure but may miss balance; re-rounding to exact group quotas
(:func:`~gnnaudit.clustering.fairden_rounding.balanced_kmeans_rounding`) reaches balance 1 but
can cut straight through dense regions (DCSI 0.31 -> 0.003 on compas). The repair starts from the
paper's partition and moves only as many points as the balance target ``min_balance`` needs,
choosing the moves that cost the least dc-distance.

Path. With :math:`N^0` the (cluster x group) counts of the paper's partition and :math:`Q` the
proportional quotas with the same cluster and group sizes
(:func:`~gnnaudit.clustering.fairden_rounding.proportional_quotas`), the repair path is

.. math::

    T(t) = (1 - t) N^0 + t Q, \\qquad t \\in [0, 1],

rounded to integers with the same margins (:func:`round_table`). Cluster sizes stay fixed, and
every cluster's group shares move linearly towards the data's shares, so each cluster's
balance (Eq. 6) rises with ``t``. A step ``t`` (the grid, and the smallest ``t`` whose balance
reaches ``min_balance``: bisection on the counts, :func:`smallest_step`) gives the cheapest
relabelling with those counts: per sensitive group, an exact quota assignment
(:func:`~gnnaudit.clustering.fairden_rounding.quota_assignment`) with cost

.. math::

    C_{ic} = [c \\ne a_i] \\Big(\\varepsilon + \\frac{\\big(D_{ic} - D_{i a_i}\\big)^+}
    {\\max d_{dc}} + \\lambda \\frac{\\lVert h_i - \\mu_c \\rVert^2}
    {\\max_{j, c'} \\lVert h_j - \\mu_{c'} \\rVert^2}\\Big),

where :math:`a_i` is the paper's cluster of point ``i``, :math:`D_{ic}` its dc-distance to the
nearest other member of cluster ``c`` (:func:`cluster_dc_distances`), ``h`` / ``mu`` the
embedding rows and the paper clusters' centres (a tie-break, :math:`\\lambda = 10^{-3}`) and
:math:`\\varepsilon = 10^{-6}` a price on every move: staying is free, so at :math:`T = N^0`
nothing moves, and the points that move first are those hanging loosely on their own cluster
and close (in dc-distance) to the one they join.

Three paths. ``"exchange"`` keeps the cluster sizes (``Q`` as above); ``"min_moves"`` lets
them change and takes the proportional table that moves the fewest points
(:func:`min_move_quotas`), so a cluster short of a group mostly *receives* points instead of
exchanging them. Which is kinder to the density structure depends on the data: moving many
points of a compact cluster into a wide one makes them core points of their new cluster
inside the compact one (the separation, hence DCSI, collapses), while the opposite direction
spreads them thinly. ``"noise"`` (issue 38) moves no point across a density gap: the surplus
points of each cluster's over-represented groups become noise (-1, the paper's label for points
in no cluster). Its end ``P`` (:func:`noise_quotas`) keeps in every cluster the largest
sub-table with the data's group shares; ``T(t) = (1 - t) N^0 + t P`` (rounded entry by entry)
drops only surplus, first the points closest in dc-distance to another cluster (relative to
their own), then the loosest on their own. Its one candidate is the smallest step whose
balance reaches ``min_balance``, when that drops at most ``max_noise`` of the points (no
point is dropped for a target it cannot reach); it never empties a cluster below ``minPts``. Where balance and density truly conflict (separated
clusters with very different group shares: reaching ``min_balance`` needs many points inside
foreign clusters, or many dropped) no path keeps the DCSI; the candidates show the trade-off.

:meth:`Repairer.steps` gives each moving path's steps on a grid plus its smallest step reaching
the balance target (:func:`smallest_step`), and the noise path's one step;
:func:`path_labels` the labels of them all.
:mod:`gnnaudit.clustering.fairden_candidates` scores them and picks one. Memory ``O(n k)``
(costs and dc-distances to the clusters); time per step: the quota assignments (moving paths)
or a partial order (noise path).
"""

# whole (~470 lines): the repair paths (moves, exchange, noise) share one cost model and step
# record; cut apart, each would import the other's internals.

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from gnnaudit.clustering.fairden_rounding import proportional_quotas, quota_assignment
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops.dc_tree import DCTree

__all__ = [
    "PATHS",
    "MOVE_PATHS",
    "min_move_quotas",
    "noise_quotas",
    "cluster_dc_distances",
    "cluster_balances",
    "counts_balance",
    "round_table",
    "smallest_step",
    "RepairResult",
    "Repairer",
    "repair_problem",
    "path_labels",
    "noise_after",
    "pareto_mask",
]

logger = logging.getLogger(__name__)

#: price of any move (staying is free): the repair changes nothing it does not need to
MOVE_PRICE = 1e-6
#: weight of the embedding distance, a tie-break between moves of equal dc cost
EMBEDDING_WEIGHT = 1e-3
#: the paths that move points: ``"exchange"`` keeps the cluster sizes
#: (:func:`proportional_quotas`), ``"min_moves"`` lets them change to move the fewest points
#: (:func:`min_move_quotas`)
MOVE_PATHS = ("exchange", "min_moves")
#: every repair path: the moving ones and ``"noise"``, which drops surplus points instead
#: (:func:`noise_quotas`)
PATHS = (*MOVE_PATHS, "noise")


def cluster_dc_distances(tree: DCTree, labels: np.ndarray, k: int) -> np.ndarray:
    """``(n, k)``: dc-distance of every point to the nearest *other* member of every cluster
    (``inf`` where a cluster has no other member; labels ``< 0`` belong to no cluster).

    In the dc-tree's leaf order every subtree is a contiguous range, so the dc-distance to a
    set is the smaller of the distances to its nearest members on the left and on the right
    (the range maximum only grows with the range). One ``searchsorted`` per cluster:
    ``O(n k log n)`` time, ``O(n k)`` memory.
    """
    n = labels.size
    pos = np.empty(n, dtype=np.int64)
    pos[tree.order_] = np.arange(n)
    out = np.full((n, k), np.inf)
    ids = np.arange(n)
    for c in range(k):  # loop over clusters (few)
        members = np.flatnonzero(labels == c)
        if members.size == 0:
            continue
        mpos = np.sort(pos[members])
        left = np.searchsorted(mpos, pos, side="left") - 1
        right = np.searchsorted(mpos, pos, side="right")
        for side in (left, right):
            ok = (side >= 0) & (side < mpos.size)
            if ok.any():
                other = tree.order_[mpos[side[ok]]]
                np.minimum.at(out[:, c], ids[ok], tree.distance(ids[ok], other))
    return out


def cluster_balances(counts: np.ndarray) -> np.ndarray:
    """Eq. 6's balance of every non-empty cluster (row) of a ``(k, G)`` count table, against
    the table's own group shares (groups absent from every cluster ignored)."""
    counts = np.asarray(counts, dtype=np.float64)
    counts = counts[counts.sum(axis=1) > 0][:, counts.sum(axis=0) > 0]
    if counts.size == 0:
        return np.zeros(0)
    r = counts.sum(axis=0) / counts.sum()
    rc = counts / counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.minimum(np.where(rc > 0, r / rc, 0.0), rc / r)
    return np.asarray(ratio.min(axis=1))


def counts_balance(counts: np.ndarray) -> float:
    """Mean over the clusters (rows) of Eq. 6's balance of a ``(k, G)`` count table
    (:func:`cluster_balances`), as :func:`~gnnaudit.clustering.metrics.balance` computes it on
    the non-noise points (0 for an empty table)."""
    per = cluster_balances(counts)
    return float(per.mean()) if per.size else 0.0


def round_table(T: np.ndarray) -> np.ndarray:
    """Integer table with the (integer) column sums of ``T`` and every entry the floor or the
    ceiling of ``T``. When the row sums of ``T`` are integers too they are kept (controlled
    rounding: a transportation LP with a totally unimodular matrix, so HiGHS' vertex is
    integral); otherwise every column is rounded on its own by largest remainders (rows
    free)."""
    T = np.asarray(T, dtype=np.float64)
    row_sums = T.sum(axis=1)
    cols = np.rint(T.sum(axis=0)).astype(np.int64)
    base = np.floor(T + 1e-9).astype(np.int64)
    frac = np.clip(T - base, 0.0, 1.0)
    col_def = cols - base.sum(axis=0)
    if not np.allclose(row_sums, np.rint(row_sums), rtol=0, atol=1e-6):
        order = np.argsort(-frac, axis=0, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(T.shape[0])[:, None], axis=0)
        return np.asarray(base + (rank < col_def[None, :]).astype(np.int64))
    rows = np.rint(row_sums).astype(np.int64)
    row_def = rows - base.sum(axis=1)
    if not row_def.any() and not col_def.any():
        return base
    k, g = T.shape
    A_eq = np.zeros((k + g, k * g))
    for c in range(k):  # tiny k x G table
        A_eq[c, c * g : (c + 1) * g] = 1.0
    for j in range(g):
        A_eq[k + j, j::g] = 1.0
    res = linprog(
        -frac.ravel(),
        A_eq=A_eq,
        b_eq=np.concatenate([row_def, col_def]).astype(float),
        bounds=list(zip(np.zeros(k * g), (frac > 1e-12).astype(float).ravel(), strict=True)),
        method="highs-ds",
    )
    if res.status != 0:  # cannot happen for integer margins
        raise InfeasibleError(f"no controlled rounding of the table {T.tolist()}")
    return np.asarray(base + np.rint(res.x).astype(np.int64).reshape(k, g))


def min_move_quotas(N0: np.ndarray) -> np.ndarray:
    """Proportional target table (every row has the data's group shares) whose cluster sizes
    minimise the number of points to move, :math:`\tfrac12 \\sum_{c,g} |s_c r_g - N^0_{cg}|`
    over sizes :math:`s_c \\ge 0` with :math:`\\sum_c s_c = N` (a small LP), sizes rounded by
    largest remainders. Points then mostly move one way, into the clusters short of a
    group, instead of being exchanged."""
    N0 = np.asarray(N0, dtype=np.float64)
    k, g = N0.shape
    total = N0.sum()
    r = N0.sum(axis=0) / total
    # variables: s (k), e (k * g) with e >= +-(s_c r_g - N0_cg)
    c_obj = np.concatenate([np.zeros(k), np.ones(k * g)])
    S = np.kron(np.eye(k), r[:, None])  # (k g, k): row (c, g) picks s_c r_g
    E = np.eye(k * g)
    A_ub = np.vstack([np.hstack([S, -E]), np.hstack([-S, -E])])
    b_ub = np.concatenate([N0.ravel(), -N0.ravel()])
    A_eq = np.concatenate([np.ones(k), np.zeros(k * g)])[None, :]
    bounds = [(0.5 * n_c, None) for n_c in N0.sum(axis=1)] + [(0, None)] * (k * g)
    res = linprog(
        c_obj, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[total], bounds=bounds, method="highs"
    )
    sizes = res.x[:k] if res.status == 0 else N0.sum(axis=1)
    base = np.floor(sizes + 1e-9).astype(np.int64)
    short = int(round(total)) - int(base.sum())
    base[np.argsort(-(sizes - base), kind="stable")[:short]] += 1
    return proportional_quotas(base, N0.sum(axis=0).astype(np.int64))


def _table(N0: np.ndarray, Q: np.ndarray, t: float) -> np.ndarray:
    """The rounded table at step ``t`` from ``N0`` to ``Q``: with the margins kept
    (:func:`round_table`) when both have the same total (the moving paths); entry by entry,
    half up, when ``Q`` drops points (the noise path: only removals, monotone in ``t``)."""
    if int(np.sum(Q)) != int(np.sum(N0)):
        return np.asarray(N0 - np.floor(t * (N0 - Q) + 0.5).astype(np.int64))
    return round_table((1.0 - t) * N0 + t * Q)


def smallest_step(N0: np.ndarray, Q: np.ndarray, target: float, factor: float = 1.0) -> float:
    """Smallest ``t`` in ``[0, 1]`` (to ``2**-20``) with ``factor * counts_balance(T(t)) >=
    target`` on the rounded table; ``1.0`` when even ``t = 1`` falls short."""
    if factor * counts_balance(N0) >= target:
        return 0.0
    if factor * counts_balance(_table(N0, Q, 1.0)) < target:
        return 1.0
    lo, hi = 0.0, 1.0
    # continuous proportions first (cheap, monotone), then the rounded tables
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if factor * counts_balance((1.0 - mid) * N0 + mid * Q) >= target:
            hi = mid
        else:
            lo = mid
    t = hi
    while t < 1.0 and factor * counts_balance(_table(N0, Q, t)) < target:
        t = min(1.0, t + 2.0**-10)  # rounding may miss the target by a point: step on
    return t


@dataclass(frozen=True)
class RepairResult:
    """One point of a repair path: ``labels`` (compact ids of the kept points, -1 for the
    points the noise path drops), the step ``t``, the count table it meets (clustered points
    only), the number of points moved to another cluster and the number made noise."""

    labels: np.ndarray
    t: float
    counts: np.ndarray
    n_moved: int
    n_noise: int = 0


class Repairer:
    """Costs, counts and noise order of one repair problem (kept points only; compact ids).

    ``D``: ``(n, k)`` dc-distances to the clusters (:func:`cluster_dc_distances`), ``H`` the
    embedding rows, ``min_size`` the smallest cluster the noise path may leave (FairDen:
    ``minPts``), ``max_noise`` the share of the points it may drop.
    """

    def __init__(
        self,
        D: np.ndarray,
        max_dc: float,
        H: np.ndarray,
        labels: np.ndarray,
        groups: np.ndarray,
        k: int,
        min_size: int = 1,
        max_noise: float = 0.0,
    ) -> None:
        self.labels, self.groups, self.k = labels, groups, k
        self.n_groups = int(groups.max()) + 1
        self.N0 = np.zeros((k, self.n_groups), dtype=np.int64)
        np.add.at(self.N0, (labels, groups), 1)
        self.targets = {
            "exchange": proportional_quotas(self.N0.sum(axis=1), self.N0.sum(axis=0)),
            "min_moves": min_move_quotas(self.N0),
            "noise": noise_quotas(self.N0, min_size),
        }
        n = labels.size
        rows = np.arange(n)
        scale = max(float(max_dc), np.finfo(float).tiny)
        finite = np.where(np.isfinite(D), D, scale)
        own = finite[rows, labels]
        dc_cost = np.maximum(finite - own[:, None], 0.0)
        centres = np.zeros((k, H.shape[1]))
        np.add.at(centres, labels, H)
        centres /= np.maximum(np.bincount(labels, minlength=k), 1)[:, None]
        E = ((H[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        e_scale = float(E.max()) or 1.0
        C = MOVE_PRICE + dc_cost / scale + EMBEDDING_WEIGHT * E / e_scale
        C[rows, labels] = 0.0
        self.C = C
        # noise order: the points nearest (in dc-distance) to another cluster than to their
        # own first, then the loosest on their own cluster, then far from its centre in H
        other = finite.copy()
        other[rows, labels] = np.inf
        margin = other.min(axis=1) - own if k > 1 else np.zeros(n)
        self.noise_order = np.lexsort((-E[rows, labels], -own, margin))
        self.noise_cap = int(np.floor(max_noise * n + 1e-9))
        self.noise_step = self._noise_cap_step()

    def _n_noise(self, t: float) -> int:
        return int(self.N0.sum() - _table(self.N0, self.targets["noise"], t).sum())

    def _noise_cap_step(self) -> float:
        """Largest ``t`` (to ``2**-20``) whose noise table drops at most ``noise_cap``."""
        if self.noise_cap <= 0 or self._n_noise(1.0) == 0:
            return 0.0
        if self._n_noise(1.0) <= self.noise_cap:
            return 1.0
        lo, hi = 0.0, 1.0
        for _ in range(20):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self._n_noise(mid) <= self.noise_cap else (lo, mid)
        return lo

    def at(self, t: float, path: str = "exchange") -> RepairResult:
        """The labels at step ``t`` of ``path`` (:data:`PATHS`)."""
        counts = self.N0.copy() if t == 0.0 else _table(self.N0, self.targets[path], t)
        out = self.labels.copy()
        if path == "noise":
            removal = self.N0 - counts
            order = self.noise_order
            for c, g in zip(*np.nonzero(removal > 0), strict=True):  # few (cluster, group)
                cell = order[(self.labels[order] == c) & (self.groups[order] == g)]
                out[cell[: removal[c, g]]] = -1
            return RepairResult(out, t, counts, 0, int((out < 0).sum()))
        for g in range(self.n_groups):  # loop over sensitive groups (few)
            idx = np.flatnonzero(self.groups == g)
            if np.array_equal(counts[:, g], self.N0[:, g]):
                continue  # the start already meets the quotas, at zero cost
            out[idx] = quota_assignment(self.C[idx], counts[:, g], init=self.labels[idx])
        return RepairResult(out, t, counts, int((out != self.labels).sum()))

    def steps(self, path: str, grid: np.ndarray, target: float) -> np.ndarray:
        """The steps of ``path`` worth evaluating. A moving path: the ``grid`` (in ``(0, 1]``)
        and its smallest step whose balance reaches ``target`` (when one does). The noise path
        drops points only to reach ``target``: its smallest step that does, when that lies
        within ``max_noise``; none otherwise (nor when the start already reaches it)."""
        t_min = smallest_step(self.N0, self.targets[path], target)
        reach = counts_balance(_table(self.N0, self.targets[path], t_min)) >= target
        if path == "noise":
            ok = 0.0 < t_min <= self.noise_step and reach
            return np.array([t_min]) if ok else np.zeros(0)
        grid = np.asarray(grid, dtype=np.float64)
        ts = grid[(grid > 0) & (grid <= 1)]
        if 0.0 < t_min and reach:
            ts = np.append(ts, t_min)
        return np.unique(ts)


def noise_quotas(N0: np.ndarray, min_size: int = 1) -> np.ndarray:
    """End of the noise path: every cluster (row) of the ``(k, G)`` table keeps the largest
    sub-table with the data's group shares :math:`r`,
    :math:`\\lfloor r_g \\min_{g'} N^0_{cg'} / r_{g'} \\rfloor`; only the surplus of its
    over-represented groups becomes noise. A cluster that would keep fewer than ``min_size``
    points (a group-pure one, say) is left as it is."""
    N0 = np.asarray(N0, dtype=np.int64)
    r = N0.sum(axis=0) / max(int(N0.sum()), 1)
    present = r > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(present[None, :], N0 / np.where(present, r, 1.0)[None, :], np.inf)
    P = np.floor(scale.min(axis=1, keepdims=True) * r[None, :] + 1e-9).astype(np.int64)
    P = np.minimum(P, N0)
    too_small = P.sum(axis=1) < min_size
    P[too_small] = N0[too_small]
    return np.asarray(P)


def repair_problem(
    tree: DCTree,
    H: np.ndarray,
    labels: np.ndarray,
    keep: np.ndarray,
    groups: np.ndarray,
    min_size: int = 1,
    max_noise: float = 0.0,
) -> tuple[Repairer, np.ndarray]:
    """The repair problem of the kept points (compact cluster and group ids) and the cluster
    ids of its rows; ``labels``, ``keep`` and ``groups`` cover the tree's points."""
    if labels.shape != keep.shape or groups.shape != keep.shape or labels.size != tree.n_:
        raise InvalidInputError(
            f"labels, keep and groups must all have shape ({tree.n_},), one entry per point "
            f"of the dc-tree; got {labels.shape}, {keep.shape} and {groups.shape}"
        )
    kept = np.flatnonzero(keep)
    # compact ids in order of first appearance: the same partition under other cluster
    # numbers (k-means' arbitrary ids) gives the same problem, tables and tie-breaks
    uniq, first, inverse = np.unique(labels[kept], return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    ids, lab = uniq[order], rank[inverse.reshape(-1)]
    g = np.unique(groups[kept], return_inverse=True)[1].reshape(-1)
    full = np.full(labels.size, -1, dtype=np.int64)
    full[kept] = lab
    D = cluster_dc_distances(tree, full, ids.size)[kept]
    rep = Repairer(D, tree.max_distance_, H[kept], lab, g, ids.size, min_size, max_noise)
    return rep, ids


def path_labels(
    rep: Repairer,
    ids: np.ndarray,
    labels: np.ndarray,
    keep: np.ndarray,
    grid: np.ndarray,
    target: float,
) -> list[tuple[str, RepairResult, np.ndarray]]:
    """Every candidate of the repair paths: ``("paper", t = 0)`` first, then each path's
    :meth:`Repairer.steps`. Each comes with its labels in the ids of ``labels`` (the points
    outside ``keep`` unchanged, the dropped ones -1)."""
    runs = [("paper", rep.at(0.0))]
    runs += [(p, rep.at(t, p)) for p in PATHS for t in rep.steps(p, grid, target)]
    out = []
    for path, res in runs:
        lab = labels.copy()
        lab[keep] = np.where(res.labels >= 0, ids[res.labels], -1)
        out.append((path, res, lab))
    return out


def noise_after(
    rep_args: tuple[DCTree, np.ndarray, np.ndarray, np.ndarray, int, float],
    labels: np.ndarray,
    base: RepairResult,
    target: float,
) -> list[tuple[RepairResult, np.ndarray]]:
    """The noise path continued from a step ``base`` of a moving path whose ``labels`` (ids of
    the caller, points outside ``keep`` unchanged) miss ``target``: its smallest step reaching
    ``target`` within ``max_noise``, if any. ``rep_args``: ``(tree, H, keep, groups,
    min_size, max_noise)`` as for :func:`repair_problem`. Each result carries the base's step
    and moves, its own dropped points."""
    tree, H, keep, groups, min_size, max_noise = rep_args
    rep, ids = repair_problem(tree, H, labels, keep, groups, min_size, max_noise)
    out = []
    for t in rep.steps("noise", np.ones(1), target):
        res = rep.at(float(t), "noise")
        lab = labels.copy()
        lab[keep] = np.where(res.labels >= 0, ids[res.labels], -1)
        out.append((RepairResult(res.labels, base.t, res.counts, base.n_moved, res.n_noise), lab))
    return out


def pareto_mask(
    balance_values: np.ndarray, dcsi_values: np.ndarray, noise_values: np.ndarray | None = None
) -> np.ndarray:
    """True for the rows no other row dominates (>= in balance and DCSI, <= in noise when
    given, strictly better in one)."""
    b = np.asarray(balance_values, dtype=np.float64)[:, None]
    d = np.asarray(dcsi_values, dtype=np.float64)[:, None]
    z = np.zeros_like(b) if noise_values is None else -np.asarray(noise_values, float)[:, None]
    ge = (b.T >= b) & (d.T >= d) & (z.T >= z)
    gt = (b.T > b) | (d.T > d) | (z.T > z)
    return np.asarray(~(ge & gt).any(axis=1))
