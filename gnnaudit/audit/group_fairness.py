"""Group fairness of a node classifier with respect to a sensitive attribute.

For every group ``s`` of the sensitive attribute (restricted to ``mask``):

.. math::

    \\mathrm{acc}_s = P(\\hat y = y \\mid s), \\quad
    \\mathrm{PR}_s = P(\\hat y = 1 \\mid s), \\quad
    \\mathrm{TPR}_s = P(\\hat y = 1 \\mid y = 1, s),

    \\Delta_{SP} = \\max_s \\mathrm{PR}_s - \\min_s \\mathrm{PR}_s, \\qquad
    \\Delta_{EO} = \\max_s \\mathrm{TPR}_s - \\min_s \\mathrm{TPR}_s .

The positive class is ``1`` (as in NIFTY / FairGNN: "good credit", "bail granted" ...). With two
groups the differences are the usual ``|PR_0 - PR_1|`` and ``|TPR_0 - TPR_1|``; with more groups
they are the max-minus-min gap.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit._validation import check_array
from gnnaudit.errors import InvalidInputError

__all__ = ["GroupFairness", "group_fairness", "GROUP_COLUMNS"]

logger = logging.getLogger(__name__)

GROUP_COLUMNS = ["group", "size", "positives", "accuracy", "positive_rate", "true_positive_rate"]


@dataclass
class GroupFairness:
    """Per-group rates and the gaps between groups.

    Attributes
    ----------
    groups : DataFrame with columns ``group, size, positives, accuracy, positive_rate,
        true_positive_rate``; ``positives`` = nodes of the group with label 1. A group without
        label-1 nodes has ``true_positive_rate`` NaN (undefined, logged) and is left out of
        ``equal_opportunity_difference``.
    statistical_parity_difference : max minus min positive rate over groups.
    equal_opportunity_difference : max minus min true-positive rate over groups with a
        defined rate; NaN (logged) when fewer than two groups have one.
    positive_class : the class counted as positive (always 1).
    """

    groups: pd.DataFrame
    statistical_parity_difference: float
    equal_opportunity_difference: float
    positive_class: int = 1
    sensitive_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN becomes ``None``)."""

        def clean(v: Any) -> Any:
            if isinstance(v, float) and not np.isfinite(v):
                return None
            if isinstance(v, np.generic):
                return clean(v.item())
            return v

        records = [
            {k: clean(v) for k, v in row.items()} for row in self.groups.to_dict(orient="records")
        ]
        return {
            "groups": records,
            "statistical_parity_difference": clean(self.statistical_parity_difference),
            "equal_opportunity_difference": clean(self.equal_opportunity_difference),
            "positive_class": self.positive_class,
            "sensitive_name": self.sensitive_name,
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> GroupFairness:
        groups = pd.DataFrame(payload["groups"], columns=GROUP_COLUMNS)
        groups["true_positive_rate"] = groups["true_positive_rate"].astype(float)

        def num(v: Any) -> float:
            return float("nan") if v is None else float(v)

        return cls(
            groups=groups,
            statistical_parity_difference=num(payload["statistical_parity_difference"]),
            equal_opportunity_difference=num(payload["equal_opportunity_difference"]),
            positive_class=int(payload.get("positive_class", 1)),
            sensitive_name=payload.get("sensitive_name"),
        )

    def summary(self) -> pd.DataFrame:
        """One-row table of the two gaps."""
        return pd.DataFrame(
            {
                "statistical_parity_difference": [self.statistical_parity_difference],
                "equal_opportunity_difference": [self.equal_opportunity_difference],
            }
        )


def group_fairness(
    predictions: Any,
    labels: Any,
    sensitive: Any,
    mask: Any = None,
    *,
    sensitive_name: str | None = None,
) -> GroupFairness:
    """Per-group accuracy, positive rate and true-positive rate, and the parity gaps.

    Parameters
    ----------
    predictions, labels : (n,) integer classes (tensors or arrays); positive class = 1.
    sensitive : (n,) group of each node (any integer / float coding, e.g. 0/1 gender).
    mask : optional boolean mask or node ids selecting the nodes evaluated (e.g. test mask).
    """
    pred = check_array("predictions", predictions, ndim=1, dtype=np.int64)
    y = check_array("labels", labels, ndim=1, dtype=np.int64)
    s = check_array("sensitive", sensitive, ndim=1, dtype=np.float64)
    n = pred.shape[0]
    for name, arr in (("labels", y), ("sensitive", s)):
        if arr.shape[0] != n:
            raise InvalidInputError(
                f"{name} must have the same length as predictions ({n}), got {arr.shape[0]}"
            )
    if mask is not None:
        m = mask.detach().cpu().numpy() if hasattr(mask, "detach") else np.asarray(mask)
        if m.dtype == bool:
            if m.shape != (n,):
                raise InvalidInputError(
                    f"mask must be a boolean array of shape ({n},), got shape {m.shape}"
                )
            idx = np.flatnonzero(m)
        else:
            idx = check_array("mask", m, ndim=1, dtype=np.int64, min_rows=0)
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                raise InvalidInputError(f"mask holds node ids outside [0, {n - 1}]")
        pred, y, s = pred[idx], y[idx], s[idx]
    if pred.size == 0:
        raise InvalidInputError("mask selects no node; group fairness needs at least one node")

    groups, code = np.unique(s, return_inverse=True)
    g = groups.size
    size = np.bincount(code, minlength=g)
    correct = np.bincount(code, weights=(pred == y).astype(float), minlength=g)
    pos_pred = np.bincount(code, weights=(pred == 1).astype(float), minlength=g)
    is_pos = y == 1
    positives = np.bincount(code[is_pos], minlength=g)
    tp = np.bincount(code[is_pos], weights=(pred[is_pos] == 1).astype(float), minlength=g)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpr = np.where(positives > 0, tp / np.maximum(positives, 1), np.nan)
    group_values: list[Any] = [int(v) if float(v).is_integer() else float(v) for v in groups]
    table = pd.DataFrame(
        {
            "group": group_values,
            "size": size.astype(np.int64),
            "positives": positives.astype(np.int64),
            "accuracy": correct / size,
            "positive_rate": pos_pred / size,
            "true_positive_rate": tpr,
        }
    )
    spd = float(table["positive_rate"].max() - table["positive_rate"].min())
    defined = np.isfinite(tpr)
    if (~defined).any():
        logger.warning(
            "group(s) %s have no label-1 node; their true-positive rate is undefined (NaN)",
            [group_values[i] for i in np.flatnonzero(~defined)],
        )
    if defined.sum() >= 2:
        eod = float(tpr[defined].max() - tpr[defined].min())
    else:
        eod = float("nan")
        logger.warning(
            "equal-opportunity difference undefined: fewer than two groups have label-1 nodes"
        )
    if g < 2:
        logger.warning("sensitive attribute takes a single value on the evaluated nodes")
    return GroupFairness(
        groups=table,
        statistical_parity_difference=spd,
        equal_opportunity_difference=eod,
        sensitive_name=sensitive_name,
    )
