r"""Layer-by-layer forward passes of a stacked message-passing model on a Dask cluster, with a
per-layer halo exchange between workers (the forward-pass counterpart of
:mod:`gnnaudit.audit.distributed.ks`).

For a model whose forward pass is ``h^{l+1} = relu(conv_l(h^l, edge_index))`` with the
last layer's output as logits (eval mode; :class:`~gnnaudit.training.NodeClassifier`, which
declares it with ``layered_forward = True`` and its ``convs``), each partition ``P`` keeps its
rows ``h^l_P`` and the edges into them. Per layer it receives the rows of its 1-hop
in-neighbours owned elsewhere (as the KS hops do) and computes ``conv_l`` at its rows from
the edges into them, every message into a node of ``P`` present, in the original edge order.

Memory per worker, bounded whatever the graph's diameter: the block (its rows, the halo ids
and 4 bytes per edge into its rows, held by target), the rows of one layer (own and halo,
``w`` values each), and one *chunk* at a time: a layer runs over consecutive ranges of the
partition's rows whose in-edges take at most
:data:`~gnnaudit.audit.distributed.block.FORWARD_CHUNK_BYTES` (256 MiB) of per-edge messages,
``(40 + 12 w)`` bytes per edge (measured 228 B at ``w = 16``). A whole-graph pass instead
materialises every edge's message at once (3 GB for the 13 M edges of a 1M-node credit
graph); this is what makes the passes fit a worker's memory on a small-world graph, where
the ``(L+1)``-hop ball of :mod:`gnnaudit.audit.distributed.forward` is the whole graph. Chunks hold
at least :data:`~gnnaudit.audit.distributed.block.MIN_CHUNK_ROWS` rows (matrix products over a few
rows round differently).

``GCNConv`` reads the degree of the *source* node of each edge, which a partition does not
see for its halo nodes: the owners compute the degrees of their rows once (the edges into a
node and its self loop, as ``gcn_norm`` counts them) and send those of the halo rows; the
layer then runs with the normalised edge weights computed as ``gcn_norm`` computes them and
``normalize`` switched off (on a shallow copy of the layer). The other layers of
``NodeClassifier`` (``SAGEConv``, ``GATConv``, ``GINConv``, ``GraphConv``) read only the
edges into a node. The logits equal those of a whole-graph pass bit for bit (the tests check
``torch.equal`` for every backbone, in one chunk per partition and in many).

:meth:`LayeredPlan.hidden` gives the input of a module of the last layer at chosen rows (the
proxies' probe of the hidden representation), collected chunk by chunk.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from gnnaudit._distributed import count_halo, gather_pinned
from gnnaudit.audit.distributed.block import (
    FORWARD_CHUNK_BYTES,
    MIN_CHUNK_ROWS,
    ForwardBlock,
    edges_per_chunk,
    row_chunks,
)
from gnnaudit.audit.distributed.store import AddRows, GraphStore
from gnnaudit.errors import InvalidInputError

__all__ = ["is_layered", "LayeredPlan", "InputProbe"]


def is_layered(model: Any) -> bool:
    """Whether ``model`` declares the stacked forward pass of the module docstring."""
    convs = getattr(model, "convs", None)
    return bool(getattr(model, "layered_forward", False)) and isinstance(convs, torch.nn.ModuleList)


def _is_gcn(conv: Any) -> bool:
    from torch_geometric.nn import GCNConv

    return isinstance(conv, GCNConv)


def _gcn_chunk(conv: Any, x: Tensor, edges: Tensor, targets: Tensor, degree: Tensor) -> Tensor:
    """``conv(x, edges)`` at ``targets`` with the global degrees ``degree`` of the rows of
    ``x`` (module docstring): the edges and weights ``gcn_norm`` forms (self loops moved to
    the end of each target's in-edges, unit weights), then the layer with ``normalize`` off."""
    if conv.cached:
        raise InvalidInputError("a GCNConv with cached=True cannot run on partitions")
    if conv.add_self_loops:
        keep = edges[0] != edges[1]
        edges = torch.cat([edges[:, keep], targets.expand(2, -1)], dim=1)
    weight = torch.ones(edges.size(1), dtype=x.dtype)
    dis = degree.pow(-0.5)
    dis.masked_fill_(dis == float("inf"), 0)
    weight = dis[edges[0]] * weight * dis[edges[1]]
    plain = copy.copy(conv)  # shares the weights; the model itself is never modified
    plain.normalize = False
    out: Tensor = plain(x, edges, weight)
    return out


def _layer_width(conv: Any, width_in: int) -> int:
    """The widest per-edge message of ``conv``: its input or output channels (x heads)."""
    out = getattr(conv, "out_channels", width_in)
    heads = getattr(conv, "heads", 1)
    return max(width_in, int(out) * int(heads) if isinstance(out, int) else width_in)


class InputProbe:
    """The input of one module at chosen rows, collected pass by pass or chunk by chunk
    (:meth:`LayeredPlan.hidden`, ball mode's probe task); :attr:`rows` stays None when the module's input is not one
    row per node of the chunk. The module's ``forward`` is wrapped on the instance (what a
    forward hook sees: the first positional input), so give it a private copy of the module:
    a model sent through dask cannot take hooks (its hook tables arrive as plain dicts)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.seen: list[Tensor] = []
        self.rows: Tensor | None = None
        self.failed = False
        original = module.forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            if args and torch.is_tensor(args[0]):
                self.seen.append(args[0].detach())
            return original(*args, **kwargs)

        module.forward = forward

    def keep(self, lo: int, hi: int, num_nodes: int, targets: Tensor, num_own: int) -> None:
        """Record the last call's input at the chunk's rows ``lo..hi-1``."""
        got = self.seen[-1] if self.seen else None
        self.seen.clear()
        if self.failed or got is None or got.dim() != 2 or got.size(0) != num_nodes:
            self.failed, self.rows = True, None
            return
        if self.rows is None:
            self.rows = got.new_empty((num_own, int(got.size(1))))
        self.rows[lo:hi] = got[targets]


def _conv_rows(
    conv: Any,
    block: ForwardBlock,
    rows: Tensor,
    degree: Tensor | None,
    budget: int,
    probe: InputProbe | None = None,
) -> Tensor:
    """``conv`` at the block's own rows, chunk by chunk of at most ``budget`` bytes (each
    chunk: its rows, the edges into them and their sources); ``probe`` collects the input of
    one of its modules at the own rows."""
    if block.own.numel() == 0:  # a partition without rows (a labelling may leave one empty)
        empty = torch.empty((2, 0), dtype=torch.long)
        if degree is not None:
            return _gcn_chunk(conv, rows[:0], empty, empty[0], degree[:0])
        out0: Tensor = conv(rows[:0], empty)
        return out0
    out: Tensor | None = None
    width = _layer_width(conv, int(rows.size(1)))
    for lo, hi in row_chunks(block.ptr, edges_per_chunk(width, budget), MIN_CHUNK_ROWS):
        nodes, edges, targets = block.chunk_edges(lo, hi)
        if degree is not None:
            got = _gcn_chunk(conv, rows[nodes], edges, targets, degree[nodes])
        else:
            got = conv(rows[nodes], edges)
        got = got[targets]
        if probe is not None:
            probe.keep(lo, hi, int(nodes.numel()), targets, int(block.own.numel()))
        if out is None:
            out = got.new_empty((int(block.own.numel()), int(got.size(1))))
        out[lo:hi] = got
    assert out is not None  # at least one chunk: the block has rows
    return out


def _model(model: Any, loader: Any) -> Any:
    """Worker task: the model in eval mode, built by ``loader`` when given (once per worker
    and plan: :class:`LayeredPlan` holds the result and the layer tasks read it)."""
    built = loader() if loader is not None else model
    return built.eval()


def _input(block: ForwardBlock, changes: list[Any]) -> Tensor:
    """The block's feature rows with the changes of its own nodes applied."""
    x = block.x.clone() if changes else block.x
    for change in changes:
        if isinstance(change, AddRows):
            x = x + change.rows(block.own, x.dtype)
            continue
        ids, cols, vals = change
        ids_t = torch.as_tensor(np.asarray(ids), dtype=torch.long)
        mine = torch.isin(ids_t, block.own)
        if not bool(mine.any()):
            continue
        cols_t = torch.as_tensor(list(cols), dtype=torch.long)
        v = np.asarray(vals)
        if v.ndim == 2 and v.shape[0] == ids_t.numel():  # one row per changed node
            v = v[mine.numpy()]
        rows = torch.searchsorted(block.own, ids_t[mine])
        full = np.broadcast_to(v, (rows.numel(), cols_t.numel()))
        x[rows[:, None], cols_t[None, :]] = torch.as_tensor(np.array(full), dtype=x.dtype)
    return x


