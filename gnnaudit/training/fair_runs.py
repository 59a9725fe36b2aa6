"""The candidate runs of :meth:`FairFinetune.finetune <gnnaudit.training.FairFinetune.finetune>`:
one fine-tuning run per weight of the grid, snapshots of the weights every few steps, pooled
with the model as given and handed to the selection on validation nodes
(:mod:`gnnaudit.training.fair_selection`, which documents the rule)."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from torch import nn

from gnnaudit._validation import (
    MAX_EPOCHS,
    check_bool,
    check_float,
    check_int,
    check_seed,
    resolve_progress,
)
from gnnaudit.audit.interventions import alternatives
from gnnaudit.audit.model_adapter import trained_module
from gnnaudit.errors import InvalidInputError
from gnnaudit.training.data_module import GraphDataModule
from gnnaudit.training.decision_offset import find_output_bias
from gnnaudit.training.fair_selection import (
    VANILLA,
    check_targets,
    label_free_nodes,
    resolve_sensitive_feature,
    selection_frame,
)
from gnnaudit.training.input_blinding import slices_on_graph
from gnnaudit.training.parity_surrogate import DEFAULT_PARITY, decision_parity
from gnnaudit.training.selection_gain import warn_if_gain_uncertain
from gnnaudit.training.selection_warnings import warn_if_decisions_worse, warn_unless_fairer
from gnnaudit.training.train import make_trainer, quiet_lightning

__all__ = [
    "candidate_steps",
    "Snapshots",
    "target_weight",
    "grid_weights",
    "blind_modes",
    "can_blind",
    "finetune_and_select",
]


#: values of ``blind`` (:meth:`FairFinetune.finetune <gnnaudit.training.FairFinetune.finetune>`)
BLIND_CHOICES: tuple[object, ...] = ("auto", True, False)

logger = logging.getLogger(__name__)


def candidate_steps(epochs: int, n_candidates: int, early: bool = True) -> list[int]:
    """Steps whose weights become candidates: every ``every = max(1, epochs // n_candidates)``
    steps up to ``epochs``, ``epochs`` itself and, with ``early``, the doubling steps 1, 2, 4,
    8, ... below ``every``: the start of the path, where a penalised run moves fastest (on
    NIFTY's German the default grid's weight-20 run is within 5 points of parity after 1 to 4
    steps, ``benchmarks/results/fair_heldout_candidates.csv``, so snapshots every 10 steps held
    nothing between the model as given and a model at parity)."""
    epochs = check_int("epochs", epochs, minimum=1)
    n_candidates = check_int("n_candidates", n_candidates, minimum=1)
    every = max(1, epochs // n_candidates)
    early = check_bool("early_snapshots", early)
    doubling = {1 << k for k in range(every.bit_length()) if 1 << k < every} if early else set()
    return sorted(set(range(every, epochs + 1, every)) | {epochs} | doubling)


class Snapshots(Callback):
    """Keep CPU copies of ``model``'s ``state_dict`` after the optimiser steps ``steps``
    (``trainer.global_step`` after a training batch); :attr:`states` maps step -> weights."""

    def __init__(self, model: nn.Module, steps: Iterable[int]) -> None:
        self.model = model
        self.steps = {int(s) for s in steps}
        self.states: dict[int, dict[str, torch.Tensor]] = {}

    def keep(self, step: int) -> None:
        """Copy the current weights as the snapshot of ``step``."""
        self.states[int(step)] = {
            k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()
        }

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any, **kwargs: Any
    ) -> None:
        step = int(trainer.global_step)
        if step in self.steps and step not in self.states:
            self.keep(step)


def target_weight(name: str, value: float | None, targeted: bool, default: float) -> float:
    """A loss term's weight: ``default`` when its gap is targeted and no value is given, 0 when
    neither, else ``value`` checked (finite, >= 0)."""
    if value is None:
        return default if targeted else 0.0
    return check_float(name, value, minimum=0.0)


def grid_weights(
    targets: str | Iterable[str],
    options: Mapping[str, Any],
    lambda_grid: Sequence[float] | None,
    select: bool = True,
) -> list[dict[str, float]]:
    """The covariance weights of each fine-tuning run: one run per ``lambda_grid`` value, given
    to the targeted covariance terms (``lambda_cov`` for ``"dsp"``, ``lambda_eo`` for
    ``"deo"``) whose weight ``options`` does not set; ``[{}]`` (one run, the constructor's
    weights) without such a term, with ``lambda_grid=None`` or with ``select=False``."""
    t = check_targets(targets)
    free = [k for k, g in (("lambda_cov", "dsp"), ("lambda_eo", "deo")) if g in t]
    free = [k for k in free if options.get(k) is None]
    if not select or not free or lambda_grid is None:
        return [{}]
    if isinstance(lambda_grid, str) or not isinstance(lambda_grid, Sequence) or not lambda_grid:
        raise InvalidInputError(
            f"lambda_grid must be a non-empty sequence of weights >= 0 or None, got {lambda_grid!r}"
        )
    grid = [check_float("lambda_grid entry", v, minimum=0.0) for v in lambda_grid]
    return [dict.fromkeys(free, lam) for lam in dict.fromkeys(grid)]


def _with_callback(trainer_kwargs: Any, callback: Callback) -> Any:
    """``trainer_kwargs`` with ``callback`` appended to its callbacks (a non-dict is passed on
    unchanged for :func:`~gnnaudit.training.train.make_trainer` to refuse)."""
    if not isinstance(trainer_kwargs, dict | None):
        return trainer_kwargs
    given = (trainer_kwargs or {}).get("callbacks") or []
    listed = list(given) if isinstance(given, list | tuple) else [given]
    return {**(trainer_kwargs or {}), "callbacks": [*listed, callback]}


def _fit_run(
    cls: Any, tuned: nn.Module, data: Any, sensitive: Any, settings: Mapping[str, Any]
) -> tuple[Any, dict[int, dict[str, torch.Tensor]]]:
    """One fine-tuning run of ``tuned`` (in place) with the constructor ``settings`` and the
    run's ``epochs, steps, random_state, trainer_kwargs, progress``; returns the wrapper and the
    snapshots (the final weights always among them)."""
    run = dict(settings)
    epochs, steps, seed = run.pop("epochs"), run.pop("steps"), run["random_state"]
    trainer_kwargs, show = run.pop("trainer_kwargs"), run.pop("progress")
    try:
        wrapper = cls(tuned, data, sensitive, **run)
    except TypeError as exc:
        raise InvalidInputError(f"FairFinetune.finetune: {exc}") from exc
    snapshots = Snapshots(tuned, steps)
    with quiet_lightning(False):
        L.seed_everything(seed, workers=True, verbose=False)
        trainer = make_trainer(
            epochs,
            _with_callback(trainer_kwargs, snapshots),
            limit_val_batches=0,
            progress=show,
            progress_desc="fair fine-tuning",
        )
        tuned.train()
        trainer.fit(wrapper, datamodule=GraphDataModule(data, seed=seed))
    snapshots.keep(int(trainer.global_step))
    return wrapper, snapshots.states


def _check_model(model: Any, data: Any, select: bool) -> torch.device:
    """Refuse what :func:`finetune_and_select` cannot tune; the model's device."""
    check_bool("select", select)
    if not isinstance(model, nn.Module):
        raise InvalidInputError(
            f"model must be a torch.nn.Module called as model(x, edge_index), got "
            f"{type(model).__name__}"
        )
    params = list(model.parameters())
    if not params:
        raise InvalidInputError(f"model {type(model).__name__} has no parameters to fine-tune")
    val = getattr(data, "val_mask", None)
    if select and isinstance(val, torch.Tensor) and not bool(val.any()):
        raise InvalidInputError(
            "data.val_mask selects no node: the selection of FairFinetune.finetune needs "
            "validation nodes (or select=False to keep the final weights)"
        )
    return params[0].device


def can_blind(model: nn.Module, data: Any, sensitive: Any) -> bool:
    """Whether ``model`` reads ``sensitive`` through input weights that
    :mod:`~gnnaudit.training.input_blinding` can zero (eval-mode forward passes on ``data``)."""
    spec = resolve_sensitive_feature(data, sensitive)
    return slices_on_graph(model, data, spec, alternatives(data, spec)) is not None


def blind_modes(
    blind: Any, targets: tuple[str, ...], model: nn.Module, data: Any, sensitive: Any
) -> list[bool]:
    """The rounds of runs of :func:`finetune_and_select`, one ``blind`` setting each; a round
    runs only when the ones before it keep the model as given. ``"auto"``: blinded runs when
    ``"cf"`` is targeted and :func:`can_blind`, then consistency runs; else consistency runs
    only. ``True`` / ``False``: only those."""
    if blind not in BLIND_CHOICES or not isinstance(blind, bool | str):
        raise InvalidInputError(f"blind must be 'auto', True or False, got {blind!r}")
    if isinstance(blind, bool):
        return [blind]
    return [True, False] if "cf" in targets and can_blind(model, data, sensitive) else [False]


def _output_bias(model: nn.Module, data: Any) -> str | None:
    """The bias that carries the decision offset (:mod:`~gnnaudit.training.decision_offset`);
    None, with a log line, for a model that has none (its argmax threshold is kept) or a task
    that is not binary."""
    bias = find_output_bias(model, data)
    if bias is None:
        logger.info(
            "keep_rate: the model is not a two-class model with an output bias that shifts its "
            "class-1 margin; candidates are decided by argmax"
        )
    return bias


def finetune_and_select(  # noqa: PLR0913  # the body of FairFinetune.finetune, same keywords
    cls: Any,
    model: nn.Module,
    data: Any,
    sensitive: Any,
    *,
    targets: str | Sequence[str],
    epochs: int,
    max_auroc_drop: float,
    max_bacc_drop: float | None,
    n_candidates: int,
    early_snapshots: bool,
    lambda_grid: Sequence[float] | None,
    select: bool,
    blind: bool | str,
    keep_rate: bool,
    random_state: int,
    trainer_kwargs: Mapping[str, Any] | None,
    progress: bool | None,
    options: Mapping[str, Any],
) -> nn.Module:
    """:meth:`FairFinetune.finetune <gnnaudit.training.FairFinetune.finetune>` (``cls``: the
    ``FairFinetune`` class): one fine-tuning run of a copy per :func:`grid_weights` entry and
    :func:`blind_modes` setting, snapshots pooled with the vanilla weights, selected, warned
    about, ``selection_`` attached. Cost: runs x ``epochs`` x ``(1 + |scopes|)`` forward /
    backward passes (blinded runs: 1 pass a step) plus the selection's forward passes
    (:func:`selection_frame`)."""
    settings = {
        "epochs": check_int("epochs", epochs, minimum=1, maximum=MAX_EPOCHS),
        "steps": candidate_steps(epochs, n_candidates, early_snapshots),
        "random_state": check_seed("random_state", random_state),
        "trainer_kwargs": trainer_kwargs,
        "progress": resolve_progress("progress", progress),
        "targets": targets,
        **options,
    }
    max_auroc_drop = check_float("max_auroc_drop", max_auroc_drop, minimum=0.0, maximum=1.0)
    if max_bacc_drop is not None:
        max_bacc_drop = check_float("max_bacc_drop", max_bacc_drop, minimum=0.0, maximum=1.0)
    model = trained_module(model)
    device = _check_model(model, data, select)
    keep_rate = check_bool("keep_rate", keep_rate)
    # select=False returns one run's final weights as trained: no offset
    output_bias = _output_bias(model, data) if keep_rate and select else None
    settings["parity"] = decision_parity(
        options.get("parity", DEFAULT_PARITY), output_bias is not None, model, data
    )
    runs = grid_weights(targets, options, lambda_grid, select)
    # a consistency weight set by the caller asks for consistency runs: "auto" does not blind
    auto_targets = () if options.get("lambda_cf") is not None else check_targets(targets)
    rounds = blind_modes(blind, auto_targets, model, data, sensitive)
    candidates = [
        (VANILLA, 0, {k: v.detach().cpu().clone() for k, v in model.state_dict().items()})
    ]
    for mode in rounds:
        for weights in runs:
            tuned = copy.deepcopy(model)
            run = {**settings, **weights, "blind": mode}
            wrapper, states = _fit_run(cls, tuned, data, sensitive, run)
            prefix = "blind " if mode else ""
            prefix += f"cov={next(iter(weights.values())):g} " if len(runs) > 1 else ""
            candidates += [(f"{prefix}step {s}", s, states[s]) for s in sorted(states)]
        tuned.to(device)
        table, _, gain = selection_frame(
            tuned,
            data,
            wrapper.spec,
            candidates,
            wrapper.targets,
            max_auroc_drop,
            select=select,
            max_bacc_drop=max_bacc_drop,
            random_state=settings["random_state"],
            output_bias=output_bias,
        )
        if not bool(table["chosen"].iloc[0]):
            break
    warn_unless_fairer(
        table,
        wrapper.targets,
        max_auroc_drop,
        selected_last=not select,
        stacklevel=5,
        max_bacc_drop=max_bacc_drop,
    )
    warn_if_decisions_worse(table, max_auroc_drop, stacklevel=5, max_bacc_drop=max_bacc_drop)
    chosen_name = str(table.loc[table["chosen"], "candidate"].iloc[0])
    n_val = int(data.val_mask.sum())
    n_free = int(label_free_nodes(data, sensitive=wrapper.spec.name).sum())
    warn_if_gain_uncertain(gain, n_val, chosen_name=chosen_name, stacklevel=5, n_free=n_free)
    tuned.selection_ = table
    tuned.selection_gain_ = gain
    return tuned.eval()
