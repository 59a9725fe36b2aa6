"""``gnnaudit audit``: audit a GNN node classifier on a graph and write the report.

Two ways in:

* **your model, your graph**: ``--graph PATH`` (a ``.pt`` / ``.npz`` file or a folder with
  ``nodes.csv`` and ``edges.csv``, see :func:`gnnaudit.datasets.load_graph`) and ``--model
  MODULE:NAME`` (your class or factory) with ``--weights PATH`` (a state dict) or
  ``--checkpoint PATH`` (a Lightning checkpoint of your LightningModule);
* **built-in data**: ``--dataset NAME`` with a gnnaudit backbone trained on the spot
  (``--model gcn``) or loaded from ``--checkpoint`` (a gnnaudit NodeClassifier checkpoint).

``--checkpoint`` is read as data only (``weights_only=True``); which kind it must be follows
from ``--model`` (``--lightning-checkpoint`` is a deprecated spelling, removed in 0.3.0).

Writes ``<out>/report.json``, ``report.md`` and ``report.html`` (and ``model.ckpt`` when it
trains, ``mitigated_model.pt`` with ``--mitigate``) into a private temporary folder that replaces ``--out`` only when everything succeeded;
prints the verdict and the findings.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from gnnaudit.cli._datasets import add_dataset_arguments
from gnnaudit.cli._scheduler import cluster_options
from gnnaudit.cli.audit_args import (
    add_audit_arguments,
    add_audit_graph_arguments,
    add_model_arguments,
)
from gnnaudit.cli.flag_names import set_parameter_flags
from gnnaudit.cli.options import BACKBONES, add_force_argument, add_out_argument

#: gnnaudit's own backbones (``--model``); anything with a ``:`` is the user's MODULE:NAME
BACKBONE_CHOICES = BACKBONES
#: every file ``audit`` may write into ``--out`` (checked against the folder before any work)
AUDIT_OUTPUTS = (
    "report.json",
    "report.md",
    "report.html",
    "model.ckpt",
    "mitigated_model.pt",
)

#: parameter of the audit, its loaders and units -> the flag that sets it (how errors name it)
PARAMETER_FLAGS = {
    "checkpoint": "--checkpoint",
    "weights": "--weights",
    "k": "--k",
    "m": "--finetune-m",
    "backend": "--backend",
    "min_support": "--min-support",
    "random_state": "--seed",
    "sensitive_bins": "--sensitive-bins",
    "model_hops": "--model-hops",
    "max_epochs": "--epochs",
    "lambda_cf": "--mitigate-lambda",
}

TRUST_NOTE = (
    "Importing MODULE (your model code) is the one trusted step: it runs that code, as your "
    "training script does. Graph, weight and checkpoint files are read as data only (never "
    "unpickled into arbitrary objects); a file that would need that is refused."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``audit`` command and its options to ``subparsers``."""
    p = subparsers.add_parser(
        "audit",
        help="audit a GNN node classifier (yours or a built-in one) and write a report",
        description=(
            "Audit a node classifier on a graph: model quality, counterfactual sensitivity to "
            "the sensitive attribute (node and graph scope, rank among features), group "
            "fairness with intervals, the evidence contrast, counterfactual evidences (CE "
            "paper), discrimination scores, error verification, "
            "and optionally fine-tuning on evidences. " + TRUST_NOTE
        ),
    )
    add_dataset_arguments(p)
    add_audit_graph_arguments(p)
    add_model_arguments(p)
    add_audit_arguments(p)
    add_out_argument(
        p,
        kind="folder",
        what="output folder for report.json, .md, .html",
        required=True,
        planned=AUDIT_OUTPUTS,
    )
    add_force_argument(p, kind="folder")
    set_parameter_flags(p, PARAMETER_FLAGS)
    p.set_defaults(func=run)


