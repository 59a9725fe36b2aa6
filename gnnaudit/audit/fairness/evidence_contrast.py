r"""Evidence contrast: the CE paper's counterfactual evidences (Sec. 3, 7.1) turned into a test.

For an audited node ``v`` with predicted class :math:`\hat y_v`, let :math:`LCE_k(v)` be its
top-k counterfactual evidences (the most KS-similar nodes with a *different* prediction, Eq. 2)
and :math:`SP_k(v)` its k most KS-similar nodes with the *same* prediction (``v`` excluded,
ties by the smaller node id), both among the nodes the evidence search was fitted on. With the
category code :math:`c(\cdot)` of the feature,

.. math::

    a_v = \frac{1}{|LCE_k(v)|} \sum_{u \in LCE_k(v)} \mathbb I[c(u) \neq c(v)], \qquad
    b_v = \frac{1}{|SP_k(v)|} \sum_{u \in SP_k(v)} \mathbb I[c(u) \neq c(v)],

    D = \frac1m \sum_v (a_v - b_v).

``a_v`` is the per-node discrimination score of Eq. 12; ``b_v`` is its control: how often
equally look-alike nodes differ in the feature when the model's decision does *not* change.
:math:`D > 0` means that among look-alike nodes the decision changes together with the feature.

Inference (one-sided test of :math:`D > 0`, p-value :math:`(1 + \#\{T^* \ge D\}) / (1 +
n_{perm})`, and a percentile interval):

``inference="shared"`` (default)
    Nodes are not independent: look-alike nodes share evidences and neighbours, so their
    :math:`a_v - b_v` are positively correlated. The null draws :math:`T^*` come from the
    shared-multiplier bootstrap (:func:`~gnnaudit.audit.bootstrap.shared_multiplier_draws`):
    one random sign per node of the graph, node ``v`` weighted by the normalised sum of the
    signs of ``v``, its evidences and its look-alikes, which reproduces the covariance of
    overlapping reference sets (a network-HAC variance). The interval is
    :math:`D` minus the percentiles of independent draws.
``inference="node"``
    The paired sign-flip permutation test over nodes
    (:func:`~gnnaudit.audit.bootstrap.sign_flip_pvalue`) and a percentile bootstrap over
    nodes: exact when nodes are independent, **anti-conservative here** (measured under a
    null with random predictions, 100 nodes, k = 5: 10-11% of p-values below 0.05, against
    4-6% with ``"shared"``; ``benchmarks/bench_sensitivity.py --calibration``).

Neither captures dependence that spans the whole graph (e.g. a chance association between the
predictions and the feature over all nodes), so intervals are somewhat too narrow when such a
component is large; read borderline p-values with care.

Category codes: binary and categorical features by value, one-hot groups by category,
continuous features by quantile bins over all nodes (``n_bins``, default 4: quartiles; the same
rule as :func:`~gnnaudit.audit.interventions.quantile_bins`): "differs" then means "lies in
another quartile", a scale-free rule, where a fixed threshold on the difference would depend on
the feature's units.

A node with fewer than ``k`` evidences or same-prediction neighbours uses those it has (its
share is over what exists); a node with none of either kind is dropped and counted in
``n_dropped``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from gnnaudit._validation import (
    MAX_RESAMPLES,
    check_allocation,
    check_choice,
    check_fitted,
    check_int,
)
from gnnaudit.audit.bootstrap import (
    bootstrap_mean,
    check_confidence,
    percentile_interval,
    shared_multiplier_draws,
    sign_flip_pvalue,
    upper_tail_pvalue,
)
from gnnaudit.audit.context import resolve_nodes
from gnnaudit.audit.interventions import (
    MAX_CATEGORIES,
    category_codes,
    resolve_feature,
)
from gnnaudit.audit.search.results import LocalEvidence
from gnnaudit.errors import InvalidInputError

__all__ = ["ContrastResult", "evidence_contrast", "same_prediction_neighbours", "CONTRAST_COLUMNS"]

logger = logging.getLogger(__name__)

#: columns of :meth:`ContrastResult.to_frame`
CONTRAST_COLUMNS = [
    "feature",
    "kind",
    "difference",
    "ci_low",
    "ci_high",
    "p_value",
    "evidence_rate",
    "matched_rate",
    "n_nodes",
    "n_dropped",
    "k",
]
#: ``inference`` choices: dependence-aware shared-multiplier bootstrap, or iid nodes
INFERENCES = ("shared", "node")
#: default memory budget of one similarity block (bytes of float32)
BLOCK_BYTES = 64 * 2**20


def _top_k_rows(sim: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` of every row by (value desc, column asc); ``k <= sim.shape[1]``.

    The k-th largest value of each row comes from ``np.partition``; the entries above it are
    kept, and the ties at it are taken in column order until ``k`` are chosen. Returns
    ``(columns, values)``, each ``(rows, k)``, sorted. Extra memory: one copy of ``sim`` and two
    boolean masks, plus O(number of selected and tied entries).
    """
    rows, width = sim.shape
    kth = np.partition(sim, width - k, axis=1)[:, width - k]
    r_above, c_above = np.nonzero(sim > kth[:, None])
    r_tie, c_tie = np.nonzero(sim == kth[:, None])
    need = k - np.bincount(r_above, minlength=rows)
    first = np.searchsorted(r_tie, np.arange(rows))
    keep = (np.arange(r_tie.size) - first[r_tie]) < need[r_tie]
    r = np.concatenate([r_above, r_tie[keep]])
    c = np.concatenate([c_above, c_tie[keep]])
    v = sim[r, c]
    order = np.lexsort((c, -v, r))
    return c[order].reshape(rows, k), v[order].reshape(rows, k)


