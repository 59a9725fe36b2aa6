"""A user's own graph from a file: :func:`load_graph` and :func:`save_graph`.

Three formats, told apart by the path (a ``.pt`` file, an ``.npz`` file, or a folder):

**(a) ``graph.pt``** - ``torch.save(data.to_dict())`` (a dict of tensors, lists and strings)
or ``torch.save(data)`` of a PyG ``Data``. It is read with
:func:`gnnaudit.safe_io.safe_torch_load` (``weights_only=True`` and an explicit allow-list of
PyG's ``Data`` classes); a file that would need full unpickling is refused, never loaded.

**(b) a folder** with two CSV files::

    nodes.csv   id,age,income,gender,y,train_mask,test_mask
                n17,34,52000,1,0,1,0
                ...
    edges.csv   source,target
                n17,n4
                ...

``nodes.csv`` has one row per node: an ``id`` column (unique, non-blank), feature columns, and
optionally a label column, a sensitive column and split columns. ``edges.csv`` has a ``source``
and a ``target`` column holding **node ids of nodes.csv, not row numbers** (ids are matched as
text, exactly as written); other columns are ignored and a header-only file means no edges.
Edges are kept as written (directed); list both directions for an undirected graph, as PyG
does, or pass ``undirected=True``. A folder is read by :func:`gnnaudit.datasets.read_graph`
(``nodes.parquet`` / ``edges.parquet`` too): there other column names (``id_column``,
``source_column``, ``target_column``), a split column and ignored columns can be named, and
text feature, label and sensitive columns are encoded by the rule of
:mod:`gnnaudit.datasets.table_encoding`. In a folder the id, label and split columns are also
found by their names (``id`` / ``node_id``; ``y`` / ``label`` / ``target`` / ``class``;
``split`` / ``set`` / ``fold``, any case), never used as features:
:mod:`gnnaudit.datasets.column_roles`.

**(c) ``graph.npz``** - ``numpy.savez`` of the arrays of (a): read with
``allow_pickle=False``, so ``feature_names`` / ``node_ids`` must be fixed-width string arrays
(``np.array(names)``, dtype ``<U``) and ``sensitive_name`` a 0-d string array.

Keys of (a) and (c): ``x`` (n, d) numbers and ``edge_index`` (2, E) integer row positions are
required; optional are ``y`` (n,), ``train_mask`` / ``val_mask`` / ``test_mask`` / ``mask``
(n,), ``sensitive`` (n,) with ``sensitive_name``, ``feature_names`` (d names, default ``x0``,
``x1`` ...) and ``node_ids`` (n names). Any other (n,) array is a node column that ``label=``,
``sensitive=`` or ``mask_column=`` may name; anything else is ignored (and logged).

Rules, the same for every format
--------------------------------
* **label**: the column named by ``label``, by default ``y`` when present (a folder: the one
  column named ``y``, ``label``, ``target`` or ``class``); ``label=False``: no label. Whole numbers
  ``>= 0`` (the class ids of the model's logits), no blanks. No label: ``data.y`` is absent.
* **split columns**: ``train_mask``, ``val_mask``, ``test_mask`` and ``mask`` are recognised by
  name; ``mask_column`` names another column to use as ``data.mask`` (the nodes to audit; it
  must select at least one node). ``data.mask`` wins over ``test_mask`` wherever gnnaudit
  picks the audited nodes.
  Values are booleans or 0/1, no blanks.
* **features**: ``feature_columns`` if given (in that order), else every column that is not
  the id, the label or a split column. **The sensitive column is a feature unless you leave it
  out of ``feature_columns``**: a model trained on it needs it as an input. Features must be
  finite numbers (text columns of a folder are encoded first, see above); a column that mixes
  numbers and text, a blank or an infinite cell is refused naming the column, rows and node
  ids.
* **sensitive**: the column (or feature) named by ``sensitive``; by default the file's own
  ``sensitive_name`` (formats a and c). It needs at least two distinct values and no blanks.
  ``data.sensitive`` holds the group codes ``0..m-1`` of its sorted distinct values (a stored
  ``sensitive`` array of a and c is used as given), ``data.sensitive_values`` the original
  values in code order, ``data.sensitive_name`` the name, and ``data.sensitive_index`` its
  position in ``feature_names`` when it is a feature.

Result: a ``torch_geometric.data.Data`` with ``x`` (float32), ``edge_index`` (long),
``feature_names`` (list of str), ``num_nodes``, and ``y``, the masks, ``sensitive*`` and
``node_ids`` (list of str; the CSV ids) when present. Every problem raises
:class:`~gnnaudit.errors.InvalidInputError` naming the argument, the file and the first
offending values.
"""

