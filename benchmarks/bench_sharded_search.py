"""Sharded faiss evidence search (``backend="sharded"``) at 1M test nodes: recall@k against the
exact search, build and query time, memory, for a few (n_shards, nlist, nprobe) settings.

Usage::

    python benchmarks/bench_sharded_search.py [--n 1000000] [--dim 64] [--queries 2000]
        [--k 10] [--no-dask] [--no-baseline] [--only WORD ...] [--out FILE] [--quick]

Data: clustered unit vectors (the law of ``clustered`` in ``benchmarks/tune_faiss_index.py``:
60 Gaussian blobs, noise 1.0, 3 predicted classes, 70 % of a blob predicted with the blob's
class), generated in chunks of 100,000 rows. Reference: the exact backend
(``ExactSearcher``, blocked, 64 MiB similarity blocks) on ``--queries`` random test nodes.
Per setting:

* ``build_s``: splitting and building every shard's index (k-means on the shard's sample);
* ``ms/query``: one ``local(queries, k)`` call divided by the number of queries;
* ``recall@k``: share of the exact top-k positions returned; ``identical``: share of queries
  whose whole answer (positions in order) equals the exact one;
* ``index_MB``: the faiss indexes' codes, ids and centroids; ``rss_MB``: the process's
  resident memory after the build (the data and the exact reference included).

Threads: one (``OMP_NUM_THREADS=1``, BLAS and ``faiss.omp_set_num_threads(1)``; set by the
script): the machine is shared. The Dask row (``--no-dask`` skips it) uses a LocalCluster of
2 single-threaded in-process workers and checks its answer equals the local one.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import faiss  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import psutil  # noqa: E402
from provenance import commit, commit_line  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's gnnaudit, not an installed one

from gnnaudit.audit.search.base import SearchSpace  # noqa: E402
from gnnaudit.audit.search.exact import ExactSearcher  # noqa: E402
from gnnaudit.audit.search.faiss_search import FaissSearcher  # noqa: E402
from gnnaudit.audit.search.sharded import ShardedSearcher  # noqa: E402

RESULTS = HERE / "results" / "sharded_search.md"

#: (label, ShardedSearcher parameters)
SETTINGS: list[tuple[str, dict[str, Any]]] = [
    ("1 shard, defaults", {"n_shards": 1}),
    ("4 shards, defaults", {"n_shards": 4}),
    ("4 shards, nprobe 4", {"n_shards": 4, "nlist": 500, "nprobe": 4}),
    ("4 shards, nprobe 64", {"n_shards": 4, "nlist": 500, "nprobe": 64}),
    ("8 shards, defaults", {"n_shards": 8}),
    ("4 shards, exhaustive", {"n_shards": 4, "nlist": 64, "nprobe": 64}),
    ("4 shards, IVF-PQ, oversample 2", {"n_shards": 4, "pq_above_bytes": 0, "oversample": 2}),
    ("4 shards, IVF-PQ (defaults: d/4 codes, oversample 8)", {"n_shards": 4, "pq_above_bytes": 0}),
    ("4 shards, IVF-PQ, pq_m 8 (8-byte codes)", {"n_shards": 4, "pq_above_bytes": 0, "pq_m": 8}),
    (
        "4 shards, IVF-PQ, pq_m 8 (8-byte codes), oversample 32",
        {"n_shards": 4, "pq_above_bytes": 0, "pq_m": 8, "oversample": 32},
    ),
]


def md_table(df: pd.DataFrame) -> str:
    """A markdown table (no tabulate dependency)."""
    cells = [[("" if pd.isna(v) else str(v)) for v in row] for row in df.itertuples(index=False)]
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells])


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def clustered(m: int, d: int, seed: int = 0, chunk: int = 100_000) -> tuple[np.ndarray, Any]:
    """Unit rows around 60 Gaussian blobs (noise 1.0), 3 predicted classes; float32, in
    chunks (peak: one float64 chunk beside the float32 result)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((60, d))
    blob = rng.integers(0, 60, m)
    pred = np.where(rng.random(m) < 0.3, rng.integers(0, 3, m), blob % 3).astype(np.int64)
    x = np.empty((m, d), dtype=np.float32)
    for lo in range(0, m, chunk):
        b = blob[lo : lo + chunk]
        rows = centres[b] + rng.standard_normal((b.size, d))
        x[lo : lo + chunk] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return x, pred


def index_mb(searcher: ShardedSearcher) -> float:
    """Codes, ids and centroids of the shards' faiss indexes (local shards)."""
    total = 0
    for sh in searcher.shards_:
        idx = sh.index
        if sh.kind == "flat":
            total += idx.ntotal * idx.d * 4
            continue
        total += idx.ntotal * (idx.code_size + 8) + idx.nlist * idx.d * 4
    return total / 2**20


def recall(pos: np.ndarray, ref: np.ndarray) -> float:
    hits = [
        len(set(a[a >= 0]) & set(b[b >= 0])) / (b >= 0).sum() for a, b in zip(pos, ref, strict=True)
    ]
    return float(np.mean(hits))


def describe(s: ShardedSearcher) -> str:
    shard = s.shards_[0] if s.client_ is None else None
    if shard is None or shard.kind == "flat":
        return f"{s.kinds_[0]}"
    return f"{shard.kind} nlist={shard.index.nlist} nprobe={shard.nprobe}"


