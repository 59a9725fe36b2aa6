r"""Exact evidence search from a similarity order sorted once (backend ``"sorted"``).

Made for repeated searches over one embedding whose predictions change: the Lightning audit
callback searches the same validation nodes every epoch, the KS embedding depends on the graph
only, and only the model's predictions move. This backend sorts every row of the ``m x m``
similarity matrix :math:`S = E E^\top` (:math:`E` the unit KS embedding, so
:math:`S_{vu} = KS(v, u)`) once and answers every later search by scanning those orders with
the current predictions, at a cost independent of the embedding dimension.

* **Build** (:class:`SimilarityOrder`): ``S`` by row blocks (one float32 BLAS product each),
  every row sorted by (similarity desc, column asc) with a stable argsort. Time
  :math:`O(m^2 d + m^2 \log m)`.
* **Local top-k** of query v: the first k entries of row v's order whose prediction differs
  from ``pred(v)`` -- the exact backend's rule (ties: smaller position = smaller node id). A
  prefix window of ``max(4k, 32)`` entries is scanned first; rows that find fewer than k
  candidates there are rescanned with a 4x wider window until k are found or the row is
  exhausted. Time :math:`O(q \cdot \text{window})` per call.
* **Global top-k**: a pair {v, u} (v < u) of the global top-k has u among v's local top-k
  (see :mod:`gnnaudit.audit.search.global_pairs`), so the global answer is the k best entries
  ``(v, u)``, ``u > v``, of the local top-k lists of every node -- each pair met once, from
  its smaller end. The lists are scanned in row chunks, grown adaptively (16 entries first,
  longer only for nodes that can still contribute) and merged into a running top-k by
  (similarity desc, v, u).

**Reuse across predictions.** The order depends on the embedding only. Two ways keep it:

* :meth:`SortedSimilaritySearcher.with_predictions` returns a new searcher over the same
  nodes with other predictions, sharing the (immutable) order: :math:`O(m)`, no hashing;
* :meth:`SortedSimilaritySearcher.build` on a space whose embedding has the same contents as
  the one the order was built from (same shape, dtype and bytes: a blake2b digest,
  :math:`O(m d)`) keeps the order and only takes the new predictions and node ids.

**Memory bound.** The order holds ``m^2 * (4 + b)`` bytes: float32 similarities plus
positions in the smallest unsigned type (``b`` = 1, 2 or 4 bytes for ``m`` <= 256, 65,536 or
more). Above ``max_nodes`` test nodes (default :data:`DEFAULT_MAX_NODES` = 4,000, i.e. 96 MB
at the cap) **no m x m array is built**: the searcher falls back to the blocked
:class:`~gnnaudit.audit.search.exact.ExactSearcher` (memory ``O(block_bytes)``) and says so
(``uses_sorted_order`` is False, logged at INFO). Build temporaries are bounded by
``block_bytes`` (24 bytes per similarity of a row block); a search by ``block_bytes`` plus its
``O(q k)`` answer.

**Exactness.** The answers follow the exact backend's rule: they equal the float64 brute force
whenever the float32 products are exact, ties included (tested on quantised embeddings). On
general input both backends are exact up to the float32 rounding of the products, and BLAS
does not round a product identically for every block shape, so two similarities within about
1e-7 of each other may be ordered differently by the two backends.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnnaudit._validation import check_array, check_int
from gnnaudit.audit.search.base import EvidenceSearcher, SearchSpace, check_space
from gnnaudit.audit.search.exact import ExactSearcher
from gnnaudit.audit.search.global_pairs import FIRST_LIST_LENGTH
from gnnaudit.audit.search.results import GlobalEvidence, LocalEvidence
from gnnaudit.audit.search.topk import topk_entries
from gnnaudit.errors import InvalidInputError

__all__ = ["SortedSimilaritySearcher", "SimilarityOrder", "embedding_digest", "DEFAULT_MAX_NODES"]

logger = logging.getLogger(__name__)

#: default cap on the nodes of a sorted search (the order then takes 96 MB)
DEFAULT_MAX_NODES = 4000
_BUILD_BYTES_PER_ENTRY = 24  # similarity block, negated copy, argsort int64 index, gather
_SCAN_BYTES_PER_ENTRY = 16  # window positions, their predictions, mask, running count
_FIRST_WINDOW = 32


def embedding_digest(embedding: np.ndarray) -> bytes:
    """blake2b digest (16 bytes) of an array's dtype, shape and bytes: equal digests mean
    equal contents. Reads the array once (about 1 GB/s), without copying a contiguous one."""
    arr = np.ascontiguousarray(embedding)
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(arr.data)
    return h.digest()


@dataclass(frozen=True)
class SimilarityOrder:
    """Every row of the ``m x m`` similarity matrix, sorted once (shared, never modified).

    Attributes
    ----------
    order : (m, m) unsigned ints, ``order[v]`` = the columns of row v by (similarity desc,
        column asc).
    similarity : (m, m) float32, ``similarity[v, r] = KS(v, order[v, r])``.
    digest : :func:`embedding_digest` of the embedding it was built from.
    """

    order: np.ndarray
    similarity: np.ndarray
    digest: bytes

    @property
    def nbytes(self) -> int:
        """Memory held by the two tables."""
        return int(self.order.nbytes + self.similarity.nbytes)

    @classmethod
    def build(
        cls, embedding: np.ndarray, block_bytes: int = 64 * 2**20, progress: bool = False
    ) -> SimilarityOrder:
        """Sort every row of ``embedding @ embedding.T`` (see the module doc); temporaries
        at most ``block_bytes`` (one row block at a time)."""
        from tqdm.auto import tqdm

        emb = check_array("embedding", embedding, ndim=2, dtype=np.float32, min_rows=0)
        emb = np.ascontiguousarray(emb)
        m = emb.shape[0]
        order = np.empty((m, m), dtype=np.min_scalar_type(max(m - 1, 0)))
        sims = np.empty((m, m), dtype=np.float32)
        rows = max(1, block_bytes // (_BUILD_BYTES_PER_ENTRY * max(m, 1)))
        for r0 in tqdm(
            range(0, m, rows), desc="sorting similarities", disable=not progress, leave=False
        ):
            block = np.matmul(emb[r0 : r0 + rows], emb.T)
            np.negative(block, out=block)
            o = np.argsort(block, axis=1, kind="stable")  # ties: smaller column first
            order[r0 : r0 + rows] = o
            sims[r0 : r0 + rows] = -np.take_along_axis(block, o, axis=1)
        return cls(order=order, similarity=sims, digest=embedding_digest(emb))


class SortedSimilaritySearcher(EvidenceSearcher):
    """Exact search from a once-sorted similarity order, reused while predictions change.

    Parameters
    ----------
    max_nodes : largest search space that gets an ``m x m`` order (default 4,000: 96 MB);
        larger spaces are searched by :class:`~gnnaudit.audit.search.exact.ExactSearcher`.
    block_bytes : memory budget of the build's and the scans' temporaries (default 64 MiB),
        also passed to the exact fallback.
    progress : tqdm bars for the build (and the fallback's long searches).
    random_state : accepted for a uniform backend signature; the search is deterministic.

    Attributes (after ``build``)
    ----------------------------
    space_ : the validated :class:`~gnnaudit.audit.search.base.SearchSpace`.
    order_ : the :class:`SimilarityOrder` (None when the space exceeds ``max_nodes``).
    fallback_ : the exact searcher used above ``max_nodes`` (None otherwise).
    """

    name = "sorted"

    def __init__(
        self,
        max_nodes: int = DEFAULT_MAX_NODES,
        *,
        block_bytes: int = 64 * 2**20,
        progress: bool = False,
        random_state: Any = None,
    ) -> None:
        self.max_nodes = max_nodes
        self.block_bytes = block_bytes
        self.progress = progress
        self.random_state = random_state

    # ------------------------------------------------------------------ build
    def build(self, space: SearchSpace) -> SortedSimilaritySearcher:
        """Sort the similarities of ``space`` -- or keep the order already built when the
        embedding has the same contents (only predictions / node ids change)."""
        max_nodes = check_int("max_nodes", self.max_nodes, minimum=0)
        self.block_bytes_ = check_int("block_bytes", self.block_bytes, minimum=16)
        space = check_space(space)
        if space.size > max_nodes:
            logger.info(
                "sorted search: %d nodes exceed max_nodes=%d (an m x m order would take %.0f "
                "MB); using the blocked exact search",
                space.size,
                max_nodes,
                space.size**2 * 6 / 1e6,
            )
            self.order_: SimilarityOrder | None = None
            self.fallback_: ExactSearcher | None = self._exact(space)
        else:
            old = getattr(self, "order_", None)
            digest = embedding_digest(space.embedding)
            if old is not None and old.digest == digest:
                logger.debug("sorted search: embedding unchanged, similarity order reused")
            else:
                self.order_ = SimilarityOrder.build(
                    space.embedding, self.block_bytes_, self.progress
                )
                logger.debug("sorted search: order of %d nodes built", space.size)
            self.fallback_ = None
        self.space_ = space
        return self

    def with_predictions(self, predictions: Any) -> SortedSimilaritySearcher:
        """A searcher over the same nodes and embedding with other ``predictions`` ((m,)
        integers), sharing this one's order: ``O(m)``, the sort is not redone (above
        ``max_nodes``: a fresh exact fallback, ``O(m d)``). ``self`` is unchanged."""
        space = self._built_space()
        pred = check_array("predictions", predictions, ndim=1, dtype=None, min_rows=0)
        if pred.dtype.kind not in "iu" or pred.shape != (space.size,):
            raise InvalidInputError(
                f"predictions must be {space.size} integers (one per node of the space), got "
                f"{pred.dtype} of shape {pred.shape}"
            )
        twin = copy.copy(self)
        twin.space_ = SearchSpace(space.embedding, pred.astype(np.int64), space.node_ids)
        if self.fallback_ is not None:
            twin.fallback_ = self._exact(twin.space_)
        return twin

    def _exact(self, space: SearchSpace) -> ExactSearcher:
        return ExactSearcher(block_bytes=self.block_bytes_, progress=self.progress).build(space)

    @property
    def uses_sorted_order(self) -> bool:
        """True when searches scan the sorted order, False when they fall back to exact."""
        self._built_space()
        return self.order_ is not None

    # ------------------------------------------------------------------ search
    def local(self, queries: np.ndarray, k: int) -> LocalEvidence:
        """Top-``k`` evidences of each query (see :meth:`EvidenceSearcher.local`)."""
        self._built_space()
        if self.fallback_ is not None:
            return self.fallback_.local(queries, k)
        return super().local(queries, k)

    def global_pairs(self, k: int) -> GlobalEvidence:
        """Top-``k`` pairs (see :meth:`EvidenceSearcher.global_pairs`)."""
        self._built_space()
        if self.fallback_ is not None:
            return self.fallback_.global_pairs(k)
        return super().global_pairs(k)

    def _global_positions(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The k best ``(v, u)``, ``u > v``, of every node's local top-k (module doc), with
        the lists grown adaptively as in
        :func:`~gnnaudit.audit.search.global_pairs.global_pairs_from_local`: ``min(k, 16)`` entries
        per node first, then doubled only for the nodes whose last entry can still reach the
        current k-th best pair (a longer list repeats the shorter one as its prefix, so only
        the new entries are merged)."""
        m = self.space_.size
        k_max = max(1, min(k, m - 1))
        k_cur, k_done = min(k_max, FIRST_LIST_LENGTH), 0
        best_s = np.empty(0, dtype=np.float32)
        best_key = np.empty(0, dtype=np.int64)  # v * m + u
        tail = np.full(m, -np.inf, dtype=np.float32)
        todo = np.arange(m, dtype=np.int64)
        while True:
            rows = max(1, self.block_bytes_ // (_SCAN_BYTES_PER_ENTRY * k_cur))
            for r0 in range(0, todo.size, rows):
                v = todo[r0 : r0 + rows]
                sim, pos = self._local_positions(v, k_cur)
                full = pos[:, -1] >= 0
                tail[v] = np.where(full, sim[:, -1], -np.inf)
                new_pos = pos[:, k_done:]
                r, c = np.nonzero(new_pos > v[:, None])  # the pair's smaller end; no padding
                best_s = np.concatenate([best_s, sim[:, k_done:][r, c]])
                best_key = np.concatenate([best_key, v[r] * m + new_pos[r, c]])
                best_s, best_key = topk_entries(best_s, best_key, k)
            if k_cur >= k_max:
                break
            tau = best_s[k - 1] if best_s.size >= k else -np.inf
            todo = np.flatnonzero(tail >= tau)
            if todo.size == 0:
                break
            k_done, k_cur = k_cur, min(k_max, 2 * k_cur)
        return best_s, best_key // m, best_key % m

    def _local_positions(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Scan the order rows of ``queries`` for their first k other-class entries."""
        assert self.order_ is not None
        order, sorted_sim = self.order_.order, self.order_.similarity
        pred = self.space_.predictions
        m = pred.size
        sim_out = np.full((queries.size, k), -np.inf, dtype=np.float32)
        pos_out = np.full((queries.size, k), -1, dtype=np.int64)
        todo = np.arange(queries.size)
        width = min(m, max(4 * k, _FIRST_WINDOW))
        while todo.size:
            step = max(1, self.block_bytes_ // (_SCAN_BYTES_PER_ENTRY * width))
            short = []
            for start in range(0, todo.size, step):
                idx = todo[start : start + step]
                rows = queries[idx]
                window = order[rows, :width]
                differs = pred[window] != pred[rows][:, None]
                count = np.cumsum(differs, axis=1, dtype=np.int32)
                r, c = np.nonzero(differs & (count <= k))
                rank = count[r, c] - 1
                pos_out[idx[r], rank] = window[r, c]
                sim_out[idx[r], rank] = sorted_sim[rows[r], c]
                short.append(idx[count[:, -1] < k])
            if width >= m:
                break
            todo = np.concatenate(short)
            width = min(m, 4 * width)
        return sim_out, pos_out
