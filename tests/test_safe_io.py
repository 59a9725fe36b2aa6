"""gnnaudit.safe_io: safe readers (no code from data files) and atomic writers."""

from __future__ import annotations

import os
import pickle
import re
import threading
from collections import OrderedDict, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from torch_geometric.data import Data, HeteroData

from gnnaudit import InvalidInputError
from gnnaudit.safe_io import (
    atomic_file,
    atomic_output_dir,
    atomic_write_bytes,
    atomic_write_text,
    check_input_dir,
    check_input_file,
    check_output_dir,
    check_output_file,
    load_npy,
    load_npz,
    load_planetoid_pickle,
    load_text_array,
    pyg_data_classes,
    read_csv,
    read_json,
    read_text,
    safe_torch_load,
)
from gnnaudit.safe_io.manifest import MANIFEST_NAME


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


# ------------------------------------------------------------------------------ input checks
def test_check_input_file_and_dir(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    assert check_input_file("data", tmp_path / "f.txt") == tmp_path / "f.txt"
    assert check_input_dir("root", tmp_path) == tmp_path
    with pytest.raises(InvalidInputError, match="data: file .*nope.csv' does not exist"):
        check_input_file("data", tmp_path / "nope.csv")
    with pytest.raises(InvalidInputError, match="data: .* is a folder, expected a file"):
        check_input_file("data", tmp_path)
    with pytest.raises(InvalidInputError, match="cannot access"):
        check_input_file("data", tmp_path / "f.txt" / "below")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InvalidInputError, match="not a regular file"):
        check_input_file("data", tmp_path / "fifo")
    with pytest.raises(InvalidInputError, match="root: .* is a file, expected a folder"):
        check_input_dir("root", tmp_path / "f.txt")
    with pytest.raises(InvalidInputError, match="data must be a file path"):
        check_input_file("data", 3)


