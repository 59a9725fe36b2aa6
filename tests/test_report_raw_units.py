"""Node feature values in the report in the user's own units (issue "No silent surprises"):
the evidence pairs, the embedding audit's counterparts and tree rules undo the standardisation
the graph records (``feature_mean`` / ``feature_scale``), while the model keeps seeing the
standardized inputs; without a record the values are the model inputs as given."""

from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from own_tables import table_args, write_people
from torch import nn
from torch_geometric.data import Data

from gnnaudit.audit import EmbeddingAudit, run_audit
from gnnaudit.audit.fairness.evidence_pairs import EvidencePairsUnit, pair_comparison
from gnnaudit.audit.fairness.feature_units import MODEL_UNITS, ORIGINAL_UNITS
from gnnaudit.audit.report.render import render_markdown
from gnnaudit.audit.search.results import GlobalEvidence
from gnnaudit.cli.main import main
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.datasets.scaler import Standardizer, recorded_inverse, to_raw_units
from gnnaudit.errors import InvalidInputError

INCOME = 1  # column of the toy graph below


def _toy(scaled: bool = True) -> tuple[Data, np.ndarray]:
    """Five nodes: a 0/1 flag and an income around 30,000; the graph standardized by a scaler
    of the income column (``scaled``) or with the same inputs and no record. Returns the graph
    and the raw table."""
    raw = np.array(
        [[0, 28_500], [1, 31_200], [0, 45_000], [1, 12_750], [0, 30_000]], dtype=np.float64
    )
    data = Data(
        x=torch.tensor(raw, dtype=torch.float32),
        edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]]),
        feature_names=["flag", "income"],
    )
    scaler = Standardizer(np.array([29_490.0]), np.array([10_543.0]), ("income",))
    out = scaler.apply(data)
    if not scaled:
        del out.feature_mean, out.feature_scale
    return out, raw


def _pairs(u: list[int], v: list[int]) -> GlobalEvidence:
    n = len(u)
    return GlobalEvidence(
        np.array(u), np.array(v), np.linspace(0.9, 0.8, n), np.zeros(n, int), np.ones(n, int)
    )


def test_pair_values_are_raw_when_the_graph_records_its_scaler():
    data, raw = _toy()
    _, feats = pair_comparison(data, _pairs([0, 2], [3, 1]), np.zeros(5, dtype=int))
    assert feats.attrs["units"] == ORIGINAL_UNITS
    income = feats[feats["feature"] == "income"]
    # the table's own numbers, exactly (the float32 round trip rounded away), not z-scores
    assert income["value_u"].tolist() == [28_500.0, 45_000.0]
    assert income["value_v"].tolist() == [12_750.0, 31_200.0]
    flag = feats[feats["feature"] == "flag"]  # an unscaled column: as it is
    assert set(flag["value_u"]) | set(flag["value_v"]) <= {0.0, 1.0}
    # the ordering statistic is that of the model inputs (unchanged by the affine map)
    x = data.x.numpy().astype(np.float64)
    expected = abs(x[0, INCOME] - x[3, INCOME]) / x[:, INCOME].std()
    assert income["std_difference"].iloc[0] == pytest.approx(expected, rel=1e-6)
    assert data.x[:, INCOME].abs().max() < 2  # the graph itself still holds z-scores


def test_pair_values_are_the_model_inputs_without_a_record():
    data, _ = _toy(scaled=False)
    _, feats = pair_comparison(data, _pairs([0], [3]), np.zeros(5, dtype=int))
    assert feats.attrs["units"] == MODEL_UNITS
    income = feats[feats["feature"] == "income"]
    x = data.x.numpy()
    assert income["value_u"].iloc[0] == pytest.approx(float(x[0, INCOME]))
    assert abs(income["value_u"].iloc[0]) < 2


