"""The trainer says when a run stopped while its model was still improving (issue 36: NIFTY's
settings left a one-layer GCN on bail at validation AUROC 0.92 with its best epoch the last
one, where the same model trained further reaches 0.96).

``late_rise`` against a brute-force oracle of its definition, and ``train_node_classifier``'s
warning on a run that is stopped early on purpose (a tiny learning rate) but not on a run that
has converged."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import train_node_classifier
from gnnaudit.training.epoch_selection import (
    LATE_RISE_LAST_TOL,
    LATE_RISE_MIN_EPOCHS,
    LATE_RISE_TOL,
    late_rise,
    still_improving,
)


def _oracle(scores: list[float]) -> float:
    """The definition, one epoch at a time."""
    n = len(scores)
    if n < LATE_RISE_MIN_EPOCHS:
        return math.nan
    tail = math.ceil(0.1 * n)
    best_before, best_after = -math.inf, -math.inf
    for i, v in enumerate(scores):
        if not math.isfinite(v):
            continue
        if i < n - tail:
            best_before = max(best_before, v)
        else:
            best_after = max(best_after, v)
    if not (math.isfinite(best_before) and math.isfinite(best_after)):
        return math.nan
    return max(best_after - best_before, 0.0)


scores = st.lists(
    st.one_of(st.floats(0.0, 1.0), st.just(-math.inf), st.just(math.nan)),
    min_size=LATE_RISE_MIN_EPOCHS - 5,
    max_size=260,
)


@given(scores)
@settings(max_examples=60, deadline=None)
def test_late_rise_equals_the_definition(values):
    got, want = late_rise(values), _oracle(values)
    assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, abs=1e-12)


def test_late_rise_on_plain_curves():
    epochs = np.arange(200)
    flattened = 1 - np.exp(-epochs / 20)  # still rising, by less than 1e-4 over its tail
    assert 0.0 < late_rise(flattened) < 1e-4 < LATE_RISE_TOL
    rising = epochs / 200  # still climbing by 0.005 an epoch: the tail adds 20 epochs' worth
    assert late_rise(rising) == pytest.approx(rising[-1] - rising[-21])
    peaked = np.r_[np.linspace(0.5, 0.9, 100), np.linspace(0.9, 0.8, 100)]
    assert late_rise(peaked) == 0.0
    assert math.isnan(late_rise(rising[: LATE_RISE_MIN_EPOCHS - 1]))
    assert math.isnan(late_rise(np.r_[np.full(180, -np.inf), rising[:20]]))


def _train(lr: float, epochs: int):
    data = synthetic_credit_graph(num_nodes=200, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, metrics = train_node_classifier(data, "gcn", epochs, 0, num_layers=2, lr=lr)
    said = [str(w.message) for w in caught if "still improving" in str(w.message)]
    return metrics, said


def test_a_run_stopped_while_improving_is_named():
    metrics, said = _train(1e-4, 100)
    assert metrics["best_epoch"] == 99  # the last epoch was the best
    assert metrics["late_rise"] > LATE_RISE_TOL
    assert len(said) == 1
    assert "AUROC" in said[0] and "100 epochs" in said[0] and "max_epochs or lr" in said[0]
    assert f"{metrics['late_rise']:.4f}" in said[0]


def test_a_converged_run_is_not_warned_and_a_short_one_not_judged():
    metrics, said = _train(0.05, 100)
    assert metrics["late_rise"] == 0.0 and said == []
    assert metrics["best_epoch"] < 90  # its best epoch lies before the last tenth
    short, said = _train(1e-4, 10)  # as undertrained, but too short to tell a trend
    assert short["late_rise"] is None and said == []


@pytest.mark.parametrize(("stopped_early", "advice"), [(False, "max_epochs"), (True, "patience")])
def test_the_advice_names_what_ended_the_run(stopped_early, advice):
    from gnnaudit.training.train import _warn_if_still_rising

    metrics = {"late_rise": 0.02, "epochs_run": 300, "best_epoch": 299, "selected_by": "val_acc"}
    with pytest.warns(UserWarning, match=rf"accuracy .* 300 epochs is 0\.0200 .*raise {advice}"):
        _warn_if_still_rising(metrics, stopped_early=stopped_early)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        earlier = {**metrics, "best_epoch": 250}  # the best epoch is not the last
        _warn_if_still_rising({**earlier, "late_rise": LATE_RISE_TOL}, stopped_early=False)
        _warn_if_still_rising({**metrics, "late_rise": LATE_RISE_LAST_TOL}, stopped_early=False)
        _warn_if_still_rising({**metrics, "late_rise": None}, stopped_early=False)


def test_still_improving_rule():
    """A material rise anywhere in the tail; a smaller one only when the last epoch is the best
    (bail's one-layer GCN at lr 1e-3: rises 0.0042 and 0.0048, best epoch 1999 of 2000)."""
    assert still_improving(0.0048, 1999, 2000)
    assert not still_improving(0.0048, 1990, 2000)
    assert still_improving(LATE_RISE_TOL + 1e-6, 1990, 2000)
    assert not still_improving(LATE_RISE_LAST_TOL, 1999, 2000)
    assert not still_improving(None, 1999, 2000)
    assert not still_improving(math.nan, 1999, 2000)
