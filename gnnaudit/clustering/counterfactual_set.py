"""The result of an ExDBSCAN query: counterfactuals of one point, with their quality metrics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import rowwise_distances

__all__ = ["CounterfactualSet"]


@dataclass
class CounterfactualSet:
    """Counterfactuals of one point.

    Attributes
    ----------
    x : ndarray (d,)
        The explained point.
    counterfactuals : ndarray (k, d)
    reference_cores : ndarray (k,)
        Data indices of the reference core points (one per counterfactual).
    targets : ndarray (k,)
        Cluster of each counterfactual.
    valid : ndarray (k,) of bool
        ``CoreGraph.assign(counterfactuals) == targets`` (always true by construction).
    proximity : float
        Mean distance from ``x`` to the counterfactuals (clustering metric).
    diversity : float
        :math:`\\det K`, :math:`K_{ij} = 1 / (1 + D(q_i, q_j))` over the reference cores.
    energy : float
        Energy :math:`E(S)` of the reference cores (with the model's ``alpha``).
    source_label : int
        Cluster of ``x`` (``-1`` noise).
    strategy : str
    greedy_energy : float or None
        Energy of the plain greedy set when ``refine`` or ``exact`` changed it (else equal
        to ``energy``), to report the greedy gap.
    feature_names : list of str
    metric : str
        Metric of the clustering (distances in :meth:`summary`).
    """

    x: np.ndarray
    counterfactuals: np.ndarray
    reference_cores: np.ndarray
    targets: np.ndarray
    valid: np.ndarray
    proximity: float
    diversity: float
    energy: float
    source_label: int
    strategy: str = "energy"
    greedy_energy: float | None = None
    feature_names: list[str] = field(default_factory=list)
    metric: str = "euclidean"

    def __len__(self) -> int:
        """Number of counterfactuals."""
        return int(self.counterfactuals.shape[0])

    def _names(self, feature_names: Sequence[str] | None) -> list[str]:
        d = self.x.shape[0]
        names = list(feature_names) if feature_names is not None else list(self.feature_names)
        if not names:
            names = [f"x{i}" for i in range(d)]
        if len(names) != d:
            raise InvalidInputError(f"feature_names must have {d} entries, got {len(names)}")
        return names

    def to_frame(self, feature_names: Sequence[str] | None = None) -> Any:
        """Per-feature changes, one row per (counterfactual, changed feature).

        Columns: ``counterfactual, target, valid, feature, original, new, change``.
        """
        import pandas as pd

        names = self._names(feature_names)
        delta = self.counterfactuals - self.x[None, :]
        cf, feat = np.nonzero(delta != 0)
        return pd.DataFrame(
            {
                "counterfactual": cf,
                "target": self.targets[cf],
                "valid": self.valid[cf],
                "feature": [names[f] for f in feat],
                "original": self.x[feat],
                "new": self.counterfactuals[cf, feat],
                "change": delta[cf, feat],
            }
        )

    def summary(self) -> Any:
        """One row per counterfactual: target, reference core, validity, distance to ``x``
        and number of changed features."""
        import pandas as pd

        delta = self.counterfactuals - self.x[None, :]
        return pd.DataFrame(
            {
                "counterfactual": np.arange(len(self)),
                "target": self.targets,
                "reference_core": self.reference_cores,
                "valid": self.valid,
                "distance": rowwise_distances(self.x[None, :], self.counterfactuals, self.metric),
                "n_changed": (delta != 0).sum(axis=1),
            }
        )
