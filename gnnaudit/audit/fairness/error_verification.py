r"""Verifying prediction errors with global counterfactual evidences (CE paper, Sec. 7.2).

The top global evidences are pairs of very similar test nodes that the model labels
differently, so at least one node of each pair sits near the decision boundary. The model's
accuracy on the distinct nodes of the top-k pairs,

.. math::

    \mathrm{acc}_k = \frac{1}{|V_k|} \sum_{v \in V_k} \mathbb{I}(\hat y_v = y_v), \qquad
    V_k = \bigcup_{i \le k} \{u_i, v_i\},

is expected to be well below the accuracy on the whole test set for small ``k`` and to approach
it as ``k`` grows (paper Fig. 6).

**Test.** Is the model wrong more often on ``V_k`` than on the test set at large? Under the
null hypothesis the ``|V_k|`` evidence nodes are a random draw from the test nodes, so their
number of correct predictions is hypergeometric; the one-sided p-value is its lower tail. The
interval of ``acc_k`` is a percentile bootstrap (binomial, :mod:`gnnaudit.audit.bootstrap`).
The finding is flagged when the p-value is below 0.05.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gnnaudit._validation import MAX_RESAMPLES, check_class_array, check_int
from gnnaudit.audit.intervals import binomial_interval
from gnnaudit.audit.report.section import Figure, Finding, ReportSection
from gnnaudit.audit.search.evidence_table import user_id_array
from gnnaudit.audit.search.inputs import fitted_test_nodes, is_estimator, mask_nodes
from gnnaudit.audit.search.results import GlobalEvidence
from gnnaudit.audit.unit import AuditResult, AuditUnit
from gnnaudit.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = [
    "error_verification",
    "ErrorVerificationResult",
    "ErrorVerificationUnit",
    "ERROR_COLUMNS",
    "DEFAULT_KS",
    "ALPHA",
]

logger = logging.getLogger(__name__)

ERROR_COLUMNS = [
    "k",
    "pairs",
    "nodes",
    "accuracy_in_evidence",
    "ci_low",
    "ci_high",
    "accuracy_overall",
    "p_value",
]
DEFAULT_KS: tuple[int, ...] = (10, 20, 50, 100, 200, 500)
#: significance level of the finding
ALPHA = 0.05


def _pairs(evidence: Any, node_ids: Any, n: int) -> GlobalEvidence:
    if isinstance(evidence, GlobalEvidence):
        return evidence
    if isinstance(evidence, pd.DataFrame):
        user_ids = None if node_ids is None else user_id_array("node_ids", node_ids, n)
        return GlobalEvidence.from_frame(evidence, user_ids=user_ids)
    raise InvalidInputError(
        "evidence must be a fitted CounterfactualEvidence, a GlobalEvidence or a global-evidence "
        f"DataFrame, got {type(evidence).__name__}"
    )


def error_verification(
    evidence: Any,
    *,
    y_true: Any,
    y_pred: Any,
    ks: Sequence[int] | int = DEFAULT_KS,
    mask: Any = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    random_state: int = 0,
    node_ids: Any = None,
) -> pd.DataFrame:
    """Accuracy on the nodes of the top-k global evidences vs the whole test set (Sec. 7.2).

    Parameters
    ----------
    evidence : a fitted :class:`~gnnaudit.audit.CounterfactualEvidence` (its global top
        ``max(ks)`` pairs; the test set is its test nodes), a
        :class:`~gnnaudit.audit.GlobalEvidence` or a global-evidence DataFrame (``node_u,
        node_v, similarity``, most similar first); then ``mask`` gives the test set.
    node_ids : the graph's own node ids (``data.node_ids``, one per node) when the evidence
        table names nodes by them (as tables of such graphs do); None: integer node indices.
    y_true, y_pred : (n,) true and predicted class of every node.
    ks : numbers of top pairs to evaluate (positive integers).
    mask : test nodes (bool mask or ids), required unless ``evidence`` is an estimator.
    n_boot, confidence, random_state : the interval of each accuracy (exact Clopper-Pearson at
        ``confidence``; ``n_boot`` and ``random_state`` are validated and kept for compatibility).

    Returns
    -------
    DataFrame (:data:`ERROR_COLUMNS`): ``pairs`` is the number of pairs actually used (fewer
    than ``k`` when fewer exist), ``nodes`` the number of distinct nodes among them,
    ``ci_low`` / ``ci_high`` the interval of ``accuracy_in_evidence`` and ``p_value`` the
    hypergeometric test of the module docstring. Rows with no pair at all are dropped.
    Cost O(P log P) for P = max(ks) pairs.
    """
    y = check_class_array("y_true", y_true)
    pred = check_class_array("y_pred", y_pred)
    n = pred.shape[0]
    if y.shape[0] != n:
        raise InvalidInputError(
            f"y_true must have the same length as y_pred ({n}), got {y.shape[0]}"
        )
    if isinstance(ks, (int, np.integer)):
        ks = [ks]
    ks_list = sorted({check_int("ks entry", v, minimum=1) for v in ks})
    if not ks_list:
        raise InvalidInputError("ks must hold at least one positive integer, got an empty list")
    check_int("n_boot", n_boot, minimum=1, maximum=MAX_RESAMPLES)
    pairs, test_nodes = _pairs_and_test_nodes(evidence, node_ids, mask, ks_list[-1], n)
    return _accuracy_rows(pairs, test_nodes, pred == y, ks_list, confidence)


def _pairs_and_test_nodes(
    evidence: Any, node_ids: Any, mask: Any, k: int, n: int
) -> tuple[GlobalEvidence, np.ndarray]:
    """The top ``k`` global evidence pairs (of a fitted estimator, or the pairs given) and the
    test nodes (the estimator's, or ``mask``), checked against ``n`` nodes."""
    if is_estimator(evidence):
        test_nodes = fitted_test_nodes(evidence)
        pairs = evidence.search_global(k=k)
    else:
        pairs = _pairs(evidence, node_ids, n)
        if mask is None:
            raise InvalidInputError("mask (the test nodes) is required with evidence pairs")
        test_nodes = mask_nodes("mask", mask, n)
    if test_nodes.size == 0:
        raise InvalidInputError("the test set is empty; error verification needs test nodes")
    if test_nodes.max() >= n:
        raise InvalidInputError(
            f"test node ids reach {test_nodes.max()} but y_pred has {n} entries"
        )
    u, v = pairs.node_u, pairs.node_v
    if u.size and (min(u.min(), v.min()) < 0 or max(u.max(), v.max()) >= n):
        raise InvalidInputError(f"evidence holds node ids outside [0, {n - 1}]")
    return pairs, test_nodes


def _accuracy_rows(
    pairs: GlobalEvidence,
    test_nodes: np.ndarray,
    correct: np.ndarray,
    ks: list[int],
    confidence: float,
) -> pd.DataFrame:
    """One row per ``k`` of ``ks``: the accuracy on the nodes of the top-k pairs, its exact
    interval and hypergeometric p-value, beside the accuracy on the test set."""
    from scipy.stats import hypergeom

    overall = float(correct[test_nodes].mean())
    total_correct = int(correct[test_nodes].sum())
    u, v = pairs.node_u, pairs.node_v
    # first pair index in which each distinct node appears -> cumulative counts per k
    flat = np.stack([u, v], axis=1).ravel()
    nodes, first = np.unique(flat, return_index=True)
    first_pair = first // 2
    order = np.argsort(first_pair, kind="stable")
    first_pair = first_pair[order]
    cum_correct = np.concatenate([[0], np.cumsum(correct[nodes[order]])])
    rows = []
    if u.size == 0:
        logger.warning("no global evidence pair exists; the error verification table is empty")
    for k in ks:
        used = min(k, u.size)
        if used == 0:
            continue
        count = int(np.searchsorted(first_pair, used, side="left"))
        hits = int(cum_correct[count])
        lo, hi = binomial_interval(hits, count, confidence)
        p = float(hypergeom.cdf(hits, test_nodes.size, total_correct, count))
        rows.append((k, used, count, hits / count, lo, hi, overall, min(p, 1.0)))
    return pd.DataFrame(rows, columns=ERROR_COLUMNS).astype(
        {"k": np.int64, "pairs": np.int64, "nodes": np.int64}
    )


@dataclass
class ErrorVerificationResult(AuditResult):
    """Error-verification table and the headline test at ``finding_k`` pairs."""

    table: pd.DataFrame
    finding_k: int

    def to_frame(self) -> pd.DataFrame:
        return self.table

    def _headline(self) -> pd.Series | None:
        if self.table.empty:
            return None
        rows = self.table[self.table["k"] <= self.finding_k]
        return (rows if len(rows) else self.table).iloc[-1]

    def findings(self) -> list[Finding]:
        row = self._headline()
        if row is None:
            return []
        flagged = bool(
            row["p_value"] < ALPHA and row["accuracy_in_evidence"] < row["accuracy_overall"]
        )
        return [
            Finding(
                finding="error verification",
                feature="",
                statistic=f"accuracy on the top-{int(row['k'])} evidence nodes",
                value=float(row["accuracy_in_evidence"]),
                ci_low=float(row["ci_low"]),
                ci_high=float(row["ci_high"]),
                p_value=float(row["p_value"]),
                flagged=flagged,
                explanation=(
                    f"On the {int(row['nodes'])} nodes of the {int(row['pairs'])} most similar "
                    f"differently-predicted pairs the model is right {row['accuracy_in_evidence']:.1%} "
                    f"of the time, against {row['accuracy_overall']:.1%} on all audited nodes "
                    f"(p = {row['p_value']:.3g}, hypergeometric). "
                    + (
                        "These look-alike pairs are where the model errs: inspect them."
                        if flagged
                        else f"Not significantly lower (flag at p < {ALPHA})."
                    )
                ),
            )
        ]

    def report_section(self) -> ReportSection:
        row = self._headline()
        summary = (
            "No global evidence pair exists."
            if row is None
            else (
                f"Accuracy on the nodes of the top {int(row['k'])} evidence pairs: "
                f"{row['accuracy_in_evidence']:.3f} against {row['accuracy_overall']:.3f} overall "
                f"(p = {row['p_value']:.3g})."
            )
        )
        curve = pd.DataFrame(
            {
                "x": self.table["k"],
                "y": self.table["accuracy_in_evidence"],
                "y_low": self.table["ci_low"],
                "y_high": self.table["ci_high"],
            }
        )
        overall = float(self.table["accuracy_overall"].iloc[0]) if len(self.table) else None
        return ReportSection(
            key=ErrorVerificationUnit.name,
            title="Error verification (CE paper Sec. 7.2)",
            summary=summary,
            tables={"accuracy by k": self.table},
            figures=[
                Figure(
                    kind="curve",
                    title="Accuracy within the top-k global evidences",
                    data=curve,
                    options={
                        "xlabel": "k (top global evidence pairs)",
                        "ylabel": "accuracy",
                        "hline": overall,
                        "hline_label": "all audited nodes",
                        "logx": bool(len(curve) and curve["x"].max() / curve["x"].min() >= 20),
                        "ylim": [0, 1.02],
                    },
                )
            ],
            notes=[
                "p_value: one-sided hypergeometric test that the evidence nodes are right less "
                "often than a random draw of as many audited nodes; interval: 95% bootstrap."
            ],
        )


class ErrorVerificationUnit(AuditUnit):
    """Audit unit: :func:`error_verification` over the audited nodes.

    Parameters
    ----------
    ks : cut-offs (numbers of top pairs).
    finding_k : the cut-off of the headline finding (default 50 pairs: about 50-100 nodes,
        enough for the test to have power while staying among the most similar pairs).
    """

    name = "error_verification"
    title = "Error verification"
    requires = ("labels", "evidence")
    meaningless_when_degenerate = True

    def __init__(self, ks: Sequence[int] = DEFAULT_KS, finding_k: int = 50) -> None:
        self.ks = tuple(sorted({check_int("ks entry", v, minimum=1) for v in ks}))
        if not self.ks:
            raise InvalidInputError("ks must hold at least one positive integer")
        self.finding_k = check_int("finding_k", finding_k, minimum=1)

    def evidence_needed(self, ctx: AuditContext) -> tuple[int, int]:
        return 0, max(self.ks)

    def run(self, ctx: AuditContext) -> ErrorVerificationResult:
        table = error_verification(
            ctx.global_evidence(max(self.ks)),
            y_true=ctx.labels,
            y_pred=ctx.predictions,
            ks=self.ks,
            mask=ctx.nodes,
            n_boot=ctx.options.n_boot,
            confidence=ctx.options.confidence,
            random_state=ctx.options.random_state,
        )
        return ErrorVerificationResult(table=table, finding_k=self.finding_k)
