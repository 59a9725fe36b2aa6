"""The degenerate-model finding names a likely cause (issue "No silent surprises"): inputs on
raw, large scales (a non-0/1 column with |mean| or sd above 100), with the columns and the fix
(standardize; ``--standardize`` / ``--transform`` for the audit). On inputs of comparable,
small scales the finding and the verdict stay as they were."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn
from torch_geometric.data import Data

from gnnaudit.audit import run_audit
from gnnaudit.audit.model_quality import (
    LARGE_SCALE,
    MAX_NAMED,
    large_scale_columns,
    raw_scale_cause,
)
from gnnaudit.audit.quality_unit import ModelQuality
from gnnaudit.audit.report.verdict import compose_verdict
from gnnaudit.cli.main import main
from gnnaudit.datasets.scaler import Standardizer

CAUSE = "Likely cause: the model's inputs include columns on raw, large scales"
#: the degenerate finding's text before this feature (its end on inputs of small scales)
PLAIN_END = "small parity gaps here mean the model decides little, not that it is fair."


def test_the_rule_names_non_binary_columns_above_100_largest_first():
    rng = np.random.default_rng(0)
    n = 500
    x = np.column_stack(
        [
            rng.integers(0, 2, n),  # 0/1: never named
            rng.normal(0, 1, n),  # a z-score
            rng.normal(2000, 10, n),  # a year: large mean, small sd
            rng.normal(0, 500, n),  # centred, large sd
            rng.uniform(0, 1, n),  # min-max scaled
            np.full(n, LARGE_SCALE),  # exactly at the threshold: not above it
            rng.normal(30_000, 8_000, n),  # an income
        ]
    )
    names = ["flag", "z", "year", "delta", "share", "hundred", "income"]
    found = large_scale_columns(x, names)
    assert found["feature"].tolist() == ["income", "year", "delta"]
    assert found["mean"].iloc[0] == pytest.approx(x[:, 6].mean())
    assert found["std"].iloc[2] == pytest.approx(x[:, 3].std())
    text = raw_scale_cause(x, names)
    assert text is not None and text.startswith(CAUSE)
    income = f"income (mean {x[:, 6].mean():,.0f}, sd {x[:, 6].std():,.0f})"
    year = f"year (mean {x[:, 2].mean():,.0f}, sd {x[:, 2].std():.3g})"
    assert income in text and year in text and "delta (mean " in text
    for flag in ("--standardize", "--transform", "standardized inputs", "--no-standardize"):
        assert flag in text
    assert "flag" not in text.split("Fix:")[0] and "share" not in text
    assert raw_scale_cause(x[:, [0, 1, 4, 5]], ["flag", "z", "share", "hundred"]) is None


def test_at_most_a_few_columns_are_named():
    x = np.arange(1, 6, dtype=np.float64)[None, :] * 1000 + np.arange(4)[:, None]
    text = raw_scale_cause(x, [f"c{j}" for j in range(5)])
    assert text is not None and MAX_NAMED == 3
    assert "c4 (" in text and "c2 (" in text and "c1 (" not in text and "and 2 more" in text


def test_the_verdict_states_the_cause_right_after_the_degenerate_sentence():
    plain = compose_verdict([], sensitive_name=None, degenerate_reason="it predicts 0")
    named = compose_verdict(
        [], sensitive_name=None, degenerate_reason="it predicts 0", degenerate_cause="CAUSE."
    )
    first = plain.split("No sensitive attribute")[0]
    assert (
        named == f"{first}CAUSE. No sensitive attribute" + plain.split("No sensitive attribute")[1]
    )
    not_degenerate = compose_verdict([], sensitive_name=None, degenerate_cause="CAUSE.")
    assert "CAUSE" not in not_degenerate


class Constant(nn.Module):
    """A degenerate classifier: class 0 for every node (a zero linear map plus a bias)."""

    def __init__(self, in_channels: int, out_channels: int = 2) -> None:
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels)
        with torch.no_grad():
            self.lin.weight.zero_()
            self.lin.bias.copy_(torch.tensor([1.0, 0.0]))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


@pytest.fixture(scope="module")
def raw_graph():
    """80 nodes on a ring: a 0/1 group, an age (mean ~45, below the threshold) and an income
    around 30,000, as a user's table gives them."""
    rng = np.random.default_rng(1)
    n = 80
    income = rng.normal(30_000, 8_000, n)
    raw = np.column_stack([rng.integers(0, 2, n), rng.normal(45, 14, n), income])
    ring = np.arange(n)
    edges = np.r_[np.c_[ring, (ring + 1) % n], np.c_[(ring + 1) % n, ring]].T
    return Data(
        x=torch.tensor(raw, dtype=torch.float32),
        edge_index=torch.tensor(edges, dtype=torch.long),
        y=torch.tensor((income > 30_000).astype(np.int64)),
        feature_names=["group", "age", "income"],
    )


def _degenerate(report):
    rows = report.findings[report.findings["finding"] == "degenerate model"]
    assert len(rows) == 1 and bool(rows["flagged"].iloc[0])
    return str(rows["explanation"].iloc[0])


