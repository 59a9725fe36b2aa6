"""``gnnaudit audit``: train (or load) a GNN, audit it with counterfactual evidences, write a report.

Writes ``<out>/report.json``, ``<out>/report.md``, ``<out>/report.html`` (and ``model.ckpt`` when
it trains), prints the top discrimination scores, the group-fairness gaps and the error
verification, and where the report is.
"""

from __future__ import annotations

import argparse

from gnnaudit.cli._datasets import add_dataset_arguments

MODELS: tuple[str, ...] = ("gcn", "gat", "gin", "sage", "mpnn")
BACKENDS: tuple[str, ...] = ("exact", "index", "faiss")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "audit",
        help="audit a GNN node classifier with counterfactual evidences and write a report",
        description=(
            "Train a GNN (or load --checkpoint), search counterfactual evidences among the test "
            "nodes, compute discrimination scores (CE paper Eq. 12), group fairness, error "
            "verification and fine-tuning on evidences, and write report.json/.md/.html."
        ),
    )
    add_dataset_arguments(p)
    model = p.add_argument_group("model")
    model.add_argument("--model", default="gcn", choices=MODELS, help="GNN backbone (default gcn)")
    model.add_argument("--epochs", type=int, default=200, help="training epochs (default 200)")
    model.add_argument(
        "--checkpoint",
        default=None,
        help="audit this NodeClassifier checkpoint instead of training",
    )
    audit = p.add_argument_group("audit")
    audit.add_argument(
        "--sensitive",
        default=None,
        help="sensitive feature name (default: the dataset's sensitive attribute, if any)",
    )
    audit.add_argument("--k", type=int, default=10, help="local evidences per test node (10)")
    audit.add_argument("--backend", default="exact", choices=BACKENDS, help="evidence search")
    audit.add_argument(
        "--min-support",
        type=int,
        default=5,
        help="score only feature values held by at least this many test nodes (default 5: a "
        "value held by one or two nodes scores 1.0 by chance; 1 = every value, as in the paper)",
    )
    audit.add_argument("--top", type=int, default=5, help="discrimination scores printed (5)")
    audit.add_argument("--no-finetune", action="store_true", help="skip fine-tuning on evidences")
    audit.add_argument("--finetune-m", type=int, default=50, help="fine-tuning budget m (50)")
    audit.add_argument("--finetune-epochs", type=int, default=30, help="fine-tuning epochs (30)")
    audit.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    audit.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: torch's choice; 1 is fastest for small graphs "
        "on a busy machine)",
    )
    p.add_argument("--out", required=True, help="output folder for the report")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import os
    import time

    import pandas as pd

    from gnnaudit._validation import check_int
    from gnnaudit.cli._datasets import dataset_from_args
    from gnnaudit.errors import InvalidInputError
    from gnnaudit.training import load_node_classifier, train_node_classifier
    from gnnaudit.training.audit_pipeline import FINETUNE_MAX_NODES, run_audit

    start = time.perf_counter()
    check_int("--k", args.k, minimum=1)
    if args.threads is not None:
        import torch

        torch.set_num_threads(check_int("--threads", args.threads, minimum=1))
    check_int("--top", args.top, minimum=0)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise InvalidInputError(f"--out must be a folder, got the file {args.out}")
    os.makedirs(args.out, exist_ok=True)
    from tqdm.auto import tqdm

    steps = tqdm(total=3, desc="gnnaudit audit", disable=args.no_progress)
    steps.set_postfix_str("load data")
    data = dataset_from_args(args)
    steps.update(1)
    if args.checkpoint:
        steps.set_postfix_str("load model")
        module = load_node_classifier(args.checkpoint)
        if module.hparams["in_channels"] != data.x.size(1):
            raise InvalidInputError(
                f"--checkpoint {args.checkpoint} expects {module.hparams['in_channels']} input "
                f"features but dataset {args.dataset!r} has {data.x.size(1)}"
            )
        info = {"source": f"checkpoint {args.checkpoint}"}
    else:
        steps.set_postfix_str(f"train {args.model}")
        module, metrics = train_node_classifier(
            data,
            backbone=args.model,
            max_epochs=args.epochs,
            seed=args.seed,
            checkpoint_path=os.path.join(args.out, "model.ckpt"),
        )
        info = {
            "source": "trained",
            "epochs": args.epochs,
            "seed": args.seed,
            "fit_seconds": round(metrics.get("fit_seconds", 0.0), 3),
        }
    steps.update(1)
    steps.set_postfix_str("audit")
    finetune = not args.no_finetune and data.num_nodes <= FINETUNE_MAX_NODES
    report = run_audit(
        module,
        data,
        k=args.k,
        sensitive=args.sensitive,
        backend=args.backend,
        min_support=args.min_support,
        finetune=finetune,
        finetune_kwargs={"m": args.finetune_m, "epochs": args.finetune_epochs},
        dataset_name=args.dataset,
        model_info=info,
        random_state=args.seed,
        progress=not args.no_progress,
    )
    if not args.no_finetune and not finetune:
        report.run_info.setdefault("notes", []).append(
            f"fine-tuning on evidences skipped: the graph has {data.num_nodes} nodes, more than "
            f"{FINETUNE_MAX_NODES}"
        )
    paths = report.save(args.out, force=True)
    steps.update(1)
    steps.close()

    with pd.option_context("display.width", 120, "display.max_columns", 20):
        accuracies = [
            f"{split} {report.model[f'{split}_accuracy']:.3f}"
            for split in ("test", "val", "train")
            if isinstance(report.model.get(f"{split}_accuracy"), float)
        ]
        print(
            f"Model: {report.model.get('backbone', report.model.get('class'))} "
            f"({info['source']}); accuracy {', '.join(accuracies) or 'n/a'}\n"
        )
        print("\n".join(report.summary_lines()))
        if report.has_section("discrimination") and report.section("discrimination").tables:
            print(
                f"\nTop {args.top} discrimination scores (Eq. 12; lift = score - baseline; "
                f"values held by >= {args.min_support} audited nodes):"
            )
            table = report.table("discrimination", "scores").head(args.top)
            print(table.to_string(index=False, float_format="%.3f"))
    print(
        f"\nReport: {paths['html']} (also report.md, report.json); "
        f"{time.perf_counter() - start:.1f} s"
    )
    return 0
