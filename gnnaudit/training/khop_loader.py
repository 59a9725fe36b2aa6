"""Exact mini-batches: the induced subgraph of the full L-hop in-neighbourhood of seed nodes.

A batch of seed nodes ``S`` becomes the subgraph induced by every node from which a path of at
most ``num_hops + 1`` edges leads into ``S``. An ``L``-layer message-passing GNN computes the
output of a seed from the features of its ``L``-hop in-neighbourhood and from the degrees of
those nodes; the extra hop makes the degrees of the nodes ``L`` hops away complete, so the
logits of the seeds in a batch equal their full-graph logits exactly (in eval mode), for every
backbone including GCN's degree normalisation. Nothing is sampled and no optional package
(``pyg-lib``, ``torch-sparse``) is needed.

The batch follows PyG's ``NeighborLoader`` convention: the seeds come first, ``batch.batch_size``
counts them and ``batch.n_id`` holds the original ids of the batch's nodes.

Memory per batch is ``O(|V_b| * d + |E_b|)`` for the ``V_b`` nodes and ``E_b`` edges of the
subgraph; on small-world graphs a few hops can reach most of the graph, in which case sampled
neighbourhoods (``num_neighbors`` with ``NeighborLoader``) are the bounded alternative.
"""

from __future__ import annotations

from typing import cast

import torch
from torch.utils.data import DataLoader, Dataset
from torch_geometric.data import Data
from torch_geometric.utils import k_hop_subgraph

__all__ = ["khop_batch", "khop_loader"]

_NODE_ATTRS = ("x", "y", "train_mask", "val_mask", "test_mask")


def khop_batch(data: Data, seeds: torch.Tensor, num_hops: int) -> Data:
    """The exact ``num_hops``-layer computation subgraph of ``seeds`` (see the module doc).

    ``seeds`` must be distinct node ids; they become nodes ``0 .. len(seeds) - 1`` of the batch.
    """
    n = data.num_nodes
    subset, _, _, edge_mask = k_hop_subgraph(
        seeds, num_hops + 1, data.edge_index, relabel_nodes=False, num_nodes=n
    )
    is_seed = torch.zeros(n, dtype=torch.bool)
    is_seed[seeds] = True
    n_id = torch.cat([seeds, subset[~is_seed[subset]]])
    position = torch.full((n,), -1, dtype=torch.long)
    position[n_id] = torch.arange(n_id.numel())
    batch = Data(edge_index=position[data.edge_index[:, edge_mask]], num_nodes=n_id.numel())
    for name in _NODE_ATTRS:
        value = getattr(data, name, None)
        if isinstance(value, torch.Tensor):
            batch[name] = value[n_id]
    batch.n_id = n_id
    batch.batch_size = int(seeds.numel())
    return batch


def khop_loader(
    data: Data,
    input_nodes: torch.Tensor | None,
    num_hops: int,
    batch_size: int,
    shuffle: bool,
    generator: torch.Generator | None = None,
    num_workers: int = 0,
) -> DataLoader:
    """A ``DataLoader`` of :func:`khop_batch` batches around ``batch_size`` seeds at a time,
    drawn from ``input_nodes`` (a boolean mask or ids; ``None`` = every node)."""
    if input_nodes is None:
        ids = torch.arange(data.num_nodes)
    elif input_nodes.dtype == torch.bool:
        ids = torch.nonzero(input_nodes).view(-1)
    else:
        ids = input_nodes.view(-1).long()

    def collate(seeds: list[torch.Tensor]) -> Data:
        return khop_batch(data, torch.stack(seeds), num_hops)

    return DataLoader(
        cast("Dataset[torch.Tensor]", ids),  # a tensor is a map-style dataset of its rows
        batch_size=batch_size,
        shuffle=shuffle,
        generator=generator,
        collate_fn=collate,
        num_workers=num_workers,
    )