def _layer(
    block: ForwardBlock,
    net: Any,
    index: int,
    h: Tensor,
    degree: Tensor | None,
    budget: int,
    *pieces: tuple[Tensor, Tensor],
) -> Tensor:
    """Worker task: layer ``index`` of the model on the block (relu unless the last), in
    chunks of at most ``budget`` bytes (``net``: the worker's built model, read only)."""
    conv = net.convs[index]
    rows = block.local_rows(h, list(pieces))
    with torch.no_grad():
        out = _conv_rows(conv, block, rows, degree if _is_gcn(conv) else None, budget)
    return out if index == len(net.convs) - 1 else F.relu(out)


def _probe_layer(
    block: ForwardBlock,
    net: Any,
    index: int,
    h: Tensor,
    degree: Tensor | None,
    budget: int,
    module: str,
    wanted: np.ndarray,
    *pieces: tuple[Tensor, Tensor],
) -> tuple[Tensor, Tensor] | None:
    """Worker task: the input of the model's module ``module`` (inside layer ``index``) at
    the block's rows among ``wanted`` (sorted ids): ``(ids, rows)``, or None when that input
    is not one row per node."""
    target = dict(net.named_modules()).get(module)
    inside = [n for n, m in net.convs[index].named_modules() if m is target]
    if target is None or not inside:
        return None
    conv = copy.deepcopy(net.convs[index])  # a private copy whose module InputProbe wraps
    probe = InputProbe(dict(conv.named_modules())[inside[0]])
    rows = block.local_rows(h, list(pieces))
    with torch.no_grad():
        _conv_rows(conv, block, rows, degree if _is_gcn(conv) else None, budget, probe)
    if probe.rows is None:
        return None
    mine = torch.isin(block.own, torch.as_tensor(wanted, dtype=torch.long))
    return block.own[mine], probe.rows[mine]


