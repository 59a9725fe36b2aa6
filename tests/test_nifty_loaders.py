"""Fair-GNN loaders: published splits, the FairGNN layout, checked downloads, NiftyDataset, CLI."""

from __future__ import annotations

import hashlib
import logging
import random

import numpy as np
import pandas as pd
import pytest
import torch

from gnnaudit.datasets import NiftyDataset, load_nifty
from gnnaudit.datasets import nifty_download as dl
from gnnaudit.datasets.nifty_splits import fairgnn_split, nifty_split
from gnnaudit.errors import InvalidInputError


# --------------------------------------------------------------------------- published splits
def _reference_nifty(labels: np.ndarray, label_number: int, seed: int):
    """NIFTY's loader, transcribed: shuffles numpy arrays in place with Python's random."""
    rng = random.Random(seed)
    i0, i1 = np.where(labels == 0)[0], np.where(labels == 1)[0]
    rng.shuffle(i0)
    rng.shuffle(i1)
    cap = label_number // 2
    train = np.append(i0[: min(int(0.5 * len(i0)), cap)], i1[: min(int(0.5 * len(i1)), cap)])
    val = np.append(
        i0[int(0.5 * len(i0)) : int(0.75 * len(i0))], i1[int(0.5 * len(i1)) : int(0.75 * len(i1))]
    )
    test = np.append(i0[int(0.75 * len(i0)) :], i1[int(0.75 * len(i1)) :])
    return train, val, test


def _reference_fairgnn(labels, sens, label_number, seed, test_idx):
    rng = random.Random(seed)
    idx = np.where(labels >= 0)[0]
    rng.shuffle(idx)
    train = idx[: min(int(0.5 * len(idx)), label_number)]
    val = idx[int(0.5 * len(idx)) : int(0.75 * len(idx))]
    test = idx[label_number:] if test_idx else idx[int(0.75 * len(idx)) :]
    if test_idx:
        val = test
    test = np.asarray(sorted(set(np.where(sens >= 0)[0]) & set(test)))
    return train, val, test


def _as_sets(split):
    return [set(torch.nonzero(m).flatten().tolist()) for m in split]


@pytest.mark.parametrize("seed", [20, 3])
@pytest.mark.parametrize("label_number", [100, 6000])
def test_nifty_split_matches_the_reference_loader(seed, label_number):
    labels = np.random.default_rng(seed).integers(0, 2, 3001)
    split = nifty_split(torch.from_numpy(labels), label_number, seed)
    expected = _reference_nifty(labels, label_number, seed)
    got = _as_sets((split.train_mask, split.val_mask, split.test_mask))
    assert got == [set(e.tolist()) for e in expected]
    train_y = labels[split.train_mask.numpy()]
    if label_number == 100:  # balanced and capped
        assert (train_y == 0).sum() == (train_y == 1).sum() == 50
    assert not (split.train_mask & split.test_mask).any()


@pytest.mark.parametrize("test_idx", [False, True])
def test_fairgnn_split_matches_the_reference_loader(test_idx):
    rng = np.random.default_rng(5)
    labels = rng.integers(-1, 3, 500)
    sens = rng.integers(-1, 2, 500)
    split = fairgnn_split(
        torch.from_numpy(np.maximum(labels, 0)),
        sens >= 0,
        100,
        20,
        test_after_label_number=test_idx,
        labelled=labels >= 0,
    )
    expected = _reference_fairgnn(labels, sens, 100, 20, test_idx)
    got = _as_sets((split.train_mask, split.val_mask, split.test_mask))
    assert got == [set(np.asarray(e).tolist()) for e in expected]


def test_split_errors():
    with pytest.raises(InvalidInputError, match="both labels"):
        nifty_split(torch.zeros(10, dtype=torch.long), 4)
    with pytest.raises(InvalidInputError, match="label_number"):
        nifty_split(torch.tensor([0, 1, 0, 1]), 1)
    with pytest.raises(InvalidInputError, match="1-D integer"):
        nifty_split(torch.zeros(4), 4)