def same_prediction_neighbours(
    embedding: Any,
    predictions: Any,
    queries: Any,
    k: int,
    *,
    block_bytes: int = BLOCK_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` most similar positions with the same prediction as each query, exactly.

    Parameters
    ----------
    embedding : (N, d) rows of unit norm (zero rows allowed): the inner product is the cosine
        (``CounterfactualEvidence.space_.embedding``).
    predictions : (N,) predicted class of each row.
    queries : (q,) positions of the query rows.
    k : neighbours per query (>= 1).
    block_bytes : memory budget of one similarity block (float32), default 64 MiB.

    Returns ``(positions, similarity)``, each ``(q, k')`` with ``k' = min(k, largest class - 1)``
    (wider would be padding only; an array the memory cannot hold is refused): per query the positions of its ``k``
    most similar rows of the same class, itself excluded, by similarity descending and ties by
    the smaller position (= smaller node id when positions follow ascending node ids); padded
    with ``-1`` / ``-inf`` when the class has fewer than ``k + 1`` members.

    Blocked per class: the queries of class ``c`` are multiplied with the rows of class ``c`` in
    row blocks of at most ``block_bytes`` of similarities; peak extra memory is about three
    times that plus a float32 copy of the class's rows. Similarities are float32 inner products.
    """
    emb = np.asarray(embedding, dtype=np.float32)
    pred = np.asarray(predictions, dtype=np.int64).reshape(-1)
    if emb.ndim != 2 or pred.shape != (emb.shape[0],):
        raise InvalidInputError(
            f"embedding must be (N, d) and predictions (N,), got {emb.shape} and {pred.shape}"
        )
    k = check_int("k", k, minimum=1)
    block_bytes = check_int("block_bytes", block_bytes, minimum=4)
    q = np.asarray(queries, dtype=np.int64).reshape(-1)
    if q.size and (q.min() < 0 or q.max() >= pred.size):
        raise InvalidInputError(f"queries must be positions in [0, {pred.size - 1}]")
    if q.size:  # at most (largest class - 1) neighbours exist: k beyond that is only padding
        k = max(1, min(k, int(np.bincount(pred - pred.min()).max()) - 1))
    check_allocation("k", 12.0 * q.size * k, "the (queries x k) neighbour arrays")
    positions = np.full((q.size, k), -1, dtype=np.int64)
    similarity = np.full((q.size, k), -np.inf, dtype=np.float32)
    qclass = pred[q]
    for c in np.unique(qclass):
        members = np.flatnonzero(pred == c)
        kk = min(k, members.size - 1)
        if kk <= 0:
            continue
        rows_c = np.ascontiguousarray(emb[members])
        idx = np.flatnonzero(qclass == c)
        step = max(1, block_bytes // (4 * members.size))
        for start in range(0, idx.size, step):
            block = idx[start : start + step]
            sim = np.matmul(emb[q[block]], rows_c.T)
            sim[np.arange(block.size), np.searchsorted(members, q[block])] = -np.inf
            cols, vals = _top_k_rows(sim, kk)
            positions[block, :kk] = members[cols]
            similarity[block, :kk] = vals
    return positions, similarity


@dataclass
class ContrastResult:
    """Evidence contrast of one feature (see the module docstring).

    Attributes
    ----------
    feature, kind : the feature's name and kind.
    difference, ci_low, ci_high : :math:`D` = mean(a_v - b_v) and its bootstrap interval.
    p_value : one-sided sign-flip permutation p-value of :math:`D > 0`.
    evidence_rate, matched_rate : mean a_v and mean b_v.
    n_nodes : nodes used; n_dropped : audited nodes without evidence or same-prediction
        neighbour.
    k, n_perm, n_boot, confidence : the settings.
    nodes, evidence_share, matched_share, n_evidence, n_matched : per used node, ``a_v``,
        ``b_v`` and how many evidences / neighbours they are shares of.
    """

    feature: str
    kind: str
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    evidence_rate: float
    matched_rate: float
    n_nodes: int
    n_dropped: int
    k: int
    n_perm: int
    n_boot: int
    confidence: float
    nodes: np.ndarray
    evidence_share: np.ndarray
    matched_share: np.ndarray
    n_evidence: np.ndarray
    n_matched: np.ndarray

    def to_frame(self) -> pd.DataFrame:
        """One summary row with the columns :data:`CONTRAST_COLUMNS`."""
        return pd.DataFrame([{c: getattr(self, c) for c in CONTRAST_COLUMNS}])

    def node_frame(self) -> pd.DataFrame:
        """Per node: ``node, evidence_share, matched_share, difference, n_evidence, n_matched``."""
        return pd.DataFrame(
            {
                "node": self.nodes,
                "evidence_share": self.evidence_share,
                "matched_share": self.matched_share,
                "difference": self.evidence_share - self.matched_share,
                "n_evidence": self.n_evidence,
                "n_matched": self.n_matched,
            }
        )


def _mismatch_share(codes: np.ndarray, nodes: np.ndarray, others: np.ndarray) -> tuple:
    valid = others >= 0
    differ = valid & (codes[np.where(valid, others, 0)] != codes[nodes][:, None])
    count = valid.sum(axis=1)
    share = np.divide(differ.sum(axis=1), count, out=np.zeros(nodes.size), where=count > 0)
    return share, count


def _shared_units(
    nodes: np.ndarray, evidences: np.ndarray, matched: np.ndarray, n: int
) -> sp.csr_matrix:
    """``(m, n)`` 0/1 incidence: row ``v`` marks ``v``, its evidences and its look-alikes."""
    units = np.concatenate([nodes[:, None], evidences, matched], axis=1)
    rows = np.repeat(np.arange(nodes.size), units.shape[1])
    cols = units.reshape(-1)
    keep = cols >= 0
    inc = sp.csr_matrix((np.ones(int(keep.sum())), (rows[keep], cols[keep])), shape=(nodes.size, n))
    inc.data[:] = 1.0
    return inc


def _audited(evidence: Any, data: Any, mask: Any) -> np.ndarray:
    fitted = np.asarray(evidence.space_.node_ids, dtype=np.int64)
    if mask is None:
        return fitted
    nodes = resolve_nodes(data, mask)
    outside = ~np.isin(nodes, fitted)
    if outside.any():
        raise InvalidInputError(
            f"mask must select nodes the evidence was fitted on; node {int(nodes[outside][0])} "
            f"is not one ({int(outside.sum())} of {nodes.size} are outside)"
        )
    return nodes


def _local_evidence(evidence: Any, nodes: np.ndarray, k: int, local: Any) -> LocalEvidence:
    """The audited nodes' local evidences: ``local`` (checked, narrowed to ``nodes``) or
    searched now."""
    if local is None:
        return evidence.search_local(nodes, k)
    if not isinstance(local, LocalEvidence):
        raise InvalidInputError(f"local must be a LocalEvidence, got {type(local).__name__}")
    return local.select(nodes)


def _inference(
    d: np.ndarray,
    shared: Any,
    n_perm: int,
    n_boot: int,
    confidence: float,
    random_state: int,
) -> tuple[float, float, float]:
    """``(ci_low, ci_high, p_value)`` of the mean of ``d``: independent nodes (bootstrap and
    sign flips) when ``shared`` is None, else the shared-unit multiplier draws over the
    incidence ``shared`` (module docstring)."""
    boot_rng = np.random.default_rng([random_state, 0])
    perm_rng = np.random.default_rng([random_state, 1])
    if shared is None:
        iv = bootstrap_mean(d, n_boot, boot_rng, confidence)
        return iv.ci_low, iv.ci_high, sign_flip_pvalue(d, n_perm, perm_rng)
    estimate = float(d.mean())
    p = upper_tail_pvalue(shared_multiplier_draws(d, shared, n_perm, perm_rng), d)
    q_lo, q_hi = percentile_interval(
        shared_multiplier_draws(d, shared, n_boot, boot_rng), confidence
    )
    return estimate - q_hi, estimate - q_lo, p


def evidence_contrast(  # noqa: PLR0913  # public function: each keyword is a documented option
    evidence: Any,
    data: Any,
    feature: Any,
    k: int = 10,
    n_perm: int = 1000,
    random_state: int = 0,
    *,
    mask: Any = None,
    confidence: float = 0.95,
    n_boot: int = 1000,
    kind: str = "auto",
    n_bins: int = 4,
    max_categories: int = MAX_CATEGORIES,
    local: LocalEvidence | None = None,
    inference: str = "shared",
) -> ContrastResult:
    """Do counterfactual evidences differ in ``feature`` more than same-prediction look-alikes?

    Parameters
    ----------
    evidence : a fitted :class:`~gnnaudit.audit.CounterfactualEvidence`.
    data : the graph it was fitted on (``x``, ``feature_names``).
    feature : a column name or index, or a sequence of names forming a one-hot group.
    k : evidences and same-prediction neighbours per node.
    n_perm : sign flips of the permutation test; n_boot, confidence : the bootstrap interval.
    random_state : seed of the permutations and the bootstrap.
    mask : audited nodes (default: every node the evidence was fitted on); they must be among
        the fitted nodes.
    kind, max_categories : see :func:`~gnnaudit.audit.interventions.resolve_feature`.
    n_bins : quantile bins of a continuous feature.
    inference : ``"shared"`` (default, dependence-aware) or ``"node"`` (independent nodes); see
        the module docstring.
    local : the nodes' local evidences if already searched (a
        :class:`~gnnaudit.audit.search.results.LocalEvidence` covering the audited nodes with at
        least ``k`` columns; its first ``k`` are used); default: searched here.

    Notes
    -----
    Returns a :class:`ContrastResult` (module docstring for the statistic and its test).
    """
    check_fitted(evidence, "space_")
    inference = check_choice("inference", inference, INFERENCES)
    k = check_int("k", k, minimum=1)
    n_perm = check_int("n_perm", n_perm, minimum=1, maximum=MAX_RESAMPLES)
    n_boot = check_int("n_boot", n_boot, minimum=1, maximum=MAX_RESAMPLES)
    random_state = check_int("random_state", random_state, minimum=0)
    confidence = check_confidence(confidence)
    x = getattr(data, "x", None)
    ks = getattr(evidence, "ks_", None)
    if x is None or (ks is not None and int(ks.shape[0]) != int(x.shape[0])):
        raise InvalidInputError(
            "data must be the graph the evidence was fitted on (same number of nodes, with x)"
        )
    spec = resolve_feature(data, feature, kind=kind, max_categories=max_categories)
    codes = category_codes(data, spec, n_bins)
    nodes = _audited(evidence, data, mask)
    ev = _local_evidence(evidence, nodes, k, local).evidence[:, :k]
    space = evidence.space_
    pos = np.searchsorted(space.node_ids, nodes)
    same_pos, _ = same_prediction_neighbours(space.embedding, space.predictions, pos, k)
    same = np.where(same_pos >= 0, np.asarray(space.node_ids)[np.maximum(same_pos, 0)], -1)
    a, n_a = _mismatch_share(codes, nodes, ev)
    b, n_b = _mismatch_share(codes, nodes, same)
    keep = (n_a > 0) & (n_b > 0)
    if not keep.any():
        raise InvalidInputError(
            "no audited node has both a counterfactual evidence and a same-prediction "
            "neighbour (does the model predict a single class?)"
        )
    d = a[keep] - b[keep]
    estimate = float(d.mean())
    shared = None
    if inference == "shared":
        shared = _shared_units(nodes[keep], ev[keep], same[keep], int(x.shape[0]))
    lo, hi, p = _inference(d, shared, n_perm, n_boot, confidence, random_state)
    if (~keep).any():
        logger.info("evidence contrast: %d nodes without evidence dropped", int((~keep).sum()))
    return ContrastResult(
        feature=spec.name,
        kind=spec.kind,
        difference=estimate,
        ci_low=lo,
        ci_high=hi,
        p_value=p,
        evidence_rate=float(a[keep].mean()),
        matched_rate=float(b[keep].mean()),
        n_nodes=int(keep.sum()),
        n_dropped=int((~keep).sum()),
        k=k,
        n_perm=n_perm,
        n_boot=n_boot,
        confidence=confidence,
        nodes=nodes[keep],
        evidence_share=a[keep],
        matched_share=b[keep],
        n_evidence=n_a[keep],
        n_matched=n_b[keep],
    )
