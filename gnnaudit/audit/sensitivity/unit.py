"""Audit unit: does the model's decision change when the sensitive attribute changes?

The unit runs :func:`~gnnaudit.audit.sensitivity.flip.counterfactual_flip` on the sensitive
attribute at both scopes (the audited node's own value alone, and every node at once), and
ranks every feature by the same intervention (:func:`~gnnaudit.audit.sensitivity.flip.
sensitivity_table`), so a reader sees both *how much* the decisions depend on the attribute
and *whether it matters more than the other inputs*.

Findings and their thresholds (documented constants):

* ``counterfactual flip (<scope> scope)``: the flip rate with its exact binomial interval;
  flagged (a dependence) when the interval **excludes the negligible level**
  :data:`~gnnaudit.audit.report.thresholds.NEGLIGIBLE_FLIP` (its lower end above 1% of the
  audited decisions) **and reaches the material level**
  :data:`~gnnaudit.audit.report.thresholds.MIN_FLIP_EFFECT` (its upper end at or above 5%):
  the model reads the attribute for more than a negligible share of its decisions, and a share
  of 5% or more is consistent with the data. A true flip rate of 5% is flagged whatever the sample size (its
  interval covers 5%); a true 3% on a large sample is not (its interval ends below 5%: a *weak*
  use, stated as such by the verdict); a large sample never flags a negligible rate (the lower
  end stays below 1%). A model that never reads the attribute flips no decision: its rate is
  exactly 0 and never flagged.
* ``sensitivity rank (<scope> scope)``: the attribute's rank among all features by flip rate;
  flagged when it ranks first *and* its flip effect is flagged.

Cost control: the ranking needs one intervention per counterfactual value of every feature
(``B`` batched passes each at node scope, one full-graph pass at graph scope). It runs when the
features have at most ``max_rank_values`` counterfactual values in all (default
:data:`MAX_RANK_VALUES`); above that (e.g. thousands of bag-of-words columns) the ranking is
skipped with a note and :func:`~gnnaudit.audit.sensitivity.flip.feature_sensitivity` can be called on
a chosen subset. Node scope audits a seeded sample of at most ``max_nodes`` nodes
(:data:`~gnnaudit.audit.sensitivity.flip.MAX_NODES`) with passes on their neighbourhood subgraphs.
Large graphs (more than :data:`LARGE_GRAPH_NODES` nodes, unless ``max_nodes`` / ``rank`` are
given explicitly): the ranking is skipped and node scope samples
:data:`LARGE_GRAPH_MAX_NODES` nodes, both stated in the section's notes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch

from gnnaudit._validation import check_int
from gnnaudit.audit.interventions import resolve_feature, resolve_features
from gnnaudit.audit.report.literature import literature_label, literature_statistic
from gnnaudit.audit.report.section import Figure, Finding, ReportSection
from gnnaudit.audit.report.thresholds import (
    FLIP_RULE,
    MIN_FLIP_EFFECT,
    NEGLIGIBLE_FLIP,
    flip_flagged,
)
from gnnaudit.audit.sensitivity.flip import (
    MAX_NODES,
    SCOPES,
    FlipOptions,
    FlipResult,
    sensitivity_results,
    sensitivity_table,
)
from gnnaudit.audit.sensitivity.receptive_field import (
    check_hops_option,
    node_scope_skip,
    receptive_field_unknown,
    resolve_num_hops,
)
from gnnaudit.audit.unit import AuditResult, AuditUnit
from gnnaudit.errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = [
    "SensitivityUnit",
    "SensitivityAudit",
    "MIN_FLIP_EFFECT",
    "NEGLIGIBLE_FLIP",
    "FLIP_RULE",
    "MAX_RANK_VALUES",
    "LARGE_GRAPH_NODES",
    "LARGE_GRAPH_MAX_NODES",
    "flip_flagged",
    "receptive_field_unknown",
]

logger = logging.getLogger(__name__)

#: most counterfactual values (summed over features) the default ranking intervenes on
MAX_RANK_VALUES = 64
#: above this many graph nodes the default unit (large-graph mode, stated in the report) skips
#: the ranking among features (each counterfactual value costs whole-graph passes) and audits
#: node scope on a seeded sample of at most :data:`LARGE_GRAPH_MAX_NODES` nodes
LARGE_GRAPH_NODES = 50_000
#: node-scope sample size in large-graph mode (the sample's batches run on their L-hop balls:
#: on the synthetic credit graph of 1M nodes, three batches covering about 80% of the nodes)
LARGE_GRAPH_MAX_NODES = 500


def _flip_finding(feature: str, scope: str, flip: FlipResult) -> Finding:
    """The ``counterfactual flip (<scope> scope)`` finding of ``feature``."""
    sample = (
        f" (a seeded sample of {flip.n_nodes} of {flip.n_audited} audited nodes)"
        if flip.sampled
        else ""
    )
    graph = scope == "graph"  # NIFTY's counterfactual unfairness (report.literature)
    return Finding(
        finding=f"counterfactual flip ({scope} scope)",
        feature=feature,
        statistic=literature_statistic("cf") if graph else "flip rate",
        value=flip.rate,
        ci_low=flip.ci_low,
        ci_high=flip.ci_high,
        flagged=flip_flagged(flip.ci_low, flip.ci_high),
        explanation=(
            f"Changing {feature} ({_SCOPE_WORDS[scope]}) changes the model's decision for "
            f"{flip.rate:.1%} of the audited nodes{sample} ({flip.confidence:.0%} CI "
            f"{flip.ci_low:.1%} to {flip.ci_high:.1%}). {FLIP_RULE}"
            + (f" {literature_label('cf')}" if graph else "")
        ),
    )


_SCOPE_WORDS = {
    "node": "only the audited node's own value is changed, its neighbours keep theirs",
    "graph": "every node's value is changed at once, so the change also reaches a node "
    "through its neighbours",
}


@dataclass
class SensitivityAudit(AuditResult):
    """What :class:`SensitivityUnit` found.

    Attributes
    ----------
    feature : the sensitive attribute's name.
    flips : scope -> :class:`FlipResult` of the sensitive attribute (scopes that could run).
    rankings : scope -> ranking table of every feature (columns of
        :data:`~gnnaudit.audit.sensitivity.flip.SENSITIVITY_COLUMNS`); empty when skipped.
    notes : why a scope or a ranking was skipped, sampling notes.
    skipped : scope -> why it was skipped and the option that enables it (one sentence, also in
        ``notes``); in the report section's ``data["skipped_scopes"]``.
    others : the further sensitive attributes that are model inputs (``sensitive=[...]``):
        name -> scope -> :class:`FlipResult`, from the same passes; each gets its own flip
        findings.
    """

    feature: str
    flips: dict[str, FlipResult]
    rankings: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    others: dict[str, dict[str, FlipResult]] = field(default_factory=dict)

    def rank_of(self, scope: str) -> int | None:
        """The sensitive attribute's rank at ``scope`` (1 = largest flip rate), None if unranked."""
        table = self.rankings.get(scope)
        if table is None or table.empty:
            return None
        hit = table.loc[table["feature"] == self.feature, "rank"]
        return int(hit.iloc[0]) if len(hit) else None

    def to_frame(self) -> pd.DataFrame:
        """Per scope: the flip rate of the sensitive attribute overall and per group (``scope,
        feature, group, size, rate, ci_low, ci_high``) plus its rank."""
        frames = []
        for scope, flip in self.flips.items():
            frame = flip.to_frame()
            frame["rank"] = self.rank_of(scope)
            frames.append(frame)
        if not frames:
            return pd.DataFrame(
                columns=["feature", "scope", "group", "size", "rate", "ci_low", "ci_high", "rank"]
            )
        return pd.concat(frames, ignore_index=True)

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        for scope, flip in self.flips.items():
            flagged = flip_flagged(flip.ci_low, flip.ci_high)
            out.append(_flip_finding(self.feature, scope, flip))
            rank = self.rank_of(scope)
            if rank is not None:
                n_feat = len(self.rankings[scope])
                top = self.rankings[scope].iloc[0]
                lead = (
                    f"{self.feature} is the feature whose change alters the most decisions"
                    if rank == 1
                    else f"{top['feature']} alters the most decisions ({top['effect']:.1%})"
                )
                out.append(
                    Finding(
                        finding=f"sensitivity rank ({scope} scope)",
                        feature=self.feature,
                        statistic="rank among features by flip rate",
                        value=float(rank),
                        flagged=rank == 1 and flagged,
                        explanation=(
                            f"{self.feature} ranks {rank} of {n_feat} features by the share of "
                            f"decisions its change alters at {scope} scope; {lead}. Flagged when "
                            "it ranks first and its flip rate is flagged."
                        ),
                    )
                )
        for name, scopes in self.others.items():
            out += [_flip_finding(name, scope, flip) for scope, flip in scopes.items()]
        return out

    def report_section(self) -> ReportSection:
        findings = self.findings()
        flagged = [f for f in findings if f.flagged and f.finding.startswith("counterfactual flip")]
        if not self.flips:
            summary = "No scope could be computed. " + " ".join(self.notes)
            return ReportSection(
                key=SensitivityUnit.name,
                title=SensitivityUnit.title,
                summary=summary,
                notes=list(self.notes),
                status="skipped",
                data={"feature": self.feature, "skipped_scopes": dict(self.skipped)},
            )
        parts = [
            f"{scope} scope {flip.rate:.1%} ({flip.ci_low:.1%} to {flip.ci_high:.1%})"
            for scope, flip in self.flips.items()
        ]
        if flagged:
            verdict = (
                f"The model's decisions depend on {self.feature}: at "
                f"{' and '.join(f.finding.split('(')[1].rstrip(')') for f in flagged)} more than "
                f"{NEGLIGIBLE_FLIP:.0%} of them change when it changes, and a share of "
                f"{MIN_FLIP_EFFECT:.0%} or more is consistent with the data."
            )
        else:
            verdict = (
                f"No scope shows a dependence at the documented threshold ({FLIP_RULE[:-1]}) at "
                "this confidence."
            )
        tables: dict[str, pd.DataFrame] = {"flip_by_group": self.to_frame()}
        figures: list[Figure] = []
        for scope, table in self.rankings.items():
            tables[f"ranking_{scope}"] = table
            chart = table[["feature", "effect", "ci_low", "ci_high"]].rename(
                columns={"feature": "label", "effect": "value"}
            )
            figures.append(
                Figure(
                    kind="bar",
                    title=f"Share of decisions that change when a feature changes ({scope} scope)",
                    data=chart.head(20),
                    options={
                        "xlabel": "flip rate",
                        "highlight": [self.feature],
                        "vline": MIN_FLIP_EFFECT,
                    },
                )
            )
        return ReportSection(
            key=SensitivityUnit.name,
            title=f"{SensitivityUnit.title} (sensitive: {self.feature})",
            summary=f"Flip rate of {self.feature}: {'; '.join(parts)}. {verdict}",
            tables=tables,
            figures=figures,
            notes=[
                "Binary features are flipped, categorical ones moved to every other value (a node "
                "counts when any value changes its decision), continuous ones swapped to the "
                "opposite quantile. Intervals: exact binomial (Clopper-Pearson) over audited nodes, so "
                f"no flip observed still gives an upper bound of about 3.7/n. {FLIP_RULE}",
                *self.notes,
            ],
            data={
                "feature": self.feature,
                **{f"flip_rate_{s}": f.rate for s, f in self.flips.items()},
                **{f"rank_{s}": self.rank_of(s) for s in self.flips},
                "skipped_scopes": dict(self.skipped),
            },
        )


