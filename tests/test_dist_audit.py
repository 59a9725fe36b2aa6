"""The audit on a Dask cluster (issue 30): KS with a per-hop halo exchange between workers,
the model's forward passes per partition, ``audit_model(client=)`` and ``gnnaudit audit
--scheduler``, each equal to the single-process result.

One module-scoped LocalCluster of two single-threaded worker processes serves every test.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import scipy.sparse as sp
import torch

distributed = pytest.importorskip("distributed")

from torch_geometric.data import Data  # noqa: E402
from torch_geometric.nn import GCNConv  # noqa: E402
from torch_geometric.nn.models import GCN  # noqa: E402

import gnnaudit  # noqa: E402
from gnnaudit.audit import AuditReport  # noqa: E402
from gnnaudit.audit.dist_forward import RemoteForward, ball_subgraph  # noqa: E402
from gnnaudit.audit.dist_ks import distributed_ks  # noqa: E402
from gnnaudit.audit.dist_store import GraphStore, write_graph_store  # noqa: E402
from gnnaudit.cli.main import main  # noqa: E402
from gnnaudit.datasets import synthetic_credit_graph  # noqa: E402
from gnnaudit.errors import InvalidInputError  # noqa: E402
from gnnaudit.graph_ops import ks_embedding  # noqa: E402
from gnnaudit.graph_ops.ks_halo import HaloBlock  # noqa: E402
from gnnaudit.training.node_classifier import BACKBONES, NodeClassifier  # noqa: E402


def _random_graph(n: int, e: int, d: int, seed: int, dtype=torch.float32) -> Data:
    """Directed graph with duplicate edges, self loops, isolated nodes and zero rows."""
    gen = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, n, (2, e), generator=gen)
    edges = torch.cat([edges, edges[:, :5], torch.tensor([[0, 1], [0, 1]])], dim=1)
    x = torch.randn(n, d, generator=gen, dtype=dtype)
    x[3] = 0.0
    return Data(x=x, edge_index=edges)


# --------------------------------------------------------------------------- KS


@pytest.mark.parametrize("num_parts", [1, 2, 3])
@pytest.mark.parametrize("num_hops", [0, 1, 3])
def test_distributed_ks_equals_local(client, tmp_path, num_parts, num_hops):
    data = _random_graph(60, 240, 5, seed=num_parts * 10 + num_hops)
    store = write_graph_store(data, tmp_path, num_parts)
    result = distributed_ks(client, store, num_hops, alpha=0.3)
    ref = ks_embedding(data.x, data.edge_index, num_hops, alpha=0.3)
    assert torch.equal(result.gather(), ref)
    # contiguous partitions: the Dask array of row blocks is the embedding in node order
    assert torch.equal(torch.from_numpy(result.to_dask_array().compute()), ref)
    result.release()


def test_distributed_ks_any_labelling_float64_and_halo_sizes(client, tmp_path):
    data = _random_graph(80, 300, 4, seed=7, dtype=torch.float64)
    parts = torch.from_numpy(np.random.default_rng(0).integers(0, 3, 80))
    parts[:3] = torch.tensor([0, 1, 2])  # no empty partition
    store = write_graph_store(data, tmp_path, 3, parts=parts)
    result = distributed_ks(client, store, 2)
    assert torch.equal(result.gather(), ks_embedding(data.x, data.edge_index, 2))
    # oracle: distinct in-neighbours (self loops excluded) owned by another partition
    src, dst = data.edge_index
    for p in range(3):
        into = (parts[dst] == p) & (src != dst) & (parts[src] != p)
        assert result.halo_rows[p] == int(torch.unique(src[into]).numel())
    assert result.halo_bytes == sum(result.halo_rows) * 4 * 8 * 2


def test_credit_graph_ks_bit_identical(client, tmp_path):
    data = synthetic_credit_graph(num_nodes=1500, seed=3)
    store = write_graph_store(data, tmp_path, 4)
    result = distributed_ks(client, store, 3)
    assert torch.equal(result.gather(), ks_embedding(data.x, data.edge_index, 3))


def test_halo_block_refuses_bad_input():
    own = torch.tensor([0, 1])
    with pytest.raises(InvalidInputError, match="end in one of its own rows"):
        HaloBlock.build(own, torch.tensor([[2], [3]]))
    with pytest.raises(InvalidInputError, match="sorted"):
        HaloBlock.build(torch.tensor([1, 0]), torch.empty(2, 0, dtype=torch.long))
    block = HaloBlock.build(own, torch.tensor([[2, 3], [0, 1]]))
    with pytest.raises(InvalidInputError, match="expected 2 halo rows"):
        block.step(0.5, torch.ones(2, 3), [])


def test_store_errors(tmp_path, client):
    data = _random_graph(10, 20, 2, seed=1)
    with pytest.raises(InvalidInputError, match="parts must lie"):
        write_graph_store(data, tmp_path / "a", 2, parts=torch.full((10,), 5))
    with pytest.raises(InvalidInputError):
        GraphStore.open(tmp_path / "missing")
    with pytest.raises(InvalidInputError, match="Client"):
        distributed_ks("not a client", write_graph_store(data, tmp_path / "b", 2))


# --------------------------------------------------------------------------- forward passes


def test_ball_subgraph_matches_bfs_oracle():
    data = _random_graph(50, 70, 2, seed=5)
    ei = data.edge_index
    adj = sp.coo_matrix((np.ones(ei.size(1)), (ei[0].numpy(), ei[1].numpy())), shape=(50, 50))
    adj = ((adj + adj.T) > 0).astype(float).tocsr()
    seeds = torch.tensor([4, 17])
    for hops in range(4):
        dist = sp.csgraph.shortest_path(adj, indices=seeds.numpy(), unweighted=True).min(axis=0)
        ball, sub = ball_subgraph(ei, 50, seeds, hops)
        assert ball.tolist() == np.flatnonzero(dist <= hops).tolist()
        if sub is not None:
            inside = np.isin(ei[0], ball) & np.isin(ei[1], ball)
            assert torch.equal(ball[sub], ei[:, torch.from_numpy(inside)])


def _ring(n: int) -> torch.Tensor:
    ids = torch.arange(n)
    ring = torch.stack([ids, (ids + 1) % n])
    return torch.cat([ring, ring.flip(0)], dim=1)


@pytest.mark.parametrize("graph", ["credit", "ring"])
def test_remote_forward_equals_whole_graph(client, tmp_path, graph):
    data = synthetic_credit_graph(num_nodes=600, seed=2)
    if graph == "ring":  # locality: each partition's ball is far smaller than the graph
        data.edge_index = _ring(600)
    torch.manual_seed(0)
    model = GCN(data.num_features, 8, num_layers=2, out_channels=2).eval()
    store = write_graph_store(data, tmp_path, 3)
    forward = RemoteForward(client, store, num_hops=2, model=model)
    with torch.no_grad():
        ref = model(data.x, data.edge_index)
    out = forward()
    assert torch.equal(out.argmax(1), ref.argmax(1))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    if graph == "ring":
        assert forward.ball_rows == 600 + 3 * 2 * 3  # each range plus 3 hops on either side
    # a counterfactual graph: column 0 set to 1 on every other node
    ids = np.arange(0, 600, 2)
    x2 = data.x.clone()
    x2[ids, 0] = 1.0
    with torch.no_grad():
        ref2 = model(x2, data.edge_index)
    out2 = forward([(ids, (0,), np.array([1.0]))])
    torch.testing.assert_close(out2, ref2, rtol=1e-5, atol=1e-6)
    # rows=: only those rows are computed, the others keep the fill (factual logits)
    forward.set_fill(ref)
    out3 = forward([(ids, (0,), np.array([1.0]))], rows=np.array([10, 590]))
    torch.testing.assert_close(out3[[10, 590]], ref2[[10, 590]], rtol=1e-5, atol=1e-6)
    assert torch.equal(out3[11], ref[11])


@pytest.mark.parametrize("backbone", BACKBONES)
def test_layered_forward_bit_identical(client, tmp_path, backbone):
    """NodeClassifier: layer by layer with a halo exchange, every backbone, on a graph with
    duplicate edges and a self loop; the model itself is left unchanged."""
    data = synthetic_credit_graph(num_nodes=500, seed=4)
    extra = torch.tensor([[3, 7, 7], [3, 9, 9]])
    data.edge_index = torch.cat([data.edge_index, extra], dim=1)
    torch.manual_seed(0)
    model = NodeClassifier(data.num_features, 2, backbone=backbone).eval()
    store = write_graph_store(data, tmp_path, 3)
    gcn = [i for i, conv in enumerate(model.convs) if isinstance(conv, GCNConv)]
    forward = RemoteForward(
        client, store, 3, model=model, layered=True, num_layers=3, gcn_layers=gcn
    )
    ids = np.arange(0, 500, 3)
    x2 = data.x.clone()
    x2[ids, 0] = 1.0
    with torch.no_grad():
        ref, ref2 = model(data.x, data.edge_index), model(x2, data.edge_index)
    assert torch.equal(forward(), ref)
    assert torch.equal(forward([(ids, (0,), np.array([1.0]))]), ref2)
    assert forward.halo_rows > 0
    assert all(model.convs[i].normalize for i in gcn)


# --------------------------------------------------------------------------- the audit


@pytest.fixture(scope="module")
def small_audit():
    data = synthetic_credit_graph(num_nodes=400, seed=5)
    torch.manual_seed(2)  # a model predicting both classes (41 % / 59 %)
    model = GCN(data.num_features, 16, num_layers=2, out_channels=2).eval()
    kw = dict(sensitive="gender", n_boot=40, progress=False)
    return data, model, kw, gnnaudit.audit_model(model, data, **kw)


def test_audit_model_with_client_equals_local(client, small_audit, tmp_path):
    data, model, kw, local = small_audit
    report = gnnaudit.audit_model(model, data, client=client, shared_dir=tmp_path, **kw)
    assert report.findings.equals(local.findings)
    assert report.verdict == local.verdict
    assert report.to_dict()["sections"] == local.to_dict()["sections"]
    info = report.run_info["distributed"]
    assert info["workers"] == 2 and info["partitions"] == 2
    assert info["forward_passes"] >= 2 and info["ks_halo_bytes"] > 0
    assert GraphStore.open(tmp_path).num_nodes == 400


def test_audit_model_client_refuses_forward_kwargs(client, small_audit):
    data, model, kw, _ = small_audit
    with pytest.raises(InvalidInputError, match="forward_kwargs"):
        gnnaudit.audit_model(model, data, client=client, forward_kwargs={"edge_weight": None}, **kw)


def test_cli_scheduler_equals_local(client, tmp_path):
    logging.getLogger("lightning").setLevel(logging.ERROR)
    small = ["--dataset", "synthetic", "--num-nodes", "120", "--epochs", "10", "--no-progress"]
    assert main(["audit", *small, "--no-finetune", "--out", str(tmp_path / "a")]) == 0
    ckpt = str(tmp_path / "a" / "model.ckpt")
    common = ["audit", *small, "--checkpoint", ckpt, "--no-finetune"]
    assert main([*common, "--out", str(tmp_path / "b")]) == 0
    address = client.scheduler.address
    shared = str(tmp_path / "store")
    args = [*common, "--scheduler", address, "--shared-dir", shared, "--out", str(tmp_path / "c")]
    assert main(args) == 0
    here = AuditReport.from_json(tmp_path / "b" / "report.json")
    there = AuditReport.from_json(tmp_path / "c" / "report.json")
    assert there.findings.equals(here.findings)
    info = there.run_info["distributed"]
    assert info["store"] == str((tmp_path / "store").resolve())
    assert info["forward_mode"] == "layered halo exchange"  # NodeClassifier from --checkpoint
    assert main(["audit", *small, "--shared-dir", shared, "--out", str(tmp_path / "d")]) == 2


@pytest.mark.parametrize(
    ("model", "workers_load"), [("gcn", True), ("sage", True), ("my_model.py:Net", False)]
)
def test_scheduler_workers_read_a_gnnaudit_checkpoint_from_its_path(client, model, workers_load):
    """A gnnaudit checkpoint (``--model`` a backbone name, the default ``gcn`` included) is read
    by the workers from its path; the Lightning checkpoint of a user's ``--model MODULE:NAME``
    is loaded by the client (its module need not be importable on the workers)."""
    import argparse

    from gnnaudit.cli._scheduler import cluster_options

    args = argparse.Namespace(
        scheduler=client.scheduler.address, shared_dir=None, checkpoint="m.ckpt", model=model
    )
    with cluster_options(args) as options:
        assert ("model_loader" in options) is workers_load
        if workers_load:
            assert options["model_loader"].args == (os.path.abspath("m.ckpt"),)
