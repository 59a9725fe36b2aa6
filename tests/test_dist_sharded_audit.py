"""The audit with ``client=`` above the faiss crossover: ``backend="auto"`` runs the evidence
search on the workers through the sharded searcher (re-ranked exactly here), and the findings
equal those of the same search in one process."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("distributed")
pytest.importorskip("faiss")

from torch_geometric.nn.models import GCN  # noqa: E402

import gnnaudit  # noqa: E402
import gnnaudit.audit.search.backends as backends  # noqa: E402
from gnnaudit.datasets import synthetic_credit_graph  # noqa: E402

pytestmark = pytest.mark.xdist_group("dask")  # one worker, one cluster (conftest)


def test_auto_above_the_crossover_searches_on_the_workers(client, tmp_path, monkeypatch):
    data = synthetic_credit_graph(num_nodes=400, seed=5)
    # one layer: the node-scope flips take 57 forward passes on the cluster instead of 200 for
    # two (the search is what this test is about); this model's decisions still flip with gender,
    # three findings are flagged and the evidence contrast (from the searched pairs) is 0.138
    torch.manual_seed(1)
    model = GCN(data.num_features, 16, num_layers=1, out_channels=2).eval()
    kw = dict(sensitive="gender", n_boot=40, progress=False, finetune=False)
    # the crossover lowered below the graph: "auto" would be faiss in one process
    monkeypatch.setattr(backends, "AUTO_FAISS_MIN_NODES", 10)
    monkeypatch.setattr(backends, "AUTO_FAISS_MIN_NODES_LOW_DIM", 10)
    there = gnnaudit.audit_model(model, data, client=client, shared_dir=tmp_path, **kw)
    assert there.run_info["evidence_backend"] == "sharded"
    here = gnnaudit.audit_model(model, data, backend="sharded", **kw)
    assert here.run_info["evidence_backend"] == "sharded"
    assert there.findings.equals(here.findings)
    assert there.verdict == here.verdict
