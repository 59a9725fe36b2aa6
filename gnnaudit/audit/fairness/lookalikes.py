"""Exact look-alike searches for the evidence contrast: a node's most similar nodes with the
same prediction (look-alikes) or another one (counterfactual evidences, Eq. 2 of the CE paper),
by blocked inner products over unit rows, and the similarity space without a feature's own
columns (:func:`similarity_without`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from gnnaudit._validation import check_allocation, check_int
from gnnaudit.audit.search.fit_inputs import unit_rows
from gnnaudit.audit.search.topk import block_topk
from gnnaudit.errors import InvalidInputError

__all__ = [
    "neighbours_by_prediction",
    "same_prediction_neighbours",
    "similarity_without",
    "BLOCK_BYTES",
]

#: default memory budget of one similarity block (bytes of float32)
BLOCK_BYTES = 64 * 2**20


def _top_k_rows(sim: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` of every row by (value desc, column asc); ``k <= sim.shape[1]`` finite
    entries per row. The search backends' :func:`~gnnaudit.audit.search.topk.block_topk` with
    the columns as tie-break keys. Returns ``(columns, values)``, each ``(rows, k)``, sorted."""
    rows, width = sim.shape
    _, vals, cols = block_topk(sim, np.arange(width, dtype=np.int64), k)
    return cols.reshape(rows, k), vals.reshape(rows, k)


def neighbours_by_prediction(
    embedding: Any,
    predictions: Any,
    queries: Any,
    k: int,
    *,
    same: bool = True,
    block_bytes: int = BLOCK_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` most similar positions whose prediction equals (``same=True``) or differs
    from (``same=False``) each query's, exactly.

    Parameters
    ----------
    embedding : (N, d) rows of unit norm (zero rows allowed): the inner product is the cosine.
    predictions : (N,) predicted class of each row.
    queries : (q,) positions of the query rows.
    k : neighbours per query (>= 1).
    same : same-prediction look-alikes (the query itself excluded) or other-prediction ones
        (counterfactual evidences, Eq. 2 of the CE paper).
    block_bytes : memory budget of one similarity block (float32), default 64 MiB.

    Returns ``(positions, similarity)``, each ``(q, k')`` with ``k'`` = ``k`` capped at the
    largest candidate set (wider would be padding only; an array the memory cannot hold is
    refused): per query its ``k`` most similar candidate rows by similarity descending and ties
    by the smaller position (= smaller node id when positions follow ascending node ids);
    padded with ``-1`` / ``-inf`` when fewer candidates exist.

    Blocked per query class ``c``: the queries of class ``c`` are multiplied with the candidate
    rows (class ``c``, or every other class) in row blocks of at most ``block_bytes`` of
    similarities; peak extra memory is about three times that plus a float32 copy of the
    candidate rows. Similarities are float32 inner products.
    """
    emb = np.asarray(embedding, dtype=np.float32)
    pred = np.asarray(predictions, dtype=np.int64).reshape(-1)
    if emb.ndim != 2 or pred.shape != (emb.shape[0],):
        raise InvalidInputError(
            f"embedding must be (N, d) and predictions (N,), got {emb.shape} and {pred.shape}"
        )
    k = check_int("k", k, minimum=1)
    block_bytes = check_int("block_bytes", block_bytes, minimum=4)
    q = np.asarray(queries, dtype=np.int64).reshape(-1)
    if q.size and (q.min() < 0 or q.max() >= pred.size):
        raise InvalidInputError(f"queries must be positions in [0, {pred.size - 1}]")
    if q.size:  # more candidates than the largest candidate set cannot exist: k is capped
        counts = np.bincount(pred - pred.min())
        widest = counts.max() - 1 if same else pred.size - counts[counts > 0].min()
        k = max(1, min(k, int(widest)))
    check_allocation("k", 12.0 * q.size * k, "the (queries x k) neighbour arrays")
    positions = np.full((q.size, k), -1, dtype=np.int64)
    similarity = np.full((q.size, k), -np.inf, dtype=np.float32)
    qclass = pred[q]
    for c in np.unique(qclass):  # a loop over classes, never over nodes
        members = np.flatnonzero((pred == c) if same else (pred != c))
        kk = min(k, members.size - 1 if same else members.size)
        if kk <= 0:
            continue
        rows_c = np.ascontiguousarray(emb[members])
        idx = np.flatnonzero(qclass == c)
        step = max(1, block_bytes // (4 * members.size))
        for start in range(0, idx.size, step):
            block = idx[start : start + step]
            sim = np.matmul(emb[q[block]], rows_c.T)
            if same:
                sim[np.arange(block.size), np.searchsorted(members, q[block])] = -np.inf
            cols, vals = _top_k_rows(sim, kk)
            positions[block, :kk] = members[cols]
            similarity[block, :kk] = vals
    return positions, similarity


def same_prediction_neighbours(
    embedding: Any,
    predictions: Any,
    queries: Any,
    k: int,
    *,
    block_bytes: int = BLOCK_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` most similar positions with the same prediction as each query, the query
    excluded: :func:`neighbours_by_prediction` with ``same=True`` (``k`` capped at the largest
    class's size minus one)."""
    return neighbours_by_prediction(
        embedding, predictions, queries, k, same=True, block_bytes=block_bytes
    )


def similarity_without(evidence: Any, columns: Sequence[int]) -> np.ndarray:
    """The search space's unit rows of ``x^agg`` with the columns ``columns`` left out.

    ``x^agg`` keeps the columns of ``x`` (Eq. 5-7 mix rows, never columns), so dropping a
    feature's columns from it removes the feature's own values, those of the node and those
    its neighbours contributed, from the kernel similarity. (The propagation's cosine weights
    were computed with every column; the feature still shapes *which* neighbours weigh most.)
    Memory: one float32 copy of the search space.
    """
    ks = evidence.ks_
    drop = set(int(c) for c in columns)
    keep = [c for c in range(int(ks.size(1))) if c not in drop]
    if not keep:
        raise InvalidInputError(
            "similarity='without-feature' leaves no column of x to compare nodes by (the "
            "feature is the only input); use similarity='full'"
        )
    return unit_rows(ks[:, torch.tensor(keep, dtype=torch.int64)], evidence.space_.node_ids)
