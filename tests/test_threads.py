"""The thread policy of :mod:`gnnaudit._threads`: explicit n wins (and is pinned), then
OMP_NUM_THREADS, then the measured graph-size threshold."""

from __future__ import annotations

import pytest
import torch

from gnnaudit import InvalidInputError, _threads
from gnnaudit._threads import SIZE_THRESHOLD, choose_threads, configure_threads


@pytest.fixture(autouse=True)
def _clean_policy(monkeypatch):
    """No pinned choice and no OMP_NUM_THREADS; restore torch's thread count afterwards."""
    before = torch.get_num_threads()
    _threads._reset_pin()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(_threads, "available_cores", lambda: 8)
    yield
    _threads._reset_pin()
    torch.set_num_threads(before)


def test_size_threshold_one_thread_below_all_cores_from_it():
    assert choose_threads(num_nodes=0) == (1, "size")
    assert choose_threads(num_nodes=SIZE_THRESHOLD - 1) == (1, "size")
    assert choose_threads(num_nodes=SIZE_THRESHOLD) == (8, "size")
    assert choose_threads(num_nodes=100 * SIZE_THRESHOLD) == (8, "size")
    assert choose_threads() == (8, "default")  # no size: all cores (torch's default)


@pytest.mark.parametrize(("value", "expected"), [("1", 1), ("3", 3), (" 2 ", 2), ("4,2", 4)])
def test_omp_num_threads_is_respected(monkeypatch, value, expected):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert choose_threads(num_nodes=10) == (expected, "env")
    assert choose_threads(num_nodes=100 * SIZE_THRESHOLD) == (expected, "env")


@pytest.mark.parametrize("value", ["", "zero", "0", "-1"])
def test_unusable_omp_num_threads_falls_back_to_size(monkeypatch, value):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert choose_threads(num_nodes=10) == (1, "size")


def test_explicit_n_wins_and_is_pinned(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert choose_threads(2, num_nodes=10) == (2, "explicit")
    choice = configure_threads(1, num_nodes=100 * SIZE_THRESHOLD)
    assert (choice.threads, choice.source) == (1, "explicit")
    assert torch.get_num_threads() == 1
    # later size-based calls (audit_model, train_node_classifier) keep the explicit choice
    assert choose_threads(num_nodes=100 * SIZE_THRESHOLD) == (1, "pinned")
    assert configure_threads(num_nodes=100 * SIZE_THRESHOLD).source == "pinned"
    assert choose_threads(2) == (2, "explicit")  # a new explicit n still wins


def test_configure_sets_torch_blas_openmp_and_faiss():
    from threadpoolctl import threadpool_info

    choice = configure_threads(num_nodes=10)
    assert (choice.threads, choice.source, choice.num_nodes) == (1, "size", 10)
    assert torch.get_num_threads() == 1
    assert all(pool["num_threads"] == 1 for pool in threadpool_info())
    faiss = pytest.importorskip("faiss")
    assert choice.faiss and faiss.omp_get_max_threads() == 1
    assert choice.as_dict() == {"threads": 1, "source": "size", "num_nodes": 10, "faiss": True}


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None.__class__])
def test_invalid_n_names_threads(bad):
    with pytest.raises(InvalidInputError, match="threads"):
        configure_threads(bad)


def test_invalid_num_nodes_is_named():
    with pytest.raises(InvalidInputError, match="num_nodes"):
        configure_threads(num_nodes=-5)


def test_audit_sizes_threads_to_the_graph_and_records_the_choice():
    from gnnaudit.audit.quality_unit import ModelQuality
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.training.audit_pipeline import run_audit

    data = synthetic_credit_graph(num_nodes=60, seed=0)
    linear = torch.nn.Linear(data.num_features, 2)

    def predict(x, edge_index):
        return linear(x)

    report = run_audit(None, data, units=[ModelQuality()], predict_fn=predict, progress=False)
    assert report.run_info["threads"] == {
        "threads": 1,
        "source": "size",
        "num_nodes": 60,
        "faiss": report.run_info["threads"]["faiss"],
    }
    assert torch.get_num_threads() == 1
    with pytest.raises(InvalidInputError, match="threads"):
        run_audit(None, data, units=[ModelQuality()], predict_fn=predict, threads=0)
