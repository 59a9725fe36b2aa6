r"""One partition's share of the KS propagation with a per-hop halo exchange (worker side).

The building block of the distributed KS embedding (:mod:`gnnaudit.audit.distributed.ks`): a worker
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
halo rows of one hop (``|H_1(P)| x d``), ``2`` int64 values per edge into ``P`` and one
chunk of a hop (:data:`~gnnaudit.graph_ops.ks_propagation.HOP_CHUNK_EDGES` edges). Building
the plan takes the partition's edges (16 bytes per edge, freed), 8 bytes per edge for the
sort keys (sorted in place) and chunks of :data:`EDGE_CHUNK` edges.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.ks_propagation import KSGraph, KSPropagation

__all__ = [
    "HaloBlock",
    "take_rows",
    "first_sum",
    "add_hop",
    "is_member",
    "outside_ids",
    "edge_chunks",
    "EDGE_CHUNK",
]


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
        src, dst = edge_index[0], edge_index[1]
        if dst.numel() and not bool(is_member(dst, own).all()):
            raise InvalidInputError("every edge of a partition must end in one of its own rows")
        halo = outside_ids(src, own)
        subset, order = torch.sort(torch.cat([own, halo]))
        pos = torch.empty_like(order)
        pos[order] = torch.arange(order.numel())
        own_local, halo_local = pos[: own.numel()], pos[own.numel() :]
        n = int(subset.numel())
        keys = torch.empty(int(src.numel()), dtype=torch.long)
        for a, b in edge_chunks(int(src.numel())):  # local target * n + local source
            torch.searchsorted(subset, dst[a:b].to(torch.long), out=keys[a:b])
            keys[a:b].mul_(n).add_(torch.searchsorted(subset, src[a:b].to(torch.long)))
        del src, dst, edge_index  # the caller may pass its last reference: freed here
        graph = KSGraph.from_keys(keys, n)
        return cls(own=own, halo=halo, graph=graph, own_local=own_local, halo_local=halo_local)

    def pair_plan(self, other_own: Tensor) -> tuple[Tensor, Tensor]:
        """The halo rows another partition owns: their positions among this partition's halo
        rows and among ``other_own`` (that partition's sorted ids)."""
        inside = torch.nonzero(is_member(self.halo, other_own)).view(-1)
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


#: edges per chunk of the membership and relabelling passes (their transient memory: about
#: 25 bytes per edge of a chunk, ~100 MB)
EDGE_CHUNK = 1 << 22


def edge_chunks(num: int, size: int | None = None) -> list[tuple[int, int]]:
    """``[a, b)`` ranges of at most ``size`` (default :data:`EDGE_CHUNK`) covering
    ``range(num)``."""
    size = EDGE_CHUNK if size is None else int(size)
    return [(a, min(a + size, num)) for a in range(0, num, size)]


def is_member(ids: Tensor, sorted_ids: Tensor) -> Tensor:
    """``torch.isin(ids, sorted_ids)`` for sorted ``sorted_ids``, by binary search in chunks
    of :data:`EDGE_CHUNK` (1 byte per id beyond the chunk's transient memory)."""
    out = torch.zeros(ids.numel(), dtype=torch.bool)
    if sorted_ids.numel() == 0:
        return out
    last = sorted_ids.numel() - 1
    for a, b in edge_chunks(int(ids.numel())):
        part = ids[a:b].to(torch.long)
        at = torch.searchsorted(sorted_ids, part).clamp_(max=last)
        torch.eq(sorted_ids[at], part, out=out[a:b])
    return out


def outside_ids(ids: Tensor, sorted_ids: Tensor) -> Tensor:
    """The sorted distinct values of ``ids`` not in the sorted ``sorted_ids`` (a partition's
    halo from its edge sources), chunk by chunk: memory of the result and one chunk."""
    found = [
        torch.unique(part[~is_member(part, sorted_ids)])
        for part in (ids[a:b].to(torch.long) for a, b in edge_chunks(int(ids.numel())))
    ]
    if not found:
        return torch.empty(0, dtype=torch.long)
    halo: Tensor = torch.unique(torch.cat(found))
    return halo


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
