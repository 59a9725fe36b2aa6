"""A tqdm bar over the training steps of a Lightning fit, on standard error.

Every training entry point of gnnaudit (``train_node_classifier``, ``FairFinetune.finetune``,
``finetune_on_evidences``, ``gnnaudit train``) takes ``progress``: ``True`` draws the bar,
``False`` never does, ``None`` (the default) draws it only when standard error is a terminal
(:func:`gnnaudit._validation.resolve_progress`), so a log file or a pipe gets no escape
sequences. Lightning's own bar stays off (it writes to standard output and opens one bar per
epoch, useless in full-batch training where an epoch is one step).

The bar counts training steps (``epochs x batches per epoch``; one step per epoch in full
batch), shows the epoch and the last training loss, ends early with early stopping and is
drawn by the rank-0 process only.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

__all__ = ["StepProgressBar", "progress_callbacks"]


class StepProgressBar(Callback):
    """tqdm bar over the training steps of ``fit`` on ``sys.stderr`` (module doc)."""

    def __init__(self, desc: str = "training") -> None:
        self.desc = desc
        self.bar: Any = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        from tqdm.auto import tqdm

        per_epoch = trainer.num_training_batches
        total = None
        if isinstance(per_epoch, int | float) and math.isfinite(per_epoch):
            total = int(per_epoch) * max(int(trainer.max_epochs or 1), 1)
        self.bar = tqdm(total=total, desc=self.desc, unit="step", file=sys.stderr, leave=False)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.bar is None:
            return
        postfix = {"epoch": trainer.current_epoch + 1}
        loss = trainer.callback_metrics.get("train_loss")
        if loss is not None:
            postfix["loss"] = f"{float(loss):.4f}"  # type: ignore[assignment]
        self.bar.set_postfix(postfix, refresh=False)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._close()

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        self._close()

    def _close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def progress_callbacks(progress: bool, desc: str = "training") -> list[Callback]:
    """``[StepProgressBar(desc)]`` when ``progress`` (already resolved), else ``[]``."""
    return [StepProgressBar(desc)] if progress else []
