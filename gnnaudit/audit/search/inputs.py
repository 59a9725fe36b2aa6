"""Inputs the audits share: a fitted :class:`~gnnaudit.audit.CounterfactualEvidence` or its
result DataFrames, node masks and node features, validated into plain numpy arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit._validation import check_array
from gnnaudit.audit.search.evidence_table import NODE_U, NODE_V, RANK, SIMILARITY
from gnnaudit.errors import InvalidInputError

#: columns a local evidence table must have to be audited (``node_u`` = query)
REQUIRED_LOCAL_COLUMNS = (NODE_U, NODE_V, RANK)
#: columns a global evidence table must have to be audited
REQUIRED_GLOBAL_COLUMNS = (NODE_U, NODE_V, SIMILARITY)


def is_estimator(evidence: Any) -> bool:
    """Whether ``evidence`` is a CounterfactualEvidence-like estimator (not a DataFrame)."""
    return hasattr(evidence, "local_evidence") and hasattr(evidence, "global_evidence")


def to_numpy(value: Any) -> np.ndarray:
    """A numpy array of ``value`` (a tensor is detached and moved to the CPU first)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def fitted_test_nodes(estimator: Any) -> np.ndarray:
    """Global ids of the test nodes a fitted CounterfactualEvidence searches over."""
    for name in ("test_nodes_", "node_ids_"):
        value = getattr(estimator, name, None)
        if value is not None:
            return np.asarray(to_numpy(value), dtype=np.int64)
    space = getattr(estimator, "space_", None)
    if space is not None and getattr(space, "node_ids", None) is not None:
        return np.asarray(space.node_ids, dtype=np.int64)
    mask = getattr(estimator, "mask_", None)
    if mask is not None:
        return np.flatnonzero(to_numpy(mask)).astype(np.int64)
    from gnnaudit.errors import NotFittedError

    raise NotFittedError(
        f"{type(estimator).__name__} is not fitted yet (no test nodes found); call fit first"
    )


def fitted_predictions(estimator: Any, num_nodes: int) -> np.ndarray:
    """Predicted class of every node (``-1`` where unknown) from a fitted estimator."""
    pred = getattr(estimator, "predictions_", None)
    if pred is None:
        from gnnaudit.errors import NotFittedError

        raise NotFittedError(
            f"{type(estimator).__name__} is not fitted yet (no predictions_); call fit first"
        )
    pred = to_numpy(pred).astype(np.int64).ravel()
    if pred.shape[0] == num_nodes:
        return pred
    nodes = fitted_test_nodes(estimator)
    if pred.shape[0] == nodes.shape[0]:
        full = np.full(num_nodes, -1, dtype=np.int64)
        full[nodes] = pred
        return full
    raise InvalidInputError(
        f"evidence.predictions_ has {pred.shape[0]} entries; expected {num_nodes} (one per node) "
        f"or {nodes.shape[0]} (one per test node)"
    )


def mask_nodes(name: str, mask: Any, num_nodes: int) -> np.ndarray:
    """Sorted unique node ids selected by ``mask``: a boolean mask of shape ``(num_nodes,)`` or
    node ids in ``[0, num_nodes)``; anything else raises InvalidInputError naming ``name``."""
    arr = to_numpy(mask)
    if arr.dtype == bool:
        if arr.shape != (num_nodes,):
            raise InvalidInputError(
                f"{name} must be a boolean mask of shape ({num_nodes},), got shape {arr.shape}"
            )
        return np.flatnonzero(arr).astype(np.int64)
    ids = check_array(name, arr, ndim=1, dtype=np.int64, min_rows=0)
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        raise InvalidInputError(
            f"{name} holds node ids in [{ids.min()}, {ids.max()}], allowed [0, {num_nodes - 1}]"
        )
    return np.unique(ids)


def check_frame(name: str, frame: Any, columns: Sequence[str]) -> pd.DataFrame:
    """``frame`` if it is a DataFrame holding ``columns``, else InvalidInputError naming ``name``."""
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInputError(
            f"{name} must be a fitted CounterfactualEvidence or a pandas DataFrame, "
            f"got {type(frame).__name__}"
        )
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"{name} DataFrame lacks column(s) {missing}; it needs {list(columns)} "
            f"(got {list(frame.columns)})"
        )
    return frame


def check_frame_ids(frame: pd.DataFrame, columns: Sequence[str], num_nodes: int) -> None:
    """Raise InvalidInputError if a node id in ``columns`` lies outside ``[0, num_nodes)``."""
    for col in columns:
        ids = frame[col].to_numpy(dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
            raise InvalidInputError(
                f"evidence column {col!r} holds node ids in [{ids.min()}, {ids.max()}], "
                f"outside [0, {num_nodes - 1}]"
            )


def predictions_from_frame(
    frame: pd.DataFrame, pairs: Sequence[tuple[str, str]], num_nodes: int
) -> np.ndarray:
    """Predicted class of every node (``-1`` where unknown) read from an evidence DataFrame:
    ``pairs`` names its ``(node column, prediction column)`` pairs."""
    pred = np.full(num_nodes, -1, dtype=np.int64)
    for node_col, pred_col in pairs:
        if node_col in frame.columns and pred_col in frame.columns:
            pred[frame[node_col].to_numpy(dtype=np.int64)] = frame[pred_col].to_numpy(
                dtype=np.int64
            )
    return pred


def node_features(data: Any) -> tuple[np.ndarray, list[str]]:
    """``(x, names)``: ``data.x`` as float64 numpy and the feature names
    (``data.feature_names`` when it matches, else ``x0, x1 ...``)."""
    x = getattr(data, "x", None)
    if x is None:
        raise InvalidInputError("data must carry node features data.x, got None")
    x = check_array("data.x", x, ndim=2, dtype=np.float64)
    names = getattr(data, "feature_names", None)
    if names is None or len(names) != x.shape[1]:
        names = [f"x{i}" for i in range(x.shape[1])]
    return x, [str(n) for n in names]
