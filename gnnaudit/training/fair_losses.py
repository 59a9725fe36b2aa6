r"""The loss terms of :class:`~gnnaudit.training.FairFinetune` as functions of logits: the
divergence of the counterfactual-consistency and evidence terms, and the covariance of
the group-gap terms.

**Consistency divergence.** The changed values are those of the audit
(:func:`gnnaudit.audit.interventions.alternatives`): a binary attribute is flipped; a categorical / one-hot attribute is moved to one other value per
step (seeded); a continuous one gets the opposite-quantile swap. :math:`D` is the symmetric KL
divergence of the two softmax outputs,
:math:`D(a, b) = \tfrac12 \sum_c (p_c - q_c)(\log p_c - \log q_c)`, ``divergence="sym_kl"``,
or the mean squared difference of the logits, ``divergence="logit_l2"``; both are 0 when the
outputs agree, so a model that ignores the attribute has zero consistency loss.

**Covariance terms** (FairGNN's covariance constraint, Dai & Wang 2021, Eq. 7): with
:math:`p_{vc}` the softmax probability of class :math:`c` at node :math:`v` (factual pass) and
:math:`s_{vj}` the sensitive columns, over a node set :math:`U` (means over :math:`U`)

.. math::

    \mathcal R_{cov}(U) = \frac{1}{C k} \sum_{c=1}^{C} \sum_{j=1}^{k}
        \Bigl| \frac{1}{|U|} \sum_{v \in U} (s_{vj} - \bar s_j)(p_{vc} - \bar p_c) \Bigr|,

0 when the predictions are uncorrelated with the attribute on :math:`U` (a model can ignore
:math:`s` itself, as consistency asks, and still follow its proxies). For a binary attribute
and task :math:`\mathcal R_{cov}(U) = \pi_0 \pi_1 \lvert \bar p_{1|s=1} - \bar p_{1|s=0}
\rvert` (:math:`\pi` the group shares in :math:`U`): the differentiable gap of mean predicted
probability between the groups, scaled. No extra forward pass. :func:`covariance_of` takes
the per-node scores: the softmax probabilities (FairGNN's form, ``parity="softmax"``) or the
anchored soft decisions of :mod:`~gnnaudit.training.parity_surrogate`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["consistency_divergence", "covariance_of"]


def consistency_divergence(
    a: torch.Tensor, b: torch.Tensor, divergence: str = "sym_kl"
) -> torch.Tensor:
    """Per-row divergence :math:`D` of two logit matrices ``(m, C)`` (module docstring);
    ``(m,)``."""
    if divergence == "logit_l2":
        return (a - b).pow(2).mean(dim=1)
    la, lb = F.log_softmax(a, dim=1), F.log_softmax(b, dim=1)
    return 0.5 * ((la.exp() - lb.exp()) * (la - lb)).sum(dim=1)


def covariance_of(
    scores: torch.Tensor, sensitive: torch.Tensor, rows: torch.Tensor | None = None
) -> torch.Tensor:
    r"""Mean absolute covariance of per-node ``scores`` ``(n, C')`` (the softmax probabilities,
    or the anchored soft decisions of :mod:`~gnnaudit.training.parity_surrogate`) with the
    sensitive columns ``(n, k)`` over the node ids ``rows`` (None: every node): the formula of
    the module docstring with :math:`p` = ``scores``; 0 (with a gradient path) when fewer than 2
    nodes."""
    p, s = scores, sensitive.to(scores.device)
    if rows is not None:
        if rows.numel() < 2:
            return scores.sum() * 0.0
        rows = rows.to(p.device)
        p, s = p[rows], s[rows]
    cov = (s - s.mean(dim=0)).T @ (p - p.mean(dim=0)) / p.size(0)
    return cov.abs().mean()