# --------------------------------------------------------------------------- NIFTY layout
def _credit_frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "NoDefaultNextMonth": rng.integers(0, 2, n),
            "Married": rng.integers(0, 2, n),
            "Single": rng.integers(0, 2, n),
            "Age": rng.integers(0, 2, n),
            "Bill": rng.integers(0, 8, n) * 10,
            "Payment": rng.integers(0, 5, n) * 10,
        }
    )


def _credit_root(tmp_path, n: int = 60):
    (tmp_path / "credit").mkdir(parents=True)
    _credit_frame(n).to_csv(tmp_path / "credit" / "credit.csv", index=False)
    return tmp_path


def test_load_nifty_split_option(tmp_path):
    root = _credit_root(tmp_path)
    strat = load_nifty("credit", root)
    assert (strat.train_mask | strat.val_mask | strat.test_mask).all()
    pub = load_nifty("credit", root, split="nifty", label_number=10)
    expected = _reference_nifty(pub.y.numpy(), 10, 20)
    assert _as_sets((pub.train_mask, pub.val_mask, pub.test_mask)) == [
        set(e.tolist()) for e in expected
    ]
    other = load_nifty("credit", root, split="nifty", label_number=10, seed=1)
    assert not torch.equal(other.test_mask, pub.test_mask)
    with pytest.raises(InvalidInputError, match="split"):
        load_nifty("credit", root, split="public")


# --------------------------------------------------------------------------- FairGNN layout
def _fairgnn_folder(tmp_path, name: str, stem: str, label: str, sens: str, n: int = 50):
    rng = np.random.default_rng(7)
    ids = rng.choice(10**15, size=n, replace=False) + 10**14  # large, unordered user ids
    frame = pd.DataFrame(
        {
            "user_id": ids,
            label: rng.integers(-1, 4, n),
            "AGE": rng.integers(18, 40, n),
            "FG%": rng.random(n).round(3),
            sens: rng.integers(0, 2, n),
        }
    )
    frame.loc[3, sens] = -1  # unknown sensitive value
    pairs = rng.integers(0, n, size=(150, 2))
    folder = tmp_path / name
    folder.mkdir(parents=True)
    frame.to_csv(folder / f"{stem}.csv", index=False)
    np.savetxt(folder / f"{stem}_relationship.txt", ids[pairs], fmt="%d", delimiter="\t")
    return frame, pairs


@pytest.mark.parametrize(
    "name, stem, label, sens",
    [
        ("nba", "nba", "SALARY", "country"),
        ("pokec_z", "region_job", "I_am_working_in_field", "region"),
        ("pokec_n", "region_job_2", "I_am_working_in_field", "region"),
    ],
)
def test_fairgnn_layout(tmp_path, name, stem, label, sens):
    frame, pairs = _fairgnn_folder(tmp_path, name, stem, label, sens)
    data = load_nifty(name, tmp_path, standardize=False)
    raw_y = frame[label].to_numpy()
    assert data.label_mask.tolist() == (raw_y >= 0).tolist()
    assert data.y.tolist() == np.where(raw_y >= 0, np.minimum(raw_y, 1), 0).tolist()
    assert data.sensitive_mask[3].item() is False and data.sensitive[3].item() == 0
    assert data.sensitive_name == sens
    assert data.feature_names == ["AGE", "FG%", sens]  # user_id and the label are not features
    assert torch.equal(data.x[:, data.sensitive_index].long(), data.sensitive)
    expected = {(int(a), int(b)) for a, b in pairs if a != b}
    expected |= {(b, a) for a, b in expected}
    assert set(zip(*data.edge_index.tolist(), strict=True)) == expected
    evaluable = data.label_mask & data.sensitive_mask
    for mask in (data.train_mask, data.val_mask, data.test_mask):
        assert not (mask & ~evaluable).any()
    assert (data.train_mask | data.val_mask | data.test_mask).sum() == evaluable.sum()
    published = load_nifty(name, tmp_path, split="fairgnn", label_number=10)
    expected_split = _reference_fairgnn(
        raw_y, frame[sens].to_numpy(), 10, 20, test_idx=name == "nba"
    )
    got = _as_sets((published.train_mask, published.val_mask, published.test_mask))
    assert got == [set(np.asarray(e).tolist()) for e in expected_split]


