"""``gnnaudit tree-cluster``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_iris

from gnnaudit.cli.main import main


@pytest.fixture()
def iris_csv(tmp_path):
    data = load_iris(as_frame=True)
    frame = data.frame.rename(columns=lambda c: c.replace(" (cm)", "").replace(" ", "_"))
    path = tmp_path / "iris.csv"
    frame.to_csv(path, index=False)
    return path, frame


def test_tree_cluster_prints_tree_status_and_objectives(iris_csv, tmp_path, capsys):
    path, frame = iris_csv
    ml = tmp_path / "ml.csv"
    cl = tmp_path / "cl.csv"
    ml.write_text("i,j\n0,1\n50,51\n")
    cl.write_text("0,50\n50,100\n")
    out = tmp_path / "labels.csv"
    code = main(
        [
            "tree-cluster", str(path), "--n-clusters", "3", "--depth", "2", "--label", "target",
            "--must-link", str(ml), "--cannot-link", str(cl), "--objective", "md-ms",
            "--time-limit", "60", "--out", str(out),
        ]
    )  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0
    assert "petal" in text or "sepal" in text  # feature names in the tree
    assert "cluster" in text and "status" in text and "optimal" in text
    assert "max_diameter" in text and "min_split" in text and "ARI vs label" in text
    labels = pd.read_csv(out)["cluster"].to_numpy()
    assert len(labels) == len(frame)
    assert labels[0] == labels[1] and labels[50] == labels[51]
    assert labels[0] != labels[50] and labels[50] != labels[100]


def test_tree_cluster_infeasible_exit_code(tmp_path, capsys):
    path = tmp_path / "line.csv"
    pd.DataFrame({"x": np.arange(8.0)}).to_csv(path, index=False)
    ml = tmp_path / "ml.csv"
    cl = tmp_path / "cl.csv"
    ml.write_text("0,2\n")
    cl.write_text("0,1\n")
    code = main(
        ["tree-cluster", str(path), "--n-clusters", "2", "--depth", "1", "--must-link", str(ml),
         "--cannot-link", str(cl)]
    )  # fmt: skip
    assert code == 2
    captured = capsys.readouterr()
    assert "infeasible" in captured.out
    assert "no clustering" in captured.err and "infeasible" in captured.err


def test_tree_cluster_contradictory_constraints_clean_error(tmp_path, capsys):
    path = tmp_path / "line.csv"
    pd.DataFrame({"x": np.arange(6.0), "y": np.arange(6.0) ** 2}).to_csv(path, index=False)
    pairs = tmp_path / "p.csv"
    pairs.write_text("1,2\n")
    code = main(
        ["tree-cluster", str(path), "--n-clusters", "2", "--must-link", str(pairs), "--cannot-link",
         str(pairs)]
    )  # fmt: skip
    assert code == 2
    assert "both a must-link and a cannot-link" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--n-clusters", "0"], "--n-clusters"),
        (["--n-clusters", "2", "--depth", "13"], "--depth"),
        (["--n-clusters", "2", "--time-limit", "1e-9"], "--time-limit"),
        (["--n-clusters", "2", "--time-limit", "1e308"], "--time-limit"),
        (["--n-clusters", "2", "--must-link", "missing.csv"], "does not exist"),
        (["--n-clusters", "2", "--epsilon", "-1"], "epsilon"),
    ],
)
def test_tree_cluster_bad_arguments(tmp_path, capsys, extra, match):
    path = tmp_path / "d.csv"
    pd.DataFrame({"x": np.arange(6.0)}).to_csv(path, index=False)
    assert main(["tree-cluster", str(path), *extra]) == 2
    assert match in capsys.readouterr().err


def test_tree_cluster_bad_pair_file(tmp_path, capsys):
    path = tmp_path / "d.csv"
    pd.DataFrame({"x": np.arange(6.0)}).to_csv(path, index=False)
    pairs = tmp_path / "p.csv"
    pairs.write_text("0,1,2\n")
    assert main(["tree-cluster", str(path), "--n-clusters", "2", "--cannot-link", str(pairs)]) == 2
    assert "two columns" in capsys.readouterr().err


def test_tree_cluster_old_k_flag_warns_and_gives_the_same_labels(iris_csv, tmp_path, capsys):
    """``--k`` is a deprecated spelling of ``--n-clusters`` (until 0.3.0)."""
    path, _ = iris_csv
    runs = {}
    for flag in ("--n-clusters", "--k"):
        out = tmp_path / f"{flag.strip('-')}.csv"
        argv = ["tree-cluster", str(path), flag, "2", "--depth", "1", "--label", "target"]
        assert main([*argv, "--out", str(out)]) == 0
        runs[flag] = (pd.read_csv(out), capsys.readouterr().err)
    assert runs["--n-clusters"][0].equals(runs["--k"][0])
    assert "deprecated" not in runs["--n-clusters"][1]
    assert "--k is deprecated and will be removed in 0.3.0; use --n-clusters" in runs["--k"][1]
    with pytest.raises(SystemExit) as stop:  # neither spelling: the usage error names the new
        main(["tree-cluster", str(path)])
    assert stop.value.code == 2
    assert "--n-clusters" in capsys.readouterr().err
