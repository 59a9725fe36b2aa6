"""Input validation shared by every public entry point.

This is a leaf module (it imports only :mod:`gnnaudit.errors`), so every layer, ``graph_ops``
included, may use it. Each check raises :class:`~gnnaudit.errors.InvalidInputError` with a
message naming the argument, the bad value and what is allowed.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from gnnaudit.errors import InvalidInputError, NotFittedError

__all__ = [
    "resolve_progress",
    "MAX_SEED",
    "MAX_NUM_HOPS",
    "MAX_NUM_LAYERS",
    "MAX_HIDDEN_CHANNELS",
    "MAX_EPOCHS",
    "MAX_K",
    "MAX_LEARNING_RATE",
    "MAX_WEIGHT_DECAY",
    "MAX_NUM_CLASSES",
    "MAX_SYNTHETIC_NODES",
    "MAX_RESAMPLES",
    "check_bool",
    "check_int",
    "check_seed",
    "check_allocation",
    "memory_limit_bytes",
    "check_float",
    "as_float32",
    "check_choice",
    "check_array",
    "check_class_array",
    "check_finite_tensor",
    "check_edge_index",
    "check_fitted",
    "validate_estimator_data",
]


# ------------------------------------------------------------------ documented size bounds
# Every size-like parameter is checked against one of these (or against the data) before any
# allocation or work, so no argument can make gnnaudit hang or allocate without bound.

#: largest seed: numpy's ``RandomState`` and ``lightning.seed_everything`` accept
#: ``[0, 2**32 - 1]``; torch accepts more, but every seed gnnaudit takes also seeds numpy.
MAX_SEED = 2**32 - 1

#: largest number of kernel-similarity hops L (``num_hops``). The receptive field of L hops
#: stops growing at the graph's diameter, and the paper (and every GNN it audits) uses
#: L <= 4; each hop costs two sparse products over the whole graph and shrinks the accepted
#: feature range (``ks_input_bound`` divides by L + 1), so 256 is far past any meaningful value
#: while still finishing in bounded time.
MAX_NUM_HOPS = 256

#: largest number of message-passing layers of a :class:`~gnnaudit.training.NodeClassifier`
#: (``num_layers``). Deep-GNN work trains up to ~100 layers (GCNII 64, DeeperGCN 112) and only
#: with residual designs the backbones here lack; beyond the diameter more layers only
#: over-smooth. Each layer is a module and a k-hop subgraph level, so the bound is 256.
MAX_NUM_LAYERS = 256

#: largest hidden width of a NodeClassifier (``hidden_channels``): 2**16. Its weights also
#: count towards ``gnnaudit.training.MAX_MODEL_WEIGHTS`` (10^8), checked before allocation.
MAX_HIDDEN_CHANNELS = 65_536

#: largest number of training / fine-tuning epochs. Full-batch GNN training converges in a few
#: hundred epochs (the papers use 200-1000); 10^5 epochs is two orders of magnitude past that
#: and still a bounded run.
MAX_EPOCHS = 100_000

#: largest ``k`` of a top-k request (evidences per query, pairs, counterfactuals). The search
#: caps k at the number of candidates anyway; 10^6 per query is already a 12 MB result row
#: per query, and beyond it a request is a typo, not an audit.
MAX_K = 1_000_000

#: largest Adam learning rate: Adam moves each weight by about ``lr`` per step, so a step of
#: 10 already exceeds every weight scale a GNN uses; larger values can only diverge (training
#: also stops with an error on non-finite loss or weights, whatever the rate).
MAX_LEARNING_RATE = 10.0

#: largest number of classes of a model (``out_channels``, ``--num-classes``): node
#: classification benchmarks have at most a few hundred (ogbn-papers100M: 172); 10^6 logits
#: per node would already be 4 MB per node.
MAX_NUM_CLASSES = 1_000_000

#: largest Adam weight decay (an L2 coefficient): 1 already outweighs every classification
#: loss (the usual value is 5e-4); far larger values overflow float32 inside the optimiser.
MAX_WEIGHT_DECAY = 1.0

#: largest synthetic graph (``num_nodes`` of ``synthetic_credit_graph`` / ``--num-nodes``):
#: 10^7 nodes take about 2 GB of features, edges and neighbour lists.
MAX_SYNTHETIC_NODES = 10_000_000

#: largest number of bootstrap resamples / permutations (``n_boot``, ``n_perm``): the
#: Monte-Carlo error of an interval or p-value shrinks as 1/sqrt(B), so 10^6 resamples are
#: already 0.1% precise; more only costs time (and a (B x groups) array).
MAX_RESAMPLES = 1_000_000

#: memory limit used when the machine's physical memory cannot be read
_FALLBACK_MEMORY_BYTES = 2**40


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a Python ``bool`` if it is ``True`` or ``False`` (a numpy bool included);
    anything else, ``0`` / ``1`` and ``None`` among them, is refused."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidInputError(f"{name} must be True or False, got {_short(value)}")
    return bool(value)


def check_int(
    name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Return ``value`` as ``int`` if it is an integer within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInputError(f"{name} must be an integer, got {_short(value)}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise InvalidInputError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidInputError(f"{name} must be <= {maximum}, got {value}")
    return int(value)


def check_seed(name: str, value: Any) -> int:
    """``value`` as an ``int`` seed in ``[0, MAX_SEED]`` (numpy's and Lightning's range)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInputError(f"{name} must be an integer seed, got {_short(value)}")
    if not 0 <= int(value) <= MAX_SEED:
        raise InvalidInputError(
            f"{name} must be a seed in [0, 2**32 - 1 = {MAX_SEED}] (numpy and Lightning's "
            f"range), got {int(value)}"
        )
    return int(value)


