"""The sensitive attribute(s) of an audit (flat: the context and three subpackages read it),
and the group of every node.

``sensitive=`` of the audit accepts

* ``None``: ``data.sensitive`` / ``data.sensitive_name`` when the data carries them (a
  ``data.sensitive`` whose name is not a feature name is matched against the columns as a
  vector is, below);
* a feature **name** of ``data.feature_names`` (or ``data.sensitive_name``);
* a **column index** of ``data.x``;
* a **vector** (one value per node: numbers, booleans, text labels or a pandas categorical).
  A vector that equals a column of ``data.x`` *is* that feature: it is audited as the feature
  (so the counterfactual flip tests run), and :attr:`SensitiveAttribute.note` says so for the
  report. "Equals" allows a **relabelling**: a one-to-one map between the vector's values and
  the column's (``"F"``/``"M"`` against a column coded 1/0, ``1``/``2`` against 0/1, ``True``
  / ``False`` against 1/0), for vectors of at most
  :data:`~gnnaudit.audit.interventions.MAX_CATEGORIES` distinct values; the vector's own
  labels stay the group names. An exactly equal column is preferred over a relabelled one,
  then the first column. A vector with missing values is never matched (it is refused);
  a vector matching no column is not a model input;
* a **list** of the above (several attributes; the first is the primary one).

Groups. Text labels are kept as the group names. A numeric attribute is used as groups when it
is binary or categorical (at most :data:`~gnnaudit.audit.interventions.MAX_CATEGORIES` whole
values, the rule of :func:`~gnnaudit.audit.interventions.detect_kind`). A **continuous**
attribute (anything else) is never used raw as groups, which would make every node its own
group: it is refused with a message suggesting bins, or, with ``bins=q``, cut into ``q``
quantile bins named by their value ranges (e.g. ``"[18, 31)"``).

Unknown values. A graph may mark nodes whose value of its own attribute is unknown
(``data.sensitive_mask`` false, as the FairGNN loaders do; such values are stored as group 0):
:func:`known_group_mask` names the known nodes. The figures computed over all nodes (the
proxy ranking, :class:`~gnnaudit.training.FairFinetune`'s selection and covariance terms) and
the audit's group figures on the audited nodes (:func:`known_group_nodes`) leave the others
out; the evaluation masks of those loaders already exclude them.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from gnnaudit._validation import check_int
from gnnaudit.audit.interventions import MAX_CATEGORIES, detect_kind, quantile_bins
from gnnaudit.errors import InvalidInputError

__all__ = [
    "group_labels",
    "known_group_mask",
    "known_group_nodes",
    "unknown_group_note",
    "SensitiveAttribute",
    "resolve_attributes",
    "resolve_sensitive",
    "bin_attribute",
]

#: most cells of ``x`` compared at once when matching a vector against its columns
_MATCH_CELLS = 4_000_000
#: rows (spread over the graph, plus each value's first node) on which every column is
#: compared before the full comparison of the columns that agree there
_PROBE_ROWS = 256
#: most value pairs a relabelling note lists
_NOTE_PAIRS = 10


@dataclass(frozen=True)
class SensitiveAttribute:
    """One resolved sensitive attribute.

    ``values``: the group of every node (numbers, or text for text labels and bins);
    ``name``; ``column``: its column in ``data.x`` (None when it is not a model input);
    ``note``: what the resolution did, in plain words, for the report (None when nothing to
    say).
    """

    values: np.ndarray
    name: str
    column: int | None
    note: str | None = None


def _to_numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def known_group_mask(data: Any, num_nodes: int, name: str | None) -> np.ndarray:
    """Which nodes have a known value of the attribute ``name``: ``data.sensitive_mask`` when
    ``name`` is the data's own attribute (``data.sensitive_name``) and the data carries that
    mask (the FairGNN layouts of :func:`~gnnaudit.datasets.load_nifty` store an unknown value as
    group 0 and mark it false there), else every node. A boolean array over the ``num_nodes``
    nodes; a node of unknown group belongs in no group figure."""
    known = getattr(data, "sensitive_mask", None)
    if known is None or name is None or name != getattr(data, "sensitive_name", None):
        return np.ones(num_nodes, dtype=bool)
    out = _to_numpy(known).astype(bool).reshape(-1)
    if out.size != num_nodes:
        raise InvalidInputError(
            f"data.sensitive_mask must hold one entry per node ({num_nodes}), got {out.size}"
        )
    return out


def known_group_nodes(data: Any, nodes: np.ndarray, names: Sequence[str | None]) -> np.ndarray:
    """The audited ``nodes`` whose value of every attribute of ``names`` is known
    (:func:`known_group_mask`): the nodes of the audit's group figures (group gaps, flip tests,
    evidence contrast, the embedding's groups). All of ``nodes`` unless the data marks unknown
    values of its own attribute."""
    known = np.ones(int(data.num_nodes), dtype=bool)
    for name in names:
        known &= known_group_mask(data, known.size, name)
    return nodes[known[nodes]]


def unknown_group_note(nodes: np.ndarray, known_nodes: np.ndarray, names: list[str]) -> str | None:
    """A sentence for the report when some of the audited ``nodes`` are not among
    ``known_nodes`` (:func:`known_group_nodes`: an unknown value of an attribute of ``names``),
    else None. The FairGNN loaders' evaluation masks leave such nodes out; an explicit ``mask``
    may not."""
    unknown = int(nodes.size - known_nodes.size)
    if not unknown:
        return None
    which = " / ".join(repr(n) for n in names)
    return (
        f"{unknown} of the {nodes.size} audited nodes have an unknown value of {which} "
        "(data.sensitive_mask false, stored as group 0): the group figures (group gaps, flip "
        "tests, evidence contrast, the embedding's groups) leave them out, on the "
        f"{known_nodes.size} others; the figures without groups count every audited node."
    )


def _names(data: Any) -> list[str]:
    names = [str(f) for f in (getattr(data, "feature_names", None) or [])]
    width = int(data.x.size(1)) if getattr(data, "x", None) is not None else len(names)
    return names if len(names) == width else [f"x{i}" for i in range(width)]


@dataclass(frozen=True)
class _Match:
    """A column of ``x`` equal to a vector: its index, whether it is equal as numbers (else up
    to a relabelling), and the column's value for each of the vector's distinct values."""

    column: int
    exact: bool
    pairs: list[tuple[Any, float]]


def _has_missing(values: np.ndarray) -> bool:
    if values.dtype.kind == "f":
        return not bool(np.isfinite(values).all())
    if values.dtype.kind == "O":
        return bool(pd.isna(values).any())
    return False


def _block(x: torch.Tensor, rows: np.ndarray | None, cols: slice | np.ndarray) -> np.ndarray:
    """``x[rows][:, cols]`` as float64 numpy (all rows for None); only this block is copied."""
    which = cols if isinstance(cols, slice) else torch.as_tensor(cols, device=x.device)
    part = x[:, which]
    if rows is not None:
        part = part[torch.as_tensor(rows, device=x.device)]
    return part.detach().cpu().to(torch.float64).numpy()


def _matching_column(data: Any, values: np.ndarray) -> _Match | None:
    """The column of ``data.x`` equal to ``values`` (module docstring), or None.

    ``values`` is factorised in order of first appearance (codes ``0 .. k-1``); the value of a
    candidate column at the first node of each code (``ref``, ``k`` per column) defines the
    relabelling. The column equals ``values`` when ``ref`` holds ``k`` distinct numbers (the map
    is one-to-one) and ``column == ref[codes]`` on every node (nodes of one label share one
    value); exactly when moreover ``ref`` is the vector's numeric values. Vectorised over nodes
    and columns: every column is first compared on :data:`_PROBE_ROWS` rows, then the columns
    that agree there on all nodes, in column blocks of at most :data:`_MATCH_CELLS` cells.
    """
    x = getattr(data, "x", None)
    if x is None or values.ndim != 1 or values.size == 0 or _has_missing(values):
        return None
    numeric = values.dtype.kind in "biuf"
    try:
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
    except TypeError:  # unhashable entries: no column can equal them
        return None
    k = len(uniques)
    relabel = k <= MAX_CATEGORIES
    if not (numeric or relabel) or bool((codes < 0).any()):
        return None
    labels = np.asarray(uniques)
    own = labels.astype(np.float64) if numeric else None
    first = np.unique(codes, return_index=True)[1]  # first node of each code (codes ascend)
    n, width = codes.size, int(x.size(1))
    spread = np.linspace(0, n - 1, num=min(n, _PROBE_ROWS)).astype(np.int64)
    probe = np.unique(np.concatenate([first, spread]))
    found: _Match | None = None
    step = max(1, _MATCH_CELLS // (probe.size + k))  # memory: ~_MATCH_CELLS cells per block
    full_step = max(1, _MATCH_CELLS // n)
    for start in range(0, width, step):  # loop over column blocks, never over nodes
        cols = slice(start, min(width, start + step))
        ref = _block(x, first, cols)  # (k, w): the column's value at each label's first node
        exact = (
            (ref == own[:, None]).all(axis=0) if own is not None else np.zeros(ref.shape[1], bool)
        )
        allowed = exact.copy()
        if relabel and found is None:
            ordered = np.sort(ref, axis=0)
            allowed |= (np.diff(ordered, axis=0) != 0).all(axis=0)  # one-to-one
        if not allowed.any():
            continue
        idx = np.flatnonzero(allowed)
        seen = _block(x, probe, cols)[:, idx]
        agree = (seen == ref[:, idx][codes[probe]]).all(axis=0)
        idx = idx[agree]
        for a in range(0, idx.size, full_step):  # candidates, in column blocks
            chunk = idx[a : a + full_step]
            if found is not None:
                chunk = chunk[exact[chunk]]  # a relabelled column is found: only exact ones
            if not chunk.size:
                continue
            whole = _block(x, None, start + chunk)
            hits = chunk[(whole == ref[:, chunk][codes]).all(axis=0)]
            if not hits.size:
                continue
            j = int(hits[0])
            exact_hits = hits[exact[hits]]
            if exact_hits.size or own is None:  # exact wins; text cannot be equal as numbers
                j = int(exact_hits[0]) if exact_hits.size else j
                return _Match(start + j, bool(exact[j]), _pairs(labels, ref[:, j]))
            found = _Match(start + j, False, _pairs(labels, ref[:, j]))
    return found


def _pairs(labels: np.ndarray, coded: np.ndarray) -> list[tuple[Any, float]]:
    """Each distinct value of the vector with the column's value for it."""
    return list(zip(labels.tolist(), coded.tolist(), strict=True))


