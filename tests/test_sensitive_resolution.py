"""sensitive= as a name, a column index, a vector equal to a column, text labels, a continuous
attribute (refused or binned) and a list of attributes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnaudit.audit.fairness.group_fairness import GroupFairnessUnit
from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.quality_unit import ModelQuality
from gnnaudit.audit.sensitive import bin_attribute, resolve_attributes
from gnnaudit.audit.sensitivity.unit import SensitivityUnit
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError

GENDER, INCOME = 10, 1


@pytest.fixture(scope="module")
def data():
    return synthetic_credit_graph(num_nodes=300, bias=2.0, seed=5)


def by_gender(x, edge_index):
    score = 3.0 * x[:, GENDER] - 1.0 + 0.3 * x[:, INCOME]
    return torch.stack([torch.zeros_like(score), score], dim=1)


def _units():
    return [ModelQuality(), SensitivityUnit(num_hops=0, rank=False), GroupFairnessUnit()]


def _audit(data, sensitive, **kw):
    return run_audit(by_gender, data, sensitive, units=_units(), n_boot=100, progress=False, **kw)


def test_a_vector_equal_to_a_column_is_that_feature_and_the_flip_tests_run(data):
    named = _audit(data, "gender")
    for given in (data.x[:, GENDER], data.x[:, GENDER].numpy().astype(int), GENDER):
        report = _audit(data, given)
        node = report.finding("counterfactual flip (node scope)", "gender")
        assert node["flagged"]
        assert node["value"] == named.finding("counterfactual flip (node scope)", "gender")["value"]
        assert "not a model input" not in report.verdict
        assert "depend on gender directly" in report.verdict
    notes = _audit(data, data.x[:, GENDER]).run_info["notes"]
    assert any("equals column 10 (gender)" in n for n in notes)


def test_the_datas_own_unnamed_attribute_is_matched_to_its_column(data):
    """``data.sensitive`` without a feature name of its own is found among the columns by its
    values, as a vector given is; one that is no column stays an attribute outside the input."""
    unnamed = data.clone()
    del unnamed.sensitive_name
    unnamed.sensitive = data.x[:, GENDER].long()
    (attr,) = resolve_attributes(unnamed, None)
    assert (attr.column, attr.name) == (GENDER, "sensitive")
    assert "equals column 10 (gender)" in attr.note
    report = _audit(unnamed, None)
    named = _audit(data, "gender")
    node = report.finding("counterfactual flip (node scope)", "gender")  # the column flipped
    assert node["value"] == named.finding("counterfactual flip (node scope)", "gender")["value"]
    unnamed.sensitive = torch.as_tensor(np.arange(data.num_nodes) % 2 == 0)  # in no column
    (attr,) = resolve_attributes(unnamed, None)
    assert attr.column is None and attr.note is None


def test_text_labels_are_groups_with_their_names(data):
    labels = np.array(["man", "woman"])[data.x[:, GENDER].long().numpy()]
    report = _audit(data, labels)
    groups = report.table("group_fairness", "groups")
    assert sorted(groups["group"]) == ["man", "woman"]
    # equal to the gender column up to a relabelling: audited as that feature
    assert "not a model input" not in report.verdict
    assert "depend on gender directly" in report.verdict
    assert any("up to a relabelling" in n for n in report.run_info["notes"])
    labels[0] = "woman" if labels[0] == "man" else "man"  # no longer equal to any column
    report = _audit(data, labels)
    assert sorted(report.table("group_fairness", "groups")["group"]) == ["man", "woman"]
    assert "a direct test of its use was impossible" in report.verdict


def test_a_continuous_attribute_is_refused_or_binned(data):
    with pytest.raises(InvalidInputError, match="continuous .* sensitive_bins"):
        _audit(data, "income")
    report = _audit(data, "income", sensitive_bins=4)
    groups = report.table("group_fairness", "groups")
    assert len(groups) == 4 and groups["size"].min() >= 0.2 * groups["size"].sum()
    parity = report.finding("statistical parity", "income")
    assert np.isfinite(parity["value"]) and parity["ci_low"] < 1.0
    assert not report.findings["value"].isna().any()
    assert any("quantile bins" in n for n in report.run_info["notes"])


def test_bins_name_their_ranges_and_cover_every_value():
    v = np.arange(100, dtype=float)
    labels = bin_attribute(v, 4)
    assert list(dict.fromkeys(labels)) == [
        "[0, 24.75)",
        "[24.75, 49.5)",
        "[49.5, 74.25)",
        "[74.25, 99]",
    ]


def test_a_list_resolves_every_attribute_and_bad_entries_are_named(data):
    attrs = resolve_attributes(data, ["gender", 7, data.x[:, 6]])
    assert [a.name for a in attrs] == ["gender", "employed", "homeowner"]
    assert attrs[2].column == 6
    with pytest.raises(InvalidInputError, match="twice"):
        resolve_attributes(data, ["gender", GENDER])
    with pytest.raises(InvalidInputError, match="not a column"):
        resolve_attributes(data, 99)
    with pytest.raises(InvalidInputError, match="one value per node"):
        resolve_attributes(data, np.zeros(7))


def test_several_attributes_give_per_attribute_and_intersectional_parity(data):
    rng = np.random.default_rng(0)
    region = rng.choice(np.array(["north", "south"]), size=data.num_nodes)
    report = _audit(data, ["gender", region])
    parity = report.findings[report.findings["finding"] == "statistical parity"]
    assert list(parity["feature"]) == ["gender", "sensitive", "gender & sensitive"]
    joint = report.table("group_fairness", "groups (gender & sensitive)")
    assert len(joint) == 4 and joint["group"].str.contains("gender=1 & sensitive=north").any()
    assert joint["size"].sum() == report.table("group_fairness", "groups")["size"].sum()
    assert "depend on gender directly" in report.verdict
    assert "sensitive is not a model input" in report.verdict
    assert not report.findings["value"].isna().any()


def test_an_explicit_bins_also_bins_a_continuous_attribute(data):
    """``bins=`` given by the caller bins a continuous sensitive attribute too (issue 25)."""
    from gnnaudit import audit_model

    report = audit_model(by_gender, data, "income", bins=4, n_boot=50, progress=False)
    groups = report.table("group_fairness", "groups")
    assert len(groups) == 4
    assert not report.findings["value"].isna().any()