def memory_limit_bytes() -> int:
    """The most bytes one allocation may take: the machine's physical memory (``os.sysconf``;
    2**40 where it cannot be read). No single array larger than the whole memory can fit."""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return _FALLBACK_MEMORY_BYTES
    total = int(pages) * int(page_size)
    return total if total > 0 else _FALLBACK_MEMORY_BYTES


def _bytes_text(n_bytes: float) -> str:
    for unit, size in (
        ("PiB", 2**50),
        ("TiB", 2**40),
        ("GiB", 2**30),
        ("MiB", 2**20),
        ("KiB", 2**10),
    ):
        if n_bytes >= size:
            return f"{n_bytes / size:.3g} {unit}"
    return f"{n_bytes:.0f} bytes"


def check_allocation(name: str, n_bytes: float, what: str, *, limit: int | None = None) -> None:
    """Refuse, before allocating, a request that needs ``n_bytes`` (for ``what``, e.g.
    ``"the (queries x k) evidence arrays"``) when that exceeds ``limit`` (default
    :func:`memory_limit_bytes`, the machine's physical memory); the
    :class:`InvalidInputError` names ``name`` (the argument that sized it) and both figures."""
    cap = memory_limit_bytes() if limit is None else int(limit)
    if not n_bytes <= cap:  # also refuses NaN
        raise InvalidInputError(
            f"{name}: {what} would need {_bytes_text(float(n_bytes))} ({float(n_bytes):.3g} "
            f"bytes) but at most {_bytes_text(cap)} can be allocated on this machine (its "
            f"physical memory); lower {name}"
        )


