"""Shared pytest fixtures."""

from __future__ import annotations

import contextlib
import functools
import pickle
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dask_cluster import import_on_workers, local_dask_client
from hypothesis import settings
from sklearn.cluster import DBSCAN
from sklearn.datasets import load_iris, make_blobs

# Seeds fixed, results deterministic: every hypothesis test draws the same examples in every run
# (a counterexample found by a random run is pinned as its own test, e.g.
# test_decision_offset.py::test_rate_offset_separates_margins_one_float_apart). Each test's own
# @settings (max_examples, deadline) still applies on top of this profile.
settings.register_profile("gnnaudit", derandomize=True, database=None)
settings.load_profile("gnnaudit")


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """One torch thread and one BLAS / OpenMP thread per pool for the whole session.

    The test graphs are small: gnnaudit's own policy runs every library call on them with one
    thread (``gnnaudit._threads.SIZE_THRESHOLD``), and so do the modules that pin torch to one
    thread themselves; a second thread makes the tests' own tensor and array code no faster on
    inputs this small, and it competes for CI's two cores with the Dask workers and the
    subprocesses that some tests run (``_threads``: 2 threads 0.08-0.95x as fast as 1 on a busy
    2-core machine). Tests that set thread counts restore the ones they found."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(before)


# --- file fixtures ---


@pytest.fixture()
def table(tmp_path):
    """A CSV of 40 rows: two tight blobs in ``x`` / ``y`` and a group column ``g`` (a / b),
    for the CLI commands that read a table."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "x": np.r_[rng.normal(0, 0.3, 20), rng.normal(5, 0.3, 20)],
            "y": np.r_[rng.normal(0, 0.3, 20), rng.normal(5, 0.3, 20)],
            "g": ["a", "b"] * 20,
        }
    )
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    return path


