r"""Layer-by-layer forward passes of a stacked message-passing model on a Dask cluster, with a
per-layer halo exchange between workers (the forward-pass counterpart of
:mod:`gnnaudit.audit.dist_ks`).

For a model whose forward pass is ``h^{l+1} = relu(conv_l(h^l, edge_index))`` with the
last layer's output as logits (eval mode; :class:`~gnnaudit.training.NodeClassifier`, which
declares it with ``layered_forward = True`` and its ``convs``), each partition ``P`` keeps its
rows ``h^l_P`` and the edges into them. Per layer it receives the rows of its 1-hop
in-neighbours owned elsewhere (as the KS hops do) and computes ``conv_l`` on the subgraph of
``P`` and that halo holding the edges into ``P``: every message into a node of ``P`` is
present, in the original edge order. Memory per worker: its rows, the halo rows of one layer
and the edges into its rows (about ``1/P`` of a whole-graph pass's edge messages), whatever
the graph's diameter; this is what makes the passes fit a worker's memory on a small-world
graph, where the ``(L+1)``-hop ball of :mod:`gnnaudit.audit.dist_forward` is the whole graph.

``GCNConv`` reads the degree of the *source* node of each edge, which a partition does not
see for its halo nodes: the owners compute the degrees of their rows once (the edges into a
node and its self loop, as ``gcn_norm`` counts them) and send those of the halo rows; the
layer then runs with the normalised edge weights computed as ``gcn_norm`` computes them and
``normalize`` switched off (on a shallow copy of the layer). The other layers of ``NodeClassifier`` (``SAGEConv``,
``GATConv``, ``GINConv``, ``GraphConv``) read only the edges into a node. The logits equal
those of a whole-graph pass up to float rounding (the tests check equal predictions and
close logits for every backbone).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from gnnaudit.audit.dist_store import GraphStore, load_part
from gnnaudit.errors import InvalidInputError

__all__ = ["is_layered", "ForwardBlock", "LayeredPlan"]


def is_layered(model: Any) -> bool:
    """Whether ``model`` declares the stacked forward pass of the module docstring."""
    convs = getattr(model, "convs", None)
    return bool(getattr(model, "layered_forward", False)) and isinstance(convs, torch.nn.ModuleList)


@dataclass
class ForwardBlock:
    """One partition: its node ids, feature rows, halo ids and the edges into its rows
    relabelled to the local order (own and halo ids merged in global order)."""

    own: Tensor
    x: Tensor
    halo: Tensor
    edges: Tensor
    own_local: Tensor
    halo_local: Tensor
    num_local: int

    @classmethod
    def load(cls, store: GraphStore, p: int) -> ForwardBlock:
        """Partition ``p``'s block, read by the worker from the graph store's shared path."""
        part = load_part(store, p)
        own, edges = part["own"], part["edge_index"]
        src = edges[0]
        halo = torch.unique(src[~torch.isin(src, own)])
        subset, order = torch.sort(torch.cat([own, halo]))
        pos = torch.empty_like(order)
        pos[order] = torch.arange(order.numel())
        local = torch.stack(
            [torch.searchsorted(subset, edges[0]), torch.searchsorted(subset, edges[1])]
        )
        return cls(
            own, part["x"], halo, local, pos[: own.numel()], pos[own.numel() :], int(subset.numel())
        )

    def pair_plan(self, other_own: Tensor) -> tuple[Tensor, Tensor]:
        """Halo rows ``other_own``'s partition owns: positions in the halo and in ``other_own``."""
        inside = torch.nonzero(torch.isin(self.halo, other_own)).view(-1)
        return inside, torch.searchsorted(other_own, self.halo[inside])

    def local_rows(self, own_rows: Tensor, pieces: list[tuple[Tensor, Tensor]]) -> Tensor:
        """Rows in the local order: own rows and the halo pieces ``(halo positions, rows)``."""
        rows = own_rows.new_empty((self.num_local, own_rows.size(1)))
        rows[self.own_local] = own_rows
        filled = sum(int(pos.numel()) for pos, _ in pieces)
        if filled != self.halo.numel():
            raise InvalidInputError(f"expected {self.halo.numel()} halo rows, got {filled}")
        for pos, piece in pieces:
            rows[self.halo_local[pos]] = piece
        return rows

    def gcn_edges(self, conv: Any, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """The edges and unnormalised weights ``gcn_norm`` would use (self loops added)."""
        from torch_geometric.utils import add_remaining_self_loops

        edges, weight = self.edges, None
        if conv.add_self_loops:
            fill = 2.0 if conv.improved else 1.0
            edges, weight = add_remaining_self_loops(edges, None, fill, self.num_local)
        if weight is None:
            weight = torch.ones(edges.size(1), dtype=dtype)
        return edges, weight

    def own_degree(self, conv: Any, dtype: torch.dtype) -> Tensor:
        """``gcn_norm``'s degree of every own row (exact: all edges into it are here)."""
        edges, weight = self.gcn_edges(conv, dtype)
        deg = torch.zeros(self.num_local, dtype=dtype).index_add_(0, edges[1], weight)
        return deg[self.own_local]


def _is_gcn(conv: Any) -> bool:
    from torch_geometric.nn import GCNConv

    return isinstance(conv, GCNConv)


def _gcn_layer(conv: Any, block: ForwardBlock, h: Tensor, degree: Tensor) -> Tensor:
    """``conv(h, edges)`` on the block with the global degrees (module docstring)."""
    if conv.cached:
        raise InvalidInputError("a GCNConv with cached=True cannot run on partitions")
    edges, weight = block.gcn_edges(conv, h.dtype)
    dis = degree.pow(-0.5)
    dis.masked_fill_(dis == float("inf"), 0)
    weight = dis[edges[0]] * weight * dis[edges[1]]
    plain = copy.copy(conv)  # shares the weights; the model itself is never modified
    plain.normalize = False
    out: Tensor = plain(h, edges, weight)
    return out


def _model(model: Any, loader: Any) -> Any:
    built = loader() if loader is not None else model
    return built.eval()


def _input(block: ForwardBlock, changes: list[Any]) -> Tensor:
    """The block's feature rows with the changes of its own nodes applied."""
    x = block.x.clone() if changes else block.x
    for ids, cols, vals in changes:
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
    model: Any,
    loader: Any,
    index: int,
    h: Tensor,
    degree: Tensor | None,
    *pieces: tuple[Tensor, Tensor],
) -> Tensor:
    """Worker task: layer ``index`` of the model on the block (relu unless the last)."""
    net = _model(model, loader)
    conv = net.convs[index]
    rows = block.local_rows(h, list(pieces))
    with torch.no_grad():
        if _is_gcn(conv):
            assert degree is not None
            out = _gcn_layer(conv, block, rows, degree)
        else:
            out = conv(rows, block.edges)
    out = out[block.own_local]
    return out if index == len(net.convs) - 1 else F.relu(out)


