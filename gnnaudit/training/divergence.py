"""Stop training that diverges, with an error, before anything is written.

Every ``Trainer`` gnnaudit builds (:func:`gnnaudit.training.make_trainer`: training,
fine-tuning on evidences, counterfactual-consistency fine-tuning) carries a
:class:`DivergenceGuard`. After each optimiser step it checks that the training loss and every
floating-point weight are finite, and after each validation epoch that ``val_loss`` is finite;
otherwise it raises :class:`~gnnaudit.errors.TrainingDivergedError`, naming the cause, the
epoch and the learning rate and suggesting a smaller one. The error propagates out of
``Trainer.fit`` (Lightning tears down and re-raises it), so the caller never reaches the code
that would save a checkpoint or return NaN metrics.

Cost: one sum over the weights per step (a single device synchronisation), small next to the
forward and backward passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from gnnaudit.errors import TrainingDivergedError

__all__ = ["DivergenceGuard", "first_non_finite_weight"]


def first_non_finite_weight(module: torch.nn.Module) -> str | None:
    """The name of the first floating-point parameter of ``module`` holding NaN or inf, or
    ``None`` when all are finite (one reduction, then a per-parameter look only on failure)."""
    params = [(n, p.detach()) for n, p in module.named_parameters() if p.is_floating_point()]
    if not params:
        return None
    # a NaN or inf anywhere makes the sum of |w| non-finite; a finite sum proves all finite
    total = torch.stack([p.abs().sum(dtype=torch.float64) for _, p in params]).sum()
    if bool(torch.isfinite(total)):
        return None
    for name, p in params:
        if not bool(torch.isfinite(p).all()):
            return name
    return None


def _learning_rate(module: Any) -> float | None:
    hparams = getattr(module, "hparams", None)
    lr = hparams.get("lr") if isinstance(hparams, Mapping) else None
    lr = getattr(module, "lr", None) if lr is None else lr
    return float(lr) if isinstance(lr, int | float) else None


class DivergenceGuard(Callback):
    """Raise :class:`TrainingDivergedError` as soon as the loss or a weight is not finite."""

    def _fail(self, trainer: L.Trainer, module: L.LightningModule, cause: str) -> None:
        lr = _learning_rate(module)
        rate = (
            f" with learning rate lr={lr:g}; use a smaller one (e.g. lr={lr / 10:g}, CLI --lr)"
            if lr is not None
            else "; use a smaller learning rate"
        )
        raise TrainingDivergedError(
            f"training diverged: {cause} at epoch {trainer.current_epoch}{rate} or rescale "
            "the features; no checkpoint or model was written"
        )

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        """Check the step's loss and the weights after the optimiser step."""
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if isinstance(loss, torch.Tensor) and not bool(torch.isfinite(loss.detach()).all()):
            self._fail(trainer, pl_module, f"the training loss is {float(loss.detach().sum())}")
        bad = first_non_finite_weight(pl_module)
        if bad is not None:
            self._fail(trainer, pl_module, f"weight {bad!r} holds NaN or inf")

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Check ``val_loss`` (when logged)."""
        if trainer.sanity_checking:
            return
        val = trainer.callback_metrics.get("val_loss")
        if isinstance(val, torch.Tensor) and not bool(torch.isfinite(val).all()):
            self._fail(trainer, pl_module, f"the validation loss is {float(val)}")
