"""Loading an auditor's own model: factories, state dicts, Lightning checkpoints, refusals."""

from __future__ import annotations

import pickle
import textwrap

import pytest
import torch

from gnnaudit.errors import InvalidInputError
from gnnaudit.training import load_node_classifier
from gnnaudit.training.user_model import (
    build_model,
    import_object,
    load_user_model,
    load_weights,
)

MODELS = textwrap.dedent(
    """
    import lightning as L
    import torch
    from torch_geometric.nn import GCNConv


    class GCN(torch.nn.Module):
        def __init__(self, in_channels, out_channels, hidden=8):
            super().__init__()
            self.conv1 = GCNConv(in_channels, hidden)
            self.conv2 = GCNConv(hidden, out_channels)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


    def named(*, in_channels, out_channels):
        return GCN(in_channels, out_channels)


    def no_args():
        return GCN(3, 2)


    def not_a_module(a, b):
        return "nope"


    def broken(a, b):
        raise RuntimeError("boom")


    class LitGCN(L.LightningModule):
        def __init__(self, in_channels, out_channels, hidden=4):
            super().__init__()
            self.save_hyperparameters()
            self.gcn = GCN(in_channels, out_channels, hidden)

        def forward(self, x, edge_index):
            return self.gcn(x, edge_index)
    """
)


@pytest.fixture()
def models_file(tmp_path):
    path = tmp_path / "user_models.py"
    path.write_text(MODELS)
    return path


def test_import_and_build_from_a_file(models_file):
    cls = import_object(f"{models_file}:GCN")
    model = build_model(cls, 3, 2)
    assert model.conv1.in_channels == 3 and model.conv2.out_channels == 2
    assert build_model(import_object(f"{models_file}:named"), 5, 4).conv2.out_channels == 4
    assert build_model(import_object(f"{models_file}:no_args"), 9, 9).conv1.in_channels == 3
    # an importable module works as well
    assert import_object("torch.nn:Linear") is torch.nn.Linear


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("no_colon", "must look like MODULE:NAME"),
        ("{file}:missing", "has no 'missing'"),
        ("/nowhere/x.py:GCN", "does not exist"),
        ("surely_not_a_module_xyz:GCN", "cannot import"),
        ("{file}:not_a_module", "not a torch.nn.Module"),
        ("{file}:broken", "failed: RuntimeError: boom"),
    ],
)
def test_bad_model_specs(models_file, spec, match):
    with pytest.raises(InvalidInputError, match=match):
        load_user_model(spec.format(file=models_file), 3, 2)


