"""Feature values as small integer codes for the discrimination scores (CE paper, Eq. 12).

Binary and categorical columns (whole numbers, at most ``max_values`` distinct values over all
nodes) keep their values; a continuous column is cut into ``bins`` quantile bins over all nodes
(:func:`~gnnaudit.audit.interventions.quantile_bins`), each labelled by its interval
``[lo, hi)``, so a table never lists the raw floats of a continuous column as values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnnaudit._validation import check_int
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
    """

    columns: list[int]
    names: list[str]
    codes: np.ndarray
    labels: list[list[str]]
    kinds: list[str] = field(default_factory=list)


def code_features(
    x: np.ndarray,
    names: Sequence[str],
    features: Any = None,
    *,
    max_values: int = 10,
    bins: int = 4,
) -> FeatureCoding:
    """Codes of the columns ``features`` (names or indices; default every column).

    Binary columns (two values) and whole-number columns with at most ``max_values`` distinct
    values are coded by value; every other column (fractional values, e.g. a standardised
    count, or many values) is cut into ``bins`` quantile bins (see the module docstring).
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
    for j, c in enumerate(cols):
        col = x[:, c]
        values, inverse = np.unique(col, return_inverse=True)
        whole = bool(np.all(values == np.round(values)))
        if values.size <= 2 or (whole and values.size <= max_values):
            codes[:, j] = inverse
            labels.append([_num(v) for v in values])
            kinds.append("categorical")
            continue
        raw, inner = quantile_bins(col, bins)
        used = np.unique(raw)  # ties can leave a bin empty: keep the codes consecutive
        codes[:, j] = np.searchsorted(used, raw)
        lows = np.concatenate([[col.min()], inner])
        highs = np.concatenate([inner, [col.max()]])
        labels.append(
            [f"[{_num(lows[b])}, {_num(highs[b])}{']' if b == inner.size else ')'}" for b in used]
        )
        kinds.append("binned")
    return FeatureCoding(
        columns=cols, names=[names[c] for c in cols], codes=codes, labels=labels, kinds=kinds
    )


# ----------------------------------------------------------------------------------------------
# Eq. 12
# ----------------------------------------------------------------------------------------------
