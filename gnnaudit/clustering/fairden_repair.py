"""Balance repair of FairDen's clustering along density-compatible moves (issue 29).

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
balance (Eq. 6) rises with ``t``. The repair takes the smallest ``t`` whose balance reaches
``min_balance`` (bisection on the counts, :func:`smallest_step`), then the cheapest relabelling
with those counts: per sensitive group, an exact quota assignment
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

Two paths. ``"exchange"`` keeps the cluster sizes (``Q`` as above); ``"min_moves"`` lets them
change and takes the proportional table that moves the fewest points
(:func:`min_move_quotas`), so a cluster short of a group mostly *receives* points instead of
exchanging them. Which is kinder to the density structure depends on the data: moving many
points of a compact cluster into a wide one makes them core points of their new cluster
inside the compact one (the separation, hence DCSI, collapses), while the opposite direction
spreads them thinly. :func:`repair_to_step` takes each path's smallest step and keeps the one
with the higher DCSI. Where balance and density truly conflict (separated clusters with very
different group shares: reaching ``min_balance`` needs many points inside foreign clusters)
no path keeps the DCSI; the balance target is still met and ``rounding="pareto"`` shows the
trade-off.

Steps ``t`` on a grid plus the chosen one give the (balance, DCSI) front
(:func:`repair_front`). Memory ``O(n k)`` (costs and dc-distances to the clusters); time
per step: the quota assignments plus, in :func:`repair_to_step`, one DCSI per path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import linprog

from gnnaudit.clustering.fairden_rounding import proportional_quotas, quota_assignment
from gnnaudit.clustering.metrics.fairness import balance, dcsi
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.graph_ops.dc_tree import DCTree

__all__ = [
    "PATHS",
    "min_move_quotas",
    "cluster_dc_distances",
    "counts_balance",
    "round_table",
    "smallest_step",
    "RepairResult",
    "repair_to_step",
    "repair_front",
    "pareto_mask",
]

logger = logging.getLogger(__name__)

#: price of any move (staying is free): the repair changes nothing it does not need to
MOVE_PRICE = 1e-6
#: weight of the embedding distance, a tie-break between moves of equal dc cost
EMBEDDING_WEIGHT = 1e-3
#: the repair paths: ``"exchange"`` keeps the cluster sizes (:func:`proportional_quotas`),
#: ``"min_moves"`` lets them change to move the fewest points (:func:`min_move_quotas`)
PATHS = ("exchange", "min_moves")


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


def counts_balance(counts: np.ndarray) -> float:
    """Mean over the clusters (rows) of Eq. 6's balance of a ``(k, G)`` count table (groups
    absent from every cluster ignored), as :func:`~gnnaudit.clustering.metrics.balance`
    computes it on the non-noise points."""
    counts = np.asarray(counts, dtype=np.float64)
    counts = counts[counts.sum(axis=1) > 0][:, counts.sum(axis=0) > 0]
    if counts.size == 0:
        return 0.0
    r = counts.sum(axis=0) / counts.sum()
    rc = counts / counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.minimum(np.where(rc > 0, r / rc, 0.0), rc / r)
    return float(ratio.min(axis=1).mean())


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
    """One point of the repair path: ``labels`` (compact ids of the kept points), the step
    ``t``, the count table it meets and the number of points moved."""

    labels: np.ndarray
    t: float
    counts: np.ndarray
    n_moved: int


class _Repairer:
    """Costs and counts of one repair problem (kept points only)."""

    def __init__(
        self,
        D: np.ndarray,
        max_dc: float,
        H: np.ndarray,
        labels: np.ndarray,
        groups: np.ndarray,
        k: int,
    ) -> None:
        self.labels, self.groups, self.k = labels, groups, k
        self.n_groups = int(groups.max()) + 1
        self.N0 = np.zeros((k, self.n_groups), dtype=np.int64)
        np.add.at(self.N0, (labels, groups), 1)
        self.targets = {
            "exchange": proportional_quotas(self.N0.sum(axis=1), self.N0.sum(axis=0)),
            "min_moves": min_move_quotas(self.N0),
        }
        n = labels.size
        own = D[np.arange(n), labels]
        scale = max(float(max_dc), np.finfo(float).tiny)
        finite = np.where(np.isfinite(D), D, scale)
        dc_cost = np.maximum(finite - np.where(np.isfinite(own), own, scale)[:, None], 0.0)
        centres = np.zeros((k, H.shape[1]))
        np.add.at(centres, labels, H)
        centres /= np.maximum(np.bincount(labels, minlength=k), 1)[:, None]
        E = ((H[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        e_scale = float(E.max()) or 1.0
        C = MOVE_PRICE + dc_cost / scale + EMBEDDING_WEIGHT * E / e_scale
        C[np.arange(n), labels] = 0.0
        self.C = C

    def at(self, t: float, path: str = "exchange") -> RepairResult:
        counts = self.N0.copy() if t == 0.0 else _table(self.N0, self.targets[path], t)
        out = self.labels.copy()
        for g in range(self.n_groups):  # loop over sensitive groups (few)
            idx = np.flatnonzero(self.groups == g)
            if np.array_equal(counts[:, g], self.N0[:, g]):
                continue  # the start already meets the quotas, at zero cost
            out[idx] = quota_assignment(self.C[idx], counts[:, g], init=self.labels[idx])
        return RepairResult(out, t, counts, int((out != self.labels).sum()))


def _problem(
    tree: DCTree, H: np.ndarray, labels: np.ndarray, keep: np.ndarray, groups: np.ndarray
) -> tuple[_Repairer, np.ndarray]:
    """The repair problem of the kept points (compact cluster and group ids); ``labels``,
    ``keep`` and ``groups`` cover the tree's points."""
    if labels.shape != keep.shape or groups.shape != keep.shape or labels.size != tree.n_:
        raise InvalidInputError(
            f"labels, keep and groups must all have shape ({tree.n_},), one entry per point "
            f"of the dc-tree; got {labels.shape}, {keep.shape} and {groups.shape}"
        )
    kept = np.flatnonzero(keep)
    ids, lab = np.unique(labels[kept], return_inverse=True)
    lab = lab.reshape(-1)
    g = np.unique(groups[kept], return_inverse=True)[1].reshape(-1)
    full = np.full(labels.size, -1, dtype=np.int64)
    full[kept] = lab
    D = cluster_dc_distances(tree, full, ids.size)[kept]
    return _Repairer(D, tree.max_distance_, H[kept], lab, g, ids.size), ids


