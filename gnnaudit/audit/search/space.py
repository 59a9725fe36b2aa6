"""The search space every counterfactual-evidence backend sees (its own module, so that the
results of :mod:`gnnaudit.audit.search.results` and the backends of
:mod:`gnnaudit.audit.search.base` can both name it without importing each other)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SearchSpace"]


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
        """Number of test nodes searched over (``m``)."""
        return int(self.node_ids.shape[0])
