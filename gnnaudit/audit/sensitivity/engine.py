r"""The engine of the counterfactual sensitivity statistics: the audited inputs, and the forward
passes with changed feature values, exact and batched.

:func:`prepare` validates the graph, wraps the model in a
:class:`~gnnaudit.audit.model_adapter.ModelAdapter`, resolves the audited nodes (a seeded sample
of ``max_nodes`` at node scope) and the sensitive groups, and computes the factual logits once.
:func:`run_interventions` then runs, for every feature and every counterfactual value
(:func:`~gnnaudit.audit.interventions.alternatives`):

* node scope: one pass per batch of the receptive-field plan
  (:func:`~gnnaudit.audit.sensitivity.receptive_field.plan_batches`, computed once for all features) with
  the batch's own values changed, then the exactness safeguard (:data:`SAFEGUARD_NODES` nodes
  re-predicted with every audited feature changed, in one pass when their L-hop balls are
  disjoint, else one pass each: no output outside their L-hop
  neighbourhood may move beyond a relative tolerance of :data:`SAFEGUARD_RTOL`, and with one
  feature their own output must equal the batched one);
* graph scope: one pass with every node's value changed.

Local passes (node scope): a node's output depends only on its ``L``-hop neighbourhood, so a
batch's passes need not run the model on the whole graph. :class:`_LocalGraph` splits each
batch into chunks whose ``(L+1)``-hop ball holds at most :data:`LOCAL_MAX_FRACTION` of the
nodes and, when all the chunks' balls together hold at most :data:`LOCAL_MAX_TOTAL` of them
(else whole-graph passes are cheaper), runs each chunk's passes on the subgraph induced by that ball (edges in their
original order). The extra hop keeps the degree of every node within ``L`` hops exact, which
degree-normalised convolutions (GCN) read. The first local pass is checked against the
factual logits (same tolerance as the safeguard); if they differ (a model that reads more than
the ``(L+1)``-hop subgraph) the engine falls back to whole-graph passes. Cost: proportional to
the audited nodes' balls instead of ``batches x n``; memory: one ball's subgraph at a time
(at most ``LOCAL_MAX_FRACTION x n`` nodes and their edges).

Every pass changes the rows of a single working copy of ``x`` on the model's device and restores
them afterwards; only the rows of the audited nodes of the pass are read back.

Dask (``client=``, :mod:`gnnaudit._distributed`): with several features, each feature's passes
are one task on the client's workers (the :class:`AuditedGraph` and the batching plan are
scattered once; each task works on its own copy, on the model's device as seen by the worker).
A feature's passes never depend on another feature's, so the per-feature arrays, hence every
statistic, equal the single-process ones exactly; the safeguard runs here afterwards.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from gnnaudit._distributed import map_blocks
from gnnaudit._validation import check_edge_index, check_finite_tensor
from gnnaudit.audit.context import resolve_nodes, resolve_sensitive
from gnnaudit.audit.interventions import (
    MAX_CATEGORIES,
    Alternative,
    FeatureSpec,
    alternatives,
    detect_kind,
    quantile_bins,
)
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.audit.sensitivity.receptive_field import (
    BatchPlan,
    hop_adjacency,
    l_hop_ball,
    plan_batches,
    resolve_num_hops,
    row_entries,
)
from gnnaudit.errors import InvalidInputError

__all__ = [
    "LOCAL_MAX_FRACTION",
    "LOCAL_MAX_TOTAL",
    "MAX_NODES",
    "SAFEGUARD_NODES",
    "SAFEGUARD_RTOL",
    "AuditedGraph",
    "FlipArrays",
    "prepare",
    "run_interventions",
    "seeded",
]

logger = logging.getLogger(__name__)

#: default largest number of audited nodes at node scope (a seeded sample above it)
MAX_NODES = 2000
#: nodes re-predicted one at a time by the exactness safeguard (node scope)
SAFEGUARD_NODES = 3
#: relative tolerance of the safeguard's comparisons of logits
SAFEGUARD_RTOL = 1e-5
#: the audit stage named on an exception raised by the user's model during the flips
STAGE = "the counterfactual sensitivity test"
#: node scope runs a chunk's passes on its (L+1)-hop ball when the ball holds at most this
#: fraction of the graph's nodes (module docstring)
LOCAL_MAX_FRACTION = 0.25
#: chunks run on subgraphs only when their balls hold at most this share of the graph's nodes in
#: all: a subgraph pass also pays for cutting its subgraph and for the ball searches, so a set of
#: chunks covering a large part of the graph costs more than the whole-graph passes it replaces
#: (on the small-world credit graph a node's 4-hop ball holds about a fifth of 100k nodes, and
#: the whole-graph path is the one ``benchmarks/bench_audit_1m.py`` measures)
LOCAL_MAX_TOTAL = 0.25
#: seed streams of one random_state (the bootstrap uses streams >= 3)
SAMPLE_STREAM, PLAN_STREAM, CHECK_STREAM = 0, 1, 2


def _check_graph(data: Any) -> tuple[torch.Tensor, torch.Tensor]:
    x = getattr(data, "x", None)
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.size(0) == 0:
        raise InvalidInputError(
            "data.x must be a 2-D tensor [num_nodes, num_features] with at least one node"
        )
    if not x.is_floating_point():
        raise InvalidInputError(f"data.x must be a floating-point tensor, got {x.dtype}")
    check_finite_tensor("data.x", x)
    edge_index = getattr(data, "edge_index", None)
    if edge_index is None:
        raise InvalidInputError("data.edge_index is missing")
    return x, check_edge_index("data.edge_index", edge_index, int(x.size(0)))


def seeded(random_state: int, stream: int) -> np.random.Generator:
    """An independent generator for ``stream`` of one ``random_state``."""
    return np.random.default_rng([random_state, stream])


def _group_labels(values: np.ndarray) -> np.ndarray:
    """Sensitive values as group labels; a continuous attribute in quartile bins."""
    if detect_kind(values, MAX_CATEGORIES) != "continuous":
        return values
    codes, edges = quantile_bins(values, 4)
    bounds = np.concatenate([[-np.inf], edges, [np.inf]])
    labels = np.array([f"[{bounds[b]:.4g}, {bounds[b + 1]:.4g})" for b in range(edges.size + 1)])
    return labels[codes]


@dataclass
class AuditedGraph:
    """What every counterfactual pass shares: the model adapter, ``x`` and ``edge_index`` on its
    device, the audited node ids (ascending, sampled at node scope above ``max_nodes``) and how
    many there were before sampling, the factual logits (and whether computing them cost a
    pass), and the sensitive group of each audited node."""

    adapter: ModelAdapter
    x: torch.Tensor
    edge_index: torch.Tensor
    nodes: np.ndarray
    n_audited: int
    base_logits: torch.Tensor
    n_forward: int
    groups: np.ndarray | None
    sensitive_name: str | None


def prepare(
    model: Any,
    data: Any,
    mask: Any,
    scope: str,
    random_state: int,
    max_nodes: int,
    sensitive: Any,
    forward_kwargs: Mapping[str, Any] | None,
    predict_fn: Callable[..., Any] | None,
    device: Any,
    base_logits: Any,
) -> AuditedGraph:
    """Validate the inputs and build the :class:`AuditedGraph` (module docstring); the factual
    logits are computed here unless ``base_logits`` gives them."""
    x, edge_index = _check_graph(data)
    n = int(x.size(0))
    adapter = ModelAdapter.wrap(
        model, forward_kwargs=forward_kwargs, predict_fn=predict_fn, device=device
    )
    nodes = resolve_nodes(data, mask)
    n_audited = nodes.size
    if scope == "node" and nodes.size > max_nodes:
        pick = seeded(random_state, SAMPLE_STREAM).choice(nodes.size, size=max_nodes, replace=False)
        nodes = np.sort(nodes[pick])
        logger.info("auditing a seeded sample of %d of %d nodes", max_nodes, n_audited)
    x_dev = x.to(adapter.device)
    ei_dev = edge_index.to(adapter.device)
    n_forward = 0
    if base_logits is None:
        base = adapter.logits(x_dev, ei_dev, to_cpu=False, stage=STAGE)
        n_forward = 1
    else:
        base = base_logits if torch.is_tensor(base_logits) else torch.as_tensor(base_logits)
        if base.dim() != 2 or base.size(0) != n or not base.is_floating_point():
            raise InvalidInputError(
                f"base_logits must be float logits of shape [{n}, num_classes], got "
                f"{tuple(base.shape)} {base.dtype}"
            )
        check_finite_tensor("base_logits", base)
        base = base.to(adapter.device)
    values, name, _ = resolve_sensitive(data, sensitive)
    groups = None if values is None else _group_labels(values[nodes])
    return AuditedGraph(adapter, x_dev, ei_dev, nodes, n_audited, base, n_forward, groups, name)


# ----------------------------------------------------------------------------------------------
# the engine
# ----------------------------------------------------------------------------------------------
class _Intervener:
    """Runs forward passes with some rows of some columns of ``x`` replaced, then restores."""

    def __init__(self, setup: AuditedGraph, progress: bool, total: int) -> None:
        from tqdm.auto import tqdm

        self.setup = setup
        self.work = setup.x.clone()
        self.passes = 0
        self.bar = tqdm(
            total=total, desc="counterfactual passes", disable=not progress, leave=False
        )
        base = setup.base_logits
        self.base_pred = base.argmax(dim=1)
        self.base_prob = torch.softmax(base.to(torch.float64), dim=1)
        self.base_prob = self.base_prob.gather(1, self.base_pred[:, None])[:, 0]

    def logits(self, changes: list[tuple[np.ndarray, tuple[int, ...], np.ndarray]]) -> torch.Tensor:
        """Full logits with ``x[ids, cols] = values`` for every ``(ids, cols, values)``."""
        dev = self.work.device
        saved = []
        for ids, cols, vals in changes:
            rows = torch.from_numpy(ids).to(dev)[:, None]
            cidx = torch.tensor(cols, device=dev)[None, :]
            saved.append((rows, cidx, self.work[rows, cidx].clone()))
            v = torch.as_tensor(
                np.array(np.broadcast_to(vals, (ids.size, len(cols)))),
                dtype=self.work.dtype,
            )
            self.work[rows, cidx] = v.to(dev)
        try:
            out = self.setup.adapter.logits(
                self.work, self.setup.edge_index, to_cpu=False, stage=STAGE
            )
        finally:
            for rows, cidx, old in reversed(saved):
                self.work[rows, cidx] = old
        self.passes += 1
        self.bar.update(1)
        return out

    def effect(self, out: torch.Tensor, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flip indicator and probability change at ``ids``."""
        idx = torch.from_numpy(ids).to(out.device)
        rows = out[idx]
        pred = rows.argmax(dim=1)
        base_pred = self.base_pred[idx]
        prob = torch.softmax(rows.to(torch.float64), dim=1).gather(1, base_pred[:, None])[:, 0]
        flip = (pred != base_pred).cpu().numpy()
        delta = (prob - self.base_prob[idx]).abs().cpu().numpy()
        return flip, delta


