"""Discrimination scores of feature values from local counterfactual evidences (CE paper, Eq. 12).

For a feature ``f`` and one of its values ``a`` the paper scores how often the top-k local
counterfactual evidences of a test node ``v`` with ``x_v[f] = a`` carry a *different* value:

.. math::

    DS_v(f = a) = \\frac{1}{k} \\sum_{u \\in LCE_k(v)} \\mathbb{I}(x_v[f] = a \\wedge x_u[f] \\neq a),
    \\qquad DS(f = a) = \\operatorname{mean}_{v \\in V_{test},\\, x_v[f] = a} DS_v(f = a).

A high score says: the most similar nodes the model labels differently tend not to share the
value, so the value looks decisive for the prediction. A high score can also arise by
construction: if value ``a`` is rare among ``v``'s candidates (test nodes with a different
prediction), *any* set of evidences mostly carries another value. :func:`discrimination_scores`
therefore also reports the **baseline**, the exact expected score if each node's evidences were
drawn uniformly at random from its candidates,

.. math::

    B_v(f = a) = \\frac{\\#\\{u \\in C_v : x_u[f] \\neq a\\}}{|C_v|}, \\qquad
    C_v = \\{u \\in V_{test} : \\hat y_u \\neq \\hat y_v\\},

averaged over the same nodes, and the **lift** = score - baseline: how much the similarity-
ranked evidences differ in ``f`` beyond what the candidates' value mix forces.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit._validation import check_array, check_choice, check_int
from gnnaudit.audit.evidence_inputs import (
    REQUIRED_LOCAL_COLUMNS,
    check_frame,
    check_frame_ids,
    fitted_predictions,
    fitted_test_nodes,
    is_estimator,
    mask_nodes,
    node_features,
    predictions_from_frame,
)
from gnnaudit.errors import InvalidInputError

__all__ = ["discrimination_scores", "feature_rank", "score_table", "DISCRIMINATION_COLUMNS"]

logger = logging.getLogger(__name__)

#: Columns of the table :func:`discrimination_scores` returns.
DISCRIMINATION_COLUMNS = ["feature", "value", "score", "baseline", "lift", "support"]

#: memory bound (number of array cells) of one feature chunk of the (q, k, F) comparison
_CHUNK_CELLS = 8_000_000


def resolve_features(
    features: Any, names: Sequence[str], x: np.ndarray, max_values: int
) -> list[int]:
    """Column indices of the features to score (names or indices), or the detected categorical
    ones (at most ``max_values`` distinct values over all nodes)."""
    d = x.shape[1]
    if features is None:
        # distinct values per column, vectorised: sort each column and count value changes
        srt = np.sort(x, axis=0)
        distinct = 1 + (np.diff(srt, axis=0) != 0).sum(axis=0) if x.shape[0] else np.zeros(d)
        cols = np.flatnonzero(distinct <= max_values).tolist()
        if not cols:
            raise InvalidInputError(
                f"no feature column has <= {max_values} distinct values; pass features=... "
                "naming binary or categorical columns"
            )
        return cols
    if isinstance(features, (str, int, np.integer)):
        features = [features]
    cols: list[int] = []
    lookup = {n: i for i, n in enumerate(names)}
    for f in features:
        if isinstance(f, str):
            if f not in lookup:
                raise InvalidInputError(
                    f"features holds unknown feature name {f!r}; known names: "
                    f"{', '.join(names[:20])}{' ...' if len(names) > 20 else ''}"
                )
            cols.append(lookup[f])
        else:
            i = check_int("features entry", f, minimum=-d, maximum=d - 1)
            cols.append(i % d)
    for i in cols:
        nvals = np.unique(x[:, i]).size
        if nvals > max_values:
            raise InvalidInputError(
                f"feature {names[i]!r} has {nvals} distinct values; discrimination scores need a "
                f"binary or categorical column (<= max_values={max_values} values)"
            )
    return list(dict.fromkeys(cols))


def _padded_local(frame: pd.DataFrame, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Queries (ascending) and their first ``k`` evidences by rank, padded with ``-1``."""
    if frame.empty:
        return np.zeros(0, dtype=np.int64), np.zeros((0, k), dtype=np.int64)
    order = np.lexsort(
        (
            frame["evidence"].to_numpy(dtype=np.int64),
            frame["rank"].to_numpy(dtype=np.int64),
            frame["query"].to_numpy(dtype=np.int64),
        )
    )
    q = frame["query"].to_numpy(dtype=np.int64)[order]
    e = frame["evidence"].to_numpy(dtype=np.int64)[order]
    queries, start, counts = np.unique(q, return_index=True, return_counts=True)
    pos = np.arange(q.shape[0]) - np.repeat(start, counts)
    keep = pos < k
    row = np.searchsorted(queries, q[keep])
    out = np.full((queries.shape[0], k), -1, dtype=np.int64)
    out[row, pos[keep]] = e[keep]
    return queries, out


