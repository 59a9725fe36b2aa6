"""From a node table read off a graph file to a validated PyG ``Data``.

:mod:`gnnaudit.datasets.graph_files` reads each format into a :class:`NodeTable` (named
per-node columns, an optional feature matrix, row-position edges); :func:`assemble` applies the
rules documented there, identical for every format: which column is the label, the splits, the
features and the sensitive attribute, and how each is checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import Data

from gnnaudit._validation import as_float32
from gnnaudit.datasets.columns import (
    category_codes,
    column_kind,
    describe_rows,
    integer_column,
    name_list,
    numeric_column,
)
from gnnaudit.errors import InvalidInputError

__all__ = ["NodeTable", "assemble"]


@dataclass
class NodeTable:
    """One graph file's content before the column rules are applied.

    Attributes
    ----------
    source : ``"<argument>: '<file>'"``, the prefix of every error message.
    num_nodes : number of nodes ``n``.
    x : (n, d) feature matrix of formats .pt / .npz, or ``None`` for a CSV folder (whose
        features are columns).
    feature_names : names of the columns of ``x`` (empty for a CSV folder).
    columns : other per-node columns by name (every CSV column but ``id``), indexed by node id
        for a CSV folder so messages can name the nodes.
    edge_index : (2, E) long tensor of row positions, already range-checked.
    declared_sensitive : the file's ``sensitive_name``, if any.
    node_ids : node ids as text (CSV ids, or a stored ``node_ids``), or ``None``.
    """

    source: str
    num_nodes: int
    x: np.ndarray | None
    feature_names: list[str]
    columns: dict[str, pd.Series]
    edge_index: torch.Tensor
    declared_sensitive: str | None
    node_ids: list[str] | None


def _available(table: NodeTable) -> str:
    names = [*table.feature_names, *table.columns]
    return name_list(names)


def _mask(table: NodeTable, column: str, argument: str) -> torch.Tensor:
    series = table.columns[column]
    if pd.api.types.is_bool_dtype(series):
        return torch.from_numpy(series.to_numpy(dtype=bool).copy())
    numeric = pd.to_numeric(series, errors="coerce")
    bad = ~numeric.isin([0, 1]).to_numpy()
    if bad.any():
        raise InvalidInputError(
            f"{argument}: column {column!r} of {table.source} must hold booleans or 0/1; got "
            f"{describe_rows(series, bad)}"
        )
    return torch.from_numpy(numeric.to_numpy(dtype=bool).copy())


def _feature_matrix(table: NodeTable, chosen: list[str]) -> np.ndarray:
    if table.x is not None:
        idx = [table.feature_names.index(c) for c in chosen]
        x = np.asarray(table.x[:, idx], dtype=np.float64)
        bad = ~np.isfinite(x)
        if bad.any():
            rows, cols = np.nonzero(bad)
            shown = ", ".join(
                f"row {int(r)} of {chosen[c]!r} ({x[r, c]})"
                for r, c in zip(rows[:5], cols[:5], strict=True)
            )
            raise InvalidInputError(f"{table.source}: features must be finite; got {shown}")
        return x
    x = np.empty((table.num_nodes, len(chosen)), dtype=np.float64)
    for j, col in enumerate(chosen):
        x[:, j] = numeric_column(table.source, col, table.columns[col])
    return x


def _choose_features(
    table: NodeTable, reserved: set[str], feature_columns: Sequence[str] | None
) -> list[str]:
    if table.x is None:
        candidates = [c for c in table.columns if c not in reserved]
    else:
        candidates = list(table.feature_names)
    if feature_columns is None:
        chosen = candidates
    else:
        chosen = list(feature_columns)
        repeated = sorted({c for c in chosen if chosen.count(c) > 1})
        if repeated:
            raise InvalidInputError(f"feature_columns lists {repeated} more than once")
        taken = [c for c in chosen if c in reserved]
        if taken:
            raise InvalidInputError(
                f"feature_columns: {taken} are the label or split columns of {table.source}"
            )
        unknown = [c for c in chosen if c not in candidates]
        if unknown:
            raise InvalidInputError(
                f"feature_columns: {unknown} are not feature columns of {table.source} "
                f"(available: {name_list(candidates)})"
            )
    if not chosen:
        raise InvalidInputError(f"{table.source} has no feature column")
    return chosen


def _sensitive(
    table: NodeTable,
    sensitive: str | None,
    reserved: set[str],
    chosen: list[str],
    x: np.ndarray,
) -> dict[str, object]:
    """``sensitive`` codes, ``sensitive_values``, ``sensitive_name`` and ``sensitive_index``."""
    name = sensitive if sensitive is not None else table.declared_sensitive
    if name is None:
        return {}
    if name in reserved:
        raise InvalidInputError(f"sensitive={name!r} is the label or a split column")
    stored = table.columns.get("sensitive") if name == table.declared_sensitive else None
    if stored is not None:
        series = stored
    elif name in chosen:
        series = pd.Series(x[:, chosen.index(name)])
    elif name in table.columns:
        series = table.columns[name]
    else:
        raise InvalidInputError(
            f"sensitive={name!r} is not a column of {table.source} (available: {_available(table)})"
        )
    codes, values = category_codes(table.source, name, series)
    if len(values) < 2:
        raise InvalidInputError(
            f"sensitive: column {name!r} of {table.source} holds a single value ({values[0]!r}); "
            "an audit needs at least two groups"
        )
    out: dict[str, object] = {
        "sensitive": torch.from_numpy(codes),
        "sensitive_name": name,
        "sensitive_values": [v.item() if isinstance(v, np.generic) else v for v in values],
    }
    if name in chosen:
        out["sensitive_index"] = chosen.index(name)
    return out


def _label_name(table: NodeTable, label: str | Literal[False] | None) -> str | None:
    if label is False:
        return None
    return label if label is not None else ("y" if "y" in table.columns else None)


def assemble(
    table: NodeTable,
    *,
    label: str | Literal[False] | None,
    sensitive: str | None,
    mask_column: str | None,
    feature_columns: Sequence[str] | None,
    mask_names: Sequence[str],
    mask_argument: str = "mask_column",
) -> Data:
    """Apply the column rules of :mod:`gnnaudit.datasets.graph_files` and build the Data.

    ``label``: a column, ``None`` (``y`` when present) or ``False`` (no label, even beside a
    ``y`` column). ``mask_argument`` is how messages name ``mask_column`` (``--mask-column``
    from the CLI).
    """
    if isinstance(label, str) and label not in table.columns:
        raise InvalidInputError(
            f"label={label!r} is not a column of {table.source} (available: {_available(table)})"
        )
    if mask_column is not None and mask_column not in table.columns:
        raise InvalidInputError(
            f"{mask_argument}={mask_column!r} is not a column of {table.source} (available: "
            f"{_available(table)})"
        )
    label_name = _label_name(table, label)
    masks = {key: _mask(table, key, key) for key in mask_names if key in table.columns}
    if mask_column is not None:
        masks["mask"] = _mask(table, mask_column, mask_argument)
        if not bool(masks["mask"].any()):
            raise InvalidInputError(
                f"{mask_argument}={mask_column!r}: the column of {table.source} selects no node "
                "(every value is 0 / False); it must mark at least one node to audit"
            )
    reserved = set(masks) | {c for c in (label_name, mask_column) if c is not None}
    chosen = _choose_features(table, reserved, feature_columns)
    sens_name = sensitive if sensitive is not None else table.declared_sensitive
    if (
        table.x is None
        and sens_name in chosen
        and column_kind(table.source, sens_name, table.columns[sens_name]) == "categorical"
    ):
        raise InvalidInputError(
            f"sensitive={sens_name!r}: the column holds text, so it cannot be a model feature; "
            "the sensitive column is a feature unless you leave it out of feature_columns"
        )
    x = _feature_matrix(table, chosen)
    data = Data(
        x=torch.from_numpy(as_float32(table.source, x, columns=chosen)),
        edge_index=table.edge_index.long(),
        num_nodes=table.num_nodes,
        feature_names=[str(c) for c in chosen],
        **masks,
    )
    if label_name is not None:
        y = integer_column(table.source, label_name, table.columns[label_name])
        data.y = torch.from_numpy(y)
    for key, value in _sensitive(table, sensitive, reserved, chosen, x).items():
        data[key] = value
    if table.node_ids is not None:
        data.node_ids = table.node_ids
    return data
