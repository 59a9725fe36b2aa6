"""The audit's heavy steps on an existing Dask cluster (``run_audit(..., client=...)``).

:func:`setup_distributed` writes the graph to a folder the workers read
(:func:`~gnnaudit.audit.distributed.store.write_graph_store`, one partition per worker by default) and
returns a :class:`DistributedAudit`, which the
:class:`~gnnaudit.audit.context.AuditContext` uses for

* the model's forward passes (the factual predictions, the graph-scope counterfactual passes,
  node scope's whole-graph passes restricted to the batch's rows, the proxies' flips):
  :class:`~gnnaudit.audit.distributed.forward.RemoteForward`, one task per partition on its
  receptive-field ball;
* the KS embedding of the evidence search: :func:`~gnnaudit.audit.distributed.ks.distributed_ks`,
  partitions on the workers with a per-hop halo exchange, gathered for the search (the exact
  backend then also searches on the workers; the approximate backends search here).

What stays in this process: the graph as loaded (to write the store and for the statistics),
the evidence search of the approximate backends, node scope's small subgraph passes, the
proxies' hidden-layer probe (one whole-graph pass with a hook) and every statistic. The model
reaches the workers as ``model_loader`` (a picklable function they call, e.g. reading the
checkpoint from the shared path) or, without one, sent once to every worker directly from
this process (never through the scheduler).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch_geometric.nn import GCNConv

from gnnaudit._validation import check_int
from gnnaudit.audit.distributed.forward import (
    RemoteForward,
    bytes_sent,
    cluster_workers,
    halo_bytes,
)
from gnnaudit.audit.distributed.ks import distributed_ks
from gnnaudit.audit.distributed.layers import is_layered
from gnnaudit.audit.distributed.store import GraphStore, write_graph_store
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.audit.sensitivity.receptive_field import resolve_num_hops
from gnnaudit.errors import InvalidInputError

__all__ = ["DistributedAudit", "setup_distributed", "default_num_parts"]

logger = logging.getLogger(__name__)


def default_num_parts(data: Any, workers: int) -> int:
    """Partitions of ``data`` for ``workers`` workers: one per worker (never more than nodes).

    One partition per worker keeps a worker's halo to one partition's: on a small-world graph
    the halo of every partition is nearly the whole graph, so ``k`` partitions on a worker
    receive ``k`` times the halo rows per layer (at 10M nodes, 9 partitions on 3 workers
    reached 5.6 GB per worker in the forward passes, one partition on each of 4 workers
    2.0-2.9 GB: ``benchmarks/results/distributed_audit.md``). Pass ``num_parts`` to choose
    otherwise."""
    return min(int(workers), max(1, int(data.x.size(0))))


@dataclass
class DistributedAudit:
    """The cluster side of one audit: the client, the graph store, the remote forward passes
    and what the KS step measured (for the report's run information)."""

    client: Any
    store: GraphStore
    remote: RemoteForward
    workers: list[str]
    stats: dict[str, Any] = field(default_factory=dict)

    def ks(self, num_hops: int, alpha: float) -> torch.Tensor:
        """The KS embedding computed on the workers (:func:`distributed_ks`), gathered here."""
        start = time.perf_counter()
        self.remote.release()  # a worker holds the forward blocks or the KS blocks, not both
        result = distributed_ks(self.client, self.store, num_hops, alpha)
        try:
            out = result.gather()
        finally:
            result.release()
        self.stats.update(
            ks_seconds=round(time.perf_counter() - start, 3),
            ks_halo_rows_per_hop=int(sum(result.halo_rows)),
            ks_halo_bytes=int(result.halo_bytes),
        )
        return out

    def summary(self) -> dict[str, Any]:
        """Run information: workers, partitions, store folder, forward passes and their
        seconds, KS figures, the halo bytes the workers cut for one another
        (``halo_bytes_sent``, gnnaudit's count since the workers started) and dask's own
        transfer counter (``worker_bytes_sent``)."""
        out: dict[str, Any] = {
            "workers": len(self.workers),
            "partitions": self.store.num_parts,
            "store": self.store.folder,
            "forward_passes": self.remote.passes,
            "forward_mode": "layered halo exchange"
            if self.remote.layered
            else "ball per partition",
            "forward_halo_rows_per_layer": self.remote.halo_rows,
            "forward_seconds": round(self.remote.seconds, 3),
            **self.stats,
        }
        out["halo_bytes_sent"] = halo_bytes(self.client)
        try:
            out["worker_bytes_sent"] = bytes_sent(self.client)
        except Exception as exc:  # a counter missing in another dask version: no figure
            logger.debug("no transfer counters: %s", exc)
        return out


def setup_distributed(
    client: Any,
    model: Any,
    data: Any,
    *,
    shared_dir: Any = None,
    num_parts: int | None = None,
    partition: Any = "contiguous",
    model_loader: Any = None,
    model_hops: int | None = None,
    forward_kwargs: Any = None,
    predict_fn: Any = None,
) -> DistributedAudit | None:
    """The :class:`DistributedAudit` of ``client`` (None without a client; module docstring).

    ``shared_dir``: a folder every worker can read, where the graph store is written (or a
    :class:`~gnnaudit.audit.distributed.store.GraphStore` already written); default a new temporary
    folder, which only workers on this machine can read (a ``LocalCluster``). ``num_parts``:
    partitions (default: :func:`default_num_parts`); ``partition``: ``"contiguous"``,
    ``"metis"`` or one partition id per node
    (:func:`~gnnaudit.audit.distributed.store.write_graph_store`).
    ``model_loader``: a picklable function building the model on a worker (default: the model
    object is sent to the workers). ``model_hops``: the model's receptive-field radius
    (default: inferred from its message-passing layers).
    """
    if client is None:
        return None
    if forward_kwargs:
        raise InvalidInputError(
            "client= cannot be combined with forward_kwargs: per-edge arguments cannot be cut to "
            "a partition's subgraph (use predict_fn, or audit without client=)"
        )
    if model_loader is not None and not callable(model_loader):
        raise InvalidInputError(
            f"model_loader must be a picklable function building the model, got "
            f"{type(model_loader).__name__}"
        )
    workers = cluster_workers(client)
    adapter = ModelAdapter.wrap(model, predict_fn=predict_fn)
    hops = resolve_num_hops(adapter, model_hops)
    if isinstance(shared_dir, GraphStore):
        store = shared_dir
        if store.num_nodes != int(data.x.size(0)):
            raise InvalidInputError(
                f"shared_dir holds a store of {store.num_nodes} nodes, the graph has "
                f"{int(data.x.size(0))}"
            )
    else:
        parts = default_num_parts(data, len(workers)) if num_parts is None else num_parts
        parts = check_int("num_parts", parts, minimum=1, maximum=int(data.x.size(0)))
        folder = shared_dir if shared_dir is not None else tempfile.mkdtemp(prefix="gnnaudit-")
        store = write_graph_store(data, os.fspath(folder), parts, parts=partition)
    net = adapter.model
    layered = is_layered(net) and predict_fn is None
    remote = RemoteForward(
        client,
        store,
        hops,
        model=None if model_loader is not None else net,
        loader=model_loader,
        predict_fn=predict_fn,
        layered=layered,
        gcn_layers=[i for i, c in enumerate(net.convs) if isinstance(c, GCNConv)]
        if layered
        else [],
        num_layers=len(net.convs) if layered else 0,
    )
    logger.info(
        "distributed audit: %d workers, %d partitions, store %s",
        len(workers),
        store.num_parts,
        store.folder,
    )
    label = partition if isinstance(partition, str) else "given labelling"
    if isinstance(shared_dir, GraphStore):
        label = "as stored"
    return DistributedAudit(client, store, remote, workers, stats={"partition": label})
