"""``backend="auto"``: exact below the measured crossover, tuned faiss IVF above it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from search_oracles import brute_local, clustered, positions, recall, space_of
from torch_geometric.data import Data

from gnnaudit.audit.search import backends as backends_mod
from gnnaudit.audit.search.evidence import (
    AUTO_FAISS_MIN_DIMS,
    AUTO_FAISS_MIN_NODES,
    AUTO_FAISS_MIN_NODES_LOW_DIM,
    CounterfactualEvidence,
    make_searcher,
    resolve_backend,
)
from gnnaudit.audit.search.faiss_search import FaissSearcher, default_nprobe
from gnnaudit.cli.main import build_parser
from gnnaudit.errors import InvalidInputError

pytestmark = pytest.mark.usefixtures("faiss_one_thread")


def test_resolve_backend_thresholds():
    big, wide = AUTO_FAISS_MIN_NODES, AUTO_FAISS_MIN_DIMS
    assert resolve_backend("auto", big - 1, wide) == "exact"
    assert resolve_backend("auto", big, wide) == "faiss"
    assert resolve_backend("auto", big, wide - 1) == "exact"
    assert resolve_backend("auto", AUTO_FAISS_MIN_NODES_LOW_DIM, wide - 1) == "faiss"
    for name in ("exact", "sorted", "index", "faiss"):
        assert resolve_backend(name, 10, 2) == name
    with pytest.raises(InvalidInputError, match="backend"):
        resolve_backend("fast", 10, 2)
    with pytest.raises(InvalidInputError, match="resolve_backend"):
        make_searcher("auto")


@pytest.fixture(scope="module")
def graph():
    x, pred = clustered(m=2400, d=24, n_centres=16, n_classes=3, seed=2)
    n = x.shape[0]
    rng = np.random.default_rng(0)
    edge_index = torch.from_numpy(rng.integers(0, n, size=(2, 3 * n)))
    return Data(x=torch.from_numpy(x), edge_index=edge_index), pred


def test_auto_picks_exact_on_small_data(graph):
    data, pred = graph
    ce = CounterfactualEvidence(backend="auto").fit(data, predictions=pred)
    assert ce.backend_ == "exact" and ce.searcher_.name == "exact"
    plain = CounterfactualEvidence(backend="exact").fit(data, predictions=pred)
    assert plain.backend_ == "exact"
    q = ce.node_ids_[:50]
    np.testing.assert_array_equal(ce.search_local(q, 5).evidence, plain.search_local(q, 5).evidence)


def test_auto_picks_faiss_above_the_threshold(graph, monkeypatch):
    data, pred = graph
    monkeypatch.setattr(backends_mod, "AUTO_FAISS_MIN_NODES", 1000)
    monkeypatch.setattr(backends_mod, "AUTO_FAISS_MIN_DIMS", 8)
    ce = CounterfactualEvidence(backend="auto", num_hops=0).fit(data, predictions=pred)
    assert ce.backend_ == "faiss" and isinstance(ce.searcher_, FaissSearcher)
    assert ce.searcher_.index_type == "ivf"
    assert all(kind.startswith("ivf") for kind in ce.searcher_.index_kinds_)
    exact = CounterfactualEvidence(backend="exact", num_hops=0).fit(data, predictions=pred)
    q = ce.node_ids_[::7]
    got, ref = ce.search_local(q, 10).evidence, exact.search_local(q, 10).evidence
    hits = [len(set(a) & set(b)) / 10 for a, b in zip(got, ref, strict=True)]
    assert np.mean(hits) >= 0.95
    # an explicit index type is kept
    ce2 = CounterfactualEvidence(
        backend="auto", num_hops=0, index_params={"index_type": "flat"}
    ).fit(data, predictions=pred)
    assert ce2.backend_ == "faiss" and ce2.searcher_.index_kinds_ == ["flat"] * 3


def test_tuned_ivf_defaults_and_recall():
    x, pred = clustered(m=6000, d=32, n_centres=30, n_classes=3, seed=5)
    s = FaissSearcher(index_type="ivf", random_state=0).build(space_of(x, pred))
    for index, members in zip(s.indexes_, s.members_, strict=True):
        nlist = int(round(np.sqrt(members.size)))
        assert index.nlist == nlist and index.nprobe == default_nprobe(nlist, x.shape[1])
    q = np.arange(0, x.shape[0], 3)
    _, pos = positions(s, s.local(q, 10))
    _, ref = brute_local(x, pred, q, 10)
    assert recall(pos, ref) >= 0.95
    assert default_nprobe(16) == 8 and default_nprobe(400) == 25
    assert default_nprobe(16, 128) == 6 and default_nprobe(400, 128) == 13
    assert default_nprobe(400, 16) == 25


@pytest.mark.parametrize("command", ["evidence", "audit"])
def test_cli_accepts_auto(command):
    argv = [command, "--dataset", "synthetic", "--backend", "auto", "--out", "x"]
    args = build_parser().parse_args(argv)
    assert args.backend == "auto"
