"""``gnnaudit evidence`` end to end on the embedded synthetic graph."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gnnaudit.audit import CounterfactualEvidence
from gnnaudit.audit.search.evidence_table import EVIDENCE_COLUMNS
from gnnaudit.cli.main import main

pytest.importorskip("lightning")

NUM_NODES = "240"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.training import train_node_classifier

    data = synthetic_credit_graph(num_nodes=int(NUM_NODES), seed=0)
    ckpt = tmp_path_factory.mktemp("ckpt") / "model.ckpt"
    model, _ = train_node_classifier(data, max_epochs=40, seed=0, checkpoint_path=ckpt)
    return data, model, ckpt


def run_cli(*args: str) -> int:
    return main(
        ["evidence", "--dataset", "synthetic", "--num-nodes", NUM_NODES, "--no-progress", *args]
    )


def test_local_with_checkpoint_matches_library(trained, tmp_path, capsys):
    data, model, ckpt = trained
    ce = CounterfactualEvidence().fit(data, model=model)
    assert len(ce.classes_) == 2
    nodes = [int(n) for n in ce.node_ids_[:3]]
    out = tmp_path / "local.csv"
    rc = run_cli(
        "--checkpoint", str(ckpt), "--node", *map(str, nodes), "--k", "4", "--out", str(out)
    )
    assert rc == 0
    got = pd.read_csv(out)
    expected = ce.local_evidence(nodes, k=4)
    assert list(got.columns) == list(expected.columns) == EVIDENCE_COLUMNS
    assert got["node_u"].drop_duplicates().tolist() == nodes
    pd.testing.assert_frame_equal(
        got.drop(columns="similarity"), expected.drop(columns="similarity")
    )
    np.testing.assert_allclose(got["similarity"], expected["similarity"], rtol=1e-6)
    printed = capsys.readouterr().out
    assert "average similarity AS" in printed and "backend exact" in printed


def test_global_with_checkpoint(trained, tmp_path):
    data, model, ckpt = trained
    out = tmp_path / "global.csv"
    assert run_cli("--checkpoint", str(ckpt), "--global", "--k", "7", "--out", str(out)) == 0
    got = pd.read_csv(out)
    assert list(got.columns) == EVIDENCE_COLUMNS
    expected = CounterfactualEvidence().fit(data, model=model).global_evidence(k=7)
    assert got[["node_u", "node_v", "rank"]].equals(expected[["node_u", "node_v", "rank"]])
    assert (got["pred_u"] != got["pred_v"]).all()


def test_without_checkpoint_trains_then_searches(tmp_path, capsys):
    out = tmp_path / "trained.csv"
    assert run_cli("--epochs", "20", "--k", "2", "--global", "--out", str(out)) == 0
    assert "training a gcn" in capsys.readouterr().err
    got = pd.read_csv(out)
    assert list(got.columns) == EVIDENCE_COLUMNS
    assert len(got) <= 2


def test_errors_are_clean(trained, tmp_path, capsys):
    data, _, ckpt = trained
    outside = int(np.flatnonzero(~data.test_mask.numpy())[0])
    out = str(tmp_path / "x.csv")
    assert run_cli("--checkpoint", str(ckpt), "--node", str(outside), "--out", out) == 2
    assert f"node {outside} is not one" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # a usage error: one line naming the flag
        run_cli("--checkpoint", str(ckpt), "--k", "0", "--out", out)
    assert exc.value.code == 2
    assert "argument --k: must be an integer in [1," in capsys.readouterr().err
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    assert run_cli("--checkpoint", str(bad), "--out", out) == 2
    assert "checkpoint" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_cli("--node", "1", "--global", "--out", out)
