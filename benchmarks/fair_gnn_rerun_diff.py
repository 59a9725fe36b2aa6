"""What a re-run changed in ``fair_gnn.json``: its records at a git revision against today's.

Usage::

    python benchmarks/fair_gnn_rerun_diff.py c71f182

Records are matched by (dataset, backbone, method, seed). For every FairFinetune row with a
record on both sides it prints how many runs kept their pick (``chosen``) and how many kept their
decisions too (the same pick, and F1, ΔSP, ΔEO and CF equal), and the row's means before and
after (% of test nodes); rows new since the revision are listed with their means. Nothing is
written: the re-runs themselves come from ``bench_fair_gnn.py``, and each replaced record's
``note`` says when and how it was re-run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PATH = "benchmarks/results/fair_gnn.json"
METRICS = ("auroc", "f1", "dsp", "deo", "cf")
DECISIONS = ("f1", "dsp", "deo", "cf")


def _key(r: dict[str, Any]) -> tuple[str, str, str, int]:
    return r["dataset"], r["backbone"], r["method"], int(r["seed"])


def _mean(records: list[dict[str, Any]], metric: str) -> float:
    return 100.0 * sum(r[metric] for r in records) / len(records)


def _means(records: list[dict[str, Any]]) -> str:
    return " / ".join(f"{_mean(records, m):.2f}" for m in METRICS)


def _split(r: dict[str, Any]) -> dict[str, Any]:
    """``r`` with its selection table in the columns + rows form (older records: a list of
    rows), so that a record differs only when its content does."""
    table = r.get("selection")
    if not isinstance(table, list) or not table:
        return r
    columns = list(table[0])
    return {
        **r,
        "selection": {"columns": columns, "data": [[row[c] for c in columns] for row in table]},
    }


def diff_rows(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[list[str]]:
    """One line per FairFinetune row with a record that differs between ``old`` and ``new``
    (the form of the selection table aside)."""
    before = {_key(r): _split(r) for r in old}
    rows: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in new:
        if r["method"].startswith("fairfinetune") and before.get(_key(r)) != _split(r):
            rows[_key(r)[:3]].append(r)
    out = []
    for (dataset, backbone, method), runs in sorted(rows.items()):
        then = [before[_key(r)] for r in runs if _key(r) in before]
        if not then:
            out.append([dataset, backbone, method, str(len(runs)), "new", "new", "-", _means(runs)])
            continue
        now = [r for r in runs if _key(r) in before]
        pick = [a.get("chosen") == b.get("chosen") for a, b in zip(then, now, strict=True)]
        same = [
            p and all(a[m] == b[m] for m in DECISIONS)
            for p, a, b in zip(pick, then, now, strict=True)
        ]
        out.append(
            [dataset, backbone, method, str(len(now)), f"{sum(pick)} of {len(now)}",
             f"{sum(same)} of {len(now)}", _means(then), _means(now)]
        )  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("rev", help="git revision of the records to compare against")
    args = p.parse_args(argv)
    root = HERE.parent
    shown = subprocess.run(
        ["git", "-C", str(root), "show", f"{args.rev}:{PATH}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    old = json.loads(shown.stdout)
    new = json.loads((root / PATH).read_text())
    head = ["dataset", "backbone", "row", "runs", "same pick", "same decisions",
            "before (AUROC / F1 / ΔSP / ΔEO / CF)", "now"]  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for line in diff_rows(old, new):
        print("| " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
