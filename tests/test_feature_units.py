"""Discrimination values in the user's units (feature_units): bins of a standardised column
mapped back are the raw quantiles, text columns read by name, nothing changes without them."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import Data

from gnnaudit.audit.fairness.discrimination import (
    DISCRIMINATION_COLUMNS,
    DiscriminationResult,
    code_features,
    discrimination_scores,
)
from gnnaudit.audit.fairness.feature_units import MODEL_UNITS, ORIGINAL_UNITS, FeatureUnits
from gnnaudit.audit.pipeline import apply_transform
from gnnaudit.audit.search.inputs import node_features
from gnnaudit.datasets import read_graph
from gnnaudit.datasets.nifty_columns import standardise_non_binary
from gnnaudit.datasets.scaler import load_standardizer
from gnnaudit.errors import InvalidInputError

N = 300


@pytest.fixture(scope="module")
def table_graph(tmp_path_factory):
    """A node table with a numeric column of known values, a 2-value and a 3-value text
    column, read by read_graph, and a scaler of the numeric columns saved as data."""
    root = tmp_path_factory.mktemp("units")
    rng = np.random.default_rng(3)
    age = rng.integers(18, 80, N) + rng.choice([0.0, 0.25, 0.5], N)
    income = rng.normal(52_000, 15_000, N).round(2)
    nodes = pd.DataFrame(
        {
            "id": [f"n{i}" for i in range(N)],
            "age": age,
            "income": income,
            "gender": rng.choice(["F", "M"], N),
            "city": rng.choice(["Lyon", "Oslo", "Rome"], N),
            "y": rng.integers(0, 2, N),
        }
    )
    nodes.to_csv(root / "nodes.csv", index=False)
    src = rng.integers(0, N, 3 * N)
    dst = rng.integers(0, N, 3 * N)
    ids = nodes["id"].to_numpy()
    pd.DataFrame({"source": ids[src], "target": ids[dst]}).to_csv(root / "edges.csv", index=False)
    np.savez(
        root / "scaler.npz",
        mean_=np.array([age.mean() - 3.0, income.mean()]),
        scale_=np.array([age.std() * 1.5, income.std()]),
        feature_names_in_=np.array(["age", "income"]),
    )
    data = read_graph(root)
    scaled = load_standardizer(root / "scaler.npz").apply(data)
    return {"root": root, "raw": nodes, "data": data, "scaled": scaled}


def _edges(labels):
    return sorted({float(e) for lab in labels for e in lab.strip("[])").split(", ")})


def _coding(data, **kw):
    x, names = node_features(data)
    return code_features(x, names, units=FeatureUnits.from_data(data, x.shape[1]), **kw)


@pytest.mark.parametrize("bins", [3, 4, 5])
def test_bins_of_a_standardised_column_are_the_raw_quantiles(table_graph, bins):
    raw = table_graph["raw"]
    coding = _coding(table_graph["scaled"], bins=bins)
    assert coding.units == ORIGINAL_UNITS
    for column in ("age", "income"):
        j = coding.names.index(column)
        assert coding.kinds[j] == "binned"
        values = raw[column].to_numpy()
        oracle = np.unique(
            np.concatenate(
                [[values.min(), values.max()], np.quantile(values, np.arange(1, bins) / bins)]
            )
        )
        shown = _edges(coding.labels[j])
        assert len(shown) == oracle.size
        # shown with 4 significant digits
        np.testing.assert_allclose(shown, oracle, rtol=6e-4)
    # a label a user would read: the age bins are in years, not z-scores
    j = coding.names.index("age")
    assert coding.labels[j][0].startswith(f"[{raw['age'].min():g}, ")


def test_units_change_labels_never_codes_or_scores(table_graph):
    scaled = table_graph["scaled"]
    x, names = node_features(scaled)
    plain = code_features(x, names, bins=4)
    with_units = _coding(scaled, bins=4)
    np.testing.assert_array_equal(plain.codes, with_units.codes)
    assert plain.units == MODEL_UNITS and plain.names == names
    # the same table, only relabelled
    rng = np.random.default_rng(0)
    test = np.zeros(N, dtype=bool)
    test[rng.choice(N, N // 2, replace=False)] = True
    pred = rng.integers(0, 2, N)
    tested = np.flatnonzero(test)
    rows = []
    for q in tested:
        other = tested[pred[tested] != pred[q]]
        for r, e in enumerate(rng.choice(other, 3, replace=False)):
            rows.append({"node_u": q, "node_v": e, "rank": r + 1})
    frame = pd.DataFrame(rows)
    bare = Data(x=scaled.x, feature_names=list(scaled.feature_names))
    kw = {"k": 3, "predictions": pred, "mask": test}
    a = discrimination_scores(bare, frame, **kw)
    ids = getattr(scaled, "node_ids", None)  # a graph read with ids: its tables name nodes so
    if ids is not None:
        named = np.asarray(ids, dtype=object)
        frame = frame.assign(node_u=named[frame["node_u"]], node_v=named[frame["node_v"]])
    b = discrimination_scores(scaled, frame, **kw)
    assert a.attrs["units"] == MODEL_UNITS and b.attrs["units"] == ORIGINAL_UNITS
    assert sorted(a["score"].round(12)) == sorted(b["score"].round(12))
    assert "city" in set(b["feature"]) and "city=Oslo" in set(a["feature"])


def test_text_columns_show_their_names(table_graph):
    coding = _coding(table_graph["data"])  # no scaler: the loader's codes alone
    assert coding.units == ORIGINAL_UNITS
    g = coding.names.index("gender")
    assert coding.labels[g] == ["F", "M"]
    hot = [j for j, n in enumerate(coding.names) if n == "city"]
    assert [coding.labels[j] for j in hot] == [
        ["not Lyon", "Lyon"],
        ["not Oslo", "Oslo"],
        ["not Rome", "Rome"],
    ]
    # the one-hot codes are those of the loader's 0/1 columns
    raw_city = table_graph["raw"]["city"].to_numpy()
    for j, city in zip(hot, ("Lyon", "Oslo", "Rome"), strict=True):
        np.testing.assert_array_equal(coding.codes[:, j], (raw_city == city).astype(int))
    # the features argument still selects by the model-input names
    assert _coding(table_graph["data"], features=["city=Oslo"]).names == ["city"]


def test_without_metadata_nothing_changes():
    rng = np.random.default_rng(1)
    x = np.column_stack([rng.normal(size=50), rng.integers(0, 2, 50)]).astype(np.float32)
    data = Data(x=torch.tensor(x), feature_names=["a", "b"])
    assert FeatureUnits.from_data(data, 2) is None
    coding = _coding(data)
    assert coding.units == MODEL_UNITS
    assert coding.labels == code_features(x.astype(np.float64), ["a", "b"]).labels
    result = DiscriminationResult(
        table=pd.DataFrame(columns=DISCRIMINATION_COLUMNS), k=3, min_support=1, bins=4
    )
    assert any("model-input units" in note for note in result.report_section().notes)


def test_scalers_compose_and_transforms_drop_the_units(table_graph, tmp_path):
    scaled = table_graph["scaled"]
    np.savez(tmp_path / "s2.npz", mean_=np.full(6, 0.5), scale_=np.full(6, 2.0))
    twice = load_standardizer(tmp_path / "s2.npz").apply(scaled)
    x = twice.x.double().numpy()
    raw = x * np.asarray(twice.feature_scale) + np.asarray(twice.feature_mean)
    original = table_graph["data"].x.double().numpy()
    np.testing.assert_allclose(raw, original, rtol=1e-5, atol=1e-4)
    assert getattr(table_graph["data"], "feature_mean", None) is None  # the caller's data kept
    kept = apply_transform(scaled, lambda d: d)
    assert kept.feature_mean == scaled.feature_mean

    def double(d):
        d.x = d.x * 2
        return d

    changed = apply_transform(scaled, double)
    assert FeatureUnits.from_data(changed, 6) is None
    assert scaled.feature_onehot  # the caller's copy keeps them


def test_nifty_standardisation_records_its_inverse():
    rng = np.random.default_rng(2)
    x = np.column_stack([rng.normal(5, 3, 40), rng.integers(0, 2, 40), np.full(40, 7.0)])
    z, mean, scale = standardise_non_binary(x)
    np.testing.assert_allclose(z * scale + mean, x, atol=1e-12)
    assert mean[1] == 0 and scale[1] == 1 and scale[2] == 1


def test_bad_unit_attributes(caplog):
    x = torch.zeros(4, 2)
    with pytest.raises(InvalidInputError, match="feature_scale must be positive"):
        FeatureUnits.from_data(Data(x=x, feature_mean=[0, 0], feature_scale=[1, 0]), 2)
    with pytest.raises(InvalidInputError, match="feature_mean holds NaN"):
        FeatureUnits.from_data(Data(x=x, feature_mean=[0, np.nan], feature_scale=[1, 1]), 2)
    with pytest.raises(InvalidInputError, match=r"feature_onehot\['a'\] must be"):
        FeatureUnits.from_data(Data(x=x, feature_onehot={"a": "b"}), 2)
    with caplog.at_level(logging.WARNING):
        assert FeatureUnits.from_data(Data(x=x, feature_mean=[0], feature_scale=[1]), 2) is None
    assert "ignored" in caplog.text
