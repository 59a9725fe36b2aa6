"""CLI fuzz of the issue-27 bad-input classes: dtype and device exotica, crafted PyG storage,
decompression and recursion bombs, out-of-range integers, divergence and an empty mask.

Every case must end with exit 2 and exactly one stderr line naming the flag (or the file's
argument), never a traceback, never exit 1, never a hang; a diverging run writes no
checkpoint. The out-of-range integers are drawn by hypothesis for *every* bounded integer flag
the parser declares, so a new flag is fuzzed as soon as it exists.
"""

from __future__ import annotations

import argparse
import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli_fuzz import MODEL_CODE, run_cli

from gnnaudit.cli.main import build_parser
from gnnaudit.cli.options import FloatRange, IntRange

#: a tiny synthetic graph and one epoch: the cases that pass the argument checks stay short
SMALL = ["--num-nodes", "40", "--epochs", "1"]


def check_one_line(argv: list[str], code: int, err: str, flag: str) -> None:
    """Exit 2, no traceback, and exactly one stderr line, which names ``flag``."""
    assert "Traceback" not in err, (argv, err)
    assert code == 2, (argv, code, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, (argv, err)
    assert "error:" in lines[0] and flag in lines[0], (argv, flag, err)


# ------------------------------------------------------------------ files of each class


def _pt(root: Path, content) -> str:
    path = root / "graph.pt"
    torch.save(content, path)
    return str(path)


def _graph_dict(x: torch.Tensor) -> dict:
    n = x.shape[0]
    return {
        "x": x,
        "edge_index": torch.tensor([[i for i in range(n - 1)], [i + 1 for i in range(n - 1)]]),
        "y": torch.arange(n) % 2,
    }


def _data_with_store(store):
    from torch_geometric.data import Data

    data = Data(**_graph_dict(torch.ones(6, 2)))
    data.__dict__["_store"] = store
    return data


def _npy(arr: np.ndarray, shape_text: str | None = None) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    raw = buf.getvalue()
    return raw if shape_text is None else raw.replace(str(arr.shape).encode(), shape_text.encode())


def _npz_bomb(root: Path) -> str:
    path = root / "bomb.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", _npy(np.zeros((2, 2)), "(1000000000000, 1000)"))
        archive.writestr("edge_index.npy", _npy(np.array([[0], [1]])))
    return str(path)


def _npz_overflow(root: Path) -> str:
    path = root / "big.npz"
    x = np.ones((6, 2))
    x[3, 0] = -2e39
    np.savez(path, x=x, edge_index=np.array([[0, 1], [1, 2]]), y=np.arange(6) % 2)
    return str(path)


def _amazon_root(root: Path, class_map_text: str) -> str:
    """An AmazonProducts raw folder whose class_map.json is ``class_map_text``."""
    import scipy.sparse as sp

    raw = root / "data" / "AmazonProducts" / "raw"
    raw.mkdir(parents=True)
    adj = sp.csr_matrix(np.eye(4, k=1))
    np.savez(
        raw / "adj_full.npz",
        data=adj.data,
        indices=adj.indices,
        indptr=adj.indptr,
        shape=np.array(adj.shape),
    )
    np.save(raw / "feats.npy", np.ones((4, 2)))
    (raw / "class_map.json").write_text(class_map_text)
    (raw / "role.json").write_text('{"tr": [0, 1], "va": [2], "te": [3]}')
    return str(root / "data")


def _sparse_weights(root: Path) -> list[str]:
    (root / "model.py").write_text(MODEL_CODE)
    state = torch.nn.Linear(2, 2).state_dict()
    state["weight"] = state["weight"].to_sparse()
    torch.save(state, root / "w.pt")
    return ["--model", f"{root}/model.py:Net", "--weights", str(root / "w.pt")]


def _zero_mask_folder(root: Path) -> str:
    folder = root / "g"
    folder.mkdir()
    rows = [f"n{i},{i % 3},{i % 2},{int(i < 5)},0" for i in range(12)]
    (folder / "nodes.csv").write_text("id,a,y,test_mask,zero\n" + "\n".join(rows) + "\n")
    (folder / "edges.csv").write_text("source,target\nn0,n1\nn1,n2\n")
    return str(folder)