def test_weights_round_trip_and_mismatches(models_file, tmp_path):
    spec = f"{models_file}:GCN"
    trained = build_model(import_object(spec), 3, 2)
    path = tmp_path / "w.pt"
    torch.save(trained.state_dict(), path)
    model = load_user_model(spec, 3, 2, weights=path)
    for key, value in trained.state_dict().items():
        assert torch.equal(model.state_dict()[key], value)
    assert not model.training
    # wrong shapes are listed by name
    with pytest.raises(InvalidInputError, match=r"shape mismatch: conv1\.lin\.weight"):
        load_user_model(spec, 4, 2, weights=path)
    # missing / unexpected keys
    state = dict(trained.state_dict())
    state["extra.weight"] = torch.zeros(1)
    del state["conv2.bias"]
    torch.save(state, path)
    with pytest.raises(InvalidInputError, match="missing in the file: conv2.bias"):
        load_weights(build_model(import_object(spec), 3, 2), path)
    # NaN weights are refused
    state = {k: v.clone() for k, v in trained.state_dict().items()}
    state["conv1.bias"][0] = float("nan")
    torch.save(state, path)
    with pytest.raises(InvalidInputError, match="NaN or inf weights"):
        load_weights(build_model(import_object(spec), 3, 2), path)


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickle_payload_in_weights_never_runs(models_file, tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    with open(path, "wb") as fh:
        pickle.dump({"conv1.bias": _Payload(str(marker))}, fh)
    with pytest.raises(InvalidInputError, match="legacy or foreign format refused"):
        load_user_model(f"{models_file}:GCN", 3, 2, weights=path)
    torch.save({"conv1.bias": _Payload(str(marker))}, path)  # a torch zip file this time
    with pytest.raises(InvalidInputError, match="refused: it needs"):
        load_user_model(f"{models_file}:GCN", 3, 2, weights=path)
    assert not marker.exists()


def test_lightning_checkpoint_of_a_user_module(models_file, tmp_path):
    import lightning as L

    spec = f"{models_file}:LitGCN"
    lit = build_model(import_object(spec), 3, 2)
    path = tmp_path / "model.ckpt"
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.strategy.connect(lit)
    trainer.save_checkpoint(path)
    model = load_user_model(spec, 3, 2, checkpoint=path)
    assert type(model).__name__ == "LitGCN" and model.hparams["hidden"] == 4
    for key, value in lit.state_dict().items():
        assert torch.equal(model.state_dict()[key], value)
    with pytest.raises(InvalidInputError, match="not both"):
        load_user_model(spec, 3, 2, weights=path, checkpoint=path)
    with pytest.raises(InvalidInputError, match="not a Lightning checkpoint"):
        torch.save({"a": torch.zeros(1)}, tmp_path / "plain.pt")
        load_user_model(spec, 3, 2, checkpoint=tmp_path / "plain.pt")
    with pytest.deprecated_call(match="lightning_checkpoint= is deprecated"):  # old keyword
        old = load_user_model(spec, 3, 2, lightning_checkpoint=path)
    assert all(torch.equal(old.state_dict()[k], v) for k, v in model.state_dict().items())


def test_node_classifier_checkpoint_size_is_bounded_before_allocation(tmp_path):
    path = tmp_path / "huge.ckpt"
    hp = {"in_channels": 10, "out_channels": 2, "hidden_channels": 10**6, "num_layers": 1000}
    torch.save({"state_dict": {}, "hyper_parameters": hp}, path)
    with pytest.raises(InvalidInputError, match="describe about"):
        load_node_classifier(path)
    torch.save({"state_dict": {}, "hyper_parameters": {**hp, "num_layers": -1}}, path)
    with pytest.raises(InvalidInputError, match="not a positive int"):
        load_node_classifier(path)


def test_model_file_imports_its_sibling_module(tmp_path):
    """``--model path/to/file.py:NAME`` imports a sibling module of that file (issue 26)."""
    import sys

    from gnnaudit.training.user_model import import_object

    pkg = tmp_path / "project"
    pkg.mkdir()
    (pkg / "gnnaudit_sibling_layers.py").write_text("WIDTH = 7\n")
    (pkg / "net.py").write_text(
        "from gnnaudit_sibling_layers import WIDTH\n\ndef build():\n    return WIDTH\n"
    )
    before = list(sys.path)
    build = import_object(f"{pkg / 'net.py'}:build")
    assert build() == 7
    assert sys.path == before  # the import path is restored


def test_cli_checkpoint_flag_takes_both_kinds(models_file, tmp_path, capsys):
    """``audit --checkpoint``: a Lightning checkpoint of the user's module with ``--model
    MODULE:NAME``, else a NodeClassifier checkpoint (a clear error when it is not one);
    ``--lightning-checkpoint`` is a deprecated spelling with the same result."""
    import warnings

    import lightning as L
    from torch_geometric.data import Data

    from gnnaudit.cli.audit import _load_model
    from gnnaudit.cli.main import build_parser

    spec = f"{models_file}:LitGCN"
    lit = build_model(import_object(spec), 3, 2)
    path = tmp_path / "model.ckpt"
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.strategy.connect(lit)
    trainer.save_checkpoint(path)
    data = Data(x=torch.zeros(4, 3), edge_index=torch.zeros(2, 0, dtype=torch.long))
    parser = build_parser()
    out = ["--out", str(tmp_path / "out")]
    base = ["audit", *out, "--dataset", "cora", "--model", spec, "--num-classes", "2"]
    args = parser.parse_args([*base, "--checkpoint", str(path)])
    model, info = _load_model(args, data, str(tmp_path))
    assert type(model).__name__ == "LitGCN" and str(path) in info["source"]
    with pytest.warns(FutureWarning, match="--lightning-checkpoint is deprecated .* 0.3.0"):
        old_args = parser.parse_args([*base, "--lightning-checkpoint", str(path)])
    old, _ = _load_model(old_args, data, str(tmp_path))
    for key, value in model.state_dict().items():
        assert torch.equal(old.state_dict()[key], value)
    with pytest.raises(InvalidInputError, match="needs --model MODULE:NAME"):
        torch.save({"state_dict": {}}, tmp_path / "plain.ckpt")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _load_model(
                parser.parse_args(["audit", *out, "--checkpoint", str(tmp_path / "plain.ckpt")]),
                data,
                str(tmp_path),
            )
