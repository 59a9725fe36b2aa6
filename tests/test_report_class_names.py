"""The report speaks the user's label values (issue 38, item 7): a graph read from a table with a
yes/no label names 'yes' / 'no' in its findings, not "class 1"; without ``data.class_names`` the
sentences say "class 1" as before."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from gnnaudit.audit.fairness.group_fairness import GroupFairnessUnit
from gnnaudit.audit.fairness.literature_unit import LiteratureMetricsUnit
from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.quality_unit import ModelQuality
from gnnaudit.audit.report.section import class_label
from gnnaudit.datasets import read_graph

UNITS = (ModelQuality, GroupFairnessUnit, LiteratureMetricsUnit)


@pytest.fixture(scope="module")
def data():
    """People with a text gender, an income and a yes/no ``Defaulted`` label."""
    rng = np.random.default_rng(0)
    n = 80
    income = rng.normal(30_000, 8_000, n).round()
    nodes = pd.DataFrame(
        {
            "person": [f"p{i:03d}" for i in range(n)],
            "Gender": rng.choice(["F", "M"], n),
            "Income": income,
            "Defaulted": np.where(income > 30_000, "no", "yes"),
        }
    )
    src, dst = rng.integers(0, n, 240), rng.integers(0, n, 240)
    edges = pd.DataFrame(
        {"source": nodes["person"][src].to_numpy(), "target": nodes["person"][dst].to_numpy()}
    )
    graph = read_graph(nodes, edges, id_column="person", label="Defaulted", sensitive="Gender")
    assert graph.class_names == ["no", "yes"]
    return graph


def _audit(model, graph):
    return run_audit(model, graph, units=[u() for u in UNITS], n_boot=50, progress=False)


def _income(graph):
    col = graph.feature_names.index("Income")

    def model(x, edge_index):
        low = 30_000.0 - x[:, col].to(torch.float32)
        return torch.stack([-low, low], dim=1)  # 'yes' below 30,000

    return model


def _always_yes(x, edge_index):
    return torch.stack([torch.zeros(x.size(0)), torch.ones(x.size(0))], dim=1)


def _text(report) -> str:
    return " ".join(report.findings["explanation"]) + " " + report.verdict


def test_class_label():
    assert class_label(1) == "class 1" and class_label(1, bare=True) == "1"
    assert class_label(1, ["no", "yes"]) == "'yes' (class 1)"
    assert class_label(1, ["no", "yes"], bare=True) == "'yes' (class 1)"
    assert class_label(3, ["no", "yes"]) == "class 3"


def test_findings_name_the_label_values(data):
    report = _audit(_income(data), data)
    text = _text(report)
    assert "decisions for 'yes' (class 1)" in text
    assert "whose true class is 'yes' (class 1)" in text
    assert "class 1 ranks" not in text and "for class 1" not in text
    summary = report.section("model_quality").summary
    assert "the most predicted class, 'no' (class 0), covers" in summary
    assert "Positive class = 'yes' (class 1)" in " ".join(report.section("group_fairness").notes)
    # the JSON round trip keeps the sentences
    again = type(report).from_dict(report.to_dict())
    assert list(again.findings["explanation"]) == list(report.findings["explanation"])


def test_degenerate_model_names_the_label_value(data):
    report = _audit(_always_yes, data)
    reason = report.finding("degenerate model")["explanation"]
    assert "it predicts 'yes' (class 1) for 100.0%" in reason
    assert "'yes' (class 1)" in report.section("literature").summary


def test_without_class_names_the_text_is_unchanged(data):
    plain = data.clone()
    del plain.class_names
    report = _audit(_income(plain), plain)
    text = _text(report)
    assert "the most predicted class (0) covers" in report.section("model_quality").summary
    assert "decisions for class 1 " in text and "whose true class is 1," in text
    assert "'yes'" not in text and "'no'" not in text
    reason = _audit(_always_yes, plain).finding("degenerate model")["explanation"]
    assert "it predicts class 1 for 100.0%" in reason
