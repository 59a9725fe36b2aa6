"""AuditReport: files, embedded plots, escaping, JSON round trip; pair comparison."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import Data

from gnnaudit.audit.group_fairness import group_fairness
from gnnaudit.audit.report import AuditReport, pair_comparison
from gnnaudit.errors import InvalidInputError


def _data():
    x = torch.tensor(
        [[0.0, 1.0, 5.0], [0.0, 1.0, 6.0], [1.0, 1.0, 5.0], [1.0, 0.0, 9.0], [0.0, 0.0, 5.0]]
    )
    data = Data(x=x)
    data.feature_names = ["<b>gender</b>", "employed", "income"]
    return data


def _report() -> AuditReport:
    data = _data()
    pred = np.array([0, 1, 1, 0, 1])
    y = np.array([0, 1, 0, 0, 1])
    pairs = pd.DataFrame(
        {"node_u": [0, 3], "node_v": [1, 4], "similarity": [0.99, 0.5], "rank": [1, 2]}
    )
    top, feats = pair_comparison(data, pairs, pred, y, top=5)
    disc = pd.DataFrame(
        {
            "feature": ["<b>gender</b>", "employed", "<b>gender</b>"],
            "value": [1.0, 0.0, 0.0],
            "score": [0.9, 0.8, 0.4],
            "baseline": [0.5, 0.8, 0.5],
            "lift": [0.4, 0.0, -0.1],
            "support": [3, 2, 2],
        }
    )
    ev = pd.DataFrame(
        {
            "k": [1, 2],
            "pairs": [1, 2],
            "nodes": [2, 4],
            "accuracy_in_evidence": [0.5, 0.75],
            "accuracy_overall": [0.8, 0.8],
        }
    )
    gf = group_fairness(pred, y, data.x[:, 0], sensitive_name="<b>gender</b>")
    ft = pd.DataFrame(
        {
            "stage": ["before", "evidence", "control"],
            "mean": [0.8, 0.85, 0.81],
            "std": [0.0, 0.01, 0.02],
        }
    )
    return AuditReport(
        dataset={
            "name": "toy <script>alert(1)</script>",
            "nodes": 5,
            "sensitive_name": "<b>gender</b>",
        },
        model={"backbone": "gcn", "test_accuracy": 0.8, "nan_metric": float("nan")},
        config={"k": 10, "ks": [1, 2]},
        discrimination=disc,
        error_verification=ev,
        top_pairs=top,
        pair_features=feats,
        group_fairness=gf,
        finetune=ft,
        summary={"sensitive_rank_by_score": 1},
    )


def test_pair_comparison_lists_differing_features_largest_first():
    data = _data()
    pairs = pd.DataFrame({"node_u": [0, 3], "node_v": [1, 4], "similarity": [0.9, 0.4]})
    top, feats = pair_comparison(data, pairs, np.zeros(5, dtype=int), None, max_features=8)
    assert top["differing_features"].tolist() == [1, 2]
    assert top["label_u"].tolist() == [-1, -1]
    f2 = feats[feats["rank"] == 2]
    # nodes 3 and 4: gender 1 vs 0 (std .49 -> ~2.04), income 9 vs 5 (std 1.55 -> ~2.58)
    assert f2["feature"].tolist() == ["income", "<b>gender</b>"]
    assert f2["value_u"].tolist() == [9.0, 1.0]
    one = pair_comparison(data, pairs, np.zeros(5, dtype=int), max_features=1)[1]
    assert len(one) == 2
    with pytest.raises(InvalidInputError, match="predictions and labels"):
        pair_comparison(data, pairs, np.zeros(3, dtype=int))


def test_save_writes_three_files_with_embedded_plots(tmp_path):
    report = _report()
    paths = report.save(tmp_path / "out")
    for key in ("json", "markdown", "html"):
        assert paths[key].is_file() and paths[key].stat().st_size > 0
    page = paths["html"].read_text()
    imgs = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(imgs) == 2  # discrimination chart and error curve
    import base64

    assert all(base64.b64decode(b)[:8] == b"\x89PNG\r\n\x1a\n" for b in imgs)
    # the score table is in the page, and text from the data is escaped
    assert "0.9" in page and "lift" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<b>gender</b>" not in page and "&lt;b&gt;gender&lt;/b&gt;" in page
    md = paths["markdown"].read_text()
    assert "## Discrimination scores" in md and "| feature | value |" in md


def test_json_roundtrip(tmp_path):
    report = _report()
    report.save(tmp_path)
    back = AuditReport.from_json(tmp_path / "report.json")
    for name in ("discrimination", "error_verification", "top_pairs", "pair_features", "finetune"):
        pd.testing.assert_frame_equal(getattr(back, name), getattr(report, name), check_dtype=True)
    pd.testing.assert_frame_equal(back.group_fairness.groups, report.group_fairness.groups)
    assert back.dataset == report.dataset
    assert math.isnan(report.model["nan_metric"]) and back.model["nan_metric"] is None
    assert back.config == report.config and back.summary == report.summary
    # directory path works too, and JSON is strict (no NaN tokens)
    assert AuditReport.from_json(tmp_path).to_dict() == back.to_dict()
    json.loads((tmp_path / "report.json").read_text(), parse_constant=pytest.fail)


def test_from_json_errors(tmp_path):
    with pytest.raises(InvalidInputError, match="is not a report.json file"):
        AuditReport.from_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        AuditReport.from_json(bad)
    bad.write_text(json.dumps({"a": 1}))
    with pytest.raises(InvalidInputError, match="not an audit report"):
        AuditReport.from_json(bad)


def test_empty_tables_render(tmp_path):
    report = _report()
    report.discrimination = report.discrimination.iloc[:0]
    report.error_verification = report.error_verification.iloc[:0]
    report.finetune = None
    report.group_fairness = None
    page = report.to_html()
    assert "no data to plot" in page
    AuditReport.from_json(tmp_path / "r.json") if False else report.to_json(tmp_path / "r.json")
    back = AuditReport.from_json(tmp_path / "r.json")
    assert back.discrimination.empty and back.finetune is None


def test_run_audit_with_plain_callable_and_single_class_model(tmp_path):
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.training import run_audit

    data = synthetic_credit_graph(num_nodes=120, seed=2)

    def constant(x, edge_index):
        return torch.tensor([[1.0, 0.0]]).repeat(x.size(0), 1)

    report = run_audit(data, constant, progress=False)
    assert "one class" in report.summary["notes"]
    assert report.discrimination.empty and report.error_verification.empty
    assert report.top_pairs.empty and report.finetune is None
    assert report.group_fairness.statistical_parity_difference == 0.0
    report.save(tmp_path)
    assert AuditReport.from_json(tmp_path).summary["notes"] == report.summary["notes"]

    def by_gender(x, edge_index):  # predicts the sensitive attribute: maximal parity gap
        g = x[:, -1].long()
        return torch.nn.functional.one_hot(g, 2).float()

    report = run_audit(data, by_gender, progress=False, finetune=True, top_pairs=3)
    assert report.group_fairness.statistical_parity_difference == pytest.approx(1.0)
    assert "not a LightningModule" in report.summary["notes"]
    assert len(report.top_pairs) == 3
    # gender decides the prediction: every evidence of every node has the other gender, but so
    # does every candidate, hence score 1 = baseline 1 and lift 0 ("by construction")
    g = report.discrimination[report.discrimination["feature"] == "gender"]
    assert np.allclose(g["score"], 1.0) and np.allclose(g["baseline"], 1.0)
    assert np.allclose(g["lift"], 0.0)
    assert report.discrimination["score"].iloc[0] == 1.0
