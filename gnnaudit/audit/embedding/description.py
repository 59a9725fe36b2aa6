r"""The readable description of the embedding clusters (item 3 of
:class:`~gnnaudit.audit.EmbeddingAudit`): a :class:`~gnnaudit.clustering.TreeClustering` tree
on the *input features* of a sample of clustered nodes that reproduces the embedding's
clusters under constraints.

* the sample (:func:`tree_sample`): the endpoints of the first evidence pairs, then the
  clustered nodes stratified by cluster, at most ``tree_nodes``;
* the constraints: cannot-links from the evidence pairs (:func:`evidence_positions`, up to a
  quarter of the budget) and between the closest nodes of two clusters (a third of the rest),
  must-links between the nodes of one cluster the dc-tree joins at its lowest levels
  (:func:`lowest_merge_pairs`); a cannot-link inside a must-link component is dropped;
* the tree (:func:`describe_clusters`): depth ``<= depth``, LSU MaxSAT with ``time_limit``
  seconds per solve, retried with half the constraints up to three times; reported are its
  rules, the ARI against the embedding clusters (sample and every clustered node) and the
  constraints it holds. The tree is fitted on the model inputs; its rules read in the table's
  own units when the graph records its standardisation (``ClusterView.units``: each threshold
  mapped back, ``raw = t * scale + mean``, as the split is unchanged by that positive affine
  map).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import adjusted_rand_score

from gnnaudit.audit.search.results import GlobalEvidence
from gnnaudit.clustering import TreeClustering
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import ConstraintGraph, DCTree

__all__ = [
    "TreeDescription",
    "ClusterView",
    "describe_clusters",
    "lowest_merge_pairs",
    "evidence_positions",
    "tree_sample",
]

logger = logging.getLogger(__name__)


def _no_pairs() -> np.ndarray:
    return np.empty((0, 2), dtype=np.int64)


@dataclass
class TreeDescription:
    """What :func:`describe_clusters` found; each field is the
    :class:`~gnnaudit.audit.EmbeddingAudit` attribute of the same name plus ``_``.

    Attributes
    ----------
    tree : the fitted TreeClustering, or None (``tree_note`` says why).
    tree_rules : its rules as text.
    tree_note : why there is no tree ("" when there is one).
    tree_status : the solver's status of the last attempt (None: no attempt).
    tree_ari, tree_ari_all : ARI against the embedding clusters on the sample and on every
        clustered node.
    tree_nodes : the sampled node ids.
    must_link, cannot_link : the constraints as node id pairs.
    evidence_cannot_links : cannot-links taken from the evidence pairs.
    constraints_held, constraints_total : how many constraints the tree holds, of how many.
    """

    tree: TreeClustering | None = None
    tree_rules: str = ""
    tree_note: str = ""
    tree_status: str | None = None
    tree_ari: float = float("nan")
    tree_ari_all: float = float("nan")
    tree_nodes: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    must_link: np.ndarray = field(default_factory=_no_pairs)
    cannot_link: np.ndarray = field(default_factory=_no_pairs)
    evidence_cannot_links: int = 0
    constraints_held: int = 0
    constraints_total: int = 0


@dataclass(frozen=True)
class ClusterView:
    """The embedding clusters :func:`describe_clusters` describes: the audited node ids
    (ascending), their DBSCAN ``labels`` (-1 noise) and number of clusters, the dc-tree of
    their embeddings, the input features of every node of the graph with their names, and
    ``units``: ``(mean, scale)`` of the standardisation the graph records, or None
    (:func:`~gnnaudit.datasets.scaler.recorded_inverse`)."""

    nodes: np.ndarray
    labels: np.ndarray
    n_clusters: int
    dc_tree: DCTree
    input_features: np.ndarray
    feature_names: list[str]
    units: tuple[np.ndarray, np.ndarray] | None = None


def describe_clusters(
    view: ClusterView,
    evidence: Any,
    *,
    depth: int,
    tree_nodes: int,
    max_constraints: int,
    time_limit: float,
    random_state: int,
    rng: np.random.Generator,
) -> TreeDescription:
    """The constrained tree describing ``view``'s clusters (module docstring)."""
    out = TreeDescription()
    cl_all = evidence_positions(evidence, view.nodes)
    if view.n_clusters < 2:
        out.tree_note = (
            f"no tree: DBSCAN found {view.n_clusters} density cluster(s) in the embeddings, "
            "so there is no grouping to describe"
        )
        return out
    sample, cl_local = tree_sample(cl_all, view.labels, tree_nodes, max_constraints, rng)
    labels = view.labels[sample]
    out.evidence_cannot_links = len(cl_local)
    room = max(0, max_constraints - len(cl_local))
    cross = lowest_merge_pairs(view.dc_tree, sample, labels, room // 3, same=False)
    ml_local = lowest_merge_pairs(view.dc_tree, sample, labels, room - len(cross))
    cl_local = np.concatenate([cl_local.reshape(-1, 2), cross]).astype(np.int64)
    graph = ConstraintGraph(sample.size, ml_local)
    if len(cl_local):  # a cannot-link inside a must-link component would be infeasible
        keep = graph.component_of(cl_local[:, 0]) != graph.component_of(cl_local[:, 1])
        cl_local = cl_local[keep]
    X = view.input_features[view.nodes[sample]]
    k_tree = max(int(min(np.unique(labels[labels >= 0]).size, 2**depth)), 2)
    for attempt in range(3):  # halve the constraints when no tree honours them
        est = TreeClustering(
            n_clusters=k_tree,
            depth=depth,
            min_clusters=2,
            solver="lsu",
            time_limit=float(time_limit),
            random_state=random_state,
        )
        est.fit(X, must_link=ml_local, cannot_link=cl_local)
        if est.labels_ is not None:
            break
        logger.info("tree attempt %d: %s; halving the constraints", attempt, est.status_)
        ml_local = ml_local[: len(ml_local) // 2]
        cl_local = cl_local[: len(cl_local) // 2]
    out.tree_nodes = view.nodes[sample]
    out.must_link = out.tree_nodes[ml_local] if len(ml_local) else ml_local
    out.cannot_link = out.tree_nodes[cl_local] if len(cl_local) else cl_local
    out.tree_status = est.status_
    if est.labels_ is None:
        out.tree_note = (
            f"no tree: the MaxSAT solver returned {est.status_!r} within {time_limit} s even "
            "with halved constraints"
        )
        return out
    _score(out, est, view, labels, ml_local, cl_local)
    return out


def _rules(est: TreeClustering, view: ClusterView) -> str:
    """The tree's rules, thresholds in the table's own units when ``view.units`` says how."""
    if view.units is None:
        return est.export_text(view.feature_names)
    mean, scale = view.units
    tree = est.tree_
    assert tree is not None  # a fitted tree (checked by the caller)
    shown = dataclasses.replace(
        tree, threshold=tree.threshold * scale[tree.feature] + mean[tree.feature]
    )
    return shown.export_text(view.feature_names)


def _score(
    out: TreeDescription,
    est: TreeClustering,
    view: ClusterView,
    labels: np.ndarray,
    ml_local: np.ndarray,
    cl_local: np.ndarray,
) -> None:
    """The fitted tree's rules, the constraints it holds and its ARI, into ``out``."""
    out.tree = est
    out.tree_rules = _rules(est, view)
    tl = est.labels_
    assert tl is not None  # a fitted tree (checked by the caller)
    held = int(np.sum(tl[ml_local[:, 0]] == tl[ml_local[:, 1]])) if len(ml_local) else 0
    held += int(np.sum(tl[cl_local[:, 0]] != tl[cl_local[:, 1]])) if len(cl_local) else 0
    out.constraints_held, out.constraints_total = held, len(ml_local) + len(cl_local)
    clustered = labels >= 0
    out.tree_ari = float(adjusted_rand_score(labels[clustered], tl[clustered]))
    every = np.flatnonzero(view.labels >= 0)
    routed = est.predict(view.input_features[view.nodes[every]])
    out.tree_ari_all = float(adjusted_rand_score(view.labels[every], routed))


def lowest_merge_pairs(
    tree: DCTree, positions: np.ndarray, labels: np.ndarray, budget: int, *, same: bool = True
) -> np.ndarray:
    """Pairs (indices into ``positions``, rows of the dc-tree's points) of smallest dc-distance.

    ``same=True`` (must-links): pairs inside one cluster (``labels >= 0``); each cluster gets a
    share of ``budget`` proportional to its number of nodes (at least one pair) and takes its
    pairs of smallest dc-distance, i.e. the nodes the dc-tree joins at its lowest levels.
    ``same=False`` (cannot-links): pairs of two different clusters, the ``budget`` of smallest
    dc-distance overall (the closest nodes the clustering still separates). Ties by index.
    Memory ``O(len(positions)^2)``; callers cap ``positions``.
    """
    m = positions.size
    if budget <= 0 or m < 2:
        return np.empty((0, 2), dtype=np.int64)
    iu, ju = np.triu_indices(m, 1)
    both = (labels[iu] >= 0) & (labels[ju] >= 0)
    keep = both & ((labels[iu] == labels[ju]) if same else (labels[iu] != labels[ju]))
    iu, ju = iu[keep], ju[keep]
    if iu.size == 0:
        return np.empty((0, 2), dtype=np.int64)
    dc = tree.distance(positions[iu], positions[ju])
    if not same:
        chosen = np.lexsort((ju, iu, dc))[:budget]
        return np.stack([iu[chosen], ju[chosen]], axis=1).astype(np.int64)
    cl = labels[iu]
    order = np.lexsort((ju, iu, dc, cl))
    cl_sorted = cl[order]
    start = np.searchsorted(cl_sorted, cl_sorted, side="left")
    rank = np.arange(order.size) - start
    clusters, members = np.unique(labels[labels >= 0], return_counts=True)
    quota = np.maximum(1, np.floor(budget * members / members.sum())).astype(np.int64)
    within = rank < quota[np.searchsorted(clusters, cl_sorted)]
    chosen = order[within][:budget]
    return np.stack([iu[chosen], ju[chosen]], axis=1).astype(np.int64)


def evidence_positions(evidence: Any, nodes: np.ndarray) -> np.ndarray:
    """Evidence pairs (a GlobalEvidence or its DataFrame) as positions into the ascending
    ``nodes`` (pairs with both nodes among them), best first."""
    if evidence is None:
        return np.empty((0, 2), dtype=np.int64)
    if isinstance(evidence, pd.DataFrame):
        evidence = GlobalEvidence.from_frame(evidence)
    if not isinstance(evidence, GlobalEvidence):
        raise InvalidInputError(
            "evidence must be a GlobalEvidence or a DataFrame with node_u, node_v columns, "
            f"got {type(evidence).__name__}"
        )
    u, v = np.asarray(evidence.node_u), np.asarray(evidence.node_v)
    pu, pv = np.searchsorted(nodes, u), np.searchsorted(nodes, v)
    pu, pv = np.minimum(pu, nodes.size - 1), np.minimum(pv, nodes.size - 1)
    ok = (nodes[pu] == u) & (nodes[pv] == v) & (u != v)
    return np.stack([pu[ok], pv[ok]], axis=1).astype(np.int64)


def tree_sample(
    cl_pairs: np.ndarray,
    labels: np.ndarray,
    cap: int,
    max_constraints: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the tree's nodes (at most ``cap``: the endpoints of the first evidence
    cannot-links ``cl_pairs``, the rest stratified by DBSCAN cluster ``labels``) and the
    cannot-link pairs among them (local ids)."""
    budget = min(max_constraints // 4, cap // 4)
    chosen = np.unique(cl_pairs[:budget].ravel())
    while chosen.size > cap // 2 and budget > 0:
        budget //= 2
        chosen = np.unique(cl_pairs[:budget].ravel())
    cl_pairs = cl_pairs[:budget]
    clustered = np.flatnonzero(labels >= 0)
    rest = np.setdiff1d(clustered, chosen)
    room = max(0, cap - chosen.size)
    if rest.size > room:  # stratified by cluster: proportional, at least 2 each
        labs = labels[rest]
        ids, counts = np.unique(labs, return_counts=True)
        quota = np.maximum(2, np.floor(room * counts / counts.sum())).astype(np.int64)
        keys = rng.random(rest.size)
        order = np.lexsort((keys, labs))
        start = np.searchsorted(labs[order], labs[order], side="left")
        rank = np.arange(order.size) - start
        take = order[rank < quota[np.searchsorted(ids, labs[order])]]
        rest = np.sort(rest[take])
    sample = np.union1d(chosen, rest)
    local = np.searchsorted(sample, cl_pairs) if cl_pairs.size else cl_pairs
    return sample, local.reshape(-1, 2)
