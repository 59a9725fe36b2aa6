"""Node embeddings of any GNN, read with a forward hook (the model is never changed).

:func:`node_embeddings` runs one forward pass of the model (eval mode, no gradients, through
:class:`~gnnaudit.audit.model_adapter.ModelAdapter`) with a hook on one submodule and returns

* ``layer=None``: the **input of the final layer**, i.e. the representation the model's last
  layer turns into logits;
* ``layer="name"``: the **output of the submodule** ``name`` (a name of
  ``model.named_modules()``, e.g. ``"convs.1"``).

**Final layer** (:func:`final_layer_name`): starting at the model, repeatedly take its last
child module, in registration order, that holds parameters; a container (``nn.Sequential``,
``nn.ModuleList``, ``nn.ModuleDict``, PyG's ``Sequential``) is descended into, any other module
is the final layer. For gnnaudit's ``NodeClassifier`` that is ``convs.<L-1>`` (its input is the
ReLU of the previous layer's output); for a plain ``conv1, conv2`` GNN it is ``conv2``; for an
``nn.Sequential(Linear, ReLU, Linear)`` head the last ``Linear``. A message-passing layer is
never split into its inner ``lin`` / ``nn`` parts, so the embedding is a per-node state
*before* the last neighbourhood aggregation.

If the hooked module runs several times in one forward pass, the last call is used. The
forward hooks are removed and the training mode restored in all cases (``finally``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gnnaudit.audit.context import resolve_nodes
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.errors import InvalidInputError

__all__ = ["node_embeddings", "final_layer_name", "forward_with_embeddings"]


def _is_container(module: nn.Module) -> bool:
    if isinstance(module, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
        return True
    try:
        from torch_geometric.nn import Sequential as PygSequential
    except ImportError:  # pragma: no cover - PyG is a dependency
        return False
    return isinstance(module, PygSequential)


def _has_parameters(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def final_layer_name(model: nn.Module) -> str:
    """Name (in ``model.named_modules()``) of the model's final layer (module docstring)."""
    if not isinstance(model, nn.Module):
        raise InvalidInputError(
            f"model must be a torch.nn.Module to hook its layers, got {type(model).__name__}"
        )
    name, module = "", model
    while True:
        children = [(n, c) for n, c in module.named_children() if _has_parameters(c)]
        if not children:
            break
        child_name, child = children[-1]
        name = f"{name}.{child_name}" if name else child_name
        module = child
        if not _is_container(module):
            break
    if not name:
        raise InvalidInputError(
            f"model {type(model).__name__} has no submodule with parameters, so it has no final "
            "layer to read embeddings from; name a submodule with layer=..."
        )
    return name


def _first_tensor(values: Any) -> torch.Tensor | None:
    if isinstance(values, torch.Tensor):
        return values
    if isinstance(values, (tuple, list)):
        for v in values:
            if isinstance(v, torch.Tensor):
                return v
    if isinstance(values, dict):
        for v in values.values():
            if isinstance(v, torch.Tensor):
                return v
    return None


def _module(adapter: ModelAdapter) -> nn.Module:
    model = adapter.model
    if not isinstance(model, nn.Module):
        raise InvalidInputError(
            "model must be a torch.nn.Module (or a ModelAdapter wrapping one) to read its "
            f"embeddings with a hook, got {type(model).__name__}"
        )
    return model


def forward_with_embeddings(
    model: Any, data: Any, layer: str | None = None
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """One forward pass: ``(embeddings (n, d) float CPU, logits (n, C) CPU, layer name)``.

    ``model``: an ``nn.Module`` or a :class:`ModelAdapter` wrapping one (its
    ``forward_kwargs`` / ``predict_fn`` / device are honoured). See :func:`node_embeddings`.
    """
    adapter = ModelAdapter.wrap(model)
    module = _module(adapter)
    names = dict(module.named_modules())
    if layer is None:
        name, read_input = final_layer_name(module), True
    else:
        if not isinstance(layer, str) or layer not in names or layer == "":
            known = [n for n in names if n]
            raise InvalidInputError(
                f"layer={layer!r} is not a submodule of {type(module).__name__}; known: "
                f"{', '.join(known[:30])}{' ...' if len(known) > 30 else ''}"
            )
        name, read_input = layer, False
    target = names[name]
    captured: list[torch.Tensor | None] = []

    def pre_hook(_mod: nn.Module, args: tuple, kwargs: dict) -> None:
        captured.append(_first_tensor(args) if args else _first_tensor(kwargs))

    def post_hook(_mod: nn.Module, _args: tuple, output: Any) -> None:
        captured.append(_first_tensor(output))

    handle = (
        target.register_forward_pre_hook(pre_hook, with_kwargs=True)
        if read_input
        else target.register_forward_hook(post_hook)
    )
    try:
        logits = adapter.logits(data.x, data.edge_index, stage="the embedding audit")
    finally:
        handle.remove()
    n = int(data.x.size(0))
    what = f"{'input' if read_input else 'output'} of layer {name!r}"
    if not captured:
        raise InvalidInputError(f"the {what} was never called during the model's forward pass")
    emb = captured[-1]
    if emb is None or emb.dim() < 2 or emb.size(0) != n:
        shape = None if emb is None else tuple(emb.shape)
        raise InvalidInputError(
            f"the {what} is not a per-node tensor of shape [{n}, d] (got {shape}); name another "
            "submodule with layer=..."
        )
    emb = emb.detach().reshape(n, -1).to(torch.float32).cpu()
    if not bool(torch.isfinite(emb).all()):
        raise InvalidInputError(f"the {what} holds NaN or inf values")
    return emb, logits, name


def node_embeddings(
    model: Any, data: Any, layer: str | None = None, mask: Any = None
) -> torch.Tensor:
    """Per-node representation of ``model`` on ``data`` (see the module docstring).

    Parameters
    ----------
    model : a ``torch.nn.Module`` GNN called as ``model(x, edge_index)`` (a gnnaudit
        ``NodeClassifier`` or any plain module), or a :class:`ModelAdapter` wrapping one.
    data : a PyG ``Data`` with ``x`` and ``edge_index``.
    layer : ``None`` for the input of the final layer, else the name of a submodule whose
        output is returned (:class:`InvalidInputError` naming ``layer`` when it does not exist).
    mask : rows to return: a boolean node mask or node ids (ascending ids are returned);
        ``None``: every node.

    Returns
    -------
    ``(len(rows), d)`` float32 CPU tensor. The model runs once on the whole graph; its
    parameters, hooks and training mode are unchanged afterwards.
    """
    emb, _, _ = forward_with_embeddings(model, data, layer)
    if mask is None:
        return emb
    rows = resolve_nodes(data, mask, name="mask")
    return emb[torch.from_numpy(np.asarray(rows))]
