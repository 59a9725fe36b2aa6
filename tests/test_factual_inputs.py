"""Hidden inputs kept from the audit's factual pass (``AuditUnit.factual_inputs``): the proxy
probe reads its layer's input there instead of running a pass of its own, with the same
numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnaudit.audit.context import AuditContext, AuditOptions
from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.proxies import ProxyUnit
from gnnaudit.audit.unit import run_units
from gnnaudit.datasets import synthetic_credit_graph


class TwoLayer(torch.nn.Module):
    """A seeded two-layer perceptron over each node's own features."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.hidden = torch.nn.Linear(11, 6)
        self.out = torch.nn.Linear(6, 2)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(x)))


@pytest.fixture(scope="module")
def graph():
    return synthetic_credit_graph(num_nodes=300, bias=1.5, seed=2)


def _probe(ctx: AuditContext, unit: ProxyUnit) -> tuple[float, int]:
    """The probe's balanced accuracy and the model calls of the unit's run alone."""
    calls = ctx.adapter.calls
    result = unit.run(ctx)
    return result.probe_accuracy, ctx.adapter.calls - calls


def test_the_probe_reads_the_factual_pass_and_gets_the_same_value(graph):
    unit = ProxyUnit(top=1, num_hops=0)
    kept = AuditContext(TwoLayer(), graph, options=AuditOptions(n_boot=50))
    for layer, rows in unit.factual_inputs(kept):
        kept.keep_factual_input(layer, rows)
    _ = kept.logits
    own = AuditContext(TwoLayer(), graph, options=AuditOptions(n_boot=50))
    _ = own.logits  # the factual pass without the request: the probe runs its own
    value_kept, calls_kept = _probe(kept, unit)
    value_own, calls_own = _probe(own, unit)
    assert np.isfinite(value_kept) and value_kept == value_own
    assert calls_own - calls_kept == 1  # the probe's own pass, spared
    layer = unit.factual_inputs(kept)[0][0]
    assert layer is kept.adapter.model.out  # the last layer with weights of its own
    seen, rows = kept.factual_input(layer)
    hidden = torch.relu(kept.adapter.model.hidden(graph.x)).detach()
    assert seen
    np.testing.assert_array_equal(rows.numpy(), hidden.numpy())


def test_a_request_after_the_factual_pass_is_ignored(graph):
    ctx = AuditContext(TwoLayer(), graph)
    _ = ctx.logits
    ctx.keep_factual_input(ctx.adapter.model.out, np.arange(5))
    assert ctx.factual_input(ctx.adapter.model.out) == (False, None)


def test_run_units_asks_before_the_factual_pass(graph):
    ctx = AuditContext(TwoLayer(), graph, options=AuditOptions(n_boot=50))
    outcome = run_units(ctx, [ProxyUnit(top=1, num_hops=0)])
    assert outcome.work["proxies"]["model_calls"] == 0
    assert np.isfinite(outcome.results["proxies"].probe_accuracy)


def test_the_default_audit_of_a_layered_model_runs_no_probe_pass(graph):
    report = run_audit(TwoLayer(), graph, n_boot=50, k=3, progress=False)
    assert report.run_info["model_calls"]["proxies"] == 0
    assert np.isfinite(report.section("proxies").data["probe_accuracy"])
