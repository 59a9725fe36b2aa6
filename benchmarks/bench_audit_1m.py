"""A million nodes on this machine: the whole default audit of a trained GCN on a large graph.

Usage::

    python benchmarks/bench_audit_1m.py [--nodes 1000000] [--train-nodes 20000]
        [--backend exact|faiss|...] [--skip-api] [--skip-cli] [--out FILE]

Steps (every figure of ``benchmarks/results/audit_1m.md`` comes from one run of this script):

1. train a GCN (``train_node_classifier``, 3 layers, ``--epochs``) on
   ``synthetic_credit_graph(--train-nodes, seed=0)`` (same generator and the same 11 feature
   columns as the audited graph, so the checkpoint loads for it) and save the checkpoint;
   training time is reported on its own, outside the audit budget;
2. in a fresh subprocess: build ``synthetic_credit_graph(--nodes)`` (timed: the generator),
   load the checkpoint and run ``gnnaudit.audit_model(model, data, backend=..., out=tmp)``
   (timed: the audit, report written); per-stage seconds come from the report's run
   information (``run_info["seconds"]``);
3. in a fresh subprocess: ``python -m gnnaudit audit --checkpoint CKPT --dataset synthetic
   --num-nodes N --backend ... --out tmp --no-progress`` (wall time of the whole command).

Peak memory: ``ru_maxrss`` of each child from ``os.wait4`` (the per-child figure that
``resource.getrusage(RUSAGE_CHILDREN)`` accumulates as a maximum over children).
Threads: ``OMP_NUM_THREADS=1`` unless ``--threads`` says otherwise (the machine is shared;
the load average is recorded at start and end: timings under load are inflated).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from provenance import commit, commit_line

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "audit_1m.md"
#: issue 37's goal: the whole CLI audit of a checkpoint at idle
TIME_BUDGET_S = 120.0
RSS_BUDGET_GB = 6.0

#: run in the audit subprocess: generate, load, audit, write the report; JSON to argv[1]
CHILD = r"""
import json, sys, time, logging, warnings
warnings.filterwarnings("ignore")
logging.getLogger("lightning").setLevel(logging.ERROR)
out_json, ckpt, nodes, backend, report_dir = sys.argv[1:6]
t0 = time.perf_counter()
import gnnaudit
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import load_node_classifier
t_import = time.perf_counter() - t0
t = time.perf_counter()
data = synthetic_credit_graph(int(nodes), seed=0)
t_gen = time.perf_counter() - t
t = time.perf_counter()
model = load_node_classifier(ckpt)
t_load = time.perf_counter() - t
t = time.perf_counter()
report = gnnaudit.audit_model(model, data, backend=backend, out=report_dir, progress=False)
t_audit = time.perf_counter() - t
json.dump({"import": t_import, "generate": t_gen, "load_model": t_load, "audit": t_audit,
           "stages": report.run_info.get("seconds", {}),
           "calls": report.run_info.get("model_calls", {}),
           "passes": report.run_info.get("model_passes", {}),
           "notes": report.run_info.get("notes", []),
           "edges": int(data.edge_index.size(1)), "audited": int(report.dataset["audited_nodes"]),
           "verdict": str(report.verdict)[:300]}, open(out_json, "w"))
"""


def set_threads(threads: int) -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def machine() -> str:
    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            model = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
        with open("/proc/meminfo") as fh:
            mem = int(fh.readline().split()[1]) / 2**20
    except (OSError, StopIteration):  # pragma: no cover
        mem = float("nan")
    return f"{platform.platform()}, {model}, {os.cpu_count()} cores, {mem:.0f} GB RAM"


def versions() -> str:
    from importlib.metadata import version

    return ", ".join(
        f"{p} {version(p)}"
        for p in ("torch", "torch_geometric", "lightning", "numpy", "scipy", "gnnaudit")
    )


def run_child(cmd: list[str]) -> tuple[int, float, float, str]:
    """Run ``cmd``; return (exit code, wall seconds, peak RSS in GB, stderr tail)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        err.seek(0)
        tail = err.read().decode(errors="replace")[-2000:]
    return proc.returncode, wall, usage.ru_maxrss / 2**20, tail  # ru_maxrss: KiB on Linux


def train(args: argparse.Namespace, ckpt: Path) -> dict[str, Any]:
    import logging
    import warnings

    import torch

    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.training import train_node_classifier

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    torch.set_num_threads(args.threads)
    data = synthetic_credit_graph(args.train_nodes, seed=0)
    start = time.perf_counter()
    _, metrics = train_node_classifier(
        data, "gcn", max_epochs=args.epochs, seed=0, checkpoint_path=ckpt
    )
    return {"seconds": time.perf_counter() - start, **metrics}


