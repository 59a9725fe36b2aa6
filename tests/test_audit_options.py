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
from gnnaudit.audit.pipeline.config import build_configs, option_names
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


def test_run_audit_takes_typed_config_objects():
    params = inspect.signature(run_audit).parameters
    assert len(params) <= 10
    assert list(params)[:4] == ["model", "data", "sensitive", "units"]
    assert {"mask", "config", "options", "settings"} <= set(params)
    assert params["config"].annotation == "AuditConfig | None"
    assert params["options"].annotation == "AuditOptions | None"
    assert params["settings"].annotation == "RunSettings | None"
    assert params["shorthand"].kind is inspect.Parameter.VAR_KEYWORD


def test_option_names_are_the_dataclass_fields():
    names = option_names()
    assert names["config"] == tuple(f.name for f in dataclasses.fields(AuditConfig))
    assert names["settings"] == tuple(f.name for f in dataclasses.fields(RunSettings))
    shared = {f.name for f in dataclasses.fields(AuditOptions)}
    assert set(names["options"]) == shared - {"extra"}
    # audit_model: run_audit's parameters plus out / force / transform (applied to a copy of
    # the graph before the audit) and root (where data given as a dataset name is loaded from)
    params = inspect.signature(gnnaudit.audit_model).parameters
    assert set(params) == {
        "model",
        "data",
        "sensitive",
        "units",
        "mask",
        "config",
        "options",
        "settings",
        "out",
        "force",
        "transform",
        "root",
        "shorthand",
    }


def test_unknown_option_raises_naming_it(graph):
    data, predict = graph
    with pytest.raises(InvalidInputError, match="bogus_option"):
        run_audit(None, data, predict_fn=predict, bogus_option=1, progress=False)
    with pytest.raises(InvalidInputError, match="bogus_option"):
        gnnaudit.audit_model(None, data, predict_fn=predict, bogus_option=1, progress=False)


def test_a_misspelt_keyword_names_its_close_matches(graph, tmp_path):
    data, predict = graph
    with pytest.raises(InvalidInputError, match=r"'top_pair' \(did you mean top_pairs"):
        run_audit(None, data, predict_fn=predict, top_pair=3)
    with pytest.raises(InvalidInputError, match=r"'n_boots' \(did you mean n_boot"):
        run_audit(None, data, settings=RunSettings(predict_fn=predict), n_boots=30)
    with pytest.raises(InvalidInputError, match=r"'setting' \(did you mean settings"):
        run_audit(None, data, setting=RunSettings(predict_fn=predict))
    # audit_model refuses before any work (the folder is not created), suggesting its own
    # parameters too
    with pytest.raises(InvalidInputError, match=r"'outt' \(did you mean out\?"):
        gnnaudit.audit_model(None, data, predict_fn=predict, outt=tmp_path / "r")
    with pytest.raises(InvalidInputError, match=r"'nope'"):
        gnnaudit.audit_model(None, data, out=tmp_path / "r", nope=1)
    assert not (tmp_path / "r").exists()


def test_config_objects_and_their_shorthand_give_the_same_report(graph):
    data, predict = graph
    units = [ModelQuality()]
    typed = run_audit(
        None,
        data,
        units=units,
        options=AuditOptions(k=4, n_boot=20, random_state=3, progress=False),
        settings=RunSettings(predict_fn=predict, dataset_name="g"),
    )
    flat = run_audit(
        None,
        data,
        units=units,
        k=4,
        n_boot=20,
        random_state=3,
        progress=False,
        predict_fn=predict,
        dataset_name="g",
    )
    assert typed.config == flat.config and typed.dataset == flat.dataset
    assert typed.config["k"] == 4 and typed.config["random_state"] == 3
    # a keyword updates the object given with it
    mixed = run_audit(
        None,
        data,
        units=units,
        options=AuditOptions(k=4, n_boot=20, progress=False),
        settings=RunSettings(predict_fn=predict),
        k=6,
    )
    assert mixed.config["k"] == 6 and mixed.config["n_boot"] == 20
    with pytest.raises(InvalidInputError, match="options must be an AuditOptions"):
        run_audit(None, data, options={"k": 3}, predict_fn=predict)
    with pytest.raises(InvalidInputError, match="settings must be a RunSettings"):
        run_audit(None, data, settings={"predict_fn": predict})


@pytest.mark.parametrize(
    "given",
    [
        {"shared_dir": "/tmp/store"},
        {"num_parts": 4},
        {"partition": "metis"},
        {"model_loader": print},
        {"num_parts": 2, "partition": "contiguous"},
    ],
)
def test_client_settings_without_a_client_are_refused_by_name(graph, given):
    data, predict = graph
    pattern = ", ".join(given) + " act only with client="
    with pytest.raises(InvalidInputError, match=pattern):
        run_audit(None, data, units=[ModelQuality()], predict_fn=predict, **given)
    with pytest.raises(InvalidInputError, match=pattern):
        RunSettings(**given)
    assert RunSettings(client=object(), **given).client is not None  # checked by the session


def test_progress_is_automatic_unless_given():
    assert AuditOptions(progress=False).progress is False
    assert AuditOptions(progress=True).progress is True
    assert isinstance(AuditOptions().progress, bool)  # None resolved: whether stderr is a tty
    with pytest.raises(InvalidInputError, match="progress must be True, False or None"):
        AuditOptions(progress="yes")


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
    cfg, opts, run = build_configs(
        {"k": 4, "top_pairs": 2, "dataset_name": "g"}, config=AuditConfig(bins=3)
    )
    assert opts.k == 4 and run.dataset_name == "g"
    assert (cfg.top_pairs, cfg.bins) == (2, 3)
    # bins= given as a keyword also bins a continuous sensitive attribute, unless options say
    assert build_configs({"bins": 3})[1].sensitive_bins == 3
    assert build_configs({"bins": 3}, options=AuditOptions(sensitive_bins=5))[1].sensitive_bins == 5
    assert build_configs({}, config=AuditConfig(bins=3))[1].sensitive_bins is None
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
