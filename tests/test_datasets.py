"""Graph dataset loaders and generators: shapes, determinism, edge hygiene, splits, errors."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from torch_geometric.data import Data

from gnnaudit import InvalidInputError
from gnnaudit.datasets import (
    SYNTHETIC_FEATURES,
    attach_masks,
    clean_edge_index,
    load_nifty,
    load_planetoid,
    load_pyg,
    random_masks,
    stratified_masks,
    synthetic_credit_graph,
)

CORA_ROOT = "/work/shared/datasets/planetoid"


@pytest.fixture(autouse=True)
def _few_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def assert_clean_undirected(edge_index: torch.Tensor, num_nodes: int) -> None:
    src, dst = edge_index.tolist()
    pairs = list(zip(src, dst, strict=True))
    assert len(set(pairs)) == len(pairs), "duplicate edges"
    assert all(u != v for u, v in pairs), "self loops"
    assert set(pairs) == {(v, u) for u, v in pairs}, "not symmetric"
    assert edge_index.dtype == torch.long
    assert int(edge_index.min()) >= 0 and int(edge_index.max()) < num_nodes


def assert_partition(data: Data) -> None:
    total = data.train_mask.long() + data.val_mask.long() + data.test_mask.long()
    assert torch.equal(total, torch.ones(data.num_nodes, dtype=torch.long))


# --------------------------------------------------------------------------- synthetic graph
def test_synthetic_shapes_and_attributes():
    data = synthetic_credit_graph(num_nodes=300, seed=1)
    assert data.num_nodes == 300
    assert data.x.dtype == torch.float32 and data.x.shape == (300, len(SYNTHETIC_FEATURES))
    assert data.feature_names == list(SYNTHETIC_FEATURES)
    assert data.y.dtype == torch.long and set(data.y.tolist()) == {0, 1}
    assert data.sensitive.dtype == torch.long and set(data.sensitive.tolist()) == {0, 1}
    assert data.sensitive_name == "gender"
    assert data.feature_names[data.sensitive_index] == "gender"
    assert torch.equal(data.x[:, data.sensitive_index].long(), data.sensitive)
    assert torch.isfinite(data.x).all()
    assert_clean_undirected(data.edge_index, 300)
    assert_partition(data)
    # binary credit columns stay 0/1, numeric ones are standardised
    assert set(data.x[:, 6:].unique().tolist()) <= {0.0, 1.0}
    assert torch.allclose(data.x[:, :6].mean(0), torch.zeros(6), atol=1e-4)


def test_synthetic_is_deterministic_per_seed():
    a = synthetic_credit_graph(num_nodes=200, seed=3)
    b = synthetic_credit_graph(num_nodes=200, seed=3)
    c = synthetic_credit_graph(num_nodes=200, seed=4)
    for key in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask", "sensitive"):
        assert torch.equal(a[key], b[key]), key
    assert not torch.equal(a.x, c.x)


def _gender_coefficient(data: Data) -> float:
    model = LogisticRegression(C=100.0, max_iter=2000).fit(data.x.numpy(), data.y.numpy())
    return float(model.coef_[0, data.sensitive_index])


def test_bias_zero_means_label_independent_of_gender_given_features():
    unbiased = synthetic_credit_graph(num_nodes=4000, bias=0.0, seed=0)
    biased = synthetic_credit_graph(num_nodes=4000, bias=1.5, seed=0)
    # Without bias gender carries no weight once the other features are known ...
    assert abs(_gender_coefficient(unbiased)) < 0.4
    # ... with bias the planted effect is clearly recovered (positive: gender=1 favoured).
    assert _gender_coefficient(biased) > 2.0
    g, y = biased.sensitive, biased.y.float()
    assert float(y[g == 1].mean() - y[g == 0].mean()) > 0.2
    g, y = unbiased.sensitive, unbiased.y.float()
    assert abs(float(y[g == 1].mean() - y[g == 0].mean())) < 0.06
    # non-sensitive features are generated independently of gender and of bias
    assert torch.equal(unbiased.x, biased.x)


def test_homophily_controls_same_gender_edges():
    def same_fraction(h: float) -> float:
        d = synthetic_credit_graph(num_nodes=600, homophily=h, seed=2)
        g = d.sensitive
        return float((g[d.edge_index[0]] == g[d.edge_index[1]]).float().mean())

    low, mid, high = same_fraction(0.0), same_fraction(0.5), same_fraction(1.0)
    assert low < mid < high
    assert high > 0.7 and low < 0.35


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"num_nodes": 5}, "num_nodes"),
        ({"num_nodes": 100.5}, "num_nodes"),
        ({"homophily": 1.5}, "homophily"),
        ({"homophily": -0.1}, "homophily"),
        ({"bias": float("nan")}, "bias"),
        ({"bias": float("inf")}, "bias"),
        ({"seed": -1}, "seed"),
    ],
)
def test_synthetic_rejects_bad_arguments(kwargs, word):
    with pytest.raises(InvalidInputError, match=word):
        synthetic_credit_graph(**kwargs)


# --------------------------------------------------------------------------- splits and edges
def _class_counts_oracle(y: np.ndarray, train: float, val: float) -> dict[int, tuple[int, int]]:
    out = {}
    for c in np.unique(y):
        n = int((y == c).sum())
        n_train = max(int(np.rint(train * n)), 1)
        n_val = min(int(np.rint(val * n)), max(n - n_train, 0))
        out[int(c)] = (n_train, n_val)
    return out


@settings(max_examples=40, deadline=None)
@given(
    labels=st.lists(st.integers(0, 4), min_size=1, max_size=120),
    fractions=st.sampled_from([(0.5, 0.25, 0.25), (0.6, 0.2, 0.2), (0.1, 0.1, 0.8)]),
    seed=st.integers(0, 10_000),
)
def test_stratified_masks_partition_and_per_class_counts(labels, fractions, seed):
    y = np.array(labels)
    split = stratified_masks(torch.tensor(y), *fractions, seed=seed)
    total = split.train_mask.long() + split.val_mask.long() + split.test_mask.long()
    assert torch.equal(total, torch.ones(len(y), dtype=torch.long))
    for c, (n_train, n_val) in _class_counts_oracle(y, fractions[0], fractions[1]).items():
        in_class = torch.from_numpy(y == c)
        assert int((split.train_mask & in_class).sum()) == n_train
        assert int((split.val_mask & in_class).sum()) == n_val
    again = stratified_masks(torch.tensor(y), *fractions, seed=seed)
    assert torch.equal(again.train_mask, split.train_mask)
    assert torch.equal(again.val_mask, split.val_mask)


def test_stratified_masks_depend_on_seed_and_report_sizes():
    y = torch.arange(400) % 2
    a, b = stratified_masks(y, seed=0), stratified_masks(y, seed=1)
    assert not torch.equal(a.train_mask, b.train_mask)
    assert a.sizes() == {"train": 200, "val": 100, "test": 100}


@pytest.mark.parametrize(
    "args, word",
    [
        ((torch.tensor([0, 1]), 0.5, 0.5, 0.5), "equal 1"),
        ((torch.tensor([0, 1]), 0.0, 0.5, 0.5), "train"),
        ((torch.tensor([0, -1]),), "y must hold labels >= 0"),
        ((torch.tensor([0.5, 1.0]),), "integer"),
        ((torch.zeros(2, 2, dtype=torch.long),), "1-D"),
    ],
)
def test_stratified_masks_rejects_bad_input(args, word):
    with pytest.raises(InvalidInputError, match=word):
        stratified_masks(*args)


def test_random_masks_partition():
    split = random_masks(101, seed=5)
    total = split.train_mask.long() + split.val_mask.long() + split.test_mask.long()
    assert torch.equal(total, torch.ones(101, dtype=torch.long))
    assert split.sizes() == {"train": 50, "val": 25, "test": 26}


def test_attach_masks_keeps_shipped_split_and_handles_multilabel():
    data = Data(x=torch.zeros(10, 2), y=torch.arange(10) % 2, num_nodes=10)
    data.train_mask = torch.arange(10) < 3
    data.val_mask = (torch.arange(10) >= 3) & (torch.arange(10) < 5)
    data.test_mask = torch.arange(10) >= 5
    kept = attach_masks(data, seed=0)
    assert torch.equal(kept.train_mask, data.train_mask)
    redone = attach_masks(data, seed=0, overwrite=True)
    assert_partition(redone)
    assert int(redone.train_mask.sum()) == 4  # 5 nodes per class, rint(0.5 * 5) = 2 each
    multi = Data(x=torch.zeros(20, 2), y=torch.randint(0, 2, (20, 3)).float(), num_nodes=20)
    filled = attach_masks(multi, seed=0)
    assert_partition(filled)
    assert not hasattr(multi, "train_mask") or multi.train_mask is None  # input untouched


def test_clean_edge_index_matches_set_oracle():
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 15, size=(2, 80))
    cleaned = clean_edge_index(torch.from_numpy(raw), 15)
    expected = {(int(u), int(v)) for u, v in raw.T if u != v} | {
        (int(v), int(u)) for u, v in raw.T if u != v
    }
    assert set(zip(*cleaned.tolist(), strict=True)) == expected
    assert cleaned.size(1) == len(expected)
    with pytest.raises(InvalidInputError, match="edge_index"):
        clean_edge_index(torch.tensor([[0, 20], [1, 2]]), 15)


# --------------------------------------------------------------------------- NIFTY
GERMAN_ROWS = [
    # Gender, ForeignWorker, Age, PurposeOfLoan, LoanAmount, OtherLoansAtStore, GoodCustomer
    ("Female", 1, 30, "Car", 1000, 0, 1),
    ("Male", 0, 45, "Education", 2500, 1, -1),
    ("Male", 1, 22, "Car", 800, 0, 1),
    ("Female", 0, 60, "Furniture", 4000, 0, -1),
    ("Female", 1, 35, "Car", 1200, 1, 1),
    ("Male", 1, 51, "Education", 3000, 0, -1),
    ("Male", 0, 28, "Other", 1500, 0, 1),
    ("Female", 1, 41, "Car", 2200, 0, -1),
]
GERMAN_COLUMNS = [
    "Gender",
    "ForeignWorker",
    "Age",
    "PurposeOfLoan",
    "LoanAmount",
    "OtherLoansAtStore",
    "GoodCustomer",
]
# one-directional, reverse-duplicated, repeated, and a self loop
GERMAN_EDGES = [(0, 1), (1, 0), (1, 2), (2, 3), (3, 2), (4, 5), (4, 5), (6, 6), (7, 0), (5, 7)]


def _write_nifty(root, name: str, frame: pd.DataFrame, edges, fmt: str = "%.18e") -> None:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_csv(folder / f"{name}.csv", index=False)
    np.savetxt(folder / f"{name}_edges.txt", np.asarray(edges, dtype=np.float64), fmt=fmt)


@pytest.fixture
def german_root(tmp_path):
    _write_nifty(
        tmp_path, "german", pd.DataFrame(GERMAN_ROWS, columns=GERMAN_COLUMNS), GERMAN_EDGES
    )
    return tmp_path


def test_load_nifty_german_fixture(german_root):
    text = (german_root / "german" / "german_edges.txt").read_text()
    assert "e+00" in text  # the fixture really writes float-formatted ids
    data = load_nifty("german", german_root, seed=0)
    assert data.num_nodes == 8
    assert data.feature_names == ["Gender", "ForeignWorker", "Age", "LoanAmount"]
    assert data.x.dtype == torch.float32 and data.x.shape == (8, 4)
    assert data.y.tolist() == [1, 0, 1, 0, 1, 0, 1, 0]
    assert data.sensitive.tolist() == [1, 0, 0, 1, 1, 0, 0, 1]  # Female = 1
    assert data.sensitive_name == "Gender" and data.sensitive_index == 0
    assert torch.equal(data.x[:, 0].long(), data.sensitive)
    # binary columns are kept, numeric ones standardised
    assert data.x[:, 1].tolist() == [1, 0, 1, 0, 1, 1, 0, 1]
    assert abs(float(data.x[:, 2].mean())) < 1e-5
    expected = {(u, v) for u, v in GERMAN_EDGES if u != v} | {
        (v, u) for u, v in GERMAN_EDGES if u != v
    }
    assert set(zip(*data.edge_index.tolist(), strict=True)) == expected
    assert_clean_undirected(data.edge_index, 8)
    assert_partition(data)
    raw = load_nifty("german", german_root, standardize=False)
    assert raw.x[:, 2].tolist() == [30, 45, 22, 60, 35, 51, 28, 41]


def test_load_nifty_bail_and_credit(tmp_path):
    bail = pd.DataFrame(
        {"WHITE": [1, 0, 1, 0, 1, 0], "PRIORS": [0, 3, 1, 5, 2, 0], "RECID": [0, 1, 0, 1, 1, 0]}
    )
    _write_nifty(tmp_path, "bail", bail, [(0, 1), (2, 3), (4, 5)], fmt="%d")
    data = load_nifty("bail", tmp_path)
    assert data.feature_names == ["WHITE", "PRIORS"]
    assert data.sensitive.tolist() == [1, 0, 1, 0, 1, 0] and data.y.tolist() == [0, 1, 0, 1, 1, 0]
    assert data.edge_index.size(1) == 6

    credit = pd.DataFrame(
        {
            "Age": [22, 40, 25, 31, 60, 19],
            "Single": [1, 0, 1, 0, 0, 1],
            "LIMIT": [1e4, 5e4, 2e4, 3e4, 8e4, 1e4],
            "NoDefaultNextMonth": [1, 1, 0, 1, 0, 1],
        }
    )
    _write_nifty(tmp_path, "credit", credit, [(0, 5), (5, 0), (1, 2)])
    data = load_nifty("credit", tmp_path)
    assert data.feature_names == ["Age", "LIMIT"]  # NIFTY drops 'Single'
    assert data.sensitive.tolist() == [0, 1, 0, 1, 1, 0]  # Age > 25
    assert torch.equal(data.x[:, data.sensitive_index].long(), data.sensitive)


def test_load_nifty_errors(tmp_path, german_root):
    with pytest.raises(InvalidInputError, match="german.csv"):
        load_nifty("german", tmp_path / "nowhere")
    os.remove(german_root / "german" / "german_edges.txt")
    built = load_nifty("german", german_root)  # no edge file: NIFTY's rule builds the graph
    assert_clean_undirected(built.edge_index, 8)
    assert (german_root / "german" / "processed").is_dir()
    with pytest.raises(InvalidInputError, match="'german', 'bail', 'credit'"):
        load_nifty("adult", german_root)
    with pytest.raises(InvalidInputError, match="root must be a folder path, got NoneType"):
        load_nifty("german", None)

    frame = pd.DataFrame(GERMAN_ROWS, columns=GERMAN_COLUMNS).drop(columns=["GoodCustomer"])
    _write_nifty(tmp_path / "a", "german", frame, GERMAN_EDGES)
    with pytest.raises(InvalidInputError, match="GoodCustomer"):
        load_nifty("german", tmp_path / "a")

    frame = pd.DataFrame(GERMAN_ROWS, columns=GERMAN_COLUMNS)
    _write_nifty(tmp_path / "b", "german", frame, [(0, 8)])
    with pytest.raises(InvalidInputError, match="node ids in"):
        load_nifty("german", tmp_path / "b")
    _write_nifty(tmp_path / "c", "german", frame, [(0, 1.5)], fmt="%.3f")
    with pytest.raises(InvalidInputError, match="non-integer"):
        load_nifty("german", tmp_path / "c")


def _german_frame() -> pd.DataFrame:
    return pd.DataFrame(GERMAN_ROWS, columns=GERMAN_COLUMNS)


def test_nifty_stray_string_in_numeric_column_is_refused_not_recoded(tmp_path):
    frame = _german_frame().astype({"LoanAmount": object})
    frame.loc[3, "LoanAmount"] = "unknown"
    _write_nifty(tmp_path, "german", frame, GERMAN_EDGES)
    with pytest.raises(
        InvalidInputError, match=r"'LoanAmount' mixes numbers and text: .*row 3 \('unknown'\)"
    ):
        load_nifty("german", tmp_path)


@pytest.mark.parametrize(
    "column, row",
    [("Gender", 2), ("GoodCustomer", 5), ("PurposeOfLoan", 1), ("Age", 4)],
)
def test_nifty_blank_cell_gives_a_clear_error(tmp_path, column, row):
    frame = _german_frame().astype({column: object})
    frame.loc[row, column] = None
    if column == "PurposeOfLoan":  # dropped by the German spec: keep a used text column
        frame = frame.rename(columns={"PurposeOfLoan": "Housing"})
        column = "Housing"
    _write_nifty(tmp_path, "german", frame, GERMAN_EDGES)
    with pytest.raises(
        InvalidInputError, match=rf"'{column}' has missing values at row {row} \(blank\)"
    ):
        load_nifty("german", tmp_path)


def test_nifty_text_feature_is_coded_and_single_group_refused(tmp_path):
    frame = _german_frame().rename(columns={"PurposeOfLoan": "Housing"})
    _write_nifty(tmp_path / "a", "german", frame, GERMAN_EDGES)
    data = load_nifty("german", tmp_path / "a", standardize=False)
    housing = data.x[:, data.feature_names.index("Housing")].tolist()
    assert housing == [0, 1, 0, 2, 0, 1, 3, 0]  # Car, Education, Furniture, Other
    frame = _german_frame()
    frame["Gender"] = "Female"
    _write_nifty(tmp_path / "b", "german", frame, GERMAN_EDGES)
    with pytest.raises(InvalidInputError, match="'Gender' holds a single group"):
        load_nifty("german", tmp_path / "b")


def test_nifty_unreadable_files(tmp_path):
    _write_nifty(tmp_path, "german", _german_frame(), GERMAN_EDGES)
    (tmp_path / "german" / "german_edges.txt").write_bytes(b"\x00\x01binary")
    with pytest.raises(InvalidInputError, match="german_edges.txt' is a binary file"):
        load_nifty("german", tmp_path)
    (tmp_path / "german" / "german.csv").write_bytes(b"")
    with pytest.raises(InvalidInputError, match="german.csv' is empty"):
        load_nifty("german", tmp_path)


# --------------------------------------------------------------------------- PyG datasets
def test_pyg_loaders_refuse_to_download(tmp_path):
    with pytest.raises(InvalidInputError, match="ind.cora.x"):
        load_planetoid("cora", tmp_path)
    with pytest.raises(InvalidInputError, match="facebook.npz"):
        load_pyg("FacebookPagePage", tmp_path)
    with pytest.raises(InvalidInputError, match="FacebookPagePage"):
        load_pyg("Reddit", tmp_path)
    with pytest.raises(InvalidInputError, match="'cora', 'citeseer', 'pubmed'"):
        load_planetoid("reddit", tmp_path)


def _write_facebook(root, n: int = 30) -> None:
    rng = np.random.default_rng(0)
    raw = root / "FacebookPagePage" / "raw"
    raw.mkdir(parents=True)
    np.savez(
        raw / "facebook.npz",
        features=rng.normal(size=(n, 4)).astype(np.float32),
        target=np.arange(n) % 3,
        edges=np.array([[i, (i + 1) % n] for i in range(n)] + [[0, 0]]),
    )


def _tree(folder) -> list[str]:
    """Every path under ``folder`` (to show that a loader wrote nothing)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_load_pyg_offline_from_raw_files(tmp_path):
    _write_facebook(tmp_path)
    before = _tree(tmp_path)
    data = load_pyg("FacebookPagePage", tmp_path, seed=0)
    assert data.x.shape == (30, 4) and data.x.dtype == torch.float32
    assert data.edge_index.size(1) == 60  # ring, symmetrised, self loop dropped
    assert_clean_undirected(data.edge_index, 30)
    assert_partition(data)
    for c in range(3):  # stratified: 5 of the 10 nodes of each class train
        assert int(data.train_mask[data.y == c].sum()) == 5
    assert _tree(tmp_path) == before  # no processed/ folder, nothing written


