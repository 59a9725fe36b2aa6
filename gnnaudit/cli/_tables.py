"""``audit`` / ``train`` options for a user's own node / edge tables and the preprocessing of
the model.

* :func:`add_table_arguments`: ``--id-column``, ``--source-column``, ``--target-column``,
  ``--ignore``, ``--split-column``, ``--ordinal``, ``--categorical``, ``--max-categories``,
  ``--undirected`` (read by :func:`gnnaudit.datasets.read_graph`, which also finds the id,
  label and split columns by their names: :mod:`gnnaudit.datasets.column_roles`), and
  ``--transform``, ``--standardize``, ``--expected-accuracy`` (``audit`` only).
  :func:`add_graph_arguments` adds ``--graph``, ``--label``, ``--sensitive`` and those
  (``train``). ``--ignore``, ``--ordinal`` and ``--categorical`` take several names, repeated
  or comma-separated.
* :func:`gnnaudit.cli._graph_input.check_graph_input`: the way the graph comes in
  (``--graph`` or ``--nodes`` / ``--edges``) and the named columns against the CSV headers,
  checked before torch is imported (a typo fails at once, exit 2).
* :func:`load_args_graph`, :func:`preprocess`, :func:`check_expected_accuracy`: the steps of
  ``audit`` that use them. :func:`preprocess` ends with :func:`check_checkpoint_inputs`: a
  ``--checkpoint`` whose model takes other inputs than the graph gives is refused naming the
  extra and missing input columns (``gnnaudit train`` stores the column names in the
  checkpoint, under :data:`CHECKPOINT_INPUTS`), or the graph's inputs and the expected count.

**Far below the expected accuracy** (``--expected-accuracy A``): the accuracy ``p`` measured on
the ``n`` labelled test nodes (all labelled nodes without a test mask) is more than
:data:`ACCURACY_MARGIN` (5 points) below ``A`` **and** ``A`` lies above the upper end of the
99 % Wilson interval of ``p`` (so a small test set's chance shortfall is not flagged). The
audit then stops with an error naming the likely cause, a preprocessing mismatch: an audit of
a model fed inputs it was not trained on measures nothing about the model.
"""

from __future__ import annotations

import argparse
import copy
import math
from typing import Any

from gnnaudit.cli._graph_input import TABLE_FLAGS, add_table_file_arguments
from gnnaudit.cli._scaling import (
    CHECKPOINT_INPUTS,
    CHECKPOINT_ROLES,
    add_scaling_arguments,
    checkpoint_scaler,
)
from gnnaudit.cli.options import FloatRange, count_type

__all__ = [
    "ACCURACY_MARGIN",
    "CHECKPOINT_INPUTS",
    "CHECKPOINT_ROLES",
    "ColumnNames",
    "add_graph_arguments",
    "add_table_arguments",
    "check_checkpoint_inputs",
    "input_mismatch",
    "load_args_graph",
    "preprocess",
    "check_expected_accuracy",
    "far_below",
]

#: points of accuracy below ``--expected-accuracy`` that may be chance (with the interval rule)
ACCURACY_MARGIN = 0.05
_Z99 = 2.5758293035489004  # two-sided 99 % normal quantile

#: read_graph argument -> CLI flag (how messages name them)
FLAGS = {"nodes": "--graph", "edges": "--graph", **TABLE_FLAGS}
_TABLE_ONLY = (
    "id_column",
    "source_column",
    "target_column",
    "ignore",
    "split_column",
    "ordinal",
    "categorical",
    "max_categories",
)


class ColumnNames(argparse.Action):
    """``--ignore a b --ignore c,d``: every name given, repeated or comma-separated, in order."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Add the names of ``values`` to the list of ``dest``."""
        names = list(getattr(namespace, self.dest, None) or [])
        for value in values if isinstance(values, list) else [values]:
            names.extend(part.strip() for part in str(value).split(",") if part.strip())
        setattr(namespace, self.dest, names)


