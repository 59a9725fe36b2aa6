"""``audit`` options for a user's own node / edge tables and the preprocessing of the model.

* :func:`add_table_arguments`: ``--id-column``, ``--source-column``, ``--target-column``,
  ``--ignore``, ``--split-column``, ``--ordinal``, ``--undirected`` (read by
  :func:`gnnaudit.datasets.read_graph`), and ``--transform``, ``--standardize``,
  ``--expected-accuracy``.
* :func:`check_table_header`: the named columns exist in the CSV headers, checked before
  torch is imported (a typo fails at once, exit 2).
* :func:`load_args_graph`, :func:`preprocess`, :func:`check_expected_accuracy`: the steps of
  ``audit`` that use them.

**Far below the expected accuracy** (``--expected-accuracy A``): the accuracy ``p`` measured on
the ``n`` labelled test nodes (all labelled nodes without a test mask) is more than
:data:`ACCURACY_MARGIN` (5 points) below ``A`` **and** ``A`` lies above the upper end of the
99 % Wilson interval of ``p`` (so a small test set's chance shortfall is not flagged). The
audit then stops with an error naming the likely cause, a preprocessing mismatch: an audit of
a model fed inputs it was not trained on measures nothing about the model.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
from typing import Any

from gnnaudit.cli.options import FloatRange

__all__ = [
    "ACCURACY_MARGIN",
    "add_table_arguments",
    "check_table_header",
    "load_args_graph",
    "preprocess",
    "check_expected_accuracy",
    "far_below",
]

#: points of accuracy below ``--expected-accuracy`` that may be chance (with the interval rule)
ACCURACY_MARGIN = 0.05
_Z99 = 2.5758293035489004  # two-sided 99 % normal quantile

#: read_graph argument -> CLI flag (how messages name them)
FLAGS = {
    "nodes": "--graph",
    "edges": "--graph",
    "id_column": "--id-column",
    "source_column": "--source-column",
    "target_column": "--target-column",
    "label": "--label",
    "sensitive": "--sensitive",
    "ignore": "--ignore",
    "split_column": "--split-column",
    "mask_column": "--mask-column",
    "ordinal": "--ordinal",
    "undirected": "--undirected",
}
_TABLE_ONLY = ("id_column", "source_column", "target_column", "ignore", "split_column", "ordinal")


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the table and preprocessing options to the ``audit`` parser."""
    tables = parser.add_argument_group(
        "your node / edge tables (--graph FOLDER with nodes.csv and edges.csv, or the .parquet "
        "pair)"
    )
    tables.add_argument("--id-column", default=None, help="node-id column of nodes (default id)")
    tables.add_argument(
        "--source-column", default=None, help="edge source column, node ids (default source)"
    )
    tables.add_argument(
        "--target-column", default=None, help="edge target column, node ids (default target)"
    )
    tables.add_argument(
        "--ignore", nargs="+", default=None, metavar="COL", help="columns that are not features"
    )
    tables.add_argument(
        "--split-column",
        default=None,
        help="column of train / val / test values (any case) giving the split",
    )
    tables.add_argument(
        "--ordinal",
        nargs="+",
        default=None,
        metavar="COL",
        help="text columns coded 0..m-1 (sorted values) instead of the default rule: a text "
        "column with 2 values becomes one 0/1 column, with more one-hot columns 'col=value'",
    )
    tables.add_argument("--undirected", action="store_true", help="add the reverse of every edge")
    prep = parser.add_argument_group("preprocessing the model was trained with")
    prep.add_argument(
        "--transform",
        default=None,
        metavar="MODULE:FN",
        help="a PyG transform or any callable applied to the graph before the model (a class "
        "is instantiated without arguments); importing MODULE runs it, as --model does",
    )
    prep.add_argument(
        "--standardize",
        default=None,
        metavar="SCALER",
        help="a fitted scikit-learn StandardScaler saved as data: .npz or .json of mean_, "
        "scale_ (optionally feature_names_in_), e.g. np.savez('scaler.npz', mean_=s.mean_, "
        "scale_=s.scale_); a pickled scaler is never loaded",
    )
    prep.add_argument(
        "--expected-accuracy",
        type=FloatRange(0.0, 1.0),
        default=None,
        metavar="A",
        help="the test accuracy you measured; stop with an error naming a preprocessing "
        "mismatch when the audit measures far less (> 5 points below and outside the 99%% "
        "interval)",
    )


def _table_options(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in _TABLE_ONLY if getattr(args, k, None) is not None}


