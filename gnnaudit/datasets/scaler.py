"""A saved scikit-learn ``StandardScaler`` applied to a graph's features, read as data.

A scaler pickled with ``pickle`` / ``joblib`` is never loaded (gnnaudit never unpickles a
user's file). Save its parameters instead, from the fitted scaler ``s``::

    np.savez("scaler.npz", mean_=s.mean_, scale_=s.scale_)
    # optional, checked against the graph's columns and used to pick them by name:
    np.savez("scaler.npz", mean_=s.mean_, scale_=s.scale_,
             feature_names_in_=s.feature_names_in_.astype(str))

or a JSON object ``{"mean_": [...], "scale_": [...], "feature_names_in_": [...]}``.

The transform is scikit-learn's ``x' = (x - mean_) / scale_``. With ``feature_names_in_`` it
applies to those columns of ``data.feature_names`` (each must exist; other columns, such as
one-hot codes the scaler never saw, are left as they are); without it ``mean_`` and
``scale_`` must have one entry per feature.

The scaled graph records the transform as ``data.feature_mean`` / ``data.feature_scale`` (one
entry per feature, ``raw = x * scale + mean``; 0 / 1 for the columns left as they are;
composed with those already there), so reports can show values in the user's units
(:mod:`gnnaudit.audit.fairness.feature_units`). :func:`recorded_inverse` reads that record
back and :func:`to_raw_units` applies it to model inputs (the evidence pairs, the embedding
audit's counterparts and tree).
"""

from __future__ import annotations

import copy
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnaudit.datasets.columns import name_list
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import load_npz, read_json

__all__ = ["Standardizer", "load_standardizer", "recorded_inverse", "to_raw_units"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Standardizer:
    """``mean_``, ``scale_`` and optionally ``feature_names_in_`` of a fitted scaler."""

    mean_: np.ndarray
    scale_: np.ndarray
    feature_names_in_: tuple[str, ...] | None = None
    source: str = "scaler"

    def columns(self, feature_names: list[str], num_features: int) -> np.ndarray:
        """Positions in the graph's features of the scaler's columns."""
        if self.feature_names_in_ is None:
            if self.mean_.size != num_features:
                raise InvalidInputError(
                    f"{self.source}: the scaler has {self.mean_.size} columns but the graph has "
                    f"{num_features} features; save feature_names_in_ with it to scale some "
                    "columns by name"
                )
            return np.arange(num_features)
        missing = [n for n in self.feature_names_in_ if n not in feature_names]
        if missing:
            raise InvalidInputError(
                f"{self.source}: feature(s) {name_list(missing)} of the scaler are not features "
                f"of the graph (features: {name_list(feature_names)})"
            )
        return np.array([feature_names.index(n) for n in self.feature_names_in_], dtype=np.int64)

    def apply(self, data: Any) -> Any:
        """A shallow copy of ``data`` with the scaled features (``data`` is not modified) and
        the inverse transform in ``feature_mean`` / ``feature_scale`` (module doc)."""
        x = data.x
        d = int(x.size(1))
        names = [str(f) for f in (getattr(data, "feature_names", None) or [])]
        positions = self.columns(names, d)
        cols = torch.from_numpy(positions).to(x.device)
        mean = torch.as_tensor(self.mean_, dtype=x.dtype, device=x.device)
        scale = torch.as_tensor(self.scale_, dtype=x.dtype, device=x.device)
        scaled = x.clone()
        scaled[:, cols] = (x[:, cols] - mean) / scale
        out = copy.copy(data)
        out.x = scaled
        out.feature_mean, out.feature_scale = self._inverse(data, d, positions)
        return out

    def _inverse(self, data: Any, d: int, positions: np.ndarray) -> tuple[list, list]:
        """``(mean, scale)`` from the scaled inputs to the raw values: this scaler's inverse
        followed by the one ``data`` already records (when it fits ``d`` columns)."""
        mean, scale = np.zeros(d), np.ones(d)
        known_mean = getattr(data, "feature_mean", None)
        known_scale = getattr(data, "feature_scale", None)
        if known_mean is not None and known_scale is not None and len(known_mean) == d:
            mean = np.asarray(known_mean, dtype=np.float64).copy()
            scale = np.asarray(known_scale, dtype=np.float64).copy()
        mean[positions] += self.mean_ * scale[positions]
        scale[positions] *= self.scale_
        return mean.tolist(), scale.tolist()


def _vector(source: str, key: str, value: Any) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{source}: {key!r} must be numbers ({exc})") from exc
    if arr.ndim != 1 or arr.size == 0 or not np.isfinite(arr).all():
        raise InvalidInputError(
            f"{source}: {key!r} must be a non-empty 1-D array of finite numbers"
        )
    return arr


def load_standardizer(path: str | os.PathLike[str], name: str = "standardize") -> Standardizer:
    """Read a scaler's parameters from an ``.npz`` or ``.json`` file (module doc)."""
    p = Path(path)
    source = f"{name}: {str(p)!r}"
    suffix = p.suffix.lower()
    if suffix == ".npz":
        content: Any = load_npz(name, p)
    elif suffix == ".json":
        content = read_json(name, p)
    else:
        raise InvalidInputError(
            f"{source} must be an .npz or .json file of the scaler's mean_ and scale_ (a pickled "
            "or joblib scaler is never loaded: save np.savez(path, mean_=s.mean_, "
            "scale_=s.scale_))"
        )
    if not isinstance(content, dict) or "mean_" not in content or "scale_" not in content:
        keys = sorted(content) if isinstance(content, dict) else type(content).__name__
        raise InvalidInputError(f"{source} must hold mean_ and scale_ (has {keys})")
    mean, scale = (
        _vector(source, "mean_", content["mean_"]),
        _vector(source, "scale_", content["scale_"]),
    )
    if mean.shape != scale.shape:
        raise InvalidInputError(f"{source}: mean_ has {mean.size} entries, scale_ {scale.size}")
    if (scale <= 0).any():
        raise InvalidInputError(
            f"{source}: scale_ must be positive (scikit-learn stores 1 for constant columns)"
        )
    names = content.get("feature_names_in_")
    if names is not None:
        names = np.asarray(names)
        if names.ndim != 1 or names.dtype.kind not in "US" or names.size != mean.size:
            raise InvalidInputError(
                f"{source}: feature_names_in_ must be {mean.size} strings (save "
                "s.feature_names_in_.astype(str))"
            )
        names = tuple(str(n) for n in names)
    return Standardizer(mean, scale, names, source)


def _record(data: Any, name: str, d: int) -> np.ndarray | None:
    value = getattr(data, name, None)
    if value is None:
        return None
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"data.{name} must be {d} numbers ({exc})") from exc
    if arr.ndim != 1 or arr.size != d:
        logger.warning(
            "data.%s has shape %s for %d features: ignored (values shown as model inputs)",
            name,
            arr.shape,
            d,
        )
        return None
    if not np.isfinite(arr).all():
        raise InvalidInputError(f"data.{name} holds NaN or inf values")
    return arr


