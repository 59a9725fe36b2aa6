r"""Exact counterfactual-evidence search (the paper's LocalCE-B / GlobalCE-B, made blocked).

Local top-k of a query ``v`` of predicted class ``c``: the candidates are all test nodes of the
other classes (pre-partitioned by class, the paper's optimisation (1)); a block of queries of
class ``c`` is multiplied with the candidates' unit embeddings in one matrix product, and the
top-k of each row is selected with ``np.partition`` plus a stable composite sort, so ties are
broken exactly by the smaller position (= smaller node id).

Global top-k: only pairs of *different* classes are scored, each unordered pair once (class
``a`` rows against class ``b > a`` columns), in row blocks; a running top-k is merged with each
block's entries at or above the current k-th similarity. Ties are broken by the smaller
``(u, v)`` position pair, ``u < v``.

Memory bound: every similarity block holds at most ``block_bytes`` bytes (default 64 MiB;
``device_block_bytes``, default 1 GiB, on a torch device) of float32, and the index arrays built from one block are at most 4x that in the worst case of
massive ties (typically O(k) per block). The global running top-k holds ``O(k)`` entries.

Dask (``client=``, :mod:`gnnaudit._distributed`): the same blocks -- same rows, same columns,
hence the same float32 products -- run on the workers (on their CPUs; the class-sorted
embedding is scattered once). A worker returns the rows of its local blocks, or the running
global top-k of its contiguous run of global blocks; the runs are merged with the same
(similarity desc, pair key asc) rule, so the answers equal the single-process CPU answers
exactly. The main process then holds ``O(q k)`` (local) or ``O(k x tasks)`` (global) entries.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from gnnaudit._distributed import check_client, map_blocks, n_workers, split_blocks
from gnnaudit._validation import check_device, check_int
from gnnaudit.audit.search.base import EvidenceSearcher, SearchSpace, check_space
from gnnaudit.audit.search.similarity_blocks import DeviceBlocks, HostBlocks
from gnnaudit.audit.search.topk import topk_by_row, topk_entries

__all__ = ["ExactSearcher"]

logger = logging.getLogger(__name__)


#: one local block: (query slots, class bounds lo, hi, kk)
_LocalUnit = tuple[np.ndarray, int, int, int]
#: one global block: rows r0:r1 of class a against columns c0:c1 of class b > a
_GlobalJob = tuple[int, int, int, int]


def _local_block(
    blocks: HostBlocks | DeviceBlocks,
    perm: np.ndarray,
    slots: np.ndarray,
    lo: int,
    hi: int,
    kk: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``kk`` ``(similarity, position)`` rows of the queries at sorted ``slots`` (all of
    one class occupying sorted slots ``lo:hi``) over the other classes' candidates."""
    key = np.concatenate([perm[:lo], perm[hi:]])
    rr, cc, ss = blocks.local_candidates(slots, lo, hi, kk)
    # every row has >= kk finite candidates: exactly kk triplets per row
    _, vals, pos = topk_by_row(rr, ss, key[cc], kk)
    return vals.reshape(slots.size, kk), pos.reshape(slots.size, kk)


