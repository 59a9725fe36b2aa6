"""A closed standard-output pipe (``gnnaudit ... | head -1``) ends the command with exit 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def test_closed_stdout_pipe_exits_0_without_a_traceback(tmp_path):
    rng = np.random.default_rng(0)
    table = tmp_path / "t.csv"
    pd.DataFrame({"x": rng.normal(size=200), "y": rng.normal(size=200)}).to_csv(table, index=False)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command prints anything
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "gnnaudit",
                "tree-cluster",
                str(table),
                "--n-clusters",
                "2",
                "--depth",
                "2",
            ],  # fmt: skip
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            timeout=300,
        )
    finally:
        os.close(write_end)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err


def test_missing_input_fails_before_torch_is_imported(tmp_path):
    """A typo in an input path is named at once, before torch / PyG / Lightning load."""
    code = (
        "import sys\n"
        "from gnnaudit.cli.main import main\n"
        f"rc = main(['audit', '--graph', {str(tmp_path / 'nope')!r}, '--out', "
        f"{str(tmp_path / 'out')!r}])\n"
        "assert rc == 2, rc\n"
        "assert 'torch' not in sys.modules, 'torch was imported before the input check'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--graph" in proc.stderr and "does not exist" in proc.stderr


def test_progress_defaults_to_whether_stderr_is_a_terminal(monkeypatch):
    """Python entry points draw bars only on a terminal (no escape junk in logs)."""
    import dataclasses
    import io

    import pytest

    from gnnaudit._validation import resolve_progress
    from gnnaudit.audit import AuditOptions
    from gnnaudit.errors import InvalidInputError

    # run_audit's progress= is a field of its options (None: automatic)
    fields = {f.name: f for f in dataclasses.fields(AuditOptions)}
    assert fields["progress"].default is None

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert resolve_progress("progress", None) is False
    monkeypatch.setattr(sys, "stderr", Tty())
    assert resolve_progress("progress", None) is True
    assert resolve_progress("progress", False) is False
    with pytest.raises(InvalidInputError, match="progress must be True, False or None"):
        resolve_progress("progress", "yes")
