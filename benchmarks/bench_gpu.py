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
  swap places).

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
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
        same = (found["cpu"].evidence == found["cuda"].evidence).all(axis=1)
        row["identical lists"] = float(same.mean())
        row["max sim diff"] = (
            f"{float(np.abs(found['cpu'].similarity - found['cuda'].similarity).max()):.2e}"
        )
        rows.append(row)
        print(row, flush=True)
    table = fmt_table(pd.DataFrame(rows))
    print(table)
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
            "of queries whose evidence list is the same on both devices.",
            "",
            table,
            "",
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
