"""Dataset selection shared by the graph subcommands (``train``, ``audit``, ``evidence`` ...).

``add_dataset_arguments(parser)`` adds ``--dataset``, ``--root``, ``--split``, the fair-GNN
graphs' ``--label-number``, ``--split-seed`` and ``--download``, and the synthetic generator's
``--num-nodes``, ``--bias``, ``--homophily`` (and ``--seed`` unless told not to);
``dataset_from_args(args)`` / ``load_graph_dataset(...)`` turn them into a PyG ``Data``.

The fair-GNN graphs (``german``, ``bail``, ``credit``: NIFTY; ``nba``, ``pokec_z``,
``pokec_n``: FairGNN) load through :func:`gnnaudit.datasets.load_nifty` from
``<root>/<name>/``; ``--split nifty`` / ``--split fairgnn`` give the published splits.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from gnnaudit.cli.options import SEED, count_type

__all__ = [
    "GRAPH_DATASETS",
    "add_dataset_arguments",
    "dataset_from_args",
    "load_graph_dataset",
]

#: CLI dataset name -> (loader kind, loader name).
GRAPH_DATASETS: dict[str, tuple[str, str]] = {
    "synthetic": ("synthetic", "synthetic"),
    "german": ("nifty", "german"),
    "bail": ("nifty", "bail"),
    "credit": ("nifty", "credit"),
    "nba": ("nifty", "nba"),
    "pokec_z": ("nifty", "pokec_z"),
    "pokec_n": ("nifty", "pokec_n"),
    "cora": ("planetoid", "cora"),
    "citeseer": ("planetoid", "citeseer"),
    "pubmed": ("planetoid", "pubmed"),
    "facebook": ("pyg", "FacebookPagePage"),
    "amazon-products": ("pyg", "AmazonProducts"),
}

_ROOT_ENV = "GNNAUDIT_DATA"
_ROOT_LAYOUT = {
    "nifty": (
        "<root>/<name>/<name>.csv (+ optional <name>_edges.txt) for german, bail, credit; "
        "<root>/<name>/<stem>.csv and <stem>_relationship.txt for nba, pokec_z, pokec_n"
    ),
    "planetoid": "<root>/<Name>/raw/ind.<name>.* (PyG Planetoid raw files)",
    "pyg": "<root>/<Name>/raw/ (PyG raw files)",
}


def add_dataset_arguments(parser: argparse.ArgumentParser, *, include_seed: bool = True) -> None:
    """Add the dataset options to ``parser`` (``--seed`` only if ``include_seed``)."""
    group = parser.add_argument_group("dataset")
    group.add_argument(
        "--dataset",
        default="synthetic",
        choices=tuple(GRAPH_DATASETS),
        help="graph to load (default: synthetic, the embedded credit graph)",
    )
    group.add_argument(
        "--root",
        default=None,
        help=f"data folder for the file-based datasets (default: ${_ROOT_ENV})",
    )
    group.add_argument(
        "--split",
        default="stratified",
        choices=("stratified", "public", "nifty", "fairgnn"),
        help="stratified 50/25/25 split (default), the split a PyG dataset ships (public), or "
        "the published split of NIFTY / FairGNN (fair-GNN graphs)",
    )
    group.add_argument(
        "--label-number",
        type=count_type(2),
        default=None,
        help="nifty/fairgnn split: training cap (default: the published one)",
    )
    group.add_argument(
        "--split-seed",
        type=SEED,
        default=None,
        help="seed of the split (default: --seed for stratified, 20 as published for "
        "nifty/fairgnn)",
    )
    group.add_argument(
        "--download",
        action="store_true",
        help="fair-GNN graphs: fetch missing files from the reference repositories "
        "(SHA-256 checked)",
    )
    from gnnaudit._validation import MAX_SYNTHETIC_NODES
    from gnnaudit.cli.options import FloatRange, IntRange

    group.add_argument(
        "--num-nodes",
        type=IntRange(20, MAX_SYNTHETIC_NODES, "MAX_SYNTHETIC_NODES"),
        default=1000,
        help=f"synthetic: number of nodes, 20 to {MAX_SYNTHETIC_NODES:,} (default 1000)",
    )
    group.add_argument(
        "--bias", type=FloatRange(), default=1.5, help="synthetic: planted gender bias"
    )
    group.add_argument(
        "--homophily",
        type=FloatRange(0.0, 1.0),
        default=0.8,
        help="synthetic: same-gender edge probability in [0, 1]",
    )
    if include_seed:
        group.add_argument(
            "--seed", type=SEED, default=0, help="random seed in [0, 2**32 - 1] (default 0)"
        )


def load_graph_dataset(
    name: str,
    root: str | os.PathLike[str] | None = None,
    seed: int = 0,
    *,
    split: str = "stratified",
    num_nodes: int = 1000,
    bias: float = 1.5,
    homophily: float = 0.8,
    label_number: int | None = None,
    split_seed: int | None = None,
    download: bool = False,
) -> Any:
    """Load the graph ``name`` (one of :data:`GRAPH_DATASETS`) as a PyG ``Data``.

    ``root`` (or ``$GNNAUDIT_DATA``) is required for every dataset but ``synthetic``.
    ``label_number``, ``split_seed`` and ``download`` apply to the fair-GNN graphs
    (:func:`gnnaudit.datasets.load_nifty`); ``split_seed`` defaults to ``seed`` for the
    stratified split and to the published 20 for ``nifty`` / ``fairgnn``.
    """
    from gnnaudit._validation import check_choice
    from gnnaudit.errors import InvalidInputError

    name = check_choice("dataset", name, tuple(GRAPH_DATASETS))
    kind, loader_name = GRAPH_DATASETS[name]
    if kind == "synthetic":
        from gnnaudit.datasets import synthetic_credit_graph

        return synthetic_credit_graph(
            num_nodes=num_nodes, bias=bias, homophily=homophily, seed=seed
        )
    root = root if root is not None else os.environ.get(_ROOT_ENV)
    if not root:
        raise InvalidInputError(
            f"dataset {name!r} needs --root (or ${_ROOT_ENV}): a folder holding "
            f"{_ROOT_LAYOUT[kind]}"
        )
    if kind == "nifty":
        from gnnaudit.datasets import load_nifty

        if split == "public":
            raise InvalidInputError(
                f"dataset {name!r} ships no split; use --split stratified, nifty or fairgnn"
            )
        if split_seed is None and split == "stratified":
            split_seed = seed
        return load_nifty(
            loader_name,
            root,
            seed=split_seed,
            split=split,
            label_number=label_number,
            download=download,
        )
    if split in ("nifty", "fairgnn"):
        raise InvalidInputError(
            f"--split {split} is the published split of the fair-GNN graphs; dataset {name!r} "
            "takes --split stratified or public"
        )
    if kind == "planetoid":
        from gnnaudit.datasets import load_planetoid

        return load_planetoid(loader_name, root, seed=seed, split=split)
    from gnnaudit.datasets import load_pyg

    return load_pyg(loader_name, root, seed=seed, split=split)


def dataset_from_args(args: argparse.Namespace) -> Any:
    """Load the dataset described by the options of :func:`add_dataset_arguments`."""
    return load_graph_dataset(
        args.dataset,
        args.root,
        getattr(args, "seed", 0),
        split=args.split,
        num_nodes=args.num_nodes,
        bias=args.bias,
        homophily=args.homophily,
        label_number=getattr(args, "label_number", None),
        split_seed=getattr(args, "split_seed", None),
        download=getattr(args, "download", False),
    )
