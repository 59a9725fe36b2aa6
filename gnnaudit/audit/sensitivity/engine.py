r"""The engine of the counterfactual sensitivity statistics: the audited inputs, and the forward
passes with changed feature values, exact and batched.

:func:`prepare` validates the graph, wraps the model in a
:class:`~gnnaudit.audit.model_adapter.ModelAdapter`, resolves the audited nodes (a seeded sample
of ``max_nodes`` at node scope) and the sensitive groups, and computes the factual logits once.
:func:`run_interventions` then runs, for every feature and every counterfactual value
(:func:`~gnnaudit.audit.interventions.alternatives`). The pieces live in
:mod:`~gnnaudit.audit.sensitivity.intervener` (the audited inputs, the passes) and
:mod:`~gnnaudit.audit.sensitivity.node_scope` (batches, local subgraphs, the safeguard):


* node scope: one pass per batch of the receptive-field plan
  (:func:`~gnnaudit.audit.sensitivity.receptive_field.plan_batches`, computed once for all features) with
  the batch's own values changed, then the exactness safeguard (:data:`SAFEGUARD_NODES` nodes
  re-predicted with every audited feature changed, one pass for each group of them more than
  L hops apart, usually all of them: no output outside their L-hop
  neighbourhood may move beyond a relative tolerance of :data:`SAFEGUARD_RTOL`, and with one
  feature their own output must equal the batched one);
* graph scope: one pass with every node's value changed.

Local passes (node scope): a node's output depends only on its ``L``-hop neighbourhood, so a
batch's passes need not run the model on the whole graph. :class:`LocalGraph` splits each
batch into chunks whose ``L``-hop ball holds at most :data:`LOCAL_MAX_FRACTION` of the
nodes and, when all the chunks' balls together hold at most :data:`LOCAL_MAX_TOTAL` of them
(else whole-graph passes are cheaper), runs each chunk's passes on the subgraph induced by
that ball (edges in their original order), closed by a *sink*: one extra node with zero
features, linked to every ball node by as many edges, in each direction, as that node has to
nodes outside the ball. A chunk node's output reads the inputs within ``L`` hops and, through
degree-normalised convolutions (GCN), the degrees of the nodes within ``L`` hops; the sink
keeps every such degree exact, and what it sends reaches only the ball's outermost shell,
whose own outputs are never read (only the chunk's rows are). Before the first subgraph pass
a one-node check runs: the factual pass on one chunk node's ball subgraph must give that
node's factual logits (same tolerance as the safeguard); if not (a model that reads more than
that subgraph, e.g. one that merges the sink's parallel edges) the engine falls back to
whole-graph passes. Cost: about the balls' share of the graph's edges instead of
``batches x`` the graph (1M credit nodes, 500 sampled: the whole sensitivity stage reads
2.8 whole-graph passes' worth of rows instead of 7, ``benchmarks/bench_audit_1m.py``);
memory: one ball's subgraph at a time (at most ``LOCAL_MAX_FRACTION x n`` nodes, their edges
and their edges to the sink).

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
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from gnnaudit._distributed import map_blocks
from gnnaudit.audit.interventions import Alternative, FeatureSpec, alternatives
from gnnaudit.audit.sensitivity.intervener import (
    MAX_NODES,
    PLAN_STREAM,
    SAFEGUARD_NODES,
    SAFEGUARD_RTOL,
    AuditedGraph,
    Intervener,
    alt_values,
    prepare,
    seeded,
)
from gnnaudit.audit.sensitivity.node_scope import (
    LOCAL_MAX_FRACTION,
    LOCAL_MAX_TOTAL,
    LocalGraph,
    node_scope,
    pick_checks,
    safeguard,
)
from gnnaudit.audit.sensitivity.options import FlipOptions
from gnnaudit.audit.sensitivity.receptive_field import (
    BatchPlan,
    hop_adjacency,
    plan_batches,
    resolve_num_hops,
)

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


def _graph_scope(
    eng: Intervener, nodes: np.ndarray, specs: list[FeatureSpec], alts: list[list[Alternative]]
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
            out = eng.logits([(ids, spec.columns, alt_values(alt, ids))])
            passes[f] += 1
            sel = alt.compares[nodes]
            flip, dp = eng.effect(out, nodes[sel])
            flipped[f][sel] |= flip
            delta[f][sel] = np.maximum(delta[f][sel], dp)
    return flipped, delta, passes


def _feature_task(
    item: tuple[FeatureSpec, list[Alternative]],
    graph: AuditedGraph,
    plan: BatchPlan | None,
    adj: sp.csr_matrix | None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Worker task: every counterfactual pass of one feature (``plan`` None: graph scope);
    returns its flip indicators, probability changes and number of passes."""
    spec, alts = item
    eng = Intervener(copy.deepcopy(graph), False, 0)  # fresh, aligned tensors of its own
    if plan is None:
        flipped, delta, passes = _graph_scope(eng, eng.setup.nodes, [spec], [alts])
    else:
        assert adj is not None
        local = LocalGraph(eng, adj, plan.num_hops)
        effects = node_scope(eng, local, plan, [spec], [alts], np.empty(0, dtype=np.int64))
        flipped, delta, passes = effects.flipped, effects.delta, effects.passes
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
    return hops, adj, plan, pick_checks(adj, graph.nodes, alts, random_state)