# ------------------------------------------------------------------------------ CSV and text
BAD_CSVS = {
    "empty": (b"", "is empty"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
    "ragged": (b"a,b\n1,2\n3,4,5\n", "cannot parse .* Expected 2 fields in line 3, saw 3"),
    "latin1": ("a,b\n1,caf\u00e9\n".encode("latin-1"), "is not utf-8 text"),
    "header_only": (b"a,b\n", "at least 1 data row"),
}


@pytest.mark.parametrize("kind", sorted(BAD_CSVS))
def test_read_csv_turns_every_failure_into_one_line(tmp_path, kind):
    content, pattern = BAD_CSVS[kind]
    path = tmp_path / f"{kind}.csv"
    path.write_bytes(content)
    with pytest.raises(InvalidInputError, match=pattern) as info:
        read_csv("--data", path)
    text = _one_line(info)
    assert text.startswith("--data: ") and str(path) in text


def test_read_csv_missing_and_folder(tmp_path):
    with pytest.raises(InvalidInputError, match="--data: file .* does not exist"):
        read_csv("--data", tmp_path / "missing.csv")
    with pytest.raises(InvalidInputError, match="--data: .* is a folder"):
        read_csv("--data", tmp_path)


def test_read_csv_reads_a_table(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).to_csv(path, index=False)
    frame = read_csv("data", path)
    assert frame["a"].tolist() == [1, 2] and frame["b"].tolist() == ["x", "y"]
    assert len(read_csv("data", path, min_rows=0, nrows=0)) == 0
    with pytest.raises(InvalidInputError, match="(?i)usecols"):
        read_csv("data", path, usecols=["zzz"])


def test_read_json_and_text(tmp_path):
    (tmp_path / "ok.json").write_text('{"a": [1, 2]}')
    assert read_json("cfg", tmp_path / "ok.json") == {"a": [1, 2]}
    (tmp_path / "bad.json").write_text('{"a": ')
    with pytest.raises(InvalidInputError, match="cfg: .*bad.json' is not valid JSON"):
        read_json("cfg", tmp_path / "bad.json")
    (tmp_path / "bin").write_bytes(b"\x00\x01")
    with pytest.raises(InvalidInputError, match="binary file"):
        read_text("cfg", tmp_path / "bin")
    (tmp_path / "l1").write_bytes("caf\u00e9".encode("latin-1"))
    with pytest.raises(InvalidInputError, match="not utf-8 text"):
        read_text("cfg", tmp_path / "l1")


def test_load_text_array(tmp_path):
    (tmp_path / "e.txt").write_text("0 1\n2 3\n")
    np.testing.assert_array_equal(load_text_array("edges", tmp_path / "e.txt"), [[0, 1], [2, 3]])
    (tmp_path / "empty.txt").write_text("")
    assert load_text_array("edges", tmp_path / "empty.txt").size == 0
    (tmp_path / "bad.txt").write_text("0 1\n2 x\n")
    with pytest.raises(InvalidInputError, match="edges: cannot parse"):
        load_text_array("edges", tmp_path / "bad.txt")
    (tmp_path / "bin.txt").write_bytes(b"\x00\xff")
    with pytest.raises(InvalidInputError, match="binary"):
        load_text_array("edges", tmp_path / "bin.txt")


# ------------------------------------------------------------------------------ numpy files
def test_load_npz_reads_plain_arrays(tmp_path):
    path = tmp_path / "a.npz"
    np.savez(path, x=np.arange(6.0).reshape(3, 2), names=np.array(["a", "b"]))
    arrays = load_npz("graph", path)
    np.testing.assert_array_equal(arrays["x"], np.arange(6.0).reshape(3, 2))
    assert arrays["names"].tolist() == ["a", "b"]


def test_load_npz_refuses_object_arrays_and_never_runs_them(tmp_path, payload):
    path = payload.npz_file(tmp_path / "facebook.npz")
    with pytest.raises(InvalidInputError, match="object array, which needs unpickling"):
        load_npz("root", path)
    assert not payload.ran
    # the planted file is live: an unrestricted reader runs it
    with np.load(path, allow_pickle=True) as archive:
        archive["edges"]
    assert payload.ran


def test_load_npy_and_format_errors(tmp_path, payload):
    np.save(tmp_path / "ok.npy", np.ones(3))
    np.testing.assert_array_equal(load_npy("feats", tmp_path / "ok.npy"), np.ones(3))
    evil = np.empty(1, dtype=object)
    evil[0] = "a"
    np.save(tmp_path / "obj.npy", evil, allow_pickle=True)
    with pytest.raises(InvalidInputError, match="object array"):
        load_npy("feats", tmp_path / "obj.npy")
    (tmp_path / "junk.npz").write_bytes(b"not a zip at all")
    with pytest.raises(InvalidInputError, match="junk.npz' is not a .npz file"):
        load_npz("graph", tmp_path / "junk.npz")
    with pytest.raises(InvalidInputError, match="single .npy array"):
        load_npz("graph", tmp_path / "ok.npy")
    np.savez(tmp_path / "two.npz", a=np.ones(1))
    with pytest.raises(InvalidInputError, match="expected one .npy array"):
        load_npy("feats", tmp_path / "two.npz")


# ------------------------------------------------------------------------------ Planetoid pickles
def _py2_pickle(path, obj) -> None:
    path.write_bytes(pickle.dumps(obj, protocol=2))


def test_planetoid_pickle_reads_the_three_kinds(tmp_path):
    rng = np.random.default_rng(0)
    dense = (rng.random((5, 4)) < 0.4).astype(np.float32)
    _py2_pickle(tmp_path / "x", sp.csr_matrix(dense))
    _py2_pickle(tmp_path / "y", np.eye(5, 3, dtype=np.int32))
    graph = defaultdict(list, {0: [1, 2], 1: [0], 2: [0, 4]})
    _py2_pickle(tmp_path / "graph", graph)
    x = load_planetoid_pickle("root", tmp_path / "x")
    assert sp.issparse(x) and np.array_equal(x.toarray(), dense)
    y = load_planetoid_pickle("root", tmp_path / "y")
    assert y.dtype == np.int32 and np.array_equal(y, np.eye(5, 3))
    assert load_planetoid_pickle("root", tmp_path / "graph") == {0: [1, 2], 1: [0], 2: [0, 4]}


def test_planetoid_pickle_refuses_payload_before_running_it(tmp_path, payload):
    path = payload.pickle_file(tmp_path / "ind.cora.x")
    with pytest.raises(InvalidInputError, match="exec is not allowed") as info:
        load_planetoid_pickle("--root", path)
    assert _one_line(info).startswith("--root: ")
    assert not payload.ran
    with open(path, "rb") as fh:  # the same file through an unrestricted unpickler runs code
        pickle.load(fh, encoding="latin1")
    assert payload.ran


@pytest.mark.parametrize(
    "obj, pattern",
    [
        (OrderedDict(a=1), "collections.OrderedDict is not allowed"),
        (np.array([object(), 1], dtype=object)[1:], "object dtypes are not allowed"),
        ({"a": [1]}, "map integer node ids"),
        ([1, 2], "unexpected object of type list"),
        (np.array(["a", "b"]), "numeric numpy array"),
    ],
)
def test_planetoid_pickle_refuses_other_content(tmp_path, obj, pattern):
    path = tmp_path / "ind.cora.y"
    _py2_pickle(path, obj)
    with pytest.raises(InvalidInputError, match=pattern):
        load_planetoid_pickle("root", path)


def test_planetoid_pickle_refuses_broken_sparse_matrix(tmp_path):
    m = sp.csr_matrix(np.eye(3, dtype=np.float32))
    m.indices[0] = 7  # column id out of range
    _py2_pickle(tmp_path / "x", m)
    with pytest.raises(InvalidInputError, match="not a valid Planetoid raw file"):
        load_planetoid_pickle("root", tmp_path / "x")
    (tmp_path / "t").write_bytes(pickle.dumps(np.ones(3), protocol=2)[:20])
    with pytest.raises(InvalidInputError, match="not a valid Planetoid raw file"):
        load_planetoid_pickle("root", tmp_path / "t")


# ------------------------------------------------------------------------------ torch files
def _data() -> Data:
    return Data(
        x=torch.randn(4, 3),
        edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]),
        y=torch.tensor([0, 1, 0, 1]),
        feature_names=["a", "b", "c"],
    )


