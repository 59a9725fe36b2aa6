r"""L-hop kernel-similarity (KS) propagation of the counterfactual-evidence paper (Eq. 5-7).

Starting from :math:`\mathbf{x}^0 = \mathbf{X}`, each hop :math:`l = 0, \dots, L-1` computes

.. math::

    \mathbf{x}^{l+1}_v = \alpha\, \mathbf{x}^l_v
        + \frac{1-\alpha}{|N(v)|} \sum_{u \in N(v)}
          \cos(\mathbf{x}^l_v, \mathbf{x}^l_u)\, \mathbf{x}^l_u ,
    \qquad
    \cos(\mathbf{a}, \mathbf{b}) = \frac{\mathbf{a}\cdot\mathbf{b}}{\|\mathbf{a}\|_2 \|\mathbf{b}\|_2},

and the embedding is :math:`\mathbf{x}^{agg}_v = \sum_{l=0}^{L} \mathbf{x}^l_v`; the kernel
similarity of two nodes is :math:`KS(v, u) = \cos(\mathbf{x}^{agg}_v, \mathbf{x}^{agg}_u)`.

Conventions (the paper leaves them open; these are ours):

* :math:`N(v)` is the **set** of in-neighbours of ``v`` along ``edge_index`` (an edge
  ``(u, v)`` means ``u -> v``; undirected graphs carry both directions). Duplicate edges are
  coalesced (counted once) and self loops are removed.
* A node without in-neighbours keeps :math:`\mathbf{x}^{l+1}_v = \alpha \mathbf{x}^l_v` (the sum
  term is 0, no division by zero).
* The cosine with a zero vector is 0.
* No normalisation happens between hops.

Implementation: per hop, the edge cosines are one *sampled dense-dense product*
(``torch.sparse.sampled_addmm``: :math:`\langle \mathbf{x}_v, \mathbf{x}_u \rangle` only at the
graph's non-zeros, no :math:`|E| \times d` gather), and the aggregation is one CSR sparse-dense
product inside a PyG :class:`~torch_geometric.nn.conv.MessagePassing` layer
(:class:`KSPropagation`). A hop therefore costs about two sparse-dense products.

Numerics (any finite input, no silent NaN or inf):

* The cosines are invariant to scaling each row, so when the rows' magnitudes could overflow
  a dot product or a norm (largest entry above :math:`\sqrt{\text{max}/(4d)}`, 8e17 in
  float32 at d = 500) or lose precision to underflow (a row whose largest entry is below
  :math:`\sqrt{\text{tiny}/\text{eps}}`, 3e-16 in float32), each row is first multiplied by
  a power of two bringing its largest entry into [0.5, 1) (:func:`rescale_rows`). That is
  exact -- the cosines computed are bit for bit those of the unscaled rows wherever those do
  not overflow -- so no result changes, and 1e20 (float32) or 1e200 (float64) entries work.
* The propagation sums are *not* per-row scale invariant, but they never grow: every hop is
  a convex-like combination with :math:`|\cos| \le 1`, so every entry of
  :math:`\mathbf{x}^l` is bounded by :math:`\max|\mathbf{X}|` and of :math:`\mathbf{x}^{agg}`
  by :math:`(L+1)\max|\mathbf{X}|`. Only the output itself can overflow: input with
  :math:`\max|\mathbf{X}| > \text{max}/(2(L+1))` (:func:`ks_input_bound`; 4.3e37 for float32
  at L = 3) is rejected with an :class:`~gnnaudit.errors.InvalidInputError` naming the bound.
  (A global rescale of X would be exact for KS, but ``ks_embedding`` returns
  :math:`\mathbf{x}^{agg}` itself; :class:`~gnnaudit.audit.CounterfactualEvidence`, which
  needs only cosines, computes such input in float64 instead.)
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data, HeteroData
from torch_geometric.transforms import BaseTransform

from gnnaudit._validation import (
    MAX_NUM_HOPS,
    check_device,
    check_edge_index,
    check_float,
    check_int,
)
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.ks_propagation import (  # re-exported: public names of this module
    KSGraph,
    KSPropagation,
    ks_input_bound,
    rescale_rows,
)

__all__ = [
    "ks_embedding",
    "ks_input_bound",
    "rescale_rows",
    "KSEmbedding",
    "KSPropagation",
    "KSGraph",
    "l_hop_subgraph",
    "as_features",
]

logger = logging.getLogger(__name__)


def as_features(x: Any) -> Tensor:
    """``x`` as a 2-D floating-point tensor of node features (clear errors otherwise)."""
    if not isinstance(x, Tensor):
        try:
            x = torch.as_tensor(x)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise InvalidInputError(f"x must be a 2-D array of numbers, got {exc}") from exc
    if x.dim() != 2:
        raise InvalidInputError(
            f"x must have shape [num_nodes, num_features], got {tuple(x.shape)}"
        )
    if x.size(0) == 0:
        raise InvalidInputError("x must have at least one node (row), got 0")
    if x.is_complex():
        raise InvalidInputError(f"x must be real-valued, got dtype {x.dtype}")
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    # a finite sum proves every entry finite (NaN / inf propagate); else find the culprit
    if not bool(torch.isfinite(x.sum())) and not bool(torch.isfinite(x).all()):
        bad = torch.nonzero(~torch.isfinite(x))[0].tolist()
        raise InvalidInputError(
            f"x must be finite (no NaN or inf); found {x[bad[0], bad[1]].item()} at index {tuple(bad)}"
        )
    out: Tensor = x.detach()
    return out


def _check_magnitude(x: Tensor, num_hops: int) -> float:
    """The largest ``|x|``; an :class:`~gnnaudit.errors.InvalidInputError` above
    :func:`ks_input_bound` (``x^agg`` could overflow the dtype)."""
    bound = ks_input_bound(x.dtype, num_hops)
    low, high = torch.aminmax(x) if x.numel() else (x.new_zeros(()), x.new_zeros(()))
    largest = max(float(high), -float(low))
    if largest > bound:
        raise InvalidInputError(
            f"x has entries up to {largest:.3g} in magnitude; x^agg sums num_hops + 1 = "
            f"{num_hops + 1} vectors no larger than x, so {x.dtype} needs max |x| <= "
            f"finfo({x.dtype}).max / (2 (num_hops + 1)) = {bound:.3g} (ks_input_bound). "
            "Rescale x (the kernel similarity is invariant to a global scale) or pass float64 "
            "features"
        )
    return largest


@torch.no_grad()
def _propagate(x: Tensor, graph: KSGraph, num_hops: int, alpha: float, progress: bool) -> Tensor:
    r""":math:`\sum_{l=0}^{L} \mathbf{x}^l` of the module docstring (a copy of ``x`` for
    ``L = 0``), with a tqdm bar over the hops when ``progress``."""
    if num_hops == 0:
        return x.clone()
    layer = KSPropagation(alpha)
    out = cur = x
    hops: Any = range(num_hops)
    if progress:
        from tqdm.auto import tqdm

        hops = tqdm(hops, desc="KS propagation", unit="hop")
    for hop in hops:
        cur = layer(cur, graph)
        out = x + cur if hop == 0 else out.add_(cur)
    return out


def ks_embedding(
    x: Tensor,
    edge_index: Tensor,
    num_hops: int = 3,
    alpha: float = 0.5,
    *,
    progress: bool = False,
    device: Any = None,
) -> Tensor:
    r"""Kernel-similarity embedding :math:`\mathbf{x}^{agg} = \sum_{l=0}^{L} \mathbf{x}^l` (Eq. 5-7).

    See the module docstring for the recursion and its conventions (in-neighbour *sets*:
    duplicate edges counted once, self loops ignored, empty neighbourhood contributes 0,
    cosine with a zero vector is 0, no normalisation between hops).

    Parameters
    ----------
    x : (num_nodes, d) float tensor, finite, with ``max |x| <=``
        :func:`ks_input_bound` ``(dtype, num_hops)`` (else ``x^agg`` would overflow the dtype:
        :class:`~gnnaudit.errors.InvalidInputError`). Integer/bool features are cast to the
        default float dtype; otherwise the output dtype follows ``x`` (float16 / bfloat16
        inputs are propagated in float32 and the result cast back). Rows of very large or very
        small magnitude are handled exactly (module doc, Numerics).
    edge_index : (2, E) integer tensor of ``source -> target`` edges.
    num_hops : 0 <= L <= :data:`~gnnaudit._validation.MAX_NUM_HOPS` (256; more hops are
        refused before any work, see its note; ``0`` returns a copy of ``x``).
    alpha : trade-off in ``[0, 1]`` between a node's own vector and its neighbourhood.
    progress : show a tqdm bar over the hops.
    device : where the propagation runs: ``None`` / ``"auto"`` (default) the device of ``x``,
        or ``"cpu"``, ``"cuda"``, ``"cuda:N"``, a ``torch.device``. The same torch operations run
        on every device (CSR sampled products and sparse-dense products), so the results agree
        with the CPU path to float rounding.

    Returns
    -------
    (num_nodes, d) tensor ``x^agg`` (cosine of two rows = ``KS``) on that device.

    Cost and memory bound: time ``O(L (E d + n d) + E log E)`` (per hop one sampled dense-dense
    product and one CSR sparse-dense product). Peak memory is about four ``n x d`` arrays
    (``x``, current hop, next hop, running sum) plus ``O(E)`` (``3`` int64 and ``2`` float values
    per distinct edge); no ``E x d`` intermediate is ever built (one more ``n x d`` array per
    hop only when the rows must be rescaled, see Numerics).
    """
    x = as_features(x)
    target = check_device("device", device, auto=x.device)
    x = x.to(target)
    num_nodes = x.size(0)
    edge_index = check_edge_index("edge_index", edge_index, num_nodes).to(target)
    num_hops = check_int("num_hops", num_hops, minimum=0, maximum=MAX_NUM_HOPS)
    alpha = check_float("alpha", alpha, minimum=0.0, maximum=1.0)

    out_dtype = x.dtype
    largest = _check_magnitude(x, num_hops)
    if x.dtype in (torch.float16, torch.bfloat16):  # no half-precision sparse kernels on CPU
        x = x.to(torch.float32)
    graph = KSGraph.from_edge_index(edge_index, num_nodes)
    out = _propagate(x, graph, num_hops, alpha, progress).to(out_dtype)
    # excluded by the bound above; never silent (a finite sum proves every entry finite)
    if not bool(torch.isfinite(out.sum())) and not bool(torch.isfinite(out).all()):
        raise InvalidInputError(
            f"ks_embedding produced non-finite values for x with max |x| = {largest:.3g} "
            f"({out_dtype}); rescale x or pass float64 features"
        )
    logger.debug(
        "ks_embedding: %d nodes, %d distinct edges, %d hops", num_nodes, graph.num_edges, num_hops
    )
    return out


class KSEmbedding(BaseTransform):
    r"""PyG transform writing the kernel-similarity embedding ``data.ks`` (:func:`ks_embedding`).

    Also records its parameters as ``data.ks_params = {"num_hops": L, "alpha": alpha}`` (0-d
    int64 / float64 tensors, exact through PyG's collation), so that a consumer
    (:class:`~gnnaudit.audit.CounterfactualEvidence`) can reuse ``data.ks`` when it asks for
    the same parameters (:meth:`recorded_params`).

    PyG contract: :meth:`BaseTransform.__call__ <torch_geometric.transforms.BaseTransform>`
    hands :meth:`forward` a shallow copy, to which the new attributes are added, so the input
    is never modified (``x`` and ``edge_index`` are shared, not copied). It composes in
    ``T.Compose`` and works as ``transform=`` or ``pre_transform=`` of a PyG dataset (its
    ``repr`` names both parameters, which PyG stores to detect a changed ``pre_transform``).

    * A :class:`~torch_geometric.data.Batch` is transformed in one pass over its block-diagonal
      graph: the propagation follows edges only, and a batch's edges never join two graphs
      (checked: such an edge is an :class:`~gnnaudit.errors.InvalidInputError`), so every
      graph gets exactly its own embedding. ``ks`` and ``ks_params`` are registered with the
      batch's slices, so ``get_example`` / ``to_data_list`` return them per graph.
    * :class:`~torch_geometric.data.HeteroData` is refused with an ``InvalidInputError``
      (Eq. 5-7 need one feature space; convert with ``to_homogeneous()`` first).
    """

    def __init__(self, num_hops: int = 3, alpha: float = 0.5) -> None:
        self.num_hops = check_int("num_hops", num_hops, minimum=0, maximum=MAX_NUM_HOPS)
        self.alpha = check_float("alpha", alpha, minimum=0.0, maximum=1.0)

    def forward(self, data: Data) -> Data:
        """Add ``ks`` and ``ks_params`` to ``data`` (the copy made by ``__call__``)."""
        if isinstance(data, HeteroData):
            raise InvalidInputError(
                "KSEmbedding needs a homogeneous graph (Data or Batch), got HeteroData with node "
                f"types {list(data.node_types)}; convert it with data.to_homogeneous() first"
            )
        if getattr(data, "x", None) is None or getattr(data, "edge_index", None) is None:
            raise InvalidInputError("data must have node features data.x and data.edge_index")
        slices = getattr(data, "_slice_dict", None) if isinstance(data, Batch) else None
        if slices is not None:
            self._check_batch_edges(data)
        data.ks = ks_embedding(data.x, data.edge_index, self.num_hops, self.alpha)
        if slices is None:
            data.ks_params = self._params_record()
            return data
        # a Batch: per-graph parameter records, and both attributes registered with the slices
        num_graphs = int(data.num_graphs)
        record = self._params_record()
        data.ks_params = {key: value.repeat(num_graphs) for key, value in record.items()}
        per_graph = torch.arange(num_graphs + 1)
        no_increment = torch.zeros(num_graphs, dtype=torch.long)
        data._slice_dict = {
            **slices,
            "ks": slices["x"],
            "ks_params": {key: per_graph for key in record},
        }
        data._inc_dict = {
            **data._inc_dict,
            "ks": no_increment,
            "ks_params": {key: no_increment for key in record},
        }
        return data

    @staticmethod
    def _check_batch_edges(batch: Batch) -> None:
        """Raise if an edge of the batch joins two of its graphs (then propagation would mix
        them)."""
        graph_of = batch.batch
        edge_index = batch.edge_index
        if graph_of is None or edge_index.numel() == 0:
            return
        crossing = graph_of[edge_index[0]] != graph_of[edge_index[1]]
        if bool(crossing.any()):
            first = int(torch.nonzero(crossing)[0])
            raise InvalidInputError(
                f"edge_index of the Batch joins two graphs ({int(crossing.sum())} edges, e.g. edge "
                f"{first}: {tuple(edge_index[:, first].tolist())}); KS propagation would mix them"
            )

    def _params_record(self) -> dict[str, Tensor]:
        """``{"num_hops": int64, "alpha": float64}`` 0-d tensors: exact through PyG's collation
        (Python floats would be collated into float32)."""
        return {
            "num_hops": torch.tensor(self.num_hops, dtype=torch.int64),
            "alpha": torch.tensor(self.alpha, dtype=torch.float64),
        }

    @staticmethod
    def recorded_params(data: Any) -> tuple[int, float] | None:
        """``(num_hops, alpha)`` a :class:`KSEmbedding` recorded on ``data`` with ``data.ks``;
        None when ``data`` has no ``ks`` or no (or inconsistent) ``ks_params``.

        Accepts the recorded values as numbers or tensors, also as the per-graph tensors PyG
        makes of them when it collates graphs (the entries must all agree).
        """
        params = getattr(data, "ks_params", None)
        if getattr(data, "ks", None) is None or not isinstance(params, dict):
            return None
        values = []
        for key in ("num_hops", "alpha"):
            value = params.get(key)
            if value is None:
                return None
            flat = torch.as_tensor(value, dtype=torch.float64).reshape(-1)
            if flat.numel() == 0 or not bool((flat == flat[0]).all()):
                return None
            values.append(float(flat[0]))
        num_hops, alpha = values
        if num_hops != int(num_hops):
            return None
        return int(num_hops), alpha

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_hops={self.num_hops}, alpha={self.alpha})"


def l_hop_subgraph(
    node: int | Tensor, num_hops: int, edge_index: Tensor, num_nodes: int
) -> tuple[Tensor, Tensor]:
    """Nodes and edges of the ``num_hops``-hop in-neighbour subgraph anchored at ``node``.

    The nodes are those that reach ``node`` within ``num_hops`` hops along ``edge_index`` (the
    receptive field of an L-layer message-passing GNN). Returns ``(subset, sub_edge_index)``:
    sorted global node ids and the induced edges, in global ids.
    """
    from torch_geometric.utils import k_hop_subgraph

    num_nodes = check_int("num_nodes", num_nodes, minimum=1)
    num_hops = check_int("num_hops", num_hops, minimum=0, maximum=MAX_NUM_HOPS)
    edge_index = check_edge_index("edge_index", edge_index, num_nodes)
    nodes = torch.as_tensor(node, dtype=torch.long).view(-1)
    if nodes.numel() == 0 or int(nodes.min()) < 0 or int(nodes.max()) >= num_nodes:
        raise InvalidInputError(f"node must be node ids in [0, {num_nodes - 1}], got {node!r}")
    subset, sub_edges, _, _ = k_hop_subgraph(nodes, num_hops, edge_index, num_nodes=num_nodes)
    return subset, sub_edges