def test_a_degenerate_model_on_raw_large_columns_gets_the_cause(raw_graph):
    report = run_audit(Constant(3), raw_graph, "group", units=[ModelQuality()])
    explanation = _degenerate(report)
    income = raw_graph.x[:, 2].double()
    shown = (
        f"income (mean {float(income.mean()):,.0f}, sd {float(income.std(unbiased=False)):,.0f})"
    )
    assert CAUSE in explanation and shown in explanation
    assert "age" not in explanation.split("Fix:")[0] and "group (" not in explanation
    assert "--standardize" in explanation
    cause = explanation[explanation.index(CAUSE) :]
    assert cause in report.verdict and shown in report.verdict
    assert report.verdict.index("The model is degenerate") < report.verdict.index(CAUSE)
    section = report.section("model_quality")
    assert cause in section.summary and section.data["degenerate_cause"] == cause
    assert cause in report.to_markdown()
    step = report.summary_card().next_step.text  # the card's one next step names the fix too
    assert step.startswith("Improve the model first") and step.endswith(cause)


def test_a_degenerate_model_on_standardized_inputs_keeps_the_plain_message(raw_graph):
    income = raw_graph.x[:, 2].double().numpy()
    scaler = Standardizer(np.array([income.mean()]), np.array([income.std()]), ("income",))
    report = run_audit(Constant(3), scaler.apply(raw_graph), "group", units=[ModelQuality()])
    explanation = _degenerate(report)
    assert explanation.endswith(PLAIN_END) and "Likely cause" not in explanation
    assert "Likely cause" not in report.verdict and "--standardize" not in report.verdict
    assert report.section("model_quality").data["degenerate_cause"] is None
    assert report.summary_card().next_step.text.endswith("retrain it and audit it again.")


def test_a_working_model_on_raw_columns_gets_no_cause(raw_graph):
    """The cause belongs to the degenerate finding only: a model that decides gets none."""

    class ByIncome(nn.Module):
        def forward(self, x, edge_index):
            score = (x[:, 2] - 30_000) / 8_000
            return torch.stack([-score, score], dim=1)

    report = run_audit(ByIncome(), raw_graph, "group", units=[ModelQuality()])
    assert not (report.findings["finding"] == "degenerate model").any()
    assert "Likely cause" not in report.verdict


# ------------------------------------------------------------------------------- the CLI
USER_CODE = textwrap.dedent(
    """
    import torch


    class Constant(torch.nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.lin = torch.nn.Linear(in_channels, out_channels)
            with torch.no_grad():
                self.lin.weight.zero_()
                self.lin.bias.zero_()
                self.lin.bias[0] = 1.0

        def forward(self, x, edge_index):
            return self.lin(x)
    """
)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """A user's node and edge tables (income around 30,000) and their degenerate model."""
    folder = tmp_path_factory.mktemp("degenerate")
    rng = np.random.default_rng(2)
    n = 60
    income = rng.normal(30_000, 8_000, n).round()
    nodes = pd.DataFrame(
        {
            "id": np.arange(n),
            "gender": rng.integers(0, 2, n),
            "age": rng.integers(20, 70, n),
            "income": income,
            "y": (income > 30_000).astype(int),
        }
    )
    nodes.to_csv(folder / "nodes.csv", index=False)
    ring = np.arange(n)
    pd.DataFrame({"source": ring, "target": (ring + 1) % n}).to_csv(
        folder / "edges.csv", index=False
    )
    (folder / "degenerate_models.py").write_text(USER_CODE)
    np.savez(
        folder / "scaler.npz",
        mean_=np.array([income.mean()]),
        scale_=np.array([income.std()]),
        feature_names_in_=np.array(["income"]),
    )
    return folder


def _cli(folder, out, *extra) -> str:
    argv = [
        "audit",
        "--graph",
        str(folder),
        "--undirected",
        "--model",
        f"{folder / 'degenerate_models.py'}:Constant",
        "--sensitive",
        "gender",
        "--no-finetune",
        "--no-progress",
        "--out",
        str(out),
        *extra,
    ]
    assert main(argv) == 0
    return (out / "report.md").read_text()


def test_cli_degenerate_user_model_on_raw_table_names_income_and_the_flag(tables, tmp_path):
    markdown = _cli(tables, tmp_path / "raw")
    verdict = markdown.split("**Verdict.**")[1].split("\n")[0]
    assert "The model is degenerate" in verdict and CAUSE in verdict
    assert "income (mean " in verdict and "--standardize SCALER" in verdict
    assert "age (" not in verdict and "gender (" not in verdict


def test_cli_degenerate_user_model_with_its_scaler_keeps_the_plain_verdict(tables, tmp_path):
    markdown = _cli(tables, tmp_path / "scaled", "--standardize", str(tables / "scaler.npz"))
    verdict = markdown.split("**Verdict.**")[1].split("\n")[0]
    assert "The model is degenerate" in verdict and "Likely cause" not in verdict
