"""Optional dependencies (faiss, networkx, matplotlib): a clear error naming the extra where
the feature is asked for by name, a silent fallback where the package is an optimisation.

Each test hides a package with ``sys.modules[name] = None`` (``import name`` then raises
``ImportError`` as when it is not installed); the package itself must be installed for the
comparison with the path that uses it (``pip install '.[test]'`` installs every extra).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from gnnaudit._optional import EXTRAS, available, optional, require
from gnnaudit.errors import GnnAuditError, MissingDependencyError


def _hide(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setitem(sys.modules, name, None)


# --------------------------------------------------------------------------- the helper


def test_require_names_the_extra_and_keeps_the_cause(monkeypatch):
    _hide(monkeypatch, "networkx")
    with pytest.raises(MissingDependencyError) as info:
        require("networkx", "the clique search")
    err = info.value
    assert isinstance(err, ImportError) and isinstance(err, GnnAuditError)
    assert "the clique search" in str(err)
    assert "pip install 'gnnaudit[diagnosis]'" in str(err) and "networkx" in str(err)
    assert isinstance(err.__cause__, ImportError)
    assert optional("networkx") is None and not available("networkx")


def test_every_extra_is_declared_in_pyproject():
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    deps = " ".join(project["dependencies"])
    for dist, extra in EXTRAS.values():
        assert any(req.startswith(dist) for req in extras[extra]), (dist, extra)
        assert dist not in deps  # optional, not a hard dependency
    for extra in ("faiss", "plots", "diagnosis"):
        assert extra in extras["all"][0] and extra in extras["test"][-1]


# --------------------------------------------------------------------------- faiss


def test_faiss_backend_by_name_raises_naming_the_extra(monkeypatch):
    from gnnaudit.audit.search.backends import make_searcher
    from gnnaudit.audit.search.faiss_search import FaissSearcher

    _hide(monkeypatch, "faiss")
    with pytest.raises(MissingDependencyError, match=r"gnnaudit\[faiss\]"):
        make_searcher("faiss")
    x = np.random.default_rng(0).normal(size=(300, 4))
    with pytest.raises(MissingDependencyError, match=r"backend='faiss'"):
        _evidence_fit(x, backend="faiss")
    with pytest.raises(MissingDependencyError, match=r"gnnaudit\[faiss\]"):
        FaissSearcher()._make_index(np.ones((4, 2), dtype=np.float32))


def _evidence_fit(x: np.ndarray, backend: str):
    import torch
    from torch_geometric.data import Data

    from gnnaudit.audit.search.evidence import CounterfactualEvidence

    data = Data(x=torch.from_numpy(x), edge_index=torch.zeros((2, 0), dtype=torch.long))
    pred = (x[:, 0] > 0).astype(np.int64)
    return CounterfactualEvidence(backend=backend, num_hops=0).fit(data, predictions=pred)


def test_auto_backend_never_picks_faiss_without_it(monkeypatch):
    from gnnaudit.audit.search import backends

    big, wide = backends.AUTO_FAISS_MIN_NODES, backends.AUTO_FAISS_MIN_DIMS
    pytest.importorskip("faiss")
    assert backends.resolve_backend("auto", big, wide) == "faiss"
    _hide(monkeypatch, "faiss")
    assert backends.resolve_backend("auto", big, wide) == "exact"
    assert backends.resolve_backend("auto", 10 * big, wide) == "exact"
    monkeypatch.setattr(backends, "AUTO_FAISS_MIN_NODES", 100)
    monkeypatch.setattr(backends, "AUTO_FAISS_MIN_DIMS", 2)
    ce = _evidence_fit(np.random.default_rng(1).normal(size=(300, 4)), backend="auto")
    assert ce.backend_ == "exact"


def _blobs(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-30, 30, size=(10, 4))
    X = centres[rng.integers(0, 10, n)] + rng.normal(size=(n, 4))
    X[:100] = X[100:200]  # duplicates
    return X


def test_mst_cells_fall_back_to_scikit_learn_with_the_same_tree(monkeypatch):
    from gnnaudit.graph_ops._mst_cells import kmeans_labels
    from gnnaudit.graph_ops.mst import core_distances, mst_boruvka, mst_dense

    X = _blobs(2000, 3)
    cd = core_distances(X, 5)
    ref = mst_dense(X, cd)
    with_faiss = mst_boruvka(X, cd, n_anchors=16, n_cells=64) if available("faiss") else None
    _hide(monkeypatch, "faiss")
    labels = kmeans_labels(X, 64, seed=0)
    assert labels.shape == (2000,) and labels.dtype == np.int64
    assert 2 <= np.unique(labels).size <= 64
    np.testing.assert_array_equal(labels, kmeans_labels(X, 64, seed=0))  # deterministic
    # the cell path runs (n_anchors=16: more than 64 unresolved points) and stays exact
    got = mst_boruvka(X, cd, n_anchors=16, n_cells=64)
    assert got.total_weight == pytest.approx(ref.total_weight, rel=1e-12)
    if with_faiss is not None:  # the cells differ, the tree's weight does not
        assert got.total_weight == pytest.approx(with_faiss.total_weight, rel=1e-12)


def test_dc_tree_and_fairden_work_without_faiss(monkeypatch):
    from gnnaudit.clustering import FairDen
    from gnnaudit.graph_ops.dc_tree import DCTree

    X = _blobs(1500, 5)
    s = (X[:, 1] > 0).astype(int)
    dense = DCTree(min_samples=5, mst_method="dense").fit(X)
    fair_ref = FairDen(n_clusters=3, min_samples=5, random_state=0).fit(X, sensitive_features=s)
    _hide(monkeypatch, "faiss")
    tree = DCTree(min_samples=5, mst_method="boruvka").fit(X)
    assert tree.mst_.total_weight == pytest.approx(dense.mst_.total_weight, rel=1e-12)
    np.testing.assert_allclose(np.sort(tree.linkage_[:, 2]), np.sort(dense.linkage_[:, 2]))
    fair = FairDen(n_clusters=3, min_samples=5, random_state=0).fit(X, sensitive_features=s)
    np.testing.assert_array_equal(fair.labels_, fair_ref.labels_)


# --------------------------------------------------------------------------- networkx


def test_tree_diagnosis_without_networkx_still_names_the_pairs(monkeypatch):
    from gnnaudit.clustering import TreeClustering

    X = np.random.default_rng(0).normal(size=(12, 2))
    clique = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]  # 4 groups, 3 clusters
    with_nx = TreeClustering(3, depth=2).fit(X, cannot_link=clique)
    assert with_nx.infeasibility_.cause == "cannot-link-clique"
    _hide(monkeypatch, "networkx")
    m = TreeClustering(3, depth=2).fit(X, cannot_link=clique)
    assert m.status_ == "infeasible" and m.labels_ is None
    why = m.infeasibility_
    assert why.cause == "cannot-link-colouring"
    assert {(i, j) for i, j, _ in why.pairs} == set(clique)  # the core is the whole clique
    # two clusters: a triangle is an odd cycle
    tri = TreeClustering(2, depth=1).fit(X, cannot_link=[(0, 1), (1, 2), (0, 2)])
    assert tri.infeasibility_.cause == "cannot-link-odd-cycle"


# --------------------------------------------------------------------------- matplotlib


def _small_report():
    from gnnaudit.audit import AuditReport, Figure, ReportSection

    curve = pd.DataFrame({"x": [1, 2, 3], "y": [0.5, 0.75, 0.7]})
    section = ReportSection(
        key="errors",
        title="Error verification",
        summary="accuracy on evidences",
        figures=[Figure("curve", "accuracy vs k", curve, {"hline": 0.8})],
    )
    return AuditReport(dataset={"name": "toy"}, model={}, config={}, sections=[section])


def test_report_without_matplotlib_renders_figures_as_tables(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    drawn = _small_report().save(tmp_path / "with")["html"].read_text()
    assert "data:image/png;base64," in drawn and "matplotlib is not installed" not in drawn
    _hide(monkeypatch, "matplotlib")
    paths = _small_report().save(tmp_path / "without")
    page = paths["html"].read_text()
    assert "data:image/png" not in page
    assert "accuracy vs k" in page and "pip install &#x27;gnnaudit[plots]&#x27;" in page
    assert "<table" in page and "0.75" in page  # the chart's data, as a table
    assert "gnnaudit[plots]" in paths["markdown"].read_text()
