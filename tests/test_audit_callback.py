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
from gnnaudit.audit.error_verification import error_verification
from gnnaudit.audit.evidence import CounterfactualEvidence
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


def test_sorted_similarity_matches_exact_search_ties_included():
    from gnnaudit.audit.search_base import SearchSpace
    from gnnaudit.audit.search_exact import ExactSearcher
    from gnnaudit.training.audit_callback import _SortedSimilarity

    rng = np.random.default_rng(0)
    # few distinct directions: many exact ties
    base = rng.normal(size=(4, 3))
    emb = base[rng.integers(0, 4, 40)].astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    for seed in range(3):
        pred = np.random.default_rng(seed).integers(0, 3, 40)
        fast = _SortedSimilarity(emb)
        exact = ExactSearcher().build(SearchSpace(emb, pred, np.arange(40)))
        for k in (1, 5, 39):
            assert np.array_equal(fast.local(pred, k), exact.local(np.arange(40), k).evidence)
        res = exact.global_pairs(30)
        u, v, s = fast.global_pairs(pred, 30)
        assert np.array_equal(u, res.node_u) and np.array_equal(v, res.node_v)
        assert np.allclose(s, res.similarity)
    # a long order with a rare class: rows of the common class run short in the scan window
    emb = rng.normal(size=(300, 4)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    pred = (rng.random(300) < 0.03).astype(np.int64)
    fast = _SortedSimilarity(emb)
    exact = ExactSearcher().build(SearchSpace(emb, pred, np.arange(300)))
    for k in (3, 10):
        assert np.array_equal(fast.local(pred, k), exact.local(np.arange(300), k).evidence)
    res = exact.global_pairs(50)
    assert np.array_equal(fast.global_pairs(pred, 50)[0], res.node_u)
    assert np.array_equal(fast.global_pairs(pred, 50)[1], res.node_v)


def test_large_stage_falls_back_to_exact_search(tmp_path):
    cb = CounterfactualAuditCallback(k=5, max_sorted_nodes=0)
    data, module, trainer = _fit(tmp_path, cb, epochs=25)
    assert cb._cache["sorted"] is None
    assert "audit/accuracy_in_top_k" in trainer.callback_metrics
