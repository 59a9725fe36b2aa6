"""The audit on a Dask cluster (issue 30): KS with a per-hop halo exchange between workers,
the model's forward passes per partition, ``audit_model(client=)`` and ``gnnaudit audit
--scheduler``, each equal to the single-process result.

One LocalCluster of two single-threaded worker processes (conftest's ``client``) serves
every test here and in the other Dask modules; ``make test`` runs them on one xdist worker
(their ``xdist_group("dask")`` mark).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import operator
import os

import numpy as np
import pytest
import scipy.sparse as sp
import torch

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.xdist_group("dask")  # one worker, one cluster (conftest)

from dask_cluster import fork_server_settings  # noqa: E402
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.nn import GCNConv  # noqa: E402
from torch_geometric.nn.models import GCN  # noqa: E402

import gnnaudit  # noqa: E402
from gnnaudit._distributed import gather_pinned  # noqa: E402
from gnnaudit.audit import AuditReport  # noqa: E402
from gnnaudit.audit.distributed.block import FORWARD_CHUNK_BYTES, edges_per_chunk, row_chunks  # noqa: E402
from gnnaudit.audit.distributed.forward import RemoteForward, ball_subgraph, halo_bytes  # noqa: E402
from gnnaudit.audit.distributed.ks import distributed_ks  # noqa: E402
from gnnaudit.audit.distributed.store import AddRows, GraphStore, write_graph_store  # noqa: E402
from gnnaudit.cli.main import main  # noqa: E402
from gnnaudit.datasets import synthetic_credit_graph  # noqa: E402
from gnnaudit.errors import InvalidInputError, WorkerLostError  # noqa: E402
from gnnaudit.graph_ops import ks_embedding  # noqa: E402
from gnnaudit.graph_ops.ks_halo import HaloBlock  # noqa: E402
from gnnaudit.graph_ops.partitioned import metis_partition  # noqa: E402
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


@pytest.mark.parametrize("chunk_bytes", [FORWARD_CHUNK_BYTES, 3000])
@pytest.mark.parametrize("backbone", BACKBONES)
def test_layered_forward_bit_identical(client, tmp_path, backbone, chunk_bytes):
    """NodeClassifier: layer by layer with a halo exchange, every backbone, on a graph with
    duplicate edges and self loops (a duplicated one too); the model itself is left
    unchanged. ``chunk_bytes=3000``: each layer runs in chunks of ``MIN_CHUNK_ROWS`` rows (two or
    three per partition), still equal bit for bit."""
    data = synthetic_credit_graph(num_nodes=500, seed=4)
    extra = torch.tensor([[3, 7, 7, 12, 12], [3, 9, 9, 12, 12]])
    data.edge_index = torch.cat([data.edge_index, extra], dim=1)
    torch.manual_seed(0)
    model = NodeClassifier(data.num_features, 2, backbone=backbone).eval()
    store = write_graph_store(data, tmp_path, 3)
    gcn = [i for i, conv in enumerate(model.convs) if isinstance(conv, GCNConv)]
    forward = RemoteForward(
        client,
        store,
        3,
        model=model,
        layered=True,
        num_layers=3,
        gcn_layers=gcn,
        chunk_bytes=chunk_bytes,
    )
    ids = np.arange(0, 500, 3)
    x2 = data.x.clone()
    x2[ids, 0] = 1.0
    with torch.no_grad():
        ref, ref2 = model(data.x, data.edge_index), model(x2, data.edge_index)
    assert torch.equal(forward(), ref)
    before = halo_bytes(client)
    assert torch.equal(forward([(ids, (0,), np.array([1.0]))]), ref2)
    # one pass moves each halo row once per layer: its position (8 B) and its input row
    widths = data.num_features + 16 + 16
    assert halo_bytes(client) - before == forward.halo_rows * (3 * 8 + 4 * widths)
    assert forward.halo_rows > 0
    assert all(model.convs[i].normalize for i in gcn)


def test_layered_passes_build_the_model_once_per_worker(client, tmp_path):
    """A model given as a loader (the CLI's checkpoint reader) is built once per worker that
    holds a partition, not once per layer task: 3 passes of 2 layers over 3 partitions call it
    as often as one would; the logits still equal a whole-graph pass."""
    data = synthetic_credit_graph(num_nodes=300, seed=2)
    torch.manual_seed(0)
    model = NodeClassifier(data.num_features, 2, num_layers=2).eval()
    weights, calls = tmp_path / "w.pt", tmp_path / "calls"
    torch.save(model.state_dict(), weights)
    calls.mkdir()
    width = data.num_features

    def loader():  # a closure: pickled by value, so the workers need not import this module
        import uuid

        (calls / uuid.uuid4().hex).touch()
        net = NodeClassifier(width, 2, num_layers=2)
        net.load_state_dict(torch.load(weights, weights_only=True))
        return net

    store = write_graph_store(data, tmp_path / "store", 3)
    forward = RemoteForward(
        client, store, 2, loader=loader, layered=True, num_layers=2, gcn_layers=[0, 1]
    )
    with torch.no_grad():
        ref = model(data.x, data.edge_index)
    for _ in range(3):
        assert torch.equal(forward(), ref)
    holders = min(len(client.scheduler_info()["workers"]), store.num_parts)
    assert len(list(calls.iterdir())) == holders


# --------------------------------------------------------------------------- the audit


@pytest.fixture(scope="module")
def small_audit():
    data = synthetic_credit_graph(num_nodes=400, seed=5)
    # a model predicting both classes (45 % / 55 %) whose decisions flip with gender (3 findings
    # flagged); one layer: the node-scope flips take 57 forward passes on the cluster, not 200
    # as with two (2-hop balls on the cluster are checked by test_remote_forward_equals_whole_graph
    # and by test_distributed's feature sensitivity of a 2-layer model)
    torch.manual_seed(1)
    model = GCN(data.num_features, 16, num_layers=1, out_channels=2).eval()
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
    small = ["--dataset", "synthetic", "--num-nodes", "120", "--epochs", "100", "--no-progress"]
    # the audited model: a 1-layer NodeClassifier from the CLI's checkpoint. Its node-scope
    # batches hold audited nodes more than one hop apart, so the audit on the cluster runs 36
    # forward passes (200 with two layers: 2-hop halos are checked by
    # test_remote_forward_equals_whole_graph and test_distributed's 2-layer feature
    # sensitivity); each still exchanges a halo. Trained for 100 epochs it flips decisions at
    # both scopes (gender too) and three findings are flagged, so equal findings say something
    assert main(["train", *small, "--layers", "1", "--out", str(tmp_path / "a")]) == 0
    ckpt = str(tmp_path / "a" / "model.ckpt")
    common = ["audit", *small, "--checkpoint", ckpt, "--no-finetune"]
    assert main([*common, "--out", str(tmp_path / "b")]) == 0
    address = client.scheduler.address
    shared = str(tmp_path / "store")
    args = [*common, "--scheduler", address, "--shared-dir", shared, "--out", str(tmp_path / "c")]
    if importlib.util.find_spec("pymetis") is not None:
        args += ["--partition", "metis"]
    assert main(args) == 0
    here = AuditReport.from_json(tmp_path / "b" / "report.json")
    there = AuditReport.from_json(tmp_path / "c" / "report.json")
    assert there.findings.equals(here.findings)
    assert here.findings["flagged"].sum() >= 3
    info = there.run_info["distributed"]
    assert info["store"] == str((tmp_path / "store").resolve())
    assert info["forward_mode"] == "layered halo exchange"  # NodeClassifier from --checkpoint
    assert info["partition"] == ("metis" if "--partition" in args else "contiguous")
    assert main(["audit", *small, "--shared-dir", shared, "--out", str(tmp_path / "d")]) == 2
    assert main(["audit", *small, "--partition", "metis", "--out", str(tmp_path / "e")]) == 2


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
        scheduler=client.scheduler.address,
        shared_dir=None,
        partition=None,
        checkpoint="m.ckpt",
        model=model,
    )
    with cluster_options(args) as options:
        assert ("model_loader" in options) is workers_load
        if workers_load:
            assert options["model_loader"].args == (os.path.abspath("m.ckpt"),)


def test_row_chunks_cover_rows_within_budget():
    """Consecutive ranges covering every row once, as many as the budget asks (when the rows
    allow ``min_rows`` each), each within an equal share of the edges plus one row's when no
    cut was dropped for ``min_rows``."""
    gen = torch.Generator().manual_seed(0)
    degrees = torch.randint(0, 9, (1000,), generator=gen)
    degrees[500] = 400  # a hub
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(degrees, 0)])
    total = int(ptr[-1])
    for budget, min_rows in [(1, 1), (7, 1), (50, 16), (500, 64), (10**6, 64), (10, 400)]:
        chunks = row_chunks(ptr, budget, min_rows)
        assert chunks[0][0] == 0 and chunks[-1][1] == degrees.numel()
        assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:], strict=False))
        assert all(hi - lo >= min_rows for lo, hi in chunks)
        count = min(-(-total // budget), 1000 // min_rows)
        assert len(chunks) <= count
        share = -(-total // count) + int(degrees.max())
        if min_rows == 1:  # no cut dropped for size: each chunk within one share + a row
            assert all(int(ptr[hi] - ptr[lo]) <= share for lo, hi in chunks)
    assert len(row_chunks(ptr, 10**6)) == 1
    assert len(row_chunks(ptr, 1, 1)) > 100
    assert row_chunks(torch.zeros(1, dtype=torch.long), 5) == []
    assert edges_per_chunk(16) == FORWARD_CHUNK_BYTES // (40 + 12 * 16)


#: the worker process dies as one killed for memory does; a builtin, so that the worker need
#: not import this module (torch, PyG, gnnaudit: seconds) to run it
_exit_worker = functools.partial(os._exit, 3)


def test_lost_worker_is_a_gnnaudit_error():
    """A task whose worker dies surfaces as WorkerLostError naming the step and the
    workers' memory limit, not as dask's KilledWorker / cancellation error."""
    import dask

    # the worker forks from the shared cluster's server (no imports of its own)
    config = {**fork_server_settings(), "distributed.scheduler.allowed-failures": 0}
    with dask.config.set(config):
        cluster = distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            memory_limit="1.5 GiB",
            dashboard_address=None,
        )
        client = distributed.Client(cluster)
        try:
            with pytest.raises(WorkerLostError, match=r"during the test step.*1\.50 GiB"):
                gather_pinned(client, [client.submit(_exit_worker, pure=False)], "the test step")
            # anything else raised by a task is left as it is
            with pytest.raises(ZeroDivisionError):
                gather_pinned(client, [client.submit(operator.truediv, 1, 0)], "a step")
        finally:
            client.close()
            cluster.close()


def _hook_input(model, layer, x, edge_index):
    seen = []
    handle = layer.register_forward_hook(lambda _m, inputs, _o: seen.append(inputs[0]))
    with torch.no_grad():
        model(x, edge_index)
    handle.remove()
    return seen[-1]


@pytest.mark.parametrize("backbone", ["gcn", "sage", "gin"])
def test_remote_hidden_and_added_rows_equal_local(client, tmp_path, backbone):
    """The proxies' probe input (a module of the last layer, hooked) and a pass on x + noise
    (AddRows, read by each worker from the shared folder): equal to the local ones, layered
    mode in small chunks (the probe's rows gathered chunk by chunk)."""
    data = synthetic_credit_graph(num_nodes=400, seed=6)
    torch.manual_seed(1)
    model = NodeClassifier(data.num_features, 2, backbone=backbone).eval()
    store = write_graph_store(data, tmp_path / "store", 2)
    gcn = [i for i, conv in enumerate(model.convs) if isinstance(conv, GCNConv)]
    forward = RemoteForward(
        client, store, 3, model=model, layered=True, num_layers=3, gcn_layers=gcn, chunk_bytes=3000
    )
    layer = [m for m in model.modules() if any(True for _ in m.parameters(recurse=False))][-1]
    name = next(n for n, m in model.named_modules() if m is layer)
    rows = np.array([399, 5, 17, 200, 5, 0])
    ref = _hook_input(model, layer, data.x, data.edge_index)
    assert torch.equal(forward.hidden(name, rows), ref[rows])
    assert forward.hidden("no.such.module", rows) is None
    noise = torch.randn(tuple(data.x.shape), generator=torch.Generator().manual_seed(3))
    np.save(tmp_path / "noise.npy", noise.numpy())
    with torch.no_grad():
        ref_noisy = model(data.x + noise, data.edge_index)
    assert torch.equal(forward([AddRows(str(tmp_path / "noise.npy"))]), ref_noisy)


def test_factual_pass_keeps_the_probe_input(client, tmp_path):
    """keep_hidden: the next factual pass also probes the module's input; hidden() on the
    same rows then answers without a pass of its own (equal to the hooked local input), a
    pass with changes in between neither consumes nor answers the request."""
    data = synthetic_credit_graph(num_nodes=300, seed=8)
    torch.manual_seed(4)
    model = NodeClassifier(data.num_features, 2, backbone="gcn").eval()
    store = write_graph_store(data, tmp_path / "store", 2)
    gcn = [i for i, conv in enumerate(model.convs) if isinstance(conv, GCNConv)]
    forward = RemoteForward(
        client, store, 3, model=model, layered=True, num_layers=3, gcn_layers=gcn
    )
    name = "convs.2.lin"
    rows = np.array([250, 3, 99, 3])
    ref = _hook_input(model, model.convs[2].lin, data.x, data.edge_index)
    with torch.no_grad():
        ref_logits = model(data.x, data.edge_index)
        x_cf = data.x.clone()
        x_cf[:5, 0] = 7.0
        ref_cf = model(x_cf, data.edge_index)
    forward.keep_hidden(name, rows)
    changed = forward([(np.arange(5), (0,), np.array([7.0]))])
    torch.testing.assert_close(changed, ref_cf, rtol=1e-5, atol=1e-6)
    assert forward.passes == 1
    torch.testing.assert_close(forward(), ref_logits, rtol=1e-5, atol=1e-6)
    assert forward.passes == 2
    assert torch.equal(forward.hidden(name, rows), ref[rows])
    assert forward.passes == 2  # answered from the factual pass
    forward.hidden(name, np.array([1, 2]))  # other rows: a pass of their own
    assert forward.passes == 3


def test_remote_hidden_ball_mode(client, tmp_path):
    """Any model (ball per partition): the hooked input at the rows, close to the local one."""
    data = synthetic_credit_graph(num_nodes=300, seed=7)
    torch.manual_seed(2)
    model = GCN(data.num_features, 16, num_layers=2, out_channels=2).eval()
    store = write_graph_store(data, tmp_path / "store", 2)
    forward = RemoteForward(client, store, 2, model=model)
    rows = np.array([1, 150, 299])
    ref = _hook_input(model, model.convs[-1].lin, data.x, data.edge_index)
    got = forward.hidden("convs.1.lin", rows)
    torch.testing.assert_close(got, ref[rows], rtol=1e-5, atol=1e-6)


def _ring_of_cliques(cliques: int, size: int) -> torch.Tensor:
    rows = []
    for c in range(cliques):
        base = c * size
        ids = torch.arange(base, base + size)
        a, b = torch.meshgrid(ids, ids, indexing="ij")
        keep = a != b
        rows.append(torch.stack([a[keep], b[keep]]))
        rows.append(torch.tensor([[base], [(base + size) % (cliques * size)]]))
    return torch.cat(rows, dim=1)


def test_metis_partition_keeps_cliques_together_and_is_seeded():
    pytest.importorskip("pymetis")
    edges = _ring_of_cliques(4, 12)
    parts = metis_partition(edges, 48, 4)
    assert parts.shape == (48,) and set(parts.tolist()) == {0, 1, 2, 3}
    assert all(len(set(parts[c * 12 : (c + 1) * 12].tolist())) == 1 for c in range(4))
    assert torch.equal(parts, metis_partition(edges, 48, 4))
    assert torch.equal(metis_partition(edges, 48, 1), torch.zeros(48, dtype=torch.long))
    # contiguous ranges of shuffled ids cut the cliques: METIS's halos are smaller
    perm = torch.randperm(48, generator=torch.Generator().manual_seed(0))
    shuffled = perm[edges]

    def cut(p: torch.Tensor) -> int:
        return int((p[shuffled[0]] != p[shuffled[1]]).sum())

    ranges = torch.arange(48) * 4 // 48
    assert cut(metis_partition(shuffled, 48, 4)) < cut(ranges)


def test_metis_store_gives_the_local_ks_and_logits(client, tmp_path):
    """A METIS-partitioned store: the distributed KS embedding and layered logits equal the
    local ones bit for bit; an unknown partition name is refused."""
    pytest.importorskip("pymetis")
    data = synthetic_credit_graph(num_nodes=400, seed=8)
    store = write_graph_store(data, tmp_path / "m", 3, parts="metis")
    ks = distributed_ks(client, store, 2, 0.5)
    try:
        assert torch.equal(ks.gather(), ks_embedding(data.x, data.edge_index, 2, 0.5))
    finally:
        ks.release()
    torch.manual_seed(3)
    model = NodeClassifier(data.num_features, 2, backbone="gcn").eval()
    forward = RemoteForward(
        client, store, 3, model=model, layered=True, num_layers=3, gcn_layers=[0, 1, 2]
    )
    with torch.no_grad():
        assert torch.equal(forward(), model(data.x, data.edge_index))
    with pytest.raises(InvalidInputError, match="'contiguous', 'metis'"):
        write_graph_store(data, tmp_path / "bad", 3, parts="spectral")


def test_default_num_parts_is_one_per_worker():
    """One partition per worker whatever the edge count; never more partitions than nodes."""
    from types import SimpleNamespace

    from gnnaudit.audit.distributed import session as ad

    def graph(n: int, e: int) -> SimpleNamespace:
        return SimpleNamespace(x=torch.empty(n, 1), edge_index=torch.empty(2, e))

    assert ad.default_num_parts(graph(50, 150), 2) == 2
    assert ad.default_num_parts(graph(50, 10**6), 3) == 3
    assert ad.default_num_parts(graph(2, 10), 3) == 2
    assert ad.default_num_parts(graph(0, 0), 3) == 1


def test_a_worker_restarted_under_pinned_tasks_is_reported(monkeypatch):
    """Tasks pinned to a worker that dies and comes back under a new id would wait forever:
    gather_pinned notices the worker left and raises WorkerLostError."""
    import time

    import dask

    import gnnaudit._distributed as gd

    monkeypatch.setattr(gd, "PINNED_POLL_SECONDS", 0.5)
    # the workers, the restarted one too, fork from the shared cluster's server (no imports)
    with dask.config.set(fork_server_settings()):
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = distributed.Client(cluster)
        try:
            first = sorted(client.scheduler_info()["workers"])[0]
            slow = client.submit(
                time.sleep, 60, workers=[first], allow_other_workers=False, pure=False
            )
            time.sleep(0.5)
            with contextlib.suppress(Exception):
                client.run(os._exit, 1, workers=[first])
            with pytest.raises(
                WorkerLostError, match="during the slow step.*pinned to a worker that is gone"
            ):
                gather_pinned(client, [slow], "the slow step")
        finally:
            client.close()
            cluster.close()
