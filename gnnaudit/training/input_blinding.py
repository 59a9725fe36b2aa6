r"""Input blinding: the weights through which a model reads the sensitive attribute's columns.

A node classifier whose input ``x`` first meets linear maps (``Linear``, PyG's ``GCNConv``,
``SAGEConv``, ``GINConv``'s first ``Linear``, ``GATConv``, ...) reads feature column ``j`` only
through the weight columns ``W[:, j]`` of those maps. Setting them to 0 makes the model's output
exactly independent of column ``j``: for the sensitive columns :math:`J`,

.. math::

    M(X) = M(\tilde X) \quad \text{for every } \tilde X \text{ that differs from } X
    \text{ only in the columns } J,

so NIFTY's counterfactual unfairness (and the audit's flip rate at both scopes) is 0 by
construction. This is *fairness through unawareness* at the weight level: the model keeps its
architecture and its ``state_dict`` keys, and proxies of the attribute (other columns, the
neighbours) are left to the covariance terms of
:class:`~gnnaudit.training.FairFinetune`.

:func:`find_input_slices` finds the weights without knowing the architecture: every parameter
whose last dimension equals the number of input features is a candidate; with all candidates'
sensitive columns zeroed, the model must be invariant (checked, below); then candidates are
restored one at a time, last registered first, while invariance holds, so a later layer whose
width happens to equal the number of features is left alone. The model is *invariant* when, in
eval mode on ``data``, its outputs with the sensitive columns replaced (every alternative of the
audit, :func:`~gnnaudit.audit.interventions.alternatives`, and a seeded Gaussian draw) equal the
factual ones within ``atol``. A model that reads the attribute otherwise (an embedding of the
raw value, a non-linearity before the first linear map) has no such slices: ``None``.

Cost: ``(1 + candidates) x (2 + alternatives)`` forward passes in eval mode, no backward pass.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from gnnaudit.audit.interventions import Alternative, FeatureSpec
from gnnaudit.errors import InvalidInputError

__all__ = [
    "InputSlices",
    "find_input_slices",
    "zero_input_slices",
    "is_blind",
    "blind_model",
    "slices_on_graph",
]

logger = logging.getLogger(__name__)

#: absolute tolerance of the invariance check, relative to the largest factual |logit| (>= 1)
INVARIANCE_ATOL = 1e-5


@dataclass(frozen=True)
class InputSlices:
    """Parameter names whose columns ``columns`` (of the last dimension) read the sensitive
    attribute."""

    names: tuple[str, ...]
    columns: tuple[int, ...]

    def zero_grad_of(self, model: nn.Module) -> None:
        """Set the gradients of the slices to 0 (call before an optimiser step)."""
        params = dict(model.named_parameters())
        cols = list(self.columns)
        for name in self.names:
            grad = params[name].grad
            if grad is not None:
                grad[..., cols] = 0.0


def zero_input_slices(model: nn.Module, slices: InputSlices) -> None:
    """Set the sensitive columns of the parameters ``slices.names`` of ``model`` to 0, in place."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in slices.names:
            params[name][..., list(slices.columns)] = 0.0


def _worlds(
    x: torch.Tensor, columns: Sequence[int], alts: Sequence[Alternative], seed: int
) -> list[torch.Tensor]:
    """``x`` with the sensitive columns of every node replaced: once per alternative and once by
    a seeded standard Gaussian draw."""
    cols = torch.as_tensor(list(columns), dtype=torch.long, device=x.device)
    out = []
    for alt in alts:
        x_cf = x.clone()
        values = torch.as_tensor(np.asarray(alt.values), dtype=x.dtype, device=x.device)
        rows = torch.as_tensor(np.flatnonzero(alt.changes), dtype=torch.long, device=x.device)
        if values.shape[0] != 1:
            values = values[rows]
        x_cf[rows[:, None], cols[None, :]] = values
        out.append(x_cf)
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn((x.shape[0], len(cols)), generator=gen, dtype=x.dtype).to(x.device)
    x_rand = x.clone()
    x_rand[:, cols] = noise
    out.append(x_rand)
    return out


@torch.no_grad()
def is_blind(
    model: nn.Module,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    columns: Sequence[int],
    alts: Sequence[Alternative],
    seed: int = 0,
) -> bool:
    """Whether ``model`` (put in eval mode, restored after) gives the same outputs on ``x`` and
    on every world of the sensitive ``columns`` (module docstring)."""
    was_training = model.training
    model.eval()
    try:
        factual = model(x, edge_index)
        atol = INVARIANCE_ATOL * max(1.0, float(factual.detach().abs().max()))
        return all(
            torch.allclose(model(x_cf, edge_index), factual, rtol=0.0, atol=atol)
            for x_cf in _worlds(x, columns, alts, seed)
        )
    finally:
        model.train(was_training)


def find_input_slices(
    model: nn.Module,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    columns: Sequence[int],
    alts: Sequence[Alternative],
    seed: int = 0,
) -> InputSlices | None:
    """The smallest set of input-weight slices (module docstring) whose zeroing makes ``model``
    blind to ``columns``; ``None`` when zeroing every candidate does not (``model`` is not
    modified)."""
    n_features = int(x.shape[1])
    cols = tuple(int(c) for c in columns)
    candidates = [
        name
        for name, p in model.named_parameters()
        if p.dim() >= 2 and p.shape[-1] == n_features and p.requires_grad
    ]
    if not candidates or not cols:
        return None
    probe = copy.deepcopy(model)
    zero_input_slices(probe, InputSlices(tuple(candidates), cols))
    if not is_blind(probe, x, edge_index, cols, alts, seed):
        return None
    original = dict(model.named_parameters())
    params = dict(probe.named_parameters())
    needed = list(candidates)
    for name in reversed(candidates):  # later layers first: keep the first layer's slices
        with torch.no_grad():
            params[name].copy_(original[name])
        if is_blind(probe, x, edge_index, cols, alts, seed):
            needed.remove(name)
        else:
            zero_input_slices(probe, InputSlices((name,), cols))
    return InputSlices(tuple(needed), cols)


def slices_on_graph(
    model: nn.Module, data: Any, spec: FeatureSpec, alts: Sequence[Alternative], seed: int = 0
) -> InputSlices | None:
    """:func:`find_input_slices` of the feature ``spec`` on the graph ``data`` (moved to the
    model's device); ``model`` is not modified."""
    device = next(iter(model.parameters())).device
    x, edge_index = data.x.to(device), data.edge_index.to(device)
    return find_input_slices(model, x, edge_index, spec.columns, alts, seed)


def blind_model(
    model: nn.Module, data: Any, spec: FeatureSpec, alts: Sequence[Alternative], seed: int = 0
) -> InputSlices:
    """Zero, in place, the input weights through which ``model`` reads the feature ``spec`` of
    ``data`` (:func:`find_input_slices`) and return them; a model without such weights is
    refused (:class:`~gnnaudit.errors.InvalidInputError`)."""
    slices = slices_on_graph(model, data, spec, alts, seed)
    if slices is None:
        raise InvalidInputError(
            f"blind=True: {type(model).__name__} reads the sensitive attribute {spec.name!r} "
            "through no input weight whose zeroing makes it blind to it (its first operation "
            "on x is not linear); use blind=False"
        )
    zero_input_slices(model, slices)
    logger.info("blinded %s to %r: zeroed %s", type(model).__name__, spec.name, slices)
    return slices
