"""Verifying prediction errors with global counterfactual evidences (CE paper, Sec. 7.2).

The top global evidences are pairs of very similar test nodes that the model labels
differently, so at least one node of each pair sits near the decision boundary. The model's
accuracy on the distinct nodes of the top-k pairs,

.. math::

    \\mathrm{acc}_k = \\frac{1}{|V_k|} \\sum_{v \\in V_k} \\mathbb{I}(\\hat y_v = y_v), \\qquad
    V_k = \\bigcup_{i \\le k} \\{u_i, v_i\\},

is expected to be well below the accuracy on the whole test set for small ``k`` and to approach
it as ``k`` grows (paper Fig. 6).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit._validation import check_array, check_int
from gnnaudit.audit.evidence_inputs import (
    REQUIRED_GLOBAL_COLUMNS,
    check_frame,
    fitted_test_nodes,
    is_estimator,
    mask_nodes,
)
from gnnaudit.errors import InvalidInputError

__all__ = ["error_verification", "evidence_nodes", "ERROR_COLUMNS"]

logger = logging.getLogger(__name__)

ERROR_COLUMNS = ["k", "pairs", "nodes", "accuracy_in_evidence", "accuracy_overall"]


def evidence_nodes(pairs: pd.DataFrame, k: int | None = None) -> np.ndarray:
    """Distinct node ids of the first ``k`` global pairs, in order of first appearance."""
    check_frame("pairs", pairs, REQUIRED_GLOBAL_COLUMNS)
    top = pairs if k is None else pairs.iloc[:k]
    flat = np.stack(
        [top["node_u"].to_numpy(dtype=np.int64), top["node_v"].to_numpy(dtype=np.int64)], axis=1
    ).ravel()
    _, first = np.unique(flat, return_index=True)
    return flat[np.sort(first)]


def error_verification(
    evidence: Any,
    predictions: Any,
    labels: Any,
    ks: Sequence[int] = (10, 20, 50, 100, 200, 500),
    *,
    mask: Any = None,
) -> pd.DataFrame:
    """Accuracy on the nodes of the top-k global evidences vs the whole test set (Sec. 7.2).

    Parameters
    ----------
    evidence : a fitted :class:`~gnnaudit.audit.CounterfactualEvidence` (``global_evidence`` is
        called once with ``max(ks)``; the test set is its test nodes) or a global-evidence
        DataFrame (columns ``node_u, node_v, similarity``, sorted by similarity descending,
        as ``global_evidence`` returns it); then ``mask`` gives the test set.
    predictions, labels : (n,) predicted and true class of every node.
    ks : numbers of top pairs to evaluate (positive integers).
    mask : test nodes (bool mask or ids), required with a DataFrame.

    Returns
    -------
    DataFrame ``k, pairs, nodes, accuracy_in_evidence, accuracy_overall``: ``pairs`` is the
    number of pairs actually used (fewer than ``k`` when fewer exist; logged), ``nodes`` the
    number of distinct nodes among them. Rows with no pair at all are dropped (logged).
    Cost O(P log P) for P = max(ks) pairs.
    """
    pred = check_array("predictions", predictions, ndim=1, dtype=np.int64)
    y = check_array("labels", labels, ndim=1, dtype=np.int64)
    n = pred.shape[0]
    if y.shape[0] != n:
        raise InvalidInputError(
            f"labels must have the same length as predictions ({n}), got {y.shape[0]}"
        )
    if isinstance(ks, (int, np.integer)):
        ks = [ks]
    ks_list = sorted({check_int("ks entry", v, minimum=1) for v in ks})
    if not ks_list:
        raise InvalidInputError("ks must hold at least one positive integer, got an empty list")

    if is_estimator(evidence):
        test_nodes = fitted_test_nodes(evidence)
        pairs = check_frame(
            "evidence.global_evidence()",
            evidence.global_evidence(k=ks_list[-1]),
            REQUIRED_GLOBAL_COLUMNS,
        )
    else:
        pairs = check_frame("evidence", evidence, REQUIRED_GLOBAL_COLUMNS)
        if mask is None:
            raise InvalidInputError(
                "mask (the test nodes) is required when evidence is a DataFrame"
            )
        test_nodes = mask_nodes("mask", mask, n)
    if test_nodes.size == 0:
        raise InvalidInputError("the test set is empty; error verification needs test nodes")
    if test_nodes.max() >= n:
        raise InvalidInputError(
            f"test node ids reach {test_nodes.max()} but predictions has {n} entries"
        )
    correct = pred == y
    overall = float(correct[test_nodes].mean())

    u = pairs["node_u"].to_numpy(dtype=np.int64)
    v = pairs["node_v"].to_numpy(dtype=np.int64)
    if u.size and (min(u.min(), v.min()) < 0 or max(u.max(), v.max()) >= n):
        raise InvalidInputError(f"evidence holds node ids outside [0, {n - 1}]")
    # first pair index in which each distinct node appears -> cumulative counts per k
    flat = np.stack([u, v], axis=1).ravel()
    nodes, first = np.unique(flat, return_index=True)
    first_pair = first // 2
    order = np.argsort(first_pair, kind="stable")
    first_pair = first_pair[order]
    cum_correct = np.concatenate([[0], np.cumsum(correct[nodes[order]])])

    rows = []
    if u.size == 0:
        logger.warning("no global evidence pair exists; the error verification table is empty")
    for k in ks_list:
        used = min(k, u.size)
        if used == 0:
            continue
        if used < k:
            logger.info("only %d global pairs exist (k=%d requested)", used, k)
        count = int(np.searchsorted(first_pair, used, side="left"))
        rows.append((k, used, count, cum_correct[count] / count, overall))
    return pd.DataFrame(rows, columns=ERROR_COLUMNS).astype(
        {"k": np.int64, "pairs": np.int64, "nodes": np.int64}
    )