def _format_number(value: float) -> str:
    return f"{value:.6g}"


def _match_note(match: _Match, name: str) -> str:
    """The report's sentence on a vector audited as column ``match.column`` (``name``)."""
    where = f"The sensitive vector equals column {match.column} ({name}) of x"
    if match.exact:
        return f"{where}; it is audited as that feature, so the counterfactual flip tests run."
    pairs = sorted(match.pairs, key=lambda p: str(p[0]))
    shown = ", ".join(f"{label} = {_format_number(v)}" for label, v in pairs[:_NOTE_PAIRS])
    more = f", and {len(pairs) - _NOTE_PAIRS} more" if len(pairs) > _NOTE_PAIRS else ""
    return (
        f"{where} up to a relabelling of its values ({shown}{more}); it is audited as that "
        "feature, so the counterfactual flip tests run."
    )


def bin_attribute(values: np.ndarray, bins: int) -> np.ndarray:
    """``values`` in ``bins`` quantile bins, as text labels naming each bin's value range."""
    codes, edges = quantile_bins(values, bins)
    bounds = np.concatenate([[float(np.min(values))], edges, [float(np.max(values))]])
    labels = np.array(
        [
            f"[{bounds[b]:.4g}, {bounds[b + 1]:.4g}{']' if b == edges.size else ')'}"
            for b in range(edges.size + 1)
        ]
    )
    return labels[codes]


