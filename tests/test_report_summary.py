"""The report's summary card (verdict, headline figures, chart, next step) and its literature
alias table: each figure said once, the card first in report.md and report.html, the next step's
mitigation targets those of the flagged findings, every name escaped."""

from __future__ import annotations

import base64
import json
import math
import re

import pandas as pd
import pytest

from gnnaudit.audit import AuditReport, Finding, ReportSection
from gnnaudit.audit.report.literature import LITERATURE_ALIASES, alias_table, literature_statistic
from gnnaudit.audit.report.summary import (
    MAX_HEADLINE,
    MIN_HEADLINE,
    TARGET_OF,
    gap_chart,
    headline_findings,
    mitigate_command,
    mitigation_targets,
    next_step,
)
from gnnaudit.audit.report.thresholds import EOD_THRESHOLD, MIN_FLIP_EFFECT, NEGLIGIBLE_FLIP
from gnnaudit.errors import InvalidInputError

NODE, GRAPH = "counterfactual flip (node scope)", "counterfactual flip (graph scope)"


def _finding(name: str, flagged: bool, feature: str = "gender", value: float = 0.2) -> Finding:
    statistic = {
        NODE: "flip rate",
        GRAPH: literature_statistic("cf"),
        "statistical parity": literature_statistic("dsp"),
        "equal opportunity": literature_statistic("deo"),
    }.get(name, name)
    return Finding(
        name,
        feature,
        statistic,
        value,
        value - 0.1,
        value + 0.1,
        math.nan,
        flagged,
        f"{name} <i>x</i>",
    )


def _report(findings: list[Finding], sensitive: str | None = "gender", **kw) -> AuditReport:
    return AuditReport(
        dataset={"name": "toy", "sensitive_name": sensitive},
        model={},
        config={"confidence": 0.9},
        findings=findings,
        verdict=kw.pop("verdict", "Yes: the decisions depend on gender."),
        **kw,
    )


def _core(flags: tuple[bool, bool, bool, bool], feature: str = "gender") -> list[Finding]:
    names = (NODE, GRAPH, "statistical parity", "equal opportunity")
    return [_finding(n, f, feature) for n, f in zip(names, flags, strict=True)]


# ---------------------------------------------------------------- the next step's targets
FLAG_SETS = [(a, b, c, d) for a in (0, 1) for b in (0, 1) for c in (0, 1) for d in (0, 1)]


@pytest.mark.parametrize("flags", FLAG_SETS)
def test_next_step_targets_are_those_of_the_flagged_findings(flags) -> None:
    findings = _core(tuple(map(bool, flags)))
    # findings about another attribute and unrelated flagged rows never add a target
    findings += _core((True, True, True, True), feature="age")
    findings.append(_finding("error verification", True, feature=""))
    step = next_step(findings, "gender", [])
    expected = {TARGET_OF[f.finding] for f in findings if f.flagged and f.feature == "gender"}
    expected_order = tuple(t for t in ("cf", "dsp", "deo") if t in expected)
    assert step.targets == expected_order
    if expected:
        assert step.targets == mitigation_targets(findings, "gender")[0]
        assert step.command == "gnnaudit audit ... --mitigate"
        assert step.python == "audit_model(model, data, sensitive='gender', mitigate=True)"
        for target in step.targets:
            assert f"{target} for" in step.text
    else:
        assert step.command is None and "Nothing to mitigate" in step.text


def test_next_step_other_cases() -> None:
    core = _core((False, True, True, False))
    degenerate = [_finding("degenerate model", True, feature=""), *core]
    assert "degenerate" in next_step(degenerate, "gender", []).text
    assert next_step(degenerate, "gender", []).targets == ()
    assert "--sensitive NAME" in next_step(core, None, []).text
    not_input = ReportSection.skipped(
        "sensitivity",
        "s",
        "the sensitive attribute 'gender' is not one of the model's input features",
    )
    step = next_step(core, "gender", [not_input])
    assert "not a model input" in step.text and step.command is None
    done = ReportSection("mitigation", "Before / after", data={"checkpoint": "mitigated_model.pt"})
    step = next_step(core, "gender", [done])
    assert step.targets == ("cf", "dsp") and "mitigated_model.pt" in step.text
    assert step.command is None


def test_mitigate_command_keeps_the_users_arguments() -> None:
    cmd = "gnnaudit audit --dataset synthetic --out 'my out/' --force --sensitive gender"
    assert mitigate_command(cmd) == (
        "gnnaudit audit --dataset synthetic --out 'my out-mitigated' --sensitive gender --mitigate"
    )
    assert mitigate_command("gnnaudit audit --out=o --mitigate") == (
        "gnnaudit audit --out=o-mitigated --mitigate"
    )
    assert mitigate_command(None) == "gnnaudit audit ... --mitigate"


# ---------------------------------------------------------------- headline and chart
def test_headline_is_three_to_five_flagged_first() -> None:
    core = _core((False, True, True, False))
    extra = [_finding("error verification", True, feature=""), _finding("proxies", True)]
    accuracy = _finding("model accuracy", False, feature="")
    head = headline_findings([accuracy, *core, *extra], "gender")
    assert len(head) == MAX_HEADLINE
    assert [f.finding for f in head[:4]] == [
        GRAPH,
        "statistical parity",
        "error verification",
        "proxies",
    ]
    assert all(f.flagged for f in head[:4]) and head[4].finding == NODE
    # no sensitive attribute: filled with findings that have an interval
    few = headline_findings([accuracy, _finding("literature: AUROC", False, feature="")], None)
    assert len(few) == 2 < MIN_HEADLINE  # only two findings exist
    degenerate = _finding("degenerate model", True, feature="")
    assert headline_findings([*core, degenerate], "gender")[0] == degenerate


