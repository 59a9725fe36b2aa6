"""Dense against Boruvka MST in ``DCTree.fit``: where does the KD-tree Boruvka start to win?

Usage::

    python benchmarks/bench_mst_crossover.py [--sizes 50 100 200 500 1000 2000 5000]
        [--dims 2 5 10] [--min-pts 5] [--repeats 3] [--out FILE]

Per size and dimension: ``DCTree(min_pts, mst_method=m).fit(X)`` for ``m`` in ``dense``
(full mutual-reachability matrix, scipy MST, ``O(n^2)``) and ``boruvka`` (KD-tree Boruvka),
best of ``--repeats`` runs, one thread. Data: ``make_blobs(n, d, centers=5, random_state=0)``.
The two trees are both exact (their total weights are printed as a check). The smallest size
from which Boruvka is at least as fast in every dimension sets
:data:`gnnaudit.graph_ops.dc_tree.DENSE_MAX_N`.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's gnnaudit, not an installed one

RESULTS = HERE / "results" / "mst_crossover.md"


def fit_time(X: np.ndarray, min_pts: int, method: str, repeats: int) -> tuple[float, float]:
    """(best seconds of ``DCTree.fit``, total MST weight)."""
    from gnnaudit.graph_ops import DCTree

    best, weight = np.inf, 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        tree = DCTree(min_pts=min_pts, mst_method=method).fit(X)  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - t0)
        weight = tree.mst_.total_weight
    return best, weight


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 500, 1000, 2000, 5000])
    ap.add_argument("--dims", type=int, nargs="+", default=[2, 5, 10])
    ap.add_argument("--min-pts", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    import faiss
    from bench_audit import RunHeader, fmt_table
    from sklearn.datasets import make_blobs

    faiss.omp_set_num_threads(1)
    header = RunHeader("bench_mst_crossover.py")
    rows = []
    for d in args.dims:
        for n in args.sizes:
            X, _ = make_blobs(n_samples=n, n_features=d, centers=5, random_state=0)
            dense_s, dense_w = fit_time(X, args.min_pts, "dense", args.repeats)
            bor_s, bor_w = fit_time(X, args.min_pts, "boruvka", args.repeats)
            rows.append(
                {
                    "d": d,
                    "n": n,
                    "dense_s": dense_s,
                    "boruvka_s": bor_s,
                    "dense/boruvka": dense_s / bor_s,
                    "rel_weight_diff": abs(dense_w - bor_w) / max(dense_w, 1e-300),
                    "load_1min": os.getloadavg()[0],
                }
            )
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    wins = df.groupby("n")["dense/boruvka"].min()
    crossover = next((int(n) for n in sorted(wins.index) if (wins.loc[n:] >= 1).all()), None)
    lines = header.lines(
        "Dense vs Boruvka MST in DCTree.fit (crossover)",
        "1 (OMP/OPENBLAS/MKL_NUM_THREADS=1, faiss 1 thread)",
    ) + [
        f"Timings: best of {args.repeats} runs of `DCTree(min_pts={args.min_pts}, "
        "mst_method=...).fit(X)`; data `make_blobs(n, d, centers=5, random_state=0)`. "
        "`dense/boruvka` > 1: Boruvka is faster.",
        "",
        fmt_table(df, floatfmt="%.4g"),
        "",
        f"Smallest measured size from which Boruvka is at least as fast in every dimension: "
        f"{crossover}.",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