def _degrees(block: ForwardBlock, net: Any, index: int) -> Tensor:
    return block.own_degree(net.convs[index], block.x.dtype)


def _local_degree(block: ForwardBlock, own_deg: Tensor, *pieces: tuple[Tensor, Tensor]) -> Tensor:
    columns = [(pos, rows[:, None]) for pos, rows in pieces]
    return block.local_rows(own_deg[:, None], columns)[:, 0]


def _halo_piece(plan: tuple[Tensor, Tensor], rows: Tensor) -> tuple[Tensor, Tensor]:
    out: tuple[Tensor, Tensor] = count_halo((plan[0], rows[plan[1]]))
    return out


def _halo_size(block: ForwardBlock) -> int:
    return int(block.halo.numel())


def _own(block: ForwardBlock) -> Tensor:
    return block.own


def _pair(block: ForwardBlock, other_own: Tensor) -> tuple[Tensor, Tensor]:
    return block.pair_plan(other_own)


class LayeredPlan:
    """The blocks, pair plans, GCN degrees and the built model (one per worker) of a store on the
    workers, built once; each :meth:`logits` call is one layer-by-layer pass (module docstring)."""

    def __init__(
        self,
        client: Any,
        store: GraphStore,
        workers: list[str],
        model: Any,
        loader: Any,
        num_layers: int,
        gcn_layers: list[int],
        chunk_bytes: int = FORWARD_CHUNK_BYTES,
    ) -> None:
        self.client = client
        self.chunk_bytes = int(chunk_bytes)
        self.parts = store.num_parts
        self.where = [workers[p % len(workers)] for p in range(self.parts)]
        self.num_layers = num_layers
        # the model, built once per worker and held there for every layer task of the plan
        # (a loader reading a checkpoint runs once per worker, not once per layer and pass)
        self.nets = {
            w: client.submit(
                _model, model, loader, workers=[w], allow_other_workers=False, pure=False
            )
            for w in dict.fromkeys(self.where)
        }
        self.blocks = [self.on(p, ForwardBlock.load, store, p) for p in range(self.parts)]
        self.owns = [self.on(p, _own, b) for p, b in enumerate(self.blocks)]
        self.pairs = [(p, q) for p in range(self.parts) for q in range(self.parts) if q != p]
        self.plans = {
            (p, q): self.on(p, _pair, self.blocks[p], self.owns[q]) for p, q in self.pairs
        }
        self.degrees: dict[int, list[Any]] = {}
        for index in gcn_layers:  # one exchange of the degrees per GCN layer, at setup
            own = [
                self.on(p, _degrees, b, self.nets[self.where[p]], index)
                for p, b in enumerate(self.blocks)
            ]
            self.degrees[index] = [
                self.on(p, _local_degree, self.blocks[p], own[p], *self._pieces(own, p))
                for p in range(self.parts)
            ]
        self.halo_rows = gather_pinned(
            client,
            [self.on(p, _halo_size, b) for p, b in enumerate(self.blocks)],
            "loading the partitions",
        )
        self.own_ids: list[Tensor] = gather_pinned(client, self.owns, "loading the partitions")

    def release(self) -> None:
        """Free the blocks, plans, degrees and models held by the workers (the plan is
        unusable afterwards)."""
        held = [*self.blocks, *self.owns, *self.plans.values(), *self.nets.values()]
        held += [fut for futures in self.degrees.values() for fut in futures]
        for fut in held:
            if fut is not None:
                fut.release()
        self.blocks, self.owns, self.plans, self.degrees, self.nets = [], [], {}, {}, {}

    def on(self, p: int, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` submitted to the worker that holds partition ``p`` (a future)."""
        return self.client.submit(
            fn, *args, workers=[self.where[p]], allow_other_workers=False, pure=False
        )

    def _pieces(self, rows: list[Any], p: int) -> list[Any]:
        return [
            self.on(q, _halo_piece, self.plans[p, q], rows[q]) for q in range(self.parts) if q != p
        ]

    def _run(self, changes: Any, layers: int) -> list[Any]:
        """Futures of every partition's output of the first ``layers`` layers."""
        h = [self.on(p, _input, b, changes) for p, b in enumerate(self.blocks)]
        for index in range(layers):
            h = [
                self.on(p, _layer, *self._layer_args(index, h, p), *self._pieces(h, p))
                for p in range(self.parts)
            ]
        return h

    def _layer_args(self, index: int, h: list[Any], p: int) -> tuple[Any, ...]:
        deg = self.degrees.get(index, [None] * self.parts)
        net = self.nets[self.where[p]]
        return (self.blocks[p], net, index, h[p], deg[p], self.chunk_bytes)

    def logits(self, changes: Any) -> list[tuple[Tensor, Tensor]]:
        """``(own ids, logits)`` of every partition for the graph with ``changes`` applied
        (``changes``: a future of the change list, or the list)."""
        logits, _ = self._last_layer(changes, None, "a layer-by-layer forward pass of the model")
        return logits

    def hidden(self, module: str, wanted: np.ndarray) -> list[tuple[Tensor, Tensor] | None]:
        """Per partition, ``(ids, input of the module named module)`` at its rows among
        ``wanted`` (the module lies in the last layer), or None where that input is not one
        row per node: the proxies' hidden-representation probe on the factual graph."""
        _, got = self._last_layer(None, (module, wanted), "the proxies' hidden-representation pass")
        return got

    def logits_and_hidden(
        self, changes: Any, module: str, wanted: np.ndarray
    ) -> tuple[list[tuple[Tensor, Tensor]], list[tuple[Tensor, Tensor] | None]]:
        """:meth:`logits` and :meth:`hidden` from one pass: the probe reads the last layer's
        input that the pass computes anyway (the first ``L - 1`` layers and their halo pieces
        run once)."""
        step = "a layer-by-layer forward pass of the model and the proxies' probe"
        return self._last_layer(changes, (module, wanted), step)

    def _last_layer(
        self, changes: Any, probe: tuple[str, np.ndarray] | None, step: str
    ) -> tuple[list[tuple[Tensor, Tensor]], list[tuple[Tensor, Tensor] | None]]:
        """The first ``L - 1`` layers, then the last one (``changes`` not None: the logits)
        and / or the probe of its module's input (``probe = (module, wanted)``), gathered."""
        last = self.num_layers - 1
        h = self._run([] if changes is None else changes, last)
        pieces = [self._pieces(h, p) for p in range(self.parts)]
        outs, probes = [], []
        for p in range(self.parts):
            args = self._layer_args(last, h, p)
            if changes is not None:
                outs.append(self.on(p, _layer, *args, *pieces[p]))
            if probe is not None:
                probes.append(self.on(p, _probe_layer, *args, *probe, *pieces[p]))
        try:
            got = gather_pinned(self.client, [*outs, *probes], step)
        finally:
            for fut in [*h, *outs, *probes]:
                fut.release()
        logits = list(zip(self.own_ids, got[: len(outs)], strict=True)) if outs else []
        return logits, got[len(outs) :]