def _write_planetoid(root, n_train: int, n_all: int, n_test: int, d: int, seed: int = 0):
    """Raw Planetoid files (PyG's format) for a random graph of ``n_all + n_test`` nodes."""
    rng = np.random.default_rng(seed)
    n, classes = n_all + n_test, 3
    raw = root / "Cora" / "raw"
    raw.mkdir(parents=True)
    feats = (rng.random((n, d)) < 0.3).astype(np.float32)
    onehot = np.eye(classes, dtype=np.int32)[rng.integers(0, classes, n)]
    order = n_all + rng.permutation(n_test)  # tx row i belongs to node order[i]
    parts = {
        "x": sp.csr_matrix(feats[:n_train]),
        "allx": sp.csr_matrix(feats[:n_all]),
        "tx": sp.csr_matrix(feats[order]),
        "y": onehot[:n_train],
        "ally": onehot[:n_all],
        "ty": onehot[order],
    }
    graph = defaultdict(list)
    for u, v in rng.integers(0, n, size=(3 * n, 2)).tolist():
        graph[u].append(v)
        graph[v].append(u)
    graph[0].append(0)  # a self loop, as the real files have
    parts["graph"] = graph
    for part, obj in parts.items():
        (raw / f"ind.cora.{part}").write_bytes(pickle.dumps(obj, protocol=2))
    (raw / "ind.cora.test.index").write_text("\n".join(map(str, order)) + "\n")
    return raw, feats, onehot.argmax(1)


