"""FairDen at every k (issue 16): balance, DCSI and ARI for k = 2..6, per rounding.

Usage::

    python benchmarks/bench_fairden_k.py            # k = 2..6, all data sets (a few minutes)
    python benchmarks/bench_fairden_k.py --quick    # k = 2, 3 on small data (under a minute)

Variants (all on one dc-tree per data set):

* ``paper``: ``rounding="kmeans", noise_loop="fixed"``, Alg. 1 as published (k-means on ``H``;
  noise loop with ``k + 1`` k-means clusters on the same embedding).
* ``recompute``: ``rounding="kmeans", noise_loop="recompute"``, gnnaudit before issue 16.
* ``balanced``: ``rounding="balanced", noise_loop="fixed"``, the default from issue 16 to 29.
* ``repair``: ``rounding="repair", noise_loop="fixed"``, the default since issue 29 (the
  paper's labels when they reach ``min_balance=0.8``; otherwise, since issue 38, the repair
  candidate with the highest DCSI among those reaching it, or the most balanced one keeping
  70% of the paper's DCSI when none reaching it does).
* ``balanced+recompute``: ``rounding="balanced", noise_loop="recompute"``.

Diagnosis columns (for the ``paper`` variant's embedding ``H``, ``n x n_clusters``):

* ``probe_in_cluster``: 5-fold cross-validated balanced accuracy of a logistic-regression probe
  predicting the sensitive group from ``H`` *inside* a ground-truth cluster that holds both
  groups (the worst such cluster, i.e. the largest accuracy). 0.5: the embedding does not
  separate the groups there; 1.0: it does.
* ``pure_clusters``: number of group-pure clusters of the ``paper`` labels.
* ``separated_by``: ``embedding`` when the paper's clustering has group-pure (or balance < 0.5)
  clusters and the probe separates the groups inside a density cluster (>= 0.9); ``rounding``
  when the clustering is unfair but the probe does not; ``-`` when the clustering is fair.

DCSI is noise-adjusted, Euclidean (``dcsi``) and squared (``dcsi2``, the paper's published
evaluation). ARI is noise-adjusted against the generating labels.

The FairDen paper's three-moons CSV files and the Communities and Crime data are looked up under
``/work/shared`` (``--shared``); when absent the table says so.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from provenance import commit, commit_line

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = {
    "paper": {"rounding": "kmeans", "noise_loop": "fixed"},
    "recompute": {"rounding": "kmeans", "noise_loop": "recompute"},
    "balanced": {"rounding": "balanced", "noise_loop": "fixed"},
    "balanced+recompute": {"rounding": "balanced", "noise_loop": "recompute"},
    "repair": {"rounding": "repair", "noise_loop": "fixed"},
}
#: the default rounding may lower the paper's DCSI (Euclidean and squared) by at most this much
#: at the paper's settings (the data sets and k the paper and bench_fairden.py use)
DCSI_TOLERANCE = 0.02
#: the paper's settings: data set name prefix -> k
PAPER_SETTINGS = {"three_moons": 2, "bench_fairden": 2}


def datasets(quick: bool) -> list[tuple]:
    """(name, X, sensitive, ground-truth labels, categorical or None)."""
    from sklearn.datasets import make_blobs, make_moons

    from gnnaudit.datasets.tabular import three_moons

    out = []
    n_moon = 150 if quick else 500
    for seed in (0, 1):
        d = three_moons(n_per_moon=n_moon, noise=0.05, seed=seed)
        out.append((f"three_moons(seed={seed})", d.X, d.sensitive, d.labels, None))
    # blobs with a mixed sensitive attribute: every blob holds both groups, in different shares
    n = 4 * (100 if quick else 300)
    X, y = make_blobs(n, n_features=2, centers=4, cluster_std=0.6, random_state=3)
    rng = np.random.default_rng(3)
    share = np.array([0.5, 0.2, 0.8, 0.35])[y]
    s = (rng.random(n) < share).astype(np.int64)
    out.append(("blobs, mixed attribute", X, s, y, None))
    # the scaling data of bench_fairden.py (random 50/50 attribute), small
    n = 400 if quick else 1000
    X, y = make_blobs(n, n_features=5, centers=4, cluster_std=1.0, random_state=0)
    s = np.random.default_rng(0).permutation(np.arange(n) % 2)
    out.append((f"bench_fairden blobs (n={n})", X, s, y, None))
    rng = np.random.default_rng(0)
    X2, y = make_moons(n, noise=0.05, random_state=0)
    X = np.column_stack([X2, 0.05 * rng.normal(size=(n, 3))])
    s = rng.permutation(np.arange(n) % 2)
    out.append((f"bench_fairden moons (n={n})", X, s, y, None))
    # the mixed-type quality data of bench_fairden.py (3 numeric blobs, 2 categorical columns)
    rng = np.random.default_rng(1)
    n = 1500
    centers = np.array([[0, 0, 0], [6, 0, 0], [0, 6, 0]], dtype=float)
    y = np.repeat(np.arange(3), n // 3)
    X = centers[y] + rng.normal(size=(n, 3))
    cat = np.column_stack(
        [np.where(rng.random(n) < 0.8, y, rng.integers(0, 3, n)), rng.integers(0, 4, n)]
    )
    s = (rng.random(n) < np.array([0.5, 0.1, 0.9])[y]).astype(np.int64)
    out.append(("bench_fairden mixed-type blobs", X, s, y, cat))
    # outliers that make Alg. 1's noise loop run (fixed vs recomputed embedding)
    X, y = make_blobs(600, n_features=2, centers=3, cluster_std=0.5, random_state=7)
    rng = np.random.default_rng(7)
    X = np.vstack([X, rng.uniform(-40, 40, size=(6, 2))])
    y = np.concatenate([y, np.full(6, 3)])
    s = rng.permutation(np.arange(606) % 2)
    out.append(("3 blobs + 6 outliers", X, s, y, None))
    return out


def paper_files(shared: Path) -> list[Path]:
    return sorted(p for p in shared.rglob("*") if "moon" in p.name.lower() and p.is_file())


def probe_in_cluster(H: np.ndarray, s: np.ndarray, truth: np.ndarray) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    best = np.nan
    for c in np.unique(truth):  # ground-truth clusters (few)
        sel = truth == c
        if np.unique(s[sel]).size < 2 or np.bincount(s[sel]).min() < 5:
            continue
        acc = cross_val_score(
            LogisticRegression(max_iter=2000), H[sel], s[sel], cv=5, scoring="balanced_accuracy"
        ).mean()
        best = acc if np.isnan(best) else max(best, acc)
    return float(best)


def run(quick: bool, ks: list[int]) -> pd.DataFrame:
    from gnnaudit.clustering import FairDen
    from gnnaudit.clustering.metrics import adjusted_rand_noise, dcsi, noise_fraction
    from gnnaudit.graph_ops import DCTree

    rows = []
    for name, X, s, truth, cat in datasets(quick):
        min_pts = max(2, 2 * X.shape[1] - 1)
        tree = DCTree(min_samples=min_pts).fit(X)
        for k in ks:
            row_probe, pure, paper_bal = np.nan, 0, np.nan
            for variant, params in VARIANTS.items():
                model = FairDen(n_clusters=k, random_state=0, **params)
                t0 = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    model.fit(X, sensitive_features=s, categorical=cat, dc_tree=tree)
                fit_s = time.perf_counter() - t0
                lab = model.labels_
                if variant == "paper":
                    row_probe = probe_in_cluster(model.embedding_, s, truth)
                    keep = lab >= 0
                    table = pd.crosstab(lab[keep], s[keep]).to_numpy()
                    pure = int(((table > 0).sum(axis=1) == 1).sum())
                    paper_bal = model.balance_
                rows.append(
                    {
                        "data": name,
                        "k": k,
                        "variant": variant,
                        "k_final": model.k_,
                        "clusters": model.n_clusters_,
                        "balance": model.balance_,
                        "worst_cluster": model.min_cluster_balance_,
                        "dcsi": dcsi(X, lab),
                        "dcsi2": dcsi(X, lab, squared=True),
                        "ARI": adjusted_rand_noise(truth, lab),
                        "noise": noise_fraction(lab),
                        "rounding_used": model.rounding_,
                        "warned": any("unfair" in str(w.message) for w in caught),
                        "density_fallback": any(
                            "no repair candidate reaches" in str(w.message) for w in caught
                        ),
                        "fit_s": fit_s,
                    }
                )
            verdict = "-"
            if pure > 0 or paper_bal < 0.5:
                verdict = "embedding" if row_probe >= 0.9 else "rounding"
            for r in rows[-len(VARIANTS) :]:
                r["probe_in_cluster"] = row_probe
                r["pure_clusters(paper)"] = pure
                r["separated_by"] = verdict
            print(pd.DataFrame(rows[-len(VARIANTS) :]).to_string(index=False), flush=True)
    return pd.DataFrame(rows)


def default_check(df: pd.DataFrame) -> pd.DataFrame:
    """Per (data, k): the default (``repair``) against ``paper``: balance kept, 0.8 reached or
    the density fallback (with its warning), the share of the paper's squared DCSI kept, and
    the DCSI change at the paper's settings (where the tolerance applies)."""
    out = []
    for (name, k), g in df.groupby(["data", "k"], sort=False):
        p = g[g.variant == "paper"].iloc[0]
        b = g[g.variant == "repair"].iloc[0]
        setting = any(name.startswith(pre) and k == kk for pre, kk in PAPER_SETTINGS.items())
        drop = min(b.dcsi - p.dcsi, b.dcsi2 - p.dcsi2)
        out.append(
            {
                "data": name,
                "k": k,
                "paper setting": setting,
                "balance paper": p.balance,
                "balance default": b.balance,
                "worst cluster default": b.worst_cluster,
                "noise default": b.noise,
                "d_dcsi": b.dcsi - p.dcsi,
                "d_dcsi2": b.dcsi2 - p.dcsi2,
                "dcsi2 share": b.dcsi2 / p.dcsi2 if p.dcsi2 > 0 else float("nan"),
                "balance kept": b.balance >= p.balance - 1e-12,
                "0.8 or fallback": bool(b.balance >= 0.8 or b.density_fallback),
                "dcsi within tol": drop >= -DCSI_TOLERANCE,
            }
        )
    return pd.DataFrame(out)


