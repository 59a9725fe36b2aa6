"""Size bounds, allocation estimates and divergence checks (issue 27): every size-like
parameter is refused above its documented bound before any work, big allocations are refused
when they cannot fit, and training that diverges stops with an error and writes nothing."""

from __future__ import annotations

import argparse
import io
import json
import time
import zipfile

import numpy as np
import pytest
import torch

from gnnaudit._validation import (
    MAX_EPOCHS,
    MAX_HIDDEN_CHANNELS,
    MAX_K,
    MAX_LEARNING_RATE,
    MAX_NUM_HOPS,
    MAX_NUM_LAYERS,
    MAX_SEED,
    MAX_SYNTHETIC_NODES,
    as_float32,
    check_allocation,
    check_seed,
    memory_limit_bytes,
)
from gnnaudit.cli.options import FloatRange, IntRange, OneLineParser
from gnnaudit.errors import InvalidInputError, TrainingDivergedError

# ------------------------------------------------------------------ shared validators


def test_documented_bounds_are_sane():
    assert MAX_SEED == 2**32 - 1
    assert 4 <= MAX_NUM_HOPS <= 10_000 and 4 <= MAX_NUM_LAYERS <= 10_000
    assert 200 < MAX_EPOCHS <= 10**6 and 10 <= MAX_K <= 10**7
    assert 0 < MAX_LEARNING_RATE <= 100 and 1000 < MAX_HIDDEN_CHANNELS <= 10**6
    assert 10**5 <= MAX_SYNTHETIC_NODES <= 10**8


@pytest.mark.parametrize("seed", [0, 7, 2**32 - 1, np.int64(3)])
def test_check_seed_accepts_numpy_range(seed):
    assert check_seed("seed", seed) == int(seed)


@pytest.mark.parametrize("seed", [-1, 2**32, 10**20, 2.0, True, "1"])
def test_check_seed_refuses_outside_numpy_range(seed):
    with pytest.raises(InvalidInputError, match=r"^--seed must be"):
        check_seed("--seed", seed)


def test_check_allocation_names_the_figure_and_argument():
    check_allocation("k", 1024, "small arrays")
    with pytest.raises(InvalidInputError, match=r"^k: the arrays would need 7.11 PiB") as err:
        check_allocation("k", 8e15, "the arrays")
    assert "physical memory" in str(err.value)
    with pytest.raises(InvalidInputError, match="lower n"):
        check_allocation("n", 2049, "x", limit=2048)
    with pytest.raises(InvalidInputError):
        check_allocation("n", float("nan"), "x")
    assert memory_limit_bytes() > 2**20


def test_as_float32_names_the_overflow_not_nan():
    x = np.array([[1.0, 2.0], [3.0, -5e38]])
    with pytest.raises(InvalidInputError, match=r"^graph.npz: values up to 5e\+38") as err:
        as_float32("graph.npz", x, columns=["a", "b"])
    assert "row 1, column 'b'" in str(err.value) and "overflow float32" in str(err.value)
    assert "NaN" not in str(err.value)
    ok = as_float32("f", np.array([[3.4e38, -1.0]]))
    assert ok.dtype == np.float32 and np.isfinite(ok).all()


