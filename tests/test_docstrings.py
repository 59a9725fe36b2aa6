"""Every public module, class, function and method of gnnaudit has a docstring.

Public means: in a module whose dotted path has no ``_``-prefixed part, defined there (not
imported), and not starting with ``_``. A method overriding a documented method of a base class
(a Lightning hook, a scikit-learn method, an abstract method of ours) inherits its docstring, as
:func:`inspect.getdoc` and Sphinx do.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import gnnaudit


def public_modules() -> Iterator[ModuleType]:
    yield gnnaudit
    for info in pkgutil.walk_packages(gnnaudit.__path__, "gnnaudit."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        yield importlib.import_module(info.name)


def _documented(obj: Any) -> bool:
    return bool((inspect.getdoc(obj) or "").strip())


def _method_target(cls: type, name: str, member: Any) -> Any | None:
    """The object whose docstring documents ``cls.name``, or ``None`` if not a method."""
    if isinstance(member, staticmethod | classmethod | property):
        return getattr(cls, name)
    if inspect.isfunction(member):
        return getattr(cls, name)
    return None


def undocumented() -> list[str]:
    """Dotted names of the public modules, classes, functions and methods without a docstring."""
    missing = []
    for module in public_modules():
        if not (module.__doc__ or "").strip():
            missing.append(module.__name__)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not (obj.__doc__ or "").strip():
                missing.append(f"{module.__name__}.{name}")
            if not inspect.isclass(obj):
                continue
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                target = _method_target(obj, attr, member)
                if target is not None and not _documented(target):
                    missing.append(f"{module.__name__}.{name}.{attr}")
    return missing


def test_public_api_has_docstrings():
    assert undocumented() == []


def test_the_check_finds_a_missing_docstring():
    class Documented:
        """Has a docstring."""

        def method(self):
            pass

        @property
        def value(self):
            return 1

    assert _method_target(Documented, "method", vars(Documented)["method"]) is not None
    assert not _documented(Documented.method)
    assert not _documented(vars(Documented)["value"])
    assert _documented(Documented)