def recorded_inverse(data: Any, num_features: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mean, scale)``, ``(d,)`` each, of the standardisation ``data`` records
    (``feature_mean`` / ``feature_scale``, module doc: ``raw = x * scale + mean``), or None
    when it records none that fits ``num_features`` columns (a misfit is logged and ignored).
    :class:`InvalidInputError` for NaN / inf entries or a scale that is not positive."""
    mean = _record(data, "feature_mean", num_features)
    scale = _record(data, "feature_scale", num_features)
    if (mean is None) != (scale is None):
        logger.warning("data carries only one of feature_mean / feature_scale: ignored")
    if mean is None or scale is None:
        return None
    if (scale <= 0).any():
        raise InvalidInputError(f"data.feature_scale must be positive, got {float(scale.min())}")
    return mean, scale


def to_raw_units(
    x: np.ndarray, mean: np.ndarray, scale: np.ndarray, magnitude: np.ndarray | None = None
) -> np.ndarray:
    """Model inputs ``x`` ``(m, d)`` in the user's units, ``x * scale + mean``, each column
    rounded to ``1e-6`` of its largest raw magnitude (float32 inputs carry about 7 digits: this
    turns a ``28499.998`` back into ``28500``). ``magnitude``: ``(d,)`` largest absolute model
    input of each column (default: over ``x``'s rows)."""
    x = np.asarray(x, dtype=np.float64)
    raw = x * scale + mean
    if magnitude is None:
        magnitude = np.abs(x).max(axis=0) if x.shape[0] else np.zeros(x.shape[1])
    for j in range(raw.shape[1]):
        top = float(magnitude[j]) * float(scale[j]) + abs(float(mean[j]))
        if top > 0:
            raw[:, j] = np.round(raw[:, j], 6 - math.ceil(math.log10(top)))
    return raw + 0.0  # + 0.0: no "-0"
