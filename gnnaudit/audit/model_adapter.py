"""The model boundary of the audit (flat: the context, the units and the Dask path call it):
one place that calls the user's model.

An auditor brings any node classifier: a :class:`torch.nn.Module` or plain callable
``model(x, edge_index) -> logits``, a gnnaudit ``NodeClassifier``, a model that needs extra
arguments (``forward_kwargs``, e.g. ``edge_weight``), or a fully custom ``predict_fn(x,
edge_index) -> logits`` that closes over whatever else it needs. Every audit statistic calls the
model through :class:`ModelAdapter`, which

* runs it in eval mode under ``torch.no_grad()`` and restores the previous training mode;
* runs it on its device (``device="auto"``: the device of the model's first parameter, CPU for
  parameter-free callables), moving ``x`` and ``edge_index`` there;
* checks the answer: a floating tensor of shape ``(num_nodes, num_classes)`` with
  ``num_classes >= 2`` and no NaN or inf, else :class:`~gnnaudit.errors.InvalidInputError`;
* turns any exception raised inside the model into an ``InvalidInputError`` that names the
  input shapes, so a broken model never surfaces as a traceback from deep inside the audit.

Interventions (counterfactual flips) call :meth:`ModelAdapter.logits` with a modified ``x``:
the adapter never caches by input.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

from gnnaudit._validation import check_device
from gnnaudit.errors import GnnAuditError, InvalidInputError, note_model_error

__all__ = ["ModelAdapter", "resolve_device", "trained_module"]


def trained_module(model: Any) -> Any:
    """The module of a trainer's result, else ``model`` unchanged: the
    :class:`~gnnaudit.training.TrainResult` of
    :func:`~gnnaudit.training.train_node_classifier` is a ``(module, metrics)`` pair, and every
    entry point that takes a model (the audit, :class:`~gnnaudit.training.FairFinetune`) takes
    the pair as its module (any tuple with a ``module`` field that is an ``nn.Module``)."""
    module = getattr(model, "module", None)
    if isinstance(model, tuple) and isinstance(module, torch.nn.Module):
        return module
    return model


def resolve_device(device: Any, model: Any = None) -> torch.device:
    """``device`` as a :class:`torch.device`.

    ``"auto"`` / None: the device of ``model``'s first parameter or buffer (CPU when it has
    none). ``"cuda"`` without a CUDA device raises :class:`InvalidInputError`.
    """
    if device is None or (isinstance(device, str) and device == "auto"):
        if isinstance(model, torch.nn.Module):
            for tensor in model.parameters():
                return tensor.device
            for buffer in model.buffers():
                return buffer.device
        return torch.device("cpu")
    return check_device("device", device)


def _check_model_on(model: Any, device: torch.device) -> None:
    """Refuse an ``nn.Module`` whose weights live on another device than ``device``."""
    if not isinstance(model, torch.nn.Module):
        return
    held = {t.device for t in itertools.chain(model.parameters(), model.buffers())}
    other = sorted(str(d) for d in held if not _same_device(d, device))
    if other:
        raise InvalidInputError(
            f"device={str(device)!r} but the model's weights are on {', '.join(other)}; move "
            f"the model first (model.to({str(device)!r})) or pass device='auto' to use the "
            "model's device"
        )


def _same_device(a: torch.device, b: torch.device) -> bool:
    if a.type != b.type:
        return False
    index = torch.cuda.current_device() if a.type == "cuda" and torch.cuda.is_available() else 0
    return (a.index if a.index is not None else index) == (
        b.index if b.index is not None else index
    )


def _refuse_changed_inputs(
    name: str, given: tuple[torch.Tensor, torch.Tensor], before: tuple[torch.Tensor, torch.Tensor]
) -> None:
    """Restore ``given`` (the tensors the model was called with, the caller's own when already
    on the device) from their copies ``before`` and raise when the model changed them in
    place: every later pass would see changed inputs, and the caller's ``data`` with them."""
    changed = [
        arg for arg, now, was in zip(("x", "edge_index"), given, before, strict=True)
        if not torch.equal(now, was)
    ]  # fmt: skip
    if not changed:
        return
    for now, was in zip(given, before, strict=True):
        now.copy_(was)
    raise InvalidInputError(
        f"model {name} changed its input {' and '.join(changed)} in place during the first "
        "forward pass (restored): the audit's counterfactual passes and the caller's data would "
        "be corrupted; make forward leave its inputs unchanged (e.g. x = x * 2, not x.mul_(2))"
    )