# whole (~470 lines): load_graph and save_graph are mirror images over the same three formats
# and their checks; cut apart, the round-trip contract would span two modules.

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import Data

from gnnaudit._aliases import renamed_keywords
from gnnaudit._validation import check_edge_index
from gnnaudit.datasets.column_roles import DEFAULT_MAX_CATEGORIES
from gnnaudit.datasets.columns import name_list
from gnnaudit.datasets.graph_read import find_tables, read_graph
from gnnaudit.datasets.graph_table import NodeTable, assemble
from gnnaudit.datasets.splits import clean_edge_index
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import (
    atomic_file,
    atomic_output_dir,
    load_npz,
    pyg_data_classes,
    safe_torch_load,
)
from gnnaudit.safe_io.torch_files import tensor_problem

__all__ = ["load_graph", "save_graph", "MASK_COLUMNS"]

logger = logging.getLogger(__name__)

#: split columns recognised by name in every format.
MASK_COLUMNS: tuple[str, ...] = ("train_mask", "val_mask", "test_mask", "mask")
_KNOWN_KEYS = {"x", "edge_index", "feature_names", "node_ids", "sensitive_name", "num_nodes"}
_DERIVED_KEYS = {"sensitive_index", "sensitive_values"}
_FLOAT_FORMAT = "%.9g"  # 9 significant digits: float32 values survive a CSV round trip


# ------------------------------------------------------------------------------ reading


def _as_numpy(value: Any, source: str = "", key: str = "") -> Any:
    """A tensor as a numpy array (other values unchanged). Half-precision floats (float16,
    bfloat16, float8 ...) widen to float32 exactly; a tensor numpy cannot hold (sparse, meta,
    complex-only or exotic dtypes) raises :class:`InvalidInputError` naming ``key``."""
    if not isinstance(value, torch.Tensor):
        return value
    problem = tensor_problem(value)
    if problem is not None:
        raise InvalidInputError(f"{source}: {key!r} {problem}")
    value = value.detach().cpu()
    if value.is_floating_point() and value.dtype not in (torch.float32, torch.float64):
        value = value.to(torch.float32)  # numpy has no bfloat16; every such value fits float32
    try:
        return value.numpy()
    except (TypeError, RuntimeError) as exc:
        raise InvalidInputError(
            f"{source}: {key!r} has dtype {value.dtype}, which cannot be read as numbers ({exc})"
        ) from exc


def _names(source: str, key: str, value: Any, expected: int) -> list[str] | None:
    if value is None:
        return None
    value = _as_numpy(value, source, key)
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or value.dtype.kind not in "US":
            raise InvalidInputError(f"{source}: {key!r} must be a 1-D string array")
        value = value.tolist()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(f"{source}: {key!r} must be a list of strings")
    if len(value) != expected:
        raise InvalidInputError(f"{source}: {key!r} has {len(value)} entries, expected {expected}")
    return [str(v) for v in value]


