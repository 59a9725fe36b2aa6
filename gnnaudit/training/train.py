r"""Train a :class:`NodeClassifier` on one graph with Lightning, reproducibly, and reload it.

``train_node_classifier`` seeds everything (``lightning.seed_everything``), runs a ``Trainer``
(:func:`make_trainer`: the available accelerator, or the user's ``trainer_kwargs``) with
``deterministic=True`` and keeps the weights of the best validation epoch (ties: lower
validation loss), so the same data, arguments and seed give the same metrics. Best: for a binary
task (labels 0 / 1, both among the validation nodes) the highest validation AUROC of the class-1
probability, as NIFTY selects, :math:`\mathrm{AUROC} = P(p_u > p_v) + \tfrac12 P(p_u = p_v)` over
validation nodes :math:`u` of label 1 and :math:`v` of label 0 (mid-ranks, equal to
``sklearn.metrics.roc_auc_score``), since accuracy alone keeps a constant model on imbalanced
labels (predicting the majority label scores the majority rate), among the epochs whose validation
decisions are not more than 95% one class (the audit's degenerate rule; waived when the validation
labels are that imbalanced): a model can rank well and still answer one class everywhere (NBA, a
stratified split of seed 200: the best-AUROC epoch answered 1 for every test node); otherwise
(multi-class) the highest validation accuracy. Checkpoints are ordinary Lightning checkpoints whose
``hyper_parameters`` hold only plain ``int`` / ``float`` / ``str`` values;
:func:`load_node_classifier` reads them with ``torch.load(path, weights_only=True)`` and never
unpickles arbitrary objects.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping
from torch_geometric.data import Data

from gnnaudit._threads import thread_limits
from gnnaudit._validation import MAX_EPOCHS, check_int, check_seed, resolve_progress
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import atomic_file, safe_torch_load
from gnnaudit.training.data_module import GraphDataModule, check_node_data
from gnnaudit.training.divergence import DivergenceGuard
from gnnaudit.training.epoch_selection import (
    BEST_EPOCH_KEY,
    EPOCHS_RUN_KEY,
    LATE_RISE_KEY,
    LATE_RISE_TAIL,
    CountEpochs,
    KeepBestWeights,
    positive_auroc,
    selection_monitor,
    still_improving,
)
from gnnaudit.training.node_classifier import MAX_MODEL_WEIGHTS, NodeClassifier, estimated_weights
from gnnaudit.training.progress import progress_callbacks

__all__ = [
    "TrainResult",
    "train_node_classifier",
    "load_node_classifier",
    "majority_rate",
    "make_trainer",
    "KeepBestWeights",
    "selection_monitor",
    "positive_auroc",
]

logger = logging.getLogger(__name__)


_LIGHTNING_LOGGERS = ("lightning.pytorch", "lightning.fabric", "lightning")
_QUIET_WARNINGS = (
    ".*does not have many workers.*",
    ".*number of training batches.*",
    ".*LeafSpec.*",
)


class TrainResult(NamedTuple):
    """``(module, metrics)``; unpacks like a tuple."""

    module: NodeClassifier
    metrics: dict[str, Any]


@contextlib.contextmanager
def quiet_lightning(verbose: bool) -> Iterator[None]:
    """Silence Lightning's "GPU available ..." banners and dataloader hints unless verbose, and
    undo the process-wide ``torch.use_deterministic_algorithms(True)`` that
    ``Trainer(deterministic=True)`` leaves behind."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    with warnings.catch_warnings():
        if not verbose:
            for pattern in _QUIET_WARNINGS:
                warnings.filterwarnings("ignore", message=pattern)
        loggers = [logging.getLogger(n) for n in _LIGHTNING_LOGGERS]
        levels = [lg.level for lg in loggers]
        if not verbose:
            for lg in loggers:
                lg.setLevel(logging.WARNING)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)
            torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