class _LocalGraph:
    """Chunks of a node-scope batch and the ``(L+1)``-hop subgraph of each (module docstring)."""

    def __init__(self, eng: _Intervener, adj: sp.csr_matrix, num_hops: int) -> None:
        self._entries = row_entries
        self.eng = eng
        self.adj = adj
        self.hops = num_hops + 1
        n = int(eng.setup.x.size(0))
        self.limit = int(LOCAL_MAX_FRACTION * n)
        ei = eng.setup.edge_index.cpu().numpy()
        self.order = np.argsort(ei[0], kind="stable")  # edges grouped by source, order kept
        self.src_ptr = np.concatenate(([0], np.cumsum(np.bincount(ei[0], minlength=n))))
        self.dst = ei[1]
        self.enabled = not eng.setup.adapter.forward_kwargs  # per-edge kwargs cannot be cut
        self.checked = False

    def ball(self, seeds: np.ndarray, limit: float) -> np.ndarray | None:
        """Sorted ids within ``L+1`` hops of ``seeds``; None once more than ``limit``."""
        reach = np.zeros(self.adj.shape[0], dtype=bool)
        reach[seeds] = True
        frontier, size = seeds, seeds.size
        for _ in range(self.hops):
            pos, _ = self._entries(self.adj.indptr, frontier)
            nbr = self.adj.indices[pos]
            frontier = np.unique(nbr[~reach[nbr]])
            reach[frontier] = True
            size += frontier.size
            if size > limit:
                return None
        return np.flatnonzero(reach)

    def chunks(self, batch: np.ndarray) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """``(chunk, ball)`` pairs covering ``batch`` (halving it until every chunk's ball fits
        the limit); ``[(batch, None)]`` (one whole-graph pass per value) when a single node's
        ball does not fit or the chunks' balls add up to more than :data:`LOCAL_MAX_TOTAL` of
        the graph's nodes. Each ball search stops at the budget left, so a batch that will not
        fit costs at most a few searches of that size, never one per node."""
        if not self.enabled:
            return [(batch, None)]
        budget = LOCAL_MAX_TOTAL * self.adj.shape[0]
        parts: list[tuple[np.ndarray, np.ndarray | None]] = []
        stack = [batch]
        while stack:
            part = stack.pop()
            ball = self.ball(part, min(self.limit, budget))
            if ball is None:
                if part.size == 1:
                    return [(batch, None)]
                half = part.size // 2
                stack += [part[half:], part[:half]]  # the left half next: chunks keep order
                continue
            parts.append((part, ball))
            budget -= ball.size
        return parts

    def subgraph(self, ball: np.ndarray) -> torch.Tensor:
        """Edges of the subgraph induced by ``ball`` (relabelled, original order)."""
        pos, _ = self._entries(self.src_ptr, ball)
        edges = np.sort(self.order[pos])
        dst = self.dst[edges]
        inside = np.zeros(self.adj.shape[0], dtype=bool)
        inside[ball] = True
        edges = edges[inside[dst]]
        relabel = np.full(self.adj.shape[0], -1, dtype=np.int64)
        relabel[ball] = np.arange(ball.size)
        src = relabel[self.eng.setup.edge_index[0].cpu().numpy()[edges]]
        sub = np.stack([src, relabel[self.dst[edges]]])
        return torch.from_numpy(sub).to(self.eng.setup.edge_index.device)

    def logits(
        self, ball: np.ndarray, sub: torch.Tensor, changes: list[tuple[np.ndarray, Any, Any]]
    ) -> torch.Tensor:
        """Full-size logits (factual outside ``ball``) of a pass run on the ball's subgraph."""
        eng = self.eng
        dev = eng.work.device
        ball_t = torch.from_numpy(ball).to(dev)
        x_sub = eng.work[ball_t].clone()
        if not self.checked:  # the factual pass must give the factual logits
            self.checked = True
            got = eng.setup.adapter.logits(x_sub, sub, to_cpu=False, stage=STAGE)
            eng.passes += 1
            base = eng.setup.base_logits
            tol = SAFEGUARD_RTOL * (1.0 + float(base.abs().max()))
            if float((got - base[ball_t]).abs().max()) > tol:
                logger.info("node scope: subgraph passes differ from the graph; whole graph used")
                self.enabled = False
                return eng.logits(changes)
        for ids, cols, vals in changes:
            local = torch.from_numpy(np.searchsorted(ball, ids)).to(dev)[:, None]
            cidx = torch.tensor(cols, device=dev)[None, :]
            v = np.array(np.broadcast_to(vals, (ids.size, len(cols))))
            x_sub[local, cidx] = torch.as_tensor(v, dtype=x_sub.dtype).to(dev)
        out = eng.setup.base_logits.clone()
        out[ball_t] = eng.setup.adapter.logits(x_sub, sub, to_cpu=False, stage=STAGE).to(out.dtype)
        eng.passes += 1
        eng.bar.update(1)
        return out


