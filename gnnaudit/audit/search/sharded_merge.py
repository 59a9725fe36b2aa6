r"""The merge side of the sharded evidence search: shard ranges, the k-way merge of the shard
lists under the evidence tie rule, the boundary test that decides when a shard's list may
hide a top-k member, and the exact scan of one shard that answers such a case.

Why the result is exact when every shard is searched exhaustively (``nprobe >= nlist``, flat
codes). Let ``T`` be the true k-th similarity of a query (float64) and ``K <= T`` the k-th
similarity of the merged, exactly re-scored candidates. A member ``u`` of the true top-k that
shard ``s`` did not return lies below (or ties with) the shard's last returned candidate in
faiss' float32 order, and faiss' products differ from the exact ones by at most
:func:`tie_tolerance` ``t``: so ``last_s >= fs(u) >= T - t >= K - t``. Hence when no shard
whose list is full has ``last_s >= K - t`` (:func:`uncertain_shards`), every member of the
true top-k is among the candidates, and sorting them by (exact similarity desc, position asc)
gives exactly the exact search's answer. Uncertain (query, shard) pairs -- ties or near-ties
of more than ``k' - k`` rows at the boundary, or a query left with fewer than ``k`` candidates
-- are re-answered by :func:`shard_exact` (every row within ``t`` of the shard's k-th value), and
since re-answering can only raise ``K``, one pass suffices.

With ``nprobe < nlist`` (or IVF-PQ codes) the lists are approximate and so is the result; the
same test still resolves boundary ties within the probed lists.
"""

from __future__ import annotations

import numpy as np

from gnnaudit.audit.search.topk import BLOCK_ENTRIES, sort_rows

__all__ = [
    "shard_bounds",
    "tie_tolerance",
    "merge_shard_lists",
    "uncertain_shards",
    "shard_exact",
]


def shard_bounds(m: int, n_shards: int) -> np.ndarray:
    """``n_shards + 1`` boundaries of contiguous, near-equal, non-empty row ranges of
    ``range(m)`` (shard ``s`` is ``bounds[s]:bounds[s + 1]``); ``n_shards <= m``."""
    return (np.arange(n_shards + 1, dtype=np.int64) * m) // n_shards


def tie_tolerance(d: int) -> float:
    r"""How far faiss' float32 inner product of two unit vectors of ``d`` dimensions may be
    from the exact one: twice the classic bound :math:`\gamma_d = d u / (1 - d u)`,
    :math:`u = 2^{-24}` (with :math:`\sum_i |x_i y_i| \le 1` for unit rows), and at least
    ``1e-6`` (float32 unit norms themselves are off by ~1e-7)."""
    u = 2.0**-24
    return max(1e-6, 2.0 * d * u / (1.0 - d * u))


def merge_shard_lists(
    lists: list[tuple[np.ndarray, np.ndarray]], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-shard ``(similarity, position)`` lists (each ``(q, width)``, any widths,
    padded with ``-inf`` / ``-1``) into the top-``k`` of each row by (similarity desc,
    position asc) -- the evidence tie rule -- padded to exactly ``k`` columns. The shards
    must hold disjoint positions (a position appears once per row)."""
    q = lists[0][0].shape[0] if lists else 0
    sims = [np.asarray(s, dtype=np.float64) for s, _ in lists]
    poss = [np.asarray(p, dtype=np.int64) for _, p in lists]
    sims.append(np.full((q, k), -np.inf))
    poss.append(np.full((q, k), -1, dtype=np.int64))  # padding up to k columns
    sim, pos = np.hstack(sims), np.hstack(poss)
    sim = np.where(pos >= 0, sim, -np.inf)
    order = sort_rows(sim, pos)[:, :k]
    return np.take_along_axis(sim, order, axis=1), np.take_along_axis(pos, order, axis=1)


def uncertain_shards(
    last: np.ndarray,
    returned: np.ndarray,
    width: np.ndarray,
    candidates: np.ndarray,
    kth: np.ndarray,
    short: np.ndarray,
    tol: float,
    certify: np.ndarray,
) -> np.ndarray:
    """``(q, S)`` booleans: the (query, shard) pairs whose list may hide a top-k member.

    ``last``: the shard's last returned faiss similarity per query; ``returned``: how many it
    returned; ``width``: ``(S,)`` list length asked of each shard; ``candidates``: ``(q, S)``
    rows of another class in the shard; ``kth``: each query's k-th merged exact similarity
    (``-inf`` when it has fewer than k); ``short``: queries with fewer than ``min(k, all
    their candidates)`` merged candidates; ``certify``: ``(S,)`` shards whose faiss
    similarities are exact up to ``tol`` (flat codes; not IVF-PQ).

    A pair is uncertain when the shard did not return all its candidates, and either the
    query is short, or the shard's list is full and ends within ``tol`` of ``kth`` (module
    doc)."""
    incomplete = returned < candidates
    at_boundary = (returned >= width[None, :]) & (last >= kth[:, None] - tol) & certify[None, :]
    return incomplete & (at_boundary | short[:, None])


def shard_exact(
    x: np.ndarray,
    predictions: np.ndarray,
    lo: int,
    hi: int,
    queries: np.ndarray,
    k: int,
    tol: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Every row of shard ``lo:hi`` of another class whose float32 similarity with the query
    is at least the shard's k-th largest minus ``tol`` (all candidates when fewer than k),
    as ``(similarity, position)`` arrays padded with ``-inf`` / ``-1`` (width: the longest
    row). These include every member of the shard's exact (float64) top-k. Memory: blocks
    of at most :data:`~gnnaudit.audit.search.topk.BLOCK_ENTRIES` similarities."""
    n = hi - lo
    step = max(1, BLOCK_ENTRIES // max(1, n))
    rows_all, cols_all, sims_all = [], [], []
    shard_pred = predictions[lo:hi]
    for start in range(0, queries.size, step):
        qb = queries[start : start + step]
        sim = np.matmul(x[qb], x[lo:hi].T)
        sim[predictions[qb][:, None] == shard_pred[None, :]] = -np.inf
        if n > k:
            kth = np.partition(sim, n - k, axis=1)[:, n - k]
        else:
            kth = np.full(qb.size, -np.inf, dtype=sim.dtype)
        keep = np.isfinite(sim) & (sim >= kth[:, None] - tol)
        r, c = np.nonzero(keep)
        rows_all.append(r + start)
        cols_all.append(c)
        sims_all.append(sim[r, c])
    r, c, s = np.concatenate(rows_all), np.concatenate(cols_all), np.concatenate(sims_all)
    counts = np.bincount(r, minlength=queries.size)
    width = max(1, int(counts.max(initial=0)))
    out_s = np.full((queries.size, width), -np.inf, dtype=np.float32)
    out_p = np.full((queries.size, width), -1, dtype=np.int64)
    if r.size:  # np.nonzero gives row-major order: rank within a row by position
        start_of = np.r_[0, np.cumsum(counts)[:-1]]
        rank = np.arange(r.size) - start_of[r]
        out_s[r, rank] = s
        out_p[r, rank] = c + lo
    return out_s, out_p
