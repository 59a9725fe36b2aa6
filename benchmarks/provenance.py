"""Which code a benchmark measured: the git commit of this checkout, written into every results
file's header and read back by ``run_all.py``.

A results file under ``benchmarks/results/`` states, next to its date, machine and command::

    - commit: `f78f2ea`          the checkout's HEAD when the run started
    - commit: `f78f2ea+dirty`    ... with uncommitted changes to gnnaudit/ or benchmarks/
    - commit: `unknown`          no git, or not a git checkout (e.g. a ``git archive`` snapshot)

Use :func:`commit` once when the run starts (the code that runs is the code of that moment) and
:func:`commit_line` when the header is written; ``RunHeader`` of ``bench_audit.py`` does both.
:func:`read_commits` parses the line back (``run_all.py`` shows it per file in ``RESULTS.md``).

"dirty" means ``git status --porcelain`` lists a change (untracked files included) under
``gnnaudit/`` or ``benchmarks/``, except the benchmarks' own outputs (``benchmarks/results/``,
``benchmarks/RESULTS.md``): one results file rewritten by an earlier benchmark does not make the
next one's code dirty. A run from a snapshot without git may state its commit through the
environment variable ``GNNAUDIT_BENCH_COMMIT`` (e.g. ``$(git rev-parse --short HEAD)`` of the
commit the snapshot was made from), which then wins over git.

Standard library only, no failure: every git problem (git missing, not a repository, a
timeout) gives ``unknown``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNKNOWN = "unknown"
ENV = "GNNAUDIT_BENCH_COMMIT"
# what makes a checkout dirty: the library and the benchmarks, not the benchmarks' outputs
WATCHED = ("gnnaudit", "benchmarks")
OUTPUTS = ("benchmarks/results", "benchmarks/RESULTS.md")
_LINE = re.compile(r"^- commit: (.*)$", re.MULTILINE)


def _git(root: Path, *args: str) -> str:
    """``git args`` run in ``root``: its stripped stdout; ``OSError`` or ``SubprocessError``
    (which includes a non-zero exit and the timeout) when git cannot answer."""
    done = subprocess.run(
        ["git", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout.strip()


def commit(root: Path | str = ROOT) -> str:
    """The short hash of ``root``'s HEAD, ``+dirty`` when the library or the benchmarks have
    uncommitted changes, ``unknown`` without git.

    ``root`` is the checkout (default: the one holding this file); a folder that is not the top
    of a git checkout (a snapshot unpacked inside another repository) gives ``unknown`` too.
    ``$GNNAUDIT_BENCH_COMMIT``, when set and not empty, is returned as it is.
    """
    if os.environ.get(ENV):
        return os.environ[ENV]
    root = Path(root).resolve()
    try:
        if Path(_git(root, "rev-parse", "--show-toplevel")).resolve() != root:
            return UNKNOWN
        sha = _git(root, "rev-parse", "--short", "HEAD")
        excluded = [f":(exclude){path}" for path in OUTPUTS]
        # --no-optional-locks: a status that never writes the index (no clash with a git
        # command someone runs meanwhile)
        changes = _git(
            root, "--no-optional-locks", "status", "--porcelain", "--", *WATCHED, *excluded
        )
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    return sha + ("+dirty" if changes else "")


def commit_line(*commits: str) -> str:
    """The header line ``- commit: `sha```; with no argument, :func:`commit` now. A report
    merged from runs at several commits passes them all: each is listed once, in order."""
    shown = list(dict.fromkeys(commits or (commit(),)))
    return "- commit: " + ", ".join(f"`{c}`" for c in shown)


def read_commits(text: str) -> list[str]:
    """The commits stated by the ``- commit:`` header lines of a results file, each once, in
    order of appearance (a file holding several runs has several lines); ``[]`` for a file
    written before the line existed."""
    found = [c for line in _LINE.findall(text) for c in re.findall(r"`([^`]+)`", line)]
    return list(dict.fromkeys(found))
