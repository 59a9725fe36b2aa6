"""Inputs matched to the model by name (issue 38, item 7): a node table whose columns come in
another order than the model was trained with is reordered by name (from the names a gnnaudit
checkpoint carries, or ``--feature-order FILE``), with the same audit as the table in the
model's order; extra or missing columns are refused, naming them."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from own_tables import table_args, write_people

from gnnaudit.cli.main import main


def _tables(folder) -> list[str]:
    return [*table_args(folder), "--no-progress"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A model trained on the user's table, the same table with its columns shuffled, and the
    audit of the table as trained (the reference)."""
    root = tmp_path_factory.mktemp("order")
    first = root / "first"
    first.mkdir()
    frame = write_people(first)
    shuffled = root / "shuffled"
    shuffled.mkdir()
    cols = ["person", "Income", "City", "Defaulted", "split", "Gender", "Age"]
    frame[cols].to_csv(shuffled / "people.csv", index=False)
    (shuffled / "links.csv").write_text((first / "links.csv").read_text())
    run = root / "run"
    assert main(["train", *_tables(first), "--epochs", "3", "--out", str(run)]) == 0
    ckpt = str(run / "model.ckpt")
    reference = root / "reference"
    argv = ["audit", *_tables(first), "--checkpoint", ckpt, "--no-finetune"]
    assert main([*argv, "--out", str(reference)]) == 0
    return root, ckpt, reference


def _report(folder):
    return json.loads((folder / "report.json").read_text())


def test_a_shuffled_table_is_matched_by_the_checkpoints_names(setup):
    root, ckpt, reference = setup
    out = root / "shuffled_audit"
    argv = ["audit", *_tables(root / "shuffled"), "--checkpoint", ckpt, "--no-finetune"]
    assert main([*argv, "--out", str(out)]) == 0
    got, want = _report(out), _report(reference)
    assert "model's order by name" in got["model"]["input order"]
    assert got["findings"] == want["findings"]  # the same model on the same inputs


def test_feature_order_file_matches_and_refuses_by_name(setup, tmp_path, capsys):
    root, ckpt, reference = setup
    names = torch.load(ckpt, weights_only=True)["feature_names"]  # the model's order
    order = tmp_path / "order.txt"
    base = ["audit", *_tables(root / "shuffled"), "--checkpoint", ckpt, "--no-finetune"]
    order.write_text("\n".join(names))
    assert main([*base, "--feature-order", str(order), "--out", str(tmp_path / "a")]) == 0
    assert _report(tmp_path / "a")["findings"] == _report(reference)["findings"]
    order.write_text("Age, Income, Gender, Nowhere")
    assert main([*base, "--feature-order", str(order), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "--feature-order" in err and "Nowhere" in err
    order.write_text("Age, Age")
    assert main([*base, "--feature-order", str(order), "--out", str(tmp_path / "c")]) == 2
    assert "once" in capsys.readouterr().err


def test_the_table_as_trained_needs_no_reordering(setup):
    _, _, reference = setup
    assert "input order" not in _report(reference)["model"]
    assert isinstance(pd.DataFrame(_report(reference)["findings"]), pd.DataFrame)