class SensitivityUnit(AuditUnit):
    """Audit unit: counterfactual flip of the sensitive attribute and its rank among features.

    Parameters
    ----------
    scopes : which scopes to run (default both, ``("node", "graph")``).
    rank : rank the attribute among all features (within ``max_rank_values``); None (default):
        rank unless the graph has more than :data:`LARGE_GRAPH_NODES` nodes (then a note).
    num_hops : the model's receptive-field radius for node scope (default: inferred from its
        ``MessagePassing`` layers; node scope is skipped with a note when it cannot be, recorded
        in :attr:`SensitivityAudit.skipped`).
    max_nodes : node-scope sample size (see :func:`counterfactual_flip`); None (default):
        :data:`~gnnaudit.audit.sensitivity.flip.MAX_NODES`, or :data:`LARGE_GRAPH_MAX_NODES` above
        :data:`LARGE_GRAPH_NODES` graph nodes.
    max_rank_values : most counterfactual values the ranking intervenes on (module docstring).
    n_boot : bootstrap resamples of the intervals (None: the audit's ``n_boot``).
    client : a ``dask.distributed.Client`` running the ranking's per-feature passes on its
        workers (the :class:`~gnnaudit.audit.sensitivity.options.FlipOptions` ``client``).
    hops_option : the option the node-scope skip note tells the reader to pass (a key of
        :data:`~gnnaudit.audit.sensitivity.receptive_field.HOPS_OPTIONS`): ``"num_hops"`` (default, this constructor's) or ``"model_hops"``
        (set by ``run_audit`` on its default units, whose option it is).
    """

    name = "sensitivity"
    title = "Counterfactual sensitivity"
    requires = ("sensitive_feature",)
    meaningless_when_degenerate = True

    def __init__(
        self,
        scopes: tuple[str, ...] | list[str] = SCOPES,
        rank: bool | None = None,
        num_hops: int | None = None,
        max_nodes: int | None = None,
        max_rank_values: int = MAX_RANK_VALUES,
        n_boot: int | None = None,
        client: Any = None,
        hops_option: str = "num_hops",
    ) -> None:
        scopes = tuple(scopes)
        if not scopes or any(s not in SCOPES for s in scopes):
            raise InvalidInputError(f"scopes must be a non-empty subset of {SCOPES}, got {scopes}")
        self.scopes = tuple(dict.fromkeys(scopes))
        if rank is not None and not isinstance(rank, bool):
            raise InvalidInputError(f"rank must be True, False or None, got {rank!r}")
        self.rank = rank
        self.num_hops = None if num_hops is None else check_int("num_hops", num_hops, minimum=0)
        self.max_nodes = None if max_nodes is None else check_int("max_nodes", max_nodes, minimum=1)
        self.max_rank_values = check_int("max_rank_values", max_rank_values, minimum=1)
        self.n_boot = None if n_boot is None else check_int("n_boot", n_boot, minimum=1)
        self.client = client
        self.hops_option = check_hops_option(hops_option)

    def _node_scope_skip(self, ctx: AuditContext) -> str | None:
        """The note of a skipped node scope (the receptive field is neither given nor
        inferable), or None when node scope can run."""
        why = node_scope_skip(ctx.adapter, self.num_hops, self.hops_option, type(self).__name__)
        return None if why is None else f"Node scope skipped: {why}"

    def run(self, ctx: AuditContext) -> SensitivityAudit:
        data = ctx.data
        column = ctx.sensitive_column
        assert column is not None  # guaranteed by requires
        spec = resolve_feature(data, int(column))
        notes: list[str] = [a.note for a in ctx.attributes if a.note]
        # the further sensitive attributes that are inputs get their flips from the same passes
        extra = [
            resolve_feature(data, int(a.column))
            for a in ctx.attributes[1:]
            if a.column is not None and a.column != column
        ]
        specs, max_nodes = self._plan(ctx, [spec, *extra], notes)
        flips: dict[str, FlipResult] = {}
        rankings: dict[str, pd.DataFrame] = {}
        skipped: dict[str, str] = {}
        extra_flips: dict[str, dict[str, FlipResult]] = {s.name: {} for s in extra}
        for scope in self.scopes:
            results = self._scope_results(ctx, scope, specs, max_nodes, skipped)
            if results is None:
                notes.append(skipped[scope])
                continue
            own = next(r for r in results if r.feature == spec.name)
            flips[scope] = own
            for s in extra:
                extra_flips[s.name][scope] = next(r for r in results if r.feature == s.name)
            if len(results) > len(extra) + 1 or (len(results) > 1 and not extra):
                rankings[scope] = sensitivity_table(results)
            if own.sampled:
                notes.append(
                    f"{scope.capitalize()} scope audited a seeded sample of {own.n_nodes} of "
                    f"{own.n_audited} nodes; the interval covers the sampling."
                )
        return SensitivityAudit(
            feature=spec.name,
            flips=flips,
            rankings=rankings,
            notes=notes,
            skipped=skipped,
            others=extra_flips,
        )

    def _plan(self, ctx: AuditContext, specs: list[Any], notes: list[str]) -> tuple[list[Any], int]:
        """The features to flip (``specs``, the sensitive ones, after every other feature when
        ranking) and the node cap per scope, each skip noted in ``notes``."""
        large = ctx.num_nodes > LARGE_GRAPH_NODES
        rank = self.rank if self.rank is not None else not large
        max_nodes = self.max_nodes
        if max_nodes is None:
            max_nodes = LARGE_GRAPH_MAX_NODES if large else MAX_NODES
        if large and self.rank is None:
            notes.append(
                f"Ranking among features skipped: the graph has {ctx.num_nodes:,} nodes, more "
                f"than LARGE_GRAPH_NODES = {LARGE_GRAPH_NODES:,} (each counterfactual value "
                "costs whole-graph passes); pass SensitivityUnit(rank=True) or call "
                "feature_sensitivity(model, data, features=[...])."
            )
        if rank:
            others = resolve_features(ctx.data, None)
            n_values = sum(_n_values(s, ctx.data) for s in others)
            if n_values <= self.max_rank_values:
                names = {s.name for s in others}
                specs = others + [s for s in specs if s.name not in names]
            else:
                notes.append(
                    f"Ranking among features skipped: the {len(others)} features have {n_values} "
                    f"counterfactual values, above the cap of {self.max_rank_values}; call "
                    "feature_sensitivity(model, data, features=[...]) on a chosen subset."
                )
        return specs, int(max_nodes)

    def _scope_results(
        self,
        ctx: AuditContext,
        scope: str,
        specs: list[Any],
        max_nodes: int,
        skipped: dict[str, str],
    ) -> list[FlipResult] | None:
        """The flips of every feature of ``specs`` at ``scope``; None when the scope is
        skipped (the reason in ``skipped[scope]``)."""
        hops = None
        if scope == "node":
            skip = self._node_scope_skip(ctx)
            if skip is not None:
                skipped[scope] = skip
                return None
            hops = resolve_num_hops(ctx.adapter, self.num_hops)
        options = FlipOptions(
            num_hops=hops,
            max_nodes=max_nodes,
            sensitive=ctx.sensitive,
            confidence=ctx.options.confidence,
            base_logits=ctx.logits,
            progress=bool(ctx.options.progress),
            client=self.client,
            remote=ctx.remote,
        )
        results, _ = sensitivity_results(
            ctx.adapter,
            ctx.data,
            specs,
            ctx.group_nodes,
            scope,
            ctx.options.n_boot if self.n_boot is None else self.n_boot,
            ctx.options.random_state,
            options,
        )
        return results


def _n_values(spec: Any, data: Any) -> int:
    """Counterfactual values the intervention on ``spec`` tries per node."""
    if spec.kind in ("binary", "continuous"):
        return 1
    if spec.kind == "one-hot":
        return max(1, len(spec.columns) - 1)
    values = torch.unique(data.x[:, spec.columns[0]])
    return max(1, int(values.numel()) - 1)