def test_load_planetoid_matches_pyg_reader_on_generated_raw_files(tmp_path):
    from torch_geometric.io.planetoid import read_planetoid_data

    raw, feats, labels = _write_planetoid(tmp_path, n_train=12, n_all=520, n_test=20, d=7)
    ours = load_planetoid("cora", tmp_path, split="public")
    ref = read_planetoid_data(str(raw), "cora")  # trusted: this test wrote the files
    assert torch.equal(ours.x, ref.x) and torch.equal(ours.y, ref.y)
    assert torch.equal(ours.x, torch.from_numpy(feats))  # tx rows placed at test.index
    assert torch.equal(ours.y, torch.from_numpy(labels))
    for key in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(ours[key], ref[key]), key
    assert torch.equal(ours.edge_index, clean_edge_index(ref.edge_index, ref.num_nodes))


def test_planetoid_loader_never_touches_processed_files(tmp_path, payload):
    _write_planetoid(tmp_path, n_train=6, n_all=20, n_test=10, d=4)
    processed = tmp_path / "Cora" / "processed"
    payload.torch_file(processed / "data.pt")
    payload.torch_file(processed / "pre_transform.pt", wrap=False)
    payload.torch_file(processed / "pre_filter.pt", wrap=False)
    before = _tree(tmp_path)
    data = load_planetoid("cora", tmp_path)
    assert data.num_nodes == 30
    assert not payload.ran
    assert _tree(tmp_path) == before


