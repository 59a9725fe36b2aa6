"""Mitigation in the audit: before / after section, checkpoint, CLI (issue 15)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from gnnaudit.audit import AuditReport
from gnnaudit.audit.fairness.group_fairness import group_fairness
from gnnaudit.audit.sensitivity.flip import counterfactual_flip
from gnnaudit.cli.main import main
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import (
    MitigationUnit,
    NodeClassifier,
    audit_model,
    mitigation_metrics,
    run_audit,
    train_node_classifier,
)
from gnnaudit.training.mitigation import CHECKPOINT_NAME

FAST = {"epochs": 20, "grid": (0.0, 1.0)}


@pytest.fixture(scope="module")
def setup():
    logging.getLogger("lightning").setLevel(logging.ERROR)
    data = synthetic_credit_graph(num_nodes=200, bias=3.0, seed=2)
    module, _ = train_node_classifier(data, "sage", max_epochs=40, seed=0, num_layers=2)
    return data, module


@pytest.fixture(scope="module")
def report(setup, tmp_path_factory):
    data, module = setup
    out = tmp_path_factory.mktemp("mitigated")
    rep = audit_model(
        module,
        data,
        sensitive="gender",
        mitigate=True,
        mitigate_kwargs=FAST,
        out=out,
        progress=False,
        n_boot=200,
    )
    return rep, out


def test_metrics_match_the_audit_statistics(setup):
    data, module = setup
    frame = mitigation_metrics(module, data, "gender", n_boot=200, random_state=1)
    row = frame.set_index(["metric", "scope"])["value"]
    for scope in ("node", "graph"):
        flip = counterfactual_flip(module, data, "gender", scope=scope, n_boot=10)
        assert row[("flip rate", scope)] == pytest.approx(flip.rate)
    with torch.no_grad():
        pred = module.eval()(data.x, data.edge_index).argmax(1).numpy()
    test = data.test_mask.numpy()
    fair = group_fairness(
        data.y.numpy(), pred, sensitive_features=data.sensitive.numpy(), mask=test
    )
    assert row[("statistical parity difference", "")] == pytest.approx(
        fair.statistical_parity_difference
    )
    assert row[("equal opportunity difference", "")] == pytest.approx(
        fair.equal_opportunity_difference
    )
    assert row[("accuracy", "")] == pytest.approx((pred[test] == data.y.numpy()[test]).mean())
    assert (frame["ci_low"] <= frame["value"] + 1e-12).all()
    assert (frame["value"] <= frame["ci_high"] + 1e-12).all()


def test_section_in_all_three_formats(report):
    rep, out = report
    section = rep.section("mitigation")
    assert section.status == "ok"
    table = section.tables["before_after"]
    assert list(table["metric"]) == [
        "flip rate",
        "flip rate",
        "statistical parity difference",
        "equal opportunity difference",
        "auroc",
        "accuracy",
    ]
    assert {"before_ci_low", "after_ci_high", "change", "worse"} <= set(table.columns)
    assert np.allclose(table["change"], table["after"] - table["before"])
    # worse: a gap or flip up, AUROC or accuracy down; each named in the summary
    up_is_good = table["metric"].isin(["auroc", "accuracy"])
    expected = np.where(up_is_good, table["change"] < 0, table["change"] > 0)
    assert table["worse"].tolist() == expected.tolist()
    assert ("Got worse:" in section.summary) == bool(expected.any())
    # the targets answer the flagged findings (gender is read at bias 3: a flip is flagged)
    flagged = set(rep.flagged[rep.flagged["feature"] == "gender"]["finding"])
    targets = section.data["targets"]
    assert ("cf" in targets) == bool(
        flagged & {f"counterfactual flip ({s} scope)" for s in ("node", "graph")}
    )
    assert ("dsp" in targets) == ("statistical parity" in flagged) or not flagged
    assert "flagged" in section.summary or "all three" in section.summary
    # the remedy says what it returned; a blinded candidate changes no decision with gender
    chosen = section.data["settings"]["chosen"]
    assert chosen and f"({chosen})" in section.summary
    assert ("blinded to gender" in section.summary) == chosen.startswith("blind ")
    # a fine-tuned candidate keeps the model's share of class-1 decisions (keep_rate) and says so
    offset = section.data["settings"]["offset"]
    assert ("not how many" in section.summary) == (offset != 0.0)
    assert (offset != 0.0) == (chosen != "vanilla")  # a two-class GCN with an output bias
    if chosen.startswith("blind "):
        after = table.set_index(["metric", "scope"])["after"]
        assert after[("flip rate", "node")] == 0 and after[("flip rate", "graph")] == 0
    tradeoff = section.tables["tradeoff"]
    assert sorted(tradeoff["lambda_cf"].unique()) == [0.0, 1.0, 2.0]
    # the validation gain of the returned candidate, with its interval, in table and words
    gain = section.tables["selection_gain"].set_index("gap")
    assert list(gain.index) == [*targets, "sum"]
    total = gain.loc["sum"]
    assert total["ci_low"] <= total["reduction"] <= total["ci_high"]
    if chosen != "vanilla":
        assert f"by {total['reduction']:.3f} (95% paired bootstrap interval" in section.summary
        verdict = "more than chance" if total["established"] else "not more than chance"
        assert f": {verdict}, before" in section.summary
    payload = json.loads((out / "report.json").read_text())
    assert "mitigation" in [s["key"] for s in payload["sections"]]
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert "Before / after mitigation" in md and "Before / after mitigation" in html
    assert "flip rate" in md and section.figures[0].title in html
    assert AuditReport.from_json(out / "report.json").section("mitigation").summary == (
        section.summary
    )
    # the mitigation unit adds no finding: findings describe the audited model
    assert not rep.findings["finding"].str.contains("mitigat").any()


def test_checkpoint_loads_with_weights_only_and_reproduces_the_after_column(setup, report):
    data, module = setup
    rep, out = report
    state = torch.load(out / CHECKPOINT_NAME, weights_only=True)
    fresh = NodeClassifier(**dict(module.hparams))
    fresh.load_state_dict(state)
    fresh.eval()
    with torch.no_grad():
        pred = fresh(data.x, data.edge_index).argmax(1)
    test = data.test_mask
    acc = float((pred[test] == data.y[test]).float().mean())
    table = rep.table("mitigation", "before_after").set_index("metric")
    assert table.loc["accuracy", "after"] == pytest.approx(acc)
    # the audited model was not changed by the mitigation
    assert not all(torch.equal(state[k], v) for k, v in module.state_dict().items())


def test_run_audit_keeps_checkpoints_in_memory(setup):
    data, module = setup
    rep = run_audit(
        module,
        data,
        units=[MitigationUnit(**FAST)],
        sensitive="gender",
        progress=False,
        n_boot=50,
    )
    assert set(rep.checkpoints) == {CHECKPOINT_NAME}
    assert rep.checkpoints[CHECKPOINT_NAME].keys() == module.state_dict().keys()


def test_unit_skipped_without_a_module_or_a_sensitive_feature(setup):
    data, module = setup
    rep = run_audit(
        None,
        data,
        units=[MitigationUnit(**FAST)],
        predict_fn=lambda x, e: module(x, e),
        sensitive="gender",
        progress=False,
    )
    assert rep.section("mitigation").status == "skipped"
    assert rep.checkpoints == {}
    blind = data.clone()
    del blind.sensitive
    rep = run_audit(module, blind, units=[MitigationUnit(**FAST)], progress=False)
    assert rep.section("mitigation").status == "skipped"


def test_cli_mitigate_writes_the_checkpoint(tmp_path, capsys):
    out = tmp_path / "audit"
    args = ["audit", "--dataset", "synthetic", "--num-nodes", "150", "--epochs", "20"]
    args += ["--no-progress", "--no-finetune", "--mitigate", "--mitigate-lambda", "1.0"]
    args += ["--mitigate-epochs", "5", "--mitigate-grid", "0", "--mitigate-max-bacc-drop", "0.05"]
    args += ["--mitigate-argmax"]
    assert main([*args, "--out", str(out)]) == 0
    assert (out / CHECKPOINT_NAME).is_file()
    state = torch.load(out / CHECKPOINT_NAME, weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    report = AuditReport.from_json(out / "report.json")
    settings = report.section("mitigation").data["settings"]
    assert settings["lambda_cf"] == 1.0 and settings["epochs"] == 5
    assert settings["max_bacc_drop"] == 0.05  # reached FairFinetune.finetune
    assert settings["keep_rate"] is False
    assert sorted(report.table("mitigation", "tradeoff")["lambda_cf"].unique()) == [0.0, 1.0]


def test_targets_follow_the_flagged_findings():
    from gnnaudit.audit.report.section import Finding
    from gnnaudit.training.mitigation import mitigation_targets

    def finding(name: str, flagged: bool, feature: str = "gender") -> Finding:
        return Finding(name, feature, "s", 0.1, flagged=flagged)

    parity = finding("statistical parity", True)
    flip = finding("counterfactual flip (graph scope)", True)
    opportunity = finding("equal opportunity", True)
    assert mitigation_targets([parity], "gender")[0] == ("dsp",)
    assert mitigation_targets([flip, parity], "gender")[0] == ("cf", "dsp")
    assert mitigation_targets([opportunity, flip], "gender")[0] == ("cf", "deo")
    targets, why = mitigation_targets([finding("statistical parity", False)], "gender")
    assert targets == ("cf", "dsp", "deo") and "all three" in why
    # a flag about another attribute does not count
    assert mitigation_targets([finding("statistical parity", True, "age")], "gender")[0] == (
        "cf",
        "dsp",
        "deo",
    )
    assert "statistical parity of gender flagged" in mitigation_targets([parity], "gender")[1]
