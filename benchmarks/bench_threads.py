"""1 thread vs all cores: where does multi-threading start to pay off?

Usage::

    python benchmarks/bench_threads.py [--sizes 1000 5000 20000 100000] [--threads 1 2]
        [--epochs 20] [--repeats 3] [--out FILE]

For each size N, ``synthetic_credit_graph(N, seed=0)`` and, for each thread count T (set with
:func:`gnnaudit._threads.configure_threads`, i.e. torch, BLAS / OpenMP and faiss together):

* train: ``train_node_classifier(data, "gcn", max_epochs=epochs)`` -> ``fit_seconds`` (one run);
* forward: one full-graph forward pass of the trained GCN in eval mode (best of ``repeats``);
* KS: ``ks_embedding(x, edge_index, num_hops=3)`` (best of ``repeats``).

Thread counts alternate inside each size so that a change of machine load hits both. The
speed-up column is time(1 thread) / time(T threads): above 1 multi-threading pays. The smallest
size from which it pays for the forward pass and the KS propagation is the
``SIZE_THRESHOLD`` of ``gnnaudit/_threads.py``. Writes ``benchmarks/results/threads.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_audit import RunHeader, fmt_table  # noqa: E402

RESULTS = HERE / "results" / "threads.md"


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(n: int, threads: list[int], epochs: int, repeats: int) -> list[dict]:
    import torch

    from gnnaudit._threads import configure_threads
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.graph_ops import ks_embedding
    from gnnaudit.training import train_node_classifier

    data = synthetic_credit_graph(num_nodes=n, seed=0)
    rows = []
    for t in threads:
        configure_threads(t)
        module, metrics = train_node_classifier(data, "gcn", max_epochs=epochs, seed=0)
        module.eval()

        def forward(module=module) -> None:
            with torch.no_grad():
                module(data.x, data.edge_index)

        fwd = best_of(forward, repeats)
        ks = best_of(lambda: ks_embedding(data.x, data.edge_index, num_hops=3), repeats)
        rows.append(
            {
                "nodes": n,
                "edges": int(data.edge_index.size(1)),
                "threads": t,
                "train s": float(metrics["fit_seconds"]),
                "forward ms": 1000 * fwd,
                "KS ms": 1000 * ks,
            }
        )
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000, 100000])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    import logging
    import warnings

    import pandas as pd

    warnings.filterwarnings("ignore")
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "gnnaudit"):
        logging.getLogger(name).setLevel(logging.ERROR)
    header = RunHeader("bench_threads.py")
    rows = []
    for n in args.sizes:
        rows += measure(n, args.threads, args.epochs, args.repeats)
    df = pd.DataFrame(rows)
    base = df[df.threads == args.threads[0]].set_index("nodes")
    for col in ("train s", "forward ms", "KS ms"):
        df[f"{col.split()[0]} speed-up"] = [
            base.loc[n, col] / v for n, v in zip(df["nodes"], df[col], strict=True)
        ]
    table = fmt_table(df)
    print(table)
    text = "\n".join(
        header.lines(
            "Threads: 1 vs all cores by graph size",
            "set per row with `gnnaudit._threads.configure_threads(T)` (torch, BLAS / OpenMP "
            "via threadpoolctl, faiss)",
        )
        + [
            f"`synthetic_credit_graph(N, seed=0)`; train = `train_node_classifier(gcn, "
            f"{args.epochs} epochs)` fit seconds (one run); forward = one full-graph forward "
            f"pass, KS = `ks_embedding(num_hops=3)` (best of {args.repeats}). speed-up = "
            f"time({args.threads[0]} thread) / time(T threads).",
            "",
            table,
            "",
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