def test_planetoid_raw_payload_is_refused(tmp_path, payload):
    _write_planetoid(tmp_path, n_train=6, n_all=20, n_test=10, d=4)
    payload.pickle_file(tmp_path / "Cora" / "raw" / "ind.cora.x")
    with pytest.raises(InvalidInputError, match="root: .*ind.cora.x' refused: .*exec"):
        load_planetoid("cora", tmp_path)
    assert not payload.ran


def test_planetoid_inconsistent_raw_files(tmp_path):
    raw, _, _ = _write_planetoid(tmp_path, n_train=6, n_all=20, n_test=10, d=4)
    (raw / "ind.cora.test.index").write_text("20\n21\n")
    with pytest.raises(InvalidInputError, match="test.index lists 2 ids for 10 rows"):
        load_planetoid("cora", tmp_path)
    (raw / "ind.cora.test.index").write_text("\n".join(["20"] * 10))
    with pytest.raises(InvalidInputError, match="distinct"):
        load_planetoid("cora", tmp_path)


def test_facebook_payload_is_refused(tmp_path, payload):
    payload.npz_file(tmp_path / "FacebookPagePage" / "raw" / "facebook.npz")
    with pytest.raises(InvalidInputError, match="object array, which needs unpickling"):
        load_pyg("FacebookPagePage", tmp_path)
    assert not payload.ran


