"""benchmarks/provenance.py (the commit a results file measured) and run_all.py's index of it.

No benchmark runs here: the git checks use a throwaway repository under ``tmp_path``.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SHA = re.compile(r"^[0-9a-f]{4,40}(\+dirty)?$")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


@pytest.fixture
def provenance(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # how the benchmark scripts find it
    monkeypatch.delenv("GNNAUDIT_BENCH_COMMIT", raising=False)
    return importlib.import_module("provenance")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A committed checkout with the library, a benchmark and a results file."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))  # not the user's
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    root = tmp_path / "checkout"
    for path in ("gnnaudit/core.py", "benchmarks/bench_x.py", "benchmarks/results/x.md"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("v1\n")
    (root / "README.md").write_text("v1\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return root


def test_this_checkout_gives_a_short_sha_or_unknown(provenance):
    got = provenance.commit()
    assert got == "unknown" or SHA.match(got), got


@needs_git
def test_clean_checkout_is_its_short_head(provenance, repo):
    head = _git(repo, "rev-parse", "--short", "HEAD")
    assert re.fullmatch(r"[0-9a-f]{4,40}", head)
    assert provenance.commit(repo) == head
    # outside gnnaudit/ and benchmarks/, or the benchmarks' own outputs: still clean
    (repo / "README.md").write_text("v2\n")
    (repo / "benchmarks/results/x.md").write_text("v2\n")
    (repo / "benchmarks/results/new.md").write_text("new\n")
    (repo / "benchmarks/RESULTS.md").write_text("new\n")
    assert provenance.commit(repo) == head


@needs_git
@pytest.mark.parametrize(
    "change", ["gnnaudit/core.py", "benchmarks/bench_x.py", "benchmarks/new.py", "gnnaudit/n.py"]
)
def test_changed_or_new_code_is_dirty(provenance, repo, change):
    head = _git(repo, "rev-parse", "--short", "HEAD")
    (repo / change).write_text("v2\n")  # a modified tracked file, or an untracked one
    assert provenance.commit(repo) == head + "+dirty"


@needs_git
def test_no_git_checkout_is_unknown(provenance, repo, tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert provenance.commit(plain) == "unknown"  # not a repository
    assert provenance.commit(repo / "benchmarks") == "unknown"  # not a checkout's top
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # git not found
    assert provenance.commit(repo) == "unknown"


def test_environment_names_a_snapshot_commit(provenance, tmp_path, monkeypatch):
    monkeypatch.setenv("GNNAUDIT_BENCH_COMMIT", "abc1234")
    assert provenance.commit(tmp_path) == "abc1234"


def test_commit_line_reads_back(provenance):
    assert provenance.commit_line("abc1234") == "- commit: `abc1234`"
    line = provenance.commit_line("abc1234", "def5678+dirty", "abc1234")
    assert line == "- commit: `abc1234`, `def5678+dirty`"
    text = f"# T\n\n- date: today\n{line}\n- command: `x`\n\n{provenance.commit_line('9f9f9f9')}\n"
    assert provenance.read_commits(text) == ["abc1234", "def5678+dirty", "9f9f9f9"]
    assert provenance.read_commits("# T\n\n- date: today\n- command: `x`\n") == []
    assert provenance.commit_line() == f"- commit: `{provenance.commit()}`"  # now, by default


def test_results_index_shows_each_files_commit(provenance, tmp_path):
    run_all = importlib.import_module("run_all")
    results = tmp_path / "results"
    results.mkdir()
    (results / "a.md").write_text("# Old run\n\n- date: then\n- command: `a`\n\nbody a\n")
    (results / "b.md").write_text(f"# New run\n\n{provenance.commit_line('abc1234')}\n\nbody b\n")
    out = run_all.collect(results, tmp_path / "RESULTS.md")
    text = out.read_text()
    assert "- [`a.md`](results/a.md): Old run — commit not recorded" in text
    assert "- [`b.md`](results/b.md): New run — measured at commit `abc1234`" in text
    assert text.index("## Contents") < text.index("# Old run") < text.index("# New run")
    assert "body a" in text and "body b" in text


def test_run_all_goes_on_past_a_failure_and_gives_quick_only_where_taken(
    provenance, tmp_path, monkeypatch, capsys
):
    """``run_all.py --quick``: a script without ``--quick`` runs without it, a failing script does
    not stop the queue, the failures are named and the exit status is 1; the index is written
    into the folder the runner serves (here a temporary one)."""
    run_all = importlib.import_module("run_all")
    (tmp_path / "results").mkdir()
    log = tmp_path / "ran.txt"
    takes_quick = (
        'import argparse, pathlib\np = argparse.ArgumentParser()\np.add_argument("--quick", '
        'action="store_true")\na = p.parse_args()\n'
        f"pathlib.Path({str(log)!r}).open('a').write(f'a quick={{a.quick}}\\n')\n"
    )
    no_quick = (
        "import argparse, pathlib\nargparse.ArgumentParser().parse_args()\n"
        f"pathlib.Path({str(log)!r}).open('a').write('c\\n')\n"
    )
    (tmp_path / "bench_a.py").write_text(takes_quick)
    (tmp_path / "bench_b.py").write_text("raise SystemExit('no reference repository')\n")
    (tmp_path / "bench_c.py").write_text(no_quick)
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    assert run_all.main(["--quick"]) == 1
    assert log.read_text().splitlines() == ["a quick=True", "c"]  # b failed, c still ran
    assert "failed (1): bench_b.py" in capsys.readouterr().err
    assert (tmp_path / "RESULTS.md").is_file()
    assert run_all.main(["--only", "a"]) == 0
    assert log.read_text().splitlines()[-1] == "a quick=False"


def test_rerun_diff_counts_picks_and_decisions_not_the_table_form(provenance):
    """``fair_gnn_rerun_diff.py``: a record whose selection table only changed form is no
    change; a changed pick, changed decisions under the same pick and a new row are told apart."""
    rerun = importlib.import_module("fair_gnn_rerun_diff")

    def rec(seed, chosen, dsp, form="rows", method="fairfinetune"):
        rows = [{"candidate": "vanilla", "val_dsp": 0.1}, {"candidate": chosen, "val_dsp": dsp}]
        table = rows if form == "rows" else {
            "columns": ["candidate", "val_dsp"], "data": [[r["candidate"], r["val_dsp"]] for r in rows]
        }  # fmt: skip
        return {"dataset": "bail", "backbone": "gcn", "method": method, "seed": seed,
                "auroc": 0.9, "f1": 0.8, "dsp": dsp, "deo": 0.01, "cf": 0.0,
                "chosen": chosen, "selection": table}  # fmt: skip

    old = [rec(0, "a", 0.03), rec(1, "a", 0.03), rec(2, "a", 0.03), rec(3, "a", 0.03)]
    new = [
        rec(0, "a", 0.03, form="split"),  # the form only
        rec(1, "b", 0.02, form="split"),  # another pick
        rec(2, "a", 0.05, form="split"),  # the same pick, other decisions
        rec(3, "a", 0.03, form="split"),
        rec(0, "c", 0.01, method='fairfinetune:{"parity":"auto"}'),  # a new row
    ]
    lines = rerun.diff_rows(old, new)
    assert [line[2] for line in lines] == ["fairfinetune", 'fairfinetune:{"parity":"auto"}']
    assert lines[0][3:6] == ["2", "1 of 2", "0 of 2"]
    assert lines[1][4:6] == ["new", "new"]
    assert rerun.diff_rows(old, [rec(0, "a", 0.03, form="split")]) == []