def _alt_values(alt: Alternative, ids: np.ndarray) -> np.ndarray:
    return alt.values[ids] if alt.values.shape[0] > 1 else alt.values


def _node_scope(
    eng: _Intervener,
    local: _LocalGraph,
    plan: BatchPlan,
    specs: list[FeatureSpec],
    alts: list[list[Alternative]],
    checks: np.ndarray,
) -> tuple[list[np.ndarray], list[np.ndarray], list[int], dict[int, torch.Tensor]]:
    nodes = plan.nodes
    m = nodes.size
    flipped = [np.zeros(m, dtype=bool) for _ in specs]
    delta = [np.zeros(m) for _ in specs]
    passes = [0 for _ in specs]
    check_rows: dict[int, torch.Tensor] = {}
    out_arrays = (flipped, delta, passes, check_rows)
    n_alts = sum(len(a) for a in alts)
    for whole in plan.batches():
        parts = local.chunks(whole)
        eng.bar.total += (len(parts) - 1) * n_alts
        for batch, ball in parts:
            _node_chunk(eng, local, batch, ball, nodes, specs, alts, checks, out_arrays)
    return flipped, delta, passes, check_rows


def _node_chunk(
    eng: _Intervener,
    local: _LocalGraph,
    batch: np.ndarray,
    ball: np.ndarray | None,
    nodes: np.ndarray,
    specs: list[FeatureSpec],
    alts: list[list[Alternative]],
    checks: np.ndarray,
    out_arrays: tuple[list[np.ndarray], list[np.ndarray], list[int], dict[int, torch.Tensor]],
) -> None:
    flipped, delta, passes, check_rows = out_arrays
    sub = local.subgraph(ball) if ball is not None else None
    pos = np.searchsorted(nodes, batch)
    for f, spec in enumerate(specs):
        for a, alt in enumerate(alts[f]):
            sel = alt.changes[batch]
            ids = batch[sel]
            if ids.size == 0:
                continue
            change = [(ids, spec.columns, _alt_values(alt, ids))]
            if ball is not None and sub is not None and local.enabled:
                out = local.logits(ball, sub, change)
            else:
                out = eng.logits(change)
            passes[f] += 1
            flip, dp = eng.effect(out, ids)
            p = pos[sel]
            flipped[f][p] |= flip
            delta[f][p] = np.maximum(delta[f][p], dp)
            if len(specs) == 1:
                for v in np.intersect1d(ids, checks):
                    first = _first_change(alts[f], int(v))
                    if first == a:
                        check_rows[int(v)] = out[int(v)].clone()


