"""Nodes whose sensitive value is unknown (``data.sensitive_mask`` false, stored as group 0 by
the FairGNN loaders) are in none of the audit's group figures: the group gaps, the flip tests
of the attribute and the before / after table are computed on the audited nodes of known group
(oracles in numpy), the report says how many were left out, and the evidence pairs shown first
for differing in the attribute are pairs of known groups."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from gnnaudit.audit import EmbeddingAudit, GroupFairnessUnit, SensitivityUnit
from gnnaudit.audit.fairness.evidence_pairs import sensitive_first
from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.search.results import GlobalEvidence
from gnnaudit.audit.sensitive import known_group_nodes
from gnnaudit.datasets import read_graph, synthetic_credit_graph
from gnnaudit.errors import InvalidInputError
from gnnaudit.training.before_after import mitigation_metrics

GENDER = 10  # column of gender in synthetic_credit_graph


class Linear(torch.nn.Module):
    """A per-node linear scorer (no message passing): logits = [0, x @ w]."""

    def __init__(self, weights: np.ndarray) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.as_tensor(weights, dtype=torch.float32))

    def forward(self, x, edge_index):
        score = x @ self.w
        return torch.stack([torch.zeros_like(score), score], dim=1)


@pytest.fixture(scope="module")
def graph():
    data = synthetic_credit_graph(num_nodes=400, bias=2.0, seed=7)
    data.sensitive_mask = torch.ones(400, dtype=torch.bool)
    data.sensitive_mask[np.arange(0, 400, 3)] = False  # 134 nodes of unknown gender
    weights = np.zeros(data.x.size(1))
    weights[GENDER], weights[0] = 1.0, 0.5
    return data, Linear(weights)


def _decisions(model, x: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return model(x, None).argmax(dim=1).numpy()


def _gaps(data, pred: np.ndarray, nodes: np.ndarray) -> tuple[float, float]:
    s = data.x[:, GENDER].numpy()[nodes].astype(int)
    y, p = data.y.numpy()[nodes], pred[nodes]
    spd = p[s == 0].mean() - p[s == 1].mean()
    eod = p[(s == 0) & (y == 1)].mean() - p[(s == 1) & (y == 1)].mean()
    return abs(float(spd)), abs(float(eod))


def _flip_rate(model, data, nodes: np.ndarray) -> float:
    flipped = data.x.clone()
    flipped[:, GENDER] = 1.0 - flipped[:, GENDER]
    return float((_decisions(model, data.x) != _decisions(model, flipped))[nodes].mean())


def test_group_figures_leave_out_the_nodes_of_unknown_group(graph):
    data, model = graph
    audited = np.arange(400)
    known = audited[data.sensitive_mask.numpy()]
    assert known_group_nodes(data, audited, ["gender"]).tolist() == known.tolist()
    assert known_group_nodes(data, audited, ["age"]).size == 400  # not the marked attribute
    units = [GroupFairnessUnit(), SensitivityUnit(num_hops=0)]
    report = run_audit(model, data, "gender", mask=audited, units=units, n_boot=50, progress=False)
    pred = _decisions(model, data.x)
    fair = report.section("group_fairness").data
    spd, eod = _gaps(data, pred, known)
    assert abs(fair["statistical_parity_difference"]) == pytest.approx(spd)
    assert abs(fair["equal_opportunity_difference"]) == pytest.approx(eod)
    assert report.section("sensitivity").data["flip_rate_graph"] == pytest.approx(
        _flip_rate(model, data, known)
    )
    # counting the unknown nodes as group 0 gives other figures: the test can fail
    assert _gaps(data, pred, audited)[0] != pytest.approx(spd)
    assert _flip_rate(model, data, audited) != pytest.approx(_flip_rate(model, data, known))
    note = "134 of the 400 audited nodes have an unknown value of 'gender'"
    assert any(note in n and "on the 266 others" in n for n in report.run_info["notes"])


def test_an_audit_of_only_unknown_nodes_is_refused(graph):
    data, model = graph
    with pytest.raises(InvalidInputError, match="no known value"):
        run_audit(
            model, data, "gender", mask=np.arange(0, 400, 3), units=[GroupFairnessUnit()],
            n_boot=50, progress=False,
        )  # fmt: skip


def test_the_before_after_table_leaves_out_the_nodes_of_unknown_group(graph):
    data, model = graph
    nodes = np.arange(0, 400, 2)
    known = nodes[data.sensitive_mask.numpy()[nodes]]
    table = mitigation_metrics(model, data, "gender", nodes=nodes, n_boot=50, num_hops=0)
    value = table.set_index("metric")["value"]
    spd, eod = _gaps(data, _decisions(model, data.x), known)
    assert abs(value["statistical parity difference"]) == pytest.approx(spd)
    assert abs(value["equal opportunity difference"]) == pytest.approx(eod)
    rates = table[table["metric"] == "flip rate"]["value"]
    assert rates.to_numpy() == pytest.approx([_flip_rate(model, data, known)] * 2)
    with pytest.raises(InvalidInputError, match="unknown value of 'gender'"):
        mitigation_metrics(model, data, "gender", nodes=np.arange(0, 400, 3), num_hops=0)


def test_pairs_with_a_node_of_unknown_group_do_not_lead_as_differing():
    """``sensitive_first`` puts the pairs whose nodes differ in the attribute first; a pair
    with a node of unknown group (stored as 0) is not one of them."""
    sensitive = np.array([0, 1, 0, 1, 0])
    known = np.array([True, True, True, True, False])
    pairs = GlobalEvidence(
        np.array([0, 2, 3, 1]),
        np.array([4, 3, 4, 2]),
        np.array([0.9, 0.8, 0.7, 0.6]),
        np.zeros(4, dtype=np.int64),
        np.ones(4, dtype=np.int64),
    )
    # as stored, (3, 4) differs (1 vs the placeholder 0); knowing node 4 is unknown, it does not
    assert sensitive_first(pairs, sensitive).node_u.tolist() == [2, 3, 1, 0]
    assert sensitive_first(pairs, sensitive, known).node_u.tolist() == [2, 1, 0, 3]


def _own_table(blank_every: int = 4):
    """A user's node table whose gender is blank for every ``blank_every``-th node."""
    rng = np.random.default_rng(3)
    n = 120
    gender = np.where(rng.random(n) < 0.4, "F", "M").astype(object)
    gender[::blank_every] = None
    age = rng.normal(40, 10, n).round(1)
    nodes = pd.DataFrame({"id": [f"u{i}" for i in range(n)], "age": age, "gender": gender})
    nodes["y"] = (age > 40).astype(int)
    edges = pd.DataFrame(
        {"source": nodes["id"][:-1].to_numpy(), "target": nodes["id"][1:].to_numpy()}
    )
    return nodes, edges


