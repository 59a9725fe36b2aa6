"""Training progress bars: drawn on stderr with progress=True, nothing at all on a non-terminal
stderr with progress=None, in Python as in ``gnnaudit train``."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gnnaudit.cli.main import main
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError
from gnnaudit.training import train_node_classifier
from gnnaudit.training.fair_finetune import FairFinetune

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _few_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def small():
    return synthetic_credit_graph(num_nodes=120, seed=1)


def _train(small, **kw):
    return train_node_classifier(small, max_epochs=4, num_layers=2, hidden_channels=4, **kw)


def test_progress_true_draws_a_bar_over_the_steps_on_stderr(small, capsys):
    _train(small, progress=True)
    out, err = capsys.readouterr()
    assert "training" in err and "/4 " in err and "step" in err
    assert "training" not in out and "\r" not in out  # Lightning's stdout bar stays off


def test_mini_batches_count_every_step(small, capsys):
    _train(small, progress=True, batch_size=40, patience=None)
    err = capsys.readouterr().err
    batches = -(-int(small.train_mask.sum()) // 40)
    assert f"/{4 * batches} " in err and "/4 " not in err


@pytest.mark.parametrize("progress", [None, False])
def test_no_bar_and_no_escape_junk_on_a_non_terminal_stderr(small, capsys, monkeypatch, progress):
    stream = io.StringIO()  # isatty() is False
    monkeypatch.setattr(sys, "stderr", stream)
    _train(small, progress=progress)
    assert stream.getvalue() == ""
    out, err = capsys.readouterr()
    assert "\r" not in out and "\x1b" not in out and err == ""


def test_progress_none_on_a_terminal_draws_the_bar(small, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    _train(small)
    assert "training" in stream.getvalue()


def test_former_flag_and_bad_values(small, capsys):
    _train(small, enable_progress_bar=True)
    assert "training" in capsys.readouterr().err
    with pytest.raises(InvalidInputError, match="progress must be True, False or None"):
        _train(small, progress="yes")


def test_fair_finetune_bar(small, capsys):
    module, _ = _train(small, progress=False)
    capsys.readouterr()
    FairFinetune.finetune(module, small, epochs=3, progress=True)
    assert "fair fine-tuning" in capsys.readouterr().err
    FairFinetune.finetune(module, small, epochs=3)  # stderr captured: not a terminal
    assert capsys.readouterr().err == ""


def _cli_train(tmp_path, name, *extra):
    """Start ``gnnaudit train`` into ``tmp_path / name`` with stderr redirected to a file;
    returns a function that waits for it: ``(returncode, stdout bytes, stderr text)``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    err_file = tmp_path / f"{name}.err.txt"
    argv = [sys.executable, "-m", "gnnaudit", "train", "--num-nodes", "60", "--epochs", "3"]
    argv += ["--layers", "1", "--hidden", "4", "--out", str(tmp_path / name), *extra]
    err = open(err_file, "w")  # closed by wait()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env)

    def wait() -> tuple[int, bytes, str]:
        try:
            out, _ = proc.communicate(timeout=300)
        finally:
            err.close()
        return proc.returncode, out, err_file.read_text()

    return wait


def test_cli_train_redirected_stderr_has_no_bar(tmp_path, capsys):
    # a fresh process (its first imports print nothing either) whose stderr is a file; while it
    # imports torch and Lightning, the same command with --progress runs here, its stderr
    # captured (not a terminal): the flag draws the bar anyway
    plain = _cli_train(tmp_path, "run")
    argv = ["train", "--num-nodes", "60", "--epochs", "3", "--layers", "1", "--hidden", "4"]
    forced_returncode = main([*argv, "--out", str(tmp_path / "forced"), "--progress", "--force"])
    forced_err = capsys.readouterr().err
    returncode, out, err = plain()
    assert returncode == 0, err
    assert err == ""
    assert b"\r" not in out and b"\x1b" not in out
    assert forced_returncode == 0 and "training" in forced_err and "/3 " in forced_err
