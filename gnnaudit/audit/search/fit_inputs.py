"""What :meth:`CounterfactualEvidence.fit <gnnaudit.audit.CounterfactualEvidence.fit>` reads:
the test nodes, the predictions (given, or from the user's model), the KS embedding (computed,
or reused from ``data.ks``) and its unit rows, each validated into plain arrays."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from gnnaudit._validation import check_finite_tensor
from gnnaudit.errors import InvalidInputError, note_model_error
from gnnaudit.graph_ops.neighbourhood import KSEmbedding, ks_input_bound, rescale_rows

__all__ = [
    "node_array",
    "resolve_mask",
    "model_predictions",
    "check_predictions",
    "precision_for_ks",
    "stored_ks",
    "unit_rows",
]

logger = logging.getLogger(__name__)


def node_array(name: str, value: Any) -> np.ndarray:
    """``value`` (an int, a sequence or a tensor of ints) as a 1-D int64 array."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        if (
            arr.dtype.kind == "f"
            and arr.size
            and np.all(np.isfinite(arr))
            and np.all(arr == np.round(arr))
        ):
            arr = arr.astype(np.int64)
        else:
            raise InvalidInputError(f"{name} must be integer node ids, got {value!r:.80}")
    return arr.astype(np.int64).reshape(-1)


def precision_for_ks(x: torch.Tensor, num_hops: int) -> torch.Tensor:
    """``x``, or ``x`` in float64 when its magnitude would overflow ``x^agg`` in its own
    float dtype (:func:`~gnnaudit.graph_ops.neighbourhood.ks_input_bound`): the search
    needs only cosines, and float64 holds every float32 / float16 value exactly."""
    if not x.is_floating_point() or x.dtype == torch.float64:
        return x
    largest = float(torch.linalg.vector_norm(x.detach(), ord=float("inf")))
    if largest <= ks_input_bound(x.dtype, num_hops) or largest != largest:  # NaN: checked later
        return x
    logger.info(
        "data.x (%s) has entries up to %.3g: the KS embedding would overflow %s, computing "
        "it in float64",
        x.dtype,
        largest,
        x.dtype,
    )
    return x.to(torch.float64)


def stored_ks(data: Any, n: int, num_hops: int, alpha: float) -> torch.Tensor | None:
    """``data.ks`` when the :class:`~gnnaudit.graph_ops.KSEmbedding` transform wrote it
    with these parameters (validated), else None (logged at INFO when ``data.ks`` exists
    but cannot be used)."""
    if getattr(data, "ks", None) is None:
        return None
    recorded = KSEmbedding.recorded_params(data)
    if recorded != (num_hops, alpha):
        logger.info(
            "data.ks was written with %s, not num_hops=%d, alpha=%s: recomputing the KS embedding",
            "unrecorded parameters"
            if recorded is None
            else f"num_hops={recorded[0]}, alpha={recorded[1]}",
            num_hops,
            alpha,
        )
        return None
    ks = data.ks
    if not isinstance(ks, torch.Tensor):
        ks = torch.as_tensor(np.asarray(ks))
    if ks.dim() != 2 or ks.size(0) != n or not ks.is_floating_point():
        raise InvalidInputError(
            f"data.ks (written by KSEmbedding) must be a float tensor of shape [{n}, d], got "
            f"{ks.dtype} {tuple(ks.shape)}"
        )
    check_finite_tensor("data.ks", ks)
    logger.info("reusing data.ks written by KSEmbedding(num_hops=%d, alpha=%s)", num_hops, alpha)
    return ks.detach().cpu()


def resolve_mask(
    mask: Any, data: Any, n: int, *, name: str = "mask", purpose: str = "the search"
) -> np.ndarray:
    """Ascending ids of the selected nodes, the one rule of the search and the audit:
    ``mask`` (a boolean mask of length ``n`` or integer node ids), else ``data.mask`` (an
    explicit audit selection, e.g. ``load_graph(mask_column=...)``), else ``data.test_mask``,
    else every node. An empty selection raises, naming ``name`` and what needs a node
    (``purpose``)."""
    if mask is None:  # data.mask (an explicit audit selection) wins over the test split
        for attr in ("mask", "test_mask"):
            value = getattr(data, attr, None)
            if value is not None:
                mask, name = value, f"data.{attr}"
                break
        else:
            return np.arange(n, dtype=np.int64)
    if isinstance(mask, torch.Tensor):
        mask = mask.detach().cpu().numpy()
    arr = np.asarray(mask)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise InvalidInputError(
                f"{name} as a boolean mask must have shape ({n},), got {arr.shape}"
            )
        ids = np.flatnonzero(arr).astype(np.int64)
    else:
        ids = np.unique(node_array(name, arr))
        if ids.size and (ids[0] < 0 or ids[-1] >= n):
            raise InvalidInputError(
                f"{name} holds node ids in [{ids[0]}, {ids[-1]}] but must lie in [0, {n - 1}]"
            )
    if ids.size == 0:
        raise InvalidInputError(f"{name} selects no node; {purpose} needs at least one")
    return ids


