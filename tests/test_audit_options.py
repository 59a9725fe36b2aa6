"""Options live on the units: run_audit's small signature, AuditConfig / default_units, and an
option no unit uses raising with its name."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

import gnnaudit
from gnnaudit.audit import AuditOptions, EvidencePairsUnit, ModelQuality, SensitivityUnit
from gnnaudit.audit.pipeline import AuditConfig, RunSettings, default_units, run_audit
from gnnaudit.audit.pipeline.config import option_names, split_options
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError


@pytest.fixture(scope="module")
def graph():
    data = synthetic_credit_graph(num_nodes=80, seed=1)
    linear = torch.nn.Linear(data.num_features, 2)
    torch.nn.init.constant_(linear.weight, 0.1)

    def predict(x, edge_index):
        return linear(x)

    return data, predict


def test_run_audit_signature_keeps_what_every_unit_shares():
    params = inspect.signature(run_audit).parameters
    assert len(params) <= 10
    assert list(params)[:4] == ["model", "data", "sensitive", "units"]
    assert {"mask", "random_state", "progress", "device"} <= set(params)
    assert params["options"].kind is inspect.Parameter.VAR_KEYWORD


def test_option_names_are_the_dataclass_fields():
    names = option_names()
    assert names["units"] == tuple(f.name for f in dataclasses.fields(AuditConfig))
    assert names["run"] == tuple(f.name for f in dataclasses.fields(RunSettings))
    shared = {f.name for f in dataclasses.fields(AuditOptions)}
    assert set(names["shared"]) == shared - {"random_state", "progress", "device", "extra"}
    # audit_model keeps no list of its own: everything but out / force / transform (applied
    # to a copy of the graph before the audit) and root (where data given as a dataset name
    # is loaded from) goes to run_audit
    params = inspect.signature(gnnaudit.audit_model).parameters
    assert set(params) == {
        "model",
        "data",
        "sensitive",
        "out",
        "force",
        "transform",
        "root",
        "options",
    }


def test_unknown_option_raises_naming_it(graph):
    data, predict = graph
    with pytest.raises(InvalidInputError, match="bogus_option"):
        run_audit(None, data, predict_fn=predict, bogus_option=1, progress=False)
    with pytest.raises(InvalidInputError, match="bogus_option"):
        gnnaudit.audit_model(None, data, predict_fn=predict, bogus_option=1, progress=False)


@pytest.mark.parametrize(
    ("name", "value", "unit"),
    [
        ("top_pairs", 3, "EvidencePairsUnit"),
        ("min_support", 2, "DiscriminationUnit"),
        ("bins", 3, "DiscriminationUnit"),
        ("ks", (5,), "ErrorVerificationUnit"),
        ("model_hops", 1, "SensitivityUnit"),
        ("finetune", True, "EvidenceFinetuneUnit"),
        ("finetune_kwargs", {"m": 3}, "EvidenceFinetuneUnit"),
        ("mitigate", True, "MitigationUnit"),
        ("mitigate_kwargs", {"epochs": 1}, "MitigationUnit"),
    ],
)
def test_a_default_unit_option_with_explicit_units_raises(graph, name, value, unit):
    """With ``units=`` given, no unit in the list uses a default-unit option: it is named,
    never silently ignored."""
    data, predict = graph
    with pytest.raises(InvalidInputError, match=rf"{name} \({unit}\)"):
        run_audit(None, data, units=[ModelQuality()], predict_fn=predict, **{name: value})


def test_config_with_explicit_units_raises(graph):
    data, predict = graph
    with pytest.raises(InvalidInputError, match="config="):
        run_audit(None, data, units=[ModelQuality()], predict_fn=predict, config=AuditConfig())
    with pytest.raises(InvalidInputError, match="config must be an AuditConfig"):
        run_audit(None, data, predict_fn=predict, config={"top_pairs": 3})


def test_default_units_from_a_config():
    units = default_units(AuditConfig(top_pairs=3, model_hops=1))
    pairs = next(u for u in units if isinstance(u, EvidencePairsUnit))
    assert (pairs.top, pairs.pool) == (3, 100)
    assert next(u for u in units if isinstance(u, SensitivityUnit)).num_hops == 1
    assert [u.name for u in default_units(bins=3)] == [u.name for u in default_units()]
    assert default_units(embedding=True)[-1].name == "embedding_structure"
    with pytest.raises(InvalidInputError, match="nope"):
        default_units(nope=1)
    with pytest.raises(InvalidInputError, match="top_pairs"):
        AuditConfig(top_pairs=0)
    with pytest.raises(InvalidInputError, match="finetune"):
        AuditConfig(finetune="yes")


def test_options_update_the_config_and_reach_the_report(graph):
    data, predict = graph
    shared, run, cfg = split_options(
        {"k": 4, "top_pairs": 2, "dataset_name": "g"}, units_given=False, config=AuditConfig(bins=3)
    )
    assert shared == {"k": 4} and run.dataset_name == "g"
    assert (cfg.top_pairs, cfg.bins) == (2, 3)
    report = run_audit(
        None,
        data,
        units=[ModelQuality()],
        predict_fn=predict,
        k=4,
        n_boot=20,
        dataset_name="g",
        progress=False,
    )
    assert report.config["k"] == 4 and report.config["n_boot"] == 20
    assert report.dataset["name"] == "g"
