"""CounterfactualAuditCallback inside a real Lightning run."""

from __future__ import annotations

import csv
import logging

import lightning as L
import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

import gnnaudit.graph_ops.neighbourhood as neighbourhood
from gnnaudit.audit.fairness.error_verification import error_verification
from gnnaudit.audit.search.evidence import CounterfactualEvidence
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError
from gnnaudit.training import CounterfactualAuditCallback, GraphDataModule, NodeClassifier


def _fit(tmp_path, callback, epochs=6):
    logging.getLogger("lightning").setLevel(logging.ERROR)
    data = synthetic_credit_graph(num_nodes=300, seed=1)
    L.seed_everything(0, verbose=False)
    module = NodeClassifier(data.x.size(1), 2, lr=0.05)
    trainer = L.Trainer(
        max_epochs=epochs,
        logger=CSVLogger(tmp_path, name="run"),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback],
        accelerator="cpu",
    )
    trainer.fit(module, datamodule=GraphDataModule(data))
    return data, module, trainer


def test_logs_metrics_and_matches_offline_audit(tmp_path, monkeypatch):
    calls = []
    original = neighbourhood.ks_embedding

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(neighbourhood, "ks_embedding", counting)
    cb = CounterfactualAuditCallback(k=8, top_features=2, sensitive="gender")
    data, module, trainer = _fit(tmp_path, cb, epochs=25)
    metrics = trainer.callback_metrics
    for name in (
        "audit/accuracy_in_top_k",
        "audit/mean_similarity",
        "audit/ds_top1",
        "audit/ds_top2",
        "audit/ds/gender",
        "audit/ds_lift/gender",
        "audit/flip/gender",
    ):
        assert name in metrics, name
    assert len(calls) == 1  # KS embedding cached across epochs
    assert len(cb.history_) == 25
    # the logger received the metrics
    rows = list(csv.DictReader(open(tmp_path / "run" / "version_0" / "metrics.csv")))
    assert any(r.get("audit/accuracy_in_top_k") for r in rows)

    # the last audit equals an offline audit with the final model on the validation nodes
    module.eval()
    with torch.no_grad():
        pred = module(data.x, data.edge_index).argmax(-1).numpy()
    ce = CounterfactualEvidence().fit(data, predictions=pred, mask=data.val_mask)
    expected = ce.global_evidence(k=8)
    got = cb.evidences_
    assert (
        got[["node_u", "node_v"]].to_numpy().tolist()
        == expected[["node_u", "node_v"]].to_numpy().tolist()
    )
    assert np.allclose(got["similarity"], expected["similarity"], atol=1e-6)
    ev = error_verification(
        expected, y_true=data.y.numpy(), y_pred=pred, ks=(8,), mask=data.val_mask
    )
    assert float(metrics["audit/accuracy_in_top_k"]) == pytest.approx(
        ev["accuracy_in_evidence"].iloc[0], abs=1e-6
    )
    assert float(metrics["audit/mean_similarity"]) == pytest.approx(
        expected["similarity"].mean(), abs=1e-6
    )
    table = cb.discrimination_
    assert float(metrics["audit/ds_top1"]) == pytest.approx(table["score"].iloc[0], abs=1e-6)


def test_every_n_epochs(tmp_path):
    cb = CounterfactualAuditCallback(every_n_epochs=3, k=5, top_features=0)
    _fit(tmp_path, cb, epochs=6)
    assert [h["epoch"] for h in cb.history_] == [2, 5]


def test_bad_arguments():
    with pytest.raises(InvalidInputError, match="stage must be one of"):
        CounterfactualAuditCallback(stage="predict")
    with pytest.raises(InvalidInputError, match="every_n_epochs must be >= 1"):
        CounterfactualAuditCallback(every_n_epochs=0)


def test_large_stage_falls_back_to_exact_search(tmp_path):
    cb = CounterfactualAuditCallback(k=5, max_sorted_nodes=0)
    data, module, trainer = _fit(tmp_path, cb, epochs=25)
    assert not cb.searcher_.uses_sorted_order
    assert "audit/accuracy_in_top_k" in trainer.callback_metrics


def test_default_cap_falls_back_to_exact_search_without_an_m_by_m_array(tmp_path, monkeypatch):
    """Above the module cap (monkeypatched small) the callback never builds the sorted m x m
    order: the searcher holds the blocked exact fallback, and its evidences equal those of
    the callback under the cap (the sorted order)."""
    import gnnaudit.audit.search.sorted_scan as search_sorted
    from gnnaudit.audit.search.exact import ExactSearcher

    built = []
    original = search_sorted.SimilarityOrder.build

    def counting(*args, **kwargs):
        built.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(search_sorted.SimilarityOrder, "build", counting)
    under = CounterfactualAuditCallback(k=5, top_features=1)
    _fit(tmp_path / "under", under, epochs=8)
    assert under.searcher_.uses_sorted_order and built
    built.clear()
    monkeypatch.setattr(search_sorted, "DEFAULT_MAX_NODES", 10)
    over = CounterfactualAuditCallback(k=5, top_features=1)
    _fit(tmp_path / "over", over, epochs=8)
    assert not built, "an m x m similarity order was built above the cap"
    assert not over.searcher_.uses_sorted_order
    assert isinstance(over.searcher_.fallback_, ExactSearcher)
    assert over.searcher_.order_ is None
    pd_under, pd_over = under.evidences_, over.evidences_
    np.testing.assert_allclose(pd_under["similarity"], pd_over["similarity"], atol=1e-6)
    assert under.history_[-1]["audit/accuracy_in_top_k"] == pytest.approx(
        over.history_[-1]["audit/accuracy_in_top_k"]
    )


