"""read_graph: any node / edge table (named columns, text columns, split column, Parquet)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnaudit.datasets import load_graph, read_graph
from gnnaudit.errors import InvalidInputError

NODES = pd.DataFrame(
    {
        "user_id": ["u7", "u2", "u9", "u4", "u1"],
        "age": [30, 41, 25, 52, 33],
        "city": ["Paris", "Lyon", "Nice", "Paris", "Lyon"],
        "owner": ["yes", "no", "no", "yes", "yes"],
        "gender": ["M", "F", "F", "M", "F"],
        "notes": ["a", "b", "c", "d", "e"],
        "part": ["Train", " test", "VAL", "train", "test"],
        "approved": ["yes", "no", "yes", "no", "no"],
    }
)
EDGES = pd.DataFrame({"src": ["u7", "u2", "u9"], "dst": ["u2", "u9", "u4"]})
OPTIONS = {
    "id_column": "user_id",
    "source_column": "src",
    "target_column": "dst",
    "label": "approved",
    "sensitive": "gender",
    "split_column": "part",
    "ignore": ["notes"],
}


def test_dataframes_with_named_columns_and_text():
    data = read_graph(NODES, EDGES, **OPTIONS)
    assert data.node_ids == ["u7", "u2", "u9", "u4", "u1"]
    assert data.edge_index.tolist() == [[0, 1, 2], [1, 2, 3]]  # directed, as written
    # declared rule: 3 values -> one-hot `col=value` (sorted); 2 values -> one 0/1 column
    assert data.feature_names == ["age", "city=Lyon", "city=Nice", "city=Paris", "owner", "gender"]
    x = data.x.numpy()
    assert x[:, 1:4].tolist() == [[0, 0, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]]
    assert x[:, 4].tolist() == [1, 0, 0, 1, 1]  # owner: no=0, yes=1 (sorted)
    assert data.categories == {"owner": ["no", "yes"], "gender": ["F", "M"]}
    # the text sensitive column is a feature (0/1 codes) and its groups keep their names
    assert x[:, 5].tolist() == [1, 0, 0, 1, 0] and data.sensitive.tolist() == [1, 0, 0, 1, 0]
    assert data.sensitive_values == ["F", "M"] and data.sensitive_index == 5
    # a text label: codes of the sorted values, the class names kept
    assert data.y.tolist() == [1, 0, 1, 0, 0] and data.class_names == ["no", "yes"]
    assert data.train_mask.tolist() == [True, False, False, True, False]
    assert data.val_mask.tolist() == [False, False, True, False, False]
    assert data.test_mask.tolist() == [False, True, False, False, True]


def test_ordinal_ignore_and_undirected():
    options = {**OPTIONS, "ignore": ["notes", "gender"], "ordinal": ["city"]}
    data = read_graph(NODES, EDGES, undirected=True, **options)
    assert data.feature_names == ["age", "city", "owner"]
    assert data.x[:, 1].tolist() == [2, 0, 1, 2, 0] and data.categories["city"][2] == "Paris"
    # an ignored sensitive column is no feature but still the sensitive attribute
    assert data.sensitive_values == ["F", "M"] and data.get("sensitive_index") is None
    edges = set(map(tuple, data.edge_index.t().tolist()))
    assert edges == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)}


def test_csv_folder_through_load_graph_equals_dataframes(tmp_path):
    NODES.to_csv(tmp_path / "nodes.csv", index=False)
    EDGES.to_csv(tmp_path / "edges.csv", index=False)
    expected = read_graph(NODES, EDGES, **OPTIONS)
    from_folder = read_graph(tmp_path, **OPTIONS)
    options = {k: v for k, v in OPTIONS.items() if k in ("label", "sensitive")}
    assert torch.equal(from_folder.x, expected.x)
    assert from_folder.feature_names == expected.feature_names
    with pytest.raises(InvalidInputError, match="id_column: .* has no node-id column"):
        load_graph(tmp_path, **options)  # no id_column: a column named id or node_id
    files = read_graph(tmp_path / "nodes.csv", tmp_path / "edges.csv", **OPTIONS)
    assert torch.equal(files.y, expected.y)


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"id_column": "uid"}, r"id_column: 'uid' is not a column .*\(columns: 'user_id', 'age'"),
        ({"label": "approvd"}, "label: 'approvd' is not a column"),
        ({"source_column": "from"}, r"source_column: 'from' is not a column .*'src', 'dst'"),
        ({"ignore": ["nope"]}, "ignore: 'nope' is not a column"),
        ({"ordinal": ["x"]}, "ordinal: 'x' is not a column"),
        ({"split_column": "city"}, r"split_column: column 'city' .*train, val or test.*'Paris'"),
    ],
)
def test_wrong_names_and_values_fail_naming_the_argument(change, fragment):
    with pytest.raises(InvalidInputError, match=fragment) as info:
        read_graph(NODES, EDGES, **{**OPTIONS, **change})
    assert "\n" not in str(info.value)


def test_flags_name_the_cli_options():
    with pytest.raises(InvalidInputError, match="^--label: 'approvd'"):
        read_graph(NODES, EDGES, **{**OPTIONS, "label": "approvd"}, flags={"label": "--label"})


def test_split_column_beside_mask_columns_is_refused():
    nodes = NODES.assign(train_mask=1)
    with pytest.raises(InvalidInputError, match="also holds \\['train_mask'\\]"):
        read_graph(nodes, EDGES, **OPTIONS)


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow not installed")
def test_parquet_folder(tmp_path):
    NODES.to_parquet(tmp_path / "nodes.parquet")
    EDGES.to_parquet(tmp_path / "edges.parquet")
    data = read_graph(tmp_path, **OPTIONS)
    assert torch.equal(data.x, read_graph(NODES, EDGES, **OPTIONS).x)


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is not None, reason="pyarrow installed")
def test_parquet_without_pyarrow_names_the_package(tmp_path):
    (tmp_path / "nodes.parquet").write_bytes(b"PAR1")
    (tmp_path / "edges.parquet").write_bytes(b"PAR1")
    if importlib.util.find_spec("fastparquet") is not None:
        pytest.skip("fastparquet installed")
    with pytest.raises(InvalidInputError, match="pip install pyarrow"):
        read_graph(tmp_path, **OPTIONS)


def test_integer_ids_match_as_text():
    nodes = pd.DataFrame({"id": [10, 20, 30], "a": [0.5, 1.5, 2.5], "y": [0, 1, 0]})
    edges = pd.DataFrame({"source": [10, 30], "target": [20, 10]})
    data = read_graph(nodes, edges)
    assert data.edge_index.tolist() == [[0, 2], [1, 0]] and data.node_ids == ["10", "20", "30"]
    assert np.allclose(data.x[:, 0].numpy(), [0.5, 1.5, 2.5])


@settings(max_examples=40, deadline=None)
@given(
    cells=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=2, max_size=30),
    ordinal=st.booleans(),
)
def test_text_encoding_rule_round_trips(cells, ordinal):
    """Oracle: every row decodes back to its text value, by the declared rule."""
    n = len(cells)
    nodes = pd.DataFrame({"id": [f"n{i}" for i in range(n)], "t": cells, "y": [0] * n})
    edges = pd.DataFrame({"source": ["n0"], "target": ["n1"]})
    data = read_graph(nodes, edges, ordinal=["t"] if ordinal else [])
    values = sorted(set(cells))
    x = data.x.numpy()
    if ordinal or len(values) <= 2:
        assert data.feature_names == ["t"] and data.categories["t"] == values
        decoded = [values[int(c)] for c in x[:, 0]]
    else:
        assert data.feature_names == [f"t={v}" for v in values]
        assert (x.sum(axis=1) == 1).all()
        decoded = [values[int(j)] for j in x.argmax(axis=1)]
    assert decoded == cells


def test_split_values_are_checked():
    nodes = NODES.assign(part=["train", "test", "", "val", "holdout"])
    with pytest.raises(
        InvalidInputError, match=r"row 2 \(id 'u9': ''\), row 4 \(id 'u1': 'holdout'\)"
    ):
        read_graph(nodes, EDGES, **OPTIONS)