def make_trainer(
    max_epochs: int,
    trainer_kwargs: Mapping[str, Any] | None = None,
    *,
    progress: bool = False,
    progress_desc: str = "training",
    **overrides: Any,
) -> L.Trainer:
    """The reproducible full-batch ``Trainer`` every training step of gnnaudit uses.

    Defaults: ``accelerator="auto"`` (a GPU when Lightning finds one, else the CPU),
    ``devices=1``, ``deterministic=True``, no logger, no checkpoint files, no progress bar or
    model summary and no sanity validation. ``overrides`` (gnnaudit's own settings) and then
    ``trainer_kwargs`` (the user's: ``accelerator``, ``devices``, ``strategy``, ``logger``,
    ``precision`` ...) replace any of these. ``progress`` (already resolved) adds a
    :class:`~gnnaudit.training.progress.StepProgressBar` (``progress_desc``) on stderr. A
    :class:`~gnnaudit.training.divergence.DivergenceGuard` is always added to the callbacks:
    a non-finite loss or weight stops ``fit`` with
    :class:`~gnnaudit.errors.TrainingDivergedError`. ``max_epochs`` must lie in
    ``[1, MAX_EPOCHS]``.
    """
    max_epochs = check_int("max_epochs", max_epochs, minimum=1, maximum=MAX_EPOCHS)
    settings: dict[str, Any] = {
        "accelerator": "auto",
        "devices": 1,
        "max_epochs": max_epochs,
        "deterministic": True,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
    }
    settings.update(overrides)
    if trainer_kwargs is not None:
        if not isinstance(trainer_kwargs, Mapping):
            raise InvalidInputError(
                f"trainer_kwargs must be a dict of Trainer arguments, got "
                f"{type(trainer_kwargs).__name__}"
            )
        settings.update(trainer_kwargs)
    callbacks = settings.get("callbacks") or []
    callbacks = list(callbacks) if isinstance(callbacks, list | tuple) else [callbacks]
    if not any(isinstance(c, DivergenceGuard) for c in callbacks):
        callbacks.append(DivergenceGuard())
    callbacks.extend(progress_callbacks(progress, progress_desc))
    settings["callbacks"] = callbacks
    try:
        return L.Trainer(**settings)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"invalid Trainer settings {trainer_kwargs!r}: {exc}") from exc


def majority_rate(data: Data, mask: str = "test_mask") -> float:
    """Accuracy of always predicting the most frequent training label, on ``data[mask]``.

    A label-balanced training set (NIFTY's split) has no most frequent label: the tie is broken
    by the labels of every node (``y >= 0``), so the baseline is the constant a user would try.
    """
    counts = torch.bincount(data.y[data.train_mask])
    if int((counts == counts.max()).sum()) > 1:
        y_all = data.y[data.y >= 0]
        tied = counts == counts.max()
        everyone = torch.bincount(y_all, minlength=counts.numel())[: counts.numel()]
        counts = torch.where(tied, everyone, torch.zeros_like(everyone))
    majority = int(counts.argmax())
    selected = data.y[data[mask]]
    return float((selected == majority).float().mean()) if selected.numel() else float("nan")


def _callbacks(keep_best: bool, patience: int | None, monitor: str = "val_acc") -> list[Callback]:
    """Epoch counting, best-weights restoring and early stopping, as asked."""
    callbacks: list[Callback] = [CountEpochs()]
    if keep_best:
        callbacks.append(KeepBestWeights(monitor))
    if patience is not None:
        callbacks.append(EarlyStopping(monitor="val_loss", mode="min", patience=patience))
    return callbacks


