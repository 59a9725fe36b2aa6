"""ExDBSCAN's selection of reference cores: the energy and its minimisers (paper Eq. 2-3, App. A.3).

For a point :math:`x` the candidate cores :math:`V` (of the target cluster, or of every other
cluster) are scored by

.. math::

    E(S) = \\alpha \\sum_{s \\in S} d(x, s)^2
         + (1 - \\alpha) \\frac{d_{\\min}}{\\bar w} \\sum_{\\{s, t\\} \\subseteq S} \\frac{1}{D(s, t)},

with :math:`d_{\\min}` the distance from :math:`x` to its nearest candidate, :math:`\\bar w` the
mean edge weight of the candidates' core graphs and :math:`D` the shortest-path distance in
them (:math:`1/D = 0` across clusters: repulsion acts within a cluster only, App. A.2.3).
:class:`CandidateCores` holds one query's candidates, computes rows of :math:`D` lazily (one
Dijkstra run per selected core) and minimises :math:`E` greedily (start at the nearest core,
optimal for :math:`k = 1`, Prop. 3.3), by best-improvement swaps or exhaustively.
:func:`select_reference_cores` applies a strategy (energy, random, nearest, furthest).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from gnnaudit.clustering._exdbscan_placement import place_counterfactuals
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.core_graph import CoreGraph

__all__ = ["CandidateCores", "select_reference_cores"]


class CandidateCores:
    """Candidate reference cores of one query with lazily computed graph distances.

    ``coef`` defaults to the normalisation of these candidates; :meth:`restrict` gives the same
    problem on a subset of them (the energy's normalisation :math:`d_{\\min} / \\bar w` stays
    that of the full set). Memory O(n_candidates * (d + number of computed rows)).

    Attributes:
        cg: the core graph.
        x: the explained point ``(d,)``.
        cand: data indices of the candidate cores.
        box: index of each candidate's constraint box in ``lo_table`` / ``hi_table``.
        lo_table, hi_table: bounds of the boxes on the change :math:`c - x`.
        alpha: weight of the attraction term.
        cluster: cluster of each candidate.
        local: position of each candidate in its cluster's core graph.
        dx: distance from ``x`` to each candidate.
        coef: :math:`(1 - \\alpha) d_{\\min} / \\bar w`.
    """

    def __init__(
        self,
        cg: CoreGraph,
        x: np.ndarray,
        cand: np.ndarray,
        box: np.ndarray,
        lo_table: np.ndarray,
        hi_table: np.ndarray,
        alpha: float,
        *,
        coef: float | None = None,
    ) -> None:
        self.cg = cg
        self.x = x
        self.cand = cand
        self.box = box
        self.lo_table = lo_table
        self.hi_table = hi_table
        self.alpha = alpha
        self.cluster = cg.labels[cand]
        self.local = cg.local_positions(cand)
        self.dx = cg.distances(x, cand)
        self.dx2 = self.dx**2
        if coef is None:
            w_mean = cg.mean_edge_weight(np.unique(self.cluster))
            if not np.isfinite(w_mean) or w_mean <= 0:
                w_mean = cg.eps
            coef = (1.0 - alpha) * float(self.dx.min()) / w_mean
        self.coef = coef
        self._rows: dict[int, np.ndarray] = {}

    def restrict(self, keep: np.ndarray) -> CandidateCores:
        """The same problem on the candidates ``keep`` (positions), same normalisation."""
        return CandidateCores(
            self.cg,
            self.x,
            self.cand[keep],
            self.box[keep],
            self.lo_table,
            self.hi_table,
            self.alpha,
            coef=self.coef,
        )

    @property
    def n(self) -> int:
        """Number of candidates."""
        return int(self.cand.size)

    def drow(self, j: int) -> np.ndarray:
        """Graph distances ``D`` from candidate ``j`` to every candidate (inf across clusters)."""
        if j not in self._rows:
            c = int(self.cluster[j])
            full = self.cg.local_shortest_paths(c, np.array([self.local[j]]))[0]
            row = np.full(self.n, np.inf)
            same = self.cluster == c
            row[same] = full[self.local[same]]
            row[j] = 0.0
            self._rows[j] = row
        return self._rows[j]

    def inv_row(self, j: int) -> np.ndarray:
        """:math:`1 / D` from candidate ``j`` (0 for itself and across clusters)."""
        row = self.drow(j)
        with np.errstate(divide="ignore"):
            inv = np.where(row > 0, 1.0 / row, 0.0)
        return inv

    def dmatrix(self, sel: Sequence[int]) -> np.ndarray:
        """Graph distances between the selected candidates, from cached rows where possible
        (the matrix is symmetric, so the last greedy pick needs no Dijkstra run of its own)."""
        sel = list(sel)
        m = len(sel)
        D = np.zeros((m, m))
        for a in range(m):
            for b in range(a + 1, m):
                if sel[a] in self._rows or sel[b] not in self._rows:
                    D[a, b] = self.drow(sel[a])[sel[b]]
                else:
                    D[a, b] = self._rows[sel[b]][sel[a]]
                D[b, a] = D[a, b]
        return D

    def energy(self, sel: Sequence[int]) -> float:
        """:math:`E(S)` of the selected candidates."""
        sel = list(sel)
        D = self.dmatrix(sel)
        with np.errstate(divide="ignore"):
            inv = np.where(D > 0, 1.0 / D, 0.0)
        return float(self.alpha * self.dx2[sel].sum() + self.coef * np.triu(inv, 1).sum())

    # -------------------------------------------------------------- minimisers
    def greedy(self, k: int, first: int, attraction: bool) -> list[int]:
        """Greedy selection from ``first``: each step adds the candidate of least energy
        (``attraction=False``: of least repulsion, the furthest strategy)."""
        sel = [first]
        rep = np.zeros(self.n)
        for _ in range(1, k):
            rep += self.inv_row(sel[-1])
            score = (self.alpha * self.dx2 + self.coef * rep) if attraction else rep.copy()
            score[sel] = np.inf
            sel.append(int(np.argmin(score)))
        return sel

    def swap(self, sel: list[int], max_iter: int = 100) -> tuple[list[int], int]:
        """Best-improvement swaps from ``sel`` (paper App. A.3); returns the set and the number
        of swaps made."""
        sel = list(sel)
        n_swaps = 0
        for _ in range(max_iter):
            R = np.array([self.inv_row(j) for j in sel])
            rsum = R.sum(axis=0)
            inner = R[:, sel].sum(axis=1)
            cur = self.energy(sel)
            M = (
                cur
                - self.alpha * self.dx2[sel][:, None]
                - self.coef * inner[:, None]
                + self.alpha * self.dx2[None, :]
                + self.coef * (rsum[None, :] - R)
            )
            M[:, sel] = np.inf
            i, v = np.unravel_index(int(np.argmin(M)), M.shape)
            if not M[i, v] < cur - 1e-12 * abs(cur):
                break
            sel[i] = int(v)
            n_swaps += 1
        return sel, n_swaps

    def exact(self, k: int, max_combinations: int) -> list[int]:
        """Exhaustive minimum of E over all k-subsets of the candidates (chunks of about
        2,000,000 subset entries)."""
        total = math.comb(self.n, k)
        if total > max_combinations:
            raise InvalidInputError(
                f"exact=True enumerates C({self.n}, {k}) = {total} subsets, more than "
                f"max_exact_combinations={max_combinations}; use refine='swap', fewer "
                "counterfactuals or constraints that shrink the candidate set"
            )
        inv = np.array([self.inv_row(j) for j in range(self.n)])
        best_e, best = np.inf, None
        chunk = max(1, 2_000_000 // max(k, 1))
        it = itertools.combinations(range(self.n), k)
        while True:
            flat = np.fromiter(
                itertools.chain.from_iterable(itertools.islice(it, chunk)), dtype=np.int64
            )
            if flat.size == 0:
                break
            combos = flat.reshape(-1, k)
            e = self.alpha * self.dx2[combos].sum(axis=1)
            for a in range(k):
                for b in range(a + 1, k):
                    e = e + self.coef * inv[combos[:, a], combos[:, b]]
            i = int(np.argmin(e))
            if e[i] < best_e:
                best_e, best = float(e[i]), combos[i].tolist()
        assert best is not None
        return [int(v) for v in best]

    def place(self, sel: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Counterfactuals of the selected candidates and their validity mask."""
        idx = np.asarray(sel, dtype=np.int64)
        return place_counterfactuals(
            self.cg,
            self.x,
            self.cg.X[self.cand[idx]],
            self.box[idx],
            self.lo_table,
            self.hi_table,
            self.cluster[idx],
        )