def test_facebook_missing_array(tmp_path):
    raw = tmp_path / "FacebookPagePage" / "raw"
    raw.mkdir(parents=True)
    np.savez(raw / "facebook.npz", features=np.ones((3, 2)), target=np.arange(3))
    with pytest.raises(InvalidInputError, match="lacks the array 'edges'"):
        load_pyg("FacebookPagePage", tmp_path)


def test_read_only_folders_each_give_their_own_graph(tmp_path):
    # two read-only copies of "Cora" with different sizes: each load returns its own graph
    roots = {}
    for name, (n_all, d) in {"a": (60, 30), "b": (65, 40)}.items():
        root = tmp_path / name
        _write_planetoid(root, n_train=6, n_all=n_all, n_test=10, d=d, seed=len(roots))
        roots[name] = root
    modes = {}
    for root in roots.values():
        for folder in [root, *root.rglob("*")]:
            if folder.is_dir():
                modes[folder] = folder.stat().st_mode
                folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        first = load_planetoid("cora", roots["a"])
        second = load_planetoid("cora", roots["b"])
        again = load_planetoid("cora", roots["a"])
    finally:
        for folder, mode in modes.items():
            folder.chmod(mode)
    assert tuple(first.x.shape) == (70, 30) and tuple(second.x.shape) == (75, 40)
    assert torch.equal(first.x, again.x)