def model_predictions(model: Any, x: torch.Tensor, edge_index: torch.Tensor, n: int) -> np.ndarray:
    """Predicted class of every node from ``model(x, edge_index)`` (eval mode, no gradients,
    the model's mode restored). An exception raised by the model propagates as itself, with a
    note naming the stage (:func:`~gnnaudit.errors.note_model_error`)."""
    if not callable(model):
        raise InvalidInputError(
            f"model must be a callable (x, edge_index) -> logits, got {type(model).__name__}"
        )
    was_training = getattr(model, "training", None)
    if hasattr(model, "eval"):
        model.eval()
    try:
        with torch.no_grad():
            out = model(x, edge_index)
    except Exception as exc:  # the user's model: its own error, marked with the stage
        note_model_error(exc, "the evidence search's predictions (CounterfactualEvidence.fit)")
        raise
    finally:
        if was_training and hasattr(model, "train"):
            model.train(True)
    if not isinstance(out, torch.Tensor):
        raise InvalidInputError(f"model must return a tensor of logits, got {type(out).__name__}")
    out = out.detach().cpu()
    if out.dim() != 2 or out.size(0) != n:
        raise InvalidInputError(
            f"model must return logits of shape [{n}, num_classes], got {tuple(out.shape)}"
        )
    if out.is_floating_point() and not bool(torch.isfinite(out).all()):
        raise InvalidInputError("model returned NaN or inf logits")
    return out.argmax(dim=1).numpy().astype(np.int64)


def check_predictions(predictions: Any, n: int, node_ids: np.ndarray) -> np.ndarray:
    """The predicted class of each test node ``node_ids`` from ``predictions``: (n,) or
    (len(node_ids),) class ids, or (n, C) scores (argmax)."""
    if isinstance(predictions, torch.Tensor):
        predictions = predictions.detach().cpu().numpy()
    arr = np.asarray(predictions)
    if arr.ndim == 2:
        if arr.dtype.kind not in "fiu" or (arr.dtype.kind == "f" and not np.isfinite(arr).all()):
            raise InvalidInputError("predictions given as scores must be finite numbers")
        if arr.shape[0] != n:
            raise InvalidInputError(
                f"predictions as scores must have shape ({n}, num_classes), got {arr.shape}"
            )
        arr = arr.argmax(axis=1)
    elif arr.ndim != 1:
        raise InvalidInputError(
            f"predictions must have shape ({n},), ({node_ids.size},) or ({n}, C), got {arr.shape}"
        )
    arr = node_array("predictions", arr) if arr.size else arr.astype(np.int64)
    if arr.shape[0] == n:
        return arr[node_ids]
    if arr.shape[0] == node_ids.size:
        return arr
    raise InvalidInputError(
        f"predictions must have length {n} (all nodes) or {node_ids.size} (test nodes), "
        f"got {arr.shape[0]}"
    )


def unit_rows(ks: torch.Tensor, node_ids: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """Rows ``node_ids`` of ``ks`` divided by their norm (zero rows stay 0), as float32.

    Computed in float64 by blocks of ``chunk`` rows: memory is the float32 output plus one
    float64 block.
    """
    out = np.empty((node_ids.size, ks.size(1)), dtype=np.float32)
    for start in range(0, node_ids.size, chunk):
        block = ks[torch.from_numpy(node_ids[start : start + chunk])].to(torch.float64)
        block = rescale_rows(block)  # exact; norms of rows of any magnitude stay finite
        norm = torch.linalg.vector_norm(block, dim=1, keepdim=True)
        block = torch.where(norm > 0, block / norm.clamp_min(1e-300), 0.0)
        out[start : start + chunk] = block.numpy()
    return out