def check_float(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    inclusive: tuple[bool, bool] = (True, True),
) -> float:
    """Return ``value`` as a finite ``float`` within the given bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidInputError(f"{name} must be a real number, got {_short(value)}")
    value = float(value)
    if not np.isfinite(value):
        raise InvalidInputError(f"{name} must be finite, got {value}")
    lo_inc, hi_inc = inclusive
    if minimum is not None and (value < minimum or (not lo_inc and value == minimum)):
        op = ">=" if lo_inc else ">"
        raise InvalidInputError(f"{name} must be {op} {minimum}, got {value}")
    if maximum is not None and (value > maximum or (not hi_inc and value == maximum)):
        op = "<=" if hi_inc else "<"
        raise InvalidInputError(f"{name} must be {op} {maximum}, got {value}")
    return float(value)


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise InvalidInputError(f"{name} must be one of {allowed}; got {_short(value)}")
    return value


def check_array(
    name: str,
    value: Any,
    *,
    ndim: int | tuple[int, ...] | None = 2,
    dtype: Any = np.float64,
    finite: bool = True,
    min_rows: int = 1,
    copy: bool = False,
) -> np.ndarray:
    """Convert ``value`` to a numpy array and check dimensions, row count and finiteness.

    ``dtype=None`` keeps the input dtype. Torch tensors are accepted (moved to CPU).
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    try:
        arr = np.array(value, dtype=dtype, copy=copy) if copy else np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"{name} must be array-like of numbers, got {type(value).__name__}: {exc}"
        ) from exc
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            raise InvalidInputError(
                f"{name} must have {' or '.join(map(str, allowed))} dimension(s), "
                f"got shape {arr.shape}"
            )
    if arr.ndim >= 1 and arr.shape[0] < min_rows:
        raise InvalidInputError(f"{name} must have at least {min_rows} row(s), got {arr.shape[0]}")
    if finite and arr.dtype.kind in "fc" and not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise InvalidInputError(
            f"{name} must be finite (no NaN or inf); found {arr[tuple(bad)]} at index {tuple(bad.tolist())}"
        )
    return arr


def as_float32(name: str, x: Any, *, columns: Any = None) -> np.ndarray:
    """``x`` (finite numbers) cast to float32, refusing values beyond float32's range.

    A finite float64 value above ``finfo(float32).max`` (3.4e38) would silently become inf in
    the cast; instead :class:`InvalidInputError` names ``name`` (the file or argument), the
    largest magnitude, where it is (row, and the column name when ``columns`` is given) and
    what to do.
    """
    arr = np.asarray(x)
    if arr.dtype == np.float32:
        return arr
    limit = float(np.finfo(np.float32).max)
    if arr.size and arr.dtype.kind == "f":
        mags = np.abs(arr)
        flat = int(np.argmax(mags))
        largest = float(mags.reshape(-1)[flat])
        if largest > limit:
            where = np.unravel_index(flat, arr.shape)
            place = f"row {int(where[0])}"
            if arr.ndim == 2:
                col = int(where[1])
                label = repr(columns[col]) if columns is not None else str(col)
                place += f", column {label}"
            raise InvalidInputError(
                f"{name}: values up to {largest:.6g} in magnitude (at {place}) overflow float32 "
                f"(largest {limit:.4g}), the type gnnaudit casts features to; rescale the "
                "features (the file itself is finite)"
            )
    return arr.astype(np.float32)


