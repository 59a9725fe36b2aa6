"""A restricted unpickler for Planetoid raw files."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io.paths import PathLike, check_input_file, one_line, os_reason

__all__ = ["load_planetoid_pickle"]


class _Refused(pickle.UnpicklingError):
    """A Planetoid pickle asked for something the restricted unpickler does not allow."""


class _CsrState:
    """Inert stand-in for ``scipy.sparse.csr_matrix`` while unpickling: the pickle's state is
    stored as plain attributes and turned into a real matrix only after validation."""


def _pickled_dtype(spec: Any, align: Any = False, copy: Any = False) -> np.dtype:
    if not isinstance(spec, str):
        raise _Refused(f"numpy dtype spec must be a string, got {type(spec).__name__}")
    dtype = np.dtype(spec, bool(align), bool(copy))
    if dtype.hasobject:
        raise _Refused("object dtypes are not allowed")
    return dtype


def _pickled_array(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    if subtype is not np.ndarray:
        raise _Refused("only plain numpy arrays are allowed")
    dtype = _pickled_dtype(dtype.decode("latin1") if isinstance(dtype, bytes) else dtype)
    return np.ndarray.__new__(np.ndarray, shape, dtype)


def _pickled_bytes(text: Any, encoding: Any = "latin1") -> bytes:
    # Python 3 writes bytes into protocol-2 pickles as _codecs.encode(text, "latin1")
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Refused("only _codecs.encode(str, 'latin1') is allowed")
    return text.encode("latin1")


def _pickled_graph_dict(factory: Any = None) -> dict[str, Any]:
    if factory is not None and factory is not list:
        raise _Refused("only defaultdict(list) is allowed")
    return {}


_PLANETOID_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy", "dtype"): _pickled_dtype,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy.core.multiarray", "_reconstruct"): _pickled_array,
    ("numpy._core.multiarray", "_reconstruct"): _pickled_array,
    ("scipy.sparse.csr", "csr_matrix"): _CsrState,
    ("scipy.sparse._csr", "csr_matrix"): _CsrState,
    ("collections", "defaultdict"): _pickled_graph_dict,
    ("_codecs", "encode"): _pickled_bytes,
    ("__builtin__", "list"): list,
    ("builtins", "list"): list,
}


class _PlanetoidUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:  # noqa: D102
        try:
            return _PLANETOID_GLOBALS[(module, name)]
        except KeyError as exc:
            raise _Refused(
                f"global {module}.{name} is not allowed in a Planetoid raw file"
            ) from exc


def _numeric_array(value: Any, what: str) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
        raise ValueError(f"{what} must be a numeric numpy array, got {type(value).__name__}")
    return value


def _csr_from_state(state: _CsrState) -> Any:
    import scipy.sparse as sp

    attrs = vars(state)
    shape = attrs.get("_shape", attrs.get("shape"))
    if not (
        isinstance(shape, tuple)
        and len(shape) == 2
        and all(isinstance(s, int) and s >= 0 for s in shape)
    ):
        raise ValueError(f"sparse matrix shape must be two non-negative integers, got {shape!r}")
    data = _numeric_array(attrs.get("data"), "sparse matrix data")
    indices = _numeric_array(attrs.get("indices"), "sparse matrix indices")
    indptr = _numeric_array(attrs.get("indptr"), "sparse matrix indptr")
    matrix = sp.csr_matrix((data, indices, indptr), shape=shape)
    matrix.check_format(full_check=True)  # index ranges, monotone indptr
    return matrix


def _validated_planetoid_object(obj: Any) -> Any:
    if isinstance(obj, _CsrState):
        return _csr_from_state(obj)
    if isinstance(obj, np.ndarray):
        return _numeric_array(obj, "array")
    if isinstance(obj, dict):
        for key, value in obj.items():
            if (
                not isinstance(key, int)
                or not isinstance(value, list)
                or not all(isinstance(v, int) for v in value)
            ):
                raise ValueError("the graph must map integer node ids to lists of integer ids")
        return obj
    raise ValueError(f"unexpected object of type {type(obj).__name__}")


def load_planetoid_pickle(name: str, path: PathLike) -> Any:
    """Read one Planetoid raw pickle (``ind.<dataset>.{x,tx,allx,y,ty,ally,graph}``) safely.

    These files are Python 2 pickles of a ``scipy.sparse.csr_matrix`` (``x``, ``tx``, ``allx``),
    a numpy array (``y``, ``ty``, ``ally``) or a ``defaultdict(list)`` adjacency (``graph``).
    The unpickler resolves only those globals (``numpy.dtype``, ``numpy.ndarray``, numpy's
    ``_reconstruct``, ``csr_matrix`` as an inert state holder, ``defaultdict`` and ``list``, and
    ``_codecs.encode(str, "latin1")`` with which Python 3 writes bytes into such pickles);
    any other global - which is how a pickle runs code - is refused *before* it is called.
    Object dtypes are refused, and a CSR matrix is rebuilt from validated numeric arrays.

    Returns a ``scipy.sparse.csr_matrix``, a numeric ``numpy.ndarray`` or a ``dict`` mapping
    ``int`` to ``list[int]``. Anything else, or any read error, raises InvalidInputError.
    """
    p = check_input_file(name, path)
    try:
        with open(p, "rb") as fh:
            obj = _PlanetoidUnpickler(fh, encoding="latin1").load()
        return _validated_planetoid_object(obj)
    except _Refused as exc:
        raise InvalidInputError(f"{name}: {str(p)!r} refused: {one_line(exc)}") from exc
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot read {str(p)!r}: {os_reason(exc)}") from exc
    except Exception as exc:  # malformed pickle: any error the allowed constructors raise
        raise InvalidInputError(
            f"{name}: {str(p)!r} is not a valid Planetoid raw file: {one_line(exc)}"
        ) from exc