def _header(path: str) -> list[str] | None:
    """The column names of a CSV file's first line (``None`` when it cannot be read: the
    full reader then names the problem)."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            row = next(csv.reader(fh, skipinitialspace=True), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return None if row is None else [c.strip() for c in row]


def check_table_header(args: argparse.Namespace) -> None:
    """The columns named on the command line exist in ``--graph``'s CSV headers (no torch)."""
    from gnnaudit.errors import InvalidInputError

    graph = getattr(args, "graph", None)
    given = _table_options(args)
    if getattr(args, "undirected", False) and graph is None:
        given["undirected"] = True
    if graph is None or not os.path.isdir(graph):
        if given:
            flag = FLAGS[next(iter(given))]
            where = "--graph" if graph is None else f"--graph {graph!r} (a .pt / .npz file)"
            raise InvalidInputError(
                f"{flag} needs --graph FOLDER of node / edge tables, not {where}"
            )
        return
    checks = {
        "nodes.csv": {
            "id_column": args.id_column or "id",
            "label": args.label,
            "sensitive": args.sensitive,
            "split_column": args.split_column,
            "mask_column": args.mask_column,
            "ignore": args.ignore,
            "ordinal": args.ordinal,
        },
        "edges.csv": {
            "source_column": args.source_column or "source",
            "target_column": args.target_column or "target",
        },
    }
    for file, wanted in checks.items():
        path = os.path.join(graph, file)
        columns = _header(path)
        if columns is None:
            continue
        for argument, value in wanted.items():
            names = [] if value is None else [value] if isinstance(value, str) else value
            missing = [n for n in names if n not in columns]
            if missing:
                shown = ", ".join(repr(c) for c in columns[:20])
                raise InvalidInputError(
                    f"{FLAGS[argument]}: {', '.join(map(repr, missing))} is not a column of "
                    f"--graph: {path!r} (columns: {shown}{' ...' if len(columns) > 20 else ''})"
                )


def load_args_graph(args: argparse.Namespace) -> Any:
    """The ``--graph`` of ``args`` as a PyG ``Data`` (a folder through ``read_graph``)."""
    if os.path.isdir(args.graph):
        from gnnaudit.datasets import read_graph

        options = {k: v for k, v in _table_options(args).items()}
        return read_graph(
            args.graph,
            label=args.label,
            sensitive=args.sensitive,
            mask_column=args.mask_column,
            undirected=args.undirected,
            flags=FLAGS,
            **options,
        )
    from gnnaudit.datasets import load_graph

    return load_graph(
        args.graph,
        label=args.label,
        sensitive=args.sensitive,
        mask_column=args.mask_column,
        undirected=args.undirected,
        name="--graph",
        mask_name="--mask-column",
    )


def preprocess(args: argparse.Namespace, data: Any) -> tuple[Any, dict[str, str]]:
    """``--standardize`` then ``--transform`` applied to a shallow copy of ``data``; returns the
    graph and what was applied (for the report's model description)."""
    applied: dict[str, str] = {}
    if args.standardize is not None:
        from gnnaudit.datasets.scaler import load_standardizer

        data = load_standardizer(args.standardize, "--standardize").apply(data)
        applied["standardize"] = str(args.standardize)
    if args.transform is not None:
        from gnnaudit.training.audit_pipeline import apply_transform
        from gnnaudit.training.user_model import import_object

        transform = import_object(args.transform, name="--transform")
        if isinstance(transform, type):
            transform = transform()
        data = apply_transform(data, transform)
        applied["transform"] = args.transform
    return data, applied


def far_below(accuracy: float, n: int, expected: float) -> tuple[bool, float]:
    """Whether ``accuracy`` on ``n`` nodes is far below ``expected`` (module rule), and the
    upper end of the 99 % Wilson interval of ``accuracy``."""
    z2 = _Z99**2
    centre = (accuracy + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z99 * math.sqrt(accuracy * (1 - accuracy) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    upper = centre + half
    return expected - accuracy > ACCURACY_MARGIN and expected > upper, upper


def check_expected_accuracy(args: argparse.Namespace, module: Any, data: Any, device: str) -> None:
    """Stop when the model's accuracy is far below ``--expected-accuracy`` (module rule)."""
    expected = getattr(args, "expected_accuracy", None)
    if expected is None:
        return
    from gnnaudit.errors import InvalidInputError

    y = getattr(data, "y", None)
    if y is None:
        raise InvalidInputError("--expected-accuracy needs labels (name the column with --label)")
    import torch

    from gnnaudit.audit.model_adapter import ModelAdapter

    mask = getattr(data, "test_mask", None)
    where = "labelled test nodes"
    if mask is None or not bool(mask.any()):
        mask, where = torch.ones_like(y, dtype=torch.bool), "labelled nodes"
    predictions = ModelAdapter(module, device=device).predict(data.x, data.edge_index)
    nodes = mask.cpu().numpy().astype(bool)
    accuracy = float((predictions[nodes] == y.cpu().numpy()[nodes]).mean())
    n = int(nodes.sum())
    low, upper = far_below(accuracy, n, expected)
    if low:
        raise InvalidInputError(
            f"--expected-accuracy {expected:.3f}: accuracy {accuracy:.3f} on the {n} {where} is "
            f"far below (more than {ACCURACY_MARGIN:.0%} points under it and above the 99% "
            f"interval's upper end {upper:.3f}): the features may not be preprocessed as in "
            "training (standardised? pass --standardize SCALER.npz or --transform MODULE:FN)"
        )
