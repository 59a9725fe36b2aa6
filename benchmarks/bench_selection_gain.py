"""Time of FairFinetune's gain interval (``selection_gain.gain_table``) against the number of
validation nodes.

Usage::

    python benchmarks/bench_selection_gain.py                 # writes results/selection_gain.md
    python benchmarks/bench_selection_gain.py --nodes 1000 --no-write

Per size ``n``: seeded random decisions of a vanilla and a chosen model on ``n`` validation
nodes (2 groups, half label 1, the chosen model differing on 10% of the decisions and on every
counterfactual flag), the three targeted gaps, ``n_boot`` 1000 (the default); the best of 3
calls. The cost is ``n_boot x n`` multinomial counts and their product with the decisions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's gnnaudit, not an installed one

from bench_audit import RunHeader, fmt_table, set_threads  # noqa: E402

set_threads()  # one thread, before numpy is imported

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from gnnaudit.training.selection_gain import DEFAULT_N_BOOT, gain_table  # noqa: E402

RESULTS = HERE / "results" / "selection_gain.md"


def one(n: int, repeats: int = 3) -> dict[str, float]:
    """Best-of-``repeats`` seconds of one :func:`gain_table` call on ``n`` nodes."""
    rng = np.random.default_rng(0)
    vanilla = np.stack([rng.integers(0, 2, n), rng.integers(0, 2, n)], axis=1).astype(float)
    chosen = vanilla.copy()
    chosen[: n // 10, 0] = 1 - chosen[: n // 10, 0]
    chosen[:, 1] = 0
    groups, label1 = rng.integers(0, 2, n), rng.random(n) < 0.5
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        gain_table(vanilla, chosen, groups, label1, ("cf", "dsp", "deo"))
        best = min(best, time.perf_counter() - t0)
    return {"validation_nodes": n, "n_boot": DEFAULT_N_BOOT, "seconds": best}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000, 50000, 200000])
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    header = RunHeader(Path(__file__).name)
    table = fmt_table(pd.DataFrame([one(n) for n in args.nodes]))
    print(table)
    if not args.no_write:
        doc = __doc__.split("Per size")[1].strip()
        text = [
            *header.lines("FairFinetune's gain interval: time", "1"),
            "Per size " + doc,
            "",
            table,
            "",
        ]
        args.out.write_text("\n".join(text))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
