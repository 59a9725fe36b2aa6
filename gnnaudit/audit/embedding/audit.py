r"""Embedding-space audit: the clustering methods on the model's own node representation.

:class:`EmbeddingAudit` reads the audited nodes' embeddings (:func:`node_embeddings`: the input
of the model's final layer, or a named layer's output) and answers four questions, each a graph
transformation of the same embedding:

1. **Density structure** (core graph). DBSCAN of the embeddings through
   :class:`~gnnaudit.graph_ops.CoreGraph`. ``min_samples`` defaults to
   :math:`\max(4, \min(2d - 1, 20))` (the ``2d - 1`` rule FairDen uses, capped because learned
   embeddings are high-dimensional but concentrate near a low-dimensional set); ``eps``
   defaults to the knee of the sorted k-distance curve (:func:`~gnnaudit.audit.
   embedding_parts.knee_eps`); when the knee radius yields fewer than two clusters of at least
   ``max(min_samples, 5% of the nodes)`` nodes, to the largest dc-tree radius below the knee
   that yields two (:func:`~gnnaudit.audit.embedding.parts.split_eps`; ``eps_rule_`` says
   which rule chose it). Per cluster: size, prediction mix, accuracy and FairDen's
   balance (Eq. 6-7) of the sensitive attribute (:attr:`EmbeddingAudit.cluster_table_`); a
   permutation test (labels shuffled) says whether they are less balanced than chance.
2. **Fair alternative** (dc-tree). FairDen on the same embeddings, same ``minPts`` and dc-tree,
   ``n_clusters`` clusters (default: DBSCAN's number of clusters, at least 2). Its balance and
   DCSI beside DBSCAN's: how far the model's own grouping is from a fair one.
3. **Readable description** (constraint graph; :mod:`gnnaudit.audit.embedding.description`).
   A :class:`~gnnaudit.clustering.TreeClustering`
   tree of depth ``<= depth`` on the *input features* of at most ``tree_nodes`` sampled
   clustered nodes; must-links join nodes of one embedding cluster that the dc-tree joins at
   its lowest levels; cannot-links come from the evidence pairs (``evidence``; up to a quarter
   of the budget) and join the closest nodes of two embedding clusters (a third of the rest:
   must-links alone are honoured by one big cluster). At most ``max_constraints`` constraints,
   ``tree_time_limit`` seconds per solve (LSU, anytime), retried with half the constraints up
   to three times. Reported: the rules, the ARI against the embedding clusters, and how many
   constraints hold.
4. **Counterparts** (core graph). ExDBSCAN on the embeddings: for a chosen node (``explain=``)
   or each noise node (up to ``max_explained``), the ``n_counterfactuals`` diverse reference
   core nodes of the nearest other cluster, as real node ids with their input features.

Bounds. The audited nodes are subsampled (seeded) to ``max_nodes`` (default 10,000); memory
is ``O(n * neighbours)`` for DBSCAN, ``O(n * minPts)`` for the dc-tree and FairDen,
``O(tree_nodes^2)`` clauses for the tree, ``O(max_explained * n_cores)`` for the counterparts.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from gnnaudit._aliases import deprecated_attribute, renamed_keywords
from gnnaudit._params import InstanceOf, Integer, Real, validate_parameters
from gnnaudit._validation import check_int
from gnnaudit.audit.context import resolve_nodes
from gnnaudit.audit.embedding.description import ClusterView, describe_clusters
from gnnaudit.audit.embedding.node_embeddings import forward_with_embeddings
from gnnaudit.audit.embedding.parts import (
    balance_permutation_test,
    cluster_table,
    feature_differences,
    knee_eps,
    min_cluster_size,
    nearest_other_cluster,
    split_eps,
)
from gnnaudit.audit.search.estimator_tags import GraphInputTagsMixin
from gnnaudit.audit.search.evidence_table import graph_user_ids
from gnnaudit.audit.search.results import GlobalEvidence
from gnnaudit.audit.sensitive import known_group_nodes, resolve_sensitive
from gnnaudit.clustering import ExDBSCAN, FairDen
from gnnaudit.clustering.metrics import balance, dcsi, group_mix, noise_fraction
from gnnaudit.datasets.scaler import recorded_inverse
from gnnaudit.errors import GnnAuditError, InvalidInputError, NotFittedError
from gnnaudit.graph_ops import CoreGraph, DCTree

__all__ = ["EmbeddingAudit", "COMPARISON_COLUMNS", "COUNTERPART_COLUMNS"]

logger = logging.getLogger(__name__)

COMPARISON_COLUMNS = ["method", "clusters", "noise_fraction", "balance", "dcsi"]
COUNTERPART_COLUMNS = [
    "query_node",
    "query_cluster",
    "target_cluster",
    "rank",
    "counterpart_node",
    "embedding_distance",
    "n_differing",
]


class EmbeddingAudit(GraphInputTagsMixin, BaseEstimator):
    """Density structure, fair alternative, readable tree and counterparts of a GNN's
    embeddings (module docstring). A scikit-learn estimator: ``__init__`` stores,
    ``get_params`` / ``set_params`` / ``clone`` work, :meth:`fit` checks the parameters
    (:attr:`_parameter_constraints`, an :class:`~gnnaudit.errors.InvalidInputError` naming the
    parameter) and sets only trailing-underscore attributes.

    Parameters
    ----------
    min_samples, eps : DBSCAN parameters (None: the documented rules).
    n_clusters : clusters of FairDen and of the tree (None: DBSCAN's number, at least 2).
    depth : depth of the description tree (1 .. 6).
    n_counterfactuals : counterpart core nodes per explained node (``k_counterfactuals=``:
        deprecated spelling, removed in 0.3.0).
    random_state : seed of the subsamples, permutations, FairDen and ExDBSCAN.
    layer : embedding layer (see :func:`~gnnaudit.audit.node_embeddings`).
    max_nodes : cap of the audited nodes clustered (uniform subsample above it).
    tree_nodes, max_constraints, tree_time_limit : size of the tree's MaxSAT model.
    max_explained : cap of the noise nodes explained when no node is chosen.
    n_permutations : permutations of the balance test.

    Attributes
    ----------
    nodes_, embeddings_ : audited node ids clustered (ascending) and their embeddings.
    layer_ : the hooked layer.
    predictions_, y_true_, sensitive_ : per node of ``nodes_`` (``y_true_`` may be None).
    eps_, min_samples_, k_distances_ : DBSCAN parameters and the sorted k-distance curve.
    eps_rule_ : ``"given"``, ``"knee"`` or ``"split"`` (module docstring, item 1).
    core_graph_, dc_tree_ : the graph objects.
    labels_, n_clusters_ : DBSCAN labels (-1 noise) and clusters.
    balance_, balance_p_value_, dcsi_ : of ``labels_``.
    cluster_table_ : per-cluster table.
    fair_labels_, fair_balance_, fair_dcsi_, fair_table_ : FairDen's.
    tree_ : the fitted TreeClustering or None.
    tree_rules_, tree_nodes_, tree_ari_, tree_ari_all_ : the tree's description and fit.
    must_link_, cannot_link_, constraints_held_, constraints_total_, tree_note_ : the tree's
        constraints (node id pairs) and how many it holds.
    counterparts_, counterpart_features_, counterpart_notes_ : ExDBSCAN counterparts (feature
        values in the table's own units when the graph records its standardisation).
    feature_units_ : ``(mean, scale)`` of that record
        (:func:`~gnnaudit.datasets.scaler.recorded_inverse`), or None: the tree's thresholds
        and the counterparts' values are then the model inputs.
    timings_ : seconds per method.
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "min_samples": [Integer(2, None), None],
        "eps": [Real(0.0, None, closed="neither"), None],
        "n_clusters": [Integer(2, None), None],
        "depth": [Integer(1, 6)],
        "n_counterfactuals": [Integer(1, None)],
        "random_state": [Integer(0, 2**32 - 1)],
        "layer": [InstanceOf(str, "a layer name"), None],
        "max_nodes": [Integer(10, None)],
        "tree_nodes": [Integer(4, 1000)],
        "max_constraints": [Integer(0, None)],
        "tree_time_limit": [Real(0.0, None, closed="neither")],
        "max_explained": [Integer(0, None)],
        "n_permutations": [Integer(1, None)],
    }

    k_counterfactuals = deprecated_attribute("k_counterfactuals", "n_counterfactuals")

    @renamed_keywords(deprecated={"k_counterfactuals": "n_counterfactuals"})
    def __init__(  # noqa: PLR0913  # estimator: mirrors its documented parameters
        self,
        min_samples: int | None = None,
        *,
        eps: float | None = None,
        n_clusters: int | None = None,
        depth: int = 3,
        n_counterfactuals: int = 3,
        random_state: int = 0,
        layer: str | None = None,
        max_nodes: int = 10_000,
        tree_nodes: int = 120,
        max_constraints: int = 150,
        tree_time_limit: float = 20.0,
        max_explained: int = 20,
        n_permutations: int = 199,
    ) -> None:
        self.min_samples = min_samples
        self.eps = eps
        self.n_clusters = n_clusters
        self.depth = depth
        self.n_counterfactuals = n_counterfactuals
        self.random_state = random_state
        self.layer = layer
        self.max_nodes = max_nodes
        self.tree_nodes = tree_nodes
        self.max_constraints = max_constraints
        self.tree_time_limit = tree_time_limit
        self.max_explained = max_explained
        self.n_permutations = n_permutations

    def _rng(self, offset: int) -> np.random.Generator:
        return np.random.default_rng([int(self.random_state), 13, offset])

    def _inputs(self, model: Any, data: Any, sensitive: Any, mask: Any) -> None:
        sens, name, _ = resolve_sensitive(data, sensitive)
        if sens is None:
            raise InvalidInputError(
                "sensitive is required: the embedding audit balances clusters by a sensitive "
                "attribute; pass sensitive= (a feature name or an (n,) array) or attach "
                "data.sensitive"
            )
        nodes = resolve_nodes(data, mask)
        known = known_group_nodes(data, nodes, [name])
        if known.size < nodes.size:  # nodes of unknown group are in no group (module sensitive)
            logger.info(
                "embedding audit: %d of %d audited nodes of unknown %s left out",
                nodes.size - known.size, nodes.size, name,
            )  # fmt: skip
            nodes = known
        if nodes.size > self.max_nodes:
            keep = np.sort(self._rng(0).choice(nodes.size, size=self.max_nodes, replace=False))
            logger.info("embedding audit: %d of %d audited nodes sampled", keep.size, nodes.size)
            nodes = nodes[keep]
        t0 = time.perf_counter()
        emb, logits, layer = forward_with_embeddings(model, data, self.layer)
        self.timings_ = {"embeddings": time.perf_counter() - t0}
        self.nodes_, self.layer_ = nodes, layer
        self.embeddings_ = emb.numpy().astype(np.float64)[nodes]
        self.predictions_ = logits.argmax(dim=1).numpy().astype(np.int64)[nodes]
        y = getattr(data, "y", None)
        self.y_true_ = None if y is None else y.detach().cpu().numpy().astype(np.int64)[nodes]
        self.sensitive_, self.sensitive_name_ = np.asarray(sens)[nodes], name or "sensitive"
        if np.unique(self.sensitive_).size < 2:
            raise InvalidInputError(
                f"sensitive attribute {self.sensitive_name_!r} takes a single value on the "
                f"{nodes.size} audited nodes; balance needs at least two groups"
            )
        x = data.x.detach().cpu().numpy().astype(np.float64)
        names = getattr(data, "feature_names", None)
        if names is None or len(names) != x.shape[1]:
            names = [f"x{i}" for i in range(x.shape[1])]
        self.input_features_, self.feature_names_ = x, [str(f) for f in names]
        self.feature_units_ = recorded_inverse(data, x.shape[1])

    # ------------------------------------------------------------------ fit
    @renamed_keywords(aliases={"sensitive_features": "sensitive"})
    def fit(
        self,
        model: Any,
        data: Any,
        sensitive: Any = None,
        evidence: Any = None,
        *,
        mask: Any = None,
        explain: int | None = None,
        progress: bool = False,
    ) -> EmbeddingAudit:
        """Run the four methods on the embeddings of the audited nodes; returns ``self``.

        Parameters
        ----------
        model : an ``nn.Module`` GNN or a :class:`~gnnaudit.audit.ModelAdapter` wrapping one.
        data : PyG ``Data`` (``x``, ``edge_index``; ``y`` and ``feature_names`` optional).
        sensitive : feature name, (num_nodes,) array, or None for ``data.sensitive``
            (``sensitive_features=`` is accepted as an alias; required: :class:`InvalidInputError` when neither is there).
        evidence : counterfactual evidence pairs for the tree's cannot-links: a
            :class:`~gnnaudit.audit.GlobalEvidence` or a global evidence table (``node_u``,
            ``node_v``, most similar first; the graph's own ids when ``data.node_ids`` is
            set); None: no cannot-link.
        mask : audited nodes (default ``data.mask``, else ``data.test_mask``, else all); nodes
            of unknown group (``data.sensitive_mask`` false for the data's own attribute) are
            left out.
        explain : a node id (one of the audited nodes) to find counterparts of; None: the
            noise nodes, up to ``max_explained``.
        progress : a tqdm bar over the five steps (embeddings, density, FairDen, tree,
            counterparts) on stderr; the tree's MaxSAT solves alone may take
            ``3 * tree_time_limit`` seconds.
        """
        validate_parameters(self)
        from tqdm.auto import tqdm

        bar = tqdm(total=5, desc="embedding audit", disable=not progress, leave=False)
        bar.set_postfix_str("embeddings")
        self._inputs(model, data, sensitive, mask)
        Z, n = self.embeddings_, self.embeddings_.shape[0]
        d = Z.shape[1]
        min_samples = (
            max(4, min(2 * d - 1, 20)) if self.min_samples is None else int(self.min_samples)
        )
        if n < 2 * min_samples:
            raise InvalidInputError(
                f"mask selects {n} audited nodes but density clustering with min_samples="
                f"{min_samples} needs at least {2 * min_samples}; audit more nodes or lower "
                "min_samples"
            )
        if self.n_clusters is not None and n < self.n_clusters * min_samples:
            raise InvalidInputError(
                f"n_clusters={self.n_clusters} needs at least n_clusters * min_samples = "
                f"{self.n_clusters * min_samples} audited nodes, got {n}"
            )
        explain_pos = self._explain_position(explain)
        self.min_samples_ = min_samples
        if isinstance(evidence, pd.DataFrame):  # an evidence table may name nodes by user ids
            evidence = GlobalEvidence.from_frame(evidence, user_ids=graph_user_ids(data))
        steps = (
            ("density", lambda: self._density(Z)),
            ("FairDen", lambda: self._fair(Z)),
            ("tree", lambda: self._tree(evidence)),
            ("counterparts", lambda: self._counterparts(explain_pos)),
        )
        for name, step in steps:
            bar.update(1)
            bar.set_postfix_str(name)
            step()
        bar.update(1)
        bar.close()
        return self

    def _explain_position(self, explain: Any) -> int | None:
        if explain is None:
            return None
        node = check_int("explain", explain, minimum=0)
        pos = int(np.searchsorted(self.nodes_, node))
        if pos >= self.nodes_.size or self.nodes_[pos] != node:
            raise InvalidInputError(
                f"explain={node} is not one of the audited (sampled) nodes; pick one of "
                f"nodes_ ({self.nodes_.size} nodes)"
            )
        return pos

    def _density(self, Z: np.ndarray) -> None:
        t0 = time.perf_counter()
        curve_eps, self.k_distances_ = knee_eps(Z, self.min_samples_)
        self.dc_tree_ = DCTree(min_samples=min(self.min_samples_, Z.shape[0])).fit(Z)
        self.eps_, self.eps_rule_ = float(curve_eps), "knee"
        if self.eps is not None:
            self.eps_, self.eps_rule_ = float(self.eps), "given"
        else:
            size = min_cluster_size(Z.shape[0], self.min_samples_)
            labels = self.dc_tree_.cut(self.eps_)
            sizes = np.bincount(labels[labels >= 0]) if (labels >= 0).any() else np.zeros(0)
            if int((sizes >= size).sum()) < 2:
                split = split_eps(self.dc_tree_, self.eps_, size)
                if split is not None:
                    self.eps_, self.eps_rule_ = split, "split"
        self.core_graph_ = CoreGraph.from_dbscan(Z, self.eps_, self.min_samples_)
        self.labels_ = self.core_graph_.labels
        self.n_clusters_ = int(self.core_graph_.n_clusters)
        self.timings_["dbscan"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.balance_, self.balance_p_value_ = balance_permutation_test(
            self.labels_, self.sensitive_, self.n_permutations, self._rng(1)
        )
        self.dcsi_ = dcsi(Z, self.labels_)
        self.cluster_table_ = cluster_table(
            self.labels_,
            self.core_graph_.core_mask,
            self.sensitive_,
            self.predictions_,
            self.y_true_,
        )
        self.timings_["balance_test_dcsi"] = time.perf_counter() - t0

    def _fair(self, Z: np.ndarray) -> None:
        t0 = time.perf_counter()
        k = self.n_clusters if self.n_clusters is not None else max(2, self.n_clusters_)
        self.fair_n_clusters_ = int(k)
        # the fair alternative shows what the balance target costs: min_balance is a hard target
        # here (min_dcsi_share=0), and its density cost is reported beside it (fair_dcsi_)
        fair = FairDen(
            n_clusters=k,
            min_samples=self.min_samples_,
            random_state=self.random_state,
            min_dcsi_share=0.0,
        )
        fair.fit(Z, sensitive_features=self.sensitive_, dc_tree=self.dc_tree_)
        self.fair_labels_ = fair.labels_
        self.fair_balance_ = balance(self.fair_labels_, self.sensitive_)
        self.fair_dcsi_ = dcsi(Z, self.fair_labels_)
        self.fair_table_ = group_mix(self.fair_labels_, self.sensitive_)
        self.timings_["fairden"] = time.perf_counter() - t0

    # ------------------------------------------------------------------ tree
    def _tree(self, evidence: Any) -> None:
        t0 = time.perf_counter()
        view = ClusterView(
            self.nodes_,
            self.labels_,
            self.n_clusters_,
            self.dc_tree_,
            self.input_features_,
            self.feature_names_,
            self.feature_units_,
        )
        found = describe_clusters(
            view,
            evidence,
            depth=int(self.depth),
            tree_nodes=int(self.tree_nodes),
            max_constraints=int(self.max_constraints),
            time_limit=float(self.tree_time_limit),
            random_state=self.random_state,
            rng=self._rng(2),
        )
        for f in dataclasses.fields(found):  # tree_, tree_rules_, must_link_ ...
            setattr(self, f"{f.name}_", getattr(found, f.name))
        self.timings_["tree"] = time.perf_counter() - t0

    # ------------------------------------------------------------------ counterparts
    def _counterparts(self, explain_pos: int | None) -> None:
        t0 = time.perf_counter()
        cg = self.core_graph_
        self.counterpart_notes_: list[str] = []
        if explain_pos is not None:
            queries = np.array([explain_pos], dtype=np.int64)
        else:
            queries = np.flatnonzero(self.labels_ == -1)[: int(self.max_explained)]
        targets = nearest_other_cluster(cg, queries)
        ex = ExDBSCAN(
            eps=self.eps_,
            min_samples=self.min_samples_,
            n_counterfactuals=self.n_counterfactuals,
            random_state=self.random_state,
        ).fit(self.embeddings_, core_graph=cg)
        rows: list[tuple] = []
        for q, t in zip(queries.tolist(), targets.tolist(), strict=True):  # few queries (capped)
            node = int(self.nodes_[q])
            if t < 0:
                self.counterpart_notes_.append(f"node {node}: no other cluster to explain toward")
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    cf = ex.explain(q, target=t)
            except GnnAuditError as exc:
                self.counterpart_notes_.append(f"node {node}: {exc}")
                continue
            for rank, core in enumerate(cf.reference_cores.tolist()):
                dist = float(np.linalg.norm(self.embeddings_[q] - self.embeddings_[core]))
                rows.append((node, int(self.labels_[q]), t, rank, int(self.nodes_[core]), dist))
        frame = pd.DataFrame(rows, columns=COUNTERPART_COLUMNS[:-1])
        x_audit = self.input_features_[self.nodes_]
        features = feature_differences(
            self.input_features_,
            self.feature_names_,
            frame["query_node"].to_numpy(dtype=np.int64),
            frame["counterpart_node"].to_numpy(dtype=np.int64),
            x_audit.std(axis=0),
            self.feature_units_,
        )
        d = len(self.feature_names_)
        differing = features["differs"].to_numpy().reshape(-1, d).sum(axis=1) if d else 0
        frame["n_differing"] = np.asarray(differing, dtype=np.int64)
        self.counterparts_ = frame.astype(
            {c: np.int64 for c in COUNTERPART_COLUMNS if c != "embedding_distance"}
        )
        self.counterpart_features_ = features
        self.timings_["counterparts"] = time.perf_counter() - t0

    # ------------------------------------------------------------------ results
    def _check_fitted(self) -> None:
        if getattr(self, "labels_", None) is None:
            raise NotFittedError("EmbeddingAudit is not fitted yet; call fit(model, data) first")

    def comparison(self) -> pd.DataFrame:
        """DBSCAN of the embeddings beside FairDen (:data:`COMPARISON_COLUMNS`)."""
        self._check_fitted()
        rows = [
            (
                "DBSCAN (model embedding)",
                self.n_clusters_,
                noise_fraction(self.labels_),
                self.balance_,
                self.dcsi_,
            ),
            (
                "FairDen (same embedding)",
                int(np.unique(self.fair_labels_[self.fair_labels_ >= 0]).size),
                noise_fraction(self.fair_labels_),
                self.fair_balance_,
                self.fair_dcsi_,
            ),
        ]
        return pd.DataFrame(rows, columns=COMPARISON_COLUMNS).astype({"clusters": np.int64})

    def to_frame(self) -> pd.DataFrame:
        """The per-cluster table of the embedding's DBSCAN clusters."""
        self._check_fitted()
        return self.cluster_table_