class _Payload:
    """A pickle that, when unpickled by an unrestricted loader, writes ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('payload ran')",))


class PlantedPayload:
    """Writes files carrying a code-execution payload; ``ran`` tells whether it executed."""

    def __init__(self, folder: Path) -> None:
        self.marker = folder / "PAYLOAD_RAN"

    @property
    def ran(self) -> bool:
        return self.marker.exists()

    def instance(self) -> object:
        """An object whose unpickling (by an unrestricted loader) runs the payload."""
        return _Payload(self.marker)

    def pickle_bytes(self, protocol: int = 2) -> bytes:
        return pickle.dumps(_Payload(self.marker), protocol=protocol)

    def pickle_file(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.pickle_bytes())
        return path

    def torch_file(self, path: Path, wrap: bool = True) -> Path:
        """A ``torch.save`` file whose object (a dict of tensors with the payload inside when
        ``wrap``) needs full unpickling."""
        import torch

        path.parent.mkdir(parents=True, exist_ok=True)
        obj = (
            {"x": torch.zeros(2, 2), "evil": _Payload(self.marker)}
            if wrap
            else _Payload(self.marker)
        )
        torch.save(obj, path)
        return path

    def npz_file(self, path: Path) -> Path:
        """An ``.npz`` whose arrays look right but one is an object array holding the payload."""
        path.parent.mkdir(parents=True, exist_ok=True)
        evil = np.empty(1, dtype=object)
        evil[0] = _Payload(self.marker)
        np.savez(
            path,
            features=np.zeros((3, 2), dtype=np.float32),
            target=np.arange(3),
            edges=evil,
        )
        return path


@pytest.fixture
def payload(tmp_path) -> PlantedPayload:
    """Plants pickle payloads; assert ``not payload.ran`` after loading a planted file."""
    return PlantedPayload(tmp_path)


# --- end file fixtures ---

# --- clustering fixtures ---


@pytest.fixture(scope="session")
def iris():
    """Iris features and labels ``(X, y)`` (scikit-learn's copy, no download)."""
    return load_iris(return_X_y=True)


@pytest.fixture(scope="session")
def blobs_dbscan():
    """Four 2-D Gaussian blobs (600 points) and a fitted ``DBSCAN(eps=0.5, min_samples=5)``:
    four clusters and some noise."""
    X, _ = make_blobs(600, centers=4, n_features=2, cluster_std=0.7, random_state=3)
    return X, DBSCAN(eps=0.5, min_samples=5).fit(X)


@pytest.fixture(scope="session")
def fair_blobs():
    """Three 3-D blobs (240 points) with a random binary sensitive attribute ``(X, s)``."""
    X, _ = make_blobs(240, n_features=3, centers=3, cluster_std=0.8, random_state=4)
    return X, np.random.default_rng(0).integers(0, 2, size=240)


# --- end clustering fixtures ---


# --- fair fine-tuning fixtures ---
@pytest.fixture(scope="module")
def fair_graph():
    """The synthetic credit graph of the FairFinetune tests (400 nodes, a planted bias)."""
    import logging

    from gnnaudit.datasets import synthetic_credit_graph

    logging.getLogger("lightning").setLevel(logging.ERROR)
    return synthetic_credit_graph(num_nodes=400, bias=2.0, seed=0)


@pytest.fixture(scope="module")
def fair_gcn(fair_graph):
    """A two-layer GCN trained 60 epochs on ``fair_graph`` (seed 0); tests must not modify it."""
    from gnnaudit.training import train_node_classifier

    module, _ = train_node_classifier(fair_graph, "gcn", max_epochs=60, seed=0, num_layers=2)
    return module


# --- end fair fine-tuning fixtures ---


# --- search fixtures ---
@pytest.fixture(scope="module")
def faiss_one_thread():
    """faiss with one OpenMP thread for the module (deterministic HNSW graphs, no
    oversubscription on a shared machine); skips when faiss is missing."""
    faiss = pytest.importorskip("faiss")
    old = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield faiss
    faiss.omp_set_num_threads(old)


# --- end search fixtures ---


class _SharedCluster:
    """One :func:`local_dask_client` with worker processes, shared by consecutive tests: starting
    one costs about 5 s of CPU to import torch, PyG and gnnaudit (once, in the fork server its
    workers fork from; spawned workers would each pay it), and an idle one still costs about
    10 % of a core (heartbeats, event loops), so it is started for the first test that asks for
    ``client`` and closed when the next test is in a module that does not use it
    (:func:`pytest_runtest_teardown`). The Dask modules run one after the other
    (their names sort together; under ``make test`` their ``xdist_group("dask")`` mark keeps
    them on one worker, :func:`pytest_xdist_make_scheduler`), so they share one cluster."""

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None
        self.client = None
        self.modules: set[Path] = set()  # the test modules with a test that uses ``client``

    def get(self):
        if self.client is None:
            self._stack = contextlib.ExitStack()
            self.client = self._stack.enter_context(local_dask_client())
        return self.client

    def close(self) -> None:
        if self._stack is not None:
            self.client, stack, self._stack = None, self._stack, None
            stack.close()


_CLUSTER = _SharedCluster()


@pytest.fixture(scope="module")
def client(request):
    """A Dask client on a cluster of worker processes (:class:`_SharedCluster`); the module
    imports ``distributed`` with ``pytest.importorskip`` first. The workers import the test
    module before its first test (torch, PyG and gnnaudit they have from the fork server),
    both at the same time, instead of each in the first task it runs, one after the other."""
    dask_client = _CLUSTER.get()
    import_on_workers(dask_client, request.module.__name__)
    return dask_client


def pytest_collection_modifyitems(items):
    _CLUSTER.modules = {item.path for item in items if "client" in item.fixturenames}


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Close the shared Dask cluster when the next test's module does not use it (or no test
    is left)."""
    if nextitem is None or nextitem.path not in _CLUSTER.modules:
        _CLUSTER.close()


def pytest_sessionfinish(session):
    _CLUSTER.close()


# --- parallel runs (pytest-xdist) ---

#: a module-level ``pytestmark = pytest.mark.xdist_group("NAME")`` line of a test module
_GROUP_MARK = re.compile(r"""^pytestmark = pytest\.mark\.xdist_group\(["']([^"']+)["']\)""", re.M)


@functools.cache
def module_group(rootpath: Path, module: str) -> str:
    """The xdist work unit of test module ``module`` (a path relative to ``rootpath``): the
    ``NAME`` of its module-level ``xdist_group`` mark, else the module itself."""
    path = rootpath / module
    found = _GROUP_MARK.search(path.read_text(encoding="utf-8")) if path.is_file() else None
    return f"group {found.group(1)}" if found else module


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``make test`` runs ``-n 2 --dist loadfile``: each test module runs on one worker, so its
    module-scoped fixtures (trained models among them) are built once, not once per worker; the
    modules that carry the same module-level ``xdist_group`` mark form one unit (the Dask
    modules: one worker, one cluster, :class:`_SharedCluster`). ``--dist loadgroup`` would
    read those marks itself, but pytest 9.2's structured node ids drop the group suffix that
    pytest-xdist 3.8 writes into them, so it groups nothing (pytest-xdist issue 1386); the
    controller has no items, so the marks are read from the modules' source."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return module_group(config.rootpath, super()._split_scope(nodeid))

    return ModuleScheduling(config, log)