def test_blank_cells_of_an_ignored_sensitive_column_are_nodes_of_unknown_group():
    nodes, edges = _own_table()
    data = read_graph(nodes, edges, sensitive="gender", ignore=["gender"])
    blank = nodes["gender"].isna().to_numpy()
    assert data.sensitive_mask.numpy().tolist() == (~blank).tolist()
    assert data.sensitive_values == ["F", "M"]
    codes = data.sensitive.numpy()
    assert (codes[blank] == 0).all()  # stored as group 0, marked unknown
    assert (codes[~blank] == (nodes["gender"][~blank] == "M").to_numpy()).all()
    assert "gender" not in data.feature_names

    # the audit's group figures leave them out (oracle: the gap over the known nodes; the
    # table has no split, so every node is audited)
    def by_age(x, edge_index):
        score = x[:, 0] - 40.0
        return torch.stack([torch.zeros_like(score), score], dim=1)

    report = run_audit(by_age, data, units=[GroupFairnessUnit()], n_boot=50, progress=False)
    pred = (data.x[:, 0].numpy() > 40.0).astype(int)
    assert 0 < pred.mean() < 1

    def gap(nodes):
        return abs(pred[nodes][codes[nodes] == 0].mean() - pred[nodes][codes[nodes] == 1].mean())

    spd = report.section("group_fairness").data["statistical_parity_difference"]
    assert abs(spd) == pytest.approx(gap(np.flatnonzero(~blank)))
    assert gap(np.arange(data.num_nodes)) != pytest.approx(abs(spd))  # the test can fail
    assert any("unknown value of 'gender'" in n for n in report.run_info["notes"])
    # the data's own attribute passed as a vector is that attribute: its unknown values too
    given = run_audit(
        by_age, data, data.sensitive, units=[GroupFairnessUnit()], n_boot=50, progress=False
    )
    assert given.section("group_fairness").data["statistical_parity_difference"] == spd
    assert any("unknown value of 'gender'" in n for n in given.run_info["notes"])


def test_blank_cells_of_a_sensitive_input_column_are_refused_with_the_way_out():
    nodes, edges = _own_table()
    with pytest.raises(InvalidInputError, match=r"model input.*ignore=\['gender'\]"):
        read_graph(nodes, edges, sensitive="gender")
    nodes["gender"] = None
    with pytest.raises(InvalidInputError, match="blank in every row"):
        read_graph(nodes, edges, sensitive="gender", ignore=["gender"])
    complete, _ = _own_table(blank_every=10**6)  # no blank but the first row
    complete.loc[0, "gender"] = "F"
    assert not hasattr(read_graph(complete, edges, sensitive="gender"), "sensitive_mask")


class TwoLayer(torch.nn.Module):
    """A message-passing-free two-layer scorer: its hidden layer is the embedding audited."""

    def __init__(self, d: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.hidden, self.out = torch.nn.Linear(d, 3), torch.nn.Linear(3, 2)

    def forward(self, x, edge_index):
        return self.out(torch.relu(self.hidden(x)))


def test_the_embedding_audit_leaves_out_the_nodes_of_unknown_group(graph):
    """Fitted on its own with the data's attribute, the embedding audit keeps only the nodes of
    known group (through the audit, the context's ``group_nodes`` are its mask)."""
    data, _ = graph
    audit = EmbeddingAudit(tree_time_limit=2.0, layer="hidden").fit(
        TwoLayer(data.x.size(1)), data, mask=torch.ones(data.num_nodes, dtype=torch.bool)
    )
    assert audit.nodes_.tolist() == np.flatnonzero(data.sensitive_mask.numpy()).tolist()
