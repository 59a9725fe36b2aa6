"""Column encoding of the NIFTY / FairGNN node tables (label, sensitive group, features).

Cells are checked by the rules of :mod:`gnnaudit.datasets.columns`: a column is numeric when
every non-blank cell parses as a number; a column that mixes numbers and text is refused naming
the column, rows and values, never re-coded; a blank cell in any used column is refused naming
the column and rows. Other (all-text) columns are encoded as integer codes of their sorted
distinct values.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from gnnaudit.datasets.columns import category_codes, column_kind, describe_rows, numeric_column
from gnnaudit.datasets.splits import clean_edge_index
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import load_text_array

__all__ = [
    "encode_label",
    "encode_sensitive",
    "feature_matrices",
    "read_edge_file",
    "standardise_non_binary",
]

logger = logging.getLogger(__name__)

_GENDER_CODES = {"female": 1, "male": 0}
_CREDIT_AGE_THRESHOLD = 25


def encode_label(series: pd.Series, source: str, column: str) -> np.ndarray:
    """Class ids of a NIFTY label column (NIFTY's -1/1 labels become 0/1)."""
    if column_kind(source, column, series) == "categorical":
        return category_codes(source, column, series)[0]
    values = numeric_column(source, column, series)
    if not np.array_equal(values, np.round(values)):
        bad = values != np.round(values)
        raise InvalidInputError(
            f"{source}: label column {column!r} must hold integer classes; got "
            f"{describe_rows(series, bad)}"
        )
    distinct = np.unique(values)
    if set(distinct.tolist()) <= {-1.0, 1.0}:  # NIFTY's -1/1 labels -> 0/1
        return (values > 0).astype(np.int64)
    _, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64)


def encode_sensitive(series: pd.Series, name: str, source: str, column: str) -> np.ndarray:
    """Group ids of a NIFTY sensitive column (Female = 1; credit: Age > 25 unless already 0/1)."""
    if column_kind(source, column, series) == "categorical":
        codes, values = category_codes(source, column, series)
        lowered = [str(v).strip().lower() for v in values]
        if set(lowered) <= set(_GENDER_CODES):
            codes = np.array([_GENDER_CODES[v] for v in lowered], dtype=np.int64)[codes]
    else:
        numbers = numeric_column(source, column, series)
        if name == "credit" and not set(np.unique(numbers).tolist()) <= {0.0, 1.0}:
            codes = (numbers > _CREDIT_AGE_THRESHOLD).astype(np.int64)
        else:
            codes = np.unique(numbers, return_inverse=True)[1].astype(np.int64)
    if np.unique(codes).size < 2:
        raise InvalidInputError(
            f"{source}: sensitive column {column!r} holds a single group; an audit needs at "
            "least two"
        )
    return codes


def feature_matrices(
    features: pd.DataFrame, name: str, source: str, sensitive_column: str, sensitive: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(x, raw)``: ``x`` with the sensitive column holding the group ids, ``raw`` the values
    NIFTY's similarity rule sees (numeric cells as written, text columns as codes, Gender as
    Female = 1 / Male = 0)."""
    columns, raw = [], []
    for col in features.columns:
        series = features[col]
        if column_kind(source, str(col), series) == "numeric":
            values = numeric_column(source, str(col), series)
        elif col == sensitive_column:
            values = sensitive.astype(np.float64)
        else:
            logger.info("%s: encoding non-numeric column %r as integer codes", name, col)
            values = category_codes(source, str(col), series)[0].astype(np.float64)
        raw.append(values)
        columns.append(sensitive.astype(np.float64) if col == sensitive_column else values)
    return np.column_stack(columns), np.column_stack(raw)


def read_edge_file(path: str, num_nodes: int) -> torch.Tensor:
    """Undirected ``edge_index`` from a NIFTY edge file of 0-based row numbers (ids may be
    written as floats; they must be integral and in range)."""
    raw = load_text_array("root", path, dtype=np.float64, ndmin=2)
    if raw.size == 0:
        raw = raw.reshape(0, 2)
    if raw.shape[1] != 2:
        raise InvalidInputError(
            f"edge file {path} must hold two ids per line, got {raw.shape[1]} columns"
        )
    if not np.isfinite(raw).all() or not np.array_equal(raw, np.round(raw)):
        raise InvalidInputError(f"edge file {path} holds non-integer node ids")
    ids = raw.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        raise InvalidInputError(
            f"edge file {path} holds node ids in [{ids.min()}, {ids.max()}] but the csv has "
            f"{num_nodes} rows (ids must lie in [0, {num_nodes - 1}])"
        )
    return clean_edge_index(torch.from_numpy(ids.T.copy()), num_nodes)


def standardise_non_binary(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """z-score every column that is not 0/1 (constant columns are only centred); returns the
    scaled ``x`` and per column the ``mean`` and ``scale`` that undo it (``x * scale + mean``;
    0 and 1 for the 0/1 columns)."""
    binary = ((x == 0) | (x == 1)).all(axis=0)
    cols = ~binary
    mean, scale = np.zeros(x.shape[1]), np.ones(x.shape[1])
    if cols.any():
        sub = x[:, cols]
        std = sub.std(axis=0)
        mean[cols], scale[cols] = sub.mean(axis=0), np.where(std > 0, std, 1.0)
        x = x.copy()
        x[:, cols] = (sub - mean[cols]) / scale[cols]
    return x, mean, scale
