"""Row-wise top-k selection, the one building block every search backend shares.

All functions rank by (similarity desc, position asc) -- the evidence tie rule: positions
are sorted by node id, so equal similarities go to the smaller node id -- and represent a
"not a candidate" / padding entry by similarity ``-inf`` and position ``-1``.

* :func:`topk_entries`: the k best of flat ``(similarity, key)`` arrays (one query, or the
  running top-k of a global search);
* :func:`topk_by_row`: keep the k best of ``(row, similarity, position)`` triplets per row
  (the merge of partial answers: faiss hits from several indexes, exact blocks);
* :func:`row_candidates`: the entries of each row of a dense block at or above its k-th
  value (every tie stays);
* :func:`block_topk`: the same for a dense ``(rows, n)`` similarity block, with an
  ``np.partition`` pre-filter so only entries at or above each row's k-th value are sorted;
* :func:`fill_rows`: scatter sorted triplets into padded ``(rows, k)`` arrays;
* :func:`sort_rows`: the order that sorts each row of padded ``(rows, k)`` arrays;
* :func:`rescore_rows`: recompute selected similarities in float64 and re-sort;
* :func:`zero_query_topk`: the exact answer of a query whose embedding is the zero vector.

These are building blocks behind the backends' public entry points, which validate their
input: they trust theirs (finite similarities or ``-inf``, positions in range).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "BLOCK_ENTRIES",
    "topk_entries",
    "topk_by_row",
    "block_topk",
    "row_candidates",
    "fill_rows",
    "sort_rows",
    "rescore_rows",
    "zero_query_topk",
]

#: most similarities a backend materialises at once (float32: 16 MB)
BLOCK_ENTRIES = 1 << 22


def topk_entries(sims: np.ndarray, keys: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best entries of flat arrays by (similarity desc, key asc), sorted that way.

    ``keys`` are distinct (positions, or ``u * m + v`` pair keys). Entries below the k-th
    value are dropped by one ``np.partition`` before the sort, so the cost is
    ``O(n + k' log k')`` with ``k'`` the entries at or above the k-th value.
    """
    if sims.size > k:
        kth = -np.partition(-sims, k - 1)[k - 1]
        keep = sims >= kth  # ties at the k-th value stay: the key decides among them
        sims, keys = sims[keep], keys[keep]
    order = np.lexsort((keys, -sims))[:k]
    return sims[order], keys[order]


