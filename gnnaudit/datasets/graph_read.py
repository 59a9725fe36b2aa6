"""A graph from any reasonable node table and edge table: :func:`read_graph`.

Schema
------
**Nodes** (``nodes.csv`` / ``nodes.parquet`` or a DataFrame): one row per node, a unique,
non-blank id column, and any other columns: features, the label, the sensitive attribute, a
split column, 0/1 split columns (``train_mask``, ``val_mask``, ``test_mask``, ``mask``),
columns to ``ignore``.

**Edges** (``edges.csv`` / ``edges.parquet`` or a DataFrame): one row per edge, a source and a
target column (``source_column`` / ``target_column``, default ``source`` / ``target``) holding
**node ids** (matched as text, exactly as written), not row numbers. Other columns are ignored;
a table with no rows means no edges. Edges are directed as written; ``undirected=True`` adds
the reverse edges (and drops self loops and duplicates).

Column roles by name (the id ``id`` / ``node_id``, the label ``y`` / ``label`` / ``target`` /
``class``, the split ``split`` / ``set`` / ``fold``, any case; two candidates are refused):
:mod:`gnnaudit.datasets.column_roles`. Column rules (text columns, labels, splits):
:mod:`gnnaudit.datasets.table_encoding`. Features are every column but the id, the label, the
split and mask columns and the ignored ones (``feature_columns`` picks them by name instead,
after encoding). The sensitive column is a feature unless it is ignored: an ignored sensitive
column is still the sensitive attribute, only not a model input. Such a column may have blank
cells: those nodes are of unknown group (:mod:`gnnaudit.datasets.unknown_sensitive`).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import Data

from gnnaudit._validation import check_int
from gnnaudit.datasets.column_roles import (
    DEFAULT_MAX_CATEGORIES,
    ID_NAMES,
    check_cardinality,
    find_id_column,
    log_roles,
    named_like,
    resolve_roles,
    role_argument,
    split_masks,
)
from gnnaudit.datasets.columns import describe_rows
from gnnaudit.datasets.graph_table import NodeTable, assemble
from gnnaudit.datasets.splits import clean_edge_index
from gnnaudit.datasets.table_encoding import check_columns, encode_text_column, label_codes
from gnnaudit.datasets.unknown_sensitive import fill_unknown_sensitive, mark_unknown_sensitive
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import check_input_dir, read_csv

__all__ = ["read_graph", "find_tables", "PARQUET_HINT"]

MASK_NAMES: tuple[str, ...] = ("train_mask", "val_mask", "test_mask", "mask")
PARQUET_HINT = "reading Parquet needs pyarrow (pip install pyarrow) or fastparquet"
TableLike: TypeAlias = "str | os.PathLike[str] | pd.DataFrame"
#: columns read as text from a CSV file: a list, or a function of the header's names
TextColumns: TypeAlias = "Sequence[str] | Callable[[list[str]], list[str]]"


def find_tables(folder: str | os.PathLike[str], name: str = "path") -> tuple[Path, Path]:
    """``nodes.parquet`` and ``edges.parquet`` of ``folder`` when both exist, else
    ``nodes.csv`` and ``edges.csv`` (reading a missing file names it)."""
    root = check_input_dir(name, folder)
    nodes, edges = root / "nodes.parquet", root / "edges.parquet"
    if nodes.is_file() and edges.is_file():
        return nodes, edges
    return root / "nodes.csv", root / "edges.csv"  # a missing one is named when it is read


def _read_table(
    name: str, table: TableLike, text_columns: TextColumns, min_rows: int
) -> tuple[pd.DataFrame, str]:
    """The DataFrame of a path or a DataFrame and how messages name it."""
    if isinstance(table, pd.DataFrame):
        frame = table.copy(deep=False)
        frame.columns = [str(c) for c in frame.columns]
        if len(frame) < min_rows:
            raise InvalidInputError(f"{name}: the DataFrame holds no row")
        return frame, f"{name} (DataFrame)"
    if not isinstance(table, str | os.PathLike):
        raise InvalidInputError(
            f"{name} must be a path or a pandas DataFrame, got {type(table).__name__}"
        )
    path = Path(table)
    source = f"{name}: {str(path)!r}"
    if path.suffix.lower() == ".parquet":
        if not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
            raise InvalidInputError(f"{source}: {PARQUET_HINT}")
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"{source}: cannot read as Parquet ({exc})") from exc
        frame.columns = [str(c) for c in frame.columns]
        if len(frame) < min_rows:
            raise InvalidInputError(f"{source} holds no row")
        return frame, source
    if callable(text_columns):  # the header first: which columns are ids is known by name
        header = read_csv(name, path, min_rows=0, nrows=0, skipinitialspace=True)
        text_columns = text_columns([str(c) for c in header.columns])
    dtype = dict.fromkeys(text_columns, str)
    return read_csv(name, path, min_rows=min_rows, dtype=dtype, skipinitialspace=True), source


def _ids(source: str, argument: str, column: str, series: pd.Series) -> pd.Series:
    """Ids as text; blanks refused."""
    blank = series.isna().to_numpy()
    if blank.any():
        raise InvalidInputError(
            f"{argument}: column {column!r} of {source} is blank at {describe_rows(series, blank)}"
        )
    return series.astype(str)


def _edge_index(
    edges: pd.DataFrame, source: str, ids: pd.Index, ends: tuple[str, str], flags: Mapping
) -> torch.Tensor:
    positions = []
    for argument, col in zip(("source_column", "target_column"), ends, strict=True):
        values = _ids(source, flags.get(argument, argument), col, edges[col])
        position = ids.get_indexer(values)
        unknown = position < 0
        if unknown.any():
            raise InvalidInputError(
                f"{source}: column {col!r} holds ids that are not node ids of the node table: "
                f"{describe_rows(values, unknown)} (ids are matched as text, not row numbers)"
            )
        positions.append(position.astype(np.int64))
    return torch.from_numpy(np.stack(positions)).reshape(2, -1)


def _encode(
    source: str,
    nodes: pd.DataFrame,
    *,
    keep: set[str],
    sensitive: str | None,
    ordinal: Sequence[str],
) -> tuple[dict[str, pd.Series], dict[str, list], dict[str, list[str]]]:
    """Every column but those in ``keep`` (taken as they are) encoded by the module rules;
    also the values of the coded columns and ``one-hot name -> [column, value]``."""
    columns: dict[str, pd.Series] = {}
    categories: dict[str, list] = {}
    onehot: dict[str, list[str]] = {}
    for col in nodes.columns:
        series = nodes[col]
        if col in keep:
            columns[col] = series
            continue
        parts, values = encode_text_column(
            source, col, series, ordinal=col in ordinal or col == sensitive
        )
        clash = sorted(set(parts) & set(columns)) if len(parts) > 1 else []
        if clash:
            raise InvalidInputError(
                f"{source}: one-hot column(s) {clash} of {col!r} clash with existing columns"
            )
        columns.update(parts)
        if values is not None:
            categories[col] = values
        elif len(parts) > 1:
            onehot.update({name: [col, name[len(col) + 1 :]] for name in parts})
    return columns, categories, onehot


@dataclass(frozen=True)
class _Options:
    """read_graph's column arguments, checked (how messages name them: ``flags``)."""

    label: str | Literal[False] | None
    sensitive: str | None
    ignore: list[str]
    split_column: str | Literal[False] | None
    mask_column: str | None
    ordinal: list[str]
    categorical: list[str]
    max_categories: int
    feature_columns: Sequence[str] | None
    undirected: bool
    flags: dict[str, str]


