"""Names of a package loaded on first use (PEP 562), so that importing the package stays cheap.

A package lists ``name -> module`` and sets ``__getattr__, __dir__ = lazy_names(__name__,
_LAZY)``: the first access to ``package.name`` imports the module (a path relative to the
package, or an absolute ``gnnaudit...`` path) and stores the value in the package's namespace,
so later accesses are plain attribute reads. ``gnnaudit.datasets`` (the graph loaders import
torch and PyG, the table loaders do not), ``gnnaudit.graph_ops`` (the torch primitives) and
``gnnaudit.training`` (Lightning) use it. A leaf: it imports nothing of gnnaudit.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose ``names`` map a public name to the module
    defining it (``"tabular"`` for ``package.tabular``, or a full ``"gnnaudit...."`` path).
    An unknown name raises ``AttributeError`` as a plain module would."""

    def module_path(module: str) -> str:
        return module if module.startswith("gnnaudit.") else f"{package}.{module}"

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_path(module)), name)
        setattr(sys.modules[package], name, value)  # cached: the next access is a plain read
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
