"""``gnnaudit train``: train a GNN node classifier and write its metrics and checkpoint.

Writes ``<out>/metrics.json`` (configuration, dataset size, train / val / test accuracy and
loss, majority rate, timings) and ``<out>/model.ckpt`` (a Lightning checkpoint that
:func:`gnnaudit.training.load_node_classifier` reopens safely), and prints a metrics table.
"""

from __future__ import annotations

import argparse

from gnnaudit.cli._datasets import add_dataset_arguments

#: Same names as :data:`gnnaudit.training.BACKBONES` (kept here so ``--help`` stays light).
MODELS: tuple[str, ...] = ("gcn", "gat", "gin", "sage", "mpnn")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="train a GNN node classifier on a graph dataset",
        description=(
            "Train a GNN node classifier (Lightning, CPU, deterministic per seed) on a graph "
            "dataset; print train/val/test accuracy and write metrics.json and model.ckpt."
        ),
    )
    add_dataset_arguments(p)
    model = p.add_argument_group("model")
    model.add_argument("--model", default="gcn", choices=MODELS, help="GNN backbone (default gcn)")
    model.add_argument("--epochs", type=int, default=200, help="training epochs (default 200)")
    model.add_argument("--layers", type=int, default=3, help="message-passing layers (default 3)")
    model.add_argument("--hidden", type=int, default=16, help="hidden channels (default 16)")
    model.add_argument("--dropout", type=float, default=0.5, help="dropout (default 0.5)")
    model.add_argument("--lr", type=float, default=0.01, help="Adam learning rate (default 0.01)")
    model.add_argument("--weight-decay", type=float, default=5e-4, help="Adam weight decay")
    model.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="seed nodes per mini-batch (exact L-hop subgraphs; default: full batch)",
    )
    model.add_argument(
        "--patience", type=int, default=None, help="early stopping patience on val loss"
    )
    model.add_argument("--progress", action="store_true", help="show the progress bar")
    p.add_argument("--out", required=True, help="output folder for metrics.json and model.ckpt")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json
    import os
    import time

    import pandas as pd

    from gnnaudit.cli._datasets import dataset_from_args
    from gnnaudit.errors import InvalidInputError
    from gnnaudit.training import train_node_classifier

    start = time.perf_counter()
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise InvalidInputError(f"--out must be a folder, got the file {args.out}")
    os.makedirs(args.out, exist_ok=True)
    data = dataset_from_args(args)
    ckpt = os.path.join(args.out, "model.ckpt")
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
        enable_progress_bar=args.progress,
        verbose=bool(getattr(args, "verbose", False)),
    )
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
        f"{args.dataset}: {data.num_nodes} nodes, {data.edge_index.size(1) // 2} undirected "
        f"edges, {data.x.size(1)} features | {args.model}, {metrics['epochs_run']} epochs, "
        f"best epoch {metrics['best_epoch']}, seed {args.seed}"
    )
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    print(f"majority rate (test): {metrics['majority_rate']:.4f}")

    report = {
        "dataset": args.dataset,
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
    path = os.path.join(args.out, "metrics.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2)
    print(f"wrote {path} and {ckpt} ({wall:.1f} s)")
    return 0