# long: whole: 19 signature lines and 42 docstring lines document the schema; body ~34 lines
def read_graph(  # noqa: PLR0913 - the documented schema, keyword-only, as pandas.read_csv
    nodes: TableLike,
    edges: TableLike | None = None,
    *,
    id_column: str | None = None,
    source_column: str = "source",
    target_column: str = "target",
    label: str | Literal[False] | None = None,
    sensitive: str | None = None,
    ignore: Sequence[str] = (),
    split_column: str | Literal[False] | None = None,
    mask_column: str | None = None,
    ordinal: Sequence[str] = (),
    categorical: Sequence[str] = (),
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    feature_columns: Sequence[str] | None = None,
    undirected: bool = False,
    flags: Mapping[str, str] | None = None,
) -> Data:
    """A PyG ``Data`` from a node table and an edge table (schema and rules in the module doc).

    Parameters
    ----------
    nodes : a folder holding ``nodes.csv`` and ``edges.csv`` (or the ``.parquet`` pair; then
        leave ``edges`` out), a ``.csv`` / ``.parquet`` file or a DataFrame of nodes.
    edges : a ``.csv`` / ``.parquet`` file or a DataFrame of edges (needed unless ``nodes`` is
        a folder).
    id_column : the node-id column (default: the one column named ``id`` or ``node_id``).
    source_column, target_column : the edge ends.
    label : the label column (default: the one column named ``y``, ``label``, ``target`` or
        ``class``, any case; ``False``: no label). Text labels become codes of their sorted
        values, the names in ``data.class_names``.
    sensitive : the sensitive column (text allowed: group names in ``data.sensitive_values``).
    ignore : columns left out of the features and of the roles (an ignored sensitive column
        stays the sensitive attribute).
    split_column : a column of ``train`` / ``val`` / ``test`` giving the masks (default: the
        one column named ``split``, ``set`` or ``fold`` holding such values; ``False``: none).
    mask_column : a 0/1 column giving ``data.mask``, the nodes to audit.
    ordinal : text columns coded ``0..m-1`` instead of one-hot.
    categorical : text columns one-hot encoded whatever their number of values.
    max_categories : most one-hot features an undeclared text column may become (default
        50); a column with more values is refused naming it.
    feature_columns : the features by name, after encoding (default: the rule above).
    undirected : add the reverse edges (drop self loops and duplicate edges).
    flags : how messages name the arguments (``{"label": "--label"}`` from the CLI).

    Returns
    -------
    Data as :func:`gnnaudit.datasets.load_graph` returns, plus ``column_roles`` (role ->
    column: ``id``, ``label``, ``split``, ``sensitive``, ``mask``; also logged at INFO),
    ``categories`` (coded text columns' values), ``class_names`` for a text label and
    ``node_ids``; for the features, ``feature_categories`` (coded feature -> values in code
    order) and ``feature_onehot`` (one-hot feature ``gender=F`` -> ``["gender", "F"]``), so
    reports name the values (:mod:`gnnaudit.audit.fairness.feature_units`).

    Raises
    ------
    InvalidInputError : a column named that does not exist (naming the argument and the
        columns), two columns named for one role, a text column with too many values, blank or
        repeated ids, unknown edge ids, bad split values, mixed columns.
    """
    flags = dict(flags or {})
    opts = _options(
        flags,
        label=label,
        sensitive=sensitive,
        ignore=ignore,
        split_column=split_column,
        mask_column=mask_column,
        ordinal=ordinal,
        categorical=categorical,
        max_categories=max_categories,
        feature_columns=feature_columns,
        undirected=undirected,
    )
    if edges is None:
        if isinstance(nodes, pd.DataFrame) or not Path(nodes).is_dir():
            raise InvalidInputError("edges is required unless nodes is a folder")
        nodes, edges = find_tables(nodes, flags.get("nodes", "nodes"))
    ends = (source_column, target_column)
    id_text = _id_candidates(id_column, opts.ignore)
    node_frame, source = _read_table(flags.get("nodes", "nodes"), nodes, id_text, 1)
    edge_frame, edge_source = _read_table(flags.get("edges", "edges"), edges, list(ends), 0)
    id_column = find_id_column(source, list(node_frame.columns), id_column, opts.ignore, flags)
    _check_names(source, list(node_frame.columns), id_column, opts)
    check_columns(
        edge_source,
        [str(c) for c in edge_frame.columns],
        {"source_column": source_column, "target_column": target_column},
        flags,
    )
    index = _node_index(source, node_frame, id_column, flags)
    edge_index = _edge_index(edge_frame, edge_source, index, ends, flags)
    frame = node_frame.drop(columns=[id_column]).set_axis(index)
    return _assemble_frame(frame, source, edge_index=edge_index, id_column=id_column, opts=opts)


