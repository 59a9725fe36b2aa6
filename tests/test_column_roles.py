"""Conventional column names of a node table (id, label, split) take their role and never
become model inputs silently (gnnaudit.datasets.column_roles, read_graph, the CLI)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest
import torch

from gnnaudit.cli._tables import FLAGS, input_mismatch
from gnnaudit.cli.main import build_parser, main
from gnnaudit.datasets import load_graph, read_graph
from gnnaudit.errors import InvalidInputError

SPLITS = ["train", "Val", " TEST", "validation", "dev", "Train", "valid", "test"]
MASKS = {
    "train_mask": [True, False, False, False, False, True, False, False],
    "val_mask": [False, True, False, True, True, False, True, False],
    "test_mask": [False, False, True, False, False, False, False, True],
}


@pytest.fixture(autouse=True)
def _few_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _folder(path, nodes: dict, edges: dict | None = None):
    path.mkdir()
    frame = pd.DataFrame(nodes)
    frame.to_csv(path / "nodes.csv", index=False)
    ids = frame.iloc[:, 0].astype(str).tolist()
    edges = edges or {"source": ids[:-1], "target": ids[1:]}
    pd.DataFrame(edges).to_csv(path / "edges.csv", index=False)
    return path


def _nodes(label: str, split: str, id_name: str = "id", labels=None) -> dict:
    n = len(SPLITS)
    return {
        id_name: [f"n{i}" for i in range(n)],
        "a": np.arange(n, dtype=float),
        "b": np.arange(n, dtype=float)[::-1] / 2,
        label: labels if labels is not None else [0, 1, 0, 1, 1, 0, 1, 0],
        split: SPLITS,
    }


@pytest.mark.parametrize(
    "label, split, id_name, labels, expected_y",
    [
        ("label", "split", "id", None, [0, 1, 0, 1, 1, 0, 1, 0]),
        ("target", "Split", "id", None, [0, 1, 0, 1, 1, 0, 1, 0]),
        ("class", "set", "Node_ID", ["dog", "cat"] * 4, [1, 0] * 4),
    ],
)
def test_conventional_names_take_their_role(
    tmp_path, caplog, label, split, id_name, labels, expected_y
):
    folder = _folder(tmp_path / "g", _nodes(label, split, id_name, labels))
    with caplog.at_level(logging.INFO, logger="gnnaudit.datasets.column_roles"):
        data = load_graph(folder)
    assert data.feature_names == ["a", "b"] and data.x.shape == (8, 2)
    assert data.y.tolist() == expected_y
    for mask, values in MASKS.items():
        assert data[mask].tolist() == values
    assert data.column_roles == {"id": id_name, "label": label, "split": split}
    assert data.node_ids == [f"n{i}" for i in range(8)]
    lines = [r.getMessage() for r in caplog.records if "column roles" in r.getMessage()]
    assert len(lines) == 1 and f"label={label!r}" in lines[0] and f"split={split!r}" in lines[0]
    if labels is not None:
        assert data.class_names == ["cat", "dog"]


def test_two_candidates_are_refused_naming_both(tmp_path):
    nodes = {**_nodes("label", "split"), "target": [1] * 8}
    folder = _folder(tmp_path / "g", nodes)
    with pytest.raises(InvalidInputError, match="'label', 'target'") as info:
        read_graph(folder)
    message = str(info.value)
    assert "label='label'" in message and "ignore=['target']" in message
    with pytest.raises(InvalidInputError, match="--label label .*--ignore target"):
        read_graph(folder, flags=FLAGS)
    two_splits = _folder(tmp_path / "s", {**_nodes("y", "split"), "Fold": SPLITS})
    with pytest.raises(InvalidInputError, match="split: 'split', 'Fold'.*split_column="):
        read_graph(two_splits)
    two_ids = _folder(tmp_path / "i", {**_nodes("y", "split"), "node_id": range(8)})
    with pytest.raises(InvalidInputError, match="node id: 'id', 'node_id'.*id_column="):
        read_graph(two_ids)


def test_an_explicit_choice_wins(tmp_path, caplog):
    nodes = {**_nodes("label", "split"), "target": [1, 1, 0, 0, 1, 1, 0, 0]}
    folder = _folder(tmp_path / "g", nodes)
    with caplog.at_level(logging.WARNING, logger="gnnaudit.datasets.column_roles"):
        data = read_graph(folder, label="target")
    assert data.y.tolist() == [1, 1, 0, 0, 1, 1, 0, 0]
    assert data.feature_names == ["a", "b", "label"]  # an ordinary column now, with a warning
    assert any("'label' are named like the label" in r.getMessage() for r in caplog.records)
    assert data.column_roles["label"] == "target"
    dropped = read_graph(folder, ignore=["label"])
    assert dropped.feature_names == ["a", "b"] and dropped.y.tolist() == data.y.tolist()
    off = read_graph(_folder(tmp_path / "o", _nodes("label", "split")), label=False)
    assert off.get("y") is None and off.feature_names == ["a", "b", "label"]
    assert "label" not in off.column_roles
    with pytest.raises(InvalidInputError, match="label must be a column name, None .* or False"):
        read_graph(folder, label=True)


def test_split_like_column_without_split_values_stays_a_column(tmp_path, caplog):
    nodes = {**_nodes("y", "split"), "fold": [0, 1, 2, 3, 4, 0, 1, 2]}
    with caplog.at_level(logging.WARNING, logger="gnnaudit.datasets.column_roles"):
        data = read_graph(_folder(tmp_path / "g", nodes))
    assert data.column_roles["split"] == "split" and data.feature_names == ["a", "b", "fold"]
    assert any("'fold' is named like a split column" in r.getMessage() for r in caplog.records)
    broken = {**_nodes("y", "split"), "split": [*SPLITS[:7], "holdout"]}
    with pytest.raises(InvalidInputError, match=r"row 7 \(id 'n7': 'holdout'\)"):
        read_graph(_folder(tmp_path / "b", broken))
    beside = {**_nodes("y", "split"), "train_mask": [1] * 8}
    with pytest.raises(InvalidInputError, match=r"'split' \(a split column by its name\)"):
        read_graph(_folder(tmp_path / "m", beside))


def test_high_cardinality_text_column_is_refused_unless_declared(tmp_path):
    n = 60
    nodes = {
        "id": [f"n{i}" for i in range(n)],
        "a": np.arange(n, dtype=float),
        "city": [f"city{i}" for i in range(n)],
        "y": [0, 1] * (n // 2),
    }
    folder = _folder(tmp_path / "g", nodes)
    with pytest.raises(InvalidInputError, match="'city' holds 60 distinct values") as info:
        read_graph(folder)
    assert "categorical=['city']" in str(info.value) and "max_categories=50" in str(info.value)
    with pytest.raises(InvalidInputError, match="--categorical city"):
        read_graph(folder, flags=FLAGS)
    declared = read_graph(folder, categorical=["city"])
    assert declared.x.shape == (n, 1 + n) and declared.feature_names[1] == "city=city0"
    assert read_graph(folder, max_categories=60).x.shape == (n, 1 + n)
    assert read_graph(folder, ordinal=["city"]).feature_names == ["a", "city"]
    assert read_graph(folder, ignore=["city"]).feature_names == ["a"]


def test_table_options_of_load_graph_need_a_folder(tmp_path):
    data = read_graph(_folder(tmp_path / "g", _nodes("y", "split")))
    torch.save(data.to_dict(), tmp_path / "g.pt")
    with pytest.raises(InvalidInputError, match="id_column='id' applies to a folder"):
        load_graph(tmp_path / "g.pt", id_column="id")
    assert load_graph(tmp_path / "g.pt", label=False).get("y") is None


def test_input_mismatch_names_the_columns():
    message = input_mismatch(["a", "b"], 2, ["a", "b", "label"], 3)
    assert "not inputs of the model: 'label'" in message and "--ignore label" in message
    assert "missing from the graph: 'b'" in input_mismatch(["a", "b"], 2, ["a"], 1)
    assert "another order" in input_mismatch(["a", "b"], 2, ["b", "a"], 2)
    width_only = input_mismatch(None, 2, ["a", "b", "c"], 3)
    assert "takes 2 inputs but the graph gives 3: 'a', 'b', 'c'" in width_only
    assert input_mismatch(["a", "b"], 2, ["a", "b"], 2) is None


def test_flags_in_full_and_comma_lists():
    parser = build_parser()
    args = parser.parse_args(["train", "--label", "Defaulted", "--out", "o"])
    assert args.label == "Defaulted" and args.label_number is None
    args = parser.parse_args(["audit", "--ignore", "a,b", "c", "--ignore", "d", "--out", "o"])
    assert args.ignore == ["a", "b", "c", "d"]
    for argv in (["train", "--lab", "x"], ["audit", "--check", "m.ckpt"], ["--verb", "train"]):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args([*argv, "--out", "o"])
        assert exc.value.code == 2


def _cli_folder(path, n=60, seed=0):
    rng = np.random.default_rng(seed)
    gender = rng.choice(["F", "M"], n)
    a = rng.normal(size=n).round(4)
    nodes = {
        "id": [f"u{i}" for i in range(n)],
        "a": a,
        "b": rng.normal(size=n).round(4),
        "gender": gender,
        "target": (a + 0.5 * (gender == "M") > 0).astype(int),
        "Split": rng.choice(["train", "Validation", "TEST"], n, p=[0.5, 0.25, 0.25]),
    }
    src, dst = rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)
    edges = {"source": [f"u{i}" for i in src], "target": [f"u{i}" for i in dst]}
    return _folder(path, nodes, edges)


def test_cli_train_on_a_folder_then_audit_with_the_checkpoint(tmp_path, capsys):
    folder = _cli_folder(tmp_path / "g")
    run = tmp_path / "run"
    code = main(["train", "--graph", str(folder), "--sensitive", "gender", "--epochs", "5",
                 "--no-progress", "--out", str(run)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads((run / "metrics.json").read_text())
    assert report["feature_names"] == ["a", "b", "gender"] and report["num_features"] == 3
    assert report["column_roles"] == {
        "id": "id", "label": "target", "split": "Split", "sensitive": "gender"
    }  # fmt: skip
    out = tmp_path / "audit"
    argv = ["audit", "--graph", str(folder), "--sensitive", "gender", "--checkpoint",
            str(run / "model.ckpt"), "--no-finetune", "--no-progress", "--k", "3"]  # fmt: skip
    assert main([*argv, "--out", str(out)]) == 0, capsys.readouterr().err
    assert (out / "report.json").is_file()
    # the same table with a leaked column: the error names it and the flag that drops it
    nodes = pd.read_csv(folder / "nodes.csv")
    nodes.assign(score=nodes["target"] * 2.0).to_csv(folder / "nodes.csv", index=False)
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "again")]) == 2
    err = capsys.readouterr().err
    assert "not inputs of the model: 'score'" in err and "--ignore score" in err
    assert main([*argv, "--ignore", "score", "--out", str(tmp_path / "ok")]) == 0