def test_chart_has_the_flips_and_gaps_against_the_documented_thresholds() -> None:
    fig = gap_chart(_core((True, False, True, False)), "gender")
    assert fig is not None and fig.kind == "interval"
    data = fig.data
    assert data["label"].tolist() == [
        "flip, node scope",
        "flip, graph scope (CF)",
        "parity gap (ΔSP)",
        "equal-opportunity gap (ΔEO)",
    ]
    assert data["threshold"].tolist() == [NEGLIGIBLE_FLIP, NEGLIGIBLE_FLIP, 0.0, EOD_THRESHOLD]
    assert data["material"].tolist()[:2] == [MIN_FLIP_EFFECT] * 2
    assert data["flagged"].tolist() == [True, False, True, False]
    assert gap_chart([_finding("model accuracy", False, "")], "gender") is None


# ---------------------------------------------------------------- the rendered card
def test_card_is_first_in_both_formats_with_the_flagged_figures(tmp_path) -> None:
    findings = [_finding("model accuracy", False, feature=""), *_core((False, True, True, False))]
    report = _report(findings, run_info={"command": "gnnaudit audit --dataset x --out o"})
    report.save(tmp_path)
    md = (tmp_path / "report.md").read_text()
    headings = re.findall(r"^## (.+)$", md, flags=re.M)
    assert headings[:2] == ["Summary", "Findings"]
    card = md[md.index("## Summary") : md.index("## Findings")]
    assert "**Verdict.** Yes: the decisions depend on gender." in card
    assert card.count("**FLAG**") == 2 and "NIFTY's ΔSP" in card
    assert "90% CI" in card and "0.1 to 0.3" in card
    assert "gnnaudit audit --dataset x --out o-mitigated --mitigate" in card
    assert "targets cf for a counterfactual flip of gender, dsp for statistical parity" in card
    # the full table follows, flagged rows first
    table = md[md.index("## Findings") : md.index("## Dataset")]
    rows = [
        line for line in table.splitlines() if line.startswith("| ") and "finding |" not in line
    ]
    assert [("**FLAG**" in r) for r in rows] == [True, True, False, False, False]
    page = (tmp_path / "report.html").read_text()
    body = page[page.index("<body>") :]
    assert re.findall(r"<h2[^>]*>([^<]+)</h2>", body)[:2] == ["Summary", "Findings"]
    card_html = body[body.index("id='summary'") : body.index("id='findings'")]
    assert card_html.count("class='flag'>FLAG") == 2
    imgs = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", card_html)
    assert len(imgs) == 1 and base64.b64decode(imgs[0])[:4] == b"\x89PNG"
    assert "o-mitigated --mitigate</pre>" in card_html
    payload = json.loads((tmp_path / "report.json").read_text())
    assert payload["summary"]["next_step"]["targets"] == ["cf", "dsp"]
    assert [f["finding"] for f in payload["summary"]["headline"]][:2] == [
        GRAPH,
        "statistical parity",
    ]


def test_card_escapes_names_in_both_formats() -> None:
    bad = "<script>alert(1)</script>"
    findings = _core((True, False, False, False), feature=bad)
    report = _report(findings, sensitive=bad, verdict=f"Yes: {bad} matters.")
    md, page = report.to_markdown(), report.to_html()
    for text in (md, page):
        assert "<script>" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    card = md[md.index("## Summary") : md.index("## Findings")]
    assert "sensitive='&lt;script&gt;" in card and "<i>" not in md


def test_card_says_when_nothing_is_flagged() -> None:
    report = _report(_core((False, False, False, False)), verdict="No dependence on gender.")
    md = report.to_markdown()
    card = md[md.index("## Summary") : md.index("## Findings")]
    assert "Nothing to mitigate" in card and "--mitigate" not in card and "FLAG" not in card
    assert "none crosses its documented threshold" in md


# ---------------------------------------------------------------- the alias table
def test_alias_table_points_at_the_primary_attributes_findings() -> None:
    findings = [
        _finding("model accuracy", False, feature=""),
        *_core((False, True, True, False), feature="age"),
        *_core((True, False, False, True)),
        Finding("statistical parity", "age & gender", literature_statistic("dsp"), 0.5),
    ]
    report = _report(findings)
    aliases = report.aliases
    assert set(aliases) == set(LITERATURE_ALIASES)
    frame = report.findings
    for key, entry in aliases.items():
        row = frame.iloc[entry["row"]]
        assert row["feature"] == "gender" and row["finding"] == LITERATURE_ALIASES[key][0]
        for col in ("value", "ci_low", "ci_high", "flagged"):
            assert entry[col] == row[col]
        pd.testing.assert_series_equal(report.alias(key), row)
    # without the primary attribute's rows, the first labelled one; unlabelled rows never count
    assert alias_table(frame, "nobody")["dsp"]["feature"] == "age"
    plain = frame.assign(statistic="flip rate")
    assert alias_table(plain, "gender") == {}
    payload = json.loads(report.to_json())
    assert payload["aliases"] == json.loads(json.dumps(aliases))
    with pytest.raises(InvalidInputError, match="no finding for the literature's 'deo'"):
        _report(findings[:1]).alias("deo")
