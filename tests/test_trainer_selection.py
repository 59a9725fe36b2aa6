"""train_node_classifier keeps the best validation AUROC epoch on binary tasks (accuracy on
multi-class ones); KeepBestWeights(monitor=...)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from lightning import LightningModule
from torch import nn
from torch_geometric.data import Data

from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.datasets.splits import DEFAULT_FRACTIONS, stratified_masks
from gnnaudit.errors import InvalidInputError
from gnnaudit.training import GraphDataModule, train_node_classifier
from gnnaudit.training import train as train_module
from gnnaudit.training.train import (
    KeepBestWeights,
    make_trainer,
    positive_auroc,
    quiet_lightning,
    selection_monitor,
)


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    logging.getLogger("lightning").setLevel(logging.ERROR)
    yield
    torch.set_num_threads(before)


class Scripted(LightningModule):
    """Validation logits scripted per epoch; ``marker`` holds the epoch whose weights they are."""

    def __init__(self, script: list[torch.Tensor]) -> None:
        super().__init__()
        self.script = script
        self.marker = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.script[self.current_epoch] + 0.0 * self.marker

    def training_step(self, batch: Data, batch_idx: int) -> torch.Tensor:
        with torch.no_grad():
            self.marker.fill_(float(self.current_epoch))
        return (self.marker * 0.0).sum()

    def validation_step(self, batch: Data, batch_idx: int) -> torch.Tensor:
        logits = self(batch.x, batch.edge_index)[batch.val_mask]
        y = batch.y[batch.val_mask]
        loss = F.cross_entropy(logits, y)
        self.log("val_loss", loss, batch_size=int(y.numel()))
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), batch_size=int(y.numel()))
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


def _imbalanced_scripts() -> tuple[Data, list[torch.Tensor]]:
    """40 nodes, 4 of label 1. Epoch 0: constant, all label 0 (accuracy 0.9, AUROC 0.5).
    Epoch 1: ranks every label-1 node first but also calls 6 label-0 nodes 1 (accuracy 0.85,
    AUROC 1)."""
    n = 40
    y = torch.zeros(n, dtype=torch.long)
    y[:4] = 1
    everyone = torch.ones(n, dtype=torch.bool)
    data = Data(
        x=torch.zeros(n, 1),
        y=y,
        edge_index=torch.zeros(2, 0, dtype=torch.long),
        train_mask=everyone,
        val_mask=everyone.clone(),
        test_mask=everyone.clone(),
        num_nodes=n,
    )
    constant = torch.tensor([[1.0, 0.0]]).repeat(n, 1)
    informative = torch.zeros(n, 2)
    informative[:4, 1] = 2.0
    informative[4:10, 1] = 1.0
    return data, [constant, informative]


@pytest.mark.parametrize("monitor, kept", [("val_acc", 0), ("val_auroc", 1)])
def test_accuracy_keeps_the_constant_epoch_auroc_the_informative_one(monitor, kept):
    data, script = _imbalanced_scripts()
    module = Scripted(script)
    keep = KeepBestWeights(monitor)
    with quiet_lightning(False):
        trainer = make_trainer(2, accelerator="cpu", callbacks=[keep])
        trainer.fit(module, datamodule=GraphDataModule(data))
    assert keep.best_epoch == kept
    assert float(module.marker.detach()) == float(kept)  # the kept epoch's weights are restored
    if monitor == "val_auroc":
        assert [round(h[0], 6) for h in keep.history] == [0.5, 1.0]
        assert "val_auroc" in trainer.callback_metrics
    else:
        assert [round(h[0], 6) for h in keep.history] == [0.9, 0.85]


def _collapsed_scripts(positives: int = 16) -> tuple[Data, list[torch.Tensor]]:
    """40 nodes, ``positives`` of label 1. Epoch 0: ranks perfectly (AUROC 1) but every class-1
    probability is above 0.5 (all decisions 1). Epoch 1: AUROC below 1, both classes decided."""
    data, _ = _imbalanced_scripts()
    data.y = torch.zeros(40, dtype=torch.long)
    data.y[:positives] = 1
    perfect = torch.zeros(40, 2)
    perfect[:, 1] = 0.5  # class-1 probability above 0.5 everywhere ...
    perfect[:positives, 1] = 1.0  # ... higher for every label-1 node
    decided = torch.zeros(40, 2)
    decided[: positives - 2, 1] = 1.0  # two label-1 nodes missed, two label-0 nodes called 1
    decided[positives : positives + 2, 1] = 1.0
    return data, [perfect, decided]


@pytest.mark.parametrize("positives, kept", [(16, 1), (39, 0)])
def test_an_epoch_whose_decisions_collapsed_ranks_last(positives, kept):
    """The higher-AUROC epoch answers 1 for every node: with balanced-enough labels (16 of 40)
    the other epoch is kept; when the labels themselves are 39 of 40 one class, answering one
    class is no collapse and AUROC decides."""
    data, script = _collapsed_scripts(positives)
    module = Scripted(script)
    keep = KeepBestWeights("val_auroc")
    with quiet_lightning(False):
        trainer = make_trainer(2, accelerator="cpu", callbacks=[keep])
        trainer.fit(module, datamodule=GraphDataModule(data))
    aurocs = [round(h[0], 6) for h in keep.history]
    assert aurocs[0] == 1.0 and aurocs[1] < 1.0
    assert keep.collapsed == [positives <= 38, False]
    assert keep.best_epoch == kept
    assert float(module.marker.detach()) == float(kept)


def _imbalanced_graph(seed: int = 0, n: int = 300) -> Data:
    """Synthetic features with 10% label-1 nodes (a noisy linear score's top decile)."""
    data = synthetic_credit_graph(num_nodes=n, bias=0.0, seed=seed)
    rng = np.random.default_rng(seed)
    score = data.x[:, :6].sum(1) + 2.0 * torch.from_numpy(rng.normal(size=n)).float()
    data.y = (score > torch.quantile(score, 0.9)).long()
    split = stratified_masks(data.y, *DEFAULT_FRACTIONS, seed=seed)
    data.train_mask, data.val_mask, data.test_mask = (
        split.train_mask,
        split.val_mask,
        split.test_mask,
    )
    return data


def test_trainer_keeps_the_argmax_of_validation_auroc(monkeypatch):
    data = _imbalanced_graph()
    seen: list[KeepBestWeights] = []

    class Recording(KeepBestWeights):
        def __init__(self, monitor: str = "val_acc") -> None:
            super().__init__(monitor)
            seen.append(self)

    monkeypatch.setattr(train_module, "KeepBestWeights", Recording)
    module, metrics = train_node_classifier(data, "gcn", max_epochs=30, seed=0, num_layers=2)
    (keep,) = seen
    assert keep.monitor == "val_auroc" and metrics["selected_by"] == "val_auroc"
    aurocs = [h[0] for h in keep.history]
    assert len(aurocs) == 30
    best = max(keep.history)
    assert metrics["best_epoch"] == keep.history.index(best)
    assert aurocs[metrics["best_epoch"]] == max(aurocs)
    # the returned module is that epoch's: its validation AUROC is the recorded maximum
    with torch.no_grad():
        p = module(data.x, data.edge_index).softmax(1)[:, 1].numpy()
    mask = data.val_mask.numpy()
    assert positive_auroc(data.y.numpy()[mask], p[mask]) == pytest.approx(max(aurocs), abs=1e-6)
    assert metrics["val_auroc"] == pytest.approx(max(aurocs), abs=1e-6)
    assert "test_auroc" in metrics


def test_selection_monitor_by_task():
    data = _imbalanced_graph(n=120)
    assert selection_monitor(data) == "val_auroc"
    multi = data.clone()
    multi.y = torch.arange(120) % 3
    assert selection_monitor(multi) == "val_acc"
    one_class = data.clone()
    one_class.y = torch.where(one_class.val_mask, 0, one_class.y)
    assert selection_monitor(one_class) == "val_acc"
    _, metrics = train_node_classifier(multi, "gcn", max_epochs=2, seed=0, num_layers=2)
    assert metrics["selected_by"] == "val_acc" and "val_auroc" not in metrics
    _, metrics = train_node_classifier(data, "gcn", max_epochs=2, keep_best=False, num_layers=2)
    assert metrics["selected_by"] == "last epoch"


def test_bad_monitor_is_refused():
    with pytest.raises(InvalidInputError, match="monitor must be one of 'val_acc', 'val_auroc'"):
        KeepBestWeights("val_f1")