def _degrees(block: ForwardBlock, model: Any, loader: Any, index: int) -> Tensor:
    net = _model(model, loader)
    return block.own_degree(net.convs[index], block.x.dtype)


def _local_degree(block: ForwardBlock, own_deg: Tensor, *pieces: tuple[Tensor, Tensor]) -> Tensor:
    columns = [(pos, rows[:, None]) for pos, rows in pieces]
    return block.local_rows(own_deg[:, None], columns)[:, 0]


def _halo_piece(plan: tuple[Tensor, Tensor], rows: Tensor) -> tuple[Tensor, Tensor]:
    return plan[0], rows[plan[1]]


def _halo_size(block: ForwardBlock) -> int:
    return int(block.halo.numel())


def _own(block: ForwardBlock) -> Tensor:
    return block.own


def _pair(block: ForwardBlock, other_own: Tensor) -> tuple[Tensor, Tensor]:
    return block.pair_plan(other_own)


class LayeredPlan:
    """The blocks, pair plans and GCN degrees of a store on the workers, built once; each
    :meth:`logits` call is one layer-by-layer pass (module docstring)."""

    def __init__(
        self,
        client: Any,
        store: GraphStore,
        workers: list[str],
        model: Any,
        loader: Any,
        num_layers: int,
        gcn_layers: list[int],
    ) -> None:
        self.client, self.model, self.loader = client, model, loader
        self.parts = store.num_parts
        self.where = [workers[p % len(workers)] for p in range(self.parts)]
        self.num_layers = num_layers
        self.blocks = [self.on(p, ForwardBlock.load, store, p) for p in range(self.parts)]
        self.owns = [self.on(p, _own, b) for p, b in enumerate(self.blocks)]
        self.pairs = [(p, q) for p in range(self.parts) for q in range(self.parts) if q != p]
        self.plans = {
            (p, q): self.on(p, _pair, self.blocks[p], self.owns[q]) for p, q in self.pairs
        }
        self.degrees: dict[int, list[Any]] = {}
        for index in gcn_layers:  # one exchange of the degrees per GCN layer, at setup
            own = [self.on(p, _degrees, b, model, loader, index) for p, b in enumerate(self.blocks)]
            self.degrees[index] = [
                self.on(p, _local_degree, self.blocks[p], own[p], *self._pieces(own, p))
                for p in range(self.parts)
            ]
        self.halo_rows = client.gather(
            [self.on(p, _halo_size, b) for p, b in enumerate(self.blocks)]
        )
        self.own_ids: list[Tensor] = client.gather(self.owns)

    def on(self, p: int, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` submitted to the worker that holds partition ``p`` (a future)."""
        return self.client.submit(
            fn, *args, workers=[self.where[p]], allow_other_workers=False, pure=False
        )

    def _pieces(self, rows: list[Any], p: int) -> list[Any]:
        return [
            self.on(q, _halo_piece, self.plans[p, q], rows[q]) for q in range(self.parts) if q != p
        ]

    def logits(self, changes: Any) -> list[tuple[Tensor, Tensor]]:
        """``(own ids, logits)`` of every partition for the graph with ``changes`` applied
        (``changes``: a future of the change list, or the list)."""
        h = [self.on(p, _input, b, changes) for p, b in enumerate(self.blocks)]
        for index in range(self.num_layers):
            deg = self.degrees.get(index, [None] * self.parts)
            h = [
                self.on(
                    p,
                    _layer,
                    self.blocks[p],
                    self.model,
                    self.loader,
                    index,
                    h[p],
                    deg[p],
                    *self._pieces(h, p),
                )
                for p in range(self.parts)
            ]
        try:
            out = self.client.gather(h)
        finally:
            for fut in h:
                fut.release()
        return list(zip(self.own_ids, out, strict=True))
