"""The fair-GNN field side by side on NIFTY's graphs: vanilla GNNs, FairFinetune, NIFTY, FairGNN.

Methods (``--methods``):

* ``vanilla``: gnnaudit's NodeClassifier, backbones ``--backbones`` gcn / gin / sage;
* ``fairfinetune``: FairFinetune's own default remedy on each vanilla model,
  ``FairFinetune.finetune(model, data, <sensitive column>, random_state=seed,
  trainer_kwargs={"accelerator": "cpu"})`` and nothing else: it selects its candidate on the
  validation nodes itself (targets cf / dsp / deo, input blinding tried first, AUROC budget 0.02;
  each candidate decided at the threshold that keeps the vanilla model's share of class-1
  decisions, ``keep_rate``; each run's weights after steps 1, 2, 4, 8 and every 10th step as
  candidates, ``early_snapshots``; ``gnnaudit/training/fair_finetune.py``, ``fair_runs.py``).
  The record keeps the chosen
  candidate (``chosen``, from ``selection_``) and the whole ``selection`` table. ``--ff-options``
  (a JSON dict of ``finetune`` keywords) runs a variant instead, recorded as method
  ``fairfinetune:<json>`` so that it never mixes with the default;
* ``--features raw``: both on the raw features, as PyGDebias's loaders give them to FairGNN
  (no ``feature_norm``), recorded as ``vanilla_raw`` / ``fairfinetune_raw``: a like-for-like
  row against ``fairgnn``'s preprocessing, never mixed with the protocol's rows below;
  ``--hidden N`` (with ``--epochs``) trains the vanilla GNNs with ``N`` hidden units instead of
  NIFTY's 16, recorded with ``_h<N>`` (e.g. ``vanilla_raw_h64``: FairGNN's GCN body size on its
  inputs): is a peer's lead its model's capacity? ``--layers N`` trains ``N`` message-passing
  layers instead of the protocol's 2, recorded with ``_l<N>``; ``--layers 1`` is PyGDebias
  FairGNN's classifier's function class (one ``GCNConv`` then a linear layer, no activation
  between: a linear map of the once-propagated features), so ``vanilla_raw_l1`` asks whether
  FairGNN's bail AUROC is its inputs and its model rather than its method. ``--lr x`` trains
  the vanilla GNNs with Adam's learning rate ``x`` instead of NIFTY's 1e-3 (records ``_lr<x>``):
  FairGNN's linear body of 64 units learns faster than one linear map at the same rate;
* ``nifty``: NIFTY's public reference code, run unmodified by ``fair_gnn_reference.py`` (see its
  docstring for the script, the settings and the **shims** ``dgl``, ``ipdb``,
  ``aif360.sklearn.metrics``, ``deeprobust``, ``seaborn`` and the ``GCNConv`` API shim);
* ``fairgnn``: FairGNN as users install it, PyGDebias 1.1.1 (the ``pygdebias`` package), run
  unmodified with its own defaults by ``fair_gnn_pygdebias.py`` in a benchmark environment of its
  own (``--pygdebias``, default ``benchmarks/_env/pygdebias``, git-ignored; fetched with ``pip
  download`` when missing, its pinned requirements not installed; shims ``dgl`` and ``gdown``;
  see that file's docstring);
* ``fairgnn_port``: the FairGNN **port** in NIFTY's repository (``baseline_fairGNN.py``, run by
  ``fair_gnn_reference.py``), an extra row kept for comparison with earlier results.

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
  100 for bail / german), the split the reference scripts and PyGDebias's loaders draw
  themselves (checked: a run whose test nodes differ is an error; PyGDebias's train and
  validation nodes are checked too);
* edges: ``load_nifty``'s, written to each reference run's ``dataset/<name>/<name>_edges.txt``;
* inputs: NIFTY's feature scaling for credit and bail (every column but the sensitive one
  min-max scaled to [-1, 1], ``feature_norm`` in NIFTY's ``utils.py``; NIFTY's scripts scale
  themselves), raw features otherwise; PyGDebias's FairGNN gets what its loaders give by
  default: raw features (``is_normalize=False``);
* gnnaudit's vanilla GNNs: hidden size 16, dropout 0.5, Adam lr 1e-3, weight decay 1e-5, 1000
  epochs (NIFTY's published settings for its vanilla GNNs and for NIFTY), two message-passing
  layers, the trainer's own epoch selection (best validation AUROC for a binary task); NIFTY
  and the port: their README's settings, 1000 epochs; PyGDebias: its defaults (2000 epochs);
* metrics on the test nodes with :func:`gnnaudit.audit.fairness.literature_metrics.
  literature_metrics` for every method (instability noise seeded with the run's seed);
* seeds ``--seeds`` (default 5: 0..4) seed the weights / dropout of every method.

Outputs: ``--json`` (one record per run: dataset, method, backbone, seed, auroc, f1, dsp, deo,
cf, instability, fit_s; fairfinetune adds ``pretrain_s``, ``chosen`` and ``selection``, its
``selection_`` table as ``{"columns": [...], "data": [[...], ...]}`` (older records: a list of
rows), the reference runs what their code printed), ``--md`` (``fair_gnn_report.py``: mean ± sd per
dataset / method / backbone with the seeds and fit times of every row, the issue's goal
computed from the records, published figures) and ``--png`` (Pareto plots).

Queue: the work items run one at a time (``--jobs``), each in a fresh subprocess, in the order
of :data:`PRIORITY` (gnnaudit's GCN, then PyGDebias's FairGNN, NIFTY, gnnaudit's GIN and SAGE,
the port), seed by seed within each group. ``--resume`` keeps the records already in ``--json``
and runs only the missing ones, so a long protocol can run in pieces; every work item also
leaves its records in ``<scratch>/_items/``, which ``--collect`` gathers (with ``--resume``:
added to the existing ``--json``) when a driver was stopped early. A queue of hours is best run
from a snapshot of a commit (``git archive``; its ``benchmarks/bench_fair_gnn.py`` imports the
snapshot's gnnaudit), with ``--json`` / ``--md`` / ``--png`` / ``--scratch`` / ``--pygdebias``
pointing at the working copy, so that edits to the working tree never reach a running queue::

    git archive HEAD | tar -x -C /work/scratch/fg_src
    cd /work/main; OMP_NUM_THREADS=1 nohup nice -n 10 .venv/bin/python
    /work/scratch/fg_src/benchmarks/bench_fair_gnn.py --resume
    --json benchmarks/results/fair_gnn.json ... > fair_gnn.log 2>&1 &   (one line)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tarfile
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

from fair_gnn_pygdebias import VERSION as PYGDEBIAS_VERSION  # noqa: E402
from fair_gnn_pygdebias import package_dir  # noqa: E402
from fair_gnn_report import write_markdown, write_pareto  # noqa: E402

from gnnaudit.audit.fairness.literature_metrics import literature_metrics  # noqa: E402
from gnnaudit.datasets import load_nifty  # noqa: E402
from gnnaudit.training import FairFinetune, train_node_classifier  # noqa: E402

REFERENCE_DATASETS = ("credit", "bail", "german")
NIFTY_SCALED = ("credit", "bail")
SHARED_DATA = Path("/work/shared/datasets/nifty")
REFERENCES = ("nifty", "fairgnn", "fairgnn_port")
#: queue order: work-item groups, each run seed by seed (then dataset by dataset)
PRIORITY = ("ours_gcn", "fairgnn", "nifty", "ours_other", "fairgnn_port")
VANILLA = {"hidden_channels": 16, "dropout": 0.5, "lr": 1e-3, "weight_decay": 1e-5}
#: the protocol's message-passing layers (NIFTY's two-layer GNNs)
PROTOCOL_LAYERS = 2
#: part of the vanilla cache's file names: bump when the trainer's result changes (the trainer
#: keeps the best-validation-AUROC epoch since issue 36: older caches never match)
MODEL_CACHE_TAG = "aurocsel"


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


def load(name: str, scratch: Path, features: str = "nifty"):
    """The protocol's graph (module docstring); ``features="raw"``: without NIFTY's scaling."""
    data = load_nifty(name, scratch, standardize=False, split="nifty")
    if name in NIFTY_SCALED and features == "nifty":
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


def setting_suffix(args: argparse.Namespace) -> str:
    """What sets a gnnaudit row's vanilla model apart from the protocol's: ``_raw`` for
    ``--features raw``, ``_h<N>`` for a ``--hidden`` other than NIFTY's 16, ``_l<N>`` for a
    ``--layers`` other than the protocol's 2, ``_lr<x>`` for a ``--lr`` other than NIFTY's 1e-3
    ("" for the protocol).
    Part of the record names, the vanilla cache's file names and the work items' files."""
    raw = "_raw" if args.features == "raw" else ""
    hidden = "" if args.hidden == VANILLA["hidden_channels"] else f"_h{args.hidden}"
    layers = "" if args.layers == PROTOCOL_LAYERS else f"_l{args.layers}"
    lr = "" if args.lr == VANILLA["lr"] else f"_lr{args.lr:g}"
    return raw + hidden + layers + lr


def ours_method(method: str, args: argparse.Namespace) -> str:
    """A gnnaudit row's record name: ``method`` (``vanilla`` / ``fairfinetune``), with
    :func:`setting_suffix` and, for ``fairfinetune``, ``:<json>`` for ``--ff-options``."""
    name = method + setting_suffix(args)
    if method != "fairfinetune" or not args.ff_options:
        return name
    return name + ":" + json.dumps(args.ff_options, sort_keys=True, separators=(",", ":"))


def run_ours(data, name: str, backbone: str, seed: int, args) -> list[dict[str, Any]]:
    """Vanilla training, then (if asked) FairFinetune's default remedy on it: two records."""
    records = []
    cache = (
        args.scratch
        / "_models"
        / f"{name}_{backbone}_{seed}_{args.epochs}_{MODEL_CACHE_TAG}{setting_suffix(args)}.pt"
    )
    t0 = time.perf_counter()
    result = train_node_classifier(
        data,
        backbone,
        1 if cache.exists() else args.epochs,
        seed,
        num_layers=args.layers,
        trainer_kwargs={"accelerator": "cpu"},
        **{**VANILLA, "hidden_channels": args.hidden, "lr": args.lr},
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
            {
                **base,
                "method": ours_method("vanilla", args),
                **measure(model, data, seed),
                "fit_s": pretrain_s,
            }
        )
    if "fairfinetune" in args.methods:
        records.append({**base, **fairfinetune(model, data, seed, args), "pretrain_s": pretrain_s})
    return records


