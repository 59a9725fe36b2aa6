"""The inputs of :class:`~gnnaudit.clustering.TreeClustering`: the constraint graph, the soft
constraints and their integer weights, and the split of the conditional separating pairs into
those encoded up front and the lazy pool."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gnnaudit._validation import check_float
from gnnaudit.clustering.tree_pairs import SmartPairs
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.constraints import ConstraintGraph, as_pairs

__all__ = ["UNIT", "constraint_graph", "soft_constraints", "lazy_split", "check_epsilon"]

#: Objective soft clauses weigh this much; a soft constraint of weight ``w`` weighs
#: ``max(1, round(w * UNIT))`` (MaxSAT weights are integers).
UNIT = 100
#: With ``max_pairs=None``, a pool of conditional separating pairs up to this size is encoded
#: at once; above it the ``_LAZY_START`` longest pairs are, the rest lazily.
_ALL_PAIRS_UP_TO = 500_000
_LAZY_START = 100_000


def constraint_graph(n: int, must_link: Any, cannot_link: Any, constraints: Any) -> ConstraintGraph:
    """The hard constraints as a :class:`ConstraintGraph`: built from the pair lists, or the
    given ``constraints`` (checked: a ConstraintGraph over ``n`` points, not both forms)."""
    if constraints is None:
        return ConstraintGraph(n, must_link, cannot_link)
    if not isinstance(constraints, ConstraintGraph):
        raise InvalidInputError(
            f"constraints must be a gnnaudit.graph_ops.ConstraintGraph, got "
            f"{type(constraints).__name__}"
        )
    if must_link is not None or cannot_link is not None:
        raise InvalidInputError(
            "pass the constraints either as must_link= / cannot_link= pairs or as "
            "constraints= (a ConstraintGraph), not both"
        )
    if constraints.n != n:
        raise InvalidInputError(
            f"constraints is a ConstraintGraph over n={constraints.n} points but X has {n} rows"
        )
    return constraints


def soft_constraints(
    constraint_weight: Any, n: int, must_link: Any, cannot_link: Any, graph: ConstraintGraph
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Canonical soft pairs and their integer weights (duplicates add up)."""
    cw = constraint_weight
    raw: list[np.ndarray] = []
    if must_link is None and cannot_link is None:  # a ConstraintGraph was given
        raw = [graph.must_link, graph.cannot_link]
    else:
        for name, pairs in (("must_link", must_link), ("cannot_link", cannot_link)):
            as_pairs(name, pairs, n, allow_self=name == "must_link")  # validates
            arr = np.zeros((0, 2), np.int64) if pairs is None else pairs
            if hasattr(arr, "detach"):
                arr = arr.detach().cpu().numpy()
            raw.append(np.asarray(arr).reshape(-1, 2).astype(np.int64))
    m_total = len(raw[0]) + len(raw[1])
    weights: np.ndarray
    if np.ndim(cw) == 0:
        w0 = check_float("constraint_weight", cw, minimum=0.0, inclusive=(False, True))
        weights = np.full(m_total, w0)
    else:
        weights = np.asarray(cw, dtype=float)
        if weights.ndim != 1 or len(weights) != m_total:
            raise InvalidInputError(
                f"constraint_weight must be None, a positive number or one weight per pair "
                f"(must-link rows first, then cannot-link rows: {m_total}); got shape "
                f"{weights.shape}"
            )
        if not np.all(np.isfinite(weights)) or (weights <= 0).any():
            raise InvalidInputError(
                "constraint_weight must hold finite positive weights, got "
                f"min {weights.min() if len(weights) else None}"
            )
    out: list[np.ndarray] = []
    for t, arr in enumerate(raw):
        w: np.ndarray = weights[: len(raw[0])] if t == 0 else weights[len(raw[0]) :]
        keep = arr[:, 0] != arr[:, 1]
        arr, w = np.sort(arr[keep], axis=1), w[keep]
        if len(arr):
            arr, inv = np.unique(arr, axis=0, return_inverse=True)
            agg = np.zeros(len(arr))
            np.add.at(agg, np.asarray(inv).reshape(-1), w)
            w = agg
        out += [arr.reshape(-1, 2), np.maximum(1, np.round(w * UNIT)).astype(np.int64)]
    return out[0], out[2], out[1], out[3]


def lazy_split(pairs: SmartPairs, max_pairs: int | None) -> tuple[SmartPairs, int | None]:
    """Sort the conditional separating pairs by class (descending) and choose how many to
    encode at once (the rest are generated lazily; exact)."""
    pool = len(pairs.apart)
    if max_pairs is None:
        start = None if pool <= _ALL_PAIRS_UP_TO else _LAZY_START
    else:
        start = int(max_pairs) if pool > int(max_pairs) else None
    if start is None:
        return pairs, None
    desc = np.argsort(-pairs.apart_class, kind="stable")
    return (
        SmartPairs(
            must_link=pairs.must_link,
            cannot_link=pairs.cannot_link,
            together=pairs.together,
            together_class=pairs.together_class,
            apart=pairs.apart[desc],
            apart_class=pairs.apart_class[desc],
            forced_not_plus=pairs.forced_not_plus,
            forced_minus=pairs.forced_minus,
        ),  # fmt: skip
        start,
    )


def check_epsilon(epsilon: float, n_features: int, name: str = "epsilon") -> None:
    r"""Refuse an ``epsilon`` at least the largest distance on the [0, 100] feature scale,
    :math:`100 \sqrt d`: every pair would fall into one distance class, so any clustering
    would be epsilon-optimal and the search would optimise nothing."""
    largest = UNIT * math.sqrt(max(1, int(n_features)))
    if float(epsilon) >= largest:
        raise InvalidInputError(
            f"{name}={epsilon!r} is at least the largest distance between two points on the "
            f"[0, {UNIT:g}] feature scale ({largest:.4g} for {n_features} feature(s)): every "
            "pair would fall into one distance class and any clustering would be "
            f"epsilon-optimal; use a value well below {largest:.4g} (default 0.1; 0 is exact)"
        )
