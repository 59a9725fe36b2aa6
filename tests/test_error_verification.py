"""Error verification (CE paper Sec. 7.2) against a loop oracle."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gnnaudit.audit.fairness.error_verification import ERROR_COLUMNS, error_verification
from gnnaudit.audit.search.results import GlobalEvidence
from gnnaudit.errors import InvalidInputError


def _pairs(rng, test, pred, p):
    rows = []
    for _ in range(p):
        u, v = rng.choice(test, size=2, replace=False)
        rows.append((min(u, v), max(u, v), float(rng.random()), pred[u], pred[v]))
    frame = pd.DataFrame(rows, columns=["node_u", "node_v", "similarity", "pred_u", "pred_v"])
    frame = frame.sort_values("similarity", ascending=False).reset_index(drop=True)
    frame["rank"] = np.arange(1, len(frame) + 1)
    return frame


def _lower_tail(correct, population, right, draws):
    ways = sum(
        math.comb(right, i) * math.comb(population - right, draws - i) for i in range(correct + 1)
    )
    return ways / math.comb(population, draws)


def test_hand_built():
    pred = np.array([0, 1, 1, 0, 1, 0])
    y = np.array([0, 0, 1, 1, 1, 0])  # wrong: nodes 1 and 3
    pairs = pd.DataFrame({"node_u": [1, 1, 0], "node_v": [3, 2, 4], "similarity": [0.9, 0.8, 0.7]})
    res = error_verification(pairs, y_true=y, y_pred=pred, ks=(1, 2, 3, 10), mask=np.arange(6))
    assert list(res.columns) == ERROR_COLUMNS
    assert res["nodes"].tolist() == [2, 3, 5, 5]
    assert res["pairs"].tolist() == [1, 2, 3, 3]
    assert res["accuracy_in_evidence"].tolist() == pytest.approx([0.0, 1 / 3, 3 / 5, 3 / 5])
    assert res["accuracy_overall"].tolist() == pytest.approx([4 / 6] * 4)
    assert GlobalEvidence.from_frame(pairs).distinct_nodes().tolist() == [1, 3, 2, 0, 4]
    # p-value: 0 of the 2 evidence nodes right, 4 of 6 right overall
    assert res["p_value"].iloc[0] == pytest.approx(_lower_tail(0, 6, 4, 2))
    assert (res["ci_low"] <= res["accuracy_in_evidence"]).all()
    assert (res["accuracy_in_evidence"] <= res["ci_high"]).all()


@pytest.mark.parametrize("seed", range(4))
def test_matches_loop_oracle(seed):
    rng = np.random.default_rng(seed)
    n = 50
    pred, y = rng.integers(0, 3, n), rng.integers(0, 3, n)
    test = np.sort(rng.choice(n, size=30, replace=False))
    mask = np.zeros(n, dtype=bool)
    mask[test] = True
    pairs = _pairs(rng, test, pred, 40)
    ks = (1, 5, 13, 40, 100)
    res = error_verification(pairs, y_true=y, y_pred=pred, ks=ks, mask=mask)
    for row in res.itertuples():
        nodes = set()
        for i in range(min(row.k, len(pairs))):
            nodes |= {int(pairs.node_u[i]), int(pairs.node_v[i])}
        assert row.nodes == len(nodes)
        assert row.accuracy_in_evidence == pytest.approx(np.mean([pred[v] == y[v] for v in nodes]))
        assert row.accuracy_overall == pytest.approx(np.mean(pred[test] == y[test]))
        # the p-value is the exact chance that a random draw of as many test nodes has at most
        # as many right predictions, counted with binomial coefficients
        correct = int(sum(pred[v] == y[v] for v in nodes))
        total = int((pred[test] == y[test]).sum())
        assert row.p_value == pytest.approx(_lower_tail(correct, test.size, total, len(nodes)))


def test_errors_and_empty():
    pred = np.zeros(4, dtype=int)
    pairs = pd.DataFrame({"node_u": [0], "node_v": [1], "similarity": [0.5]})
    with pytest.raises(InvalidInputError, match="mask"):
        error_verification(pairs, y_true=pred, y_pred=pred)
    with pytest.raises(InvalidInputError, match="ks entry must be >= 1"):
        error_verification(pairs, y_true=pred, y_pred=pred, ks=(0,), mask=np.arange(4))
    with pytest.raises(InvalidInputError, match="y_true must have the same length"):
        error_verification(pairs, y_true=pred[:2], y_pred=pred, mask=np.arange(4))
    with pytest.raises(InvalidInputError, match="whole-number class ids"):
        error_verification(pairs, y_true=pred + 0.5, y_pred=pred, mask=np.arange(4))
    empty = pairs.iloc[:0]
    assert error_verification(empty, y_true=pred, y_pred=pred, mask=np.arange(4)).empty