def topk_by_row(
    rows: np.ndarray, sims: np.ndarray, cols: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep the k best ``(sim desc, col asc)`` triplets of each row; ``-inf`` entries dropped.

    ``cols`` are distinct per row (positions, or any distinct tie-break keys). Returns the
    kept triplets sorted by row, then similarity descending, then column. Memory
    ``O(len(rows))``.
    """
    keep = np.isfinite(sims)
    rows, sims, cols = rows[keep], sims[keep], cols[keep]
    order = np.lexsort((cols, -sims, rows))
    rows, sims, cols = rows[order], sims[order], cols[order]
    if rows.size == 0:
        return rows, sims, cols
    start = np.r_[0, np.flatnonzero(np.diff(rows)) + 1]
    run = np.diff(np.r_[start, rows.size])
    rank = np.arange(rows.size) - np.repeat(start, run)
    sel = rank < k
    return rows[sel], sims[sel], cols[sel]


def block_topk(
    sim: np.ndarray, cols: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-k of each row of a dense block ``sim`` (``-inf`` = not a candidate).

    ``cols`` are the positions (distinct tie-break keys) of the block's columns; ties keep
    the smaller one. Returns ``(row, sim, position)`` triplets as :func:`topk_by_row`.
    Extra memory: ``O(sim.size)`` in the worst case of massive ties at the k-th value,
    ``O(rows * k)`` typically.
    """
    rr, cc, ss = row_candidates(sim, k)
    return topk_by_row(rr, ss, cols[cc], k)


def row_candidates(sim: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(row, col, sim)`` of the entries of each row of ``sim`` at or above the row's k-th
    largest value (all entries when a row has at most ``k``), sorted by row then column;
    ``-inf`` entries included only where a row has fewer than ``k`` finite ones (callers drop
    them).

    ``torch.topk`` picks k entries per row; where the k-th value occurs more often in the row
    than among the picks (a tie crossing the cut) the row's entries at or above it are read
    from a mask instead, so every tie stays. Extra memory: two boolean masks the size of
    ``sim`` plus O(rows * k + tied entries)."""
    import torch

    rows, n = sim.shape
    if n <= k:
        rr, cc = np.nonzero(np.ones_like(sim, dtype=bool))
        return rr.astype(np.int64), cc.astype(np.int64), sim[rr, cc]
    vals_t, cols_t = torch.topk(torch.from_numpy(np.ascontiguousarray(sim)), k, dim=1)
    vals, cols = vals_t.numpy(), cols_t.numpy().astype(np.int64)
    kth = vals[:, -1:]
    tied = np.count_nonzero(sim == kth, axis=1) > np.count_nonzero(vals == kth, axis=1)
    rr = np.repeat(np.arange(rows, dtype=np.int64), k)
    keep = ~tied[rr]
    rr, cc, ss = rr[keep], cols.reshape(-1)[keep], vals.reshape(-1)[keep]
    if tied.any():
        t_rows = np.flatnonzero(tied)
        tr, tc = np.nonzero(sim[t_rows] >= kth[t_rows])
        rr = np.r_[rr, t_rows[tr]]
        cc = np.r_[cc, tc.astype(np.int64)]
        ss = np.r_[ss, sim[t_rows[tr], tc]]
    order = np.lexsort((cc, rr))
    return rr[order], cc[order], ss[order]


def fill_rows(
    n_rows: int, k: int, rows: np.ndarray, sims: np.ndarray, pos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Scatter sorted triplets (at most k per row) into padded ``(n_rows, k)`` float64
    similarity and int64 position arrays."""
    out_s = np.full((n_rows, k), -np.inf, dtype=np.float64)
    out_p = np.full((n_rows, k), -1, dtype=np.int64)
    if rows.size:
        start = np.r_[0, np.flatnonzero(np.diff(rows)) + 1]
        rank = np.arange(rows.size) - np.repeat(start, np.diff(np.r_[start, rows.size]))
        out_s[rows, rank] = sims
        out_p[rows, rank] = pos
    return out_s, out_p


def sort_rows(sim: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Indices that sort each row of padded ``(rows, n)`` arrays by (similarity desc,
    position asc), padding (position ``-1``) last: apply with ``np.take_along_axis``."""
    key_pos = np.where(pos >= 0, pos, np.iinfo(np.int64).max)
    # row-wise lexsort: sort by position first, then stably by similarity descending
    by_pos = np.argsort(key_pos, axis=1, kind="stable")
    s1 = np.take_along_axis(sim, by_pos, axis=1)
    return np.take_along_axis(by_pos, np.argsort(-s1, axis=1, kind="stable"), axis=1)


def rescore_rows(
    emb: np.ndarray, queries: np.ndarray, sim: np.ndarray, pos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Recompute the similarities of the selected pairs ``(queries[i], pos[i, j])`` in
    float64 and re-sort each row (:func:`sort_rows`); padding stays at the end. Memory: the
    products run in chunks of at most :data:`BLOCK_ENTRIES` floats."""
    valid = pos >= 0
    if not valid.any():
        return sim, pos
    qi, ki = np.nonzero(valid)
    sim = sim.copy()
    step = max(1, BLOCK_ENTRIES // max(1, emb.shape[1]))  # pairs per chunk: 2 x 32 MB
    for lo in range(0, qi.size, step):
        i, j = qi[lo : lo + step], ki[lo : lo + step]
        # float64 arithmetic on the float32 rows (einsum casts per buffer, no float64 copies)
        sim[i, j] = np.einsum("ij,ij->i", emb[queries[i]], emb[pos[i, j]], dtype=np.float64)
    order = sort_rows(sim, pos)
    return np.take_along_axis(sim, order, axis=1), np.take_along_axis(pos, order, axis=1)


def zero_query_topk(
    predictions: np.ndarray, queries: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Exact answer for queries whose embedding is the zero vector: every candidate has
    similarity 0, so the k smallest positions of another class win (tie rule)."""
    sims = np.full((queries.size, k), -np.inf)
    pos = np.full((queries.size, k), -1, dtype=np.int64)
    qcls = predictions[queries]
    for c in np.unique(qcls):
        cand = np.flatnonzero(predictions != c)[:k]
        rows = np.flatnonzero(qcls == c)
        pos[np.ix_(rows, np.arange(cand.size))] = cand
        sims[np.ix_(rows, np.arange(cand.size))] = 0.0
    return sims, pos