class ModelAdapter:
    """Call a user's node classifier safely and uniformly (see the module docstring).

    Parameters
    ----------
    model : ``nn.Module`` or callable ``model(x, edge_index, **forward_kwargs) -> logits`` (or
        the result of :func:`~gnnaudit.training.train_node_classifier`, :func:`trained_module`).
        May be None when ``predict_fn`` is given.
    forward_kwargs : extra keyword arguments passed to every ``model`` call (tensors are moved
        to the model's device).
    predict_fn : callable ``predict_fn(x, edge_index) -> logits`` used instead of calling
        ``model`` (``model`` then only serves for the device and the eval-mode switch).
    device : ``"auto"`` (default), ``"cpu"``, ``"cuda"`` ... (see :func:`resolve_device`).
        With an explicit device an ``nn.Module`` is **not** moved: the caller's model stays
        untouched; pass ``"auto"`` or move the model yourself (weights on another device
        than an explicit ``device`` raise :class:`InvalidInputError` naming both).
    """

    def __init__(
        self,
        model: Any = None,
        *,
        forward_kwargs: Mapping[str, Any] | None = None,
        predict_fn: Callable[[torch.Tensor, torch.Tensor], Any] | None = None,
        device: Any = "auto",
    ) -> None:
        model = trained_module(model)
        if model is None and predict_fn is None:
            raise InvalidInputError("model must be given (or predict_fn), got None")
        if predict_fn is None and not callable(model):
            raise InvalidInputError(
                f"model must be a torch.nn.Module or a callable (x, edge_index) -> logits, got "
                f"{type(model).__name__}"
            )
        if predict_fn is not None and not callable(predict_fn):
            raise InvalidInputError(f"predict_fn must be callable, got {type(predict_fn).__name__}")
        if forward_kwargs is not None and not isinstance(forward_kwargs, Mapping):
            raise InvalidInputError(
                f"forward_kwargs must be a mapping of keyword arguments, got "
                f"{type(forward_kwargs).__name__}"
            )
        if forward_kwargs and predict_fn is not None:
            raise InvalidInputError("give forward_kwargs or predict_fn, not both")
        self.model = model
        self.predict_fn = predict_fn
        self.device = resolve_device(device, model)
        if predict_fn is None:
            _check_model_on(model, self.device)
        self.forward_kwargs = {
            key: value.to(self.device) if isinstance(value, torch.Tensor) else value
            for key, value in dict(forward_kwargs or {}).items()
        }
        #: calls of the model through :meth:`logits`, and the node rows they evaluated (the
        #: audit's counted work: :func:`~gnnaudit.audit.unit.run_units` records them per stage)
        self.calls = 0
        self.rows = 0

    @classmethod
    def wrap(cls, model: Any, **kwargs: Any) -> ModelAdapter:
        """``model`` itself when it already is an adapter, else ``ModelAdapter(model, **kwargs)``."""
        if isinstance(model, ModelAdapter):
            return model
        return cls(model, **kwargs)

    @property
    def name(self) -> str:
        """Class name of the wrapped model (for reports)."""
        target = self.model if self.model is not None else self.predict_fn
        if isinstance(target, torch.nn.Module):
            return type(target).__name__
        return str(getattr(target, "__name__", type(target).__name__))

    @contextlib.contextmanager
    def eval_mode(self) -> Iterator[None]:
        """Put an ``nn.Module`` (or anything with ``eval``/``train``) in eval mode, restore after."""
        target = self.model
        was_training = bool(getattr(target, "training", False))
        if hasattr(target, "eval"):
            target.eval()
        try:
            yield
        finally:
            if was_training and hasattr(target, "train"):
                target.train(True)

    def _call(self, x: torch.Tensor, edge_index: torch.Tensor) -> Any:
        if self.predict_fn is not None:
            return self.predict_fn(x, edge_index)
        return self.model(x, edge_index, **self.forward_kwargs)

    def logits(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        *,
        to_cpu: bool = True,
        stage: str = "a forward pass",
    ) -> torch.Tensor:
        """Validated ``(n, C)`` float logits of the model on ``(x, edge_index)``.

        Runs in eval mode without gradients on :attr:`device`; the result is detached and, with
        ``to_cpu`` (default), on the CPU. An exception raised by the model itself propagates
        unchanged (it is the user's error, not invalid input), with a note naming ``stage``
        (:func:`~gnnaudit.errors.note_model_error`); a malformed output (not a tensor, wrong
        shape, NaN) is an :class:`~gnnaudit.errors.InvalidInputError`, and so is a model that
        changes its inputs in place (checked on the first call, against copies: one extra
        copy of ``x`` and ``edge_index`` then; the inputs are restored before the error).
        """
        n = int(x.shape[0])
        self.calls += 1
        self.rows += n
        x_dev = x.to(self.device)
        ei_dev = edge_index.to(self.device)
        inputs = (x_dev.clone(), ei_dev.clone()) if self.calls == 1 else None
        with self.eval_mode(), torch.no_grad():
            try:
                out = self._call(x_dev, ei_dev)
            except GnnAuditError:
                raise
            except Exception as exc:  # the user's model: its own error, marked with the stage
                note_model_error(exc, stage)
                raise
        if inputs is not None:
            _refuse_changed_inputs(self.name, (x_dev, ei_dev), inputs)
        if not isinstance(out, torch.Tensor):
            raise InvalidInputError(
                f"model must return a tensor of logits of shape [{n}, num_classes], got "
                f"{type(out).__name__} (wrap it with predict_fn=... to pick the logits)"
            )
        if out.dim() != 2 or out.size(0) != n or out.size(1) < 2:
            raise InvalidInputError(
                f"model must return logits of shape [{n}, num_classes >= 2], got {tuple(out.shape)}"
            )
        if not out.is_floating_point():
            raise InvalidInputError(f"model must return floating-point logits, got {out.dtype}")
        if not bool(torch.isfinite(out).all()):
            bad = int((~torch.isfinite(out)).any(dim=1).sum())
            raise InvalidInputError(
                f"model returned NaN or inf logits for {bad} of {n} nodes; check the model's "
                "weights and the input features"
            )
        out = out.detach()
        return out.cpu() if to_cpu else out

    def predict(
        self, x: torch.Tensor, edge_index: torch.Tensor, *, stage: str = "a forward pass"
    ) -> np.ndarray:
        """Predicted class of every node, ``(n,)`` int64 (argmax of :meth:`logits`)."""
        out = self.logits(x, edge_index, to_cpu=False, stage=stage)
        return out.argmax(dim=1).cpu().numpy().astype(np.int64)

    def __repr__(self) -> str:
        return f"ModelAdapter({self.name}, device={self.device})"