def test_safe_torch_load_plain_containers_need_no_allow_list(tmp_path):
    state = OrderedDict(w=torch.ones(2, 2), b=torch.zeros(2))
    torch.save({"state": state, "names": ["a"], "n": 3}, tmp_path / "s.pt")
    out = safe_torch_load(tmp_path / "s.pt", name="--weights")
    assert torch.equal(out["state"]["w"], torch.ones(2, 2)) and out["names"] == ["a"]


def test_safe_torch_load_data_needs_the_pyg_allow_list(tmp_path):
    data = _data()
    torch.save(data, tmp_path / "g.pt")
    with pytest.raises(InvalidInputError, match="refused: it needs torch_geometric.data.data.Data"):
        safe_torch_load(tmp_path / "g.pt", name="--graph")
    loaded = safe_torch_load(tmp_path / "g.pt", pyg_data_classes(), name="--graph")
    assert isinstance(loaded, Data)
    assert torch.equal(loaded.x, data.x) and loaded.feature_names == ["a", "b", "c"]


def test_safe_torch_load_refuses_classes_registered_process_wide(tmp_path):
    # torch_geometric registers HeteroData with add_safe_globals on import; the explicit
    # allow-list still refuses it
    hetero = HeteroData()
    hetero["paper"].x = torch.ones(2, 2)
    torch.save(hetero, tmp_path / "h.pt")
    with pytest.raises(InvalidInputError, match="HeteroData"):
        safe_torch_load(tmp_path / "h.pt", pyg_data_classes(), name="--graph")