def _first_change(alts: list[Alternative], v: int) -> int:
    """Index of the first alternative that changes node ``v`` (-1 if none)."""
    for a, alt in enumerate(alts):
        if alt.changes[v]:
            return a
    return -1


def _graph_scope(
    eng: _Intervener, nodes: np.ndarray, specs: list[FeatureSpec], alts: list[list[Alternative]]
) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
    m = nodes.size
    flipped = [np.zeros(m, dtype=bool) for _ in specs]
    delta = [np.zeros(m) for _ in specs]
    passes = [0 for _ in specs]
    for f, spec in enumerate(specs):
        for alt in alts[f]:
            ids = np.flatnonzero(alt.changes)
            if ids.size == 0:
                continue
            out = eng.logits([(ids, spec.columns, _alt_values(alt, ids))])
            passes[f] += 1
            sel = alt.compares[nodes]
            flip, dp = eng.effect(out, nodes[sel])
            flipped[f][sel] |= flip
            delta[f][sel] = np.maximum(delta[f][sel], dp)
    return flipped, delta, passes


def _pick_checks(
    adj: sp.csr_matrix, nodes: np.ndarray, alts: list[list[Alternative]], random_state: int
) -> np.ndarray:
    """Seeded safeguard nodes: audited nodes with a neighbour and some changed value."""
    has_nbr = np.diff(adj.indptr)[nodes] > 1
    changed = np.zeros(nodes.size, dtype=bool)
    for feature_alts in alts:
        for alt in feature_alts:
            changed |= alt.changes[nodes]
    eligible = nodes[has_nbr & changed]
    if eligible.size == 0:
        return eligible
    k = min(SAFEGUARD_NODES, eligible.size)
    return np.sort(seeded(random_state, CHECK_STREAM).choice(eligible, size=k, replace=False))


