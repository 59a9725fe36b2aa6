r"""Features as intervention targets (flat: three subpackages and training use them): resolve
a feature, detect its kind, list its counterfactual values, and code its values into categories.

A *feature* is a column name of ``data.feature_names``, a column index, or a sequence of names
/ indices forming a one-hot group. Its **kind** decides the intervention (``kind="auto"``):

==============  =================================================================================
``binary``      exactly two distinct values over all nodes: flipped to the other value.
``categorical`` an integer-valued column with 3 to ``max_categories`` (default
                :data:`MAX_CATEGORIES` = 10) distinct values: moved to **each** other value.
``one-hot``     a group of 0/1 columns with at most one 1 per row (a row of zeros is its own
                "none" category): moved to each other category.
``continuous``  every other numeric column (including standardised counts, whose values are not
                integers): the opposite-quantile swap below.
==============  =================================================================================

Opposite-quantile swap (continuous features). With the empirical distribution :math:`F` of the
column over **all** nodes and mid-ranks for ties,

.. math::

    x \mapsto F^{-1}\bigl(1 - F(x)\bigr), \qquad
    F(x) = \frac{\#\{u : x_u < x\} + \tfrac12 \#\{u : x_u = x\}}{n}, \qquad
    F^{-1}(q) = x_{(\lceil q n \rceil)},

the value at the mirrored rank (:math:`x_{(i)}` is the i-th smallest value). It is
scale-free (only ranks matter, so a skewed income and a symmetric age are moved comparably), it
keeps every value inside the observed range (no impossible values), it moves the extremes most
and the median not at all, and for a balanced binary column it is exactly the flip. A shift by
one standard deviation, the alternative, depends on the scale and skew and leaves the observed
range for the extremes.

Category codes (for comparing the values of two nodes, e.g. in the evidence contrast): binary and
categorical columns are coded by value, one-hot groups by their category, continuous columns by
quantile bins (:func:`quantile_bins`, default 4 bins: quartiles over all nodes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnaudit._validation import check_choice, check_int
from gnnaudit.errors import InvalidInputError

__all__ = [
    "KINDS",
    "MAX_CATEGORIES",
    "FeatureSpec",
    "Alternative",
    "feature_names",
    "feature_columns",
    "detect_kind",
    "resolve_feature",
    "resolve_features",
    "alternatives",
    "opposite_quantile",
    "quantile_bins",
    "category_codes",
]

#: the feature kinds (see the module docstring)
KINDS: tuple[str, ...] = ("binary", "categorical", "one-hot", "continuous")
#: most distinct values of an integer-valued column treated as categorical
MAX_CATEGORIES = 10


@dataclass(frozen=True)
class FeatureSpec:
    """A resolved feature: display ``name``, its ``columns`` in ``data.x`` and its ``kind``."""

    name: str
    columns: tuple[int, ...]
    kind: str


@dataclass(frozen=True)
class Alternative:
    """One counterfactual value assignment of a feature.

    ``values``: the new values of the feature's columns, ``(n, c)`` or broadcastable ``(1, c)``;
    ``changes``: ``(n,)`` bool, nodes whose value this alternative actually changes;
    ``compares``: ``(n,)`` bool, nodes for which the world "every node takes this alternative"
    is a counterfactual of their own value (graph scope).
    """

    values: np.ndarray
    changes: np.ndarray
    compares: np.ndarray


def feature_names(data: Any) -> list[str]:
    """``data.feature_names`` as strings, or ``x0, x1, ...`` when absent or of the wrong length."""
    d = int(data.x.size(1))
    names = getattr(data, "feature_names", None)
    if names is None or len(names) != d:
        return [f"x{i}" for i in range(d)]
    return [str(n) for n in names]


def feature_columns(data: Any, columns: Sequence[int]) -> np.ndarray:
    """Columns ``columns`` of ``data.x`` as a float64 ``(n, c)`` numpy array (checked finite)."""
    cols = data.x[:, list(columns)].detach().cpu().to(torch.float64).numpy()
    if not np.isfinite(cols).all():
        raise InvalidInputError("data.x holds NaN or inf values in the audited feature columns")
    return cols


def _column_index(data: Any, item: Any, names: list[str], arg: str) -> int:
    d = len(names)
    if isinstance(item, str):
        if item not in names:
            shown = ", ".join(names[:20]) + (" ..." if d > 20 else "")
            raise InvalidInputError(f"{arg}={item!r} is not a feature of data; known: {shown}")
        return names.index(item)
    if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
        raise InvalidInputError(
            f"{arg} must be a feature name, a column index or a sequence of them, got {item!r:.80}"
        )
    return check_int(arg, item, minimum=-d, maximum=d - 1) % d


def detect_kind(values: np.ndarray, max_categories: int = MAX_CATEGORIES) -> str:
    """Kind of one column (``binary``, ``categorical`` or ``continuous``; ``constant`` for a
    single value), by the rules of the module docstring."""
    distinct = np.unique(values)
    if distinct.size <= 1:
        return "constant"
    if distinct.size == 2:
        return "binary"
    if distinct.size <= max_categories and np.all(distinct == np.round(distinct)):
        return "categorical"
    return "continuous"


def _check_one_hot(cols: np.ndarray, name: str) -> None:
    if not np.all((cols == 0.0) | (cols == 1.0)):
        raise InvalidInputError(f"one-hot group {name!r} must hold only 0/1 values")
    if np.any(cols.sum(axis=1) > 1):
        raise InvalidInputError(f"one-hot group {name!r} has rows with more than one 1")


def resolve_feature(  # noqa: C901  # one ladder over the documented feature spellings
    data: Any,
    feature: Any,
    *,
    kind: str = "auto",
    max_categories: int = MAX_CATEGORIES,
    arg: str = "feature",
) -> FeatureSpec:
    """Resolve ``feature`` (name, index or one-hot group) and its kind.

    ``kind="auto"`` detects it (module docstring); an explicit kind is checked against the data:
    ``binary`` needs exactly two values, ``categorical`` at most ``max_categories``,
    ``one-hot`` a group of 0/1 columns, ``continuous`` a single non-constant column.
    """
    check_choice("kind", kind, ("auto", *KINDS))
    max_categories = check_int("max_categories", max_categories, minimum=3)
    names = feature_names(data)
    if isinstance(feature, (str, int, np.integer)) and not isinstance(feature, bool):
        columns: tuple[int, ...] = (_column_index(data, feature, names, arg),)
    elif isinstance(feature, (Sequence, np.ndarray)):
        items = list(feature)
        if not items:
            raise InvalidInputError(f"{arg} must name at least one column, got an empty sequence")
        columns = tuple(_column_index(data, f, names, arg) for f in items)
        if len(set(columns)) != len(columns):
            raise InvalidInputError(f"{arg}={feature!r} names a column twice")
    else:
        raise InvalidInputError(
            f"{arg} must be a feature name, a column index or a sequence of names forming a "
            f"one-hot group, got {type(feature).__name__}"
        )
    cols = feature_columns(data, columns)
    name = "+".join(names[c] for c in columns)
    if len(columns) > 1 or kind == "one-hot":
        if kind not in ("auto", "one-hot"):
            raise InvalidInputError(f"{arg}={name!r} is a group of columns; kind must be 'one-hot'")
        _check_one_hot(cols, name)
        n_cat = len(columns) + int(np.any(cols.sum(axis=1) == 0))
        if np.unique(_one_hot_codes(cols)).size < 2:
            raise InvalidInputError(f"{arg}={name!r} takes a single category on every node")
        if n_cat < 2:
            raise InvalidInputError(f"one-hot group {name!r} needs at least two categories")
        return FeatureSpec(name, columns, "one-hot")
    detected = detect_kind(cols[:, 0], max_categories)
    nvals = np.unique(cols[:, 0]).size
    if detected == "constant":
        raise InvalidInputError(
            f"{arg}={name!r} takes a single value on every node; it cannot be intervened on"
        )
    if kind == "auto":
        return FeatureSpec(name, columns, detected)
    if kind == "binary" and nvals != 2:
        raise InvalidInputError(
            f"{arg}={name!r} has {nvals} distinct values; kind='binary' needs exactly 2"
        )
    if kind == "categorical" and nvals > max_categories:
        raise InvalidInputError(
            f"{arg}={name!r} has {nvals} distinct values; kind='categorical' allows at most "
            f"max_categories={max_categories}"
        )
    return FeatureSpec(name, columns, kind)


def resolve_features(
    data: Any,
    features: Any = None,
    *,
    kinds: Any = None,
    max_categories: int = MAX_CATEGORIES,
) -> list[FeatureSpec]:
    """Resolve a list of features (default: every non-constant column, each alone); an entry
    is a name, an index, or a nested sequence of names forming a one-hot group.

    ``kinds``: optional mapping from a feature name to its kind (overrides detection).
    """
    if kinds is not None and not isinstance(kinds, dict):
        raise InvalidInputError(f"kinds must be a dict name -> kind, got {type(kinds).__name__}")
    kinds = dict(kinds or {})
    names = feature_names(data)
    if features is None:
        cols = data.x.detach().cpu()
        srt = torch.sort(cols, dim=0).values
        nonconstant = (srt[0] != srt[-1]).numpy()
        items: list[Any] = [i for i in range(len(names)) if nonconstant[i]]
        if not items:
            raise InvalidInputError("data.x has no non-constant column to intervene on")
    elif isinstance(features, (str, int, np.integer)):
        items = [features]
    else:
        items = list(features)
        if not items:
            raise InvalidInputError("features must name at least one feature, got an empty list")
    specs = []
    for item in items:
        label = item if isinstance(item, str) else None
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            label = names[int(item) % len(names)] if -len(names) <= item < len(names) else None
        kind = kinds.get(label, "auto") if label is not None else "auto"
        specs.append(
            resolve_feature(data, item, kind=kind, max_categories=max_categories, arg="features")
        )
    unknown = set(kinds) - {s.name for s in specs}
    if unknown:
        raise InvalidInputError(f"kinds names features that are not audited: {sorted(unknown)}")
    if len({s.name for s in specs}) != len(specs):
        raise InvalidInputError("features lists a feature twice")
    return specs


def _one_hot_codes(cols: np.ndarray) -> np.ndarray:
    """Category of every row of a one-hot group: the index of its 1, or ``c`` for a zero row."""
    return np.where(cols.sum(axis=1) > 0, cols.argmax(axis=1), cols.shape[1]).astype(np.int64)


def opposite_quantile(values: Any) -> np.ndarray:
    """The opposite-quantile swap :math:`F^{-1}(1 - F(x))` of every value (module docstring),
    computed in exact integer arithmetic on ranks; O(n log n)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    n = v.size
    if n == 0:
        return v.copy()
    srt = np.sort(v)
    less = np.searchsorted(srt, v, side="left")
    equal = np.searchsorted(srt, v, side="right") - less
    # ceil(q n) - 1 with q n = n - less - equal / 2, in integers: (2n - 2 less - equal + 1) // 2 - 1
    idx = (2 * n - 2 * less - equal + 1) // 2 - 1
    return srt[np.clip(idx, 0, n - 1)]


