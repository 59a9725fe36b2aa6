"""What a fresh bad-input sweep found (issue 38, item 6): one-file outputs that ``--force``
overwrote although gnnaudit never wrote them, node tables that hung the reader, errors naming
Python parameters instead of flags, errors that came only after the heavy imports."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gnnaudit.cli.main import main
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import atomic_write_text, check_output_file
from gnnaudit.safe_io.manifest import MANIFEST_NAME

ROOT = Path(__file__).resolve().parents[1]
FILE_COMMANDS = ("fairden", "evidence", "tree-cluster", "explain-dbscan")


def file_argv(command: str, table: Path, out: Path) -> list[str]:
    if command == "fairden":
        return ["fairden", str(table), "--sensitive", "g", "--out", str(out)]
    if command == "evidence":
        return ["evidence", "--num-nodes", "60", "--epochs", "2", "--out", str(out)]
    if command == "tree-cluster":
        return ["tree-cluster", str(table), "--ignore", "g", "--n-clusters", "2", "--out", str(out)]
    return ["explain-dbscan", str(table), "--eps", "1", "--min-samples", "3", "--index", "0",
            "--label", "g", "--out", str(out)]  # fmt: skip


def run_fresh(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (nothing imported yet), gnnaudit from this checkout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout
    )


def run_cli_fresh(
    argv: list[str], heavy: tuple[str, ...] = ("torch", "sklearn")
) -> subprocess.CompletedProcess:
    """``gnnaudit argv`` in a fresh interpreter; returns its process after printing the exit
    code and which of the ``heavy`` modules were imported by then."""
    code = (
        "import sys\nfrom gnnaudit.cli.main import main\n"
        f"rc = main({argv!r})\n"
        f"heavy = sorted(m for m in {heavy!r} if m in sys.modules)\n"
        "print(rc, heavy)\n"
    )
    return run_fresh(code)


# ---------------------------------------------------------------- overwrite: --force on a file


@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_force_never_overwrites_a_file_gnnaudit_did_not_write(command, table, tmp_path, capsys):
    out = tmp_path / "unrelated.txt"
    out.write_text("the user's notes")
    assert main([*file_argv(command, table, out), "--force"]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "not written by gnnaudit" in err and MANIFEST_NAME in err
    assert out.read_text() == "the user's notes"
    assert not (tmp_path / MANIFEST_NAME).exists()


def test_a_file_gnnaudit_wrote_is_listed_and_force_replaces_it(table, tmp_path):
    from gnnaudit.safe_io.manifest import lists_file

    out = tmp_path / "labels.csv"
    argv = ["tree-cluster", str(table), "--ignore", "g", "--n-clusters", "2", "--depth", "1"]
    assert main([*argv, "--out", str(out)]) == 0
    manifest = json.loads((tmp_path / MANIFEST_NAME).read_text())
    assert manifest["files"] == {"labels.csv": "tree-cluster"}
    assert lists_file(out)
    out.write_text("stale")
    assert main([*argv, "--out", str(out), "--force"]) == 0
    assert out.read_text().startswith("row,cluster")


def test_library_file_writer_records_and_guards_with_a_producer(tmp_path):
    from gnnaudit.safe_io.manifest import lists_file

    mine, ours = tmp_path / "mine.txt", tmp_path / "ours.txt"
    mine.write_text("keep")
    with pytest.raises(InvalidInputError, match="not written by gnnaudit"):
        atomic_write_text(mine, "x", name="--out", force=True, producer="test")
    assert mine.read_text() == "keep"
    atomic_write_text(ours, "1", name="--out", producer="test")
    atomic_write_text(ours, "2", name="--out", force=True, producer="test")
    assert ours.read_text() == "2" and lists_file(ours) and not lists_file(mine)
    # without a producer (the library's own caches) force keeps its old meaning
    atomic_write_text(mine, "replaced", name="cache", force=True)
    assert mine.read_text() == "replaced"
    with pytest.raises(InvalidInputError, match="record of the files"):
        check_output_file("--out", tmp_path / MANIFEST_NAME, owned_only=True)


def test_a_manifest_gnnaudit_cannot_read_is_never_written_over(tmp_path):
    (tmp_path / MANIFEST_NAME).write_text("someone else's file")
    atomic_write_text(tmp_path / "a.txt", "1", name="--out", producer="test")
    assert (tmp_path / MANIFEST_NAME).read_text() == "someone else's file"
    with pytest.raises(InvalidInputError, match="not written by gnnaudit"):
        atomic_write_text(tmp_path / "a.txt", "2", name="--out", force=True, producer="test")


@pytest.mark.parametrize("command", ["evidence", "fairden"])
def test_a_taken_out_fails_before_torch_or_sklearn_load(command, table, tmp_path):
    out = tmp_path / "taken.csv"
    out.write_text("x")
    argv = file_argv(command, table, out)
    proc = run_cli_fresh(argv, ("torch", "sklearn", "lightning"))
    assert proc.stdout.strip() == "2 []", proc.stderr[-2000:]
    assert "--out" in proc.stderr and "already exists" in proc.stderr


# ---------------------------------------------------------------- hangs: FIFO, /dev/zero


def _graph_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "g"
    folder.mkdir()
    pd.DataFrame({"source": ["a"], "target": ["b"]}).to_csv(folder / "edges.csv", index=False)
    return folder


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("how", ["--graph", "--nodes"])
def test_a_node_table_that_is_no_regular_file_is_refused_not_read(kind, how, tmp_path):
    folder = _graph_folder(tmp_path)
    nodes = folder / "nodes.csv"
    if kind == "fifo":
        os.mkfifo(nodes)
    else:
        nodes.symlink_to("/dev/zero")
    where = ["--graph", str(folder)] if how == "--graph" else ["--nodes", str(nodes)]
    if how == "--nodes":
        where += ["--edges", str(folder / "edges.csv")]
    argv = ["audit", *where, "--out", str(tmp_path / "out")]
    code = f"import sys\nfrom gnnaudit.cli.main import main\nsys.exit(main({argv!r}))\n"
    proc = run_fresh(code, timeout=120)  # a regression hangs: the timeout fails the test
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "is not a regular file" in proc.stderr and how in proc.stderr


def test_the_table_reader_itself_refuses_a_fifo(tmp_path):
    from gnnaudit.cli._graph_input import read_header
    from gnnaudit.datasets import read_graph

    folder = _graph_folder(tmp_path)
    os.mkfifo(folder / "nodes.csv")
    assert read_header(str(folder / "nodes.csv")) is None  # never opened
    with pytest.raises(InvalidInputError, match="not a regular file"):
        read_graph(folder)


# ---------------------------------------------------------------- errors that name the flag


def _namespace(flags: dict[str, str], owners=(), **values) -> argparse.Namespace:
    return argparse.Namespace(parameter_flags=flags, parameter_owners=owners, **values)


def test_flag_message_rewrites_parameters_into_flags():
    from gnnaudit.cli.flag_names import flag_message

    args = _namespace(
        {"min_clusters": "--min-clusters", "n_clusters": "--n-clusters", "depth": "--depth"},
        ("TreeClustering",),
    )
    text = flag_message("TreeClustering: min_clusters must be <= n_clusters=2; got 5", args)
    assert text == "--min-clusters must be <= --n-clusters 2; got 5"
    text = flag_message("depth=3 gives 8 leaves; use depth >= 7, a depth-3 tree or 'depth'", args)
    assert text == "--depth 3 gives 8 leaves; use --depth >= 7, a depth-3 tree or 'depth'"
    args = _namespace({"m": "--finetune-m", "checkpoint": "--checkpoint"}, checkpoint="m.ckpt")
    assert flag_message("cannot hold 50 nodes; lower m", args).endswith("lower --finetune-m")
    assert flag_message("m.ckpt is not a NodeClassifier checkpoint", args).startswith(
        "--checkpoint m.ckpt is"
    )
    assert flag_message("checkpoint: 'm.ckpt' refused", args) == "--checkpoint: 'm.ckpt' refused"
    assert flag_message("nothing to rename", argparse.Namespace()) == "nothing to rename"


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--min-clusters", "5"], "--min-clusters"),
        (["--n-clusters", "20", "--depth", "2"], "--depth"),
        (["--epsilon", "150"], "--epsilon"),
        (["--label", "nope"], "--label"),
    ],
)
def test_tree_cluster_errors_name_the_flag_before_sklearn_loads(extra, flag, table):
    argv = ["tree-cluster", str(table), "--ignore", "g", *extra]
    argv += [] if "--n-clusters" in extra else ["--n-clusters", "2"]
    proc = run_cli_fresh(argv)
    assert proc.stdout.strip() == "2 []", proc.stderr[-2000:]
    assert flag in proc.stderr and "TreeClustering" not in proc.stderr
    assert "min_clusters" not in proc.stderr and "n_clusters" not in proc.stderr


@pytest.mark.parametrize(
    ("extra", "flag"),
    [(["--index", "400"], "--index"), (["--immutable", "zz"], "--immutable")],
)
def test_explain_dbscan_errors_name_the_flag_before_sklearn_loads(extra, flag, table):
    argv = ["explain-dbscan", str(table), "--eps", "1", "--min-samples", "3", "--label", "g"]
    argv += extra if "--index" in extra else ["--index", "0", *extra]
    proc = run_cli_fresh(argv)
    assert proc.stdout.strip() == "2 []", proc.stderr[-2000:]
    assert f"error: {flag}" in proc.stderr and "x_or_index" not in proc.stderr


def test_tree_cluster_copies_of_the_estimator_bounds_agree():
    from gnnaudit.cli import tree_cluster as cli
    from gnnaudit.clustering.tree_clustering import TIME_LIMIT_RANGE
    from gnnaudit.clustering.tree_inputs import UNIT

    assert cli.TIME_LIMIT_RANGE == TIME_LIMIT_RANGE and cli.UNIT == UNIT


def test_an_estimator_error_reaching_the_cli_names_the_flag(table, capsys):
    # more clusters than rows: only the estimator knows (it has the data)
    argv = ["tree-cluster", str(table), "--ignore", "g", "--n-clusters", "50", "--depth", "6"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--min-clusters 50" in err and "min_clusters=" not in err


# ---------------------------------------------------------------- torch / npz files, no torch


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    import pickle
    import zipfile

    class Payload:
        def __reduce__(self):
            return (print, ("ran",))

    files = {"text": tmp_path / "bad.ckpt", "npz": tmp_path / "bad.npz"}
    files["text"].write_text("not a torch file")
    files["npz"].write_text("not an archive")
    files["code"] = tmp_path / "code.pt"
    with zipfile.ZipFile(files["code"], "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(Payload(), protocol=2))
    files["empty"] = tmp_path / "empty.pt"
    files["empty"].write_bytes(b"")
    return files


@pytest.mark.parametrize(
    ("command", "flag", "which"),
    [
        ("audit", "--checkpoint", "text"),
        ("audit", "--graph", "code"),
        ("audit", "--graph", "npz"),
        ("audit", "--checkpoint", "empty"),
        ("evidence", "--checkpoint", "text"),
    ],
)
def test_bad_torch_and_npz_files_are_refused_before_torch_loads(command, flag, which, tmp_path):
    path = _bad_files(tmp_path)[which]
    out = tmp_path / ("out.csv" if command == "evidence" else "out")
    argv = [command, flag, str(path), "--out", str(out)]
    code = (
        "import sys\nfrom gnnaudit.cli.main import main\n"
        f"rc = main({argv!r})\n"
        "print(rc, 'torch' in sys.modules)\n"
    )
    proc = run_fresh(code)
    assert proc.stdout.strip() == "2 False", proc.stderr[-2000:]
    assert f"error: {flag}: " in proc.stderr and "ran" not in proc.stdout


def test_the_precheck_accepts_what_torch_accepts_and_names_a_pickled_model(tmp_path):
    import torch
    from torch._weights_only_unpickler import _get_allowed_globals

    from gnnaudit.safe_io.torch_files import PLAIN_GLOBALS, precheck_torch_file

    assert {g for g in _get_allowed_globals() if not g.startswith("torch")} <= PLAIN_GLOBALS
    state = tmp_path / "state.pt"
    torch.save(torch.nn.Linear(3, 2).state_dict(), state)
    assert precheck_torch_file("--weights", state) == state
    whole = tmp_path / "whole.pt"
    torch.save(torch.nn.Sequential(torch.nn.Linear(3, 2)), whole)
    with pytest.raises(InvalidInputError, match="save its state_dict instead"):
        precheck_torch_file("--weights", whole)


def test_the_precheck_lets_a_saved_pyg_graph_through(tmp_path):
    import torch
    from torch_geometric.data import Data

    from gnnaudit.safe_io.torch_files import PYG_DATA_PREFIX, precheck_torch_file

    path = tmp_path / "graph.pt"
    torch.save(Data(x=torch.ones(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]])), path)
    assert precheck_torch_file("--graph", path, allowed_prefixes=(PYG_DATA_PREFIX,)) == path
    with pytest.raises(InvalidInputError, match="torch_geometric"):
        precheck_torch_file("--weights", path)


# ---------------------------------------------------------------- docs


def test_the_quickstart_names_only_flags_that_exist():
    import re

    from gnnaudit.cli.main import build_parser

    parser = build_parser()
    known = set(parser._option_string_actions)
    for action in parser._actions:
        for sub in getattr(action, "choices", None) or {}:
            known |= set(action.choices[sub]._option_string_actions)
    text = (ROOT / "docs" / "guide" / "quickstart.md").read_text()
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", text))
    assert "--lightning-checkpoint" not in text
    assert named <= known, sorted(named - known)