def test_recorded_inverse_and_to_raw_units():
    data, raw = _toy()
    mean, scale = recorded_inverse(data, 2)
    assert mean.tolist() == [0.0, 29_490.0] and scale.tolist() == [1.0, 10_543.0]
    back = to_raw_units(data.x.numpy(), mean, scale)
    assert np.array_equal(back, raw)  # rounded to 1e-6 of the column's magnitude: exact here
    bad = copy.copy(data)
    bad.feature_mean = [0.0]  # a record that does not fit the inputs is ignored
    assert recorded_inverse(bad, 2) is None
    bad.feature_mean, bad.feature_scale = [0.0, 1.0], [1.0, 0.0]
    with pytest.raises(InvalidInputError, match="feature_scale must be positive"):
        recorded_inverse(bad, 2)
    bad.feature_scale = [1.0, float("nan")]
    with pytest.raises(InvalidInputError, match="NaN"):
        recorded_inverse(bad, 2)


class Recorder(nn.Module):
    """A node classifier that keeps the inputs it was called with: class 1 when the
    standardized income is positive, plus a tiny graph term so ties break."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        self.seen.append(x.detach().clone())
        score = x[:, INCOME] - 0.05
        return torch.stack([-score, score], dim=1)


@pytest.fixture(scope="module")
def income_graph():
    """60 nodes on a ring with income ~ N(30,000, 8,000), a 0/1 group and a label; the income
    standardized by a scaler that the graph records."""
    rng = np.random.default_rng(3)
    n = 60
    income = rng.normal(30_000, 8_000, n).round()
    group = rng.integers(0, 2, n).astype(np.float64)
    raw = np.column_stack([group, income])
    ring = np.arange(n)
    edges = np.r_[np.c_[ring, (ring + 1) % n], np.c_[(ring + 1) % n, ring]].T
    data = Data(
        x=torch.tensor(raw, dtype=torch.float32),
        edge_index=torch.tensor(edges, dtype=torch.long),
        y=torch.tensor((income > 30_000).astype(np.int64)),
        feature_names=["group", "income"],
    )
    scaler = Standardizer(np.array([income.mean()]), np.array([income.std()]), ("income",))
    return scaler.apply(data), raw


def _pairs_section(report):
    return report.section(EvidencePairsUnit.name)


def test_pipeline_shows_raw_pairs_while_the_model_sees_z_scores(income_graph):
    data, raw = income_graph
    model = Recorder()
    report = run_audit(model, data, "group", units=[EvidencePairsUnit(top=5)], progress=False)
    seen = torch.cat(model.seen)[:, INCOME]
    assert seen.abs().max() < 5 and abs(float(seen.mean())) < 0.2  # z-scores, never raw
    section = _pairs_section(report)
    assert "in the table's own units" in section.summary
    assert section.data["units"] == ORIGINAL_UNITS
    feats = section.tables["pair_features"]
    pairs = section.tables["pairs"]
    income = feats[feats["feature"] == "income"]
    assert len(income) > 0
    for row in income.itertuples():
        pair = pairs[pairs["rank"] == row.rank].iloc[0]
        assert row.value_u == raw[int(pair["node_u"]), INCOME]
        assert row.value_v == raw[int(pair["node_v"]), INCOME]
    markdown = render_markdown(report)
    shown = f"| {int(income['value_u'].iloc[0])} |"
    assert shown in markdown and "e+04" not in markdown


def test_pipeline_without_a_scaler_shows_the_inputs_as_given(income_graph):
    data, _ = income_graph
    plain = copy.copy(data)
    del plain.feature_mean, plain.feature_scale  # a user's model on their own features
    report = run_audit(Recorder(), plain, "group", units=[EvidencePairsUnit(top=3)])
    section = _pairs_section(report)
    assert "the model's inputs as given" in section.summary
    assert section.data["units"] == MODEL_UNITS
    feats = section.tables["pair_features"]
    assert feats.loc[feats["feature"] == "income", "value_u"].abs().max() < 5


# ------------------------------------------------------------------------------- the CLI
@pytest.fixture(scope="module")
def people(tmp_path_factory):
    """A user's two tables: text ids, a text gender, an age and an income around 30,000."""
    folder = tmp_path_factory.mktemp("raw_units")
    frame = write_people(folder, city=False)
    return folder, frame.set_index("person")