def _load_data(args: argparse.Namespace) -> tuple[Any, str]:
    from gnnaudit.cli._datasets import dataset_from_args
    from gnnaudit.cli._graph_input import graph_name, uses_own_graph

    if uses_own_graph(args):
        from gnnaudit.cli._tables import load_args_graph

        return load_args_graph(args), graph_name(args)
    for flag in ("label", "mask_column"):
        if getattr(args, flag) is not None:
            raise _error(f"--{flag.replace('_', '-')} needs --graph (or --nodes / --edges)")
    return dataset_from_args(args), args.dataset


def _error(message: str) -> Exception:
    from gnnaudit.errors import InvalidInputError

    return InvalidInputError(message)


def _num_classes(args: argparse.Namespace, data: Any) -> int:
    if args.num_classes is not None:
        from gnnaudit._validation import check_int

        return check_int("--num-classes", args.num_classes, minimum=2)
    y = getattr(data, "y", None)
    if y is None:
        raise _error(
            "the graph has no labels: name the label column with --label COLUMN (the default is "
            "a column called y), or give --num-classes for your --model factory"
        )
    return max(int(y.max()) + 1, 2)


def _load_gnnaudit_checkpoint(path: str) -> Any:
    """The NodeClassifier of ``--checkpoint`` (without ``--model MODULE:NAME``); a checkpoint of
    another module is an error that says how to load it."""
    from gnnaudit.errors import InvalidInputError
    from gnnaudit.training import load_node_classifier

    try:
        return load_node_classifier(path)
    except InvalidInputError as exc:
        if "NodeClassifier" not in str(exc):  # unreadable, refused or too large: as it is
            raise
        raise _error(
            f"--checkpoint {path} is not a gnnaudit NodeClassifier checkpoint ({exc}); a "
            "Lightning checkpoint of your own LightningModule needs --model MODULE:NAME"
        ) from exc


def _load_model(args: argparse.Namespace, data: Any, out_dir: str) -> tuple[Any, dict[str, Any]]:
    """The model to audit and its description for the report."""
    from gnnaudit.training import train_node_classifier

    in_channels = int(data.x.size(1))
    if ":" in args.model:
        from gnnaudit.training.user_model import load_user_model

        module = load_user_model(
            args.model,
            in_channels,
            _num_classes(args, data),
            weights=args.weights,
            checkpoint=args.checkpoint,
        )
        source = args.weights or args.checkpoint or "factory (no weights given)"
        return module, {"source": f"{args.model} from {source}"}
    if args.model not in BACKBONE_CHOICES:
        raise _error(
            f"--model must be one of {', '.join(BACKBONE_CHOICES)} or MODULE:NAME, got "
            f"{args.model!r}"
        )
    if args.weights:
        raise _error("--weights needs --model MODULE:NAME (your model class or factory)")
    if args.checkpoint:
        module = _load_gnnaudit_checkpoint(args.checkpoint)
        if module.hparams["in_channels"] != in_channels:
            raise _error(
                f"--checkpoint {args.checkpoint} expects {module.hparams['in_channels']} input "
                f"features but the graph has {in_channels}"
            )
        return module, {"source": f"checkpoint {args.checkpoint}"}
    if getattr(data, "y", None) is None or getattr(data, "train_mask", None) is None:
        raise _error(
            "training a gnnaudit backbone needs labels and a train mask; give --model "
            "MODULE:NAME with --weights to audit your own trained model"
        )
    import os

    module, metrics = train_node_classifier(
        data,
        backbone=args.model,
        max_epochs=args.epochs,
        seed=args.seed,
        checkpoint_path=os.path.join(out_dir, "model.ckpt"),
    )
    return module, {
        "source": "trained",
        "backbone": args.model,
        "epochs": args.epochs,
        "seed": args.seed,
        "fit_seconds": round(metrics.get("fit_seconds", 0.0), 3),
        "trained_on": metrics.get("device", "cpu"),
    }


def _cli_device(choice: str) -> str:
    """``--device``: ``auto`` is a GPU when torch sees one, else the CPU."""
    import torch

    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        raise _error("--device 'cuda' but torch sees no CUDA device; use cpu or auto")
    return choice


