"""AuditReport: findings first, sections, embedded charts, escaping, JSON round trip; pairs."""

from __future__ import annotations

import base64
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import Data

from gnnaudit.audit import AuditReport, Figure, Finding, ReportSection
from gnnaudit.audit.fairness.evidence_pairs import pair_comparison
from gnnaudit.audit.fairness.group_fairness import group_fairness
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
    pairs = pd.DataFrame({"node_u": [0, 3], "node_v": [1, 4], "similarity": [0.99, 0.5]})
    top, feats = pair_comparison(data, pairs, pred, y, top=5)
    gf = group_fairness(y, pred, sensitive_features=data.x[:, 0], sensitive_name="<b>gender</b>")
    curve = pd.DataFrame({"x": [1, 2], "y": [0.5, 0.75]})
    sections = [
        gf.report_section(),
        ReportSection(
            key="errors",
            title="Error verification",
            summary="accuracy on evidences",
            tables={"by k": curve.rename(columns={"x": "k", "y": "accuracy"})},
            figures=[Figure("curve", "accuracy vs k", curve, {"hline": 0.8})],
            notes=["a note with <script>alert(2)</script>"],
        ),
        ReportSection(
            key="pairs",
            title="Pairs",
            tables={"pairs": top, "pair_features": feats},
            figures=[Figure("pair_cards", "pairs", options={"sensitive": "<b>gender</b>"})],
        ),
        ReportSection.skipped("finetune", "Fine-tuning", "the model is not a LightningModule"),
    ]
    findings = gf.findings() + [
        Finding("error verification", "", "accuracy", 0.5, 0.2, 0.8, 0.01, True, "errs <here>")
    ]
    return AuditReport(
        dataset={"name": "toy <script>alert(1)</script>", "nodes": 5},
        model={"class": "GCN", "test_accuracy": 0.8, "nan_metric": float("nan")},
        config={"k": 10, "ks": [1, 2]},
        findings=findings,
        verdict="Yes: <b>gender</b> matters.",
        sections=sections,
        run_info={"seconds": {"evidence_search": 0.1}},
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
    with pytest.raises(InvalidInputError, match="outside"):
        pair_comparison(data, pairs.assign(node_v=[1, 7]), np.zeros(5, dtype=int))


def test_save_writes_three_files_findings_first_with_embedded_charts(tmp_path):
    report = _report()
    paths = report.save(tmp_path / "out")
    for key in ("json", "markdown", "html"):
        assert paths[key].is_file() and paths[key].stat().st_size > 0
    page = paths["html"].read_text()
    imgs = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(imgs) == 2  # group positive rates and the error curve
    assert all(base64.b64decode(b)[:8] == b"\x89PNG\r\n\x1a\n" for b in imgs)
    # verdict and findings lead, sections follow in order, skipped sections say why
    assert page.index("class='verdict'") < page.index("id='findings'") < page.index("id='errors'")
    assert "not a LightningModule" in page and "Status: skipped" in page
    assert "FLAG" in page
    # everything from the data is escaped
    for raw in ("<script>", "<b>gender</b>", "<here>"):
        assert raw not in page
    assert "&lt;script&gt;" in page and "&lt;b&gt;gender&lt;/b&gt;" in page
    md = paths["markdown"].read_text()
    # the Markdown escapes the same text: a viewer renders raw HTML
    for raw in ("<script>", "<b>gender</b>", "<here>"):
        assert raw not in md
    assert "&lt;script&gt;" in md and "&lt;b&gt;gender&lt;/b&gt;" in md
    # the summary card (with the verdict) opens the report, the full findings table follows
    assert md.index("## Summary") < md.index("**Verdict.** Yes: &lt;b&gt;gender&lt;/b&gt;")
    assert md.index("**Verdict.**") < md.index("## Findings") < md.index("## Error verification")
    assert page.index("id='summary'") < page.index("class='verdict'")
    assert "| finding | feature |" in md and "**FLAG**" in md
    payload = json.loads(paths["json"].read_text())
    assert list(payload)[:6] == [
        "format_version",
        "title",
        "verdict",
        "findings",
        "aliases",
        "summary",
    ]
    # no sensitive attribute named in the dataset: the aliases are the first labelled rows
    assert (
        payload["aliases"]["dsp"]["row"] == 0
        and payload["aliases"]["dsp"]["value"] == (payload["findings"][0]["value"])
    )


def test_save_refuses_to_overwrite_without_force(tmp_path):
    report = _report()
    report.save(tmp_path)
    with pytest.raises(InvalidInputError, match=r"already holds files \(report.html"):
        report.save(tmp_path)
    report.save(tmp_path, force=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInputError, match="must be a folder"):
        report.save(tmp_path / "file")


def test_json_roundtrip(tmp_path):
    report = _report()
    report.save(tmp_path)
    back = AuditReport.from_json(tmp_path / "report.json")
    pd.testing.assert_frame_equal(back.findings, report.findings)
    assert back.section_keys == report.section_keys
    for sec in report.sections:
        other = back.section(sec.key)
        assert (other.title, other.summary, other.status, other.notes) == (
            sec.title,
            sec.summary,
            sec.status,
            sec.notes,
        )
        for name, frame in sec.tables.items():
            pd.testing.assert_frame_equal(other.tables[name], frame, check_dtype=True)
        assert [f.kind for f in other.figures] == [f.kind for f in sec.figures]
    assert back.dataset == report.dataset and back.verdict == report.verdict
    assert math.isnan(report.model["nan_metric"]) and back.model["nan_metric"] is None
    assert back.config == report.config and back.run_info == report.run_info
    # a folder works too, and JSON is strict (no NaN tokens)
    assert AuditReport.from_json(tmp_path).to_dict() == back.to_dict()
    json.loads((tmp_path / "report.json").read_text(), parse_constant=pytest.fail)
    assert back.finding("statistical parity")["feature"] == "<b>gender</b>"
    assert back.table("pairs", "pairs")["node_u"].tolist() == [0, 3]


def test_from_json_and_access_errors(tmp_path):
    with pytest.raises(InvalidInputError, match="is not a report.json file"):
        AuditReport.from_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        AuditReport.from_json(bad)
    bad.write_text(json.dumps({"a": 1}))
    with pytest.raises(InvalidInputError, match="not an audit report"):
        AuditReport.from_json(bad)
    bad.write_text(json.dumps({"format_version": 1, "sections": []}))
    with pytest.raises(InvalidInputError, match="format_version 1"):
        AuditReport.from_json(bad)
    report = _report()
    with pytest.raises(InvalidInputError, match="no section 'nope'"):
        report.section("nope")
    with pytest.raises(InvalidInputError, match="no table 'nope'"):
        report.table("errors", "nope")
    with pytest.raises(InvalidInputError, match="distinct keys"):
        AuditReport({}, {}, {}, sections=[report.sections[0], report.sections[0]])


def test_empty_tables_render(tmp_path):
    section = ReportSection(
        key="empty",
        title="Empty",
        tables={"t": pd.DataFrame({"a": pd.Series(dtype=float)})},
        figures=[Figure("bar", "nothing", pd.DataFrame({"label": [], "value": []}))],
    )
    report = AuditReport({}, {}, {}, sections=[section])
    page = report.to_html()
    assert "no data to plot" in page and "(no finding)" in page
    report.to_json(tmp_path / "r.json")
    back = AuditReport.from_json(tmp_path / "r.json")
    assert back.section("empty").tables["t"].empty and back.findings.empty


def test_run_audit_with_plain_callable_and_degenerate_model(tmp_path):
    from gnnaudit.audit.pipeline import run_audit
    from gnnaudit.datasets import synthetic_credit_graph

    data = synthetic_credit_graph(num_nodes=120, seed=2)

    def constant(x, edge_index):
        return torch.tensor([[1.0, 0.0]]).repeat(x.size(0), 1)

    report = run_audit(constant, data, progress=False)
    degenerate = report.finding("degenerate model")
    assert degenerate["flagged"] and degenerate["value"] == 1.0
    assert "degenerate" in report.verdict
    assert report.section("model_quality").data["degenerate"] is True
    # no counterfactual evidence exists: the evidence sections are skipped with the reason
    for key in ("discrimination", "error_verification", "evidence_pairs"):
        assert report.section(key).status == "skipped"
        assert "one class" in report.section(key).summary
    assert report.section("group_fairness").tables["gaps"]["value"].iloc[0] == 0.0
    assert not report.findings.loc[
        report.findings["finding"] != "degenerate model", "flagged"
    ].any()
    report.save(tmp_path)
    assert AuditReport.from_json(tmp_path).verdict == report.verdict

    def by_gender(x, edge_index):  # predicts the sensitive attribute: maximal parity gap
        g = x[:, -1].long()
        return torch.nn.functional.one_hot(g, 2).float()

    report = run_audit(by_gender, data, progress=False, finetune=True, top_pairs=3)
    parity = report.finding("statistical parity", "gender")
    assert parity["value"] == pytest.approx(1.0) and parity["flagged"]
    assert report.verdict.startswith("Yes: the model's decisions depend on gender")
    assert report.section("finetune").status == "skipped"
    assert "LightningModule" in report.section("finetune").summary
    assert len(report.table("evidence_pairs", "pairs")) == 3
    # gender decides the prediction: every evidence of every node has the other gender, but so
    # does every candidate, hence score 1 = baseline 1 and lift 0 ("by construction")
    scores = report.table("discrimination", "scores")
    g = scores[scores["feature"] == "gender"]
    assert np.allclose(g["score"], 1.0) and np.allclose(g["baseline"], 1.0)
    assert np.allclose(g["lift"], 0.0)
