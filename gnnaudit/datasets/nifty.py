"""Loader of the NIFTY fairness graphs German credit, Bail and Credit defaulter.

Layout (as distributed with NIFTY, Agarwal et al. 2021)::

    <root>/<name>/<name>.csv          one row per node, a header line, label + features
    <root>/<name>/<name>_edges.txt    whitespace-separated pairs of 0-based row numbers

Edge files may write ids as floats (``8.380000000000000000e+02``) and may list an edge in one or
both directions; the loader reads them as floats, checks they are integral and in range, and
returns an undirected ``edge_index`` without self loops or duplicates.

Per-dataset choices (following NIFTY's own loaders):

=======  =====================  ==========  =========================================
name     label                  sensitive   notes
=======  =====================  ==========  =========================================
german   GoodCustomer (-1 -> 0) Gender      ``Female`` = 1, ``Male`` = 0; drops
                                            ``PurposeOfLoan`` and ``OtherLoansAtStore``
bail     RECID                  WHITE       --
credit   NoDefaultNextMonth     Age         group = ``Age > 25`` (1) when Age is not
                                            already 0/1; drops ``Single`` as NIFTY does
=======  =====================  ==========  =========================================

The label column is removed from the features; the sensitive column stays a feature and holds
exactly the group id (so ``x[:, sensitive_index] == sensitive``); a sensitive column with a
single group is refused. Cells are checked by the rules of :mod:`gnnaudit.datasets.columns`:
a column is numeric when every non-blank cell parses as a number; a column that mixes numbers
and text (one stray ``"unknown"`` among amounts) is refused naming the column, rows and values,
never re-coded; a blank cell in any label, sensitive or feature column is refused naming the
column and rows. Other (all-text) columns are encoded as integer codes of their sorted distinct
values. Pandas index artefacts
(``Unnamed: ...`` columns) are ignored. With ``standardize=True`` (default) every non-binary
feature column is z-scored; 0/1 columns stay 0/1.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import Data

from gnnaudit._validation import as_float32, check_choice, check_seed
from gnnaudit.datasets.columns import (
    category_codes,
    column_kind,
    describe_rows,
    name_list,
    numeric_column,
)
from gnnaudit.datasets.splits import DEFAULT_FRACTIONS, clean_edge_index, stratified_masks
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import load_text_array, read_csv

__all__ = ["NIFTY_DATASETS", "load_nifty"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _NiftySpec:
    label: str
    sensitive: str
    drop: tuple[str, ...] = ()


NIFTY_DATASETS: dict[str, _NiftySpec] = {
    "german": _NiftySpec("GoodCustomer", "Gender", ("PurposeOfLoan", "OtherLoansAtStore")),
    "bail": _NiftySpec("RECID", "WHITE"),
    "credit": _NiftySpec("NoDefaultNextMonth", "Age", ("Single",)),
}

_GENDER_CODES = {"female": 1, "male": 0}
_CREDIT_AGE_THRESHOLD = 25


def _encode_label(series: pd.Series, source: str, column: str) -> np.ndarray:
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


def _encode_sensitive(series: pd.Series, name: str, source: str, column: str) -> np.ndarray:
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


def _read_edges(path: str, num_nodes: int) -> torch.Tensor:
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


def _standardise_non_binary(x: np.ndarray) -> np.ndarray:
    binary = ((x == 0) | (x == 1)).all(axis=0)
    cols = ~binary
    if cols.any():
        sub = x[:, cols]
        std = sub.std(axis=0)
        x = x.copy()
        x[:, cols] = (sub - sub.mean(axis=0)) / np.where(std > 0, std, 1.0)
    return x


def load_nifty(
    name: str,
    root: str | os.PathLike[str],
    seed: int = 0,
    standardize: bool = True,
) -> Data:
    """Load NIFTY German, Bail or Credit from ``<root>/<name>/``.

    Parameters
    ----------
    name : ``"german"``, ``"bail"`` or ``"credit"``.
    root : folder holding ``<name>/<name>.csv`` and ``<name>/<name>_edges.txt``.
    seed : seed of the stratified 50/25/25 train / val / test split.
    standardize : z-score the non-binary feature columns (0/1 columns are kept).

    Returns
    -------
    Data with ``x`` (float32), ``y`` (0/1), undirected ``edge_index``, ``feature_names``,
    masks, ``sensitive`` (LongTensor of group ids), ``sensitive_name`` and ``sensitive_index``.

    Raises
    ------
    InvalidInputError : unknown name, missing file or column, unparsable or out-of-range edges.
    """
    name = check_choice("name", name, tuple(NIFTY_DATASETS))
    seed = check_seed("seed", seed)
    spec = NIFTY_DATASETS[name]
    if not isinstance(root, str | os.PathLike):
        raise InvalidInputError(f"root must be a folder path, got {type(root).__name__}")
    folder = os.path.join(os.fspath(root), name)
    csv_path = os.path.join(folder, f"{name}.csv")
    edge_path = os.path.join(folder, f"{name}_edges.txt")
    missing = [p for p in (csv_path, edge_path) if not os.path.isfile(p)]
    if missing:
        raise InvalidInputError(f"NIFTY dataset {name!r}: missing file(s) {', '.join(missing)}")

    frame = read_csv("root", csv_path)
    frame = frame.loc[:, [c for c in frame.columns if not str(c).startswith("Unnamed:")]]
    absent = [c for c in (spec.label, spec.sensitive) if c not in frame.columns]
    if absent:
        raise InvalidInputError(
            f"NIFTY dataset {name!r}: {csv_path} lacks column(s) {', '.join(absent)} "
            f"(has {name_list(frame.columns)})"
        )
    if len(frame) < 2:
        raise InvalidInputError(f"{csv_path} must hold at least 2 rows, got {len(frame)}")

    # np.array copies: pandas may hand out read-only buffers, which torch cannot wrap.
    y = np.array(_encode_label(frame[spec.label], csv_path, spec.label), dtype=np.int64)
    sensitive = np.array(
        _encode_sensitive(frame[spec.sensitive], name, csv_path, spec.sensitive), dtype=np.int64
    )
    features = frame.drop(columns=[spec.label, *[c for c in spec.drop if c in frame.columns]])
    columns = []
    for col in features.columns:
        series = features[col]
        if col == spec.sensitive:
            columns.append(sensitive.astype(np.float64))
        elif column_kind(csv_path, str(col), series) == "numeric":
            columns.append(numeric_column(csv_path, str(col), series))
        else:
            logger.info("%s: encoding non-numeric column %r as integer codes", name, col)
            columns.append(category_codes(csv_path, str(col), series)[0].astype(np.float64))
    x = np.column_stack(columns)
    if standardize:
        x = _standardise_non_binary(x)

    num_nodes = len(frame)
    edge_index = _read_edges(edge_path, num_nodes)
    y_t = torch.from_numpy(y)
    split = stratified_masks(y_t, *DEFAULT_FRACTIONS, seed=seed)
    feature_names = [str(c) for c in features.columns]
    return Data(
        x=torch.from_numpy(as_float32(str(csv_path), x, columns=feature_names)),
        y=y_t,
        edge_index=edge_index,
        feature_names=feature_names,
        train_mask=split.train_mask,
        val_mask=split.val_mask,
        test_mask=split.test_mask,
        sensitive=torch.from_numpy(sensitive),
        sensitive_name=spec.sensitive,
        sensitive_index=feature_names.index(spec.sensitive),
        num_nodes=num_nodes,
    )
