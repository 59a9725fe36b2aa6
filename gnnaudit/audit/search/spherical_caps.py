r"""Areas of hyperspherical caps and of the intersection of two equal caps.

Geometry used by the LocalCE-I index (CE paper, Sec. 5.1, Eq. 10) to weight a node by how
much of its "similar field" falls outside its cluster. Everything lives on the unit sphere
:math:`S^{d-1}\subset\mathbb{R}^d`.

Cap area (Li 2011). For a cap of angular radius :math:`\theta\le\pi/2`

.. math::

    A^{cap}_d(\theta) = \tfrac12 A_d\, I_{\sin^2\theta}\!\left(\tfrac{d-1}{2},\tfrac12\right),
    \qquad A_d = \frac{2\pi^{d/2}}{\Gamma(d/2)},

with :math:`I_x(a,b)` the regularised incomplete beta function; for :math:`\theta>\pi/2`,
:math:`A^{cap}_d(\theta) = A_d - A^{cap}_d(\pi-\theta)`.

Intersection of two caps of equal radius :math:`\theta` whose centres are at angle
:math:`\varphi` (Lee & Kim 2014). The bisecting hyperplane makes the two halves equal and
puts it at angle :math:`\varphi/2` from each axis, so :math:`I = 2 J_d(\varphi/2, \theta)` with

.. math::

    J_d(a, \theta) = \frac{\pi^{(d-1)/2}}{\Gamma(\frac{d-1}{2})}\int_a^\theta
        \sin^{d-2}\!\phi\; I_{1-\tan^2 a/\tan^2\phi}\!\left(\tfrac{d-2}{2},\tfrac12\right)d\phi .

The one-dimensional integral is evaluated by Gauss-Legendre quadrature in the variable
:math:`p = I_{\sin^2\phi}(\frac{d-1}{2},\frac12)/I_{\sin^2\theta}(\frac{d-1}{2},\frac12)`
(the cap's own area measure), which absorbs the sharply peaked :math:`\sin^{d-2}` factor and
keeps the ratio :math:`I/A^{cap}` accurate in high dimension (d = 500 and beyond) where the
absolute areas under- or overflow. Radii :math:`\theta>\pi/2` use inclusion-exclusion with
the complementary caps: :math:`I_\theta = 2A^{cap}(\theta) - A_d + I_{\pi-\theta}`.
Caps that do not meet (:math:`\varphi\ge2\theta`) have intersection exactly 0, never NaN.

Low dimensions: ``d = 2`` (circle, "area" = arc length) uses the closed form
:math:`\max(0, 2\theta-\varphi)` and ``d = 1`` (:math:`S^0`, counting measure) treats a cap
of radius :math:`<\pi` as its centre alone.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import betainc, betaincinv, gammaln

from gnnaudit._validation import check_float, check_int
from gnnaudit.errors import InvalidInputError

__all__ = [
    "sphere_area",
    "cap_fraction",
    "cap_area",
    "cap_intersection_ratio",
    "cap_intersection_fraction",
    "cap_intersection_area",
    "cap_weight",
]

_N_QUAD = 48


def _check_dim(d: int) -> int:
    return check_int("d", d, minimum=1)


def _check_theta(theta: float) -> float:
    return check_float("theta", theta, minimum=0.0, maximum=math.pi, inclusive=(False, False))


def _check_phi(phi: np.ndarray | float) -> np.ndarray:
    arr = np.asarray(phi, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise InvalidInputError("phi must be finite angles in [0, pi]; got NaN or inf")
    if arr.size and (arr.min() < -1e-12 or arr.max() > math.pi + 1e-12):
        raise InvalidInputError(
            f"phi must be angles in [0, pi]; got values in [{arr.min()}, {arr.max()}]"
        )
    return np.clip(arr, 0.0, math.pi)


def sphere_area(d: int) -> float:
    r"""Surface area :math:`A_d = 2\pi^{d/2}/\Gamma(d/2)` of the unit sphere in
    :math:`\mathbb{R}^d` (``d = 1``: two points, area 2). May underflow to 0 for huge ``d``;
    use the ``*_fraction`` / ratio functions there."""
    d = _check_dim(d)
    return float(np.exp(math.log(2.0) + 0.5 * d * math.log(math.pi) - gammaln(0.5 * d)))


def _cap_fraction(theta: float, d: int) -> float:
    """Cap area divided by the sphere area (no validation)."""
    if d == 1:
        return 0.5  # one of the two points
    if d == 2:
        return theta / math.pi
    if theta <= math.pi / 2:
        return float(0.5 * betainc(0.5 * (d - 1), 0.5, math.sin(theta) ** 2))
    return 1.0 - float(0.5 * betainc(0.5 * (d - 1), 0.5, math.sin(math.pi - theta) ** 2))


def cap_fraction(theta: float, d: int) -> float:
    """Area of a cap of angular radius ``theta`` on :math:`S^{d-1}` as a fraction of the sphere."""
    return _cap_fraction(_check_theta(theta), _check_dim(d))


def cap_area(theta: float, d: int) -> float:
    r"""Area of a cap of angular radius ``theta`` (radians, in (0, pi)) on :math:`S^{d-1}`."""
    theta, d = _check_theta(theta), _check_dim(d)
    return _cap_fraction(theta, d) * sphere_area(d)


@lru_cache(maxsize=8)
def _gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(n)


def _ratio_small(phi: np.ndarray, theta: float, d: int) -> np.ndarray:
    """I(phi)/A_cap(theta) for theta <= pi/2 and d >= 3 (phi already in [0, pi])."""
    out = np.zeros_like(phi)
    out[phi == 0.0] = 1.0
    live = (phi > 0.0) & (phi < 2.0 * theta)
    if not live.any():
        return out
    a = 0.5 * phi[live]  # angle of the bisecting hyperplane from the cap axis, in (0, theta)
    alpha = 0.5 * (d - 1)
    f_theta = float(betainc(alpha, 0.5, math.sin(theta) ** 2))
    if not f_theta > 1e-250:  # the cap's area underflows (huge d): log-domain quadrature
        out[live] = _ratio_log_domain(a, theta, d)
        return out
    p_a = betainc(alpha, 0.5, np.sin(a) ** 2) / f_theta
    nodes, weights = _gauss_legendre(_N_QUAD)
    # p in [p_a, 1] (rows: phi values, columns: quadrature nodes)
    p = p_a[:, None] + (1.0 - p_a)[:, None] * (nodes[None, :] + 1.0) * 0.5
    s2 = betaincinv(alpha, 0.5, np.clip(p * f_theta, 0.0, 1.0))
    ang = np.arcsin(np.sqrt(np.clip(s2, 0.0, 1.0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.tan(a)[:, None] / np.tan(ang)
    x = np.clip(1.0 - np.nan_to_num(t, nan=1.0, posinf=1.0) ** 2, 0.0, 1.0)
    g = betainc(0.5 * (d - 2), 0.5, x)
    val = 0.5 * (1.0 - p_a) * (g * weights[None, :]).sum(axis=1)
    out[live] = np.clip(val, 0.0, 1.0)
    return out


def _ratio_log_domain(a: np.ndarray, theta: float, d: int) -> np.ndarray:
    """Huge-d path of :func:`_ratio_small`: Gauss-Legendre in the angle itself on the window
    below theta where :math:`(\\sin\\phi/\\sin\theta)^{d-2} > e^{-80}` (outside it the
    integrands are negligible), the peaked factor evaluated in log space."""
    nodes, weights = _gauss_legendre(4 * _N_QUAD)
    width = min(theta, 80.0 * math.tan(theta) / (d - 2))

    def integral(lo: np.ndarray, with_g: bool) -> np.ndarray:
        lo = np.maximum(lo, theta - width)
        ang = lo[:, None] + (theta - lo)[:, None] * (nodes[None, :] + 1.0) * 0.5
        logw = (d - 2) * (np.log(np.sin(ang)) - math.log(math.sin(theta)))
        f = np.exp(logw)
        if with_g:
            t = np.tan(a)[:, None] / np.tan(ang)
            f = f * betainc(0.5 * (d - 2), 0.5, np.clip(1.0 - t**2, 0.0, 1.0))
        return 0.5 * (theta - lo) * (f * weights[None, :]).sum(axis=1)

    den = integral(np.zeros(1), with_g=False)[0]
    return np.clip(integral(a, with_g=True) / den, 0.0, 1.0)


def _ratio(phi: np.ndarray, theta: float, d: int) -> np.ndarray:
    """Normalised intersection I(phi)/A_cap(theta), in [0, 1] (no validation)."""
    if d == 1:
        return (phi < math.pi / 2).astype(np.float64)
    if d == 2:
        if theta <= math.pi / 2:
            return np.maximum(0.0, 2.0 * theta - phi) / (2.0 * theta)
        # two arcs of half-width theta on the circle, overlap on both sides
        over = np.maximum(0.0, 2.0 * theta - phi) + np.maximum(
            0.0, 2.0 * theta - (2 * math.pi - phi)
        )
        return np.minimum(over, 2.0 * theta) / (2.0 * theta)
    if theta <= math.pi / 2:
        return _ratio_small(phi, theta, d)
    # inclusion-exclusion with the complementary caps (radius pi - theta, same angle phi)
    c_big = _cap_fraction(theta, d)
    c_small = _cap_fraction(math.pi - theta, d)
    inter = 2.0 * c_big - 1.0 + _ratio_small(phi, math.pi - theta, d) * c_small
    return np.clip(inter / c_big, 0.0, 1.0)


def cap_intersection_ratio(phi: np.ndarray | float, theta: float, d: int) -> np.ndarray:
    r"""Area of the intersection of two caps of radius ``theta`` whose centres are at angle
    ``phi`` divided by the area of one cap: :math:`I(\varphi)/SF \in [0, 1]`.

    Vectorised over ``phi`` (radians in [0, pi]); exact 0 when :math:`\varphi\ge2\theta`
    (caps do not meet), 1 when :math:`\varphi = 0`.
    """
    theta, d = _check_theta(theta), _check_dim(d)
    arr = _check_phi(phi)
    return _ratio(arr.reshape(-1), theta, d).reshape(arr.shape)


def cap_intersection_fraction(phi: np.ndarray | float, theta: float, d: int) -> np.ndarray:
    """Intersection area of two caps of radius ``theta`` at angle ``phi`` as a sphere fraction."""
    return cap_intersection_ratio(phi, theta, d) * cap_fraction(theta, d)


def cap_intersection_area(phi: np.ndarray | float, theta: float, d: int) -> np.ndarray:
    r"""Intersection area (on :math:`S^{d-1}`) of two caps of radius ``theta`` at angle ``phi``."""
    return cap_intersection_fraction(phi, theta, d) * sphere_area(d)


def cap_weight(phi: np.ndarray | float, theta: float, d: int) -> np.ndarray:
    r"""Node weight of the LocalCE-I index (CE paper, Eq. 10):

    .. math:: w_v = 1 - \frac{IA(\mu, x_v)}{SF(x_v)}

    where ``phi`` is the angle between the node's unit vector and its cluster centroid.
    Always in [0, 1]."""
    return 1.0 - cap_intersection_ratio(phi, theta, d)
