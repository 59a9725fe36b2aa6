"""Node scope of the counterfactual passes: batches of audited nodes more than L hops apart,
run on their L-hop ball subgraphs closed by a sink where that is cheaper
(:class:`LocalGraph`), and the exactness safeguard (see
:mod:`gnnaudit.audit.sensitivity.engine` for both)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from gnnaudit.audit.interventions import Alternative, FeatureSpec
from gnnaudit.audit.sensitivity.intervener import (
    CHECK_STREAM,
    SAFEGUARD_NODES,
    SAFEGUARD_RTOL,
    STAGE,
    Intervener,
    alt_values,
    seeded,
)
from gnnaudit.audit.sensitivity.receptive_field import BatchPlan, l_hop_ball, row_entries
from gnnaudit.errors import InvalidInputError

__all__ = [
    "LOCAL_MAX_FRACTION",
    "LOCAL_MAX_TOTAL",
    "REMOTE_LOCAL_MAX_NODES",
    "LocalGraph",
    "NodeEffects",
    "NodeWork",
    "node_scope",
    "first_change",
    "check_groups",
    "pick_checks",
    "safeguard",
]

logger = logging.getLogger(__name__)

#: node scope runs a chunk's passes on its L-hop ball when the ball holds at most this
#: fraction of the graph's nodes (module docstring of :mod:`~gnnaudit.audit.sensitivity.engine`)
LOCAL_MAX_FRACTION = 0.6
#: chunks run on subgraphs only when their balls hold at most this share of the graph's nodes in
#: all: a subgraph pass costs about its share of the graph's edges plus the cutting of its
#: subgraph and the ball searches, so chunks covering most of the graph cost more than the
#: whole-graph passes they replace (``benchmarks/bench_audit_1m.py``: on the credit graph of
#: 1M nodes a batch of 344 sampled nodes has a 3-hop ball of half the nodes, run locally)
LOCAL_MAX_TOTAL = 0.6
#: with the passes on a cluster (``remote``), the client runs a chunk on its subgraph only when
#: the chunks' balls hold at most this many nodes in all: larger subgraph passes would need the
#: memory the cluster is there to spread (about 230 B per edge of the ball, 0.3 GB here on the
#: credit graph); the rest runs on the workers
REMOTE_LOCAL_MAX_NODES = 100_000


class LocalGraph:
    """Chunks of a node-scope batch and the L-hop subgraph of each, closed by a sink (module
    docstring of :mod:`~gnnaudit.audit.sensitivity.engine`)."""

    def __init__(self, eng: Intervener, adj: sp.csr_matrix, num_hops: int) -> None:
        self._entries = row_entries
        self.eng = eng
        self.adj = adj
        self.hops = num_hops
        n = int(eng.setup.x.size(0))
        self.limit = int(LOCAL_MAX_FRACTION * n)
        self.total = LOCAL_MAX_TOTAL * n
        if eng.setup.remote is not None:
            self.limit = min(self.limit, REMOTE_LOCAL_MAX_NODES)
            self.total = min(self.total, REMOTE_LOCAL_MAX_NODES)
        ei = eng.setup.edge_index.cpu().numpy()
        self.order = np.argsort(ei[0], kind="stable")  # edges grouped by source, order kept
        self.src_ptr = np.concatenate(([0], np.cumsum(np.bincount(ei[0], minlength=n))))
        self.src = ei[0]
        self.dst = ei[1]
        self.in_degree = np.bincount(ei[1], minlength=n)
        self.out_degree = np.bincount(ei[0], minlength=n)
        self.enabled = not eng.setup.adapter.forward_kwargs  # per-edge kwargs cannot be cut
        self.checked = False

    def ball(self, seeds: np.ndarray, limit: float) -> np.ndarray | None:
        """Sorted ids within ``L`` hops of ``seeds``; None once more than ``limit``."""
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
        the graph's nodes (:data:`REMOTE_LOCAL_MAX_NODES` with a cluster). Each ball search
        stops at the budget left, so a batch that will not fit costs at most a few searches of
        that size, never one per node."""
        if not self.enabled:
            return [(batch, None)]
        budget = self.total
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
        """Edges of the subgraph induced by ``ball`` (relabelled, original order), then the
        sink's: node ``ball.size`` is a sink linked to each ball node by as many edges, in each
        direction, as that node has to nodes outside the ball, so every ball node keeps its
        in- and out-degree (module docstring of :mod:`~gnnaudit.audit.sensitivity.engine`)."""
        pos, _ = self._entries(self.src_ptr, ball)
        edges = np.sort(self.order[pos])
        dst = self.dst[edges]
        inside = np.zeros(self.adj.shape[0], dtype=bool)
        inside[ball] = True
        edges = edges[inside[dst]]
        relabel = np.full(self.adj.shape[0], -1, dtype=np.int64)
        relabel[ball] = np.arange(ball.size)
        src, dst = relabel[self.src[edges]], relabel[self.dst[edges]]
        sink = ball.size
        lost_in = self.in_degree[ball] - np.bincount(dst, minlength=ball.size)
        lost_out = self.out_degree[ball] - np.bincount(src, minlength=ball.size)
        into = np.repeat(np.arange(ball.size), lost_in)  # sink -> node
        out_of = np.repeat(np.arange(ball.size), lost_out)  # node -> sink
        sub = np.stack(
            [
                np.concatenate([src, np.full(into.size, sink), out_of]),
                np.concatenate([dst, into, np.full(out_of.size, sink)]),
            ]
        )
        return torch.from_numpy(sub).to(self.eng.setup.edge_index.device)

    def logits(
        self,
        ball: np.ndarray,
        sub: torch.Tensor,
        changes: list[tuple[np.ndarray, Any, Any]],
        rows: np.ndarray,
    ) -> torch.Tensor:
        """Full-size logits of a pass run on the ball's subgraph: exact at ``rows`` (the
        chunk, whose L-hop neighbourhoods the ball holds), factual everywhere else."""
        eng = self.eng
        if not self.checked:
            self.checked = True
            self.enabled = self._factual_matches(rows[:1])
            if not self.enabled:
                logger.info("node scope: subgraph passes differ from the graph; whole graph used")
                return eng.logits(changes)
        dev = eng.work.device
        at = torch.from_numpy(np.searchsorted(ball, rows)).to(dev)
        rows_t = torch.from_numpy(rows).to(dev)
        x_sub = self._inputs(ball)
        for ids, cols, vals in changes:
            local = torch.from_numpy(np.searchsorted(ball, ids)).to(dev)[:, None]
            cidx = torch.tensor(cols, device=dev)[None, :]
            v = np.array(np.broadcast_to(vals, (ids.size, len(cols))))
            x_sub[local, cidx] = torch.as_tensor(v, dtype=x_sub.dtype).to(dev)
        out = eng.setup.base_logits.clone()
        got = eng.setup.adapter.logits(x_sub, sub, to_cpu=False, stage=STAGE)
        out[rows_t] = got[at].to(out.dtype)
        eng.passes += 1
        eng.bar.update(1)
        return out

    def _inputs(self, ball: np.ndarray) -> torch.Tensor:
        """A copy of the working inputs of ``ball``'s nodes, then the sink's row of zeros."""
        work = self.eng.work
        rows = work[torch.from_numpy(ball).to(work.device)]
        return torch.cat([rows, work.new_zeros((1, work.size(1)))])

    def _factual_matches(self, node: np.ndarray) -> bool:
        """Whether a factual pass on the subgraph of ``node``'s ball (one node: a small pass)
        gives its factual logits, within the safeguard's tolerance; False for a model that
        reads more than that subgraph (e.g. one that merges parallel edges)."""
        eng = self.eng
        ball = self.ball(node, np.inf)
        assert ball is not None
        x_sub = self._inputs(ball)
        got = eng.setup.adapter.logits(x_sub, self.subgraph(ball), to_cpu=False, stage=STAGE)
        eng.passes += 1
        base = eng.setup.base_logits
        tol = SAFEGUARD_RTOL * (1.0 + float(base.abs().max()))
        at = int(np.searchsorted(ball, node[0]))
        return float((got[at] - base[int(node[0])]).abs().max()) <= tol


