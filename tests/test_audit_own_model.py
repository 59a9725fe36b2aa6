"""Auditing a user's own model on a user's own graph: audit_model and ``gnnaudit audit``."""

from __future__ import annotations

import pickle
import textwrap

import numpy as np
import pytest
import torch

import gnnaudit
from gnnaudit.audit import AuditReport
from gnnaudit.cli.main import main
from gnnaudit.datasets import load_graph, save_graph, synthetic_credit_graph
from gnnaudit.errors import InvalidInputError

USER_CODE = textwrap.dedent(
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


    class Weighted(torch.nn.Module):
        '''Needs an extra argument: audited through forward_kwargs.'''

        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.conv = GCNConv(in_channels, out_channels)

        def forward(self, x, edge_index, edge_weight):
            return self.conv(x, edge_index, edge_weight)


    def returns_nothing(in_channels, out_channels):
        return None


    class Boom(torch.nn.Module):
        '''A model whose forward fails: its own error must reach the user.'''

        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.lin = torch.nn.Linear(in_channels, out_channels)

        def forward(self, x, edge_index):
            raise RuntimeError("boom")
    """
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A user's model file, a graph written as .pt and as CSV, and trained weights."""
    root = tmp_path_factory.mktemp("own")
    (root / "user_models.py").write_text(USER_CODE)
    data = synthetic_credit_graph(num_nodes=300, bias=3.0, seed=5)
    save_graph(data, root / "graph.pt")
    save_graph(data, root / "graph_csv")
    namespace: dict = {}
    exec(USER_CODE, namespace)  # the user trains with their own loop, outside gnnaudit
    torch.manual_seed(0)
    model = namespace["GCN"](data.num_features, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(60):
        opt.zero_grad()
        out = model(data.x, data.edge_index)
        torch.nn.functional.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
        opt.step()
    model.eval()
    torch.save(model.state_dict(), root / "weights.pt")
    with torch.no_grad():
        pred = model(data.x, data.edge_index).argmax(1)
    accuracy = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())
    return {"root": root, "data": data, "model": model, "accuracy": accuracy}


def _cli(workspace, graph, out, *extra):
    root = workspace["root"]
    return main(
        [
            "audit",
            "--graph",
            str(graph),
            "--model",
            f"{root / 'user_models.py'}:GCN",
            "--weights",
            str(root / "weights.pt"),
            "--sensitive",
            "gender",
            "--no-progress",
            "--out",
            str(out),
            *extra,
        ]
    )


@pytest.mark.parametrize("graph", ["graph.pt", "graph_csv"])
def test_cli_audits_a_user_model_from_pt_and_csv(workspace, graph, tmp_path, capsys):
    assert _cli(workspace, workspace["root"] / graph, tmp_path / "out") == 0
    text = capsys.readouterr().out
    report = AuditReport.from_json(tmp_path / "out")
    # the report's test accuracy is the one computed independently above
    assert report.model["test_accuracy"] == pytest.approx(workspace["accuracy"])
    assert report.model["class"] == "GCN"
    assert report.verdict in text
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        ".gnnaudit-manifest.json",
        "report.html",
        "report.json",
        "report.md",
    ]


def test_cli_and_audit_model_give_identical_findings(workspace, tmp_path):
    assert _cli(workspace, workspace["root"] / "graph.pt", tmp_path / "cli", "--seed", "3") == 0
    data = load_graph(workspace["root"] / "graph.pt", sensitive="gender")
    report = gnnaudit.audit_model(
        workspace["model"], data, sensitive="gender", random_state=3, progress=False
    )
    via_cli = AuditReport.from_json(tmp_path / "cli")
    assert via_cli.findings.equals(report.findings)
    assert via_cli.verdict == report.verdict


def test_audit_model_writes_reports_and_takes_forward_kwargs(workspace, tmp_path):
    namespace: dict = {}
    exec(USER_CODE, namespace)
    data = workspace["data"]
    model = namespace["Weighted"](data.num_features, 2)
    weight = torch.ones(data.edge_index.size(1))
    report = gnnaudit.audit_model(
        model,
        data,
        forward_kwargs={"edge_weight": weight},
        out=tmp_path / "r",
        progress=False,
    )
    assert (tmp_path / "r" / "report.html").is_file()
    assert AuditReport.from_json(tmp_path / "r").verdict == report.verdict
    with pytest.raises(InvalidInputError, match="already holds"):
        gnnaudit.audit_model(
            model, data, forward_kwargs={"edge_weight": weight}, out=tmp_path / "r", progress=False
        )
    # without the argument the model fails: its own error propagates, with a note naming the
    # audit stage (it is the user's error, not invalid input)
    with pytest.raises(TypeError) as info:
        gnnaudit.audit_model(model, data, progress=False)
    assert not isinstance(info.value, InvalidInputError)
    assert any("raised by your model during" in n for n in info.value.__notes__)