#: (case id, argv builder given a fresh folder, what the error line must name)
FILE_CASES: list[tuple[str, Callable[[Path], list[str]], str]] = [
    (
        "x sparse",
        lambda r: ["--graph", _pt(r, _graph_dict(torch.ones(6, 2).to_sparse()))],
        "--graph",
    ),
    (
        "x sparse csr",
        lambda r: ["--graph", _pt(r, _graph_dict(torch.ones(6, 2).to_sparse_csr()))],
        "--graph",
    ),
    (
        "x meta",
        lambda r: ["--graph", _pt(r, _graph_dict(torch.empty(6, 2, device="meta")))],
        "--graph",
    ),
    (
        "x complex",
        lambda r: ["--graph", _pt(r, _graph_dict(torch.ones(6, 2, dtype=torch.cfloat)))],
        "--graph",
    ),
    ("store dict", lambda r: ["--graph", _pt(r, _data_with_store({"x": 1}))], "--graph"),
    ("store list", lambda r: ["--graph", _pt(r, _data_with_store([1, 2]))], "--graph"),
    ("store none", lambda r: ["--graph", _pt(r, _data_with_store(None))], "--graph"),
    ("int key", lambda r: ["--graph", _pt(r, {**_graph_dict(torch.ones(6, 2)), 3: 1})], "--graph"),
    ("npz header bomb", lambda r: ["--graph", _npz_bomb(r)], "--graph"),
    ("float64 overflow", lambda r: ["--graph", _npz_overflow(r)], "overflow float32"),
    (
        "json recursion bomb",
        lambda r: ["--dataset", "amazon-products", "--root", _amazon_root(r, "[" * 100_000)],
        "root",
    ),
    (
        "sparse state dict",
        lambda r: ["--graph", _pt(r, _graph_dict(torch.ones(6, 2))), *_sparse_weights(r)],
        "--weights",
    ),
    (
        "all-zero mask",
        lambda r: ["--graph", _zero_mask_folder(r), "--mask-column", "zero"],
        "--mask-column",
    ),
]


@pytest.mark.parametrize(
    "builder, flag", [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES]
)
def test_bad_files_exit_2_with_one_line(tmp_path, builder, flag):
    argv = ["audit", *builder(tmp_path), *SMALL, "--no-progress", "--out", str(tmp_path / "o")]
    code, _, err = run_cli(argv)
    check_one_line(argv, code, err, flag)
    assert not (tmp_path / "o").exists()


def test_bfloat16_x_is_read_not_refused(tmp_path):
    """bfloat16 features widen exactly to float32: the audit runs (exit 0)."""
    x = (torch.arange(24, dtype=torch.float32).reshape(12, 2) % 5).to(torch.bfloat16)
    content = _graph_dict(x)
    content["test_mask"] = torch.arange(12) < 6
    (tmp_path / "model.py").write_text(MODEL_CODE)
    argv = [
        "audit",
        "--graph",
        _pt(tmp_path, content),
        "--model",
        f"{tmp_path}/model.py:Net",
        "--no-finetune",
        "--no-progress",
        "--out",
        str(tmp_path / "o"),
    ]
    code, _, err = run_cli(argv)
    assert code == 0, err


# ------------------------------------------------------------------ divergence


def test_diverging_training_exits_2_and_writes_no_checkpoint(tmp_path):
    from gnnaudit.datasets import save_graph, synthetic_credit_graph

    data = synthetic_credit_graph(num_nodes=60, seed=0)
    data.x = data.x / data.x.abs().max() * 3e38  # finite float32; the logits overflow
    graph = save_graph(data, tmp_path / "g.pt")
    out = tmp_path / "report"
    argv = [
        "audit",
        "--graph",
        str(graph),
        "--epochs",
        "3",
        "--no-finetune",
        "--no-progress",
        "--no-standardize",  # the built-in scaler would tame these raw values (issue 38)
        "--out",
        str(out),
    ]
    code, _, err = run_cli(argv)
    check_one_line(argv, code, err, "training diverged")
    assert "smaller" in err
    assert not out.exists() and not list(tmp_path.rglob("*.ckpt"))


# ------------------------------------------------------------------ integers and late errors

#: every command and a minimal argv that puts a flag value in front of it
PREFIX = {
    "train": ["train"],
    "evidence": ["evidence"],
    "audit": ["audit"],
    "fairden": ["fairden", "t.csv"],
    "explain-dbscan": ["explain-dbscan", "t.csv"],
}


