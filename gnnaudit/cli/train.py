"""``gnnaudit train``: train a GNN node classifier and write its metrics and checkpoint.

The graph is a built-in data set (``--dataset``) or yours (``--graph FOLDER`` of node / edge
tables, or a ``.pt`` / ``.npz`` file), read with the same table flags as ``gnnaudit audit``
(``--id-column``, ``--label``, ``--split-column``, ``--ignore``, ``--sensitive``,
``--transform`` ...; :mod:`gnnaudit.cli._tables`). A graph without split masks is split as
``--split stratified`` splits the data sets (50/25/25 per class, ``--split-seed`` or
``--seed``).

Writes ``<out>/metrics.json`` (configuration, dataset size, input columns and their roles,
train / val / test accuracy and loss, majority rate, timings) and ``<out>/model.ckpt`` (a
Lightning checkpoint that :func:`gnnaudit.training.load_node_classifier` reopens safely; it
also holds the input column names, so ``gnnaudit audit --checkpoint`` names the columns of a
graph that does not fit), and prints a metrics table.
``--out`` is checked before training starts; the files are written into a private temporary
folder that replaces ``--out`` only when everything succeeded (``--force`` replaces a folder
that already holds files).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from gnnaudit.cli._datasets import add_dataset_arguments
from gnnaudit.cli._tables import add_graph_arguments
from gnnaudit.cli.options import (
    BACKBONES,
    FloatRange,
    IntRange,
    add_force_argument,
    add_out_argument,
    add_progress_argument,
    count_type,
    epochs_type,
)

MODELS = BACKBONES
#: every file ``train`` may write into ``--out`` (checked against the folder before any work)
TRAIN_OUTPUTS = ("metrics.json", "model.ckpt")
logger = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``train`` command and its options to ``subparsers``."""
    p = subparsers.add_parser(
        "train",
        help="train a GNN node classifier on a graph dataset",
        description=(
            "Train a GNN node classifier (Lightning, CPU, deterministic per seed) on a graph "
            "dataset; print train/val/test accuracy and write metrics.json and model.ckpt."
        ),
    )
    from gnnaudit._validation import (
        MAX_HIDDEN_CHANNELS,
        MAX_LEARNING_RATE,
        MAX_NUM_LAYERS,
        MAX_WEIGHT_DECAY,
    )

    add_dataset_arguments(p)
    add_graph_arguments(p)
    model = p.add_argument_group("model")
    model.add_argument("--model", default="gcn", choices=MODELS, help="GNN backbone (default gcn)")
    model.add_argument(
        "--epochs", type=epochs_type(), default=200, help="training epochs (default 200)"
    )
    model.add_argument(
        "--layers",
        type=IntRange(1, MAX_NUM_LAYERS, "MAX_NUM_LAYERS"),
        default=3,
        help=f"message-passing layers, 1 to {MAX_NUM_LAYERS} (default 3)",
    )
    model.add_argument(
        "--hidden",
        type=IntRange(1, MAX_HIDDEN_CHANNELS, "MAX_HIDDEN_CHANNELS"),
        default=16,
        help=f"hidden channels, 1 to {MAX_HIDDEN_CHANNELS} (default 16)",
    )
    model.add_argument(
        "--dropout",
        type=FloatRange(0.0, 1.0, high_open=True),
        default=0.5,
        help="dropout in [0, 1) (default 0.5)",
    )
    model.add_argument(
        "--lr",
        type=FloatRange(0.0, MAX_LEARNING_RATE, low_open=True, why="MAX_LEARNING_RATE"),
        default=0.01,
        help=f"Adam learning rate in (0, {MAX_LEARNING_RATE:g}] (default 0.01); training that "
        "diverges (non-finite loss or weights) stops with an error and writes no checkpoint",
    )
    model.add_argument(
        "--weight-decay",
        type=FloatRange(0.0, MAX_WEIGHT_DECAY, why="MAX_WEIGHT_DECAY"),
        default=5e-4,
        help=f"Adam weight decay in [0, {MAX_WEIGHT_DECAY:g}] (default 5e-4)",
    )
    model.add_argument(
        "--batch-size",
        type=count_type(1),
        default=None,
        help="seed nodes per mini-batch (exact L-hop subgraphs; default: full batch)",
    )
    model.add_argument(
        "--patience", type=epochs_type(), default=None, help="early stopping patience on val loss"
    )
    add_progress_argument(model)
    add_out_argument(
        p,
        kind="folder",
        what="output folder for metrics.json and model.ckpt",
        required=True,
        planned=TRAIN_OUTPUTS,
    )
    add_force_argument(p, kind="folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gnnaudit train`` on the parsed ``args``; return the exit code."""
    import time

    from gnnaudit.safe_io import atomic_output_dir, check_output_dir

    start = time.perf_counter()
    planned = TRAIN_OUTPUTS
    check_output_dir("--out", args.out, force=args.force, planned=planned)
    from gnnaudit.cli._graph_input import check_graph_input

    check_graph_input(args)  # before torch: a misnamed file or column fails at once
    with atomic_output_dir(
        args.out, force=args.force, name="--out", producer="train", planned=planned
    ) as out_dir:
        wall = _train_into(args, str(out_dir), start)
    print(f"wrote {args.out}/metrics.json and {args.out}/model.ckpt ({wall:.1f} s)")
    return 0


def _train_into(args: argparse.Namespace, out_dir: str, start: float) -> float:
    """Train, print the metrics table and write the outputs into ``out_dir``; return seconds."""
    import json
    import os
    import time

    import pandas as pd

    from gnnaudit.cli._scaling import stamp_checkpoint
    from gnnaudit.cli.options import progress_enabled
    from gnnaudit.training import train_node_classifier

    data, name, preprocessing, scaler = _training_data(args)
    ckpt = os.path.join(out_dir, "model.ckpt")
    module, metrics = train_node_classifier(
        data,
        backbone=args.model,
        max_epochs=args.epochs,
        seed=args.seed,
        num_layers=args.layers,
        hidden_channels=args.hidden,
        dropout=args.dropout,
        lr=args.lr,
        weight_decay=args.weight_decay,
        batch_size=args.batch_size,
        patience=args.patience,
        checkpoint_path=ckpt,
        progress=progress_enabled(args),
        verbose=bool(getattr(args, "verbose", False)),
    )
    stamp_checkpoint(ckpt, data, scaler)
    wall = time.perf_counter() - start

    table = pd.DataFrame(
        {
            "nodes": [int(data[f"{s}_mask"].sum()) for s in ("train", "val", "test")],
            "accuracy": [metrics.get(f"{s}_acc", float("nan")) for s in ("train", "val", "test")],
            "loss": [metrics.get(f"{s}_loss", float("nan")) for s in ("train", "val", "test")],
        },
        index=pd.Index(["train", "val", "test"], name="split"),
    )
    print(
        f"{name}: {data.num_nodes} nodes, {data.edge_index.size(1) // 2} undirected "
        f"edges, {data.x.size(1)} features | {args.model}, {metrics['epochs_run']} epochs, "
        f"best epoch {metrics['best_epoch']}, seed {args.seed}"
    )
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    print(f"majority rate (test): {metrics['majority_rate']:.4f}")
    if "standardize" in preprocessing:
        print(f"inputs standardized: {preprocessing['standardize']}")

    report = {
        "dataset": name,
        "graph": args.graph,
        "nodes": args.nodes,
        "edges": args.edges,
        "preprocessing": preprocessing,
        "feature_names": [str(f) for f in getattr(data, "feature_names", None) or []],
        "column_roles": getattr(data, "column_roles", None),
        "model": dict(module.hparams),
        "seed": args.seed,
        "epochs": args.epochs,
        "num_nodes": int(data.num_nodes),
        "num_edges": int(data.edge_index.size(1)),
        "num_features": int(data.x.size(1)),
        "sensitive_name": getattr(data, "sensitive_name", None),
        "metrics": metrics,
        "checkpoint": "model.ckpt",
        "wall_seconds": wall,
    }
    with open(os.path.join(out_dir, "metrics.json"), "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2)
    return wall


def _training_data(args: argparse.Namespace) -> tuple[Any, str, dict[str, str], Any]:
    """The graph to train on, its name, the preprocessing applied and the built-in scaler
    (``None`` when none was fitted): ``--graph`` or ``--nodes`` / ``--edges`` (with the table
    flags, ``--standardize`` or the built-in scaler, and ``--transform``) or ``--dataset``."""
    from gnnaudit.cli._graph_input import graph_name, uses_own_graph
    from gnnaudit.cli._scaling import fit_builtin_scaler, wants_builtin_scaler
    from gnnaudit.errors import InvalidInputError

    if not uses_own_graph(args):
        for flag in ("label", "sensitive", "standardize", "transform", "no_standardize"):
            if getattr(args, flag) not in (None, False):
                raise InvalidInputError(
                    f"--{flag.replace('_', '-')} needs --graph or --nodes / --edges (your own "
                    "graph)"
                )
        from gnnaudit.cli._datasets import dataset_from_args

        return dataset_from_args(args), args.dataset, {}, None
    from gnnaudit.cli._tables import load_args_graph, preprocess

    name = graph_name(args)
    where = f"--graph {args.graph}" if args.graph is not None else f"--nodes {args.nodes}"
    data, applied = preprocess(args, load_args_graph(args))
    if getattr(data, "y", None) is None:
        raise InvalidInputError(
            f"{where}: training needs a label; name the label column with --label "
            "(the default is the one column named y, label, target or class)"
        )
    stages = ("train", "val", "test")
    present = [s for s in stages if getattr(data, f"{s}_mask", None) is not None]
    if present and len(present) < len(stages):
        absent = [s for s in stages if s not in present]
        raise InvalidInputError(
            f"{where}: the split gives {', '.join(present)} nodes but no "
            f"{', '.join(absent)} nodes; training needs all three (or no split: then a "
            "stratified 50/25/25 split is drawn)"
        )
    if not present:
        from gnnaudit.datasets import attach_masks

        seed = args.split_seed if args.split_seed is not None else args.seed
        logger.info("%s: no split column; stratified 50/25/25 split (seed %d)", name, seed)
        data = attach_masks(data, seed=seed)
    scaler = None
    if wants_builtin_scaler(args):
        data, scaler, text = fit_builtin_scaler(data)
        if text is not None:
            applied["standardize"] = text
    return data, name, applied, scaler
