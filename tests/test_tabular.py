"""Tabular loader and the three-moons generator."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import DBSCAN

from gnnaudit import InvalidInputError
from gnnaudit.datasets import load_tabular, three_moons
from gnnaudit.datasets.columns import column_kind, numeric_column


def _frame():
    return pd.DataFrame(
        {
            "age": [30, 40, 50, 60],
            "income": [1.0, 2.0, 3.5, 4.0],
            "city": ["b", "a", "b", "c"],
            "sex": ["F", "M", "M", "F"],
            "y": ["no", "yes", "yes", "no"],
        }
    )


def test_load_tabular_splits_columns(tmp_path):
    path = tmp_path / "t.csv"
    _frame().to_csv(path, index=False)
    data = load_tabular(path, label="y", sensitive="sex", categorical=["city"])
    assert data.feature_names == ["age", "income"]
    np.testing.assert_array_equal(data.X, [[30, 1.0], [40, 2.0], [50, 3.5], [60, 4.0]])
    np.testing.assert_array_equal(data.categorical[:, 0], [1, 0, 1, 2])
    np.testing.assert_array_equal(data.sensitive, [0, 1, 1, 0])
    np.testing.assert_array_equal(data.labels, [0, 1, 1, 0])
    assert data.categories["sex"] == ["F", "M"]
    assert data.n_samples == 4


def test_load_tabular_several_sensitive_columns():
    data = load_tabular(_frame(), label="y", sensitive=["sex", "city"])
    assert data.sensitive.shape == (4, 2)


def test_load_tabular_errors(tmp_path):
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_tabular(tmp_path / "missing.csv")
    with pytest.raises(InvalidInputError, match="'nope'"):
        load_tabular(_frame(), label="nope")
    with pytest.raises(InvalidInputError, match="not numeric"):
        load_tabular(_frame(), label="y")
    frame = _frame()
    frame.loc[2, "income"] = np.nan
    with pytest.raises(InvalidInputError, match=r"'income' has missing values at row 2 \(blank\)"):
        load_tabular(frame, label="y", sensitive="sex", categorical="city")


def test_three_moons_groups_and_density_clusters():
    data = three_moons(n_per_moon=200, seed=3)
    assert data.X.shape == (600, 2)
    np.testing.assert_array_equal(np.bincount(data.labels), [200, 200, 200])
    by_moon = [data.sensitive[data.labels == m].mean() for m in range(3)]
    assert by_moon == [0.5, 0.0, 1.0]
    # three separated moons: DBSCAN recovers them exactly
    found = DBSCAN(eps=0.15, min_samples=5).fit_predict(data.X)
    assert len(set(found)) == 3 and -1 not in set(found)
    np.testing.assert_array_equal(three_moons(n_per_moon=200, seed=3).X, data.X)


def test_three_moons_validates():
    with pytest.raises(InvalidInputError, match="n_per_moon"):
        three_moons(n_per_moon=1)
    with pytest.raises(InvalidInputError, match="noise"):
        three_moons(noise=-0.1)


def test_load_tabular_stray_text_and_blank_cells_are_named():
    frame = _frame().astype({"income": object})
    frame.loc[1, "income"] = "unknown"
    with pytest.raises(InvalidInputError, match=r"'income' mixes numbers and text: .*row 1"):
        load_tabular(frame, label="y", sensitive="sex", categorical="city")
    frame = _frame()
    frame.loc[3, "sex"] = None
    with pytest.raises(InvalidInputError, match=r"'sex' has missing values at row 3 \(blank\)"):
        load_tabular(frame, label="y", sensitive="sex", categorical="city")


def test_load_tabular_mixed_type_categories_do_not_crash():
    frame = _frame()
    frame["y"] = pd.Series([1, "a", 1, "b"], dtype=object)
    data = load_tabular(frame, label="y", sensitive="sex", categorical="city")
    np.testing.assert_array_equal(data.labels, [0, 1, 0, 2])
    assert data.categories["y"] == [1, "a", "b"]


@pytest.mark.parametrize(
    "content, pattern",
    [
        (b"", "is empty"),
        (b"\x00\x01\x02", "binary file"),
        (b"a,b\n1,2\n3,4,5\n", "Expected 2 fields in line 3"),
        (b"a,b\n", "the table has no rows"),
    ],
)
def test_load_tabular_bad_files(tmp_path, content, pattern):
    path = tmp_path / "t.csv"
    path.write_bytes(content)
    with pytest.raises(InvalidInputError, match=pattern) as info:
        load_tabular(path)
    assert "\n" not in str(info.value) and str(info.value).startswith("source")
    with pytest.raises(InvalidInputError, match="is a folder"):
        load_tabular(tmp_path)


@settings(max_examples=30, deadline=None)
@given(
    values=st.lists(
        st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=2, max_size=30
    ),
    data=st.data(),
)
def test_numeric_column_names_the_one_stray_cell(values, data):
    series = pd.Series(values, dtype=object)
    np.testing.assert_array_equal(numeric_column("t", "c", series), np.asarray(values, float))
    assert column_kind("t", "c", series) == "numeric"
    row = data.draw(st.integers(0, len(values) - 1))
    series[row] = "unknown"
    with pytest.raises(
        InvalidInputError, match=rf"mixes numbers and text: .*row {row} \('unknown'\)"
    ):
        column_kind("t", "c", series)
    with pytest.raises(InvalidInputError, match=rf"holds text at row {row} \('unknown'\)"):
        numeric_column("t", "c", series)


@pytest.mark.parametrize(
    "frame, kwargs, pattern",
    [
        (pd.DataFrame([[1, 2]], columns=["a", "a"]), {}, r"\['a'\] appear more than once"),
        (pd.DataFrame({"a": [1, 2], "s": [[1], [2]]}), {"sensitive": "s"}, "cannot be categories"),
        (pd.DataFrame({"a": [1 + 1j, 2]}), {}, r"\['a'\] are not numeric"),
        (pd.DataFrame({"a": pd.to_datetime(["2020-01-01", "2021-01-01"])}), {}, "not numeric"),
    ],
)
def test_load_tabular_odd_frames(frame, kwargs, pattern):
    with pytest.raises(InvalidInputError, match=pattern):
        load_tabular(frame, **kwargs)