@pytest.mark.parametrize("wrap", [True, False])
def test_safe_torch_load_refuses_payload_and_never_runs_it(tmp_path, payload, wrap):
    path = payload.torch_file(tmp_path / "evil.pt", wrap=wrap)
    with pytest.raises(InvalidInputError, match="refused: it needs .*exec") as info:
        safe_torch_load(path, pyg_data_classes(), name="--graph")
    assert _one_line(info).startswith("--graph: ")
    assert not payload.ran
    torch.load(path, weights_only=False)  # the file is live
    assert payload.ran


def test_safe_torch_load_refuses_unreadable_files(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"garbage")
    with pytest.raises(InvalidInputError, match="not a torch.save zip file"):
        safe_torch_load(tmp_path / "junk.pt")
    torch.save({"x": torch.ones(100)}, tmp_path / "ok.pt")
    blob = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(InvalidInputError, match="cut.pt"):
        safe_torch_load(tmp_path / "cut.pt")
    with pytest.raises(InvalidInputError, match="does not exist"):
        safe_torch_load(tmp_path / "none.pt")


# ------------------------------------------------------------------------------ atomic files
def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith((".tmp-", ".old-")))


def _listing(folder) -> list[str]:
    """The files of an output folder, without gnnaudit's manifest."""
    return sorted(p.name for p in folder.iterdir() if p.name != MANIFEST_NAME)


def test_atomic_file_appears_whole_or_not_at_all(tmp_path):
    target = tmp_path / "labels.csv"
    with atomic_file(target, name="--output") as tmp:
        assert tmp.parent == tmp_path and tmp.name.endswith("labels.csv")
        pd.DataFrame({"a": [1]}).to_csv(tmp, index=False)
        assert not target.exists()
    assert target.read_text() == "a\n1\n"
    with pytest.raises(RuntimeError), atomic_file(tmp_path / "fail.csv") as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash in the middle")
    assert not (tmp_path / "fail.csv").exists()
    assert _leftovers(tmp_path) == []


def test_atomic_file_overwrite_needs_force(tmp_path):
    target = tmp_path / "out.txt"
    atomic_write_text(target, "first")
    with pytest.raises(InvalidInputError, match="already exists; pass force=True"):
        atomic_write_text(target, "second")
    assert target.read_text() == "first"
    atomic_write_bytes(target, b"second", force=True)
    assert target.read_text() == "second"
    assert _leftovers(tmp_path) == []


def test_atomic_file_respects_the_umask(tmp_path):
    atomic_write_text(tmp_path / "a.txt", "x")
    (tmp_path / "b.txt").write_text("x")
    assert (tmp_path / "a.txt").stat().st_mode == (tmp_path / "b.txt").stat().st_mode


