"""Outputs never touch inputs, ``--force`` replaces only gnnaudit's own files, temporaries never
outlive a run (issue 27, part 1).

Every refusal here must happen before any work: the inputs are checked byte for byte afterwards.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnaudit.cli.main import main
from gnnaudit.datasets import save_graph, synthetic_credit_graph
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import atomic_output_dir, check_outputs_apart
from gnnaudit.safe_io.manifest import MANIFEST_NAME, read_manifest
from gnnaudit.safe_io.paths import remove_stale_temporaries, temporary_name

MODEL_CODE = """
import torch
from torch_geometric.nn import GCNConv

class GCN(torch.nn.Module):
    def __init__(self, d, c):
        super().__init__()
        self.conv = GCNConv(d, c)
    def forward(self, x, edge_index):
        return self.conv(x, edge_index)
"""


def _digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def project(tmp_path):
    """A user's folder: a CSV graph folder, a .pt graph, a model module, weights, a table."""
    import torch

    data = synthetic_credit_graph(num_nodes=60, seed=0)
    save_graph(data, tmp_path / "graph")
    (tmp_path / "models").mkdir()
    save_graph(data, tmp_path / "models" / "graph.pt")
    (tmp_path / "models" / "my_models.py").write_text(MODEL_CODE)
    torch.manual_seed(0)
    from torch_geometric.nn import GCNConv

    torch.save(GCNConv(data.num_features, 2).state_dict(), tmp_path / "models" / "weights.pt")
    rng = np.random.default_rng(0)
    pd.DataFrame({"x": rng.normal(size=40), "y": rng.normal(size=40), "g": ["a", "b"] * 20}).to_csv(
        tmp_path / "tab.csv", index=False
    )
    return tmp_path


def _audit_argv(project: Path, graph: Path, out: Path) -> list[str]:
    return [
        "audit",
        "--graph",
        str(graph),
        "--model",
        f"{project / 'models' / 'my_models.py'}:GCN",
        "--weights",
        str(project / "models" / "weights.pt"),
        "--sensitive",
        "gender",
        "--no-progress",
        "--no-finetune",
        "--out",
        str(out),
        "--force",
    ]


