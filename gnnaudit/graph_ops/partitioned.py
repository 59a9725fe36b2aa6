r"""Kernel-similarity propagation over a node partition (the building block of a distributed run).

:func:`partitioned_ks` computes the same :math:`\mathbf{x}^{agg}` as
:func:`~gnnaudit.graph_ops.neighbourhood.ks_embedding` (CE paper Eq. 5-7) one partition at a
time, each partition seeing only its own rows plus a *halo* of rows owned by other partitions.
It simulates, in one process, what workers holding one partition each would do. Two modes:

``"halo"`` (gather once)
    Partition :math:`P` gathers its :math:`L`-hop in-neighbourhood
    :math:`H_L(P) = \{u : u \text{ reaches } P \text{ in at most } L \text{ hops}\}` once and
    runs the whole :math:`L`-hop propagation on the subgraph induced by :math:`P \cup H_L(P)`,
    keeping only the edges whose target lies within :math:`L - 1` hops of :math:`P`. Exact: a
    node at distance :math:`d` from :math:`P` has all its in-neighbours (at distance
    :math:`\le d + 1`) in the subgraph whenever :math:`d < L`, so by induction on :math:`l` its
    :math:`\mathbf{x}^l` is exact for :math:`l \le L - d`; the rows of :math:`P` (:math:`d = 0`)
    are exact for every :math:`l \le L`. One exchange, but the halo can be most of the graph
    on small-world graphs (every node a few hops from every other).

``"exchange"`` (one hop at a time, bulk-synchronous)
    Per hop :math:`l`, partition :math:`P` gathers the current rows :math:`\mathbf{x}^l` of its
    1-hop in-neighbours :math:`H_1(P)` and computes :math:`\mathbf{x}^{l+1}` of its own rows
    from the edges into :math:`P` (exact degrees, exact cosines). :math:`L` exchanges of the
    1-hop halo; memory per partition: its rows plus the 1-hop halo.

Relabelling is monotone (the subgraph keeps the global order of node ids), so each CSR row
lists the same in-neighbours in the same order as in the full graph and the floating-point
operations per row are the same: the results match the unpartitioned embedding bit for bit,
except where the row rescaling of the Numerics note of
:mod:`~gnnaudit.graph_ops.neighbourhood` triggers for one subset and not for another (rows
near the float range limits), which changes rounding only.

Cost (one process): halo discovery is ``O(L E)`` boolean work per partition over the full
graph (a real deployment learns halos from the partition's boundary instead); the propagation
is that of :func:`ks_embedding` on each partition's subgraph.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from gnnaudit._validation import (
    MAX_NUM_HOPS,
    check_choice,
    check_edge_index,
    check_float,
    check_int,
)
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.neighbourhood import KSGraph, KSPropagation, as_features, ks_embedding

__all__ = ["partitioned_ks", "PartitionedKS", "contiguous_partition", "metis_partition"]

logger = logging.getLogger(__name__)


@dataclass
class PartitionedKS:
    """Result of :func:`partitioned_ks`.

    Attributes
    ----------
    embedding : (num_nodes, d) ``x^agg``, equal to ``ks_embedding(x, edge_index, L, alpha)``.
    mode : ``"halo"`` or ``"exchange"``.
    part_sizes : nodes owned by each partition.
    halo_sizes : rows each partition read from other partitions (``"halo"``: its ``L``-hop
        halo; ``"exchange"``: its 1-hop halo, read once per hop).
    edges : edges each partition propagated over (``"exchange"``: per hop).
    seconds : wall time of each partition (``"exchange"``: summed over hops).
    """

    embedding: Tensor
    mode: str
    part_sizes: list[int] = field(default_factory=list)
    halo_sizes: list[int] = field(default_factory=list)
    edges: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def working_set_bytes(self, num_features: int, itemsize: int = 4) -> list[int]:
        """Estimated peak bytes of each partition's propagation: four ``rows x d`` arrays
        (input, current hop, next hop, sum; ``"exchange"``: two) plus ``3`` int64 and ``2``
        float values per edge, ``rows = own + halo``."""
        arrays = 4 if self.mode == "halo" else 2
        return [
            (own + halo) * num_features * itemsize * arrays + e * (3 * 8 + 2 * itemsize)
            for own, halo, e in zip(self.part_sizes, self.halo_sizes, self.edges, strict=True)
        ]


def contiguous_partition(num_nodes: int, num_parts: int) -> Tensor:
    """Partition ids of ``num_parts`` contiguous ranges of node ids, sizes differing by <= 1."""
    num_nodes = check_int("num_nodes", num_nodes, minimum=1)
    num_parts = check_int("num_parts", num_parts, minimum=1, maximum=num_nodes)
    return torch.arange(num_nodes) * num_parts // num_nodes


def metis_partition(edge_index: Tensor, num_nodes: int, num_parts: int, seed: int = 0) -> Tensor:
    """Partition ids of a METIS k-way partition (``pymetis``, the ``metis`` extra) of the
    graph taken as undirected, without self loops or duplicate edges: parts of balanced
    sizes with few edges between them, hence small halos on a graph with locality (on a
    small-world graph every cut is large). Seeded: the same ``seed`` gives the same parts."""
    from scipy import sparse

    from gnnaudit._optional import require

    pymetis = require("pymetis", "METIS partitioning")
    num_nodes = check_int("num_nodes", num_nodes, minimum=1)
    num_parts = check_int("num_parts", num_parts, minimum=1, maximum=num_nodes)
    if num_parts == 1:
        return torch.zeros(num_nodes, dtype=torch.long)
    src, dst = edge_index[0].cpu().numpy(), edge_index[1].cpu().numpy()
    keep = src != dst
    ones = np.ones(int(keep.sum()), dtype=np.int8)
    adj = sparse.coo_matrix((ones, (src[keep], dst[keep])), shape=(num_nodes, num_nodes)).tocsr()
    adj = (adj + adj.T).tocsr()  # symmetric; summing duplicates leaves one entry per pair
    adjacency = pymetis.CSRAdjacency(adj.indptr.astype(np.int64), adj.indices.astype(np.int64))
    options = pymetis.Options(seed=int(seed))
    _, membership = pymetis.part_graph(num_parts, adjacency=adjacency, options=options)
    return torch.as_tensor(np.asarray(membership), dtype=torch.long)


def _check_parts(parts: Any, num_nodes: int) -> tuple[Tensor, int]:
    parts = torch.as_tensor(parts)
    if parts.dim() != 1 or parts.numel() != num_nodes:
        raise InvalidInputError(
            f"parts must be a 1-D array of one partition id per node ({num_nodes}), got shape "
            f"{tuple(parts.shape)}"
        )
    if parts.is_floating_point() or parts.is_complex() or parts.dtype == torch.bool:
        raise InvalidInputError(f"parts must hold integer partition ids, got dtype {parts.dtype}")
    parts = parts.to(torch.long)
    if int(parts.min()) < 0:
        raise InvalidInputError(f"parts must be >= 0, got {int(parts.min())}")
    return parts, int(parts.max()) + 1


def _expand_in(graph: KSGraph, reach: Tensor, frontier: Tensor) -> Tensor:
    """Nodes with an edge into ``frontier`` that are not yet in ``reach`` (vectorised)."""
    new = torch.zeros_like(reach)
    new[graph.col[frontier[graph.row]]] = True
    return new & ~reach


def _relabel(subset_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Sorted global ids of ``subset_mask`` and the global -> local map (-1 outside)."""
    subset = torch.nonzero(subset_mask).view(-1)
    local = torch.full((subset_mask.numel(),), -1, dtype=torch.long)
    local[subset] = torch.arange(subset.numel())
    return subset, local


