"""``gnnaudit train`` and the shared CLI dataset helper."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd
import pytest
import torch

from gnnaudit import InvalidInputError
from gnnaudit.cli._datasets import GRAPH_DATASETS, add_dataset_arguments, load_graph_dataset
from gnnaudit.cli.main import main
from gnnaudit.cli.train import MODELS
from gnnaudit.training import BACKBONES, load_node_classifier


@pytest.fixture(autouse=True)
def _few_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_train_synthetic_writes_metrics_and_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--dataset", "synthetic", "--num-nodes", "300", "--epochs", "30"]
    code = main([*argv, "--model", "sage", "--seed", "2", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "accuracy" in printed and "majority rate" in printed
    report = json.loads((out / "metrics.json").read_text())
    assert report["dataset"] == "synthetic" and report["seed"] == 2
    assert report["model"]["backbone"] == "sage"
    assert report["num_nodes"] == 300 and report["sensitive_name"] == "gender"
    metrics = report["metrics"]
    for key in ("train_acc", "val_acc", "test_acc", "majority_rate", "epochs_run"):
        assert key in metrics
    assert 0.0 <= metrics["test_acc"] <= 1.0 and metrics["epochs_run"] == 30
    model = load_node_classifier(out / "model.ckpt")
    data = load_graph_dataset("synthetic", seed=2, num_nodes=300)
    pred = model(data.x, data.edge_index).argmax(-1)
    acc = float((pred == data.y)[data.test_mask].float().mean())
    assert acc == pytest.approx(metrics["test_acc"])
    # same command, same seed: same metrics
    assert main([*argv, "--model", "sage", "--seed", "2", "--out", str(tmp_path / "again")]) == 0
    again = json.loads((tmp_path / "again" / "metrics.json").read_text())["metrics"]
    assert {k: v for k, v in again.items() if k != "fit_seconds"} == {
        k: v for k, v in metrics.items() if k != "fit_seconds"
    }


def test_train_on_a_nifty_folder(tmp_path):
    rng = np.random.default_rng(0)
    n = 40
    frame = pd.DataFrame(
        {
            "WHITE": rng.integers(0, 2, n),
            "PRIORS": rng.poisson(2, n),
            "AGE": rng.integers(18, 70, n),
            "RECID": rng.integers(0, 2, n),
        }
    )
    (tmp_path / "bail").mkdir()
    frame.to_csv(tmp_path / "bail" / "bail.csv", index=False)
    edges = rng.integers(0, n, size=(120, 2)).astype(float)
    np.savetxt(tmp_path / "bail" / "bail_edges.txt", edges, fmt="%.18e")
    out = tmp_path / "out"
    code = main(
        ["train", "--dataset", "bail", "--root", str(tmp_path), "--epochs", "3", "--out", str(out)]
    )
    assert code == 0
    report = json.loads((out / "metrics.json").read_text())
    assert report["sensitive_name"] == "WHITE" and report["num_features"] == 3


def test_train_reports_clean_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GNNAUDIT_DATA", raising=False)
    assert main(["train", "--dataset", "german", "--out", str(tmp_path / "a")]) == 2
    assert "--root" in capsys.readouterr().err
    code = main(
        ["train", "--dataset", "german", "--root", str(tmp_path), "--out", str(tmp_path / "c")]
    )
    assert code == 2
    assert "german.csv" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # a usage error: one line naming the flag
        main(["train", "--num-nodes", "3", "--out", str(tmp_path / "b")])
    assert exc.value.code == 2
    assert "argument --num-nodes: must be an integer in [20," in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["train", "--out", str(tmp_path / "file")]) == 2
    assert "--out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--model", "transformer", "--out", str(tmp_path)])


def test_dataset_helper_names_and_arguments(tmp_path):
    assert MODELS == BACKBONES
    assert {"synthetic", "german", "bail", "credit", "cora", "citeseer", "pubmed"} <= set(
        GRAPH_DATASETS
    )
    with pytest.raises(InvalidInputError, match="'synthetic', 'german'"):
        load_graph_dataset("mnist")
    with pytest.raises(InvalidInputError, match="ind.citeseer.x"):
        load_graph_dataset("citeseer", root=tmp_path)
    with pytest.raises(InvalidInputError, match="ships no split"):
        load_graph_dataset("credit", root=tmp_path, split="public")

    parser = argparse.ArgumentParser()
    add_dataset_arguments(parser, include_seed=False)
    parser.add_argument("--seed", type=int, default=7)  # no clash when the command owns --seed
    args = parser.parse_args(["--dataset", "synthetic", "--bias", "0", "--num-nodes", "50"])
    assert (args.dataset, args.bias, args.num_nodes, args.seed) == ("synthetic", 0.0, 50, 7)
    from gnnaudit.cli._datasets import dataset_from_args

    data = dataset_from_args(args)
    assert data.num_nodes == 50