def _mitigate_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--mitigate-*`` settings; given without ``--mitigate`` they would do nothing, so
    they are refused, naming the flags."""
    pairs = {
        "lambda_cf": args.mitigate_lambda,
        "epochs": args.mitigate_epochs,
        "grid": None if args.mitigate_grid is None else tuple(args.mitigate_grid),
        "max_bacc_drop": args.mitigate_max_bacc_drop,
        "keep_rate": args.mitigate_keep_rate,
    }
    given = {key: value for key, value in pairs.items() if value is not None}
    if given and not args.mitigate:
        flags = {
            "lambda_cf": "--mitigate-lambda",
            "epochs": "--mitigate-epochs",
            "grid": "--mitigate-grid",
            "max_bacc_drop": "--mitigate-max-bacc-drop",
            "keep_rate": "--mitigate-argmax",
        }
        names = ", ".join(flags[k] for k in given)
        raise _error(f"{names} set(s) the mitigation, which runs only with --mitigate; add it")
    return given


def _builtin_scaling(
    args: argparse.Namespace, data: Any, applied: dict[str, str]
) -> tuple[Any, Any]:
    """``(data, scaler)``: the built-in scaler fitted and applied when a gnnaudit backbone is
    trained here on the user's graph (:mod:`gnnaudit.cli._scaling`; ``applied`` records it),
    else ``(data, None)``."""
    from gnnaudit.cli._scaling import fit_builtin_scaler, wants_builtin_scaler

    trains = args.model in BACKBONE_CHOICES and not args.checkpoint and not args.weights
    if not (trains and wants_builtin_scaler(args)):
        return data, None
    data, scaler, text = fit_builtin_scaler(data)
    if text is not None:
        applied["standardize"] = text
    return data, scaler


def print_mitigation(report: Any, out: str) -> None:
    """With ``--mitigate``: the before / after figures of the mitigation section (gaps, flip
    rates, AUROC, accuracy) and where the mitigated weights went."""
    if not report.has_section("mitigation"):
        return
    section = report.section("mitigation")
    table = section.tables.get("before_after")
    if table is None or not len(table):
        return
    print(f"\n{section.title}:")
    for row in table.itertuples():
        scope = f" ({row.scope} scope)" if row.scope else ""
        flag = "  (worse)" if bool(getattr(row, "worse", False)) else ""
        print(
            f"  {row.metric}{scope}: {row.before:.3f} -> {row.after:.3f} "
            f"({row.after - row.before:+.3f}){flag}"
        )
    name = section.data.get("checkpoint", "mitigated_model.pt")
    print(
        f"Mitigated model: {out.rstrip('/')}/{name} (a state_dict: load it with "
        "torch.load(path, weights_only=True) into your model class)"
    )


def _command(args: argparse.Namespace) -> dict[str, str]:
    """``{"command": the command line as typed}`` when :func:`gnnaudit.cli.main.main` recorded
    it, for the report's run information (the summary card's next step repeats it with
    ``--mitigate``); else empty."""
    line = getattr(args, "command_line", None)
    return {"command": shlex.join(line)} if line else {}


def run(args: argparse.Namespace) -> int:
    """Run ``gnnaudit audit`` on the parsed ``args``; return the exit code."""
    import time

    from gnnaudit._validation import check_int
    from gnnaudit.safe_io import atomic_output_dir, check_output_dir

    start = time.perf_counter()
    check_output_dir("--out", args.out, force=args.force, planned=AUDIT_OUTPUTS)
    check_int("--k", args.k, minimum=1)
    check_int("--top", args.top, minimum=0)
    _mitigate_kwargs(args)  # --mitigate-* without --mitigate: refused before any work
    from gnnaudit.cli._graph_input import check_graph_input

    check_graph_input(args)
    # the checks above run before torch, PyG and the audit are imported (a bad --out fails now);
    # --threads is a global option (gnnaudit.cli.main applies it); without it run_audit sizes
    # the thread count to the graph (gnnaudit._threads)
    from tqdm.auto import tqdm

    from gnnaudit.audit.pipeline.run import run_audit
    from gnnaudit.cli._tables import check_expected_accuracy, preprocess
    from gnnaudit.cli.options import progress_enabled

    progress = progress_enabled(args)
    with (
        atomic_output_dir(
            args.out, force=args.force, name="--out", producer="audit", planned=AUDIT_OUTPUTS
        ) as out_dir,
        tqdm(total=3, desc="gnnaudit audit", disable=not progress) as steps,  # closed on errors
        cluster_options(args) as cluster,  # --scheduler: a connected client, else {}
    ):
        steps.set_postfix_str("load data")
        data, data_name = _load_data(args)
        data, preprocessing = preprocess(args, data)
        data, scaler = _builtin_scaling(args, data, preprocessing)
        steps.update(1)
        steps.set_postfix_str("load model")
        module, info = _load_model(args, data, str(out_dir))
        if info.get("source") == "trained":  # the input names and the scaler travel with it
            from gnnaudit.cli._scaling import stamp_checkpoint

            stamp_checkpoint(str(out_dir / "model.ckpt"), data, scaler)
        device = _cli_device(args.device)
        module = module.to(device)  # the CLI built or loaded it: ours to move
        info["device"] = device
        info.update(preprocessing)
        check_expected_accuracy(args, module, data, device)
        steps.update(1)
        steps.set_postfix_str("audit")
        report = run_audit(
            module,
            data,
            args.sensitive,
            config=_config(args),
            k=args.k,
            backend=args.backend,
            sensitive_bins=args.sensitive_bins,
            dataset_name=data_name,
            model_info=info,
            random_state=args.seed,
            progress=progress,
            device=device,
            **cluster,
        )
        report.run_info.update(_command(args))  # the summary card's next step repeats it
        report.write_files(out_dir)
        steps.update(1)
    _print_results(args, report, info, time.perf_counter() - start)
    return 0


def _config(args: argparse.Namespace) -> Any:
    """The :class:`~gnnaudit.audit.pipeline.config.AuditConfig` of the audit flags."""
    from gnnaudit.audit.pipeline.config import AuditConfig

    return AuditConfig(
        min_support=args.min_support,
        # default (None): on for LightningModules up to FINETUNE_MAX_NODES nodes, else a note
        finetune=args.finetune,
        finetune_kwargs={"m": args.finetune_m, "epochs": args.finetune_epochs},
        embedding=args.embedding,
        mitigate=args.mitigate,
        mitigate_kwargs=_mitigate_kwargs(args),
        model_hops=args.model_hops,
    )


def _print_results(args: argparse.Namespace, report: Any, info: dict, seconds: float) -> None:
    """The model's accuracy, the verdict and findings, the top discrimination scores, the
    mitigation's before / after figures and where the report went."""
    import pandas as pd

    with pd.option_context("display.width", 120, "display.max_columns", 20):
        accuracies = [
            f"{split} {report.model[f'{split}_accuracy']:.3f}"
            for split in ("test", "val", "train")
            if isinstance(report.model.get(f"{split}_accuracy"), float)
        ]
        print(
            f"Model: {report.model.get('backbone', report.model.get('class'))} "
            f"({info['source']}); accuracy {', '.join(accuracies) or 'n/a (no labels)'}\n"
        )
        print("\n".join(report.summary_lines()))
        if report.has_section("discrimination") and report.section("discrimination").tables:
            print(
                f"\nTop {args.top} discrimination scores (Eq. 12; lift = score - baseline; "
                f"values held by >= {args.min_support} audited nodes):"
            )
            table = report.table("discrimination", "scores").head(args.top)
            print(table.to_string(index=False, float_format="%.3f"))
    print_mitigation(report, args.out)
    print(f"\nReport: {args.out}/report.html (also report.md, report.json); {seconds:.1f} s")
