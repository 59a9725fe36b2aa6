r"""Global top-k evidence pairs from local top-k lists (CE paper Alg. 3, generalised to top-k).

The paper keeps the top-1 local evidence of every node in a bucket of size k. Generalised: a
pair {v, u} of the global top-k has u among v's local top-k (and v among u's): were u not
there, v would have k candidates forming k distinct pairs ranked before {v, u} -- the local
tie rule (smaller node id) and the global one (smaller ``(u, v)`` pair) agree on pairs that
share v. So merging the local top-k lists of every node into unique unordered pairs and
keeping the k best gives the global top-k, exactly when the lists are exact, and as good as
the lists otherwise (a neighbour missed from one end can still be found from the other).

Backends whose local search is cheaper than a global scan (``sorted``, ``index``, ``faiss``)
answer global queries this way; ``exact`` has its own blocked scan. The functions are
building blocks behind the backends' validated entry points and trust their input.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["global_pairs_from_local", "merge_pairs", "PAIR_CHUNK", "FIRST_LIST_LENGTH"]

#: queries per call of the local search during a global search
PAIR_CHUNK = 4096
#: local list length of the first pass of a global search
FIRST_LIST_LENGTH = 16

LocalPositions = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]
Pairs = tuple[np.ndarray, np.ndarray, np.ndarray]


def merge_pairs(
    size: int,
    queries: np.ndarray,
    sim: np.ndarray,
    pos: np.ndarray,
    k: int,
    best: Pairs | None,
) -> Pairs:
    """Merge local lists (``(q, k')`` similarities / positions of ``queries``, padded with
    ``-1``) into the running ``best`` pairs; keep the k best unique unordered pairs.

    Returns ``(similarity, u, v)`` sorted by (similarity desc, u, v), ``u < v`` positions in
    ``[0, size)``. A pair found from both ends (equal similarity) is kept once.
    """
    valid = pos >= 0
    qi, ki = np.nonzero(valid)
    a, b = queries[qi], pos[qi, ki]
    u, v, s = np.minimum(a, b), np.maximum(a, b), sim[qi, ki]
    if best is not None:
        s, u, v = np.r_[best[0], s], np.r_[best[1], u], np.r_[best[2], v]
    order = np.lexsort((v, u, -s))
    s, u, v = s[order], u[order], v[order]
    # drop duplicates (the same pair found from both ends), keep the first (best) occurrence
    _, first = np.unique(u * np.int64(size) + v, return_index=True)
    first = np.sort(first)[:k]
    return s[first], u[first], v[first]


def global_pairs_from_local(
    local_positions: LocalPositions,
    size: int,
    k: int,
    *,
    first: tuple[np.ndarray, np.ndarray] | None = None,
) -> Pairs:
    r"""The top-k unordered pairs from the local lists returned by ``local_positions``.

    ``local_positions(queries, k')`` must return ``(similarity, position)`` arrays of shape
    ``(len(queries), k')`` sorted by (similarity desc, position asc), padded with
    ``-inf`` / ``-1``. To avoid asking every node for k neighbours, the lists grow
    adaptively: first ``min(k, 16)`` per node; then, with :math:`\tau` the k-th best pair
    similarity so far, only nodes whose last (k'-th) similarity is still :math:`\ge\tau`
    (they may hide more pairs above :math:`\tau`) are asked again with k' doubled, until
    k' = k. With exact local lists the result is exact.

    ``first``: ``(similarity, position)`` lists of every node (row ``i`` = position ``i``),
    as ``local_positions`` returns them, already computed (the audit's local evidences); they
    are the first pass (their width, at most k, replaces 16), so no node is searched twice.
    The argument above holds for any first width, so the result is the same.

    Returns ``(similarity, u, v)`` of at most k pairs (``u < v`` positions), sorted by
    (similarity desc, u, v). Memory: ``PAIR_CHUNK * k'`` local results at a time plus the k
    best pairs.
    """
    k_max = max(1, min(k, size - 1))
    k_cur = min(k_max, FIRST_LIST_LENGTH)
    best: Pairs | None = None
    tail = np.full(size, -np.inf)  # last similarity of each node's (full) local list
    todo = np.arange(size, dtype=np.int64)

    def absorb(q: np.ndarray, sim: np.ndarray, pos: np.ndarray) -> None:
        nonlocal best
        best = merge_pairs(size, q, sim, pos, k, best)
        full = pos[:, -1] >= 0  # incomplete lists hold every candidate already
        tail[q] = np.where(full, sim[:, -1], -np.inf)

    if first is not None and first[1].shape[0] == size and first[1].shape[1] > 0:
        k_cur = min(k_max, first[1].shape[1])
        for lo in range(0, size, PAIR_CHUNK):
            q = todo[lo : lo + PAIR_CHUNK]
            absorb(q, first[0][q, :k_cur], first[1][q, :k_cur])
        todo = _still_open(best, tail, k) if k_cur < k_max else todo[:0]
        k_cur = min(k_max, 2 * k_cur)
    while todo.size:
        for lo in range(0, todo.size, PAIR_CHUNK):
            q = todo[lo : lo + PAIR_CHUNK]
            absorb(q, *local_positions(q, k_cur))
        if k_cur >= k_max:
            break
        todo = _still_open(best, tail, k)
        k_cur = min(k_max, 2 * k_cur)
    if best is None:
        empty = np.zeros(0, dtype=np.int64)
        return np.zeros(0, dtype=np.float64), empty, empty
    return best


def _still_open(best: Pairs | None, tail: np.ndarray, k: int) -> np.ndarray:
    """Nodes whose list may hide a pair above the k-th best similarity so far."""
    assert best is not None
    tau = best[0][k - 1] if best[0].size >= k else -np.inf
    return np.flatnonzero(tail >= tau)
