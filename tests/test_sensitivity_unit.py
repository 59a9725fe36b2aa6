"""The sensitivity and evidence-contrast audit units: oracles, flags, skips and the verdict."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnaudit.audit import (
    AuditContext,
    AuditOptions,
    EvidenceContrastUnit,
    SensitivityUnit,
    counterfactual_flip,
    evidence_contrast,
    feature_sensitivity,
    run_units,
)
from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.report.thresholds import MIN_FLIP_EFFECT, NEGLIGIBLE_FLIP, flip_flagged
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError

GENDER = 10  # column of gender in synthetic_credit_graph


class Linear(torch.nn.Module):
    """A per-node linear scorer (no message passing): logits = [0, x @ w + b]."""

    def __init__(self, weights: np.ndarray, bias: float = 0.0) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.as_tensor(weights, dtype=torch.float32))
        self.b = bias

    def forward(self, x, edge_index):
        score = x @ self.w + self.b
        return torch.stack([torch.zeros_like(score), score], dim=1)


@pytest.fixture(scope="module")
def data():
    return synthetic_credit_graph(num_nodes=300, bias=3.0, seed=1)


def _weights(gender: float) -> np.ndarray:
    w = np.zeros(11)
    w[1] = 1.0  # income
    w[5] = -0.5  # late payments
    w[GENDER] = gender
    return w


def _ctx(model, data, **kw):
    opts = AuditOptions(n_boot=200, progress=False, k=5)
    return AuditContext(model, data, options=opts, **kw)


def _oracle_flip_rate(model, data, nodes, column):
    """Per-node loop (L = 0: a node's output depends on its own row only)."""
    with torch.no_grad():
        base = model(data.x, data.edge_index).argmax(1)
        flipped = 0
        for v in nodes:
            x = data.x.clone()
            x[v, column] = 1 - x[v, column]
            flipped += int(model(x, data.edge_index).argmax(1)[v] != base[v])
    return flipped / len(nodes)


def test_flip_of_a_model_using_gender_is_flagged_and_ranked_first(data):
    model = Linear(_weights(gender=3.0), bias=-1.0)
    ctx = _ctx(model, data)
    result = SensitivityUnit(num_hops=0).run(ctx)
    oracle = _oracle_flip_rate(model, data, ctx.nodes, GENDER)
    for scope in ("node", "graph"):
        assert result.flips[scope].rate == pytest.approx(oracle)  # L = 0: both scopes agree
        assert result.rank_of(scope) == 1
    findings = {f.finding: f for f in result.findings()}
    assert oracle > 0.2
    assert findings["counterfactual flip (node scope)"].flagged
    assert findings["sensitivity rank (graph scope)"].flagged
    section = result.report_section()
    assert "depend on gender" in section.summary
    bar = section.figures[0]
    assert bar.options["highlight"] == ["gender"]
    assert {"label", "value", "ci_low", "ci_high"} <= set(bar.data.columns)


def test_a_model_ignoring_gender_is_not_flagged_and_the_verdict_says_no(data):
    model = Linear(_weights(gender=0.0))
    report = run_audit(model, data, model_hops=0, n_boot=200, progress=False, k=5)
    flips = report.findings[report.findings["finding"].str.startswith("counterfactual flip")]
    assert len(flips) == 2
    assert (flips["value"] == 0).all() and not flips["flagged"].any()
    assert "depend on gender" not in report.verdict.split(".")[0] or "No" in report.verdict
    assert report.section("sensitivity").data["rank_node"] == 11


def test_unit_equals_the_direct_calls(data):
    """The unit adds no statistic of its own: its figures are counterfactual_flip's and
    feature_sensitivity's, on the same nodes and seed."""
    model = Linear(_weights(gender=1.5))
    ctx = _ctx(model, data)
    result = SensitivityUnit(num_hops=0).run(ctx)
    direct = counterfactual_flip(
        model, data, "gender", scope="graph", n_boot=200, random_state=0, num_hops=0
    )
    assert result.flips["graph"].rate == direct.rate
    assert result.flips["graph"].ci_low == direct.ci_low
    table = feature_sensitivity(model, data, scope="node", n_boot=200, num_hops=0)
    ranked = result.rankings["node"]
    assert list(ranked["feature"]) == list(table["feature"])
    np.testing.assert_allclose(ranked["effect"], table["effect"])


def test_flag_rule_excludes_the_negligible_and_reaches_the_material_level():
    assert flip_flagged(NEGLIGIBLE_FLIP + 1e-9, MIN_FLIP_EFFECT)
    assert not flip_flagged(NEGLIGIBLE_FLIP, 0.5)  # a negligible share is not excluded
    assert not flip_flagged(0.02, MIN_FLIP_EFFECT - 1e-9)  # a material share is ruled out
    assert flip_flagged(0.3, 0.4)
    assert not flip_flagged(float("nan"), 0.4)
    assert not flip_flagged(0.3, float("nan"))


def test_ranking_above_the_cap_is_skipped_with_a_note(data):
    result = SensitivityUnit(num_hops=0, max_rank_values=3).run(_ctx(Linear(_weights(2.0)), data))
    assert result.rankings == {}
    assert result.rank_of("node") is None
    assert any("Ranking among features skipped" in n for n in result.notes)
    assert not any(f.finding.startswith("sensitivity rank") for f in result.findings())


def test_node_scope_needs_the_receptive_field_of_a_plain_callable(data):
    model = Linear(_weights(2.0))

    def fn(x, edge_index):
        return model(x, edge_index)

    result = SensitivityUnit().run(_ctx(fn, data))
    assert set(result.flips) == {"graph"}
    assert any(n.startswith("Node scope skipped") and "num_hops" in n for n in result.notes)
    report = run_audit(fn, data, model_hops=0, n_boot=100, progress=False, k=5)
    assert "counterfactual flip (node scope)" in set(report.findings["finding"])


def test_an_attribute_outside_the_inputs_skips_the_flip_and_names_proxies(data):
    """gender given as an array the model never sees, and a model that uses a proxy of it."""
    x = data.x.clone()
    proxy = data.x[:, GENDER].clone()
    x[:, GENDER] = 0.0
    noisy = proxy.clone()
    noisy[::15] = 1 - noisy[::15]  # a close proxy, not equal (an equal vector is the column)
    x[:, 9] = noisy  # savings_account now carries gender
    other = data.clone()
    other.x = x
    del other.sensitive, other.sensitive_name
    w = _weights(0.0)
    w[9] = 4.0
    report = run_audit(
        Linear(w, bias=-2.0),
        other,
        sensitive=proxy.numpy(),
        model_hops=0,
        n_boot=200,
        progress=False,
        k=5,
    )
    assert report.section("sensitivity").status == "skipped"
    assert report.section("evidence_contrast").status == "skipped"
    parity = report.finding("statistical parity")
    assert parity["flagged"]
    assert "not a model input" in report.verdict
    assert "a direct test of its use was impossible" in report.verdict
    assert "Outcomes differ between the sensitive groups" in report.verdict


def test_contrast_unit_equals_the_direct_call_and_samples_above_its_cap(data):
    model = Linear(_weights(gender=3.0), bias=-1.0)
    ctx = _ctx(model, data)
    ctx.prefetch(local_k=5)
    full = EvidenceContrastUnit(n_perm=300).run(ctx)
    direct = evidence_contrast(
        ctx.evidence, data, "gender", k=5, n_perm=300, n_boot=200, mask=ctx.nodes
    )
    assert full.contrast.difference == direct.difference
    assert full.contrast.p_value == direct.p_value
    assert full.significant and full.contrast.difference >= 0.05
    assert not full.findings()[0].flagged  # informational: proxies produce it too
    assert "Informational, never flagged" in full.findings()[0].explanation
    sampled = EvidenceContrastUnit(n_perm=300, max_nodes=20).run(ctx)
    assert sampled.contrast.n_nodes + sampled.contrast.n_dropped == 20
    assert any("sample of 20" in n for n in sampled.report_section().notes)


def test_pair_cards_lead_with_gender_pairs_when_the_contrast_is_significant(data):
    report = run_audit(
        Linear(_weights(gender=3.0), bias=-1.0),
        data,
        model_hops=0,
        n_boot=200,
        progress=False,
        k=5,
    )
    assert report.section("evidence_contrast").data["significant"]
    pairs = report.table("evidence_pairs", "pairs")
    assert len(pairs)
    gender = data.sensitive.numpy()
    differs = gender[pairs["node_u"].to_numpy()] != gender[pairs["node_v"].to_numpy()]
    assert "come first" in report.section("evidence_pairs").summary
    assert differs[0]
    # every pair that differs in gender comes before every pair that does not
    assert not np.any(~differs[:-1] & differs[1:])


def test_degenerate_model_marks_the_sensitivity_section(data):
    model = Linear(np.zeros(11), bias=5.0)  # class 1 everywhere

    class Nudged(torch.nn.Module):  # one node decided otherwise so evidences exist
        def forward(self, x, edge_index):
            out = model(x, edge_index)
            out[0, 0] = 10.0
            return out

    ctx = _ctx(Nudged(), data)
    outcome = run_units(ctx, [SensitivityUnit(num_hops=0)])
    section = outcome.sections[0]
    assert section.status == "not meaningful"
    assert not any(f.flagged for f in outcome.findings)


def test_bad_options_are_refused():
    with pytest.raises(InvalidInputError, match="scopes"):
        SensitivityUnit(scopes=("edge",))
    with pytest.raises(InvalidInputError, match="max_rank_values"):
        SensitivityUnit(max_rank_values=0)
    with pytest.raises(InvalidInputError, match="max_nodes"):
        EvidenceContrastUnit(max_nodes=1)


def test_a_unit_that_finds_it_cannot_run_is_skipped_and_the_rest_runs(data):
    from gnnaudit.audit.unit import AuditUnit, UnitSkipped

    class Refuses(AuditUnit):
        name = "refuses"
        title = "Refuses"

        def run(self, ctx):
            raise UnitSkipped("too few nodes in the smaller group")

    ctx = _ctx(Linear(_weights(2.0)), data)
    outcome = run_units(ctx, [Refuses(), SensitivityUnit(num_hops=0, rank=False)])
    assert outcome.sections[0].status == "skipped"
    assert "too few nodes" in outcome.sections[0].summary
    assert outcome.sections[1].status == "ok"