def _groups(values: np.ndarray, name: str, bins: int | None) -> tuple[np.ndarray, str | None]:
    """``values`` as groups (see the module docstring) and a note when binned."""
    if values.dtype.kind in "OUS":
        if bool(pd.isna(values).any()):
            raise InvalidInputError(f"sensitive attribute {name!r} holds missing values")
        return values.astype(str), None
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise InvalidInputError(f"sensitive attribute {name!r} holds NaN or inf values")
    if values.dtype.kind == "b":
        values = values.astype(np.int64)
    if detect_kind(values.astype(np.float64), MAX_CATEGORIES) != "continuous":
        return values, None
    distinct = int(np.unique(values).size)
    if bins is None:
        raise InvalidInputError(
            f"sensitive attribute {name!r} is continuous ({distinct} distinct values); used raw "
            "as groups every node would be its own group. Pass sensitive_bins=4 (quantile "
            "bins; CLI --sensitive-bins 4) or give a binned vector"
        )
    binned = bin_attribute(values.astype(np.float64), bins)
    note = (
        f"{name} is continuous ({distinct} distinct values); its groups are "
        f"{np.unique(binned).size} quantile bins ({', '.join(np.unique(binned))})"
    )
    return binned, note


def _vector_column(
    data: Any, values: np.ndarray, names: list[str]
) -> tuple[int | None, str | None]:
    """``(column, note)`` of the column of ``x`` (named ``names``) equal to the vector
    ``values`` (as is or relabelled, :func:`_matching_column`), ``(None, None)`` when none is."""
    if values.shape[0] != int(data.num_nodes):
        return None, None
    match = _matching_column(data, values)
    if match is None:
        return None, None
    return match.column, _match_note(match, names[match.column])


def _own_name(data: Any, values: np.ndarray) -> str:
    """The name of a vector that is no column: the data's own attribute's name when the vector
    equals ``data.sensitive`` (so its unknown values stay unknown, :func:`known_group_mask`),
    else ``"sensitive"``."""
    own, stored = getattr(data, "sensitive", None), getattr(data, "sensitive_name", None)
    if own is not None and stored is not None:
        own_values = _to_numpy(own).ravel()
        if own_values.shape == values.shape and np.array_equal(own_values, values):
            return str(stored)
    return "sensitive"


