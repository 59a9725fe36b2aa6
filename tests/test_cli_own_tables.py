"""Own data in the CLI as it comes (issue 38, item 7): two tables under any names, answered at
once when misnamed; the built-in model standardizes a raw table and its scaler travels with
the checkpoint; ``--mitigate`` says on the console what it did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from own_tables import table_args, write_people

from gnnaudit.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def people(tmp_path_factory):
    """``people.csv`` / ``links.csv`` as a new user has them: text ids, text gender, city and
    split, a yes/no label and an income around 30,000."""
    folder = tmp_path_factory.mktemp("own")
    write_people(folder)
    return folder


def run_fresh(argv: list[str]) -> subprocess.CompletedProcess:
    code = (
        "import sys\nfrom gnnaudit.cli.main import main\n"
        f"rc = main({argv!r})\n"
        "print(rc, 'torch' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240
    )


@pytest.mark.parametrize("command", ["audit", "train"])
def test_a_folder_without_nodes_csv_names_its_tables_and_the_flags(command, people, tmp_path):
    proc = run_fresh([command, "--graph", str(people), "--out", str(tmp_path / "o")])
    assert proc.stdout.strip() == "2 False", proc.stderr[-2000:]
    err = proc.stderr
    assert "no nodes.csv" in err and "people.csv" in err and "links.csv" in err
    assert f"--nodes {people / 'people.csv'} --edges {people / 'links.csv'}" in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--graph", "{d}/people.csv"], "Give your two tables as --nodes FILE --edges FILE"),
        (["--nodes", "{d}/people.csv"], "--nodes needs --edges"),
        (["--nodes", "{d}/peple.csv", "--edges", "{d}/links.csv"], "did you mean"),
        (
            ["--nodes", "{d}/people.csv", "--edges", "{d}/links.csv", "--label", "Default"],
            "--label: 'Default' is not a column of --nodes",
        ),
    ],
)
def test_misnamed_tables_are_answered_before_torch_loads(argv, expected, people, tmp_path):
    argv = [a.format(d=people) for a in argv]
    proc = run_fresh(["audit", *argv, "--out", str(tmp_path / "o")])
    assert proc.stdout.strip() == "2 False", proc.stderr[-2000:]
    assert expected in proc.stderr


def test_the_builtin_scaler_fits_the_training_nodes_and_keeps_0_1_columns():
    from torch_geometric.data import Data

    from gnnaudit.cli._scaling import fit_builtin_scaler

    x = torch.tensor([[1.0, 10.0], [0.0, 30.0], [1.0, 50.0], [0.0, 1000.0]])
    data = Data(x=x, feature_names=["flag", "income"], train_mask=torch.tensor([1, 1, 1, 0]) > 0)
    scaled, scaler, text = fit_builtin_scaler(data)
    assert scaler.feature_names_in_ == ("income",) and scaler.mean_[0] == pytest.approx(30.0)
    assert torch.equal(scaled.x[:, 0], x[:, 0]) and torch.equal(data.x, x)  # no in-place change
    assert scaled.x[:3, 1].mean().item() == pytest.approx(0.0, abs=1e-6)
    assert scaled.feature_mean == [0.0, 30.0]  # the report's raw units
    assert "income" in text and "3 training nodes" in text
    assert fit_builtin_scaler(Data(x=torch.tensor([[0.0], [1.0]])))[1] is None


@pytest.fixture(scope="module")
def trained(people, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run"
    argv = ["train", *table_args(people), "--epochs", "3", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    return out


def test_train_on_two_named_tables_standardizes_and_stores_the_scaler(trained, capsys):
    ckpt = torch.load(trained / "model.ckpt", weights_only=True)
    scaler = ckpt["standardizer"]
    assert scaler["feature_names_in_"] == ["Age", "Income"]
    assert 20_000 < scaler["mean_"][1] < 40_000
    metrics = json.loads((trained / "metrics.json").read_text())
    assert metrics["preprocessing"]["standardize"].startswith("z-scores")
    assert metrics["nodes"].endswith("people.csv")


def test_no_standardize_trains_on_raw_values(people, tmp_path):
    out = tmp_path / "raw"
    argv = ["train", *table_args(people), "--epochs", "2", "--no-progress", "--no-standardize"]
    assert main([*argv, "--out", str(out)]) == 0
    assert "standardizer" not in torch.load(out / "model.ckpt", weights_only=True)
    with pytest.raises(SystemExit):  # one or the other
        main([*argv, "--standardize", "s.npz", "--out", str(tmp_path / "both")])


def test_audit_of_the_checkpoint_applies_its_scaler(people, trained, tmp_path, capsys):
    out = tmp_path / "audit"
    argv = ["audit", *table_args(people), "--checkpoint", str(trained / "model.ckpt")]
    assert main([*argv, "--no-finetune", "--no-progress", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert "stored in --checkpoint" in report["model"]["standardize"]


def test_print_mitigation_says_the_figures_and_where_the_weights_went(capsys):
    from gnnaudit.cli.audit import print_mitigation

    table = pd.DataFrame(
        {
            "metric": ["flip rate", "statistical parity difference", "accuracy"],
            "scope": ["node", "", ""],
            "before": [0.20, 0.15, 0.80],
            "after": [0.02, 0.05, 0.78],
            "worse": [False, False, True],
        }
    )
    section = SimpleNamespace(
        title="Before / after mitigation (sensitive: Gender)",
        tables={"before_after": table},
        data={"checkpoint": "mitigated_model.pt"},
    )
    report = SimpleNamespace(has_section=lambda key: key == "mitigation", section=lambda k: section)
    print_mitigation(report, "out/")
    text = capsys.readouterr().out
    assert "flip rate (node scope): 0.200 -> 0.020 (-0.180)" in text
    assert "statistical parity difference: 0.150 -> 0.050" in text
    assert "accuracy: 0.800 -> 0.780 (-0.020)  (worse)" in text
    assert "out/mitigated_model.pt" in text
