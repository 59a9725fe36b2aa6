"""Readers of PyTorch Geometric *raw* dataset files, built on :mod:`gnnaudit.safe_io`.

gnnaudit reads the raw files a PyG dataset ships and builds the graph itself; it never loads
(or writes) PyG's ``processed/`` files, which PyG reads with a fallback to full unpickling.
Nothing is cached: every call reads the raw files it is given, so two folders never share a
result. Reading Cora's raw files takes about 0.2 s.

Formats (as PyG and its sources distribute them):

* Planetoid (Cora, CiteSeer, PubMed), ``raw/ind.<name>.<part>``: ``x``, ``tx``, ``allx`` are
  pickled ``csr_matrix`` feature rows of the labelled training nodes, the test nodes and all
  non-test nodes; ``y``, ``ty``, ``ally`` the matching one-hot label rows; ``graph`` a pickled
  ``defaultdict(list)`` adjacency; ``test.index`` the node id of each ``tx`` row, one per line.
  Node ``test.index[i]`` gets row ``i`` of ``tx`` / ``ty``; nodes ``0..len(allx)-1`` get
  ``allx`` / ``ally``; ids in the test range that are not listed (CiteSeer's isolated nodes)
  get zero features and class 0, as in PyG. Public split: train = the ``len(x)`` first nodes,
  validation = the next 500, test = ``test.index``.
* FacebookPagePage, ``raw/facebook.npz``: arrays ``features`` (n, d), ``target`` (n,),
  ``edges`` (E, 2).
* AmazonProducts, ``raw/``: ``adj_full.npz`` (CSR arrays ``data``, ``indices``, ``indptr``,
  ``shape``), ``feats.npy`` (n, d), ``class_map.json`` (node id -> class or 0/1 class list),
  ``role.json`` (``tr`` / ``va`` / ``te`` node id lists).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from gnnaudit._validation import as_float32, check_edge_index
from gnnaudit.datasets.columns import name_list
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import load_npy, load_npz, load_planetoid_pickle, load_text_array, read_json

__all__ = ["PLANETOID_PARTS", "read_planetoid_raw", "read_facebook_raw", "read_amazon_raw"]

#: the raw files of a Planetoid dataset, as ``ind.<name>.<part>``.
PLANETOID_PARTS: tuple[str, ...] = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
_PUBLIC_VAL_SIZE = 500
ARG = "root"


def _dense(obj: Any, path: Path) -> np.ndarray:
    arr = obj.toarray() if hasattr(obj, "toarray") else obj
    if not isinstance(arr, np.ndarray) or arr.ndim != 2:
        raise InvalidInputError(f"{ARG}: {str(path)!r} must hold a 2-D matrix")
    return arr


def _graph_edges(graph: Any, path: Path, num_nodes: int) -> torch.Tensor:
    if not isinstance(graph, dict):
        raise InvalidInputError(f"{ARG}: {str(path)!r} must hold the adjacency dict")
    neighbours = list(graph.values())
    lengths = np.fromiter(map(len, neighbours), dtype=np.int64, count=len(neighbours))
    src = np.repeat(np.fromiter(graph.keys(), dtype=np.int64, count=len(graph)), lengths)
    dst = np.fromiter(
        itertools.chain.from_iterable(neighbours), dtype=np.int64, count=int(lengths.sum())
    )
    edge_index = torch.from_numpy(np.stack([src, dst]))
    return check_edge_index(f"{ARG}: edges of {str(path)!r}", edge_index, num_nodes)


def read_planetoid_raw(raw_dir: str | Path, name: str) -> Data:
    """Build a Planetoid graph from ``raw_dir/ind.<name>.*`` (format in the module docstring).

    Returns Data with ``x`` (float32), one-hot-decoded ``y``, the raw ``edge_index`` (ids
    checked) and the public ``train_mask`` / ``val_mask`` / ``test_mask``.
    """
    raw = Path(raw_dir)
    paths = {part: raw / f"ind.{name}.{part}" for part in PLANETOID_PARTS}
    obj = {part: load_planetoid_pickle(ARG, paths[part]) for part in PLANETOID_PARTS[:-1]}
    x, tx, allx = (_dense(obj[k], paths[k]) for k in ("x", "tx", "allx"))
    y, ty, ally = (_dense(obj[k], paths[k]) for k in ("y", "ty", "ally"))
    test_index = load_text_array(ARG, paths["test.index"], dtype=np.int64, ndmin=1)
    n_all, n_test = allx.shape[0], tx.shape[0]
    problems = []
    if not x.shape[1] == tx.shape[1] == allx.shape[1]:
        problems.append(f"feature widths differ (x {x.shape}, tx {tx.shape}, allx {allx.shape})")
    if not y.shape[1] == ty.shape[1] == ally.shape[1]:
        problems.append(f"label widths differ (y {y.shape}, ty {ty.shape}, ally {ally.shape})")
    if ally.shape[0] != n_all or ty.shape[0] != n_test or y.shape[0] != x.shape[0]:
        problems.append("feature and label row counts differ")
    if x.shape[0] > n_all:
        problems.append(f"x has {x.shape[0]} rows but allx only {n_all}")
    if test_index.ndim != 1 or test_index.size != n_test:
        problems.append(f"test.index lists {test_index.size} ids for {n_test} rows of tx")
    elif n_test and (test_index.min() < n_all or np.unique(test_index).size != n_test):
        problems.append("test.index ids must be distinct and >= the number of allx rows")
    if problems:
        raise InvalidInputError(
            f"{ARG}: Planetoid raw files in {str(raw)!r}: {'; '.join(problems)}"
        )
    num_nodes = int(max(n_all + n_test, (test_index.max() + 1) if n_test else 0))
    features = np.zeros((num_nodes, allx.shape[1]), dtype=np.float32)
    features[:n_all] = allx
    features[test_index] = tx
    onehot = np.zeros((num_nodes, ally.shape[1]), dtype=np.float32)
    onehot[:n_all] = ally
    onehot[test_index] = ty
    masks = {}
    for key, ids in (
        ("train_mask", np.arange(x.shape[0])),
        ("val_mask", np.arange(x.shape[0], min(x.shape[0] + _PUBLIC_VAL_SIZE, num_nodes))),
        ("test_mask", test_index),
    ):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[torch.from_numpy(ids)] = True
        masks[key] = mask
    return Data(
        x=torch.from_numpy(features),
        y=torch.from_numpy(onehot.argmax(axis=1).astype(np.int64)),
        edge_index=_graph_edges(obj["graph"], paths["graph"], num_nodes),
        num_nodes=num_nodes,
        **masks,
    )


def _array(
    arrays: dict[str, np.ndarray], key: str, path: Path, ndim: int, kinds: str
) -> np.ndarray:
    if key not in arrays:
        raise InvalidInputError(
            f"{ARG}: {str(path)!r} lacks the array {key!r} (has {name_list(sorted(arrays))})"
        )
    arr = arrays[key]
    if arr.ndim != ndim or arr.dtype.kind not in kinds:
        raise InvalidInputError(
            f"{ARG}: array {key!r} of {str(path)!r} must be {ndim}-D of kind {kinds!r}, got "
            f"shape {arr.shape} and dtype {arr.dtype}"
        )
    return arr


def read_facebook_raw(raw_dir: str | Path) -> Data:
    """Build FacebookPagePage from ``raw_dir/facebook.npz`` (read without pickle)."""
    path = Path(raw_dir) / "facebook.npz"
    arrays = load_npz(ARG, path)
    x = _array(arrays, "features", path, 2, "biuf")
    y = _array(arrays, "target", path, 1, "iu")
    edges = _array(arrays, "edges", path, 2, "iu")
    if edges.shape[1] != 2 or y.shape[0] != x.shape[0]:
        raise InvalidInputError(
            f"{ARG}: {str(path)!r} needs edges of shape (E, 2) and one target per feature row; "
            f"got edges {edges.shape}, target {y.shape}, features {x.shape}"
        )
    n = x.shape[0]
    edge_index = check_edge_index(
        f"{ARG}: edges of {str(path)!r}", torch.from_numpy(edges.T.astype(np.int64)), n
    )
    return Data(
        x=torch.from_numpy(as_float32(f"{ARG}: {str(path)!r}", x)),
        y=torch.from_numpy(y.astype(np.int64)),
        edge_index=edge_index,
        num_nodes=n,
    )


def read_amazon_raw(raw_dir: str | Path) -> Data:
    """Build AmazonProducts from its four raw files (npz / npy without pickle, JSON)."""
    import scipy.sparse as sp

    raw = Path(raw_dir)
    adj_path = raw / "adj_full.npz"
    arrays = load_npz(ARG, adj_path)
    parts = [_array(arrays, k, adj_path, 1, "biuf") for k in ("data", "indices", "indptr", "shape")]
    x = load_npy(ARG, raw / "feats.npy")
    if x.ndim != 2 or x.dtype.kind not in "biuf":
        raise InvalidInputError(f"{ARG}: {str(raw / 'feats.npy')!r} must hold a numeric matrix")
    n = x.shape[0]
    try:
        adj = sp.csr_matrix(tuple(parts[:3]), shape=tuple(int(s) for s in parts[3]))
        adj.check_format(full_check=True)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(
            f"{ARG}: {str(adj_path)!r} is not a valid CSR matrix: {exc}"
        ) from exc
    coo = adj.tocoo()
    edge_index = check_edge_index(
        f"{ARG}: edges of {str(adj_path)!r}",
        torch.from_numpy(np.stack([coo.row, coo.col]).astype(np.int64)),
        n,
    )
    class_path = raw / "class_map.json"
    class_map = read_json(ARG, class_path)
    if not isinstance(class_map, dict) or len(class_map) != n:
        raise InvalidInputError(f"{ARG}: {str(class_path)!r} must map each of the {n} node ids")
    try:
        ids = np.fromiter(map(int, class_map.keys()), dtype=np.int64, count=n)
        labels = np.asarray(list(class_map.values()), dtype=np.int64)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(f"{ARG}: {str(class_path)!r}: {exc}") from exc
    if ids.min() < 0 or ids.max() >= n or np.unique(ids).size != n:
        raise InvalidInputError(f"{ARG}: {str(class_path)!r} must list node ids 0..{n - 1} once")
    y = np.empty_like(labels)
    y[ids] = labels
    role = read_json(ARG, raw / "role.json")
    masks = {}
    for key, field in (("train_mask", "tr"), ("val_mask", "va"), ("test_mask", "te")):
        try:
            members = np.asarray(role[field], dtype=np.int64).reshape(-1)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"{ARG}: {str(raw / 'role.json')!r} must hold a list of node ids under {field!r}"
            ) from exc
        if members.size and (members.min() < 0 or members.max() >= n):
            raise InvalidInputError(f"{ARG}: role {field!r} holds node ids outside 0..{n - 1}")
        mask = torch.zeros(n, dtype=torch.bool)
        mask[torch.from_numpy(members)] = True
        masks[key] = mask
    return Data(
        x=torch.from_numpy(as_float32(f"{ARG}: {str(raw / 'feats.npy')!r}", x)),
        y=torch.from_numpy(y),
        edge_index=edge_index,
        num_nodes=n,
        **masks,
    )
