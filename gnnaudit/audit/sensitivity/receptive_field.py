r"""Batching node-level interventions by receptive field: which audited nodes may share one
forward pass of an L-layer message-passing GNN.

In an L-layer message-passing GNN the output of node ``w`` depends only on the inputs of the
nodes within L hops of ``w``. Changing the input of a set ``B`` of nodes therefore gives every
``v`` in ``B`` exactly the output it gets when ``v`` alone is changed, as long as no two members
of ``B`` are within L hops of each other. The audited nodes ``S`` (m of them) are split into
such sets:

1. **Conflict graph.** ``v, w`` in ``S`` conflict when their graph distance is at most L, i.e.
   when :math:`((A + I)^L)_{vw} \neq 0` with :math:`A` the adjacency made symmetric (a directed
   edge conflicts both ways, so the plan is exact for either message-passing direction). The
   rows of :math:`(A + I)^L` belonging to ``S`` are computed as sparse boolean products in row
   chunks. **Memory bound**: every intermediate row of a chunk has at most
   :math:`\min(n, w_L(v))` entries, :math:`w_L(v) = ((A + I)^L \mathbf 1)_v` the number of
   walks of length L from ``v`` (computed beforehand with L sparse mat-vecs), and the chunks are
   cut so the sum of these bounds stays below ``max_entries`` (default :data:`MAX_ENTRIES` =
   2^24, about 150 MiB of indices and flags), except that a single row is never split (at most
   ``n`` entries). Only the m x m conflict matrix (one entry per conflicting pair) is kept.
2. **Colouring.** Repeated maximal independent sets in a seeded random priority order (a
   permutation): colour class ``c`` is the greedy maximal independent set of the nodes left
   uncoloured by classes ``0 .. c-1``, which is the greedy first-fit colouring in priority
   order. It is computed in Jones-Plassmann (Luby-style) rounds, vectorised over the CSR arrays,
   with no Python loop over nodes: each round colours every node whose higher-priority
   conflicting nodes are all coloured. The number of colour classes (forward passes per
   counterfactual value) is at most :math:`\Delta + 1`, :math:`\Delta` = the largest number of
   audited nodes within L hops of one audited node (at most m - 1, at most the largest L-hop
   ball minus one).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from gnnaudit._validation import MAX_NUM_HOPS, check_edge_index, check_int
from gnnaudit.audit.bootstrap import as_generator
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.ks_halo import edge_chunks
from gnnaudit.graph_ops.segments import expand_ranges

__all__ = [
    "MAX_ENTRIES",
    "BatchPlan",
    "infer_num_hops",
    "resolve_num_hops",
    "receptive_field_unknown",
    "node_scope_skip",
    "check_hops_option",
    "HOPS_OPTIONS",
    "hop_adjacency",
    "l_hop_conflicts",
    "l_hop_ball",
    "independent_set_colouring",
    "plan_batches",
    "row_entries",
]

logger = logging.getLogger(__name__)

#: default memory budget of one reachability chunk, in sparse entries
MAX_ENTRIES = 2**24


def infer_num_hops(model: Any) -> int | None:
    """Receptive-field radius of an ``nn.Module`` from its torch_geometric ``MessagePassing``
    submodules, or None when it has none (or is not a module).

    Each ``MessagePassing`` submodule counts one hop, except one with a positive integer
    attribute ``K`` (``SGConv``, ``TAGConv``, ``APPNP``, ``ChebConv``), which counts ``K`` hops
    (an upper bound; over-counting only costs more batches, never exactness). Assumes each
    submodule is applied once per forward pass; a module reused several times needs an explicit
    ``num_hops`` (the exactness safeguard of the sensitivity statistics catches a too small one).
    """
    if not isinstance(model, torch.nn.Module):
        return None
    from torch_geometric.nn.conv import MessagePassing

    hops, found = 0, False
    for module in model.modules():
        if isinstance(module, MessagePassing):
            found = True
            k = getattr(module, "K", None)
            if isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 1:
                hops += int(k)
            else:
                hops += 1
    return hops if found else None


def receptive_field_unknown(model: Any, predict_fn: Any = None) -> str | None:
    """Why the receptive field of ``model`` cannot be inferred (see :func:`infer_num_hops`), in
    words, or None when it can. ``model`` may be a
    :class:`~gnnaudit.audit.model_adapter.ModelAdapter`; with a ``predict_fn`` (given or the
    adapter's) the function is what runs, so nothing is inferred."""
    if isinstance(model, ModelAdapter):
        predict_fn = model.predict_fn if predict_fn is None else predict_fn
        model = model.model
    if predict_fn is not None:
        return "a predict_fn was given"
    if infer_num_hops(model) is None:
        return f"{type(model).__name__} has no torch_geometric MessagePassing submodule"
    return None


#: how a skip note tells the reader to give the model's receptive field, by the option that
#: sets it: the unit's own ``num_hops`` for a unit built by hand, ``model_hops=L`` for the
#: default units of ``run_audit`` / ``audit_model``
HOPS_OPTIONS = {
    "num_hops": "{unit}(num_hops=L)",
    "model_hops": "model_hops=L (gnnaudit audit --model-hops L)",
}


def check_hops_option(hops_option: Any) -> str:
    """``hops_option`` if it is a key of :data:`HOPS_OPTIONS`, else an error naming them."""
    if hops_option not in HOPS_OPTIONS:
        raise InvalidInputError(
            f"hops_option must be one of {sorted(HOPS_OPTIONS)}, got {hops_option!r}"
        )
    return str(hops_option)


def node_scope_skip(adapter: Any, num_hops: int | None, hops_option: str, unit: str) -> str | None:
    """Why a node-scope flip test of the audit unit ``unit`` cannot run, ending with the option
    that enables it (:data:`HOPS_OPTIONS`), or None when it can (``num_hops`` given, or
    inferable)."""
    if num_hops is not None:
        return None
    why = receptive_field_unknown(adapter)
    if why is None:
        return None
    option = HOPS_OPTIONS[hops_option].format(unit=unit)
    return (
        f"the model's receptive field cannot be inferred ({why}); pass {option} (the number of "
        "message-passing hops of the model; 0 for a model that does not pass messages) to run "
        "the node-scope test."
    )


def resolve_num_hops(adapter: Any, num_hops: Any) -> int:
    """``num_hops`` if given (an int >= 0), else inferred from the adapter's model (see
    :func:`infer_num_hops`); :class:`InvalidInputError` when it cannot be inferred."""
    if num_hops is not None:
        return check_int("num_hops", num_hops, minimum=0, maximum=MAX_NUM_HOPS)
    model = None if getattr(adapter, "predict_fn", None) is not None else adapter.model
    hops = infer_num_hops(model)
    if hops is None:
        what = (
            "a predict_fn was given"
            if model is None
            else f"{type(model).__name__} has no torch_geometric MessagePassing submodule"
        )
        raise InvalidInputError(
            f"num_hops is required: the model's receptive field cannot be inferred ({what}); "
            "pass num_hops=L, the number of message-passing hops of the model (0 for a model "
            "that does not pass messages)"
        )
    return hops


#: edges per chunk when :func:`hop_adjacency` forms its keys (transient: ~24 bytes per edge of
#: a chunk)
ADJ_CHUNK = 1 << 22


def hop_adjacency(edge_index: Any, num_nodes: int) -> sp.csr_matrix:
    """``A + I`` as an ``(n, n)`` boolean CSR matrix, ``A`` made symmetric (sorted indices,
    no duplicates).

    Memory: the undirected pairs as int64 keys ``min * n + max`` (8 bytes per edge, formed in
    chunks of :data:`ADJ_CHUNK` and sorted in place), then int32 row / column arrays of the
    ``2 U + n`` entries (``U`` distinct pairs) and the matrix itself (5 bytes per entry with
    int32 indices): by this count about 2.5 GB for the 133M edges of a 10M-node credit graph,
    where the concatenated int64 coordinates of ``A``, ``A^T`` and ``I`` alone took 4.4 GB.
    """
    n = check_int("num_nodes", num_nodes, minimum=1)
    ei = check_edge_index("edge_index", edge_index, n).cpu().numpy()
    keys = np.empty(ei.shape[1], dtype=np.int64)
    for a, b in edge_chunks(ei.shape[1], ADJ_CHUNK):
        u, v = ei[0, a:b], ei[1, a:b]
        np.minimum(u, v, out=keys[a:b])
        keys[a:b] *= n
        keys[a:b] += np.maximum(u, v)
    keys.sort()
    fresh = np.ones(keys.size, dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=fresh[1:])
    fresh &= keys % (n + 1) != 0  # self loops (key = v (n + 1)): I adds them once
    keys = keys[fresh]
    del fresh
    index = np.int32 if n < 2**31 else np.int64
    lo, hi = (keys // n).astype(index), (keys % n).astype(index)
    del keys
    loops = np.arange(n, dtype=index)
    rows = np.concatenate([lo, hi, loops])
    cols = np.concatenate([hi, lo, loops])
    del lo, hi
    adj = sp.csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols)), shape=(n, n))
    del rows, cols
    adj.sort_indices()
    return adj


