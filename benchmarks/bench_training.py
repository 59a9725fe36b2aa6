"""Node-classifier training figures: accuracy per backbone, Cora, mini-batches, CLI wall time.

Usage: ``python benchmarks/bench_training.py [--quick] [--root DIR]``. Writes
``benchmarks/results/training.md``. Cora rows need the Planetoid raw files under ``--root``
(default ``../shared/datasets/planetoid``); they are skipped with a note otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from provenance import commit, commit_line  # noqa: E402

from gnnaudit.datasets import load_planetoid, synthetic_credit_graph  # noqa: E402
from gnnaudit.training import BACKBONES, train_node_classifier  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "training.md"
DEFAULT_ROOT = HERE.parent.parent / "shared" / "datasets" / "planetoid"


def _row(name: str, data, backbone: str, epochs: int, **kw) -> dict:
    start = time.perf_counter()
    _, m = train_node_classifier(data, backbone, max_epochs=epochs, seed=0, **kw)
    return {
        "data": name,
        "backbone": backbone,
        "setting": ", ".join(f"{k}={v}" for k, v in kw.items()) or "full batch",
        "epochs": epochs,
        "train acc": round(m["train_acc"], 3),
        "val acc": round(m["val_acc"], 3),
        "test acc": round(m["test_acc"], 3),
        "majority rate (test)": round(m["majority_rate"], 3),
        "wall s": round(time.perf_counter() - start, 2),
    }


def accuracy_rows(epochs: int, root: Path, quick: bool) -> tuple[pd.DataFrame, list[str]]:
    notes = []
    synthetic = synthetic_credit_graph(num_nodes=1000, bias=1.5, seed=0)
    rows = [_row("synthetic", synthetic, b, epochs) for b in BACKBONES]
    rows.append(_row("synthetic", synthetic, "gcn", epochs, batch_size=64))
    if quick:
        notes.append("Cora skipped (--quick).")
    elif (root / "Cora" / "raw").is_dir():
        for split in ("stratified", "public"):
            cora = load_planetoid("Cora", root, split=split)
            rows.append(_row(f"cora ({split} split)", cora, "gcn", epochs, num_layers=2))
    else:
        notes.append(f"Cora skipped: no raw files under {root}.")
    return pd.DataFrame(rows), notes


def cli_seconds(epochs: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "gnnaudit.cli.main", "train", "--dataset", "synthetic"]
        cmd += ["--epochs", str(epochs), "--out", out]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="30 epochs, no Cora")
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="Planetoid root")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("lightning").setLevel(logging.ERROR)
    epochs = 30 if args.quick else 200
    load = os.getloadavg()[0]
    measured_commit = commit()
    table, notes = accuracy_rows(epochs, args.root, args.quick)
    print(table.to_string(index=False))
    cli = cli_seconds(epochs)
    print(f"gnnaudit train --dataset synthetic: {cli:.1f} s")
    cmd = "python benchmarks/bench_training.py " + " ".join(sys.argv[1:])
    header = [
        "# Node-classifier training",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"load average at the start {load:.1f}",
        commit_line(measured_commit),
        f"- threads: OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, torch.set_num_threads(1)",
        f"- versions: torch {torch.__version__}, Python {platform.python_version()}",
        f"- command: `{cmd.strip()}`",
        "",
        "Seed 0; stratified 50/25/25 masks unless the row says `public` (PyG's standard Planetoid "
        "split); weights of the best validation epoch kept. `batch_size=64` trains on exact "
        "L-hop subgraph mini-batches (`gnnaudit/training/khop_loader.py`).",
        "",
        "| " + " | ".join(table.columns) + " |",
        "|" + "---|" * len(table.columns),
    ]
    body = ["| " + " | ".join(str(v) for v in r) + " |" for r in table.itertuples(index=False)]
    tail = [
        "",
        f"`gnnaudit train --dataset synthetic --epochs {epochs}` wall time, imports "
        f"included: {cli:.1f} s.",
    ]
    tail += [f"- {n}" for n in notes]
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text("\n".join(header + body + tail) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
