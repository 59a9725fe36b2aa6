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

Second table: ``FairDen(n_clusters=2).fit`` end to end at ``--fairden-n`` points (default
2,000; 10-D blobs, a random 50/50 sensitive attribute as in the paper's runtime experiments,
App. A.3), best of ``--repeats``, with the stage timings; and the same fit with the dc-tree
built by the dense MST (what ``dense_max_n = 2000`` did before) for comparison.
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
        tree = DCTree(min_samples=min_pts, mst_method=method).fit(X)  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - t0)
        weight = tree.mst_.total_weight
    return best, weight


def fairden_rows(n: int, repeats: int) -> list[dict[str, object]]:
    """FairDen at ``n`` points: default (auto MST) and with a dense-MST dc-tree passed in."""
    import warnings

    from sklearn.datasets import make_blobs

    from gnnaudit.clustering import FairDen
    from gnnaudit.graph_ops import DCTree

    X, _ = make_blobs(n_samples=n, n_features=10, centers=2, random_state=0)
    s = np.random.default_rng(0).permutation(np.arange(n) % 2)
    rows: list[dict[str, object]] = []
    for variant in ("default (auto MST)", "dense MST dc-tree (before)"):
        best, model = np.inf, None
        for _ in range(repeats):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                t0 = time.perf_counter()
                tree = None
                if variant.startswith("dense"):
                    tree = DCTree(min_samples=19, mst_method="dense").fit(X)
                fitted = FairDen(n_clusters=2).fit(X, sensitive_features=s, dc_tree=tree)
                elapsed = time.perf_counter() - t0
            if elapsed < best:
                best, model = elapsed, fitted
        assert model is not None
        rows.append(
            {
                "variant": variant,
                "n": n,
                "fit_s": best,
                **{f"{k}_s": v for k, v in model.timings_.items()},
                "dc_tree_method": model.dc_tree_.mst_method_,
                "balance": model.balance_,
                "load_1min": os.getloadavg()[0],
            }
        )
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 500, 1000, 2000, 5000])
    ap.add_argument("--dims", type=int, nargs="+", default=[2, 5, 10])
    ap.add_argument("--min-pts", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fairden-n", type=int, default=2000)
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
    fd = pd.DataFrame(fairden_rows(args.fairden_n, args.repeats))
    wins = df.groupby("n")["dense/boruvka"].min()
    crossover = next((int(n) for n in sorted(wins.index) if (wins.loc[n:] >= 1).all()), None)
    lines = header.lines(
        "Dense vs Boruvka MST in DCTree.fit (crossover)",
        "1 (OMP/OPENBLAS/MKL_NUM_THREADS=1, faiss 1 thread)",
    ) + [
        f"Timings: best of {args.repeats} runs of `DCTree(min_samples={args.min_pts}, "
        "mst_method=...).fit(X)`; data `make_blobs(n, d, centers=5, random_state=0)`. "
        "`dense/boruvka` > 1: Boruvka is faster.",
        "",
        fmt_table(df, floatfmt="%.4g"),
        "",
        f"Smallest measured size from which Boruvka is at least as fast in every dimension: "
        f"{crossover}.",
        "",
        f"## FairDen at n = {args.fairden_n:,} (10-D blobs, random 50/50 sensitive attribute, "
        f"minPts 19, best of {args.repeats})",
        "",
        "`fit_s` is the whole `FairDen(n_clusters=2).fit`; the other columns are its "
        "`timings_` of the best run (`dc_tree_s` of the dense variant is the check of the "
        "passed tree; its `fit_s` includes building that tree).",
        "",
        fmt_table(fd, floatfmt="%.4g"),
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
