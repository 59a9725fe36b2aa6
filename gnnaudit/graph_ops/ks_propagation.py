"""KS propagation primitives: the coalesced in-neighbour graph (:class:`KSGraph`), one hop of
kernel-similarity propagation as a PyG ``MessagePassing`` layer (:class:`KSPropagation`) and
the exact power-of-two row rescaling that keeps the cosines finite (:func:`rescale_rows`,
:func:`ks_input_bound`). The equations and the numerics are described in
:mod:`gnnaudit.graph_ops.neighbourhood`, which re-exports these names.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.nn.conv import MessagePassing

from gnnaudit._validation import MAX_NUM_HOPS, check_float, check_int
from gnnaudit.errors import InvalidInputError

__all__ = [
    "KSGraph",
    "KSPropagation",
    "rescale_rows",
    "ks_input_bound",
    "HOP_CHUNK_EDGES",
    "row_chunks",
]


@dataclass(frozen=True)
class KSGraph:
    """The propagation graph of :func:`ks_embedding`: in-neighbour sets in CSR form.

    Row ``v`` of the CSR pattern lists the distinct in-neighbours ``u != v`` of ``v`` in
    ascending order. Memory: ``(num_nodes + 1) + 2 * num_edges`` int64 values.

    Attributes
    ----------
    crow : (num_nodes + 1,) int64, CSR row pointers (rows = target nodes).
    col : (num_edges,) int64, source node of each stored edge.
    row : (num_edges,) int64, target node of each stored edge (expanded ``crow``).
    num_nodes : number of nodes.
    """

    crow: Tensor
    col: Tensor
    row: Tensor
    num_nodes: int

    @property
    def num_edges(self) -> int:
        """Number of stored (directed) edges."""
        return int(self.col.numel())

    @property
    def in_degree(self) -> Tensor:
        """Number of distinct in-neighbours (self excluded) of each node, int64."""
        return self.crow[1:] - self.crow[:-1]

    @classmethod
    def from_edge_index(cls, edge_index: Tensor, num_nodes: int) -> KSGraph:
        """Remove self loops, coalesce duplicates and sort by (target, source).

        One sort of the int64 keys ``target * num_nodes + source`` (``O(E log E)`` time);
        memory :func:`KSGraph.from_keys`'s, plus 8 bytes per edge for the keys.
        """
        src, dst = edge_index[0], edge_index[1]
        keys = dst.to(torch.long) * num_nodes
        keys += src
        return cls.from_keys(keys, num_nodes)

    @classmethod
    def from_keys(cls, keys: Tensor, num_nodes: int) -> KSGraph:
        """The graph of the edge keys ``target * num_nodes + source`` (int64, any order,
        duplicates and self loops allowed), which are consumed: sorted in place on the CPU.

        Peak memory above the keys: 9 bytes per edge while self loops and duplicates are
        dropped, then the graph itself (``row`` and ``col``: 16 bytes per edge).
        """
        loops = keys.remainder(num_nodes + 1) == 0  # key = v (n + 1): the self loop v -> v
        if bool(loops.any()):
            keys = keys[~loops]
        del loops
        if keys.device.type == "cpu":
            keys.numpy().sort()  # in place: no second copy of the keys
        else:
            keys = torch.sort(keys).values
        if keys.numel() > 1:
            fresh = torch.ones(keys.numel(), dtype=torch.bool, device=keys.device)
            torch.ne(keys[1:], keys[:-1], out=fresh[1:])
            if not bool(fresh.all()):
                keys = keys[fresh]
            del fresh
        row = torch.div(keys, num_nodes, rounding_mode="floor")
        col = keys.remainder_(num_nodes) if num_nodes else keys
        crow = torch.zeros(num_nodes + 1, dtype=torch.long, device=row.device)
        torch.cumsum(torch.bincount(row, minlength=num_nodes), dim=0, out=crow[1:])
        return cls(crow=crow, col=col, row=row, num_nodes=num_nodes)

    def csr(self, values: Tensor) -> Tensor:
        """A ``torch.sparse_csr`` matrix with this pattern and ``values`` (one per edge)."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support.*")
            return torch.sparse_csr_tensor(
                self.crow,
                self.col,
                values,
                (self.num_nodes, self.num_nodes),
                check_invariants=False,
            )


