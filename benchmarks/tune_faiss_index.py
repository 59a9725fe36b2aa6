"""Tune the approximate evidence-search backends: recall@10 and latency of faiss index types
(IVF nprobe sweep, HNSW M / efSearch sweep) and of the paper's LocalCE-I index.

Two data sets, both unit vectors with 3 predicted classes, m = 20,000 nodes, d = 500:

* ``clustered``: 60 Gaussian blobs, each blob tied to one class (70 % of its nodes predicted
  with the blob's class, the rest random): class-dependent, clustered features;
* ``unstructured``: a random graph (mean degree ~ 6) with random sparse binary features
  (1 % density) pushed through L = 3 rounds of neighbour averaging
  (``x^{l+1} = 0.5 x^l + 0.5 mean_{N(v)} x^l``, ``x^agg = sum_l x^l``), classes at random: an
  approximation of a KS embedding of a sparse-feature graph without cluster structure.

Ground truth: exact top-10 of 1,000 random queries (candidates of another class, float64).
"exact" latency = the ``flat`` backend (faiss brute force over the other classes, same code
path). Batch latency = 1,000 queries in one call divided by 1,000; single-query latency = 100
calls with one query each; both the best of 3 repetitions. All runs single-threaded (faiss and
BLAS).

    python benchmarks/tune_faiss_index.py            # full run (a few minutes)
    python benchmarks/tune_faiss_index.py --quick    # m = 5,000, fewer settings
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import faiss  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from provenance import commit, commit_line  # noqa: E402

from gnnaudit.audit.search.base import SearchSpace  # noqa: E402
from gnnaudit.audit.search.faiss_search import FaissSearcher  # noqa: E402
from gnnaudit.audit.search.index import IndexSearcher  # noqa: E402

N_THREADS = 1
K = 10
REPEATS = 3


def clustered(m: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n_blobs = 60
    centres = rng.standard_normal((n_blobs, d))
    blob = rng.integers(0, n_blobs, m)
    x = centres[blob] + 1.0 * rng.standard_normal((m, d))
    pred = np.where(rng.random(m) < 0.3, rng.integers(0, 3, m), blob % 3)
    return _unit(x), pred.astype(np.int64)


def unstructured(m: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    feats = sp.random(m, d, density=0.01, random_state=seed, format="csr", data_rvs=np.ones)
    n_edges = 3 * m
    src, dst = rng.integers(0, m, n_edges), rng.integers(0, m, n_edges)
    adj = sp.coo_matrix((np.ones(n_edges), (src, dst)), shape=(m, m)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.float32)
    adj.setdiag(0)
    adj.eliminate_zeros()
    deg = np.maximum(np.asarray(adj.sum(axis=1)).ravel(), 1.0)
    x = feats.toarray().astype(np.float32)
    agg = x.copy()
    for _ in range(3):
        x = 0.5 * x + 0.5 * (adj @ x) / deg[:, None]
        agg += x
    pred = rng.integers(0, 3, m)
    return _unit(agg), pred.astype(np.int64)


def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0).astype(np.float32)


def ground_truth(x: np.ndarray, pred: np.ndarray, q: np.ndarray) -> np.ndarray:
    s = x[q].astype(np.float64) @ x.T.astype(np.float64)
    s[pred[q][:, None] == pred[None, :]] = -np.inf
    part = np.argpartition(-s, K, axis=1)[:, : K + 5]
    ps = np.take_along_axis(s, part, axis=1)
    order = np.lexsort((part, -ps), axis=1)[:, :K]
    return np.take_along_axis(part, order, axis=1)


def recall(pos: np.ndarray, ref: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / K for a, b in zip(pos, ref, strict=True)]))


def measure(searcher, q: np.ndarray, ref: np.ndarray, n_single: int) -> dict[str, float]:
    """Recall of one batch call; latencies = best of ``REPEATS`` runs (the machine is shared)."""
    batch, single = np.inf, np.inf
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        res = searcher.local(q, K)
        batch = min(batch, (time.perf_counter() - t0) / q.size)
        t0 = time.perf_counter()
        for qi in q[:n_single]:
            searcher.local(np.array([qi]), K)
        single = min(single, (time.perf_counter() - t0) / n_single)
    return {
        "recall@10": recall(res.evidence, ref),  # node ids = positions (arange ids)
        "batch_ms/q": 1e3 * batch,
        "single_ms/q": 1e3 * single,
    }


def faiss_rows(space: SearchSpace, q, ref, quick: bool, n_single: int) -> list[dict]:
    rows = []

    def add(label: str, params: dict, searcher=None, build_s=None) -> FaissSearcher:
        if searcher is None:
            t0 = time.perf_counter()
            searcher = FaissSearcher(random_state=0, **params).build(space)
            build_s = time.perf_counter() - t0
        rows.append(
            {
                "backend": "faiss",
                "setting": label,
                "build_s": build_s,
                **measure(searcher, q, ref, n_single),
            }
        )
        return searcher

    add("flat (exact)", {"index_type": "flat"})
    for nprobe in (1, 4, 16, 64) if quick else (1, 4, 8, 16, 32, 64):
        add(f"ivf nlist=auto nprobe={nprobe}", {"index_type": "ivf", "nprobe": nprobe})
    for m_links in (16, 32) if quick else (16, 32, 48):
        t0 = time.perf_counter()
        s = FaissSearcher(random_state=0, index_type="hnsw", M=m_links, ef_construction=80)
        s.build(space)
        build_s = time.perf_counter() - t0
        for ef in (16, 64, 128) if quick else (16, 32, 64, 128, 256):
            s.ef_search = ef
            add(f"hnsw M={m_links} efSearch={ef}", {}, searcher=s, build_s=build_s)
    return rows


def index_rows(space: SearchSpace, q, ref, quick: bool, n_single: int) -> list[dict]:
    rows = []
    n_part = 20 if quick else 50
    settings = [
        # max_probe=1: the paper's query rule (the entry cluster only)
        ("paper (weight entry)", {"max_probe": 1}),
        ("margin entry", {"entry": "margin", "max_probe": 1}),
        ("w/o WC", {"weighted": False, "max_probe": 1}),
        ("w/o SP", {"supplementary": False, "max_probe": 1}),
        ("paper, n_probe=2", {"n_probe": 2, "max_probe": 2}),
        ("margin, n_probe=2", {"entry": "margin", "n_probe": 2, "max_probe": 2}),
        ("default (bound multi-probe, max_probe=7)", {}),
    ]
    for label, params in settings:
        t0 = time.perf_counter()
        s = IndexSearcher(random_state=0, n_partitions=n_part, **params).build(space)
        build_s = time.perf_counter() - t0
        rows.append(
            {
                "backend": "index",
                "setting": f"{label} ({n_part}x10)",
                "build_s": build_s,
                **measure(s, q, ref, n_single),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="m = 5,000 and fewer settings")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "faiss_tuning.md"))
    args = parser.parse_args(argv)
    faiss.omp_set_num_threads(N_THREADS)
    measured_commit = commit()
    m = 5_000 if args.quick else 20_000
    d = 500
    n_q, n_single = 1_000, 100
    tables = {}
    for name, maker in (("clustered", clustered), ("unstructured", unstructured)):
        x, pred = maker(m, d)
        space = SearchSpace(x, pred, np.arange(m, dtype=np.int64))
        q = np.random.default_rng(1).choice(m, n_q, replace=False)
        ref = ground_truth(x, pred, q)
        rows = faiss_rows(space, q, ref, args.quick, n_single)
        rows += index_rows(space, q, ref, args.quick, n_single)
        df = pd.DataFrame(rows)
        exact = df.loc[df.setting == "flat (exact)"].iloc[0]
        df["speedup_batch"] = exact["batch_ms/q"] / df["batch_ms/q"]
        df["speedup_single"] = exact["single_ms/q"] / df["single_ms/q"]
        tables[name] = df
        print(f"\n== {name} (m={m}, d={d}) ==")
        print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))

    cmd = "python benchmarks/tune_faiss_index.py" + (" --quick" if args.quick else "")
    lines = [
        "# faiss / LocalCE-I index tuning (recall@10 and latency)",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; "
        f"python {sys.version.split()[0]}, faiss {faiss.__version__}, numpy {np.__version__}",
        commit_line(measured_commit),
        f"- threads: faiss.omp_set_num_threads({N_THREADS}), OMP/OPENBLAS/MKL_NUM_THREADS=1",
        f"- command: `{cmd}`",
        f"- data: m = {m} unit vectors, d = {d}, 3 predicted classes; {n_q} random queries, "
        f"k = {K}; ground truth = exact float64 top-10 among the other classes",
        "- timings (best of 3) were taken on a 2-core machine shared with other jobs "
        "(contention): compare rows within a table, not absolute numbers",
        "",
    ]
    for name, df in tables.items():
        lines += [
            f"## {name}",
            "",
            "```",
            df.to_string(index=False, float_format=lambda v: f"{v:.3f}"),
            "```",
            "",
        ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    existing_notes = ""
    if out.exists():
        text = out.read_text()
        marker = "## Notes"
        if marker in text:
            existing_notes = text[text.index(marker) :]
    out.write_text("\n".join(lines) + ("\n" + existing_notes if existing_notes else ""))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