def _table_from_arrays(source: str, content: dict[str, Any]) -> NodeTable:
    """Node table of format (a) or (c): ``x`` plus every (n,) array as a named column."""
    keys = [k for k in content if not isinstance(k, str)]
    if keys:
        raise InvalidInputError(f"{source}: every key must be a string, got {keys[0]!r}")
    missing = [k for k in ("x", "edge_index") if content.get(k) is None]
    if missing:
        raise InvalidInputError(
            f"{source} lacks {', '.join(missing)} (has {name_list(sorted(content)) or 'nothing'})"
        )
    x = _as_numpy(content["x"], source, "x")
    if not isinstance(x, np.ndarray) or x.ndim != 2 or x.dtype.kind not in "biuf":
        raise InvalidInputError(f"{source}: 'x' must be an (n, d) array of numbers")
    n, d = x.shape
    if n == 0 or d == 0:
        raise InvalidInputError(f"{source}: 'x' is empty (shape {x.shape})")
    feature_names = _names(source, "feature_names", content.get("feature_names"), d)
    feature_names = feature_names or [f"x{j}" for j in range(d)]
    columns: dict[str, pd.Series] = {}
    ignored = []
    for key, value in content.items():
        if key in _KNOWN_KEYS or key in _DERIVED_KEYS:
            continue
        value = _as_numpy(value, source, key)
        if isinstance(value, np.ndarray) and value.ndim == 1 and value.shape[0] == n:
            columns[key] = pd.Series(value.tolist() if value.dtype.kind in "US" else value)
        else:
            ignored.append(key)
    if ignored:
        logger.info("%s: ignoring %s (not per-node columns)", source, ", ".join(sorted(ignored)))
    edges = _as_numpy(content["edge_index"], source, "edge_index")
    if not isinstance(edges, np.ndarray) or edges.dtype.kind not in "iu":
        raise InvalidInputError(
            f"{source}: 'edge_index' must be a (2, E) array of integer node ids, got "
            f"{getattr(edges, 'dtype', type(edges).__name__)}"
        )
    edge_index = check_edge_index(f"{source}: 'edge_index'", torch.from_numpy(edges), n)
    declared = content.get("sensitive_name")
    declared = _as_numpy(declared, source, "sensitive_name")
    if isinstance(declared, np.ndarray) and declared.ndim == 0:
        declared = declared.item()
    if declared is not None and not isinstance(declared, str):
        raise InvalidInputError(f"{source}: 'sensitive_name' must be a string")
    return NodeTable(
        source=source,
        num_nodes=n,
        x=x,
        feature_names=feature_names,
        columns=columns,
        edge_index=edge_index,
        declared_sensitive=declared,
        node_ids=_names(source, "node_ids", content.get("node_ids"), n),
    )


def _read_pt(path: Path, name: str) -> NodeTable:
    obj = safe_torch_load(path, pyg_data_classes(), name=name)
    if isinstance(obj, Data):
        try:  # a crafted file can hold a Data whose storage is not PyG's
            obj = obj.to_dict()
        except Exception as exc:
            raise InvalidInputError(
                f"{name}: {str(path)!r} holds a malformed PyG Data (its storage cannot be read: "
                f"{type(exc).__name__}: {exc}); save data.to_dict() or rebuild the Data"
            ) from exc
    if not isinstance(obj, dict):
        raise InvalidInputError(
            f"{name}: {str(path)!r} must hold a dict of tensors (Data.to_dict()) or a Data, got "
            f"{type(obj).__name__}"
        )
    return _table_from_arrays(f"{name}: {str(path)!r}", obj)


def _read_npz(path: Path, name: str) -> NodeTable:
    return _table_from_arrays(f"{name}: {str(path)!r}", load_npz(name, path))


def _check_names(argument: str, value: Any, *, allow_false: bool = False) -> Any:
    if value is False and allow_false:
        return value
    if value is not None and not isinstance(value, str):
        also = " or False (no label)" if allow_false else ""
        raise InvalidInputError(f"{argument} must be a column name{also}, got {value!r}")
    return value


def _read_file(p: Path, name: str) -> NodeTable:
    """The node table of a ``.pt`` or ``.npz`` file (anything else is refused)."""
    suffix = p.suffix.lower()
    if suffix == ".pt":
        return _read_pt(p, name)
    if suffix == ".npz":
        return _read_npz(p, name)
    if not p.exists():
        raise InvalidInputError(f"{name}: {str(p)!r} does not exist")
    raise InvalidInputError(
        f"{name}: {str(p)!r} is not a graph file; expected a .pt or .npz file or a folder "
        "holding nodes.csv and edges.csv"
    )


def _check_table_only(p: Path, name: str, options: dict[str, Any]) -> None:
    """Options of a folder of tables given with a ``.pt`` / ``.npz`` file are refused."""
    defaults = {"max_categories": DEFAULT_MAX_CATEGORIES}
    given = [k for k, v in options.items() if v != defaults.get(k) and v not in (None, (), [])]
    if given:
        raise InvalidInputError(
            f"{given[0]}={options[given[0]]!r} applies to a folder of node / edge tables; "
            f"{name}: {str(p)!r} is a file"
        )


