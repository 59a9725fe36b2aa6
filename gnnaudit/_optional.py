"""Optional dependencies: the extras that provide them and one way to import them.

Only some paths need these packages, so they are extras of ``pip install gnnaudit`` rather than
requirements:

========== ============== ===================================================================
module     extra          used by
========== ============== ===================================================================
faiss      ``faiss``      the ``"faiss"`` and ``"sharded"`` evidence search backends and the
                          spherical k-means of the paper's index (``"index"``); k-means cells
                          of the late Boruvka rounds of the mutual-reachability MST (numpy
                          otherwise)
networkx   ``diagnosis``  the cannot-link clique search of the tree diagnosis (colouring
                          cores otherwise)
matplotlib ``plots``      the PNG figures of the audit report (tables and notes otherwise)
========== ============== ===================================================================

``pip install 'gnnaudit[all]'`` installs every one. Where the feature is requested explicitly
(``backend="faiss"``), :func:`require` raises :class:`~gnnaudit.errors.MissingDependencyError`
naming the extra; where the package is an optimisation or a nicety, :func:`optional` returns
``None`` and the caller falls back. This module imports only :mod:`gnnaudit.errors`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gnnaudit.errors import MissingDependencyError

__all__ = ["EXTRAS", "optional", "require", "available"]

#: importable module -> (distribution to install, extra of gnnaudit that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "faiss": ("faiss-cpu", "faiss"),
    "networkx": ("networkx", "diagnosis"),
    "matplotlib": ("matplotlib", "plots"),
    "pymetis": ("pymetis", "metis"),
}


def optional(module: str) -> ModuleType | None:
    """``module`` imported, or ``None`` when it is not installed (or fails to import)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def available(module: str) -> bool:
    """Whether ``module`` can be imported."""
    return optional(module) is not None


def require(module: str, purpose: str) -> ModuleType:
    """``module`` imported; when it is missing a :class:`MissingDependencyError` saying that
    ``purpose`` needs it and which extra installs it (the import error is kept as the cause)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        dist, extra = EXTRAS.get(top, (top, "all"))
        raise MissingDependencyError(
            f"{purpose} needs the optional package {dist!r}, which is not installed: "
            f"pip install 'gnnaudit[{extra}]' (or pip install {dist})"
        ) from exc