def test_fairgnn_layout_errors(tmp_path):
    frame, _ = _fairgnn_folder(tmp_path, "nba", "nba", "SALARY", "country")
    rel = tmp_path / "nba" / "nba_relationship.txt"
    rel.write_text(f"{frame.user_id[0]}\t123\n")
    with pytest.raises(InvalidInputError, match="absent from .*user_id.*123"):
        load_nifty("nba", tmp_path)
    rel.write_text(f"{frame.user_id[0]}\t{frame.user_id[1]}\n")
    frame.loc[1, "user_id"] = frame.user_id[0]
    frame.to_csv(tmp_path / "nba" / "nba.csv", index=False)
    with pytest.raises(InvalidInputError, match="user_id is not unique"):
        load_nifty("nba", tmp_path)
    rel.unlink()
    with pytest.raises(InvalidInputError, match="nba_relationship.txt .*from https://"):
        load_nifty("nba", tmp_path)


# --------------------------------------------------------------------------- downloads
def _serve(monkeypatch, tmp_path, sha: str | None):
    src = tmp_path / "remote"
    src.mkdir(exist_ok=True)
    _credit_frame().to_csv(src / "credit.csv", index=False)
    remote = dl.RemoteFile("credit.csv", (src / "credit.csv").as_uri(), sha)
    monkeypatch.setitem(dl.DATASET_FILES, "credit", (remote,))
    return hashlib.sha256((src / "credit.csv").read_bytes()).hexdigest()


def test_download_with_a_matching_hash(tmp_path, monkeypatch):
    good = _serve(monkeypatch, tmp_path, None)
    _serve(monkeypatch, tmp_path, good)
    with pytest.raises(InvalidInputError, match="credit.csv .*from file://"):
        load_nifty("credit", tmp_path / "root")  # download is off by default
    data = load_nifty("credit", tmp_path / "root", download=True)
    assert data.num_nodes == 60
    assert dl.sha256_file(tmp_path / "root" / "credit" / "credit.csv") == good


def test_download_with_a_wrong_hash_leaves_no_file(tmp_path, monkeypatch):
    _serve(monkeypatch, tmp_path, "0" * 64)
    with pytest.raises(InvalidInputError, match="does not match the expected 0000"):
        load_nifty("credit", tmp_path / "root", download=True)
    assert list((tmp_path / "root" / "credit").iterdir()) == []


def test_download_with_an_unknown_hash_warns_or_refuses(tmp_path, monkeypatch, caplog):
    good = _serve(monkeypatch, tmp_path, None)
    with pytest.raises(InvalidInputError, match="no SHA-256 is known"):
        load_nifty("credit", tmp_path / "strict", download=True, strict_hash=True)
    assert not (tmp_path / "strict" / "credit" / "credit.csv").exists()
    with caplog.at_level(logging.WARNING, logger="gnnaudit.datasets"):
        load_nifty("credit", tmp_path / "root", download=True)
    assert good in caplog.text


def test_download_of_a_missing_url_is_a_clear_error(tmp_path, monkeypatch):
    remote = dl.RemoteFile("credit.csv", (tmp_path / "nothing.csv").as_uri(), None)
    monkeypatch.setitem(dl.DATASET_FILES, "credit", (remote,))
    with pytest.raises(InvalidInputError, match="cannot download"):
        load_nifty("credit", tmp_path / "root", download=True)
    assert list((tmp_path / "root" / "credit").iterdir()) == []