def test_flip_metric_equals_the_offline_flip(tmp_path):
    from gnnaudit.audit.sensitivity.flip import counterfactual_flip

    cb = CounterfactualAuditCallback(k=5, top_features=0, sensitive="gender")
    data, module, trainer = _fit(tmp_path, cb, epochs=4)
    module.eval()
    offline = counterfactual_flip(module, data, "gender", mask=data.val_mask, scope="graph")
    assert float(trainer.callback_metrics["audit/flip/gender"]) == pytest.approx(offline.rate)
    assert cb.flip_.rate == pytest.approx(offline.rate)


class UserModule(L.LightningModule):
    """A user-written LightningModule: its own GCN, training on full-batch DataLoaders."""

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv1 = GCNConv(in_channels, 16)
        self.conv2 = GCNConv(16, 2)

    def forward(self, x, edge_index):
        return self.conv2(torch.relu(self.conv1(x, edge_index)), edge_index)

    def training_step(self, batch, batch_idx):
        out = self(batch.x, batch.edge_index)
        return torch.nn.functional.cross_entropy(out[batch.train_mask], batch.y[batch.train_mask])

    def validation_step(self, batch, batch_idx):
        out = self(batch.x, batch.edge_index)
        loss = torch.nn.functional.cross_entropy(out[batch.val_mask], batch.y[batch.val_mask])
        self.log("val_loss", loss, batch_size=1)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.02)


def test_user_module_with_plain_dataloaders_logs_to_csv_and_can_be_monitored(tmp_path):
    from lightning.pytorch.callbacks import EarlyStopping
    from torch_geometric.loader import DataLoader

    logging.getLogger("lightning").setLevel(logging.ERROR)
    data = synthetic_credit_graph(num_nodes=300, bias=3.0, seed=2)
    L.seed_everything(0, verbose=False)
    cb = CounterfactualAuditCallback(k=5, top_features=1, sensitive="gender")
    stop = EarlyStopping(monitor="audit/flip/gender", mode="max", patience=50)
    trainer = L.Trainer(
        max_epochs=5,
        logger=CSVLogger(tmp_path, name="user"),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[cb, stop],
        accelerator="cpu",
    )
    trainer.fit(UserModule(data.x.size(1)), DataLoader([data]), DataLoader([data]))
    rows = list(csv.DictReader(open(tmp_path / "user" / "version_0" / "metrics.csv")))
    audit_rows = [r for r in rows if r.get("audit/flip/gender")]
    assert len(audit_rows) == 5
    # the audit metrics share the validation row: same epoch and step as val_loss
    assert all(r["val_loss"] and r["epoch"] for r in audit_rows)
    assert [int(r["epoch"]) for r in audit_rows] == list(range(5))
    assert all(0.0 <= float(r["audit/flip/gender"]) <= 1.0 for r in audit_rows)
    assert stop.best_score is not None


def test_data_argument_predict_fn_and_state_dict(tmp_path):
    data = synthetic_credit_graph(num_nodes=300, seed=1)
    module = NodeClassifier(data.x.size(1), 2, lr=0.05)
    calls = []

    def predict_fn(x, edge_index):
        calls.append(1)
        return module(x, edge_index)

    cb = CounterfactualAuditCallback(
        k=5, top_features=0, sensitive="gender", data=data, predict_fn=predict_fn
    )
    _fit(tmp_path, cb, epochs=2)
    assert len(cb.history_) == 2 and calls  # predict_fn used for the flip
    state = cb.state_dict()
    fresh = CounterfactualAuditCallback()
    fresh.load_state_dict(state)
    assert fresh.history_ == cb.history_ and fresh.seconds_ == cb.seconds_
    with pytest.raises(InvalidInputError, match="predict_fn"):
        CounterfactualAuditCallback(predict_fn=3)
    with pytest.raises(InvalidInputError, match="flip_scope"):
        CounterfactualAuditCallback(flip_scope="edge")


def test_resumes_from_a_checkpoint_with_its_history(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    logging.getLogger("lightning").setLevel(logging.ERROR)
    data = synthetic_credit_graph(num_nodes=300, seed=1)

    def trainer(epochs, cb, ckpt=None):
        return L.Trainer(
            max_epochs=epochs,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[cb] + ([ckpt] if ckpt else []),
            accelerator="cpu",
            default_root_dir=tmp_path,
        )

    first = CounterfactualAuditCallback(k=5, top_features=0)
    saver = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    L.seed_everything(0, verbose=False)
    module = NodeClassifier(data.x.size(1), 2, lr=0.05)
    trainer(3, first, saver).fit(module, datamodule=GraphDataModule(data))
    resumed = CounterfactualAuditCallback(k=5, top_features=0)
    trainer(5, resumed).fit(
        NodeClassifier(data.x.size(1), 2, lr=0.05),
        datamodule=GraphDataModule(data),
        ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"),
    )
    assert [h["epoch"] for h in resumed.history_] == [0, 1, 2, 3, 4]
    assert resumed.history_[:3] == first.history_
