"""Errors, input validation and the package layer rule."""

from __future__ import annotations

import ast
import functools
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import gnnaudit
from gnnaudit import GnnAuditError, InfeasibleError, InvalidInputError, NotFittedError
from gnnaudit._validation import (
    check_array,
    check_bool,
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


@pytest.mark.parametrize("value", [0, 1, None, "True", 1.0, np.array([True])])
def test_check_bool_rejects_everything_but_true_and_false(value):
    with pytest.raises(InvalidInputError, match=r"flag must be True or False, got"):
        check_bool("flag", value)


@pytest.mark.parametrize("value", [True, False, np.True_, np.False_])
def test_check_bool_returns_a_python_bool(value):
    out = check_bool("flag", value)
    assert type(out) is bool and out == bool(value)


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
    # errors and _validation) is applied by the entry points in training; _params (the
    # estimators' declarative parameter rules, a leaf importing only errors) is for estimators;
    # _optional (optional dependencies and their extras, a leaf importing only errors) is for
    # every package that imports faiss, networkx or matplotlib; _aliases (renamed keywords and
    # aliases, a leaf importing only errors) is for every package's entry points; _version (a
    # leaf) is for the reports' version record; _lazy (a package's names loaded on first use,
    # a leaf importing nothing of gnnaudit) is for the packages whose names import torch or
    # Lightning. The audit's pipeline (audit/pipeline) is the
    # entry point: it loads a named graph (datasets) and applies the thread policy (_threads)
    "safe_io": {"errors", "_validation"},
    "graph_ops": {"errors", "_validation", "safe_io", "_optional", "_aliases", "_lazy"},
    "audit": {
        "_version",
        "errors",
        "_aliases",
        "_validation",
        "_params",
        "_distributed",
        "_threads",
        "_optional",
        "safe_io",
        "graph_ops",
        "clustering",
        "datasets",
    },
    "clustering": {
        "errors",
        "_aliases",
        "_validation",
        "_params",
        "_distributed",
        "_optional",
        "safe_io",
        "graph_ops",
    },
    "datasets": {"errors", "_validation", "safe_io", "_aliases", "_lazy"},
    "training": {
        "_version",
        "_lazy",
        "_aliases",
        "errors",
        "_validation",
        "_params",
        "_threads",
        "_optional",
        "safe_io",
        "graph_ops",
        "audit",
        "clustering",
        "datasets",
    },
}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The AST of ``path``, parsed once: the rules below each read every module of the
    package (nothing modifies a tree)."""
    return ast.parse(path.read_text())


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``_tree(path)`` in ``ast.walk`` order, walked once for all the rules."""
    return tuple(ast.walk(_tree(path)))


