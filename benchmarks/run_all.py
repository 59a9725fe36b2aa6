"""Run every ``benchmarks/bench_*.py`` script, then rebuild ``benchmarks/RESULTS.md``.

Usage: ``python benchmarks/run_all.py [--quick] [--only NAME ...]``. Each script writes its own
section to ``benchmarks/results/<area>.md``; this runner concatenates those sections.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def collect() -> Path:
    sections = sorted((HERE / "results").glob("*.md"))
    parts = [
        "# gnnaudit benchmark results\n",
        "Each section is written by the script named in it (`python benchmarks/bench_<area>.py`)"
        " and states the machine, the date, the thread settings and the exact command. "
        "Regenerate everything with `make bench`.\n",
    ]
    parts += [s.read_text().rstrip() + "\n" for s in sections]
    out = HERE / "RESULTS.md"
    out.write_text("\n".join(parts))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--only", nargs="*", default=None, help="areas to run, e.g. evidence")
    parser.add_argument("--collect-only", action="store_true", help="only rebuild RESULTS.md")
    args = parser.parse_args()
    if not args.collect_only:
        for script in sorted(HERE.glob("bench_*.py")):
            area = script.stem.removeprefix("bench_")
            if args.only and area not in args.only:
                continue
            cmd = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
    print(f"wrote {collect()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
