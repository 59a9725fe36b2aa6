"""A graph on a shared path, partitioned for the workers of a Dask cluster.

:func:`write_graph_store` writes a folder every worker can read (a network file system, or the
local disk of a one-machine cluster):

* ``meta.json``: number of nodes, features and partitions;
* ``graph.pt``: the whole graph (``x``, ``edge_index``), read by the forward-pass tasks, which
  cut their partition's receptive field out of it (:mod:`gnnaudit.audit.distributed.forward`);
* ``parts.pt``: the partition id of every node;
* ``part-<p>.pt``: partition ``p``: its sorted node ids ``own``, their feature rows ``x`` and
  the edges *into* them (``edge_index``, global ids, original order), read by the KS tasks
  (:mod:`gnnaudit.audit.distributed.ks`); a worker reads only the partitions it owns.

The workers read these files themselves (:func:`load_part`, :func:`load_graph`, with
:func:`~gnnaudit.safe_io.safe_torch_load`): nothing larger than a file name is sent through
the scheduler. Partitions are contiguous ranges of node ids by default
(:func:`~gnnaudit.graph_ops.partitioned.contiguous_partition`), a METIS partition with
``parts="metis"`` (``pymetis``), or any labelling given as ``parts``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnaudit._validation import check_edge_index, check_int
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.partitioned import contiguous_partition, metis_partition
from gnnaudit.safe_io import atomic_file, check_input_dir, read_json, safe_torch_load

__all__ = [
    "GraphStore",
    "AddRows",
    "write_graph_store",
    "load_part",
    "load_graph",
    "load_parts",
]

META = "meta.json"
GRAPH = "graph.pt"
PARTS = "parts.pt"


def _part_name(p: int) -> str:
    return f"part-{p}.pt"


@dataclass(frozen=True)
class GraphStore:
    """A written store (picklable: a folder name and three numbers).

    Attributes
    ----------
    folder : the shared folder (an absolute path every worker can read).
    num_nodes, num_features, num_parts : sizes.
    """

    folder: str
    num_nodes: int
    num_features: int
    num_parts: int

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> GraphStore:
        """The store written to ``folder`` by :func:`write_graph_store`."""
        path = check_input_dir("store", folder)
        meta = read_json("store", path / META)
        try:
            return cls(
                str(path.resolve()),
                int(meta["num_nodes"]),
                int(meta["num_features"]),
                int(meta["num_parts"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"store {folder}: {META} must hold num_nodes, num_features and num_parts"
            ) from exc

    def path(self, name: str) -> Path:
        """A file of the store."""
        return Path(self.folder) / name


@dataclass(frozen=True)
class AddRows:
    """A change adding an array to every feature row: ``x + A``, ``A`` an ``(n, d)`` ``.npy``
    file on the shared path (e.g. the instability's seeded noise), memory-mapped by the
    workers, each reading only its own rows (nothing of size ``n`` goes through the
    scheduler)."""

    path: str

    def rows(self, ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Rows ``ids`` of the array (read from the file)."""
        arr = np.load(self.path, mmap_mode="r")
        return torch.as_tensor(np.ascontiguousarray(arr[ids.numpy()]), dtype=dtype)


def _save(tensors: dict[str, torch.Tensor], target: Path) -> None:
    with atomic_file(target, name="store", force=True) as tmp:
        torch.save(tensors, tmp)


def write_graph_store(
    data: Any, folder: str | os.PathLike[str], num_parts: int, parts: Any = None
) -> GraphStore:
    """Write ``data`` (``x``, ``edge_index``) to ``folder`` in ``num_parts`` partitions
    (module docstring); ``parts``: ``"contiguous"`` (ranges of node ids, the default),
    ``"metis"`` (:func:`~gnnaudit.graph_ops.partitioned.metis_partition`, seed 0; needs the
    ``metis`` extra) or one partition id ``0..num_parts-1`` per node. Existing store files in
    ``folder`` are replaced. Memory: the graph plus one partition's rows and edges at a time."""
    x, edge_index = getattr(data, "x", None), getattr(data, "edge_index", None)
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.size(0) == 0:
        raise InvalidInputError("data.x must be a 2-D tensor with at least one node")
    n = int(x.size(0))
    edge_index = check_edge_index("data.edge_index", edge_index, n).cpu()
    num_parts = check_int("num_parts", num_parts, minimum=1, maximum=n)
    if parts is None or (isinstance(parts, str) and parts == "contiguous"):
        parts = contiguous_partition(n, num_parts)
    elif isinstance(parts, str) and parts == "metis":
        parts = metis_partition(edge_index, n, num_parts)
    elif isinstance(parts, str):
        raise InvalidInputError(
            f"parts must be 'contiguous', 'metis' or one partition id per node, got {parts!r}"
        )
    parts = torch.as_tensor(parts)
    if parts.shape != (n,) or parts.is_floating_point() or parts.dtype == torch.bool:
        raise InvalidInputError(f"parts must hold one integer partition id per node ({n})")
    if n and (int(parts.min()) < 0 or int(parts.max()) >= num_parts):
        raise InvalidInputError(f"parts must lie in [0, {num_parts - 1}]")
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    x = x.detach().cpu()
    _save({"x": x, "edge_index": edge_index}, root / GRAPH)
    _save({"parts": parts.to(torch.long)}, root / PARTS)
    target_part = parts[edge_index[1]]
    for p in range(num_parts):
        own = torch.nonzero(parts == p).view(-1)
        _save(
            {"own": own, "x": x[own], "edge_index": edge_index[:, target_part == p]},
            root / _part_name(p),
        )
    meta = {"num_nodes": n, "num_features": int(x.size(1)), "num_parts": num_parts}
    with atomic_file(root / META, name="store", force=True) as tmp:
        tmp.write_text(json.dumps(meta))
    return GraphStore.open(root)


def load_part(store: GraphStore, p: int) -> dict[str, torch.Tensor]:
    """Partition ``p`` of ``store`` (``own``, ``x``, ``edge_index``), read on the caller."""
    obj = safe_torch_load(store.path(_part_name(p)), name="store partition")
    if not isinstance(obj, dict) or set(obj) != {"own", "x", "edge_index"}:
        raise InvalidInputError(f"store partition {p} of {store.folder} is not a gnnaudit store")
    return obj


def load_graph(store: GraphStore) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, edge_index)`` of the whole graph of ``store``, read on the caller."""
    obj = safe_torch_load(store.path(GRAPH), name="store graph")
    if not isinstance(obj, dict) or set(obj) != {"x", "edge_index"}:
        raise InvalidInputError(f"{store.folder}/{GRAPH} is not a gnnaudit store graph")
    return obj["x"], obj["edge_index"]


def load_parts(store: GraphStore) -> torch.Tensor:
    """The partition id of every node (``parts.pt``), read on the caller."""
    obj = safe_torch_load(store.path(PARTS), name="store parts")
    if not isinstance(obj, dict) or set(obj) != {"parts"}:
        raise InvalidInputError(f"{store.folder}/{PARTS} is not a gnnaudit store file")
    parts: torch.Tensor = obj["parts"]
    return parts