# ----------------------------------------------------------------------------------------------
# Eq. 12
# ----------------------------------------------------------------------------------------------
def discrimination_scores(
    data: Any,
    evidence: Any,
    k: int = 10,
    features: Sequence[str | int] | str | int | None = None,
    *,
    predictions: Any = None,
    mask: Any = None,
    max_values: int = 10,
    min_support: int = 1,
) -> pd.DataFrame:
    """Discrimination score (Eq. 12) of every value of binary / categorical features.

    Parameters
    ----------
    data : PyG ``Data`` with ``x`` (and optionally ``feature_names``, ``test_mask``).
    evidence : a fitted :class:`~gnnaudit.audit.CounterfactualEvidence` (its
        ``local_evidence`` is called for all of its test nodes with ``k``) **or** a local-
        evidence DataFrame with columns ``query, evidence, rank`` as ``local_evidence``
        returns. For a DataFrame the first ``k`` evidences of each query by ``rank`` are used
        and only the queries present are scored.
    k : number of local evidences per test node (the paper uses 10). A node with fewer than
        ``k`` evidences (fewer candidates, or an approximate backend) is scored over the
        evidences returned: ``DS_v`` divides by their number, not by ``k``. Nodes without any
        evidence (no candidate) are not scored.
    features : names (``data.feature_names``) or column indices; default: every column with at
        most ``max_values`` distinct values over all nodes.
    predictions : predicted class per node; only needed with a DataFrame (default: read from
        the DataFrame's ``query_pred`` / ``evidence_pred``; every node of ``mask`` needs one).
    mask : test nodes (bool mask or ids) forming the candidate pool of the baseline; only used
        with a DataFrame (default ``data.test_mask``).
    max_values : largest number of distinct values of a column treated as categorical.
    min_support : drop (feature, value) rows scored on fewer nodes (default 1 keeps all, as in
        the paper; values held by one or two nodes get extreme scores by chance).

    Returns
    -------
    DataFrame with columns ``feature, value, score, baseline, lift, support``, one row per
    (feature, value) held by at least one scored node, sorted by ``score`` descending as in the
    paper (ties: larger ``lift``, then feature, value). ``support`` = number of scored test
    nodes with that value. ``baseline`` (see the module docstring) is computed exactly from the
    per-predicted-class value counts of the test nodes; ``lift = score - baseline``.

    Memory: the comparison runs in feature chunks of at most ``8e6`` cells of a (queries, k,
    features) array, plus the ``(n, d)`` feature matrix as float64.
    """
    k = check_int("k", k, minimum=1)
    max_values = check_int("max_values", max_values, minimum=1)
    min_support = check_int("min_support", min_support, minimum=1)
    x, names = node_features(data)
    n = x.shape[0]
    cols = resolve_features(features, names, x, max_values)

    if is_estimator(evidence):
        test_nodes = fitted_test_nodes(evidence)
        pred = fitted_predictions(evidence, n)
        local = evidence.local_evidence(test_nodes, k=k)
        frame = check_frame("evidence.local_evidence()", local, REQUIRED_LOCAL_COLUMNS)
        check_frame_ids(frame, ("query", "evidence"), n)
    else:
        frame = check_frame("evidence", evidence, REQUIRED_LOCAL_COLUMNS)
        check_frame_ids(frame, ("query", "evidence"), n)
        if mask is None:
            mask = getattr(data, "test_mask", None)
            if mask is None:
                raise InvalidInputError(
                    "mask is required with a DataFrame when data has no test_mask"
                )
        test_nodes = mask_nodes("mask", mask, n)
        if predictions is not None:
            pred = check_array("predictions", predictions, ndim=1, dtype=np.int64)
            if pred.shape[0] != n:
                raise InvalidInputError(
                    f"predictions must have one entry per node ({n}), got {pred.shape[0]}"
                )
        else:
            pred = predictions_from_frame(
                frame, [("query", "query_pred"), ("evidence", "evidence_pred")], n
            )
            unknown = test_nodes[pred[test_nodes] < 0]
            if unknown.size and not frame.empty:
                raise InvalidInputError(
                    f"predictions is needed: {unknown.size} test node(s) (e.g. {unknown[:5].tolist()}) "
                    "have no prediction in the evidence DataFrame"
                )

    queries, ev = _padded_local(frame, k)
    return score_table(x, names, cols, queries, ev, pred, test_nodes, min_support=min_support)


