"""Benchmark the embedding audit (:class:`gnnaudit.audit.EmbeddingAudit`): time and memory at
1,000 / 10,000 / 100,000 audited nodes, with the share of each method.

Usage (idle machine, single thread)::

    OMP_NUM_THREADS=1 python benchmarks/bench_embedding_audit.py            # 1k, 10k, 100k
    OMP_NUM_THREADS=1 python benchmarks/bench_embedding_audit.py --sizes 1000 10000

Protocol: ``synthetic_credit_graph(n, bias=3.0)``, a 2-layer GCN (16 hidden) trained for 30
epochs, every node audited (``mask`` = all nodes); ``EmbeddingAudit()`` with its defaults
(``max_nodes=10_000``: above it the audited nodes are subsampled before clustering, so the
100,000 row clusters 10,000 of them; the embedding forward pass covers the whole graph).
Each size runs in a fresh subprocess. Time per method from ``timings_`` (embeddings: forward
pass with the hook; dbscan: k-distance knee + radius search + DBSCAN; balance_test_dcsi:
permutation test and DCSI; fairden: dc-tree + FairDen; tree: MaxSAT tree with its constraint
sampling; counterparts: ExDBSCAN), the fit's total, tracemalloc peak of the fit (numpy
buffers included) and the process's peak RSS. Writes a Markdown table to ``--out``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from provenance import commit, commit_line  # noqa: E402

METHODS = ("embeddings", "dbscan", "balance_test_dcsi", "fairden", "tree", "counterparts")


def run_single(n: int) -> dict:
    import numpy as np
    import torch

    from gnnaudit.audit import EmbeddingAudit
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.training import train_node_classifier

    torch.set_num_threads(1)
    data = synthetic_credit_graph(num_nodes=n, bias=3.0, seed=0)
    t0 = time.perf_counter()
    model, _ = train_node_classifier(data, max_epochs=30, seed=0, num_layers=2)
    train_s = time.perf_counter() - t0
    everyone = torch.ones(n, dtype=torch.bool)
    tracemalloc.start()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = EmbeddingAudit().fit(model, data, mask=everyone)
    total = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    row = {
        "audited": n,
        "clustered": int(audit.nodes_.size),
        "train_s": round(train_s, 2),
        "fit_s": round(total, 2),
    }
    for m in METHODS:
        sec = audit.timings_.get(m, 0.0)
        row[f"{m}_s"] = round(sec, 3)
        row[f"{m}_%"] = round(100 * sec / total, 1)
    row["tracemalloc_peak_MB"] = round(peak, 1)
    row["peak_rss_MB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    row["clusters"] = audit.n_clusters_
    row["balance"] = round(float(audit.balance_), 3)
    row["fair_balance"] = round(float(audit.fair_balance_), 3)
    row["tree"] = "yes" if audit.tree_ is not None else "no"
    row["counterparts"] = int(len(audit.counterparts_))
    row["eps"] = round(float(audit.eps_), 4)
    row["min_samples"] = audit.min_samples_
    _ = np  # numpy is imported for the estimator's sake
    return row


#: (seed, backbone) of the fairness check: trained models whose embeddings the audit clusters
CHECK_RUNS = ((0, "gcn"), (1, "gcn"), (2, "sage"), (3, "gcn"))


def fairness_check() -> str:
    """Issue 13's check: on synthetic_credit_graph(1000, bias=3.0) with a 3-layer model trained
    200 epochs, the embedding clusters of the test nodes against FairDen's on the same
    embeddings (balance of gender in each clustering, and the radius rule that chose eps)."""
    import warnings

    import pandas as pd
    import torch

    from gnnaudit.audit import EmbeddingAudit
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.training import train_node_classifier

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    rows = []
    for seed, backbone in CHECK_RUNS:
        data = synthetic_credit_graph(num_nodes=1000, bias=3.0, seed=seed)
        model, _ = train_node_classifier(data, backbone, max_epochs=200, seed=seed)
        a = EmbeddingAudit(random_state=0).fit(model, data, sensitive="gender")
        rows.append(
            {
                "seed": seed,
                "backbone": backbone,
                "eps_rule": a.eps_rule_,
                "clusters": a.n_clusters_,
                "balance (embedding clusters)": round(a.balance_, 3),
                "balance (FairDen)": round(a.fair_balance_, 3),
            }
        )
        print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(False)]
    return (
        "## Fairness check (issue 13)\n\n"
        "`synthetic_credit_graph(1000, bias=3.0, seed)`, `train_node_classifier(backbone, 200 "
        "epochs, seed)` (3 layers), `EmbeddingAudit().fit(model, data, sensitive='gender')` on "
        "the test nodes: gender balance of the embedding's density clusters and of FairDen's "
        "clustering of the same embeddings.\n\n" + "\n".join(lines) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/embedding_audit.md"))
    parser.add_argument("--single", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--no-check", action="store_true", help="skip the fairness check")
    args = parser.parse_args()
    if args.single is not None:
        print(json.dumps(run_single(args.single)))
        return
    import pandas as pd

    start = time.perf_counter()
    load = os.getloadavg()[0]
    measured_commit = commit()
    rows = []
    for n in args.sizes:
        proc = subprocess.run(
            [sys.executable, __file__, "--single", str(n)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"n={n}: {rows[-1]['fit_s']} s", flush=True)
    frame = pd.DataFrame(rows)
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(False)]
    table = "\n".join(lines)
    sizes = " ".join(map(str, args.sizes))
    text = (
        "# Embedding audit benchmark\n\n"
        f"- date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC\n"
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; "
        f"load average at the start {load:.1f}\n"
        f"{commit_line(measured_commit)}\n"
        "- threads: OMP/BLAS/torch = 1\n"
        f"- command: `OMP_NUM_THREADS=1 python benchmarks/bench_embedding_audit.py --sizes {sizes}`\n\n"
        "Protocol: see the script's docstring (synthetic credit graph, bias 3.0, 2-layer GCN, "
        "every node audited, `EmbeddingAudit()` defaults, `max_nodes=10000`). `*_s` seconds and "
        "`*_%` share of the fit per method; `tracemalloc_peak_MB` is the fit's peak.\n\n"
        f"{table}\n\n"
    )
    if not args.no_check:
        text += fairness_check() + "\n"
    text += f"Total wall time: {time.perf_counter() - start:.0f} s.\n"
    Path(args.out).write_text(text)
    print(table)


if __name__ == "__main__":
    main()
