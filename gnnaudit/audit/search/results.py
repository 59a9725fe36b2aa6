"""Typed results of a counterfactual-evidence search: :class:`LocalEvidence` and
:class:`GlobalEvidence`.

Every search backend answers with these, :class:`~gnnaudit.audit.CounterfactualEvidence` returns
them, and every audit statistic and the Lightning callback consume them. They hold plain numpy
arrays in *node-id* space (global integer node indices, not positions into the search space)
and turn into pandas DataFrames with :meth:`to_frame`, in the one evidence-table schema of
:mod:`gnnaudit.audit.search.evidence_table` (``node_u, node_v, pred_u, pred_v, similarity,
rank``). ``user_ids`` (the graph's own node ids, ``data.node_ids``, or None) only changes how
:meth:`to_frame` names the nodes; ``from_frame`` maps such ids back to indices.

Local result of ``q`` queries with ``k`` evidences each (padded arrays, so a vectorised
statistic never needs a Python loop over queries):

* ``query`` (q,), ``query_pred`` (q,): the query node ids and their predicted classes;
* ``evidence`` (q, k), ``evidence_pred`` (q, k): evidence node ids and predictions, row ``i``
  sorted by similarity descending (ties: smaller node id), padded with ``-1``;
* ``similarity`` (q, k): ``KS(query, evidence)`` (Eq. 7), padded with ``-inf``.

Global result of ``p`` unordered pairs, sorted by similarity descending (ties: smaller
``(node_u, node_v)``): ``node_u < node_v``, ``similarity``, ``pred_u``, ``pred_v``.

Local table: ``node_u`` = query, ``node_v`` = evidence, ``rank`` within the query; global
table: ``rank`` over the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Self

import numpy as np
import pandas as pd

from gnnaudit._validation import check_int
from gnnaudit.audit.search.evidence_table import (
    EVIDENCE_COLUMNS,
    NODE_U,
    NODE_V,
    PRED_U,
    PRED_V,
    RANK,
    SIMILARITY,
    evidence_frame,
    table_nodes,
)
from gnnaudit.audit.search.space import SearchSpace
from gnnaudit.errors import InvalidInputError

__all__ = ["LocalEvidence", "GlobalEvidence", "LOCAL_COLUMNS", "GLOBAL_COLUMNS"]

#: columns of :meth:`LocalEvidence.to_frame` (the one evidence-table schema)
LOCAL_COLUMNS = EVIDENCE_COLUMNS
#: columns of :meth:`GlobalEvidence.to_frame` (the same schema)
GLOBAL_COLUMNS = EVIDENCE_COLUMNS


def _int_array(name: str, value: Any, ndim: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != ndim or (arr.size and arr.dtype.kind not in "iu"):
        raise InvalidInputError(
            f"{name} must be a {ndim}-D integer array, got {arr.dtype} {arr.shape}"
        )
    return arr.astype(np.int64, copy=False)


def _check_similarity(similarity: Any) -> None:
    """Similarities are cosines: NaN or +inf is a bug upstream, never a result (-inf pads)."""
    sim = np.asarray(similarity)
    if sim.size and sim.dtype.kind == "f" and (np.isnan(sim).any() or np.isposinf(sim).any()):
        raise InvalidInputError("similarity must not hold NaN or +inf (-inf marks padding)")


@dataclass(frozen=True)
class LocalEvidence:
    """Top-k local counterfactual evidences of ``q`` query nodes (padded arrays; see module)."""

    query: np.ndarray
    evidence: np.ndarray
    similarity: np.ndarray
    query_pred: np.ndarray
    evidence_pred: np.ndarray
    #: the graph's own node ids (object array of text) or None; only ``to_frame`` uses them
    user_ids: np.ndarray | None = field(default=None, kw_only=True, repr=False, compare=False)

    def __post_init__(self) -> None:
        q = _int_array("query", self.query, 1).shape[0]
        shape = _int_array("evidence", self.evidence, 2).shape
        if shape[0] != q:
            raise InvalidInputError(f"evidence must have {q} rows (one per query), got {shape}")
        if np.shape(self.similarity) != shape or np.shape(self.evidence_pred) != shape:
            raise InvalidInputError(
                f"similarity and evidence_pred must have the shape of evidence {shape}, got "
                f"{np.shape(self.similarity)} and {np.shape(self.evidence_pred)}"
            )
        if np.shape(self.query_pred) != (q,):
            raise InvalidInputError(
                f"query_pred must have shape ({q},), got {np.shape(self.query_pred)}"
            )
        _check_similarity(self.similarity)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_positions(
        cls,
        space: SearchSpace,
        queries: np.ndarray,
        positions: np.ndarray,
        similarity: np.ndarray,
        **extra: Any,
    ) -> Self:
        """Map a backend's answer by *positions* into ``space`` (padded with ``-1``) to node ids.

        ``extra`` are the additional fields of a subclass (e.g. the index's probe counts)."""
        queries = np.asarray(queries, dtype=np.int64).reshape(-1)
        pos = np.asarray(positions, dtype=np.int64)
        valid = pos >= 0
        safe = np.where(valid, pos, 0)
        ids = np.asarray(space.node_ids, dtype=np.int64)
        pred = np.asarray(space.predictions, dtype=np.int64)
        return cls(
            query=ids[queries],
            evidence=np.where(valid, ids[safe], -1),
            similarity=np.where(valid, np.asarray(similarity, dtype=np.float64), -np.inf),
            query_pred=pred[queries],
            evidence_pred=np.where(valid, pred[safe], -1),
            **extra,
        )

    @classmethod
    def empty(cls, k: int = 0) -> LocalEvidence:
        """A result with no query."""
        return cls(
            query=np.zeros(0, dtype=np.int64),
            evidence=np.zeros((0, k), dtype=np.int64),
            similarity=np.zeros((0, k), dtype=np.float64),
            query_pred=np.zeros(0, dtype=np.int64),
            evidence_pred=np.zeros((0, k), dtype=np.int64),
        )

    @classmethod
    def from_frame(
        cls, frame: pd.DataFrame, k: int | None = None, *, user_ids: np.ndarray | None = None
    ) -> LocalEvidence:
        """Rebuild padded arrays from a local evidence table with at least ``node_u`` (query),
        ``node_v`` (evidence), ``rank`` (``similarity``, ``pred_u``, ``pred_v`` optional:
        ``-inf`` / ``-1`` when absent). Queries come out ascending; each query keeps its first
        ``k`` evidences by rank (all when ``k`` is None). With ``user_ids`` (the graph's own
        ids) the node columns are matched against them
        (:func:`~gnnaudit.audit.search.evidence_table.table_nodes`)."""
        missing = [c for c in (NODE_U, NODE_V, RANK) if c not in frame.columns]
        if missing:
            raise InvalidInputError(
                f"a local-evidence DataFrame needs columns {NODE_U}, {NODE_V}, {RANK}; "
                f"missing {missing}"
            )
        q_all = table_nodes(frame, NODE_U, user_ids)
        e_all = table_nodes(frame, NODE_V, user_ids)
        order = np.lexsort((e_all, frame[RANK].to_numpy(dtype=np.int64), q_all))
        q, e = q_all[order], e_all[order]
        queries, start, counts = np.unique(q, return_index=True, return_counts=True)
        slot = np.arange(q.size) - np.repeat(start, counts)
        width = int(counts.max()) if counts.size else 0
        kk = width if k is None else check_int("k", k, minimum=1)
        keep = slot < kk
        row = np.searchsorted(queries, q[keep])
        col = slot[keep]

        def column(name: str, fill: Any, dtype: Any) -> np.ndarray:
            out = np.full((queries.size, kk), fill, dtype=dtype)
            if name in frame.columns:
                out[row, col] = frame[name].to_numpy(dtype=dtype)[order][keep]
            return out

        evidence = np.full((queries.size, kk), -1, dtype=np.int64)
        evidence[row, col] = e[keep]
        query_pred = np.full(queries.size, -1, dtype=np.int64)
        if PRED_U in frame.columns:
            query_pred[np.searchsorted(queries, q)] = frame[PRED_U].to_numpy(dtype=np.int64)[order]
        return cls(
            query=queries,
            evidence=evidence,
            similarity=column(SIMILARITY, -np.inf, np.float64),
            query_pred=query_pred,
            evidence_pred=column(PRED_V, -1, np.int64),
            user_ids=user_ids,
        )

    def named(self, user_ids: np.ndarray | None) -> Self:
        """The same result whose tables name nodes by ``user_ids`` (None: node indices)."""
        return self if user_ids is self.user_ids else replace(self, user_ids=user_ids)

    # ------------------------------------------------------------------ views
    @property
    def k(self) -> int:
        """Width of the padded arrays (the ``k`` asked for, capped by the candidates)."""
        return int(self.evidence.shape[1])

    @property
    def valid(self) -> np.ndarray:
        """(q, k) boolean: True where an evidence exists (not padding)."""
        return self.evidence >= 0

    def __len__(self) -> int:
        return int(self.query.shape[0])

    def head(self, k: int) -> LocalEvidence:
        """The first ``k`` evidences of every query (same result when ``k >= self.k``)."""
        k = check_int("k", k, minimum=1)
        if k >= self.k:
            return self
        return LocalEvidence(
            self.query,
            self.evidence[:, :k],
            self.similarity[:, :k],
            self.query_pred,
            self.evidence_pred[:, :k],
            user_ids=self.user_ids,
        )

    def select(self, queries: Sequence[int] | np.ndarray) -> LocalEvidence:
        """The rows of the given query node ids (each must be a query of this result)."""
        want = np.asarray(queries, dtype=np.int64).reshape(-1)
        order = np.argsort(self.query, kind="stable")
        pos = np.searchsorted(self.query[order], want)
        pos = np.minimum(pos, max(self.query.size - 1, 0))
        if self.query.size == 0 or np.any(self.query[order][pos] != want):
            raise InvalidInputError("queries must all be query nodes of this LocalEvidence")
        rows = order[pos]
        return LocalEvidence(
            self.query[rows],
            self.evidence[rows],
            self.similarity[rows],
            self.query_pred[rows],
            self.evidence_pred[rows],
            user_ids=self.user_ids,
        )

    def to_frame(self) -> pd.DataFrame:
        """Long evidence table (:data:`~gnnaudit.audit.search.evidence_table.EVIDENCE_COLUMNS`:
        ``node_u`` = query, ``node_v`` = evidence, ``rank`` 1 = most similar within the query),
        padding dropped, queries in stored order; nodes named by ``user_ids`` when set."""
        rows, cols = np.nonzero(self.valid)
        return evidence_frame(
            self.query[rows],
            self.evidence[rows, cols],
            self.query_pred[rows],
            self.evidence_pred[rows, cols],
            self.similarity[rows, cols],
            cols + 1,
            user_ids=self.user_ids,
        )


@dataclass(frozen=True)
class GlobalEvidence:
    """Top-k global counterfactual evidence pairs (see module), ``node_u < node_v``."""

    node_u: np.ndarray
    node_v: np.ndarray
    similarity: np.ndarray
    pred_u: np.ndarray
    pred_v: np.ndarray
    #: the graph's own node ids (object array of text) or None; only ``to_frame`` uses them
    user_ids: np.ndarray | None = field(default=None, kw_only=True, repr=False, compare=False)

    def __post_init__(self) -> None:
        p = _int_array("node_u", self.node_u, 1).shape[0]
        for name in ("node_v", "similarity", "pred_u", "pred_v"):
            if np.shape(getattr(self, name)) != (p,):
                raise InvalidInputError(
                    f"{name} must have shape ({p},), got {np.shape(getattr(self, name))}"
                )
        _check_similarity(self.similarity)

    @classmethod
    def from_positions(
        cls, space: SearchSpace, u: np.ndarray, v: np.ndarray, similarity: np.ndarray
    ) -> GlobalEvidence:
        """Map a backend's pairs of *positions* (``-1`` = padding, dropped) to node ids."""
        u = np.asarray(u, dtype=np.int64)
        v = np.asarray(v, dtype=np.int64)
        keep = (u >= 0) & (v >= 0)
        lo, hi = np.minimum(u, v)[keep], np.maximum(u, v)[keep]
        ids = np.asarray(space.node_ids, dtype=np.int64)
        pred = np.asarray(space.predictions, dtype=np.int64)
        return cls(
            node_u=ids[lo],
            node_v=ids[hi],
            similarity=np.asarray(similarity, dtype=np.float64)[keep],
            pred_u=pred[lo],
            pred_v=pred[hi],
        )

    @classmethod
    def empty(cls) -> GlobalEvidence:
        """A result with no pair."""
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, np.zeros(0, dtype=np.float64), z, z)

    @classmethod
    def from_frame(
        cls, frame: pd.DataFrame, *, user_ids: np.ndarray | None = None
    ) -> GlobalEvidence:
        """From a global evidence table with ``node_u, node_v, similarity`` (``pred_u``,
        ``pred_v`` optional, ``-1`` when absent), kept in the given (rank) order. With
        ``user_ids`` (the graph's own ids) the node columns are matched against them
        (:func:`~gnnaudit.audit.search.evidence_table.table_nodes`)."""
        missing = [c for c in (NODE_U, NODE_V, SIMILARITY) if c not in frame.columns]
        if missing:
            raise InvalidInputError(
                f"a global-evidence DataFrame needs columns {NODE_U}, {NODE_V}, {SIMILARITY}; "
                f"missing {missing}"
            )
        u = table_nodes(frame, NODE_U, user_ids)
        v = table_nodes(frame, NODE_V, user_ids)
        swap = u > v

        def pred(name: str) -> np.ndarray:
            if name in frame.columns:
                return frame[name].to_numpy(dtype=np.int64)
            return np.full(u.size, -1, dtype=np.int64)

        pu, pv = pred(PRED_U), pred(PRED_V)
        return cls(
            node_u=np.where(swap, v, u),
            node_v=np.where(swap, u, v),
            similarity=frame[SIMILARITY].to_numpy(dtype=np.float64),
            pred_u=np.where(swap, pv, pu),
            pred_v=np.where(swap, pu, pv),
            user_ids=user_ids,
        )

    def named(self, user_ids: np.ndarray | None) -> GlobalEvidence:
        """The same result whose tables name nodes by ``user_ids`` (None: node indices)."""
        return self if user_ids is self.user_ids else replace(self, user_ids=user_ids)

    def __len__(self) -> int:
        return int(self.node_u.shape[0])

    def head(self, k: int) -> GlobalEvidence:
        """The first ``k`` pairs."""
        k = check_int("k", k, minimum=0)
        if k >= len(self):
            return self
        return GlobalEvidence(
            self.node_u[:k],
            self.node_v[:k],
            self.similarity[:k],
            self.pred_u[:k],
            self.pred_v[:k],
            user_ids=self.user_ids,
        )

    def distinct_nodes(self, k: int | None = None) -> np.ndarray:
        """Distinct node ids of the first ``k`` pairs (all when None), in order of first
        appearance (``node_u`` before ``node_v`` within a pair)."""
        top = self if k is None else self.head(k)
        flat = np.stack([top.node_u, top.node_v], axis=1).ravel()
        _, first = np.unique(flat, return_index=True)
        return flat[np.sort(first)]

    def to_frame(self) -> pd.DataFrame:
        """Evidence table (:data:`~gnnaudit.audit.search.evidence_table.EVIDENCE_COLUMNS`),
        ``rank`` 1 = most similar over the whole table; nodes named by ``user_ids`` when
        set."""
        return evidence_frame(
            self.node_u,
            self.node_v,
            self.pred_u,
            self.pred_v,
            self.similarity,
            np.arange(1, len(self) + 1),
            user_ids=self.user_ids,
        )


@dataclass(frozen=True)
class ProbedLocalEvidence(LocalEvidence):
    """Local answer of the index: a :class:`~gnnaudit.audit.search.results.LocalEvidence`
    plus, per query, the number of clusters scanned and whether the cap bound certifies the
    answer as exact (it stopped because no unscanned cluster can hold a better candidate, not
    at ``max_probe``). ``head`` / ``select`` return plain ``LocalEvidence``."""

    n_probed: np.ndarray  # (q,) int64
    certified: np.ndarray  # (q,) bool

    def __post_init__(self) -> None:
        super().__post_init__()
        q = self.query.shape[0]
        if np.shape(self.n_probed) != (q,) or np.shape(self.certified) != (q,):
            raise InvalidInputError(
                f"n_probed and certified must have shape ({q},), got "
                f"{np.shape(self.n_probed)} and {np.shape(self.certified)}"
            )
