"""``gnnaudit fairden`` command."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gnnaudit.cli.main import main
from gnnaudit.datasets.tabular import three_moons


@pytest.fixture()
def moons_csv(tmp_path):
    d = three_moons(n_per_moon=150, seed=1)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "x0": d.X[:, 0],
            "x1": d.X[:, 1],
            "group": np.where(d.sensitive == 1, "b", "a"),
            "colour": rng.choice(["red", "blue"], d.X.shape[0]),
            "moon": d.labels,
        }
    )
    path = tmp_path / "moons.csv"
    frame.to_csv(path, index=False)
    return path


def test_cli_fairden_writes_labels_and_prints_balance(moons_csv, tmp_path, capsys):
    out = tmp_path / "labels.csv"
    code = main(
        [
            "fairden",
            str(moons_csv),
            "--sensitive",
            "group",
            "--k",
            "2",
            "--ignore",
            "moon",
            "--categorical",
            "colour",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "balance (combined groups)" in text and "share_a" in text
    labels = pd.read_csv(out)["label"].to_numpy()
    assert labels.shape == (450,) and set(labels) <= {-1, 0, 1}
    bal = float(text.split("balance (combined groups): ")[1].split()[0])
    assert bal >= 0.9


def test_cli_fairden_several_sensitive_columns(moons_csv, capsys):
    code = main(
        ["fairden", str(moons_csv), "--sensitive", "group", "colour", "--k", "2", "--label", "moon"]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "balance (group)" in text and "balance (colour)" in text
    assert "ARI vs moon" in text


def test_cli_fairden_errors(moons_csv, capsys):
    assert main(["fairden", str(moons_csv), "--sensitive", "nope"]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["fairden", "/nonexistent.csv", "--sensitive", "g"]) == 2
    args = ["fairden", str(moons_csv), "--sensitive", "group", "--ignore", "colour", "moon"]
    with pytest.raises(SystemExit) as stop:  # a usage error (n_clusters=1 is one cluster)
        main([*args, "--k", "0"])
    assert stop.value.code == 2
    assert "argument --k" in capsys.readouterr().err
