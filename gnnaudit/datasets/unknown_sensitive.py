"""Blank cells of the sensitive column of a node table: nodes whose group is unknown.

People often decline to state a demographic, so an auditor's own table may leave the sensitive
column blank for some nodes. Dropping those rows would cut the graph (their edges go too) and
filling them would invent a group, so :func:`~gnnaudit.datasets.read_graph` keeps such nodes,
as FairGNN's loaders keep Pokec's and NBA's: the attribute is stored as group 0 there and
``data.sensitive_mask`` marks it false. Every group figure of the audit then leaves those nodes
out (:func:`~gnnaudit.audit.sensitive.known_group_mask`), and the report counts them.

This needs the column to stay out of the model's inputs (``ignore=[column]``, or
``feature_columns`` without it): a blank input value cannot be fed to a model, so a sensitive
column that is also a feature must be complete, and the error says how to proceed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import Data

from gnnaudit.datasets.columns import describe_rows
from gnnaudit.errors import InvalidInputError

__all__ = ["fill_unknown_sensitive", "mark_unknown_sensitive"]


def fill_unknown_sensitive(
    frame: pd.DataFrame,
    source: str,
    column: str | None,
    *,
    is_feature: bool,
    flags: Mapping[str, str],
) -> tuple[pd.DataFrame, np.ndarray | None]:
    """``(frame, known)``: the rows whose ``column`` is not blank (None when all are, or there is
    no such column), and ``frame`` with each blank cell of ``column`` set to the column's first
    known value, a placeholder the encoding then codes like any other (the known values alone
    define the groups); :func:`mark_unknown_sensitive` then stores those nodes as unknown.

    Raises :class:`InvalidInputError` when the column is a model input (``is_feature``) and has
    blank cells, or when every cell is blank."""
    if column is None or column not in frame.columns:
        return frame, None
    series = frame[column]
    blank = series.isna().to_numpy()
    if not blank.any():
        return frame, None
    argument = flags.get("sensitive", "sensitive")
    if is_feature:
        flag = flags.get("ignore")
        leave_out = f"{flag} {column}" if flag else f"ignore=[{column!r}]"
        raise InvalidInputError(
            f"{source}: column {column!r} has missing values at {describe_rows(series, blank)}; "
            "it is a model input, so fill or drop those rows, or audit it with those nodes of "
            f"unknown group by leaving it out of the features ({leave_out})"
        )
    if blank.all():
        raise InvalidInputError(
            f"{argument}: column {column!r} of {source} is blank in every row; an audit needs "
            "known groups"
        )
    filled = frame.copy()
    filled[column] = series.where(~blank, series[~blank].iloc[0])
    return filled, ~blank


def mark_unknown_sensitive(data: Data, known: np.ndarray | None) -> None:
    """Store the nodes of unknown group: ``data.sensitive`` 0 and ``data.sensitive_mask`` false
    there (the convention of the FairGNN loaders); nothing when ``known`` is None."""
    if known is None:
        return
    mask = torch.from_numpy(np.asarray(known, dtype=bool))
    sensitive = data.sensitive.clone()
    sensitive[~mask] = 0
    data.sensitive = sensitive
    data.sensitive_mask = mask
