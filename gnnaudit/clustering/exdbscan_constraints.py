"""Actionability constraints of ExDBSCAN (paper App. A.8 and A.12).

Every constraint restricts the change :math:`\\delta = c - x` of a counterfactual :math:`c`:

* non-actionable (immutable) feature :math:`f`: :math:`\\delta_f = 0`, and :math:`c_f = x_f`
  bit for bit;
* monotone ``"increase"`` with optional bound :math:`b`: :math:`0 \\le \\delta_f \\le b`;
  ``"decrease"``: :math:`-b \\le \\delta_f \\le 0`;
* correlated pair :math:`(f, g, +1)`: :math:`\\delta_f \\delta_g \\ge 0` (both increase or both
  decrease); :math:`(f, g, -1)`: :math:`\\delta_f \\delta_g \\le 0`.

The allowed region :math:`R` is therefore a union of boxes :math:`x + [l, u]`, one per sign
pattern of the correlated pairs, each containing :math:`x` (:math:`l \\le 0 \\le u`). A core
:math:`q` is *eligible* iff its ball meets :math:`R`, i.e. (for the separable metrics) the
projection :math:`p = \\operatorname{clip}(q, x + l, x + u)` satisfies :math:`d(q, p) \\le
\\varepsilon` -- with immutable features only this is the paper's filter
:math:`\\|x_{NA} - q_{NA}\\| \\le \\varepsilon`. The counterfactual is then placed on the segment
:math:`p \\to x` (inside the box, which is convex) as far toward :math:`x` as the ball allows;
without constraints :math:`p = q` and this is the paper's Eq. 4,
:math:`c = q + \\varepsilon (x - q) / \\|x - q\\|`; with immutable features only it is App. A.8's
move in the actionable subspace up to radius :math:`\\sqrt{\\varepsilon^2 - \\|x_{NA} - q_{NA}\\|^2}`.
For cosine distance the clip is not the exact projection, so the filter is conservative.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnnaudit._validation import check_array
from gnnaudit.errors import InvalidInputError

__all__ = ["FeatureConstraints", "parse_constraints", "MAX_CORRELATED_PAIRS"]

#: The region is a union of ``2**pairs`` boxes; more pairs than this are refused.
MAX_CORRELATED_PAIRS = 10


@dataclass
class FeatureConstraints:
    """Parsed constraints: feature indices and bounds on :math:`\\delta = c - x`."""

    n_features: int
    immutable: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    monotone: dict[int, tuple[str, float]] = field(default_factory=dict)
    correlated: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when no constraint is set (every core is eligible, Eq. 4 placement)."""
        return not (self.immutable.size or self.monotone or self.correlated)

    def stage_boxes(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """``(stage name, lower, upper)`` boxes: immutable only, + monotone, + correlated.

        The last stage is a stack of ``2**pairs`` boxes (shape ``(P, d)``); the earlier ones
        have shape ``(1, d)``.
        """
        d = self.n_features
        lo = np.full(d, -np.inf)
        hi = np.full(d, np.inf)
        lo[self.immutable] = 0.0
        hi[self.immutable] = 0.0
        stages = [("immutable", lo[None].copy(), hi[None].copy())]
        for f, (direction, bound) in self.monotone.items():
            if direction == "increase":
                lo[f] = max(lo[f], 0.0)
                hi[f] = min(hi[f], bound)
            else:
                hi[f] = min(hi[f], 0.0)
                lo[f] = max(lo[f], -bound)
        stages.append(("monotone", lo[None].copy(), hi[None].copy()))
        los, his = [], []
        for bits in itertools.product((0, 1), repeat=len(self.correlated)):
            plo, phi = lo.copy(), hi.copy()
            for (f, g, sign), bit in zip(self.correlated, bits, strict=True):
                up_f = bit == 0
                up_g = up_f if sign > 0 else not up_f
                for feat, up in ((f, up_f), (g, up_g)):
                    if up:
                        plo[feat] = max(plo[feat], 0.0)
                    else:
                        phi[feat] = min(phi[feat], 0.0)
            los.append(plo)
            his.append(phi)
        stages.append(("correlated", np.array(los), np.array(his)))
        return stages

    def describe(self, stage: str, names: Sequence[str]) -> str:
        """The constraints of ``stage`` (immutable / monotone / correlated) in user terms,
        features named by ``names``, for error messages."""
        if stage == "immutable":
            return "immutable=" + repr([names[i] for i in self.immutable.tolist()])
        if stage == "monotone":
            return "monotone=" + repr({names[f]: v for f, v in self.monotone.items()})
        return "correlated=" + repr([(names[f], names[g], s) for f, g, s in self.correlated])

    def satisfied(self, x: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Boolean per row of ``c``: does the change ``c - x`` obey every constraint?"""
        x = check_array("x", x, ndim=1)
        c = np.atleast_2d(check_array("c", c, ndim=(1, 2), min_rows=0))
        if x.shape[0] != self.n_features or c.shape[1] != self.n_features:
            raise InvalidInputError(
                f"x and c must have {self.n_features} features, got {x.shape[0]} and {c.shape[1]}"
            )
        ok = np.ones(c.shape[0], dtype=bool)
        if self.immutable.size:
            ok &= (c[:, self.immutable] == x[self.immutable]).all(axis=1)
        for f, (direction, bound) in self.monotone.items():
            if direction == "increase":
                ok &= (c[:, f] >= x[f]) & (c[:, f] <= x[f] + bound)
            else:
                ok &= (c[:, f] <= x[f]) & (c[:, f] >= x[f] - bound)
        for f, g, sign in self.correlated:
            df, dg = c[:, f] - x[f], c[:, g] - x[g]
            ok &= (df * dg >= 0) if sign > 0 else (df * dg <= 0)
        return ok


def _feature_index(name: str, ref: Any, names: Sequence[str] | None, d: int) -> int:
    if isinstance(ref, (bool, np.bool_)):
        raise InvalidInputError(f"{name}: feature {ref!r} must be an index or a name")
    if isinstance(ref, numbers.Integral):
        if not 0 <= int(ref) < d:
            raise InvalidInputError(f"{name}: feature index {ref} is outside [0, {d - 1}]")
        return int(ref)
    if isinstance(ref, str):
        if names is None:
            raise InvalidInputError(
                f"{name}: feature name {ref!r} given but the model has no feature names "
                "(fit with a DataFrame or feature_names=...)"
            )
        lookup = {n: i for i, n in enumerate(names)}
        if ref not in lookup:
            raise InvalidInputError(f"{name}: unknown feature {ref!r}; features are {list(names)}")
        return lookup[ref]
    raise InvalidInputError(f"{name}: feature {ref!r} must be an index or a name")


def parse_constraints(
    n_features: int,
    names: Sequence[str] | None,
    immutable: Any = (),
    monotone: Any = None,
    correlated: Any = None,
) -> FeatureConstraints:
    """Validate user constraints (feature names or indices) into :class:`FeatureConstraints`."""
    if immutable is None:
        immutable = ()
    if isinstance(immutable, (str, numbers.Integral)):
        immutable = (immutable,)
    imm = sorted({_feature_index("immutable", f, names, n_features) for f in immutable})
    mono = _parse_monotone(monotone, names, n_features, set(imm))
    corr = _parse_correlated(correlated, names, n_features)
    return FeatureConstraints(n_features, np.asarray(imm, dtype=np.int64), mono, corr)


def _parse_monotone(
    monotone: Any, names: Sequence[str] | None, n_features: int, immutable: set[int]
) -> dict[int, tuple[str, float]]:
    """``monotone`` as ``{feature index: (direction, bound)}`` (``bound`` inf: unbounded)."""
    mono: dict[int, tuple[str, float]] = {}
    if monotone is None:
        return mono
    if not isinstance(monotone, dict):
        raise InvalidInputError(
            "monotone must be a dict {feature: 'increase' | 'decrease' | (direction, bound)}, "
            f"got {type(monotone).__name__}"
        )
    for ref, spec in monotone.items():
        f = _feature_index("monotone", ref, names, n_features)
        direction, bound = _monotone_spec(ref, spec)
        if f in immutable:
            raise InvalidInputError(f"monotone: feature {ref!r} is also immutable")
        mono[f] = (direction, bound)
    return mono


def _monotone_spec(ref: Any, spec: Any) -> tuple[str, float]:
    """One ``monotone`` value: ``'increase'``, ``'decrease'`` or ``(direction, bound >= 0)``."""
    bound: Any = np.inf
    if isinstance(spec, (tuple, list)):
        if len(spec) != 2:
            raise InvalidInputError(f"monotone[{ref!r}] must be (direction, bound), got {spec!r}")
        spec, bound = spec
        if (
            isinstance(bound, bool)
            or not isinstance(bound, numbers.Real)
            or not (np.isfinite(float(bound)) and float(bound) >= 0)
        ):
            raise InvalidInputError(
                f"monotone[{ref!r}] bound must be a finite number >= 0, got {bound!r}"
            )
    if spec not in ("increase", "decrease"):
        raise InvalidInputError(
            f"monotone[{ref!r}] direction must be 'increase' or 'decrease', got {spec!r}"
        )
    return str(spec), float(bound)


def _parse_correlated(
    correlated: Any, names: Sequence[str] | None, n_features: int
) -> list[tuple[int, int, int]]:
    """``correlated`` as ``[(feature a, feature b, sign)]``, at most ``MAX_CORRELATED_PAIRS``."""
    corr: list[tuple[int, int, int]] = []
    if correlated is None:
        return corr
    for item in correlated:
        if not isinstance(item, (tuple, list)) or len(item) != 3:
            raise InvalidInputError(
                f"correlated entries must be (feature_a, feature_b, +1 | -1), got {item!r}"
            )
        a, b, sign = item
        f = _feature_index("correlated", a, names, n_features)
        g = _feature_index("correlated", b, names, n_features)
        if f == g:
            raise InvalidInputError(f"correlated: pair {item!r} names one feature twice")
        if sign not in (1, -1) or isinstance(sign, bool):
            raise InvalidInputError(f"correlated: sign of {item!r} must be +1 or -1, got {sign!r}")
        corr.append((f, g, int(sign)))
    if len(corr) > MAX_CORRELATED_PAIRS:
        raise InvalidInputError(
            f"correlated: at most {MAX_CORRELATED_PAIRS} pairs are supported, got {len(corr)}"
        )
    return corr
