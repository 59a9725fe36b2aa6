"""load_graph / save_graph: a user's graph as .pt, .npz or a CSV folder."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data

from gnnaudit import InvalidInputError
from gnnaudit.datasets import clean_edge_index, load_graph, save_graph, synthetic_credit_graph

TENSORS = ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask", "sensitive")


@pytest.fixture(scope="module")
def credit() -> Data:
    return synthetic_credit_graph(num_nodes=120, seed=3)


def assert_same_graph(a: Data, b: Data) -> None:
    for key in TENSORS:
        assert torch.equal(a[key], b[key]), key
    assert a.x.dtype == torch.float32 and a.edge_index.dtype == torch.long
    assert a.feature_names == b.feature_names
    assert a.sensitive_name == b.sensitive_name and a.sensitive_index == b.sensitive_index


# ------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("target", ["graph.pt", "graph.npz", "graph_csv"])
def test_round_trip(tmp_path, credit, target):
    path = save_graph(credit, tmp_path / target)
    kwargs = {"sensitive": "gender"} if target == "graph_csv" else {}
    loaded = load_graph(path, **kwargs)
    assert_same_graph(loaded, credit)
    assert loaded.sensitive_values == [0.0, 1.0]
    assert loaded.num_nodes == credit.num_nodes


def test_torch_saved_data_object_is_read_with_the_allow_list(tmp_path, credit):
    torch.save(credit, tmp_path / "data.pt")
    assert_same_graph(load_graph(tmp_path / "data.pt"), credit)
    torch.save(credit.to_dict(), tmp_path / "dict.pt")
    assert_same_graph(load_graph(tmp_path / "dict.pt"), credit)


def test_npz_written_by_hand(tmp_path):
    np.savez(
        tmp_path / "g.npz",
        x=np.array([[0.5, 1.0], [1.5, 0.0], [2.0, 1.0]]),
        edge_index=np.array([[0, 1], [1, 2]]),
        label=np.array([1, 0, 1]),
        audit=np.array([True, False, True]),
        feature_names=np.array(["score", "group"]),
        sensitive_name=np.array("group"),
    )
    data = load_graph(tmp_path / "g.npz", label="label", mask_column="audit")
    assert data.y.tolist() == [1, 0, 1] and data.mask.tolist() == [True, False, True]
    assert data.feature_names == ["score", "group"] and data.sensitive_index == 1
    assert data.sensitive.tolist() == [1, 0, 1] and data.sensitive_name == "group"
    assert not hasattr(data, "test_mask") or data.get("test_mask") is None


# ------------------------------------------------------------------------------ CSV folders
def write_folder(folder, nodes: str, edges: str = "source,target\n"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nodes.csv").write_text(nodes)
    (folder / "edges.csv").write_text(edges)
    return folder


NODES = """id,age,income,gender,city,label,audit
u7,30,1.5,F,north,1,1
u2,41,2.5,M,south,0,0
u9,25,0.5,F,south,1,1
u4,52,3.0,M,north,0,1
"""
EDGES = "source,target,weight\nu7,u2,0.1\nu2,u7,0.1\nu9,u4,2\nu4,u4,1\n"


def test_csv_ids_are_node_ids_not_row_numbers(tmp_path):
    folder = write_folder(tmp_path / "g", NODES, EDGES)
    data = load_graph(
        folder,
        label="label",
        sensitive="gender",
        mask_column="audit",
        feature_columns=["age", "income"],
    )
    position = {node: i for i, node in enumerate(["u7", "u2", "u9", "u4"])}
    expected = [
        [position[s] for s in ("u7", "u2", "u9", "u4")],
        [position[t] for t in ("u2", "u7", "u4", "u4")],
    ]
    assert data.edge_index.tolist() == expected  # kept as written: directed, self loop kept
    assert data.node_ids == ["u7", "u2", "u9", "u4"]
    assert data.feature_names == ["age", "income"]
    assert data.x.tolist() == [[30, 1.5], [41, 2.5], [25, 0.5], [52, 3.0]]
    assert data.y.tolist() == [1, 0, 1, 0] and data.mask.tolist() == [True, False, True, True]
    # the text sensitive column is not a feature here: groups are codes of sorted values
    assert data.sensitive.tolist() == [0, 1, 0, 1] and data.sensitive_values == ["F", "M"]
    assert data.get("sensitive_index") is None
    undirected = load_graph(folder, label="label", feature_columns=["age"], undirected=True)
    assert torch.equal(undirected.edge_index, clean_edge_index(data.edge_index, 4))


def test_csv_sensitive_column_is_a_feature_by_default(tmp_path):
    nodes = "id,age,gender,y\n1,30,1,0\n2,40,0,1\n3,50,1,1\n"
    folder = write_folder(tmp_path / "g", nodes, "source,target\n1,2\n2,3\n")
    data = load_graph(folder, sensitive="gender")
    assert data.feature_names == ["age", "gender"] and data.sensitive_index == 1
    assert torch.equal(data.x[:, 1].long(), data.sensitive)
    assert data.y.tolist() == [0, 1, 1]  # 'y' is the label by default
    left_out = load_graph(folder, sensitive="gender", feature_columns=["age"])
    assert left_out.feature_names == ["age"] and left_out.sensitive.tolist() == [1, 0, 1]


def test_csv_header_only_edges_mean_no_edges(tmp_path):
    folder = write_folder(tmp_path / "g", "id,a\n1,0.5\n2,1.5\n")
    data = load_graph(folder)
    assert data.edge_index.shape == (2, 0) and data.get("y") is None


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 12),
    d=st.integers(1, 4),
    data=st.data(),
)
def test_csv_round_trip_with_random_ids(tmp_path_factory, n, d, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 10_000)))
    edges = rng.integers(0, n, size=(2, data.draw(st.integers(0, 30))))
    graph = Data(
        x=torch.from_numpy(rng.normal(size=(n, d)).astype(np.float32) * 1e3),
        edge_index=torch.from_numpy(edges),
        node_ids=[f"node-{v}" for v in rng.permutation(10 * n)[:n]],
        num_nodes=n,
    )
    folder = tmp_path_factory.mktemp("g") / "graph"
    save_graph(graph, folder)
    loaded = load_graph(folder)
    assert torch.equal(loaded.x, graph.x)  # float32 survives the CSV exactly
    assert torch.equal(loaded.edge_index, graph.edge_index)
    assert loaded.node_ids == graph.node_ids


# ------------------------------------------------------------------------------ bad input
BAD_FOLDERS = [
    # (nodes.csv, edges.csv, kwargs, message fragment)
    ("", "source,target\n", {}, "nodes.csv' is empty"),
    ("id,a\n", "source,target\n", {}, "at least 1 data row"),
    ("a,b\n1,2\n", "source,target\n", {}, r"id_column: .* no node-id column .*'a', 'b'"),
    ("id,a\n1,0\n2,1\n", "", {}, "edges.csv' is empty"),
    (
        "id,a\n1,0\n2,1\n",
        "source,dst\n1,2\n",
        {},
        "target_column: 'target' is not a column .*'source', 'dst'",
    ),
    (
        "id,a\n1,0\n2,1\n",
        "source,target\n1,2\n2,3\n",
        {},
        r"'target' holds ids that are not node.*row 1 \('3'\)",
    ),
    ("id,a\n1,0\n2,1\n1,5\n", "source,target\n", {}, r"unique; repeated at row 0 \('1'\), row 2"),
    ("id,a\n1,0\n,1\n", "source,target\n", {}, r"column 'id' of .* is blank at row 1"),
    ("id,a,m\n1,0,1\n2,1,2\n", "source,target\n", {"mask_column": "m"}, r"0/1; got row 1"),
    ("id,a,test_mask\n1,0,yes\n2,1,no\n", "source,target\n", {}, "'test_mask' .* 0/1"),
    (
        "id,a,s\n1,0,F\n2,1,F\n",
        "source,target\n",
        {"sensitive": "s", "feature_columns": ["a"]},
        "single value \\('F'\\)",
    ),
    (
        "id,a\n1,0\n2,unknown\n",
        "source,target\n",
        {},
        r"'a' mixes numbers and text: text at row 1 \(id '2'",
    ),
    ("id,a\n1,0\n2,\n", "source,target\n", {}, r"'a' has missing values at row 1 \(id '2': blank"),
    ("id,a\n1,inf\n2,0\n", "source,target\n", {}, r"'a' has infinite values at row 0"),
    ("id,a\n1,0\n2,1\n", "source,target\n", {"label": "y"}, "label: 'y' is not a column"),
    ("id,a,y\n1,0,1.5\n2,1,0\n", "source,target\n", {}, "'y' must hold whole numbers >= 0"),
    ("id,a,y\n1,0,-1\n2,1,0\n", "source,target\n", {}, "'y' must hold whole numbers >= 0"),
    ("id,a\n1,0\n2,1\n", "source,target\n", {"sensitive": "g"}, "sensitive: 'g' is not a column"),
    ("id,a,y\n1,0,1\n", "source,target\n", {"feature_columns": ["y"]}, "label or split"),
    ("id,a\n1,0\n", "source,target\n", {"feature_columns": ["a", "a"]}, "more than once"),
    ("id,a\n1,0\n", "source,target\n", {"feature_columns": ["b"]}, r"\['b'\] are not feature"),
    ("id,y\n1,0\n", "source,target\n", {}, "has no feature column"),
]


@pytest.mark.parametrize("nodes, edges, kwargs, fragment", BAD_FOLDERS)
def test_bad_csv_folders(tmp_path, nodes, edges, kwargs, fragment):
    folder = write_folder(tmp_path / "g", nodes, edges)
    with pytest.raises(InvalidInputError, match=fragment) as info:
        load_graph(folder, name="--graph", **kwargs)
    assert "\n" not in str(info.value)


def test_missing_files_and_paths(tmp_path):
    (tmp_path / "only_nodes").mkdir()
    (tmp_path / "only_nodes" / "nodes.csv").write_text("id,a\n1,0\n")
    with pytest.raises(InvalidInputError, match="--graph: file .*edges.csv' does not exist"):
        load_graph(tmp_path / "only_nodes", name="--graph")
    with pytest.raises(InvalidInputError, match="--graph: .*nowhere.pt' does not exist"):
        load_graph(tmp_path / "nowhere.pt", name="--graph")
    (tmp_path / "graph.txt").write_text("x")
    with pytest.raises(InvalidInputError, match="not a graph file"):
        load_graph(tmp_path / "graph.txt")
    with pytest.raises(InvalidInputError, match="label must be a column name"):
        load_graph(tmp_path, label=3)
    with pytest.raises(InvalidInputError, match="feature_columns must be a list"):
        load_graph(tmp_path, feature_columns="a")


@pytest.mark.parametrize(
    "content, fragment",
    [
        ({"edge_index": torch.zeros(2, 0, dtype=torch.long)}, "lacks x"),
        ({"x": torch.ones(3), "edge_index": torch.zeros(2, 0, dtype=torch.long)}, "'x' must"),
        ({"x": torch.ones(0, 2), "edge_index": torch.zeros(2, 0, dtype=torch.long)}, "empty"),
        ({"x": torch.ones(2, 2), "edge_index": torch.tensor([[0], [5]])}, r"\[0, 1\]"),
        ({"x": torch.ones(2, 2), "edge_index": torch.ones(2, 1)}, "integer node ids"),
        ({"x": torch.ones(2, 2), "edge_index": ["0", "1"]}, "'edge_index' must be a \\(2, E\\)"),
        (
            {"x": torch.tensor([[1.0], [float("nan")]]), "edge_index": torch.zeros(2, 0).long()},
            r"finite; got row 1 of 'x0' \(nan\)",
        ),
        (
            {"x": torch.ones(2, 2), "edge_index": torch.zeros(2, 0).long(), "feature_names": ["a"]},
            "'feature_names' has 1 entries, expected 2",
        ),
        (
            {
                "x": torch.ones(2, 1),
                "edge_index": torch.zeros(2, 0).long(),
                "sensitive_name": "g",
            },
            "sensitive='g' is not a column",
        ),
    ],
)
def test_bad_tensor_files(tmp_path, content, fragment):
    torch.save(content, tmp_path / "g.pt")
    with pytest.raises(InvalidInputError, match=fragment):
        load_graph(tmp_path / "g.pt")
    arrays = {
        k: (np.array(v) if isinstance(v, list | str) else v.numpy()) for k, v in content.items()
    }
    np.savez(tmp_path / "g.npz", **arrays)
    with pytest.raises(InvalidInputError, match=fragment):
        load_graph(tmp_path / "g.npz")


def test_pt_holding_something_else(tmp_path):
    torch.save([torch.ones(2)], tmp_path / "list.pt")
    with pytest.raises(InvalidInputError, match="dict of tensors .* got list"):
        load_graph(tmp_path / "list.pt")


# ------------------------------------------------------------------------------ payloads
@pytest.mark.parametrize("wrap", [True, False])
def test_pt_graph_payload_is_refused(tmp_path, payload, wrap):
    path = payload.torch_file(tmp_path / "graph.pt", wrap=wrap)
    with pytest.raises(InvalidInputError, match="--graph: .*refused: it needs .*exec"):
        load_graph(path, name="--graph")
    assert not payload.ran


def test_data_object_carrying_a_payload_is_refused(tmp_path, payload, credit):
    evil = credit.clone()
    evil.note = payload.instance()
    torch.save(evil, tmp_path / "graph.pt")
    with pytest.raises(InvalidInputError, match="refused"):
        load_graph(tmp_path / "graph.pt")
    assert not payload.ran


def test_npz_graph_payload_is_refused(tmp_path, payload):
    path = payload.npz_file(tmp_path / "graph.npz")
    with pytest.raises(InvalidInputError, match="object array"):
        load_graph(path)
    assert not payload.ran


# ------------------------------------------------------------------------------ save_graph
def test_save_graph_refuses_to_overwrite_without_force(tmp_path, credit):
    for target in ("g.pt", "g.npz", "g"):
        save_graph(credit, tmp_path / target)
        with pytest.raises(InvalidInputError, match="already"):
            save_graph(credit, tmp_path / target)
        save_graph(credit, tmp_path / target, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g", "g.npz", "g.pt"]


def test_save_graph_csv_conflicts(tmp_path):
    clash = Data(x=torch.ones(2, 1), edge_index=torch.zeros(2, 0).long(), feature_names=["id"])
    with pytest.raises(InvalidInputError, match=r"feature name\(s\) \['id'\] clash"):
        save_graph(clash, tmp_path / "g")
    grouped = Data(
        x=torch.tensor([[20.0], [40.0], [60.0]]),
        edge_index=torch.zeros(2, 0).long(),
        feature_names=["age"],
        sensitive=torch.tensor([0, 1, 1]),  # age > 30, not the distinct ages
        sensitive_name="age",
    )
    with pytest.raises(InvalidInputError, match="save to .pt or .npz"):
        save_graph(grouped, tmp_path / "g")
    assert not (tmp_path / "g").exists()
    save_graph(grouped, tmp_path / "g.pt")
    assert load_graph(tmp_path / "g.pt").sensitive.tolist() == [0, 1, 1]
    with pytest.raises(InvalidInputError, match="data must be a torch_geometric Data"):
        save_graph({"x": 1}, tmp_path / "h.pt")


# ------------------------------------------------------------------------------ fuzz
CSV_TEXT = st.text(alphabet="id,sourcetarget\n0123 .-xyTFnaN\x00", max_size=80)


@settings(max_examples=60, deadline=None)
@given(nodes=CSV_TEXT, edges=CSV_TEXT, blob=st.binary(max_size=200))
def test_any_file_content_loads_or_gives_invalid_input(tmp_path_factory, nodes, edges, blob):
    folder = tmp_path_factory.mktemp("fuzz")
    write_folder(folder / "g", "id,a,y\n" + nodes, "source,target\n" + edges)
    (folder / "g.pt").write_bytes(blob)
    (folder / "g.npz").write_bytes(blob)
    for path in (folder / "g", folder / "g.pt", folder / "g.npz"):
        try:
            data = load_graph(path)
        except InvalidInputError as exc:
            assert "\n" not in str(exc)
        else:
            assert data.x.dtype == torch.float32 and torch.isfinite(data.x).all()
            top = int(data.edge_index.max()) if data.edge_index.numel() else 0
            assert top < max(data.num_nodes, 1)
