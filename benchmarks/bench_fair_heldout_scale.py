"""The held-out protocol at Pokec's size: time and memory of training and the default remedy.

Usage::

    python benchmarks/bench_fair_heldout_scale.py                 # Pokec-z's size, seed 0
    python benchmarks/bench_fair_heldout_scale.py --nodes 20000 --epochs 200 --no-write

FairGNN's Pokec-z / Pokec-n (about 67k nodes, 0.6M edges, 265 feature columns) are the largest
graphs of the fair-GNN literature, and their files are not in this repository. This benchmark
writes a seeded stand-in **in their layout** (``region_job.csv`` and
``region_job_relationship.txt``, read by ``load_nifty("pokec_z", ..., split="fairgnn")``) with
Pokec-z's node count, about 9 relationship rows per node and the same column roles: a binary
``region`` (the sensitive attribute), ``I_am_working_in_field`` with 45% unknown labels (-1) and
known ones binarised above 1, ``AGE``, ``completion_percentage`` and 260 binary interest columns
drawn from 8 latent traits. Labels depend on the traits, the age and the region; 85% of the
relationships join nodes of the same region with nearby traits, so the graph itself carries the
attribute, as Pokec's regional friendships do.

Then it runs :func:`bench_fair_heldout.run_one` on it, the protocol of the held-out check
(NIFTY's trainer settings for 1000 epochs, then ``FairFinetune.finetune(model, data,
sensitive="region", random_state=seed)`` with every default), and reports the wall time of each
step and the peak resident memory of the process. The stand-in is not Pokec: its fairness
figures are printed for completeness, not as Pokec's; the point is that the default remedy runs
at this size, and how long it takes.

Writes ``benchmarks/results/fair_heldout_scale.md``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's gnnaudit, not an installed one

from bench_audit import RunHeader, fmt_table, set_threads  # noqa: E402

set_threads()  # one thread, before numpy is imported

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from bench_fair_heldout import run_one  # noqa: E402

RESULTS = HERE / "results" / "fair_heldout_scale.md"
POKEC_Z_NODES = 67_797


def write_pokec_layout(folder: Path, nodes: int, seed: int = 7) -> int:
    """Write the stand-in of the module docstring into ``folder``; returns its relationship
    rows."""
    rng = np.random.default_rng(seed)
    region = (rng.random(nodes) < 0.6).astype(int)
    age = np.clip(rng.normal(25 + 2 * region, 8, nodes), 0, 80).round()
    traits = rng.normal(size=(nodes, 8))
    loading = rng.normal(size=(8, 260))
    regional = 0.5 * region[:, None] * (rng.random(260) < 0.1)
    interests = traits @ loading / 3 + rng.normal(size=(nodes, 260)) + regional > 1.0
    score = 0.08 * (age - 25) + traits[:, 0] + 0.6 * region + 0.5 * rng.normal(size=nodes)
    label = np.where(score > 0.3, rng.integers(2, 10, nodes), rng.integers(0, 2, nodes))
    label[rng.random(nodes) < 0.45] = -1
    user_id = rng.permutation(10 * nodes)[:nodes]
    columns = {
        "user_id": user_id,
        "public": rng.integers(0, 2, nodes),
        "completion_percentage": rng.integers(0, 101, nodes),
        "gender": rng.integers(0, 2, nodes),
        "region": region,
        "AGE": age,
        "I_am_working_in_field": label,
    }
    frame = pd.DataFrame(columns)
    interest = pd.DataFrame(interests.astype(int), columns=[f"interest_{j}" for j in range(260)])
    pd.concat([frame, interest], axis=1).to_csv(folder / "region_job.csv", index=False)
    # relationships: 85% to a node of the same region with nearby first trait, else anywhere
    rows = 9 * nodes
    src = rng.integers(0, nodes, rows)
    order = np.argsort(region * 10 + traits[:, 0] / 10, kind="stable")
    rank = np.empty(nodes, dtype=np.int64)
    rank[order] = np.arange(nodes)
    near = order[np.clip(rank[src] + rng.integers(-400, 400, rows), 0, nodes - 1)]
    dst = np.where(rng.random(rows) < 0.85, near, rng.integers(0, nodes, rows))
    keep = src != dst
    pairs = np.c_[user_id[src[keep]], user_id[dst[keep]]]
    np.savetxt(folder / "region_job_relationship.txt", pairs, fmt="%d", delimiter="\t")
    return int(keep.sum())


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=POKEC_Z_NODES)
    ap.add_argument("--seed", type=int, default=0, help="model seed (the split is published)")
    ap.add_argument("--epochs", type=int, default=1000, help="vanilla training epochs")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    header = RunHeader(Path(__file__).name)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "pokec_z"
        folder.mkdir()
        t0 = time.perf_counter()
        relationships = write_pokec_layout(folder, args.nodes)
        t_write = time.perf_counter() - t0
        rss_before = peak_rss_mb()
        row, _ = run_one(Path(tmp), "pokec_z", args.seed, args.epochs)
    cost = pd.DataFrame(
        [
            {
                "nodes": args.nodes,
                "relationship rows": relationships,
                "epochs": args.epochs,
                "write s": round(t_write, 1),
                "train s": round(row["train_s"], 1),
                "finetune s": round(row["finetune_s"], 1),
                "peak RSS MB (before / after)": f"{rss_before:.0f} / {peak_rss_mb():.0f}",
            }
        ]
    )
    shown = ["auroc", "bacc", "dsp", "deo", "cf", "pos_share"]
    figures = pd.DataFrame(
        [
            {"model": which, **{m: round(row[f"{prefix}_{m}"], 3) for m in shown}}
            for which, prefix in (("vanilla", "van"), ("FairFinetune default", "ff"))
        ]
    )
    text = "\n".join(
        [
            *header.lines(
                "The held-out protocol at Pokec-z's size (a stand-in in its layout)",
                "1 (OMP_NUM_THREADS=1)",
            ),
            "FairGNN's Pokec-z" + __doc__.split("FairGNN's Pokec-z")[1].split("Writes")[0],
            "## Cost",
            "",
            fmt_table(cost),
            "",
            f"## Test-node figures of the stand-in (pass rule: {row['passed']})",
            "",
            fmt_table(figures),
            "",
        ]
    )
    print(fmt_table(cost))
    print(fmt_table(figures))
    if not args.no_write:
        args.out.write_text(text)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
