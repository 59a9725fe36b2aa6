"""Where ``audit`` / ``train`` read a user's graph from, checked before torch is imported.

Three ways in, one at a time:

* ``--graph FOLDER`` holding ``nodes.csv`` and ``edges.csv`` (or ``nodes.parquet`` and
  ``edges.parquet``);
* ``--nodes FILE --edges FILE``: the two tables under any names (``people.csv`` /
  ``links.csv``), CSV or Parquet;
* ``--graph FILE``: a ``.pt`` or ``.npz`` file.

:func:`check_graph_input` answers at once (no torch, no pandas) when the way in is wrong: a
folder without ``nodes.csv`` names the tables it does hold and the ``--nodes`` / ``--edges``
flags to pass them; a table file given to ``--graph`` points at ``--nodes`` / ``--edges``; a
table that is not a regular file (a FIFO, a link to ``/dev/zero``) is refused instead of being
read forever; a column named on the command line that is not in a CSV header is refused,
naming the flag and the columns there.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
from typing import Any

__all__ = [
    "TABLE_SUFFIXES",
    "add_table_file_arguments",
    "table_files",
    "graph_name",
    "graph_flags",
    "uses_own_graph",
    "check_graph_input",
    "read_header",
]

#: suffixes of the table files ``--nodes`` / ``--edges`` read
TABLE_SUFFIXES = (".csv", ".parquet")
#: suffixes a user may have meant as a table (named in hints)
_TABLE_LIKE = (".csv", ".parquet", ".tsv", ".txt")
#: most bytes of a CSV file read to find its header line
_HEADER_BYTES = 1 << 20

#: read_graph argument -> CLI flag (how messages name them); ``nodes`` / ``edges`` follow the
#: way the tables were given (:func:`graph_flags`)
TABLE_FLAGS = {
    "id_column": "--id-column",
    "source_column": "--source-column",
    "target_column": "--target-column",
    "label": "--label",
    "sensitive": "--sensitive",
    "ignore": "--ignore",
    "split_column": "--split-column",
    "mask_column": "--mask-column",
    "ordinal": "--ordinal",
    "categorical": "--categorical",
    "max_categories": "--max-categories",
    "undirected": "--undirected",
}


def add_table_file_arguments(group: argparse._ArgumentGroup) -> None:
    """Add ``--nodes FILE`` and ``--edges FILE`` (instead of ``--graph FOLDER``)."""
    group.add_argument(
        "--nodes",
        default=None,
        metavar="FILE",
        help="your node table under any name (CSV or Parquet; e.g. people.csv), with --edges; "
        "instead of --graph FOLDER",
    )
    group.add_argument(
        "--edges",
        default=None,
        metavar="FILE",
        help="your edge table under any name (columns source, target: node ids), with --nodes",
    )


def uses_own_graph(args: argparse.Namespace) -> bool:
    """Whether the command reads the user's graph (``--graph`` or ``--nodes`` / ``--edges``)."""
    return getattr(args, "graph", None) is not None or getattr(args, "nodes", None) is not None


def graph_name(args: argparse.Namespace) -> str:
    """How reports and messages name the user's graph."""
    nodes = getattr(args, "nodes", None)
    if nodes is not None:
        return f"{nodes} + {getattr(args, 'edges', None)}"
    return str(args.graph)


def graph_flags(args: argparse.Namespace) -> dict[str, str]:
    """:data:`TABLE_FLAGS` with ``nodes`` / ``edges`` named as they were given."""
    if getattr(args, "nodes", None) is not None:
        return {**TABLE_FLAGS, "nodes": "--nodes", "edges": "--edges"}
    return {**TABLE_FLAGS, "nodes": "--graph", "edges": "--graph"}


def table_files(args: argparse.Namespace) -> tuple[str, str] | None:
    """The node and edge table files the command will read, or ``None`` (a ``.pt`` / ``.npz``
    graph or a built-in data set). A ``--graph`` folder gives its Parquet pair when both
    exist, else its CSV pair."""
    nodes = getattr(args, "nodes", None)
    if nodes is not None:
        return nodes, args.edges
    graph = getattr(args, "graph", None)
    if graph is None or not os.path.isdir(graph):
        return None
    pair = [os.path.join(graph, f"{kind}.parquet") for kind in ("nodes", "edges")]
    if all(os.path.isfile(p) for p in pair):
        return pair[0], pair[1]
    return os.path.join(graph, "nodes.csv"), os.path.join(graph, "edges.csv")


def _error(message: str) -> Exception:
    from gnnaudit.errors import InvalidInputError

    return InvalidInputError(message)


def _tables_in(folder: str) -> list[str]:
    """Names of the table-like files of ``folder`` (sorted; at most 20)."""
    try:
        names = sorted(
            e.name
            for e in os.scandir(folder)
            if e.name.lower().endswith(_TABLE_LIKE) and not e.name.startswith(".")
        )
    except OSError:
        return []
    return names[:20]


