r"""The one evidence-table schema, shared by every table of counterfactual evidences.

Local evidences (per query node, its top-k most similar nodes with a different prediction) and
global evidences (the top-k most similar differently-predicted pairs of the graph) come out as
DataFrames with the same columns, in this order (:data:`EVIDENCE_COLUMNS`):

``node_u``
    local: the query node; global: the first node of the pair.
``node_v``
    local: the evidence node; global: the second node of the pair.
``pred_u``, ``pred_v``
    the model's predicted class of ``node_u`` and of ``node_v``.
``similarity``
    the kernel similarity :math:`KS(u, v) = \cos(\mathbf{x}^{agg}_u, \mathbf{x}^{agg}_v)`
    (CE paper Eq. 7).
``rank``
    1 = most similar. Local: the rank within the query (it restarts at 1 for every
    ``node_u``); global: the rank over the whole table.

**Node ids.** When the graph came with its own node ids (``data.node_ids``, kept by
:func:`~gnnaudit.datasets.read_graph` and the CSV / npz loaders, e.g. ``"user_17"``),
``node_u`` and ``node_v`` hold those ids, as they were read (text); otherwise they hold the
integer node index (the row of ``data.x``). The typed results
(:class:`~gnnaudit.audit.search.results.LocalEvidence` / ``GlobalEvidence``) keep the integer
indices that the audits compute with; :func:`table_nodes` maps a table's ids back to them. A
table read back from CSV may have turned numeric-looking ids into numbers: with the graph's ids
every value is matched as text (``str(value)``), so ``100`` finds ``"100"`` (but ``7`` does not
find ``"007"``: read such files with ``dtype=str``).

**Extra columns** may follow the six above only when they carry meaning; the report's pair
table adds ``label_u``, ``label_v`` (true classes, ``-1`` unknown) and ``differing_features``
(number of feature columns where the two nodes differ).

A table does not record whether it is local or global: a local table repeats ``rank`` values
(every query has a rank 1) unless it holds a single query, and the statistics that differ
between the two (the average similarity, Eq. 11) agree on one query, so :func:`is_local_table`
tells them apart by that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit.errors import InvalidInputError

__all__ = [
    "NODE_U",
    "NODE_V",
    "PRED_U",
    "PRED_V",
    "SIMILARITY",
    "RANK",
    "EVIDENCE_COLUMNS",
    "evidence_frame",
    "graph_user_ids",
    "user_id_array",
    "is_local_table",
    "table_nodes",
    "user_id_indices",
]

NODE_U = "node_u"
NODE_V = "node_v"
PRED_U = "pred_u"
PRED_V = "pred_v"
SIMILARITY = "similarity"
RANK = "rank"
#: the columns of every evidence table, in order
EVIDENCE_COLUMNS = [NODE_U, NODE_V, PRED_U, PRED_V, SIMILARITY, RANK]


def graph_user_ids(data: Any, num_nodes: int | None = None) -> np.ndarray | None:
    """The graph's own node ids (``data.node_ids``) as an object array of text, or None.

    ``num_nodes`` defaults to the number of rows of ``data.x`` (else ``data.num_nodes``); ids
    of another length (e.g. a subgraph that kept the parent's list) raise InvalidInputError,
    since they no longer name the nodes.
    """
    ids = getattr(data, "node_ids", None)
    if ids is None:
        return None
    if num_nodes is None:
        x = getattr(data, "x", None)
        num_nodes = int(x.shape[0]) if x is not None else getattr(data, "num_nodes", None)
    return user_id_array("data.node_ids", ids, num_nodes)


def user_id_array(name: str, ids: Any, num_nodes: int | None = None) -> np.ndarray:
    """``ids`` (one id per node, unique) as an object array of text; InvalidInputError naming
    ``name`` otherwise (not a sequence, another length than ``num_nodes``, repeated ids)."""
    if isinstance(ids, str) or not hasattr(ids, "__len__"):
        raise InvalidInputError(
            f"{name} must be a list of node ids (one per node), got {type(ids).__name__}"
        )
    out = pd.Series(list(ids), dtype=object).astype(str).to_numpy(dtype=object)
    if num_nodes is not None and out.size != int(num_nodes):
        raise InvalidInputError(
            f"{name} has {out.size} entries but the graph has {num_nodes} nodes; the ids no "
            "longer name the nodes (give one id per node, or None)"
        )
    repeated = pd.Index(out).duplicated()
    if repeated.any():
        raise InvalidInputError(
            f"{name} must be unique; {out[repeated][0]!r} repeats ({int(repeated.sum())} repeats)"
        )
    return out


def _named(index: np.ndarray, user_ids: np.ndarray | None) -> np.ndarray:
    index = np.asarray(index, dtype=np.int64)
    if user_ids is None:
        return index
    return np.asarray(user_ids, dtype=object)[index]


def evidence_frame(
    node_u: Any,
    node_v: Any,
    pred_u: Any,
    pred_v: Any,
    similarity: Any,
    rank: Any,
    *,
    user_ids: np.ndarray | None = None,
    extra: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """An evidence table (:data:`EVIDENCE_COLUMNS`, then ``extra`` in its order).

    ``node_u`` / ``node_v`` are integer node indices; with ``user_ids`` (the graph's ids, see
    :func:`graph_user_ids`) the table shows ``user_ids[node_u]`` / ``user_ids[node_v]``.
    Equal-length 1-D inputs; the builder trusts its callers (the library's producers).
    """
    columns = {
        NODE_U: _named(node_u, user_ids),
        NODE_V: _named(node_v, user_ids),
        PRED_U: np.asarray(pred_u, dtype=np.int64),
        PRED_V: np.asarray(pred_v, dtype=np.int64),
        SIMILARITY: np.asarray(similarity, dtype=np.float64),
        RANK: np.asarray(rank, dtype=np.int64),
    }
    clash = sorted(set(extra or {}) & set(columns))
    if clash:
        raise InvalidInputError(f"extra columns must not repeat the schema's; got {clash}")
    columns.update(dict(extra or {}))
    return pd.DataFrame(columns, columns=list(columns))


def table_nodes(frame: pd.DataFrame, column: str, user_ids: np.ndarray | None) -> np.ndarray:
    """The integer node indices of ``frame[column]``.

    With ``user_ids`` (the graph's own ids) every value is matched as text against them; an
    unknown id raises InvalidInputError naming it. Without, the values must be integers (node
    indices) and are returned as int64. Range checks against the graph are the caller's.
    """
    values = frame[column].to_numpy()
    if user_ids is not None:
        return user_id_indices(f"evidence column {column!r}", values, user_ids)
    whole = values.dtype.kind == "f" and bool(np.all(np.isfinite(values) & (values % 1 == 0)))
    if values.size and values.dtype.kind not in "iu" and not whole:
        raise InvalidInputError(
            f"evidence column {column!r} must hold integer node indices when the graph has no "
            f"node ids (data.node_ids), got {values.dtype} values such as {values[0]!r}"
        )
    return values.astype(np.int64)


def user_id_indices(name: str, values: Any, user_ids: np.ndarray) -> np.ndarray:
    """Integer node indices of ``values`` (any 1-D array-like) matched as text against the
    graph's ids ``user_ids``; an unknown id raises InvalidInputError naming ``name`` and it."""
    text = pd.Series(np.asarray(values, dtype=object).reshape(-1), dtype=object).astype(str)
    pos = pd.Index(np.asarray(user_ids, dtype=object)).get_indexer(text.to_numpy(dtype=object))
    if (pos < 0).any():
        bad = text.to_numpy(dtype=object)[pos < 0]
        raise InvalidInputError(
            f"{name} holds {bad.size} id(s) that are not node ids of the graph "
            f"(data.node_ids), e.g. {bad[0]!r}; ids are matched as text"
        )
    return pos.astype(np.int64)


def is_local_table(frame: pd.DataFrame) -> bool:
    """Whether an evidence table is local: its ``rank`` values repeat (see the module)."""
    return bool(frame[RANK].duplicated().any())