def test_int_range_parses_digits_only_and_bounds():
    k = IntRange(1, 10, "why")
    assert k("3") == 3 and k("1_0") == 10
    for text in ("0", "11", "1e3", "2.5", "9223372036854775808", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            k(text)


def test_float_range_refuses_nonfinite_and_out_of_range():
    lr = FloatRange(0.0, 10.0, low_open=True)
    assert lr("0.5") == 0.5 and lr("10") == 10.0
    for text in ("0", "-1", "nan", "inf", "1e30", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            lr(text)
    dropout = FloatRange(0.0, 1.0, high_open=True)
    assert dropout("0") == 0.0 and dropout("0.99") == 0.99
    with pytest.raises(argparse.ArgumentTypeError, match="< 1.0"):
        dropout("1")


def test_one_line_parser_prints_one_line(capsys):
    parser = OneLineParser(prog="gnnaudit demo")
    parser.add_argument("--k", type=IntRange(1, 5))
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--k", "99"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gnnaudit demo: error: argument --k:")


# ------------------------------------------------------------------ Python entry points


def _graph(n=40, seed=0):
    from gnnaudit.datasets import synthetic_credit_graph

    return synthetic_credit_graph(num_nodes=n, seed=seed)


def test_ks_embedding_refuses_huge_num_hops_at_once():
    from gnnaudit.graph_ops.neighbourhood import KSEmbedding, ks_embedding

    data = _graph()
    start = time.perf_counter()
    with pytest.raises(InvalidInputError, match=r"num_hops must be <= 256"):
        ks_embedding(data.x, data.edge_index, num_hops=10**9)
    assert time.perf_counter() - start < 30  # refused before any hop ran (not a timing claim)
    with pytest.raises(InvalidInputError, match="num_hops"):
        KSEmbedding(num_hops=MAX_NUM_HOPS + 1)
    out = ks_embedding(data.x, data.edge_index, num_hops=MAX_NUM_HOPS)
    assert torch.isfinite(out).all()


def test_counterfactual_evidence_refuses_huge_num_hops():
    from gnnaudit.audit import CounterfactualEvidence

    data = _graph()
    ce = CounterfactualEvidence(num_hops=10**6)
    with pytest.raises(InvalidInputError, match="num_hops must be an integer >= 0 and <= 256"):
        ce.fit(data, predictions=np.zeros(data.num_nodes, dtype=np.int64))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_layers": 100_000}, "num_layers must be <= 256"),
        ({"hidden_channels": 10**10}, "hidden_channels must be <= 65536"),
        ({"hidden_channels": 60_000, "num_layers": 100}, "MAX_MODEL_WEIGHTS"),
        ({"lr": 1e30}, "lr must be <= 10.0"),
        ({"lr": float("nan")}, "lr must be finite"),
        ({"weight_decay": 1e308}, "weight_decay must be <= 1.0"),
    ],
)
def test_node_classifier_bounds(kwargs, match):
    from gnnaudit.training import NodeClassifier

    with pytest.raises(InvalidInputError, match=match):
        NodeClassifier(in_channels=3, out_channels=2, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_epochs": 10**9}, "max_epochs must be <= 100000"),
        ({"seed": 10**20}, r"seed must be a seed in \[0, 2\*\*32 - 1"),
        ({"num_layers": 10**5}, "num_layers"),
    ],
)
def test_train_node_classifier_bounds_before_training(kwargs, match, tmp_path):
    from gnnaudit.training import train_node_classifier

    ckpt = tmp_path / "m.ckpt"
    with pytest.raises(InvalidInputError, match=match):
        train_node_classifier(_graph(), checkpoint_path=ckpt, **kwargs)
    assert not ckpt.exists()


def test_synthetic_graph_bounds():
    from gnnaudit.datasets import synthetic_credit_graph

    with pytest.raises(InvalidInputError, match="num_nodes must be <= 10000000"):
        synthetic_credit_graph(num_nodes=10**10)
    with pytest.raises(InvalidInputError, match="seed"):
        synthetic_credit_graph(num_nodes=30, seed=2**40)


# ------------------------------------------------------------------ divergence


def _exploding_graph():
    data = _graph(60)
    data.x = data.x * 3e37  # finite float32, but every logit overflows
    return data


def test_diverging_training_raises_and_writes_no_checkpoint(tmp_path):
    from gnnaudit.training import train_node_classifier

    ckpt = tmp_path / "m.ckpt"
    with pytest.raises(TrainingDivergedError, match="training diverged") as err:
        train_node_classifier(_exploding_graph(), max_epochs=3, lr=10.0, checkpoint_path=ckpt)
    assert "smaller" in str(err.value) and "lr=10" in str(err.value)
    assert not ckpt.exists()
    assert list(tmp_path.iterdir()) == []


