"""Halo sizes of contiguous-range vs METIS partitions: what the distributed audit moves.

Usage::

    python benchmarks/bench_partition_halo.py [--nodes 100000] [--parts 2 4 8] [--out FILE]

For each graph and partition count P, both partitioners (``contiguous_partition``: ranges of
node ids; ``metis_partition``: pymetis, seed 0) and the figures the distributed audit pays
for (:mod:`gnnaudit.audit.distributed.ks`, :mod:`gnnaudit.audit.distributed.layers`):

* **cut edges**: directed edges whose two ends lie in different partitions;
* **halo rows**: summed over partitions, the distinct in-neighbours a partition does not own
  (rows received per KS hop and per forward layer; at most ``n (1 - 1/P)``), as a share of n;
* **METIS s**: seconds to compute the METIS partition (the contiguous one is free).

Graphs: ``synthetic_credit_graph(n)`` (k-NN in feature space + random acquaintances: small
world), and a graph with locality, ``grid``: a 2-D lattice of ``n`` nodes with its ids
shuffled (so contiguous ranges see no locality either; METIS recovers it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_audit import RunHeader, fmt_table  # noqa: E402

RESULTS = HERE / "results" / "partition_halo.md"


def grid_graph(n: int, seed: int = 0) -> torch.Tensor:
    """Directed edges (both ways) of a ``side x side`` lattice, node ids shuffled."""
    side = int(n**0.5)
    ids = torch.arange(side * side).view(side, side)
    right = torch.stack([ids[:, :-1].reshape(-1), ids[:, 1:].reshape(-1)])
    down = torch.stack([ids[:-1, :].reshape(-1), ids[1:, :].reshape(-1)])
    edges = torch.cat([right, down, right.flip(0), down.flip(0)], dim=1)
    perm = torch.randperm(side * side, generator=torch.Generator().manual_seed(seed))
    return perm[edges]


def halo_rows(edge_index: torch.Tensor, parts: torch.Tensor) -> int:
    """Sum over partitions of the distinct sources of edges into it owned elsewhere."""
    src, dst = edge_index
    cross = parts[src] != parts[dst]
    num_parts = int(parts.max()) + 1
    # one (receiving partition, source) pair per halo row
    keys = torch.unique(parts[dst[cross]] * parts.numel() + src[cross])
    return int(keys.numel()) if num_parts > 1 else 0


def main() -> None:
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.graph_ops.partitioned import contiguous_partition, metis_partition

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--parts", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    import pandas as pd

    header = RunHeader("bench_partition_halo.py")
    graphs = {
        "credit": synthetic_credit_graph(args.nodes, seed=0).edge_index,
        "grid (shuffled ids)": grid_graph(args.nodes),
    }
    rows = []
    for name, edges in graphs.items():
        n = int(edges.max()) + 1
        for num_parts in args.parts:
            for method in ("contiguous", "metis"):
                start = time.perf_counter()
                if method == "metis":
                    parts = metis_partition(edges, n, num_parts)
                else:
                    parts = contiguous_partition(n, num_parts)
                seconds = time.perf_counter() - start
                halo = halo_rows(edges, parts)
                rows.append(
                    {
                        "graph": name,
                        "nodes": n,
                        "edges": int(edges.size(1)),
                        "P": num_parts,
                        "partition": method,
                        "cut edges %": round(
                            100 * float((parts[edges[0]] != parts[edges[1]]).float().mean()), 2
                        ),
                        "halo rows": halo,
                        "halo / n": round(halo / n, 3),
                        "METIS s": f"{seconds:.2f}" if method == "metis" else "-",
                    }
                )
                print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    table = fmt_table(frame)
    print(table)
    reading = []
    for name in graphs:
        at = frame[(frame["graph"] == name) & (frame["P"] == max(args.parts))]
        halo = dict(zip(at["partition"], at["halo rows"], strict=True))
        reading.append(
            f"- {name}, P = {max(args.parts)}: METIS's halos hold "
            f"{halo['metis'] / max(halo['contiguous'], 1):.1%} of the contiguous ranges' rows."
        )
    text = "\n".join(
        header.lines("Halo sizes: contiguous ranges vs METIS", "default (METIS is single-threaded)")
        + [
            "Halo rows: summed over partitions, the distinct in-neighbours a partition does not "
            "own (rows received per KS hop and per forward layer).",
            "",
            table,
            "",
            "Reading (computed from the table):",
            "",
            *reading,
            "",
            "On the small-world credit graph METIS cuts fewer edges but the halos stay close to "
            "the rest of the graph (the random acquaintances reach every partition); on a "
            "graph with locality the halos shrink to the partition boundaries.",
            "",
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