def _check_changes(
    v: int, specs: list[FeatureSpec], alts: list[list[Alternative]]
) -> list[tuple[np.ndarray, tuple[int, ...], np.ndarray]]:
    """Node ``v``'s first counterfactual value of every feature that changes it."""
    changes = []
    for f, spec in enumerate(specs):
        a = _first_change(alts[f], v)
        if a >= 0:
            ids = np.array([v])
            changes.append((ids, spec.columns, _alt_values(alts[f][a], ids)))
    return changes


def _safeguard(
    eng: _Intervener,
    adj: sp.csr_matrix,
    checks: np.ndarray,
    num_hops: int,
    specs: list[FeatureSpec],
    alts: list[list[Alternative]],
    check_rows: dict[int, torch.Tensor],
) -> None:
    """The exactness safeguard (module docstring). The check nodes share one pass when their
    L-hop balls are disjoint (each node's change may then move outputs only inside its own
    ball), else each gets its own pass."""
    base = eng.setup.base_logits
    tol = SAFEGUARD_RTOL * (1.0 + float(base.abs().max()))
    balls = [l_hop_ball(adj, int(v), num_hops) for v in checks]
    disjoint = not balls or int(np.sum(balls, axis=0).max()) <= 1
    groups = [list(checks)] if disjoint else [[v] for v in checks]
    for group in groups:
        members = [int(v) for v in group]
        changes = [c for v in members for c in _check_changes(v, specs, alts)]
        if not changes:
            continue
        out = eng.logits(changes)
        moved = ((out - base).abs().max(dim=1).values > tol).cpu().numpy()
        inside = np.zeros(moved.size, dtype=bool)
        for v in members:
            inside |= balls[int(np.flatnonzero(checks == v)[0])]
        outside = moved & ~inside
        own = [
            v
            for v in members
            if v in check_rows and float((out[v] - check_rows[v]).abs().max()) > tol
        ]
        if outside.any() or own:
            where = (
                f"the output of node {int(np.flatnonzero(outside)[0])}, more than "
                f"{num_hops} hops away,"
                if outside.any()
                else "its own batched output"
            )
            nodes = ", ".join(str(v) for v in (own or members))
            raise InvalidInputError(
                f"the model's receptive field exceeds num_hops={num_hops}: changing node(s) "
                f"{nodes} alone changed {where} so node-scope batching would not be exact; "
                "pass a larger num_hops (the number of message-passing hops of the model)"
            )


