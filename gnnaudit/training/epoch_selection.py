"""Which epoch a training run keeps: the callback that remembers the best validation epoch's
weights (highest validation AUROC of the class-1 probability for a binary task, as NIFTY
selects, among the epochs whose validation decisions have not collapsed to one class; highest
accuracy otherwise; ties by the lower validation loss) and the one that counts the epochs run
(:func:`~gnnaudit.training.train.train_node_classifier` documents the rule)."""

from __future__ import annotations

import copy
import math
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback
from torch_geometric.data import Data

from gnnaudit._validation import check_choice
from gnnaudit.audit.model_quality import PREDICTION_SHARE
from gnnaudit.training.auroc_delong import rank_auroc

__all__ = [
    "KeepBestWeights",
    "CountEpochs",
    "positive_auroc",
    "top_share",
    "selection_monitor",
    "MONITORS",
    "BEST_EPOCH_KEY",
    "EPOCHS_RUN_KEY",
    "LATE_RISE_KEY",
    "LATE_RISE_MIN_EPOCHS",
    "LATE_RISE_TAIL",
    "LATE_RISE_TOL",
    "LATE_RISE_LAST_TOL",
    "late_rise",
    "still_improving",
]

#: what :class:`KeepBestWeights` can rank epochs by
MONITORS: tuple[str, ...] = ("val_acc", "val_auroc")
#: ``trainer.callback_metrics`` keys that carry the epoch counts back from spawned workers
BEST_EPOCH_KEY = "gnnaudit/best_epoch"
EPOCHS_RUN_KEY = "gnnaudit/epochs_run"
LATE_RISE_KEY = "gnnaudit/late_rise"
#: a run of fewer validated epochs is not judged by :func:`late_rise`: its last tenth would be
#: fewer than 10 epochs, too few to tell a trend from one lucky epoch
LATE_RISE_MIN_EPOCHS = 100
#: the share of a run's last epochs that :func:`late_rise` compares with the rest
LATE_RISE_TAIL = 0.1
#: a late rise above this (half a point of validation AUROC or accuracy) means the run was still
#: learning when it stopped (``train_node_classifier`` warns)
LATE_RISE_TOL = 0.005
#: a smaller late rise still counts when the run's best epoch is its very last one (a tenth of a
#: point: a plateau's last-epoch creep below it is not worth more epochs)
LATE_RISE_LAST_TOL = 0.001


