"""A Lightning node classifier over the common PyG message-passing layers.

Architecture (``num_layers`` = L >= 1 convolutions)::

    h^0 = x,  h^{l+1} = dropout(relu(conv_l(h^l, edge_index)))  for l < L-1,
    logits = conv_{L-1}(h^{L-1}, edge_index)

Backbones (all from :mod:`torch_geometric.nn`):

=======  =====================================================================================
gcn      ``GCNConv``: h_v' = W sum_{u in N(v) ∪ {v}} h_u / sqrt(d_u d_v)
gat      ``GATConv`` (one attention head): h_v' = sum_u alpha_vu W h_u
gin      ``GINConv`` with a 2-layer MLP: h_v' = MLP((1 + eps) h_v + sum_{u in N(v)} h_u)
sage     ``SAGEConv`` (mean aggregation): h_v' = W_1 h_v + W_2 mean_{u in N(v)} h_u
mpnn     ``GraphConv`` (Morris et al. 2019), the general sum-aggregation message-passing layer
         with separate root and neighbour weights: h_v' = W_1 h_v + W_2 sum_{u in N(v)} h_u
=======  =====================================================================================

The module is a plain callable ``module(x, edge_index) -> logits``, which is how the
counterfactual-evidence search queries models. All constructor arguments are plain ``int``,
``float`` or ``str`` and are stored by ``save_hyperparameters()``, so a Lightning checkpoint can
be re-opened with ``torch.load(path, weights_only=True)`` (see
:func:`gnnaudit.training.load_node_classifier`).
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import Data

from gnnaudit._validation import (
    MAX_HIDDEN_CHANNELS,
    MAX_LEARNING_RATE,
    MAX_NUM_CLASSES,
    MAX_NUM_LAYERS,
    MAX_WEIGHT_DECAY,
    check_choice,
    check_float,
    check_int,
)
from gnnaudit.errors import InvalidInputError

__all__ = ["BACKBONES", "MAX_MODEL_WEIGHTS", "NodeClassifier", "estimated_weights"]

#: Supported ``backbone`` names.
BACKBONES: tuple[str, ...] = ("gcn", "gat", "gin", "sage", "mpnn")

#: a NodeClassifier (built, trained or loaded from a checkpoint) may hold at most this many
#: weights, checked before any allocation: 10^8 float32 weights = 400 MB, three orders of
#: magnitude above the largest model of the benchmarks (about 10^5)
MAX_MODEL_WEIGHTS = 100_000_000


def estimated_weights(
    in_channels: int, hidden_channels: int, num_layers: int, out_channels: int
) -> int:
    """An upper estimate of a NodeClassifier's weight count: the largest backbone (mpnn / gin)
    holds a few ``hidden x hidden`` matrices per layer, so ``4 (d_in h + L h^2 + h d_out)``."""
    return 4 * (
        in_channels * hidden_channels
        + num_layers * hidden_channels * hidden_channels
        + hidden_channels * out_channels
    )


def _conv(backbone: str, in_channels: int, out_channels: int) -> nn.Module:
    from torch_geometric import nn as gnn

    if backbone == "gcn":
        return gnn.GCNConv(in_channels, out_channels)
    if backbone == "gat":
        return gnn.GATConv(in_channels, out_channels, heads=1)
    if backbone == "gin":
        mlp = nn.Sequential(
            nn.Linear(in_channels, out_channels), nn.ReLU(), nn.Linear(out_channels, out_channels)
        )
        return gnn.GINConv(mlp, train_eps=True)
    if backbone == "sage":
        return gnn.SAGEConv(in_channels, out_channels)
    return gnn.GraphConv(in_channels, out_channels, aggr="add")


class NodeClassifier(L.LightningModule):
    """GNN node classifier trained with cross-entropy on ``train_mask``.

    Parameters
    ----------
    in_channels : number of input features.
    out_channels : number of classes.
    backbone : one of :data:`BACKBONES`.
    num_layers : number of message-passing layers, 1 to ``MAX_NUM_LAYERS`` (256; default 3).
    hidden_channels : width of the hidden layers, 1 to ``MAX_HIDDEN_CHANNELS`` (65,536;
        default 16). The whole model may hold at most :data:`MAX_MODEL_WEIGHTS` weights
        (:func:`estimated_weights`), checked before any weight is allocated.
    dropout : dropout probability after each hidden layer, in [0, 1).
    lr : Adam learning rate in (0, ``MAX_LEARNING_RATE`` = 10].
    weight_decay : Adam weight decay in [0, ``MAX_WEIGHT_DECAY`` = 1].

    Notes
    -----
    Batches are :class:`~torch_geometric.data.Data` objects with ``x``, ``edge_index``, ``y``
    and ``train_mask`` / ``val_mask`` / ``test_mask``. A ``NeighborLoader`` mini-batch (which
    carries ``batch_size``) is scored on its first ``batch_size`` (seed) nodes only.
    Logged metrics: ``train_loss``, ``train_acc``, ``val_loss``, ``val_acc``, ``test_loss``,
    ``test_acc``.
    """

    #: the forward pass is ``convs`` in order with ReLU between (dropout off in eval mode): a
    #: Dask audit runs it layer by layer on graph partitions
    #: (:mod:`gnnaudit.audit.distributed.layers`)
    layered_forward = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        backbone: str = "gcn",
        num_layers: int = 3,
        hidden_channels: int = 16,
        dropout: float = 0.5,
        lr: float = 0.01,
        weight_decay: float = 5e-4,
    ) -> None:
        super().__init__()
        in_channels = check_int("in_channels", in_channels, minimum=1)
        out_channels = check_int("out_channels", out_channels, minimum=2, maximum=MAX_NUM_CLASSES)
        backbone = check_choice("backbone", backbone, BACKBONES)
        num_layers = check_int("num_layers", num_layers, minimum=1, maximum=MAX_NUM_LAYERS)
        hidden_channels = check_int(
            "hidden_channels", hidden_channels, minimum=1, maximum=MAX_HIDDEN_CHANNELS
        )
        size = estimated_weights(in_channels, hidden_channels, num_layers, out_channels)
        if size > MAX_MODEL_WEIGHTS:
            raise InvalidInputError(
                f"a NodeClassifier with in_channels={in_channels}, hidden_channels="
                f"{hidden_channels}, num_layers={num_layers}, out_channels={out_channels} "
                f"holds about {size:.3g} weights, more than MAX_MODEL_WEIGHTS = "
                f"{MAX_MODEL_WEIGHTS:.0e}; lower hidden_channels or num_layers"
            )
        dropout = check_float("dropout", dropout, minimum=0.0, maximum=1.0, inclusive=(True, False))
        lr = check_float("lr", lr, minimum=0.0, maximum=MAX_LEARNING_RATE, inclusive=(False, True))
        weight_decay = check_float(
            "weight_decay", weight_decay, minimum=0.0, maximum=MAX_WEIGHT_DECAY
        )
        self.save_hyperparameters(
            {
                "in_channels": in_channels,
                "out_channels": out_channels,
                "backbone": backbone,
                "num_layers": num_layers,
                "hidden_channels": hidden_channels,
                "dropout": dropout,
                "lr": lr,
                "weight_decay": weight_decay,
            }
        )
        dims = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.convs = nn.ModuleList(
            _conv(backbone, a, b) for a, b in zip(dims[:-1], dims[1:], strict=True)
        )
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Class logits of every node, shape ``[num_nodes, out_channels]``."""
        h = x
        for i, conv in enumerate(self.convs):
            h = conv(h, edge_index)
            if i < len(self.convs) - 1:
                h = F.dropout(F.relu(h), p=self.dropout, training=self.training)
        return h

    # -- steps ---------------------------------------------------------------------------------
    def _scored(self, batch: Data, stage: str) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self(batch.x, batch.edge_index)
        mask = batch[f"{stage}_mask"]
        seeds = getattr(batch, "batch_size", None)
        if isinstance(seeds, int):  # NeighborLoader: only the seed nodes count
            logits, mask, y = logits[:seeds], mask[:seeds], batch.y[:seeds]
        else:
            y = batch.y
        return logits[mask], y[mask]

    def _step(self, batch: Data, stage: str) -> torch.Tensor:
        logits, y = self._scored(batch, stage)
        n = int(y.numel())
        loss = F.cross_entropy(logits, y) if n else logits.sum() * 0.0
        acc = (logits.argmax(-1) == y).float().mean() if n else torch.zeros(())
        # sync_dist: under a multi-process strategy (ddp, ddp_spawn) every rank sees the mean
        # over ranks, so best-epoch and early-stopping decisions agree (a no-op on one process)
        shown = stage == "val"
        self.log(f"{stage}_loss", loss, batch_size=max(n, 1), prog_bar=shown, sync_dist=True)
        self.log(f"{stage}_acc", acc, batch_size=max(n, 1), prog_bar=shown, sync_dist=True)
        return loss

    def training_step(self, batch: Data, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: Data, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "val")

    def test_step(self, batch: Data, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "test")

    def predict_step(self, batch: Data, batch_idx: int, dataloader_idx: int = 0) -> dict:
        """``{"node": ids, "pred": classes, "prob": class probabilities}`` of the batch's nodes
        (all nodes for a full batch, the seed nodes for a ``NeighborLoader`` batch)."""
        logits = self(batch.x, batch.edge_index)
        seeds = getattr(batch, "batch_size", None)
        node = getattr(batch, "n_id", None)
        if node is None:
            node = torch.arange(logits.size(0), device=logits.device)
        if isinstance(seeds, int):
            logits, node = logits[:seeds], node[:seeds]
        prob = logits.softmax(-1)
        return {"node": node, "pred": prob.argmax(-1), "prob": prob}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(
            self.parameters(), lr=self.hparams["lr"], weight_decay=self.hparams["weight_decay"]
        )

    # -- helpers -------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, data: Data) -> dict[str, float]:
        """Full-batch loss and accuracy on each mask of ``data`` (eval mode, no dropout)."""
        was_training = self.training
        self.eval()
        logits = self(data.x.to(self.device), data.edge_index.to(self.device))
        y = data.y.to(self.device)
        out: dict[str, Any] = {}
        for stage in ("train", "val", "test"):
            mask = getattr(data, f"{stage}_mask", None)
            if mask is None or not bool(mask.any()):
                continue
            mask = mask.to(self.device)
            out[f"{stage}_loss"] = float(F.cross_entropy(logits[mask], y[mask]))
            out[f"{stage}_acc"] = float((logits[mask].argmax(-1) == y[mask]).float().mean())
        self.train(was_training)
        return out
