"""Fine-tuning on counterfactual evidences (CE paper Sec. 7.3)."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import torch

from gnnaudit.audit.search.evidence import CounterfactualEvidence
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InfeasibleError, InvalidInputError
from gnnaudit.training import FinetuneResult, finetune_on_evidences, train_node_classifier
from gnnaudit.training.finetune import evidence_node_budget


@pytest.fixture(scope="module")
def trained():
    logging.getLogger("lightning").setLevel(logging.ERROR)
    data = synthetic_credit_graph(num_nodes=240, seed=3)
    module, _ = train_node_classifier(data, "gcn", max_epochs=40, seed=0)
    ce = CounterfactualEvidence().fit(data, model=module)
    return data, module, ce


def test_returns_three_figures_and_leaves_module_untouched(trained):
    data, module, ce = trained
    before_state = {k: v.clone() for k, v in module.state_dict().items()}
    before_training = module.training
    res = finetune_on_evidences(module, data, ce, m=12, epochs=3, lr=1e-2, seeds=(0, 1))
    assert isinstance(res, FinetuneResult)
    frame = res.to_frame()
    assert frame["stage"].tolist() == ["before", "after_evidence", "after_control"]
    assert ((frame["mean"] >= 0) & (frame["mean"] <= 1)).all()
    assert (frame["seeds"] == 2).all() and (frame["finetune_nodes"] == 12).all()
    runs = res.runs
    test_size = int(data.test_mask.sum())
    assert (runs["eval_nodes"] == test_size - 2 * 12).all()
    assert frame.loc[0, "mean"] == pytest.approx(runs["before"].mean())
    assert frame.loc[1, "std"] == pytest.approx(runs["after_evidence"].std(ddof=0))
    # the caller's module is never modified
    assert module.training == before_training
    for k, v in module.state_dict().items():
        assert torch.equal(v, before_state[k])
    # the evidence set is the first 12 distinct nodes of the global pairs, all test nodes
    assert np.array_equal(res.evidence_nodes, evidence_node_budget(ce, 12))
    assert data.test_mask[torch.from_numpy(res.evidence_nodes)].all()


def test_deterministic_and_dataframe_input(trained):
    data, module, ce = trained
    pairs = ce.global_evidence(k=40)
    a = finetune_on_evidences(module, data, pairs, m=8, epochs=2, seeds=(5,))
    b = finetune_on_evidences(module, data, ce, m=8, epochs=2, seeds=(5,))
    pd.testing.assert_frame_equal(a.runs, b.runs)


def test_budget_takes_distinct_nodes_in_rank_order():
    pairs = pd.DataFrame(
        {"node_u": [3, 3, 1, 7], "node_v": [5, 9, 5, 8], "similarity": [0.9, 0.8, 0.7, 0.6]}
    )
    assert evidence_node_budget(pairs, 4).tolist() == [3, 5, 9, 1]
    assert evidence_node_budget(pairs, 100).tolist() == [3, 5, 9, 1, 7, 8]


def test_errors(trained):
    data, module, ce = trained
    with pytest.raises(InfeasibleError, match="lower m"):
        finetune_on_evidences(module, data, ce, m=int(data.test_mask.sum()), epochs=1)
    with pytest.raises(InvalidInputError, match="module must be a LightningModule"):
        finetune_on_evidences(torch.nn.Linear(2, 2), data, ce, m=2, epochs=1)
    with pytest.raises(InvalidInputError, match="m must be >= 1"):
        finetune_on_evidences(module, data, ce, m=0)
    with pytest.raises(InvalidInputError, match="seeds must hold"):
        finetune_on_evidences(module, data, ce, m=2, seeds=())


def test_audit_unit_names_unknown_keywords_and_lets_internal_errors_through(trained):
    """Only the keywords are checked up front: a bad one is named, while a failure inside
    fine-tuning surfaces as itself rather than as "finetune_kwargs not accepted"."""
    from gnnaudit.audit.context import AuditContext, AuditOptions
    from gnnaudit.training.finetune import EvidenceFinetuneUnit

    data, module, _ = trained
    ctx = AuditContext(module, data, options=AuditOptions(progress=False))
    with pytest.raises(InvalidInputError, match="finetune_kwargs not accepted.*bogus"):
        EvidenceFinetuneUnit(bogus=1).run(ctx)
    with pytest.raises(InfeasibleError, match="lower m"):
        EvidenceFinetuneUnit(m=int(data.test_mask.sum()), epochs=1).run(ctx)