def _save_checkpoint(trainer: L.Trainer, checkpoint_path: str | os.PathLike[str]) -> None:
    """The trainer's checkpoint written atomically to ``checkpoint_path``."""
    path = os.fspath(checkpoint_path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_file(path, name="checkpoint_path", force=True) as tmp:
        trainer.save_checkpoint(tmp, weights_only=False)


@torch.no_grad()
def _aurocs(module: NodeClassifier, data: Data) -> dict[str, float]:
    """``val_auroc`` / ``test_auroc`` of a binary task's class-1 probability (where defined)."""
    if int(data.y.max()) > 1:
        return {}
    logits = module(data.x.to(module.device), data.edge_index.to(module.device))
    score = torch.softmax(logits.float(), dim=1)[:, 1].cpu().numpy()
    y = data.y.detach().cpu().numpy()
    out = {}
    for stage in ("val", "test"):
        mask = data[f"{stage}_mask"].detach().cpu().numpy()
        value = positive_auroc(y[mask], score[mask])
        if math.isfinite(value):
            out[f"{stage}_auroc"] = value
    return out


def _fit_metrics(
    module: NodeClassifier, data: Data, trainer: L.Trainer, keep_best: bool, fit_seconds: float
) -> dict[str, Any]:
    """The evaluation on the three masks plus what the fit recorded (epochs, device, time)."""
    metrics: dict[str, Any] = module.evaluate(data)
    metrics.update(_aurocs(module, data))
    metrics["majority_rate"] = majority_rate(data)
    done = trainer.callback_metrics  # rank 0's, also under ddp_spawn
    epochs_run = int(done.get(EPOCHS_RUN_KEY, trainer.current_epoch))
    metrics["best_epoch"] = int(done.get(BEST_EPOCH_KEY, -1)) if keep_best else epochs_run - 1
    metrics["selected_by"] = selection_monitor(data) if keep_best else "last epoch"
    rise = float(done.get(LATE_RISE_KEY, math.nan)) if keep_best else math.nan
    metrics["late_rise"] = rise if math.isfinite(rise) else None  # None: JSON-safe "not judged"
    metrics["epochs_run"] = epochs_run
    metrics["fit_seconds"] = fit_seconds
    metrics["device"] = str(trainer.strategy.root_device)
    return metrics


# long: whole: 38 lines document 19 hyper-parameters and the metrics; the body builds the model once
def train_node_classifier(  # noqa: PLR0913  # public recipe: each keyword is a documented hyper-parameter
    data: Data,
    backbone: str = "gcn",
    max_epochs: int = 200,
    seed: int = 0,
    *,
    num_layers: int = 3,
    hidden_channels: int = 16,
    dropout: float = 0.5,
    lr: float = 0.01,
    weight_decay: float = 5e-4,
    batch_size: int | None = None,
    num_neighbors: list[int] | None = None,
    patience: int | None = None,
    keep_best: bool = True,
    checkpoint_path: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
    enable_progress_bar: bool | None = None,
    verbose: bool = False,
    trainer_kwargs: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Train a GNN node classifier on ``data`` and evaluate it on its three masks.

    Parameters
    ----------
    data : graph with ``x``, ``y``, ``edge_index``, ``train_mask``, ``val_mask``, ``test_mask``.
    backbone : ``gcn``, ``gat``, ``gin``, ``sage`` or ``mpnn`` (see :class:`NodeClassifier`).
    max_epochs : training epochs (one optimiser step per epoch in full-batch mode).
    seed : seeds weights, dropout and sampling; same seed, same metrics.
    num_layers, hidden_channels, dropout, lr, weight_decay : model hyper-parameters.
    batch_size, num_neighbors : mini-batches of ``batch_size`` seeds: exact ``num_layers``-hop
        subgraphs, or ``NeighborLoader`` sampling when ``num_neighbors`` is given (see
        :class:`GraphDataModule`).
    patience : stop after this many epochs without a lower ``val_loss`` (``None``: never).
    keep_best : keep the best validation epoch's weights (AUROC if binary, else accuracy).
    checkpoint_path : where to write the Lightning checkpoint of the returned module (never
        written when training diverges: a non-finite loss or weight raises
        :class:`~gnnaudit.errors.TrainingDivergedError` instead).
    progress : a bar over the training steps on stderr
        (:mod:`gnnaudit.training.progress`); ``None`` (default): only when stderr is a
        terminal.
    enable_progress_bar : former name of ``progress`` (used when ``progress`` is None).
    verbose : keep Lightning's informational messages and warnings.
    trainer_kwargs : extra ``lightning.Trainer`` arguments (``accelerator``, ``devices``,
        ``strategy`` ...), see :func:`make_trainer`.

    Returns
    -------
    TrainResult ``(module, metrics)``: the trained module in eval mode, on the device it
    trained on (``metrics["device"]``; ``audit_model(module, data)`` then audits there), and a
    dict with ``train_acc``, ``val_acc``, ``test_acc``, the matching ``*_loss``, ``val_auroc`` /
    ``test_auroc`` (binary tasks), ``majority_rate`` (test accuracy of always predicting the
    majority training label), ``best_epoch``, ``selected_by`` (``"val_auroc"``, ``"val_acc"``
    or ``"last epoch"``), ``late_rise`` (how far the best validation score of the last 10% of
    epochs lies above the best before them, :func:`~gnnaudit.training.epoch_selection.late_rise`;
    above 0.005, or above 0.001 with the last epoch the best, a warning says the model is likely
    undertrained, :func:`~gnnaudit.training.epoch_selection.still_improving`; None for runs
    under 100 epochs or without ``keep_best``), ``epochs_run``, ``fit_seconds`` and ``device`` (where Lightning
    trained, e.g. ``"cuda:0"`` under the default ``accelerator="auto"`` on a GPU machine).
    """
    data = check_node_data(data)
    max_epochs = check_int("max_epochs", max_epochs, minimum=1, maximum=MAX_EPOCHS)
    seed = check_seed("seed", seed)
    if patience is not None:
        patience = check_int("patience", patience, minimum=1)
    show = resolve_progress("progress", enable_progress_bar if progress is None else progress)
    num_classes = max(int(data.y.max()) + 1, 2)
    # 1 thread on small graphs (gnnaudit._threads), for the training only
    with quiet_lightning(verbose), thread_limits(num_nodes=data.num_nodes):
        L.seed_everything(seed, workers=True, verbose=False)
        module = NodeClassifier(
            in_channels=int(data.x.size(1)),
            out_channels=num_classes,
            backbone=backbone,
            num_layers=num_layers,
            hidden_channels=hidden_channels,
            dropout=dropout,
            lr=lr,
            weight_decay=weight_decay,
        )
        trainer, fit_seconds = _fit(
            module,
            data,
            seed=seed,
            max_epochs=max_epochs,
            batch_size=batch_size,
            num_neighbors=num_neighbors,
            trainer_kwargs=trainer_kwargs,
            callbacks=_callbacks(keep_best, patience, selection_monitor(data)),
            progress=show,
            checkpoint_path=checkpoint_path,
        )
    return _finish(module, data, trainer, keep_best, fit_seconds, backbone)


def _fit(
    module: NodeClassifier,
    data: Data,
    *,
    seed: int,
    max_epochs: int,
    batch_size: int | None,
    num_neighbors: list[int] | None,
    trainer_kwargs: Mapping[str, Any] | None,
    callbacks: list[Callback],
    progress: bool,
    checkpoint_path: str | os.PathLike[str] | None,
) -> tuple[L.Trainer, float]:
    """Run Lightning on ``module`` (left in eval mode, its checkpoint written when asked): the
    trainer and the seconds ``fit`` took."""
    datamodule = GraphDataModule(
        data,
        batch_size=batch_size,
        num_neighbors=num_neighbors,
        num_hops=module.hparams["num_layers"],
        seed=seed,
    )
    trainer = make_trainer(
        max_epochs, trainer_kwargs, progress=progress, log_every_n_steps=1, callbacks=callbacks
    )
    start = time.perf_counter()
    trainer.fit(module, datamodule=datamodule)
    fit_seconds = time.perf_counter() - start
    module.eval()
    if checkpoint_path is not None:
        _save_checkpoint(trainer, checkpoint_path)
    return trainer, fit_seconds


def _finish(
    module: NodeClassifier,
    data: Data,
    trainer: L.Trainer,
    keep_best: bool,
    fit_seconds: float,
    backbone: str,
) -> TrainResult:
    """The trained module and its metrics (:func:`_fit_metrics`), logged, with the warning of a
    run that stopped while still improving (:func:`_warn_if_still_rising`)."""
    metrics = _fit_metrics(module, data, trainer, keep_best, fit_seconds)
    logger.info("trained %s for %d epochs: %s", backbone, metrics["epochs_run"], metrics)
    stopped_early = metrics["epochs_run"] < int(trainer.max_epochs or 0)
    _warn_if_still_rising(metrics, stopped_early=stopped_early, stacklevel=4)
    return TrainResult(module, metrics)


#: how the warning names the score an epoch was selected by
_SCORE_NAMES = {"val_auroc": "AUROC", "val_acc": "accuracy"}


def _warn_if_still_rising(
    metrics: dict[str, Any], *, stopped_early: bool, stacklevel: int = 2
) -> None:
    """Warn when the run's validation score was still rising at its end
    (:func:`~gnnaudit.training.epoch_selection.still_improving`): an audit of an undertrained
    model measures the training budget as much as the model. ``stopped_early``: ``patience``
    ended the run before ``max_epochs`` (then raising ``patience`` is the advice)."""
    rise, n = metrics["late_rise"], metrics["epochs_run"]
    if not still_improving(rise, metrics["best_epoch"], n):
        return
    advice = "raise patience (or lr)" if stopped_early else "raise max_epochs or lr"
    warnings.warn(
        f"training stopped while the model was still improving: the best validation "
        f"{_SCORE_NAMES.get(metrics['selected_by'], metrics['selected_by'])} of the last "
        f"{LATE_RISE_TAIL:.0%} of the "
        f"{n} epochs is {rise:.4f} above the best before them (best epoch "
        f"{metrics['best_epoch']}). The model is likely undertrained: {advice} "
        "(metrics['late_rise'] holds the rise)",
        UserWarning,
        stacklevel=stacklevel,
    )


#: a checkpoint whose hyper-parameters describe more weights than this is refused before any
#: allocation (= :data:`~gnnaudit.training.node_classifier.MAX_MODEL_WEIGHTS`)
MAX_CHECKPOINT_WEIGHTS = MAX_MODEL_WEIGHTS


def _check_size(hparams: dict[str, Any], path: str) -> None:
    """Refuse hyper-parameters that would build an absurdly large model (a crafted or corrupt
    checkpoint), before any weight is allocated."""
    dims = {}
    for key in ("in_channels", "out_channels", "hidden_channels", "num_layers"):
        value = hparams.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise InvalidInputError(
                f"{path}: hyper-parameter {key}={value!r} is not a positive int"
            )
        dims[key] = int(value or 1)
    d_in, d_out = dims["in_channels"], dims["out_channels"]
    hidden, layers = dims["hidden_channels"], dims["num_layers"]
    estimate = estimated_weights(d_in, hidden, layers, d_out)
    if estimate > MAX_CHECKPOINT_WEIGHTS:
        raise InvalidInputError(
            f"{path}: hyper-parameters describe about {estimate:.3g} weights (in {d_in}, hidden "
            f"{hidden}, layers {layers}, out {d_out}); more than the {MAX_CHECKPOINT_WEIGHTS:.0e} "
            "a NodeClassifier checkpoint may hold"
        )


def load_node_classifier(
    path: str | os.PathLike[str], map_location: str | torch.device = "cpu"
) -> NodeClassifier:
    """Rebuild a :class:`NodeClassifier` from a Lightning checkpoint, safely.

    The file is read with :func:`~gnnaudit.safe_io.safe_torch_load` (``torch.load`` with
    ``weights_only=True``, tensors and plain containers only, no fallback); the module is rebuilt from ``hyper_parameters`` and ``state_dict`` and returned in
    eval mode.
    """
    path = os.fspath(path)
    ckpt = safe_torch_load(path, name="checkpoint", map_location=map_location)
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt or "hyper_parameters" not in ckpt:
        raise InvalidInputError(
            f"{path} is not a NodeClassifier checkpoint (needs 'state_dict' and 'hyper_parameters')"
        )
    hparams = dict(ckpt["hyper_parameters"])
    _check_size(hparams, path)
    try:
        module = NodeClassifier(**hparams)
        module.load_state_dict(ckpt["state_dict"])
    except (TypeError, RuntimeError) as exc:
        raise InvalidInputError(f"{path} does not match NodeClassifier: {exc}") from exc
    return module.eval()