def test_divergence_guard_sees_non_finite_weights():
    from gnnaudit.training.divergence import first_non_finite_weight

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    assert first_non_finite_weight(model) is None
    with torch.no_grad():
        model[1].bias[0] = float("nan")
    assert first_non_finite_weight(model) == "1.bias"
    with torch.no_grad():  # finite but huge: the sum overflows, the weights are still finite
        model[1].bias[0] = 3e38
        model[0].weight.fill_(3e38)
    assert first_non_finite_weight(model) is None


def test_every_trainer_carries_the_guard():
    from gnnaudit.training.divergence import DivergenceGuard
    from gnnaudit.training.train import make_trainer, quiet_lightning

    with quiet_lightning(False):  # Trainer(deterministic=True) is process-wide: restored after
        trainer = make_trainer(1)
        assert sum(isinstance(c, DivergenceGuard) for c in trainer.callbacks) == 1
        trainer = make_trainer(1, {"callbacks": [DivergenceGuard()]})
        assert sum(isinstance(c, DivergenceGuard) for c in trainer.callbacks) == 1
    with pytest.raises(InvalidInputError, match="max_epochs"):
        make_trainer(MAX_EPOCHS + 1)


def test_finetune_lr_is_bounded():
    from gnnaudit.training import NodeClassifier
    from gnnaudit.training.fair_finetune import FairFinetune

    data = _graph()
    model = NodeClassifier(in_channels=int(data.x.size(1)), out_channels=2)
    with pytest.raises(InvalidInputError, match="lr must be <= 10.0"):
        FairFinetune(model, data, lr=1e30)


# ------------------------------------------------------------------ files


def _save_pt(path, obj):
    torch.save(obj, path)
    return path


def _base_dict(x):
    return {"x": x, "edge_index": torch.tensor([[0, 1], [1, 2]]), "y": torch.tensor([0, 1, 0])}


def test_half_precision_x_is_read_exactly(tmp_path):
    from gnnaudit.datasets import load_graph

    x = torch.tensor([[1.5, -2.0], [0.25, 3.0], [8.0, 0.0]])
    for dtype in (torch.bfloat16, torch.float16):
        path = _save_pt(tmp_path / f"{dtype}.pt", _base_dict(x.to(dtype)))
        data = load_graph(path)
        assert data.x.dtype == torch.float32 and torch.equal(data.x, x)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda x: x.to_sparse(), "'x' is a sparse_coo tensor"),
        (lambda x: x.to_sparse_csr(), "'x' is a sparse_csr tensor"),
        (lambda x: torch.empty(3, 2, device="meta"), "'x' is on the meta device"),
    ],
)
def test_exotic_x_is_refused_naming_it(tmp_path, make, match):
    from gnnaudit.datasets import load_graph

    path = _save_pt(tmp_path / "g.pt", _base_dict(make(torch.ones(3, 2))))
    with pytest.raises(InvalidInputError, match=match):
        load_graph(path, name="--graph")


def test_exotic_tensor_inside_a_data_is_refused(tmp_path):
    from torch_geometric.data import Data

    from gnnaudit.datasets import load_graph

    data = Data(x=torch.ones(3, 2).to_sparse(), edge_index=torch.tensor([[0], [1]]))
    with pytest.raises(InvalidInputError, match="^--graph: .* entry 'x' is a sparse_coo"):
        load_graph(_save_pt(tmp_path / "g.pt", data), name="--graph")


@pytest.mark.parametrize("store", [{"x": 1}, [1, 2], None, 7])
def test_crafted_pyg_storage_is_refused(tmp_path, store):
    from torch_geometric.data import Data

    from gnnaudit.datasets import load_graph

    data = Data(x=torch.ones(3, 2), edge_index=torch.tensor([[0], [1]]))
    data.__dict__["_store"] = store
    path = tmp_path / "g.pt"
    try:
        torch.save(data, path)
    except Exception:  # torch cannot even write this one: nothing to read back
        pytest.skip("torch.save refuses this storage")
    with pytest.raises(InvalidInputError, match="^--graph: "):
        load_graph(path, name="--graph")


