"""``gnnaudit evidence``: counterfactual evidences of a GNN node classifier.

Loads a graph dataset, gets a node classifier (``--checkpoint`` or, without one, trains one
with :func:`gnnaudit.training.train_node_classifier`), fits
:class:`gnnaudit.audit.CounterfactualEvidence` on the test nodes and writes the local
evidences of ``--node`` (default: of every test node) or the global top-k pairs
(``--global``) to the CSV file ``--out`` (checked before any work starts, written atomically,
``--force`` replaces an existing file); prints the first rows and the average similarity AS.
Training never shows Lightning's progress bar: ``--progress`` shows gnnaudit's own bars, on
stderr.
"""

from __future__ import annotations

import argparse
from typing import Any

from gnnaudit.cli._datasets import add_dataset_arguments
from gnnaudit.cli.flag_names import set_parameter_flags
from gnnaudit.cli.options import (
    BACKBONES,
    BACKENDS,
    FloatRange,
    IntRange,
    add_force_argument,
    add_out_argument,
    add_progress_argument,
    count_type,
    epochs_type,
    k_type,
)

MODELS = BACKBONES
#: parameter of the loaders and of CounterfactualEvidence -> the flag that sets it
PARAMETER_FLAGS = {
    "checkpoint": "--checkpoint",
    "num_hops": "--num-hops",
    "alpha": "--alpha",
    "k": "--k",
    "backend": "--backend",
    "random_state": "--seed",
    "max_epochs": "--epochs",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``evidence`` command and its options to ``subparsers``."""
    p = subparsers.add_parser(
        "evidence",
        help="find counterfactual evidences (similar test nodes labelled differently)",
        description=(
            "Find counterfactual evidences of a GNN node classifier: test nodes whose L-hop "
            "neighbourhoods look alike (kernel similarity KS) but whose predictions differ. "
            "Local evidences of --node (default: every test node) or the global top-k pairs."
        ),
    )
    from gnnaudit._validation import MAX_NUM_HOPS

    add_dataset_arguments(p)
    model = p.add_argument_group("model")
    model.add_argument(
        "--checkpoint",
        default=None,
        help="NodeClassifier checkpoint (gnnaudit train); without it a model is trained first",
    )
    model.add_argument("--model", default="gcn", choices=MODELS, help="backbone to train (gcn)")
    model.add_argument(
        "--epochs", type=epochs_type(), default=200, help="training epochs (default 200)"
    )
    search = p.add_argument_group("search")
    which = search.add_mutually_exclusive_group()
    which.add_argument(
        "--node",
        type=IntRange(0, 2**63 - 1, "node ids"),
        nargs="+",
        default=None,
        help="query test node id(s) (local)",
    )
    which.add_argument(
        "--global",
        dest="global_",
        action="store_true",
        help="the global top-k pairs instead of local evidences",
    )
    search.add_argument("--k", type=k_type(), default=10, help="evidences per query / pairs (10)")
    search.add_argument("--backend", default="exact", choices=BACKENDS, help="search backend")
    search.add_argument(
        "--num-hops",
        type=IntRange(0, MAX_NUM_HOPS, "MAX_NUM_HOPS"),
        default=3,
        help=f"KS hops L, 0 to {MAX_NUM_HOPS} (default 3)",
    )
    search.add_argument(
        "--alpha",
        type=FloatRange(0.0, 1.0),
        default=0.5,
        help="KS trade-off alpha in [0, 1] (0.5)",
    )
    add_out_argument(p, kind="file", what="CSV file for the evidences", required=True)
    add_force_argument(p, kind="file")
    add_progress_argument(p)
    p.add_argument("--show", type=count_type(0), default=20, help="rows to print (default 20)")
    set_parameter_flags(p, PARAMETER_FLAGS, owners=("CounterfactualEvidence",))
    p.set_defaults(func=run)


def _check_flags(args: argparse.Namespace) -> None:
    """The search flags, checked (and named) before any work; argparse already bounds them
    when parsed, this also covers a namespace built in Python."""
    from gnnaudit._validation import MAX_K, MAX_NUM_HOPS, check_float, check_int

    check_int("--k", args.k, minimum=1, maximum=MAX_K)
    check_int("--num-hops", args.num_hops, minimum=0, maximum=MAX_NUM_HOPS)
    check_float("--alpha", args.alpha, minimum=0.0, maximum=1.0)
    check_int("--epochs", args.epochs, minimum=1)


def _check_nodes(args: argparse.Namespace, data: Any) -> None:
    """``--node`` ids must be nodes of the graph and test nodes, checked before training."""
    from gnnaudit.errors import InvalidInputError

    if args.node is None:
        return
    n = int(data.num_nodes)
    outside = [v for v in args.node if not 0 <= v < n]
    if outside:
        raise InvalidInputError(
            f"--node {outside[0]} is not a node of the graph (ids 0 to {n - 1})"
        )
    mask = getattr(data, "mask", None)
    mask = getattr(data, "test_mask", None) if mask is None else mask
    if mask is not None:
        excluded = [v for v in args.node if not bool(mask[v])]
        if excluded:
            raise InvalidInputError(
                f"--node {excluded[0]} is not one of the test nodes (evidences are searched "
                "among the test nodes)"
            )


def run(args: argparse.Namespace) -> int:
    """Run ``gnnaudit evidence`` on the parsed ``args``; return the exit code."""
    import sys
    import time

    from gnnaudit.safe_io import check_output_file

    start = time.perf_counter()
    check_output_file("--out", args.out, force=args.force, owned_only=True)
    _check_flags(args)  # every search flag, before loading, training or searching
    # the checks above run before torch and the audit are imported
    from gnnaudit.audit import CounterfactualEvidence
    from gnnaudit.cli._datasets import dataset_from_args
    from gnnaudit.cli.options import progress_enabled
    from gnnaudit.safe_io import atomic_file

    progress = progress_enabled(args)
    data = dataset_from_args(args)
    _check_nodes(args, data)

    if args.checkpoint is not None:
        from gnnaudit.training import load_node_classifier

        model = load_node_classifier(args.checkpoint)
        source = f"checkpoint {args.checkpoint}"
    else:
        from gnnaudit.training import train_node_classifier

        print(
            f"no --checkpoint: training a {args.model} for {args.epochs} epochs ...",
            file=sys.stderr,
        )
        model, metrics = train_node_classifier(
            data,
            backbone=args.model,
            max_epochs=args.epochs,
            seed=getattr(args, "seed", 0),
        )
        source = f"trained {args.model} (test accuracy {metrics.get('test_acc', float('nan')):.4f})"

    ce = CounterfactualEvidence(
        num_hops=args.num_hops,
        alpha=args.alpha,
        backend=args.backend,
        random_state=getattr(args, "seed", 0),
        progress=progress,
    ).fit(data, model=model)
    if args.global_:
        result = ce.global_evidence(k=args.k)
        what = f"global top-{args.k} pairs"
    else:
        nodes = ce.node_ids_ if args.node is None else args.node
        result = ce.local_evidence(nodes, k=args.k)
        what = (
            f"local top-{args.k} evidences of {len(nodes)} quer{'y' if len(nodes) == 1 else 'ies'}"
        )

    with atomic_file(args.out, name="--out", force=args.force, producer="evidence") as tmp:
        result.to_csv(tmp, index=False)
    print(
        f"{args.dataset}: {int(data.num_nodes)} nodes, {ce.node_ids_.size} test nodes, "
        f"{len(ce.classes_)} predicted classes | model: {source} | backend {ce.backend_}"
    )
    print(f"{what}: {len(result)} rows")
    if len(result):
        print(
            result.head(max(args.show, 0)).to_string(index=False, float_format=lambda v: f"{v:.4f}")
        )
        print(f"average similarity AS = {ce.average_similarity(result):.4f}")
    print(f"wrote {args.out} ({time.perf_counter() - start:.1f} s)")
    return 0
