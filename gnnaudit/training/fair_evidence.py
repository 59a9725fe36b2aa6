"""The evidence term's pairs of :class:`~gnnaudit.training.FairFinetune`: global
counterfactual evidences (CE paper: look-alike nodes the model labels differently) screened to
those whose sensitive values differ and whose feature difference lies mostly in the sensitive
attribute."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch_geometric.data import Data

from gnnaudit._validation import check_float
from gnnaudit.audit.interventions import FeatureSpec, feature_columns
from gnnaudit.audit.search.evidence_table import graph_user_ids
from gnnaudit.audit.search.inputs import REQUIRED_GLOBAL_COLUMNS, check_frame, is_estimator
from gnnaudit.audit.search.results import GlobalEvidence
from gnnaudit.errors import InvalidInputError

__all__ = ["global_evidence_pairs", "sensitive_evidence_pairs"]


def global_evidence_pairs(
    evidence: Any, model: nn.Module, data: Data, n_pairs: int
) -> GlobalEvidence:
    """The top ``n_pairs`` global counterfactual evidences: from a fitted
    ``CounterfactualEvidence``, a ``GlobalEvidence`` or a global-evidence DataFrame, or searched
    on ``model``'s predictions over ``data.test_mask`` when ``evidence`` is None."""
    if evidence is None:
        from gnnaudit.audit.search.evidence import CounterfactualEvidence

        evidence = CounterfactualEvidence(progress=False).fit(data, model=model)
    if is_estimator(evidence):
        return evidence.search_global(k=n_pairs)
    if isinstance(evidence, GlobalEvidence):
        return evidence
    check_frame("evidence", evidence, REQUIRED_GLOBAL_COLUMNS)
    return GlobalEvidence.from_frame(evidence, user_ids=graph_user_ids(data))


def sensitive_evidence_pairs(
    data: Any, pairs: GlobalEvidence, spec: FeatureSpec, min_share: float = 0.5
) -> np.ndarray:
    """``(p, 2)`` evidence pairs whose sensitive values differ and whose squared difference of
    standardised features lies for at least ``min_share`` in the sensitive columns."""
    min_share = check_float("ev_min_share", min_share, minimum=0.0, maximum=1.0)
    u, v = np.asarray(pairs.node_u, np.int64), np.asarray(pairs.node_v, np.int64)
    n = int(data.x.size(0))
    if u.size and (min(u.min(), v.min()) < 0 or max(u.max(), v.max()) >= n):
        raise InvalidInputError(f"evidence pairs hold node ids outside [0, {n - 1}]")
    x = data.x.detach().cpu().to(torch.float64).numpy()
    std = x.std(axis=0)
    z = (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)
    diff = (z[u] - z[v]) ** 2
    cols = list(spec.columns)
    sens = diff[:, cols].sum(axis=1)
    total = diff.sum(axis=1)
    s = feature_columns(data, spec.columns)
    differs = np.any(s[u] != s[v], axis=1)
    keep = differs & (sens >= min_share * np.maximum(total, 1e-12))
    return np.stack([u[keep], v[keep]], axis=1)
