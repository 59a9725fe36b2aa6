"""GPU figures: KS embedding and exact evidence search on CUDA vs CPU, with equality checks.

Usage::

    python benchmarks/bench_gpu.py [--sizes 100000 1000000] [--k 10] [--queries 2000]
        [--repeats 3] [--out FILE]

Needs a CUDA device: without one it prints "no CUDA device" and exits 0 without writing
anything (never required by CI). For each size N, ``synthetic_credit_graph(N, seed=0)``,
predictions = a seeded random class per node (the search cost does not depend on them):

* KS: ``ks_embedding(x, edge_index, num_hops=3)`` with ``device="cpu"`` and ``"cuda"`` (best
  of ``repeats``; the CUDA time includes the host -> device copy and a synchronize), max abs
  difference and ``allclose(rtol=1e-4, atol=1e-5)``;
* exact search: ``CounterfactualEvidence(device=...)`` fitted on the test nodes, then the local
  top-``k`` of ``queries`` test nodes; time on both devices and the share of identical evidence
  lists (the CUDA path differs only in the float32 rounding of the products, so a near-tie can
  swap places);
* exact global top-``k`` (``global_evidence(k)``, all test nodes against all test nodes, row
  blocks): time once on each device and whether the pair lists are equal;
* the whole audit on the GPU (``--audit-nodes N``, 0 skips it): a GCN trained with the default
  ``accelerator="auto"`` on ``synthetic_credit_graph(20000, seed=0)`` (the accelerator Lightning
  chose and the training time are recorded), then ``gnnaudit.audit_model(model, data_N,
  backend="exact", device=...)`` on ``"cpu"`` and ``"cuda"``: wall time of each, and whether
  the findings agree (same findings, same flags, values within 1e-3).

Writes ``benchmarks/results/gpu.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_audit import RunHeader, fmt_table  # noqa: E402

RESULTS = HERE / "results" / "gpu.md"


def timed(fn, repeats: int, sync) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        out = fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best, out


def audit_on_devices(nodes: int, sync) -> list[str]:
    """Train with ``accelerator="auto"``, audit on CPU and CUDA; markdown lines."""
    import logging
    import warnings

    import numpy as np
    import pandas as pd

    import gnnaudit
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.training import train_node_classifier

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    start = time.perf_counter()
    module, metrics = train_node_classifier(synthetic_credit_graph(20_000, seed=0), "gcn", seed=0)
    train_s = time.perf_counter() - start
    trained_on = metrics["device"]
    data = synthetic_credit_graph(nodes, seed=0)
    rows, reports = [], {}
    for dev in ("cpu", "cuda"):
        sync()
        start = time.perf_counter()
        reports[dev] = gnnaudit.audit_model(
            module.to(dev), data, backend="exact", device=dev, progress=False
        )
        sync()
        rows.append({"device": dev, "audit s": time.perf_counter() - start})
    cpu, gpu = reports["cpu"].findings, reports["cuda"].findings
    same = list(cpu["finding"]) == list(gpu["finding"]) and list(cpu["flagged"]) == list(
        gpu["flagged"]
    )
    values = np.allclose(
        cpu["value"].astype(float), gpu["value"].astype(float), atol=1e-3, equal_nan=True
    )
    print(rows, same, values, flush=True)
    return [
        f'Whole audit: GCN trained by `train_node_classifier` (default `accelerator="auto"`, '
        f"200 epochs, 20,000 nodes) in {train_s:.1f} s; Lightning trained on `{trained_on}` "
        f"(test accuracy {metrics.get('test_acc', float('nan')):.3f}). "
        f'`audit_model(backend="exact")` on {nodes:,} nodes:',
        "",
        fmt_table(pd.DataFrame(rows)),
        "",
        f"Findings equal on both devices (names and flags): {same}; values within 1e-3: {values}.",
        "",
        "CUDA verdict: " + str(reports["cuda"].verdict),
        "",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--audit-nodes", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device")
        return 0

    import numpy as np
    import pandas as pd

    from gnnaudit.audit import CounterfactualEvidence
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.graph_ops import ks_embedding

    def sync() -> None:
        torch.cuda.synchronize()

    header = RunHeader("bench_gpu.py")
    gpu = torch.cuda.get_device_name(0)
    rows = []
    for n in args.sizes:
        data = synthetic_credit_graph(num_nodes=n, seed=0)
        rng = np.random.default_rng(0)
        pred = torch.from_numpy(rng.integers(0, 2, n))
        row: dict = {"nodes": n, "edges": int(data.edge_index.size(1))}
        for dev in ("cpu", "cuda"):
            sec, emb = timed(
                lambda dev=dev, g=data: ks_embedding(g.x, g.edge_index, num_hops=3, device=dev),
                args.repeats,
                sync,
            )
            row[f"KS {dev} s"] = sec
            if dev == "cpu":
                ref = emb
            else:
                gpu_emb = emb.cpu()
                row["KS max abs diff"] = f"{float((gpu_emb - ref).abs().max()):.2e}"
                row["KS allclose"] = bool(torch.allclose(gpu_emb, ref, rtol=1e-4, atol=1e-5))
        test_ids = torch.nonzero(data.test_mask).view(-1).numpy()
        queries = test_ids[: args.queries]
        found = {}
        for dev in ("cpu", "cuda"):
            ce = CounterfactualEvidence(device=dev)
            start = time.perf_counter()
            ce.fit(data, predictions=pred)
            sync()
            row[f"fit {dev} s"] = time.perf_counter() - start
            sec, local = timed(
                lambda ce=ce, q=queries: ce.search_local(q, args.k), args.repeats, sync
            )
            row[f"search {dev} s"] = sec
            found[dev] = local
            sync()
            start = time.perf_counter()
            found[f"global {dev}"] = ce.global_evidence(k=args.k)
            sync()
            row[f"global top-k {dev} s"] = time.perf_counter() - start
        same = (found["cpu"].evidence == found["cuda"].evidence).all(axis=1)
        row["identical lists"] = float(same.mean())
        row["max sim diff"] = (
            f"{float(np.abs(found['cpu'].similarity - found['cuda'].similarity).max()):.2e}"
        )
        row["global pairs equal"] = bool(
            found["global cpu"][["node_u", "node_v"]].equals(
                found["global cuda"][["node_u", "node_v"]]
            )
        )
        rows.append(row)
        print(row, flush=True)
    table = fmt_table(pd.DataFrame(rows))
    print(table)
    audit_lines = audit_on_devices(args.audit_nodes, sync) if args.audit_nodes else []
    text = "\n".join(
        header.lines(
            "GPU: KS embedding and exact search, CUDA vs CPU",
            f"(CPU side) torch {torch.get_num_threads()}",
            machine_extra=f"; GPU: {gpu}",
            versions_extra=f", CUDA {torch.version.cuda}",
        )
        + [
            f"KS: `ks_embedding(num_hops=3)`, best of {args.repeats} (CUDA: host -> device copy "
            f"included). Search: `CounterfactualEvidence(device=...)` fit (KS + index), then "
            f"`search_local` of {args.queries} test nodes, k = {args.k}; identical lists = share "
            "of queries whose evidence list is the same on both devices. Global top-k: "
            f"`global_evidence(k={args.k})` over all test nodes, timed once per device.",
            "",
            table,
            "",
            *audit_lines,
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
