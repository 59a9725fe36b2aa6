"""Benchmark FairDen: per-stage time and peak memory, and clustering quality.

Usage::

    python benchmarks/bench_fairden.py            # n = 1k, 10k, 100k (blobs, moons) + quality
    python benchmarks/bench_fairden.py --quick    # n = 1k, 5k + quality (small)

Scaling: every (dataset, n) runs in a fresh subprocess; stages are timed with
``time.perf_counter`` and their peak memory measured with ``tracemalloc`` (numpy buffers
included; the peak above the memory held before the stage), plus the process' peak RSS.
Quality: FairDen vs DBSCAN (eps chosen by DCSI on a grid, as in the paper's App. C.1) vs
unconstrained normalised spectral clustering on the same dc-tree (``F`` empty), on the three
moons and on mixed-type synthetic data.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
from provenance import commit, commit_line

THREADS = 1
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))
os.environ.setdefault("MKL_NUM_THREADS", str(THREADS))

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _data(kind: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """5-D blobs or moons (2-D moons + 3 small-noise dims) with a random 50/50 binary
    sensitive attribute (the protocol of the paper's runtime experiments, App. A.3)."""
    from sklearn.datasets import make_blobs, make_moons

    rng = np.random.default_rng(seed)
    if kind == "blobs":
        X, y = make_blobs(n, n_features=5, centers=4, cluster_std=1.0, random_state=seed)
    else:
        X2, y = make_moons(n, noise=0.05, random_state=seed)
        X = np.column_stack([X2, 0.05 * rng.normal(size=(n, 3))])
    s = rng.permutation(np.arange(n) % 2)
    return X, s


def _stage(name: str, fn, rows: dict) -> object:
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    out = fn()
    rows[f"{name}_s"] = time.perf_counter() - t0
    rows[f"{name}_MB"] = (tracemalloc.get_traced_memory()[1] - base) / 2**20
    return out


def run_single(kind: str, n: int) -> dict:
    import faiss
    import torch
    from sklearn.cluster import KMeans

    from gnnaudit.clustering.fair_spectral import (
        AffinityOperator,
        fair_embedding_matrix_free,
        fairness_matrix,
    )
    from gnnaudit.clustering.metrics import balance
    from gnnaudit.graph_ops import DCTree
    from gnnaudit.graph_ops.mst import kd_tree, knn_query, mst_boruvka

    torch.set_num_threads(THREADS)
    faiss.omp_set_num_threads(THREADS)
    X, s = _data(kind, n)
    min_pts = 2 * X.shape[1] - 1
    row: dict = {"data": kind, "n": n, "minPts": min_pts}
    tracemalloc.start()
    t_all = time.perf_counter()

    def core():
        tree = kd_tree(X)  # the library's own (scipy cKDTree)
        nd, ni = knn_query(X, max(min_pts, 16), tree=tree)
        return tree, nd, ni, nd[:, min_pts - 1].copy()

    kd, nd, ni, cd = _stage("core_distances", core, row)
    mst = _stage("mst", lambda: mst_boruvka(X, cd, tree=kd, knn=(nd, ni)), row)
    kd = nd = ni = None  # free the neighbour lists
    tree = _stage("dc_tree", lambda: DCTree.from_mst(cd, mst, min_pts), row)
    F = fairness_matrix(s)

    def eig():
        op = AffinityOperator(tree, None, 1.0, 0.0)
        return fair_embedding_matrix_free(op, F, 2, random_state=np.random.RandomState(0))

    emb = _stage("eigensolver", eig, row)
    km = _stage("kmeans", lambda: KMeans(2, n_init=10, random_state=0).fit(emb.H).labels_, row)
    row["total_s"] = time.perf_counter() - t_all
    row["tracemalloc_peak_MB"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    row["peak_rss_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    counts = np.bincount(km, minlength=2)
    lab = np.where(counts[km] >= min_pts, km, -1)
    row["balance"] = balance(lab, s)
    # end to end (Alg. 1 loop included), no tracemalloc
    from gnnaudit.clustering import FairDen

    t0 = time.perf_counter()
    model = FairDen(n_clusters=2, solver="matrix_free", random_state=0).fit(X, sensitive_features=s)
    row["FairDen_fit_s"] = time.perf_counter() - t0
    row["FairDen_k"] = model.k_
    row["FairDen_balance"] = model.balance_
    row["FairDen_rounding"] = model.rounding_
    row["FairDen_rounding_s"] = model.timings_["rounding"]
    # the paper's rounding (gnnaudit's behaviour before issue 16): the balanced rounding's cost
    t0 = time.perf_counter()
    paper = FairDen(n_clusters=2, solver="matrix_free", random_state=0, rounding="kmeans")
    paper.fit(X, sensitive_features=s)
    row["kmeans_rounding_fit_s"] = time.perf_counter() - t0
    row["fit_time_ratio"] = row["FairDen_fit_s"] / row["kmeans_rounding_fit_s"]
    row["peak_rss_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def _dbscan_by_dcsi(X: np.ndarray, min_pts: int) -> np.ndarray:
    """DBSCAN with eps from a grid of k-distance quantiles, best DCSI wins (paper App. C.1)."""
    from sklearn.cluster import DBSCAN
    from sklearn.neighbors import NearestNeighbors

    from gnnaudit.clustering.metrics import dcsi

    kd = NearestNeighbors(n_neighbors=min_pts).fit(X).kneighbors(X)[0][:, -1]
    best, best_lab = -1.0, None
    for q in (0.5, 0.7, 0.8, 0.9, 0.95, 0.99):
        lab = DBSCAN(eps=float(np.quantile(kd, q)), min_samples=min_pts).fit(X).labels_
        score = dcsi(X, lab)
        if score > best:
            best, best_lab = score, lab
    return best_lab


def quality() -> pd.DataFrame:
    from sklearn.cluster import KMeans

    from gnnaudit.clustering import FairDen
    from gnnaudit.clustering.fair_spectral import AffinityOperator, fair_embedding_matrix_free
    from gnnaudit.clustering.goodall import Goodall1
    from gnnaudit.clustering.metrics import (
        adjusted_rand_noise,
        balance,
        dcsi,
        noise_fraction,
        normalized_mutual_info_noise,
    )
    from gnnaudit.datasets.tabular import three_moons
    from gnnaudit.graph_ops import DCTree

    rows = []
    moons = three_moons(n_per_moon=500, noise=0.05, seed=0)
    # mixed-type: 3 numeric blobs (A half/half, B 90% group 0, C 90% group 1, the moons'
    # pattern) + a categorical column that follows the blob 80% of the time + a random one
    rng = np.random.default_rng(1)
    n = 1500
    centers = np.array([[0, 0, 0], [6, 0, 0], [0, 6, 0]], dtype=float)
    y = np.repeat(np.arange(3), n // 3)
    Xm = centers[y] + rng.normal(size=(n, 3))
    cat = np.column_stack(
        [np.where(rng.random(n) < 0.8, y, rng.integers(0, 3, n)), rng.integers(0, 4, n)]
    )
    p1 = np.array([0.5, 0.1, 0.9])[y]
    sens = (rng.random(n) < p1).astype(int)
    cases = [
        ("three moons", moons.X, moons.sensitive, None, 2),
        ("mixed-type blobs (3 num + 2 cat)", Xm, sens, cat, 2),
    ]
    for name, X, s, c, k in cases:
        min_pts = 2 * X.shape[1] - 1
        db = _dbscan_by_dcsi(X, min_pts)
        fair = FairDen(n_clusters=k, random_state=0).fit(X, sensitive_features=s, categorical=c)
        tree = DCTree(min_samples=min_pts).fit(X)
        dn, dc = X.shape[1], 0 if c is None else c.shape[1]
        op = AffinityOperator(
            tree, None if c is None else Goodall1(c), dn / (dn + dc), dc / (dn + dc)
        )
        H = fair_embedding_matrix_free(op, np.zeros((X.shape[0], 0)), k).H
        sc = KMeans(k, n_init=10, random_state=0).fit(H).labels_
        cnt = np.bincount(sc, minlength=k)
        sc = np.where(cnt[sc] >= min_pts, sc, -1)
        methods = [
            ("DBSCAN (eps by DCSI)", db),
            ("spectral, same dc-tree", sc),
            ("FairDen", fair.labels_),
        ]
        if c is not None:  # the paper's "FairDen-": categorical attributes left out
            numeric_only = (
                FairDen(n_clusters=k, random_state=0).fit(X, sensitive_features=s).labels_
            )
            methods.append(("FairDen- (numerical only)", numeric_only))
        for method, lab in methods:
            rows.append(
                {
                    "data": name,
                    "method": method,
                    "clusters": len(set(lab) - {-1}),
                    "balance": balance(lab, s),
                    "DCSI": dcsi(X, lab),
                    "noise": noise_fraction(lab),
                    "ARI_DB": adjusted_rand_noise(db, lab),
                    "NMI_DB": normalized_mutual_info_noise(db, lab),
                }
            )
    return pd.DataFrame(rows)


def _markdown(df: pd.DataFrame, digits: int = 3) -> str:
    """GitHub markdown table (no optional dependency)."""

    def cell(v: object) -> str:
        if isinstance(v, float | np.floating):
            return f"{v:.{digits}g}" if abs(v) >= 1000 else f"{v:.{digits}f}"
        return str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * df.shape[1]]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def _notes(scale: pd.DataFrame) -> list[str]:
    """Targets of the issue (10k: <= 60 s, <= 2 GB; 100k: <= 15 min, <= 8 GB), checked."""
    out = []
    for n, t_max, mb_max in ((10_000, 60.0, 2048.0), (100_000, 900.0, 8192.0)):
        sub = scale[scale["n"] == n] if len(scale) else scale
        for r in sub.itertuples(index=False):
            ok = r.total_s <= t_max and r.peak_rss_MB <= mb_max
            out.append(
                f"- {r.data} n={n}: {r.total_s:.1f} s (target <= {t_max:.0f} s), peak RSS "
                f"{r.peak_rss_MB:.0f} MB (target <= {mb_max:.0f} MB): {'met' if ok else 'MISSED'}"
            )
    out += [
        "- Peak RSS includes about 470 MB of imported libraries (torch, PyG, sklearn); the "
        "pipeline's own allocations are the tracemalloc columns.",
        "- Timings depend on the machine's load (load average at the start of the run: see the "
        "header); a busy machine inflates them.",
        "- Sensitive attribute of the scaling data: random 50/50 as in the paper's runtime "
        "experiments (App. A.3), so `balance` there is a sanity check only.",
        "- Quality data: the mixed-type blobs mimic the moons' pattern (blob A half/half, B 90% "
        "group 0, C 90% group 1) so that a balanced density-based 2-clustering exists; DCSI is "
        "computed on the numerical features only (it is not defined for categorical ones).",
        "- `FairDen_fit_s` is `FairDen(n_clusters=2, solver='matrix_free').fit` end to end "
        "(dc-tree, affinity, Alg. 1 loop with eigsh + k-means, the default repair rounding), "
        "measured after the staged run in the same process; `peak_rss_MB` covers both. "
        "`kmeans_rounding_fit_s` is the same fit with `rounding='kmeans'` (the paper's Alg. 1), "
        "`fit_time_ratio` the quotient (target <= 2); `FairDen_rounding` says which rounding "
        "produced the labels (`kmeans`: the paper's labels reach `min_balance`, nothing else is "
        "computed), `FairDen_rounding_s` the rounding stage's own time inside `FairDen_fit_s`.",
        "- Quality, `FairDen` rows: the default (`rounding='repair'`, issue 38). On the "
        "mixed-type blobs without their categorical columns (`FairDen-`) the paper's rounding "
        "misses 0.8 and every candidate reaching it keeps less than 70% of its DCSI, so the "
        "default returns the most balanced candidate that keeps 70% and warns "
        "(`benchmarks/results/fairden_density.md` for the rule).",
        "- The dendrogram build (in `dc_tree_s`) contains one Python union-find pass over the "
        "n - 1 sorted MST edges (about 0.3-0.5 s at 100k without tracemalloc, which slows "
        "Python-level code); everything else is vectorised.",
        "- Mixed-type data, FairDen- (categorical attributes left out): the top of that "
        "dc-tree is a chain of single outliers, so the three Gaussian blobs differ only in a "
        "narrow band of affinities (Eq. 1) and k-means on the relaxed constrained embedding may "
        "return an unbalanced split although the constraint holds for the relaxation; the "
        "Goodall1 term (Eq. 15) separates the blobs. Balance is not guaranteed by the "
        "relaxation (as in the paper).",
        "- FairDen trades density-connectivity (DCSI) for balance by design: on the three moons "
        "it merges two moons into one balanced cluster where DBSCAN keeps three unbalanced moons.",
    ]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--sizes", type=int, nargs="*", default=None)
    ap.add_argument("--data", nargs="*", default=["blobs", "moons"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fairden.md"))
    ap.add_argument("--single", nargs=2, metavar=("DATA", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single:
        print(json.dumps(run_single(args.single[0], int(args.single[1]))))
        return 0
    sizes = args.sizes or ([1000, 5000] if args.quick else [1000, 10_000, 100_000])
    measured_commit = commit()
    rows = []
    for kind in args.data:
        for n in sizes:
            proc = subprocess.run(
                [sys.executable, __file__, "--single", kind, str(n)],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                continue
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(pd.DataFrame(rows[-1:]).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    scale = pd.DataFrame(rows)
    qual = quality()
    fmt = lambda v: f"{v:.3f}"  # noqa: E731
    print(scale.to_string(index=False, float_format=fmt))
    print(qual.to_string(index=False, float_format=fmt))
    cmd = "python benchmarks/bench_fairden.py " + " ".join(sys.argv[1:])
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    text = [
        "# FairDen benchmark",
        "",
        f"- date: {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{mem:.0f} GB RAM, {platform.system()} {platform.release()}; "
        f"load average at the start {os.getloadavg()[0]:.1f}",
        commit_line(measured_commit),
        f"- threads: OMP/BLAS/torch/faiss = {THREADS}",
        f"- command: `{cmd.strip()}`",
        "",
        "## Time (s) and peak memory (MB, tracemalloc, per stage) of the matrix-free pipeline",
        "",
        "Stages: core distances (KD-tree kNN), exact mutual-reachability MST (KD-tree Boruvka), "
        "dc-tree (dendrogram + query structures), eigensolver (fairness-projected eigsh, k=2), "
        "k-means (sklearn, n_init=10). `peak_rss_MB` is the whole process.",
        "",
        _markdown(scale) if len(scale) else "(no runs)",
        "",
        "## Quality",
        "",
        "Noise-adjusted balance, DCSI (numerical features), noise fraction, ARI/NMI against "
        "the DBSCAN clustering (DBSCAN's noise excluded).",
        "",
        _markdown(qual),
        "",
        "## Notes",
        "",
        *_notes(scale),
        "",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(text))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