def select_reference_cores(
    cands: CandidateCores,
    k: int,
    strategy: str,
    random_state: int | None,
    *,
    refine: str | None = None,
    exact: bool = False,
    max_exact_combinations: int = 500_000,
    banned: np.ndarray | None = None,
) -> tuple[list[int], float]:
    """Choose ``k`` reference cores (positions in ``cands``) by ``strategy``.

    ``energy``: greedy minimisation of :math:`E`; ``nearest``: the ``k`` nearest; ``random``:
    uniform (``random_state``); ``furthest``: greedy repulsion from a random first core. Then
    ``exact=True`` replaces the set with the exhaustive minimum and ``refine="swap"`` improves
    it by swaps. ``banned`` candidates are never chosen. Returns the selection and the energy
    of the strategy's own set (before ``exact`` / ``refine``).
    """
    if banned is not None and banned.any():
        allowed = np.flatnonzero(~banned)
        sel, greedy_energy = select_reference_cores(
            cands.restrict(allowed),
            min(k, allowed.size),
            strategy,
            random_state,
            refine=refine,
            exact=exact,
            max_exact_combinations=max_exact_combinations,
        )
        return [int(allowed[j]) for j in sel], greedy_energy
    k = min(k, cands.n)
    rng = np.random.default_rng(random_state)
    if strategy == "energy":
        sel = cands.greedy(k, int(np.argmin(cands.dx)), attraction=True)
    elif strategy == "nearest":
        sel = np.argsort(cands.dx, kind="stable")[:k].tolist()
    elif strategy == "random":
        sel = rng.choice(cands.n, size=k, replace=False).tolist()
    else:
        sel = cands.greedy(k, int(rng.integers(cands.n)), attraction=False)
    greedy_energy = cands.energy(sel)
    if exact:
        sel = cands.exact(k, max_exact_combinations)
    elif refine == "swap":
        sel, _ = cands.swap(sel)
    return [int(s) for s in sel], greedy_energy
