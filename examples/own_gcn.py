"""A user's own GNN and training loop, written without gnnaudit (used by audit_own_model.py).

A plain 2-layer ``GCNConv`` model and a plain PyTorch training loop: the kind of model an
auditor receives from a team. ``gnnaudit audit --model examples/own_gcn.py:GCN`` builds it as
``GCN(in_channels, out_channels)`` and loads the saved state dict into it.
"""

from __future__ import annotations

import torch
from torch_geometric.nn import GCNConv


class GCN(torch.nn.Module):
    """Two GCN layers with a ReLU and dropout between them."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 32) -> None:
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden)
        self.conv2 = GCNConv(hidden, out_channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = self.conv1(x, edge_index).relu()
        h = torch.nn.functional.dropout(h, p=0.5, training=self.training)
        return self.conv2(h, edge_index)


def train(model: GCN, data, epochs: int = 200, lr: float = 0.01, seed: int = 0) -> GCN:
    """Full-batch Adam on the training nodes (cross-entropy); returns the model in eval mode."""
    torch.manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)
    model.train()
    for _ in range(epochs):
        optimiser.zero_grad()
        out = model(data.x, data.edge_index)
        loss = torch.nn.functional.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimiser.step()
    return model.eval()
