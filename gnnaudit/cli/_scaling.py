"""The inputs' scale when gnnaudit trains its own model on a user's table.

A GCN fed raw columns (an income around 30,000 beside 0/1 codes) learns little more than the
majority class. So when ``gnnaudit train`` (``--graph`` / ``--nodes``) or ``gnnaudit audit
--model gcn`` (no ``--checkpoint``) trains a built-in backbone on the user's graph, every
numeric input column that is not 0/1 is standardized (z-scores, scikit-learn's
``StandardScaler`` rule: mean and population standard deviation over the **training nodes**,
1 for a constant column) unless ``--no-standardize`` or ``--standardize SCALER`` says
otherwise. The scaled graph records the inverse (``feature_mean`` / ``feature_scale``), so the
report shows values in the user's units.

**The scaler travels with the model**: its ``mean_``, ``scale_`` and ``feature_names_in_`` are
stored in ``model.ckpt`` under :data:`SCALER_KEY` (:func:`stamp_checkpoint`), and ``gnnaudit
audit --checkpoint model.ckpt`` applies it to the raw table again (:func:`checkpoint_scaler`),
as ``--standardize`` applies a user's scaler.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = [
    "CHECKPOINT_INPUTS",
    "CHECKPOINT_ROLES",
    "SCALER_KEY",
    "add_scaling_arguments",
    "wants_builtin_scaler",
    "fit_builtin_scaler",
    "scaler_payload",
    "checkpoint_scaler",
    "stamp_checkpoint",
]

#: top-level checkpoint key of the input column names (written by ``gnnaudit train``)
CHECKPOINT_INPUTS = "feature_names"
#: top-level checkpoint key of the table's column roles (written by ``gnnaudit train``)
CHECKPOINT_ROLES = "column_roles"
#: checkpoint key of the built-in scaler (``{"mean_", "scale_", "feature_names_in_"}``)
SCALER_KEY = "standardizer"


def add_scaling_arguments(group: argparse._ArgumentGroup) -> None:
    """``--standardize SCALER`` and ``--no-standardize`` (mutually exclusive)."""
    which = group.add_mutually_exclusive_group()
    which.add_argument(
        "--standardize",
        default=None,
        metavar="SCALER",
        help="a fitted scikit-learn StandardScaler saved as data: .npz or .json of mean_, "
        "scale_ (optionally feature_names_in_), e.g. np.savez('scaler.npz', mean_=s.mean_, "
        "scale_=s.scale_); a pickled scaler is never loaded. Default when gnnaudit trains its "
        "own model on your table: z-scores of the numeric non-0/1 columns, fitted on the "
        "training nodes and saved in model.ckpt (applied again with --checkpoint)",
    )
    which.add_argument(
        "--no-standardize",
        action="store_true",
        help="feed the raw values: neither the built-in scaler (when gnnaudit trains on your "
        "table) nor the one stored in a gnnaudit --checkpoint",
    )


def wants_builtin_scaler(args: argparse.Namespace) -> bool:
    """Whether a built-in model trained on ``args``' graph gets the default scaler: the
    user's own graph, no ``--standardize`` and no ``--no-standardize``."""
    from gnnaudit.cli._graph_input import uses_own_graph

    return (
        uses_own_graph(args)
        and getattr(args, "standardize", None) is None
        and not getattr(args, "no_standardize", False)
    )


