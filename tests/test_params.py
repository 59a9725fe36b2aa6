"""The declarative parameter rules of gnnaudit._params against hand-written expectations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnnaudit._params import (
    RANDOM_STATE,
    InstanceOf,
    Integer,
    Options,
    Real,
    Satisfies,
    check_parameter,
    validate_parameters,
)
from gnnaudit.errors import InvalidInputError


@given(
    st.integers(-50, 50),
    st.integers(-50, 50),
    st.sampled_from(["both", "left", "right", "neither"]),
)
def test_integer_interval_matches_comparisons(value, low, closed):
    high = low + 10
    lo_ok = value > low or (value == low and closed in ("both", "left"))
    hi_ok = value < high or (value == high and closed in ("both", "right"))
    assert Integer(low, high, closed).accepts(value) == (lo_ok and hi_ok)


def test_integer_refuses_bools_floats_and_accepts_numpy_ints():
    rule = Integer(1, None)
    assert rule.accepts(np.int64(3))
    assert not rule.accepts(True)
    assert not rule.accepts(2.0)
    assert not rule.accepts(0)
    assert rule.describe() == "an integer >= 1"


def test_real_refuses_non_finite_and_bools():
    rule = Real(0, 1, closed="right")
    assert rule.accepts(1) and rule.accepts(0.5)
    assert not rule.accepts(0.0)
    assert not rule.accepts(float("nan"))
    assert not rule.accepts(float("inf"))
    assert not rule.accepts(False)
    assert rule.describe() == "a finite number > 0 and <= 1"


def test_options_compare_type_and_value():
    rule = Options("kmeans", "balanced")
    assert rule.accepts("kmeans")
    assert not rule.accepts("KMEANS")
    assert not rule.accepts(np.array(["kmeans"]))
    assert not Options(1).accepts(True)  # True == 1, but a bool is not the option 1


def test_random_state_rule():
    for ok in (None, 0, 2**32 - 1, np.random.RandomState(0), np.random.default_rng(0)):
        assert RANDOM_STATE.accepts(ok)
    for bad in (-1, 2**32, 1e20, "0"):
        assert not RANDOM_STATE.accepts(bad)


def test_check_parameter_message_lists_every_rule():
    with pytest.raises(InvalidInputError) as err:
        check_parameter("k", "x", [Integer(1, None), None], owner="Est")
    assert str(err.value) == "Est: k must be an integer >= 1 or None; got 'x'"
    assert check_parameter("k", None, [Integer(1, None), None]) is None


def test_satisfies_with_raising_predicate_refuses():
    rule = Satisfies(lambda v: v.ndim == 1, "a 1-D array")
    assert not rule.accepts(3)
    assert InstanceOf((int, str)).describe() == "an instance of int or str"


class _Est:
    _parameter_constraints = {"n": [Integer(1, None)], "mode": [Options("a", "b")]}

    def __init__(self, n=1, mode="a"):
        self.n, self.mode = n, mode


def test_validate_parameters_names_class_and_parameter_and_sets_nothing():
    est = _Est(n=0)
    before = dict(vars(est))
    with pytest.raises(InvalidInputError, match=r"^_Est: n must be an integer >= 1; got 0$"):
        validate_parameters(est)
    assert vars(est) == before
    validate_parameters(_Est())
    with pytest.raises(InvalidInputError, match="mode must be one of 'a', 'b'"):
        validate_parameters(_Est(mode="c"))
