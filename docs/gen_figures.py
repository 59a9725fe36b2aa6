"""Run the examples for the documentation's gallery and keep their output and figures.

    python docs/gen_figures.py [--only NAME ...]

Each example of ``examples/`` listed in :data:`EXAMPLES` runs as a user would run it (a
subprocess from the repository root, fixed seeds, one thread, small sizes where the script takes
a size), and its printed output, the PNG figures it writes and, for the audits, the charts of
its report (drawn from ``report.json`` by the report's own renderer) are written under
``docs/_generated/NAME/`` with ``output.md``, the fragment the gallery page includes. An example
that fails stops the build (exit 1, its stderr printed): the gallery shows only real runs.
An example whose data set is not on this machine (NIFTY German) gets a fragment that says so.

Measured on a 2-core machine shared with other jobs (load 13): the examples took 3 min wall,
under a minute of CPU; each example's time is printed.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "_generated"


@dataclass(frozen=True)
class Example:
    """How to run one example: its arguments (``{out}`` is its output folder, relative to the
    repository root), the PNG files it writes there, and the report folder whose charts to draw."""

    args: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    report: str | None = None
    needs: str | None = None  # a NIFTY data set: the example runs only when its csv exists
    captions: dict[str, str] = field(default_factory=dict)


def _nifty_root(name: str) -> str | None:
    """The NIFTY data folder holding <name>/<name>.csv (``$GNNAUDIT_NIFTY`` or ../shared)."""
    for candidate in (os.environ.get("GNNAUDIT_NIFTY"), str(ROOT.parent / "shared/datasets/nifty")):
        if candidate and (Path(candidate) / name / f"{name}.csv").is_file():
            return candidate
    return None


EXAMPLES: dict[str, Example] = {
    "exdbscan_2d": Example(
        args=("{out}/exdbscan_2d.png",),
        figures=("exdbscan_2d.png",),
        captions={
            "exdbscan_2d.png": "A noise point between the moons, its reference cores "
            "(red circles: their eps-balls) and its counterfactuals (red diamonds)."
        },
    ),
    "fairden_pareto": Example(
        args=("{out}/fairden_pareto.png",),
        figures=("fairden_pareto.png",),
        captions={
            "fairden_pareto.png": "Left: the (balance, DCSI) points of FairDen's repair "
            "paths and their Pareto front. Right: the chosen clustering."
        },
    ),
    "audit_synthetic": Example(args=("--out", "{out}/report"), report="report"),
    "audit_own_model": Example(
        args=("--out", "{out}/work", "--nodes", "400"), report="work/report_api"
    ),
    "audit_nifty_german": Example(
        args=("{data}", "--out", "{out}/report"), report="report", needs="german"
    ),
    "audit_credit": Example(
        args=("--root", "{data}", "--out", "{out}/run", "--epochs", "60"),
        report="run/after",
        needs="credit",
    ),
}

#: examples that are not scripts to run (a module imported by another example)
MODULES = ("own_gcn",)


def _draw_report_charts(folder: Path, target: Path) -> list[tuple[str, str]]:
    """PNG files of the report's charts (the renderer's own drawing), as (file, caption)."""
    from gnnaudit.audit import AuditReport
    from gnnaudit.audit.report.plots import PNG_KINDS, draw_figure

    report = AuditReport.from_json(folder)
    card = report.summary_card().chart  # the summary card's chart first, as in report.html
    figures = [("summary", "Summary", 0, card)] if card is not None else []
    for section in report.sections:
        figures += [(section.key, section.title, i, f) for i, f in enumerate(section.figures)]
    charts = []
    for key, title, i, fig in figures:
        if fig.kind not in PNG_KINDS:
            continue
        png = draw_figure(fig.kind, fig.data, fig.title, fig.options)
        if not png:
            continue
        name = f"{key}_{i}.png"
        (target / name).write_bytes(base64.b64decode(png))
        charts.append((name, f"{title}: {fig.title}"))
    return charts


def _fragment(
    name: str,
    command: str,
    stdout: str,
    seconds: float,
    figures: list[tuple[str, str]],
    report: str | None,
) -> str:
    lines = [
        f"Output of `{command}`, run by `make docs` ({seconds:.0f} s on the machine that built "
        "this page):",
        "",
        "```text",
        stdout.rstrip(),
        "```",
        "",
    ]
    if report:
        href = f"../_generated/{name}/{report}/report.html"  # relative to the gallery page
        lines += [f"The report this run wrote: {{download}}`report.html <{href}>`.", ""]
    for file, caption in figures:  # paths relative to the gallery page that includes this
        lines += [
            f"```{{figure}} ../_generated/{name}/{file}",
            f":alt: {caption}",
            "",
            caption,
            "```",
            "",
        ]
    return "\n".join(lines)


def run_example(name: str, example: Example) -> None:
    """Run one example and write its folder under ``docs/_generated``."""
    target = OUT / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    rel = target.relative_to(ROOT).as_posix()
    data = _nifty_root(example.needs) if example.needs else None
    if example.needs and data is None:
        (target / "output.md").write_text(
            f"Not run when this page was built: the NIFTY data set `{example.needs}/"
            f"{example.needs}.csv` was not on the machine (`$GNNAUDIT_NIFTY` names its folder).\n"
        )
        print(f"{name}: skipped (data not found)")
        return
    args = [a.format(out=rel, data=data) for a in example.args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, f"examples/{name}.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"examples/{name}.py failed (exit {done.returncode})")
    figures = []
    for file in example.figures:
        if not (target / file).is_file():
            raise SystemExit(f"examples/{name}.py wrote no {file}")
        figures.append((file, example.captions.get(file, file)))
    report = None
    if example.report:
        report = example.report
        figures += _draw_report_charts(target / example.report, target)
    command = " ".join(["python", f"examples/{name}.py", *args])
    (target / "output.md").write_text(
        _fragment(name, command, done.stdout.replace(f"{ROOT}/", ""), seconds, figures, report)
    )
    print(f"{name}: {seconds:.1f} s, {len(figures)} figures")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(EXAMPLES), help="run these only")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    for name in args.only or EXAMPLES:
        run_example(name, EXAMPLES[name])


if __name__ == "__main__":
    main()
