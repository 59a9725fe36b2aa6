"""FairDen's default rounding (``repair``, ``min_balance=0.8``) against the paper's rounding.

Issues 29 and 38's promises, measured: the default's balance is at least the paper rounding's,
at least 0.8 where the paper's is below (or the density fallback, with its warning, where no
candidate reaches 0.8 with 70% of the paper's DCSI), its DCSI (squared, on the clustered
points) at least 70% of the paper rounding's, and the paper's labels unchanged where they
already reach 0.8. Two kinds of data:

* generated blobs: ``k`` Gaussian blobs in 2-D whose sensitive-group share differs per blob
  (drawn uniformly in [0.2, 0.8]), seeds ``0 .. --seeds - 1``, ``k`` in ``--ks``;
* NIFTY credit (a real table, sensitive ``Age``), ``--credit-rows`` rows drawn with the seed,
  ``k`` in 2..4, when ``--credit`` names ``credit.csv``.

Writes ``benchmarks/results/fairden_repair.md``.

    python benchmarks/bench_fairden_repair.py --credit ../shared/datasets/nifty/credit/credit.csv
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's gnnaudit, not an installed one

from bench_audit import RunHeader, fmt_table, set_threads  # noqa: E402

set_threads()  # one thread, before numpy is imported

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from gnnaudit.clustering import FairDen  # noqa: E402

RESULTS = HERE / "results" / "fairden_repair.md"


def blobs(seed: int, k: int, n_per: int = 120) -> tuple[np.ndarray, np.ndarray]:
    """``k`` separated-to-touching 2-D blobs; the sensitive share of each blob differs."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-6, 6, size=(k, 2))
    X = np.concatenate([rng.normal(c, 1.0, size=(n_per, 2)) for c in centres])
    share = rng.uniform(0.2, 0.8, size=k)
    s = np.concatenate([(rng.random(n_per) < p).astype(int) for p in share])
    return X, s


def credit(path: Path, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` standardised rows of NIFTY credit, sensitive attribute ``Age``."""
    frame = pd.read_csv(path).sample(n=rows, random_state=seed)
    s = frame["Age"].to_numpy().astype(int)
    X = frame.drop(columns=["NoDefaultNextMonth", "Age", "Single"], errors="ignore").to_numpy(
        dtype=float
    )
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    return X, s


def measure(name: str, X: np.ndarray, s: np.ndarray, k: int) -> dict[str, object]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fd = FairDen(n_clusters=k).fit(X, sensitive_features=s)
    same = bool(np.array_equal(fd.labels_, fd.paper_labels_))
    ratio = fd.dcsi_ / fd.paper_dcsi_ if fd.paper_dcsi_ > 0 else float("nan")
    return {
        "data": name,
        "k": k,
        "paper_balance": fd.paper_balance_,
        "balance": fd.balance_,
        "worst_cluster": fd.min_cluster_balance_,
        "paper_dcsi": fd.paper_dcsi_,
        "dcsi": fd.dcsi_,
        "dcsi_ratio": ratio,
        "noise": fd.noise_ratio_,
        "path": fd.repair_path_ or "paper",
        "fallback": any("no repair candidate reaches" in str(w.message) for w in caught),
        "paper_labels_kept": same,
    }


def summary(df: pd.DataFrame) -> list[str]:
    below = df["paper_balance"] < 0.8
    ok_balance = (df["balance"] >= df["paper_balance"] - 1e-12).sum()
    kept = df.loc[~below, "paper_labels_kept"].sum()
    return [
        f"- runs: {len(df)}; paper's rounding below 0.8 in {int(below.sum())}",
        f"- default balance >= paper's: {int(ok_balance)} of {len(df)}",
        f"- default balance >= 0.8 where the paper's is below: "
        f"{int((df.loc[below, 'balance'] >= 0.8).sum())} of {int(below.sum())}; the density "
        f"fallback (with its warning) in the others: "
        f"{int(df.loc[below & (df['balance'] < 0.8), 'fallback'].sum())}",
        f"- noise path used: {int(df['path'].str.contains('noise').sum())} runs, noise share "
        f"at most {df['noise'].max():.3f}",
        f"- DCSI >= 70% of the paper's: {int((df['dcsi_ratio'] >= 0.7).sum())} of {len(df)}",
        f"- paper's labels kept where its balance is >= 0.8: {int(kept)} of {int((~below).sum())}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--credit", type=Path, default=None, help="NIFTY credit.csv")
    parser.add_argument("--credit-rows", type=int, default=1000)
    parser.add_argument("--credit-seeds", type=int, default=2)
    args = parser.parse_args()
    header = RunHeader("bench_fairden_repair.py")
    rows = [
        measure(f"blobs seed {seed}", *blobs(seed, k), k)
        for seed in range(args.seeds)
        for k in args.ks
    ]
    if args.credit is not None:
        rows += [
            measure(f"credit seed {seed}", *credit(args.credit, args.credit_rows, seed), k)
            for seed in range(args.credit_seeds)
            for k in (2, 3, 4)
        ]
    df = pd.DataFrame(rows)
    lines = header.lines("FairDen: default repair rounding vs the paper's rounding", "1")
    lines += summary(df) + [""]
    if args.credit is not None:
        lines += ["Credit only:"] + summary(df[df["data"].str.startswith("credit")]) + [""]
    lines += [fmt_table(df), ""]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
