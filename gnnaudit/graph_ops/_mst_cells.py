"""Cell-pair search of Boruvka's late rounds (used by :func:`gnnaudit.graph_ops.mst.mst_boruvka`).

k-means cells of the points (centre, exact radius, smallest core distance; faiss k-means when
installed, else scikit-learn's, :func:`kmeans_labels`) bound
:math:`d_m(p, q) \\ge \\max(cd(p), m_j, \\|p - c_j\\| - R_j)` for every ``q`` of cell ``j``; the
search scans only the (point, cell) pairs whose bound is below the component's best edge.
See :func:`cell_pair_search` and the module docstring of :mod:`gnnaudit.graph_ops.mst`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.spatial.distance import cdist

from gnnaudit._optional import optional
from gnnaudit.graph_ops._distances import rowwise_distances
from gnnaudit.graph_ops._mst_round import RoundState
from gnnaudit.graph_ops.segments import expand_ranges

__all__ = ["Cells", "kmeans_labels", "make_cells", "cell_pair_search"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cells:
    """A partition of the points into cells (k-means) with exact radii."""

    label: np.ndarray  # (n,) cell of each point
    centre: np.ndarray  # (c, d) float64 centroids
    radius: np.ndarray  # (c,) largest distance of a member to its centroid (exact)
    min_core: np.ndarray  # (c,) smallest core distance of a member
    order: np.ndarray  # points sorted by cell
    starts: np.ndarray  # first slot of each cell in ``order``
    count: np.ndarray  # (c,) members per cell
    gap: np.ndarray  # (c, c) lower bound on the distance between members of two cells
    centre_dist: np.ndarray  # (c, c) distances between the centroids
    own_rank: np.ndarray  # (n,) rank of each point's distance to its centroid (ascending)
    own_sorted: np.ndarray  # (n,) those distances, sorted


#: k-means iterations and training points per cell (a sample of the points trains the cells)
_KMEANS_ITER = 8
_POINTS_PER_CELL = 64


def kmeans_labels(X: np.ndarray, n_cells: int, seed: int = 0) -> npt.NDArray[np.int64]:
    """The k-means cell of each row of ``X`` (float32 is enough: the radii, not the
    assignment, carry the guarantee): faiss when installed (the ``faiss`` extra), else
    scikit-learn's k-means on a sample of ``64 * n_cells`` points; every point is then assigned
    to its nearest centre (scikit-learn's chunked assignment, memory O(chunk x n_cells)). The
    cells only steer the pruning: the MST found is the same with either."""
    n, d = X.shape
    xf = np.ascontiguousarray(X, dtype=np.float32)
    faiss = optional("faiss")
    if faiss is not None:
        km = faiss.Kmeans(
            d, n_cells, niter=_KMEANS_ITER, seed=seed, max_points_per_centroid=_POINTS_PER_CELL
        )
        km.train(xf)
        _, lab = km.index.search(xf, 1)
        return np.asarray(lab[:, 0], dtype=np.int64)
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(seed)
    n_train = min(n, _POINTS_PER_CELL * n_cells)
    train = xf if n_train == n else xf[np.sort(rng.choice(n, n_train, replace=False))]
    km_sk = KMeans(
        n_clusters=min(n_cells, n_train),
        init="random",
        n_init=1,
        max_iter=_KMEANS_ITER,
        random_state=seed,
    ).fit(train)
    return np.asarray(km_sk.predict(xf), dtype=np.int64)


def make_cells(X: np.ndarray, core: np.ndarray, n_cells: int, seed: int = 0) -> Cells:
    """k-means cells of ``X`` (:func:`kmeans_labels`), radii recomputed in float64 from
    differences."""
    n, d = X.shape
    label = kmeans_labels(X, n_cells, seed)
    used, label = np.unique(label, return_inverse=True)
    n_c = used.size
    centre = np.zeros((n_c, d))
    np.add.at(centre, label, X)
    count = np.bincount(label, minlength=n_c)
    centre /= count[:, None]  # the float64 mean of the members
    dist = rowwise_distances(X, centre[label], "euclidean")
    radius = np.zeros(n_c)
    np.maximum.at(radius, label, dist)
    min_core = np.full(n_c, np.inf)
    np.minimum.at(min_core, label, core)
    order = np.argsort(label, kind="stable")
    starts = np.concatenate([[0], np.cumsum(count)[:-1]])
    # |p - q| >= |c_a - c_b| - R_a - R_b for p in cell a, q in cell b (relative margins absorb
    # the rounding of the difference-based distances)
    r_hi = radius * (1 + 1e-12)
    centre_dist = cdist(centre, centre)
    gap = centre_dist * (1 - 1e-12) - r_hi[:, None] - r_hi[None, :]
    by_dist = np.argsort(dist, kind="stable")
    own_rank = np.empty(n, dtype=np.int64)
    own_rank[by_dist] = np.arange(n)
    return Cells(
        label,
        centre,
        radius,
        min_core,
        order,
        starts,
        count,
        gap,
        centre_dist,
        own_rank,
        dist[by_dist],
    )


def _pure_cells(comp: np.ndarray, cells: Cells) -> np.ndarray:
    """Per cell: the component of all its members, or -1 when they span several."""
    cs = comp[cells.order]
    lo = np.minimum.reduceat(cs, cells.starts)
    hi = np.maximum.reduceat(cs, cells.starts)
    return np.where(lo == hi, lo, -1)


@dataclass(frozen=True)
class _Sources:
    """Pending points grouped by source (cell, component), each source's points sorted by
    their distance to the cell's centre: ``pts[head[s] : head[s] + length[s]]``."""

    pts: np.ndarray
    head: np.ndarray
    length: np.ndarray
    cell: np.ndarray
    comp: np.ndarray
    low: np.ndarray  # smallest lower bound of a source's points


def _sources(comp: np.ndarray, idx: np.ndarray, low: np.ndarray, cells: Cells) -> _Sources:
    lab, cmp_ = cells.label[idx], comp[idx]
    order = np.lexsort((cells.own_rank[idx], cmp_, lab))
    pts, lab, cmp_ = idx[order], lab[order], cmp_[order]
    head = np.flatnonzero(np.r_[True, (lab[1:] != lab[:-1]) | (cmp_[1:] != cmp_[:-1])])
    length = np.diff(np.append(head, pts.size))
    return _Sources(pts, head, length, lab[head], cmp_[head], np.minimum.reduceat(low[pts], head))


def _candidates(
    src: _Sources, comp: np.ndarray, comp_best: np.ndarray, cells: Cells, chunk_elems: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source, cell) pairs whose cell-level bound ``LB(s, b)`` is below the source
    component's best edge, with their bounds; memory ``chunk_elems`` bounds at a time."""
    n_c = cells.centre.shape[0]
    pure = _pure_cells(comp, cells)
    parts_s, parts_b, parts_lb = [], [], []
    step = max(1, chunk_elems // n_c)
    for s0 in range(0, src.head.size, step):
        ss = np.arange(s0, min(src.head.size, s0 + step))
        bound = np.maximum(cells.gap[src.cell[ss]], cells.min_core[None, :])
        np.maximum(bound, src.low[ss, None], out=bound)
        bound[pure[None, :] == src.comp[ss, None]] = np.inf
        r, b = np.nonzero(bound < comp_best[src.comp[ss]][:, None])
        parts_s.append(ss[r])
        parts_b.append(b)
        parts_lb.append(bound[r, b])
    return np.concatenate(parts_s), np.concatenate(parts_b), np.concatenate(parts_lb)


class _Scanner:
    """Exact scans of (point, cell) pairs; updates ``comp_best``, ``best_w``, ``best_v``."""

    def __init__(
        self,
        X: np.ndarray,
        core: np.ndarray,
        comp: np.ndarray,
        comp_best: np.ndarray,
        best_w: np.ndarray,
        best_v: np.ndarray,
        cells: Cells,
        pair_budget: int,
    ) -> None:
        self.X, self.core, self.comp, self.cells = X, core, comp, cells
        self.comp_best, self.best_w, self.best_v = comp_best, best_w, best_v
        self.pair_budget = pair_budget

    def scan(self, p: np.ndarray, b: np.ndarray) -> None:
        """d_m of each point ``p[i]`` with every member of cell ``b[i]`` (foreign ones)."""
        cells, comp, core, comp_best = self.cells, self.comp, self.core, self.comp_best
        slots, rep = expand_ranges(cells.starts[b], cells.count[b])
        pp_all, q = p[rep], cells.order[slots]
        w = np.maximum(
            rowwise_distances(self.X[pp_all], self.X[q], "euclidean"),
            np.maximum(core[pp_all], core[q]),
        )
        cp = comp[pp_all]
        w[comp[q] == cp] = np.inf
        np.minimum.at(comp_best, cp, w)
        hit = np.flatnonzero(w == comp_best[cp])
        _, first = np.unique(cp[hit], return_index=True)
        hit = hit[first]
        pp, qq, ww = pp_all[hit], q[hit], w[hit]
        better = ww < self.best_w[pp]
        self.best_w[pp[better]] = ww[better]
        self.best_v[pp[better]] = qq[better]

    def scan_sorted(self, p: np.ndarray, b: np.ndarray, bound: np.ndarray) -> None:
        """Scan (point, cell) pairs in increasing ``bound``, in budgeted chunks, dropping the
        pairs whose bound reached their component's best edge."""
        order = np.argsort(bound, kind="stable")
        p, b, bound = p[order], b[order], bound[order]
        while p.size:
            keep = bound < self.comp_best[self.comp[p]]
            p, b, bound = p[keep], b[keep], bound[keep]
            if not p.size:
                break
            budget = np.cumsum(self.cells.count[b])
            take = max(1, int(np.searchsorted(budget, self.pair_budget, "right")))
            self.scan(p[:take], b[:take])
            p, b, bound = p[take:], b[take:], bound[take:]


def cell_pair_search(
    X: np.ndarray,
    core: np.ndarray,
    state: RoundState,
    low: np.ndarray,
    cells: Cells,
    n_first: int = 4,
    chunk_elems: int = 1 << 23,
) -> None:
    r"""Exact cheapest foreign edge of every component with ``pending`` points, by cell pairs.

    ``low[p]`` bounds every foreign edge of ``p`` from below (the smaller of its best inspected
    edge and its bound on the uninspected points). The pending points are grouped into
    *sources* ``s`` = (cell ``a``, component ``c``). A source and a cell ``b`` holding a point
    outside ``c`` (``b`` not pure in ``c``) can only be joined by edges of weight

    .. math::

        d_m(p, q) \ge LB(s, b) = \max\big(\min_{p \in s} low(p),\ m_b,\
        \|c_a - c_b\| - R_a - R_b\big)

    (``m_b`` the smallest core distance in ``b``). So the component's cheapest edge lies in a
    pair with ``LB < comp_best[c]``: each component's ``n_first`` pairs of smallest bound are
    scanned first (real edges lower ``comp_best``), then the remaining candidates in
    increasing bound, in chunks (:func:`_scan_rest`). Boruvka needs only each component's
    minimum: the point of the cheapest edge found gets it as its ``best_w`` / ``best_v``;
    every other point keeps a real edge of its own, so ``best_w`` stays an upper bound of the
    inspected edges and the carried bounds stay valid.

    Cost: ``O(sources * cells)`` bounds plus the point pairs of the scanned cell pairs (on
    well-separated data, the cells facing each other across the gaps). Memory: at most
    ``chunk_elems`` bounds, and ``chunk_elems / d`` point pairs per scanned chunk (more only
    when a single cell pair alone has more).
    """
    comp, comp_best = state.comp, state.comp_best
    idx = np.flatnonzero(state.pending)
    if idx.size == 0:
        return
    src = _sources(comp, idx, low, cells)
    cand_s, cand_b, cand_lb = _candidates(src, comp, comp_best, cells, chunk_elems)
    if cand_s.size == 0:
        return
    cand_c = src.comp[cand_s]
    pair_budget = max(1, chunk_elems // X.shape[1])
    scanner = _Scanner(X, core, comp, comp_best, state.best_w, state.best_v, cells, pair_budget)
    # 1. each component's most promising cell pairs, scanned whole: real edges bound the rest
    order = np.lexsort((cand_lb, cand_c))
    first_of, counts = np.unique(cand_c[order], return_index=True, return_counts=True)[1:]
    rank = np.arange(order.size) - np.repeat(first_of, counts)
    sel = order[rank < n_first]
    slots, rep = expand_ranges(src.head[cand_s[sel]], src.length[cand_s[sel]])
    p1 = src.pts[slots]
    scanner.scan_sorted(p1, cand_b[sel][rep], np.zeros(p1.size))
    # 2. the other cell pairs, in increasing bound
    rest = order[rank >= n_first]
    rest = rest[np.argsort(cand_lb[rest], kind="stable")]
    logger.debug("cell pairs: %d pending points, %d candidate cell pairs", idx.size, rest.size)
    _scan_rest(X, src, (cand_s, cand_b, cand_lb, cand_c), rest, low, scanner)


def _scan_rest(
    X: np.ndarray,
    src: _Sources,
    cand: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    rest: np.ndarray,
    low: np.ndarray,
    scanner: _Scanner,
) -> None:
    r"""Phase 2 of :func:`cell_pair_search`: the candidate pairs ``rest`` (sorted by bound).

    Each point gets its own bound per cell, :math:`\max(low(p), m_b, \|p - c_b\| - R_b)`, and
    only (point, cell) pairs below the component's best edge are scanned. Cheap pre-filter
    (the triangle inequality :math:`\|p - c_b\| \ge \|c_a - c_b\| - \|p - c_a\|`): only the
    points of a source farther than :math:`\|c_a - c_b\| - R_b - best` from their own centre
    can pass; sorted by that distance they are a suffix of the source, found by one
    ``searchsorted`` per pair.
    """
    cand_s, cand_b, cand_lb, cand_c = cand
    cells, comp, comp_best = scanner.cells, scanner.comp, scanner.comp_best
    r_hi = cells.radius * (1 + 1e-12)
    n = X.shape[0]
    key = np.repeat(np.arange(src.head.size), src.length) * n + cells.own_rank[src.pts]

    def passing(sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        si, bi = cand_s[sel], cand_b[sel]
        thr = cells.centre_dist[src.cell[si], bi] * (1 - 1e-12) - r_hi[bi] - comp_best[cand_c[sel]]
        thr = np.where(thr > 0, thr * (1 - 1e-11), -np.inf)  # margins: keep, never drop, a tie
        below = np.searchsorted(cells.own_sorted, thr, side="right")  # own distance <= thr
        start = np.searchsorted(key, si * n + below, side="left")
        return start, src.head[si] + src.length[si] - start

    while rest.size:
        rest = rest[cand_lb[rest] < comp_best[cand_c[rest]]]
        if not rest.size:
            break
        start, cnt = passing(rest)
        live = cnt > 0
        rest, start, cnt = rest[live], start[live], cnt[live]
        if not rest.size:
            break
        take = max(1, int(np.searchsorted(np.cumsum(cnt), scanner.pair_budget, "right")))
        sel, start, cnt = rest[:take], start[:take], cnt[:take]
        rest = rest[take:]
        slots, rep = expand_ranges(start, cnt)
        p2, b2 = src.pts[slots], cand_b[sel][rep]
        d = rowwise_distances(X[p2], cells.centre[b2], "euclidean") * (1 - 1e-12)
        bound = np.maximum(np.maximum(d - r_hi[b2], cells.min_core[b2]), low[p2])
        keep = bound < comp_best[comp[p2]]
        scanner.scan_sorted(p2[keep], b2[keep], bound[keep])