def run_interventions(
    graph: AuditedGraph,
    data: Any,
    specs: list[FeatureSpec],
    scope: str,
    random_state: int,
    options: FlipOptions,
) -> tuple[FlipArrays, BatchPlan | None, int]:
    """Run every counterfactual pass of ``specs`` at ``scope`` (module docstring).

    Returns ``(arrays, plan, passes)``: the per-feature results, the node-scope batching plan
    (None at graph scope) and the number of forward passes run, the factual one (when
    :func:`prepare` ran it) and the safeguard's included. Of ``options``: ``num_hops`` (node
    scope's radius, None: inferred), ``progress``, ``client`` (a validated
    ``dask.distributed.Client`` or None, module docstring; used with two or more features) and
    ``remote`` (whole-graph passes on a cluster's partitions; then every feature runs here,
    its passes on the cluster).
    """
    num_hops, progress = options.num_hops, options.progress
    if options.client is not None and len(specs) > 1 and options.remote is None:
        return _run_distributed(graph, data, specs, scope, random_state, options)
    alts = [alternatives(data, spec) for spec in specs]
    plan = None
    if scope == "node":
        hops, adj, plan, checks = _node_plan(graph, alts, random_state, num_hops)
        total = plan.n_batches * sum(len(a) for a in alts) + checks.size
        eng = Intervener(graph, progress, total)
        effects = node_scope(eng, LocalGraph(eng, adj, hops), plan, specs, alts, checks)
        safeguard(eng, adj, checks, hops, specs, alts, effects.check_rows)
        flipped, delta, passes = effects.flipped, effects.delta, effects.passes
    else:
        eng = Intervener(graph, progress, sum(len(a) for a in alts))
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
    options: FlipOptions,
) -> tuple[FlipArrays, BatchPlan | None, int]:
    """:func:`run_interventions` with one task per feature on ``client`` (two or more
    features: the per-feature node-scope safeguard rows are then not used)."""
    alts = [alternatives(data, spec) for spec in specs]
    plan, adj = None, None
    if scope == "node":
        _, adj, plan, checks = _node_plan(graph, alts, random_state, options.num_hops)
    items = list(zip(specs, alts, strict=True))
    parts = map_blocks(options.client, _feature_task, items, graph, plan, adj)
    flipped = [p[0] for p in parts]
    delta = [p[1] for p in parts]
    passes = [int(p[2]) for p in parts]
    eng = Intervener(graph, options.progress, 0 if plan is None else int(checks.size))
    if plan is not None and adj is not None:
        safeguard(eng, adj, checks, plan.num_hops, specs, alts, {})
    eng.bar.close()
    arrays = FlipArrays(flipped, delta, passes, [len(a) for a in alts])
    return arrays, plan, graph.n_forward + sum(passes) + eng.passes