#: edges per chunk of one KS hop (:meth:`KSPropagation.forward`): the edge values, the
#: sampled products and their gathers take a few tens of bytes per edge of a chunk (an
#: in-process estimate, not a benchmark figure), so ~0.1-0.2 GB whatever the graph's size
HOP_CHUNK_EDGES = 1 << 22


class KSPropagation(MessagePassing):
    r"""One hop of the kernel-similarity propagation (Eq. 5) as a PyG ``MessagePassing``.

    .. math::

        \mathbf{x}'_v = \alpha \mathbf{x}_v + \frac{1-\alpha}{|N(v)|}
            \sum_{u \in N(v)} \cos(\mathbf{x}_v, \mathbf{x}_u)\, \mathbf{x}_u

    ``forward(x, graph)`` takes a :class:`KSGraph` (coalesced, self loops removed). The
    message of edge ``u -> v`` is ``w_uv * x_u`` with
    ``w_uv = (1 - alpha) * cos(x_v, x_u) / |N(v)|``; the messages are summed. Internally the
    edge weights come from one sampled dense-dense product and the aggregation is a fused
    CSR sparse-dense product (:meth:`message_and_aggregate`), so no ``E x d`` message tensor
    is ever materialised. Extra memory per hop: ``O(E)`` for the edge weights plus one
    ``num_nodes x d`` output.
    """

    #: arguments of ``propagate``: the fused path reads ``x``; the plain edge path
    #: (``propagate(edge_index, x=x, edge_weight=w)``) also reads ``edge_weight``.
    propagate_type = {"x": Tensor, "edge_weight": Tensor | None}

    def __init__(self, alpha: float = 0.5) -> None:
        super().__init__(aggr="add", flow="source_to_target")
        self.alpha = check_float("alpha", alpha, minimum=0.0, maximum=1.0)

    def edge_cosine(self, x: Tensor, graph: KSGraph, row_scale: Tensor | None = None) -> Tensor:
        """``cos(x_v, x_u)`` for every stored edge ``u -> v`` (0 when a vector is zero).

        ``row_scale`` (one value per target node ``v``) multiplies the cosines of ``v``'s
        in-edges; it is folded into the same gather. ``x`` must be finite; rows of any
        magnitude are handled exactly (:mod:`gnnaudit.graph_ops.neighbourhood`, Numerics).
        """
        return self._edge_cosine(x, _finite_row_max(x), graph, row_scale)

    def _edge_cosine(
        self, x: Tensor, row_max: Tensor, graph: KSGraph, row_scale: Tensor | None
    ) -> Tensor:
        if graph.num_edges == 0:
            return x.new_zeros(0)
        factors = _cosine_factors(x, row_max, row_scale)
        return _range_cosine(graph, *factors, 0, graph.num_nodes)

    def forward(self, x: Tensor, graph: KSGraph, max_edges: int | None = None) -> Tensor:
        """One hop (Eq. 5) of the finite features ``x`` over ``graph``.

        A graph of more than ``max_edges`` edges (default :data:`HOP_CHUNK_EDGES`) runs in
        chunks of consecutive target rows holding about that many in-edges each: the
        transient memory of a hop (the edge weights and the products: ~40 bytes per edge) is
        then that of one chunk, and every row's cosines and sum are formed as in one piece
        (equal bit for bit; the tests compare).
        """
        row_max = _finite_row_max(x)
        if graph.num_edges == 0 or self.alpha == 1.0:
            return x * self.alpha
        deg = graph.in_degree.to(x.dtype)
        row_scale = (1.0 - self.alpha) / deg.clamp_min(1.0)
        budget = HOP_CHUNK_EDGES if max_edges is None else max(1, int(max_edges))
        if graph.num_edges <= budget:
            weight = self._edge_cosine(x, row_max, graph, row_scale=row_scale)
            adj_t = graph.csr(weight)
            out = self.propagate(adj_t, x=x, edge_weight=None)
            hop: Tensor = out.add_(x, alpha=self.alpha)
            return hop
        return self._chunked(x, row_max, graph, row_scale, budget)

    def _chunked(
        self, x: Tensor, row_max: Tensor, graph: KSGraph, row_scale: Tensor, budget: int
    ) -> Tensor:
        """:meth:`forward` by chunks of target rows (the fused aggregation of
        :meth:`message_and_aggregate` on each chunk's rows of the CSR)."""
        factors = _cosine_factors(x, row_max, row_scale)
        out = torch.empty_like(x)
        for lo, hi in row_chunks(graph.crow, budget):
            weight = _range_cosine(graph, *factors, lo, hi)
            a = int(graph.crow[lo])
            adj = _range_csr(graph, weight, lo, hi, a)
            out[lo:hi] = self.message_and_aggregate(adj, x)
        return out.add_(x, alpha=self.alpha)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:  # edge_index path
        return edge_weight.view(-1, 1) * x_j

    def message_and_aggregate(self, adj_t: Tensor, x: Tensor) -> Tensor:  # fused path
        out: Tensor = torch.sparse.mm(adj_t, x)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(alpha={self.alpha})"