def _feature_task(
    item: tuple[FeatureSpec, list[Alternative]],
    graph: AuditedGraph,
    plan: BatchPlan | None,
    adj: sp.csr_matrix | None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Worker task: every counterfactual pass of one feature (``plan`` None: graph scope);
    returns its flip indicators, probability changes and number of passes."""
    spec, alts = item
    eng = _Intervener(copy.deepcopy(graph), False, 0)  # fresh, aligned tensors of its own
    if plan is None:
        flipped, delta, passes = _graph_scope(eng, eng.setup.nodes, [spec], [alts])
    else:
        assert adj is not None
        local = _LocalGraph(eng, adj, plan.num_hops)
        flipped, delta, passes, _ = _node_scope(
            eng, local, plan, [spec], [alts], np.empty(0, dtype=np.int64)
        )
    eng.bar.close()
    return flipped[0], delta[0], passes[0]


@dataclass
class FlipArrays:
    """Per feature (in ``specs`` order): flip indicators and probability changes of the audited
    nodes, the counterfactual passes the feature used and its number of counterfactual values."""

    flipped: list[np.ndarray]
    delta: list[np.ndarray]
    passes: list[int]
    n_alternatives: list[int]


def _node_plan(
    graph: AuditedGraph,
    alts: list[list[Alternative]],
    random_state: int,
    num_hops: int | None,
) -> tuple[int, sp.csr_matrix, BatchPlan, np.ndarray]:
    """Node scope's receptive-field radius, hop adjacency, batching plan and safeguard nodes."""
    hops = resolve_num_hops(graph.adapter, num_hops)
    adj = hop_adjacency(graph.edge_index.cpu(), int(graph.x.size(0)))
    plan = plan_batches(adj, graph.nodes, hops, seeded(random_state, PLAN_STREAM))
    return hops, adj, plan, _pick_checks(adj, graph.nodes, alts, random_state)


def run_interventions(
    graph: AuditedGraph,
    data: Any,
    specs: list[FeatureSpec],
    scope: str,
    random_state: int,
    num_hops: int | None,
    progress: bool,
    client: Any = None,
) -> tuple[FlipArrays, BatchPlan | None, int]:
    """Run every counterfactual pass of ``specs`` at ``scope`` (module docstring).

    Returns ``(arrays, plan, passes)``: the per-feature results, the node-scope batching plan
    (None at graph scope) and the number of forward passes run, the factual one (when
    :func:`prepare` ran it) and the safeguard's included. ``client``: a validated
    ``dask.distributed.Client`` or None (module docstring); used with two or more features.
    """
    if client is not None and len(specs) > 1:
        return _run_distributed(graph, data, specs, scope, random_state, num_hops, progress, client)
    alts = [alternatives(data, spec) for spec in specs]
    plan = None
    if scope == "node":
        hops, adj, plan, checks = _node_plan(graph, alts, random_state, num_hops)
        total = plan.n_batches * sum(len(a) for a in alts) + checks.size
        eng = _Intervener(graph, progress, total)
        local = _LocalGraph(eng, adj, hops)
        flipped, delta, passes, rows = _node_scope(eng, local, plan, specs, alts, checks)
        _safeguard(eng, adj, checks, hops, specs, alts, rows)
    else:
        eng = _Intervener(graph, progress, sum(len(a) for a in alts))
        flipped, delta, passes = _graph_scope(eng, graph.nodes, specs, alts)
    eng.bar.close()
    arrays = FlipArrays(flipped, delta, passes, [len(a) for a in alts])
    return arrays, plan, graph.n_forward + eng.passes


def _run_distributed(
    graph: AuditedGraph,
    data: Any,
    specs: list[FeatureSpec],
    scope: str,
    random_state: int,
    num_hops: int | None,
    progress: bool,
    client: Any,
) -> tuple[FlipArrays, BatchPlan | None, int]:
    """:func:`run_interventions` with one task per feature on ``client`` (two or more
    features: the per-feature node-scope safeguard rows are then not used)."""
    alts = [alternatives(data, spec) for spec in specs]
    plan, adj = None, None
    if scope == "node":
        _, adj, plan, checks = _node_plan(graph, alts, random_state, num_hops)
    items = list(zip(specs, alts, strict=True))
    parts = map_blocks(client, _feature_task, items, graph, plan, adj)
    flipped = [p[0] for p in parts]
    delta = [p[1] for p in parts]
    passes = [int(p[2]) for p in parts]
    eng = _Intervener(graph, progress, 0 if plan is None else int(checks.size))
    if plan is not None and adj is not None:
        _safeguard(eng, adj, checks, plan.num_hops, specs, alts, {})
    eng.bar.close()
    arrays = FlipArrays(flipped, delta, passes, [len(a) for a in alts])
    return arrays, plan, graph.n_forward + sum(passes) + eng.passes