def _tables(folder) -> list[str]:
    return [*table_args(folder), "--no-finetune", "--no-progress"]


@pytest.fixture(scope="module")
def trained_audit(people, tmp_path_factory):
    folder, _ = people
    out = tmp_path_factory.mktemp("audit") / "o"
    assert main(["audit", *_tables(folder), "--epochs", "30", "--out", str(out)]) == 0
    return out


def _json_pairs(out):
    report = json.loads((out / "report.json").read_text())
    section = next(s for s in report["sections"] if s["key"] == EvidencePairsUnit.name)
    frames = {
        name: pd.DataFrame(t["data"], columns=t["columns"]) for name, t in section["tables"].items()
    }
    return report, section, frames["pairs"], frames["pair_features"]


def _check_raw(out, frame):
    """The pairs' Age and Income in report.json and report.md are the table's own values."""
    report, section, pairs, feats = _json_pairs(out)
    assert "in the table's own units" in section["summary"]
    shown = feats[feats["feature"].isin(["Age", "Income"])]
    assert len(shown) > 0 and (shown["feature"] == "Income").any()
    markdown = (out / "report.md").read_text()
    table = markdown.split("**pair_features**")[1].split("\n\n")[1]
    for row in shown.itertuples():
        pair = pairs[pairs["rank"] == row.rank].iloc[0]
        assert row.value_u == frame.loc[pair["node_u"], row.feature]
        assert row.value_v == frame.loc[pair["node_v"], row.feature]
        line = f"| {row.rank} | {row.feature} | {int(row.value_u)} | {int(row.value_v)} |"
        assert line in table
    assert shown.loc[shown["feature"] == "Income", "value_u"].min() > 1_000  # not z-scores
    return report, pairs


def test_cli_trained_model_report_shows_raw_pairs(trained_audit, people):
    report, pairs = _check_raw(trained_audit, people[1])
    assert report["model"]["standardize"].startswith("z-scores")  # what the model was fed


def test_cli_trained_model_still_sees_standardized_inputs(trained_audit, people):
    """The report's predicted classes are those of the checkpoint on the z-scored table (the
    stored scaler applied), not on the raw values."""
    from gnnaudit.cli._scaling import checkpoint_scaler
    from gnnaudit.datasets import read_graph
    from gnnaudit.safe_io import safe_torch_load
    from gnnaudit.training import load_node_classifier

    folder, _ = people
    _, _, pairs, _ = _json_pairs(trained_audit)
    raw = read_graph(
        folder / "people.csv",
        folder / "links.csv",
        id_column="person",
        label="Defaulted",
        sensitive="Gender",
    )
    ckpt_path = trained_audit / "model.ckpt"
    scaled = checkpoint_scaler(safe_torch_load(ckpt_path, name="ckpt"), "ckpt").apply(raw)
    module = load_node_classifier(ckpt_path).eval()
    with torch.no_grad():
        pred = module(scaled.x, scaled.edge_index).argmax(dim=1).numpy()
    position = {str(node): i for i, node in enumerate(raw.node_ids)}
    for column in ("u", "v"):
        nodes = [position[str(node)] for node in pairs[f"node_{column}"]]
        assert pred[nodes].tolist() == pairs[f"pred_{column}"].tolist()
    assert float(scaled.x[:, list(raw.feature_names).index("Income")].abs().max()) < 10


def test_cli_checkpoint_audit_of_the_raw_table_shows_raw_pairs(trained_audit, people, tmp_path):
    """``--checkpoint model.ckpt`` on the raw table: the stored scaler makes the inputs and
    the report undoes it."""
    folder, frame = people
    out = tmp_path / "again"
    ckpt = str(trained_audit / "model.ckpt")
    assert main(["audit", *_tables(folder), "--checkpoint", ckpt, "--out", str(out)]) == 0
    report, _ = _check_raw(out, frame)
    assert "scaler stored in --checkpoint" in report["model"]["standardize"]