def fmt(rows: list[tuple[str, str]]) -> str:
    width = max(len(a) for a, _ in rows)
    lines = [f"| {'step':<{width}} | value |", f"|{'-' * (width + 2)}|-------|"]
    return "\n".join([*lines, *(f"| {a:<{width}} | {b} |" for a, b in rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--train-nodes", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-api", action="store_true")
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    set_threads(args.threads)
    meta = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "commit": commit(),
        "load_start": load(),
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
    }
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench1m_") as tmp:
        ckpt = Path(tmp) / "gcn.ckpt"
        trained = train(args, ckpt)
        rows.append(
            (
                f"training (GCN, {args.train_nodes:,} nodes, {args.epochs} epochs; not in budget)",
                f"{trained['seconds']:.1f} s, test accuracy {trained.get('test_acc', float('nan')):.3f}",
            )
        )
        api: dict[str, Any] = {}
        if not args.skip_api:
            out_json = Path(tmp) / "api.json"
            cmd = [sys.executable, "-c", CHILD, str(out_json), str(ckpt), str(args.nodes)]
            cmd += [args.backend, str(Path(tmp) / "report_api")]
            rc, wall, rss, tail = run_child(cmd)
            if rc != 0:
                raise SystemExit(f"audit_model subprocess failed ({rc}):\n{tail}")
            api = json.loads(out_json.read_text())
            rows += [
                (f"generator: synthetic_credit_graph({args.nodes:,})", f"{api['generate']:.1f} s"),
                ("  edges (directed)", f"{api['edges']:,}"),
                ("  audited (test) nodes", f"{api['audited']:,}"),
                ("load checkpoint", f"{api['load_model']:.2f} s"),
            ]
            rows += [
                (
                    f"  stage: {k}",
                    f"{v:.1f} s, {api['calls'].get(k, 0)} model calls, "
                    f"{api['passes'].get(k, 0):g} whole-graph passes of rows",
                )
                for k, v in api["stages"].items()
            ]
            rows += [
                (
                    f"audit_model(backend={args.backend!r}) incl. report",
                    f"**{api['audit']:.1f} s**",
                ),
                ("audit_model subprocess wall (import+generate+audit)", f"{wall:.1f} s"),
                ("audit_model subprocess peak RSS", f"**{rss:.2f} GB**"),
            ]
        if not args.skip_cli:
            cmd = [sys.executable, "-m", "gnnaudit", "audit", "--checkpoint", str(ckpt)]
            cmd += ["--dataset", "synthetic", "--num-nodes", str(args.nodes)]
            cmd += ["--backend", args.backend, "--out", str(Path(tmp) / "report_cli")]
            cmd += ["--no-progress"]
            rc, wall, rss, tail = run_child(cmd)
            if rc != 0:
                raise SystemExit(f"CLI subprocess failed ({rc}):\n{tail}")
            ok = wall <= TIME_BUDGET_S and rss <= RSS_BUDGET_GB
            rows += [
                (
                    "CLI `gnnaudit audit` wall (import+generate+audit)",
                    f"**{wall:.1f} s** ({'within' if ok else 'OVER'} the budget)",
                ),
                ("CLI peak RSS", f"**{rss:.2f} GB**"),
            ]
    meta["load_end"] = load()
    table = fmt(rows)
    print(table)
    notes = api.get("notes", [])
    lines = [
        f"# Audit at {args.nodes:,} nodes",
        "",
        f"- date: {meta['date']} UTC; load average (1, 5, 15 min) at start: {meta['load_start']}, "
        f"at end: {meta['load_end']} (the machine is shared: timings under load are inflated)",
        f"- machine: {machine()}",
        commit_line(meta["commit"]),
        f"- threads: OMP_NUM_THREADS={args.threads}",
        f"- versions: Python {platform.python_version()}, {versions()}",
        f"- command: `{meta['command']}`",
        f"- budget (issue 37): the CLI audit under {TIME_BUDGET_S:.0f} s wall and "
        f"{RSS_BUDGET_GB:.0f} GB peak RSS at idle (training excluded)",
        "",
        table,
        "",
    ]
    if notes:
        lines += ["Notes of the report's run information:", ""]
        lines += [f"- {n}" for n in notes] + [""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
