"""num_hops (the evidence search's KS radius) is not the model's receptive field (model_hops):
given alone for a model whose receptive field cannot be inferred it is refused, naming
model_hops, instead of silently dropping the node-scope flip test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv

from gnnaudit.audit import AuditContext, AuditOptions, SensitivityUnit
from gnnaudit.audit.pipeline import audit_model, run_audit
from gnnaudit.audit.sensitivity.unit import receptive_field_unknown
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError

GENDER = 10  # column of gender in synthetic_credit_graph
FAST = {"n_boot": 30, "k": 5, "proxies": False, "ks": (5,), "progress": False}


@pytest.fixture(scope="module")
def data() -> Data:
    return synthetic_credit_graph(num_nodes=200, bias=2.0, seed=3)


class MyNet(torch.nn.Module):
    """A plain module that mixes one hop of neighbours by hand (no MessagePassing layer)."""

    def __init__(self, in_dim: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(in_dim, 2)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        mixed = h.index_add(0, edge_index[1], h[edge_index[0]])
        gender = 4.0 * x[:, GENDER] - 2.0
        return 0.1 * mixed + torch.stack([torch.zeros_like(gender), gender], dim=1)


class TinyGCN(torch.nn.Module):
    def __init__(self, in_dim: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = GCNConv(in_dim, 2)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        gender = 4.0 * x[:, GENDER] - 2.0
        return 0.1 * self.conv(x, edge_index) + torch.stack(
            [torch.zeros_like(gender), gender], dim=1
        )


def _scopes(report) -> set[str]:
    return set(report.section("sensitivity").tables["flip_by_group"]["scope"])


def test_num_hops_alone_with_a_plain_module_is_refused_naming_model_hops(data):
    with pytest.raises(InvalidInputError) as err:
        run_audit(MyNet(data.x.size(1)), data, "gender", num_hops=1, **FAST)
    message = str(err.value)
    assert "num_hops=1" in message
    assert "KS radius" in message
    assert "model_hops=L" in message
    assert "MyNet has no torch_geometric MessagePassing submodule" in message
    with pytest.raises(InvalidInputError, match="model_hops"):  # audit_model too
        audit_model(MyNet(data.x.size(1)), data, "gender", num_hops=1, **FAST)


def test_num_hops_alone_with_a_predict_fn_is_refused(data):
    net = MyNet(data.x.size(1))
    with pytest.raises(InvalidInputError, match="a predict_fn was given.*model_hops=L"):
        run_audit(net, data, "gender", num_hops=2, predict_fn=net, **FAST)


def test_model_hops_runs_the_node_scope(data):
    net = MyNet(data.x.size(1))
    report = run_audit(net, data, "gender", num_hops=1, model_hops=1, **FAST)
    assert _scopes(report) == {"node", "graph"}
    assert report.section("sensitivity").data["skipped_scopes"] == {}
    assert report.config["num_hops"] == 1
    report = run_audit(net, data, "gender", model_hops=1, **FAST)  # without num_hops
    assert _scopes(report) == {"node", "graph"}


def test_num_hops_with_an_inferable_gcn_runs_the_node_scope(data):
    report = run_audit(TinyGCN(data.x.size(1)), data, "gender", num_hops=1, **FAST)
    assert _scopes(report) == {"node", "graph"}
    assert report.finding("counterfactual flip (node scope)", "gender")["flagged"]
    assert report.section("sensitivity").data["skipped_scopes"] == {}


def test_explicit_units_are_not_refused(data):
    """With units= the user configured the sensitivity unit: num_hops is only the KS radius."""
    units = [SensitivityUnit(rank=False)]
    report = run_audit(MyNet(data.x.size(1)), data, "gender", units=units, num_hops=1, n_boot=30)
    assert _scopes(report) == {"graph"}
    skipped = report.section("sensitivity").data["skipped_scopes"]
    assert "SensitivityUnit(num_hops=L)" in skipped["node"]


def test_the_audits_skip_note_names_model_hops(data):
    report = run_audit(MyNet(data.x.size(1)), data, "gender", **FAST)  # no num_hops: no refusal
    section = report.section("sensitivity")
    assert _scopes(report) == {"graph"}
    note = section.data["skipped_scopes"]["node"]
    assert note.startswith("Node scope skipped: the model's receptive field cannot be inferred")
    assert "MyNet has no torch_geometric MessagePassing submodule" in note
    assert "pass model_hops=L" in note
    assert "num_hops" not in note
    assert note in section.notes


def test_the_unit_records_skipped_scopes(data):
    net = MyNet(data.x.size(1))
    ctx = AuditContext(net, data, options=AuditOptions(n_boot=30, progress=False))
    result = SensitivityUnit(rank=False).run(ctx)
    assert set(result.flips) == {"graph"}
    assert set(result.skipped) == {"node"}
    assert "SensitivityUnit(num_hops=L)" in result.skipped["node"]
    assert result.report_section().data["skipped_scopes"] == result.skipped
    audit_unit = SensitivityUnit(rank=False, hops_option="model_hops").run(ctx)
    assert "model_hops=L" in audit_unit.skipped["node"]
    graph_only = SensitivityUnit(scopes=("node",), rank=False).run(ctx)  # every scope skipped
    section = graph_only.report_section()
    assert section.status == "skipped"
    assert section.data["skipped_scopes"] == graph_only.skipped
    done = SensitivityUnit(num_hops=1, rank=False).run(ctx)
    assert done.skipped == {} and set(done.flips) == {"node", "graph"}
    with pytest.raises(InvalidInputError, match="hops_option"):
        SensitivityUnit(hops_option="hops")


def test_receptive_field_unknown(data):
    assert receptive_field_unknown(TinyGCN(3)) is None
    assert receptive_field_unknown(MyNet(3)) == (
        "MyNet has no torch_geometric MessagePassing submodule"
    )
    assert receptive_field_unknown(TinyGCN(3), predict_fn=np.sum) == "a predict_fn was given"
    ctx = AuditContext(TinyGCN(data.x.size(1)), data, options=AuditOptions(progress=False))
    assert receptive_field_unknown(ctx.adapter) is None
