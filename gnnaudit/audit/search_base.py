"""The contract every counterfactual-evidence search backend implements.

A backend sees only the *search space*: the test nodes' kernel-similarity embeddings
``x^agg`` (rows unit-normalised, so an inner product is the cosine ``KS(v, u)``; a zero row
stays zero and has similarity 0 with everything), their predicted classes and their node ids.
It answers, by position into that space:

* local top-k: for each query v, the k positions u != v with ``pred(u) != pred(v)`` and the
  largest ``KS(v, u)``; ties broken by the smaller node id (positions are sorted by node id,
  so the smaller position);
* global top-k: the k unordered pairs {v, u} with different predictions and the largest
  ``KS``; ties broken by the smaller ``(u, v)`` position pair.

Fewer than k candidates: the result is padded with position ``-1`` and similarity ``-inf``;
:class:`~gnnaudit.audit.CounterfactualEvidence` drops the padding (it never pads user results).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

__all__ = ["SearchSpace", "Neighbours", "Pairs", "EvidenceSearcher"]


@dataclass(frozen=True)
class SearchSpace:
    """The test nodes a backend searches over.

    Attributes
    ----------
    embedding : (m, d) float32 array, rows of ``x^agg`` divided by their norm (zero rows stay 0).
    predictions : (m,) int64 array, the model's predicted class of each test node.
    node_ids : (m,) int64 array, global node ids, strictly ascending.
    """

    embedding: np.ndarray
    predictions: np.ndarray
    node_ids: np.ndarray

    @property
    def size(self) -> int:
        return int(self.node_ids.shape[0])


@dataclass(frozen=True)
class Neighbours:
    """Local top-k answer: row i belongs to query i; padded with -1 / -inf."""

    similarity: np.ndarray  # (q, k) float
    position: np.ndarray  # (q, k) int64 positions into the search space


@dataclass(frozen=True)
class Pairs:
    """Global top-k answer, sorted by similarity descending; ``u < v`` positions."""

    similarity: np.ndarray  # (p,) float
    u: np.ndarray  # (p,) int64
    v: np.ndarray  # (p,) int64


class EvidenceSearcher(ABC):
    """Base class of the search backends (``exact``, ``index``, ``faiss``)."""

    #: backend name as accepted by ``CounterfactualEvidence(backend=...)``
    name: str = ""

    @abstractmethod
    def build(self, space: SearchSpace) -> EvidenceSearcher:
        """Prepare the backend for ``space`` and return ``self``."""

    @abstractmethod
    def local(self, queries: np.ndarray, k: int) -> Neighbours:
        """Top-k evidences of each query (an int64 array of positions into the space)."""

    @abstractmethod
    def global_pairs(self, k: int) -> Pairs:
        """The top-k unordered pairs with different predictions."""
