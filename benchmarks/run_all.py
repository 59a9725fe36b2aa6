"""Run every ``benchmarks/bench_*.py`` script, then rebuild ``benchmarks/RESULTS.md``.

Usage: ``python benchmarks/run_all.py [--quick] [--only NAME ...]`` (``--quick`` reaches the
scripts that take it; a script that fails, e.g. for want of a reference repository or data it
names, does not stop the others: the failures are listed at the end and the exit status is 1).
Each script writes its own section to ``benchmarks/results/<area>.md``; this runner concatenates
those sections after an index that names, per file, the commit it measured (its ``- commit:``
header line, written by ``provenance.commit_line``; "commit not recorded" for files older than
that line).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from provenance import read_commits  # this folder: the script's own, first on sys.path

HERE = Path(__file__).resolve().parent


def title(text: str) -> str:
    """The first heading of a results file, without its ``#`` marks."""
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return "(no heading)"


def measured_at(text: str) -> str:
    """Where the index says which code a results file measured (its ``- commit:`` lines)."""
    commits = read_commits(text)
    if not commits:
        return "commit not recorded"
    shown = ", ".join(f"`{c}`" for c in commits)
    return f"measured at commit{'s' if len(commits) > 1 else ''} {shown}"


def collect(results: Path = HERE / "results", out: Path = HERE / "RESULTS.md") -> Path:
    """Write ``out``: an intro, an index (file, title, commit measured) and every results file
    of ``results`` in name order."""
    sections = [(s, s.read_text()) for s in sorted(results.glob("*.md"))]
    parts = [
        "# gnnaudit benchmark results\n",
        "Each section is written by the script named in it (`python benchmarks/bench_<area>.py`)"
        " and states the machine, the date, the commit measured, the thread settings and the "
        "exact command. Regenerate everything with `make bench`.\n",
        "The commit (`- commit:` in each header, `benchmarks/provenance.py`) is the checkout's "
        "`git rev-parse --short HEAD` when the run started; `+dirty`: with uncommitted changes "
        "to `gnnaudit/` or `benchmarks/` other than the results files; `unknown`: no git. A file "
        'written before commits were recorded reads "commit not recorded" below.\n',
        "## Contents\n",
        "\n".join(
            f"- [`{s.name}`](results/{s.name}): {title(text)} — {measured_at(text)}"
            for s, text in sections
        )
        + "\n",
    ]
    parts += [text.rstrip() + "\n" for _, text in sections]
    out.write_text("\n".join(parts))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--only", nargs="*", default=None, help="areas to run, e.g. evidence")
    parser.add_argument("--collect-only", action="store_true", help="only rebuild RESULTS.md")
    args = parser.parse_args(argv)
    failed: list[str] = []
    if not args.collect_only:
        for script in sorted(HERE.glob("bench_*.py")):
            area = script.stem.removeprefix("bench_")
            if args.only and area not in args.only:
                continue
            # --quick goes to the scripts that have small sizes; the others run as they are
            quick = args.quick and '"--quick"' in script.read_text()
            cmd = [sys.executable, str(script)] + (["--quick"] if quick else [])
            print("+", " ".join(cmd), flush=True)
            if subprocess.run(cmd).returncode != 0:  # the queue goes on; named at the end
                failed.append(script.name)
    print(f"wrote {collect(HERE / 'results', HERE / 'RESULTS.md')}")
    if failed:
        print(f"failed ({len(failed)}): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