def test_non_string_keys_are_refused(tmp_path):
    from gnnaudit.datasets import load_graph

    content = _base_dict(torch.ones(3, 2))
    content[3] = torch.zeros(3)
    with pytest.raises(InvalidInputError, match="every key must be a string, got 3"):
        load_graph(_save_pt(tmp_path / "g.pt", content))


def _npy_bytes(arr, shape_text=None):
    buf = io.BytesIO()
    np.save(buf, arr)
    raw = buf.getvalue()
    if shape_text is not None:
        raw = raw.replace(str(arr.shape).encode(), shape_text.encode())
    return raw


def test_npz_header_bomb_is_refused_before_allocation(tmp_path):
    from gnnaudit.datasets import load_graph
    from gnnaudit.safe_io import load_npz

    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", _npy_bytes(np.zeros((2, 2)), "(1000000000000, 1000)"))
        archive.writestr("edge_index.npy", _npy_bytes(np.array([[0], [1]])))
    with pytest.raises(InvalidInputError, match=r"declares an array of shape \(1000000000000"):
        load_npz("--graph", path)
    with pytest.raises(InvalidInputError, match="^--graph: "):
        load_graph(path, name="--graph")


def test_npz_whose_arrays_cannot_fit_is_refused(tmp_path, monkeypatch):
    import gnnaudit._validation as validation
    from gnnaudit.safe_io import load_npz

    path = tmp_path / "big.npz"
    np.savez_compressed(path, x=np.zeros((512, 64)))  # 256 KiB decompressed, tiny on disk
    assert load_npz("f", path)["x"].shape == (512, 64)
    monkeypatch.setattr(validation, "memory_limit_bytes", lambda: 100_000)
    with pytest.raises(InvalidInputError, match="^f: the arrays of .* would need 256 KiB"):
        load_npz("f", path)


def test_npy_header_bomb_is_refused(tmp_path):
    from gnnaudit.safe_io import load_npy

    path = tmp_path / "feats.npy"
    path.write_bytes(_npy_bytes(np.zeros((2, 2)), "(1000000000000, 1000)"))
    with pytest.raises(InvalidInputError, match="declares an array"):
        load_npy("--root", path)


@pytest.mark.parametrize("opening, closing", [("[", "]"), ('{"a":', "}")])
def test_json_recursion_bomb_is_refused(tmp_path, opening, closing):
    from gnnaudit.safe_io import read_json

    path = tmp_path / "class_map.json"
    path.write_text(opening * 100_000 + "1" + closing * 100_000)
    with pytest.raises(InvalidInputError, match="nests JSON .* deeper"):
        read_json("--root", path)
    path.write_text(json.dumps({"0": [[1]]}))
    assert read_json("--root", path) == {"0": [[1]]}


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda w: w.to_sparse(), "entry 'weight' is a sparse_coo tensor"),
        (lambda w: torch.empty(2, 2, device="meta"), "entry 'weight' is on the meta device"),
        (lambda w: 3, "cannot be loaded into Linear"),
    ],
)
def test_exotic_state_dict_is_refused(tmp_path, make, match):
    from gnnaudit.training.user_model import load_weights

    state = torch.nn.Linear(2, 2).state_dict()
    state["weight"] = make(state["weight"])
    path = _save_pt(tmp_path / "w.pt", state)
    with pytest.raises(InvalidInputError, match=f"^--weights: .*{match}"):
        load_weights(torch.nn.Linear(2, 2), path)


def test_float64_overflow_on_cast_is_named(tmp_path):
    from gnnaudit.datasets import load_graph

    path = tmp_path / "g.npz"
    x = np.ones((3, 2))
    x[2, 1] = 1e39
    np.savez(path, x=x, edge_index=np.array([[0], [1]]))
    with pytest.raises(InvalidInputError, match=r"g.npz'?: values up to 1e\+39") as err:
        load_graph(path, name="--graph")
    assert "overflow float32" in str(err.value) and "row 2, column 'x1'" in str(err.value)


# ------------------------------------------------------------------ mask column


