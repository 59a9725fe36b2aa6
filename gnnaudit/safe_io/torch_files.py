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

__all__ = [
    "pyg_data_classes",
    "safe_torch_load",
    "precheck_torch_file",
    "tensor_problem",
    "MAX_WALK_ITEMS",
    "PLAIN_GLOBALS",
    "PYG_DATA_PREFIX",
]

#: :func:`safe_torch_load` inspects at most this many objects of a loaded file for unusable
#: tensors (a state dict or graph holds a few hundred; the walk is iterative, so nesting depth
#: never matters)
MAX_WALK_ITEMS = 1_000_000


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


#: the globals outside ``torch`` that ``torch.load(weights_only=True)`` accepts by default
PLAIN_GLOBALS = frozenset(
    {
        "collections.OrderedDict",
        "collections.Counter",
        "_codecs.encode",
        "builtins.bytearray",
        "builtins.set",
        "builtins.complex",
    }
)
#: module prefix of the classes a ``torch.save(Data(...))`` file names (:func:`pyg_data_classes`)
PYG_DATA_PREFIX = "torch_geometric.data."
#: torch modules whose classes a weights-only load never accepts (a whole pickled model)
_MODEL_PREFIXES = ("torch.nn.modules.", "torch.nn.parallel.")
_STATE_DICT_HINT = (
    "; it looks like a whole pickled model (torch.save(model)): save its state_dict instead, "
    "torch.save(model.state_dict(), path)"
)

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


#: Python 2 module names a protocol-2 pickle uses, as the unpickler maps them
_PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def _py3_name(name: str) -> str:
    """``__builtin__.set`` -> ``builtins.set`` (pickle's own mapping of protocol-2 names)."""
    module, _, attr = name.partition(".")
    return f"{_PY2_MODULES[module]}.{attr}" if module in _PY2_MODULES else name


def _refused_message(name: str, p: Path, refused: list[str]) -> str:
    """The one line refusing ``p`` because it needs the globals ``refused``."""
    text = (
        f"{name}: {str(p)!r} refused: it needs {', '.join(refused)}; only tensors, plain "
        "containers and allow-listed classes are loaded (never full unpickling)"
    )
    model = any(g.startswith(_MODEL_PREFIXES) or g.startswith("__main__.") for g in refused)
    return text + (_STATE_DICT_HINT if model else "")


def precheck_torch_file(
    name: str, path: PathLike, *, allowed_prefixes: tuple[str, ...] = ()
) -> Path:
    """Refuse, **without importing torch**, a file that :func:`safe_torch_load` would refuse
    for what it is: missing, not a regular file, empty, not a ``torch.save`` zip file, a
    pickle using opcodes a weights-only load never needs, or naming a global outside
    ``torch`` (and :data:`PLAIN_GLOBALS`, and ``allowed_prefixes``) or a ``torch.nn`` module
    class (a whole pickled model: the message says to save its state_dict). A file that
    passes still goes through :func:`safe_torch_load`, which decides. Returns the path."""
    p = check_input_file(name, path)
    try:
        empty = p.stat().st_size == 0
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot read {str(p)!r}: {os_reason(exc)}") from exc
    if empty:
        raise InvalidInputError(f"{name}: {str(p)!r} is empty, expected a torch.save file")
    found = _torch_pickle_globals(name, p)
    found = {_py3_name(g) for g in found}
    refused = sorted(
        g
        for g in found
        if g not in PLAIN_GLOBALS
        and not g.startswith(allowed_prefixes)
        and (not g.startswith("torch.") or g.startswith(_MODEL_PREFIXES))
    )
    if refused:
        raise InvalidInputError(_refused_message(name, p, refused))
    return p


def tensor_problem(tensor: Any) -> str | None:
    """Why ``tensor``, read from a file, cannot serve as plain data, or ``None`` if it can.

    Refused: a non-strided layout (sparse COO / CSR / CSC / BSR / BSC, nested / jagged), the
    ``meta`` device (shape only, no values) and quantized tensors; each would fail later, deep
    inside numpy or ``load_state_dict``, with an unclear message.
    """
    import torch

    if getattr(tensor, "is_nested", False):
        return "is a nested tensor; store a dense tensor"
    if tensor.layout != torch.strided:
        return (
            f"is a {str(tensor.layout).replace('torch.', '')} tensor; store a dense tensor "
            "(tensor.to_dense())"
        )
    if tensor.device.type == "meta":
        return "is on the meta device, which holds no values; save real tensors"
    if tensor.is_quantized:
        return f"is a quantized tensor ({tensor.dtype}); store a float tensor (dequantize())"
    return None


def _check_loaded(name: str, p: Path, obj: Any) -> None:
    """Walk ``obj`` (iteratively, bounded) and refuse the first unusable tensor, naming it."""
    import torch

    stack: list[tuple[str, Any]] = [("", obj)]
    seen = 0
    while stack and seen < MAX_WALK_ITEMS:
        where, item = stack.pop()
        seen += 1
        if isinstance(item, torch.Tensor):
            problem = tensor_problem(item)
            if problem is not None:
                at = f"entry {where!r}" if where else "its tensor"
                raise InvalidInputError(f"{name}: {str(p)!r} refused: {at} {problem}")
        elif isinstance(item, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            # an allow-listed object (a PyG Data and its storage): its attributes
            for k, v in vars(item).items():  # a Data's own storage is not named
                inner = where if k in ("_store", "_mapping") else (f"{where}.{k}" if where else k)
                stack.append((inner, v))


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
    :class:`InvalidInputError` naming ``name``, the file and the refused globals; so does a
    file holding a sparse, nested, quantized or ``meta``-device tensor
    (:func:`tensor_problem`), naming the entry.
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
        raise InvalidInputError(_refused_message(name, p, refused))
    try:
        with torch.serialization.safe_globals(list(allowed)):
            obj = torch.load(p, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise InvalidInputError(
            f"{name}: {str(p)!r} refused by the weights-only loader: {one_line(exc)}"
        ) from exc
    except (
        RuntimeError,
        EOFError,
        OSError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        RecursionError,
        zipfile.BadZipFile,
    ) as exc:
        raise InvalidInputError(
            f"{name}: cannot read {str(p)!r} as a torch file: {one_line(exc)}"
        ) from exc
    _check_loaded(name, p, obj)
    return obj