def test_atomic_file_no_clobber_if_the_target_appears_meanwhile(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(InvalidInputError, match="created by someone else"):
        with atomic_file(target) as tmp:
            tmp.write_text("mine")
            target.write_text("theirs")
    assert target.read_text() == "theirs"
    assert _leftovers(tmp_path) == []


def test_check_output_file_rejects_bad_destinations(tmp_path):
    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    cases = {
        tmp_path: "is a folder, expected a file path",
        tmp_path / "fifo": "not a regular file",
        tmp_path / "missing" / "out.csv": "does not exist",
        tmp_path / "file" / "out.csv": "lies under .*file', which is a file",
        tmp_path / "file" / "deeper" / "out.csv": "lies under .*file', which is a file",
    }
    for path, pattern in cases.items():
        with pytest.raises(InvalidInputError, match=f"--out: .*{pattern}"):
            check_output_file("--out", path, force=True)
    mode = tmp_path.stat().st_mode
    with pytest.raises(InvalidInputError, match="is a folder"):
        atomic_write_text(tmp_path, "x", force=True)
    assert tmp_path.stat().st_mode == mode  # a folder given as a file path is left alone
    assert check_output_file("--out", tmp_path / "new.csv") == tmp_path / "new.csv"


# ------------------------------------------------------------------------------ atomic folders
def test_atomic_output_dir_moves_into_place(tmp_path):
    out = tmp_path / "a" / "b" / "report"
    with atomic_output_dir(out, name="--out") as tmp:
        (tmp / "report.json").write_text("{}")
        assert not out.exists()
    assert _listing(out) == ["report.json"]
    assert _leftovers(out.parent) == []
    empty = tmp_path / "empty"
    empty.mkdir()
    with atomic_output_dir(empty) as tmp:
        (tmp / "f").write_text("1")
    assert (empty / "f").read_text() == "1"


def test_atomic_output_dir_failure_keeps_the_old_outputs(tmp_path):
    out = tmp_path / "out"
    with atomic_output_dir(out) as tmp:
        (tmp / "report.json").write_text("old")
    with pytest.raises(ValueError), atomic_output_dir(out, force=True) as tmp:
        (tmp / "report.json").write_text("new, half written")
        raise ValueError("bad --sensitive after training")
    assert _listing(out) == ["report.json"]
    assert (out / "report.json").read_text() == "old"
    assert _leftovers(tmp_path) == []


def test_atomic_output_dir_refuses_a_folder_with_files_before_running(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    ran = []
    with pytest.raises(InvalidInputError, match="already holds files \\(thesis.tex\\)"):
        with atomic_output_dir(out, name="--out"):
            ran.append(True)
    assert ran == [] and (out / "thesis.tex").read_text() == "precious"
    with atomic_output_dir(out, force=True) as tmp:
        (tmp / "report.json").write_text("{}")
    # force adds gnnaudit's files and never removes the user's
    assert _listing(out) == ["report.json", "thesis.tex"]
    assert (out / "thesis.tex").read_text() == "precious"
    assert _leftovers(tmp_path) == []


def test_atomic_output_dir_never_replaces_the_working_or_home_folder(tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "notes.txt").write_text("keep")
    monkeypatch.chdir(work / "sub")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for path in (".", "..", str(work), str(home)):
        with pytest.raises(
            InvalidInputError, match="current folder, one of its parents or the home"
        ):
            with atomic_output_dir(path, force=True, name="--out"):
                pass
    assert (work / "sub" / "notes.txt").read_text() == "keep"


def test_atomic_output_dir_rejects_files_and_paths_under_files(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInputError, match="--out: .* is a file, expected a folder"):
        check_output_dir("--out", tmp_path / "file")
    with pytest.raises(InvalidInputError, match="lies under .*file', which is a file"):
        with atomic_output_dir(tmp_path / "file" / "sub", name="--out"):
            pass


def test_a_run_finishing_second_without_force_keeps_both_results(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(InvalidInputError, match="filled by another run.*results are in") as info:
        with atomic_output_dir(out) as slow:
            (slow / "report.json").write_text("slow")
            with atomic_output_dir(out) as fast:  # started later, finishes first
                (fast / "report.json").write_text("fast")
    assert _listing(out) == ["report.json"]
    assert (out / "report.json").read_text() == "fast"
    kept = re.search(r"results are in '([^']+)'", str(info.value)).group(1)
    assert (Path(kept) / "report.json").read_text() == "slow"
    assert not Path(kept).name.startswith(".")  # kept on purpose, visibly
    assert _leftovers(tmp_path) == []


def test_concurrent_forced_runs_leave_one_whole_report(tmp_path):
    out = tmp_path / "out"
    barrier = threading.Barrier(4)
    errors = []

    def run(seed: int) -> None:
        try:
            with atomic_output_dir(out, force=True) as tmp:
                (tmp / "report.json").write_text(str(seed))
                barrier.wait(timeout=10)
                (tmp / "report.html").write_text(str(seed))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    json_seed = (out / "report.json").read_text()
    assert (out / "report.html").read_text() == json_seed
    assert _listing(out) == ["report.html", "report.json"]
    assert _leftovers(tmp_path) == []