def add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    """``--graph``, ``--label``, ``--sensitive`` and the table options (``train``; ``audit``
    adds its own ``--graph`` group)."""
    own = parser.add_argument_group("your graph (instead of --dataset)")
    own.add_argument(
        "--graph",
        default=None,
        help="a folder with nodes.csv and edges.csv (or the .parquet pair), a .pt file or an "
        ".npz of arrays; tables under other names: --nodes FILE --edges FILE",
    )
    add_table_file_arguments(own)
    own.add_argument(
        "--label",
        default=None,
        help="label column of nodes (default: the one column named y, label, target or class, "
        "any case); text labels are coded by sorted value, the names kept",
    )
    own.add_argument(
        "--sensitive",
        default=None,
        help="the sensitive column (a text one is coded as one column, as audit codes it: give "
        "the same --sensitive to both)",
    )
    add_table_arguments(parser, expected_accuracy=False)


def _add_names(group: argparse._ArgumentGroup, flag: str, text: str) -> None:
    """A flag taking column names, repeated or comma-separated (:class:`ColumnNames`)."""
    group.add_argument(flag, nargs="+", action=ColumnNames, default=None, metavar="COL", help=text)


def add_table_arguments(parser: argparse.ArgumentParser, *, expected_accuracy: bool = True) -> None:
    """Add the table and preprocessing options to the ``audit`` (or ``train``) parser."""
    tables = parser.add_argument_group(
        "your node / edge tables (--graph FOLDER with nodes.csv and edges.csv or the .parquet "
        "pair, or --nodes FILE --edges FILE); columns named id / node_id, y / label / target / class and split / set / fold "
        "(any case) are the id, the label and the split unless these flags say otherwise"
    )
    tables.add_argument(
        "--id-column",
        default=None,
        help="node-id column of nodes (default: the one column named id or node_id)",
    )
    tables.add_argument(
        "--source-column", default=None, help="edge source column, node ids (default source)"
    )
    tables.add_argument(
        "--target-column", default=None, help="edge target column, node ids (default target)"
    )
    _add_names(
        tables,
        "--ignore",
        "columns that are neither features nor the id, label or split (repeat the flag or "
        "separate names by commas)",
    )
    tables.add_argument(
        "--split-column",
        default=None,
        help="column of train / val / test values (any case; validation, valid, dev = val) "
        "giving the split (default: the one column named split, set or fold holding them)",
    )
    _add_names(
        tables,
        "--ordinal",
        "text columns coded 0..m-1 (sorted values) instead of the default rule: a text column "
        "with 2 values becomes one 0/1 column, with more one-hot columns 'col=value'",
    )
    _add_names(
        tables,
        "--categorical",
        "text columns one-hot encoded even with more than --max-categories values",
    )
    tables.add_argument(
        "--max-categories",
        type=count_type(1),
        default=None,
        metavar="M",
        help="most one-hot columns an undeclared text column may become (default 50); a column "
        "with more values is refused, naming it",
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
    add_scaling_arguments(prep)
    if not expected_accuracy:
        return
    prep.add_argument(
        "--feature-order",
        default=None,
        metavar="FILE",
        help="the model's input column names in its order (one per line or comma-separated): "
        "the graph's columns are matched to it by name and reordered; extra or missing "
        "columns are refused, naming them (a gnnaudit --checkpoint carries its names already)",
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


def load_args_graph(args: argparse.Namespace) -> Any:
    """The user's graph as a PyG ``Data``: ``--nodes`` / ``--edges`` or a ``--graph`` folder
    through ``read_graph``, a ``.pt`` / ``.npz`` ``--graph`` through ``load_graph``."""
    from gnnaudit.cli._graph_input import graph_flags, table_files

    pair = table_files(args)
    if pair is not None:
        from gnnaudit.datasets import read_graph

        return read_graph(
            pair[0],
            pair[1],
            label=args.label,
            sensitive=args.sensitive,
            mask_column=getattr(args, "mask_column", None),
            undirected=args.undirected,
            flags=graph_flags(args),
            **_table_options(args),
        )
    from gnnaudit.datasets import load_graph

    return load_graph(
        args.graph,
        label=args.label,
        sensitive=args.sensitive,
        mask_column=getattr(args, "mask_column", None),
        undirected=args.undirected,
        name="--graph",
        mask_name="--mask-column",
    )


def preprocess(args: argparse.Namespace, data: Any) -> tuple[Any, dict[str, str]]:
    """``--standardize`` then ``--transform`` applied to a shallow copy of ``data``, then the
    scaler a gnnaudit ``--checkpoint`` carries (:mod:`gnnaudit.cli._scaling`; not with
    ``--standardize`` / ``--no-standardize``); returns the graph and what was applied (for the
    report's model description)."""
    applied: dict[str, str] = {}
    if args.standardize is not None:
        from gnnaudit.datasets.scaler import load_standardizer

        data = load_standardizer(args.standardize, "--standardize").apply(data)
        applied["standardize"] = str(args.standardize)
    if args.transform is not None:
        from gnnaudit.audit.pipeline import apply_transform
        from gnnaudit.training.user_model import import_object

        transform = import_object(args.transform, name="--transform")
        if isinstance(transform, type):
            transform = transform()
        data = apply_transform(data, transform)
        applied["transform"] = args.transform
    ckpt = _checkpoint_dict(args)
    scaler = checkpoint_scaler(ckpt, f"--checkpoint {getattr(args, 'checkpoint', None)}")
    if scaler is not None and args.standardize is None and not args.no_standardize:
        data = scaler.apply(data)
        applied["standardize"] = "the scaler stored in --checkpoint (z-scores as in training)"
    data, reordered = match_input_order(args, data, ckpt)
    if reordered is not None:
        applied["input order"] = reordered
    check_checkpoint_inputs(args, data, ckpt)
    return data, applied


def _feature_order(path: str) -> list[str]:
    """The input column names of ``--feature-order FILE``: one per line, or separated by
    commas; blank lines and surrounding spaces ignored."""
    from gnnaudit.errors import InvalidInputError
    from gnnaudit.safe_io import check_input_file

    text = check_input_file("--feature-order", path).read_text(encoding="utf-8")
    names = [n.strip() for line in text.splitlines() for n in line.split(",") if n.strip()]
    if not names or len(set(names)) != len(names):
        raise InvalidInputError(
            f"--feature-order {path}: must name each input column of the model once, in the "
            f"model's order (one per line or comma-separated), got {names[:10]}"
        )
    return names


def match_input_order(
    args: argparse.Namespace, data: Any, ckpt: dict[str, Any] | None
) -> tuple[Any, str | None]:
    """The graph with its input columns in the model's order, matched by name: the names a
    gnnaudit ``--checkpoint`` carries, or ``--feature-order FILE`` (which wins). Returns
    ``(data, note)``, ``note`` saying what was reordered (None: nothing). Columns that do not
    match (extra or missing names) are refused, naming them (:func:`input_mismatch`). The
    recorded standardisation and ``sensitive_index`` follow the columns."""
    from gnnaudit.errors import InvalidInputError

    order_file = getattr(args, "feature_order", None)
    expected: Any
    if order_file is not None:
        expected, source = _feature_order(order_file), f"--feature-order {order_file}"
    else:
        expected = ckpt.get(CHECKPOINT_INPUTS) if ckpt is not None else None
        source = f"--checkpoint {getattr(args, 'checkpoint', None)}"
    x = getattr(data, "x", None)
    names = [str(n) for n in (getattr(data, "feature_names", None) or [])]
    if not isinstance(expected, list | tuple) or x is None or len(names) != int(x.size(1)):
        return data, None
    expected = [str(n) for n in expected]
    if sorted(expected) != sorted(names):
        problem = input_mismatch(expected, None, names, len(names))
        raise InvalidInputError(f"{source}: {problem}")
    if expected == names:
        return data, None
    import torch

    perm = [names.index(n) for n in expected]
    out = copy.copy(data)
    out.x = x[:, torch.tensor(perm, dtype=torch.long, device=x.device)]
    out.feature_names = list(expected)
    for attr in ("feature_mean", "feature_scale"):
        value = getattr(data, attr, None)
        if value is not None and len(value) == len(perm):
            setattr(out, attr, value[perm] if hasattr(value, "shape") else [value[i] for i in perm])
    index = getattr(data, "sensitive_index", None)
    if isinstance(index, int) and 0 <= index < len(names):
        out.sensitive_index = expected.index(names[index])
    return out, f"input columns put in the model's order by name ({source})"


def _checkpoint_dict(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``--checkpoint`` as a dict, or ``None`` (none given, or unreadable: the model
    loader then names the problem)."""
    path = getattr(args, "checkpoint", None)
    if path is None:
        return None
    from gnnaudit.errors import InvalidInputError
    from gnnaudit.safe_io import safe_torch_load

    try:
        ckpt = safe_torch_load(path, name="--checkpoint", map_location="cpu")
    except InvalidInputError:
        return None
    return ckpt if isinstance(ckpt, dict) else None


def input_mismatch(
    expected: Any, width: Any, names: list[str], have: int, ignore: str = "--ignore"
) -> str | None:
    """Why a model trained on input columns ``expected`` (names, or ``None``) / ``width``
    inputs does not fit a graph whose inputs are ``names`` (``have`` of them; ``names`` empty
    when unknown), or ``None`` when it fits."""
    from gnnaudit.datasets.columns import name_list

    if isinstance(expected, list | tuple) and names and all(isinstance(n, str) for n in expected):
        extra = [n for n in names if n not in expected]
        missing = [n for n in expected if n not in names]
        if extra or missing:
            parts = [
                f"the model was trained on {len(expected)} input columns, the graph gives {have}"
            ]
            if extra:
                parts.append(
                    f"not inputs of the model: {name_list(extra)} (leave them out with "
                    f"{ignore} {' '.join(extra)}; is one the label or the split? name it "
                    "with --label / --split-column)"
                )
            if missing:
                parts.append(f"missing from the graph: {name_list(missing)}")
            return "; ".join(parts)
        if list(expected) != names:
            return (
                f"the graph gives the model's {have} input columns in another order: "
                f"{name_list(names)}, trained on {name_list(expected)}; reorder the columns of "
                "the node table"
            )
        return None
    if isinstance(width, int) and not isinstance(width, bool) and width != have:
        shown = f": {name_list(names)}" if names else ""
        return (
            f"the model takes {width} inputs but the graph gives {have}{shown} (the checkpoint "
            f"holds no input column names; leave extra columns out with {ignore}, name the "
            "label with --label and the split with --split-column)"
        )
    return None


def check_checkpoint_inputs(
    args: argparse.Namespace, data: Any, ckpt: dict[str, Any] | None = None
) -> None:
    """A ``--checkpoint`` (``ckpt``, read when not given) whose inputs do not fit ``data`` is
    refused naming the columns (:func:`input_mismatch`); a checkpoint that cannot be read is
    left to the model loader, which names the problem."""
    path = getattr(args, "checkpoint", None)
    x = getattr(data, "x", None)
    if path is None or x is None:
        return
    from gnnaudit.errors import InvalidInputError

    ckpt = _checkpoint_dict(args) if ckpt is None else ckpt
    if ckpt is None:
        return
    hparams = ckpt.get("hyper_parameters")
    width = hparams.get("in_channels") if isinstance(hparams, dict) else None
    have = int(x.size(1))
    names = [str(n) for n in (getattr(data, "feature_names", None) or [])]
    if len(names) != have:  # a --transform changed the inputs: their names are unknown
        names = []
    problem = input_mismatch(ckpt.get(CHECKPOINT_INPUTS), width, names, have)
    if problem is not None:
        raise InvalidInputError(f"--checkpoint {path}: {problem}")


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
