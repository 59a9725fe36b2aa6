"""Where approximate counterfactual-evidence search pays off: per-query latency of the exact,
faiss (tuned IVF) and paper-index (LocalCE-I) backends against the number of test nodes.

Usage::

    python benchmarks/bench_search_crossover.py [--sizes 5000 20000 50000 100000 200000]
        [--dims 16 128] [--queries 500] [--single 50] [--index-max-n 100000] [--no-tuning]
        [--out FILE]

Data: ``clustered(n, d)`` of ``benchmarks/tune_faiss_index.py`` (60 Gaussian blobs, unit
vectors, 3 predicted classes, 70 % of a blob predicted with the blob's class): the shape of a
KS embedding of a graph with community structure. Per (n, d) and backend:

* ``build_s``: building the backend (faiss: one IVF index per class, k-means included);
* ``batch_ms/q``: one ``local(queries, 10)`` call with ``--queries`` random test nodes,
  divided by their number (best of 2);
* ``single_ms/q``: ``--single`` calls with one query each (best of 2);
* ``recall@10``: share of the exact backend's top-10 returned (the exact backend is the
  oracle: recall 1 by definition);
* ``speedup_*``: exact latency / backend latency;
* ``audit_s``: build + n x batch latency, the cost of asking every test node (what an audit
  does) -- the build matters there.

The crossover of a backend (per d and mode) is the smallest n of the grid from which it is
faster per query than the exact search at every larger n of the grid. A tuning table
(``--no-tuning`` skips it) sweeps IVF ``nlist`` / ``nprobe`` at 100,000 x 128.

Threads: one (``OMP_NUM_THREADS=1``, BLAS and ``faiss.omp_set_num_threads(1)``; set by the
script). The machine may be shared: the load average is recorded before and after.
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
from typing import Any  # noqa: E402

import faiss  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's gnnaudit, not an installed one
from provenance import commit, commit_line  # noqa: E402
from tune_faiss_index import clustered  # noqa: E402

from gnnaudit.audit.search.base import SearchSpace  # noqa: E402
from gnnaudit.audit.search.exact import ExactSearcher  # noqa: E402
from gnnaudit.audit.search.faiss_search import FaissSearcher  # noqa: E402
from gnnaudit.audit.search.index import IndexSearcher  # noqa: E402

RESULTS = HERE / "results" / "search_crossover.md"
K = 10
REPEATS = 2


def load() -> str:
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def recall(pos: np.ndarray, ref: np.ndarray) -> float:
    hits = [len(set(a[a >= 0]) & set(b[b >= 0])) / K for a, b in zip(pos, ref, strict=True)]
    return float(np.mean(hits))


def measure(searcher: Any, q: np.ndarray, n_single: int) -> tuple[np.ndarray, float, float]:
    """(answer of the batch call, batch ms/query, single ms/query); best of ``REPEATS``."""
    batch = single = np.inf
    res = None
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        res = searcher.local(q, K)
        batch = min(batch, (time.perf_counter() - t0) / q.size)
        t0 = time.perf_counter()
        for qi in q[:n_single]:
            searcher.local(qi[None], K)
        single = min(single, (time.perf_counter() - t0) / n_single)
    assert res is not None
    return res.evidence, 1e3 * batch, 1e3 * single


def build(name: str, space: SearchSpace, **params: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    if name == "exact":
        s: Any = ExactSearcher()
    elif name == "faiss":
        s = FaissSearcher(index_type="ivf", random_state=0, **params)
    else:
        s = IndexSearcher(random_state=0, **params)
    s.build(space)
    return s, time.perf_counter() - t0


def grid_rows(args: argparse.Namespace) -> pd.DataFrame:
    rows = []
    for d in args.dims:
        for n in args.sizes:
            x, pred = clustered(n, d)
            space = SearchSpace(x, pred, np.arange(n, dtype=np.int64))
            q = np.random.default_rng(1).choice(n, min(args.queries, n), replace=False)
            ref = None
            base: dict[str, float] = {}
            for name in args.backends:
                if name == "index" and n > args.index_max_n:
                    continue
                s, build_s = build(name, space)
                pos, batch, single = measure(s, q, args.single)
                if name == "exact":
                    ref = pos
                    base = {"batch": batch, "single": single}
                kinds = getattr(s, "index_kinds_", None)
                row = {
                    "d": d,
                    "n": n,
                    "backend": name,
                    "setting": ""
                    if kinds is None
                    else f"{kinds[0]} nprobe={s.indexes_[0].nprobe}"
                    if kinds[0].startswith("ivf")
                    else kinds[0],
                    "build_s": build_s,
                    "recall@10": recall(pos, ref) if ref is not None else float("nan"),
                    "batch_ms/q": batch,
                    "single_ms/q": single,
                    "speedup_batch": base["batch"] / batch,
                    "speedup_single": base["single"] / single,
                    "audit_s": build_s + n * batch / 1e3,
                }
                rows.append(row)
                print(
                    f"d={d:4d} n={n:7d} {name:6s} build {build_s:7.2f}s recall {row['recall@10']:.3f}"
                    f" batch {batch:7.3f} ms/q single {single:7.3f} ms/q x{row['speedup_batch']:.1f}"
                    f" / x{row['speedup_single']:.1f}  (load {load()})",
                    flush=True,
                )
                del s
    return pd.DataFrame(rows)


def crossovers(df: pd.DataFrame) -> pd.DataFrame:
    """Smallest n from which a backend beats exact at every larger n (per d and mode)."""
    out = []
    for (d, name), g in df[df.backend != "exact"].groupby(["d", "backend"]):
        g = g.sort_values("n")
        ex = df[(df.backend == "exact") & (df.d == d)].set_index("n")
        row: dict[str, Any] = {"d": d, "backend": name}
        for mode, col in (("batch", "batch_ms/q"), ("single", "single_ms/q"), ("audit", "audit_s")):
            ref = "audit_s" if mode == "audit" else col
            faster = [bool(r[col] < ex.loc[r["n"], ref]) for _, r in g.iterrows()]
            ns = g["n"].tolist()
            cross = None
            for i in range(len(ns)):
                if all(faster[i:]):
                    cross = ns[i]
                    break
            row[f"crossover_{mode}"] = "never" if cross is None else f"{cross:,}"
        five = g[(g["speedup_batch"] >= 5) & (g["speedup_single"] >= 5) & (g["recall@10"] >= 0.95)]
        row[">=5x & recall>=0.95 from"] = f"{int(five['n'].min()):,}" if len(five) else "never"
        out.append(row)
    return pd.DataFrame(out)


def tuning_rows(n: int, d: int, queries: int, n_single: int) -> pd.DataFrame:
    x, pred = clustered(n, d)
    space = SearchSpace(x, pred, np.arange(n, dtype=np.int64))
    q = np.random.default_rng(1).choice(n, queries, replace=False)
    ex, _ = build("exact", space)
    ref, eb, es = measure(ex, q, n_single)
    per_class = n / 3
    rows = []
    for label, nlist, nprobe in [
        ("sqrt(n)", None, 4),
        ("sqrt(n)", None, 8),
        ("sqrt(n)", None, None),
        ("sqrt(n)", None, 32),
        ("4 sqrt(n) (old default)", int(round(4 * np.sqrt(per_class))), 8),
    ]:
        s, build_s = build("faiss", space, nlist=nlist, nprobe=nprobe)
        pos, b, si = measure(s, q, n_single)
        rows.append(
            {
                "nlist": f"{label} = {s.index_kinds_[0][3:]}",
                "nprobe": f"{s.indexes_[0].nprobe}" + (" (default)" if nprobe is None else ""),
                "build_s": build_s,
                "recall@10": recall(pos, ref),
                "batch_ms/q": b,
                "single_ms/q": si,
                "speedup_batch": eb / b,
                "speedup_single": es / si,
            }
        )
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000, 50000, 100000, 200000])
    ap.add_argument("--dims", type=int, nargs="+", default=[16, 128])
    ap.add_argument("--backends", nargs="+", default=["exact", "faiss", "index"])
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--single", type=int, default=50)
    ap.add_argument("--index-max-n", type=int, default=100000)
    ap.add_argument("--no-tuning", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if args.backends[0] != "exact":
        ap.error("--backends must start with exact (the reference)")
    faiss.omp_set_num_threads(1)
    start = dt.datetime.now(dt.timezone.utc)
    load_before = load()
    measured_commit = commit()
    t0 = time.perf_counter()
    df = grid_rows(args)
    cross = crossovers(df)
    tune = None if args.no_tuning else tuning_rows(100_000, 128, args.queries, args.single)
    wall = time.perf_counter() - t0
    from bench_audit import fmt_table, machine

    cmd = "python benchmarks/bench_search_crossover.py " + " ".join(argv or sys.argv[1:])
    import gnnaudit

    lines = [
        "# Evidence search: exact vs faiss (IVF) vs paper index -- the crossover",
        "",
        f"- date: {start:%Y-%m-%d %H:%M} UTC; wall {wall:.0f} s",
        f"- machine: {machine()}; {platform.platform()}",
        commit_line(measured_commit),
        f"- load average (1/5/15 min): before {load_before}, after {load()}",
        "- threads: 1 (OMP/OPENBLAS/MKL_NUM_THREADS=1, faiss.omp_set_num_threads(1))",
        f"- versions: python {platform.python_version()}, numpy {np.__version__}, "
        f"faiss {faiss.__version__}; gnnaudit from {Path(gnnaudit.__file__).parent}",
        f"- command: `{cmd.strip()}`",
        f"- data: clustered unit vectors (60 blobs, 3 predicted classes); {args.queries} random "
        f"queries (batch), {args.single} single calls; k = {K}; best of {REPEATS}",
        "",
        "## Per-query latency and recall",
        "",
        fmt_table(df),
        "",
        "## Crossovers",
        "",
        fmt_table(cross),
    ]
    if tune is not None:
        lines += ["", "## IVF tuning at n = 100,000, d = 128", "", fmt_table(tune)]
    lines += [""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