@pytest.mark.parametrize(
    "where",
    ["the graph folder", "inside the graph folder", "parent of the .pt graph", "models folder"],
)
def test_audit_out_over_an_input_is_refused_before_work(project, where, capsys):
    graph = project / "graph"
    out = {
        "the graph folder": graph,
        "inside the graph folder": graph / "report",
        "parent of the .pt graph": project / "models",
        "models folder": project / "models",
    }[where]
    if where == "parent of the .pt graph":
        graph = project / "models" / "graph.pt"
    before = _digest(project)
    assert main(_audit_argv(project, graph, out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and "never written where inputs are" in err
    assert _digest(project) == before


def test_file_output_onto_its_input_table_is_refused(project, capsys):
    table = project / "tab.csv"
    before = _digest(project)
    argv = ["fairden", str(table), "--sensitive", "g", "--n-clusters", "2", "--force", "--out"]
    assert main([*argv, str(table)]) == 2
    assert "is the input data" in capsys.readouterr().err
    os.link(table, project / "alias.csv")  # the same file under another name
    before = _digest(project)
    assert main([*argv, str(project / "alias.csv")]) == 2
    assert "hard link" in capsys.readouterr().err
    assert _digest(project) == before


def test_a_link_to_the_input_as_out_is_refused(project, capsys):
    (project / "link").symlink_to(project / "graph")
    before = _digest(project)
    assert main(_audit_argv(project, project / "graph", project / "link")) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err or "never written" in err
    assert _digest(project) == before


def test_check_outputs_apart_relations(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "f.csv").write_text("1")
    for out, relation in [
        (tmp_path / "in" / "f.csv", "is the input"),
        (tmp_path / "in", "holds the input"),
        (tmp_path, "holds the input"),
        (tmp_path / "in" / "f.csv" / "x", "lies inside the input"),
    ]:
        with pytest.raises(InvalidInputError, match=relation):
            check_outputs_apart("--out", out, {"--graph": tmp_path / "in" / "f.csv"})
    with pytest.raises(InvalidInputError, match="lies inside the input --graph"):
        check_outputs_apart("--out", tmp_path / "in" / "sub", {"--graph": tmp_path / "in"})
    # a sibling is fine; a data root may hold the output but not be it
    check_outputs_apart("--out", tmp_path / "out", {"--graph": tmp_path / "in"})
    check_outputs_apart("--out", tmp_path / "in" / "o", {}, containers={"--root": tmp_path})
    with pytest.raises(InvalidInputError, match="holds the input folder --root"):
        check_outputs_apart("--out", tmp_path, {}, containers={"--root": tmp_path / "in"})


def test_train_force_keeps_unrelated_files_and_replaces_its_own(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    (out / "sub" / "data.csv").write_text("a,b\n1,2\n")
    argv = ["train", "--num-nodes", "60", "--epochs", "2", "--out", str(out), "--force"]
    assert main(argv) == 0
    first = (out / "metrics.json").read_text()
    assert read_manifest(out) == {"metrics.json": "train", "model.ckpt": "train"}
    assert main([*argv, "--seed", "1"]) == 0
    assert (out / "metrics.json").read_text() != first  # its own file was replaced
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "sub" / "data.csv").read_text() == "a,b\n1,2\n"


def test_force_never_replaces_a_file_gnnaudit_did_not_write(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.ckpt").write_text("the user's own checkpoint")
    argv = ["train", "--num-nodes", "60", "--epochs", "2", "--out", str(out), "--force"]
    started = time.perf_counter()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "model.ckpt" in err and "not written by gnnaudit" in err
    assert time.perf_counter() - started < 30  # refused before training, not after
    assert (out / "model.ckpt").read_text() == "the user's own checkpoint"
    assert not (out / "metrics.json").exists()


def test_python_save_follows_the_same_rule(tmp_path):
    from gnnaudit.audit.report import AuditReport

    report = AuditReport(verdict="v", dataset={}, model={}, config={})
    out = tmp_path / "r"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InvalidInputError, match="already holds files \\(notes.txt\\)"):
        report.save(out)
    report.save(out, force=True)
    report.save(out, force=True)
    assert (out / "notes.txt").read_text() == "mine"
    (out / "report.md").unlink()
    (out / "report.md").write_text("the user's")  # same name, not gnnaudit's any more? it is
    report.save(out, force=True)  # still listed in the manifest: gnnaudit's to replace
    (out / MANIFEST_NAME).write_text("{not json")  # a broken manifest claims nothing
    with pytest.raises(InvalidInputError, match="not written by gnnaudit"):
        report.save(out, force=True)
    assert (out / "notes.txt").read_text() == "mine"


def test_stale_files_of_the_same_producer_go_other_producers_stay(tmp_path):
    out = tmp_path / "out"
    with atomic_output_dir(out, producer="audit") as tmp:
        (tmp / "report.json").write_text("1")
        (tmp / "model.ckpt").write_text("1")
    save_graph(synthetic_credit_graph(num_nodes=30, seed=0), tmp_path / "g")
    with atomic_output_dir(out, True, producer="audit") as tmp:
        (tmp / "report.json").write_text("2")
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, "report.json"]
    (out / "user.txt").write_text("u")
    with atomic_output_dir(out, True, producer="train") as tmp:
        (tmp / "metrics.json").write_text("m")
    assert read_manifest(out) == {"report.json": "audit", "metrics.json": "train"}
    assert (out / "user.txt").read_text() == "u" and (out / "report.json").read_text() == "2"


_NAMES = st.sampled_from(["report.json", "report.md", "notes.txt", "data.csv", "a.pt"])


@settings(max_examples=40, deadline=None)
@given(
    user=st.sets(_NAMES, max_size=4),
    ours_before=st.sets(_NAMES, max_size=3),
    ours_now=st.sets(_NAMES, min_size=1, max_size=3),
)
def test_forced_writes_never_lose_a_user_file(tmp_path_factory, user, ours_before, ours_now):
    """Property: a forced write either is refused with nothing changed, or leaves every file
    the user wrote byte for byte and holds exactly this run's outputs for gnnaudit's names."""
    out = tmp_path_factory.mktemp("prop") / "out"
    if ours_before:
        with atomic_output_dir(out, producer="p") as tmp:
            for name in ours_before:
                (tmp / name).write_text("old")
    out.mkdir(exist_ok=True)
    for name in user - ours_before:
        (out / name).write_text("user")
    before = _digest(out)
    try:
        with atomic_output_dir(out, True, producer="p", planned=tuple(ours_now)) as tmp:
            for name in ours_now:
                (tmp / name).write_text("new")
    except InvalidInputError as exc:
        assert (user - ours_before) & ours_now  # refused only for a user's file in the way
        assert "not written by gnnaudit" in str(exc)
        assert _digest(out) == before
        return
    for name in user - ours_before:
        assert (out / name).read_text() == "user"
    for name in ours_now:
        assert (out / name).read_text() == "new"
    for name in ours_before - ours_now:
        assert not (out / name).exists()  # the earlier run's leftovers are gone
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".tmp-")]


def test_stale_temporaries_of_dead_runs_are_removed_others_kept(tmp_path):
    target = tmp_path / "out"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / temporary_name("out").replace(f"-{os.getpid()}-", f"-{dead.pid}-")
    stale.mkdir()
    (stale / "report.json").write_text("half")
    alive = tmp_path / temporary_name("out")  # this process: alive
    alive.mkdir()
    other = tmp_path / ".tmp-someone-elses"
    other.mkdir()
    other_target = tmp_path / temporary_name("other").replace(f"-{os.getpid()}-", f"-{dead.pid}-")
    other_target.write_text("x")
    assert remove_stale_temporaries(target) == [stale.name]
    assert alive.exists() and other.exists() and other_target.exists()


def test_sigterm_removes_the_temporary_folder(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gnnaudit",
            "train",
            "--num-nodes",
            "3000",
            "--epochs",
            "2000",
            "--no-progress",
            "--out",
            str(out),
        ],  # fmt: skip
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.name.startswith(".tmp-") for p in tmp_path.iterdir()):
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read().decode()
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err.decode()
    assert "terminated by SIGTERM" in err.decode()
    assert list(tmp_path.iterdir()) == []  # no .tmp- folder, no half-written out