# ------------------------------------------------------------------------- embedding audit
class GenderSplit(nn.Module):
    """Hidden layer: gender on one axis, income and age on two others (as in
    tests/test_embedding_audit.py), so the embedding has gender-pure clusters."""

    def __init__(self, in_channels: int, gender: int) -> None:
        super().__init__()
        self.hidden = nn.Linear(in_channels, 3)
        self.out = nn.Linear(3, 2)
        with torch.no_grad():
            self.hidden.weight.zero_()
            self.hidden.bias.zero_()
            self.hidden.weight[0, gender] = 1.0
            self.hidden.weight[1, 1] = 1.0
            self.hidden.weight[2, 0] = 1.0
            self.hidden.bias[1:] = 3.0
            self.out.weight.copy_(torch.tensor([[1.0, 0.2, 0.0], [-1.0, -0.2, 0.0]]))
            self.out.bias.zero_()

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(x)))


def test_embedding_counterparts_and_tree_rules_in_raw_units():
    """Same model inputs with and without the scaler's record: the same clusters, tree and
    counterparts; with the record the counterpart values and the tree's thresholds are the
    raw ones (``raw = t * scale + mean``), the 'differs' marks unchanged."""
    credit = synthetic_credit_graph(num_nodes=300, bias=3.0, seed=0)
    names = list(credit.feature_names[:6])  # the continuous columns (z-scores here)
    mean = np.array([45.0, 30_000.0, 0.3, 10.0, 12_000.0, 1.0])
    scale = np.array([12.0, 8_000.0, 0.1, 5.0, 4_000.0, 1.5])
    raw = copy.copy(credit)
    raw.x = credit.x.clone()
    raw.x[:, :6] = credit.x[:, :6] * torch.tensor(scale).float() + torch.tensor(mean).float()
    scaled = Standardizer(mean, scale, tuple(names)).apply(raw)
    plain = copy.copy(scaled)
    del plain.feature_mean, plain.feature_scale
    model = GenderSplit(credit.x.size(1), credit.sensitive_index)
    fits = []
    for data in (scaled, plain):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.append(
                EmbeddingAudit(tree_time_limit=10.0).fit(
                    model, data, mask=torch.ones(300, dtype=torch.bool), explain=5
                )
            )
    shown, given = fits
    assert given.feature_units_ is None and shown.feature_units_ is not None
    a, b = shown.counterpart_features_, given.counterpart_features_
    assert a["differs"].tolist() == b["differs"].tolist() and len(a) > 0
    cols = np.tile(np.arange(credit.x.size(1)), len(a) // credit.x.size(1))
    x_raw = raw.x.numpy().astype(np.float64)
    query, other = a["query_node"].to_numpy(), a["counterpart_node"].to_numpy()
    np.testing.assert_allclose(a["query_value"], x_raw[query, cols], rtol=1e-5)
    np.testing.assert_allclose(a["counterpart_value"], x_raw[other, cols], rtol=1e-5)
    np.testing.assert_allclose(b["query_value"], scaled.x.numpy()[query, cols])
    # the same tree, its thresholds mapped back column by column
    assert shown.tree_ is not None and given.tree_ is not None
    rows_a, rows_b = shown.tree_rules_.splitlines(), given.tree_rules_.splitlines()
    assert len(rows_a) == len(rows_b) and rows_a != rows_b
    checked = 0
    for line_a, line_b in zip(rows_a, rows_b, strict=True):
        if "cluster" in line_a:
            assert line_a == line_b
            continue
        name, _, value_b = line_b.rpartition(" ")
        value_a = float(line_a.rpartition(" ")[2])
        feature = name.split("--- ")[1].split(" ")[0]
        if feature in names:
            j = names.index(feature)
            assert value_a == pytest.approx(
                float(value_b) * scale[j] + mean[j], abs=0.01 * scale[j]
            )
            checked += 1
        else:
            assert line_a == line_b
    assert checked > 0
