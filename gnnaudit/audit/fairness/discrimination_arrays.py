r"""The array kernel of the discrimination scores (CE paper Eq. 12, with the baseline and the
lift of :mod:`gnnaudit.audit.fairness.discrimination`): :func:`score_arrays` from coded
features, evidence ids and predictions, and :func:`arrays_to_table`, the sorted table.

No validation and no pandas in the kernel: the audit callback
(:class:`~gnnaudit.training.CounterfactualAuditCallback`) calls it every epoch, so it stays
cheap. Three steps: each query's candidate pool (test nodes of another predicted class,
:func:`candidate_classes`), each query's score per column (:func:`query_scores`, the (q, k, F)
comparison in feature chunks of at most :data:`CHUNK_CELLS` cells) and, per column, the mean
score and baseline of each value over the queries holding it (:func:`value_scores`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gnnaudit.audit.fairness.feature_coding import FeatureCoding
from gnnaudit.errors import InvalidInputError

__all__ = [
    "score_arrays",
    "arrays_to_table",
    "candidate_classes",
    "query_scores",
    "value_scores",
    "CandidatePool",
    "DISCRIMINATION_COLUMNS",
    "CHUNK_CELLS",
]

#: Columns of the table :func:`~gnnaudit.audit.fairness.discrimination.discrimination_scores`
#: returns.
DISCRIMINATION_COLUMNS = ["feature", "value", "score", "baseline", "lift", "support"]

#: memory bound (number of array cells) of one feature chunk of the (q, k, F) comparison
CHUNK_CELLS = 8_000_000


@dataclass(frozen=True)
class CandidatePool:
    """The predicted classes of the candidate pool: ``pool_class`` (class index of each test
    node), ``query_class`` (of each query), ``n_classes`` and ``n_candidates`` (test nodes of
    another class than the query's, per query)."""

    pool_class: np.ndarray
    query_class: np.ndarray
    n_classes: int
    n_candidates: np.ndarray


def candidate_classes(
    pred: np.ndarray, queries: np.ndarray, test_nodes: np.ndarray
) -> CandidatePool:
    """Each query's candidate pool among ``test_nodes`` (another predicted class); raises
    :class:`~gnnaudit.errors.InvalidInputError` when a query's class is not in the pool or a
    query has no candidate."""
    classes, pool_cls = np.unique(pred[test_nodes], return_inverse=True)
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
    return CandidatePool(pool_cls.reshape(-1), q_cls, int(classes.size), n_cand)


def query_scores(codes: np.ndarray, queries: np.ndarray, evidence: np.ndarray) -> np.ndarray:
    """``(q, F)``: per query and coded column, the share of its evidences (``-1`` padding
    left out) whose code differs from the query's (Eq. 12's :math:`DS_v`), in feature chunks
    of at most :data:`CHUNK_CELLS` cells."""
    valid = evidence >= 0
    n_valid = valid.sum(axis=1)
    if np.any(n_valid == 0):
        raise InvalidInputError("every query needs at least one evidence")
    ev_safe = np.where(valid, evidence, 0)
    n_cols = codes.shape[1]
    chunk = max(1, CHUNK_CELLS // max(1, evidence.size))
    ds_v = np.empty((queries.size, n_cols), dtype=np.float64)
    for s in range(0, n_cols, chunk):
        cq = codes[queries, s : s + chunk]  # (q, F)
        ce = codes[:, s : s + chunk][ev_safe]  # (q, k, F)
        mism = (ce != cq[:, None, :]) & valid[:, :, None]
        ds_v[:, s : s + chunk] = mism.sum(axis=1) / n_valid[:, None]
    return ds_v


def value_scores(
    node_code: np.ndarray,
    n_values: int,
    ds_v: np.ndarray,
    queries: np.ndarray,
    test_nodes: np.ndarray,
    pool: CandidatePool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of one coded column: the summed scores, summed baselines and the number of queries of
    each of its ``n_values`` values (the baseline of a query: the share of its candidates
    with another value)."""
    q_code = node_code[queries]
    n_cls = pool.n_classes
    counts = np.bincount(
        pool.pool_class * n_values + node_code[test_nodes], minlength=n_cls * n_values
    ).reshape(n_cls, n_values)
    same = counts.sum(axis=0)[q_code] - counts[pool.query_class, q_code]
    base_v = 1.0 - same / pool.n_candidates
    support = np.bincount(q_code, minlength=n_values)
    score = np.bincount(q_code, weights=ds_v, minlength=n_values)
    base = np.bincount(q_code, weights=base_v, minlength=n_values)
    return score, base, support


def score_arrays(
    coding: FeatureCoding,
    queries: np.ndarray,
    evidence: np.ndarray,
    pred: np.ndarray,
    test_nodes: np.ndarray,
    *,
    min_support: int = 1,
) -> dict[str, np.ndarray]:
    """Array core of :func:`~gnnaudit.audit.fairness.discrimination.discrimination_scores` (no
    validation, unsorted).

    ``queries`` (q,) node ids; ``evidence`` (q, k) evidence node ids padded with -1 (each row
    with at least one evidence); ``pred`` (n,) predictions (valid on ``test_nodes``);
    ``test_nodes`` the candidate pool of the baseline. Returns arrays ``column`` (position in
    ``coding``), ``code``, ``score``, ``baseline``, ``support`` of the values held by at least
    ``min_support`` queries.
    """
    n_cols = coding.codes.shape[1]
    if queries.size == 0 or n_cols == 0:
        return {
            "column": np.zeros(0, dtype=np.int64),
            "code": np.zeros(0, dtype=np.int64),
            "score": np.zeros(0),
            "baseline": np.zeros(0),
            "support": np.zeros(0, dtype=np.int64),
        }
    ds_v = query_scores(coding.codes, queries, evidence)
    pool = candidate_classes(pred, queries, test_nodes)
    col_o, code_o, sc, bs, sup = [], [], [], [], []
    for j in range(n_cols):
        node_code = coding.codes[:, j].astype(np.int64)
        score, base, support = value_scores(
            node_code, len(coding.labels[j]), ds_v[:, j], queries, test_nodes, pool
        )
        held = np.flatnonzero(support >= min_support)
        col_o.append(np.full(held.size, j, dtype=np.int64))
        code_o.append(held.astype(np.int64))
        sc.append(score[held] / support[held])
        bs.append(base[held] / support[held])
        sup.append(support[held])
    return {
        "column": np.concatenate(col_o),
        "code": np.concatenate(code_o),
        "score": np.concatenate(sc),
        "baseline": np.concatenate(bs),
        "support": np.concatenate(sup).astype(np.int64),
    }


def arrays_to_table(arrays: dict[str, np.ndarray], coding: FeatureCoding) -> pd.DataFrame:
    """Sorted discrimination DataFrame (:data:`DISCRIMINATION_COLUMNS`) of :func:`score_arrays`
    output: by ``score`` descending as in the paper, ties by larger ``lift``, then feature and
    value."""
    cols, codes = arrays["column"], arrays["code"]
    table = pd.DataFrame(
        {
            "feature": pd.Series([coding.names[c] for c in cols], dtype=object),
            "value": pd.Series(
                [coding.labels[c][v] for c, v in zip(cols, codes, strict=True)], dtype=object
            ),
            "score": arrays["score"].astype(np.float64),
            "baseline": arrays["baseline"].astype(np.float64),
            "lift": (arrays["score"] - arrays["baseline"]).astype(np.float64),
            "support": arrays["support"].astype(np.int64),
        },
        columns=DISCRIMINATION_COLUMNS,
    )
    table["_order"] = cols * 100_000 + codes
    table = table.sort_values(
        ["score", "lift", "feature", "_order"],
        ascending=[False, False, True, True],
        kind="stable",
    )
    return table.drop(columns="_order").reset_index(drop=True)