def _guess_pair(folder: str, names: list[str], args: argparse.Namespace) -> str:
    """``--nodes A --edges B`` for two table files of ``folder`` (the one whose header holds
    the edge columns is the edge table), or a generic hint."""
    if len(names) != 2:
        return "--nodes FILE --edges FILE"
    ends = {getattr(args, "source_column", None) or "source"}
    ends.add(getattr(args, "target_column", None) or "target")
    headers = [read_header(os.path.join(folder, n)) or [] for n in names]
    edge_like = [ends <= set(h) for h in headers]
    if edge_like[0] and not edge_like[1]:
        names = names[::-1]
    return " ".join(
        ["--nodes", os.path.join(folder, names[0]), "--edges", os.path.join(folder, names[1])]
    )


def _check_ways_in(args: argparse.Namespace) -> None:
    """One way in: ``--graph`` or both of ``--nodes`` / ``--edges``; a folder holds the two
    tables; a table file is not given to ``--graph``."""
    graph, nodes, edges = (getattr(args, k, None) for k in ("graph", "nodes", "edges"))
    if (nodes is None) != (edges is None):
        given, other = ("--nodes", "--edges") if edges is None else ("--edges", "--nodes")
        raise _error(f"{given} needs {other}: give both table files (or --graph FOLDER)")
    if nodes is not None and graph is not None:
        raise _error("give either --graph or --nodes / --edges, not both")
    if graph is None:
        return
    if os.path.isfile(graph) and graph.lower().endswith(_TABLE_LIKE):
        raise _error(
            f"--graph {graph!r} is a table file; --graph takes a folder holding nodes.csv and "
            "edges.csv, a .pt or an .npz file. Give your two tables as --nodes FILE --edges FILE"
        )
    pair = table_files(args)
    if pair is None:
        return
    missing = [os.path.basename(p) for p in pair if not os.path.lexists(p)]
    if missing:
        names = _tables_in(graph)
        held = f"it holds {', '.join(names)}" if names else "it holds no table file"
        raise _error(
            f"--graph {graph!r}: no {' and no '.join(missing)} in that folder ({held}); name "
            f"your tables nodes.csv and edges.csv or pass them as {_guess_pair(graph, names, args)}"
        )


def check_graph_input(args: argparse.Namespace) -> None:
    """The way the graph comes in (module doc), the table files (regular files only) and the
    columns named on the command line against the CSV headers; no torch, no pandas."""
    from gnnaudit.safe_io import check_input_file

    _check_ways_in(args)
    pair = table_files(args)
    given = {
        k: v
        for k in ("id_column", "source_column", "target_column", "ignore", "split_column")
        + ("ordinal", "categorical", "max_categories")
        if (v := getattr(args, k, None)) is not None
    }
    if getattr(args, "undirected", False):
        given["undirected"] = True
    if pair is None:
        if given:
            flag = TABLE_FLAGS[next(iter(given))]
            graph = getattr(args, "graph", None)
            where = "--graph" if graph is None else f"--graph {graph!r} (a .pt / .npz file)"
            raise _error(
                f"{flag} needs node / edge tables (--graph FOLDER or --nodes FILE --edges "
                f"FILE), not {where}"
            )
        return
    flags = graph_flags(args)
    for kind, path in zip(("nodes", "edges"), pair, strict=True):
        check_input_file(flags[kind], path)  # a FIFO or a device is refused, never read
    _check_header(args, pair)


def read_header(path: str) -> list[str] | None:
    """The column names of a CSV file's first line (``None`` when it is not a regular file or
    cannot be read: the full reader then names the problem). Reads at most 1 MiB."""
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as fh:
            head = fh.read(_HEADER_BYTES)
        text = head.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    first = text.splitlines()[0] if text else ""
    try:
        row = next(csv.reader(io.StringIO(first), skipinitialspace=True), None)
    except csv.Error:
        return None
    return None if row is None else [c.strip() for c in row]


def _check_header(args: argparse.Namespace, pair: tuple[str, str]) -> None:
    """Each column named on the command line is in the header of its CSV table."""
    checks: dict[str, dict[str, Any]] = {
        pair[0]: {
            k: getattr(args, k, None)
            for k in ("id_column", "label", "sensitive", "split_column", "mask_column")
            + ("ignore", "ordinal", "categorical")
        },
        pair[1]: {
            "source_column": getattr(args, "source_column", None) or "source",
            "target_column": getattr(args, "target_column", None) or "target",
        },
    }
    for path, wanted in checks.items():
        if not path.lower().endswith(".csv"):
            continue
        columns = read_header(path)
        if columns is None:
            continue
        where = graph_flags(args)["nodes" if path == pair[0] else "edges"]
        for argument, value in wanted.items():
            names = [] if value is None else [value] if isinstance(value, str) else value
            missing = [n for n in names if n not in columns]
            if missing:
                shown = ", ".join(repr(c) for c in columns[:20])
                raise _error(
                    f"{TABLE_FLAGS[argument]}: {', '.join(map(repr, missing))} is not a column "
                    f"of {where}: {path!r} (columns: {shown}{' ...' if len(columns) > 20 else ''})"
                )