def _local_task(
    units: list[_LocalUnit], emb: np.ndarray, perm: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Worker task: :func:`_local_block` of each unit, on the CPU."""
    blocks = HostBlocks(emb)
    return [_local_block(blocks, perm, *unit) for unit in units]


def _global_scan(
    blocks: HostBlocks | DeviceBlocks,
    jobs: list[_GlobalJob],
    perm: np.ndarray,
    k: int,
    bar: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Running global top-``k`` ``(similarity, u * m + v)`` over the blocks ``jobs``."""
    m = perm.size
    best_s = np.empty(0, dtype=np.float32)
    best_key = np.empty(0, dtype=np.int64)  # u * m + v, u < v
    for r0, r1, c0, c1 in jobs:
        thr = float(best_s[-1]) if best_s.size >= k else -np.inf
        r, c, vals = blocks.global_candidates(r0, r1, c0, c1, thr, k)
        u, v = perm[r0 + r], perm[c0 + c]
        best_s = np.concatenate([best_s, vals])
        best_key = np.concatenate([best_key, np.minimum(u, v) * m + np.maximum(u, v)])
        best_s, best_key = topk_entries(best_s, best_key, k)
        if bar is not None:
            bar.update(1)
    return best_s, best_key


def _global_task(
    jobs: list[_GlobalJob], emb: np.ndarray, perm: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Worker task: :func:`_global_scan` of a contiguous run of global blocks, on the CPU."""
    return _global_scan(HostBlocks(emb), jobs, perm, k)


class ExactSearcher(EvidenceSearcher):
    """Exact blocked search over the test nodes' unit KS embeddings (the oracle backend).

    The embedding is stored once, sorted by predicted class (stable, so ascending positions
    within a class): the candidates of class ``c`` are the two contiguous slices before and
    after class ``c``, multiplied without any per-class copy.

    Parameters
    ----------
    block_bytes : memory budget of one similarity block in bytes (default 64 MiB).
    progress : show tqdm bars for long batched local queries and the global search.
    random_state : accepted for a uniform backend signature; the search is deterministic.
    device : where the similarity products run (None / ``"cpu"``: numpy's BLAS; ``"cuda"``
        ...: torch on that device, the embedding copied there once at ``build``). On a device
        the products *and* each block's candidate selection run there
        (:class:`~gnnaudit.audit.search.similarity_blocks.DeviceBlocks`); only the candidates come
        back, and the final top-k applies the same tie rule on the host, so results equal the
        CPU path up to the float32 rounding of the products.
    device_block_bytes : similarity-block budget on a device (default 1 GiB; a GPU holds far
        more than the host budget, and bigger blocks mean fewer launches and round trips).
    client : a ``dask.distributed.Client`` (optional, ``gnnaudit[distributed]``): the
        similarity blocks of batched local queries and of the global search run on its
        workers' CPUs (``device`` is then not used); results equal the single-process CPU
        results exactly.
    """

    name = "exact"

    def __init__(
        self,
        block_bytes: int = 64 * 2**20,
        *,
        progress: bool = False,
        random_state: Any = None,
        device: Any = None,
        client: Any = None,
        device_block_bytes: int = 2**30,
    ) -> None:
        self.block_bytes = block_bytes
        self.progress = progress
        self.random_state = random_state
        self.device = device
        self.client = client
        self.device_block_bytes = device_block_bytes

    # ------------------------------------------------------------------ build
    def build(self, space: SearchSpace) -> ExactSearcher:
        self.block_bytes_ = check_int("block_bytes", self.block_bytes, minimum=4)
        space = check_space(space)
        emb, pred = space.embedding, space.predictions
        perm = np.argsort(pred, kind="stable")
        self.perm_ = perm.astype(np.int64)  # sorted slot -> position
        self.slot_ = np.empty_like(self.perm_)  # position -> sorted slot
        self.slot_[perm] = np.arange(perm.size)
        self.sorted_embedding_ = np.ascontiguousarray(emb[perm], dtype=np.float32)
        self.predictions_ = pred
        self.classes_, starts = np.unique(pred[perm], return_index=True)
        ends = np.append(starts[1:], pred.size)
        self.bounds_ = {
            int(c): (int(a), int(b)) for c, a, b in zip(self.classes_, starts, ends, strict=True)
        }
        self.space_ = space
        device = check_device("device", self.device)
        self.client_ = check_client(self.client)
        self.blocks_: HostBlocks | DeviceBlocks = HostBlocks(self.sorted_embedding_)
        self.block_budget_ = self.block_bytes_
        if self.client_ is None and device is not None and device.type != "cpu":
            self.blocks_ = DeviceBlocks(self.sorted_embedding_, device)
            self.block_budget_ = check_int("device_block_bytes", self.device_block_bytes, minimum=4)
        return self

    def _bar(self, total: int, desc: str) -> Any:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, disable=not self.progress, leave=False)

    # ------------------------------------------------------------------ local
    def _local_positions(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = queries.size
        sim_out = np.full((q, k), -np.inf, dtype=np.float32)
        pos_out = np.full((q, k), -1, dtype=np.int64)
        if q == 0:
            return sim_out, pos_out
        m = self.predictions_.size
        qclass = self.predictions_[queries]
        blocks: list[np.ndarray] = []  # query indices of each unit
        units: list[_LocalUnit] = []
        for c in np.unique(qclass):
            idx = np.flatnonzero(qclass == c)
            lo, hi = self.bounds_[int(c)]
            m_c = m - (hi - lo)
            kk = min(k, m_c)
            if kk == 0:
                continue
            rows = max(1, self.block_budget_ // (4 * m_c))
            for start in range(0, idx.size, rows):
                block = idx[start : start + rows]
                blocks.append(block)
                units.append((self.slot_[queries[block]], lo, hi, kk))
        if self.client_ is not None:
            groups = split_blocks(units, 4 * n_workers(self.client_))
            parts = map_blocks(
                self.client_, _local_task, groups, self.sorted_embedding_, self.perm_
            )
            answers = [a for part in parts for a in part]
        else:
            answers = []
            with self._bar(q, "local evidence") as bar:
                for slots, lo, hi, kk in units:
                    answers.append(_local_block(self.blocks_, self.perm_, slots, lo, hi, kk))
                    bar.update(slots.size)
        for block, (*_, kk), (vals, pos) in zip(blocks, units, answers, strict=True):
            sim_out[block, :kk] = vals
            pos_out[block, :kk] = pos
        return sim_out, pos_out

    # ----------------------------------------------------------------- global
    def _global_positions(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        m = self.predictions_.size
        classes = [int(c) for c in self.classes_]
        jobs: list[_GlobalJob] = []
        for i, a in enumerate(classes):
            lo_a, hi_a = self.bounds_[a]
            for b in classes[i + 1 :]:
                lo_b, hi_b = self.bounds_[b]
                rows = max(1, self.block_budget_ // (4 * (hi_b - lo_b)))
                jobs.extend((s, min(s + rows, hi_a), lo_b, hi_b) for s in range(lo_a, hi_a, rows))
        if self.client_ is not None and jobs:
            runs = split_blocks(jobs, 4 * n_workers(self.client_))
            parts = map_blocks(
                self.client_, _global_task, runs, self.sorted_embedding_, self.perm_, k
            )
            best_s, best_key = topk_entries(
                np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), k
            )
        else:
            with self._bar(len(jobs), "global evidence") as bar:
                best_s, best_key = _global_scan(self.blocks_, jobs, self.perm_, k, bar)
        return best_s, best_key // m, best_key % m