def test_recorded_hashes_cover_the_nifty_files():
    for name in ("credit", "bail", "german", "nba"):
        for remote in dl.DATASET_FILES[name]:
            assert remote.sha256 is not None and len(remote.sha256) == 64
            assert remote.url.startswith("https://raw.githubusercontent.com/")


# --------------------------------------------------------------------------- NiftyDataset
def test_nifty_dataset_downloads_processes_and_reloads(tmp_path, monkeypatch):
    good = _serve(monkeypatch, tmp_path, None)
    _serve(monkeypatch, tmp_path, good)
    calls = []

    def pre(data):
        calls.append(1)
        data.tag = torch.tensor([7])
        return data

    ds = NiftyDataset(
        tmp_path / "root", "credit", split="nifty", label_number=10, pre_transform=pre
    )
    assert len(ds) == 1 and ds[0].num_nodes == 60 and ds[0].tag.item() == 7
    direct = load_nifty("credit", tmp_path / "root", split="nifty", label_number=10)
    assert torch.equal(ds[0].edge_index, direct.edge_index)
    assert torch.equal(ds[0].train_mask, direct.train_mask)
    again = NiftyDataset(
        tmp_path / "root",
        "credit",
        split="nifty",
        label_number=10,
        pre_transform=pre,
        transform=lambda d: d.subgraph(torch.arange(10)),
    )
    assert len(calls) == 1  # read back, not processed again
    assert again[0].num_nodes == 10
    assert again[0].feature_names == direct.feature_names
    # the standardisation's inverse travels with the processed file (feature_units)
    assert again[0].feature_mean == direct.feature_mean and len(direct.feature_mean) == 4
    assert ds[0].feature_scale == direct.feature_scale
    with pytest.raises(InvalidInputError, match="name"):
        NiftyDataset(tmp_path / "root", "adult")


def test_nifty_dataset_refuses_a_processed_file_that_needs_unpickling(tmp_path, monkeypatch):
    good = _serve(monkeypatch, tmp_path, None)
    _serve(monkeypatch, tmp_path, good)
    ds = NiftyDataset(tmp_path / "root", "credit")
    path = ds.processed_paths[0]
    torch.save((ds._data.to_dict(), None, random.Random), path)
    with pytest.raises(InvalidInputError, match="refused"):
        NiftyDataset(tmp_path / "root", "credit")


# --------------------------------------------------------------------------- CLI and audit_model
def test_cli_audit_on_a_credit_folder_without_edges(tmp_path, capsys):
    from gnnaudit.audit import AuditReport
    from gnnaudit.cli.main import main

    root = _credit_root(tmp_path / "data", n=120)
    out = tmp_path / "out"
    args = ["audit", "--dataset", "credit", "--root", str(root), "--split", "nifty"]
    args += ["--label-number", "20", "--epochs", "5", "--no-progress", "--no-finetune"]
    assert main([*args, "--out", str(out)]) == 0
    report = AuditReport.from_json(out / "report.json")
    assert report.dataset["nodes"] == 120
    assert report.section("group_fairness").data["sensitive_name"] == "Age"
    bad = ["audit", "--dataset", "cora", "--root", str(root), "--split", "nifty"]
    assert main([*bad, "--out", str(tmp_path / "bad")]) == 2
    assert "published split of the fair-GNN graphs" in capsys.readouterr().err


def test_load_nifty_output_feeds_audit_model(tmp_path):
    from gnnaudit import audit_model

    data = load_nifty("credit", _credit_root(tmp_path, n=80), split="nifty", label_number=20)
    torch.manual_seed(0)
    weight = torch.randn(data.num_features, 2)
    report = audit_model(lambda x, ei: x @ weight, data, finetune=False, progress=False)
    assert report.dataset["nodes"] == 80
