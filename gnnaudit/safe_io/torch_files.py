"""``torch.load(weights_only=True)`` with an explicit allow-list and a static check of the
globals a file names; never a fallback to full unpickling."""

from __future__ import annotations

import io
import pickle
import pickletools
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io.paths import PathLike, check_input_file, one_line, os_reason

__all__ = ["pyg_data_classes", "safe_torch_load"]


def pyg_data_classes() -> tuple[type, ...]:
    """The classes a ``torch.save(Data(...))`` file names, for :func:`safe_torch_load`.

    ``Data`` itself, its storage ``GlobalStorage`` and the attribute descriptors
    ``DataEdgeAttr`` / ``DataTensorAttr`` of the installed torch_geometric.
    """
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    return (Data, DataEdgeAttr, DataTensorAttr, GlobalStorage)


def _global_name(entry: Any) -> str:
    if isinstance(entry, tuple):  # (object, "module.name") as torch accepts it
        return str(entry[1])
    return f"{entry.__module__}.{entry.__qualname__}"


_REFUSED_OPCODES = {"STACK_GLOBAL", "INST", "OBJ", "EXT1", "EXT2", "EXT4"}


def _torch_pickle_globals(name: str, p: Path) -> set[str]:
    """Every global a ``torch.save`` zip file's pickle names (static scan, nothing runs)."""
    try:
        with zipfile.ZipFile(p) as archive:
            pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
            if len(pickles) != 1:
                raise InvalidInputError(
                    f"{name}: {str(p)!r} is not a torch.save file (no single data.pkl inside)"
                )
            payload = archive.read(pickles[0])
    except zipfile.BadZipFile as exc:
        raise InvalidInputError(
            f"{name}: {str(p)!r} is not a torch.save zip file (legacy or foreign format refused)"
        ) from exc
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot read {str(p)!r}: {os_reason(exc)}") from exc
    found: set[str] = set()
    try:
        for opcode, arg, _ in pickletools.genops(io.BytesIO(payload)):
            if opcode.name == "GLOBAL":
                module, _, attr = str(arg).partition(" ")
                found.add(f"{module}.{attr}")
            elif opcode.name in _REFUSED_OPCODES:
                raise InvalidInputError(
                    f"{name}: {str(p)!r} refused: its pickle uses {opcode.name}, which a "
                    "weights-only load never needs"
                )
    except InvalidInputError:
        raise
    except Exception as exc:
        raise InvalidInputError(
            f"{name}: {str(p)!r} holds a malformed pickle: {one_line(exc)}"
        ) from exc
    return found


def safe_torch_load(
    path: PathLike,
    allowed: Iterable[Any] = (),
    *,
    name: str = "path",
    map_location: Any = "cpu",
) -> Any:
    """``torch.load(path, weights_only=True)`` with an explicit allow-list, never a fallback.

    Tensors, plain containers (dict, list, tuple, OrderedDict) and strings / numbers load as
    with ``weights_only=True``. Any other class or function the file names must be in
    ``allowed`` (objects, or ``(object, "module.qualname")`` pairs as for
    ``torch.serialization.safe_globals``); pass :func:`pyg_data_classes` to read a
    ``torch.save(Data(...))`` file. Classes that other libraries registered process-wide with
    ``torch.serialization.add_safe_globals`` (torch_geometric registers dozens on import) are
    refused too unless listed in ``allowed``: the file's globals are scanned before loading.

    A file that would need full unpickling, is not a torch zip file, or cannot be read raises
    :class:`InvalidInputError` naming ``name``, the file and the refused globals.
    """
    import torch

    p = check_input_file(name, path)
    allowed = tuple(allowed)
    allowed_names = {_global_name(a) for a in allowed}
    found = _torch_pickle_globals(name, p)
    registered = {_global_name(g) for g in torch.serialization.get_safe_globals()}
    try:
        with torch.serialization.safe_globals(list(allowed)):
            unknown = set(torch.serialization.get_unsafe_globals_in_checkpoint(p))
    except (RuntimeError, ValueError, OSError) as exc:
        raise InvalidInputError(
            f"{name}: cannot read {str(p)!r} as a torch file: {one_line(exc)}"
        ) from exc
    refused = sorted(((found & registered) - allowed_names) | unknown)
    if refused:
        raise InvalidInputError(
            f"{name}: {str(p)!r} refused: it needs {', '.join(refused)}; only tensors, plain "
            "containers and allow-listed classes are loaded (never full unpickling)"
        )
    try:
        with torch.serialization.safe_globals(list(allowed)):
            return torch.load(p, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise InvalidInputError(
            f"{name}: {str(p)!r} refused by the weights-only loader: {one_line(exc)}"
        ) from exc
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise InvalidInputError(
            f"{name}: cannot read {str(p)!r} as a torch file: {one_line(exc)}"
        ) from exc
