"""The fair-GNN field side by side on NIFTY's graphs: vanilla GNNs, FairFinetune, NIFTY, FairGNN.

Methods (``--methods``): ``vanilla`` (gnnaudit's NodeClassifier, backbones ``--backbones``
gcn / gin / sage), ``fairfinetune`` (:class:`gnnaudit.training.FairFinetune` on each vanilla
model), ``nifty`` and ``fairgnn`` (their public reference code, run unmodified by
``fair_gnn_reference.py``: see its docstring for the exact scripts, settings and the **shims**
``dgl``, ``ipdb``, ``aif360.sklearn.metrics``, ``deeprobust`` and ``seaborn``).

Getting the reference code (never vendored into this repository)::

    git clone https://github.com/chirag126/nifty /work/scratch/nifty
    python benchmarks/bench_fair_gnn.py --reference-repo /work/scratch/nifty

Graphs (``--datasets``): credit and bail by default; german, nba, pokec_z, pokec_n when their
files are in ``--data`` (``<data>/<name>/...``, the loader's layouts). The csv files are copied
to ``--scratch`` (default ``benchmarks/_data``, git-ignored) so that the loader's cache and the
reference scripts' edge files never land in the shared folder. ``nba`` / ``pokec_*`` are run for
the gnnaudit methods only (the reference scripts do not load them).

Protocol, the same for every method:

* split: NIFTY's (``load_nifty(..., split="nifty")``, seed 20, ``label_number`` 6000 for credit,
  100 for bail / german), the split the reference scripts draw themselves (checked: the runs
  record a mismatch of the test nodes as an error);
* inputs: NIFTY's feature scaling for credit and bail (every column but the sensitive one
  min-max scaled to [-1, 1], ``feature_norm`` in NIFTY's ``utils.py``), raw features otherwise;
* hidden size 16, dropout 0.5, Adam lr 1e-3, weight decay 1e-5, 1000 epochs (NIFTY's published
  settings for its vanilla GNNs and for NIFTY); gnnaudit's backbones have two message-passing
  layers and keep the weights of the best validation epoch;
* FairFinetune: ``--ff-epochs`` (default 150) full-batch steps from the vanilla weights with
  ``lambda_cf`` (default 2), both scopes, lr 0.005 (its defaults), on the sensitive column, for
  each candidate of ``--ff-grid`` (default: ``lambda_cov`` 0 and 20 at ``lambda_cf`` 2, and
  ``lambda_cov`` 20 at ``lambda_cf`` 10: the covariance term against the proxies' parity gap,
  a heavier consistency term against what it does to CF); the
  candidate is picked on the validation nodes (:func:`finetune_selected`: within
  ``--auroc-budget`` = 1 AUROC point of the vanilla model, the lowest ΔSP + ΔEO + CF), so the
  test nodes never steer it;
* metrics on the test nodes with :func:`gnnaudit.audit.fairness.literature_metrics.
  literature_metrics` for every method (instability noise seeded with the run's seed);
* seeds ``--seeds`` (default 5: 0..4) seed the weights / dropout of every method.

Outputs: ``--json`` (one record per run: dataset, method, backbone, seed, auroc, f1, dsp, deo,
cf, instability, fit_s; fairfinetune adds ``pretrain_s``, the reference runs add what their
script printed), ``--md`` (mean ± sd per dataset / method / backbone, published figures beside,
machine / date / command) and ``--png`` (Pareto plots). ``--resume`` keeps the records already
in ``--json`` and runs only the missing ones, so a long protocol can run in pieces; every work
item also leaves its records in ``<scratch>/_items/``, which ``--collect`` gathers (with
``--resume``: added to the existing ``--json``) when a driver was stopped early.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from fair_gnn_report import write_markdown, write_pareto  # noqa: E402

from gnnaudit.audit.fairness.literature_metrics import literature_metrics  # noqa: E402
from gnnaudit.datasets import load_nifty  # noqa: E402
from gnnaudit.training import FairFinetune, train_node_classifier  # noqa: E402

REFERENCE_DATASETS = ("credit", "bail", "german")
NIFTY_SCALED = ("credit", "bail")
SHARED_DATA = Path("/work/shared/datasets/nifty")
#: FairFinetune candidates (on top of --lambda-cf / --ff-epochs), picked on validation
FF_GRID: list[dict[str, Any]] = [
    {"lambda_cov": 0.0},
    {"lambda_cov": 20.0},
    {"lambda_cf": 10.0, "lambda_cov": 20.0},
]
VANILLA = {"hidden_channels": 16, "dropout": 0.5, "lr": 1e-3, "weight_decay": 1e-5}


def feature_norm(x: torch.Tensor, keep: int) -> torch.Tensor:
    """NIFTY's ``feature_norm``: ``2 (x - min) / (max - min) - 1`` per column, column ``keep``
    (the sensitive one) unchanged; constant columns are left as they are."""
    lo, hi = x.min(dim=0).values, x.max(dim=0).values
    span = torch.where(hi > lo, hi - lo, torch.ones_like(hi))
    out = torch.where(hi > lo, 2 * (x - lo) / span - 1, x)
    out[:, keep] = x[:, keep]
    return out


def stage_data(name: str, data_dir: Path, scratch: Path) -> Path:
    """Copy ``<data_dir>/<name>/*`` (files only) to ``<scratch>/<name>/``; returns scratch."""
    src, dst = data_dir / name, scratch / name
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and not (dst / f.name).exists():
            (dst / f.name).write_bytes(f.read_bytes())
    return scratch


def load(name: str, scratch: Path):
    data = load_nifty(name, scratch, standardize=False, split="nifty")
    if name in NIFTY_SCALED:
        data.x = feature_norm(data.x, int(data.sensitive_index))
    return data


def measure(model, data, seed: int, mask=None) -> dict[str, float]:
    """The literature's metrics on ``mask`` (default: the test nodes)."""
    return literature_metrics(
        model,
        data.x,
        data.edge_index,
        data.y,
        data.sensitive,
        int(data.sensitive_index),
        data.test_mask if mask is None else mask,
        random_state=seed,
    )


def run_ours(data, name: str, backbone: str, seed: int, args) -> list[dict[str, Any]]:
    """Vanilla training, then (if asked) FairFinetune from its weights: two records."""
    records = []
    cache = args.scratch / "_models" / f"{name}_{backbone}_{seed}_{args.epochs}.pt"
    t0 = time.perf_counter()
    result = train_node_classifier(
        data,
        backbone,
        1 if cache.exists() else args.epochs,
        seed,
        num_layers=2,
        trainer_kwargs={"accelerator": "cpu"},
        **VANILLA,
    )
    pretrain_s = time.perf_counter() - t0
    model = result.module.eval()
    if cache.exists():  # a vanilla model of an earlier run of the same protocol
        saved = torch.load(cache, weights_only=True)
        model.load_state_dict(saved["state"])
        pretrain_s = float(saved["fit_s"])
    else:
        cache.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"state": model.state_dict(), "fit_s": pretrain_s}, cache)
    base = {"dataset": name, "backbone": backbone, "seed": seed}
    if "vanilla" in args.methods:
        records.append(
            {**base, "method": "vanilla", **measure(model, data, seed), "fit_s": pretrain_s}
        )
    if "fairfinetune" in args.methods:
        records.append(
            {**base, **finetune_selected(model, data, seed, args), "pretrain_s": pretrain_s}
        )
    return records


def finetune_selected(model, data, seed: int, args) -> dict[str, Any]:
    """FairFinetune with its options picked on the **validation** nodes (never the test nodes).

    Every candidate of ``--ff-grid`` (each a dict of FairFinetune options on top of
    ``lambda_cf`` / ``epochs``) fine-tunes the vanilla model; the candidates whose validation
    AUROC stays within ``--auroc-budget`` (points) of the vanilla model's are *admissible*, and
    the admissible one with the smallest validation ΔSP + ΔEO + CF is kept (none admissible: the
    highest validation AUROC). The record holds the kept candidate's test metrics, its own fit
    time (``fit_s``), the time of the whole selection (``select_s``) and every candidate's
    validation metrics (``candidates``).
    """
    base_val = measure(model, data, seed, data.val_mask)
    candidates, t_all = [], time.perf_counter()
    for options in args.ff_grid:
        opts = {"lambda_cf": args.lambda_cf, "epochs": args.ff_epochs, **args.ff_options, **options}
        t0 = time.perf_counter()
        tuned = FairFinetune.finetune(
            model,
            data,
            int(data.sensitive_index),
            random_state=seed,
            trainer_kwargs={"accelerator": "cpu"},
            **opts,
        )
        fit_s = time.perf_counter() - t0
        val = measure(tuned, data, seed, data.val_mask)
        candidates.append({"options": opts, "val": val, "fit_s": fit_s, "model": tuned})
    budget = args.auroc_budget / 100.0
    admissible = [c for c in candidates if c["val"]["auroc"] >= base_val["auroc"] - budget]
    if admissible:
        kept = min(admissible, key=lambda c: c["val"]["dsp"] + c["val"]["deo"] + c["val"]["cf"])
    else:
        kept = max(candidates, key=lambda c: c["val"]["auroc"])
    return {
        "method": "fairfinetune",
        **measure(kept["model"], data, seed),
        "fit_s": kept["fit_s"],
        "select_s": time.perf_counter() - t_all,
        "options": kept["options"],
        "vanilla_val": base_val,
        "candidates": [{k: c[k] for k in ("options", "val", "fit_s")} for c in candidates],
    }


def run_reference(data, name: str, method: str, seed: int, args) -> dict[str, Any]:
    """One reference run in a subprocess (``fair_gnn_reference.py``), in a work folder holding
    the csv and the edge file written from ``data`` (each unordered pair once)."""
    work = args.scratch / "_reference" / f"{method}_{name}_{seed}"
    ds = work / "dataset" / name
    ds.mkdir(parents=True, exist_ok=True)
    csv = ds / f"{name}.csv"
    if not csv.exists():
        csv.write_bytes((args.scratch / name / f"{name}.csv").read_bytes())
    edges = ds / f"{name}_edges.txt"
    if not edges.exists():
        ei = data.edge_index.numpy()
        keep = ei[0] < ei[1]
        np.savetxt(edges, ei[:, keep].T, fmt="%d")
    out = work / "record.json"
    cmd = [
        sys.executable,
        str(HERE / "fair_gnn_reference.py"),
        "--method", method, "--dataset", name, "--seed", str(seed),
        "--epochs", str(args.epochs), "--repo", str(args.reference_repo),
        "--workdir", str(work), "--out", str(out), "--threads", str(args.threads),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{method} on {name} failed:\n{proc.stderr[-3000:]}")
    rec = json.loads(out.read_text())
    ours = sorted(int(i) for i in data.test_mask.nonzero().flatten())
    if rec.pop("idx_test") != ours:
        raise RuntimeError(f"{method} on {name}: the script's test nodes differ from split='nifty'")
    return {"dataset": name, "method": method, "backbone": "gcn", "seed": seed, **rec}


def key(r: dict[str, Any]) -> tuple:
    return (r["dataset"], r["method"], r["backbone"], r["seed"])


def work_items(args: argparse.Namespace) -> list[tuple[str, str, str, int]]:
    """``(dataset, kind, backbone, seed)`` in priority order: per seed, per dataset, the
    reference methods and gnnaudit's GCN first, then the other backbones; longest first."""
    ours = [m for m in ("vanilla", "fairfinetune") if m in args.methods]
    refs = [m for m in ("nifty", "fairgnn") if m in args.methods]
    items = []
    for seed in args.seed_values:
        for name in args.datasets:
            if name in REFERENCE_DATASETS:
                items += [(name, m, "gcn", seed) for m in refs]
            if ours:
                items += [(name, "ours", bb, seed) for bb in args.backbones]
    cost = {"nifty": 0, "ours": 1, "fairgnn": 2}  # longest first within a priority level
    items.sort(key=lambda it: (it[3], it[2] != "gcn", cost[it[1]]))
    return items


def run_item(item: tuple[str, str, str, int], args: argparse.Namespace) -> list[dict[str, Any]]:
    """One work item in a fresh subprocess of this script (isolated, one thread)."""
    name, kind, bb, seed = item
    variant = [args.ff_options, args.ff_grid, args.auroc_budget]
    tag = f"_ff{zlib.crc32(json.dumps(variant, sort_keys=True).encode()):08x}"
    default = not args.ff_options and args.ff_grid == FF_GRID and args.auroc_budget == 1.0
    tag = "" if default or kind != "ours" else tag
    out = args.scratch / "_items" / f"{name}_{kind}_{bb}_{seed}{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), *args.argv]
    cmd += ["--worker-item", f"{name}:{kind}:{bb}:{seed}", "--worker-out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        logging.error("%s failed:\n%s", item, proc.stderr[-3000:])
        return []
    return json.loads(out.read_text())


def worker(args: argparse.Namespace) -> None:
    name, kind, bb, seed = args.worker_item.split(":")
    data = load(name, stage_data(name, args.data, args.scratch))
    if kind == "ours":
        records = run_ours(data, name, bb, int(seed), args)
    else:
        records = [run_reference(data, name, kind, int(seed), args)]
    Path(args.worker_out).write_text(json.dumps(records))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="credit,bail")
    p.add_argument("--methods", default="vanilla,fairfinetune,nifty,fairgnn")
    p.add_argument("--backbones", default="gcn,gin,sage")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    p.add_argument("--seed-list", default=None, help="explicit seeds, e.g. 0,3")
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--ff-epochs", type=int, default=150)
    p.add_argument("--lambda-cf", type=float, default=2.0)
    p.add_argument("--ff-option", action="append", default=[], help="FairFinetune key=value")
    p.add_argument(
        "--ff-grid",
        default=json.dumps(FF_GRID),
        help="JSON list of FairFinetune option dicts, picked on the validation nodes",
    )
    p.add_argument(
        "--auroc-budget",
        type=float,
        default=1.0,
        help="validation AUROC points a FairFinetune candidate may lose to the vanilla model",
    )
    p.add_argument("--data", type=Path, default=SHARED_DATA)
    p.add_argument("--scratch", type=Path, default=HERE / "_data")
    p.add_argument("--reference-repo", type=Path, default=Path("/work/scratch/nifty"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", type=Path, default=HERE / "results" / "fair_gnn.json")
    p.add_argument("--md", type=Path, default=HERE / "results" / "fair_gnn.md")
    p.add_argument("--png", type=Path, default=HERE / "results" / "fair_gnn_pareto.png")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--jobs", type=int, default=1, help="work items run in parallel")
    p.add_argument("--report-only", action="store_true", help="rewrite md / png from --json")
    p.add_argument(
        "--collect",
        action="store_true",
        help="add the finished work items of <scratch>/_items (runs whose driver was stopped) "
        "to --json, then write md / png",
    )
    p.add_argument("--worker-item", default=None, help=argparse.SUPPRESS)
    p.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.argv = [x for x in (sys.argv[1:] if argv is None else argv)]
    a.datasets = a.datasets.split(",")
    a.methods = a.methods.split(",")
    a.backbones = a.backbones.split(",")
    a.seed_values = (
        [int(s) for s in a.seed_list.split(",")] if a.seed_list else list(range(a.seeds))
    )
    a.ff_options = {}
    for item in a.ff_option:
        k, v = item.split("=", 1)
        a.ff_options[k] = json.loads(v) if v[:1] in '0123456789-[{tf"' else v
    a.ff_grid = json.loads(a.ff_grid)
    a.scratch = a.scratch.resolve()
    return a


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    if args.worker_item:
        worker(args)
        return
    records = json.loads(args.json.read_text()) if args.resume and args.json.exists() else []
    command = " ".join(["python", *sys.argv])
    if args.collect:
        collect_items(records, args)
    if args.report_only or args.collect:
        write_markdown(records, args.md, command)
        write_pareto(records, args.png)
        return
    if (
        any(m in args.methods for m in ("nifty", "fairgnn"))
        and not (args.reference_repo / "nifty_sota_gnn.py").exists()
    ):
        raise SystemExit(f"no NIFTY repository at {args.reference_repo}: see the docstring")
    datasets = []
    for name in args.datasets:
        if (args.data / name).is_dir():
            load(name, stage_data(name, args.data, args.scratch))  # builds the edge cache once
            datasets.append(name)
        else:
            logging.warning("skipping %s: no folder %s", name, args.data / name)
    args.datasets = datasets
    done = {key(r) for r in records}
    todo = [
        it
        for it in work_items(args)
        if not all(
            (it[0], m, it[2], it[3]) in done
            for m in (("vanilla", "fairfinetune") if it[1] == "ours" else (it[1],))
            if it[1] != "ours" or m in args.methods
        )
    ]
    logging.info("%d work items, %d parallel jobs", len(todo), args.jobs)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_item, it, args): it for it in todo}
        for fut in as_completed(futures):
            for r in fut.result():
                records.append(r)
                logging.info("%s", {k: r[k] for k in list(r)[:11]})
            save(records, args)
            write_markdown(records, args.md, command)
    write_pareto(records, args.png)


def collect_items(records: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Add the per-item results of earlier (or parallel) runs to ``records`` and save them."""
    for f in sorted((args.scratch / "_items").glob("*.json")):
        if "_ff" in f.stem:  # FairFinetune variants (--ff-option) are collected apart
            continue
        for r in json.loads(f.read_text()):
            if key(r) not in {key(q) for q in records}:
                records.append(r)
    save(records, args)


def save(records: list[dict[str, Any]], args: argparse.Namespace) -> None:
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