def _empty_table() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=float) for c in DISCRIMINATION_COLUMNS}).astype(
        {"feature": object, "support": np.int64}
    )


def score_arrays(
    x: np.ndarray,
    names: Sequence[str],
    cols: Sequence[int],
    queries: np.ndarray,
    ev: np.ndarray,
    pred: np.ndarray,
    test_nodes: np.ndarray,
    *,
    min_support: int = 1,
    encoded: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
) -> dict[str, np.ndarray]:
    """Array core of :func:`discrimination_scores` (no validation, unsorted; used by the audit
    callback, which must stay cheap).

    ``queries`` (q,) node ids, ``ev`` (q, k) evidence node ids padded with -1 (each row with at
    least one evidence), ``pred`` (n,) predictions (valid on ``test_nodes``), ``test_nodes`` the
    candidate pool of the baseline. ``encoded`` (optional, from :func:`encode_columns`) caches
    the per-column ``np.unique`` work when the same graph is scored repeatedly. Returns arrays ``feature`` (column index), ``value``,
    ``score``, ``baseline``, ``support``.
    """
    cols = list(cols)
    empty = {
        "feature": np.zeros(0, dtype=np.int64),
        "value": np.zeros(0),
        "score": np.zeros(0),
        "baseline": np.zeros(0),
        "support": np.zeros(0, dtype=np.int64),
    }
    if queries.size == 0 or not cols:
        return empty
    valid = ev >= 0
    n_valid = valid.sum(axis=1)
    if np.any(n_valid == 0):
        raise InvalidInputError("every query needs at least one evidence")
    ev_safe = np.where(valid, ev, 0)

    # candidate pool for the baseline: test nodes and their predicted classes
    pool_pred = pred[test_nodes]
    classes, pool_cls = np.unique(pool_pred, return_inverse=True)
    q_cls = np.clip(np.searchsorted(classes, pred[queries]), 0, max(classes.size - 1, 0))
    if classes.size == 0 or np.any(classes[q_cls] != pred[queries]):
        raise InvalidInputError(
            "evidence queries have predicted classes that no test node of the candidate pool has"
        )
    class_size = np.bincount(pool_cls, minlength=classes.size)
    n_cand = test_nodes.size - class_size[q_cls]
    if np.any(n_cand <= 0):
        raise InvalidInputError(
            "some query with evidences has no candidate in the test pool (mask/predictions do "
            "not match the evidence)"
        )

    # DS_v for every (query, feature): mismatching evidences / evidences returned, chunked
    chunk = max(1, _CHUNK_CELLS // max(1, ev.size))
    ds_v = np.empty((queries.size, len(cols)), dtype=np.float64)
    for s in range(0, len(cols), chunk):
        c = cols[s : s + chunk]
        xq = x[np.ix_(queries, c)]  # (q, F)
        xe = x[:, c][ev_safe]  # (q, k, F)
        mism = (xe != xq[:, None, :]) & valid[:, :, None]
        ds_v[:, s : s + chunk] = mism.sum(axis=1) / n_valid[:, None]
    if encoded is None:
        encoded = encode_columns(x, cols)

    n_cls = classes.size
    feat, val, sc, bs, sup = [], [], [], [], []
    for j, col in enumerate(cols):
        values, codes = encoded[j]
        nv = values.size
        q_code = codes[queries]
        # per (class, value) counts among the pool
        counts = np.bincount(pool_cls * nv + codes[test_nodes], minlength=n_cls * nv)
        counts = counts.reshape(n_cls, nv)
        total = counts.sum(axis=0)
        same = total[q_code] - counts[q_cls, q_code]
        base_v = 1.0 - same / n_cand
        support = np.bincount(q_code, minlength=nv)
        score = np.bincount(q_code, weights=ds_v[:, j], minlength=nv)
        base = np.bincount(q_code, weights=base_v, minlength=nv)
        held = np.flatnonzero(support >= min_support)
        feat.append(np.full(held.size, col, dtype=np.int64))
        val.append(values[held])
        sc.append(score[held] / support[held])
        bs.append(base[held] / support[held])
        sup.append(support[held])
    return {
        "feature": np.concatenate(feat),
        "value": np.concatenate(val).astype(np.float64),
        "score": np.concatenate(sc),
        "baseline": np.concatenate(bs),
        "support": np.concatenate(sup).astype(np.int64),
    }


def encode_columns(x: np.ndarray, cols: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(distinct values, code of every node)`` of each column in ``cols``."""
    return [np.unique(x[:, c], return_inverse=True) for c in cols]


def arrays_to_table(arrays: dict[str, np.ndarray], names: Sequence[str]) -> pd.DataFrame:
    """Sorted discrimination DataFrame from :func:`score_arrays` output."""
    if arrays["feature"].size == 0:
        return _empty_table()
    table = pd.DataFrame(
        {
            "feature": pd.Series([names[c] for c in arrays["feature"]], dtype=object),
            "value": arrays["value"],
            "score": arrays["score"],
            "baseline": arrays["baseline"],
            "lift": arrays["score"] - arrays["baseline"],
            "support": arrays["support"],
        }
    )
    return table.sort_values(
        ["score", "lift", "feature", "value"], ascending=[False, False, True, True], kind="stable"
    ).reset_index(drop=True)


def score_table(
    x: np.ndarray,
    names: Sequence[str],
    cols: Sequence[int],
    queries: np.ndarray,
    ev: np.ndarray,
    pred: np.ndarray,
    test_nodes: np.ndarray,
    *,
    min_support: int = 1,
) -> pd.DataFrame:
    """:func:`score_arrays` as the sorted discrimination DataFrame."""
    if queries.size == 0:
        logger.warning("no test node has a counterfactual evidence; discrimination table empty")
    arrays = score_arrays(x, names, cols, queries, ev, pred, test_nodes, min_support=min_support)
    return arrays_to_table(arrays, names)


def feature_rank(table: pd.DataFrame, feature: str, by: str = "score") -> int:
    """1-based rank of ``feature`` in a discrimination table ordered by ``by`` (descending).

    A feature's rank is the rank of its best value; ties in ``by`` are broken by ``lift`` /
    ``score`` and then by name, as in :func:`discrimination_scores`. Raises if the feature is
    absent.
    """
    check_choice("by", by, ("score", "lift", "baseline"))
    check_frame("table", table, DISCRIMINATION_COLUMNS)
    other = "lift" if by != "lift" else "score"
    ordered = table.sort_values(
        [by, other, "feature", "value"], ascending=[False, False, True, True], kind="stable"
    )
    features = list(dict.fromkeys(ordered["feature"].tolist()))
    if feature not in features:
        raise InvalidInputError(
            f"feature {feature!r} is not in the discrimination table; present: {features[:20]}"
        )
    return features.index(feature) + 1