def _mask_folder(tmp_path, sel, zero=False):
    n = len(sel)
    lines = ["id,a,b,y,test_mask,sel"]
    for i in range(n):
        lines.append(f"n{i},{i % 5},{i % 3},{i % 2},{int(i < 4)},{0 if zero else sel[i]}")
    (tmp_path / "nodes.csv").write_text("\n".join(lines) + "\n")
    edges = ["source,target"] + [f"n{i},n{i + 1}" for i in range(n - 1)]
    (tmp_path / "edges.csv").write_text("\n".join(edges) + "\n")
    return tmp_path


def test_mask_column_wins_over_test_mask(tmp_path):
    from gnnaudit.audit.context import resolve_nodes
    from gnnaudit.audit.search.evidence import CounterfactualEvidence
    from gnnaudit.datasets import load_graph

    sel = [int(i >= 12) for i in range(20)]
    data = load_graph(_mask_folder(tmp_path, sel), mask_column="sel")
    assert data.test_mask.sum() == 4 and data.mask.sum() == 8
    assert resolve_nodes(data).tolist() == list(range(12, 20))
    ce = CounterfactualEvidence().fit(data, predictions=np.arange(20) % 2)
    assert ce.node_ids_.tolist() == list(range(12, 20))


def test_all_zero_mask_column_is_refused_naming_the_flag(tmp_path):
    from gnnaudit.datasets import load_graph

    folder = _mask_folder(tmp_path, [1] * 10, zero=True)
    with pytest.raises(InvalidInputError, match=r"^--mask-column='sel': .* selects no node"):
        load_graph(folder, mask_column="sel", name="--graph", mask_name="--mask-column")
    with pytest.raises(InvalidInputError, match=r"^mask_column='sel'"):
        load_graph(folder, mask_column="sel")


# ------------------------------------------------------------------ n x k allocations


def test_same_prediction_neighbours_caps_k_at_the_class_size():
    from gnnaudit.audit.fairness.evidence_contrast import same_prediction_neighbours

    rng = np.random.default_rng(0)
    emb = rng.normal(size=(30, 4))
    pred = np.arange(30) % 3
    pos, sim = same_prediction_neighbours(emb, pred, np.arange(5), 10**9)
    assert pos.shape == (5, 9) and (pos >= 0).all()
    small, _ = same_prediction_neighbours(emb, pred, np.arange(5), 3)
    assert np.array_equal(small, pos[:, :3])


def test_local_evidence_with_huge_k_is_capped():
    from gnnaudit.audit import CounterfactualEvidence

    data = _graph(60)
    ce = CounterfactualEvidence().fit(data, predictions=np.arange(60) % 2)
    res = ce.search_local(ce.node_ids_[:3], k=10**12)
    assert res.evidence.shape[0] == 3 and res.evidence.shape[1] <= ce.node_ids_.size


def test_resamples_are_bounded_before_allocation():
    from gnnaudit._validation import MAX_RESAMPLES
    from gnnaudit.audit.bootstrap import bootstrap_mean

    assert MAX_RESAMPLES == 1_000_000
    with pytest.raises(InvalidInputError, match="n_boot must be <= 1000000"):
        bootstrap_mean(np.ones(5), n_boot=10**12)


def test_npz_decompression_bomb_is_refused(tmp_path, monkeypatch):
    import gnnaudit.safe_io.readers as readers
    from gnnaudit.safe_io import load_npz

    path = tmp_path / "zeros.npz"
    np.savez_compressed(path, x=np.zeros((256, 256)))  # 512 KiB of zeros, about 1 KiB stored
    assert load_npz("--graph", path)["x"].shape == (256, 256)
    monkeypatch.setattr(readers, "BOMB_BYTES", 100_000)
    with pytest.raises(InvalidInputError, match=r"^--graph: .* decompression bomb"):
        load_npz("--graph", path)
    plain = tmp_path / "plain.npz"
    np.savez(plain, x=np.zeros((256, 256)))  # the same data stored: accepted
    assert load_npz("--graph", plain)["x"].shape == (256, 256)
