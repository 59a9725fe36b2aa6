"""LiteratureMetricsUnit (AUROC, F1, instability) against the literature_metrics functions, and
NIFTY's other three figures as the findings they are (statistical parity, equal opportunity,
counterfactual flip (graph scope)) through the report's alias table, against the same functions
and NIFTY's formula; intervals (seeded, containing the estimate), the degenerate-model path,
multiclass conventions, and the credit dataset through the CLI and audit_model."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import f1_score, roc_auc_score
from test_literature_metrics import _graph, _nifty_formula, _trained

from gnnaudit.audit import (
    GroupFairnessUnit,
    LiteratureMetricsUnit,
    ModelQuality,
    SensitivityUnit,
    group_fairness,
)
from gnnaudit.audit.fairness.literature_intervals import (
    auroc_interval,
    f1_interval,
    f1_value,
    weighted_auc,
)
from gnnaudit.audit.fairness.literature_metrics import instability, literature_metrics
from gnnaudit.audit.pipeline import audit_model, run_audit
from gnnaudit.errors import InvalidInputError

N_BOOT = 200


def _audit(model, data, units, **kw):
    kw.setdefault("n_boot", N_BOOT)
    return run_audit(model, data, kw.pop("sensitive", "s"), units=units, progress=False, **kw)


def _table(report) -> pd.DataFrame:
    return report.table("literature", "metrics").set_index("metric")


# ---------------------------------------------------------------- interval helpers
@settings(max_examples=60, deadline=None)
@given(st.data())
def test_weighted_auc_is_the_auc_of_the_repeated_sample(data: st.DataObject) -> None:
    n = data.draw(st.integers(2, 25))
    score = np.array(data.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), float)
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    w = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    rep = np.repeat(np.arange(n), w)
    got = weighted_auc(score, y, w[None, :].astype(float))[0]
    if np.unique(y[rep]).size < 2:
        assert np.isnan(got)
    else:
        assert got == pytest.approx(roc_auc_score(y[rep], score[rep]))


def test_f1_value_matches_sklearn_binary_and_macro() -> None:
    rng = np.random.default_rng(0)
    y, p = rng.integers(0, 2, 300), rng.integers(0, 2, 300)
    assert f1_value(y, p, 2) == pytest.approx(f1_score(y, p))
    y3, p3 = rng.integers(0, 3, 300), rng.integers(0, 4, 300)
    assert f1_value(y3, p3, 4) == pytest.approx(f1_score(y3, p3, average="macro"))
    assert f1_value(np.array([0, 0]), np.array([0, 0]), 2) == 0.0  # zero_division=0


def test_interval_helpers_are_seeded_and_contain_the_estimate() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 400)
    score = y + rng.normal(0, 1.5, 400)
    pred = (score > 0.5).astype(np.int64)

    def auc(seed):
        g = np.random.default_rng(seed)
        return auroc_interval([score], [y == 1], n_boot=300, confidence=0.9, rng=g, max_cells=999)

    a, b = auc(3), auc(3)
    assert a == b and a[1] <= a[0] <= a[2] and a[0] == pytest.approx(roc_auc_score(y, score))
    assert auc(4)[1:] != a[1:]
    f = f1_interval(y, pred, 2, n_boot=300, confidence=0.9, rng=np.random.default_rng(3))
    assert f[1] <= f[0] <= f[2] and f[0] == pytest.approx(f1_score(y, pred))


# ---------------------------------------------------------------- the unit on a small graph
@pytest.fixture(scope="module")
def binary():
    data = _graph(n=160, seed=5)
    return data, _trained(data, seed=5)


def test_each_literature_figure_is_said_once(binary) -> None:
    data, model = binary
    units = [ModelQuality(), SensitivityUnit(rank=False), GroupFairnessUnit()]
    report = _audit(model, data, [*units, LiteratureMetricsUnit()], random_state=3)
    direct = literature_metrics(
        model, data.x, data.edge_index, data.y, data.sensitive, 0, data.test_mask, random_state=3
    )
    table = _table(report)
    assert list(table.index) == ["auroc", "f1", "instability"]
    for key in table.index:
        assert table.loc[key, "value"] == pytest.approx(direct[key], abs=1e-12), key
        assert not table.loc[key, "flagged"]  # informational
    # delta SP, delta EO and counterfactual unfairness are the findings, named both ways
    findings = report.findings
    literature = findings[findings["finding"].str.startswith("literature: ")]
    assert literature["finding"].tolist() == [
        "literature: AUROC",
        "literature: F1",
        "literature: instability",
    ]
    assert (literature["feature"] == "").all()
    aliases = json.loads(report.to_json())["aliases"]
    twins = {"dsp": "statistical parity", "deo": "equal opportunity"}
    twins["cf"] = "counterfactual flip (graph scope)"
    for key, finding in twins.items():
        row = report.finding(finding, "s")
        assert row["statistic"].endswith(("(NIFTY's ΔSP)", "(NIFTY's ΔEO)", "unfairness)"))
        assert row["value"] == pytest.approx(direct[key], abs=1e-12), key
        entry = aliases[key]
        assert findings.iloc[entry["row"]].equals(row)
        for col in ("value", "ci_low", "ci_high", "flagged"):
            assert entry[col] == row[col], (key, col)
    # no two findings say the same figure: same feature, value and interval
    finite = findings.dropna(subset=["ci_low", "ci_high"])
    assert not finite.duplicated(["feature", "value", "ci_low", "ci_high"]).any()
    section = report.section("literature")
    assert section.status == "ok" and "Fair-GNN literature metrics" in section.title
    assert "the 'statistical parity' finding" in " ".join(section.notes)


def test_intervals_contain_the_estimate_and_are_deterministic(binary) -> None:
    data, model = binary
    first = _table(_audit(model, data, [LiteratureMetricsUnit()], random_state=7))
    again = _table(_audit(model, data, [LiteratureMetricsUnit()], random_state=7))
    pd.testing.assert_frame_equal(first, again)
    assert (first["ci_low"] <= first["value"] + 1e-12).all()
    assert (first["value"] <= first["ci_high"] + 1e-12).all()
    assert (first["ci_high"] > first["ci_low"]).all()
    other = _table(_audit(model, data, [LiteratureMetricsUnit()], random_state=8))
    assert other.loc["auroc", "ci_low"] != first.loc["auroc", "ci_low"]  # the seed matters


def test_the_unit_alone_gives_no_group_or_flip_figure(binary) -> None:
    data, model = binary
    alone = _audit(model, data, [LiteratureMetricsUnit()])
    assert list(_table(alone).index) == ["auroc", "f1", "instability"]
    assert alone.aliases == {}
    assert json.loads(alone.to_json())["aliases"] == {}


@pytest.mark.parametrize("seed", [0, 1])
def test_cf_unfairness_is_nifty_formula_for_an_outside_gcn(seed: int) -> None:
    """A GCN trained by a plain torch loop: the graph-scope flip finding (the alias ``cf``)
    equals NIFTY's formula (flip s for all nodes, re-predict, share of test nodes that
    changed)."""
    data = _graph(seed=seed)
    model = _trained(data, seed=seed)
    idx_test = data.test_mask.nonzero().flatten()
    nifty = _nifty_formula(model, data.x, data.edge_index, idx_test)
    report = _audit(model, data, [SensitivityUnit(rank=False), LiteratureMetricsUnit()])
    assert report.alias("cf")["value"] == pytest.approx(nifty)
    assert report.aliases["cf"]["value"] == pytest.approx(nifty)


def test_instability_is_seeded_noise_and_noise_std_zero_changes_nothing(binary) -> None:
    data, model = binary
    got = _table(_audit(model, data, [LiteratureMetricsUnit(noise_std=0.5)], random_state=11))
    ids = data.test_mask.nonzero().flatten()
    assert got.loc["instability", "value"] == pytest.approx(
        instability(model, data.x, data.edge_index, ids, noise_std=0.5, random_state=11)
    )
    zero = _table(_audit(model, data, [LiteratureMetricsUnit(noise_std=0.0)]))
    assert zero.loc["instability", "value"] == 0.0
    with pytest.raises(InvalidInputError, match="noise_std"):
        LiteratureMetricsUnit(noise_std=-1.0)


def test_a_model_that_rejects_noisy_features_gets_no_instability(binary) -> None:
    data, _ = binary

    def by_group(x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(x[:, 0].long(), 2).float()  # fails on noise

    report = _audit(by_group, data, [LiteratureMetricsUnit()])
    table = _table(report)
    assert "instability" not in table.index and table.loc["f1", "value"] > 0
    assert "cannot be evaluated on noisy features" in " ".join(report.section("literature").notes)


def test_degenerate_model_gives_no_finding(binary) -> None:
    data, _ = binary

    def always_zero(x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return torch.stack([x[:, 1] * 0 + 1.0, x[:, 1] * 0.01], dim=1)

    report = _audit(always_zero, data, [ModelQuality(), LiteratureMetricsUnit()])
    section = report.section("literature")
    assert section.status == "not meaningful"
    assert "predicts class 0 on every audited node" in section.summary
    assert not report.findings["finding"].str.startswith("literature").any()
    assert "f1" in set(section.tables["metrics"]["metric"])  # kept for reference


def test_without_sensitive_attribute_or_labels(binary) -> None:
    data, model = binary
    bare = data.clone()
    del bare.sensitive
    report = run_audit(model, bare, units=[LiteratureMetricsUnit()], n_boot=N_BOOT)
    assert list(_table(report).index) == ["auroc", "f1", "instability"]
    no_labels = data.clone()
    del no_labels.y
    skipped = _audit(model, no_labels, [LiteratureMetricsUnit()])
    assert skipped.section("literature").status == "skipped"


def test_multiclass_conventions() -> None:
    data = _graph(n=180, seed=6)
    data.y = (data.x[:, 1] > 0.4).long() + (data.x[:, 2] > 0.3).long()  # three classes
    model = _trained(data, out=3, seed=6)
    report = _audit(model, data, [GroupFairnessUnit(), LiteratureMetricsUnit()])
    table = _table(report)
    t = data.test_mask.numpy()
    with torch.no_grad():
        logits = model(data.x, data.edge_index).double()
    probs, pred = torch.softmax(logits, 1).numpy()[t], logits.argmax(1).numpy()[t]
    y = data.y.numpy()[t]
    assert table.loc["auroc", "value"] == pytest.approx(
        roc_auc_score(y, probs, multi_class="ovr", average="macro")
    )
    assert table.loc["f1", "value"] == pytest.approx(f1_score(y, pred, average="macro"))
    gf = group_fairness(data.y, logits.argmax(1), sensitive_features=data.sensitive, mask=t)
    dsp = report.alias("dsp")
    assert dsp["value"] == pytest.approx(gf.statistical_parity_difference)
    assert dsp["statistic"] == "statistical parity difference (NIFTY's ΔSP)"
    assert "the largest gap over the 3 classes" in dsp["explanation"]


def test_default_units_include_the_literature_unit() -> None:
    from gnnaudit.training import default_units

    names = [u.name for u in default_units()]
    assert names.index("literature") == names.index("group_fairness") + 1


# ---------------------------------------------------------------- the credit dataset
def _credit_root(tmp_path, n: int = 240):
    rng = np.random.default_rng(0)
    age = rng.integers(0, 2, n)
    bill = rng.integers(0, 8, n) * 10
    label = ((bill / 70 + 0.4 * age + rng.normal(0, 0.3, n)) > 0.6).astype(int)
    frame = pd.DataFrame(
        {
            "NoDefaultNextMonth": label,
            "Married": rng.integers(0, 2, n),
            "Single": rng.integers(0, 2, n),
            "Age": age,
            "Bill": bill,
            "Payment": rng.integers(0, 5, n) * 10,
        }
    )
    (tmp_path / "nifty" / "credit").mkdir(parents=True)
    frame.to_csv(tmp_path / "nifty" / "credit" / "credit.csv", index=False)
    return tmp_path / "nifty"


def test_cli_audit_dataset_credit_has_the_literature_section(tmp_path, capsys) -> None:
    from gnnaudit.cli.main import main

    root = _credit_root(tmp_path)
    out = tmp_path / "out"
    argv = ["audit", "--dataset", "credit", "--root", str(root), "--out", str(out)]
    assert main([*argv, "--epochs", "20", "--no-progress", "--k", "3", "--no-finetune"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["dataset"]["name"] == "credit"
    section = next(s for s in report["sections"] if s["key"] == "literature")
    assert section["title"].startswith("Fair-GNN literature metrics")
    assert section["status"] == "ok"  # the GCN learns the planted signal (not degenerate)
    findings = [f["finding"] for f in report["findings"]]
    assert "literature: AUROC" in findings
    assert not any(f.startswith("literature: delta") for f in findings)
    cf = report["aliases"]["cf"]
    assert report["findings"][cf["row"]]["finding"] == "counterfactual flip (graph scope)"
    assert cf["feature"] == "Age"
    assert "report this figure as counterfactual unfairness" in capsys.readouterr().out
    assert report["run_info"]["command"].startswith("gnnaudit audit --dataset credit")
    md = (out / "report.md").read_text()
    assert md.index("## Summary") < md.index("## Findings") < md.index("## Model quality")


def test_audit_model_takes_a_dataset_name(tmp_path, monkeypatch) -> None:
    from gnnaudit.datasets import load_nifty

    monkeypatch.delenv("GNNAUDIT_DATA", raising=False)
    root = _credit_root(tmp_path)
    data = load_nifty("credit", root)
    model = _trained(data, seed=0)
    units = [LiteratureMetricsUnit()]
    by_name = audit_model(model, "credit", root=root, units=units, n_boot=N_BOOT)
    direct = audit_model(model, data, units=units, n_boot=N_BOOT)
    assert by_name.dataset["name"] == "credit"
    pd.testing.assert_frame_equal(_table(by_name), _table(direct))
    with pytest.raises(InvalidInputError, match="root=DIR"):
        audit_model(model, "credit", units=units)
    with pytest.raises(InvalidInputError, match="data"):
        audit_model(model, "credits", root=root, units=units)
    with pytest.raises(InvalidInputError, match="dataset name"):
        audit_model(model, data, root=root, units=units)


def test_f1_from_confusion_counts_is_sklearn_f1_of_the_resample() -> None:
    """The bootstrap's replicate form: F1 from the confusion counts of a resample equals
    ``f1_score`` of the resampled nodes (binary and macro)."""
    from gnnaudit.audit.fairness.literature_intervals import _f1_classes, _f1_from_confusion

    rng = np.random.default_rng(4)
    for n_classes in (2, 4):
        y, pred = rng.integers(0, n_classes, 60), rng.integers(0, n_classes, 60)
        for _ in range(20):
            idx = rng.integers(0, 60, 60)
            cells = np.bincount(y[idx] * n_classes + pred[idx], minlength=n_classes**2)
            got = _f1_from_confusion(
                cells.reshape(1, n_classes, n_classes), _f1_classes(y, pred, n_classes)
            )[0]
            average = "binary" if n_classes == 2 else "macro"
            labels = None if n_classes == 2 else np.union1d(y, pred)
            want = f1_score(y[idx], pred[idx], average=average, labels=labels, zero_division=0.0)
            assert got == pytest.approx(want)
