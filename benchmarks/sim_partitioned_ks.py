"""Partitioned KS propagation, simulated in one process: equal to the unpartitioned result?

Usage::

    python benchmarks/sim_partitioned_ks.py [--nodes 1000000] [--parts 8] [--hops 3]
        [--modes halo exchange] [--out FILE]

``synthetic_credit_graph(nodes, seed=0)``; ``ks_embedding(x, edge_index, hops)`` once over the
whole graph (the reference), then :func:`gnnaudit.graph_ops.partitioned.partitioned_ks` with
``parts`` contiguous ranges of node ids in each mode:

* ``halo``: each partition gathers its ``hops``-hop in-neighbourhood once and propagates on it;
* ``exchange``: per hop each partition reads the current rows of its 1-hop halo.

Reports, per mode, the max abs difference to the reference, ``torch.equal`` and
``np.allclose(rtol=1e-5, atol=1e-6)``; per partition: owned nodes, halo rows, edges, seconds
and the estimated working set (``PartitionedKS.working_set_bytes``); the process's peak RSS.
Writes ``benchmarks/results/partitioned_ks.md``. Threads: 1 (``OMP_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_audit import RunHeader, fmt_table  # noqa: E402

RESULTS = HERE / "results" / "partitioned_ks.md"


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--hops", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=["halo", "exchange"])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    import numpy as np
    import pandas as pd
    import torch

    from gnnaudit._threads import configure_threads
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.graph_ops import ks_embedding
    from gnnaudit.graph_ops.partitioned import contiguous_partition, partitioned_ks

    configure_threads(1)
    header = RunHeader("sim_partitioned_ks.py")
    start = time.perf_counter()
    data = synthetic_credit_graph(num_nodes=args.nodes, seed=0)
    gen_s = time.perf_counter() - start
    n, d, e = data.num_nodes, data.x.size(1), data.edge_index.size(1)
    print(f"graph: {n} nodes, {e} directed edges, d = {d} ({gen_s:.1f} s)", flush=True)
    start = time.perf_counter()
    ref = ks_embedding(data.x, data.edge_index, num_hops=args.hops)
    ref_s = time.perf_counter() - start
    print(f"unpartitioned ks_embedding: {ref_s:.2f} s", flush=True)
    parts = contiguous_partition(n, args.parts)

    summary, per_part = [], []
    for mode in args.modes:
        start = time.perf_counter()
        res = partitioned_ks(data.x, data.edge_index, parts, num_hops=args.hops, mode=mode)
        total_s = time.perf_counter() - start
        diff = float((res.embedding - ref).abs().max())
        summary.append(
            {
                "mode": mode,
                "seconds": total_s,
                "max abs diff": f"{diff:.3g}",
                "torch.equal": bool(torch.equal(res.embedding, ref)),
                "np.allclose": bool(
                    np.allclose(res.embedding.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
                ),
                "mean halo / own": float(np.mean(res.halo_sizes) / np.mean(res.part_sizes)),
            }
        )
        print(summary[-1], flush=True)
        for p, (own, halo, edges, sec, ws) in enumerate(
            zip(
                res.part_sizes,
                res.halo_sizes,
                res.edges,
                res.seconds,
                res.working_set_bytes(d),
                strict=True,
            )
        ):
            per_part.append(
                {
                    "mode": mode,
                    "part": p,
                    "own": own,
                    "halo rows": halo,
                    "halo / n": halo / n,
                    "edges": edges,
                    "seconds": sec,
                    "working set MB": ws / 2**20,
                }
            )
        del res
    rss = peak_rss_gb()
    s_table = fmt_table(pd.DataFrame(summary))
    p_table = fmt_table(pd.DataFrame(per_part))
    print(s_table)
    print(p_table)
    text = "\n".join(
        header.lines(
            "Partitioned KS propagation (simulated in one process)",
            "1 (`OMP_NUM_THREADS=1`, `configure_threads(1)`)",
        )
        + [
            f"`synthetic_credit_graph({n}, seed=0)`: {e} directed edges, d = {d} (generated in "
            f"{gen_s:.1f} s). Reference: `ks_embedding(num_hops={args.hops})` over the whole "
            f"graph, {ref_s:.2f} s ({1e6 * ref_s / n:.2f} us per node). Partitions: "
            f"{args.parts} contiguous ranges of node ids (`contiguous_partition`). Process peak "
            f"RSS {rss:.2f} GB (whole run: graph, reference, partitioned result).",
            "",
            "## Equality with the unpartitioned embedding",
            "",
            s_table,
            "",
            "## Per partition",
            "",
            "halo rows: rows read from other partitions (halo: the L-hop halo, once; exchange: "
            "the 1-hop halo, once per hop). working set: `PartitionedKS.working_set_bytes` "
            "(rows x d x 4 B x 4 arrays (halo) or 2 (exchange) + 32 B per edge).",
            "",
            p_table,
            "",
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