def _bounded_flags() -> list[tuple[str, str, IntRange | FloatRange]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for command in PREFIX:
        for action in sub.choices[command]._actions:
            if isinstance(action.type, IntRange | FloatRange) and action.option_strings:
                found.append((command, action.option_strings[0], action.type))
    return found


BOUNDED = _bounded_flags()


def test_no_unbounded_numeric_flag():
    """Every int / float flag of these commands has a bounded type (tree-cluster's flags are
    bounded by its own validation)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    loose = [
        (command, action.option_strings)
        for command in PREFIX
        for action in sub.choices[command]._actions
        if action.type in (int, float)
    ]
    assert loose == []
    flags = {(c, f) for c, f, _ in BOUNDED}
    for needed in [
        ("train", "--layers"),
        ("train", "--hidden"),
        ("train", "--epochs"),
        ("train", "--lr"),
        ("train", "--seed"),
        ("train", "--num-nodes"),
        ("evidence", "--k"),
        ("evidence", "--num-hops"),
        ("audit", "--k"),
    ]:
        assert needed in flags


@settings(
    max_examples=60, deadline=10_000, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_out_of_range_integers_exit_2_naming_the_flag(data):
    command, flag, kind = data.draw(
        st.sampled_from([b for b in BOUNDED if isinstance(b[2], IntRange)])
    )
    value = data.draw(
        st.one_of(
            st.integers(kind.maximum + 1, 2**70),
            st.integers(-(2**70), kind.minimum - 1),
            st.sampled_from(["1e9", "2^63", "9223372036854775808", "1.5", "nan"]),
        )
    )
    argv = [*PREFIX[command], f"{flag}={value}"]
    code, _, err = run_cli(argv)
    check_one_line(argv, code, err, f"argument {flag}:")


@settings(max_examples=30, deadline=10_000, derandomize=True)
@given(data=st.data())
def test_out_of_range_floats_exit_2_naming_the_flag(data):
    command, flag, kind = data.draw(
        st.sampled_from([b for b in BOUNDED if isinstance(b[2], FloatRange)])
    )
    bad = ["nan", "inf", "-inf", "1e400"]
    if kind.maximum is not None:
        bad.append(repr(kind.maximum * 2 + 1))
    if kind.minimum is not None:
        bad.append(repr(kind.minimum - 1))
    argv = [*PREFIX[command], f"{flag}={data.draw(st.sampled_from(bad))}"]
    code, _, err = run_cli(argv)
    check_one_line(argv, code, err, f"argument {flag}:")


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["evidence", "--k", "1000000000"], "--k"),
        (["evidence", "--k", str(2**63)], "--k"),
        (["evidence", "--num-hops", "100000"], "--num-hops"),
        (["evidence", "--alpha", "2"], "--alpha"),
        (["train", "--layers", "100000"], "--layers"),
        (["train", "--epochs", "1000000000"], "--epochs"),
        (["train", "--hidden", "10000000000"], "--hidden"),
        (["train", "--lr", "1e30"], "--lr"),
        (["train", "--weight-decay", "1e308"], "--weight-decay"),
        (["train", "--dropout", "1"], "--dropout"),
        (["train", "--num-nodes", "10000000000"], "--num-nodes"),
        (["train", "--seed", "100000000000000000000"], "--seed"),
        (["audit", "--k", str(2**63)], "--k"),
        (["fairden", "t.csv", "--seed", "100000000000000000000"], "--seed"),
        (["explain-dbscan", "t.csv", "--n-counterfactuals", "1000000000"], "--n-counterfactuals"),
    ],
)
def test_sweep_integers_exit_2(tmp_path, argv, flag):
    argv = [*argv, "--out", str(tmp_path / "o")]
    code, _, err = run_cli(argv)
    check_one_line(argv, code, err, f"argument {flag}:")
    assert not (tmp_path / "o").exists()


def test_evidence_checks_node_before_training(tmp_path):
    argv = ["evidence", *SMALL, "--node", "999", "--out", str(tmp_path / "e.csv")]
    code, out, err = run_cli(argv)
    check_one_line(argv, code, err, "--node 999")
    assert "training" not in err + out  # refused before a model was trained


def test_decompression_bomb_exits_2(tmp_path, monkeypatch):
    """A highly compressible npz (the threshold lowered so the test stays small)."""
    import gnnaudit.safe_io.readers as readers

    monkeypatch.setattr(readers, "BOMB_BYTES", 100_000)
    path = tmp_path / "zeros.npz"
    np.savez_compressed(path, x=np.zeros((256, 256)), edge_index=np.array([[0], [1]]))
    argv = ["audit", "--graph", str(path), *SMALL, "--out", str(tmp_path / "o")]
    code, _, err = run_cli(argv)
    check_one_line(argv, code, err, "--graph")
    assert "decompression bomb" in err
