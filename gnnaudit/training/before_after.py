"""The figures of the before / after mitigation table (:func:`mitigation_metrics`), each with
its interval, as the fair-GNN literature reports them: the counterfactual flip rate at node and
graph scope (graph scope = NIFTY's counterfactual unfairness;
:func:`~gnnaudit.audit.sensitivity.flip.counterfactual_flip`, exact intervals), the statistical
parity and equal opportunity differences
(:func:`~gnnaudit.audit.fairness.group_fairness.group_fairness`, Newcombe intervals of the
signed difference), the AUROC of the class-1 probability and the accuracy on the audited nodes
(bootstrap). :class:`~gnnaudit.training.mitigation.MitigationUnit` measures the audited model
and its mitigated copy with it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import torch

from gnnaudit._aliases import renamed_keywords
from gnnaudit.audit.bootstrap import bootstrap_mean
from gnnaudit.audit.fairness.group_fairness import group_fairness
from gnnaudit.audit.fairness.literature_intervals import auroc_interval
from gnnaudit.audit.interventions import FeatureSpec, category_codes
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.audit.search.fit_inputs import resolve_mask
from gnnaudit.audit.sensitive import known_group_nodes
from gnnaudit.audit.sensitivity.flip import counterfactual_flip
from gnnaudit.errors import InvalidInputError
from gnnaudit.training.fair_finetune import resolve_sensitive_feature

__all__ = ["METRIC_COLUMNS", "HIGHER_IS_BETTER", "mitigation_metrics"]

#: columns of :func:`mitigation_metrics`
METRIC_COLUMNS = ["metric", "scope", "value", "ci_low", "ci_high"]
#: per metric of the before / after table, whether a higher value is better (AUROC, accuracy)
#: or worse (the gaps and flip rates): a change in the worse direction is flagged
HIGHER_IS_BETTER = {"auroc": True, "accuracy": True}


@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def mitigation_metrics(
    model: torch.nn.Module,
    data: Any,
    sensitive: Any,
    *,
    nodes: Any = None,
    positive_class: int = 1,
    n_boot: int = 1000,
    confidence: float = 0.95,
    random_state: int = 0,
    num_hops: int | None = None,
) -> pd.DataFrame:
    """Flip rate (node and graph scope), SPD, EOD and accuracy of ``model`` on the audited
    ``nodes`` (default ``data.test_mask``), each with its interval; :data:`METRIC_COLUMNS`.
    Nodes of unknown group (``data.sensitive_mask`` false for the data's own attribute,
    :func:`~gnnaudit.audit.sensitive.known_group_nodes`) are left out of every figure.

    ``sensitive``: the attribute's feature name / column / one-hot group, or a resolved
    :class:`~gnnaudit.audit.interventions.FeatureSpec`. Needs ``data.y``.
    """
    spec = (
        sensitive
        if isinstance(sensitive, FeatureSpec)
        else resolve_sensitive_feature(data, sensitive)
    )
    if nodes is None:
        nodes = getattr(data, "test_mask", None)
    n = int(data.num_nodes)
    nodes = resolve_mask(nodes, data, n, name="nodes", purpose="the before / after table")
    nodes = known_group_nodes(data, nodes, [spec.name])
    if nodes.size == 0:
        raise InvalidInputError(
            f"every node of nodes has an unknown value of {spec.name!r} (data.sensitive_mask "
            "false); the before / after table needs nodes of known group"
        )
    logits = ModelAdapter(model).logits(data.x, data.edge_index)
    rows = []
    for scope in ("node", "graph"):
        flip = counterfactual_flip(
            model,
            data,
            list(spec.columns) if spec.kind == "one-hot" else spec.columns[0],
            nodes,
            scope=scope,
            n_boot=n_boot,
            random_state=random_state,
            num_hops=num_hops,
            confidence=confidence,
            base_logits=logits,
        )
        rows.append(("flip rate", scope, flip.rate, flip.ci_low, flip.ci_high))
    ids = flip.nodes
    pred = logits.argmax(dim=1).numpy()
    y = data.y.detach().cpu().numpy()
    fair = group_fairness(
        y,
        pred,
        sensitive_features=category_codes(data, spec).astype(np.float64),
        mask=ids,
        positive_class=positive_class,
        n_boot=n_boot,
        confidence=confidence,
        random_state=random_state,
    )
    rows.append(
        ("statistical parity difference", "", fair.statistical_parity_difference, *fair.spd_ci)
    )
    rows.append(
        ("equal opportunity difference", "", fair.equal_opportunity_difference, *fair.eod_ci)
    )
    rows.append(("auroc", "", *_auroc(logits, y, ids, n_boot, confidence, random_state)))
    correct = (pred[ids] == y[ids]).astype(np.float64)
    acc = bootstrap_mean(correct, n_boot, np.random.default_rng([random_state, 29]), confidence)
    rows.append(("accuracy", "", acc.estimate, acc.ci_low, acc.ci_high))
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)


def _auroc(
    logits: torch.Tensor, y: np.ndarray, ids: np.ndarray, n_boot: int, confidence: float, seed: int
) -> tuple[float, float, float]:
    """AUROC of the class-1 probability on ``ids`` with its bootstrap interval (the literature
    metrics' :func:`~gnnaudit.audit.fairness.literature_intervals.auroc_interval`); NaN for a
    multi-class model or labels of one class."""
    positive = y[ids] == 1
    if logits.shape[1] != 2 or positive.all() or not positive.any():
        return math.nan, math.nan, math.nan
    score = torch.softmax(logits.to(torch.float64), dim=1)[:, 1].numpy()[ids]
    rng = np.random.default_rng([seed, 31])
    return auroc_interval([score], [positive], n_boot=n_boot, confidence=confidence, rng=rng)
