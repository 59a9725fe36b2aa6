"""Audit units that another package provides, looked up by name: how the default audit gets its
fine-tuning and mitigation units without the audit importing Lightning.

Fine-tuning on evidences and the before / after mitigation train a copy of the model, so their
units live in :mod:`gnnaudit.training` (Lightning). The audit layer never imports training:
instead :mod:`gnnaudit.training` registers a factory for each of its units when it is imported
(:func:`register_unit`), and :func:`build_unit` imports the providing package by name
(:data:`PROVIDERS`) only when such a unit is asked for (``finetune=True``, ``mitigate=True``).
An audit without them never imports :mod:`gnnaudit.training`, hence never Lightning.

A factory is any callable taking the unit's keyword options and returning an
:class:`~gnnaudit.audit.unit.AuditUnit`; a package of one's own may register more names and
build them with :func:`build_unit`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from gnnaudit.audit.unit import AuditUnit
from gnnaudit.errors import InvalidInputError

__all__ = ["PROVIDERS", "UnitFactory", "build_unit", "register_unit", "registered_units"]

#: a callable building an audit unit from its keyword options
UnitFactory = Callable[..., AuditUnit]

#: unit name -> the package whose import registers it (imported by :func:`build_unit` on the
#: first request of that name): the units of the default audit that need Lightning
PROVIDERS: dict[str, str] = {
    "finetune": "gnnaudit.training",  # EvidenceFinetuneUnit (CE paper Sec. 7.3)
    "mitigate": "gnnaudit.training",  # MitigationUnit (FairFinetune, audited again)
}

_FACTORIES: dict[str, UnitFactory] = {}


def register_unit(name: str, factory: UnitFactory) -> None:
    """Register ``factory`` as the builder of the unit ``name`` (a later registration of the
    same name replaces it, so a package may be imported again)."""
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"a unit name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise InvalidInputError(
            f"the factory of unit {name!r} must be callable, got {type(factory).__name__}"
        )
    _FACTORIES[name] = factory


def registered_units() -> tuple[str, ...]:
    """The names registered so far (without importing any provider)."""
    return tuple(sorted(_FACTORIES))


def build_unit(name: str, **options: Any) -> AuditUnit:
    """The unit ``name`` built with ``options``; its provider (:data:`PROVIDERS`) is imported
    first when the name is not registered yet. An unknown name is an
    :class:`~gnnaudit.errors.InvalidInputError` naming the known ones."""
    if name not in _FACTORIES and name in PROVIDERS:
        importlib.import_module(PROVIDERS[name])  # registers its units on import
    factory = _FACTORIES.get(name)
    if factory is None:
        known = sorted(set(_FACTORIES) | set(PROVIDERS))
        raise InvalidInputError(f"no audit unit is registered as {name!r}; known: {known}")
    return factory(**options)