# long: whole: 17 signature lines and 35 docstring lines, read_graph's options passed on
@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def load_graph(  # noqa: PLR0913 - read_graph's table options, keyword-only
    path: str | os.PathLike[str],
    *,
    label: str | Literal[False] | None = None,
    sensitive: str | None = None,
    mask_column: str | None = None,
    feature_columns: Sequence[str] | None = None,
    undirected: bool = False,
    id_column: str | None = None,
    split_column: str | Literal[False] | None = None,
    ignore: Sequence[str] = (),
    ordinal: Sequence[str] = (),
    categorical: Sequence[str] = (),
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    name: str = "path",
    mask_name: str = "mask_column",
) -> Data:
    """Load a user's graph from a ``.pt`` file, an ``.npz`` file or a CSV folder.

    The formats and the column rules are described in :mod:`gnnaudit.datasets.graph_files`;
    a folder is read by :func:`gnnaudit.datasets.read_graph` (column roles by name:
    :mod:`gnnaudit.datasets.column_roles`).

    Parameters
    ----------
    path : a ``.pt`` file, an ``.npz`` file, or a folder holding ``nodes.csv`` and ``edges.csv``.
    label : the label column (default: a folder's one column named ``y``, ``label``,
        ``target`` or ``class``, any case; a file's ``y``; ``False``: no label).
    sensitive : the sensitive column or feature (default: the file's ``sensitive_name``).
    mask_column : a 0/1 or boolean column giving ``data.mask``, the nodes to audit. It wins
        over a ``test_mask`` of the file: the audit and the evidence search take ``data.mask``
        first. A column that selects no node is refused.
    feature_columns : the feature columns, in order (default: all but id, label, splits).
        The sensitive column stays a feature unless it is left out of this list.
    undirected : symmetrise ``edge_index`` and drop self loops and duplicate edges.
    id_column, split_column, ignore, ordinal, categorical, max_categories : a folder's table
        options, as for :func:`~gnnaudit.datasets.read_graph` (refused with a file).
    name : the argument name used in error messages (``"--graph"`` from the CLI).
    mask_name : how messages name ``mask_column`` (``"--mask-column"`` from the CLI).

    Returns
    -------
    Data with ``x`` (float32), ``edge_index`` (long), ``feature_names``, and ``y``, the masks,
    ``sensitive``, ``sensitive_name``, ``sensitive_index``, ``sensitive_values`` and
    ``node_ids`` when they exist (a folder's also ``column_roles``).

    Raises
    ------
    InvalidInputError : unreadable or refused file, missing column, two columns named for one
        role, unknown edge ids, duplicate node ids, non-boolean mask, single-valued sensitive
        column, non-numeric or non-finite features, empty files.
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"{name} must be a path, got {type(path).__name__}")
    label = _check_names("label", label, allow_false=True)
    sensitive = _check_names("sensitive", sensitive)
    mask_column = _check_names("mask_column", mask_column)
    if feature_columns is not None:
        if isinstance(feature_columns, str) or not all(isinstance(c, str) for c in feature_columns):
            raise InvalidInputError(
                f"feature_columns must be a list of column names, got {feature_columns!r}"
            )
        feature_columns = list(feature_columns)
    p = Path(path)
    table_options: dict[str, Any] = {
        "id_column": id_column,
        "split_column": split_column,
        "ignore": ignore,
        "ordinal": ordinal,
        "categorical": categorical,
        "max_categories": max_categories,
    }
    if p.is_dir():
        nodes, edges = find_tables(p, name)
        return read_graph(
            nodes,
            edges,
            label=label,
            sensitive=sensitive,
            mask_column=mask_column,
            feature_columns=feature_columns,
            undirected=undirected,
            flags={"nodes": name, "edges": name, "mask_column": mask_name},
            **table_options,
        )
    table = _read_file(p, name)
    _check_table_only(p, name, table_options)
    data = assemble(
        table,
        label=label,
        sensitive=sensitive,
        mask_column=mask_column,
        feature_columns=feature_columns,
        mask_names=MASK_COLUMNS,
        mask_argument=mask_name,
    )
    if undirected:
        data.edge_index = clean_edge_index(data.edge_index, data.num_nodes)
    return data


# ------------------------------------------------------------------------------ writing


def _graph_dict(data: Data) -> dict[str, Any]:
    """The parts of ``data`` that :func:`load_graph` reads, validated, as a dict."""
    if not isinstance(data, Data):
        raise InvalidInputError(f"data must be a torch_geometric Data, got {type(data).__name__}")
    x = data.get("x")
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise InvalidInputError("data.x must be an (n, d) tensor")
    n, d = x.shape
    out: dict[str, Any] = {
        "x": x.detach().cpu(),
        "edge_index": check_edge_index("data.edge_index", data.edge_index, n).detach().cpu(),
    }
    names = data.get("feature_names")
    out["feature_names"] = [str(f) for f in names] if names is not None else None
    if out["feature_names"] is not None and len(out["feature_names"]) != d:
        raise InvalidInputError(f"data.feature_names has {len(names)} names for {d} columns")
    for key in ("y", "sensitive", *MASK_COLUMNS):
        value = data.get(key)
        if value is None:
            continue
        value = torch.as_tensor(value).detach().cpu()
        if value.dim() != 1 or value.size(0) != n:
            raise InvalidInputError(f"data.{key} must have shape ({n},), got {tuple(value.shape)}")
        out[key] = value
    if data.get("sensitive_name") is not None:
        out["sensitive_name"] = str(data.sensitive_name)
    if data.get("node_ids") is not None:
        out["node_ids"] = [str(i) for i in data.node_ids]
    return {k: v for k, v in out.items() if v is not None}


def _nodes_frame(parts: dict[str, Any]) -> pd.DataFrame:
    x = parts["x"].numpy()
    names = parts.get("feature_names") or [f"x{j}" for j in range(x.shape[1])]
    n = x.shape[0]
    frame = pd.DataFrame({"id": parts.get("node_ids", [str(i) for i in range(n)])})
    features = pd.DataFrame(x, columns=names)
    extra: dict[str, Any] = {}
    if "y" in parts:
        extra["y"] = parts["y"].numpy()
    if "sensitive" in parts:
        sens_name = parts.get("sensitive_name", "sensitive")
        groups = parts["sensitive"].numpy()
        if sens_name in names:
            codes = np.unique(features[sens_name].to_numpy(), return_inverse=True)[1]
            if not np.array_equal(codes, np.unique(groups, return_inverse=True)[1]):
                raise InvalidInputError(
                    f"data.sensitive does not follow the distinct values of feature "
                    f"{sens_name!r}; a CSV folder cannot store both: save to .pt or .npz"
                )
        else:
            extra[sens_name] = groups
    for key in MASK_COLUMNS:
        if key in parts:
            extra[key] = parts[key].numpy().astype(np.int8)
    clash = sorted(({"id"} | set(extra)) & set(names))
    if clash:
        raise InvalidInputError(
            f"cannot write a CSV folder: feature name(s) {clash} clash with the id, label, "
            "sensitive or split columns; save to .pt or .npz"
        )
    return pd.concat([frame, features, pd.DataFrame(extra)], axis=1)


def save_graph(data: Data, path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write ``data`` in a format :func:`load_graph` reads back, atomically.

    ``path`` ending in ``.pt``: ``torch.save`` of a dict of tensors (``x``, ``edge_index`` and,
    when present, ``y``, the masks, ``sensitive``, ``sensitive_name``, ``feature_names``,
    ``node_ids``). Ending in ``.npz``: the same arrays with ``numpy.savez`` (names as string
    arrays, no pickle). Anything else: a folder with ``nodes.csv`` (``id``, the features, ``y``,
    the sensitive column when it is not a feature, masks as 0/1) and ``edges.csv``
    (``source,target`` ids). Floats are written with 9 significant digits, so float32 values
    read back exactly. Load a CSV folder with ``sensitive=<name>`` to get the sensitive
    attribute back (CSV files carry no ``sensitive_name``).

    An existing destination is refused unless ``force``; a failed write leaves it untouched.
    Returns the path written.
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"path must be a file or folder path, got {type(path).__name__}")
    parts = _graph_dict(data)
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix == ".pt":
        with atomic_file(target, name="path", force=force) as tmp:
            torch.save(parts, tmp)
    elif suffix == ".npz":
        arrays: dict[str, Any] = {
            k: (np.asarray(v, dtype=str) if isinstance(v, list | str) else v.numpy())
            for k, v in parts.items()
        }
        with atomic_file(target, name="path", force=force) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)
    else:
        frame = _nodes_frame(parts)
        ids = frame["id"].to_numpy()
        src, dst = parts["edge_index"].numpy()
        edges = pd.DataFrame({"source": ids[src], "target": ids[dst]})
        with atomic_output_dir(
            target, force, name="path", producer="graph", planned=("nodes.csv", "edges.csv")
        ) as tmp:
            frame.to_csv(tmp / "nodes.csv", index=False, float_format=_FLOAT_FORMAT)
            edges.to_csv(tmp / "edges.csv", index=False)
    return target