def _halo_mode(
    x: Tensor,
    graph: KSGraph,
    owned: list[Tensor],
    num_hops: int,
    alpha: float,
    result: PartitionedKS,
) -> None:
    """``mode="halo"``: each partition gathers its L-hop halo once and runs the whole
    propagation on it; its own rows of the result are exact (module docstring)."""
    out = torch.empty_like(x)
    for own in owned:
        start = time.perf_counter()
        reach, frontier = own.clone(), own
        inner = torch.zeros_like(own)  # L = 0: no edge is needed
        for _ in range(num_hops):
            inner = reach.clone()  # nodes within (hops so far) of P: their edges are kept
            frontier = _expand_in(graph, reach, frontier)
            reach |= frontier
        subset, local = _relabel(reach)
        keep = inner[graph.row]
        sub_edges = torch.stack([local[graph.col[keep]], local[graph.row[keep]]])
        if subset.numel():
            emb = ks_embedding(x[subset], sub_edges, num_hops, alpha)
            out[own] = emb[local[own]]
        result.halo_sizes.append(int(subset.numel()) - int(own.sum()))
        result.edges.append(int(keep.sum()))
        result.seconds.append(time.perf_counter() - start)
    result.embedding = out


def _exchange_mode(
    x: Tensor,
    graph: KSGraph,
    owned: list[Tensor],
    num_hops: int,
    alpha: float,
    result: PartitionedKS,
) -> None:
    """``mode="exchange"``: per hop, each partition updates its own rows from its 1-hop
    halo's current rows (module docstring)."""
    layer = KSPropagation(alpha)
    plans = []
    for own in owned:
        halo = _expand_in(graph, own.clone(), own)
        subset, local = _relabel(own | halo)
        keep = own[graph.row]
        sub = KSGraph.from_edge_index(
            torch.stack([local[graph.col[keep]], local[graph.row[keep]]]), int(subset.numel())
        )
        plans.append((own, subset, local[own], sub))
        result.halo_sizes.append(int(halo.sum()))
        result.edges.append(int(keep.sum()))
    result.seconds = [0.0] * len(owned)
    work = x if x.dtype not in (torch.float16, torch.bfloat16) else x.to(torch.float32)
    total = work.clone()
    cur = work
    with torch.no_grad():
        for _ in range(num_hops):
            nxt = torch.empty_like(cur)
            for p, (own, subset, own_local, sub) in enumerate(plans):
                start = time.perf_counter()
                if subset.numel():
                    nxt[own] = layer(cur[subset], sub)[own_local]
                result.seconds[p] += time.perf_counter() - start
            total += nxt
            cur = nxt
    result.embedding = total.to(x.dtype)


