"""Tabular loader and the three-moons generator."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.cluster import DBSCAN

from gnnaudit import InvalidInputError
from gnnaudit.datasets import load_tabular, three_moons


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