def noise_loop_check(df: pd.DataFrame) -> pd.DataFrame:
    """Rows where Alg. 1's noise loop ran (``k_final > k``) for either noise loop."""
    ran = df.groupby(["data", "k"])["k_final"].transform("max") > df["k"]
    cols = ["data", "k", "variant", "k_final", "clusters", "balance", "dcsi", "dcsi2", "noise"]
    return df.loc[ran, cols].reset_index(drop=True)


def findings(df: pd.DataFrame, check: pd.DataFrame) -> list[str]:
    """The diagnosis in words, with the measured figures."""

    def get(data: str, k: int, variant: str) -> pd.Series:
        return df[(df.data == data) & (df.k == k) & (df.variant == variant)].iloc[0]

    out = []
    moons = [d for d in df.data.unique() if d.startswith("three_moons")]
    for d in moons:
        p3, b3, r3 = get(d, 3, "paper"), get(d, 3, "balanced"), get(d, 3, "repair")
        b2 = get(d, 2, "repair")
        out.append(
            f"- {d}: k=2 balance {b2.balance:.3f} with the default; k=3 paper's rounding "
            f"{p3.balance:.3f} ({p3['pure_clusters(paper)']} group-pure clusters, probe "
            f"{p3.probe_in_cluster:.2f}: the embedding separates the groups inside the "
            f"half/half moon) -> default {r3.balance:.3f} (worst cluster "
            f"{r3.worst_cluster:.3f}), balanced rounding {b3.balance:.3f}; DCSI "
            f"{p3.dcsi:.3f} -> {r3.dcsi:.3f} / {b3.dcsi:.3f}."
        )
    emb = df[(df.variant == "paper") & (df.separated_by == "embedding")]
    rnd = df[(df.variant == "paper") & (df.separated_by == "rounding")]
    out.append(
        f"- Unfair paper clusterings (group-pure or balance < 0.5): {len(emb)} separated by the "
        f"embedding (probe >= 0.9 inside a density cluster), {len(rnd)} by the rounding alone. "
        "Where it is the embedding, the constraint F^T H = 0 holds only on average: inside a "
        "density-connected cluster the dc-distance affinity is nearly constant, so splitting "
        "that cluster along the sensitive attribute costs the relaxed cut almost nothing and "
        "lets the other clusters stay apart; k-means then takes that split."
    )
    blobs = df[(df.data == "blobs, mixed attribute") & (df.variant == "paper")]
    out.append(
        "- Blobs with a mixed attribute (every blob holds both groups in different shares): the "
        f"paper's rounding keeps blobs together (balance {blobs.balance.min():.2f}-"
        f"{blobs.balance.max():.2f}) without group-pure clusters; the balanced rounding reaches "
        "the data's shares by cutting blobs, so its DCSI is lower. This is the fairness / "
        "density trade-off by construction."
    )
    setting = check[check["paper setting"]]
    low = check[check["balance paper"] < 0.8]
    out.append(
        f"- Default criterion at the paper's settings ({len(setting)} rows: three moons and "
        "bench_fairden data at k = 2): balance never lower and DCSI (both forms) within "
        f"{DCSI_TOLERANCE}: {bool(setting[['balance kept', 'dcsi within tol']].all().all())}; "
        "there the paper's k-means partition already reaches 0.8, so the default keeps its "
        f"labels. Everywhere: balance never lower in {int(check['balance kept'].sum())} of "
        f"{len(check)}; where the paper's rounding misses 0.8 ({len(low)} rows) the default "
        f"reaches it or warns with the density fallback in {int(low['0.8 or fallback'].sum())}, "
        f"keeping at least {low['dcsi2 share'].min():.2f} of the paper's squared DCSI "
        "(noise-adjusted here; the default's 70% rule is on the clustered points)."
    )
    loop = df[df.k_final > df.k]
    if len(loop):
        out.append(
            "- Noise loop: see the last table; keeping the embedding fixed (Alg. 1 as "
            "published) is the default, recomputing it with k + 1 eigenvectors stays an option."
        )
    return out