def test_planetoid_reads_a_changed_raw_file(tmp_path):
    _write_planetoid(tmp_path, n_train=6, n_all=20, n_test=10, d=4, seed=0)
    first = load_planetoid("cora", tmp_path)
    shutil.rmtree(tmp_path / "Cora")
    _write_planetoid(tmp_path, n_train=6, n_all=25, n_test=10, d=5, seed=1)
    second = load_planetoid("cora", tmp_path)
    assert first.num_nodes == 30 and second.num_nodes == 35 and second.x.shape[1] == 5


def _write_amazon(root, n: int = 12) -> None:
    raw = root / "AmazonProducts" / "raw"
    raw.mkdir(parents=True)
    adj = sp.csr_matrix(np.roll(np.eye(n, dtype=np.float32), 1, axis=1))
    np.savez(
        raw / "adj_full.npz",
        data=adj.data,
        indices=adj.indices,
        indptr=adj.indptr,
        shape=np.array(adj.shape),
    )
    np.save(raw / "feats.npy", np.arange(n * 3, dtype=np.float32).reshape(n, 3))
    labels = {str(i): [int(i % 2), int(i % 3 == 0)] for i in reversed(range(n))}
    (raw / "class_map.json").write_text(json.dumps(labels))
    (raw / "role.json").write_text(
        json.dumps({"tr": list(range(6)), "va": [6, 7, 8], "te": [9, 10, 11]})
    )


