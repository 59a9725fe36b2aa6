"""One vocabulary: renamed keywords and accepted aliases, one mechanism for every entry point.

gnnaudit names a thing the way its anchor library does: ``n_clusters`` (scikit-learn's
clusterers), ``min_samples`` (scikit-learn's ``DBSCAN``), ``n_counterfactuals`` and
``sensitive_features`` (fairlearn); ``k`` is only the number of evidences. Old spellings keep
working for one release:

* :func:`renamed_keywords` wraps a function or an ``__init__``: a **deprecated** keyword
  (``min_pts=``) is moved to its new name with a :class:`DeprecationWarning` that says the
  release removing it (:data:`REMOVAL`); an **alias** (``sensitive_features=`` for
  ``sensitive=``) is moved silently. Either way, both names given with different values is an
  :class:`~gnnaudit.errors.InvalidInputError` naming both. The wrapped signature is the new
  one (``inspect.signature`` follows ``__wrapped__``), so scikit-learn's ``get_params`` lists
  only the new names.
* :func:`resolve_alias` is the same rule for a value already in hand (e.g. a parameter kept
  in a signature).
* :func:`deprecated_attribute` is a read-only property under an old attribute name
  (``min_pts_``) that warns and returns the new one.

``None`` counts as "not given" for both names, so wrappers that pass both through work. This
is a leaf module: it imports only :mod:`gnnaudit.errors` (and numpy).
"""

from __future__ import annotations

import functools
import inspect
import reprlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import numpy as np

from gnnaudit.errors import InvalidInputError

__all__ = [
    "REMOVAL",
    "same_value",
    "resolve_alias",
    "renamed_keywords",
    "deprecated_attribute",
]

#: the release that removes the deprecated spellings
REMOVAL = "0.3.0"

F = TypeVar("F", bound=Callable[..., Any])

_short = reprlib.Repr()
_short.maxstring = 40
_short.maxother = 40


def same_value(a: Any, b: Any) -> bool:
    """Whether two values given under two names are the same (identity, equality, or equal
    arrays element by element); ``False`` when they cannot be compared."""
    if a is b:
        return True
    try:
        if np.ndim(a) == 0 and np.ndim(b) == 0:
            flags = isinstance(a, bool | np.bool_), isinstance(b, bool | np.bool_)
            return bool(a == b) and flags[0] == flags[1]  # 5 and np.int64(5) alike, 1 and True not
        return bool(np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object)))
    except Exception:  # noqa: BLE001  # incomparable values are simply different
        return False


def _conflict(where: str, name: str, value: Any, alias: str, alias_value: Any) -> InvalidInputError:
    return InvalidInputError(
        f"{where}got {name}={_short.repr(value)} and {alias}={_short.repr(alias_value)}, two "
        f"names of the same parameter with different values; give only one of them"
    )


def _warn(where: str, old: str, new: str, stacklevel: int, suffix: str = "=") -> None:
    warnings.warn(
        f"{where}{old}{suffix} is deprecated and will be removed in {REMOVAL}; use {new}{suffix}",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def resolve_alias(
    name: str,
    value: Any,
    alias: str,
    alias_value: Any,
    *,
    deprecated: bool = False,
    where: str = "",
    stacklevel: int = 2,
) -> Any:
    """The value of parameter ``name``, given as ``name`` or as its ``alias`` (``None``: not
    given).

    ``deprecated``: warn (:class:`DeprecationWarning`, ``stacklevel`` counted from the caller of
    this function's caller) when the alias is used. ``where`` prefixes messages (e.g.
    ``"FairDen: "``).

    Raises:
        InvalidInputError: both given with different values (:func:`same_value`), naming both.
    """
    if alias_value is None:
        return value
    if deprecated:
        _warn(where, alias, name, stacklevel + 1)
    if value is None or same_value(value, alias_value):
        return alias_value if value is None else value
    raise _conflict(where, name, value, alias, alias_value)


def renamed_keywords(
    *, deprecated: Mapping[str, str] | None = None, aliases: Mapping[str, str] | None = None
) -> Callable[[F], F]:
    """Decorator: accept old keyword names (``deprecated``, ``{old: new}``, warning) and
    alternative ones (``aliases``, ``{alias: name}``, silent) of the wrapped callable.

    ``@renamed_keywords(deprecated={"min_pts": "min_samples"})`` on ``__init__`` makes
    ``FairDen(min_pts=5)`` ``FairDen(min_samples=5)`` with a :class:`DeprecationWarning`;
    ``FairDen(min_samples=4, min_pts=5)`` raises :class:`~gnnaudit.errors.InvalidInputError`.
    """
    renames = {old: (new, True) for old, new in (deprecated or {}).items()}
    renames.update({old: (new, False) for old, new in (aliases or {}).items()})

    def decorate(func: F) -> F:
        signature = inspect.signature(func)
        owner = func.__qualname__.removesuffix(".__init__")
        where = f"{owner}: "

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old in [key for key in kwargs if key in renames]:
                new, warn = renames[old]
                old_value = kwargs.pop(old)
                if old_value is None:
                    continue
                if warn:
                    _warn(where, old, new, 2)
                try:
                    bound = signature.bind_partial(*args, **kwargs).arguments
                except TypeError:  # a wrong call: the function itself says so below
                    bound = dict(kwargs)
                given = bound.get(new)
                if given is not None and not same_value(given, old_value):
                    raise _conflict(where, new, given, old, old_value)
                if given is None and new in bound and new not in kwargs:  # positional None
                    i = list(signature.parameters).index(new)
                    args = (*args[:i], old_value, *args[i + 1 :])
                elif given is None:
                    kwargs[new] = old_value
            return func(*args, **kwargs)

        return cast(F, wrapper)

    return decorate


def deprecated_attribute(old: str, new: str) -> property:
    """A read-only property ``old`` that warns (:class:`DeprecationWarning`) and returns the
    attribute ``new`` (``AttributeError`` while that is not set, e.g. before ``fit``)."""

    def getter(self: Any) -> Any:
        _warn(f"{type(self).__name__}.", old, new, 2, suffix="")
        return getattr(self, new)

    getter.__doc__ = f"Deprecated alias of ``{new}`` (removed in {REMOVAL})."
    return property(getter)
