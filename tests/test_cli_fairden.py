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
            "--n-clusters",
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
        [
            "fairden",
            str(moons_csv),
            "--sensitive",
            "group",
            "colour",
            "--n-clusters",
            "2",
            "--label",
            "moon",
        ]
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
        main([*args, "--n-clusters", "0"])
    assert stop.value.code == 2
    assert "argument --n-clusters" in capsys.readouterr().err


def test_cli_fairden_old_flags_warn_and_give_the_same_labels(moons_csv, tmp_path, capsys):
    """``--k`` / ``--min-pts`` are deprecated spellings of ``--n-clusters`` / ``--min-samples``
    (until 0.3.0): the same labels, one warning line each on stderr, hidden from ``--help``."""
    base = ["fairden", str(moons_csv), "--sensitive", "group", "--ignore", "moon", "colour"]
    new, old = tmp_path / "new.csv", tmp_path / "old.csv"
    assert main([*base, "--n-clusters", "2", "--min-samples", "4", "--out", str(new)]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert main([*base, "--k", "2", "--min-pts", "4", "--out", str(old)]) == 0
    err = capsys.readouterr().err
    assert "--k is deprecated and will be removed in 0.3.0; use --n-clusters" in err
    assert "--min-pts is deprecated and will be removed in 0.3.0; use --min-samples" in err
    assert pd.read_csv(new).equals(pd.read_csv(old))
    with pytest.raises(SystemExit):
        main(["fairden", "--help"])
    text = capsys.readouterr().out
    assert "--n-clusters" in text and "--min-samples" in text
    assert "--min-pts" not in text and "--k " not in text
    with pytest.raises(SystemExit) as stop:  # two spellings of one flag: a usage error
        main([*base, "--n-clusters", "2", "--k", "3"])
    assert stop.value.code == 2
    assert "not allowed with argument --n-clusters" in capsys.readouterr().err


def test_cli_fairden_density_flags_reach_the_estimator(moons_csv, tmp_path, capsys, monkeypatch):
    from gnnaudit.clustering import FairDen

    seen = {}
    fit = FairDen.fit

    def spy(self, *args, **kwargs):
        seen.update(min_dcsi_share=self.min_dcsi_share, max_noise=self.max_noise)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(FairDen, "fit", spy)
    base = ["fairden", str(moons_csv), "--sensitive", "group", "--ignore", "colour", "moon"]
    assert main([*base, "--min-dcsi-share", "0", "--max-noise", "0.05"]) == 0
    assert seen == {"min_dcsi_share": 0.0, "max_noise": 0.05}
    capsys.readouterr()
    for flag in ("--min-dcsi-share", "--max-noise"):
        with pytest.raises(SystemExit) as stop:
            main([*base, flag, "1.5"])
        assert stop.value.code == 2 and f"argument {flag}" in capsys.readouterr().err
