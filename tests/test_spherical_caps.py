"""Hyperspherical cap areas and cap intersections (Lee & Kim 2014) used by the LocalCE-I index."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnaudit.audit.search.spherical_caps import (
    cap_area,
    cap_fraction,
    cap_intersection_area,
    cap_intersection_fraction,
    cap_intersection_ratio,
    cap_weight,
    sphere_area,
)
from gnnaudit.errors import InvalidInputError


def _uniform_sphere(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("d", [3, 4])
@pytest.mark.parametrize("theta", [0.4, math.pi / 3, 2.0])
def test_against_monte_carlo(d: int, theta: float) -> None:
    n = 200_000
    x = _uniform_sphere(n, d, seed=d)
    c1 = np.zeros(d)
    c1[0] = 1.0
    in1 = x @ c1 >= math.cos(theta)
    assert cap_fraction(theta, d) == pytest.approx(in1.mean(), abs=4e-3)
    for phi in (0.05, 0.3, 0.7, 1.2, 2.5):
        c2 = np.zeros(d)
        c2[0], c2[1] = math.cos(phi), math.sin(phi)
        mc = (in1 & (x @ c2 >= math.cos(theta))).mean()
        got = float(cap_intersection_fraction(phi, theta, d))
        assert got == pytest.approx(mc, abs=4e-3), (d, theta, phi)


def test_known_closed_forms() -> None:
    assert sphere_area(3) == pytest.approx(4 * math.pi)
    assert sphere_area(2) == pytest.approx(2 * math.pi)
    for theta in (0.1, 1.0, 2.5):
        assert cap_area(theta, 3) == pytest.approx(2 * math.pi * (1 - math.cos(theta)))
        assert cap_area(theta, 2) == pytest.approx(2 * theta)
    # hemisphere is half the sphere in every dimension
    for d in (2, 3, 5, 50, 600):
        assert cap_fraction(math.pi / 2, d) == pytest.approx(0.5, abs=1e-12)
    # two hemispheres: the lune, a fraction (pi - phi) / (2 pi) of the sphere, in any d
    phis = np.array([0.2, 1.0, 2.0, 3.0])
    for d in (3, 7, 50, 500):
        lune = cap_intersection_fraction(phis, math.pi / 2, d)
        np.testing.assert_allclose(lune, (math.pi - phis) / (2 * math.pi), atol=2e-5)
    # circle: arcs overlap by 2 theta - phi
    assert float(cap_intersection_area(0.5, 0.6, 2)) == pytest.approx(0.7)


@pytest.mark.parametrize("d", [1, 2, 3, 10, 500, 5000])
def test_limits_zero_angle_and_disjoint_caps(d: int) -> None:
    theta = math.pi / 3
    assert float(cap_intersection_ratio(0.0, theta, d)) == pytest.approx(1.0)
    far = np.array([2 * theta, 2 * theta + 1e-9, 2.5, math.pi])
    r = cap_intersection_ratio(far, theta, d)
    assert np.isfinite(r).all()
    assert (r == 0.0).all()
    w = cap_weight(np.linspace(0, math.pi, 101), theta, d)
    assert np.isfinite(w).all() and (w >= 0).all() and (w <= 1).all()


@settings(max_examples=40, deadline=None)
@given(
    d=st.integers(min_value=2, max_value=800),
    theta=st.floats(min_value=0.05, max_value=3.0),
)
def test_ratio_is_a_decreasing_probability(d: int, theta: float) -> None:
    phi = np.linspace(0.0, math.pi, 64)
    r = cap_intersection_ratio(phi, theta, d)
    assert np.isfinite(r).all()
    assert (r >= 0).all() and (r <= 1).all()
    assert (np.diff(r) <= 1e-9).all()
    assert r[0] == pytest.approx(1.0)


def test_bad_input() -> None:
    with pytest.raises(InvalidInputError, match="theta"):
        cap_area(0.0, 3)
    with pytest.raises(InvalidInputError, match="theta"):
        cap_fraction(4.0, 3)
    with pytest.raises(InvalidInputError, match="d"):
        cap_fraction(1.0, 0)
    with pytest.raises(InvalidInputError, match="phi"):
        cap_intersection_ratio(np.array([0.1, np.nan]), 1.0, 3)
    with pytest.raises(InvalidInputError, match="phi"):
        cap_intersection_ratio(4.0, 1.0, 3)
