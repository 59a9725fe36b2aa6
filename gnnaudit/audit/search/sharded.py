r"""Sharded approximate evidence search: one faiss IVF index per contiguous range of rows, the
shard lists merged under the exact tie rule and re-ranked exactly.

Build. The ``m`` test nodes (positions, ascending node ids) are split into ``S`` contiguous,
near-equal shards: ``n_shards``, or ``ceil(m / shard_rows)`` (default ``shard_rows =``
:data:`DEFAULT_SHARD_ROWS`). Each shard gets one faiss index over its rows
(:mod:`~gnnaudit.audit.search.sharded_shard`): ``IndexIVFFlat`` with the inner-product metric,
``nlist`` lists (default :math:`\sqrt{n_s}`, capped at ``n_s // 39``; a flat index when that
is below 2) trained on a seeded sample of the shard (``train_rows``, default ``64 nlist``);
``IndexIVFPQ`` instead when the shard's flat codes (``4 d`` bytes per row) would exceed
``pq_above_bytes`` (default :data:`PQ_ABOVE_BYTES`, 1 GiB: about 2M rows at ``d = 128``) --
PQ stores ``d / 4 + 8`` bytes per row instead of ``4 d + 8``, which is what lets a worker hold
a shard of that size at all; its candidates are chosen on quantised similarities, so the
default oversampling is then :data:`DEFAULT_OVERSAMPLE_PQ` (measured in
``benchmarks/results/sharded_search.md``).

Local query of a node ``v`` (class ``c``), for ``k`` evidences:

1. every shard returns its ``k' = ceil(oversample * k)`` best rows of a class other than ``c``
   (faiss float32 similarity; ``nprobe`` lists, default
   :func:`~gnnaudit.audit.search.faiss_search.default_nprobe`);
2. each list is re-scored exactly (float64 products of the float32 unit rows,
   :func:`~gnnaudit.audit.search.topk.rescore_rows`, as the faiss backend and the brute-force
   oracle do) and the lists are merged by (similarity desc, position asc), the evidence tie
   rule (:func:`~gnnaudit.audit.search.sharded_merge.merge_shard_lists`);
3. (query, shard) pairs whose list may hide a top-k member -- a full list ending within the
   float32 error of the merged k-th similarity (ties at the boundary), or a query left with
   fewer than k candidates -- are re-answered by an exact scan of that shard
   (:mod:`~gnnaudit.audit.search.sharded_merge`).

So the result is the exact search's whenever the true top-k are among the candidates; with
``nprobe >= nlist`` (every list of every shard scanned, flat codes) they always are, and the
answer equals the exact oracle, ties included. Queries whose embedding is zero are answered
exactly (similarity 0 with everything: the smallest positions of another class). Global
pairs come from the local lists (:func:`~gnnaudit.audit.search.global_pairs.global_pairs_from_local`).

Memory (local, ``client=None``): the shards are built one after another and kept; together
they hold ``m (4 d + 8)`` bytes (IVF-Flat; ``m (d / 4 + 8)`` with PQ) plus ``nlist`` centroids
per shard, beside the space's own float32 embedding (measured at 1M x 64: 252 MB of indexes;
the shard being built also holds a copy of its rows and its training sample). Queries run in blocks of at most
``BLOCK_ENTRIES / (S k')`` queries, so the candidate arrays of a block hold at most
``BLOCK_ENTRIES`` = 4M entries (about 160 MB with their float64 re-scores); an exact shard
scan works in blocks of at most 4M similarities (16 MB).

Dask (``client=``): shard ``s`` is built on a worker from its own rows only -- memory-mapped
from ``embedding_path`` (a ``.npy`` file holding ``space.embedding``) when given, else
scattered to one worker as the ``n_s x d`` block -- never the whole database; the index stays
on that worker (a future). A query block is scattered once and every shard's search runs as
one task; the merge and re-rank run here, as in the local path. The indexes, seeds and
training samples are the same, so the answers equal the local ones.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from gnnaudit._distributed import check_client, gather_pinned
from gnnaudit._optional import require
from gnnaudit._validation import check_float, check_int
from gnnaudit.audit.search.base import (
    EvidenceSearcher,
    SearchSpace,
    check_space,
    make_rng,
    unknown_params,
)
from gnnaudit.audit.search.sharded_merge import (
    merge_shard_lists,
    shard_bounds,
    shard_exact,
    tie_tolerance,
    uncertain_shards,
)
from gnnaudit.audit.search.sharded_shard import ShardIndex, ShardParams, build_shard
from gnnaudit.audit.search.topk import BLOCK_ENTRIES, rescore_rows, zero_query_topk
from gnnaudit.errors import InvalidInputError

__all__ = [
    "ShardedSearcher",
    "DEFAULT_SHARD_ROWS",
    "PQ_ABOVE_BYTES",
    "DEFAULT_OVERSAMPLE",
    "DEFAULT_OVERSAMPLE_PQ",
]

logger = logging.getLogger(__name__)

#: rows per shard when neither ``n_shards`` nor ``shard_rows`` is given (128 MiB of flat
#: codes at d = 128)
DEFAULT_SHARD_ROWS = 2**18
#: a shard whose flat codes (4 d bytes per row) exceed this gets IVF-PQ codes (module doc)
PQ_ABOVE_BYTES = 2**30
#: ``k' = ceil(oversample * k)`` candidates asked of each shard (IVF-Flat / flat shards) ...
DEFAULT_OVERSAMPLE = 2.0
#: ... and when a shard has IVF-PQ codes: their candidates are ranked on quantised
#: similarities (1M x 64 clustered rows, 4 shards of 16-byte codes: recall@10 0.996 at
#: oversample 8; ``benchmarks/results/sharded_search.md``)
DEFAULT_OVERSAMPLE_PQ = 8.0

_NAME = "index_params"

Lists = list[tuple[np.ndarray, np.ndarray]]


# ----------------------------------------------------------------------------- worker tasks
def _build_from_rows(
    rows: np.ndarray, predictions: np.ndarray, lo: int, params: ShardParams, shard: int
) -> ShardIndex:
    """Worker task: the index of one shard from its scattered rows."""
    return build_shard(rows, predictions, lo, params, shard)


def _build_from_path(
    path: str, lo: int, hi: int, predictions: np.ndarray, params: ShardParams, shard: int
) -> ShardIndex:
    """Worker task: the index of one shard from rows ``lo:hi`` of a memory-mapped ``.npy``."""
    emb = np.load(path, mmap_mode="r", allow_pickle=False)
    return build_shard(np.array(emb[lo:hi], dtype=np.float32), predictions, lo, params, shard)


def _search_task(
    shard: ShardIndex, xq: np.ndarray, qclass: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Worker task: one shard's lists for a query block."""
    return shard.search(xq, qclass, width)