@dataclass
class NodeEffects:
    """What node scope accumulates, per feature (in ``specs`` order): flip indicators and
    probability changes of the audited nodes, the passes run; and the batched output row of
    each safeguard node (single feature only), for :func:`safeguard`."""

    flipped: list[np.ndarray]
    delta: list[np.ndarray]
    passes: list[int]
    check_rows: dict[int, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def empty(cls, n_features: int, n_nodes: int) -> NodeEffects:
        """Nothing flipped yet."""
        return cls(
            [np.zeros(n_nodes, dtype=bool) for _ in range(n_features)],
            [np.zeros(n_nodes) for _ in range(n_features)],
            [0] * n_features,
        )


@dataclass(frozen=True)
class NodeWork:
    """The fixed inputs of node scope: the audited nodes (ascending), the features with their
    counterfactual values, and the safeguard nodes."""

    nodes: np.ndarray
    specs: list[FeatureSpec]
    alts: list[list[Alternative]]
    checks: np.ndarray


def node_scope(
    eng: Intervener,
    local: LocalGraph,
    plan: BatchPlan,
    specs: list[FeatureSpec],
    alts: list[list[Alternative]],
    checks: np.ndarray,
) -> NodeEffects:
    """Every node-scope pass of ``specs``: one per batch of ``plan`` (split into local chunks)
    and counterfactual value."""
    work = NodeWork(plan.nodes, specs, alts, checks)
    effects = NodeEffects.empty(len(specs), plan.nodes.size)
    n_alts = sum(len(a) for a in alts)
    for whole in plan.batches():
        parts = local.chunks(whole)
        eng.bar.total += (len(parts) - 1) * n_alts
        for batch, ball in parts:
            _node_chunk(eng, local, batch, ball, work, effects)
    return effects


def _node_chunk(
    eng: Intervener,
    local: LocalGraph,
    batch: np.ndarray,
    ball: np.ndarray | None,
    work: NodeWork,
    effects: NodeEffects,
) -> None:
    """The passes of one chunk ``batch`` (on its ``ball``'s subgraph when given), recorded in
    ``effects``."""
    specs, alts, checks = work.specs, work.alts, work.checks
    sub = local.subgraph(ball) if ball is not None else None
    pos = np.searchsorted(work.nodes, batch)
    for f, spec in enumerate(specs):
        for a, alt in enumerate(alts[f]):
            sel = alt.changes[batch]
            ids = batch[sel]
            if ids.size == 0:
                continue
            change = [(ids, spec.columns, alt_values(alt, ids))]
            if ball is not None and sub is not None and local.enabled:
                out = local.logits(ball, sub, change, batch)
            else:
                out = eng.logits(change, rows=batch)
            effects.passes[f] += 1
            flip, dp = eng.effect(out, ids)
            p = pos[sel]
            effects.flipped[f][p] |= flip
            effects.delta[f][p] = np.maximum(effects.delta[f][p], dp)
            if len(specs) == 1:
                for v in np.intersect1d(ids, checks):
                    if first_change(alts[f], int(v)) == a:
                        effects.check_rows[int(v)] = out[int(v)].clone()


def first_change(alts: list[Alternative], v: int) -> int:
    """Index of the first alternative that changes node ``v`` (-1 if none)."""
    for a, alt in enumerate(alts):
        if alt.changes[v]:
            return a
    return -1


def pick_checks(
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


def check_groups(checks: np.ndarray, balls: list[np.ndarray]) -> list[list[int]]:
    """The safeguard's passes: ``checks`` split, in order, into groups whose members lie
    outside each other's L-hop ``balls`` (a node joins the first group it is compatible with;
    :data:`SAFEGUARD_NODES` nodes, so the pairwise test is a handful of lookups)."""
    groups: list[list[tuple[int, int]]] = []
    for i, v in enumerate(int(c) for c in checks):
        for group in groups:
            if all(not balls[i][u] and not balls[j][v] for j, u in group):
                group.append((i, v))
                break
        else:
            groups.append([(i, v)])
    return [[v for _, v in group] for group in groups]


def _check_changes(
    v: int, specs: list[FeatureSpec], alts: list[list[Alternative]]
) -> list[tuple[np.ndarray, tuple[int, ...], np.ndarray]]:
    """Node ``v``'s first counterfactual value of every feature that changes it."""
    changes = []
    for f, spec in enumerate(specs):
        a = first_change(alts[f], v)
        if a >= 0:
            ids = np.array([v])
            changes.append((ids, spec.columns, alt_values(alts[f][a], ids)))
    return changes


def safeguard(
    eng: Intervener,
    adj: sp.csr_matrix,
    checks: np.ndarray,
    num_hops: int,
    specs: list[FeatureSpec],
    alts: list[list[Alternative]],
    check_rows: dict[int, torch.Tensor],
) -> None:
    """The exactness safeguard (module docstring). Check nodes more than ``num_hops`` hops
    apart share a pass (:func:`check_groups`): with the receptive field as stated, each node's
    change may then move outputs only inside its own L-hop ball, so no output outside the
    union of the group's balls may move, and no member's change reaches another member's
    output, whose row must equal its batched one."""
    base = eng.setup.base_logits
    tol = SAFEGUARD_RTOL * (1.0 + float(base.abs().max()))
    balls = [l_hop_ball(adj, int(v), num_hops) for v in checks]
    for group in check_groups(checks, balls):
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