def _node_index(
    source: str, nodes: pd.DataFrame, id_column: str, flags: Mapping[str, str]
) -> pd.Index:
    """The node ids as text, blank and repeated ids refused."""
    ids = _ids(source, flags.get("id_column", "id_column"), id_column, nodes[id_column])
    repeated = ids.duplicated(keep=False).to_numpy()
    if repeated.any():
        raise InvalidInputError(
            f"{source}: node ids must be unique; repeated at {describe_rows(ids, repeated)}"
        )
    return pd.Index(ids.to_numpy(), name=id_column)


def _id_candidates(id_column: str | None, ignore: list[str]) -> Callable[[list[str]], list[str]]:
    """The CSV columns read as text: the id column, named or found by its name."""

    def pick(header: list[str]) -> list[str]:
        if id_column is not None:
            return [id_column]
        return [c for c in named_like(header, ID_NAMES) if c not in ignore]

    return pick


def _names_arg(argument: str, value: Any, flags: Mapping[str, str]) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(
            f"{flags.get(argument, argument)} must be a list of column names, got {value!r}"
        )
    return list(value)


def _options(flags: dict[str, str], **given: Any) -> _Options:
    """The column arguments of read_graph, checked."""
    names = {k: _names_arg(k, given[k], flags) for k in ("ignore", "ordinal", "categorical")}
    both = [c for c in names["categorical"] if c in names["ordinal"]]
    if both:
        raise InvalidInputError(
            f"{flags.get('categorical', 'categorical')} and {flags.get('ordinal', 'ordinal')} "
            f"both name {both}; a text column is either one-hot (categorical) or coded (ordinal)"
        )
    return _Options(
        label=role_argument("label", given["label"], flags),
        sensitive=given["sensitive"],
        split_column=role_argument("split_column", given["split_column"], flags),
        mask_column=given["mask_column"],
        max_categories=check_int(
            flags.get("max_categories", "max_categories"), given["max_categories"], minimum=1
        ),
        feature_columns=given["feature_columns"],
        undirected=bool(given["undirected"]),
        flags=flags,
        **names,
    )