def late_rise(scores: Any) -> float:
    r"""How far the best validation score of a run's last :data:`LATE_RISE_TAIL` of epochs lies
    above the best score of the epochs before them, :math:`\max_{e \ge E - t} s_e -
    \max_{e < E - t} s_e` with :math:`t = \lceil 0.1 E \rceil` for a run of :math:`E` epochs
    (0 when the tail is not better: the run had stopped improving).

    NaN when it cannot be told: fewer than :data:`LATE_RISE_MIN_EPOCHS` epochs, or no finite
    score on either side. A value above :data:`LATE_RISE_TOL` means the model was still
    improving on the validation nodes when training stopped: most likely undertrained (more
    epochs or a larger learning rate would give a better model to audit)."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size < LATE_RISE_MIN_EPOCHS:
        return math.nan
    tail = math.ceil(LATE_RISE_TAIL * values.size)
    before, after = values[:-tail], values[-tail:]
    before, after = before[np.isfinite(before)], after[np.isfinite(after)]
    if before.size == 0 or after.size == 0:
        return math.nan
    return max(float(after.max() - before.max()), 0.0)


def still_improving(rise: float | None, best_epoch: int, epochs_run: int) -> bool:
    """Whether a run stopped while its model was still improving on the validation nodes: a
    :func:`late_rise` above :data:`LATE_RISE_TOL`, or above :data:`LATE_RISE_LAST_TOL` when the
    best epoch is the run's last (its score was still climbing when it stopped). False when the
    rise was not judged (None / NaN)."""
    if rise is None or not math.isfinite(rise):
        return False
    return rise > LATE_RISE_TOL or (best_epoch == epochs_run - 1 and rise > LATE_RISE_LAST_TOL)


class KeepBestWeights(Callback):
    """Remember the weights of the best validation epoch in memory and restore them at the end
    of ``fit`` (best = highest ``monitor``, ties broken by lower ``val_loss``).

    ``monitor="val_acc"`` (default) reads the ``val_acc`` the module logs. ``"val_auroc"`` computes
    the validation AUROC of the class-1 probability itself: it records the logits of the module's
    forward call in each validation step (scored like :class:`~gnnaudit.training.NodeClassifier`:
    the ``val_mask`` nodes, the seed nodes of a ``NeighborLoader`` batch), takes the AUROC
    (:func:`positive_auroc`) over the epoch (the mean over processes under a multi-process
    strategy) and logs it as ``val_auroc``; an undefined AUROC (one class) ranks last. An epoch
    whose validation decisions (class-1 probability above 0.5) are more than
    :data:`~gnnaudit.audit.model_quality.PREDICTION_SHARE` (95%) one class, the audit's degenerate
    rule, ranks after every epoch whose decisions are not (unless the validation labels themselves
    are that imbalanced): such an epoch can rank the nodes well and still answer one class for
    nearly all of them, and the audit would call it degenerate. :attr:`history` holds every epoch's
    ``(score, -val_loss)``, :attr:`collapsed` whether its decisions collapsed (``val_auroc`` only;
    False otherwise). At the end of ``fit`` the best epoch and :func:`late_rise` of the history go
    to ``trainer.callback_metrics`` (``BEST_EPOCH_KEY``, ``LATE_RISE_KEY``).
    """

    def __init__(self, monitor: str = "val_acc") -> None:
        self.monitor = check_choice("monitor", monitor, MONITORS)
        self.best: tuple[float, float, float] | None = None
        self.best_epoch = -1
        self.state: dict[str, torch.Tensor] | None = None
        self.history: list[tuple[float, float]] = []
        self.collapsed: list[bool] = []
        self._last: torch.Tensor | None = None
        self._val: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._hook: Any = None

    def _record(self, module: Any, args: Any, output: Any) -> None:
        # node logits only: a strategy that routes validation_step through the module's call
        # (DDP) also reports the step's scalar loss here
        if isinstance(output, torch.Tensor) and output.dim() == 2:
            self._last = output.detach()

    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.monitor == "val_auroc":
            self._val, self._last = [], None
            self._hook = pl_module.register_forward_hook(self._record)

    def on_validation_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self.monitor != "val_auroc" or self._last is None or len(self._last) != len(batch.y):
            return
        logits, mask, y = self._last, batch.val_mask, batch.y
        seeds = getattr(batch, "batch_size", None)
        if isinstance(seeds, int):  # NeighborLoader: only the seed nodes count
            logits, mask, y = logits[:seeds], mask[:seeds], y[:seeds]
        self._val.append((torch.softmax(logits[mask].float(), dim=1)[:, 1].cpu(), y[mask].cpu()))
        self._last = None

    def _auroc(self, trainer: L.Trainer, pl_module: L.LightningModule) -> tuple[float, bool]:
        """The epoch's validation AUROC and whether its decisions collapsed (class docstring);
        both means over processes under a multi-process strategy."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        p = torch.cat([b[0] for b in self._val]).numpy() if self._val else np.zeros(0)
        y = torch.cat([b[1] for b in self._val]).numpy() if self._val else np.zeros(0)
        value = torch.tensor(positive_auroc(y, p), device=pl_module.device)
        value = trainer.strategy.reduce(value, reduce_op="mean")
        if not trainer.sanity_checking and bool(torch.isfinite(value)):
            pl_module.log("val_auroc", value, prog_bar=True)
        collapsed = torch.tensor(float(_collapsed(y, p)), device=pl_module.device)
        collapsed = trainer.strategy.reduce(collapsed, reduce_op="mean")
        return float(value), bool(float(collapsed) > 0.5)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        by_auroc = self.monitor == "val_auroc"
        auroc, collapsed = self._auroc(trainer, pl_module) if by_auroc else (math.nan, False)
        if trainer.sanity_checking:
            return
        metrics = trainer.callback_metrics
        if self.monitor == "val_acc" and "val_acc" not in metrics:
            return
        value = auroc if by_auroc else float(metrics["val_acc"])
        loss = float(metrics.get("val_loss", torch.tensor(0.0)))
        score = (value if math.isfinite(value) else -math.inf, -loss)
        self.history.append(score)
        self.collapsed.append(collapsed)
        key = (0.0 if collapsed else 1.0, *score)  # collapsed epochs rank after the others
        if self.best is None or key > self.best:
            self.best, self.best_epoch = key, trainer.current_epoch
            self.state = copy.deepcopy(pl_module.state_dict())

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.state is not None:
            pl_module.load_state_dict(self.state)
        # a spawned strategy (ddp_spawn) runs this in the workers: rank 0's callback_metrics
        # (not this callback's attributes) travel back to the main process
        trainer.callback_metrics[BEST_EPOCH_KEY] = torch.tensor(self.best_epoch)
        rise = late_rise([score for score, _ in self.history])
        trainer.callback_metrics[LATE_RISE_KEY] = torch.tensor(rise, dtype=torch.float64)


class CountEpochs(Callback):
    """Record the epochs run in ``trainer.callback_metrics`` at the end of ``fit``; with a
    spawned strategy (``ddp_spawn``) the main process's ``trainer.current_epoch`` stays 0, but
    rank 0's ``callback_metrics`` are sent back to it."""

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        trainer.callback_metrics[EPOCHS_RUN_KEY] = torch.tensor(trainer.current_epoch)


def top_share(pred: np.ndarray) -> float:
    """The share of the most frequent decision (or label) in ``pred`` (NaN when empty)."""
    if len(pred) == 0:
        return math.nan
    return float(np.bincount(np.asarray(pred, dtype=np.int64)).max() / len(pred))


def _collapsed(y: np.ndarray, p: np.ndarray) -> bool:
    """Whether the decisions ``p > 0.5`` are more than ``PREDICTION_SHARE`` one class while the
    labels ``y`` are not (no nodes: False)."""
    if p.size == 0:
        return False
    return top_share(p > 0.5) > PREDICTION_SHARE >= top_share(y == 1)


def positive_auroc(y: Any, score: Any) -> float:
    """The AUROC of ``score`` for the labels ``y == 1`` (:func:`~gnnaudit.training.auroc_delong.
    rank_auroc`, equal to ``sklearn.metrics.roc_auc_score(y == 1, score)``); NaN when one class
    only, or when a score is not finite (a diverged model: the divergence check reports it, not
    this metric)."""
    scores = np.asarray(score, dtype=np.float64)
    if not np.isfinite(scores).all():
        return math.nan
    return rank_auroc(np.asarray(y) == 1, scores)  # NaN without a node of either class


def selection_monitor(data: Data) -> str:
    """``"val_auroc"`` for a binary task whose validation nodes hold both labels 0 and 1,
    else ``"val_acc"`` (module docstring)."""
    y = data.y.detach().cpu()
    val = y[data.val_mask.detach().cpu()]
    binary = int(y.max()) <= 1 if y.numel() else False
    return (
        "val_auroc" if binary and bool((val == 0).any()) and bool((val == 1).any()) else "val_acc"
    )
