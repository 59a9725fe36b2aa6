"""``gnnaudit audit`` end to end on a small synthetic graph."""

from __future__ import annotations

import json
import logging

import pytest

from gnnaudit.audit import AuditReport
from gnnaudit.cli.main import main

SMALL = ["--dataset", "synthetic", "--num-nodes", "200", "--epochs", "30", "--no-progress"]


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    logging.getLogger("lightning").setLevel(logging.ERROR)
    out = tmp_path_factory.mktemp("audit")
    args = [
        "audit",
        *SMALL,
        "--backend",
        "auto",
        "--finetune-m",
        "8",
        "--finetune-epochs",
        "2",
        "--out",
        str(out),
    ]
    return out, args


def test_audit_writes_report_and_prints_summary(audited, capsys):
    out, args = audited
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Top 5 discrimination scores" in text
    assert "report.html" in text
    for name in ("report.json", "report.md", "report.html", "model.ckpt"):
        assert (out / name).is_file()
    report = AuditReport.from_json(out / "report.json")
    assert report.dataset["name"] == "synthetic" and report.dataset["nodes"] == 200
    assert report.config["backend"] == "auto" and report.run_info["evidence_backend"] == "exact"
    assert report.section("group_fairness").data["sensitive_name"] == "gender"
    finetune = report.table("finetune", "accuracy")
    assert list(finetune["stage"]) == ["before", "after_evidence", "after_control"]
    assert "rank_by_score" in report.section("discrimination").data
    # the verdict, every finding and the summary card's next step are printed; a flagged
    # gap or flip makes it the command that mitigates, into a new folder beside --out
    assert report.verdict in text
    for explanation in report.findings["explanation"]:
        assert explanation in text
    step = report.summary_card().next_step
    assert f"Next step: {step.text}" in text
    assert report.run_info["command"].startswith("gnnaudit audit --dataset synthetic")
    if step.targets:
        assert step.command is not None and step.command.endswith("--mitigate")
        assert f"{out}-mitigated" in step.command and step.command in text
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 3
    # the printed top rows are the report's top rows
    top = report.table("discrimination", "scores").iloc[0]
    assert str(top["feature"]) in text


def test_audit_from_checkpoint_and_sensitive_feature(audited, tmp_path, capsys):
    out, _ = audited
    if not (out / "model.ckpt").is_file():
        main(audited[1])
    args = [
        "audit",
        *SMALL,
        "--checkpoint",
        str(out / "model.ckpt"),
        "--no-finetune",
        "--sensitive",
        "homeowner",
        "--k",
        "5",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    report = AuditReport.from_json(tmp_path)
    assert not report.has_section("finetune")
    assert report.config["k"] == 5
    assert report.section("group_fairness").data["sensitive_name"] == "homeowner"
    assert "checkpoint" in report.model["source"]
    assert json.loads((tmp_path / "report.json").read_text())["findings"]


def test_audit_errors_exit_2(tmp_path, capsys):
    assert (
        main(["audit", *SMALL, "--checkpoint", str(tmp_path / "none.ckpt"), "--out", str(tmp_path)])
        == 2
    )
    assert "none.ckpt' does not exist" in capsys.readouterr().err
    assert (
        main(["audit", *SMALL, "--sensitive", "shoe_size", "--no-finetune", "--out", str(tmp_path)])
        == 2
    )
    assert "sensitive='shoe_size'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # a usage error: one line naming the flag
        main(["audit", *SMALL, "--k", "0", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "argument --k: must be an integer in [1," in capsys.readouterr().err


def test_cli_backend_choices_match_the_library():
    """The commands offer exactly the search backends the library has (kept as literals so
    parsing does not import torch)."""
    from gnnaudit.audit.search.evidence import BACKENDS
    from gnnaudit.cli import audit_args as cli_audit
    from gnnaudit.cli import evidence as cli_evidence
    from gnnaudit.cli.main import build_parser

    assert cli_audit.BACKENDS == BACKENDS
    assert cli_evidence.BACKENDS == BACKENDS
    audit = build_parser().parse_args(["audit", "--out", "o"])
    assert audit.backend in BACKENDS
