"""Early snapshots or not, on the same runs: the selection rule re-applied to the candidates of
``bench_fair_heldout.py --candidates`` with and without the early snapshots.

Usage::

    python benchmarks/fair_heldout_early.py results/fair_heldout_candidates.csv \\
        results/fair_heldout_fresh_candidates.csv results/fair_heldout_back_candidates.csv

``FairFinetune.finetune`` keeps each fine-tuning run's weights every ``epochs // n_candidates``
steps and, with ``early_snapshots=True`` (the default since 2026-12-07), also after steps 1, 2,
4, ... below the first of those. The runs themselves do not depend on it (a snapshot is a copy),
so the candidates without the early steps are exactly what ``early_snapshots=False`` would have
selected from: this script re-applies the library's rule
(:func:`gnnaudit.training.fair_selection.select_candidate`) to both sets of each run and reads
the chosen candidates' test figures from the files (measured by ``bench_fair_heldout.py``
independently of the library). A paired comparison: the same vanilla model, the same runs, the
same test nodes; only the candidate set differs.

Per run: the two picks and whether each passes issue 36's held-out rule; ``any_passed``: some
candidate would. Per file and graph: runs, passes of each rule, and the mean test change
against the vanilla model of AUROC, ΔSP, ΔEO (in points; negative = lower).

Writes ``benchmarks/results/fair_heldout_early.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's gnnaudit, not an installed one

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from bench_audit import RunHeader, fmt_table  # noqa: E402
from bench_fair_heldout import early_steps  # noqa: E402

from gnnaudit.training.fair_selection import select_candidate  # noqa: E402

RESULTS = HERE / "results" / "fair_heldout_early.md"
#: the selection table's columns that the rule reads
RULE_COLUMNS = [
    "candidate",
    "step",
    "offset",
    "val_auroc",
    "val_auroc_se",
    "val_bacc",
    "val_top_share",
    "val_dsp",
    "val_deo",
    "val_cf",
]
TARGETS = ("cf", "dsp", "deo")


def pick(run: pd.DataFrame) -> pd.Series:
    """The candidate (row of ``run``) that the library's rule selects from ``run``."""
    table = select_candidate(run[RULE_COLUMNS].reset_index(drop=True), TARGETS)
    return run.iloc[int(np.flatnonzero(table["chosen"].to_numpy())[0])]


def compare(frame: pd.DataFrame, early: set[int], source: str) -> pd.DataFrame:
    """One row per run of ``frame`` (a ``--candidates`` file): both picks and their figures."""
    rows = []
    for (graph, split, seed), run in frame.groupby(["graph", "split", "seed"], sort=False):
        run = run.reset_index(drop=True)
        vanilla = run.iloc[0]
        with_early = pick(run)
        if with_early["candidate"] != run.loc[run["chosen"], "candidate"].iloc[0]:
            raise SystemExit(f"{source} {graph} {split} seed {seed}: the rule does not reproduce")
        without = pick(run[~run["step"].isin(early) | (run.index == 0)])
        row = {"file": source, "graph": graph, "split": split, "seed": seed}
        for name, chosen in (("early", with_early), ("regular", without)):
            row[f"{name}_pick"] = chosen["candidate"]
            row[f"{name}_passed"] = bool(chosen["passed"])
            for metric in ("auroc", "dsp", "deo"):
                change = chosen[f"test_{metric}"] - vanilla[f"test_{metric}"]
                row[f"{name}_d{metric}"] = 100 * change
        row["any_passed"] = bool(run["passed"].any())
        rows.append(row)
    return pd.DataFrame(rows)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per file and graph, and over everything: run count, passes, mean changes."""
    changes = [f"{r}_d{m}" for r in ("early", "regular") for m in ("auroc", "dsp", "deo")]
    passes = ["early_passed", "regular_passed", "any_passed"]

    def block(df: pd.DataFrame) -> pd.Series:
        out = pd.Series({"runs": len(df)})
        out = pd.concat([out, df[passes].sum().astype(int), df[changes].mean()])
        out["early_won"] = int((df["early_passed"] & ~df["regular_passed"]).sum())
        out["early_lost"] = int((~df["early_passed"] & df["regular_passed"]).sum())
        return out

    parts = [
        block(df).rename((file, graph))
        for (file, graph), df in runs.groupby(["file", "graph"], sort=False)
    ]
    parts += [block(df).rename(("all", graph)) for graph, df in runs.groupby("graph")]
    table = pd.DataFrame(parts)
    table.index = pd.MultiIndex.from_tuples(table.index, names=["file", "graph"])
    counts = ["runs", *passes, "early_won", "early_lost"]
    table[counts] = table[counts].astype(int)
    return table.reset_index()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", type=Path, nargs="+", help="bench_fair_heldout.py --candidates CSVs")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    header = RunHeader(Path(__file__).name)
    early = early_steps({})
    runs = pd.concat(
        [compare(pd.read_csv(f), early, f.name) for f in args.files], ignore_index=True
    )
    summary = fmt_table(summarise(runs))
    print(summary)
    if args.no_write:
        return
    text = "\n".join(
        [
            *header.lines("Early snapshots or not, on the same held-out runs (issue 36)", "1"),
            "\n\n".join(__doc__.split("\n\n")[3:5]).strip(),
            "",
            f"Early steps re-applied: {sorted(early)} (the default ``epochs`` and "
            "``n_candidates``).",
            "",
            "## Per file and graph (`all`: every file)",
            "",
            summary,
            "",
            "## Every run",
            "",
            fmt_table(runs),
            "",
        ]
    )
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