def repair_to_step(
    tree: DCTree,
    H: np.ndarray,
    X: np.ndarray,
    labels: np.ndarray,
    keep: np.ndarray,
    groups: np.ndarray,
    min_balance: float,
    min_samples: int,
    factor: float = 1.0,
) -> tuple[np.ndarray, float, str | None]:
    """Repair ``labels`` (ids of the paper's rounding; only points with ``keep`` are clustered,
    the others are noise) to the smallest step whose balance, times ``factor`` (the non-noise
    fraction), reaches ``min_balance``, on each path (:data:`PATHS`), and keep the one with
    the higher DCSI (squared, on ``X``, the tree's points; ties: fewer moves). Returns the
    new labels (same ids, unkept points unchanged), the step ``t`` (0: the paper's labels,
    unchanged) and the path (``None`` when nothing moves)."""
    rep, ids = _problem(tree, H, labels, keep, groups)
    best: tuple[float, int, np.ndarray, float, str] | None = None
    for path in PATHS:  # two paths
        t = smallest_step(rep.N0, rep.targets[path], min_balance, factor)
        if t == 0.0:  # the target is met: nothing moves
            return labels.copy(), 0.0, None
        res = rep.at(t, path)
        out = labels.copy()
        out[keep] = ids[res.labels]
        score = dcsi(X, np.where(keep, out, -1), min_samples, squared=True)
        if best is None or (score, -res.n_moved) > (best[0], -best[1]):
            best = (score, res.n_moved, out, t, path)
    assert best is not None
    return best[2], best[3], best[4]


def pareto_mask(balance_values: np.ndarray, dcsi_values: np.ndarray) -> np.ndarray:
    """True for the rows no other row dominates (>= in both, > in one)."""
    b = np.asarray(balance_values)[:, None]
    d = np.asarray(dcsi_values)[:, None]
    ge = (b.T >= b) & (d.T >= d)
    gt = (b.T > b) | (d.T > d)
    return np.asarray(~(ge & gt).any(axis=1))


def repair_front(
    tree: DCTree,
    H: np.ndarray,
    X: np.ndarray,
    labels: np.ndarray,
    keep: np.ndarray,
    groups: np.ndarray,
    min_samples: int,
    steps: np.ndarray,
    factor: float = 1.0,
) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """Balance and DCSI (squared, as the paper's tables) along the repair path.

    Returns a DataFrame with columns ``path`` (:data:`PATHS`), ``t``, ``n_moved``,
    ``balance``, ``dcsi``, ``pareto`` (not dominated by another row) and the labels of every
    row (same ids as ``labels``, unkept points -1); ``t = 0`` (the paper's labels) comes once. ``balance`` is the noise-adjusted balance over the rows of ``labels``
    (times ``factor`` for points outside them, e.g. excluded ones).
    """
    rep, ids = _problem(tree, H, labels, keep, groups)
    rows, all_labels = [], []
    ts = np.unique(np.clip(np.asarray(steps, dtype=np.float64), 0.0, 1.0))
    runs = [("paper", 0.0)] + [(p, float(t)) for p in PATHS for t in ts if t > 0]
    for path, t in runs:
        res = rep.at(t, "exchange" if path == "paper" else path)
        lab = np.full(labels.size, -1, dtype=np.int64)
        lab[keep] = ids[res.labels]
        rows.append(
            {
                "path": path,
                "t": t,
                "n_moved": res.n_moved,
                "balance": factor * balance(lab, groups),
                "dcsi": dcsi(X, lab, min_samples, squared=True),
            }
        )
        all_labels.append(lab)
    front = pd.DataFrame(rows)
    front["pareto"] = pareto_mask(front["balance"].to_numpy(), front["dcsi"].to_numpy())
    return front, all_labels
