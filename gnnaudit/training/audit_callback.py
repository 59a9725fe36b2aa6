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
  watched ``sensitive`` feature, if given.

Metrics go straight to ``trainer.callback_metrics`` (so ``EarlyStopping`` / ``ModelCheckpoint``
can monitor them) and to every logger's ``log_metrics`` at the current global step.

The kernel-similarity embedding ``x^agg`` depends on the graph only, so it is computed once and
cached (keyed by the identity, shape and version counter of ``data.x`` / ``data.edge_index``);
per epoch only the predictions change, and the exact search over the stage's nodes costs one
``(m x m)`` similarity product for ``m`` stage nodes (blocked by the exact backend).
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

from gnnaudit._validation import check_choice, check_float, check_int
from gnnaudit.audit.discrimination import arrays_to_table, code_features, score_arrays
from gnnaudit.audit.evidence_inputs import node_features
from gnnaudit.audit.search_base import SearchSpace
from gnnaudit.errors import InvalidInputError

__all__ = ["CounterfactualAuditCallback"]

logger = logging.getLogger(__name__)


class _SortedSimilarity:
    """All pairwise KS similarities among the stage's nodes, sorted once.

    The embedding is fixed during training, so the similarity order is too; per epoch only the
    prediction filter changes. Local top-k: the first k entries of each row's order (similarity
    descending, ties by smaller position, the exact backend's rule) whose prediction differs.
    Global top-k: the first k upper-triangle pairs of the global order with different
    predictions (ties by smaller ``(u, v)``). Memory: ``m^2`` int32 positions + ``m(m-1)/2``
    (two int32 and one float32) for ``m`` nodes, built once; each epoch touches ``O(m^2)``
    small integers.
    """

    def __init__(self, emb: np.ndarray) -> None:
        t = torch.from_numpy(emb)
        sim = torch.mm(t, t.t()).numpy()
        m = sim.shape[0]
        self.order = np.argsort(-sim, axis=1, kind="stable").astype(np.int32)
        iu, ju = np.triu_indices(m, 1)
        s = sim[iu, ju]
        o = np.argsort(-s, kind="stable")  # triu_indices are in (u, v) order: stable = ties
        self.gu = iu[o].astype(np.int32)
        self.gv = ju[o].astype(np.int32)
        self.gs = s[o]

    @staticmethod
    def _first_k(order: np.ndarray, pred_rows: np.ndarray, pred: np.ndarray, k: int) -> tuple:
        diff = pred[order] != pred_rows[:, None]
        csum = np.cumsum(diff, axis=1)
        rows, cols = np.nonzero(diff & (csum <= k))
        return rows, csum[rows, cols] - 1, order[rows, cols], csum[:, -1]

    def local(self, pred: np.ndarray, k: int) -> np.ndarray:
        """(m, k) positions padded with -1. Scans a window of each row's order first (the k-th
        candidate is usually near the front) and only rows that run short in full."""
        m = pred.shape[0]
        out = np.full((m, k), -1, dtype=np.int64)
        width = min(m, max(4 * k, 32))
        rows, rank, pos, found = self._first_k(self.order[:, :width], pred, pred, k)
        out[rows, rank] = pos
        short = np.flatnonzero(found < k) if width < m else np.zeros(0, dtype=np.int64)
        if short.size:
            out[short] = -1
            r, rank, pos, _ = self._first_k(self.order[short], pred[short], pred, k)
            out[short[r], rank] = pos
        return out

    def global_pairs(self, pred: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """First k pairs with different predictions, scanning the sorted pairs in chunks."""
        chunk = max(64 * k, 4096)
        picked: list[np.ndarray] = []
        need = k
        for start in range(0, self.gu.size, chunk):
            sl = slice(start, start + chunk)
            hit = np.flatnonzero(pred[self.gu[sl]] != pred[self.gv[sl]])[:need] + start
            picked.append(hit)
            need -= hit.size
            if need <= 0:
                break
        sel = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
        return self.gu[sel].astype(np.int64), self.gv[sel].astype(np.int64), self.gs[sel]


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
    sensitive : optional feature name whose best lift is logged every time.
    min_support : ignore (feature, value) rows held by fewer stage nodes.
    max_sorted_nodes : up to this many stage nodes, all pairwise similarities are sorted once
        and reused every epoch (memory about ``10 m^2`` bytes, 40 MB at 2000); above it, each
        audit runs the exact blocked search.

    Attributes (after an audit)
    ---------------------------
    evidences_ : DataFrame of the latest global top-k pairs (``node_u, node_v, similarity,
        pred_u, pred_v, rank``).
    discrimination_ : latest discrimination table.
    history_ : list of dicts, one per audit (epoch, metrics, wall ``seconds`` and
        ``cpu_seconds`` of this thread, ``top_values`` naming the logged top scores).
    seconds_ : total wall time spent auditing.
    """

    def __init__(
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
        max_sorted_nodes: int = 2000,
    ) -> None:
        super().__init__()
        self.every_n_epochs = check_int("every_n_epochs", every_n_epochs, minimum=1)
        self.k = check_int("k", k, minimum=1)
        self.stage = check_choice("stage", stage, ("train", "val", "test"))
        self.num_hops = check_int("num_hops", num_hops, minimum=0)
        self.alpha = check_float("alpha", alpha, minimum=0.0, maximum=1.0)
        self.top_features = check_int("top_features", top_features, minimum=0)
        self.features = features
        self.sensitive = sensitive
        self.min_support = check_int("min_support", min_support, minimum=1)
        self.max_sorted_nodes = check_int("max_sorted_nodes", max_sorted_nodes, minimum=0)
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
        dm = getattr(trainer, "datamodule", None)
        data = getattr(dm, "data", None)
        if data is None:
            data = getattr(self, "_last_batch", None)
        if data is None or getattr(data, "x", None) is None:
            raise InvalidInputError(
                "CounterfactualAuditCallback needs the full graph: use a GraphDataModule (or a "
                "datamodule with a .data attribute) or full-batch validation"
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
        if getattr(batch, "batch_size", None) is None and hasattr(batch, "edge_index"):
            self._last_batch = batch  # full-batch validation: the batch is the graph

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
            "coding": code_features(x_np, names, self.features),
            "y": data.y.detach().cpu().numpy(),
            "sorted": None,
        }
        if 2 <= nodes.size <= self.max_sorted_nodes:
            self._cache["sorted"] = _SortedSimilarity(self._cache["emb"])
        self._cache_key = key
        return self._cache

    # ---------------------------------------------------------------- results
    @property
    def evidences_(self) -> pd.DataFrame | None:
        """Latest global top-k pairs (``node_u, node_v, similarity, pred_u, pred_v, rank``)."""
        if self._pairs is None:
            return None
        lo, hi, sim, pred_all = self._pairs
        return pd.DataFrame(
            {
                "node_u": lo,
                "node_v": hi,
                "similarity": sim.astype(np.float64),
                "pred_u": pred_all[lo],
                "pred_v": pred_all[hi],
                "rank": np.arange(1, lo.size + 1, dtype=np.int64),
            }
        )

    @property
    def discrimination_(self) -> pd.DataFrame | None:
        """Latest discrimination table (sorted by score, as ``discrimination_scores``)."""
        if self._scores is None:
            return None
        return arrays_to_table(self._scores, self._cache["coding"])

    # ---------------------------------------------------------------- audit
    def _log(self, trainer: L.Trainer, pl_module: L.LightningModule, metrics: dict) -> None:
        """Hand the metrics to the trainer's loggers and ``callback_metrics`` directly: Lightning's
        ``self.log`` machinery costs milliseconds per call, more than the audit itself."""
        if not metrics:
            return
        trainer.callback_metrics.update(
            {k: torch.tensor(v, dtype=torch.float32) for k, v in metrics.items()}
        )
        for lg in trainer.loggers:
            lg.log_metrics(dict(metrics), step=trainer.global_step)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self._due(trainer):
            self._remove_hook()
            return
        start, cpu_start = time.perf_counter(), time.thread_time()
        data = self._graph(trainer)
        cache = self._prepare(data)
        nodes = cache["nodes"]
        logits = self._captured
        self._remove_hook()
        if logits is None or logits.shape[0] != data.x.shape[0]:
            with torch.no_grad():
                was = pl_module.training
                pl_module.eval()
                logits = pl_module(
                    data.x.to(pl_module.device), data.edge_index.to(pl_module.device)
                )
                pl_module.train(was)
        pred_all = logits.argmax(-1).cpu().numpy().astype(np.int64)
        pred = pred_all[nodes]
        metrics: dict[str, float] = {}
        labels: list[str] = []
        counts = np.bincount(pred - pred.min()) if pred.size else np.zeros(0, dtype=np.int64)
        total_pairs = (int(counts.sum()) ** 2 - int((counts * counts).sum())) // 2
        if total_pairs > 0:
            kk = min(self.k, nodes.size - 1)
            fast = cache["sorted"]
            if fast is not None:
                u, v, sim = fast.global_pairs(pred, min(self.k, total_pairs))
                u, v = nodes[u], nodes[v]
            else:
                from gnnaudit.audit.search_exact import ExactSearcher

                searcher = ExactSearcher().build(SearchSpace(cache["emb"], pred, nodes))
                res = searcher.global_pairs(min(self.k, total_pairs))
                u, v, sim = res.node_u, res.node_v, res.similarity
            lo, hi = np.minimum(u, v), np.maximum(u, v)
            self._pairs = (lo, hi, sim, pred_all)
            distinct = np.unique(np.concatenate([lo, hi]))
            metrics["audit/accuracy_in_top_k"] = float(
                np.mean(pred_all[distinct] == cache["y"][distinct])
            )
            metrics["audit/mean_similarity"] = float(sim.mean())
            if self.top_features or self.sensitive:
                if fast is not None:
                    pos = fast.local(pred, kk)
                else:
                    ev = searcher.local(np.arange(nodes.size), kk).evidence
                    pos = np.where(ev >= 0, np.searchsorted(nodes, ev), -1)
                has = (pos >= 0).any(axis=1)
                ev = np.where(pos >= 0, nodes[np.maximum(pos, 0)], -1)[has]
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
        self._log(trainer, pl_module, metrics)
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