def fairfinetune(model, data, seed: int, args) -> dict[str, Any]:
    """FairFinetune's default remedy (module docstring) on ``model``: its test metrics, its fit
    time (the whole ``finetune`` call, its own validation selection included), the chosen
    candidate and the selection table."""
    t0 = time.perf_counter()
    tuned = FairFinetune.finetune(
        model,
        data,
        int(data.sensitive_index),
        random_state=seed,
        trainer_kwargs={"accelerator": "cpu"},
        **args.ff_options,
    )
    fit_s = time.perf_counter() - t0
    table = tuned.selection_
    chosen = table.loc[table["chosen"].astype(bool), "candidate"]
    return {
        "method": ours_method("fairfinetune", args),
        **measure(tuned, data, seed),
        "fit_s": fit_s,
        "chosen": str(chosen.iloc[0]) if len(chosen) else None,
        "ff_options": args.ff_options,
        # 6 decimals: validation figures on at most tens of thousands of nodes; columns and
        # rows (pandas' "split" orientation) keep the file small: each name is written once
        "selection": json.loads(table.to_json(orient="split", index=False, double_precision=6)),
    }


def reference_workdir(data, name: str, method: str, seed: int, args) -> Path:
    """``<scratch>/_reference/<method>_<name>_<seed>`` holding ``dataset/<name>/<name>.csv``
    and the edge file written from ``data`` (each unordered pair once)."""
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
    return work