def _check_names(source: str, columns: list[str], id_column: str, opts: _Options) -> None:
    """Each column named by an argument exists (one error naming the argument otherwise)."""
    wanted = {
        "id_column": id_column,
        "label": opts.label if isinstance(opts.label, str) else None,
        "sensitive": opts.sensitive,
        "split_column": opts.split_column if isinstance(opts.split_column, str) else None,
        "mask_column": opts.mask_column,
        "ignore": opts.ignore,
        "ordinal": opts.ordinal,
        "categorical": opts.categorical,
    }
    check_columns(source, [str(c) for c in columns], wanted, opts.flags)


def _assemble_frame(
    frame: pd.DataFrame,
    source: str,
    *,
    edge_index: torch.Tensor,
    id_column: str,
    opts: _Options,
) -> Data:
    """Encode the columns of ``frame`` (indexed by node id) and build the Data."""
    roles = resolve_roles(
        source,
        frame,
        id_column=id_column,
        label=opts.label,
        split_column=opts.split_column,
        sensitive=opts.sensitive,
        mask_column=opts.mask_column,
        ignore=opts.ignore,
        flags=opts.flags,
    )
    sensitive_is_input = (
        opts.sensitive not in opts.ignore
        if opts.feature_columns is None
        else opts.sensitive in opts.feature_columns
    )
    frame, known = fill_unknown_sensitive(
        frame, source, opts.sensitive, is_feature=sensitive_is_input, flags=opts.flags
    )
    masks = [c for c in MASK_NAMES if c in frame.columns and c not in opts.ignore]
    special = {c for c in (roles.label, roles.split, opts.mask_column) if c is not None}
    keep = special | set(masks)
    dropped = [c for c in opts.ignore if c != opts.sensitive and c not in special]
    kept = frame.drop(columns=dropped)
    onehot_candidates = [
        c for c in kept.columns if c not in keep and c not in opts.ordinal and c != opts.sensitive
    ]
    check_cardinality(
        source,
        kept[onehot_candidates],
        categorical=opts.categorical,
        max_categories=opts.max_categories,
        flags=opts.flags,
    )
    columns, categories, onehot = _encode(
        source, kept, keep=keep, sensitive=opts.sensitive, ordinal=opts.ordinal
    )
    sensitive = opts.sensitive
    if sensitive is not None and len(categories.get(sensitive, ())) == 1:
        raise InvalidInputError(
            f"{opts.flags.get('sensitive', 'sensitive')}: column {sensitive!r} of {source} "
            f"holds a single value ({categories[sensitive][0]!r}); an audit needs at least two "
            "groups"
        )
    class_names = None
    if roles.label is not None:
        columns[roles.label], class_names = label_codes(source, roles.label, columns[roles.label])
    if roles.split is not None:
        argument = opts.flags.get("split_column", "split_column")
        columns.update(split_masks(source, argument, roles.split, columns.pop(roles.split)))
    reserved = special | set(masks) | set(MASK_NAMES[:3])
    feature_columns = opts.feature_columns
    if feature_columns is None:
        feature_columns = [c for c in columns if c not in reserved and c not in opts.ignore]
    table = NodeTable(
        source=source,
        num_nodes=len(frame),
        x=None,
        feature_names=[],
        columns=columns,
        edge_index=edge_index,
        declared_sensitive=None,
        node_ids=[str(i) for i in frame.index],
    )
    data = assemble(
        table,
        label=roles.label if roles.label is not None else False,
        sensitive=sensitive,
        mask_column=opts.mask_column,
        feature_columns=feature_columns,
        mask_names=MASK_NAMES,
        mask_argument=opts.flags.get("mask_column", "mask_column"),
    )
    _record(data, categories, onehot, class_names, sensitive)
    mark_unknown_sensitive(data, known)
    data.column_roles = roles.as_dict(sensitive, opts.mask_column)
    log_roles(source, data.column_roles, data.feature_names)
    if opts.undirected:
        data.edge_index = clean_edge_index(data.edge_index, data.num_nodes)
    return data


def _record(
    data: Data,
    categories: dict[str, list],
    onehot: dict[str, list[str]],
    class_names: list | None,
    sensitive: str | None,
) -> None:
    """The value names behind the codes: ``sensitive_values``, ``class_names``,
    ``categories`` and the features' units."""
    if sensitive is not None and sensitive in categories:
        data.sensitive_values = list(categories[sensitive])
    if class_names is not None:
        data.class_names = class_names
    if categories:
        data.categories = categories
    _record_units(data, categories, onehot)


def _record_units(data: Data, categories: dict[str, list], onehot: dict[str, list[str]]) -> None:
    """``feature_categories`` / ``feature_onehot`` of the features (the values behind the codes,
    read by :mod:`gnnaudit.audit.fairness.feature_units`)."""
    names = set(getattr(data, "feature_names", None) or [])
    coded = {k: [str(v) for v in values] for k, values in categories.items() if k in names}
    hot = {k: v for k, v in onehot.items() if k in names}
    if coded:
        data.feature_categories = coded
    if hot:
        data.feature_onehot = hot
