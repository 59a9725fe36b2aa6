r"""faiss backend for counterfactual-evidence search.

One inner-product index per predicted class over the unit-normalised embedding (so the inner
product is :math:`KS(v,u)`). A local query of class c searches the index of every other class
(``min(k, |class|)`` hits from each), and the hits are merged into the top-k by
``(similarity desc, position asc)``; the similarities of the kept hits are recomputed exactly
in float64. A query that gets fewer hits than it has candidates (an IVF probe that lands on
small lists, a rare HNSW dead end) is answered by an exact scan instead, so k results come back
whenever k candidates exist. Queries whose embedding is the zero vector are answered exactly
(all similarities are 0: the smallest positions of another class).
A call with a single query takes a scalar fast path (no batching bookkeeping; the same
answer as the batched path), which halves the per-call overhead around the faiss searches.

Global top-k: the local lists of every node (16 first, grown only for the nodes that can
still contribute) merged into unique unordered pairs (see
:func:`gnnaudit.audit.search.global_pairs.global_pairs_from_local`). Exact if the local lists are
exact; the approximation is only that of the local searches (a missed neighbour can still be
found from the other end of the pair).

Index types (``index_type``):

* ``"hnsw"`` (default; ``M=48, ef_search=32, ef_construction=80`` chosen by
  ``benchmarks/tune_faiss_index.py``: recall@10 1.00 on clustered and 0.98 on unstructured
  20,000 x 500 data, see ``benchmarks/results/faiss_tuning.md``) -- ``IndexHNSWFlat`` with
  ``METRIC_INNER_PRODUCT``, ``M`` links,
  ``ef_construction`` and ``ef_search`` (raised to k when smaller). Points are added with one
  OpenMP thread so the graph, hence every answer, is deterministic.
* ``"ivf"`` -- ``IndexIVFFlat`` (inner product on the unit vectors) with ``nlist`` lists
  (``None``: :math:`\sqrt{n}` of the class, rounded), trained with the k-means seed
  ``random_state``; ``nprobe`` lists are scanned (``None``: :func:`default_nprobe`:
  ``max(8, ceil(nlist / 16))`` below 32 dimensions, ``max(6, ceil(nlist / 32))`` from 32 on).
  Tuned in ``benchmarks/bench_search_crossover.py``
  (``benchmarks/results/search_crossover.md``): on clustered 100,000 x 128 embeddings,
  :math:`\sqrt{n}` lists with 8 probes give recall@10 0.998 against 0.93 for
  :math:`4\sqrt{n}` lists at the same probes, and build 4x faster; nprobe grows with nlist
  because a finer partition splits the clusters over more lists, and it must be larger in few
  dimensions, where clusters overlap more (``search_crossover.md``, 100,000 / 200,000 nodes:
  d = 16 reaches recall@10 0.954 / 0.970 with 12 / 17 probes, d = 128 0.987 / 0.991 with 6 / 9,
  and 0.957 with 4 at 100,000). This is what
  ``CounterfactualEvidence(backend="auto")`` builds above its crossover. Poor on unstructured
  data (recall 0.62 at nprobe 8 in ``benchmarks/results/faiss_tuning.md``). The effective
  ``nlist`` is capped at ``n // 39`` (faiss' minimum training points per centroid); a class
  too small for 2 lists gets a flat index.
* ``"flat"`` -- ``IndexFlatIP`` (exact; for checking).

Classes with fewer than ``_FLAT_BELOW`` (256) points always get a flat index (exact and at
least as fast there). Memory: the indexes hold a float32 copy of the embedding (plus
``M * 2 * 4`` bytes per point for HNSW); a query batch materialises ``q * k * (classes - 1)``
hits; the exact fallback works in blocks of at most 4M similarities.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from gnnaudit._optional import require
from gnnaudit._validation import check_choice, check_int
from gnnaudit.audit.search.base import (
    EvidenceSearcher,
    SearchSpace,
    check_space,
    make_rng,
    unknown_params,
)
from gnnaudit.audit.search.topk import (
    BLOCK_ENTRIES,
    block_topk,
    fill_rows,
    rescore_rows,
    topk_by_row,
    topk_entries,
    zero_query_topk,
)

__all__ = ["FaissSearcher", "default_nprobe"]

logger = logging.getLogger(__name__)

_FLAT_BELOW = 256
_MIN_POINTS_PER_LIST = 39


#: from this many dimensions on, the IVF default probes half as large a share of the lists
NPROBE_HIGH_DIM = 32


def default_nprobe(nlist: int, dim: int | None = None) -> int:
    """IVF lists probed by default (module doc): ``max(8, ceil(nlist / 16))``, or
    ``max(6, ceil(nlist / 32))`` when ``dim >= NPROBE_HIGH_DIM``."""
    if dim is not None and dim >= NPROBE_HIGH_DIM:
        return int(max(6, -(-nlist // 32)))
    return int(max(8, -(-nlist // 16)))


class FaissSearcher(EvidenceSearcher):
    """Approximate evidence search with one faiss inner-product index per predicted class.

    Parameters
    ----------
    index_type : ``"hnsw"`` | ``"ivf"`` | ``"flat"``.
    M, ef_construction, ef_search : HNSW graph degree and beam widths.
    nlist, nprobe : IVF list count (``None`` = sqrt(n) per class) and lists probed
        (``None`` = :func:`default_nprobe` of ``nlist`` and the dimension).
    random_state : int seed (or ``np.random.Generator``) of the IVF k-means training (HNSW is
        deterministic by construction).
    """

    name = "faiss"
    _PARAMS = ("index_type", "M", "ef_search", "ef_construction", "nlist", "nprobe")

    def __init__(
        self,
        index_type: str = "hnsw",
        *,
        M: int = 48,
        ef_search: int = 32,
        ef_construction: int = 80,
        nlist: int | None = None,
        nprobe: int | None = None,
        random_state: Any = None,
        **unknown: Any,
    ) -> None:
        unknown_params(type(self).__name__, unknown, self._PARAMS)
        self.index_type = index_type
        self.M = M
        self.ef_search = ef_search
        self.ef_construction = ef_construction
        self.nlist = nlist
        self.nprobe = nprobe
        self.random_state = random_state

    def _check_params(self) -> None:
        check_choice("index_params['index_type']", self.index_type, ("hnsw", "ivf", "flat"))
        check_int("index_params['M']", self.M, minimum=2, maximum=256)
        check_int("index_params['ef_search']", self.ef_search, minimum=1)
        check_int("index_params['ef_construction']", self.ef_construction, minimum=1)
        if self.nlist is not None:
            check_int("index_params['nlist']", self.nlist, minimum=1)
        if self.nprobe is not None:
            check_int("index_params['nprobe']", self.nprobe, minimum=1)
        self._seed = int(make_rng(self.random_state).integers(0, 2**31 - 1))

    # -- build
    def _make_index(self, xc: np.ndarray) -> tuple[Any, str]:
        faiss = require("faiss", "FaissSearcher (the faiss evidence search)")

        n, d = xc.shape
        kind = self.index_type
        if n < _FLAT_BELOW:
            kind = "flat"
        if kind == "ivf":
            nlist = self.nlist if self.nlist is not None else int(round(np.sqrt(n)))
            nlist = min(nlist, n // _MIN_POINTS_PER_LIST)
            if nlist < 2:
                kind = "flat"
        index: Any
        if kind == "flat":
            index = faiss.IndexFlatIP(d)
            index.add(xc)
            return index, "flat"
        if kind == "ivf":
            quantizer = faiss.IndexFlatIP(d)
            index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
            index.cp.seed = self._seed
            index.train(xc)
            index.add(xc)
            probes = default_nprobe(nlist, d) if self.nprobe is None else self.nprobe
            index.nprobe = min(probes, nlist)
            self._quantizers.append(quantizer)  # the IVF index does not own its quantizer
            return index, f"ivf{nlist}"
        index = faiss.IndexHNSWFlat(d, int(self.M), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(self.ef_construction)
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)  # deterministic graph
        try:
            index.add(xc)
        finally:
            faiss.omp_set_num_threads(threads)
        return index, "hnsw"

    def build(self, space: SearchSpace) -> FaissSearcher:
        """Build one index per predicted class of ``space``."""
        self._check_params()
        space = check_space(space)
        x = space.embedding
        self.classes_, self.class_index_ = np.unique(space.predictions, return_inverse=True)
        self._quantizers: list[Any] = []
        self.members_ = [np.flatnonzero(self.class_index_ == c) for c in range(self.classes_.size)]
        built = [self._make_index(np.ascontiguousarray(x[mem])) for mem in self.members_]
        self.indexes_ = [b[0] for b in built]
        self.index_kinds_ = [b[1] for b in built]
        self.class_sizes_ = np.array([mem.size for mem in self.members_], dtype=np.int64)
        self.space_ = space
        self.norms_ = np.linalg.norm(x, axis=1)
        logger.info(
            "FaissSearcher built: %s",
            dict(zip(self.classes_.tolist(), self.index_kinds_, strict=True)),
        )
        return self

    # -- queries
    def _local_positions(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k evidences of each query by position (see module doc)."""
        x = self.space_.embedding
        cls = self.class_index_
        out_s = np.full((q.size, k), -np.inf)
        out_p = np.full((q.size, k), -1, dtype=np.int64)
        zero = self.norms_[q] == 0
        if zero.any():
            out_s[zero], out_p[zero] = zero_query_topk(cls, q[zero], k)
        live = np.flatnonzero(~zero)
        if live.size == 0:
            return out_s, out_p
        if live.size == 1:  # scalar fast path, same answer as the batched one
            out_s[live[0]], out_p[live[0]] = self._search_one(int(q[live[0]]), k)
            return out_s, out_p
        ql = q[live]
        qc = cls[ql]
        got_r, got_s, got_p = [], [], []
        for c in np.unique(qc):
            rows = np.flatnonzero(qc == c)
            xq = np.ascontiguousarray(x[ql[rows]])
            for c2, (index, kind) in enumerate(zip(self.indexes_, self.index_kinds_, strict=True)):
                if c2 == c:
                    continue
                kk = min(k, self.members_[c2].size)
                if kind == "hnsw":
                    self._set_ef(index, kk)
                dist, lab = index.search(xq, kk)
                ok = lab >= 0
                rr, kk_i = np.nonzero(ok)
                got_r.append(rows[rr])
                got_s.append(dist[rr, kk_i].astype(np.float64))
                got_p.append(self.members_[c2][lab[rr, kk_i]])
        if not got_r:  # a single predicted class: no candidates at all
            return out_s, out_p
        rr, ss, pp = topk_by_row(
            np.concatenate(got_r), np.concatenate(got_s), np.concatenate(got_p), k
        )
        ls, lp = fill_rows(ql.size, k, rr, ss, pp)
        # exact fallback for queries that got fewer hits than they have candidates
        n_cand = self.space_.size - self.class_sizes_[qc]
        short = np.flatnonzero((lp >= 0).sum(axis=1) < np.minimum(k, n_cand))
        if short.size:
            logger.debug("faiss: %d queries answered by the exact fallback", short.size)
            es, ep = self._exact(ql[short], k)
            ls[short], lp[short] = es, ep
        ls, lp = rescore_rows(x, ql, ls, lp)
        out_s[live], out_p[live] = ls, lp
        return out_s, out_p

    def _set_ef(self, index: Any, kk: int) -> None:
        ef = max(int(self.ef_search), kk)
        if index.hnsw.efSearch != ef:
            index.hnsw.efSearch = ef

    def _search_one(self, qpos: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """One query: the hits of every other class's index, top-k by (faiss similarity
        desc, position asc), then rescored in float64 and re-sorted (as :meth:`_local_positions`)."""
        x = self.space_.embedding
        xq = x[qpos : qpos + 1]
        c = int(self.class_index_[qpos])
        sims, poss = [], []
        for c2, (index, kind) in enumerate(zip(self.indexes_, self.index_kinds_, strict=True)):
            if c2 == c:
                continue
            kk = min(k, int(self.class_sizes_[c2]))
            if kind == "hnsw":
                self._set_ef(index, kk)
            dist, lab = index.search(xq, kk)
            ok = lab[0] >= 0
            sims.append(dist[0][ok])
            poss.append(self.members_[c2][lab[0][ok]])
        out_s = np.full(k, -np.inf)
        out_p = np.full(k, -1, dtype=np.int64)
        if not sims:
            return out_s, out_p
        sim, pos = np.concatenate(sims), np.concatenate(poss)
        n_cand = self.space_.size - int(self.class_sizes_[c])
        if pos.size < min(k, n_cand):  # a short answer: exact fallback
            es, ep = self._exact(np.array([qpos]), k)
            sim, pos = es[0][ep[0] >= 0], ep[0][ep[0] >= 0]
        _, pos = topk_entries(sim, pos, k)
        s64 = x[pos].astype(np.float64) @ xq[0].astype(np.float64)
        o = np.lexsort((pos, -s64))
        out_s[: pos.size], out_p[: pos.size] = s64[o], pos[o]
        return out_s, out_p

    def _exact(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Brute-force top-k (blocks of at most 4M similarities)."""
        x = self.space_.embedding
        cls = self.class_index_
        cols = np.arange(x.shape[0])
        step = max(1, BLOCK_ENTRIES // x.shape[0])
        got_r, got_s, got_p = [], [], []
        for lo in range(0, q.size, step):
            r = np.arange(lo, min(lo + step, q.size))
            s = x[q[r]] @ x.T
            s[cls[q[r]][:, None] == cls[None, :]] = -np.inf
            rr, ss, pp = block_topk(s, cols, k)
            got_r.append(r[rr])
            got_s.append(ss.astype(np.float64))
            got_p.append(pp)
        rr, ss, pp = topk_by_row(
            np.concatenate(got_r), np.concatenate(got_s), np.concatenate(got_p), k
        )
        return fill_rows(q.size, k, rr, ss, pp)