def quantile_bins(values: Any, n_bins: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Quantile-bin codes of ``values``: ``(codes, edges)``.

    The inner edges are the ``j / n_bins`` quantiles (j = 1 .. n_bins - 1) of the values,
    duplicates removed (heavy ties give fewer bins); bin ``b`` holds ``edges[b-1] <= x <
    edges[b]``.
    """
    n_bins = check_int("n_bins", n_bins, minimum=2)
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    edges = np.unique(np.quantile(v, np.arange(1, n_bins) / n_bins)) if v.size else np.zeros(0)
    return np.searchsorted(edges, v, side="right").astype(np.int64), edges


def category_codes(data: Any, spec: FeatureSpec, n_bins: int = 4) -> np.ndarray:
    """``(n,)`` int64 category code of every node for ``spec`` (module docstring)."""
    cols = feature_columns(data, spec.columns)
    if spec.kind == "one-hot":
        return _one_hot_codes(cols)
    if spec.kind == "continuous":
        return quantile_bins(cols[:, 0], n_bins)[0]
    return np.unique(cols[:, 0], return_inverse=True)[1].reshape(-1).astype(np.int64)


def alternatives(data: Any, spec: FeatureSpec) -> list[Alternative]:
    """The counterfactual value assignments of ``spec`` (module docstring).

    binary: one alternative, the other value; continuous: one, the opposite-quantile swap;
    categorical / one-hot: one per category ``t`` (every node set to ``t``; it changes and
    compares the nodes whose category is not ``t``).
    """
    cols = feature_columns(data, spec.columns)
    n = cols.shape[0]
    everyone = np.ones(n, dtype=bool)
    if spec.kind == "binary":
        lo, hi = np.unique(cols[:, 0])
        flipped = np.where(cols[:, 0] == lo, hi, lo)[:, None]
        return [Alternative(flipped, everyone, everyone)]
    if spec.kind == "continuous":
        swapped = opposite_quantile(cols[:, 0])[:, None]
        return [Alternative(swapped, swapped[:, 0] != cols[:, 0], everyone)]
    if spec.kind == "categorical":
        out = []
        for t in np.unique(cols[:, 0]):
            other = cols[:, 0] != t
            out.append(Alternative(np.array([[t]]), other, other))
        return out
    codes = _one_hot_codes(cols)
    out = []
    for t in np.unique(codes):
        target = np.zeros((1, cols.shape[1]))
        if t < cols.shape[1]:
            target[0, t] = 1.0
        other = codes != t
        out.append(Alternative(target, other, other))
    return out
