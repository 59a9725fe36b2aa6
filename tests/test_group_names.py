"""A text sensitive column keeps its group names in the report (issue 26), not its codes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

import gnnaudit
from gnnaudit.audit.sensitive import SensitiveAttribute, group_labels
from gnnaudit.datasets import read_graph


def test_group_labels_maps_codes_to_the_data_names_only_for_its_own_column():
    class D:
        sensitive_values = ["F", "M"]
        sensitive_name = "gender"

    codes = np.array([0.0, 1.0, 1.0])
    own = SensitiveAttribute(values=codes, name="gender", column=2)
    assert group_labels(D(), own).tolist() == ["F", "M", "M"]
    other = SensitiveAttribute(values=codes, name="region", column=3)
    assert group_labels(D(), other) is other.values
    out_of_range = SensitiveAttribute(values=np.array([0.0, 2.0]), name="gender", column=2)
    assert group_labels(D(), out_of_range) is out_of_range.values


def test_report_groups_carry_the_text_labels():
    rng = np.random.default_rng(0)
    n = 120
    nodes = pd.DataFrame(
        {
            "uid": np.arange(n) + 100,
            "a": rng.normal(size=n),
            "gender": rng.choice(["F", "M"], n),
            "approved": rng.integers(0, 2, n),
        }
    )
    edges = pd.DataFrame(
        {"src": rng.integers(100, 100 + n, 300), "dst": rng.integers(100, 100 + n, 300)}
    )
    data = read_graph(
        nodes, edges, id_column="uid", source_column="src", target_column="dst",
        label="approved", sensitive="gender",
    )  # fmt: skip
    data.test_mask = torch.ones(n, dtype=torch.bool)
    torch.manual_seed(0)
    model = torch.nn.Linear(data.num_features, 2)
    report = gnnaudit.audit_model(
        lambda x, edge_index: model(x), data, sensitive="gender", progress=False, n_boot=50
    )
    groups = report.table("group_fairness", "groups")
    assert sorted(groups["group"].astype(str)) == ["F", "M"]
    counts = nodes["gender"].value_counts()
    assert dict(zip(groups["group"].astype(str), groups["size"], strict=True)) == counts.to_dict()