def test_labels_are_optional(workspace):
    data = workspace["data"].clone()
    del data.y
    report = gnnaudit.audit_model(workspace["model"], data, progress=False)
    assert report.section("error_verification").status == "skipped"
    assert "no labels" in report.section("error_verification").summary
    assert report.has_section("group_fairness")


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _bad(workspace, tmp_path):
    """(argument list, expected message fragment) for every listed bad input."""
    root = workspace["root"]
    model = f"{root / 'user_models.py'}:GCN"
    graph = str(root / "graph.pt")
    evil = tmp_path / "evil.pt"
    torch.save({"x": _Payload(str(tmp_path / "pwned"))}, evil)
    nodes = (root / "graph_csv" / "nodes.csv").read_text().splitlines()
    missing_col = tmp_path / "missing_col"
    missing_col.mkdir()
    (missing_col / "nodes.csv").write_text("\n".join(nodes))
    (missing_col / "edges.csv").write_text("from,to\n0,1\n")
    unknown_ids = tmp_path / "unknown_ids"
    unknown_ids.mkdir()
    (unknown_ids / "nodes.csv").write_text("\n".join(nodes))
    (unknown_ids / "edges.csv").write_text("source,target\nnot_a_node,also_not\n")
    bad_mask = tmp_path / "bad_mask"
    bad_mask.mkdir()
    head, *rows = nodes
    (bad_mask / "nodes.csv").write_text("\n".join([head + ",audit"] + [r + ",maybe" for r in rows]))
    (bad_mask / "edges.csv").write_text((root / "graph_csv" / "edges.csv").read_text())
    wrong_shape = tmp_path / "wrong.pt"
    state = torch.load(root / "weights.pt", weights_only=True)
    state["conv1.lin.weight"] = torch.zeros(16, 3)
    torch.save(state, wrong_shape)
    weights = str(root / "weights.pt")
    return [
        (["--graph", str(evil), "--model", model, "--weights", weights], "refused"),
        (["--graph", str(missing_col), "--model", model, "--weights", weights], "source"),
        (["--graph", str(unknown_ids), "--model", model, "--weights", weights], "not_a_node"),
        (
            [
                "--graph",
                str(bad_mask),
                "--mask-column",
                "audit",
                "--model",
                model,
                "--weights",
                weights,
            ],
            "audit",
        ),
        (["--graph", graph, "--model", f"{root / 'user_models.py'}:returns_nothing"], "nn.Module"),
        (["--graph", graph, "--model", model, "--weights", str(wrong_shape)], "conv1.lin.weight"),
        (["--graph", graph, "--model", "nowhere.py:GCN", "--weights", weights], "does not exist"),
        (
            ["--graph", graph, "--model", model, "--weights", weights, "--sensitive", "nope"],
            "nope",
        ),
        *(
            []
            if torch.cuda.is_available()
            else [
                (
                    ["--graph", graph, "--model", model, "--weights", weights, "--device", "cuda"],
                    "CUDA",
                )
            ]
        ),
    ]


def test_every_bad_input_exits_2_with_one_line(workspace, tmp_path, capsys):
    for args, fragment in _bad(workspace, tmp_path):
        code = main(["audit", *args, "--no-progress", "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err.strip()
        assert code == 2, (args, err)
        assert fragment in err, (args, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert not (tmp_path / "o").exists()  # nothing half-written
    assert not (tmp_path / "pwned").exists()


def test_single_valued_sensitive_column_is_refused(workspace, tmp_path):
    data = workspace["data"].clone()
    data.x[:, -1] = 1.0
    with pytest.raises(InvalidInputError, match="single value"):
        gnnaudit.audit_model(workspace["model"], data, sensitive="gender", progress=False)


def test_out_folder_with_other_files_needs_force(workspace, tmp_path, capsys):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert _cli(workspace, workspace["root"] / "graph.pt", out) == 2
    assert "--force" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "mine"
    assert _cli(workspace, workspace["root"] / "graph.pt", out, "--force") == 0
    assert (out / "report.json").is_file()
    assert (out / "keep.txt").read_text() == "mine"  # --force never touches the user's files


def test_pickle_file_disguised_as_graph_never_runs(workspace, tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "graph.pt"
    with open(path, "wb") as fh:
        pickle.dump({"x": _Payload(str(marker))}, fh)
    with pytest.raises(InvalidInputError):
        load_graph(path)
    assert not marker.exists()
    assert np.isfinite(workspace["accuracy"])


def test_model_on_another_device_than_asked_is_named(workspace):
    """An explicit device= never moves the caller's model; a mismatch is a clear error."""
    model = workspace["model"]
    elsewhere = type(model)(workspace["data"].num_features, 2).to("meta")
    with pytest.raises(
        InvalidInputError, match=r"device='cpu' but the model's weights are on meta"
    ):
        gnnaudit.audit_model(elsewhere, workspace["data"], device="cpu", progress=False)
    # the same model on the asked device is accepted (the check does not refuse a match)
    report = gnnaudit.audit_model(model, workspace["data"], device="cpu", progress=False)
    assert report.model["device"] == "cpu"


def test_an_error_of_the_users_model_propagates_as_itself(workspace):
    namespace: dict = {}
    exec(USER_CODE, namespace)
    data = workspace["data"]
    model = namespace["Boom"](data.num_features, 2)
    with pytest.raises(RuntimeError, match="boom") as info:
        gnnaudit.audit_model(model, data, sensitive="gender", progress=False)
    assert type(info.value) is RuntimeError  # not translated into "invalid input"
    notes = getattr(info.value, "__notes__", [])
    assert notes == ["gnnaudit: raised by your model during the audit's predictions"]
    assert any("forward" in str(frame.name) for frame in info.traceback)  # its traceback kept
    # the evidence search's own model call marks its stage too
    from gnnaudit.audit import CounterfactualEvidence

    with pytest.raises(RuntimeError, match="boom") as info:
        CounterfactualEvidence().fit(data, model=model)
    assert "CounterfactualEvidence.fit" in info.value.__notes__[0]


def test_cli_prints_one_line_for_an_error_of_the_users_model(workspace, tmp_path, capsys):
    root = workspace["root"]
    code = main(
        [
            "audit",
            "--graph",
            str(root / "graph.pt"),
            "--model",
            f"{root / 'user_models.py'}:Boom",
            "--no-progress",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err == (
        "gnnaudit audit: error: your model raised RuntimeError: boom during the audit's predictions"
    )
    assert not (tmp_path / "o").exists()
