"""Feature values as small integer codes for the discrimination scores (CE paper, Eq. 12).

Binary and categorical columns (whole numbers, at most ``max_values`` distinct values over all
nodes) keep their values; a continuous column is cut into ``bins`` quantile bins over all nodes
(:func:`~gnnaudit.audit.interventions.quantile_bins`), each labelled by its interval
``[lo, hi)``, so a table never lists the raw floats of a continuous column as values.

With ``units`` (:class:`~gnnaudit.audit.fairness.feature_units.FeatureUnits`, what the graph
says about its inputs) the labels are in the user's units, ``[25, 34)`` rather than
``[-0.41, 0.12)``, category names rather than codes; the codes stay those of the inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnnaudit._validation import check_int
from gnnaudit.audit.fairness.feature_units import MODEL_UNITS, ORIGINAL_UNITS, FeatureUnits
from gnnaudit.audit.interventions import quantile_bins
from gnnaudit.errors import InvalidInputError

__all__ = ["FeatureCoding", "code_features"]


# ----------------------------------------------------------------------------------------------
# values: categories and quantile bins
# ----------------------------------------------------------------------------------------------
def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.3g}"


@dataclass(frozen=True)
class FeatureCoding:
    """Every scored column as small integer codes with readable value labels.

    Attributes
    ----------
    columns : column indices into ``x``.
    names : their feature names.
    codes : (n, F) int32, the value (category or bin) of each node in each column.
    labels : per column, the label of each code (``"1"``, ``"0.5"``, ``"[-0.67, 0.01)"``).
    kinds : per column, ``"categorical"`` (binary included) or ``"binned"``.
    units : :data:`~gnnaudit.audit.fairness.feature_units.MODEL_UNITS` or ``ORIGINAL_UNITS``,
        the units of the labels.
    """

    columns: list[int]
    names: list[str]
    codes: np.ndarray
    labels: list[list[str]]
    kinds: list[str] = field(default_factory=list)
    units: str = MODEL_UNITS


def code_features(
    x: np.ndarray,
    names: Sequence[str],
    features: Any = None,
    *,
    max_values: int = 10,
    bins: int = 4,
    units: FeatureUnits | None = None,
) -> FeatureCoding:
    """Codes of the columns ``features`` (names or indices; default every column).

    Binary columns (two values) and whole-number columns with at most ``max_values`` distinct
    values are coded by value; every other column (fractional values, e.g. a standardised
    count, or many values) is cut into ``bins`` quantile bins (see the module docstring).
    ``units`` labels the values in the user's units (``FeatureUnits.from_data(data, d)``).
    Cost O(n F log n)."""
    max_values = check_int("max_values", max_values, minimum=2)
    bins = check_int("bins", bins, minimum=2)
    d = x.shape[1]
    if features is None:
        cols = list(range(d))
    else:
        if isinstance(features, (str, int, np.integer)):
            features = [features]
        lookup = {n: i for i, n in enumerate(names)}
        cols = []
        for f in features:
            if isinstance(f, str):
                if f not in lookup:
                    raise InvalidInputError(
                        f"features holds unknown feature name {f!r}; known names: "
                        f"{', '.join(names[:20])}{' ...' if len(names) > 20 else ''}"
                    )
                cols.append(lookup[f])
            else:
                i = check_int("features entry", f, minimum=-d, maximum=d - 1)
                cols.append(i % d)
        cols = list(dict.fromkeys(cols))
    if not cols:
        raise InvalidInputError("features selects no column")
    codes = np.empty((x.shape[0], len(cols)), dtype=np.int32)
    labels: list[list[str]] = []
    kinds: list[str] = []
    shown = [names[c] for c in cols]
    for j, c in enumerate(cols):
        col = x[:, c]
        top = float(np.abs(col).max()) if col.size else 0.0
        values, inverse = np.unique(col, return_inverse=True)
        whole = bool(np.all(values == np.round(values)))
        if values.size <= 2 or (whole and values.size <= max_values):
            codes[:, j] = inverse
            if units is None:
                labels.append([_num(v) for v in values])
            else:
                shown[j], value_labels = units.categorical(c, names[c], values, top)
                labels.append(value_labels)
            kinds.append("categorical")
            continue
        raw, inner = quantile_bins(col, bins)
        used = np.unique(raw)  # ties can leave a bin empty: keep the codes consecutive
        codes[:, j] = np.searchsorted(used, raw)
        lows = np.concatenate([[col.min()], inner])
        highs = np.concatenate([inner, [col.max()]])
        if units is None:
            lo, hi = [_num(v) for v in lows], [_num(v) for v in highs]
        else:
            lo, hi = units.edges(c, lows, highs, top)
        labels.append([f"[{lo[b]}, {hi[b]}{']' if b == inner.size else ')'}" for b in used])
        kinds.append("binned")
    return FeatureCoding(
        columns=cols,
        names=shown,
        codes=codes,
        labels=labels,
        kinds=kinds,
        units=MODEL_UNITS if units is None else ORIGINAL_UNITS,
    )


# ----------------------------------------------------------------------------------------------
# Eq. 12
# ----------------------------------------------------------------------------------------------
