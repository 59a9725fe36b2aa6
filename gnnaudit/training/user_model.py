"""Load an auditor's own model: their code, their weights, read safely.

An auditor names their model class or factory as ``MODULE:NAME`` — an importable module
(``my_project.models:build_gcn``) or a Python file (``path/to/models.py:GCN``). Importing that
code is the one trusted step of an audit: it runs the user's own code, exactly as their training
script does. Everything else is data and is read without executing code:

* ``--weights PATH``: a ``state_dict`` saved with ``torch.save(model.state_dict(), PATH)``, read
  with ``torch.load(..., weights_only=True)``; keys and shapes are checked against the model
  and the first mismatches are listed;
* ``--checkpoint PATH`` (``checkpoint=``): a Lightning checkpoint of the user's own
  LightningModule class, read with ``weights_only=True``; the class is rebuilt from the checkpoint's
  ``hyper_parameters`` (plain values) and its ``state_dict`` loaded.

The factory is called as ``factory(in_channels, out_channels)`` when it takes two arguments
(positional or named ``in_channels`` / ``out_channels``), or with no argument when it takes none.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from gnnaudit._aliases import renamed_keywords
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import safe_torch_load

__all__ = [
    "import_object",
    "build_model",
    "load_weights",
    "load_lightning_checkpoint",
    "load_user_model",
]

#: mismatching state-dict entries listed in an error message
MAX_LISTED = 5


def import_object(spec: str, *, name: str = "--model") -> Any:
    """The object named by ``MODULE:NAME`` (``MODULE`` importable or a ``.py`` file path).

    This imports and therefore runs the user's module: the one trusted step of an audit. A
    ``.py`` file runs with its own folder at the front of the import path, so its imports of
    sibling modules (``from layers import MyConv``) work as they do in the user's scripts; the
    import path is restored afterwards (the imported siblings stay in ``sys.modules``).
    """
    if not isinstance(spec, str) or spec.count(":") < 1:
        raise InvalidInputError(
            f"{name} must look like MODULE:NAME (e.g. my_models:build_gcn or path/to/file.py:GCN),"
            f" got {spec!r}"
        )
    module_part, _, attr = spec.rpartition(":")
    if not module_part or not attr.isidentifier():
        raise InvalidInputError(f"{name}={spec!r}: {attr!r} is not a Python name")
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        path = os.path.abspath(module_part)
        if not os.path.isfile(path):
            raise InvalidInputError(f"{name}={spec!r}: the file {module_part!r} does not exist")
        mod_name = f"gnnaudit_user_{abs(hash(path))}"
        file_spec = importlib.util.spec_from_file_location(mod_name, path)
        if file_spec is None or file_spec.loader is None:
            raise InvalidInputError(f"{name}={spec!r}: {module_part!r} is not a Python file")
        module = importlib.util.module_from_spec(file_spec)
        sys.modules[mod_name] = module
        folder = os.path.dirname(path)
        added = folder not in sys.path
        if added:  # the file's sibling modules import as in the user's own scripts
            sys.path.insert(0, folder)
        try:
            file_spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(mod_name, None)
            raise InvalidInputError(
                f"{name}={spec!r}: importing {module_part!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            if added and folder in sys.path:
                sys.path.remove(folder)
    else:
        try:
            module = importlib.import_module(module_part)
        except Exception as exc:
            raise InvalidInputError(
                f"{name}={spec!r}: cannot import {module_part!r}: {type(exc).__name__}: {exc}"
            ) from exc
    if not hasattr(module, attr):
        raise InvalidInputError(f"{name}={spec!r}: module {module_part!r} has no {attr!r}")
    return getattr(module, attr)


def _arity(factory: Callable[..., Any]) -> str:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return "two"
    params = [
        p
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.default is p.empty
    ]
    names = {p.name for p in sig.parameters.values()}
    if {"in_channels", "out_channels"} <= names:
        return "named"
    if not params:
        return "none"
    return "two"


def build_model(
    factory: Callable[..., Any], in_channels: int, out_channels: int, *, name: str = "--model"
) -> torch.nn.Module:
    """Call the user's factory (see the module docstring) and check it returns an ``nn.Module``."""
    if not callable(factory):
        raise InvalidInputError(f"{name} must name a class or function, got {type(factory)}")
    how = _arity(factory)
    try:
        if how == "named":
            model = factory(in_channels=in_channels, out_channels=out_channels)
        elif how == "none":
            model = factory()
        else:
            model = factory(in_channels, out_channels)
    except Exception as exc:
        call = "()" if how == "none" else f"({in_channels}, {out_channels})"
        raise InvalidInputError(
            f"{name}: calling {getattr(factory, '__name__', factory)}{call} failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(model, torch.nn.Module):
        raise InvalidInputError(
            f"{name}: {getattr(factory, '__name__', factory)} returned a "
            f"{type(model).__name__}, not a torch.nn.Module"
        )
    return model


def _read(path: str | os.PathLike[str], name: str) -> Any:
    return safe_torch_load(path, name=name)


def _check_state(model: torch.nn.Module, state: Any, name: str, path: str) -> None:
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise InvalidInputError(f"{name}: {path} does not hold a state_dict (a dict of tensors)")
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
        for k in own
        if k in state and isinstance(state[k], torch.Tensor) and state[k].shape != own[k].shape
    ]
    problems = []
    if missing:
        problems.append(f"missing in the file: {', '.join(missing[:MAX_LISTED])}")
    if unexpected:
        problems.append(f"not in the model: {', '.join(unexpected[:MAX_LISTED])}")
    if shapes:
        problems.append(f"shape mismatch: {'; '.join(shapes[:MAX_LISTED])}")
    if problems:
        raise InvalidInputError(
            f"{name}: {path} does not match the model {type(model).__name__} "
            f"({len(missing)} missing, {len(unexpected)} unexpected, {len(shapes)} shape "
            f"mismatches): " + " | ".join(problems)
        )
    bad = [k for k, v in state.items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    bad = [k for k in bad if not bool(torch.isfinite(state[k]).all())]
    if bad:
        raise InvalidInputError(f"{name}: {path} holds NaN or inf weights in {bad[:MAX_LISTED]}")


def _load_state(model: torch.nn.Module, state: Any, name: str, path: str) -> None:
    """``model.load_state_dict(state)``; a value it cannot copy (a non-tensor entry, a dtype
    torch cannot convert) raises :class:`InvalidInputError` naming ``name`` and the file."""
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidInputError(
            f"{name}: {path} cannot be loaded into {type(model).__name__}: "
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        ) from exc


def load_weights(
    model: torch.nn.Module, path: str | os.PathLike[str], *, name: str = "--weights"
) -> torch.nn.Module:
    """Load a ``state_dict`` file into ``model`` (strict; see the module docstring).

    A Lightning checkpoint given here is accepted too: its ``state_dict`` entry is used.
    """
    state = _read(path, name)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    _check_state(model, state, name, os.fspath(path))
    _load_state(model, state, name, os.fspath(path))
    return model.eval()


def load_lightning_checkpoint(
    cls: Any,
    path: str | os.PathLike[str],
    *,
    in_channels: int | None = None,
    out_channels: int | None = None,
    name: str = "--checkpoint",
) -> torch.nn.Module:
    """Rebuild the user's LightningModule ``cls`` from a checkpoint read with
    ``weights_only=True``: ``cls(**hyper_parameters)`` when the checkpoint stores them, else the
    factory rule of :func:`build_model`; then its ``state_dict`` is loaded."""
    ckpt = _read(path, name)
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise InvalidInputError(f"{name}: {path} is not a Lightning checkpoint (no 'state_dict')")
    hparams = ckpt.get("hyper_parameters") or {}
    if hparams:
        try:
            model = cls(**dict(hparams))
        except Exception as exc:
            raise InvalidInputError(
                f"{name}: rebuilding {getattr(cls, '__name__', cls)} from the checkpoint's "
                f"hyper_parameters {sorted(hparams)} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(model, torch.nn.Module):
            raise InvalidInputError(f"{name}: {getattr(cls, '__name__', cls)} is not a Module")
    else:
        if in_channels is None or out_channels is None:
            raise InvalidInputError(f"{name}: the checkpoint has no hyper_parameters")
        model = build_model(cls, in_channels, out_channels, name="--model")
    _check_state(model, ckpt["state_dict"], name, os.fspath(path))
    _load_state(model, ckpt["state_dict"], name, os.fspath(path))
    return model.eval()


@renamed_keywords(deprecated={"lightning_checkpoint": "checkpoint"})
def load_user_model(
    spec: str,
    in_channels: int,
    out_channels: int,
    *,
    weights: str | os.PathLike[str] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
) -> torch.nn.Module:
    """The user's model named by ``spec`` (``MODULE:NAME``), with ``weights`` or from a
    Lightning ``checkpoint`` of it (at most one), in eval mode. ``lightning_checkpoint=`` is a
    deprecated spelling of ``checkpoint=`` (removed in 0.3.0)."""
    if weights is not None and checkpoint is not None:
        raise InvalidInputError("give --weights or --checkpoint, not both")
    obj = import_object(spec)
    if checkpoint is not None:
        return load_lightning_checkpoint(
            obj, checkpoint, in_channels=in_channels, out_channels=out_channels
        )
    model = build_model(obj, in_channels, out_channels)
    if weights is not None:
        load_weights(model, weights)
    return model.eval()
