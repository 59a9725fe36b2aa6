"""``gnnaudit explain-dbscan`` end to end on a small csv."""

from __future__ import annotations

import pandas as pd
import pytest
from sklearn.datasets import make_blobs

from gnnaudit.cli.main import main


@pytest.fixture()
def csv_path(tmp_path):
    X, y = make_blobs(300, centers=3, n_features=3, cluster_std=0.5, random_state=4)
    frame = pd.DataFrame(X, columns=["age", "income", "debt"])
    frame["label"] = y
    frame.loc[len(frame)] = [20.0, 20.0, 20.0, 0]  # a noise row at index 300
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    return path


def explain(csv_path, *args: str, label: bool = True) -> int:
    """Run the command with eps 0.6 / min-samples 5 (and the label column set aside)."""
    base = ["explain-dbscan", str(csv_path), "--eps", "0.6", "--min-samples", "5"]
    return main(base + list(args) + (["--label", "label"] if label else []))


def test_explain_dbscan_prints_changes(csv_path, capsys):
    code = explain(csv_path, "--index", "300", "--target", "1", "--n-counterfactuals", "3")
    out = capsys.readouterr().out
    assert code == 0
    assert "row 300 is in cluster -1" in out
    assert "feature changes:" in out and "income" in out and "label" not in out.split("changes:")[1]
    assert "validity 1.000" in out
    summary = out.split("counterfactuals:")[1].split("feature changes:")[0]
    assert summary.count("True") == 3


def test_explain_dbscan_immutable_and_any_target(csv_path, capsys):
    code = explain(csv_path, "--index", "0", "--immutable", "debt")
    out = capsys.readouterr().out
    assert code == 0
    assert "row 0 is in cluster -1" in out
    changes = out.split("feature changes:")[1]
    assert "debt" not in changes and "age" in changes
    assert "validity 1.000" in out


def test_explain_dbscan_clean_errors(csv_path, capsys):
    assert explain(csv_path, "--index", "300", "--target", "-1") == 2
    assert "noise" in capsys.readouterr().err
    assert explain(csv_path, "--index", "0", "--immutable", "height") == 2
    assert "unknown feature 'height'" in capsys.readouterr().err
    assert explain(f"{csv_path}.missing", "--index", "0", label=False) == 2
    assert "does not exist" in capsys.readouterr().err


def test_explain_dbscan_old_k_flag_warns_and_gives_the_same_output(csv_path, capsys):
    """``--k`` is a deprecated spelling of ``--n-counterfactuals`` (until 0.3.0)."""
    assert explain(csv_path, "--index", "300", "--n-counterfactuals", "2") == 0
    new = capsys.readouterr()
    assert explain(csv_path, "--index", "300", "--k", "2") == 0
    old = capsys.readouterr()
    assert new.out == old.out and "deprecated" not in new.err
    assert "--k is deprecated and will be removed in 0.3.0; use --n-counterfactuals" in old.err
