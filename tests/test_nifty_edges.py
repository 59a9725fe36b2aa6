"""NIFTY's similarity graph: both engines against the dense reference, and the published counts."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from gnnaudit.datasets import load_nifty, nifty_similarity_edges
from gnnaudit.datasets.nifty_cache import edge_cache_path
from gnnaudit.datasets.nifty_edges import dense_similarity_edges
from gnnaudit.errors import InvalidInputError

SHARED = Path("/work/shared/datasets/nifty")
DROP = {"credit": ["NoDefaultNextMonth", "Single"], "bail": ["RECID"]}
THRESH = {"credit": 0.7, "bail": 0.6}
PUBLISHED = {"credit": (30_000, 137_377), "bail": (18_876, 311_870)}


def _features(name: str) -> np.ndarray:
    frame = pd.read_csv(SHARED / name / f"{name}.csv")
    return frame.drop(columns=DROP[name]).to_numpy()


def _needs_shared(name: str) -> None:
    if not (SHARED / name / f"{name}.csv").is_file():
        pytest.skip(f"the NIFTY file {name}.csv is not in {SHARED}")


@pytest.mark.parametrize("name", ["credit", "bail"])
@pytest.mark.parametrize("method", ["kdtree", "blocks"])
def test_engines_equal_dense_reference_on_a_2000_row_subsample(name, method):
    _needs_shared(name)
    x = _features(name)
    sub = x[np.random.default_rng(0).choice(len(x), 2000, replace=False)]
    expected = dense_similarity_edges(sub, THRESH[name])
    got = nifty_similarity_edges(sub, THRESH[name], method=method, block_rows=97)
    assert np.array_equal(got, expected)
    assert (got[0] != got[1]).all()


def _tricky(seed: int, integer: bool) -> np.ndarray:
    """Clustered rows with exact duplicates (row maximum 1) and ties on the threshold."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 6, size=(40, 5)).astype(float)
    x = base[rng.integers(0, 40, size=300)] + rng.integers(0, 3, size=(300, 5))
    if not integer:
        x = x * 0.1 + rng.normal(scale=1e-3, size=x.shape) * (rng.random((300, 1)) < 0.5)
    return x


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("integer", [True, False])
@pytest.mark.parametrize("thresh", [0.6, 0.8, 1.0])
def test_engines_equal_dense_reference_with_duplicates_and_ties(seed, integer, thresh):
    x = _tricky(seed, integer)
    assert len(np.unique(x, axis=0)) < len(x)  # duplicates present
    if thresh == 1.0:  # pairs exactly on the strict boundary s_ij == thresh * m_i exist
        from scipy.spatial import distance_matrix

        sim = 1.0 / (1.0 + distance_matrix(x, x))
        cut = thresh * np.sort(sim, axis=1)[:, -2:-1]
        np.fill_diagonal(sim, -1.0)
        assert (sim == cut).sum() > 100
    expected = dense_similarity_edges(x, thresh)
    for method in ("kdtree", "blocks"):
        for block_rows in (1, 7, 300):
            got = nifty_similarity_edges(x, thresh, method=method, block_rows=block_rows)
            assert np.array_equal(got, expected), (method, block_rows)


def test_every_row_links_to_its_nearest_other_row():
    x = _tricky(3, integer=True)
    pairs = nifty_similarity_edges(x, 0.7)
    assert np.array_equal(np.unique(pairs[0]), np.arange(len(x)))


def test_similarity_edges_refuse_bad_input():
    with pytest.raises(InvalidInputError, match="2-D array"):
        nifty_similarity_edges(np.zeros(5), 0.5)
    with pytest.raises(InvalidInputError, match="NaN"):
        nifty_similarity_edges(np.array([[0.0], [np.nan]]), 0.5)
    with pytest.raises(InvalidInputError, match="thresh"):
        nifty_similarity_edges(np.zeros((3, 2)), 0.0)
    with pytest.raises(InvalidInputError, match="method"):
        nifty_similarity_edges(np.zeros((3, 2)), 0.5, method="faiss")
    with pytest.raises(InvalidInputError, match="block_rows"):
        nifty_similarity_edges(np.zeros((3, 2)), 0.5, block_rows=0)


