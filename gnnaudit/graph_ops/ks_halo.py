r"""One partition's share of the KS propagation with a per-hop halo exchange (worker side).

The building block of the distributed KS embedding (:mod:`gnnaudit.audit.dist_ks`): a worker
owns the rows ``P`` of a node partition and the edges *into* them. Per hop :math:`l` it
receives the current rows :math:`\mathbf{x}^l_u` of its 1-hop in-neighbours owned elsewhere
(the halo :math:`H_1(P)`) and computes :math:`\mathbf{x}^{l+1}_v` (CE paper Eq. 5) of its own
rows, with exact in-degrees and cosines, from the subgraph on :math:`P \cup H_1(P)` holding the
edges into :math:`P`. It is the ``"exchange"`` mode of
:func:`~gnnaudit.graph_ops.partitioned.partitioned_ks` split so that each partition lives in
its own process.

Exactness: the local node order is the global order of the ids (a monotone relabelling), so
every CSR row lists the same in-neighbours in the same order as
:func:`~gnnaudit.graph_ops.ks_embedding` and the floating-point work per row is the same;
the running sum is formed in the same order (``x + x^1``, then ``+= x^l``). The results are
equal bit for bit except where the row rescaling of the Numerics note of
:mod:`~gnnaudit.graph_ops.neighbourhood` triggers for one subset and not for another (rows
near the float range limits), which changes rounding only.

Memory per partition: its own rows (input, current, next, sum: four ``|P| x d`` arrays), the
halo rows of one hop (``|H_1(P)| x d``) and ``3`` int64 + ``2`` float values per edge into
``P``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.ks_propagation import KSGraph, KSPropagation

__all__ = ["HaloBlock", "take_rows", "first_sum", "add_hop"]


@dataclass
class HaloBlock:
    """The propagation plan of one partition.

    Attributes
    ----------
    own : (|P|,) sorted global ids of the owned rows.
    halo : (|H|,) sorted global ids of the in-neighbours of ``P`` outside ``P``.
    graph : :class:`KSGraph` over the local rows (``own`` and ``halo`` merged in global order)
        holding the distinct edges into ``P`` (self loops removed).
    own_local, halo_local : positions of ``own`` / ``halo`` among the local rows.
    """

    own: Tensor
    halo: Tensor
    graph: KSGraph
    own_local: Tensor
    halo_local: Tensor

    @classmethod
    def build(cls, own: Tensor, edge_index: Tensor) -> HaloBlock:
        """Plan of the partition owning ``own`` (sorted, distinct global ids), from the edges
        ``edge_index`` (2, E_P) whose targets all lie in ``own`` (global ids)."""
        own = own.to(torch.long)
        if own.numel() > 1 and not bool((own[1:] > own[:-1]).all()):
            raise InvalidInputError("own must hold sorted, distinct node ids")
        src, dst = edge_index[0].to(torch.long), edge_index[1].to(torch.long)
        del edge_index  # the caller may pass its last reference: freed with src / dst below
        if dst.numel() and not bool(torch.isin(dst, own).all()):
            raise InvalidInputError("every edge of a partition must end in one of its own rows")
        halo = torch.unique(src[~torch.isin(src, own)])
        subset, order = torch.sort(torch.cat([own, halo]))
        pos = torch.empty_like(order)
        pos[order] = torch.arange(order.numel())
        own_local, halo_local = pos[: own.numel()], pos[own.numel() :]
        local = torch.empty((2, int(src.numel())), dtype=torch.long)
        if src.numel():
            torch.searchsorted(subset, src, out=local[0])
            torch.searchsorted(subset, dst, out=local[1])
        del src, dst
        graph = KSGraph.from_edge_index(local, int(subset.numel()))
        return cls(own=own, halo=halo, graph=graph, own_local=own_local, halo_local=halo_local)

    def pair_plan(self, other_own: Tensor) -> tuple[Tensor, Tensor]:
        """The halo rows another partition owns: their positions among this partition's halo
        rows and among ``other_own`` (that partition's sorted ids)."""
        inside = torch.nonzero(torch.isin(self.halo, other_own)).view(-1)
        return inside, _positions(other_own, self.halo[inside])

    def step(self, alpha: float, cur_own: Tensor, pieces: list[tuple[Tensor, Tensor]]) -> Tensor:
        r"""``x^{l+1}`` of the owned rows from their ``x^l`` (``cur_own``) and the halo rows:
        ``pieces`` of ``(halo positions, rows)`` (one per other partition, from
        :meth:`pair_plan` and :func:`take_rows`) that together cover the halo."""
        rows = cur_own.new_empty((self.graph.num_nodes, cur_own.size(1)))
        rows[self.own_local] = cur_own
        filled = sum(int(pos.numel()) for pos, _ in pieces)
        if filled != self.halo.numel():
            raise InvalidInputError(f"expected {self.halo.numel()} halo rows, got {filled}")
        for pos, piece in pieces:
            rows[self.halo_local[pos]] = piece
        with torch.no_grad():
            out: Tensor = KSPropagation(alpha)(rows, self.graph)
        return out[self.own_local]


def _positions(sorted_ids: Tensor, ids: Tensor) -> Tensor:
    """Positions of ``ids`` (all present) in the sorted tensor ``sorted_ids``."""
    return torch.searchsorted(sorted_ids, ids)


def take_rows(rows: Tensor, positions: Tensor) -> Tensor:
    """``rows[positions]`` (the halo block one partition sends another)."""
    return rows[positions]


def first_sum(x_own: Tensor, hop: Tensor) -> Tensor:
    """``x + x^1`` (the running sum after the first hop, as :func:`ks_embedding` forms it)."""
    return x_own + hop


def add_hop(total: Tensor, hop: Tensor) -> Tensor:
    """``total + x^l`` (the same rounding as the in-place ``+=`` of :func:`ks_embedding`;
    out of place, so a re-run task never sees a changed input)."""
    return total + hop
