r"""The model's forward passes on the workers of a Dask cluster, one task per partition.

:class:`RemoteForward` computes the logits of the audited model on the graph of a
:class:`~gnnaudit.audit.distributed.store.GraphStore`, optionally with some feature values changed (a
counterfactual graph), without running the model on the whole graph in one process. Partition
``p``'s task, on its worker:

1. reads the graph and the partition ids from the shared folder (once per worker process
   and store: kept for the next passes), and applies the changed values to a copy;
2. takes its target rows (its own nodes, or those of the requested ``rows`` it owns) and
   their :math:`(L+1)`-hop ball :math:`B` along the edges taken in both directions;
3. runs the model on the subgraph induced by :math:`B` (edges in their original order, ids
   relabelled monotonically) and returns the target rows' logits.

Exactness: an :math:`L`-layer message-passing model's output at a node depends only on its
:math:`L`-hop in-neighbourhood; the extra hop keeps the degree of every node within :math:`L`
hops exact (degree-normalised convolutions such as GCN read it), and the symmetric ball makes
this hold for either message direction. This is the construction of node scope's subgraph
passes (:mod:`gnnaudit.audit.sensitivity.node_scope`); the logits equal those of a whole-graph
pass up to float rounding (the tests check the predictions are equal and the logits close).
A model that reads more than :math:`L` hops (``num_hops`` too small) is caught by the node-scope
safeguard. ``forward_kwargs`` (per-edge arguments) cannot be cut to a subgraph: they are
refused here.

Cost: on a graph with locality a partition's ball is its rows plus a boundary, so the work and
memory per worker are about ``1/P`` of a whole-graph pass. On a small-world graph (the
synthetic credit graph: every node within a few hops of every other) the 4-hop ball of a
partition is the whole graph, and each task is a whole-graph pass: the passes then run *on*
the workers (freeing the client) but not in less memory per worker (docs/scaling.md).
Node-scope passes ask only for a batch's ``rows``: only the partitions owning them run, on
the balls of those rows.

The model reaches the workers either as an object sent to every worker once
(``client.scatter``, straight from the client to the workers) or through ``loader``, a
picklable function the workers call to build it (e.g. reading a checkpoint from a shared path:
``functools.partial(load_node_classifier, path)``).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from gnnaudit._distributed import (
    check_client,
    gather_pinned,
    halo_bytes_sent,
    transferred_bytes,
    worker_addresses,
)
from gnnaudit._validation import MAX_NUM_HOPS, check_int
from gnnaudit.audit.distributed.block import FORWARD_CHUNK_BYTES
from gnnaudit.audit.distributed.layers import InputProbe, LayeredPlan
from gnnaudit.audit.distributed.store import AddRows, GraphStore, load_graph, load_parts
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.errors import InvalidInputError

__all__ = [
    "RemoteForward",
    "ball_subgraph",
    "Change",
    "cluster_workers",
    "bytes_sent",
    "halo_bytes",
]

logger = logging.getLogger(__name__)

#: one change of a counterfactual graph: node ids, feature columns, new values (one row shared
#: by every node or one row per node)
Change = tuple[np.ndarray, Sequence[int], np.ndarray]


def cluster_workers(client: Any) -> list[str]:
    """The sorted worker addresses of ``client`` (validated: a connected
    ``dask.distributed.Client`` with at least one worker)."""
    checked = check_client(client)
    if checked is None:
        raise InvalidInputError("a dask.distributed.Client is needed, got None")
    return worker_addresses(checked)


def halo_bytes(client: Any) -> int:
    """Bytes of halo pieces the workers of ``client`` have cut for one another so far."""
    return halo_bytes_sent(client)


def bytes_sent(client: Any) -> int:
    """Bytes the workers of ``client`` have sent each other so far (dask's counters)."""
    return transferred_bytes(client)


def ball_subgraph(
    edge_index: torch.Tensor, num_nodes: int, seeds: torch.Tensor, num_hops: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(ball, sub_edges)``: the sorted ids within ``num_hops`` hops of ``seeds`` (edges in
    both directions) and the edges of the induced subgraph (original order, relabelled); when
    the ball is the whole graph, ``sub_edges`` is None (use ``edge_index`` itself). Time
    ``O(num_hops E)``, memory ``O(n + E)`` booleans."""
    src, dst = edge_index[0], edge_index[1]
    reach = torch.zeros(num_nodes, dtype=torch.bool)
    reach[seeds] = True
    for _ in range(num_hops):
        new = reach.clone()
        new[dst[reach[src]]] = True
        new[src[reach[dst]]] = True
        if bool((new == reach).all()):
            break
        reach = new
    ball = torch.nonzero(reach).view(-1)
    if ball.numel() == num_nodes:
        return ball, None
    keep = reach[src] & reach[dst]
    local = torch.full((num_nodes,), -1, dtype=torch.long)
    local[ball] = torch.arange(ball.numel())
    return ball, torch.stack([local[src[keep]], local[dst[keep]]])


def apply_changes(x: torch.Tensor, changes: Sequence[Change | AddRows]) -> torch.Tensor:
    """A copy of ``x`` with ``x[ids, cols] = values`` for every change (in order); an
    :class:`AddRows` adds its array."""
    if not changes:
        return x
    x = x.clone()
    for change in changes:
        if isinstance(change, AddRows):
            x = x + change.rows(torch.arange(x.size(0)), x.dtype)
            continue
        ids, cols, vals = change
        ids_t = torch.as_tensor(np.asarray(ids), dtype=torch.long)
        if ids_t.numel() == 0:
            continue
        cols_t = torch.as_tensor(list(cols), dtype=torch.long)
        v = np.broadcast_to(np.asarray(vals), (ids_t.numel(), cols_t.numel()))
        x[ids_t[:, None], cols_t[None, :]] = torch.as_tensor(np.array(v), dtype=x.dtype)
    return x


#: per worker process: the graph of the last store read, ``(folder, stamp) -> (x, edge_index,
#: parts)`` (the passes of one audit read the same store; one entry: one graph in memory)
_GRAPH_CACHE: dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def _cached_graph(store: GraphStore) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The store's graph and partition ids, read once per worker process while the graph
    file is unchanged."""
    key = (store.folder, store.path("graph.pt").stat().st_mtime_ns)
    if key not in _GRAPH_CACHE:
        _GRAPH_CACHE.clear()
        _GRAPH_CACHE[key] = (*load_graph(store), load_parts(store))
    return _GRAPH_CACHE[key]


def _partition_logits(
    store: GraphStore,
    p: int,
    model: Any,
    loader: Callable[[], Any] | None,
    predict_fn: Any,
    num_hops: int,
    changes: Sequence[Change],
    rows: np.ndarray | None,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Worker task (module docstring): ``(target ids, their logits, ball size)``."""
    x, edge_index, parts = _cached_graph(store)
    own = torch.nonzero(parts == p).view(-1)
    if rows is not None:
        own = own[torch.isin(own, torch.as_tensor(rows, dtype=torch.long))]
    if own.numel() == 0:
        return own, torch.empty(0), 0
    x = apply_changes(x, changes)
    ball, sub = ball_subgraph(edge_index, int(x.size(0)), own, num_hops + 1)
    if loader is not None:
        model = loader()
    adapter = ModelAdapter.wrap(model, predict_fn=predict_fn, device="cpu")
    stage = f"a forward pass of partition {p} on a dask worker"
    if sub is None:
        out = adapter.logits(x, edge_index, stage=stage)
        return own, out[own], int(ball.numel())
    out = adapter.logits(x[ball], sub, stage=stage)
    return own, out[torch.searchsorted(ball, own)], int(ball.numel())


def _partition_hidden(
    store: GraphStore,
    p: int,
    model: Any,
    loader: Callable[[], Any] | None,
    predict_fn: Any,
    num_hops: int,
    module: str,
    wanted: np.ndarray,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Worker task: the input of the model's module ``module`` at partition ``p``'s rows
    among ``wanted``, from a pass on their ball (None: not one row per node)."""
    x, edge_index, parts = _cached_graph(store)
    own = torch.nonzero(parts == p).view(-1)
    own = own[torch.isin(own, torch.as_tensor(wanted, dtype=torch.long))]
    if own.numel() == 0:
        return own, torch.empty(0)
    ball, sub = ball_subgraph(edge_index, int(x.size(0)), own, num_hops + 1)
    built = copy.deepcopy(loader() if loader is not None else model)  # wrapped: a private copy
    adapter = ModelAdapter.wrap(built, predict_fn=predict_fn, device="cpu")
    target = dict(adapter.model.named_modules()).get(module)
    if target is None:
        return None
    probe = InputProbe(target)
    adapter.logits(x if sub is None else x[ball], edge_index if sub is None else sub)
    size = int(x.size(0)) if sub is None else int(ball.numel())
    at = own if sub is None else torch.searchsorted(ball, own)
    probe.keep(0, int(own.numel()), size, at, int(own.numel()))
    return None if probe.rows is None else (own, probe.rows)


class RemoteForward:
    """Logits of a model on the graph of ``store``, computed by ``client``'s workers.

    Parameters
    ----------
    client : a ``dask.distributed.Client``.
    store : the graph on a shared path (:func:`~gnnaudit.audit.distributed.store.write_graph_store`).
    num_hops : the model's receptive-field radius L (balls have L + 1 hops).
    model : the model, sent to every worker once (picklable); or None with ``loader``.
    loader : picklable function the workers call to build the model (e.g. from a checkpoint
        on the shared path).
    predict_fn : as :class:`~gnnaudit.audit.model_adapter.ModelAdapter` (picklable).

    Calling it, ``forward(changes, rows)``, returns the ``(n, C)`` logits of the graph with
    ``changes`` applied; with ``rows`` only the partitions owning them run, on those rows'
    balls, and the other rows are :attr:`fill` (the factual logits once
    :meth:`set_fill` gave them; zeros before). Counters: :attr:`passes`, :attr:`seconds`,
    :attr:`ball_rows` (nodes of all balls, summed over passes).

    ``layered=True`` (a model declaring the stacked forward of
    :mod:`gnnaudit.audit.distributed.layers`, e.g. a ``NodeClassifier``): the passes run layer by
    layer with a halo exchange per layer instead (memory per worker about ``1/P`` of a
    whole-graph pass on any graph); ``rows`` then do not restrict the work. ``gcn_layers``:
    the indices of its ``GCNConv`` layers (their degrees are exchanged once); ``chunk_bytes``:
    the transient memory of one chunk of a layer on a worker
    (:data:`~gnnaudit.audit.distributed.block.FORWARD_CHUNK_BYTES` by default).
    """

    def __init__(
        self,
        client: Any,
        store: GraphStore,
        num_hops: int,
        *,
        model: Any = None,
        loader: Callable[[], Any] | None = None,
        predict_fn: Any = None,
        layered: bool = False,
        gcn_layers: Sequence[int] = (),
        num_layers: int = 0,
        chunk_bytes: int = FORWARD_CHUNK_BYTES,
    ) -> None:
        self.client = check_client(client)
        if self.client is None:
            raise InvalidInputError("RemoteForward needs a dask.distributed.Client")
        if not isinstance(store, GraphStore):
            raise InvalidInputError(f"store must be a GraphStore, got {type(store).__name__}")
        if (model is None) == (loader is None):
            raise InvalidInputError("give either model or loader (a function building it)")
        if loader is not None and not callable(loader):
            raise InvalidInputError(f"loader must be callable, got {type(loader).__name__}")
        self.store = store
        self.num_hops = check_int("num_hops", num_hops, minimum=0, maximum=MAX_NUM_HOPS)
        self.loader = loader
        self.predict_fn = predict_fn
        self.workers = worker_addresses(self.client)
        self.model = None
        if model is not None:
            if isinstance(model, ModelAdapter):
                model = model.model
            self.model = self.client.scatter(model, broadcast=True, hash=False)
        self.layered = bool(layered) and predict_fn is None
        self._layer_args = (int(num_layers), list(gcn_layers))
        self.chunk_bytes = check_int("chunk_bytes", chunk_bytes, minimum=1)
        self._plan: LayeredPlan | None = None
        self.halo_rows = 0
        self.fill: torch.Tensor | None = None
        self.passes = 0
        self.seconds = 0.0
        self.ball_rows = 0
        #: (module, sorted rows) the next factual pass also probes (:meth:`keep_hidden`)
        self._keep: tuple[str, np.ndarray] | None = None
        #: module -> (sorted rows, per-partition probe) kept from a factual pass
        self._kept: dict[str, tuple[np.ndarray, list[Any]]] = {}

    def keep_hidden(self, module: str, rows: np.ndarray) -> None:
        """Ask the next factual pass (no changes, every row) to keep the input of the module
        named ``module`` at ``rows``, so that :meth:`hidden` on them needs no pass of its own
        (layer-by-layer mode: the probe reads the last layer's input, which the pass computes
        anyway; ball mode: ignored, the probe runs its own pass)."""
        if self.layered:
            self._keep = (str(module), np.unique(np.asarray(rows, dtype=np.int64)))

    def set_fill(self, logits: torch.Tensor) -> None:
        """Rows not computed by a pass with ``rows`` take these (the factual logits)."""
        self.fill = logits.detach().cpu()

    def __call__(
        self, changes: Sequence[Change] = (), rows: np.ndarray | None = None
    ) -> torch.Tensor:
        start = time.perf_counter()
        client = self.client
        shipped = client.scatter([list(changes)], broadcast=True, hash=False)[0]
        if self.layered:
            keep = self._keep if not changes and rows is None else None  # a factual pass
            self._keep = None if keep is not None else self._keep
            try:
                if keep is None:
                    logits = self._layered().logits(shipped)
                else:
                    logits, probed = self._layered().logits_and_hidden(shipped, *keep)
                    self._kept[keep[0]] = (keep[1], probed)
            finally:
                shipped.release()
            return self._done([(ids, lg, 0) for ids, lg in logits], start)
        wanted = None if rows is None else np.unique(np.asarray(rows, dtype=np.int64))
        try:
            parts = self._ball_tasks(
                _partition_logits, "a forward pass of the model", shipped, wanted
            )
        finally:
            shipped.release()
        return self._done(parts, start)

    def hidden(self, module: str, rows: np.ndarray) -> torch.Tensor | None:
        """The input of the model's module named ``module`` (a name of
        ``model.named_modules()``) at ``rows``, in the order of ``rows``, on the factual
        graph; None when that input is not one row per node (the proxies' probe)."""
        start = time.perf_counter()
        wanted = np.unique(np.asarray(rows, dtype=np.int64))
        kept = self._kept.get(module)
        if kept is not None and np.array_equal(kept[0], wanted):
            parts = kept[1]  # read by the factual pass (keep_hidden): no pass of its own
        else:
            if self.layered:
                parts = self._layered().hidden(module, wanted)
            else:
                step = "the proxies' hidden-representation pass"
                parts = self._ball_tasks(_partition_hidden, step, module, wanted)
            self.passes += 1
            self.seconds += time.perf_counter() - start
        if any(part is None for part in parts):
            return None
        found = [(ids, h) for ids, h in parts if ids.numel()]  # type: ignore[misc]
        if not found:
            return None
        ids = torch.cat([i for i, _ in found])
        values = torch.cat([h for _, h in found])
        order = torch.argsort(ids)
        ids, values = ids[order], values[order]
        pos = torch.searchsorted(ids, torch.as_tensor(np.asarray(rows), dtype=torch.long))
        out: torch.Tensor = values[pos]
        return out

    def release(self) -> None:
        """Free what the layer-by-layer plan holds on the workers (its blocks); the next pass
        builds it again. The KS step calls this, so that a worker holds the forward blocks or
        the KS blocks, never both."""
        if self._plan is not None:
            self._plan.release()
            self._plan = None

    def _ball_tasks(self, fn: Callable[..., Any], step: str, *args: Any) -> list[Any]:
        """``fn(store, p, model, loader, predict_fn, num_hops, *args)`` for every partition
        ``p`` on its worker (ball mode), gathered."""
        futures = [
            self.client.submit(
                fn,
                self.store,
                p,
                self.model,
                self.loader,
                self.predict_fn,
                self.num_hops,
                *args,
                workers=[self.workers[p % len(self.workers)]],
                allow_other_workers=False,
                pure=False,
            )
            for p in range(self.store.num_parts)
        ]
        try:
            out: list[Any] = gather_pinned(self.client, futures, step)
        finally:
            for fut in futures:
                fut.release()
        return out

    def _layered(self) -> LayeredPlan:
        """The layer-by-layer plan, built on the first pass."""
        if self._plan is None:
            num_layers, gcn_layers = self._layer_args
            self._plan = LayeredPlan(
                self.client,
                self.store,
                self.workers,
                self.model,
                self.loader,
                num_layers,
                gcn_layers,
                self.chunk_bytes,
            )
            self.halo_rows = int(sum(self._plan.halo_rows))
        return self._plan

    def _done(
        self, parts: list[tuple[torch.Tensor, torch.Tensor, int]], start: float
    ) -> torch.Tensor:
        out = self._assemble(parts)
        self.passes += 1
        self.seconds += time.perf_counter() - start
        return out

    def _assemble(self, parts: list[tuple[torch.Tensor, torch.Tensor, int]]) -> torch.Tensor:
        """The full logits from the partitions' ``(ids, logits, ball size)``."""
        width = next((int(lg.size(1)) for ids, lg, _ in parts if ids.numel()), None)
        if width is None:
            raise InvalidInputError("no partition computed any row (rows matched no node)")
        dtype = next(lg.dtype for ids, lg, _ in parts if ids.numel())
        n = self.store.num_nodes
        if self.fill is not None and tuple(self.fill.shape) == (n, width):
            out = self.fill.clone().to(dtype)
        else:
            out = torch.zeros((n, width), dtype=dtype)
        for ids, lg, ball in parts:
            if ids.numel():
                out[ids] = lg
            self.ball_rows += int(ball)
        return out