@pytest.mark.parametrize("name", ["credit", "bail"])
def test_published_counts_from_the_csv_alone_and_cache(name, tmp_path, caplog):
    # a copy: the loader caches under <root>/<name>/processed and the shared folder stays as is
    _needs_shared(name)
    (tmp_path / name).mkdir()
    shutil.copy(SHARED / name / f"{name}.csv", tmp_path / name)
    with caplog.at_level(logging.INFO, logger="gnnaudit.datasets"):
        data = load_nifty(name, tmp_path)
    nodes, edges = PUBLISHED[name]
    assert data.num_nodes == nodes and data.edge_index.size(1) == 2 * edges
    assert f"{nodes} nodes, {edges} undirected edges" in caplog.text
    ei = data.edge_index
    assert (ei[0] != ei[1]).all()
    assert torch.equal(
        torch.sort(ei[0] * nodes + ei[1]).values, torch.sort(ei[1] * nodes + ei[0]).values
    )
    # the directed relation of the rule, made undirected, is exactly the loaded edge set
    x = _features(name)
    pairs = nifty_similarity_edges(x, THRESH[name])
    und = np.unique(np.sort(pairs, axis=0), axis=1)
    assert und.shape[1] == edges
    # independent check on the full graph: 300 random rows, each against all n rows, densely
    from scipy.spatial import distance_matrix

    rows = np.random.default_rng(1).choice(nodes, 300, replace=False)
    sim = 1.0 / (1.0 + distance_matrix(x[rows], x))
    second = np.sort(sim, axis=1)[:, -2]
    hit = sim > THRESH[name] * second[:, None]
    hit[np.arange(300), rows] = False
    r, c = np.nonzero(hit)
    expected = set(zip(rows[r].tolist(), c.tolist(), strict=True))
    chosen = np.isin(pairs[0], rows)
    assert set(zip(*pairs[:, chosen].tolist(), strict=True)) == expected
    cache = list((tmp_path / name / "processed").glob(f"{name}_edges_*.npy"))
    assert len(cache) == 1
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gnnaudit.datasets"):
        again = load_nifty(name, tmp_path)
    assert "read from cache" in caplog.text
    assert torch.equal(again.edge_index, data.edge_index)


def _small_credit(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "NoDefaultNextMonth": rng.integers(0, 2, n),
            "Married": rng.integers(0, 2, n),
            "Single": rng.integers(0, 2, n),
            "Age": rng.integers(0, 2, n),
            "Bill": rng.integers(0, 8, n) * 10,
            "Payment": rng.integers(0, 5, n) * 10,
        }
    )


def test_cache_is_keyed_by_csv_content_and_survives_a_bad_file(tmp_path, caplog):
    folder = tmp_path / "credit"
    folder.mkdir()
    frame = _small_credit()
    frame.to_csv(folder / "credit.csv", index=False)
    first = load_nifty("credit", tmp_path)
    features = frame.drop(columns=["NoDefaultNextMonth", "Single"]).to_numpy()
    expected = dense_similarity_edges(features, 0.7)
    expected = {(int(a), int(b)) for a, b in expected.T} | {(int(b), int(a)) for a, b in expected.T}
    assert set(zip(*first.edge_index.tolist(), strict=True)) == expected
    # another csv (one cell changed): another key, never the stale graph
    frame.loc[0, "Bill"] = 990
    frame.to_csv(folder / "credit.csv", index=False)
    second = load_nifty("credit", tmp_path)
    assert len(list((folder / "processed").glob("credit_edges_*.npy"))) == 2
    features = frame.drop(columns=["NoDefaultNextMonth", "Single"]).to_numpy()
    assert (
        second.edge_index.size(1)
        == 2 * np.unique(np.sort(dense_similarity_edges(features, 0.7), axis=0), axis=1).shape[1]
    )
    # a cache file that is not an edge index (here a pickled object array) is ignored, rebuilt
    cols = [c for c in frame.columns if c not in ("NoDefaultNextMonth", "Single")]
    key = [*cols, "rescaled:"]
    path = edge_cache_path(folder / "credit.csv", folder / "processed", 0.7, key)
    assert path.is_file()
    np.save(path, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    with caplog.at_level(logging.WARNING, logger="gnnaudit.datasets"):
        third = load_nifty("credit", tmp_path)
    assert "ignoring edge cache" in caplog.text
    assert torch.equal(third.edge_index, second.edge_index)
    assert np.load(path, allow_pickle=False).shape[0] == 2  # rewritten as a plain array


def test_german_without_edge_file_uses_the_rescaled_rule(tmp_path):
    rng = np.random.default_rng(4)
    n = 80
    frame = pd.DataFrame(
        {
            "GoodCustomer": rng.choice([-1, 1], n),
            "Gender": rng.choice(["Female", "Male"], n),
            "Age": rng.integers(19, 70, n),
            "LoanDuration": rng.integers(4, 60, n),
            "PurposeOfLoan": rng.choice(["Car", "Other"], n),
            "LoanAmount": rng.integers(250, 15000, n),
            "OtherLoansAtStore": rng.integers(0, 2, n),
            "HasTelephone": rng.integers(0, 2, n),
        }
    )
    (tmp_path / "german").mkdir()
    frame.to_csv(tmp_path / "german" / "german.csv", index=False)
    data = load_nifty("german", tmp_path)
    ref = frame.drop(columns=["GoodCustomer", "PurposeOfLoan", "OtherLoansAtStore"]).copy()
    ref["Gender"] = (ref["Gender"] == "Female").astype(int)
    for col in ("LoanAmount", "Age", "LoanDuration"):
        v = ref[col].astype(float)
        ref[col] = 2 * (v - v.min()).div(v.max() - v.min()) - 1
    pairs = dense_similarity_edges(ref.to_numpy(float), 0.8)
    expected = {(int(a), int(b)) for a, b in pairs.T} | {(int(b), int(a)) for a, b in pairs.T}
    assert set(zip(*data.edge_index.tolist(), strict=True)) == expected