def _markdown(df: pd.DataFrame) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float | np.floating):
            return "nan" if np.isnan(v) else f"{v:.3f}"
        return str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * df.shape[1]]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in df.itertuples(index=False)]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="k = 2, 3 on small data")
    ap.add_argument("--shared", default="/work/shared")
    ap.add_argument("--out", default=None, help="markdown file to write (default: none)")
    args = ap.parse_args()
    ks = [2, 3] if args.quick else [2, 3, 4, 5, 6]
    files = paper_files(Path(args.shared)) if Path(args.shared).exists() else []
    comm = (
        [p for p in Path(args.shared).rglob("*") if "communit" in p.name.lower()]
        if Path(args.shared).exists()
        else []
    )
    t0 = time.perf_counter()
    measured_commit = commit()
    df = run(args.quick, ks)
    check = default_check(df)
    loop = noise_loop_check(df)
    ok = bool(check.loc[check["paper setting"], ["balance kept", "dcsi within tol"]].all().all())
    pd.set_option("display.width", 250)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(check.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(loop.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"the default passes the criterion at the paper's settings: {ok}")
    print(f"paper's three-moons files under {args.shared}: {[str(p) for p in files] or 'none'}")
    print(f"Communities and Crime under {args.shared}: {[str(p) for p in comm] or 'none'}")
    print(f"total {time.perf_counter() - t0:.0f} s")
    if args.out:
        cmd = "python benchmarks/bench_fairden_k.py " + " ".join(sys.argv[1:])
        text = [
            "# FairDen at every k (issues 16, 38)",
            "",
            f"- date: {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC}",
            f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}; "
            f"load average at the start {os.getloadavg()[0]:.1f}; OMP threads 1",
            commit_line(measured_commit),
            f"- command: `{cmd.strip()}`",
            f"- paper's three-moons files: {[str(p) for p in files] or 'not available'}; "
            f"Communities and Crime: {[str(p) for p in comm] or 'not available'}",
            "",
            "## Diagnosis and variants",
            "",
            _markdown(df),
            "",
            "## Findings",
            "",
            *findings(df, check),
            "- The paper's three-moons CSV files and the Communities and Crime data are not "
            "under /work/shared, so the published three-moons figures (0.990 fixed / 1.000 "
            "mixed) and Communities figures (0.919 / 0.153 squared DCSI) could not be re-run "
            "here; `rounding='kmeans'` equals gnnaudit's earlier labels on pinned cases "
            "(tests/test_fairden_rounding.py) and `noise_loop='fixed'` is Alg. 1 line 14.",
            "",
            f"## Default check (balance never lower; DCSI tolerance {DCSI_TOLERANCE})",
            "",
            "The default (`repair`) against the paper's rounding. `paper setting`: the data "
            "sets and k of the paper and of bench_fairden.py, where the DCSI tolerance applies; "
            "the default passes there: "
            f"**{ok}**. `0.8 or fallback`: balance >= 0.8, or the density fallback with its "
            "warning (no candidate reaching 0.8 keeps 70% of the paper's DCSI). Balance and "
            "worst cluster on the clustered points; DCSI columns noise-adjusted.",
            "",
            _markdown(check),
            "",
            "## Noise loop: fixed embedding (Alg. 1) vs recomputed embedding",
            "",
            "Rows where Alg. 1's noise loop ran (`k_final > k`).",
            "",
            _markdown(loop) if len(loop) else "(the loop never ran)",
            "",
        ]
        Path(args.out).write_text("\n".join(text))
        print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
