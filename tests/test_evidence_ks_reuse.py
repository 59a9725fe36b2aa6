"""CounterfactualEvidence.fit reuses ``data.ks`` written by the KSEmbedding transform with the
same parameters, and recomputes it otherwise."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import Batch, Data

import gnnaudit.audit.search.evidence as evidence_module
from gnnaudit.audit import CounterfactualEvidence
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import KSEmbedding, ks_embedding


def graph(seed: int = 0, n: int = 50) -> tuple[Data, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = Data(
        x=torch.tensor(rng.normal(size=(n, 4)), dtype=torch.float32),
        edge_index=torch.tensor(rng.integers(0, n, size=(2, 3 * n))),
        test_mask=torch.tensor(rng.random(n) < 0.7),
    )
    return data, rng.integers(0, 3, n)


@pytest.fixture
def ks_calls(monkeypatch):
    """Count the KS computations of CounterfactualEvidence.fit."""
    calls = []
    original = evidence_module.ks_embedding

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(evidence_module, "ks_embedding", counting)
    return calls


def test_matching_parameters_reuse_data_ks(ks_calls, caplog):
    data, pred = graph()
    raw = CounterfactualEvidence(num_hops=2, alpha=0.3).fit(data, predictions=pred)
    assert len(ks_calls) == 1
    transformed = KSEmbedding(num_hops=2, alpha=0.3)(data)
    assert KSEmbedding.recorded_params(transformed) == (2, 0.3)
    with caplog.at_level(logging.INFO, logger="gnnaudit.audit.search"):
        reused = CounterfactualEvidence(num_hops=2, alpha=0.3).fit(transformed, predictions=pred)
    assert len(ks_calls) == 1  # not recomputed
    assert "reusing data.ks" in caplog.text
    torch.testing.assert_close(reused.ks_, transformed.ks, rtol=0, atol=0)
    nodes = raw.node_ids_
    pd.testing.assert_frame_equal(reused.local_evidence(nodes, 4), raw.local_evidence(nodes, 4))
    pd.testing.assert_frame_equal(reused.global_evidence(20), raw.global_evidence(20))


def test_the_stored_embedding_is_what_is_searched(ks_calls):
    # a data.ks that differs from the features' KS proves which one the search used
    data, pred = graph(seed=1)
    transformed = KSEmbedding()(data)
    transformed.ks = torch.flip(transformed.ks, dims=[0])  # still recorded as KSEmbedding()
    ce = CounterfactualEvidence().fit(transformed, predictions=pred)
    assert len(ks_calls) == 0
    torch.testing.assert_close(ce.ks_, transformed.ks, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("transform_kwargs", "fit_kwargs"),
    [
        ({"num_hops": 2, "alpha": 0.5}, {"num_hops": 3, "alpha": 0.5}),
        ({"num_hops": 3, "alpha": 0.25}, {"num_hops": 3, "alpha": 0.5}),
        ({"num_hops": 0, "alpha": 0.5}, {"num_hops": 1, "alpha": 0.5}),
    ],
)
def test_mismatched_parameters_recompute(ks_calls, caplog, transform_kwargs, fit_kwargs):
    data, pred = graph(seed=2)
    transformed = KSEmbedding(**transform_kwargs)(data)
    with caplog.at_level(logging.INFO, logger="gnnaudit.audit.search"):
        ce = CounterfactualEvidence(**fit_kwargs).fit(transformed, predictions=pred)
    assert len(ks_calls) == 1
    assert "recomputing" in caplog.text
    assert f"num_hops={transform_kwargs['num_hops']}" in caplog.text
    expected = ks_embedding(data.x, data.edge_index, fit_kwargs["num_hops"], fit_kwargs["alpha"])
    torch.testing.assert_close(ce.ks_, expected, rtol=0, atol=0)


def test_unrecorded_ks_is_recomputed(ks_calls, caplog):
    data, pred = graph(seed=3)
    data.ks = torch.zeros(50, 4)  # written by hand, no ks_params
    with caplog.at_level(logging.INFO, logger="gnnaudit.audit.search"):
        ce = CounterfactualEvidence().fit(data, predictions=pred)
    assert len(ks_calls) == 1 and "unrecorded parameters" in caplog.text
    torch.testing.assert_close(ce.ks_, ks_embedding(data.x, data.edge_index), rtol=0, atol=0)


def test_params_survive_collation_into_a_batch(ks_calls):
    graphs = [graph(seed=s, n=20)[0] for s in range(3)]
    batch = Batch.from_data_list([KSEmbedding(2, 0.3)(g) for g in graphs])
    assert KSEmbedding.recorded_params(batch) == (2, 0.3)
    assert KSEmbedding.recorded_params(batch.get_example(1)) == (2, 0.3)
    pred = np.arange(batch.num_nodes) % 2
    CounterfactualEvidence(num_hops=2, alpha=0.3).fit(batch, predictions=pred)
    assert len(ks_calls) == 0
    mixed = Batch.from_data_list([KSEmbedding(2, 0.3)(graphs[0]), KSEmbedding(2, 0.4)(graphs[1])])
    assert KSEmbedding.recorded_params(mixed) is None


def test_malformed_stored_ks_is_an_error():
    data, pred = graph(seed=4)
    transformed = KSEmbedding()(data)
    transformed.ks = transformed.ks[:10]
    with pytest.raises(InvalidInputError, match=r"data.ks .*shape \[50, d\]"):
        CounterfactualEvidence().fit(transformed, predictions=pred)
    transformed = KSEmbedding()(data)
    transformed.ks = transformed.ks.clone()
    transformed.ks[3, 1] = float("nan")
    with pytest.raises(InvalidInputError, match="data.ks must be finite"):
        CounterfactualEvidence().fit(transformed, predictions=pred)
