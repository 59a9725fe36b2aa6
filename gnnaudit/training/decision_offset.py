r"""Decision offset: a fine-tuned binary classifier keeps the share of class-1 decisions of the
model it started from.

A fairness fine-tune moves the scores. Its AUROC budget bounds the *ranking*, not the decision
threshold, and the covariance terms of :class:`~gnnaudit.training.FairFinetune` are lowest when
every score sits on one side of it: the argmax decisions of a candidate that ranks as well as the
model as given may grant class 1 to far fewer nodes (bail, NIFTY's split, raw features: validation
balanced accuracy 0.89 -> 0.56 at a higher AUROC; ``benchmarks/results/fair_gnn.md``). Its parity
gaps then fall because it decides almost nothing, not because it decides fairly.

For a two-class model with margin :math:`m_v = z_{v,1} - z_{v,0}` (the logits of node
:math:`v`; the argmax decision is :math:`\mathbb 1[m_v > 0]`), the *offset* of a candidate is
the constant :math:`\delta` that gives it the reference share :math:`r` of class-1 decisions on
the nodes :math:`F` (:func:`~gnnaudit.training.fair_selection.label_free_nodes`, no test node):
with :math:`m_{(1)} \le \dots \le m_{(n)}` the margins on :math:`F` and :math:`k =
\operatorname{round}(r\,n)`,

.. math::

    \delta = -\tfrac12\bigl(m_{(n-k)} + m_{(n-k+1)}\bigr), \qquad
    \hat y_v = \mathbb 1[m_v + \delta > 0],

so exactly :math:`k` nodes of :math:`F` are decided 1 when the two order statistics differ
(:func:`rate_offset`; :math:`k = 0` or :math:`n`: one unit beyond the extreme margin). A constant
shift of the margin leaves every ranking figure (AUROC) unchanged and moves only the threshold:
the remedy may change *who* gets class 1, not *how many*.

The offset is folded into the model's weights, so the returned module is the user's class with
its own ``state_dict`` keys: :func:`find_output_bias` looks for a parameter of shape ``(2,)``
(the output layer's bias; last registered first) such that adding :math:`e` to its entry 1
shifts every node's margin by exactly :math:`e` in eval mode (checked with one forward pass per
tried parameter, :math:`e = 1`); :func:`fold_offset` adds :math:`\delta` there. Any head that
adds its bias to the logits qualifies (``Linear``, PyG convolutions with ``bias=True``, a
``log_softmax`` after them); a model without such a bias keeps its argmax threshold (offset 0).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from gnnaudit._validation import check_float
from gnnaudit.errors import InvalidInputError

__all__ = [
    "rate_offset",
    "rate_threshold",
    "eval_logits",
    "find_output_bias",
    "fold_offset",
    "margins",
]

#: margins of the checked forward pass must move by the test shift within this (float32 logits)
SHIFT_ATOL = 1e-4


def rate_offset(margin: np.ndarray, rate: float) -> float:
    r""":math:`\delta` of the module docstring: the shift that decides a share ``rate`` of the
    ``margin`` values positive (``margin + delta > 0``); 0.0 for an empty array."""
    rate = check_float("rate", rate, minimum=0.0, maximum=1.0)
    values = np.asarray(margin, dtype=np.float64).ravel()
    if values.size == 0:
        return 0.0
    if not np.isfinite(values).all():
        raise InvalidInputError("margin must be finite (the model's logits hold NaN or inf)")
    return -float(rate_threshold(torch.from_numpy(values), rate))


def rate_threshold(margin: torch.Tensor, rate: float) -> torch.Tensor:
    r""":math:`-\delta` for a non-empty 1-D ``margin`` (module docstring): the midpoint of the
    order statistics :math:`m_{(n-k)}` and :math:`m_{(n-k+1)}`, :math:`k = \operatorname{round}
    (r\,n)` (one unit beyond the extreme margin for :math:`k = 0` or :math:`n`); differentiable
    in ``margin`` through those order statistics (the anchored covariance terms of
    :mod:`~gnnaudit.training.parity_surrogate` train through it)."""
    ordered = torch.sort(margin.reshape(-1)).values
    n = int(ordered.numel())
    k = int(round(rate * n))
    if k == 0:
        return ordered[-1] + 1.0
    if k == n:
        return ordered[0] - 1.0
    low, high = ordered[n - k - 1], ordered[n - k]
    middle = (low + high) / 2.0
    # two margins one float apart have no float strictly between them: their midpoint rounds to
    # one of them, and at the upper one ``margin - threshold > 0`` would fail; the lower one
    # then separates them (it decides itself negative and the upper margin positive)
    return torch.where(middle < high, middle, low)


@torch.no_grad()
def eval_logits(model: nn.Module, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """``model(x, edge_index)`` in eval mode (the model's own mode restored)."""
    was_training = model.training
    model.eval()
    try:
        return model(x, edge_index)
    finally:
        model.train(was_training)


@torch.no_grad()
def margins(model: nn.Module, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """Class-1 minus class-0 logit of every node (eval mode restored to the model's own)."""
    logits = eval_logits(model, x, edge_index)
    if logits.dim() != 2 or logits.size(1) != 2:
        raise InvalidInputError(
            f"a decision offset needs a two-class model, got outputs of shape {tuple(logits.shape)}"
        )
    return (logits[:, 1] - logits[:, 0]).float()


@torch.no_grad()
def find_output_bias(model: nn.Module, data: Any) -> str | None:
    """The name of the parameter through which a constant shifts ``model``'s class-1 margin (module
    docstring), or None (not a two-class model, or no such bias)."""
    device = next(iter(model.parameters())).device
    x, edge_index = data.x.to(device), data.edge_index.to(device)
    try:
        base = margins(model, x, edge_index)
    except InvalidInputError:
        return None
    named = [(n, p) for n, p in model.named_parameters() if tuple(p.shape) == (2,)]
    for name, param in reversed(named):
        kept = param[1].clone()  # restored bit for bit: b + 1 - 1 need not be b in float32
        param[1] += 1.0
        try:
            moved = margins(model, x, edge_index) - base
        finally:
            param[1] = kept
        if bool(torch.all(torch.abs(moved - 1.0) <= SHIFT_ATOL)):
            return name
    return None


@torch.no_grad()
def fold_offset(model: nn.Module, bias: str, offset: float) -> None:
    """Add ``offset`` to the class-1 entry of ``model``'s parameter ``bias`` (in place)."""
    if not math.isfinite(offset):
        raise InvalidInputError(f"offset must be finite, got {offset!r}")
    dict(model.named_parameters())[bias][1] += offset
