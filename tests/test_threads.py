"""The thread policy of :mod:`gnnaudit._threads`: explicit n wins (and scopes the calls nested
in its block), then OMP_NUM_THREADS, then the measured graph-size threshold; library calls
restore the caller's thread counts."""

from __future__ import annotations

import pytest
import torch

from gnnaudit import InvalidInputError, _threads
from gnnaudit._threads import SIZE_THRESHOLD, choose_threads, configure_threads, thread_limits


@pytest.fixture(autouse=True)
def _clean_policy(monkeypatch):
    """No OMP_NUM_THREADS; restore torch's thread count afterwards."""
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(_threads, "available_cores", lambda: 8)
    yield
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


def test_explicit_n_wins_scopes_nested_calls_and_is_restored(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert choose_threads(2, num_nodes=10) == (2, "explicit")
    torch.set_num_threads(2)
    big = 100 * SIZE_THRESHOLD
    with thread_limits(1, num_nodes=big) as choice:
        assert (choice.threads, choice.source) == (1, "explicit")
        assert torch.get_num_threads() == 1
        # size-based calls inside the block (audit_model, train_node_classifier) keep it
        assert choose_threads(num_nodes=big) == (1, "scoped")
        with thread_limits(num_nodes=big) as inner:
            assert inner.source == "scoped"
        assert choose_threads(2) == (2, "explicit")  # a new explicit n still wins
    # nothing left behind: the environment rules again, torch has its count back
    assert choose_threads(num_nodes=big) == (3, "env")
    assert torch.get_num_threads() == 2


def test_thread_limits_restore_torch_blas_and_faiss_after_an_error():
    from threadpoolctl import threadpool_info

    torch.set_num_threads(3)
    pools = sorted((p["filepath"], p["num_threads"]) for p in threadpool_info())
    faiss = pytest.importorskip("faiss")
    faiss.omp_set_num_threads(3)
    try:
        with pytest.raises(RuntimeError, match="inside"), thread_limits(num_nodes=10) as choice:
            assert choice.threads == 1 and torch.get_num_threads() == 1
            assert all(p["num_threads"] == 1 for p in threadpool_info())
            raise RuntimeError("inside")
        assert torch.get_num_threads() == 3
        assert sorted((p["filepath"], p["num_threads"]) for p in threadpool_info()) == pools
        assert faiss.omp_get_max_threads() == 3
    finally:
        faiss.omp_set_num_threads(1)


def test_no_module_global_thread_state():
    """The only state is the ContextVar of the enclosing explicit n, reset by its block."""
    assert not hasattr(_threads, "_pinned")
    assert _threads._scoped.get() is None
    with thread_limits(2):
        assert _threads._scoped.get() == 2
    assert _threads._scoped.get() is None


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
    from gnnaudit.audit.pipeline import run_audit
    from gnnaudit.audit.quality_unit import ModelQuality
    from gnnaudit.datasets import synthetic_credit_graph

    data = synthetic_credit_graph(num_nodes=60, seed=0)
    linear = torch.nn.Linear(data.num_features, 2)

    def predict(x, edge_index):
        return linear(x)

    torch.set_num_threads(3)  # the user's choice, before the audit
    report = run_audit(None, data, units=[ModelQuality()], predict_fn=predict, progress=False)
    assert report.run_info["threads"] == {
        "threads": 1,
        "source": "size",
        "num_nodes": 60,
        "faiss": report.run_info["threads"]["faiss"],
    }
    assert torch.get_num_threads() == 3  # restored: the audit changed nothing process-wide
    with pytest.raises(InvalidInputError, match="threads"):
        run_audit(None, data, units=[ModelQuality()], predict_fn=predict, threads=0)
    assert torch.get_num_threads() == 3


def test_user_thread_count_survives_run_audit_and_its_errors():
    from gnnaudit.audit.pipeline import run_audit
    from gnnaudit.audit.quality_unit import ModelQuality
    from gnnaudit.datasets import synthetic_credit_graph

    data = synthetic_credit_graph(num_nodes=60, seed=0)

    def boom(x, edge_index):
        assert torch.get_num_threads() == 4  # the audit's explicit choice is in force
        raise RuntimeError("boom")

    torch.set_num_threads(1)
    with pytest.raises(RuntimeError, match="boom"):
        run_audit(None, data, units=[ModelQuality()], predict_fn=boom, threads=4)
    assert torch.get_num_threads() == 1