def _one(data: Any, sensitive: Any, bins: int | None) -> SensitiveAttribute | None:
    """One attribute (see :func:`resolve_attributes`)."""
    n = int(data.num_nodes)
    names = _names(data)
    note = None
    if sensitive is None:
        raw = getattr(data, "sensitive", None)
        if raw is None:
            return None
        stored = getattr(data, "sensitive_name", None)
        name = "sensitive" if stored is None else str(stored)
        values = _to_numpy(raw).ravel()
        column = names.index(name) if name in names else None
        if column is None:  # no feature of that name: found by its values, as a vector
            column, note = _vector_column(data, values, names)
    elif isinstance(sensitive, str):
        if sensitive in names:
            column = names.index(sensitive)
            values, name = _to_numpy(data.x[:, column]), sensitive
        elif (
            sensitive == getattr(data, "sensitive_name", None)
            and getattr(data, "sensitive", None) is not None
        ):
            values, name, column = _to_numpy(data.sensitive).ravel(), sensitive, None
        else:
            raise InvalidInputError(
                f"sensitive={sensitive!r} is not a feature name of the data; known: "
                f"{', '.join(names[:20])}{' ...' if len(names) > 20 else ''}"
            )
    elif isinstance(sensitive, numbers.Integral) and not isinstance(sensitive, bool):
        column = int(sensitive)
        if not 0 <= column < len(names):
            raise InvalidInputError(
                f"sensitive={column} is not a column of data.x (0 to {len(names) - 1})"
            )
        values, name = _to_numpy(data.x[:, column]), names[column]
    else:
        values = _to_numpy(sensitive).ravel()
        column, note = _vector_column(data, values, names)
        name = names[column] if column is not None else _own_name(data, values)
    if values.shape[0] != n:
        raise InvalidInputError(
            f"sensitive must have one value per node ({n}), got {values.shape[0]}"
        )
    groups, bin_note = _groups(values, name, bins)
    notes = " ".join(t for t in (note, bin_note and bin_note + ".") if t)
    return SensitiveAttribute(groups, name, column, notes or None)


def _is_list_of_attributes(sensitive: Any, n: int) -> bool:
    if not isinstance(sensitive, (list, tuple)) or not sensitive:
        return False
    nested = any(isinstance(s, (list, tuple, np.ndarray, torch.Tensor)) for s in sensitive)
    return nested or len(sensitive) != n


def resolve_attributes(
    data: Any, sensitive: Any = None, *, bins: int | None = None
) -> list[SensitiveAttribute]:
    """The sensitive attributes named by ``sensitive`` (module docstring); ``bins``: quantile
    bins for a continuous attribute (None: refused). Empty when none is given or attached."""
    if bins is not None:
        bins = check_int("sensitive_bins", bins, minimum=2, maximum=100)
    items = (
        list(sensitive) if _is_list_of_attributes(sensitive, int(data.num_nodes)) else [sensitive]
    )
    out = [a for a in (_one(data, s, bins) for s in items) if a is not None]
    seen = [a.name for a in out]
    for a in out:
        if seen.count(a.name) > 1:
            raise InvalidInputError(f"sensitive names the attribute {a.name!r} twice")
    return out


def resolve_sensitive(
    data: Any, sensitive: Any = None, *, bins: int | None = None
) -> tuple[np.ndarray | None, str | None, int | None]:
    """``(values, name, column)`` of the (first) sensitive attribute (see
    :func:`resolve_attributes`); ``column`` is None when the attribute is not a model input
    (the model can then only use it through proxies). ``(None, None, None)`` when nothing is
    available."""
    found = resolve_attributes(data, sensitive, bins=bins)
    if not found:
        return None, None, None
    return found[0].values, found[0].name, found[0].column


def group_labels(data: Any, attribute: SensitiveAttribute) -> np.ndarray:
    """``attribute.values`` as the group names a reader knows, for reports: when the data
    carries the original labels of its sensitive column (``data.sensitive_values``, e.g.
    ``["F", "M"]`` from a text column encoded as codes 0/1) and ``attribute`` is that column,
    each code becomes its label; otherwise the values as they are."""
    names = getattr(data, "sensitive_values", None)
    if (
        names is None
        or attribute.name != getattr(data, "sensitive_name", None)
        or attribute.values.dtype.kind not in "biuf"
    ):
        return attribute.values
    codes = np.asarray(attribute.values, dtype=np.float64)
    labels = [str(v) for v in names]
    whole = np.isfinite(codes) & (codes == np.round(codes))
    if not whole.all() or codes.min() < 0 or codes.max() >= len(labels):
        return attribute.values
    return np.asarray(labels, dtype=object)[codes.astype(np.int64)]
