"""How long a tabular command takes from the shell, and whether it loads torch.

Usage::

    python benchmarks/bench_cli_start.py [--rows 200] [--repeats 5] [--out FILE]

Each command runs in a fresh interpreter (``python -c``: ``gnnaudit.cli.main.main(argv)``, then
it reports whether ``torch`` / ``torch_geometric`` are in ``sys.modules``) on a table of
``--rows`` rows (two normal columns and a binary group column, seed 0): ``tree-cluster`` (2
clusters, depth 2), ``fairden`` (the group column sensitive) and ``explain-dbscan`` (row 0).
Each command runs twice: as it is, and after importing every loader module of
``gnnaudit.datasets`` first, which is what ``import gnnaudit.datasets`` did before it loaded its
names on first use (14adf45); the reference row imports torch and PyG alone. One warm-up run of each, then the median and the range of ``--repeats`` runs,
interleaved so that a change of machine load hits every row. The process inherits this shell's
environment (``PYTHONDONTWRITEBYTECODE`` included: without bytecode every run compiles
gnnaudit's modules again; the header says which). Writes ``benchmarks/results/cli_start.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_audit import RunHeader, fmt_table  # noqa: E402

RESULTS = HERE / "results" / "cli_start.md"

#: what ``import gnnaudit.datasets`` ran before 14adf45: every loader module, torch and PyG with
#: them (prepended for the "eager" rows, the same command otherwise)
EAGER = (
    "import gnnaudit.datasets.graph_files, gnnaudit.datasets.graph_read, gnnaudit.datasets.nifty, "
    "gnnaudit.datasets.nifty_dataset, gnnaudit.datasets.pyg, gnnaudit.datasets.synthetic\n"
)
#: the last line of every run: which of torch and PyG the interpreter holds
LOADED = "print('LOADED', 'torch' in sys.modules, 'torch_geometric' in sys.modules)\n"
RUN = (
    "import sys\n"
    "from gnnaudit.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "assert code == 0, code\n"
) + LOADED
REFERENCE = "import sys, torch, torch_geometric\n" + LOADED


def commands(table: Path) -> dict[tuple[str, str], list[str]]:
    """The measured runs: (command, loaders) -> the interpreter's arguments."""
    t = str(table)
    argv = {
        "tree-cluster": ["tree-cluster", t, "--n-clusters", "2", "--depth", "2", "--ignore", "g"],
        "fairden": ["fairden", t, "--sensitive", "g", "--no-progress"],
        "explain-dbscan": [
            "explain-dbscan",
            t,
            "--eps",
            "0.8",
            "--min-samples",
            "3",
            "--index",
            "0",
        ],  # fmt: skip
    }
    runs = {}
    for name, args in argv.items():
        runs[(name, "on first use (now)")] = ["-c", RUN, *args]
        runs[(name, "all at import (before)")] = ["-c", EAGER + RUN, *args]
    runs[("(reference) import torch, torch_geometric", "")] = ["-c", REFERENCE]
    return runs


def run_once(args: list[str]) -> tuple[float, str]:
    """One fresh interpreter: its wall seconds and what it reported loaded."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=False, timeout=600
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{args[2:5]} failed:\n{done.stderr[-2000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("LOADED"))
    _, torch_loaded, pyg_loaded = line.split()
    return wall, f"torch {'yes' if torch_loaded == 'True' else 'no'}, PyG " + (
        "yes" if pyg_loaded == "True" else "no"
    )


def measure(rows: int, repeats: int) -> list[dict]:
    import numpy as np
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "table.csv"
        rng = np.random.default_rng(0)
        pd.DataFrame(
            {"x": rng.normal(size=rows), "y": rng.normal(size=rows), "g": rng.integers(0, 2, rows)}
        ).to_csv(table, index=False)
        cmds = commands(table)
        times: dict[tuple[str, str], list[float]] = {name: [] for name in cmds}
        loaded: dict[tuple[str, str], str] = {}
        for args in cmds.values():  # warm-up: caches of the file system and of bytecode
            run_once(args)
        for _ in range(repeats):
            for name, args in cmds.items():
                wall, loaded[name] = run_once(args)
                times[name].append(wall)
    return [
        {
            "command": name[0],
            "gnnaudit.datasets loaders": name[1],
            "median_s": statistics.median(t),
            "min_s": min(t),
            "max_s": max(t),
            "loads": loaded[name],
        }
        for name, t in times.items()
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", type=Path, default=RESULTS)
    a = p.parse_args()
    header = RunHeader("bench_cli_start.py")
    import pandas as pd

    df = pd.DataFrame(measure(a.rows, a.repeats))
    print(df.to_string(index=False))
    bytecode = "off" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    lines = header.lines(
        "Start of the tabular commands (`bench_cli_start.py`)",
        "each command's own defaults",
        machine_extra=f"; bytecode writing {bytecode} (PYTHONDONTWRITEBYTECODE)",
    )
    lines += [
        f"A fresh interpreter per run, a table of {a.rows} rows; one warm-up run each, then "
        f"the median and the range of {a.repeats} interleaved runs (seconds of wall time).",
        "",
        fmt_table(df, "%.2f"),
        "",
        "Now the tabular commands load neither torch nor PyG: `gnnaudit.datasets` imports a "
        "loader only when its name is first used. The `before` rows run the same command after "
        "importing every loader module, as `import gnnaudit.datasets` did before 14adf45: the "
        "difference is about the reference row, the price of the two imports.",
        "",
    ]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("\n".join(lines))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
