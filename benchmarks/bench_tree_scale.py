"""Constrained clustering trees at scale (issue 18): time limits, the auto solver, soft vs hard
constraints under noise, n up to 5,000.

Usage::

    python benchmarks/bench_tree_scale.py [--time-limit 30] [--big-limit 300]
        [--sections solvers noise scale] [--out FILE]

Sections (every figure of ``benchmarks/results/tree_scale.md`` comes from one run):

1. ``solvers``: breast_cancer (569 x 30, scaled to [0, 100]), k = 2, depth 3, md-ms,
   epsilon 0.1, kappa in {0.1, 0.5}, 2 constraint seeds, each of rc2 / lsu / binary / auto
   with ``time_limit``: status, wall time of the whole ``fit`` against the limit (bound: limit +
   max(5%, 2 s)), ARI, cost and proven lower bound. The auto solver's choice comes from this
   table (and the earlier Ionosphere measurement quoted in the notes).
2. ``noise``: labels flipped for 10% of the points before drawing the constraints
   (kappa 0.5); hard constraints vs soft (``constraint_weight=1``): status, ARI vs the clean
   labels, violated constraints (checked on the labels).
3. ``scale``: make_blobs (2 features, ``cluster_std=1``, ``center_box=(-40, 40)``) at
   n = 500 / 2,000 / 5,000, depth 3, k = 3 (and k = 5 at 5,000), kappa in {0, 0.1, 0.5},
   hard and soft: status, time, build time, ARI, constraints violated, clause count, lazily
   added pairs; n = 5,000 cells run with ``--big-limit``. Also the lazy pair clauses against
   the full encoding at n = 500 (same optimum: the lazy generation is exact).

Threads: ``OMP_NUM_THREADS=1``; SAT solving is single-threaded.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from provenance import commit, commit_line  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "tree_scale.md"


def fmt_table(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]

    def cell(v: object) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(False)]
    return "\n".join(lines)


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def breast_cancer() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    lo, hi = X.min(0), X.max(0)
    return (X - lo) / np.where(hi > lo, hi - lo, 1) * 100.0, y


def blobs(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_blobs

    X, y = make_blobs(
        n_samples=n, centers=k, n_features=2, cluster_std=1.0, center_box=(-40, 40),
        random_state=0,
    )  # fmt: skip
    return X, y


def fit_row(X, y, ml, cl, limit, **kw) -> dict:  # type: ignore[no-untyped-def]
    from sklearn.metrics import adjusted_rand_score

    from gnnaudit.clustering import TreeClustering

    t = time.perf_counter()
    m = TreeClustering(time_limit=limit, **kw).fit(X, must_link=ml, cannot_link=cl)
    wall = time.perf_counter() - t
    row = {
        "status": m.status_,
        "wall (s)": round(wall, 1),
        "within bound": wall <= limit + max(0.05 * limit, 2.0),
        "build (s)": round(getattr(m, "build_time_", float("nan")), 1),
        "ARI": None if m.labels_ is None else round(float(adjusted_rand_score(y, m.labels_)), 3),
        "violated": None if m.labels_ is None else len(m.violated_constraints_),
        "cost": m.cost_,
        "bound": m.bound_,
        "clauses": m.n_clauses_,
        "lazy pairs": m.n_lazy_pairs_,
        "ran": m.solver_used_,
        "steps (s)": "/".join(f"{v:.0f}" for v in getattr(m, "timings_", {}).values()),
        "cause": None if m.infeasibility_ is None else m.infeasibility_.cause,
    }
    print({k: row[k] for k in ("status", "wall (s)", "ARI", "violated", "ran")}, flush=True)
    return row


def section_solvers(limit: float) -> pd.DataFrame:
    from gnnaudit.clustering import generate_constraints

    X, y = breast_cancer()
    rows = []
    for kappa in (0.1, 0.5):
        for seed in (0, 1):
            ml, cl = generate_constraints(y, kappa, random_state=seed)
            for solver in ("rc2", "lsu", "binary", "auto"):
                r = fit_row(X, y, ml, cl, limit, n_clusters=2, depth=3, solver=solver)
                rows.append({"kappa": kappa, "seed": seed, "solver": solver, **r})
    return pd.DataFrame(rows)


def noisy(y: np.ndarray, rate: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = y.copy()
    flip = rng.random(len(y)) < rate
    classes = np.unique(y)
    shift = rng.integers(1, len(classes), flip.sum())
    out[flip] = classes[(np.searchsorted(classes, y[flip]) + shift) % len(classes)]
    return out


def section_noise(limit: float) -> pd.DataFrame:
    from gnnaudit.clustering import generate_constraints

    rows = []
    cases = [("breast_cancer", *breast_cancer(), 2), ("blobs n=500", *blobs(500, 3), 3)]
    for name, X, y, k in cases:
        for seed in (0, 1):
            ml, cl = generate_constraints(noisy(y, 0.1, seed), 0.5, random_state=seed)
            for mode, w in (("hard", None), ("soft w=1", 1.0)):
                r = fit_row(X, y, ml, cl, limit, n_clusters=k, depth=3, constraint_weight=w)
                rows.append({"data": name, "seed": seed, "constraints": mode, **r})
    return pd.DataFrame(rows)


def section_scale(limit: float, big_limit: float) -> pd.DataFrame:
    from gnnaudit.clustering import generate_constraints

    rows = []
    grid = [
        (500, 3, 0.0, None), (500, 3, 0.1, None), (500, 3, 0.5, None), (500, 3, 0.5, 1.0),
        (2000, 3, 0.1, None), (2000, 3, 0.5, None), (2000, 3, 0.5, 1.0),
        (5000, 3, 0.5, None), (5000, 5, 0.1, None),
    ]  # fmt: skip
    for n, k, kappa, w in grid:
        X, y = blobs(n, k)
        ml, cl = generate_constraints(y, kappa, random_state=0)
        lim = big_limit if n >= 5000 else limit
        r = fit_row(X, y, ml, cl, lim, n_clusters=k, depth=3, constraint_weight=w)
        mode = "hard" if w is None else f"soft w={w:g}"
        rows.append({"n": n, "k": k, "kappa": kappa, "constraints": mode, "limit": lim, **r})
    # lazy against the full encoding (n = 500: the full pool fits)
    X, y = blobs(500, 3)
    ml, cl = generate_constraints(y, 0.1, random_state=0)
    for mp in (None, 2000):
        r = fit_row(X, y, ml, cl, limit, n_clusters=3, depth=3, max_pairs=mp, epsilon=0.1)
        rows.append(
            {"n": 500, "k": 3, "kappa": 0.1, "constraints": f"hard, max_pairs={mp}",
             "limit": limit, **r}
        )  # fmt: skip
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--big-limit", type=float, default=300.0)
    ap.add_argument("--sections", nargs="+", default=["solvers", "noise", "scale"])
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    from importlib.metadata import version

    start_load = load()
    measured_commit = commit()
    t0 = time.perf_counter()
    parts = {}
    if "solvers" in args.sections:
        parts["solvers"] = section_solvers(args.time_limit)
    if "noise" in args.sections:
        parts["noise"] = section_noise(args.time_limit)
    if "scale" in args.sections:
        parts["scale"] = section_scale(args.time_limit, args.big_limit)
    lines = [
        "# Constrained clustering trees at scale (issue 18)",
        "",
        f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores shared with other jobs, "
        f"{platform.platform()}, Python {platform.python_version()}, python-sat "
        f"{version('python-sat')}, gnnaudit {version('gnnaudit')}",
        commit_line(measured_commit),
        f"- load average (1, 5, 15 min) at start: {start_load}; at end: {load()} (timings under "
        "this load are inflated)",
        "- threads: OMP_NUM_THREADS=1, single-threaded SAT solving (Glucose 4)",
        f"- command: `python benchmarks/bench_tree_scale.py {' '.join(sys.argv[1:])}`",
        f"- total wall time: {time.perf_counter() - t0:.0f} s; reduced grid (shared 2-core "
        "machine, deadline): see each section",
        "",
        "`wall` is the whole `fit` (validation, encoding, solving); `within bound` = wall <= "
        "limit + max(5% of limit, 2 s). `cost` / `bound`: MaxSAT cost of the returned tree and "
        "the proven lower bound. `violated`: constraint pairs the labels break (hard: 0). "
        "`clauses`: hard + soft clauses encoded up front; `lazy pairs`: conditional separating "
        "pairs (Eq. 27-29) added on demand (exact). `ran`: the search that ran (auto = a SAT call, then RC2). "
        "`steps`: seconds of distance classes / "
        "pairs / encoding / solve.",
        "",
    ]
    if "solvers" in parts:
        lines += [
            f"## Solvers (breast_cancer, k=2, depth 3, md-ms, time limit {args.time_limit:g} s)",
            "",
            fmt_table(parts["solvers"]),
            "",
        ]
    if "noise" in parts:
        lines += [
            "## Noisy constraints: hard vs soft (10% of labels flipped, kappa 0.5, depth 3)",
            "",
            "ARI against the clean labels.",
            "",
            fmt_table(parts["noise"]),
            "",
        ]
    if "scale" in parts:
        lines += [
            "## Scale (make_blobs, depth 3, md-ms, epsilon 0.1)",
            "",
            fmt_table(parts["scale"]),
            "",
        ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