def _gnnaudit_imports(path: Path) -> set[str]:
    found = set()
    for node in _nodes(path):
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
    top = [n for n in _tree(path).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in top if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(str(m).split(".")[0] in {"dask", "distributed"} for m in names)


def test_lazy_is_a_leaf():
    """``gnnaudit._lazy`` imports nothing of gnnaudit."""
    assert _gnnaudit_imports(PACKAGE / "_lazy.py") == set()


def test_aliases_is_a_leaf():
    """``gnnaudit._aliases`` imports only ``errors``."""
    assert _gnnaudit_imports(PACKAGE / "_aliases.py") <= {"errors"}


def test_optional_is_a_leaf():
    """``gnnaudit._optional`` imports only ``errors``; the optional packages lazily."""
    assert _gnnaudit_imports(PACKAGE / "_optional.py") <= {"errors"}


def test_threads_is_a_leaf():
    """``gnnaudit._threads`` imports only ``errors`` and ``_validation`` (faiss lazily)."""
    assert _gnnaudit_imports(PACKAGE / "_threads.py") <= {"errors", "_validation"}


# --- module graph: no circles, small modules, short functions, audit subpackage layers ---------


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _all_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported_modules(path: Path, modules: dict[str, Path]) -> set[str]:
    """gnnaudit modules ``path`` imports anywhere in its AST (top level, inside functions and
    under ``TYPE_CHECKING`` alike): ``from a.b import c`` counts as ``a.b.c`` when that is a
    module, else as ``a.b``; relative imports are resolved against the module's package."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


@functools.cache  # two tests read it; neither modifies it
def _import_graph() -> dict[str, set[str]]:
    modules = _all_modules()
    return {name: _imported_modules(path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_cycle_finder_finds_a_planted_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_among_the_package_modules():
    graph = _import_graph()
    assert len(graph) > 100  # the walk sees the whole package
    assert "gnnaudit.audit.search.base" in graph["gnnaudit.audit.search.exact"]
    assert _cycles(graph) == []


#: largest module, in lines, anywhere in the package
MAX_MODULE_LINES = 500
#: longest function (docstring included) anywhere in the package, unless the comment block right
#: above its ``def`` (or its signature) carries a ``# long:`` comment saying why
MAX_FUNCTION_LINES = 100


def test_no_module_over_the_size_limit():
    sizes = {
        str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")
    }
    assert not {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES}


def _long_functions(path: Path) -> dict[str, int]:
    text = path.read_text()
    lines = text.splitlines()
    joined = "\n".join(lines)  # line numbers that index ``lines`` (the cached tree's, usually)
    nodes = _nodes(path) if joined == text.removesuffix("\n") else ast.walk(ast.parse(joined))
    out = {}
    for node in nodes:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        above = start - 1  # the comment block right above the def (or its decorators)
        while above > 0 and lines[above - 1].strip().startswith("#"):
            above -= 1
        around = lines[above : node.body[0].lineno]
        if length > MAX_FUNCTION_LINES and not any("# long:" in line for line in around):
            out[f"{path.relative_to(PACKAGE)}:{node.name}"] = length
    return out


def test_no_function_over_the_length_limit():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found.update(_long_functions(path))
    assert not found


def _private_imports(path: Path) -> list[str]:
    """``module.name`` of every private name (one leading underscore) ``path`` imports from
    another gnnaudit module (a private module itself, ``from gnnaudit.audit import _moved``,
    is allowed: it is imported whole, not reached into)."""
    found = []
    for node in _nodes(path):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gnnaudit"):
            module = str(node.module)
            for alias in node.names:
                name = alias.name
                whole = (PACKAGE / Path(*module.split(".")[1:], f"{name}.py")).exists()
                if name.startswith("_") and not name.startswith("__") and not whole:
                    found.append(f"{module}.{name}")
    return found


def test_private_import_finder_sees_one(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("from gnnaudit.clustering.tree_search import _hidden\n")
    assert _private_imports(planted) == ["gnnaudit.clustering.tree_search._hidden"]


def test_no_private_name_is_imported_across_modules():
    found = {
        str(path.relative_to(PACKAGE)): names
        for path in sorted(PACKAGE.rglob("*.py"))
        if (names := _private_imports(path))
    }
    assert not found


#: audit subpackage -> the parts of gnnaudit.audit it may import ("core" = the modules beside
#: gnnaudit/audit/__init__.py); only gnnaudit/audit/__init__.py imports everything
AUDIT_LAYERS = {
    "report": set(),
    "search": set(),
    "core": {"report", "search"},
    "sensitivity": {"core", "report", "search"},
    # the Dask path: the model adapter (core) and the model's receptive field (sensitivity);
    # the statistics reach it through the context, never the other way round
    "distributed": {"core", "sensitivity"},
    # fairness and sensitivity are siblings (NIFTY's counterfactual unfairness is the sensitivity
    # unit's graph-scope flip finding, named so in the report layer, not recomputed by fairness);
    # on a cluster the literature unit's noise goes to the graph store (distributed.store)
    "fairness": {"core", "report", "search", "distributed"},
    "embedding": {"core", "report", "search"},
    "proxies": {"core", "report", "search", "sensitivity"},
    # the entry point (run_audit / audit_model) on top: it runs every other part; nothing in the
    # audit imports it (only gnnaudit/audit/__init__.py re-exports it)
    "pipeline": {
        "core",
        "report",
        "search",
        "sensitivity",
        "fairness",
        "embedding",
        "proxies",
        "distributed",
    },
}


def _audit_part(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["gnnaudit", "audit"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in AUDIT_LAYERS else "core"


def test_audit_subpackages_import_downwards_only():
    assert {p.name for p in (PACKAGE / "audit").iterdir() if p.is_dir()} - {"__pycache__"} == (
        set(AUDIT_LAYERS) - {"core"}
    )
    bad = {}
    for module, imports in _import_graph().items():
        part = _audit_part(module)
        if part is None:
            continue
        allowed = AUDIT_LAYERS[part] | {part}
        wrong = sorted(i for i in imports if _audit_part(i) not in allowed | {None})
        if wrong:
            bad[module] = wrong
    assert not bad


#: most modules directly in gnnaudit/audit/ (``__init__`` included); the rest is in subpackages
MAX_FLAT_AUDIT_MODULES = 12


def test_audit_keeps_few_flat_modules_each_saying_why():
    """``gnnaudit/audit/`` holds at most 12 modules beside its subpackages, and the first line of
    each one's docstring says why it is not in a subpackage, as ``(flat: reason)``."""
    import re

    flat = sorted((PACKAGE / "audit").glob("*.py"))
    assert len(flat) <= MAX_FLAT_AUDIT_MODULES, [p.name for p in flat]
    unexplained = []
    for path in flat:
        doc = ast.get_docstring(_tree(path), clean=False) or ""
        if not re.search(r"\(flat: [^)]+\)", doc.split("\n")[0]):
            unexplained.append(path.name)
    assert not unexplained


def test_old_audit_module_paths_warn_and_resolve(monkeypatch):
    import importlib
    import sys

    from gnnaudit.audit._moved import MOVED

    for old, new in MOVED.items():
        monkeypatch.delitem(sys.modules, old, raising=False)  # imported afresh: it warns
        with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated .* 0\.3\.0"):
            module = importlib.import_module(old)
        assert module is importlib.import_module(new)
    # the old spellings of the public names still work
    from gnnaudit.audit.report import AuditReport
    from gnnaudit.audit.sensitivity import FlipOptions, counterfactual_flip

    assert AuditReport.__module__ == "gnnaudit.audit.report.audit_report"
    assert counterfactual_flip.__module__ == "gnnaudit.audit.sensitivity.flip"
    assert FlipOptions.__module__ == "gnnaudit.audit.sensitivity.options"
