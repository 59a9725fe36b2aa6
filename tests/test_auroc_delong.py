"""DeLong's paired standard error against a brute-force oracle (pairwise psi matrices)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from gnnaudit.training.auroc_delong import delong_components, paired_auroc_se, rank_auroc


def _oracle_components(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pos, neg = s[y == 1], s[y == 0]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    return psi.mean(axis=1), psi.mean(axis=0)


def _oracle_se(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    a10, a01 = _oracle_components(y, a)
    b10, b01 = _oracle_components(y, b)
    m, n = a10.size, a01.size
    s10 = np.cov(np.vstack([a10, b10]))  # the paper's S10 / S01 covariance matrices
    s01 = np.cov(np.vstack([a01, b01]))
    contrast = np.array([1.0, -1.0])
    return math.sqrt(contrast @ s10 @ contrast / m + contrast @ s01 @ contrast / n)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_components_and_se_equal_the_pairwise_oracle(data):
    n = data.draw(st.integers(6, 40))
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    if min((y == 1).sum(), (y == 0).sum()) < 2:
        y[:2], y[2:4] = 1, 0
    a = np.array(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), float)
    b = np.array(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), float)
    v10, v01 = delong_components(y, a)
    o10, o01 = _oracle_components(y, a)
    np.testing.assert_allclose(v10, o10)
    np.testing.assert_allclose(v01, o01)
    assert v10.mean() == pytest.approx(roc_auc_score(y, a))
    assert v01.mean() == pytest.approx(roc_auc_score(y, a))
    assert paired_auroc_se(y, a, b) == pytest.approx(_oracle_se(y, a, b), abs=1e-12)


def test_se_is_zero_for_the_same_scores_and_shrinks_with_more_nodes():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 4000)
    a = y + rng.normal(0, 1.0, y.size)
    b = y + rng.normal(0, 1.0, y.size)
    assert paired_auroc_se(y, a, a) == 0.0
    small, large = paired_auroc_se(y[:200], a[:200], b[:200]), paired_auroc_se(y, a, b)
    assert 0.0 < large < small
    # a candidate close to the model (correlated scores) has a smaller error than a far one
    near = a + rng.normal(0, 0.1, y.size)
    assert paired_auroc_se(y, a, near) < paired_auroc_se(y, a, b) / 3


def test_se_is_nan_without_two_nodes_of_each_class():
    y = np.array([1, 0, 0, 0])
    assert math.isnan(paired_auroc_se(y, np.arange(4.0), np.arange(4.0)[::-1]))
    assert delong_components(np.zeros(3), np.arange(3.0))[0].size == 0


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_rank_auroc_equals_scikit_learn_and_the_pairwise_oracle(data):
    n = data.draw(st.integers(2, 60))
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    y[0], y[1] = 1, 0  # both classes
    ties = data.draw(st.booleans())  # few distinct scores: many ties; else continuous ones
    draw = st.integers(0, 4) if ties else st.floats(-1e6, 1e6, allow_nan=False)
    s = np.array(data.draw(st.lists(draw, min_size=n, max_size=n)), dtype=np.float64)
    v10, _ = _oracle_components(y, s)
    assert rank_auroc(y == 1, s) == pytest.approx(roc_auc_score(y == 1, s), abs=1e-12)
    assert rank_auroc(y == 1, s) == pytest.approx(v10.mean(), abs=1e-12)


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_positive_auroc_and_balanced_accuracy_equal_scikit_learn():
    from sklearn.metrics import balanced_accuracy_score

    from gnnaudit.training.fair_selection import balanced_accuracy
    from gnnaudit.training.train import positive_auroc

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 500)
    score = np.round(rng.normal(size=500) + y, 1)  # rounded: ties across the classes
    assert positive_auroc(y, score) == pytest.approx(roc_auc_score(y == 1, score), abs=1e-12)
    assert math.isnan(positive_auroc(np.ones(5), np.arange(5.0)))  # one class
    assert math.isnan(rank_auroc(np.zeros(5, dtype=bool), np.arange(5.0)))
    assert math.isnan(positive_auroc(y, np.where(y == 1, np.inf, score)))  # diverged scores
    labels = rng.integers(-1, 3, 400)  # any label values, a class never predicted included
    pred = np.where(rng.random(400) < 0.6, labels, rng.integers(0, 5, 400))
    pred[labels == 2] = 0
    assert balanced_accuracy(labels, pred) == pytest.approx(
        balanced_accuracy_score(labels, pred), abs=1e-12
    )
    assert balanced_accuracy(np.zeros(4), np.ones(4)) == 0.0
    assert math.isnan(balanced_accuracy(np.zeros(0), np.zeros(0)))
