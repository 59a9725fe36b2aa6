"""Errors, input validation and the package layer rule."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import gnnaudit
from gnnaudit import GnnAuditError, InfeasibleError, InvalidInputError, NotFittedError
from gnnaudit._validation import (
    check_array,
    check_choice,
    check_edge_index,
    check_fitted,
    check_float,
    check_int,
)

PACKAGE = Path(gnnaudit.__file__).parent


def test_error_hierarchy():
    for cls in (InvalidInputError, InfeasibleError, NotFittedError):
        assert issubclass(cls, GnnAuditError)
    assert issubclass(InvalidInputError, ValueError)
    assert gnnaudit.errors.GnnAuditError is GnnAuditError


@pytest.mark.parametrize(
    ("value", "kwargs", "fragment"),
    [
        (1.5, {}, "must be an integer"),
        (True, {}, "must be an integer"),
        (0, {"minimum": 1}, "must be >= 1, got 0"),
        (11, {"maximum": 10}, "must be <= 10, got 11"),
    ],
)
def test_check_int_rejects(value, kwargs, fragment):
    with pytest.raises(InvalidInputError, match="k ") as info:
        check_int("k", value, **kwargs)
    assert fragment in str(info.value)


def test_check_int_accepts_numpy_integers():
    assert check_int("k", np.int64(3), minimum=1) == 3


@pytest.mark.parametrize("value", [math.nan, math.inf, "a", None])
def test_check_float_rejects_non_finite(value):
    with pytest.raises(InvalidInputError, match="alpha"):
        check_float("alpha", value)


def test_check_float_open_bounds():
    with pytest.raises(InvalidInputError, match="eps must be > 0"):
        check_float("eps", 0.0, minimum=0.0, inclusive=(False, True))
    assert check_float("eps", 0.25, minimum=0.0, maximum=1.0) == 0.25


def test_check_choice_lists_allowed():
    with pytest.raises(InvalidInputError, match="'exact', 'faiss'"):
        check_choice("backend", "fast", ("exact", "faiss"))


def test_check_array_reports_nan_position():
    X = np.ones((3, 2))
    X[1, 0] = np.nan
    with pytest.raises(InvalidInputError, match=r"X must be finite.*\(1, 0\)"):
        check_array("X", X)
    with pytest.raises(InvalidInputError, match="2 dimension"):
        check_array("X", np.ones(3))
    with pytest.raises(InvalidInputError, match="at least 1 row"):
        check_array("X", np.ones((0, 2)))
    out = check_array("X", torch.ones(2, 2))
    assert isinstance(out, np.ndarray) and out.dtype == np.float64


def test_check_edge_index():
    ok = check_edge_index("edge_index", torch.tensor([[0, 1], [1, 0]]), 2)
    assert ok.dtype == torch.long
    with pytest.raises(InvalidInputError, match=r"\[0, 1\]"):
        check_edge_index("edge_index", torch.tensor([[0, 2], [1, 0]]), 2)
    with pytest.raises(InvalidInputError, match=r"shape \[2, E\]"):
        check_edge_index("edge_index", torch.zeros(3, 4, dtype=torch.long), 5)
    with pytest.raises(InvalidInputError, match="integer"):
        check_edge_index("edge_index", torch.zeros(2, 4), 5)


def test_check_fitted():
    class Est:
        labels_ = None

    with pytest.raises(NotFittedError, match="Est is not fitted"):
        check_fitted(Est(), "labels_")


# --- layer rule ------------------------------------------------------------------------------

LAYERS = {
    # package -> gnnaudit modules it may import (besides itself); errors, _validation and
    # safe_io (every file read and write) are leaves every package may use; _distributed (the
    # optional dask client= support, a leaf importing only errors) is for the packages that
    # split work into independent blocks; _threads (the thread policy, a leaf importing only
    # errors and _validation) is applied by the entry points in training; _params (declarative
    # estimator parameters, a leaf importing only errors) serves the estimators
    "safe_io": {"errors", "_validation"},
    "graph_ops": {"errors", "_validation", "safe_io"},
    "audit": {"errors", "_validation", "_distributed", "safe_io", "graph_ops", "clustering"},
    "clustering": {"errors", "_validation", "_params", "_distributed", "safe_io", "graph_ops"},
    "datasets": {"errors", "_validation", "safe_io"},
    "training": {
        "errors",
        "_validation",
        "_threads",
        "safe_io",
        "graph_ops",
        "audit",
        "clustering",
        "datasets",
    },
}


def _gnnaudit_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "gnnaudit" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_layer_rule(package):
    allowed = LAYERS[package] | {package}
    violations = {}
    for path in sorted((PACKAGE / package).rglob("*.py")):
        bad = _gnnaudit_imports(path) - allowed
        if bad:
            violations[str(path.relative_to(PACKAGE))] = sorted(bad)
    assert not violations, f"layer rule broken: {violations}"


def test_distributed_is_a_leaf():
    """``gnnaudit._distributed`` imports only ``gnnaudit.errors`` (dask lazily)."""
    path = PACKAGE / "_distributed.py"
    assert _gnnaudit_imports(path) <= {"errors"}
    tree = ast.parse(path.read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in top if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(str(m).split(".")[0] in {"dask", "distributed"} for m in names)


def test_threads_is_a_leaf():
    """``gnnaudit._threads`` imports only ``errors`` and ``_validation`` (faiss lazily)."""
    assert _gnnaudit_imports(PACKAGE / "_threads.py") <= {"errors", "_validation"}
