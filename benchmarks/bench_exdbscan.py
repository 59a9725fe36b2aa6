"""ExDBSCAN benchmarks: fit time, query latency and counterfactual quality.

Part 1 (scale): 10-D Gaussian blobs with 2,000 / 20,000 / 200,000 points; fit time (DBSCAN +
core graph), per-query latency (k=5, median and p95 over random queries, each toward another
cluster), latency as a multiple of one linear scan (one vectorised distance computation from
the query to all points) and validity checked by brute force against the fitted clustering.

Part 2 (quality, the paper's comparison): iris, wine (standardised) and noisy moons; validity,
proximity and DPP diversity of the energy strategy against random / nearest / furthest.

Usage: python benchmarks/bench_exdbscan.py [--quick] [--out benchmarks/results/exdbscan.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
from provenance import commit, commit_line  # noqa: E402
from sklearn.cluster import DBSCAN  # noqa: E402
from sklearn.datasets import load_iris, load_wine, make_blobs, make_moons  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from gnnaudit.clustering import ExDBSCAN  # noqa: E402

THREADS = 1


def oracle_valid(
    C: np.ndarray, targets: np.ndarray, core_pts: np.ndarray, core_lab: np.ndarray, eps: float
) -> np.ndarray:
    """Brute force: nearest core (exact differences) lies in the target and within eps."""
    out = np.empty(len(C), dtype=bool)
    for i, (c, t) in enumerate(zip(C, targets, strict=True)):
        d = np.sqrt(((core_pts - c) ** 2).sum(axis=1))
        j = int(np.argmin(d))
        out[i] = d[j] <= eps and core_lab[j] == t
    return out


def scale_rows(sizes: list[int], n_queries: int, seed: int = 0) -> pd.DataFrame:
    rows = []
    for n in sizes:
        X, _ = make_blobs(n, n_features=10, centers=5, cluster_std=1.0, random_state=seed)
        # keep the expected number of eps-neighbours roughly constant across sizes
        eps = 2.0 * (n / 20_000) ** (-1 / 10)
        t0, c0 = time.perf_counter(), time.process_time()
        model = ExDBSCAN(eps=eps, min_samples=10, n_counterfactuals=5).fit(X)
        fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
        cg = model.core_graph_
        rng = np.random.default_rng(seed)
        idx = rng.choice(n, n_queries, replace=False)
        lat, lat_cpu, scan, valid, n_cf = [], [], [], [], 0
        core_pts, core_lab = cg.X[cg.core_indices], cg.core_labels
        for i in tqdm(idx, desc=f"queries n={n}", leave=False):
            src = model.labels_[i]
            targets = [c for c in cg.clusters if c != src]
            t = int(targets[rng.integers(len(targets))])
            t0, c0 = time.perf_counter(), time.process_time()
            res = model.explain(int(i), target=t)
            lat.append(time.perf_counter() - t0)
            lat_cpu.append(time.process_time() - c0)
            x = X[i]
            t0 = time.perf_counter()
            np.sqrt(((X - x) ** 2).sum(axis=1))
            scan.append(time.perf_counter() - t0)
            valid.append(oracle_valid(res.counterfactuals, res.targets, core_pts, core_lab, cg.eps))
            n_cf += len(res)
        lat_ms = 1000 * np.asarray(lat)
        scan_ms = 1000 * np.median(scan)
        rows.append(
            {
                "n": n,
                "eps": round(eps, 3),
                "clusters": cg.n_clusters,
                "cores": cg.n_cores,
                "core edges": cg.adjacency.nnz // 2,
                "noise %": round(100 * float((model.labels_ == -1).mean()), 1),
                "fit s": round(fit_s, 2),
                "fit CPU s": round(fit_cpu, 2),
                "query ms (median)": round(float(np.median(lat_ms)), 2),
                "query ms (p95)": round(float(np.percentile(lat_ms, 95)), 2),
                "query CPU ms (median)": round(1000 * float(np.median(lat_cpu)), 2),
                "linear scan ms": round(float(scan_ms), 3),
                "query / scan": round(float(np.median(lat_ms) / scan_ms), 1),
                "validity": float(np.concatenate(valid).mean()),
                "counterfactuals": n_cf,
            }
        )
        del model, cg, X
    return pd.DataFrame(rows)


def quality_datasets() -> list[tuple[str, np.ndarray, float, int]]:
    iris = StandardScaler().fit_transform(load_iris().data)
    wine = StandardScaler().fit_transform(load_wine().data)
    moons, _ = make_moons(900, noise=0.07, random_state=0)
    rng = np.random.default_rng(0)
    moons = np.vstack([moons, rng.uniform([-1.5, -1.0], [2.5, 1.5], size=(100, 2))])
    moons = StandardScaler().fit_transform(moons)
    return [("iris", iris, 0.5, 5), ("wine", wine, 2.1, 5), ("moons", moons, 0.2, 5)]


def quality_rows(per_partition: int, seed: int = 0) -> pd.DataFrame:
    rows = []
    for name, X, eps, ms in quality_datasets():
        db = DBSCAN(eps=eps, min_samples=ms).fit(X)
        labels = db.labels_
        rng = np.random.default_rng(seed)
        queries = []  # paper protocol: points of every partition, toward every other cluster
        clusters = np.unique(labels[labels >= 0])
        for part in np.unique(labels):
            members = np.flatnonzero(labels == part)
            for i in rng.choice(members, min(per_partition, members.size), replace=False):
                queries += [(int(i), int(t)) for t in clusters if t != part]
        core_pts = X[db.core_sample_indices_]
        core_lab = labels[db.core_sample_indices_]
        for strategy in ("energy", "random", "nearest", "furthest"):
            model = ExDBSCAN(n_counterfactuals=5, strategy=strategy, random_state=seed)
            model.fit(X, dbscan=db)
            prox, div, energy, valid = [], [], [], []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                for i, t in queries:
                    res = model.explain(i, target=t)
                    prox.append(res.proximity)
                    div.append(res.diversity)
                    energy.append(res.energy)
                    valid.append(
                        oracle_valid(res.counterfactuals, res.targets, core_pts, core_lab, db.eps)
                    )
            rows.append(
                {
                    "dataset": name,
                    "eps / min_samples": f"{eps} / {ms}",
                    "clusters": int(clusters.size),
                    "queries": len(queries),
                    "strategy": strategy,
                    "validity": float(np.concatenate(valid).mean()),
                    "proximity (mean)": round(float(np.mean(prox)), 4),
                    "DPP diversity (mean)": round(float(np.mean(div)), 4),
                    "energy (mean)": round(float(np.mean(energy)), 4),
                }
            )
    return pd.DataFrame(rows)


def greedy_gap_rows(seed: int = 0) -> pd.DataFrame:
    """App. A.3: greedy vs best-improvement swap vs exhaustive optimum on a small problem."""
    X, _ = make_moons(120, noise=0.06, random_state=seed)
    db = DBSCAN(eps=0.25, min_samples=4).fit(X)
    model = ExDBSCAN(n_counterfactuals=3).fit(X, dbscan=db)
    rng = np.random.default_rng(seed)
    clusters = np.unique(db.labels_[db.labels_ >= 0])
    ratios, swap_ratios, same = [], [], []
    for x in rng.uniform([-1.2, -0.8], [2.2, 1.3], size=(30, 2)):
        src = model.core_graph_.assign(x)[0]
        t = int([c for c in clusters if c != src][0])
        g = model.explain(x, target=t)
        e = model.explain(x, target=t, exact=True)
        s = model.explain(x, target=t, refine="swap")
        ratios.append(g.energy / e.energy)
        swap_ratios.append(s.energy / e.energy)
        same.append(set(g.reference_cores) == set(e.reference_cores))
    return pd.DataFrame(
        [
            {
                "problem": "moons n=120, k=3, 30 queries",
                "greedy = exact (%)": round(100 * float(np.mean(same)), 1),
                "greedy/exact mean": round(float(np.mean(ratios)), 5),
                "greedy/exact worst": round(float(np.max(ratios)), 5),
                "swap/exact mean": round(float(np.mean(swap_ratios)), 5),
            }
        ]
    )


def to_markdown(frame: pd.DataFrame) -> str:
    """Pipe table without the optional ``tabulate`` dependency."""
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    sep = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(map(str, row)) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, sep, *body])


LOAD_AT_START = os.getloadavg()[0]


def notes(scale: pd.DataFrame, quality: pd.DataFrame) -> list[str]:
    """Targets and readings of the tables, computed from the measured rows."""
    out = []
    at20k = scale[scale["n"] == 20_000]
    if len(at20k):
        row = at20k.iloc[0]
        fit_ok = row["fit s"] <= 10
        q_ok = row["query ms (median)"] <= 20
        out.append(
            f"- Targets at 20k points: fit {row['fit s']} s (<= 10 s: {'met' if fit_ok else 'MISSED'}),"
            f" query {row['query ms (median)']} ms median, k=5 (<= 20 ms: "
            f"{'met' if q_ok else 'MISSED'})."
        )
    out.append(
        f"- Validity: minimum over every size and strategy = "
        f"{min(scale['validity'].min(), quality['validity'].min())} (checked by brute force "
        "against the fitted clustering's core points: the nearest core lies in the target "
        "cluster and within eps)."
    )
    out.append(
        "- Query vs linear scan: `query / scan` divides the median query time by one vectorised "
        "distance computation from the point to every data point. The fixed part of a query is "
        "the nearest-core validation and Python overhead; the growing part is k - 1 Dijkstra runs "
        "over the target cluster's core graph."
    )
    out.append(
        "- Fit time is dominated by the exact eps-radius neighbour search, done once and shared "
        "by DBSCAN (`metric='precomputed'`) and the core graph; scikit-learn's own DBSCAN pays "
        "the same search (its ball tree degrades with n in 10 dimensions)."
    )
    mean = quality.groupby("strategy")[["DPP diversity (mean)", "proximity (mean)"]].mean()
    best_div = mean["DPP diversity (mean)"].idxmax()
    out.append(
        "- Quality (the paper's comparison), averaged over the three data sets: DPP diversity "
        + ", ".join(f"{s} {mean.loc[s, 'DPP diversity (mean)']:.3f}" for s in mean.index)
        + "; proximity "
        + ", ".join(f"{s} {mean.loc[s, 'proximity (mean)']:.3f}" for s in mean.index)
        + f". The most diverse strategy is `{best_div}`"
        + (
            ""
            if best_div == "energy"
            else " (not `energy`, unlike the paper's claim: energy trades diversity for proximity)"
        )
        + "; `energy` has the lowest energy, its objective."
    )
    out.append(
        "- The energy balances an L^2 attraction against an L^-1 repulsion (design digest "
        "normalisation d_min / w_mean), so it is not scale invariant; the quality data sets are "
        "standardised."
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few queries")
    parser.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent / "results" / "exdbscan.md"),
        help="markdown results file",
    )
    args = parser.parse_args()
    measured_commit = commit()
    torch.set_num_threads(THREADS)
    try:
        import faiss

        faiss.omp_set_num_threads(THREADS)
    except ImportError:  # pragma: no cover
        pass
    sizes = [2_000, 20_000] if args.quick else [2_000, 20_000, 200_000]
    n_queries = 20 if args.quick else 100
    per_partition = 3 if args.quick else 10

    scale = scale_rows(sizes, n_queries)
    print(scale.to_string(index=False))
    quality = quality_rows(per_partition)
    print(quality.to_string(index=False))
    gap = greedy_gap_rows()
    print(gap.to_string(index=False))
    if args.out:
        cmd = "python " + " ".join(sys.argv)
        with open(args.out, "w") as fh:
            fh.write("# ExDBSCAN benchmarks\n\n")
            fh.write(f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC\n")
            fh.write(
                f"- machine: {platform.machine()}, {os.cpu_count()} cores, "
                f"{platform.platform()}, Python {platform.python_version()}, "
                f"load average at the start {LOAD_AT_START:.1f}\n"
            )
            fh.write(commit_line(measured_commit) + "\n")
            fh.write(
                f"- threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
                f"torch.set_num_threads({THREADS}), faiss.omp_set_num_threads({THREADS})\n"
            )
            fh.write(f"- command: `{cmd}`\n\n")
            fh.write("## Scale: 10-D blobs (5 centres, std 1), min_samples=10, k=5\n\n")
            fh.write(to_markdown(scale) + "\n\n")
            fh.write("## Quality: energy vs random / nearest / furthest (k=5)\n\n")
            fh.write(to_markdown(quality) + "\n\n")
            fh.write("## Greedy gap (App. A.3)\n\n")
            fh.write(to_markdown(gap) + "\n\n")
            fh.write("## Notes\n\n" + "\n".join(notes(scale, quality)) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
