"""A Lightning data module serving one PyG graph, full-batch or as neighbour-sampled mini-batches.

Full batch (``batch_size=None``, the default): every loader yields the whole ``Data`` once per
epoch; the model scores the mask of the stage (``train_mask``, ``val_mask``, ``test_mask``).

Mini-batches (``batch_size`` given), ``batch_size`` seed nodes of the stage's mask at a time:

* ``num_neighbors=None`` (default): exact computation subgraphs, the full ``num_hops``-hop
  in-neighbourhood of the seeds (:mod:`gnnaudit.training.khop_loader`); no optional package
  needed, and the seeds' logits equal their full-graph logits.
* ``num_neighbors=[k_1, ..., k_L]``: PyG's ``NeighborLoader`` samples ``k_l`` neighbours per node
  and hop. It needs the optional package ``pyg-lib`` or ``torch-sparse``; without either, the
  constructor raises :class:`~gnnaudit.errors.InvalidInputError` instead of failing inside the
  first epoch.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import cast

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset
from torch_geometric.data import Data

from gnnaudit._validation import (
    MAX_NUM_HOPS,
    check_edge_index,
    check_finite_tensor,
    check_int,
    check_seed,
)
from gnnaudit.errors import InvalidInputError
from gnnaudit.training.khop_loader import khop_loader

__all__ = ["GraphDataModule", "check_node_data", "neighbor_sampling_available"]

_STAGES = ("train", "val", "test")


def neighbor_sampling_available() -> bool:
    """Whether PyG's ``NeighborLoader`` can run (``pyg-lib`` or ``torch-sparse`` installed)."""
    import torch_geometric.typing as pyg_typing

    return bool(pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE)


def check_node_data(data: Data, name: str = "data") -> Data:
    """Validate a node-classification graph: float ``x``, integer ``y`` (1-D, >= 0), a valid
    ``edge_index`` and boolean train / val / test masks of length ``num_nodes``."""
    if not isinstance(data, Data):
        raise InvalidInputError(
            f"{name} must be a torch_geometric.data.Data, got {type(data).__name__}"
        )
    x, y = getattr(data, "x", None), getattr(data, "y", None)
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or not x.is_floating_point():
        raise InvalidInputError(f"{name}.x must be a 2-D float tensor")
    check_finite_tensor(f"{name}.x", x)
    n = x.size(0)
    if not isinstance(y, torch.Tensor) or y.dim() != 1 or y.is_floating_point() or y.size(0) != n:
        raise InvalidInputError(f"{name}.y must be a 1-D integer tensor of length {n}")
    if n and int(y.min()) < 0:
        raise InvalidInputError(f"{name}.y must hold class ids >= 0, got {int(y.min())}")
    check_edge_index(f"{name}.edge_index", data.edge_index, n)
    for stage in _STAGES:
        mask = getattr(data, f"{stage}_mask", None)
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != (n,):
            raise InvalidInputError(
                f"{name}.{stage}_mask must be a boolean tensor of length {n} "
                "(see gnnaudit.datasets.attach_masks)"
            )
    if not bool(data.train_mask.any()):
        raise InvalidInputError(f"{name}.train_mask selects no node")
    return data


def _single(items: list[Data]) -> Data:
    """A shallow copy of the one graph: Lightning moves the batch to the accelerator with
    ``Data.to``, which replaces tensors in place; on the copy, the caller's graph stays where
    it is (same tensors, no memory copied)."""
    return copy.copy(items[0])


class GraphDataModule(L.LightningDataModule):
    """Serve one graph to a Lightning ``Trainer``.

    Parameters
    ----------
    data : graph with ``x``, ``y``, ``edge_index`` and the three masks.
    batch_size : ``None`` for full-batch training, else the number of seed nodes per mini-batch.
    num_neighbors : neighbours sampled per hop with ``NeighborLoader``; ``None`` (default) serves
        exact full-neighbourhood subgraphs instead.
    num_hops : message-passing layers of the model (exact subgraphs only; default 3).
    num_workers : data-loader worker processes (mini-batches only).
    seed : seed of the mini-batch shuffling.
    """

    def __init__(
        self,
        data: Data,
        batch_size: int | None = None,
        num_neighbors: Sequence[int] | None = None,
        num_workers: int = 0,
        seed: int = 0,
        num_hops: int = 3,
    ) -> None:
        super().__init__()
        self.data = check_node_data(data)
        self.batch_size = (
            None if batch_size is None else check_int("batch_size", batch_size, minimum=1)
        )
        self.num_neighbors = None
        if num_neighbors is not None:
            self.num_neighbors = [
                check_int(f"num_neighbors[{i}]", k, minimum=-1) for i, k in enumerate(num_neighbors)
            ]
            if not self.num_neighbors:
                raise InvalidInputError("num_neighbors must list at least one hop")
        self.num_hops = check_int("num_hops", num_hops, minimum=1, maximum=MAX_NUM_HOPS)
        self.num_workers = check_int("num_workers", num_workers, minimum=0)
        self.seed = check_seed("seed", seed)
        sampled = self.batch_size is not None and self.num_neighbors is not None
        if sampled and not neighbor_sampling_available():
            raise InvalidInputError(
                f"batch_size={self.batch_size} asks for NeighborLoader mini-batches, which need "
                "the optional package 'pyg-lib' or 'torch-sparse'; neither is installed. "
                "Install one of them, or use num_neighbors=None (exact full-neighbourhood "
                "mini-batches) or batch_size=None (full-batch training)."
            )

    def _loader(self, stage: str | None, shuffle: bool) -> DataLoader:
        if self.batch_size is None:
            single = cast("Dataset[Data]", [self.data])  # a list is a map-style dataset
            return DataLoader(single, batch_size=1, collate_fn=_single)
        mask = None if stage is None else self.data[f"{stage}_mask"]
        generator = torch.Generator().manual_seed(self.seed) if shuffle else None
        if self.num_neighbors is None:
            return khop_loader(
                self.data,
                mask,
                self.num_hops,
                self.batch_size,
                shuffle,
                generator=generator,
                num_workers=self.num_workers,
            )
        from torch_geometric.loader import NeighborLoader

        return NeighborLoader(
            self.data,
            num_neighbors=self.num_neighbors,
            input_nodes=mask,
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            generator=generator,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader(None, shuffle=False)
