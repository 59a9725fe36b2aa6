"""Checked conversion of table columns (pandas Series) to arrays, shared by the loaders.

One rule set for every table gnnaudit reads (NIFTY csv, tabular csv, a user's ``nodes.csv``):

* **numeric column**: every non-blank cell parses as a number. A column that mixes numbers
  and text (a stray ``"unknown"`` in an amount column) is refused, naming the column, the
  first offending rows and their values: it is never re-coded as categories.
* **missing values** (blank cells, ``NaN``) in a column that needs values are refused, naming
  the column and the first rows; they never reach ``numpy.unique`` (where pandas 3's NaN next
  to strings raised ``TypeError``) and never become a silent ``"nan"`` category.
* **categorical column**: codes ``0..m-1`` of the sorted distinct values; the original values
  are returned in code order.

Rows are reported as 0-based data rows (the first line after a CSV header is row 0).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gnnaudit.errors import InvalidInputError

__all__ = [
    "name_list",
    "describe_rows",
    "is_numeric_column",
    "column_kind",
    "numeric_column",
    "category_codes",
    "integer_column",
]


def name_list(names, limit: int = 20) -> str:
    """``'a', 'b', 'c' and 4 more``: names quoted (a newline in a name stays escaped)."""
    names = [str(n) for n in names]
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def describe_rows(series: pd.Series, bad: np.ndarray, limit: int = 5) -> str:
    """``row 3 ('unknown'), row 17 (blank) and 2 more`` for the rows where ``bad`` is true.

    A series indexed by node ids (not a RangeIndex) also names the id: ``row 3 (id 'n7': 2.5)``.
    """
    rows = np.flatnonzero(bad)
    values = series.to_numpy()
    named = not isinstance(series.index, pd.RangeIndex)

    def show(value: object) -> str:
        if pd.isna(value):
            return "blank"
        return repr(value.item() if isinstance(value, np.generic) else value)

    shown = ", ".join(
        f"row {int(r)} (id {series.index[r]!r}: {show(values[r])})"
        if named
        else f"row {int(r)} ({show(values[r])})"
        for r in rows[:limit]
    )
    more = f" and {rows.size - limit} more" if rows.size > limit else ""
    return shown + more


def _is_text_dtype(series: pd.Series) -> bool:
    return series.dtype.kind == "O" or pd.api.types.is_string_dtype(series)


def _text_cells(series: pd.Series) -> np.ndarray:
    """Non-blank cells that do not parse as numbers."""
    parsed = pd.to_numeric(series, errors="coerce")
    return (parsed.isna() & series.notna()).to_numpy()


def is_numeric_column(series: pd.Series) -> bool:
    """True for a real numeric (or boolean) dtype, or a text / object column whose every
    non-blank cell parses as a number. Datetime, complex and categorical dtypes are not
    numeric."""
    if series.dtype.kind in "biuf":
        return True
    if not _is_text_dtype(series):
        return False  # datetimes, complex numbers, categoricals ... are not feature numbers
    return not _text_cells(series).any()


def column_kind(source: str, column: str, series: pd.Series) -> str:
    """``"numeric"`` or ``"categorical"`` (every non-blank cell is text that is not a number).

    A column mixing numbers and text is refused with InvalidInputError naming the text cells:
    one stray ``"unknown"`` among amounts must not turn the amounts into category codes.
    """
    if is_numeric_column(series):
        return "numeric"
    if not _is_text_dtype(series):
        return "categorical"
    parsed = pd.to_numeric(series, errors="coerce")
    if parsed.notna().any():
        raise InvalidInputError(
            f"{source}: column {column!r} mixes numbers and text: text at "
            f"{describe_rows(series, _text_cells(series))}; fix those cells (a column is either "
            "all numbers or all categories)"
        )
    return "categorical"


def numeric_column(source: str, column: str, series: pd.Series) -> np.ndarray:
    """Float64 values of a column that must be numeric (see the module rules).

    Raises InvalidInputError naming ``source`` and ``column`` for text cells, missing or
    infinite values, and for dtypes that are not real numbers (datetime, complex ...).
    """
    if series.dtype.kind in "biuf":
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    elif _is_text_dtype(series):
        text = _text_cells(series)
        if text.any():
            raise InvalidInputError(
                f"{source}: column {column!r} must be numeric but holds text at "
                f"{describe_rows(series, text)}; fix those cells or leave them out"
            )
        values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        raise InvalidInputError(
            f"{source}: column {column!r} must be numeric, got dtype {series.dtype}"
        )
    missing = np.isnan(values)
    if missing.any():
        raise InvalidInputError(
            f"{source}: column {column!r} has missing values at "
            f"{describe_rows(series, missing)}; fill or drop those rows"
        )
    infinite = np.isinf(values)
    if infinite.any():
        raise InvalidInputError(
            f"{source}: column {column!r} has infinite values at {describe_rows(series, infinite)}"
        )
    return values


def integer_column(source: str, column: str, series: pd.Series, *, minimum: int = 0) -> np.ndarray:
    """Int64 values of a numeric column whose values are whole numbers ``>= minimum``."""
    values = numeric_column(source, column, series)
    bad = (values != np.round(values)) | (values < minimum)
    if bad.any():
        raise InvalidInputError(
            f"{source}: column {column!r} must hold whole numbers >= {minimum}; got "
            f"{describe_rows(series, bad)}"
        )
    return values.astype(np.int64)


def category_codes(source: str, column: str, series: pd.Series) -> tuple[np.ndarray, list]:
    """Codes ``0..m-1`` of the sorted distinct values and the values in code order.

    Missing values are refused (naming the rows). Values of mixed types (``1`` and ``"a"``) are
    ordered by ``pandas.factorize(sort=True)``, which sorts them without raising.
    """
    missing = series.isna().to_numpy()
    if missing.any():
        raise InvalidInputError(
            f"{source}: column {column!r} has missing values at "
            f"{describe_rows(series, missing)}; fill or drop those rows"
        )
    try:
        codes, uniques = pd.factorize(series, sort=True)
    except TypeError as exc:  # unhashable cells (lists, dicts)
        raise InvalidInputError(
            f"{source}: column {column!r} holds values that cannot be categories ({exc})"
        ) from exc
    return np.asarray(codes, dtype=np.int64), list(uniques)
