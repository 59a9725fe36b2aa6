"""Audit unit of the embedding audit: the "Embedding structure" report section.

:class:`EmbeddingStructureUnit` runs :class:`~gnnaudit.audit.EmbeddingAudit` on the audit's
model, graph, audited nodes and sensitive attribute (with the context's top global evidence
pairs as cannot-links when evidences exist) and reports:

* the finding: balance of the embedding's density clusters, with a permutation p-value
  (group labels shuffled, clusters fixed), beside FairDen's balance on the same embedding;
  flagged when ``p < 0.05`` and FairDen is more balanced;
* a 2-D PCA projection of the embeddings coloured by cluster and marked by sensitive group;
* the DBSCAN / FairDen comparison, the cluster table, the tree's rules, two counterpart
  examples.

It is not one of the default units: ``run_audit(..., embedding=True)``,
``audit_model(..., embedding=True)`` or ``gnnaudit audit --embedding`` add it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gnnaudit._params import validate_parameters
from gnnaudit._validation import check_int
from gnnaudit.audit.embedding.audit import EmbeddingAudit
from gnnaudit.audit.report.section import Figure, Finding, ReportSection
from gnnaudit.audit.unit import AuditResult, AuditUnit, UnitSkipped
from gnnaudit.errors import InfeasibleError, InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = ["EmbeddingStructureUnit", "EmbeddingStructureResult", "ALPHA", "MAX_PLOTTED"]

#: significance level of the finding
ALPHA = 0.05
#: at most this many points in the projection figure (seeded uniform sample)
MAX_PLOTTED = 2000


#: how the report names each radius rule of :class:`EmbeddingAudit`
EPS_RULES = {
    "given": "given",
    "knee": "knee of the k-distance curve",
    "split": "largest dc-tree radius below the k-distance knee with two clusters of at least "
    "5% of the nodes; the knee radius joins them into one",
}


def projection_frame(audit: EmbeddingAudit, max_points: int = MAX_PLOTTED) -> pd.DataFrame:
    """``x, y, color, marker``: the embeddings' first two principal components (numpy SVD of
    the centred embeddings), coloured by DBSCAN cluster and marked by sensitive group."""
    Z = audit.embeddings_
    rows = np.arange(Z.shape[0])
    if rows.size > max_points:
        rows = np.sort(np.random.default_rng([audit.random_state, 31]).choice(rows, max_points))
    centred = Z - Z.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    comps = centred[rows] @ vt[:2].T
    if comps.shape[1] < 2:
        comps = np.column_stack([comps, np.zeros(rows.size)])
    labels = audit.labels_[rows]
    name = audit.sensitive_name_
    return pd.DataFrame(
        {
            "x": comps[:, 0],
            "y": comps[:, 1],
            "color": np.where(labels < 0, "noise", np.char.add("cluster ", labels.astype(str))),
            "marker": [f"{name}={v}" for v in audit.sensitive_[rows].tolist()],
        }
    )


@dataclass
class EmbeddingStructureResult(AuditResult):
    """The fitted :class:`EmbeddingAudit` and how many counterpart examples to show."""

    audit: EmbeddingAudit
    examples: int = 2

    def to_frame(self) -> pd.DataFrame:
        return self.audit.cluster_table_

    def findings(self) -> list[Finding]:
        a = self.audit
        flagged = bool(a.balance_p_value_ < ALPHA and a.balance_ < a.fair_balance_)
        verdict = (
            "The model's representation groups people by this attribute: its density clusters "
            "are less balanced than random group labels would make them."
            if flagged
            else f"Not significantly less balanced than chance (flag at p < {ALPHA})."
        )
        return [
            Finding(
                finding="embedding structure",
                feature=a.sensitive_name_,
                statistic="balance of the embedding's density clusters",
                value=float(a.balance_),
                p_value=float(a.balance_p_value_),
                flagged=flagged,
                explanation=(
                    f"In the model's own representation (layer {a.layer_!r}) DBSCAN finds "
                    f"{a.n_clusters_} density cluster(s) of the {a.nodes_.size} audited nodes, "
                    f"with balance {a.balance_:.2f} in {a.sensitive_name_!r} (1 = every cluster "
                    f"mirrors the population; permutation p = {a.balance_p_value_:.3g}). A fair "
                    f"grouping of the same representation (FairDen, {a.fair_n_clusters_} "
                    f"clusters) reaches {a.fair_balance_:.2f}. " + verdict
                ),
            )
        ]

    def _examples(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        a = self.audit
        queries = a.counterparts_["query_node"].drop_duplicates().head(self.examples)
        cps = a.counterparts_[a.counterparts_["query_node"].isin(queries)].reset_index(drop=True)
        feats = a.counterpart_features_
        feats = feats[feats["query_node"].isin(queries)].reset_index(drop=True)
        return cps, feats

    def report_section(self) -> ReportSection:
        a = self.audit
        comparison = a.comparison()
        tables: dict[str, pd.DataFrame] = {
            "embedding vs fair clustering": comparison,
            "embedding clusters": a.cluster_table_,
            "fair clusters": a.fair_table_,
        }
        notes = [
            f"Embeddings: input of the final layer {a.layer_!r}"
            if getattr(a, "layer", None) is None
            else f"Embeddings: output of layer {a.layer_!r}",
            f"DBSCAN eps = {a.eps_:.4g} ({EPS_RULES[a.eps_rule_]}), "
            f"min_samples = {a.min_samples_}; {a.nodes_.size} audited nodes clustered "
            f"(cap {a.max_nodes}).",
            f"Balance p-value: {a.n_permutations} permutations of the group labels, clusters fixed.",
        ]
        if a.tree_ is not None:
            tables["tree rules"] = pd.DataFrame({"rule": a.tree_rules_.splitlines()})
            notes.append(
                f"Tree (depth <= {a.depth}) on the input features of {a.tree_nodes_.size} "
                f"sampled clustered nodes: ARI {a.tree_ari_:.3f} on them, {a.tree_ari_all_:.3f} "
                f"on every clustered node; {a.constraints_held_} of {a.constraints_total_} "
                f"constraints hold ({len(a.must_link_)} must-links from the lowest dc-tree "
                f"merges, {len(a.cannot_link_)} cannot-links: {a.evidence_cannot_links_} from "
                f"evidence pairs, the rest between the closest nodes of two clusters); solver "
                f"status {a.tree_status_!r}, time limit {a.tree_time_limit} s."
            )
        else:
            notes.append(a.tree_note_)
        cps, feats = self._examples()
        if len(cps):
            tables["counterparts"] = cps
            tables["counterpart features"] = feats
            notes.append(
                "Counterparts: reference core nodes of the nearest other cluster (ExDBSCAN); "
                "'differs' marks input features more than half a standard deviation apart."
            )
        else:
            notes.append("No counterpart: no noise node (and no node chosen) to explain.")
        notes.extend(a.counterpart_notes_[:5])
        notes.append(
            "Feature values (tree thresholds, counterpart features) are in the table's own "
            "units (the standardisation of the model inputs undone; other columns as given)."
            if a.feature_units_ is not None
            else "Feature values (tree thresholds, counterpart features) are the model's "
            "inputs as given (the graph records no standardisation to undo)."
        )
        summary = (
            f"{a.n_clusters_} density cluster(s) in the model's embedding, balance "
            f"{a.balance_:.3f} (p = {a.balance_p_value_:.3g}); FairDen on the same embedding: "
            f"balance {a.fair_balance_:.3f}, DCSI {a.fair_dcsi_:.3f} (embedding DCSI "
            f"{a.dcsi_:.3f})."
        )
        return ReportSection(
            key=EmbeddingStructureUnit.name,
            title=EmbeddingStructureUnit.title,
            summary=summary,
            tables=tables,
            figures=[
                Figure(
                    kind="scatter",
                    title="Embeddings, first two principal components",
                    data=projection_frame(a),
                    options={"xlabel": "PC 1", "ylabel": "PC 2"},
                )
            ],
            notes=notes,
            data={
                "layer": a.layer_,
                "eps": a.eps_,
                "eps_rule": a.eps_rule_,
                "min_samples": a.min_samples_,
                "clusters": a.n_clusters_,
                "balance": a.balance_,
                "balance_p_value": a.balance_p_value_,
                "dcsi": a.dcsi_,
                "fair_balance": a.fair_balance_,
                "fair_dcsi": a.fair_dcsi_,
                "tree_ari": None if math.isnan(a.tree_ari_) else a.tree_ari_,
                "constraints_held": a.constraints_held_,
                "constraints_total": a.constraints_total_,
                "seconds": a.timings_,
            },
        )


class EmbeddingStructureUnit(AuditUnit):
    """Audit unit: :class:`EmbeddingAudit` on the audit's model and audited nodes.

    Parameters: those of :class:`EmbeddingAudit` (keyword arguments), plus ``evidence_pairs``
    (global evidence pairs used as the tree's cannot-links when the model predicts more than
    one class; 0 = none) and ``examples`` (counterpart examples in the report).
    """

    name = "embedding_structure"
    title = "Embedding structure"
    requires = ("sensitive",)

    def __init__(self, *, evidence_pairs: int = 50, examples: int = 2, **params: Any) -> None:
        self.evidence_pairs = check_int("evidence_pairs", evidence_pairs, minimum=0)
        self.examples = check_int("examples", examples, minimum=0)
        self.params = dict(params)
        validate_parameters(EmbeddingAudit(**self.params))  # bad options fail here, not mid-audit

    def unavailable(self, ctx: AuditContext) -> str | None:
        import torch

        if not isinstance(ctx.adapter.model, torch.nn.Module):
            return "the model is not a torch.nn.Module, so its layers cannot be hooked"
        return None

    def evidence_needed(self, ctx: AuditContext) -> tuple[int, int]:
        return 0, self.evidence_pairs

    def run(self, ctx: AuditContext) -> EmbeddingStructureResult:
        evidence = None
        if self.evidence_pairs and ctx.missing(("evidence",)) is None:
            evidence = ctx.global_evidence(self.evidence_pairs)
        params = {"random_state": ctx.options.random_state, **self.params}
        try:
            audit = EmbeddingAudit(**params).fit(
                ctx.adapter,
                ctx.data,
                sensitive=ctx.sensitive,
                evidence=evidence,
                mask=ctx.group_nodes,
                progress=bool(ctx.options.progress),
            )
        except (InvalidInputError, InfeasibleError) as err:
            # the data cannot support this analysis (too few nodes or groups for the clusters):
            # say so in the section and let the rest of the audit run
            raise UnitSkipped(f"the embedding audit cannot run on these nodes: {err}") from err
        audit.sensitive_name_ = ctx.sensitive_name or audit.sensitive_name_
        return EmbeddingStructureResult(audit=audit, examples=self.examples)