def run_setting(
    label: str, params: dict[str, Any], space: SearchSpace, q: np.ndarray, k: int, ref: Any
) -> tuple[dict[str, Any], np.ndarray]:
    t0 = time.perf_counter()
    s = ShardedSearcher(random_state=0, **params).build(space)
    build_s = time.perf_counter() - t0
    rss = rss_mb()
    t0 = time.perf_counter()
    pos = s.local(q, k).evidence
    query_s = time.perf_counter() - t0
    row = {
        "setting": label,
        "shards": s.n_shards_,
        "index": describe(s),
        "oversample": s.oversample_,
        "build_s": round(build_s, 1),
        "ms/query": round(1e3 * query_s / q.size, 3),
        f"recall@{k}": round(recall(pos, ref), 4),
        "identical": round(float((pos == ref).all(axis=1).mean()), 4),
        "index_MB": round(index_mb(s), 1) if s.client_ is None else None,
        "rss_MB": round(rss),
    }
    del s
    gc.collect()
    return row, pos


def dask_row(space: SearchSpace, q: np.ndarray, k: int, ref: Any, local_pos: Any) -> dict:
    import distributed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=2, processes=False, threads_per_worker=1, dashboard_address=None
        )
        client = distributed.Client(cluster)
    try:
        row, pos = run_setting(
            "4 shards, defaults, Dask (2 workers)",
            {"n_shards": 4, "client": client},
            space,
            q,
            k,
            ref,
        )
    finally:
        client.close()
        cluster.close()
    same = "n/a" if local_pos is None else bool(np.array_equal(pos, local_pos))
    row["identical"] = f"{row['identical']} (= local: {same})"
    return row


def baseline_row(space: SearchSpace, q: np.ndarray, k: int, ref: Any) -> dict:
    t0 = time.perf_counter()
    s = FaissSearcher(index_type="ivf", random_state=0).build(space)
    build_s = time.perf_counter() - t0
    rss = rss_mb()
    t0 = time.perf_counter()
    pos = s.local(q, k).evidence
    query_s = time.perf_counter() - t0
    row = {
        "setting": "backend='faiss' (one IVF per class, one process)",
        "shards": "-",
        "index": " ".join(s.index_kinds_),
        "oversample": "-",
        "build_s": round(build_s, 1),
        "ms/query": round(1e3 * query_s / q.size, 3),
        f"recall@{k}": round(recall(pos, ref), 4),
        "identical": round(float((pos == ref).all(axis=1).mean()), 4),
        "index_MB": None,
        "rss_MB": round(rss),
    }
    del s
    gc.collect()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--only", nargs="*", default=None, help="run the settings whose label has one")
    ap.add_argument("--out", type=Path, default=None, help=f"default: {RESULTS}")
    ap.add_argument(
        "--quick", action="store_true", help="100,000 rows, 300 queries; no file unless --out"
    )
    args = ap.parse_args()
    if args.quick:
        args.n, args.queries = min(args.n, 100_000), min(args.queries, 300)
    elif args.out is None:
        args.out = RESULTS
    faiss.omp_set_num_threads(1)
    start = time.perf_counter()
    load_before = os.getloadavg()
    measured_commit = commit()
    x, pred = clustered(args.n, args.dim)
    space = SearchSpace(x, pred, np.arange(args.n, dtype=np.int64))
    q = np.sort(np.random.default_rng(1).choice(args.n, args.queries, replace=False))
    t0 = time.perf_counter()
    ref = ExactSearcher().build(space).local(q, args.k).evidence
    exact_s = time.perf_counter() - t0
    rows: list[dict[str, Any]] = [
        {
            "setting": "exact (reference)",
            "shards": "-",
            "index": "-",
            "oversample": "-",
            "build_s": 0.0,
            "ms/query": round(1e3 * exact_s / q.size, 3),
            f"recall@{args.k}": 1.0,
            "identical": 1.0,
            "index_MB": None,
            "rss_MB": round(rss_mb()),
        }
    ]
    print(rows[0], flush=True)
    local_default = None
    for label, params in SETTINGS:
        if args.only is not None and not any(word in label for word in args.only):
            continue
        row, pos = run_setting(label, params, space, q, args.k, ref)
        if label == "4 shards, defaults":
            local_default = pos
        rows.append(row)
        print(row, flush=True)
    if not args.no_dask:
        rows.append(dask_row(space, q, args.k, ref, local_default))
        print(rows[-1], flush=True)
    if not args.no_baseline:
        rows.append(baseline_row(space, q, args.k, ref))
        print(rows[-1], flush=True)
    table = md_table(pd.DataFrame(rows))
    print(table)
    peak = psutil.Process().memory_info().rss / 2**20
    header = [
        "# Sharded faiss evidence search at 1M test nodes: recall against exact, time, memory",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; wall "
        f"{time.perf_counter() - start:.0f} s",
        f"- machine: {platform.platform()}, {cpu_model()}, "
        f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GB RAM (shared "
        "with other jobs)",
        commit_line(measured_commit),
        "- load average (1/5/15 min): before "
        + " / ".join(f"{v:.2f}" for v in load_before)
        + ", after "
        + " / ".join(f"{v:.2f}" for v in os.getloadavg()),
        "- threads: 1 (OMP/OPENBLAS/MKL_NUM_THREADS=1, faiss.omp_set_num_threads(1))",
        f"- versions: python {platform.python_version()}, numpy {np.__version__}, "
        f"faiss {faiss.__version__}",
        f"- command: `{' '.join(['python benchmarks/bench_sharded_search.py', *sys.argv[1:]])}`",
        f"- data: {args.n:,} x {args.dim} clustered unit vectors (60 blobs, 3 predicted "
        f"classes); {args.queries:,} random queries; k = {args.k}; reference: the exact "
        f"backend ({exact_s:.1f} s for the queries); final RSS {peak:.0f} MB",
        "",
        table,
        "",
    ]
    if args.out is not None:
        args.out.write_text("\n".join(header))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