def row_chunks(ptr: Tensor, max_edges: int, min_rows: int = 1) -> list[tuple[int, int]]:
    """Consecutive row ranges ``[lo, hi)`` covering the rows of a CSR ``ptr``: as many as
    ``max_edges`` asks for (``ceil(E / max_edges)``), cut at equal shares of the edges, each of
    at least ``min_rows`` rows (fewer chunks when the rows do not allow it). A chunk holds
    about ``E / chunks`` edges, plus at most one row's in-edges."""
    rows = int(ptr.numel()) - 1
    if rows <= 0:
        return []
    total = int(ptr[-1])
    count = max(1, min(-(-total // max(1, int(max_edges))), rows // max(1, int(min_rows))))
    shares = (torch.arange(1, count, dtype=torch.long) * total) // count
    cuts = torch.searchsorted(ptr, shares).tolist()
    bounds = [0]
    for cut in cuts:  # one per chunk, not per row
        if cut - bounds[-1] >= min_rows and rows - cut >= min_rows:
            bounds.append(int(cut))
    bounds.append(rows)
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _cosine_factors(
    x: Tensor, row_max: Tensor, row_scale: Tensor | None
) -> tuple[Tensor, Tensor, Tensor]:
    """``(x', 1 / |x'|, row_scale / |x'|)``: ``x'`` rescaled exactly where products of ``x``
    could over- or underflow (the cosines do not change), zero rows with factor 0."""
    if not _products_safe(row_max, x.size(1), x.dtype):
        x = _scale_rows(x, row_max)
    norm = torch.linalg.vector_norm(x, dim=1)
    inv = torch.where(norm > 0, 1.0 / norm.clamp_min(torch.finfo(x.dtype).tiny), 0.0)
    return x, inv, inv if row_scale is None else inv * row_scale


def _range_csr(graph: KSGraph, values: Tensor, lo: int, hi: int, a: int) -> Tensor:
    """The CSR rows ``lo..hi-1`` of ``graph`` (edges from ``a``) with ``values``."""
    b = int(graph.crow[hi])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support.*")
        return torch.sparse_csr_tensor(
            graph.crow[lo : hi + 1] - a,
            graph.col[a:b],
            values,
            (hi - lo, graph.num_nodes),
            check_invariants=False,
        )


def _range_cosine(
    graph: KSGraph, x: Tensor, inv: Tensor, scale_v: Tensor, lo: int, hi: int
) -> Tensor:
    """The scaled cosines of the in-edges of target rows ``lo..hi-1`` (one sampled
    dense-dense product over those rows)."""
    a, b = int(graph.crow[lo]), int(graph.crow[hi])
    pattern = _range_csr(graph, x.new_zeros(b - a), lo, hi, a)
    dots = torch.sparse.sampled_addmm(pattern, x[lo:hi], x.t(), beta=0.0, alpha=1.0).values()
    cosine: Tensor = dots.mul_(scale_v[graph.row[a:b]]).mul_(inv[graph.col[a:b]])
    return cosine


def _finite_row_max(x: Tensor) -> Tensor:
    """Largest magnitude of each row; raises if a row holds NaN or inf (they propagate).
    ``amax`` / ``amin`` are vectorised reductions, about 10x faster than the inf-norm."""
    if x.numel() == 0:
        return x.new_zeros(x.size(0))
    row_max = torch.maximum(x.amax(dim=1), x.amin(dim=1).neg())
    if not bool(torch.isfinite(row_max).all()):
        row = int(torch.nonzero(~torch.isfinite(row_max))[0])
        raise InvalidInputError(f"x must be finite (no NaN or inf); row {row} is not")
    return row_max


def _products_safe(row_max: Tensor, d: int, dtype: torch.dtype) -> bool:
    """True when dot products and norms of these rows can neither overflow nor lose
    precision to underflow (:mod:`gnnaudit.graph_ops.neighbourhood`, Numerics)."""
    if row_max.numel() == 0:
        return True
    info = torch.finfo(dtype)
    nonzero = row_max[row_max > 0]
    if nonzero.numel() == 0:
        return True
    return bool(nonzero.max() <= (info.max / (4 * max(d, 1))) ** 0.5) and bool(
        nonzero.min() >= (info.tiny / info.eps) ** 0.5
    )


def _scale_rows(x: Tensor, row_max: Tensor) -> Tensor:
    _, exponent = torch.frexp(row_max)  # row_max = mantissa * 2**exponent, mantissa in [0.5, 1)
    half = torch.div(exponent, 2, rounding_mode="floor")
    one = torch.ones_like(row_max)
    # two factors 2**-half and 2**(half - exponent): each stays representable in x's dtype
    return x * torch.ldexp(one, -half).unsqueeze(1) * torch.ldexp(one, half - exponent).unsqueeze(1)


def rescale_rows(x: Tensor) -> Tensor:
    """``x`` (2-D, finite) with every row multiplied by the power of two that brings its
    largest magnitude into [0.5, 1); zero rows stay zero. A new tensor.

    A power-of-two scaling rounds nothing, so every cosine between rows is unchanged --
    computed bit for bit as from the unscaled rows wherever those do not over- or underflow
    -- while dot products and norms of the scaled rows are safe for rows of any magnitude
    (every entry is below 1, a dot product below d).
    """
    return _scale_rows(x, _finite_row_max(x))


def ks_input_bound(dtype: torch.dtype, num_hops: int) -> float:
    """Largest ``max |x|`` :func:`ks_embedding` accepts for output ``dtype``:
    ``finfo(dtype).max / (2 (num_hops + 1))`` -- ``x^agg`` sums ``num_hops + 1`` vectors none
    larger than ``x`` (:mod:`gnnaudit.graph_ops.neighbourhood`, Numerics); the factor 2 is a margin for rounding. With
    ``num_hops = 0`` the output is ``x`` itself: ``finfo(dtype).max``."""
    num_hops = check_int("num_hops", num_hops, minimum=0, maximum=MAX_NUM_HOPS)
    largest = float(torch.finfo(dtype).max)
    return largest if num_hops == 0 else largest / (2 * (num_hops + 1))
