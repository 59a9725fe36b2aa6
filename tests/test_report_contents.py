"""The report's table of contents and its tables that scroll instead of overflowing the page."""

from __future__ import annotations

import re

import pytest

from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.report.render import github_anchor
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import train_node_classifier


@pytest.fixture(scope="module")
def report():
    data = synthetic_credit_graph(num_nodes=160, seed=0)
    model, _ = train_node_classifier(data, "gcn", max_epochs=20, seed=0, num_layers=2)
    return run_audit(model, data, n_boot=30, progress=False)


def test_html_contents_link_every_heading(report):
    page = report.to_html()
    nav = re.search(r"<nav class='toc'[^>]*><ul>(.*?)</ul></nav>", page)
    assert nav is not None and page.index("id='summary'") < nav.start() < page.index("Findings")
    targets = re.findall(r"href='#([^']+)'", nav.group(1))
    ids = set(re.findall(r"<h2 id='([^']+)'", page))
    assert targets and set(targets) <= ids  # every link lands on a heading
    assert len(targets) == len(ids)  # and every heading after the card is linked
    assert targets[0] == "findings" and targets[-1] == "run-information"


def test_markdown_contents_use_githubs_anchors(report):
    md = report.to_markdown()
    head = md.index("**Contents.**")
    assert md.index("## Summary") < head < md.index("## Findings")
    links = re.findall(r"- \[([^\]]+)\]\(#([^)]+)\)", md[head : md.index("## Findings")])
    headings = re.findall(r"^## (.+)$", md, flags=re.M)
    assert [title for title, _ in links] == [h for h in headings if h != "Summary"]
    assert all(anchor == github_anchor(title) for title, anchor in links)


def testgithub_anchor_rule():
    assert github_anchor("Before / after mitigation (sensitive: gender)") == (
        "before--after-mitigation-sensitive-gender"
    )
    assert github_anchor("Run information") == "run-information"


def test_wide_tables_scroll_instead_of_overflowing(report):
    css = report.to_html().split("<style>")[1].split("</style>")[0]
    table_rule = re.search(r"table\{([^}]*)\}", css).group(1)
    assert "overflow-x:auto" in table_rule and "max-width:100%" in table_rule
    assert "overflow-wrap:anywhere" in css


def test_every_bar_chart_of_an_estimate_has_its_interval(report):
    """The bar charts of rates and flip rates carry intervals that hold their value."""
    seen = 0
    for section in report.sections:
        for fig in section.figures:
            if fig.kind != "bar" or section.key in ("discrimination",):  # per-node scores
                continue
            data = fig.data
            assert {"ci_low", "ci_high"} <= set(data.columns), (section.key, fig.title)
            ok = data[["ci_low", "ci_high", "value"]].dropna()
            assert (
                (ok["ci_low"] <= ok["value"] + 1e-12) & (ok["value"] <= ok["ci_high"] + 1e-12)
            ).all()
            seen += 1
    assert seen >= 2


def test_the_error_verification_curve_draws_its_intervals(report):
    if not report.has_section("error_verification"):
        pytest.skip("no error-verification section on this graph")
    (fig,) = report.section("error_verification").figures
    data = fig.data
    assert {"y_low", "y_high"} <= set(data.columns)
    ok = data[["y_low", "y", "y_high"]].dropna()
    assert len(ok) and ((ok["y_low"] <= ok["y"] + 1e-12) & (ok["y"] <= ok["y_high"] + 1e-12)).all()
