"""The contract every counterfactual-evidence search backend implements.

A backend sees only the *search space*: the test nodes' kernel-similarity embeddings
``x^agg`` (rows unit-normalised, so an inner product is the cosine ``KS(v, u)``; a zero row
stays zero and has similarity 0 with everything), their predicted classes and their node ids.
Queries are given by *position* into that space; answers come back as the typed results of
:mod:`gnnaudit.audit.search.results`, in node-id space:

* :meth:`EvidenceSearcher.local` -> :class:`~gnnaudit.audit.search.results.LocalEvidence`:
  for each query v, the k positions u != v with ``pred(u) != pred(v)`` and the largest
  ``KS(v, u)``; ties broken by the smaller node id (positions are sorted by node id, so the
  smaller position). The arrays are ``(q, k)``, padded with node ``-1`` and similarity
  ``-inf`` when a query has fewer than k candidates.
* :meth:`EvidenceSearcher.global_pairs` -> :class:`~gnnaudit.audit.search.results.GlobalEvidence`:
  the (at most) k unordered pairs {v, u} with different predictions and the largest ``KS``;
  ties broken by the smaller ``(u, v)`` pair, ``u < v``. No padding: fewer pairs come back
  when fewer exist.

A backend implements :meth:`~EvidenceSearcher.build` and the two position-level hooks
:meth:`~EvidenceSearcher._local_positions` / :meth:`~EvidenceSearcher._global_positions`
(arrays of positions, padded with ``-1`` / ``-inf``); the base class validates the arguments
and maps the positions to node ids once, in
:meth:`LocalEvidence.from_positions <gnnaudit.audit.search.results.LocalEvidence.from_positions>`.

The module also holds the argument checks the backends share (:func:`check_space`,
:func:`check_queries`, :func:`check_k`, :func:`make_rng`, :func:`unknown_params`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from gnnaudit._validation import check_array, check_int
from gnnaudit.audit.search.results import GlobalEvidence, LocalEvidence
from gnnaudit.audit.search.space import SearchSpace
from gnnaudit.errors import InvalidInputError, NotFittedError

__all__ = [
    "SearchSpace",
    "EvidenceSearcher",
    "check_space",
    "check_queries",
    "check_k",
    "make_rng",
    "unknown_params",
]


class EvidenceSearcher(ABC):
    """Base class of the search backends (``exact``, ``sorted``, ``index``, ``faiss``).

    Subclasses implement :meth:`build` (which must set ``space_``, the validated
    :class:`SearchSpace`) and :meth:`_local_positions`; :meth:`_global_positions` defaults to
    merging local lists (:func:`gnnaudit.audit.search.global_pairs.global_pairs_from_local`).
    """

    #: backend name as accepted by ``CounterfactualEvidence(backend=...)``
    name: str = ""
    #: the validated search space, set by :meth:`build`
    space_: SearchSpace

    @abstractmethod
    def build(self, space: SearchSpace) -> EvidenceSearcher:
        """Prepare the backend for ``space`` and return ``self``."""

    @abstractmethod
    def _local_positions(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(similarity, position)``, both ``(q, k)``, rows sorted by (similarity desc,
        position asc), padded with ``-inf`` / ``-1``. ``queries`` and ``k`` are validated."""

    def _global_positions(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(similarity, u, v)`` of the best pairs, ``u < v`` positions, sorted by
        (similarity desc, u, v); entries with ``u = -1`` are padding. ``k`` is validated.

        When :meth:`local` last answered every position of this space (the audit asks the
        local evidences of all audited nodes before the global pairs), those lists are the
        merge's first pass instead of a second search of every node."""
        from gnnaudit.audit.search.global_pairs import global_pairs_from_local

        return global_pairs_from_local(
            self._local_positions, self.space_.size, k, first=self._every_list()
        )

    def _every_list(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The local lists of every position from the last :meth:`local` call on this space,
        if it asked for all of them in order; else None."""
        kept = getattr(self, "_all_lists", None)
        if kept is None or kept[0] is not self.space_:
            return None
        return kept[1], kept[2]

    # ------------------------------------------------------------------ public API
    def _built_space(self) -> SearchSpace:
        space = getattr(self, "space_", None)
        if space is None:
            raise NotFittedError(f"{type(self).__name__} is not built yet; call build(space) first")
        return space

    def local(self, queries: np.ndarray, k: int) -> LocalEvidence:
        """Top-``k`` evidences of each query (positions into the space, an int array).

        Returns a :class:`~gnnaudit.audit.search.results.LocalEvidence` with one row per query
        in the given order and exactly ``k`` columns (padded with ``-1`` / ``-inf``).
        """
        space = self._built_space()
        k = check_k(k)
        q = check_queries(queries, space.size)
        sim, pos = self._local_positions(q, k)
        if q.size == space.size and np.array_equal(q, np.arange(space.size)):
            self._all_lists = (space, sim, pos)  # the first pass of a later global search
        return LocalEvidence.from_positions(space, q, pos, sim)

    def global_pairs(self, k: int) -> GlobalEvidence:
        """The top-``k`` unordered pairs with different predictions (fewer if fewer exist)."""
        space = self._built_space()
        k = check_k(k)
        sim, u, v = self._global_positions(k)
        return GlobalEvidence.from_positions(space, u, v, sim)


# ----------------------------------------------------------------------------- checks
def check_space(space: Any) -> SearchSpace:
    """Validate a :class:`SearchSpace` (shapes, dtypes, finiteness, ascending ids) and return
    it with C-contiguous float32 / int64 arrays."""
    if not isinstance(space, SearchSpace):
        raise InvalidInputError(f"space must be a SearchSpace, got {type(space).__name__}")
    emb = check_array("space.embedding", space.embedding, ndim=2, dtype=np.float32, min_rows=1)
    pred = check_array("space.predictions", space.predictions, ndim=1, dtype=None, min_rows=1)
    ids = check_array("space.node_ids", space.node_ids, ndim=1, dtype=None, min_rows=1)
    if pred.dtype.kind not in "iu" or ids.dtype.kind not in "iu":
        raise InvalidInputError("space.predictions and space.node_ids must be integer arrays")
    if not (emb.shape[0] == pred.shape[0] == ids.shape[0]):
        raise InvalidInputError(
            f"space arrays disagree in length: embedding {emb.shape[0]}, predictions "
            f"{pred.shape[0]}, node_ids {ids.shape[0]}"
        )
    if ids.shape[0] > 1 and not (np.diff(ids) > 0).all():
        raise InvalidInputError("space.node_ids must be strictly ascending")
    return SearchSpace(
        embedding=np.ascontiguousarray(emb, dtype=np.float32),
        predictions=np.asarray(pred, dtype=np.int64),
        node_ids=np.asarray(ids, dtype=np.int64),
    )


def check_queries(queries: Any, size: int) -> np.ndarray:
    """Validate query positions (int array in ``[0, size)``)."""
    q = np.asarray(queries)
    if q.ndim == 0:
        q = q.reshape(1)
    if q.ndim != 1 or (q.size and q.dtype.kind not in "iu"):
        raise InvalidInputError(
            f"queries must be a 1-d integer array of positions, got shape {q.shape}, dtype {q.dtype}"
        )
    q = q.astype(np.int64)
    if q.size and (q.min() < 0 or q.max() >= size):
        raise InvalidInputError(
            f"queries must be positions in [0, {size - 1}], got values in [{q.min()}, {q.max()}]"
        )
    return q


def check_k(k: Any) -> int:
    """``k`` as an int >= 1."""
    return check_int("k", k, minimum=1)


def make_rng(random_state: Any) -> np.random.Generator:
    """``None`` | int >= 0 | ``np.random.Generator`` -> a Generator (validated)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None:
        return np.random.default_rng()
    return np.random.default_rng(check_int("random_state", random_state, minimum=0))


def unknown_params(cls_name: str, unknown: dict[str, Any], allowed: tuple[str, ...]) -> None:
    """Raise for constructor keywords a backend does not know (``index_params`` typos)."""
    if unknown:
        key = sorted(unknown)[0]
        raise InvalidInputError(
            f"unknown index_params key {key!r} for {cls_name}; allowed keys: {', '.join(allowed)}"
        )