def _selector(rows: np.ndarray, n: int) -> sp.csr_matrix:
    k = rows.size
    return sp.csr_matrix(
        (np.ones(k, dtype=bool), rows, np.arange(k + 1, dtype=np.int64)), shape=(k, n)
    )


def l_hop_conflicts(
    adj: sp.csr_matrix, nodes: np.ndarray, num_hops: int, *, max_entries: int = MAX_ENTRIES
) -> sp.csr_matrix:
    """``(m, m)`` boolean CSR: ``True`` where two audited ``nodes`` are within ``num_hops`` hops
    (symmetric, empty diagonal). ``adj`` from :func:`hop_adjacency`. Memory: see the module
    docstring."""
    num_hops = check_int("num_hops", num_hops, minimum=0, maximum=MAX_NUM_HOPS)
    max_entries = check_int("max_entries", max_entries, minimum=1)
    nodes = np.asarray(nodes, dtype=np.int64)
    n, m = adj.shape[0], nodes.size
    if num_hops == 0 or m < 2:
        return sp.csr_matrix((m, m), dtype=bool)
    walks = np.ones(n, dtype=np.float64)
    for _ in range(num_hops):
        walks = adj @ walks
    bound = np.minimum(walks[nodes], n)
    # cut the rows into chunks whose summed bound stays below max_entries (one row at least)
    cum = np.cumsum(bound)
    starts = [0]
    while starts[-1] < m:
        base = cum[starts[-1] - 1] if starts[-1] else 0.0
        stop = int(np.searchsorted(cum, base + max_entries, side="right"))
        starts.append(max(stop, starts[-1] + 1))
    position = np.full(n, -1, dtype=np.int64)
    position[nodes] = np.arange(m)
    rows_out, cols_out = [], []
    for a, b in zip(starts[:-1], starts[1:], strict=True):
        reach = _selector(nodes[a:b], n)
        for _ in range(num_hops):
            reach = reach @ adj
        row = np.repeat(np.arange(a, b, dtype=np.int64), np.diff(reach.indptr))
        col = position[reach.indices]
        keep = (col >= 0) & (col != row)
        rows_out.append(row[keep])
        cols_out.append(col[keep])
    rows = np.concatenate(rows_out)
    cols = np.concatenate(cols_out)
    conflicts = sp.csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols)), shape=(m, m))
    conflicts = (conflicts + conflicts.T).tocsr()
    conflicts.sum_duplicates()
    return conflicts


