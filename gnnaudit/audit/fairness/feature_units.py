"""Feature values in the user's own units for the discrimination table.

The model sees inputs that the loader or a scaler derived from the user's table: z-scores of
numeric columns, 0/1 codes of text columns. A graph may say how to undo that through optional
attributes of its ``Data`` (plain lists and dicts, set where the transformation happens):

* ``feature_mean``, ``feature_scale``: ``d`` floats each. Model input ``j`` is
  ``x_j = (raw_j - feature_mean[j]) / feature_scale[j]`` (scikit-learn's ``StandardScaler``),
  so ``raw = x * scale + mean``; a column that was not scaled has mean 0 and scale 1. Set by
  :meth:`gnnaudit.datasets.scaler.Standardizer.apply` (``--standardize``; applied to data that
  already carries them, the two transforms are composed) and by ``load_nifty(standardize=True)``.
* ``feature_categories``: feature name -> its values in code order (a text column coded
  ``0..m-1``, the sensitive column included). Set by :func:`gnnaudit.datasets.read_graph`.
* ``feature_onehot``: feature name -> ``[column, value]`` for the one-hot columns of a text
  column (``"gender=F" -> ["gender", "F"]``). Set by :func:`~gnnaudit.datasets.read_graph`.

A transform that changes ``x`` afterwards (``--transform``) drops them
(:data:`FEATURE_UNIT_ATTRIBUTES`): they would no longer describe the inputs.

Units change only the **labels** of the table, never the codes: quantile bins commute with a
positive affine map, so the bins (and every score) are those of the model inputs, and a bin's
edges mapped back are the quantiles of the raw column. Mapped-back values are rounded to
``1e-6`` of the column's largest magnitude (float32 inputs carry about 7 digits; this removes
the ``24.999998`` of a ``25``) and shown with 4 significant digits. A one-hot column reads
``gender = F`` (its 0 value ``gender = not F``); a coded column shows its category names.
Without any of these attributes the values are the model inputs, as the report then says.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnnaudit.datasets.scaler import recorded_inverse
from gnnaudit.errors import InvalidInputError

__all__ = [
    "FEATURE_UNIT_ATTRIBUTES",
    "FeatureUnits",
    "MODEL_UNITS",
    "ORIGINAL_UNITS",
    "drop_units",
    "units_note",
]

logger = logging.getLogger(__name__)

#: the Data attributes describing the units (dropped by a transform that changes ``x``)
FEATURE_UNIT_ATTRIBUTES = ("feature_mean", "feature_scale", "feature_categories", "feature_onehot")

#: how a table says which units its values are in
MODEL_UNITS = "model-input units"
ORIGINAL_UNITS = "original units"


def _mapping(name: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            f"data.{name} must map feature names to values, got {type(value).__name__}"
        )
    return {str(k): v for k, v in value.items()}


def _num(v: float) -> str:
    v = float(v)
    if v.is_integer():
        return str(int(v))
    return np.format_float_positional(v, precision=4, fractional=False, trim="-")


@dataclass(frozen=True)
class FeatureUnits:
    """How to show the model inputs of a graph in the user's units (module doc).

    Attributes
    ----------
    mean, scale : ``(d,)`` arrays (``raw = x * scale + mean``), or None (no scaling).
    categories : feature name -> values in code order.
    onehot : feature name -> ``(column, value)``.
    """

    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    categories: dict[str, list[Any]] = field(default_factory=dict)
    onehot: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def from_data(cls, data: Any, num_features: int) -> FeatureUnits | None:
        """The units ``data`` carries, or None when it carries none (or none that fit)."""
        recorded = recorded_inverse(data, num_features)
        mean, scale = (None, None) if recorded is None else recorded
        categories = {
            k: list(v)
            for k, v in _mapping(
                "feature_categories", getattr(data, "feature_categories", None)
            ).items()
            if isinstance(v, Sequence) and not isinstance(v, str)
        }
        onehot: dict[str, tuple[str, str]] = {}
        for k, v in _mapping("feature_onehot", getattr(data, "feature_onehot", None)).items():
            if isinstance(v, str) or not isinstance(v, Sequence) or len(v) != 2:
                raise InvalidInputError(
                    f"data.feature_onehot[{k!r}] must be [column, value], got {v!r}"
                )
            onehot[k] = (str(v[0]), str(v[1]))
        if mean is None and not categories and not onehot:
            return None
        return cls(mean=mean, scale=scale, categories=categories, onehot=onehot)

    def to_raw(self, column: int, values: np.ndarray, magnitude: float) -> np.ndarray:
        """``values`` of model input ``column`` in the user's units, rounded to ``1e-6`` of
        ``magnitude`` (the column's largest absolute model input)."""
        v = np.asarray(values, dtype=np.float64)
        if self.mean is None or self.scale is None:
            return v
        s, m = float(self.scale[column]), float(self.mean[column])
        raw = v * s + m
        top = magnitude * s + abs(m)
        if top <= 0:
            return raw
        decimals = 6 - math.ceil(math.log10(top))
        return np.round(raw, decimals) + 0.0  # + 0.0: no "-0"

    def categorical(
        self, column: int, name: str, values: np.ndarray, magnitude: float
    ) -> tuple[str, list[str]]:
        """Display name and value labels of a column coded by value (``values`` sorted)."""
        raw = self.to_raw(column, values, magnitude)
        whole = bool(np.all(raw == np.round(raw)))
        if name in self.onehot and whole and set(raw.tolist()) <= {0.0, 1.0}:
            col, val = self.onehot[name]
            return col, [val if r == 1 else f"not {val}" for r in raw]
        names = self.categories.get(name)
        if names is not None and whole and raw.min() >= 0 and raw.max() < len(names):
            return name, [str(names[int(r)]) for r in raw]
        return name, [_num(r) for r in raw]

    def edges(
        self, column: int, lows: np.ndarray, highs: np.ndarray, magnitude: float
    ) -> tuple[list[str], list[str]]:
        """Bin edges of a binned column as labels in the user's units (a coded column binned
        for its many values keeps its codes)."""
        lo = self.to_raw(column, lows, magnitude)
        hi = self.to_raw(column, highs, magnitude)
        return [_num(v) for v in lo], [_num(v) for v in hi]


def units_note(units: str) -> str:
    """The report's sentence on the units of a table's values."""
    if units == MODEL_UNITS:
        return (
            "Values are in model-input units (the graph does not say how its features were "
            "standardised or encoded: see gnnaudit.audit.fairness.feature_units)."
        )
    return (
        "Values are in the data's original units (standardisation undone, text columns by "
        "name); the bins are the quantiles of the model inputs, mapped back."
    )


def drop_units(data: Any) -> None:
    """Delete the unit attributes of ``data`` (after a transform changed its inputs)."""
    for name in FEATURE_UNIT_ATTRIBUTES:
        if getattr(data, name, None) is not None:
            delattr(data, name)
