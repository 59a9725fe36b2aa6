"""End to end: a user's CSV folder (own column names, text columns) and a model trained on
standardised features, audited with ``gnnaudit audit`` (issue 26, items 1 and 2)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import torch

from gnnaudit.audit import AuditReport
from gnnaudit.audit.pipeline import apply_transform
from gnnaudit.cli._tables import far_below
from gnnaudit.cli.main import main
from gnnaudit.datasets import read_graph
from gnnaudit.datasets.scaler import load_standardizer
from gnnaudit.errors import InvalidInputError

MODEL_CODE = textwrap.dedent(
    """
    import torch
    from torch_geometric.nn import GCNConv


    class GCN(torch.nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.conv1 = GCNConv(in_channels, 16)
            self.conv2 = GCNConv(16, out_channels)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


    def double_x(data):
        data.x = data.x * 2
        return data
    """
)
TABLE_FLAGS = [
    "--id-column", "user_id", "--source-column", "src", "--target-column", "dst",
    "--label", "approved", "--sensitive", "gender", "--split-column", "split",
]  # fmt: skip


def _write_folder(folder, n=400, seed=0):
    rng = np.random.default_rng(seed)
    gender = rng.choice(["F", "M"], n)
    income = rng.normal(50_000, 15_000, n).round(2)
    age = rng.integers(18, 80, n)
    region = rng.choice(["north", "south", "west"], n)
    score = (income - 50_000) / 15_000 + 0.4 * (gender == "M") + rng.normal(0, 0.5, n)
    nodes = pd.DataFrame(
        {
            "user_id": [f"u{i:04d}" for i in rng.permutation(n)],
            "age": age,
            "income": income,
            "region": region,
            "gender": gender,
            "split": rng.choice(["Train", "train", "VAL", "test"], n, p=[0.3, 0.3, 0.1, 0.3]),
            "approved": np.where(score > 0, "yes", "no"),
        }
    )
    # homophilous edges: 80% join two nodes of the same label
    label = score > 0
    src = rng.integers(0, n, 3 * n)
    pool = {v: np.flatnonzero(label == v) for v in (False, True)}
    same = rng.random(3 * n) < 0.8
    dst = rng.integers(0, n, 3 * n)
    for v in (False, True):
        pick = same & (label[src] == v)
        dst[pick] = rng.choice(pool[v], int(pick.sum()))
    ids = nodes["user_id"].to_numpy()
    folder.mkdir()
    nodes.to_csv(folder / "nodes.csv", index=False)
    pd.DataFrame({"src": ids[src], "dst": ids[dst]}).to_csv(folder / "edges.csv", index=False)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The folder, the user's model file, weights trained on standardised features, the scaler
    (as data) and the test accuracy the user measured themselves."""
    from sklearn.preprocessing import StandardScaler

    root = tmp_path_factory.mktemp("tables")
    _write_folder(root / "graph")
    (root / "my_models.py").write_text(MODEL_CODE)
    data = read_graph(
        root / "graph",
        id_column="user_id",
        source_column="src",
        target_column="dst",
        label="approved",
        sensitive="gender",
        split_column="split",
    )
    numeric = ["age", "income"]
    frame = pd.DataFrame(data.x.numpy(), columns=data.feature_names)
    scaler = StandardScaler().fit(frame.loc[data.train_mask.numpy(), numeric])
    np.savez(
        root / "scaler.npz",
        mean_=scaler.mean_,
        scale_=scaler.scale_,
        feature_names_in_=scaler.feature_names_in_.astype(str),
    )
    x = frame.copy()
    x[numeric] = scaler.transform(frame[numeric])
    x = torch.tensor(x.to_numpy(), dtype=torch.float32)
    namespace: dict = {}
    exec(MODEL_CODE, namespace)
    torch.manual_seed(0)
    model = namespace["GCN"](x.size(1), 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(80):
        opt.zero_grad()
        out = model(x, data.edge_index)
        torch.nn.functional.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
        opt.step()
    model.eval()
    torch.save(model.state_dict(), root / "weights.pt")
    with torch.no_grad():
        pred = model(x, data.edge_index).argmax(1)
        raw_pred = model(data.x, data.edge_index).argmax(1)
    test = data.test_mask
    return {
        "root": root,
        "accuracy": float((pred[test] == data.y[test]).double().mean()),
        "raw_accuracy": float((raw_pred[test] == data.y[test]).double().mean()),
        "num_test": int(test.sum()),
        "data": data,
    }


def _audit(trained, out, *extra):
    root = trained["root"]
    argv = [
        "audit", "--graph", str(root / "graph"), *TABLE_FLAGS,
        "--model", f"{root / 'my_models.py'}:GCN", "--weights", str(root / "weights.pt"),
        "--no-progress", "--out", str(out), *extra,
    ]  # fmt: skip
    return main(argv)


def test_scaler_passed_gives_the_users_own_accuracy(trained, tmp_path, capsys):
    code = _audit(
        trained,
        tmp_path / "out",
        "--standardize",
        str(trained["root"] / "scaler.npz"),
        "--expected-accuracy",
        f"{trained['accuracy']:.4f}",
    )
    assert code == 0, capsys.readouterr().err
    report = AuditReport.from_json(tmp_path / "out")
    assert report.model["test_accuracy"] == pytest.approx(trained["accuracy"], abs=1e-12)
    assert report.model["standardize"].endswith("scaler.npz")
    assert report.dataset["num_nodes"] == 400 if "num_nodes" in report.dataset else True
    # the discrimination table shows the user's units: income bins are the raw quantiles
    table = report.table("discrimination", "scores")
    raw = pd.read_csv(trained["root"] / "graph" / "nodes.csv")
    assert not any(str(f).startswith("region=") for f in table["feature"])
    assert set(table.loc[table["feature"] == "region", "value"]) <= {
        *(v for r in ("north", "south", "west") for v in (r, f"not {r}"))
    }
    assert set(table.loc[table["feature"] == "gender", "value"]) <= {"F", "M"}
    assert {"region", "gender", "income", "age"} <= set(table["feature"])
    income = table.loc[table["feature"] == "income", "value"]
    edges = np.array([float(e) for label in income for e in label.strip("[])").split(", ")])
    values = raw["income"].to_numpy()
    oracle = np.array([values.min(), *np.quantile(values, [0.25, 0.5, 0.75]), values.max()])
    assert (np.abs(edges[:, None] - oracle[None, :]).min(axis=1) < 6e-4 * np.abs(edges)).all()
    assert any("original units" in note for note in report.section("discrimination").notes)


def test_raw_features_with_expected_accuracy_name_the_preprocessing(trained, tmp_path, capsys):
    assert far_below(trained["raw_accuracy"], trained["num_test"], trained["accuracy"])[0]
    code = _audit(trained, tmp_path / "out", "--expected-accuracy", f"{trained['accuracy']:.4f}")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "not be preprocessed as in training" in err and "--standardize" in err
    assert f"accuracy {trained['raw_accuracy']:.3f}" in err
    assert not (tmp_path / "out").exists()


def test_far_below_rule():
    assert far_below(0.60, 500, 0.67)[0]  # 7 points on 500 nodes: outside the interval
    assert not far_below(0.60, 30, 0.67)[0]  # 30 nodes: within chance
    assert not far_below(0.64, 100_000, 0.67)[0]  # 3 points: under the margin


def test_transform_runs_on_a_copy(trained, tmp_path):
    root = trained["root"]
    data = trained["data"]
    before = data.x.clone()
    namespace: dict = {}
    exec(MODEL_CODE, namespace)
    out = apply_transform(data, namespace["double_x"])
    assert torch.equal(out.x, 2 * before) and torch.equal(data.x, before)
    with pytest.raises(InvalidInputError, match="must return the graph"):
        apply_transform(data, lambda d: None)
    code = _audit(trained, tmp_path / "t", "--transform", f"{root / 'my_models.py'}:double_x")
    assert code == 0 and AuditReport.from_json(tmp_path / "t").model["transform"].endswith(
        "double_x"
    )


def test_scaler_files_are_data_never_pickles(tmp_path, trained):
    import pickle

    (tmp_path / "s.pkl").write_bytes(pickle.dumps({"mean_": [0.0]}))
    with pytest.raises(InvalidInputError, match="never loaded"):
        load_standardizer(tmp_path / "s.pkl")
    (tmp_path / "s.json").write_text(json.dumps({"mean_": [1.0], "scale_": [2.0]}))
    with pytest.raises(InvalidInputError, match="scaler has 1 columns but the graph has"):
        load_standardizer(tmp_path / "s.json").apply(trained["data"])
    (tmp_path / "n.json").write_text(
        json.dumps({"mean_": [1.0], "scale_": [2.0], "feature_names_in_": ["salary"]})
    )
    with pytest.raises(InvalidInputError, match="'salary' of the scaler are not features"):
        load_standardizer(tmp_path / "n.json").apply(trained["data"])
    (tmp_path / "z.json").write_text(json.dumps({"mean_": [1.0], "scale_": [0.0]}))
    with pytest.raises(InvalidInputError, match="scale_ must be positive"):
        load_standardizer(tmp_path / "z.json")


def test_wrong_column_fails_before_torch_is_imported(trained, tmp_path):
    root = trained["root"]
    script = (
        "import sys; from gnnaudit.cli.main import main; "
        f"rc = main(['audit', '--graph', {str(root / 'graph')!r}, '--id-column', 'user', "
        f"'--model', {str(root / 'my_models.py') + ':GCN'!r}, '--out', {str(tmp_path / 'o')!r}]); "
        "print(rc, 'torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert done.stderr.count("\n") == 1
    assert "--id-column: 'user' is not a column" in done.stderr and "'user_id'" in done.stderr


def test_missing_label_names_the_label_flag(trained, tmp_path, capsys):
    root = trained["root"]
    flags = [f for f in TABLE_FLAGS if f not in ("--label", "approved")]
    code = main(
        [
            "audit",
            "--graph",
            str(root / "graph"),
            *flags,
            "--model",
            f"{root / 'my_models.py'}:GCN",
            "--weights",
            str(root / "weights.pt"),
            "--no-progress",
            "--out",
            str(tmp_path / "o"),
        ]  # fmt: skip
    )
    err = capsys.readouterr().err
    assert code == 2 and "--label COLUMN" in err
