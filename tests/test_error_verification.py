"""Error verification (CE paper Sec. 7.2) against a loop oracle."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gnnaudit.audit.error_verification import ERROR_COLUMNS, error_verification, evidence_nodes
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


def test_hand_built():
    pred = np.array([0, 1, 1, 0, 1, 0])
    y = np.array([0, 0, 1, 1, 1, 0])  # wrong: nodes 1 and 3
    pairs = pd.DataFrame({"node_u": [1, 1, 0], "node_v": [3, 2, 4], "similarity": [0.9, 0.8, 0.7]})
    res = error_verification(pairs, pred, y, ks=(1, 2, 3, 10), mask=np.arange(6))
    assert list(res.columns) == ERROR_COLUMNS
    assert res["nodes"].tolist() == [2, 3, 5, 5]
    assert res["pairs"].tolist() == [1, 2, 3, 3]
    assert res["accuracy_in_evidence"].tolist() == pytest.approx([0.0, 1 / 3, 3 / 5, 3 / 5])
    assert res["accuracy_overall"].tolist() == pytest.approx([4 / 6] * 4)
    assert evidence_nodes(pairs).tolist() == [1, 3, 2, 0, 4]


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
    res = error_verification(pairs, pred, y, ks=ks, mask=mask)
    for row in res.itertuples():
        nodes = set()
        for i in range(min(row.k, len(pairs))):
            nodes |= {int(pairs.node_u[i]), int(pairs.node_v[i])}
        assert row.nodes == len(nodes)
        assert row.accuracy_in_evidence == pytest.approx(np.mean([pred[v] == y[v] for v in nodes]))
        assert row.accuracy_overall == pytest.approx(np.mean(pred[test] == y[test]))


def test_errors_and_empty():
    pred = np.zeros(4, dtype=int)
    pairs = pd.DataFrame({"node_u": [0], "node_v": [1], "similarity": [0.5]})
    with pytest.raises(InvalidInputError, match="mask"):
        error_verification(pairs, pred, pred)
    with pytest.raises(InvalidInputError, match="ks entry must be >= 1"):
        error_verification(pairs, pred, pred, ks=(0,), mask=np.arange(4))
    with pytest.raises(InvalidInputError, match="labels must have the same length"):
        error_verification(pairs, pred, pred[:2], mask=np.arange(4))
    empty = pairs.iloc[:0]
    assert error_verification(empty, pred, pred, mask=np.arange(4)).empty