def check_class_array(name: str, value: Any, *, ndim: int = 1, min_rows: int = 0) -> np.ndarray:
    """``value`` as an int64 array of class ids (or group codes).

    Integer and boolean input is accepted as is; floating input must hold whole numbers (a
    probability or a fractional label is refused instead of being truncated).
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    arr = check_array(name, value, ndim=ndim, dtype=None, min_rows=min_rows)
    if arr.dtype == bool:
        return arr.astype(np.int64)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind != "f":
        raise InvalidInputError(f"{name} must hold integer class ids, got dtype {arr.dtype}")
    frac = arr != np.round(arr)
    if frac.any():
        bad = np.argwhere(frac)[0]
        raise InvalidInputError(
            f"{name} must hold whole-number class ids, got {arr[tuple(bad)]!r} at index "
            f"{tuple(bad.tolist())} (pass predicted classes, not probabilities)"
        )
    return arr.astype(np.int64)


def check_finite_tensor(name: str, tensor: Any) -> None:
    """Raise if a torch tensor holds NaN or inf."""
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise InvalidInputError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise InvalidInputError(f"{name} must be finite (no NaN or inf)")


def check_edge_index(name: str, edge_index: Any, num_nodes: int) -> Any:
    """Check a PyG ``edge_index`` (LongTensor of shape ``[2, E]`` with ids in ``[0, num_nodes)``)."""
    import torch

    if not isinstance(edge_index, torch.Tensor):
        edge_index = torch.as_tensor(np.asarray(edge_index))
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise InvalidInputError(f"{name} must have shape [2, E], got {tuple(edge_index.shape)}")
    if edge_index.is_floating_point() or edge_index.dtype == torch.bool:
        raise InvalidInputError(f"{name} must hold integer node ids, got dtype {edge_index.dtype}")
    edge_index = edge_index.long()
    if edge_index.numel():
        lo, hi = int(edge_index.min()), int(edge_index.max())
        if lo < 0 or hi >= num_nodes:
            raise InvalidInputError(
                f"{name} holds node ids in [{lo}, {hi}] but must lie in [0, {num_nodes - 1}]"
            )
    return edge_index


def check_device(name: str, device: Any, auto: Any = None) -> Any:
    """``device`` as a ``torch.device``: ``"auto"`` / None give ``auto`` (a device or None),
    otherwise a device string / ``torch.device``; an unknown device, or CUDA where none
    exists, raises :class:`InvalidInputError` naming ``name``."""
    import torch

    if device is None or (isinstance(device, str) and device == "auto"):
        return None if auto is None else torch.device(auto)
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InvalidInputError(
            f"{name} must be 'auto', 'cpu', 'cuda', 'cuda:N' or a torch.device, got "
            f"{device!r}: {exc}"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError(f"{name}={device!r} was requested but CUDA is not available")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise InvalidInputError(
            f"{name}={device!r}: no such CUDA device (torch sees {torch.cuda.device_count()}: "
            f"cuda:0 to cuda:{torch.cuda.device_count() - 1})"
        )
    return dev


def check_fitted(estimator: Any, attributes: str | Iterable[str]) -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has every attribute in ``attributes``."""
    if isinstance(attributes, str):
        attributes = (attributes,)
    missing = [a for a in attributes if getattr(estimator, a, None) is None]
    if missing:
        raise NotFittedError(
            f"{type(estimator).__name__} is not fitted yet (missing {', '.join(missing)}); "
            "call fit first"
        )


def validate_estimator_data(
    estimator: Any,
    X: Any,
    *,
    reset: bool = True,
    name: str = "X",
    min_samples: int = 1,
    dtype: Any = np.float64,
) -> np.ndarray:
    """Validate ``X`` for a scikit-learn style ``estimator`` through scikit-learn's own checks.

    Runs :func:`sklearn.utils.validation.validate_data` (dense only, finite, 2-D, at least
    ``min_samples`` rows), so sparse, complex, object and ragged input get scikit-learn's
    standard messages, re-raised as :class:`~gnnaudit.errors.InvalidInputError` (a
    ``ValueError``) prefixed with ``name``. ``reset=True`` (in ``fit``) records
    ``n_features_in_`` and, for a DataFrame, ``feature_names_in_``; ``reset=False`` (in
    ``predict`` / ``explain``) checks ``X`` against them. scikit-learn is imported lazily.
    """
    from sklearn.utils.validation import validate_data

    try:
        checked = validate_data(
            estimator,
            X,
            reset=reset,
            accept_sparse=False,
            dtype=dtype,
            ensure_all_finite=True,
            ensure_min_samples=min_samples,
        )
    except TypeError as exc:
        # scikit-learn raises TypeError for sparse input; keep its wording, our error class
        raise InvalidInputError(f"{name}: {exc}") from exc
    except ValueError as exc:
        if isinstance(exc, InvalidInputError):
            raise
        raise InvalidInputError(f"{name}: {exc}") from exc
    return np.asarray(checked)


def resolve_progress(name: str, value: Any) -> bool:
    """``progress=``: ``True`` / ``False`` as given; ``None`` (the default of the long-running
    entry points) shows bars only when standard error is a terminal, so logs and pipes get no
    escape sequences, in Python as on the command line."""
    if value is None:
        import sys

        isatty = getattr(sys.stderr, "isatty", None)
        try:
            return bool(isatty()) if callable(isatty) else False
        except (OSError, ValueError):  # a closed or detached stream
            return False
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be True, False or None (auto), got {_short(value)}")
    return value
