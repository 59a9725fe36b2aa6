"""Reader of the FairGNN layout (NBA, Pokec-z, Pokec-n; Dai & Wang, WSDM 2021).

Layout (as distributed with FairGNN)::

    <folder>/<stem>.csv                one row per node, a header, ``user_id``, label, sensitive
    <folder>/<stem>_relationship.txt   whitespace-separated pairs of user ids (not row numbers)

=========  ================  ======================  ==========
dataset    stem              label                   sensitive
=========  ================  ======================  ==========
nba        nba               SALARY                  country
pokec_z    region_job        I_am_working_in_field   region
pokec_n    region_job_2      I_am_working_in_field   region
=========  ================  ======================  ==========

Codes follow FairGNN's loader: a label of ``-1`` means *unknown*; known labels above 1 are
binarised to 1. A sensitive value ``< 0`` means unknown, ``> 0`` is group 1. Unknown labels are
stored as 0 in ``y`` and marked false in ``label_mask``; unknown sensitive values are stored as
0 and marked false in ``sensitive_mask``: such nodes stay in the graph (they pass messages) but
are kept out of the evaluation masks by the loader, and out of every group figure of the audit
and of ``FairFinetune`` (:func:`~gnnaudit.audit.sensitive.known_group_mask`). Every
relationship id must be a ``user_id`` of the csv (FairGNN's loader fails on an unknown id; here
it is named).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from gnnaudit.datasets.columns import describe_rows, numeric_column
from gnnaudit.datasets.splits import clean_edge_index
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import load_text_array

__all__ = ["FairGnnTable", "read_fairgnn_labels", "read_relationships"]


@dataclass(frozen=True)
class FairGnnTable:
    """Targets of a FairGNN csv: binary ``y`` and ``sensitive`` with their known-masks."""

    y: np.ndarray
    label_mask: np.ndarray
    sensitive: np.ndarray
    sensitive_mask: np.ndarray


def _integer_codes(frame: pd.DataFrame, source: str, column: str) -> np.ndarray:
    values = numeric_column(source, column, frame[column])
    bad = values != np.round(values)
    if bad.any():
        raise InvalidInputError(
            f"{source}: column {column!r} must hold integer codes; got "
            f"{describe_rows(frame[column], bad)}"
        )
    return values.astype(np.int64)


def read_fairgnn_labels(
    frame: pd.DataFrame, source: str, label: str, sensitive: str
) -> FairGnnTable:
    """Binary label and sensitive group with FairGNN's unknown-value codes (module docstring)."""
    raw_y = _integer_codes(frame, source, label)
    raw_s = _integer_codes(frame, source, sensitive)
    label_mask = raw_y >= 0
    sensitive_mask = raw_s >= 0
    y = np.where(label_mask, np.minimum(raw_y, 1), 0).astype(np.int64)
    s = np.where(sensitive_mask, (raw_s > 0).astype(np.int64), 0)
    for what, values, known in (("label", y, label_mask), ("sensitive", s, sensitive_mask)):
        if np.unique(values[known]).size < 2:
            raise InvalidInputError(
                f"{source}: the known values of the {what} column hold a single class; an audit "
                "needs two"
            )
    return FairGnnTable(y, label_mask, s, sensitive_mask)


def read_relationships(
    path: str | os.PathLike[str], user_ids: np.ndarray, source: str
) -> torch.Tensor:
    """Undirected ``edge_index`` over csv rows from a file of user-id pairs."""
    raw = load_text_array("root", path, dtype=np.int64, ndmin=2)
    if raw.size == 0:
        raw = raw.reshape(0, 2)
    if raw.shape[1] != 2:
        raise InvalidInputError(
            f"relationship file {path} must hold two user ids per line, got {raw.shape[1]} columns"
        )
    ids = np.asarray(user_ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    if np.any(sorted_ids[1:] == sorted_ids[:-1]):
        dup = sorted_ids[1:][sorted_ids[1:] == sorted_ids[:-1]]
        raise InvalidInputError(f"{source}: user_id is not unique (e.g. {int(dup[0])})")
    pos = np.clip(np.searchsorted(sorted_ids, raw), 0, ids.size - 1)
    found = sorted_ids[pos] == raw
    if not found.all():
        unknown = np.unique(raw[~found])
        raise InvalidInputError(
            f"relationship file {path} names {unknown.size} user id(s) absent from {source}'s "
            f"user_id column, e.g. {', '.join(str(int(u)) for u in unknown[:5])}"
        )
    rows = order[pos]
    return clean_edge_index(torch.from_numpy(rows.T.copy()), ids.size)
