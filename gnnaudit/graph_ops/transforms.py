"""PyG ``BaseTransform`` wrappers of the graph primitives, in one place.

Each transform takes a :class:`torch_geometric.data.Data` (or a
:class:`~torch_geometric.data.Batch` of graphs) and writes new attributes:

* :class:`KSEmbedding` writes ``data.ks`` (aggregated kernel-similarity features, CE Eq. 5-7);
* :class:`CoreGraphTransform` writes ``data.core_mask``, ``data.cluster``,
  ``data.core_edge_index`` and ``data.core_edge_weight`` (DBSCAN core graph,
  :class:`~gnnaudit.graph_ops.CoreGraph`);
* :class:`DCTreeTransform` writes ``data.core_distance``, ``data.mst_edge_index`` and
  ``data.mst_weight`` (mutual-reachability MST behind the dc-distance tree,
  :class:`~gnnaudit.graph_ops.DCTree`);
* :class:`ConstraintGraphTransform` reads must-link / cannot-link pairs and writes
  ``data.ml_component``, ``data.cl_exclusion`` and ``data.constraints_feasible``
  (:class:`~gnnaudit.graph_ops.ConstraintGraph`).

The PyG copy contract: :meth:`BaseTransform.__call__` hands ``forward`` a shallow copy, so
``forward`` writes its attributes on that copy, never copies again and never modifies an input
tensor in place (``transform(data)`` leaves ``data`` untouched).

Batches. On a :class:`~torch_geometric.data.Batch` (or any ``Data`` with a sorted ``batch``
vector) every graph is processed on its own: DBSCAN, dc-trees and constraint components never
mix nodes of two graphs, and the result equals ``Batch.from_data_list`` of the per-graph results
(cluster and component ids numbered per graph, edge indices in batch node ids).
:class:`~torch_geometric.data.HeteroData` is refused with :class:`InvalidInputError`.

This is the one graph_ops module that imports ``torch`` / ``torch_geometric`` at import time;
:mod:`gnnaudit.graph_ops` loads it lazily.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data import HeteroData
from torch_geometric.transforms import BaseTransform

from gnnaudit._aliases import deprecated_attribute, renamed_keywords
from gnnaudit._validation import check_array, check_choice, check_edge_index, check_float, check_int
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import canonical_metric
from gnnaudit.graph_ops.constraints import ConstraintGraph
from gnnaudit.graph_ops.core_graph import CoreGraph
from gnnaudit.graph_ops.dc_tree import DCTree
from gnnaudit.graph_ops.neighbourhood import KSEmbedding

__all__ = [
    "KSEmbedding",
    "CoreGraphTransform",
    "DCTreeTransform",
    "ConstraintGraphTransform",
    "check_homogeneous",
    "graph_ptr",
    "graph_slices",
]


def check_homogeneous(data: Any, transform: str) -> None:
    """Raise :class:`InvalidInputError` unless ``data`` is a homogeneous PyG graph."""
    if isinstance(data, HeteroData):
        raise InvalidInputError(
            f"{transform} works on homogeneous graphs (torch_geometric.data.Data or Batch), got "
            "HeteroData; apply it per node type, e.g. on data.to_homogeneous() or on a Data "
            "built from one node store"
        )
    if not hasattr(data, "num_nodes"):
        raise InvalidInputError(
            f"{transform} expects a torch_geometric.data.Data, got {type(data).__name__}"
        )


def graph_ptr(data: Any) -> np.ndarray:
    """Node offsets ``[0, n_0, n_0 + n_1, ..., N]`` of the graphs in ``data``.

    From ``data.ptr`` (a :class:`~torch_geometric.data.Batch`), else from a sorted
    ``data.batch`` vector, else one graph of ``data.num_nodes`` nodes.
    """
    n = int(data.num_nodes or 0)
    ptr = getattr(data, "ptr", None)
    if isinstance(ptr, torch.Tensor):
        out = ptr.detach().cpu().numpy().astype(np.int64)
        if out.size and (out[0] != 0 or out[-1] != n or np.any(np.diff(out) < 0)):
            raise InvalidInputError(f"data.ptr {out.tolist()[:8]} does not cover {n} nodes")
        return out
    batch = getattr(data, "batch", None)
    if not isinstance(batch, torch.Tensor):
        return np.array([0, n], dtype=np.int64)
    b = batch.detach().cpu().numpy().astype(np.int64).reshape(-1)
    if b.size != n:
        raise InvalidInputError(f"data.batch has {b.size} entries but the graph has {n} nodes")
    if b.size and (b[0] < 0 or np.any(np.diff(b) < 0)):
        raise InvalidInputError(
            "data.batch must be sorted and start at 0 (graph ids per node, as PyG's DataLoader "
            "makes it)"
        )
    counts = np.bincount(b) if b.size else np.zeros(1, dtype=np.int64)
    return np.asarray(np.r_[0, np.cumsum(counts)].astype(np.int64))


def graph_slices(ptr: np.ndarray) -> list[tuple[int, int]]:
    """``(start, stop)`` node ranges of the non-empty graphs of ``ptr`` (see :func:`graph_ptr`)."""
    return [(a, b) for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist(), strict=True) if b > a]


def _write(data: Any, device: torch.device, **arrays: np.ndarray) -> Any:
    """Set each array as a tensor attribute of ``data`` on ``device``; returns ``data``."""
    for key, value in arrays.items():
        setattr(data, key, torch.from_numpy(np.ascontiguousarray(value)).to(device))
    return data


class _GraphTransform(BaseTransform):
    """A BaseTransform whose ``__repr__`` lists the constructor parameters in ``_params``."""

    _params: tuple[str, ...] = ()

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._params)
        return f"{type(self).__name__}({args})"


def _features(data: Any, attr: str, transform: str) -> tuple[np.ndarray, torch.device]:
    feats = getattr(data, attr, None)
    if feats is None:
        raise InvalidInputError(f"{transform}: data has no attribute {attr!r}")
    device = feats.device if isinstance(feats, torch.Tensor) else torch.device("cpu")
    X = check_array(f"data.{attr}", feats, ndim=2, min_rows=0)
    if X.shape[0] != int(data.num_nodes):
        raise InvalidInputError(
            f"data.{attr} has {X.shape[0]} rows but the graph has {int(data.num_nodes)} nodes"
        )
    return X, device


class CoreGraphTransform(_GraphTransform):
    """PyG transform running DBSCAN on node features (or embeddings) ``data[attr]``.

    Builds a :class:`~gnnaudit.graph_ops.CoreGraph` per graph and writes
    ``data.core_mask`` (bool ``[N]``), ``data.cluster`` (long ``[N]``, ``-1`` noise, numbered
    per graph), ``data.core_edge_index`` (long ``[2, E]``, node ids, both directions) and
    ``data.core_edge_weight`` (float ``[E]``, distances floored at ``eps * 1e-12``), on the
    device of ``data[attr]``. Edge ``(q_i, q_j)`` joins two core points of one cluster with
    :math:`d(q_i, q_j) \\le \\varepsilon`.

    Args:
        eps, min_samples, metric: DBSCAN parameters (metric ``euclidean``, ``manhattan``,
            ``chebyshev`` or ``cosine``).
        attr: the node attribute to cluster (default ``"x"``).
    """

    _params = ("eps", "min_samples", "metric", "attr")

    def __init__(
        self, eps: float = 0.5, min_samples: int = 5, metric: str = "euclidean", attr: str = "x"
    ) -> None:
        self.eps = check_float("eps", eps, minimum=0.0, inclusive=(False, True))
        self.min_samples = check_int("min_samples", min_samples, minimum=1)
        self.metric = canonical_metric(metric)
        if not isinstance(attr, str):
            raise InvalidInputError(f"attr must be an attribute name (str), got {attr!r}")
        self.attr = attr

    def forward(self, data: Any) -> Any:
        """Write the core-graph attributes on ``data`` (the copy ``__call__`` made)."""
        check_homogeneous(data, type(self).__name__)
        X, device = _features(data, self.attr, type(self).__name__)
        n = X.shape[0]
        core_mask = np.zeros(n, dtype=bool)
        cluster = np.full(n, -1, dtype=np.int64)
        edges = [np.zeros((2, 0), dtype=np.int64)]
        weights = [np.zeros(0)]
        for start, stop in graph_slices(graph_ptr(data)):
            cg = CoreGraph.from_dbscan(X[start:stop], self.eps, self.min_samples, self.metric)
            core_mask[start:stop] = cg.core_mask
            cluster[start:stop] = cg.labels
            edges.append(cg.edge_index.astype(np.int64) + start)
            weights.append(cg.edge_weight)
        return _write(
            data,
            device,
            core_mask=core_mask,
            cluster=cluster,
            core_edge_index=np.concatenate(edges, axis=1),
            core_edge_weight=np.concatenate(weights).astype(np.float32),
        )


class DCTreeTransform(_GraphTransform):
    """PyG transform: dc-distance tree of ``data[attr]`` (default node features ``x``).

    Fits a :class:`~gnnaudit.graph_ops.DCTree` per graph and writes ``data.core_distance``
    ``[N]`` (:math:`cd(x)`, distance to the ``min_samples``-th nearest neighbour),
    ``data.mst_edge_index`` ``[2, 2(N - G)]`` (the MST edges of the :math:`d_m` graph of each
    of the ``G`` graphs, both directions) and ``data.mst_weight`` (their weights
    :math:`d_m(x, y) = \\max(cd(x), cd(y), \\|x - y\\|)`), float32, on the device of
    ``data[attr]``. The dc-distance of two nodes is the largest weight on their MST path.

    Args:
        min_samples: ``minPts`` of the core distance (the point itself counts);
            ``min_pts=`` is a deprecated spelling (removed in 0.3.0).
        attr: the node attribute (default ``"x"``).
        mst_method: ``"auto"``, ``"dense"`` or ``"boruvka"`` (see :class:`DCTree`).
    """

    _params = ("min_samples", "attr", "mst_method")
    min_pts = deprecated_attribute("min_pts", "min_samples")

    @renamed_keywords(deprecated={"min_pts": "min_samples"})
    def __init__(self, min_samples: int = 5, attr: str = "x", mst_method: str = "auto") -> None:
        self.min_samples = check_int("min_samples", min_samples, minimum=1)
        if not isinstance(attr, str):
            raise InvalidInputError(f"attr must be an attribute name (str), got {attr!r}")
        self.attr = attr
        self.mst_method = check_choice("mst_method", mst_method, ("auto", "dense", "boruvka"))

    def forward(self, data: Any) -> Any:
        """Write the dc-tree attributes on ``data`` (the copy ``__call__`` made)."""
        check_homogeneous(data, type(self).__name__)
        X, device = _features(data, self.attr, type(self).__name__)
        if X.shape[0] and X.shape[1] == 0:
            raise InvalidInputError(f"data.{self.attr} must have at least one column")
        core = np.zeros(X.shape[0])
        blocks, weights = [np.zeros((2, 0), dtype=np.int64)], [np.zeros(0)]
        for start, stop in graph_slices(graph_ptr(data)):
            tree = DCTree(min_samples=self.min_samples, mst_method=self.mst_method).fit(
                X[start:stop]
            )
            core[start:stop] = tree.core_distances_
            u, v = tree.mst_.u + start, tree.mst_.v + start
            blocks.append(np.stack([np.r_[u, v], np.r_[v, u]]).astype(np.int64))
            weights.append(np.r_[tree.mst_.weight, tree.mst_.weight])
        return _write(
            data,
            device,
            core_distance=core.astype(np.float32),
            mst_edge_index=np.concatenate(blocks, axis=1),
            mst_weight=np.concatenate(weights).astype(np.float32),
        )


class ConstraintGraphTransform(_GraphTransform):
    """PyG transform: must-link / cannot-link constraint graph of the nodes.

    Reads the pairs from ``data[must_link]`` and ``data[cannot_link]`` (long ``[2, m]`` node
    ids, PyG's ``edge_index`` layout; a missing attribute means no pair). The default names end
    in ``_index``, so PyG's batching offsets them by the node count like ``edge_index``. Builds a
    :class:`~gnnaudit.graph_ops.ConstraintGraph` and writes

    * ``data.ml_component`` (long ``[N]``): the must-link component of every node (the
      connected components of the ML graph, numbered per graph from 0 in node order);
    * ``data.cl_exclusion`` (long ``[X, 2]``): pairs ``(a, b)``, ``a < b``, of components of
      one graph that a cannot-link pair makes mutually exclusive;
    * ``data.constraints_feasible`` (bool ``[G]``, one entry per graph): ``False`` when a
      cannot-link pair joins two nodes of one must-link component (a pair both ML and CL
      included), the contradictions detectable without solving;

    on the device of the pairs.

    A pair that joins nodes of two graphs of a batch raises :class:`InvalidInputError`. The
    whole batch is one vectorised computation (components cannot cross graphs since no pair
    does); time ``O(N + m)``.

    Args:
        must_link, cannot_link: attribute names of the pairs.
    """

    _params = ("must_link", "cannot_link")

    def __init__(
        self, must_link: str = "must_link_index", cannot_link: str = "cannot_link_index"
    ) -> None:
        for name, value in (("must_link", must_link), ("cannot_link", cannot_link)):
            if not isinstance(value, str):
                raise InvalidInputError(f"{name} must be an attribute name (str), got {value!r}")
        self.must_link = must_link
        self.cannot_link = cannot_link

    def _pairs(self, data: Any, attr: str, n: int) -> np.ndarray:
        value = getattr(data, attr, None)
        if value is None:
            return np.zeros((0, 2), dtype=np.int64)
        edge_index = check_edge_index(f"data.{attr}", value, n)
        return np.asarray(edge_index.detach().cpu().numpy().T.astype(np.int64))

    def forward(self, data: Any) -> Any:
        """Write the constraint-graph attributes on ``data`` (the copy ``__call__`` made)."""
        check_homogeneous(data, type(self).__name__)
        n = int(data.num_nodes or 0)
        if n == 0:
            raise InvalidInputError(f"{type(self).__name__}: the graph has no node")
        ptr = graph_ptr(data)
        graph_of = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
        ml = self._pairs(data, self.must_link, n)
        cl = self._pairs(data, self.cannot_link, n)
        for name, pairs in ((self.must_link, ml), (self.cannot_link, cl)):
            crossing = graph_of[pairs[:, 0]] != graph_of[pairs[:, 1]]
            if crossing.any():
                i, j = pairs[int(np.argmax(crossing))]
                raise InvalidInputError(
                    f"data.{name} holds the pair ({i}, {j}) joining nodes of graphs "
                    f"{graph_of[i]} and {graph_of[j]} of the batch; a constraint links nodes "
                    "of one graph"
                )
        graph = ConstraintGraph(n, ml, cl)
        comp = graph.components
        # components are numbered in node order and graphs are node ranges, so the first node
        # of every graph carries that graph's smallest component id
        nonempty = np.flatnonzero(np.diff(ptr) > 0)
        offset = np.zeros(ptr.size - 1, dtype=np.int64)
        offset[nonempty] = comp[ptr[nonempty]]
        local = comp - offset[graph_of]
        ex = graph.exclusions
        first_node = np.full(graph.n_components, -1, dtype=np.int64)
        first_node[comp[::-1]] = np.arange(n)[::-1]
        ex_graph = graph_of[first_node[ex[:, 0]]] if len(ex) else np.zeros(0, dtype=np.int64)
        exclusion = ex - offset[ex_graph][:, None]
        cl_inner = comp[cl[:, 0]] == comp[cl[:, 1]]
        feasible = np.ones(ptr.size - 1, dtype=bool)
        feasible[graph_of[cl[cl_inner, 0]]] = False
        data.ml_component = torch.from_numpy(local)
        data.cl_exclusion = torch.from_numpy(exclusion.reshape(-1, 2).astype(np.int64))
        data.constraints_feasible = torch.from_numpy(feasible)
        return data

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(must_link={self.must_link!r}, cannot_link={self.cannot_link!r})"
        )