def run_reference(data, name: str, method: str, seed: int, args) -> dict[str, Any]:
    """One reference run in a subprocess: ``fair_gnn_reference.py`` (``nifty``,
    ``fairgnn_port``) or ``fair_gnn_pygdebias.py`` (``fairgnn``); the split is checked."""
    work = reference_workdir(data, name, method, seed, args)
    out = work / "record.json"
    common = ["--dataset", name, "--seed", str(seed), "--workdir", str(work), "--out", str(out)]
    common += ["--threads", str(args.threads)]
    if method == "fairgnn":
        cmd = [sys.executable, str(HERE / "fair_gnn_pygdebias.py"), *common]
        cmd += ["--package", str(package_dir(args.pygdebias))]
        if args.fairgnn_epochs is not None:
            cmd += ["--epochs", str(args.fairgnn_epochs)]
    else:
        cmd = [sys.executable, str(HERE / "fair_gnn_reference.py"), "--method", method, *common]
        cmd += ["--epochs", str(args.epochs), "--repo", str(args.reference_repo)]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "TQDM_DISABLE": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{method} on {name} failed:\n{proc.stderr[-3000:]}")
    rec = json.loads(out.read_text())
    for part, mask in (
        ("test", data.test_mask),
        ("val", data.val_mask),
        ("train", data.train_mask),
    ):
        theirs = rec.pop(f"idx_{part}", None)
        if theirs is not None and theirs != sorted(int(i) for i in mask.nonzero().flatten()):
            raise RuntimeError(f"{method} on {name}: its {part} nodes differ from split='nifty'")
    return {"dataset": name, "method": method, "backbone": "gcn", "seed": seed, **rec}


