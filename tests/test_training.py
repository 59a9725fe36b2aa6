"""Lightning node classifier, data module, training entry point and safe checkpoint loading."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from torch_geometric.data import Data

from gnnaudit import InvalidInputError
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import (
    BACKBONES,
    GraphDataModule,
    NodeClassifier,
    load_node_classifier,
    train_node_classifier,
)
from gnnaudit.training.data_module import neighbor_sampling_available
from gnnaudit.training.khop_loader import khop_batch
from gnnaudit.training.train import majority_rate


@pytest.fixture(autouse=True)
def _few_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def graph() -> Data:
    return synthetic_credit_graph(num_nodes=1000, seed=0)


@pytest.fixture(scope="module")
def small() -> Data:
    return synthetic_credit_graph(num_nodes=120, seed=1)


def _without_time(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k != "fit_seconds"}


def test_training_learns_the_synthetic_graph(graph):
    # 80 epochs: test accuracy 0.77 (0.80 after 150) against a majority rate of 0.5
    module, metrics = train_node_classifier(graph, backbone="gcn", max_epochs=80, seed=0)
    assert metrics["majority_rate"] == pytest.approx(0.5, abs=0.02)
    assert metrics["test_acc"] > metrics["majority_rate"] + 0.2
    assert metrics["train_acc"] > 0.7
    assert metrics["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")
    assert metrics["epochs_run"] == 80 and 0 <= metrics["best_epoch"] < 80
    assert not module.training
    # the module stays on the device it trained on (a GPU under accelerator="auto")
    logits = module(graph.x.to(module.device), graph.edge_index.to(module.device)).cpu()
    acc = (logits.argmax(-1) == graph.y)[graph.test_mask].float().mean()
    assert float(acc) == pytest.approx(metrics["test_acc"])


@pytest.mark.parametrize("backbone", BACKBONES)
def test_each_backbone_trains_and_is_callable(small, backbone):
    L.seed_everything(0, verbose=False)
    initial = NodeClassifier(small.x.size(1), 2, backbone=backbone, num_layers=2)
    before = [p.detach().clone() for p in initial.parameters()]
    module, metrics = train_node_classifier(small, backbone=backbone, max_epochs=3, num_layers=2)
    logits = module(small.x, small.edge_index)
    assert logits.shape == (120, 2) and torch.isfinite(logits).all()
    assert all(torch.isfinite(torch.tensor(v)) for k, v in metrics.items() if k.endswith("_loss"))
    assert len(module.convs) == 2
    # same seed, same initial weights: the optimiser really moved them
    trained = torch.cat([p.detach().flatten() for p in module.parameters()])
    assert not torch.allclose(trained, torch.cat([p.flatten() for p in before]))


def test_same_seed_same_metrics(small):
    assert not torch.are_deterministic_algorithms_enabled()
    _, a = train_node_classifier(small, backbone="sage", max_epochs=15, seed=3)
    _, b = train_node_classifier(small, backbone="sage", max_epochs=15, seed=3)
    _, c = train_node_classifier(small, backbone="sage", max_epochs=15, seed=4)
    assert _without_time(a) == _without_time(b)
    assert _without_time(a) != _without_time(c)
    assert not torch.are_deterministic_algorithms_enabled()  # global state restored


def test_keep_best_is_never_worse_than_last_epoch(small):
    _, best = train_node_classifier(small, max_epochs=30, seed=0, keep_best=True)
    _, last = train_node_classifier(small, max_epochs=30, seed=0, keep_best=False)
    assert best["val_acc"] >= last["val_acc"]


def test_early_stopping_stops(small):
    _, metrics = train_node_classifier(small, max_epochs=300, seed=0, lr=0.2, patience=3)
    assert metrics["epochs_run"] < 300


def test_checkpoint_round_trip_is_weights_only(small, tmp_path):
    path = tmp_path / "sub" / "model.ckpt"
    module, _ = train_node_classifier(
        small, backbone="gat", max_epochs=5, hidden_channels=8, checkpoint_path=path
    )
    raw = torch.load(path, weights_only=True)
    hp = raw["hyper_parameters"]
    assert hp["backbone"] == "gat" and hp["hidden_channels"] == 8 and hp["in_channels"] == 11
    assert all(isinstance(v, (int, float, str)) for v in hp.values())
    loaded = load_node_classifier(path)
    assert not loaded.training
    assert torch.allclose(loaded(small.x, small.edge_index), module(small.x, small.edge_index))


class _Payload:
    pass


def test_load_node_classifier_rejects_bad_files(tmp_path):
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_node_classifier(tmp_path / "missing.ckpt")
    unsafe = tmp_path / "unsafe.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {}, "x": _Payload()}, unsafe)
    with pytest.raises(InvalidInputError, match="refused: it needs"):
        load_node_classifier(unsafe)
    plain = tmp_path / "plain.ckpt"
    torch.save({"weights": torch.zeros(2)}, plain)
    with pytest.raises(InvalidInputError, match="hyper_parameters"):
        load_node_classifier(plain)
    wrong = tmp_path / "wrong.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"in_channels": 3, "color": "red"}}, wrong)
    with pytest.raises(InvalidInputError, match="does not match"):
        load_node_classifier(wrong)


@pytest.mark.filterwarnings("ignore:.*LeafSpec")
def test_lightning_loops_log_metrics_and_predict(small):
    L.seed_everything(0, verbose=False)
    module = NodeClassifier(small.x.size(1), 2)
    dm = GraphDataModule(small)
    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
    )
    trainer.fit(module, datamodule=dm)
    for key in ("train_loss", "train_acc", "val_loss", "val_acc"):
        assert key in trainer.callback_metrics
    (tested,) = trainer.test(module, datamodule=dm, verbose=False)
    expected = module.evaluate(small)
    assert tested["test_acc"] == pytest.approx(expected["test_acc"])
    assert tested["test_loss"] == pytest.approx(expected["test_loss"], rel=1e-5)
    (out,) = trainer.predict(module, datamodule=dm)
    assert out["pred"].shape == (120,) and out["prob"].shape == (120, 2)
    assert torch.allclose(out["prob"].sum(-1), torch.ones(120))
    assert torch.equal(out["pred"], out["prob"].argmax(-1))
    assert torch.equal(out["node"], torch.arange(120))


def test_data_module_full_batch_and_mini_batch(small):
    dm = GraphDataModule(small)
    (batch,) = list(dm.train_dataloader())
    assert batch is not small and batch.x is small.x  # a shallow copy: the same tensors
    dm = GraphDataModule(small, batch_size=16, num_hops=2)
    batches = list(dm.train_dataloader())
    seeds = torch.cat([b.n_id[: b.batch_size] for b in batches])
    assert sorted(seeds.tolist()) == torch.nonzero(small.train_mask).view(-1).tolist()
    assert all(bool(b.train_mask[: b.batch_size].all()) for b in batches)
    if neighbor_sampling_available():
        dm = GraphDataModule(small, batch_size=16, num_neighbors=[5, 5])
        batches = list(dm.train_dataloader())
        assert sum(b.batch_size for b in batches) == int(small.train_mask.sum())
    else:
        with pytest.raises(InvalidInputError, match="pyg-lib"):
            GraphDataModule(small, batch_size=16, num_neighbors=[5, 5])
        with pytest.raises(InvalidInputError, match="pyg-lib"):
            train_node_classifier(small, max_epochs=1, batch_size=16, num_neighbors=[5, 5])


@pytest.mark.parametrize("backbone", BACKBONES)
def test_exact_mini_batches_reproduce_full_graph_logits(small, backbone):
    """Each batch is the complete computation subgraph of its seeds: in eval mode their logits
    equal the full-graph logits, degree normalisations included."""
    L.seed_everything(0, verbose=False)
    module = NodeClassifier(small.x.size(1), 2, backbone=backbone, num_layers=3).eval()
    with torch.no_grad():
        full = module(small.x, small.edge_index)
        dm = GraphDataModule(small, batch_size=7, num_hops=3)
        for batch in dm.predict_dataloader():
            out = module(batch.x, batch.edge_index)[: batch.batch_size]
            seeds = batch.n_id[: batch.batch_size]
            assert torch.allclose(out, full[seeds], atol=1e-5)
            assert torch.equal(batch.y[: batch.batch_size], small.y[seeds])


def test_khop_batch_is_the_induced_subgraph():
    # path 0-1-2-3-4-5 (both directions) plus an isolated node 6
    src = torch.tensor([0, 1, 1, 2, 2, 3, 3, 4, 4, 5])
    dst = torch.tensor([1, 0, 2, 1, 3, 2, 4, 3, 5, 4])
    data = Data(x=torch.eye(7), y=torch.arange(7), edge_index=torch.stack([src, dst]))
    batch = khop_batch(data, torch.tensor([2]), num_hops=1)  # 1 layer -> 2 hops kept
    assert batch.batch_size == 1 and batch.n_id.tolist() == [2, 0, 1, 3, 4]
    edges = {(int(batch.n_id[a]), int(batch.n_id[b])) for a, b in batch.edge_index.t()}
    expected = {(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=True) if 5 not in (a, b)}
    assert edges == expected
    assert torch.equal(batch.x, data.x[batch.n_id])


def test_training_with_exact_mini_batches_learns(small):
    _, metrics = train_node_classifier(small, "sage", max_epochs=30, seed=0, batch_size=32)
    _, again = train_node_classifier(small, "sage", max_epochs=30, seed=0, batch_size=32)
    assert metrics["train_acc"] > majority_rate(small, "train_mask") + 0.15
    assert metrics["test_acc"] == again["test_acc"]


def test_invalid_inputs_are_reported(small):
    with pytest.raises(InvalidInputError, match="'gcn', 'gat', 'gin', 'sage', 'mpnn'"):
        NodeClassifier(11, 2, backbone="transformer")
    with pytest.raises(InvalidInputError, match="dropout"):
        NodeClassifier(11, 2, dropout=1.0)
    with pytest.raises(InvalidInputError, match="num_layers"):
        NodeClassifier(11, 2, num_layers=0)
    no_masks = Data(x=small.x, y=small.y, edge_index=small.edge_index)
    with pytest.raises(InvalidInputError, match="train_mask"):
        train_node_classifier(no_masks, max_epochs=1)
    float_y = small.clone()
    float_y.y = small.y.float()
    with pytest.raises(InvalidInputError, match="integer"):
        GraphDataModule(float_y)
    with pytest.raises(InvalidInputError, match="max_epochs"):
        train_node_classifier(small, max_epochs=0)
    nan_x = small.clone()
    nan_x.x = small.x.clone()
    nan_x.x[0, 0] = float("nan")
    with pytest.raises(InvalidInputError, match="finite"):
        train_node_classifier(nan_x, max_epochs=1)


def test_majority_rate_oracle():
    y = torch.tensor([0, 0, 1, 1, 1, 0, 1, 1])
    data = Data(y=y, train_mask=torch.tensor([1, 1, 1, 0, 0, 0, 0, 0], dtype=torch.bool))
    data.test_mask = ~data.train_mask
    assert majority_rate(data) == pytest.approx(1 / 5)  # train majority is 0


def test_majority_rate_balanced_training_set_uses_every_label():
    """NIFTY's label-balanced training set ties: the labels of all nodes break the tie (a
    constant 0 here would score 1/6 and be called the majority)."""
    y = torch.tensor([0, 1, 1, 1, 1, 0, 1, 1])
    data = Data(y=y, train_mask=torch.tensor([1, 1, 0, 0, 0, 0, 0, 0], dtype=torch.bool))
    data.test_mask = ~data.train_mask
    assert majority_rate(data) == pytest.approx(5 / 6)


def test_mini_batch_steps_score_only_seed_nodes(small):
    """A NeighborLoader batch lists its ``batch_size`` seed nodes first; only they count."""
    L.seed_everything(0, verbose=False)
    module = NodeClassifier(small.x.size(1), 2).eval()
    n_id = torch.tensor([5, 9, 2, 40, 41, 77, 3])
    sub = small.subgraph(n_id)
    sub.n_id, sub.batch_size = n_id, 3
    sub.train_mask = torch.tensor([True, False, True, True, True, True, True])
    logged = {}
    module.log = lambda name, value, **kw: logged.__setitem__(name, value)  # no trainer attached
    loss = module.training_step(sub, 0)
    logits = module(sub.x, sub.edge_index)
    seeds = torch.tensor([0, 2])  # seed nodes (first 3) that are in train_mask
    expected = torch.nn.functional.cross_entropy(logits[seeds], sub.y[seeds])
    assert torch.allclose(loss, expected)
    assert float(logged["train_acc"]) == float(
        (logits[seeds].argmax(-1) == sub.y[seeds]).float().mean()
    )
    out = module.predict_step(sub, 0)
    assert torch.equal(out["node"], n_id[:3]) and out["prob"].shape == (3, 2)


def test_training_leaves_the_callers_graph_where_it_is(small):
    """Lightning moves the batch with Data.to, which replaces tensors in place: the data module
    hands it a shallow copy, so the caller's graph keeps its own tensors (on a GPU machine
    they would otherwise end up on the GPU)."""
    from gnnaudit.training.data_module import GraphDataModule

    x, y = small.x, small.y
    batch = next(iter(GraphDataModule(small).train_dataloader()))
    batch.apply(lambda t: t + 1 if t.is_floating_point() else t)  # what a device move does
    assert small.x is x and small.y is y
    assert not torch.equal(batch.x, small.x)
