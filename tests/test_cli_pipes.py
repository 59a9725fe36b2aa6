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
                "--k",
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
