"""Fuzz every ``gnnaudit`` command with random arguments and random file contents.

Each case runs ``gnnaudit.cli.main.main(argv)`` in-process on tiny inputs (graphs of at most 40
nodes and 2 training epochs, tables of at most 12 rows, a solver time limit of at most 2 s) with
files that may be missing, folders, empty, binary, undecodable, ragged or truncated CSV, npz or
torch files. The outcome must be exit 0 or exit 2 with a one-line ``error:`` message - never a
traceback, never exit 1 (a bug), never a hang (a watchdog stops a case after 60 s).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnnaudit.cli.main import COMMANDS, main

WATCHDOG_SECONDS = 60
ERROR_LINE = re.compile(r"(^|\r)gnnaudit( [\w-]+)?: error: \S", re.MULTILINE)

#: a user model file for ``audit --model PATH:NAME``: one sound model and three broken ones
MODEL_CODE = """
import torch


class Net(torch.nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = torch.nn.Linear(in_channels, out_channels)

    def forward(self, x, edge_index):
        return self.lin(x)


class Raises(Net):
    def forward(self, x, edge_index):
        raise RuntimeError("boom")


class WrongShape(Net):
    def forward(self, x, edge_index):
        return self.lin(x)[:-1, 0]


class NaNLogits(Net):
    def forward(self, x, edge_index):
        return self.lin(x) * float("nan")
"""

#: junk for any value: fuzz cases draw one of these about one time in five
BAD_VALUES = ("", "x", "-1", "0", "nan", "inf", "2.5", "1e-9")


class Watchdog(Exception):
    """A case ran longer than :data:`WATCHDOG_SECONDS`."""


@contextlib.contextmanager
def watchdog(seconds: int) -> Iterator[None]:
    def fire(signum, frame):
        raise Watchdog(f"a CLI case ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        with watchdog(WATCHDOG_SECONDS):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
                code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def check_outcome(argv: list[str], code: int, err: str) -> None:
    assert "Traceback" not in err, (argv, err)
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        assert ERROR_LINE.search(err), (argv, err)


# ---------------------------------------------------------------- file contents


def table_text(draw: Callable, columns: list[str]) -> str:
    """A small CSV table: clean numbers most of the time, junk cells and ragged rows else."""
    n_rows = draw(st.sampled_from([12, 12, 8, 5, 1, 0]))
    clean = draw(st.integers(0, 5)) > 0
    cell = (
        st.integers(-3, 3).map(str)
        if clean
        else st.one_of(
            st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr),
            st.integers(-5, 5).map(str),
            st.sampled_from(["", "a", "b", "1e400", " ", '"', "x,y"]),
        )
    )
    lines = [",".join(columns)]
    for i in range(n_rows):
        row = [draw(cell) for _ in columns]
        if "g" in columns:  # a categorical column
            row[columns.index("g")] = "ab"[i % 2] if clean else draw(st.sampled_from("ab?"))
        if not clean and draw(st.integers(0, 9)) == 0:
            row.append("extra")
        lines.append(",".join(row))
    return "\n".join(lines) + "\n"


def npz_bytes(draw: Callable, truncate: bool) -> bytes:
    n = draw(st.integers(0, 6))
    buf = io.BytesIO()
    arrays = {
        "x": np.arange(n * 2, dtype=np.float32).reshape(n, 2),
        "edge_index": np.zeros((2, draw(st.integers(0, 3))), dtype=np.int64),
        "y": np.arange(n) % 2,
    }
    keep = draw(st.lists(st.sampled_from(sorted(arrays)), unique=True))
    np.savez(buf, **{k: arrays[k] for k in keep})
    data = buf.getvalue()
    return data[: draw(st.integers(0, max(len(data) - 1, 0)))] if truncate else data


def make_file(draw: Callable, root: Path, name: str, good: Callable[[], bytes] | None) -> str:
    """A path for an input file: plausible content (``good``) most of the time, else missing,
    a folder, under a regular file, empty, binary, random text or undecodable."""
    bad = ["missing", "folder", "under_file", "empty", "binary", "text", "latin1"]
    kind = (
        draw(st.sampled_from(["good"] * 14 + bad))
        if good is not None
        else draw(st.sampled_from(bad))
    )
    path = root / name
    if kind == "missing":
        return str(root / f"missing-{name}")
    if kind == "folder":
        path.mkdir(exist_ok=True)
        return str(path)
    if kind == "under_file":
        (root / "plain").write_text("x")
        return str(root / "plain" / name)
    content = {
        "empty": lambda: b"",
        "binary": lambda: draw(st.binary(min_size=1, max_size=64)),
        "text": lambda: draw(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
        ).encode(),
        "latin1": lambda: b"a,b\n\xff\xfe,1\n",
        "good": good,
    }[kind]()
    path.write_bytes(content)
    return str(path)


def out_path(draw: Callable, root: Path, name: str) -> str:
    """An output path: new most of the time, else existing, a folder holding a file, under a
    missing folder or under a regular file."""
    bad = ["existing", "folder", "no_parent", "under_file"]
    kind = draw(st.sampled_from(["new"] * 12 + bad))
    path = root / name
    if kind == "existing":
        path.write_text("old\n")
    elif kind == "folder":
        path.mkdir(exist_ok=True)
        (path / "keep.txt").write_text("x")
    elif kind == "no_parent":
        return str(root / "nowhere" / name)
    elif kind == "under_file":
        (root / "plain").write_text("x")
        return str(root / "plain" / name)
    return str(path)


# ---------------------------------------------------------------- arguments per command


def options(draw: Callable, choices: dict[str, Callable[[], list[str]]]) -> list[str]:
    """A random subset of ``choices`` (flag -> its value tokens), in random order."""
    flags = draw(st.lists(st.sampled_from(sorted(choices)), unique=True, max_size=len(choices)))
    return [token for flag in flags for token in [flag, *choices[flag]()]]


def pick(draw: Callable, good: Sequence[str], bad: Sequence[str] = BAD_VALUES) -> list[str]:
    """One value token: one of ``good`` about nine times in ten, else one of ``bad``."""
    pool = list(good) * max(1, (9 * len(bad)) // max(len(good), 1)) + list(bad)
    return [draw(st.sampled_from(pool))]


def value(
    draw: Callable, good: Sequence[str], bad: Sequence[str] = BAD_VALUES
) -> Callable[[], list[str]]:
    return lambda: pick(draw, good, bad)


def graph_bounds(draw: Callable) -> list[str]:
    """Always present: a tiny synthetic graph and at most 2 epochs."""
    return [
        "--num-nodes",
        *pick(draw, ["24", "40"], ["0", "3", "x"]),
        "--epochs",
        *pick(draw, ["1", "2"], ["-1", "0"]),
    ]


def dataset_options(draw: Callable, root: Path) -> dict[str, Callable[[], list[str]]]:
    def junk_root() -> list[str]:
        data_root = root / "data"
        for sub, name in (("german", "german.csv"), ("german", "german_edges.txt")):
            (data_root / sub).mkdir(parents=True, exist_ok=True)
            make_file(draw, data_root / sub, name, lambda: table_text(draw, ["a", "b"]).encode())
        raw = data_root / "Cora" / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        for ext in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"):
            (raw / f"ind.cora.{ext}").write_bytes(draw(st.binary(max_size=32)))
        return [str(data_root)]

    return {
        "--dataset": value(draw, ["synthetic"], ["german", "cora"]),
        "--root": junk_root,
        "--split": value(draw, ["stratified"], ["public"]),
        "--bias": value(draw, ["0", "1.5", "3"]),
        "--homophily": value(draw, ["0.5", "0.9"], ["1.5", "-1", "nan"]),
        "--seed": value(draw, ["0", "1", "7"]),
    }


def common_flags(draw: Callable, command: str) -> list[str]:
    """Flags every command takes, the progress pair where the command has it, rare junk."""
    flags = ["-v", "--force"]  # never --debug: it shows tracebacks on purpose
    if command not in ("tree-cluster", "explain-dbscan"):
        flags += ["--progress", "--no-progress"]
    return draw(st.lists(st.sampled_from(flags * 5 + ["--bogus", "--k="]), unique=True, max_size=2))


def train_argv(draw: Callable, root: Path) -> list[str]:
    choices = dataset_options(draw, root)
    choices.update(
        {
            "--model": value(draw, ["gcn", "sage", "gin", "gat", "mpnn"], ["transformer"]),
            "--layers": value(draw, ["1", "2"], ["0", "-1", "x"]),
            "--hidden": value(draw, ["1", "4"], ["0", "x"]),
            "--dropout": value(draw, ["0", "0.5"], ["1.5", "nan", "-1"]),
            "--lr": value(draw, ["0.01", "0.1"], ["0", "-1", "inf"]),
            "--weight-decay": value(draw, ["0", "0.0005"], ["-1", "nan"]),
            "--batch-size": value(draw, ["1", "8"], ["0", "-1"]),
            "--patience": value(draw, ["1", "5"], ["0", "-1"]),
        }
    )
    out = out_path(draw, root, "run")
    return ["train", *options(draw, choices), *graph_bounds(draw), "--out", out]


def evidence_argv(draw: Callable, root: Path) -> list[str]:
    choices = dataset_options(draw, root)
    choices.update(
        {
            "--checkpoint": lambda: [make_file(draw, root, "model.ckpt", None)],
            "--model": value(draw, ["gcn", "sage"], ["x"]),
            "--node": lambda: [
                str(draw(st.integers(-2, 45))) for _ in range(draw(st.integers(1, 3)))
            ],
            "--global": lambda: [],
            "--k": value(draw, ["1", "3"]),
            "--backend": value(draw, ["exact", "sorted", "index", "faiss"], ["x"]),
            "--num-hops": value(draw, ["1", "2"], ["0", "-1"]),
            "--alpha": value(draw, ["0", "0.5", "1"], ["2", "nan", "-1"]),
            "--show": value(draw, ["0", "3"]),
        }
    )
    out = out_path(draw, root, "evidence.csv")
    return ["evidence", *options(draw, choices), *graph_bounds(draw), "--out", out]


def graph_folder(draw: Callable, root: Path) -> str:
    folder = root / "graph"
    folder.mkdir(exist_ok=True)
    make_file(draw, folder, "nodes.csv", lambda: table_text(draw, ["id", "a", "g", "y"]).encode())
    make_file(draw, folder, "edges.csv", lambda: table_text(draw, ["source", "target"]).encode())
    return str(folder)


def audit_argv(draw: Callable, root: Path) -> list[str]:
    (root / "model.py").write_text(MODEL_CODE)

    def model() -> list[str]:
        name = pick(
            draw, ["gcn", "Net"], ["Raises", "WrongShape", "NaNLogits", "no.such:Net", "x"]
        )[0]
        return [name if name in ("gcn", "no.such:Net", "x") else f"{root}/model.py:{name}"]

    def graph() -> list[str]:
        kind = draw(st.sampled_from(["npz", "npz_truncated", "folder", "pt"]))
        if kind == "folder":
            return [graph_folder(draw, root)]
        if kind == "pt":
            return [make_file(draw, root, "graph.pt", None)]
        return [make_file(draw, root, "graph.npz", lambda: npz_bytes(draw, kind != "npz"))]

    choices = dataset_options(draw, root)
    choices.update(
        {
            "--graph": graph,
            "--label": value(draw, ["y"], ["a", "nope"]),
            "--mask-column": value(draw, ["a"], ["nope"]),
            "--model": model,
            "--weights": lambda: [make_file(draw, root, "weights.pt", None)],
            "--checkpoint": lambda: [make_file(draw, root, "model.ckpt", None)],
            "--num-classes": value(draw, ["2", "3"], ["1", "0"]),
            "--device": value(draw, ["auto", "cpu"], ["gpu"]),
            "--sensitive": value(draw, ["gender", "g"], ["a", "nope"]),
            "--k": value(draw, ["1", "3"]),
            "--backend": value(draw, ["exact", "sorted", "index"], ["x"]),
            "--min-support": value(draw, ["1", "5"]),
            "--top": value(draw, ["0", "3"]),
            "--finetune": lambda: [],
            "--no-finetune": lambda: [],
            "--finetune-m": value(draw, ["1", "3"]),
            "--finetune-epochs": value(draw, ["1"]),
        }
    )
    out = out_path(draw, root, "report")
    return ["audit", *options(draw, choices), *graph_bounds(draw), "--out", out]


def table_file(draw: Callable, root: Path, columns: list[str]) -> str:
    return make_file(draw, root, "table.csv", lambda: table_text(draw, columns).encode())


def fairden_argv(draw: Callable, root: Path) -> list[str]:
    columns = ["x", "y", "g", "lab"]
    choices = {
        "--categorical": value(draw, ["lab"], ["x", "nope"]),
        "--min-samples": value(draw, ["2", "3"]),
        "--solver": value(draw, ["auto", "dense", "matrix_free"], ["x"]),
        "--min-group-size": value(draw, ["1", "2"]),
        "--label": value(draw, ["lab"], ["g", "nope"]),
        "--ignore": value(draw, ["lab"], ["g", "nope"]),
        "--seed": value(draw, ["0", "3"]),
        "--n-clusters": value(draw, ["2", "3"]),
        "--out": lambda: [out_path(draw, root, "labels.csv")],
    }
    sensitive = (
        ["--sensitive", *pick(draw, ["g"], ["x", "nope"])] if draw(st.integers(0, 9)) else []
    )
    return ["fairden", table_file(draw, root, columns), *sensitive, *options(draw, choices)]


def pairs_text(draw: Callable) -> bytes:
    pairs = draw(st.lists(st.tuples(st.integers(-1, 13), st.integers(-1, 13)), max_size=4))
    header = "i,j\n" if draw(st.booleans()) else ""
    return (header + "".join(f"{a},{b}\n" for a, b in pairs)).encode()


def tree_cluster_argv(draw: Callable, root: Path) -> list[str]:
    columns = ["x", "y", "lab"]
    choices = {
        "--depth": value(draw, ["1", "2"], ["0", "-1", "x"]),
        "--must-link": lambda: [make_file(draw, root, "ml.csv", lambda: pairs_text(draw))],
        "--cannot-link": lambda: [make_file(draw, root, "cl.csv", lambda: pairs_text(draw))],
        "--objective": value(draw, ["md", "md-ms"], ["x"]),
        "--epsilon": value(draw, ["0.1", "5"], ["0", "-1", "nan", "50"]),
        "--min-clusters": value(draw, ["1", "2"]),
        "--solver": value(draw, ["lsu", "rc2", "binary"], ["x"]),
        "--no-smart-pairs": lambda: [],
        "--no-tree": lambda: [],
        "--label": value(draw, ["lab"], ["nope"]),
        "--ignore": value(draw, ["lab"], ["nope"]),
        "--out": lambda: [out_path(draw, root, "clusters.csv")],
        "--output": lambda: [out_path(draw, root, "clusters_old.csv")],
    }
    k = ["--n-clusters", *pick(draw, ["2", "3"], ["0", "1", "x"])]
    limit = ["--time-limit", *pick(draw, ["2"], ["1e-6", "0", "-1", "nan"])]
    return ["tree-cluster", table_file(draw, root, columns), *k, *options(draw, choices), *limit]


def explain_dbscan_argv(draw: Callable, root: Path) -> list[str]:
    columns = ["x", "y", "lab"]
    required = [  # eps within the [-3, 3] grid: a larger one makes a single cluster
        "--eps",
        *pick(draw, ["3", "1", "1.5"], ["0", "-1", "nan", "inf"]),
        "--min-samples",
        *pick(draw, ["1", "2"], ["0", "-1"]),
        "--index",
        *pick(draw, ["0", "1", "5"], ["11", "100", "-1"]),
    ]
    choices = {
        "--target": value(draw, ["0", "1"], ["-1", "7"]),
        "--n-counterfactuals": value(draw, ["1", "2"], ["0", "-1"]),
        "--immutable": value(draw, ["x"], ["nope"]),
        "--label": value(draw, ["lab"], ["nope"]),
        "--metric": value(draw, ["euclidean", "manhattan", "chebyshev", "cosine"], ["x"]),
        "--strategy": value(draw, ["energy", "random", "nearest", "furthest"], ["x"]),
        "--seed": value(draw, ["0", "4"]),
        "--out": lambda: [out_path(draw, root, "changes.csv")],
    }
    return ["explain-dbscan", table_file(draw, root, columns), *required, *options(draw, choices)]


BUILDERS: dict[str, Callable[[Callable, Path], list[str]]] = {
    "train": train_argv,
    "evidence": evidence_argv,
    "audit": audit_argv,
    "fairden": fairden_argv,
    "tree-cluster": tree_cluster_argv,
    "explain-dbscan": explain_dbscan_argv,
}

#: examples per command: the graph commands train a model in every case, so fewer of them
EXAMPLES = {
    "train": 10,
    "evidence": 10,
    "audit": 12,
    "fairden": 40,
    "tree-cluster": 40,
    "explain-dbscan": 40,
}


def test_every_command_is_fuzzed():
    assert set(BUILDERS) == set(COMMANDS) == set(EXAMPLES)


@pytest.fixture(scope="module", autouse=True)
def warm_imports():
    """Import the heavy libraries once, so the per-case deadline measures the command only."""
    import gnnaudit.audit  # noqa: F401
    import gnnaudit.clustering  # noqa: F401
    import gnnaudit.training  # noqa: F401


def fuzz_command(command: str) -> list[str]:
    """Run the fuzz cases of ``command``; return the first stderr line of each case."""
    seen: list[str] = []

    @settings(
        max_examples=EXAMPLES[command],
        deadline=30_000,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def case(data):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            argv = BUILDERS[command](data.draw, root)
            argv = [*argv, *common_flags(data.draw, command)]
            code, _, err = run_cli(argv)
            check_outcome(argv, code, err)
            found = ERROR_LINE.search(err)
            seen.append("ok" if code == 0 else err[found.start() :].strip().split("\n")[0])

    case()
    return seen


@pytest.mark.parametrize("command", COMMANDS)
def test_cli_command_fuzz(command):
    seen = fuzz_command(command)
    # the cases reach the computation, not only the argument checks
    assert "ok" in seen, seen


@settings(max_examples=40, deadline=10_000, derandomize=True)
@given(
    argv=st.lists(
        st.one_of(
            st.sampled_from([*COMMANDS, "-v", "--debug", "--help", "--version", "--k"]),
            st.text(st.characters(exclude_categories=("Cs",)), max_size=8),
        ),
        max_size=5,
    )
)
def test_random_argument_lists_never_crash(argv):
    """Any token list: a usage error or a clean ``error:`` line (missing files, bad values)."""
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)  # anything a random list might write lands in a throw-away folder
        try:
            code, _, err = run_cli(argv)
        finally:
            os.chdir(cwd)
    assert "Traceback" not in err, (argv, err)
    assert code in (0, 2), (argv, code, err)


def test_watchdog_stops_a_hanging_case():
    with pytest.raises(Watchdog):
        with watchdog(1):
            signal.pause()


def test_truncated_npz_fixture_is_really_truncated():
    """The fuzz's truncated archives are not readable as zip files (so they test that path)."""

    @settings(max_examples=10, derandomize=True)
    @given(data=st.data())
    def case(data):
        blob = npz_bytes(data.draw, truncate=True)
        with pytest.raises(zipfile.BadZipFile):
            zipfile.ZipFile(io.BytesIO(blob))

    case()
