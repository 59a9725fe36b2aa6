"""One partition of a graph store on a worker, held for layer-by-layer forward passes, and
the chunks a layer runs in (:mod:`gnnaudit.audit.distributed.layers` runs the layers).

A :class:`ForwardBlock` keeps a partition's node ids, feature rows, halo ids and the edges into
its rows by target (CSR, 4 bytes per edge); :func:`row_chunks` cuts its rows into ranges whose
in-edges fit :data:`FORWARD_CHUNK_BYTES` of per-edge messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gnnaudit.audit.distributed.store import GraphStore, load_part
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.ks_halo import edge_chunks, is_member, outside_ids
from gnnaudit.graph_ops.ks_propagation import row_chunks

__all__ = [
    "FORWARD_CHUNK_BYTES",
    "MIN_CHUNK_ROWS",
    "ForwardBlock",
    "edges_per_chunk",
    "row_chunks",
]


#: the transient memory one chunk of a layer may take on a worker: the edges into a chunk of
#: a partition's rows are processed together, ``(40 + 12 w)`` bytes per edge for a layer of
#: width ``w`` (ids, the gathered and weighted messages, the aggregation; measured 228 B per
#: edge at ``w = 16`` and 61 B at ``w = 2``), so a chunk holds about
#: ``FORWARD_CHUNK_BYTES / (40 + 12 w)`` edges (1.1M edges for a 16-wide layer)
FORWARD_CHUNK_BYTES = 256 * 2**20


def edges_per_chunk(width: int, budget: int = FORWARD_CHUNK_BYTES) -> int:
    """Edges per chunk of a layer of ``width`` channels within ``budget`` bytes."""
    return max(1, int(budget) // (40 + 12 * max(1, int(width))))


#: fewest rows of a chunk: a matrix product over a few rows takes other kernels, whose
#: rounding differs from the whole-graph pass's (measured: ``Linear(16, 2)`` on under 16 rows);
#: chunks of at least this many rows keep the logits equal bit for bit
MIN_CHUNK_ROWS = 64


@dataclass
class ForwardBlock:
    """One partition: its node ids, feature rows, halo ids and the edges into its rows.

    The edges are held by target (CSR over the owned rows): the in-edges of owned row ``i``
    are ``src[ptr[i]:ptr[i+1]]``, in their original order, as local ids (own and halo ids
    merged in global order), int32 where the local rows allow. Memory: 4 B per edge (8 above
    2^31 local rows) plus the rows; a layer then runs chunk by chunk
    (:data:`FORWARD_CHUNK_BYTES`)."""

    own: Tensor
    x: Tensor
    halo: Tensor
    src: Tensor
    ptr: Tensor
    own_local: Tensor
    halo_local: Tensor
    num_local: int

    @classmethod
    def load(cls, store: GraphStore, p: int) -> ForwardBlock:
        """Partition ``p``'s block, read by the worker from the graph store's shared path."""
        part = load_part(store, p)
        own, x, edges = part["own"], part["x"], part["edge_index"]
        src, dst = edges[0], edges[1]
        del part, edges
        halo = outside_ids(src, own)
        subset, order = torch.sort(torch.cat([own, halo]))
        pos = torch.empty_like(order)
        pos[order] = torch.arange(order.numel())
        target = torch.searchsorted(own, dst)
        del dst
        by_target = torch.sort(target, stable=True).indices
        counts = torch.bincount(target, minlength=own.numel())
        del target
        small = subset.numel() < 2**31
        local_src = torch.empty(by_target.numel(), dtype=torch.int32 if small else torch.long)
        for a, b in edge_chunks(int(by_target.numel())):  # 4 B per edge, no int64 copy
            local_src[a:b] = torch.searchsorted(subset, src[by_target[a:b]])
        del by_target, src
        ptr = torch.zeros(own.numel() + 1, dtype=torch.long)
        torch.cumsum(counts, 0, out=ptr[1:])
        return cls(
            own,
            x,
            halo,
            local_src,
            ptr,
            pos[: own.numel()],
            pos[own.numel() :],
            int(subset.numel()),
        )

    def pair_plan(self, other_own: Tensor) -> tuple[Tensor, Tensor]:
        """Halo rows ``other_own``'s partition owns: positions in the halo and in ``other_own``."""
        inside = torch.nonzero(is_member(self.halo, other_own)).view(-1)
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

    def chunk_edges(self, lo: int, hi: int) -> tuple[Tensor, Tensor, Tensor]:
        """``(nodes, edges, targets)`` of the owned rows ``lo..hi-1``: the sorted local ids the
        chunk reads, the edges into the chunk's rows relabelled to positions in ``nodes``
        (original order per target) and the positions of the chunk's rows in ``nodes``. A
        monotone relabelling through a mask over the local rows (``9`` bytes per local row,
        no sort)."""
        a, b = int(self.ptr[lo]), int(self.ptr[hi])
        src = self.src[a:b].to(torch.long)
        tgt = self.own_local[lo:hi]
        mark = torch.zeros(self.num_local, dtype=torch.bool)
        mark[src] = True
        mark[tgt] = True
        relabel = torch.cumsum(mark, 0) - 1
        targets = relabel[tgt]
        dst = torch.repeat_interleave(targets, self.ptr[lo + 1 : hi + 1] - self.ptr[lo:hi])
        edges = torch.stack([relabel[src], dst])
        return torch.nonzero(mark).view(-1), edges, targets

    def own_degree(self, conv: Any, dtype: torch.dtype) -> Tensor:
        """``gcn_norm``'s degree of every own row (exact: all edges into it are here): its
        in-edges, counted once each, with its self loops replaced by one added loop when the
        layer adds self loops (``add_remaining_self_loops`` with unit weights)."""
        counts = (self.ptr[1:] - self.ptr[:-1]).to(dtype)
        if not conv.add_self_loops:
            return counts
        loops = torch.zeros(self.own.numel(), dtype=dtype)
        for lo, hi in row_chunks(self.ptr, edges_per_chunk(1), MIN_CHUNK_ROWS):
            a, b = int(self.ptr[lo]), int(self.ptr[hi])
            # an edge's target row within the chunk: its position among the chunk's rows
            row = torch.repeat_interleave(
                torch.arange(hi - lo), self.ptr[lo + 1 : hi + 1] - self.ptr[lo:hi]
            )
            is_loop = self.src[a:b].to(torch.long) == self.own_local[lo:hi][row]
            loops[lo:hi] = torch.bincount(row[is_loop], minlength=hi - lo).to(dtype)
        return counts - loops + 1.0
