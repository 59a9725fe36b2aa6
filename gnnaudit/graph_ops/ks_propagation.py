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

__all__ = ["KSGraph", "KSPropagation", "rescale_rows", "ks_input_bound", "HOP_CHUNK_EDGES"]


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


#: edges per chunk of one KS hop (:meth:`KSPropagation.forward`): ~40 bytes of transient
#: memory per edge of a chunk (measured 52 B per edge with the output rows, 8M edges), so
#: about 170 MB whatever the graph's size
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
        if not _products_safe(row_max, x.size(1), x.dtype):
            x = _scale_rows(x, row_max)  # exact: the cosines do not change
        norm = torch.linalg.vector_norm(x, dim=1)
        inv = torch.where(norm > 0, 1.0 / norm.clamp_min(torch.finfo(x.dtype).tiny), 0.0)
        pattern = graph.csr(x.new_zeros(graph.num_edges))
        dots = torch.sparse.sampled_addmm(pattern, x, x.t(), beta=0.0, alpha=1.0).values()
        scale_v = inv if row_scale is None else inv * row_scale
        cosine: Tensor = dots.mul_(scale_v[graph.row]).mul_(inv[graph.col])
        return cosine

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
        xs = x if _products_safe(row_max, x.size(1), x.dtype) else _scale_rows(x, row_max)
        norm = torch.linalg.vector_norm(xs, dim=1)
        inv = torch.where(norm > 0, 1.0 / norm.clamp_min(torch.finfo(xs.dtype).tiny), 0.0)
        scale_v = inv * row_scale
        out = torch.empty_like(x)
        crow = graph.crow
        for lo, hi in _row_ranges(crow, budget):
            a, b = int(crow[lo]), int(crow[hi])
            sub_crow, col = crow[lo : hi + 1] - a, graph.col[a:b]
            shape = (hi - lo, graph.num_nodes)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support.*")
                pattern = torch.sparse_csr_tensor(
                    sub_crow, col, xs.new_zeros(b - a), shape, check_invariants=False
                )
                dots = torch.sparse.sampled_addmm(pattern, xs[lo:hi], xs.t(), beta=0.0).values()
                weight = dots.mul_(scale_v[graph.row[a:b]]).mul_(inv[col])
                adj = torch.sparse_csr_tensor(sub_crow, col, weight, shape, check_invariants=False)
            out[lo:hi] = self.message_and_aggregate(adj, x)
        return out.add_(x, alpha=self.alpha)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:  # edge_index path
        return edge_weight.view(-1, 1) * x_j

    def message_and_aggregate(self, adj_t: Tensor, x: Tensor) -> Tensor:  # fused path
        out: Tensor = torch.sparse.mm(adj_t, x)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(alpha={self.alpha})"


def _row_ranges(crow: Tensor, budget: int) -> list[tuple[int, int]]:
    """Consecutive target-row ranges ``[lo, hi)`` covering all rows, each holding about
    ``budget`` in-edges (a row with more is a range of its own)."""
    rows = int(crow.numel()) - 1
    total = int(crow[-1])
    count = max(1, -(-total // budget))
    cuts = torch.searchsorted(crow, torch.arange(1, count, dtype=torch.long) * total // count)
    bounds = sorted({0, rows, *(int(c) for c in cuts.tolist() if 0 < int(c) < rows)})
    return list(zip(bounds[:-1], bounds[1:], strict=True))


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
