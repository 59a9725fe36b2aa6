"""Discrimination scores (CE paper Eq. 12) against a plain-loop oracle."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data

from gnnaudit.audit.fairness.discrimination import (
    DISCRIMINATION_COLUMNS,
    code_features,
    discrimination_scores,
    feature_rank,
)
from gnnaudit.errors import InvalidInputError


def _graph(seed: int, n: int = 40, n_classes: int = 3):
    rng = np.random.default_rng(seed)
    x = np.column_stack(
        [
            rng.integers(0, 2, n),  # binary
            rng.integers(0, 4, n),  # categorical
            rng.normal(size=n),  # continuous: quantile bins
            rng.integers(0, 2, n) * 2.5,  # binary coded as 0 / 2.5
        ]
    ).astype(np.float32)
    test_mask = np.zeros(n, dtype=bool)
    test_mask[rng.choice(n, size=n * 3 // 4, replace=False)] = True
    pred = rng.integers(0, n_classes, n)
    data = Data(x=torch.tensor(x), test_mask=torch.tensor(test_mask))
    data.feature_names = ["bin", "cat", "cont", "bin25"]
    return data, pred, test_mask, rng


def _random_local(pred, test_mask, rng, k, short_every=0):
    """A local-evidence frame respecting the candidate rule, evidences in random order."""
    test = np.flatnonzero(test_mask)
    rows = []
    for q in test:
        cands = [u for u in test if pred[u] != pred[q]]
        take = min(k, len(cands))
        if short_every and q % short_every == 0:
            take = min(take, 2)  # approximate backends may return fewer than k
        chosen = rng.choice(cands, size=take, replace=False) if take else []
        for r, u in enumerate(chosen):
            rows.append((int(q), int(u), float(rng.random()), int(pred[q]), int(pred[u]), r + 1))
    frame = pd.DataFrame(
        rows, columns=["node_u", "node_v", "similarity", "pred_u", "pred_v", "rank"]
    )
    return frame.sample(frac=1.0, random_state=0)  # row order must not matter


def _bin_of(column, bins=4, max_values=10):
    """Plain-loop value coding: whole-number columns with few values (and binary columns) by
    value, others by quantile bin (number of inner quantile edges <= value)."""
    values = sorted(set(column.tolist()))
    if len(values) <= 2 or (
        all(float(v).is_integer() for v in values) and len(values) <= max_values
    ):
        return [values.index(v) for v in column.tolist()]
    inner = sorted(set(np.quantile(column, [j / bins for j in range(1, bins)]).tolist()))
    raw = [sum(1 for e in inner if e <= v) for v in column.tolist()]
    used = sorted(set(raw))
    return [used.index(r) for r in raw]


def _oracle(x, names, pred, test_mask, frame, k, cols):
    """{(feature, code): (score, baseline, support)} by plain loops (code = value or bin)."""
    test = np.flatnonzero(test_mask)
    ev = {}
    for q, grp in frame.groupby("node_u"):
        ev[int(q)] = grp.sort_values(["rank", "node_v"])["node_v"].tolist()[:k]
    out = {}
    for c in cols:
        code = _bin_of(x[:, c])
        acc = {}
        for q, evs in ev.items():
            a = code[q]
            ds = sum(1 for u in evs if code[u] != a) / len(evs)
            cands = [u for u in test if pred[u] != pred[q]]
            base = sum(1 for u in cands if code[u] != a) / len(cands)
            acc.setdefault(a, []).append((ds, base))
        for a, vals in acc.items():
            out[(names[c], a)] = (
                np.mean([v[0] for v in vals]),
                np.mean([v[1] for v in vals]),
                len(vals),
            )
    return out


def _code_of(data, feature, label):
    """Code of a table label (the labels themselves are checked in test_value_labels)."""
    names = list(data.feature_names) if hasattr(data, "feature_names") else None
    coding = code_features(data.x.numpy().astype(np.float64), names or [], [feature])
    return coding.labels[0].index(label)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_matches_loop_oracle(seed, k):
    data, pred, test_mask, rng = _graph(seed)
    frame = _random_local(pred, test_mask, rng, k=k + 2, short_every=5)
    table = discrimination_scores(data, frame, k=k)
    assert list(table.columns) == DISCRIMINATION_COLUMNS
    oracle = _oracle(data.x.numpy(), data.feature_names, pred, test_mask, frame, k, [0, 1, 2, 3])
    assert set(table["feature"]) == {"bin", "cat", "cont", "bin25"}
    assert len(table) == len(oracle)
    for row in table.itertuples():
        score, base, support = oracle[(row.feature, _code_of(data, row.feature, row.value))]
        assert row.score == pytest.approx(score, abs=1e-12)
        assert row.baseline == pytest.approx(base, abs=1e-12)
        assert row.lift == pytest.approx(score - base, abs=1e-12)
        assert row.support == support
    # sorted by score descending
    assert np.all(np.diff(table["score"].to_numpy()) <= 1e-15)


def test_explicit_features_by_name_and_index_and_predictions_argument():
    data, pred, test_mask, rng = _graph(5)
    frame = _random_local(pred, test_mask, rng, k=4)
    by_name = discrimination_scores(data, frame, k=4, features=["cat"])
    by_index = discrimination_scores(
        data,
        frame.drop(columns=["pred_u", "pred_v"]),
        k=4,
        features=[1],
        predictions=pred,
    )
    pd.testing.assert_frame_equal(by_name, by_index)
    assert set(by_name["feature"]) == {"cat"}
    assert by_name["support"].sum() == frame["node_u"].nunique()


def test_planted_feature_scores_one_and_rarity_baseline():
    # feature 0 equals the prediction: every evidence differs -> score 1 with baseline 1
    # (candidates always carry the other value), so lift 0: the "by construction" case.
    n = 20
    pred = np.array([0] * 10 + [1] * 10)
    x = np.column_stack([pred, np.arange(n) % 2]).astype(np.float32)
    mask = np.ones(n, dtype=bool)
    data = Data(x=torch.tensor(x), test_mask=torch.tensor(mask))
    rows = []
    for q in range(n):
        cands = [u for u in range(n) if pred[u] != pred[q]][:3]
        rows += [(q, u, r + 1, pred[q], pred[u]) for r, u in enumerate(cands)]
    frame = pd.DataFrame(rows, columns=["node_u", "node_v", "rank", "pred_u", "pred_v"])
    table = discrimination_scores(data, frame, k=3)
    f0 = table[table["feature"] == "x0"]
    assert np.allclose(f0["score"], 1.0) and np.allclose(f0["baseline"], 1.0)
    assert np.allclose(f0["lift"], 0.0)
    assert feature_rank(table, "x0", by="score") == 1


def test_feature_rank_orders_by_requested_statistic():
    table = pd.DataFrame(
        {
            "feature": ["a", "b", "b", "c"],
            "value": [1.0, 0.0, 1.0, 0.0],
            "score": [0.9, 0.8, 0.5, 0.7],
            "baseline": [0.9, 0.3, 0.5, 0.6],
            "lift": [0.0, 0.5, 0.0, 0.1],
            "support": [3, 4, 5, 6],
        }
    )
    assert feature_rank(table, "a", by="score") == 1
    assert feature_rank(table, "b", by="score") == 2
    assert feature_rank(table, "b", by="lift") == 1
    assert feature_rank(table, "a", by="lift") == 3
    with pytest.raises(InvalidInputError, match="feature 'zzz'"):
        feature_rank(table, "zzz")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 6))
def test_invariants(seed, k):
    data, pred, test_mask, rng = _graph(seed, n=25, n_classes=2)
    frame = _random_local(pred, test_mask, rng, k=k)
    table = discrimination_scores(data, frame, k=k)
    for col in ("score", "baseline"):
        assert ((table[col] >= 0) & (table[col] <= 1)).all()
    assert np.isfinite(table[["score", "baseline", "lift"]].to_numpy()).all()
    queries = frame["node_u"].nunique()
    assert (table.groupby("feature")["support"].sum() == queries).all()


def test_errors_name_the_argument():
    data, pred, test_mask, rng = _graph(0)
    frame = _random_local(pred, test_mask, rng, k=3)
    with pytest.raises(InvalidInputError, match="k must be >= 1"):
        discrimination_scores(data, frame, k=0)
    with pytest.raises(InvalidInputError, match="unknown feature name 'nope'"):
        discrimination_scores(data, frame, features=["nope"])
    with pytest.raises(InvalidInputError, match="bins must be >= 2"):
        discrimination_scores(data, frame, bins=1)
    with pytest.raises(InvalidInputError, match="lacks column"):
        discrimination_scores(data, frame.drop(columns=["rank"]))
    with pytest.raises(InvalidInputError, match="CounterfactualEvidence, a LocalEvidence"):
        discrimination_scores(data, [1, 2, 3])
    bad = frame.copy()
    bad.loc[bad.index[0], "node_v"] = 999
    with pytest.raises(InvalidInputError, match="outside"):
        discrimination_scores(data, bad)


def test_empty_frame_gives_empty_table():
    data, pred, test_mask, _ = _graph(0)
    frame = pd.DataFrame(columns=["node_u", "node_v", "rank", "pred_u", "pred_v"])
    table = discrimination_scores(data, frame, predictions=pred)
    assert table.empty and list(table.columns) == DISCRIMINATION_COLUMNS


def test_fitted_estimator_matches_its_local_evidence_frame():
    from gnnaudit.audit import CounterfactualEvidence
    from gnnaudit.datasets import synthetic_credit_graph

    data = synthetic_credit_graph(num_nodes=160, seed=4)
    pred = np.random.default_rng(0).integers(0, 3, 160)
    ce = CounterfactualEvidence().fit(data, predictions=pred)
    direct = discrimination_scores(data, ce, k=5)
    test_nodes = np.flatnonzero(data.test_mask.numpy())
    frame = ce.local_evidence(test_nodes, k=5)
    via_frame = discrimination_scores(data, frame, k=5)
    pd.testing.assert_frame_equal(direct, via_frame)
    cols = [data.feature_names.index(f) for f in dict.fromkeys(direct["feature"])]
    oracle = _oracle(
        data.x.numpy(), data.feature_names, pred, data.test_mask.numpy(), frame, 5, cols
    )
    for row in direct.itertuples():
        key = (row.feature, _code_of(data, row.feature, row.value))
        assert row.score == pytest.approx(oracle[key][0], abs=1e-12)
        assert row.baseline == pytest.approx(oracle[key][1], abs=1e-12)
    assert discrimination_scores(data, ce, k=5, min_support=10)["support"].min() >= 10


def test_value_labels_never_list_raw_floats_of_a_continuous_column():
    rng = np.random.default_rng(0)
    n = 500
    x = np.column_stack(
        [
            rng.normal(size=n),  # continuous
            (rng.poisson(1.0, n) - 1.0) / 0.97,  # a standardised count: few fractional values
            rng.integers(0, 2, n),  # binary
            rng.integers(0, 5, n),  # categorical
        ]
    )
    coding = code_features(x, ["income", "late", "gender", "grade"], bins=4)
    assert coding.kinds == ["binned", "binned", "categorical", "categorical"]
    assert len(coding.labels[0]) == 4
    assert all(lab.startswith("[") and ", " in lab for lab in coding.labels[0] + coding.labels[1])
    assert coding.labels[0][-1].endswith("]") and coding.labels[0][0].endswith(")")
    assert coding.labels[2] == ["0", "1"] and coding.labels[3] == ["0", "1", "2", "3", "4"]
    # every node falls in the bin whose interval holds its value
    for code, value in zip(coding.codes[:, 0], x[:, 0], strict=True):
        lo, hi = coding.labels[0][code].strip("[])").split(", ")
        assert float(lo) - 1e-2 <= value <= float(hi) + 1e-2
    # quartile bins hold about a quarter of the nodes each
    counts = np.bincount(coding.codes[:, 0])
    assert counts.min() >= n // 4 - 1 and counts.max() <= n // 4 + 1