class ShardedSearcher(EvidenceSearcher):
    """Sharded faiss IVF search with an exact merge and re-rank (module doc).

    Parameters (``index_params`` of ``CounterfactualEvidence(backend="sharded")``)
    ----------
    n_shards : number of contiguous shards (at most the number of test nodes); or
    shard_rows : rows per shard, ``S = ceil(m / shard_rows)`` (default
        :data:`DEFAULT_SHARD_ROWS` when neither is given; not both).
    nlist : IVF lists per shard (``None``: :math:`\\sqrt{n_s}` capped at ``n_s // 39``; an
        explicit value is capped at the shard's rows).
    nprobe : lists scanned per shard (``None``: ``default_nprobe(nlist, d)``; ``>= nlist``
        scans every list: exact). Must not exceed an explicit ``nlist``.
    oversample : ``k' = ceil(oversample * k)`` candidates per shard (>= 1; ``None``: 2, or 8
        when a shard has IVF-PQ codes).
    pq_above_bytes : IVF-PQ for shards whose flat codes exceed this many bytes (default 1 GiB).
    pq_m : PQ sub-quantisers (must divide ``d``; default about ``d / 4``).
    train_rows : rows sampled from a shard to train its lists (default ``64 nlist``, at least
        16,384 for PQ).
    client : a ``dask.distributed.Client``: shards built and searched on its workers.
    embedding_path : a ``.npy`` file holding the space's embedding: Dask workers
        memory-map their shard's rows from it (checked against the space at build).
    random_state : seed of the training samples and k-means.
    """

    name = "sharded"
    _PARAMS = (
        "n_shards",
        "shard_rows",
        "nlist",
        "nprobe",
        "oversample",
        "pq_above_bytes",
        "pq_m",
        "train_rows",
        "client",
        "embedding_path",
    )

    def __init__(  # noqa: PLR0913  # backend: mirrors its documented index_params
        self,
        n_shards: int | None = None,
        *,
        shard_rows: int | None = None,
        nlist: int | None = None,
        nprobe: int | None = None,
        oversample: float | None = None,
        pq_above_bytes: int = PQ_ABOVE_BYTES,
        pq_m: int | None = None,
        train_rows: int | None = None,
        client: Any = None,
        embedding_path: str | Path | None = None,
        random_state: Any = None,
        **unknown: Any,
    ) -> None:
        unknown_params(type(self).__name__, unknown, self._PARAMS)
        self.n_shards = n_shards
        self.shard_rows = shard_rows
        self.nlist = nlist
        self.nprobe = nprobe
        self.oversample = oversample
        self.pq_above_bytes = pq_above_bytes
        self.pq_m = pq_m
        self.train_rows = train_rows
        self.client = client
        self.embedding_path = embedding_path
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _opt_int(self, key: str, minimum: int = 1) -> int | None:
        value = getattr(self, key)
        return None if value is None else check_int(f"{_NAME}[{key!r}]", value, minimum=minimum)

    def _n_shards(self, m: int) -> int:
        n_shards, shard_rows = self._opt_int("n_shards"), self._opt_int("shard_rows")
        if n_shards is not None and shard_rows is not None:
            raise InvalidInputError(
                f"{_NAME}: give n_shards ({n_shards}) or shard_rows ({shard_rows}), not both"
            )
        if n_shards is None:
            n_shards = math.ceil(m / (shard_rows or DEFAULT_SHARD_ROWS))
        return min(n_shards, m)

    def _shard_params(self, d: int) -> ShardParams:
        nlist, nprobe = self._opt_int("nlist"), self._opt_int("nprobe")
        if nlist is not None and nprobe is not None and nprobe > nlist:
            raise InvalidInputError(
                f"{_NAME}['nprobe'] must be <= nlist ({nlist}): nprobe = nlist already scans "
                f"every list; got nprobe={nprobe}"
            )
        if self.oversample is not None:
            check_float(f"{_NAME}['oversample']", self.oversample, minimum=1.0)
        pq_m = self._opt_int("pq_m")
        if pq_m is not None and d % pq_m:
            raise InvalidInputError(
                f"{_NAME}['pq_m'] must divide the embedding dimension {d}, got {pq_m}"
            )
        return ShardParams(
            nlist=nlist,
            nprobe=nprobe,
            pq_above_bytes=check_int(f"{_NAME}['pq_above_bytes']", self.pq_above_bytes, minimum=0),
            pq_m=pq_m,
            train_rows=self._opt_int("train_rows"),
            seed=int(make_rng(self.random_state).integers(0, 2**31 - 1)),
        )

    def _embedding_path(self, emb: np.ndarray) -> str | None:
        """``embedding_path`` checked against ``emb``: a float32 ``.npy`` of the same shape
        whose rows (a seeded sample of 64) equal the space's."""
        if self.embedding_path is None:
            return None
        path = str(self.embedding_path)
        try:
            mm = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InvalidInputError(
                f"{_NAME}['embedding_path']={path!r} is not a readable .npy file: {exc}"
            ) from exc
        if mm.shape != emb.shape or mm.dtype != np.float32:
            raise InvalidInputError(
                f"{_NAME}['embedding_path'] must hold the space's float32 embedding of shape "
                f"{emb.shape}; {path!r} holds {mm.dtype} {mm.shape}"
            )
        rows = np.sort(np.random.default_rng(0).choice(emb.shape[0], min(64, emb.shape[0])))
        if not np.array_equal(np.asarray(mm[rows]), emb[rows]):
            raise InvalidInputError(
                f"{_NAME}['embedding_path']={path!r} holds another embedding than the space's"
            )
        return path

    # ------------------------------------------------------------------ build
    def build(self, space: SearchSpace) -> ShardedSearcher:
        """Split ``space`` into shards and build their indexes (module doc)."""
        require("faiss", "backend='sharded' (the sharded faiss evidence search)")
        space = check_space(space)
        x, pred = space.embedding, space.predictions
        m, d = x.shape
        self.n_shards_ = self._n_shards(m)
        self.params_ = self._shard_params(d)
        self.client_ = check_client(self.client, f"{_NAME}['client']")
        path = self._embedding_path(x)
        self.bounds_ = shard_bounds(m, self.n_shards_)
        self.classes_, self.class_index_ = np.unique(pred, return_inverse=True)
        n_cls = self.classes_.size
        self.shard_counts_ = np.stack(
            [
                np.bincount(self.class_index_[lo:hi], minlength=n_cls)
                for lo, hi in zip(self.bounds_[:-1], self.bounds_[1:], strict=True)
            ]
        )  # (S, C) rows of each class per shard
        self.class_sizes_ = self.shard_counts_.sum(axis=0)
        self.tol_ = tie_tolerance(d)
        self.norms_ = np.linalg.norm(x, axis=1)
        self.space_ = space
        if self.client_ is None:
            self.shards_: list[Any] = [
                build_shard(x[lo:hi], self.class_index_[lo:hi], int(lo), self.params_, s)
                for s, (lo, hi) in enumerate(self._ranges())
            ]
            self.kinds_ = [sh.kind for sh in self.shards_]
        else:
            self.shards_ = self._build_remote(x, path)
            self.kinds_ = gather_pinned(
                self.client_,
                [self.client_.submit(getattr, f, "kind", pure=False) for f in self.shards_],
                "building the search shards",
            )
        self.certify_ = np.array([kind != "ivfpq" for kind in self.kinds_])
        default = DEFAULT_OVERSAMPLE if self.certify_.all() else DEFAULT_OVERSAMPLE_PQ
        self.oversample_ = default if self.oversample is None else float(self.oversample)
        logger.info("ShardedSearcher built %d shards: %s", self.n_shards_, self.kinds_)
        return self

    def _ranges(self) -> list[tuple[int, int]]:
        b = self.bounds_
        return [(int(lo), int(hi)) for lo, hi in zip(b[:-1], b[1:], strict=True)]

    def _build_remote(self, x: np.ndarray, path: str | None) -> list[Any]:
        """Futures of the shard indexes, each built on a worker from its own rows."""
        client = self.client_
        ranges = self._ranges()
        preds = [self.class_index_[lo:hi] for lo, hi in ranges]
        if path is not None:
            futures = [
                client.submit(_build_from_path, path, lo, hi, p, self.params_, s, pure=False)
                for s, ((lo, hi), p) in enumerate(zip(ranges, preds, strict=True))
            ]
        else:
            blocks = client.scatter([np.ascontiguousarray(x[lo:hi]) for lo, hi in ranges])
            futures = [
                client.submit(_build_from_rows, b, p, lo, self.params_, s, pure=False)
                for s, (b, p, (lo, _)) in enumerate(zip(blocks, preds, ranges, strict=True))
            ]
        gather_pinned(client, futures, "building the search shards")  # a failed build raises
        return futures

    # ------------------------------------------------------------------ queries
    def _local_positions(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        out_s = np.full((q.size, k), -np.inf)
        out_p = np.full((q.size, k), -1, dtype=np.int64)
        zero = self.norms_[q] == 0
        if zero.any():
            out_s[zero], out_p[zero] = zero_query_topk(self.class_index_, q[zero], k)
        live = np.flatnonzero(~zero)
        k_prime = math.ceil(self.oversample_ * k)
        step = max(1, BLOCK_ENTRIES // (self.n_shards_ * k_prime))
        for lo in range(0, live.size, step):
            rows = live[lo : lo + step]
            out_s[rows], out_p[rows] = self._search_block(q[rows], k, k_prime)
        return out_s, out_p

    def _shard_lists(self, xq: np.ndarray, qclass: np.ndarray, widths: np.ndarray) -> Lists:
        """Every shard's ``(faiss similarity, position)`` lists of the query block."""
        if self.client_ is None:
            return [
                sh.search(xq, qclass, int(w)) for sh, w in zip(self.shards_, widths, strict=True)
            ]
        client = self.client_
        xq_f, qc_f = client.scatter([xq, qclass])
        futures = [
            client.submit(_search_task, sh, xq_f, qc_f, int(w), pure=False)
            for sh, w in zip(self.shards_, widths, strict=True)
        ]
        return list(gather_pinned(client, futures, "a sharded search"))

    def _search_block(self, qb: np.ndarray, k: int, k_prime: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k of a block of non-zero queries: shard lists, exact re-score and merge,
        exact scans of the uncertain (query, shard) pairs (module doc)."""
        x = self.space_.embedding
        sizes = np.diff(self.bounds_)
        widths = np.minimum(k_prime, sizes)
        qc = self.class_index_[qb]
        raw = self._shard_lists(np.ascontiguousarray(x[qb]), qc, widths)
        lists = [rescore_rows(x, qb, s.astype(np.float64), p) for s, p in raw]
        sim, pos = merge_shard_lists(lists, k)
        candidates = sizes[None, :] - self.shard_counts_[:, qc].T  # (q, S)
        all_cand = self.space_.size - self.class_sizes_[qc]
        short = (pos >= 0).sum(axis=1) < np.minimum(k, all_cand)
        returned = np.stack([(p >= 0).sum(axis=1) for _, p in raw], axis=1)
        last = np.stack([s[:, w - 1] for (s, _), w in zip(raw, widths, strict=True)], axis=1)
        redo = uncertain_shards(
            last, returned, widths, candidates, sim[:, k - 1], short, self.tol_, self.certify_
        )
        if not redo.any():
            return sim, pos
        logger.debug("sharded: %d (query, shard) pairs re-answered exactly", int(redo.sum()))
        for s in np.flatnonzero(redo.any(axis=0)):
            rows = np.flatnonzero(redo[:, s])
            lo, hi = self._ranges()[s]
            es, ep = shard_exact(x, self.class_index_, lo, hi, qb[rows], k, self.tol_)
            es, ep = rescore_rows(x, qb[rows], es.astype(np.float64), ep)
            fs = np.full((qb.size, es.shape[1]), -np.inf)
            fp = np.full((qb.size, es.shape[1]), -1, dtype=np.int64)
            fs[rows], fp[rows] = es, ep
            ls, lp = lists[s]
            lp = lp.copy()
            lp[rows] = -1  # the exact scan replaces the shard's list for these queries
            lists[s] = (np.where(lp >= 0, ls, -np.inf), lp)
            lists.append((fs, fp))
        return merge_shard_lists(lists, k)