def test_load_amazon_products_from_raw_files(tmp_path):
    _write_amazon(tmp_path)
    data = load_pyg("AmazonProducts", tmp_path, split="public")
    assert data.x.shape == (12, 3) and data.y.shape == (12, 2)
    assert data.y[:, 0].tolist() == [i % 2 for i in range(12)]
    assert data.test_mask.nonzero().view(-1).tolist() == [9, 10, 11]
    assert_clean_undirected(data.edge_index, 12)
    assert data.edge_index.size(1) == 24  # a ring, symmetrised


@pytest.mark.skipif(
    not os.path.isdir(os.path.join(CORA_ROOT, "Cora", "raw")), reason="Cora raw files absent"
)
def test_load_planetoid_cora():
    from torch_geometric.io.planetoid import read_planetoid_data

    data = load_planetoid("Cora", CORA_ROOT, seed=0)
    assert data.x.shape == (2708, 1433) and data.x.dtype == torch.float32
    assert data.edge_index.size(1) == 10556
    assert int(data.y.max()) == 6
    assert_partition(data)
    assert_clean_undirected(data.edge_index, 2708)
    public = load_planetoid("cora", CORA_ROOT, split="public")
    assert [int(public[k].sum()) for k in ("train_mask", "val_mask", "test_mask")] == [
        140,
        500,
        1000,
    ]
    ref = read_planetoid_data(os.path.join(CORA_ROOT, "Cora", "raw"), "cora")  # shared, trusted
    assert torch.equal(public.x, ref.x) and torch.equal(public.y, ref.y)
    assert torch.equal(public.test_mask, ref.test_mask)