def partitioned_ks(
    x: Tensor,
    edge_index: Tensor,
    parts: Any,
    num_hops: int = 3,
    alpha: float = 0.5,
    *,
    mode: str = "halo",
) -> PartitionedKS:
    r"""``ks_embedding(x, edge_index, num_hops, alpha)`` computed partition by partition.

    Parameters
    ----------
    x : (num_nodes, d) finite float features (as :func:`ks_embedding`).
    edge_index : (2, E) ``source -> target`` edges.
    parts : (num_nodes,) integer partition id of every node (ids ``0..P-1``; an unused id is
        an empty partition), e.g. :func:`contiguous_partition` or a METIS labelling.
    num_hops, alpha : L and alpha of Eq. 5-7.
    mode : ``"halo"`` (gather the L-hop halo once) or ``"exchange"`` (gather the 1-hop halo's
        current rows at every hop); see the module docstring.

    Returns
    -------
    :class:`PartitionedKS`: the embedding (equal to the unpartitioned one) and per-partition
    sizes, halo sizes, edges and seconds.

    Memory: the full embedding plus one partition's working set at a time
    (:meth:`PartitionedKS.working_set_bytes`) and ``O(num_nodes)`` masks.
    """
    x = as_features(x).cpu()
    num_nodes = x.size(0)
    edge_index = check_edge_index("edge_index", edge_index, num_nodes).cpu()
    num_hops = check_int("num_hops", num_hops, minimum=0, maximum=MAX_NUM_HOPS)
    alpha = check_float("alpha", alpha, minimum=0.0, maximum=1.0)
    mode = check_choice("mode", mode, ("halo", "exchange"))
    parts, num_parts = _check_parts(parts, num_nodes)
    graph = KSGraph.from_edge_index(edge_index, num_nodes)
    result = PartitionedKS(embedding=torch.empty(0), mode=mode)
    owned = [parts == p for p in range(num_parts)]
    result.part_sizes = [int(m.sum()) for m in owned]
    if mode == "halo":
        _halo_mode(x, graph, owned, num_hops, alpha, result)
    else:
        _exchange_mode(x, graph, owned, num_hops, alpha, result)
    return result
