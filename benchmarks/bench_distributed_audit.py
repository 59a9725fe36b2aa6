"""The whole audit on a Dask LocalCluster vs in one process: equal findings, time, memory.

Usage::

    python benchmarks/bench_distributed_audit.py [--nodes 1000000] [--workers 2]
        [--limit-fraction 0.5] [--worker-limit-gb G] [--skip-local]
        [--partition contiguous|metis] [--num-parts P] [--out FILE]

Steps (one run of this script gives every figure of ``benchmarks/results/distributed_audit.md``):

1. train a GCN (3 layers, ``train_node_classifier``) on ``synthetic_credit_graph(20,000)``
   and save the checkpoint (as ``bench_audit_1m.py``; not timed as part of the audit);
2. for each ``--nodes`` N, in a fresh subprocess: ``synthetic_credit_graph(N, seed=0)`` and
   ``audit_model(model, data, progress=False)`` in one process (the local audit; its peak RSS
   is the process's ``ru_maxrss``);
3. in a fresh subprocess: a ``LocalCluster`` of ``--workers`` single-threaded worker processes
   with ``memory_limit`` = ``--limit-fraction`` x the local audit's peak (or
   ``--worker-limit-gb``), and ``audit_model(model, data, client=client,
   model_loader=partial(load_node_classifier, CKPT), shared_dir=TMP)``: the workers read the
   graph store and the checkpoint from the shared folder, compute the KS embedding (halo
   exchange) and every forward pass of the model (the factual predictions, the counterfactual
   passes of the sensitivity and proxy units); the client process runs the evidence search and
   the statistics.

Reported per run: the audit's seconds and stage seconds, the peak RSS of the client process
and of every worker (``ru_maxrss`` read in the worker process), the worker memory limit, the
KS halo rows per hop and bytes (rows x d x 4 B x hops), the bytes the workers sent each other
(gnnaudit's count of the halo pieces cut for other workers, and dask's
``transfer_outgoing_bytes_total``), the forward passes and their seconds, and whether
the findings table and the verdict equal the local audit's (``DataFrame.equals``). Threads:
1 per process (``OMP_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from bench_audit import RunHeader, fmt_table  # noqa: E402

RESULTS = HERE / "results" / "distributed_audit.md"

#: the local audit: argv = out_json ckpt nodes
LOCAL = r"""
import json, resource, sys, time, warnings, logging
warnings.filterwarnings("ignore"); logging.getLogger("lightning").setLevel(logging.ERROR)
out_json, ckpt, nodes = sys.argv[1:4]
import gnnaudit
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import load_node_classifier
data = synthetic_credit_graph(int(nodes), seed=0)
model = load_node_classifier(ckpt)
t = time.perf_counter()
report = gnnaudit.audit_model(model, data, progress=False)
json.dump({"audit": time.perf_counter() - t, "stages": report.run_info["seconds"],
           "findings": report.findings.to_dict(orient="split"),
           "verdict": str(report.verdict), "edges": int(data.edge_index.size(1)),
           "features": int(data.x.size(1)),
           "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
          open(out_json, "w"))
"""

#: the distributed audit: argv = out_json ckpt nodes workers limit_bytes store_dir partition
#: num_parts (0: the default)
DIST = r"""
import functools, json, resource, sys, time, warnings, logging
warnings.filterwarnings("ignore"); logging.getLogger("lightning").setLevel(logging.ERROR)
logging.getLogger("distributed").setLevel(logging.ERROR)
out_json, ckpt, nodes, workers, limit, store, partition, num_parts = sys.argv[1:9]
import distributed
import gnnaudit
from gnnaudit._distributed import worker_peak_rss
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import load_node_classifier
if __name__ == "__main__":
    cluster = distributed.LocalCluster(n_workers=int(workers), threads_per_worker=1,
        processes=True, memory_limit=int(limit), dashboard_address=None)
    client = distributed.Client(cluster)
    data = synthetic_credit_graph(int(nodes), seed=0)
    model = load_node_classifier(ckpt)
    t = time.perf_counter()
    report = gnnaudit.audit_model(model, data, progress=False, client=client, shared_dir=store,
        model_loader=functools.partial(load_node_classifier, ckpt), partition=partition,
        num_parts=int(num_parts) or None)
    seconds = time.perf_counter() - t
    peaks = worker_peak_rss(client)
    limits = {a: w["memory_limit"] for a, w in client.scheduler_info()["workers"].items()}
    json.dump({"audit": seconds, "stages": report.run_info["seconds"],
               "distributed": report.run_info["distributed"],
               "findings": report.findings.to_dict(orient="split"),
               "verdict": str(report.verdict), "worker_peak": [peaks[a] for a in sorted(peaks)],
               "worker_limit": [limits[a] for a in sorted(peaks)], "workers_alive": len(peaks),
               "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
              open(out_json, "w"))
    client.close(); cluster.close()
"""


def run_child(code: str, *argv: Any) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; its JSON result (argv[0] is the JSON path)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        path = fh.name
    # a script file, not ``python -c``: the Dask nannies start their workers with
    # multiprocessing's spawn, which re-imports the parent's __main__ from its file
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(code)
        script = fh.name
    cmd = [sys.executable, script, path, *map(str, argv)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    os.unlink(script)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(Path(path).read_text())
    os.unlink(path)
    return out


def train(ckpt: Path, nodes: int, epochs: int) -> float:
    import logging
    import warnings

    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.training import train_node_classifier

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    _, metrics = train_node_classifier(
        synthetic_credit_graph(nodes, seed=0),
        "gcn",
        max_epochs=epochs,
        seed=0,
        checkpoint_path=ckpt,
    )
    return float(metrics.get("test_acc", float("nan")))


def _gb(b: float) -> float:
    return b / 2**30


def one_size(args: argparse.Namespace, ckpt: Path, nodes: int, tmp: str) -> dict[str, Any]:
    """The local and the distributed audit at ``nodes``; one row of the table."""
    import pandas as pd

    local = None if args.skip_local else run_child(LOCAL, ckpt, nodes)
    if args.worker_limit_gb is not None:
        limit = int(args.worker_limit_gb * 2**30)
    elif local is not None:
        limit = int(args.limit_fraction * local["peak_rss"])
    else:
        raise SystemExit("--skip-local needs --worker-limit-gb")
    store = Path(tmp) / f"store-{nodes}"
    dist = run_child(DIST, ckpt, nodes, args.workers, limit, store, args.partition, args.num_parts)
    info = dist["distributed"]
    row: dict[str, Any] = {
        "nodes": nodes,
        "local audit s": None if local is None else round(local["audit"], 1),
        "local peak GB": None if local is None else round(_gb(local["peak_rss"]), 2),
        "workers": args.workers,
        "partition": args.partition,
        "partitions": info.get("partitions"),
        "worker limit GB": round(_gb(limit), 2),
        "dist audit s": round(dist["audit"], 1),
        "client peak GB": round(_gb(dist["peak_rss"]), 2),
        "worker peaks GB": " / ".join(f"{_gb(p):.2f}" for p in dist["worker_peak"]),
        "under limit": all(
            p < lim for p, lim in zip(dist["worker_peak"], dist["worker_limit"], strict=True)
        ),
        "KS s": info.get("ks_seconds"),
        "KS halo rows/hop": info.get("ks_halo_rows_per_hop"),
        "KS halo MB": round(info.get("ks_halo_bytes", 0) / 2**20, 1),
        "halo MB sent (all passes)": round(info.get("halo_bytes_sent", 0) / 2**20, 1),
        "dask transfer MB": round(info.get("worker_bytes_sent", 0) / 2**20, 1),
        "forward passes": info["forward_passes"],
        "forward s": info["forward_seconds"],
    }
    if local is not None:
        here = pd.DataFrame(**local["findings"])
        there = pd.DataFrame(**dist["findings"])
        row["equal findings"] = bool(here.equals(there)) and local["verdict"] == dist["verdict"]
        row["edges"] = local["edges"]
    row["stages (dist)"] = ", ".join(f"{k} {v:.0f}" for k, v in dist["stages"].items())
    if local is not None:
        row["stages (local)"] = ", ".join(f"{k} {v:.0f}" for k, v in local["stages"].items())
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit-fraction", type=float, default=0.5)
    parser.add_argument("--worker-limit-gb", type=float, default=None)
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--partition", choices=["contiguous", "metis"], default="contiguous")
    parser.add_argument("--num-parts", type=int, default=0, help="0: audit_model's default")
    parser.add_argument("--train-nodes", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    import pandas as pd

    header = RunHeader("bench_distributed_audit.py")
    with tempfile.TemporaryDirectory(prefix="benchdist_") as tmp:
        ckpt = Path(tmp) / "gcn.ckpt"
        start = time.perf_counter()
        acc = train(ckpt, args.train_nodes, args.epochs)
        print(f"trained GCN in {time.perf_counter() - start:.1f} s, test acc {acc:.3f}")
        rows = [one_size(args, ckpt, n, tmp) for n in args.nodes]
    frame = pd.DataFrame(rows)
    stage_cols = [c for c in frame.columns if c.startswith("stages")]
    table = fmt_table(frame.drop(columns=stage_cols))
    print(table)
    stages = "\n".join(
        f"- {r['nodes']:,} nodes: " + "; ".join(f"{c}: {r[c]}" for c in stage_cols if c in r)
        for r in rows
    )
    text = "\n".join(
        header.lines(
            "The audit on a Dask LocalCluster vs one process",
            "1 per process (`OMP_NUM_THREADS=1`); workers: single-threaded processes",
        )
        + [
            f"GCN (3 layers) trained on `synthetic_credit_graph({args.train_nodes:,})` "
            f"({args.epochs} epochs, test accuracy {acc:.3f}); audited graphs "
            "`synthetic_credit_graph(N, seed=0)`, default audit (`backend='auto'`). "
            "Worker memory limit: dask `memory_limit` of each worker.",
            "",
            table,
            "",
            "Stage seconds:",
            "",
            stages,
            "",
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.exists() and args.out == RESULTS:
        text = args.out.read_text().rstrip() + "\n\n" + text
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
