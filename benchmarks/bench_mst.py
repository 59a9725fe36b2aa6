"""Mutual-reachability MST at scale: gnnaudit's exact Boruvka against the ``hdbscan`` package.

Usage::

    python benchmarks/bench_mst.py [--sizes 10000 50000 100000] [--dims 10] [--min-pts 6]
        [--out FILE]

Data: ``sklearn.datasets.make_blobs(n, d, centers=20, random_state=0)``. Per size:

* ours: what ``DCTree(mst_method="boruvka").fit`` runs before the dendrogram -- a KD-tree,
  the k = max(minPts, 16) nearest neighbours (core distances), then
  :func:`gnnaudit.graph_ops.mst.mst_boruvka` (cell pruning with faiss k-means cells);
* hdbscan: ``hdbscan._hdbscan_boruvka.KDTreeBoruvkaAlgorithm(KDTree(X, leaf_size=40),
  min_samples=minPts - 1, leaf_size=13, approx_min_span_tree=False, n_jobs=1)`` (exactly
  what ``HDBSCAN(algorithm="boruvka_kdtree", approx_min_span_tree=False)`` runs for its
  tree: core distances by a dual-tree query, then dual-tree Boruvka), ``spanning_tree()``
  timed with the KD-tree build. hdbscan's ``min_samples`` does not count the point itself,
  ours (``minPts``) does: ``min_samples = minPts - 1`` defines the same core distances.
* total MST weights and their relative difference (the two trees are both exact: the
  difference is float rounding only).

Threads: one (``OMP_NUM_THREADS=1``, ``faiss.omp_set_num_threads(1)``, hdbscan ``n_jobs=1``).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's gnnaudit, not an installed one

RESULTS = HERE / "results" / "mst.md"


def load() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def ours(X: np.ndarray, min_pts: int) -> tuple[float, float, float, float]:
    """(knn s, boruvka s, total s, total weight)."""
    from sklearn.neighbors import KDTree

    from gnnaudit.graph_ops.mst import knn_query, mst_boruvka

    t0 = time.perf_counter()
    tree = KDTree(X)
    nd, ni = knn_query(X, max(min_pts, 16), tree=tree)
    core = nd[:, min_pts - 1].copy()
    t1 = time.perf_counter()
    mst = mst_boruvka(X, core, tree=tree, knn=(nd, ni))
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, t2 - t0, mst.total_weight


def theirs(X: np.ndarray, min_pts: int) -> tuple[float, float]:
    """(seconds, total weight) of hdbscan's exact Boruvka MST."""
    from hdbscan._hdbscan_boruvka import KDTreeBoruvkaAlgorithm
    from sklearn.neighbors import KDTree

    t0 = time.perf_counter()
    tree = KDTree(X, leaf_size=40)
    alg = KDTreeBoruvkaAlgorithm(
        tree, min_pts - 1, leaf_size=40 // 3, approx_min_span_tree=False, n_jobs=1
    )
    mst = alg.spanning_tree()
    return time.perf_counter() - t0, float(np.asarray(mst)[:, 2].sum())


def knn_alternatives(X: np.ndarray, k: int) -> list[dict[str, float | str]]:
    """Seconds of the exact k-NN query (the core distances) by three libraries, and whether each
    returns the same k-th distances as scikit-learn's KD-tree (the one gnnaudit uses)."""
    import faiss
    from scipy.spatial import cKDTree
    from sklearn.neighbors import KDTree

    t0 = time.perf_counter()
    ref, _ = KDTree(X).query(X, k=k)
    rows: list[dict[str, float | str]] = [
        {"knn": "sklearn KDTree (used)", "seconds": time.perf_counter() - t0, "same k-th": "-"}
    ]
    t0 = time.perf_counter()
    d_ck, _ = cKDTree(X).query(X, k=k)
    rows.append(
        {
            "knn": "scipy cKDTree",
            "seconds": time.perf_counter() - t0,
            "same k-th": str(np.allclose(d_ck[:, -1], ref[:, -1])),
        }
    )
    t0 = time.perf_counter()
    index = faiss.IndexFlatL2(X.shape[1])
    xf = np.ascontiguousarray(X, dtype=np.float32)
    index.add(xf)
    d_fa, _ = index.search(xf, k)
    rows.append(
        {
            "knn": "faiss IndexFlatL2 (float32)",
            "seconds": time.perf_counter() - t0,
            "same k-th": str(
                np.allclose(np.sqrt(np.maximum(d_fa[:, -1], 0)), ref[:, -1], atol=1e-3)
            ),
        }
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000, 100000])
    ap.add_argument("--dims", type=int, default=10)
    ap.add_argument("--min-pts", type=int, default=6)
    ap.add_argument("--knn-n", type=int, default=50000, help="size of the k-NN comparison")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    import faiss
    import hdbscan
    from bench_audit import fmt_table, machine
    from sklearn.datasets import make_blobs

    import gnnaudit

    faiss.omp_set_num_threads(1)
    start = dt.datetime.now(dt.timezone.utc)
    load_before = load()
    rows = []
    for n in args.sizes:
        X, _ = make_blobs(n_samples=n, n_features=args.dims, centers=20, random_state=0)
        knn_s, bor_s, our_s, our_w = ours(X, args.min_pts)
        their_s, their_w = theirs(X, args.min_pts)
        rows.append(
            {
                "n": n,
                "ours_knn_s": knn_s,
                "ours_boruvka_s": bor_s,
                "ours_total_s": our_s,
                "hdbscan_s": their_s,
                "speedup": their_s / our_s,
                "weight_ours": our_w,
                "weight_hdbscan": their_w,
                "rel_diff": abs(our_w - their_w) / their_w,
                "load_1min": os.getloadavg()[0],
            }
        )
        print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    X, _ = make_blobs(n_samples=args.knn_n, n_features=args.dims, centers=20, random_state=0)
    knn_df = pd.DataFrame(knn_alternatives(X, max(args.min_pts, 16)))
    print(knn_df.to_string(index=False), flush=True)
    cmd = "python benchmarks/bench_mst.py " + " ".join(argv or sys.argv[1:])
    lines = [
        "# Mutual-reachability MST: gnnaudit Boruvka vs hdbscan",
        "",
        f"- date: {start:%Y-%m-%d %H:%M} UTC",
        f"- machine: {machine()}; {platform.platform()}",
        f"- load average (1/5/15 min): before {load_before}, after {load()} (the machine is "
        "shared: timings under load are inflated, compare within a row)",
        "- threads: 1 (OMP/OPENBLAS/MKL_NUM_THREADS=1, faiss 1 thread, hdbscan n_jobs=1)",
        f"- versions: python {platform.python_version()}, numpy {np.__version__}, "
        f"faiss {faiss.__version__}, hdbscan {getattr(hdbscan, '__version__', '?')}; "
        f"gnnaudit from {Path(gnnaudit.__file__).parent}",
        f"- command: `{cmd.strip()}`",
        f"- data: make_blobs(n, {args.dims}, centers=20, random_state=0); minPts = "
        f"{args.min_pts} (hdbscan min_samples = {args.min_pts - 1})",
        "",
        fmt_table(df, floatfmt="%.4g"),
        "",
        f"## Exact k-NN for the core distances (n = {args.knn_n:,}, k = {max(args.min_pts, 16)})",
        "",
        fmt_table(knn_df, floatfmt="%.3f"),
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
