"""A sensitive vector equal to a column of x up to a relabelling of its values (text, pandas
categorical, bool, relabelled numbers) is audited as that column, keeping the user's labels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv

import gnnaudit.audit.sensitive as sensitive_module
from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.sensitive import resolve_attributes
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError

GENDER = 10  # column of gender (coded 0/1) in synthetic_credit_graph


@pytest.fixture(scope="module")
def data() -> Data:
    return synthetic_credit_graph(num_nodes=300, bias=2.0, seed=5)


def _gender(data: Data) -> np.ndarray:
    return data.x[:, GENDER].long().numpy()


def _text(data: Data) -> np.ndarray:
    """F where gender is 1, M where it is 0."""
    return np.array(["M", "F"])[_gender(data)]


@pytest.mark.parametrize(
    ("make", "pairs"),
    [
        (_text, "(F = 1, M = 0)"),
        (lambda d: pd.Categorical(_text(d)), "(F = 1, M = 0)"),
        (lambda d: pd.Series(_text(d), dtype="category"), "(F = 1, M = 0)"),
        (lambda d: _text(d).astype(object), "(F = 1, M = 0)"),
        (lambda d: _gender(d) == 0, "(False = 1, True = 0)"),
        (lambda d: _gender(d) + 1, "(1 = 0, 2 = 1)"),
        (lambda d: 1 - _gender(d), "(0 = 1, 1 = 0)"),
        (lambda d: np.array(["no", "yes"])[_gender(d)], "(no = 0, yes = 1)"),
    ],
    ids=["text", "categorical", "series", "object", "bool", "one-two", "swapped", "yes-no"],
)
def test_a_relabelled_vector_is_the_column(data, make, pairs):
    given = make(data)
    (attr,) = resolve_attributes(data, given)
    assert attr.column == GENDER
    assert attr.name == "gender"
    assert attr.note is not None
    assert "equals column 10 (gender) of x up to a relabelling of its values" in attr.note
    assert pairs in attr.note
    assert "counterfactual flip tests run" in attr.note
    # the user's labels stay the groups (bools as 0/1, as before)
    expected = np.asarray(given)
    expected = expected.astype(np.int64) if expected.dtype == bool else expected
    assert list(attr.values) == list(expected.astype(attr.values.dtype))


def test_the_groups_keep_the_text_labels(data):
    (attr,) = resolve_attributes(data, _text(data))
    assert sorted(np.unique(attr.values)) == ["F", "M"]


def test_an_exactly_equal_vector_keeps_the_plain_note(data):
    for given in (data.x[:, GENDER], _gender(data), _gender(data).astype(bool)):
        (attr,) = resolve_attributes(data, given)
        assert attr.column == GENDER
        assert "relabelling" not in attr.note
        assert attr.note.startswith("The sensitive vector equals column 10 (gender) of x;")


def test_an_exact_column_is_preferred_over_an_earlier_relabelled_one():
    rng = np.random.default_rng(0)
    g = rng.integers(0, 2, size=50)
    x = torch.as_tensor(np.stack([1 - g, rng.normal(size=50), g], axis=1), dtype=torch.float32)
    graph = Data(x=x, edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=50)
    (attr,) = resolve_attributes(graph, g)
    assert attr.column == 2 and "relabelling" not in attr.note
    (attr,) = resolve_attributes(graph, np.array(["a", "b"])[g])
    assert attr.column == 0  # text is never equal as numbers: the first matching column


def test_a_vector_differing_on_one_node_is_not_a_model_input(data):
    for node in (0, 150, data.num_nodes - 1):  # first, a probed-or-not middle one, last
        text = _text(data).copy()
        text[node] = "M" if text[node] == "F" else "F"
        (attr,) = resolve_attributes(data, text)
        assert attr.column is None
        assert attr.name == "sensitive"
        assert attr.note is None


def test_a_three_valued_categorical_column(data):
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 3, size=data.num_nodes)
    x = torch.cat([data.x, torch.as_tensor(codes, dtype=torch.float32)[:, None] * 2.0], dim=1)
    graph = Data(
        x=x,
        edge_index=data.edge_index,
        feature_names=[*data.feature_names, "region"],
        num_nodes=data.num_nodes,
    )
    region = pd.Categorical(np.array(["north", "south", "west"])[codes])
    (attr,) = resolve_attributes(graph, region)
    assert attr.column == 11 and attr.name == "region"
    assert "(north = 0, south = 2, west = 4)" in attr.note
    assert sorted(np.unique(attr.values)) == ["north", "south", "west"]
    # two labels on one value is not one-to-one: no match
    merged = np.array(["north", "south", "south"])[codes]
    assert resolve_attributes(graph, merged)[0].column is None


def test_matching_in_small_column_blocks_gives_the_same_column(data, monkeypatch):
    monkeypatch.setattr(sensitive_module, "_MATCH_CELLS", 500)  # one column per block
    (attr,) = resolve_attributes(data, _text(data))
    assert attr.column == GENDER
    (attr,) = resolve_attributes(data, _gender(data) + 1)
    assert attr.column == GENDER


def test_missing_values_are_refused(data):
    text = _text(data).astype(object)
    text[4] = None
    with pytest.raises(InvalidInputError, match="missing values"):
        resolve_attributes(data, text)
    with pytest.raises(InvalidInputError, match="missing values"):
        resolve_attributes(data, pd.Categorical(text))
    numbers = _gender(data).astype(float)
    numbers[4] = np.nan
    with pytest.raises(InvalidInputError, match="NaN"):
        resolve_attributes(data, numbers)


def test_many_text_labels_are_not_matched_to_a_continuous_column():
    x = torch.arange(40, dtype=torch.float32)[:, None]
    graph = Data(x=x, edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=40)
    labels = np.array([f"id{i}" for i in range(40)])
    assert resolve_attributes(graph, labels)[0].column is None


class TinyGCN(torch.nn.Module):
    """One GCN layer plus a direct read of gender: its decisions depend on gender."""

    def __init__(self, in_dim: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = GCNConv(in_dim, 2)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        out = 0.1 * self.conv(x, edge_index)
        gender = 4.0 * x[:, GENDER] - 2.0
        return out + torch.stack([torch.zeros_like(gender), gender], dim=1)


def test_run_audit_with_a_text_vector_equal_to_an_input_column(data):
    model = TinyGCN(data.x.size(1))
    report = run_audit(
        model,
        data,
        sensitive_features=_text(data),
        n_boot=50,
        k=5,
        proxies=False,
        ks=(5,),
        progress=False,
    )
    assert "is not a model input" not in report.verdict
    assert "a direct test of its use was impossible" not in report.verdict
    section = report.section("sensitivity")
    assert section.status != "skipped"
    assert section.data["feature"] == "gender"
    assert {"flip_rate_node", "flip_rate_graph"} <= set(section.data)
    flips = section.tables["flip_by_group"]
    assert set(flips["scope"]) == {"node", "graph"}
    assert {"F", "M"} <= set(flips["group"].astype(str))
    node = report.finding("counterfactual flip (node scope)", "gender")
    assert node["flagged"]
    assert any("up to a relabelling" in n for n in report.run_info["notes"])
    groups = report.table("group_fairness", "groups")
    assert sorted(groups["group"]) == ["F", "M"]