def fit_builtin_scaler(data: Any) -> tuple[Any, Any, str | None]:
    """``(scaled data, scaler, description)``: ``data`` with its numeric non-0/1 input columns
    standardized on the training nodes (module doc), or ``(data, None, None)`` when every
    column is 0/1. ``data`` is not modified."""
    import numpy as np

    from gnnaudit.datasets.scaler import Standardizer

    x = data.x.detach().cpu().double().numpy()
    binary = ((x == 0) | (x == 1)).all(axis=0)
    if binary.all():
        return data, None, None
    mask = getattr(data, "train_mask", None)
    rows = np.ones(x.shape[0], dtype=bool)
    if mask is not None and bool(mask.any()):
        rows = mask.detach().cpu().numpy().astype(bool)
    cols = np.flatnonzero(~binary)
    sub = x[rows][:, cols]
    mean, std = sub.mean(axis=0), sub.std(axis=0)
    scale = np.where(std > 0, std, 1.0)
    names = [str(n) for n in (getattr(data, "feature_names", None) or [])]
    if len(names) == x.shape[1]:
        scaler = Standardizer(mean, scale, tuple(names[c] for c in cols), "the built-in scaler")
        shown = ", ".join(names[c] for c in cols[:8]) + (" ..." if cols.size > 8 else "")
    else:  # positions only: 0 / 1 for the 0/1 columns
        full_mean, full_scale = np.zeros(x.shape[1]), np.ones(x.shape[1])
        full_mean[cols], full_scale[cols] = mean, scale
        scaler = Standardizer(full_mean, full_scale, None, "the built-in scaler")
        shown = f"{cols.size} column(s)"
    text = (
        f"z-scores of the numeric input column(s) {shown}, fitted on the {int(rows.sum())} "
        "training nodes (saved in model.ckpt; --no-standardize feeds raw values)"
    )
    return scaler.apply(data), scaler, text


def scaler_payload(scaler: Any) -> dict[str, Any]:
    """The checkpoint entry of a :class:`~gnnaudit.datasets.scaler.Standardizer`."""
    names = scaler.feature_names_in_
    return {
        "mean_": [float(v) for v in scaler.mean_],
        "scale_": [float(v) for v in scaler.scale_],
        "feature_names_in_": None if names is None else [str(n) for n in names],
    }


def checkpoint_scaler(ckpt: Any, source: str) -> Any:
    """The scaler stored in a gnnaudit checkpoint ``ckpt`` (a loaded dict), or ``None``."""
    entry = ckpt.get(SCALER_KEY) if isinstance(ckpt, dict) else None
    if not isinstance(entry, dict):
        return None
    import numpy as np

    from gnnaudit.datasets.scaler import Standardizer
    from gnnaudit.errors import InvalidInputError

    try:
        mean = np.asarray(entry["mean_"], dtype=np.float64)
        scale = np.asarray(entry["scale_"], dtype=np.float64)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"{source}: its stored scaler is malformed ({exc})") from exc
    names = entry.get("feature_names_in_")
    ok = mean.ndim == 1 and mean.shape == scale.shape and bool(np.isfinite(mean).all())
    ok = ok and bool(np.isfinite(scale).all()) and bool((scale > 0).all())
    if not ok or (names is not None and len(names) != mean.size):
        raise InvalidInputError(f"{source}: its stored scaler is malformed")
    return Standardizer(mean, scale, None if names is None else tuple(map(str, names)), source)


def stamp_checkpoint(path: str, data: Any, scaler: Any = None) -> None:
    """Add the input column names, the table's column roles and the built-in ``scaler`` (when
    given) to the checkpoint ``path``, so an audit on another table names the columns that
    differ and an audit on the raw table scales it as in training."""
    names = list(getattr(data, "feature_names", None) or [])
    named = bool(names) and len(names) == int(data.x.size(1))
    if not named and scaler is None:
        return
    import torch

    from gnnaudit.safe_io import atomic_file, safe_torch_load

    ckpt = safe_torch_load(path, name="checkpoint")
    if named:
        ckpt[CHECKPOINT_INPUTS] = [str(n) for n in names]
    roles = getattr(data, "column_roles", None)
    if isinstance(roles, dict):
        ckpt[CHECKPOINT_ROLES] = {str(k): str(v) for k, v in roles.items()}
    if scaler is not None:
        ckpt[SCALER_KEY] = scaler_payload(scaler)
    with atomic_file(path, name="checkpoint", force=True) as tmp:
        torch.save(ckpt, tmp)
