r"""Audit unit: which inputs carry the sensitive attribute (its proxies), and does the model use them?

A model can reach a sensitive attribute ``S`` it never sees through inputs that predict it. The
unit ranks every input feature ``X_j`` (the attribute's own column left out) by the mutual
information :math:`I(X_j; S)` (``sklearn.feature_selection.mutual_info_classif``, seeded; the
k-nearest-neighbour estimator for continuous columns, counts for discrete ones), reported as
the share of the attribute's entropy it explains,

.. math:: r_j = I(X_j; S) / H(S) \in [0, 1],

and, for the top ``top`` proxies, their own counterfactual flip rates at node and graph scope
(the flip test of :mod:`gnnaudit.audit.sensitivity.flip`, exact binomial intervals), so the
reader sees whether the model's decisions depend on the proxies themselves.

The model's hidden representation: when the model is an ``nn.Module``, a forward hook on its
last parametrised submodule captures that module's input (the penultimate representation) in
one extra forward pass, and a cross-validated logistic probe (3 folds, balanced accuracy)
measures how well it predicts ``S``; chance is ``1 / (number of groups)``. A plain callable has
no such layer: the probe is skipped with a note.

Finding ``proxies`` (feature ``S``): value :math:`\max_j r_j`; flagged when the model *uses* a
strong proxy: an input explaining at least :data:`PROXY_SHARE` (a fifth) of the attribute's
entropy whose own counterfactual flip is flagged at either scope
(:func:`~gnnaudit.audit.report.thresholds.flip_flagged`). A strong proxy the model does not
read is a fact about the data, stated in the finding but not flagged: a model that reads
neither the attribute nor its proxies gets no flag about the attribute.

Cost: one MI estimate per feature on at most :data:`MAX_PROXY_NODES` seeded nodes; the flip
passes of the *strong* proxies among the top ``top`` only (a weak one cannot raise the flag, so
its flip is not run and its rates are NaN), with the node sample of the sensitivity unit (at most
:data:`~gnnaudit.audit.sensitivity.options.MAX_NODES` nodes, or
:data:`~gnnaudit.audit.sensitivity.unit.LARGE_GRAPH_MAX_NODES` above
:data:`~gnnaudit.audit.sensitivity.unit.LARGE_GRAPH_NODES` graph nodes); one forward pass for
the probe.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from gnnaudit._validation import check_bool, check_int
from gnnaudit.audit.interventions import MAX_CATEGORIES, detect_kind, resolve_feature
from gnnaudit.audit.report.section import Finding, ReportSection
from gnnaudit.audit.report.thresholds import flip_flagged
from gnnaudit.audit.sensitive import known_group_mask
from gnnaudit.audit.sensitivity.flip import FlipOptions, sensitivity_results
from gnnaudit.audit.sensitivity.options import MAX_NODES
from gnnaudit.audit.sensitivity.receptive_field import (
    check_hops_option,
    node_scope_skip,
    resolve_num_hops,
)
from gnnaudit.audit.sensitivity.unit import LARGE_GRAPH_MAX_NODES, LARGE_GRAPH_NODES
from gnnaudit.audit.unit import AuditResult, AuditUnit

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = ["ProxyUnit", "ProxyAudit", "PROXY_SHARE", "MAX_PROXY_NODES", "rank_proxies"]

logger = logging.getLogger(__name__)

#: a feature explaining at least this share of the attribute's entropy is a strong proxy
PROXY_SHARE = 0.2
#: most nodes the mutual information and the probe use (a seeded sample above)
MAX_PROXY_NODES = 5000


def _entropy(codes: np.ndarray) -> float:
    p = np.bincount(codes) / codes.size
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def rank_proxies(
    x: np.ndarray, names: list[str], codes: np.ndarray, random_state: int = 0
) -> pd.DataFrame:
    """``feature, mutual_information, entropy_share`` of every column of ``x`` for the group
    codes ``codes``, sorted by decreasing information (module docstring)."""
    from sklearn.feature_selection import mutual_info_classif

    discrete = np.array(
        [detect_kind(x[:, j], MAX_CATEGORIES) != "continuous" for j in range(x.shape[1])]
    )
    mi = mutual_info_classif(
        x, codes, discrete_features=discrete, n_neighbors=3, random_state=random_state
    )
    h = _entropy(codes)
    frame = pd.DataFrame(
        {"feature": names, "mutual_information": mi, "entropy_share": np.clip(mi / h, 0, 1)}
    )
    return frame.sort_values("mutual_information", ascending=False, kind="stable").reset_index(
        drop=True
    )


@dataclass
class ProxyAudit(AuditResult):
    """What :class:`ProxyUnit` found: the ranking (``feature, mutual_information,
    entropy_share`` and the top proxies' ``flip_node`` / ``flip_graph`` rates with
    ``flagged_node`` / ``flagged_graph``, their flip flags), the hidden probe's balanced
    accuracy and chance level (NaN when skipped), notes."""

    feature: str
    ranking: pd.DataFrame
    probe_accuracy: float = float("nan")
    chance: float = float("nan")
    is_input: bool = True
    notes: list[str] = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        return self.ranking

    def _lead(self, top: int) -> str:
        parts = []
        for row in self.ranking.head(top).itertuples():
            flips = [
                f"flip {getattr(row, f'flip_{s}'):.1%} at {s} scope"
                for s in ("node", "graph")
                if f"flip_{s}" in self.ranking and np.isfinite(getattr(row, f"flip_{s}"))
            ]
            more = f"; {', '.join(flips)}" if flips else ""
            parts.append(f"{row.feature} ({row.entropy_share:.0%} of its entropy{more})")
        if float(self.ranking["entropy_share"].iloc[0]) < PROXY_SHARE:
            return (
                f"No input is a strong proxy of {self.feature} (none explains "
                f"{PROXY_SHARE:.0%} of its entropy); the closest are {', '.join(parts)}"
            )
        return f"The inputs that best predict {self.feature} are {', '.join(parts)}"

    @property
    def used_proxies(self) -> list[str]:
        """The strong proxies (at least :data:`PROXY_SHARE` of the entropy) whose own flip is
        flagged at either scope: inputs through which the model can reach the attribute."""
        strong = self.ranking[self.ranking["entropy_share"] >= PROXY_SHARE]
        used = np.zeros(len(strong), dtype=bool)
        for scope in ("node", "graph"):
            if f"flagged_{scope}" in strong:
                used |= strong[f"flagged_{scope}"].to_numpy(dtype=bool)
        return [str(f) for f in strong["feature"][used]]

    def findings(self) -> list[Finding]:
        if self.ranking.empty:
            return []
        value = float(self.ranking["entropy_share"].iloc[0])
        text = self._lead(3) + ". "
        if np.isfinite(self.probe_accuracy):
            text += (
                f"The model's hidden representation predicts {self.feature} with balanced "
                f"accuracy {self.probe_accuracy:.2f} (3-fold cross-validated probe; chance "
                f"{self.chance:.2f}). "
            )
        used = self.used_proxies
        if used:
            text += f"The model's decisions depend on {', '.join(used)} (flip flagged). "
        text += (
            f"Flagged when an input explaining at least {PROXY_SHARE:.0%} of the attribute's "
            "entropy (mutual information) also changes the model's decisions (its own flip "
            "flagged): a proxy the model does not read is a fact about the data, not the model."
        )
        return [
            Finding(
                finding="proxies",
                feature=self.feature,
                statistic="share of the attribute's entropy explained by the top input",
                value=value,
                flagged=bool(used),
                explanation=text,
            )
        ]

    def report_section(self) -> ReportSection:
        summary = (self._lead(3) + ".") if not self.ranking.empty else "No input to rank."
        return ReportSection(
            key=ProxyUnit.name,
            title=f"{ProxyUnit.title} (sensitive: {self.feature})",
            summary=summary,
            tables={"proxies": self.ranking},
            notes=[
                "Mutual information by sklearn's mutual_info_classif (seeded), as a share of "
                "the attribute's entropy; flip rates of the top proxies by the counterfactual "
                "flip test.",
                *self.notes,
            ],
            data={"probe_accuracy": self.probe_accuracy, "chance": self.chance},
        )


class ProxyUnit(AuditUnit):
    """Audit unit: the proxies of the sensitive attribute (module docstring).

    Parameters
    ----------
    top : proxies whose flip rates are measured and named (default 3).
    num_hops : the model's receptive-field radius for node-scope flips (default: inferred).
    probe : fit the hidden-representation probe (default True).
    hops_option : the option a node-scope skip note names (a key of
        :data:`~gnnaudit.audit.sensitivity.receptive_field.HOPS_OPTIONS`): ``"num_hops"``
        (default, this constructor's) or ``"model_hops"`` (the audit's default units).
    """

    name = "proxies"
    title = "Proxies of the sensitive attribute"
    requires = ("sensitive",)

    def __init__(
        self,
        top: int = 3,
        num_hops: int | None = None,
        probe: bool = True,
        hops_option: str = "num_hops",
    ) -> None:
        self.top = check_int("top", top, minimum=1, maximum=50)
        self.num_hops = None if num_hops is None else check_int("num_hops", num_hops, minimum=0)
        self.probe = check_bool("probe", probe)
        self.hops_option = check_hops_option(hops_option)

    def run(self, ctx: AuditContext) -> ProxyAudit:
        x, names = ctx.features
        assert ctx.sensitive is not None and ctx.sensitive_name is not None
        codes = np.unique(ctx.sensitive, return_inverse=True)[1].reshape(-1)
        keep = [j for j in range(x.shape[1]) if j != ctx.sensitive_column]
        rows = _probe_rows(ctx)
        notes: list[str] = []
        if not keep:
            return ProxyAudit(ctx.sensitive_name, pd.DataFrame(), notes=["No other input."])
        ranking = rank_proxies(
            x[rows][:, keep], [names[j] for j in keep], codes[rows], ctx.options.random_state
        )
        ranking = self._with_flips(ctx, ranking, notes)
        accuracy, chance = self._probe(ctx, codes, rows, notes)
        return ProxyAudit(
            ctx.sensitive_name,
            ranking,
            accuracy,
            chance,
            is_input=ctx.sensitive_column is not None,
            notes=notes,
        )

    def _with_flips(
        self, ctx: AuditContext, ranking: pd.DataFrame, notes: list[str]
    ) -> pd.DataFrame:
        """``ranking`` with the flip rates at both scopes of the top proxies that are strong
        (NaN for the others: the flag needs a strong proxy, so a weak one's flip is not run)."""
        head = ranking.head(self.top)
        top = list(head["feature"][head["entropy_share"] >= PROXY_SHARE])
        for scope in ("node", "graph"):
            ranking[f"flip_{scope}"] = np.full(len(ranking), np.nan)
            ranking[f"flagged_{scope}"] = np.zeros(len(ranking), dtype=bool)
        if not top:
            notes.append(
                f"No flip test of a proxy: none of the top {self.top} explains "
                f"{PROXY_SHARE:.0%} of the attribute's entropy."
            )
            return ranking
        specs = [resolve_feature(ctx.data, name) for name in top]
        max_nodes = LARGE_GRAPH_MAX_NODES if ctx.num_nodes > LARGE_GRAPH_NODES else MAX_NODES
        for scope in ("node", "graph"):
            rates = np.full(len(ranking), np.nan)
            flags = np.zeros(len(ranking), dtype=bool)
            hops = None
            if scope == "node":
                why = node_scope_skip(ctx.adapter, self.num_hops, self.hops_option, "ProxyUnit")
                if why is not None:
                    notes.append(f"Node-scope flips of the proxies skipped: {why}")
                    continue
                hops = resolve_num_hops(ctx.adapter, self.num_hops)
            options = FlipOptions(
                num_hops=hops,
                max_nodes=max_nodes,
                base_logits=ctx.logits,
                progress=bool(ctx.options.progress),
                remote=ctx.remote,
            )
            results, _ = sensitivity_results(
                ctx.adapter, ctx.data, specs, ctx.nodes, scope, 1, ctx.options.random_state, options
            )
            rates[: len(results)] = [r.rate for r in results]
            flags[: len(results)] = [flip_flagged(r.ci_low, r.ci_high) for r in results]
            ranking[f"flip_{scope}"] = rates
            ranking[f"flagged_{scope}"] = flags
        return ranking

    def factual_inputs(self, ctx: AuditContext) -> list[tuple[Any, np.ndarray]]:
        """The probe reads the input of the last layer with parameters at the probe's rows:
        kept from the audit's factual pass instead of a pass of its own."""
        layer = self._probe_layer(ctx)
        return [] if layer is None else [(layer, _probe_rows(ctx))]

    def _probe_layer(self, ctx: AuditContext) -> torch.nn.Module | None:
        """The probed layer: the model's last module with parameters of its own (None: no
        probe, or no such module)."""
        model = ctx.adapter.model
        if not self.probe or not isinstance(model, torch.nn.Module):
            return None
        layers = [m for m in model.modules() if any(True for _ in m.parameters(recurse=False))]
        return layers[-1] if layers else None

    def _probe(
        self, ctx: AuditContext, codes: np.ndarray, rows: np.ndarray, notes: list[str]
    ) -> tuple[float, float]:
        """Balanced accuracy of a cross-validated logistic probe on the penultimate layer."""
        chance = 1.0 / np.unique(codes).size
        layer = self._probe_layer(ctx)
        if layer is None:
            notes.append("Hidden-representation probe skipped: the model has no layers to hook.")
            return float("nan"), chance
        h = _hidden_rows(ctx, layer, rows)
        if h is None:
            notes.append("Hidden-representation probe skipped: no per-node representation.")
            return float("nan"), chance
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import cross_val_score

        if np.bincount(codes[rows]).min() < 3:
            notes.append("Hidden-representation probe skipped: a group has fewer than 3 nodes.")
            return float("nan"), chance
        scores = cross_val_score(
            LogisticRegression(max_iter=500), h, codes[rows], cv=3, scoring="balanced_accuracy"
        )
        return float(np.mean(scores)), chance


def _probe_rows(ctx: AuditContext) -> np.ndarray:
    """The nodes the proxies are ranked and probed on: those whose group is known
    (:func:`~gnnaudit.audit.sensitive.known_group_mask`: every node unless the data marks
    unknown values of its attribute), or a seeded sample of :data:`MAX_PROXY_NODES` of them
    (ascending)."""
    ids = np.flatnonzero(known_group_mask(ctx.data, ctx.num_nodes, ctx.sensitive_name))
    if ids.size <= MAX_PROXY_NODES:
        return ids
    return ids[np.sort(ctx.options.rng(41).choice(ids.size, MAX_PROXY_NODES, replace=False))]


def _hidden_rows(ctx: AuditContext, layer: torch.nn.Module, rows: np.ndarray) -> np.ndarray | None:
    """The input of ``layer`` at ``rows`` on the factual graph (float64): kept from the audit's
    factual pass when it was asked to (:meth:`ProxyUnit.factual_inputs`), else from one
    forward pass with a hook (on the cluster's partitions when the audit is distributed);
    None when that input is not one row per node."""
    from_factual, kept = ctx.factual_input(layer)
    if from_factual:
        return None if kept is None else kept.to(torch.float64).numpy()
    if ctx.remote is not None:
        name = ctx.module_name(layer)
        got = None if name is None else ctx.remote.hidden(name, rows)
        return None if got is None else got.to(torch.float64).numpy()
    seen: list[torch.Tensor] = []

    def hook(_module: Any, inputs: Any, _output: Any) -> None:
        if inputs and torch.is_tensor(inputs[0]):
            seen.append(inputs[0].detach().cpu())

    handle = layer.register_forward_hook(hook)
    try:
        ctx.adapter.logits(ctx.data.x, ctx.data.edge_index, stage="the proxy probe")
    finally:
        handle.remove()
    hidden = seen[-1] if seen else None
    if hidden is None or hidden.dim() != 2 or hidden.size(0) != ctx.num_nodes:
        return None
    out: np.ndarray = hidden.to(torch.float64).numpy()[rows]
    return out
