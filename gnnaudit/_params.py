"""Declarative parameter validation for gnnaudit's estimators (scikit-learn style).

An estimator lists its constructor parameters and what each may hold in a class attribute
``_parameter_constraints``; :func:`validate_parameters` checks every one at the start of
``fit`` (never in ``__init__``, as scikit-learn's contract asks) and raises
:class:`~gnnaudit.errors.InvalidInputError` naming the estimator, the parameter, the value and
everything that is allowed::

    class FairDen(BaseEstimator):
        _parameter_constraints = {
            "n_clusters": [Integer(1, None)],
            "rounding": [Options("balanced", "kmeans")],
            "time_limit": [Real(0, None, closed="neither"), None],
            "random_state": [RANDOM_STATE],
        }

        def fit(self, X, y=None):
            validate_parameters(self)
            ...

A parameter may list several rules; the value is accepted when any of them accepts it.
``None`` in the list accepts ``None``. The rules are small frozen dataclasses, so a class's
constraints read as documentation. This is a leaf module: it imports only
:mod:`gnnaudit.errors` and numpy.

Why our own and not scikit-learn's: its declarative validator
(``sklearn.utils._param_validation``) is private API that changes between releases, and its
errors are ``ValueError`` / ``TypeError`` without the allowed values in gnnaudit's wording; the
public ``sklearn.utils`` validators (``check_scalar``, ``check_random_state``) check one value
at a time and are used where they fit. This module stays the small table-driven part only.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnnaudit.errors import InvalidInputError

__all__ = [
    "Rule",
    "Integer",
    "Real",
    "Options",
    "InstanceOf",
    "Satisfies",
    "RANDOM_STATE",
    "validate_parameters",
    "check_parameter",
]


class Rule:
    """One thing a parameter may hold: :meth:`accepts` tells, :meth:`describe` says it."""

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` satisfies the rule."""
        raise NotImplementedError

    def describe(self) -> str:
        """The rule in words, for error messages (e.g. ``'an integer >= 1'``)."""
        raise NotImplementedError


def _interval_text(kind: str, low: float | None, high: float | None, closed: str) -> str:
    parts = []
    if low is not None:
        parts.append(f">= {low}" if closed in ("both", "left") else f"> {low}")
    if high is not None:
        parts.append(f"<= {high}" if closed in ("both", "right") else f"< {high}")
    return f"{kind} {' and '.join(parts)}".rstrip() if parts else kind


def _in_interval(value: float, low: float | None, high: float | None, closed: str) -> bool:
    if low is not None and (value < low or (value == low and closed in ("right", "neither"))):
        return False
    return not (
        high is not None and (value > high or (value == high and closed in ("left", "neither")))
    )


_CLOSED = ("both", "left", "right", "neither")


@dataclass(frozen=True)
class Integer(Rule):
    """An integer (not a bool) in ``[low, high]`` (``None`` = unbounded on that side)."""

    low: int | None = None
    high: int | None = None
    closed: str = "both"

    def __post_init__(self) -> None:
        if self.closed not in _CLOSED:
            raise ValueError(f"closed must be one of {_CLOSED}, got {self.closed!r}")

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
            return False
        return _in_interval(int(value), self.low, self.high, self.closed)

    def describe(self) -> str:
        return _interval_text("an integer", self.low, self.high, self.closed)


@dataclass(frozen=True)
class Real(Rule):
    """A finite real number (integers included, bools not) in the given interval."""

    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def __post_init__(self) -> None:
        if self.closed not in _CLOSED:
            raise ValueError(f"closed must be one of {_CLOSED}, got {self.closed!r}")

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
            return False
        value = float(value)
        return bool(np.isfinite(value)) and _in_interval(value, self.low, self.high, self.closed)

    def describe(self) -> str:
        return _interval_text("a finite number", self.low, self.high, self.closed)


class Options(Rule):
    """One of a fixed set of values (compared with ``==``; strings are case-sensitive)."""

    def __init__(self, *values: Any) -> None:
        self.values = tuple(values)

    def accepts(self, value: Any) -> bool:
        try:
            return any(type(value) is type(v) and value == v for v in self.values)
        except Exception:  # an array compared with == : not one of the options
            return False

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)

    def __repr__(self) -> str:
        return f"Options{self.values!r}"


@dataclass(frozen=True)
class InstanceOf(Rule):
    """An instance of ``types`` (a type or a tuple of types); ``what`` names it in messages."""

    types: type | tuple[type, ...]
    what: str = ""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.types)

    def describe(self) -> str:
        if self.what:
            return self.what
        types = self.types if isinstance(self.types, tuple) else (self.types,)
        return "an instance of " + " or ".join(t.__name__ for t in types)


@dataclass(frozen=True)
class Satisfies(Rule):
    """Any value for which ``predicate(value)`` is true; ``what`` says what that means."""

    predicate: Callable[[Any], bool]
    what: str

    def accepts(self, value: Any) -> bool:
        try:
            return bool(self.predicate(value))
        except Exception:  # a predicate that cannot judge the value refuses it
            return False

    def describe(self) -> str:
        return self.what


#: ``random_state``: None, a seed in [0, 2**32 - 1] (numpy's range) or a ``RandomState`` /
#: ``Generator``
RANDOM_STATE = Satisfies(
    lambda v: (
        v is None
        or isinstance(v, np.random.RandomState | np.random.Generator)
        or Integer(0, 2**32 - 1).accepts(v)
    ),
    "None, an integer seed in [0, 2**32 - 1] or a numpy RandomState / Generator",
)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_parameter(name: str, value: Any, rules: Sequence[Rule | None], *, owner: str = "") -> Any:
    """Return ``value`` if any of ``rules`` accepts it (``None`` in ``rules`` accepts ``None``);
    otherwise raise :class:`InvalidInputError` naming ``name`` (after ``owner: `` when given),
    the value and what is allowed."""
    for rule in rules:
        if rule is None:
            if value is None:
                return value
        elif rule.accepts(value):
            return value
    allowed = [("None" if rule is None else rule.describe()) for rule in rules]
    where = f"{owner}: " if owner else ""
    raise InvalidInputError(f"{where}{name} must be {' or '.join(allowed)}; got {_short(value)}")


def validate_parameters(
    estimator: Any, extra: Mapping[str, Sequence[Rule | None]] | None = None
) -> None:
    """Check every entry of ``type(estimator)._parameter_constraints`` (and ``extra``) against
    the estimator's current attribute of that name; raise :class:`InvalidInputError` naming
    the class and the parameter (``"FairDen: n_clusters must be an integer >= 1; got 0"``) on
    the first violation. Sets nothing on the estimator."""
    constraints: dict[str, Sequence[Rule | None]] = dict(
        getattr(type(estimator), "_parameter_constraints", {})
    )
    constraints.update(extra or {})
    cls = type(estimator).__name__
    for param, rules in constraints.items():
        check_parameter(param, getattr(estimator, param), rules, owner=cls)