def key(r: dict[str, Any]) -> tuple:
    return (r["dataset"], r["method"], r["backbone"], r["seed"])


def work_items(args: argparse.Namespace) -> list[tuple[str, str, str, int]]:
    """``(dataset, kind, backbone, seed)`` in the queue's order (:data:`PRIORITY`: a group
    for every seed before the next group; within a seed, the datasets in ``--datasets`` order)."""
    ours = [m for m in ("vanilla", "fairfinetune") if m in args.methods]
    refs = [m for m in REFERENCES if m in args.methods]
    items = []
    for seed in args.seed_values:
        for name in args.datasets:
            if name in REFERENCE_DATASETS:
                items += [(name, m, "gcn", seed) for m in refs]
            if ours:
                items += [(name, "ours", bb, seed) for bb in args.backbones]

    def group(it: tuple[str, str, str, int]) -> int:
        kind = it[1] if it[1] != "ours" else ("ours_gcn" if it[2] == "gcn" else "ours_other")
        return PRIORITY.index(kind)

    return sorted(items, key=lambda it: (group(it), it[3]))  # stable: datasets keep their order


def item_methods(item: tuple[str, str, str, int], args: argparse.Namespace) -> list[str]:
    """The record methods one work item produces."""
    if item[1] != "ours":
        return [item[1]]
    return [ours_method(m, args) for m in ("vanilla", "fairfinetune") if m in args.methods]


def run_item(item: tuple[str, str, str, int], args: argparse.Namespace) -> list[dict[str, Any]]:
    """One work item in a fresh subprocess of this script (isolated, one thread)."""
    name, kind, bb, seed = item
    tag = ""
    if kind == "ours" and args.ff_options:
        tag = f"_ff{zlib.crc32(json.dumps(args.ff_options, sort_keys=True).encode()):08x}"
    if kind == "ours":
        tag += setting_suffix(args)
    out = args.scratch / "_items" / f"{name}_{kind}_{bb}_{seed}{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), *args.argv]
    cmd += ["--worker-item", f"{name}:{kind}:{bb}:{seed}", "--worker-out", str(out)]
    t0 = time.perf_counter()
    logging.info("start %s", item)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        logging.error("%s failed after %.0f s:\n%s", item, time.perf_counter() - t0,
                      proc.stderr[-3000:])  # fmt: skip
        return []
    return json.loads(out.read_text())


def worker(args: argparse.Namespace) -> None:
    name, kind, bb, seed = args.worker_item.split(":")
    data = load(name, stage_data(name, args.data, args.scratch), args.features)
    if kind == "ours":
        records = run_ours(data, name, bb, int(seed), args)
    else:
        records = [run_reference(data, name, kind, int(seed), args)]
    Path(args.worker_out).write_text(json.dumps(records))


