"""Behaviour added for large graphs: the vectorised synthetic generator (exact grouped kNN,
numpy edge clean-up) and the automatic fine-tuning skip above ``FINETUNE_MAX_NODES``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.neighbors import NearestNeighbors

import gnnaudit.audit.pipeline.run as pipeline
import gnnaudit.datasets.synthetic as synthetic
from gnnaudit.audit.quality_unit import ModelQuality
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.datasets.splits import clean_edge_index
from gnnaudit.errors import InvalidInputError
from gnnaudit.training import NodeClassifier


@pytest.mark.parametrize("n", [20, 57, 4000])
def test_grouped_knn_equals_brute_force(n):
    rng = np.random.default_rng(n)
    raw = synthetic._credit_features(rng, n)
    z = raw.copy()
    z[:, :6] = synthetic._standardise(raw[:, :6])
    z = synthetic._standardise(z)
    binary = np.zeros(10, dtype=bool)
    binary[6:] = True
    got = synthetic._exact_knn(z, binary, 4)
    _, want = NearestNeighbors(n_neighbors=5, algorithm="brute").fit(z).kneighbors(z)
    assert got.shape == (n, 4)
    assert (got != np.arange(n)[:, None]).all()  # never the row itself
    np.testing.assert_array_equal(np.sort(got, axis=1), np.sort(want[:, 1:], axis=1))


def test_grouped_knn_tiny_groups_and_constant_binary_column():
    # a binary column that is constant, and groups of one row (padded queries)
    z = np.array([[0.0, 0, 1], [0.1, 0, 1], [0.3, 0, 0], [5.0, 0, 0], [5.2, 0, 1]])
    binary = np.array([False, True, True])
    got = synthetic._exact_knn(z, binary, 2)
    d = ((z[:, None] - z[None]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    np.testing.assert_array_equal(np.sort(got, 1), np.sort(np.argsort(d, 1)[:, :2], 1))


def test_numpy_edge_cleanup_equals_clean_edge_index():
    rng = np.random.default_rng(0)
    n = 500
    src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    src[:10] = dst[:10]  # self loops
    got = synthetic._undirected_unique(src, dst, n)
    want = clean_edge_index(torch.from_numpy(np.stack([src, dst])), n)
    assert torch.equal(got, want)


def test_generator_shape_and_determinism_at_moderate_size():
    n = 20_000
    a = synthetic_credit_graph(n, seed=3)
    b = synthetic_credit_graph(n, seed=3)
    c = synthetic_credit_graph(n, seed=4)
    assert a.x.shape == (n, 11) and a.y.shape == (n,) and a.sensitive.shape == (n,)
    for key in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask", "sensitive"):
        assert torch.equal(getattr(a, key), getattr(b, key)), key
    assert not torch.equal(a.edge_index, c.edge_index)
    ei = a.edge_index
    assert ei.dtype == torch.int64 and int(ei.min()) >= 0 and int(ei.max()) < n
    assert bool((ei[0] != ei[1]).all())  # no self loops
    assert torch.equal(ei, clean_edge_index(ei, n))  # undirected, sorted, no duplicates
    degree = torch.bincount(ei[0], minlength=n)
    assert int(degree.min()) >= 4  # every node keeps its 4 feature-space neighbours
    masks = a.train_mask.long() + a.val_mask.long() + a.test_mask.long()
    assert bool((masks == 1).all())


def _small_model_and_graph():
    data = synthetic_credit_graph(200, seed=0)
    torch.manual_seed(0)
    return NodeClassifier(data.x.size(1), 2), data


def test_resolve_finetune_rules(monkeypatch):
    module, _ = _small_model_and_graph()
    assert pipeline.resolve_finetune(True, module, 10**9) == (True, None)
    assert pipeline.resolve_finetune(False, module, 10) == (False, None)
    assert pipeline.resolve_finetune(None, torch.nn.Linear(2, 2), 10) == (False, None)
    assert pipeline.resolve_finetune(None, module, 200) == (True, None)
    monkeypatch.setattr(pipeline, "FINETUNE_MAX_NODES", 100)
    run, note = pipeline.resolve_finetune(None, module, 200)
    assert not run and "FINETUNE_MAX_NODES = 100" in note and "200 nodes" in note
    with pytest.raises(InvalidInputError, match="finetune must be"):
        pipeline.resolve_finetune("yes", module, 10)


def test_audit_notes_the_automatic_finetune_skip(monkeypatch):
    module, data = _small_model_and_graph()
    monkeypatch.setattr(pipeline, "FINETUNE_MAX_NODES", 100)
    seen = {}

    def fake_default_units(config, **kwargs):
        seen.update(kwargs)
        return [ModelQuality()]

    monkeypatch.setattr(pipeline, "default_units", fake_default_units)
    report = pipeline.run_audit(module, data, finetune=None, progress=False, n_boot=50)
    assert seen["finetune"] is False
    notes = report.run_info["notes"]
    assert any("fine-tuning on evidences skipped" in n and "200 nodes" in n for n in notes)
    assert "fine-tuning on evidences skipped" in report.to_markdown()
    # under the size the automatic choice fine-tunes and says nothing
    monkeypatch.setattr(pipeline, "FINETUNE_MAX_NODES", 1000)
    report = pipeline.run_audit(module, data, finetune=None, progress=False, n_boot=50)
    assert seen["finetune"] is True
    assert not any("skipped" in n for n in report.run_info.get("notes", []))


@pytest.mark.parametrize("feature", ["gender", "income"])
def test_node_scope_subgraph_passes_equal_whole_graph_passes(monkeypatch, feature):
    """Node-scope passes on the L-hop ball subgraphs (closed by a sink) give the same flips and probability
    changes as whole-graph passes, and really run on subgraphs."""
    import gnnaudit.audit.sensitivity.node_scope as node_scope
    from gnnaudit.audit.sensitivity.flip import counterfactual_flip

    data = synthetic_credit_graph(3000, seed=2)
    torch.manual_seed(0)
    module = NodeClassifier(data.x.size(1), 2, num_layers=2).eval()
    sizes = []
    forward = module.forward

    def counting(x, edge_index, *args, **kwargs):
        sizes.append(int(x.size(0)))
        return forward(x, edge_index, *args, **kwargs)

    monkeypatch.setattr(module, "forward", counting)
    kwargs = dict(scope="node", max_nodes=60, n_boot=50, num_hops=2)
    monkeypatch.setattr(node_scope, "LOCAL_MAX_FRACTION", 0.0)  # never local
    whole = counterfactual_flip(module, data, feature, **kwargs)
    assert set(sizes) == {3000}
    sizes.clear()
    monkeypatch.setattr(node_scope, "LOCAL_MAX_FRACTION", 0.9)
    monkeypatch.setattr(node_scope, "LOCAL_MAX_TOTAL", 100.0)
    local = counterfactual_flip(module, data, feature, **kwargs)
    assert min(sizes) < 3000  # subgraph passes ran
    np.testing.assert_array_equal(whole.nodes, local.nodes)
    np.testing.assert_array_equal(whole.flipped, local.flipped)
    np.testing.assert_allclose(whole.prob_delta, local.prob_delta, atol=1e-6)
    assert whole.rate == local.rate


def test_sensitivity_unit_large_graph_mode(monkeypatch):
    """Above LARGE_GRAPH_NODES (monkeypatched small) the default unit skips the ranking and
    samples LARGE_GRAPH_MAX_NODES nodes at node scope, and says both in its notes."""
    import gnnaudit.audit.sensitivity.unit as su
    from gnnaudit.audit.context import AuditContext, AuditOptions

    data = synthetic_credit_graph(400, seed=0)
    torch.manual_seed(0)
    module = NodeClassifier(data.x.size(1), 2, num_layers=2)
    monkeypatch.setattr(su, "LARGE_GRAPH_NODES", 100)
    monkeypatch.setattr(su, "LARGE_GRAPH_MAX_NODES", 30)
    ctx = AuditContext(module, data, options=AuditOptions(n_boot=50, progress=False))
    audit = su.SensitivityUnit().run(ctx)
    assert not audit.rankings
    assert audit.flips["node"].n_nodes == 30 and audit.flips["node"].sampled
    assert any("Ranking among features skipped" in n for n in audit.notes)
    assert any("seeded sample of 30" in n for n in audit.notes)
    # explicit options win
    audit = su.SensitivityUnit(rank=True, max_nodes=40).run(ctx)
    assert set(audit.rankings) == {"node", "graph"}
    assert audit.flips["node"].n_nodes == 40
