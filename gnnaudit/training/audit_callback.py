"""A Lightning callback that audits the model with counterfactual evidences while it trains.

At the end of every ``every_n_epochs``-th validation epoch the callback predicts all nodes,
searches the global top-k counterfactual evidences among the nodes of ``stage``'s mask and the
local top-k evidences of each of them, and logs

* ``audit/accuracy_in_top_k``: accuracy on the distinct nodes of the top-k global pairs
  (CE paper Sec. 7.2; low values = the evidences sit on wrong predictions),
* ``audit/mean_similarity``: mean KS similarity of those pairs,
* ``audit/ds_top1`` ... ``audit/ds_top<top_features>``: the highest discrimination scores
  (Eq. 12); which (feature, value) each is stays in ``history_`` (``top_values``),
* ``audit/ds/<sensitive>`` and ``audit/ds_lift/<sensitive>``: best score and best lift of the
  watched ``sensitive`` feature, if given;
* ``audit/flip/<sensitive>``: the counterfactual flip rate of the watched feature on the
  stage's nodes (:func:`~gnnaudit.audit.sensitivity.flip.counterfactual_flip`, ``flip_scope``
  ``"graph"`` by default: one extra forward pass), if given.

Metrics are logged through ``pl_module.log_dict`` at epoch level, so they reach every attached
logger in the same row (step and epoch) as the ``val_*`` metrics and land in
``trainer.callback_metrics``, where ``EarlyStopping`` / ``ModelCheckpoint`` can monitor them.
Under DDP the audit runs on global rank zero only; its metrics are broadcast to the other ranks,
so every rank's ``callback_metrics`` (and so ``EarlyStopping``) sees the same values.

The model: any ``LightningModule`` whose forward takes ``(x, edge_index)``, or any module with a
``predict_fn(x, edge_index) -> logits``. The graph: ``data=``, else the datamodule's ``.data``,
else the full-batch validation batch (e.g. ``trainer.fit(m, DataLoader([data]),
DataLoader([data]))``).

The kernel-similarity embedding ``x^agg`` depends on the graph only, so it is computed once and
cached (keyed by the identity, shape and version counter of ``data.x`` / ``data.edge_index``);
per epoch only the predictions change. The search is the ``"sorted"`` backend
(:class:`~gnnaudit.audit.search.sorted_scan.SortedSimilaritySearcher`): the similarity order of the
stage's nodes is sorted once and rescanned with each epoch's predictions; above
``max_sorted_nodes`` stage nodes no ``m x m`` array is built and each audit runs the blocked
exact search (memory bounded by its 64 MiB blocks).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import lightning as L
import numpy as np
import pandas as pd
import torch
from lightning.pytorch.callbacks import Callback

from gnnaudit._aliases import renamed_keywords
from gnnaudit._validation import MAX_NUM_HOPS, check_choice, check_float, check_int
from gnnaudit.audit.fairness.discrimination import arrays_to_table, code_features, score_arrays
from gnnaudit.audit.fairness.feature_units import FeatureUnits
from gnnaudit.audit.search import sorted_scan as search_sorted
from gnnaudit.audit.search.base import SearchSpace
from gnnaudit.audit.search.evidence_table import evidence_frame, graph_user_ids
from gnnaudit.audit.search.inputs import node_features
from gnnaudit.audit.search.sorted_scan import SortedSimilaritySearcher
from gnnaudit.errors import InvalidInputError

__all__ = ["CounterfactualAuditCallback"]

logger = logging.getLogger(__name__)


class CounterfactualAuditCallback(Callback):
    """Log counterfactual-evidence audit metrics at the end of validation.

    Parameters
    ----------
    every_n_epochs : audit every n-th epoch (1 = every epoch).
    k : number of global pairs and of local evidences per node.
    stage : whose mask defines the searched nodes: ``"val"`` (default), ``"test"`` or
        ``"train"``.
    num_hops, alpha : KS embedding parameters (Eq. 5-7).
    top_features : how many of the highest discrimination scores to log.
    features : feature names / indices to score (default: columns with <= 10 values).
    sensitive : optional feature name whose best discrimination lift and counterfactual flip
        rate are logged every time.
    min_support : ignore (feature, value) rows held by fewer stage nodes.
    max_sorted_nodes : up to this many stage nodes ``m``, all pairwise similarities are sorted
        once and reused every epoch (memory ``m^2 (4 + b)`` bytes, b <= 4: 96 MB at the default
        cap :data:`gnnaudit.audit.search.sorted_scan.DEFAULT_MAX_NODES` = 4,000, read when the
        callback first audits); above it no ``m x m`` array is built and each audit runs the
        blocked exact search (:class:`~gnnaudit.audit.search.exact.ExactSearcher`, memory
        ``O(m d)`` plus its 64 MiB similarity blocks).
    data : the graph to audit (default: the datamodule's ``.data`` or the full validation batch).
    predict_fn : ``predict_fn(x, edge_index) -> logits`` when the module's forward takes other
        arguments.
    flip_scope : ``"graph"`` (one extra forward pass) or ``"node"`` (batched per-node
        interventions on at most ``flip_max_nodes`` nodes; needs the receptive field
        ``model_hops`` when it cannot be inferred).
    model_hops, flip_max_nodes : see ``flip_scope``.

    Attributes (after an audit)
    ---------------------------
    evidences_ : evidence table of the latest global top-k pairs
        (``node_u, node_v, pred_u, pred_v, similarity, rank``; the graph's own ids when
        ``data.node_ids`` is set).
    discrimination_ : latest discrimination table.
    history_ : list of dicts, one per audit (epoch, metrics, wall ``seconds`` and
        ``cpu_seconds`` of this thread, ``top_values`` naming the logged top scores).
    seconds_ : total wall time spent auditing.
    """

    @renamed_keywords(aliases={"sensitive_features": "sensitive"})
    def __init__(  # noqa: PLR0913  # Lightning callback: mirrors its documented parameters
        self,
        every_n_epochs: int = 1,
        k: int = 10,
        stage: str = "val",
        num_hops: int = 3,
        alpha: float = 0.5,
        top_features: int = 3,
        features: Any = None,
        sensitive: str | None = None,
        min_support: int = 1,
        max_sorted_nodes: int | None = None,
        data: Any = None,
        predict_fn: Any = None,
        flip_scope: str = "graph",
        model_hops: int | None = None,
        flip_max_nodes: int = 2000,
    ) -> None:
        super().__init__()
        self.every_n_epochs = check_int("every_n_epochs", every_n_epochs, minimum=1)
        self.k = check_int("k", k, minimum=1)
        self.stage = check_choice("stage", stage, ("train", "val", "test"))
        self.num_hops = check_int("num_hops", num_hops, minimum=0, maximum=MAX_NUM_HOPS)
        self.alpha = check_float("alpha", alpha, minimum=0.0, maximum=1.0)
        self.top_features = check_int("top_features", top_features, minimum=0)
        self.features = features
        self.sensitive = sensitive
        self.min_support = check_int("min_support", min_support, minimum=1)
        self.max_sorted_nodes = (
            None
            if max_sorted_nodes is None
            else check_int("max_sorted_nodes", max_sorted_nodes, minimum=0)
        )
        if data is not None and getattr(data, "x", None) is None:
            raise InvalidInputError("data must be a PyG Data with x and edge_index")
        self.data = data
        if predict_fn is not None and not callable(predict_fn):
            raise InvalidInputError(f"predict_fn must be callable, got {type(predict_fn).__name__}")
        self.predict_fn = predict_fn
        self.flip_scope = check_choice("flip_scope", flip_scope, ("graph", "node"))
        self.model_hops = None if model_hops is None else check_int("model_hops", model_hops)
        self.flip_max_nodes = check_int("flip_max_nodes", flip_max_nodes, minimum=1)
        self.flip_: Any = None
        self._pairs: tuple | None = None
        self._scores: dict[str, np.ndarray] | None = None
        self.history_: list[dict[str, Any]] = []
        self.seconds_ = 0.0
        self._cache_key: tuple | None = None
        self._captured: torch.Tensor | None = None
        self._hook: Any = None
        self._cache: dict[str, Any] = {}

    # ------------------------------------------------------------------ data
    def _graph(self, trainer: L.Trainer) -> Any:
        if self.data is not None:
            return self.data
        dm = getattr(trainer, "datamodule", None)
        data = getattr(dm, "data", None)
        if data is None:
            data = getattr(self, "_last_batch", None)
        if data is None or getattr(data, "x", None) is None:
            raise InvalidInputError(
                "CounterfactualAuditCallback needs the full graph: pass data=..., use a "
                "GraphDataModule (or a datamodule with a .data attribute) or full-batch validation"
            )
        return data

    # ------------------------------------------------ reuse the validation forward pass
    def _due(self, trainer: L.Trainer) -> bool:
        return (
            not trainer.sanity_checking and (trainer.current_epoch + 1) % self.every_n_epochs == 0
        )

    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Hook the module's forward so the full-graph logits of the validation step (eval mode)
        are reused instead of running the model a second time."""
        self._captured = None
        self._remove_hook()
        if not self._due(trainer):
            return

        def keep(module: Any, args: Any, output: Any) -> None:
            if isinstance(output, torch.Tensor) and output.dim() == 2 and not module.training:
                self._captured = output.detach()

        self._hook = pl_module.register_forward_hook(keep)

    def _remove_hook(self) -> None:
        hook = getattr(self, "_hook", None)
        if hook is not None:
            hook.remove()
            self._hook = None

    def on_validation_batch_start(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        graph = _full_graph(batch)
        if graph is not None:
            self._last_batch = graph  # full-batch validation: the batch is the graph

    def _prepare(self, data: Any) -> dict[str, Any]:
        """KS embedding (unit rows), node sets and feature columns, cached across epochs."""
        mask = getattr(data, f"{self.stage}_mask", None)
        if mask is None:
            raise InvalidInputError(f"data has no {self.stage}_mask for stage={self.stage!r}")
        key = (
            id(data.x),
            tuple(data.x.shape),
            data.x._version,
            id(data.edge_index),
            tuple(data.edge_index.shape),
            data.edge_index._version,
            id(mask),
            mask._version,
        )
        if key == self._cache_key:
            return self._cache
        from gnnaudit.graph_ops.neighbourhood import ks_embedding

        x_cpu = data.x.detach().cpu()
        ks = ks_embedding(x_cpu, data.edge_index.detach().cpu(), self.num_hops, self.alpha)
        nodes = np.flatnonzero(mask.detach().cpu().numpy()).astype(np.int64)
        emb = ks[torch.from_numpy(nodes)].to(torch.float64)
        norm = torch.linalg.vector_norm(emb, dim=1, keepdim=True)
        emb = torch.where(norm > 0, emb / norm.clamp_min(1e-300), torch.zeros_like(emb))
        x_np, names = node_features(data)
        self._cache = {
            "nodes": nodes,
            "emb": np.ascontiguousarray(emb.to(torch.float32).numpy()),
            "coding": code_features(
                x_np, names, self.features, units=FeatureUnits.from_data(data, x_np.shape[1])
            ),
            "y": data.y.detach().cpu().numpy(),
            "searcher": None,
            "user_ids": graph_user_ids(data),
        }
        self._cache_key = key
        return self._cache

    # ---------------------------------------------------------------- results
    @property
    def evidences_(self) -> pd.DataFrame | None:
        """Latest global top-k pairs, an evidence table (``node_u, node_v, pred_u, pred_v,
        similarity, rank``)."""
        if self._pairs is None:
            return None
        lo, hi, sim, pred_all, user_ids = self._pairs
        return evidence_frame(
            lo, hi, pred_all[lo], pred_all[hi], sim, np.arange(1, lo.size + 1), user_ids=user_ids
        )

    @property
    def discrimination_(self) -> pd.DataFrame | None:
        """Latest discrimination table (sorted by score, as ``discrimination_scores``)."""
        if self._scores is None:
            return None
        return arrays_to_table(self._scores, self._cache["coding"])

    # ---------------------------------------------------------------- audit
    def _log(self, pl_module: L.LightningModule, metrics: dict[str, float]) -> None:
        """Epoch-level ``log_dict``: same logger row as ``val_*``, in ``callback_metrics``."""
        if metrics:
            pl_module.log_dict(
                {k: float(v) for k, v in metrics.items()},
                on_step=False,
                on_epoch=True,
                batch_size=1,
            )

    def _searcher(self, cache: dict[str, Any], pred: np.ndarray) -> SortedSimilaritySearcher:
        """The sorted searcher of the stage's nodes with this epoch's predictions (the order is
        built once per graph and shared)."""
        base = cache["searcher"]
        if base is None:
            cap = (
                search_sorted.DEFAULT_MAX_NODES
                if self.max_sorted_nodes is None
                else self.max_sorted_nodes
            )
            base = SortedSimilaritySearcher(max_nodes=cap).build(
                SearchSpace(cache["emb"], pred, cache["nodes"])
            )
            cache["searcher"] = base
            return base
        return base.with_predictions(pred)

    def _flip(
        self, pl_module: L.LightningModule, data: Any, nodes: np.ndarray, logits: torch.Tensor
    ) -> float:
        """Counterfactual flip rate of the watched feature on the stage's nodes."""
        from gnnaudit.audit.sensitivity.flip import counterfactual_flip

        was = pl_module.training
        try:
            self.flip_ = counterfactual_flip(
                pl_module,
                data,
                self.sensitive,
                mask=nodes,
                scope=self.flip_scope,
                n_boot=200,
                num_hops=self.model_hops,
                max_nodes=self.flip_max_nodes,
                predict_fn=self.predict_fn,
                base_logits=logits.detach().cpu(),
            )
        finally:
            pl_module.train(was)
        return float(self.flip_.rate)

    def state_dict(self) -> dict[str, Any]:
        """The audit history and time spent (saved in Lightning checkpoints)."""
        return {"history": list(self.history_), "seconds": float(self.seconds_)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (a resumed run continues the history)."""
        self.history_ = list(state_dict.get("history", []))
        self.seconds_ = float(state_dict.get("seconds", 0.0))

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self._due(trainer):
            self._remove_hook()
            return
        start, cpu_start = time.perf_counter(), time.thread_time()
        metrics: dict[str, float] = {}
        labels: list[str] = []
        try:
            if trainer.is_global_zero:
                metrics, labels = self._audit(trainer, pl_module)
        finally:
            self._remove_hook()
        if trainer.world_size > 1:
            metrics = trainer.strategy.broadcast(metrics, src=0)
        self._log(pl_module, metrics)
        spent = time.perf_counter() - start
        self.seconds_ += spent
        self.history_.append(
            {
                "epoch": int(trainer.current_epoch),
                "seconds": spent,
                "cpu_seconds": time.thread_time() - cpu_start,
                "top_values": labels,
                **metrics,
            }
        )

    def _audit(
        self, trainer: L.Trainer, pl_module: L.LightningModule
    ) -> tuple[dict[str, float], list[str]]:
        """This epoch's metrics and the names of the logged top discrimination scores."""
        data = self._graph(trainer)
        cache = self._prepare(data)
        nodes = cache["nodes"]
        logits = self._captured
        if logits is None or logits.shape[0] != data.x.shape[0]:
            with torch.no_grad():
                was = pl_module.training
                pl_module.eval()
                call = self.predict_fn if self.predict_fn is not None else pl_module
                logits = call(data.x.to(pl_module.device), data.edge_index.to(pl_module.device))
                pl_module.train(was)
        pred_all = logits.argmax(-1).cpu().numpy().astype(np.int64)
        pred = pred_all[nodes]
        metrics: dict[str, float] = {}
        labels: list[str] = []
        counts = np.bincount(pred - pred.min()) if pred.size else np.zeros(0, dtype=np.int64)
        total_pairs = (int(counts.sum()) ** 2 - int((counts * counts).sum())) // 2
        if total_pairs > 0:
            kk = min(self.k, nodes.size - 1)
            searcher = self._searcher(cache, pred)
            pairs = searcher.global_pairs(min(self.k, total_pairs))
            lo = np.minimum(pairs.node_u, pairs.node_v)
            hi = np.maximum(pairs.node_u, pairs.node_v)
            sim = pairs.similarity
            self._pairs = (lo, hi, sim, pred_all, cache["user_ids"])
            distinct = np.unique(np.concatenate([lo, hi]))
            metrics["audit/accuracy_in_top_k"] = float(
                np.mean(pred_all[distinct] == cache["y"][distinct])
            )
            metrics["audit/mean_similarity"] = float(sim.mean())
            if self.top_features or self.sensitive:
                ev = searcher.local(np.arange(nodes.size), kk).evidence
                has = (ev >= 0).any(axis=1)
                ev = ev[has]
                coding = cache["coding"]
                sc = score_arrays(
                    coding, nodes[has], ev, pred_all, nodes, min_support=self.min_support
                )
                self._scores = sc
                lift = sc["score"] - sc["baseline"]
                order = np.lexsort((-lift, -sc["score"]))[: self.top_features]
                for i, j in enumerate(order, start=1):
                    metrics[f"audit/ds_top{i}"] = float(sc["score"][j])
                    col = int(sc["column"][j])
                    labels.append(f"{coding.names[col]}={coding.labels[col][sc['code'][j]]}")
                if self.sensitive is not None:
                    sel = np.flatnonzero(
                        np.asarray(coding.names, dtype=object)[sc["column"]] == self.sensitive
                    )
                    if sel.size:
                        metrics[f"audit/ds/{self.sensitive}"] = float(sc["score"][sel].max())
                        metrics[f"audit/ds_lift/{self.sensitive}"] = float(lift[sel].max())
        else:
            logger.info(
                "audit skipped at epoch %d: one predicted class only", trainer.current_epoch
            )
        if self.sensitive is not None:
            metrics[f"audit/flip/{self.sensitive}"] = self._flip(pl_module, data, nodes, logits)
        return metrics, labels

    @property
    def searcher_(self) -> SortedSimilaritySearcher | None:
        """The sorted-similarity searcher of the stage's nodes (None before the first audit);
        its ``uses_sorted_order`` says whether the stage fitted under ``max_sorted_nodes``."""
        return self._cache.get("searcher") if self._cache else None


def _full_graph(batch: Any) -> Any:
    """The whole graph when a validation batch is one (a ``Data``, or a PyG ``Batch`` of a single
    graph as ``DataLoader([data])`` yields), None for sampled subgraphs (``n_id`` set by the
    neighbour loaders) and other batches."""
    from torch_geometric.data import Batch, Data

    if isinstance(batch, Batch):
        return batch.get_example(0) if batch.num_graphs == 1 else None
    if isinstance(batch, Data) and getattr(batch, "n_id", None) is None:
        return batch if getattr(batch, "edge_index", None) is not None else None
    return None