def ensure_pygdebias(env: Path) -> None:
    """Download and unpack the ``pygdebias`` sdist into ``env`` when it is not there (``pip
    download --no-deps``: its pinned requirements are never installed)."""
    if (package_dir(env) / "debiasing" / "FairGNN.py").exists():
        return
    env.mkdir(parents=True, exist_ok=True)
    sdist = env / f"pygdebias-{PYGDEBIAS_VERSION}.tar.gz"
    if not sdist.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", f"pygdebias=={PYGDEBIAS_VERSION}",
             "--no-deps", "--no-binary", ":all:", "-d", str(env)],
            check=True,
        )  # fmt: skip
    with tarfile.open(sdist) as tar:
        tar.extractall(env, filter="data")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="credit,bail")
    p.add_argument("--methods", default="vanilla,fairfinetune,nifty,fairgnn,fairgnn_port")
    p.add_argument("--backbones", default="gcn,gin,sage")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    p.add_argument("--seed-list", default=None, help="explicit seeds, e.g. 0,3")
    p.add_argument("--epochs", type=int, default=1000, help="vanilla, nifty, fairgnn_port")
    p.add_argument(
        "--fairgnn-epochs", type=int, default=None, help="PyGDebias FairGNN (default: its 2000)"
    )
    p.add_argument(
        "--ff-options",
        type=json.loads,
        default={},
        help="JSON dict of FairFinetune.finetune keywords (a variant, not the default remedy)",
    )
    p.add_argument(
        "--features",
        choices=("nifty", "raw"),
        default="nifty",
        help="gnnaudit rows: NIFTY's scaling (the protocol) or raw features as PyGDebias loads "
        "them (records vanilla_raw / fairfinetune_raw)",
    )
    p.add_argument(
        "--hidden",
        type=int,
        default=VANILLA["hidden_channels"],
        help="gnnaudit rows: the vanilla GNNs' hidden size (NIFTY's 16 is the protocol; 64 is "
        "PyGDebias FairGNN's GCN body, records vanilla_h64 / fairfinetune_h64)",
    )
    p.add_argument(
        "--layers",
        type=int,
        default=PROTOCOL_LAYERS,
        help="gnnaudit rows: the vanilla GNNs' message-passing layers (2 is the protocol; 1 is "
        "PyGDebias FairGNN's classifier's function class, records vanilla_l1 / fairfinetune_l1)",
    )
    p.add_argument(
        "--lr",
        type=float,
        default=VANILLA["lr"],
        help="gnnaudit rows: the vanilla GNNs' Adam learning rate (NIFTY's 1e-3 is the "
        "protocol; records ..._lr<x>)",
    )
    p.add_argument("--data", type=Path, default=SHARED_DATA)
    p.add_argument("--scratch", type=Path, default=HERE / "_data")
    p.add_argument("--reference-repo", type=Path, default=Path("/work/scratch/nifty"))
    p.add_argument("--pygdebias", type=Path, default=HERE / "_env" / "pygdebias")
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
    if not isinstance(a.ff_options, dict):
        p.error("--ff-options must be a JSON object")
    a.scratch = a.scratch.resolve()
    a.pygdebias = a.pygdebias.resolve()
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
        any(m in args.methods for m in ("nifty", "fairgnn_port"))
        and not (args.reference_repo / "nifty_sota_gnn.py").exists()
    ):
        raise SystemExit(f"no NIFTY repository at {args.reference_repo}: see the docstring")
    if "fairgnn" in args.methods:
        ensure_pygdebias(args.pygdebias)
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
        if not all((it[0], m, it[2], it[3]) in done for m in item_methods(it, args))
    ]
    logging.info("%d work items, %d parallel jobs: %s", len(todo), args.jobs, todo)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_item, it, args): it for it in todo}
        for fut in as_completed(futures):
            for r in fut.result():
                records = [q for q in records if key(q) != key(r)] + [r]
                logging.info("%s", {k: r[k] for k in list(r)[:11]})
            save(records, args)
            write_markdown(records, args.md, command)
    write_pareto(records, args.png)


def collect_items(records: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Add the per-item results of earlier (or parallel) runs to ``records`` and save them."""
    for f in sorted((args.scratch / "_items").glob("*.json")):
        for r in json.loads(f.read_text()):
            if key(r) not in {key(q) for q in records}:
                records.append(r)
    save(records, args)


def save(records: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Write ``records`` to ``--json``, one compact record per line (a readable diff per record;
    the selection tables make an indented file several times larger)."""
    args.json.parent.mkdir(parents=True, exist_ok=True)
    lines = ",\n".join(json.dumps(r, separators=(",", ":")) for r in records)
    args.json.write_text(f"[\n{lines}\n]\n")


if __name__ == "__main__":
    main()
