r"""One shard of the sharded evidence search: a faiss index over a contiguous range of rows.

A shard holds rows ``lo:hi`` of the unit embedding (positions ``lo .. hi - 1``; faiss ids are
the local offsets ``0 .. hi - lo - 1``) and their predicted classes. Its index is

* ``"flat"`` -- ``IndexFlatIP`` (exact) when the shard is too small for two IVF lists;
* ``"ivf"`` -- ``IndexIVFFlat`` with the inner-product metric, ``nlist`` lists trained (faiss
  k-means, seeded) on a seeded sample of the shard's rows; stores ``4 d + 8`` bytes per row;
* ``"ivfpq"`` -- ``IndexIVFPQ`` when the flat codes of the shard (``4 d`` bytes per row) would
  exceed ``pq_above_bytes``: ``pq_m`` sub-quantisers of 8 bits store ``pq_m + 8`` bytes per row
  (``d / 4 + 8`` by default: codes 16x smaller than flat at any ``d``; shards of fewer than 9,984 rows
  stay ``"ivf"``) at the price of approximate
  distances (the exact re-rank of :mod:`~gnnaudit.audit.search.sharded` restores exact
  similarities, but the candidate lists are chosen on the quantised ones).

A search returns, for each query, the ``kk`` best rows of the shard *of another class than
the query's* (an ``IDSelectorBitmap`` per query class, built once per class and kept), by
faiss' float32 similarity, padded with id ``-1``.

A :class:`ShardIndex` pickles (its faiss index through ``faiss.serialize_index``), so Dask can
move it between workers if it must; normally it stays on the worker that built it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gnnaudit._optional import require

__all__ = ["ShardIndex", "ShardParams", "build_shard", "pq_subquantizers"]

#: faiss' minimum training points per k-means centroid (below: its warning, poor lists)
MIN_POINTS_PER_LIST = 39
#: shards smaller than this get a flat index when ``nlist`` is left to the default
FLAT_BELOW = 256
#: training rows per IVF list sampled from the shard by default (faiss itself caps at 256)
TRAIN_ROWS_PER_LIST = 64
#: PQ codebooks have 2**8 centroids each: this many training rows by default ...
PQ_TRAIN_ROWS = 64 * 256
#: ... and a shard needs 39 rows per codebook centroid (faiss' minimum) to be PQ-encoded
PQ_MIN_ROWS = MIN_POINTS_PER_LIST * 256


@dataclass(frozen=True)
class ShardParams:
    """Index parameters shared by every shard (``None``: the shard's default)."""

    nlist: int | None
    nprobe: int | None
    pq_above_bytes: int
    pq_m: int | None
    train_rows: int | None
    seed: int


def pq_subquantizers(d: int, pq_m: int | None) -> int:
    """``pq_m``, or the largest divisor of ``d`` that is at most ``max(1, d // 4)`` (about
    ``d / 4`` code bytes per vector, sub-vectors of 4 dimensions). Measured at 1M x 64
    (``benchmarks/results/sharded_search.md``, 4 shards, oversample 8): recall@10 0.996 with
    these 16-byte codes against 0.843 with 8-byte ones (``pq_m = d / 8``), for a build of
    22 s against 17 s."""
    if pq_m is not None:
        return pq_m
    target = max(1, d // 4)
    return max(m for m in range(1, target + 1) if d % m == 0)


def _default_nprobe(nlist: int, d: int) -> int:
    from gnnaudit.audit.search.faiss_search import default_nprobe

    return default_nprobe(nlist, d)


class ShardIndex:
    """The faiss index of one shard and what its searches need (module doc)."""

    def __init__(
        self, index: Any, kind: str, nprobe: int, lo: int, predictions: np.ndarray
    ) -> None:
        self.index = index
        self.kind = kind
        self.nprobe = nprobe
        self.lo = lo
        self.predictions = predictions
        self._selectors: dict[int, tuple[Any, np.ndarray]] = {}

    @property
    def size(self) -> int:
        """Rows in the shard."""
        return int(self.predictions.size)

    # faiss objects do not pickle: serialise the index to bytes
    def __getstate__(self) -> dict[str, Any]:
        faiss = require("faiss", "the sharded evidence search")
        state = dict(self.__dict__)
        state["index"] = faiss.serialize_index(self.index)
        state["_selectors"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        faiss = require("faiss", "the sharded evidence search")
        state["index"] = faiss.deserialize_index(state["index"])
        self.__dict__.update(state)

    def _selector(self, cls: int) -> Any:
        """The faiss selector of the rows whose class is not ``cls`` (cached with its bitmap,
        which must outlive it)."""
        if cls not in self._selectors:
            faiss = require("faiss", "the sharded evidence search")
            bitmap = np.packbits(self.predictions != cls, bitorder="little")
            sel = faiss.IDSelectorBitmap(self.size, faiss.swig_ptr(bitmap))
            self._selectors[cls] = (sel, bitmap)
        return self._selectors[cls][0]

    def search(self, xq: np.ndarray, qclass: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
        """``(similarity, position)``, both ``(len(xq), kk)``: the ``kk`` best rows of another
        class than ``qclass[i]`` for each query row ``xq[i]`` (float32 faiss similarities,
        global positions ``lo + id``; padding ``-inf`` / ``-1``)."""
        faiss = require("faiss", "the sharded evidence search")
        sims = np.full((xq.shape[0], kk), -np.inf, dtype=np.float32)
        pos = np.full((xq.shape[0], kk), -1, dtype=np.int64)
        for c in np.unique(qclass):
            rows = np.flatnonzero(qclass == c)
            sel = self._selector(int(c))
            if self.kind == "flat":
                params = faiss.SearchParameters(sel=sel)
            else:
                params = faiss.SearchParametersIVF(sel=sel, nprobe=self.nprobe)
            dist, lab = self.index.search(np.ascontiguousarray(xq[rows]), kk, params=params)
            ok = lab >= 0
            sims[rows] = np.where(ok, dist, -np.inf)
            pos[rows] = np.where(ok, lab + self.lo, -1)
        return sims, pos


def _ivf_lists(n: int, params: ShardParams) -> int:
    """IVF lists of a shard of ``n`` rows: ``nlist`` (at most ``n``), or by default
    :math:`\\sqrt{n}` capped at ``n // 39``; below 2 the shard gets a flat index."""
    if params.nlist is not None:
        return min(params.nlist, n)
    if n < FLAT_BELOW:
        return 1
    return min(int(round(np.sqrt(n))), n // MIN_POINTS_PER_LIST)


def build_shard(
    rows: np.ndarray, predictions: np.ndarray, lo: int, params: ShardParams, shard: int
) -> ShardIndex:
    """Build the index of shard number ``shard`` over ``rows`` (float32 ``(n, d)``, positions
    ``lo:lo + n``) and their ``predictions`` (module doc). Deterministic for a given seed:
    the training sample is drawn with ``default_rng([seed, shard])`` and the k-means runs with
    seed ``seed + shard``."""
    faiss = require("faiss", "the sharded evidence search")
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    n, d = rows.shape
    nlist = _ivf_lists(n, params)
    if nlist < 2:
        index = faiss.IndexFlatIP(d)
        index.add(rows)
        return ShardIndex(index, "flat", 1, lo, predictions)
    pq = 4 * n * d > params.pq_above_bytes and n >= PQ_MIN_ROWS
    m = pq_subquantizers(d, params.pq_m)
    quantizer = faiss.IndexFlatIP(d)
    if pq:
        index = faiss.IndexIVFPQ(quantizer, d, nlist, m, 8, faiss.METRIC_INNER_PRODUCT)
    else:
        index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    quantizer.this.disown()  # the IVF index owns and frees its quantizer
    index.own_fields = True
    default_train = max(TRAIN_ROWS_PER_LIST * nlist, PQ_TRAIN_ROWS if pq else 0)
    n_train = min(n, params.train_rows if params.train_rows is not None else default_train)
    n_train = max(n_train, nlist)  # k-means needs one point per list at least
    rng = np.random.default_rng([params.seed, shard])
    sample = np.sort(rng.choice(n, size=n_train, replace=False)) if n_train < n else None
    index.cp.seed = int((params.seed + shard) % (2**31 - 1))
    index.cp.min_points_per_centroid = 1  # small explicit samples train without a warning
    if pq:
        index.pq.cp.seed = index.cp.seed
    index.train(rows if sample is None else np.ascontiguousarray(rows[sample]))
    index.add(rows)
    nprobe = _default_nprobe(nlist, d) if params.nprobe is None else params.nprobe
    return ShardIndex(index, "ivfpq" if pq else "ivf", min(nprobe, nlist), lo, predictions)