def l_hop_ball(adj: sp.csr_matrix, node: int, num_hops: int) -> np.ndarray:
    """``(n,)`` bool: the nodes within ``num_hops`` hops of ``node`` (``adj`` symmetric)."""
    reach = np.zeros(adj.shape[0], dtype=bool)
    reach[int(node)] = True
    for _ in range(num_hops):
        reach = (adj @ reach.astype(np.float64)) > 0
    return reach


def row_entries(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions into a CSR's ``indices`` of the entries of ``rows``, and the index into
    ``rows`` each belongs to (vectorised gather of several CSR rows)."""
    starts = indptr[rows]
    return expand_ranges(starts, indptr[rows + 1] - starts)


def _smallest_missing(owner: np.ndarray, values: np.ndarray, n_rows: int) -> np.ndarray:
    """Per row, the smallest integer >= 0 absent from that row's ``values`` (all >= 0)."""
    if owner.size == 0:
        return np.zeros(n_rows, dtype=np.int64)
    width = int(values.max()) + 2
    keys = np.unique(owner * width + values)
    row, val = keys // width, keys % width
    start = np.searchsorted(row, np.arange(n_rows))
    rank = np.arange(keys.size) - start[row]
    mex = np.bincount(row, minlength=n_rows).astype(np.int64)  # no gap: the row's count
    gap = val != rank  # first position whose value skips its rank
    np.minimum.at(mex, row[gap], rank[gap])
    return mex


def independent_set_colouring(conflicts: sp.csr_matrix, random_state: Any = 0) -> np.ndarray:
    """Colour the nodes of a symmetric conflict graph so no two conflicting nodes share a colour.

    The greedy first-fit colouring in a seeded random priority order (every node takes the
    smallest colour not used by its higher-priority neighbours), which is the same as taking
    colour class after colour class as the greedy maximal independent set of the uncoloured
    nodes (module docstring). Computed in Jones-Plassmann rounds, vectorised: every round colours
    all uncoloured nodes whose higher-priority neighbours are all coloured (they are pairwise
    non-adjacent), reading only their own CSR rows, so the total work is O(nnz log nnz) plus a
    small constant per round (rounds = the longest chain of decreasing priorities). Returns
    ``(m,)`` int64 colours ``0 .. C-1`` with ``C <= max degree + 1``.
    """
    conflicts = sp.csr_matrix(conflicts)
    conflicts.sum_duplicates()
    m = conflicts.shape[0]
    indptr, indices = conflicts.indptr.astype(np.int64), conflicts.indices.astype(np.int64)
    priority = as_generator(random_state).permutation(m).astype(np.int64)
    owner = np.repeat(np.arange(m), np.diff(indptr))
    higher = priority[indices] > priority[owner]
    waiting = np.bincount(owner[higher], minlength=m)  # uncoloured higher-priority neighbours
    colour = np.full(m, -1, dtype=np.int64)
    ready = np.flatnonzero(waiting == 0)
    while ready.size:
        pos, row = row_entries(indptr, ready)
        nbr = indices[pos]
        done = colour[nbr] >= 0
        colour[ready] = _smallest_missing(row[done], colour[nbr[done]], ready.size)
        lower = nbr[priority[nbr] < priority[ready[row]]]
        np.subtract.at(waiting, lower, 1)
        cand = np.unique(lower)
        ready = cand[(waiting[cand] == 0) & (colour[cand] < 0)]
    return colour


@dataclass(frozen=True)
class BatchPlan:
    """Audited nodes split into batches that may share a forward pass.

    Attributes
    ----------
    nodes : (m,) int64 audited node ids, ascending.
    num_hops : the receptive-field radius L the plan is exact for.
    colours : (m,) int64 batch of each audited node.
    max_conflicts : the largest number of other audited nodes within L hops of one audited node
        (the bound: ``n_batches <= max_conflicts + 1``).
    """

    nodes: np.ndarray
    num_hops: int
    colours: np.ndarray
    max_conflicts: int

    @property
    def n_batches(self) -> int:
        """Number of batches (``max(colours) + 1``; 0 without audited nodes)."""
        return int(self.colours.max()) + 1 if self.colours.size else 0

    def batches(self) -> list[np.ndarray]:
        """Node ids of every batch, in batch order."""
        order = np.argsort(self.colours, kind="stable")
        bounds = np.searchsorted(self.colours[order], np.arange(self.n_batches + 1))
        return [self.nodes[order[a:b]] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def plan_batches(
    adj: sp.csr_matrix,
    nodes: Any,
    num_hops: int,
    random_state: Any = 0,
    *,
    max_entries: int = MAX_ENTRIES,
) -> BatchPlan:
    """Conflict graph of ``nodes`` at radius ``num_hops`` and its colouring (module docstring)."""
    nodes = np.unique(np.asarray(nodes, dtype=np.int64))
    if nodes.size == 0:
        raise InvalidInputError("nodes must hold at least one audited node")
    conflicts = l_hop_conflicts(adj, nodes, num_hops, max_entries=max_entries)
    colours = independent_set_colouring(conflicts, random_state)
    degree = np.diff(conflicts.indptr)
    plan = BatchPlan(nodes, num_hops, colours, int(degree.max()) if degree.size else 0)
    logger.info(
        "%d audited nodes in %d batches (radius %d, at most %d conflicts per node)",
        nodes.size,
        plan.n_batches,
        num_hops,
        plan.max_conflicts,
    )
    return plan
