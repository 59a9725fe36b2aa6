"""A Lightning ``strategy`` passes through ``train_node_classifier(trainer_kwargs=...)``:
two CPU processes with ``ddp_spawn`` train a model, and the main process gets rank 0's best
weights and the epoch counts (which Lightning does not carry back from spawned workers)."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import NodeClassifier, train_node_classifier
from gnnaudit.training.train import make_trainer, quiet_lightning


def _can_spawn() -> str | None:
    """Why this platform cannot run a 2-process gloo group, or None when it can."""
    import torch.distributed as dist

    if not dist.is_available():
        return "torch.distributed is not available in this torch build"
    if not dist.is_gloo_available():
        return "the gloo backend (CPU process groups) is not available"
    return None


def test_make_trainer_passes_strategy_through():
    # Trainer(deterministic=True) switches torch's global flag on; quiet_lightning restores it
    with quiet_lightning(verbose=False):
        trainer = make_trainer(1, {"strategy": "ddp_spawn", "accelerator": "cpu", "devices": 2})
    assert type(trainer.strategy).__name__ == "DDPStrategy"
    assert trainer.world_size == 2 and trainer.num_devices == 2


@pytest.mark.skipif(_can_spawn() is not None, reason=str(_can_spawn()))
def test_ddp_spawn_two_cpu_processes_train_and_predict():
    # 2 spawned processes importing torch / PyG / Lightning dominate: 6 s on a quiet 2-core
    # machine, 33 s at load 3-5, 54 s at load 10
    data = synthetic_credit_graph(num_nodes=120, seed=0)
    epochs = 4
    module, metrics = train_node_classifier(
        data,
        "gcn",
        max_epochs=epochs,
        seed=0,
        hidden_channels=8,
        dropout=0.0,
        trainer_kwargs={"strategy": "ddp_spawn", "accelerator": "cpu", "devices": 2},
    )
    # epoch counts come back from rank 0 (the main process's trainer never ran an epoch)
    assert metrics["epochs_run"] == epochs
    assert 0 <= metrics["best_epoch"] < epochs
    # the returned module holds trained weights and predicts every node
    assert not module.training
    with torch.no_grad():
        logits = module(data.x, data.edge_index)
    assert logits.shape == (data.num_nodes, 2) and bool(torch.isfinite(logits).all())
    assert 0.0 <= metrics["test_acc"] <= 1.0
    # without dropout both ranks compute the same full-batch gradient, so DDP's average is the
    # single-process gradient: the same weights and epochs as training in one process
    single, single_metrics = train_node_classifier(
        data, "gcn", max_epochs=epochs, seed=0, hidden_channels=8, dropout=0.0
    )
    for name, value in single.state_dict().items():
        torch.testing.assert_close(module.state_dict()[name], value, msg=name)
    assert metrics["best_epoch"] == single_metrics["best_epoch"]
    assert metrics["test_acc"] == pytest.approx(single_metrics["test_acc"])
    # the weights differ from the seed's initialisation: the workers' training came back
    L.seed_everything(0, workers=True, verbose=False)
    init = NodeClassifier(
        in_channels=data.x.size(1), out_channels=2, backbone="gcn", hidden_channels=8, dropout=0.0
    )
    changed = [
        not torch.equal(a, b)
        for a, b in zip(init.state_dict().values(), module.state_dict().values(), strict=True)
    ]
    assert any(changed)
