r"""The computations of :class:`~gnnaudit.audit.fairness.literature_unit.LiteratureMetricsUnit`
(definitions, intervals, flags and reuse of cached results: that module's docstring): one table
row, one plain-words sentence and the notes per metric."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnnaudit.audit.fairness.group_fairness import (
    EOD_THRESHOLD,
    FOUR_FIFTHS,
    GroupFairness,
    group_fairness,
)
from gnnaudit.audit.fairness.literature_intervals import auroc_interval, f1_interval
from gnnaudit.audit.intervals import binomial_interval
from gnnaudit.audit.report.thresholds import FLIP_RULE, flip_flagged
from gnnaudit.audit.sensitivity.flip import FlipResult, counterfactual_flip
from gnnaudit.errors import WorkerLostError

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = ["compute_rows", "METRIC_NAMES"]

logger = logging.getLogger(__name__)

#: display name of each metric key
METRIC_NAMES = {
    "auroc": "AUROC",
    "f1": "F1",
    "dsp": "delta SP",
    "deo": "delta EO",
    "cf": "counterfactual unfairness",
    "instability": "instability",
}
#: seed streams of the AUROC and F1 bootstraps (``AuditOptions.rng(offset)``)
_AUROC_STREAM, _F1_STREAM = 41, 42


class _Rows:
    """Collects the table rows, the explanations and the notes of one run."""

    def __init__(self, confidence: float) -> None:
        self.rows: list[dict[str, Any]] = []
        self.explanations: dict[str, str] = {}
        self.notes: list[str] = []
        self.level = f"{confidence:.0%}"

    def add(
        self,
        metric: str,
        estimate: tuple[float, float, float],
        interval: str,
        explanation: str,
        flagged: bool = False,
    ) -> None:
        value, lo, hi = (float(v) for v in estimate)
        self.rows.append(
            {
                "metric": metric,
                "name": METRIC_NAMES[metric],
                "value": value,
                "ci_low": lo,
                "ci_high": hi,
                "interval": interval,
                "flagged": bool(flagged),
            }
        )
        self.explanations[metric] = explanation

    def ci(self, lo: float, hi: float) -> str:
        return f"{self.level} CI {lo:.3f} to {hi:.3f}"


def _quality_rows(ctx: AuditContext, out: _Rows) -> None:
    """AUROC and F1 of the model on the audited nodes (module docstring)."""
    opts, nodes = ctx.options, ctx.nodes
    assert ctx.labels is not None  # guaranteed by requires
    y, pred = ctx.labels[nodes], ctx.predictions[nodes]
    width = int(ctx.logits.shape[1])
    logits = ctx.logits[torch.as_tensor(nodes)].to(torch.float64)
    present = np.unique(y)
    if present.size < 2:
        out.notes.append("AUROC left out: the audited nodes' labels hold a single class.")
    else:
        if width == 2:
            scores, positives = [(logits[:, 1] - logits[:, 0]).numpy()], [y == 1]
            what = "the model's score for class 1 ranks a random audited node of class 1 above"
            what += " a random one of class 0"
        else:
            probs = torch.softmax(logits, dim=1).numpy()
            scores = [probs[:, c] for c in present]
            positives = [y == c for c in present]
            what = "averaged over the classes (one-vs-rest), the model's probability of a class "
            what += "ranks a random audited member of it above a random non-member"
            if present.size < width:
                out.notes.append(
                    f"Macro AUROC averages the {present.size} classes present among the audited "
                    f"labels ({present.tolist()}) of the model's {width}."
                )
        est = auroc_interval(
            scores,
            positives,
            n_boot=opts.n_boot,
            confidence=opts.confidence,
            rng=opts.rng(_AUROC_STREAM),
        )
        out.add(
            "auroc",
            est,
            "percentile bootstrap",
            f"AUROC {est[0]:.3f} ({out.ci(est[1], est[2])}): {what} with this probability; 0.5 "
            "is chance, 1 a perfect ranking. Informational (no documented threshold).",
        )
    k = max(width, int(y.max()) + 1, int(pred.max()) + 1)
    est = f1_interval(
        y, pred, k, n_boot=opts.n_boot, confidence=opts.confidence, rng=opts.rng(_F1_STREAM)
    )
    what = "of class 1" if k == 2 else "macro-averaged over the classes"
    out.add(
        "f1",
        est,
        "percentile bootstrap",
        f"F1 {what} {est[0]:.3f} ({out.ci(est[1], est[2])}): the harmonic mean of precision "
        "and recall on the audited nodes. Informational (no documented threshold).",
    )


def _group_result(ctx: AuditContext) -> GroupFairness:
    """The group-fairness figures of the primary attribute with class 1 favourable: the group
    fairness unit's own result when it ran, else the same call (same seed, same intervals)."""
    cached = ctx.results.get("group_fairness")
    cached = getattr(cached, "results", [cached])[0]  # several attributes: the first one's
    if (
        isinstance(cached, GroupFairness)
        and cached.positive_class == 1
        and cached.sensitive_name == ctx.sensitive_name
    ):
        return cached
    from gnnaudit.audit.sensitive import group_labels

    return group_fairness(
        ctx.labels,
        ctx.predictions,
        sensitive_features=group_labels(ctx.data, ctx.attributes[0]),
        sensitive_name=ctx.sensitive_name,
        mask=ctx.nodes,
        positive_class=1,
        n_boot=ctx.options.n_boot,
        confidence=ctx.options.confidence,
        random_state=ctx.options.random_state,
        n_classes=int(ctx.logits.shape[1]),
    )


def _gap_rows(ctx: AuditContext, out: _Rows) -> None:
    """ΔSP and ΔEO: the group-fairness unit's figures and flags (module docstring)."""
    gf = _group_result(ctx)
    name = ctx.sensitive_name
    n_groups = len(gf.groups)
    how = []
    if gf.class_gaps is not None:
        how.append("the largest gap over the classes")
    if n_groups > 2:
        how.append(f"the largest minus the smallest rate over the {n_groups} groups")
    extra = f" ({'; '.join(how)})" if how else ""
    lo, hi = gf.spd_ci
    out.add(
        "dsp",
        (gf.statistical_parity_difference, lo, hi),
        _interval_name(gf.spd_comparisons),
        f"The share of audited nodes predicted class 1 differs by "
        f"{gf.statistical_parity_difference:.1%} between the {name} groups{extra}: NIFTY's "
        "delta SP, the group-fairness section's statistical parity difference. "
        + _signed(
            out,
            gf,
            "PR",
            gf.spd_groups,
            gf.spd_comparisons,
            (gf.statistical_parity_difference, lo, hi),
        )
        + f" Flagged as there: four-fifths rule broken (ratio < {FOUR_FIFTHS}) and the "
        "interval's lower end above 0.",
        gf.spd_flagged,
    )
    if not np.isfinite(gf.equal_opportunity_difference):
        out.notes.append(
            f"delta EO left out: fewer than two {name} groups have audited nodes of class 1."
        )
        return
    lo, hi = gf.eod_ci
    out.add(
        "deo",
        (gf.equal_opportunity_difference, lo, hi),
        _interval_name(gf.eod_comparisons),
        f"Among audited nodes of class 1, the share predicted 1 differs by "
        f"{gf.equal_opportunity_difference:.1%} between the {name} groups{extra}: NIFTY's "
        "delta EO, the group-fairness section's equal opportunity difference. "
        + _signed(
            out,
            gf,
            "TPR",
            gf.eod_groups,
            gf.eod_comparisons,
            (gf.equal_opportunity_difference, lo, hi),
        )
        + f" Flagged as there: the interval's lower end above {EOD_THRESHOLD:.0%}.",
        gf.eod_flagged,
    )


def _interval_name(comparisons: int) -> str:
    """The ``interval`` cell of a gap row."""
    if comparisons > 1:
        return f"Newcombe score, signed, Bonferroni over {comparisons} pairs"
    return "Newcombe score, signed"


def _signed(
    out: _Rows,
    gf: GroupFairness,
    rate: str,
    groups: tuple[Any, Any] | None,
    comparisons: int,
    estimate: tuple[float, float, float],
) -> str:
    """What the gap's interval is of, in plain words: the signed difference ``rate(hi) -
    rate(lo)`` of ``groups`` (``estimate``: value, ci_low, ci_high), simultaneous over the
    ``comparisons`` pairs when there are several."""
    value, lo, hi = estimate
    if groups is None:
        return f"{out.ci(lo, hi)}."
    name = gf.sensitive_name or "sensitive"
    a, b = (g if isinstance(g, str) else f"{name}={g}" for g in groups)
    text = (
        f"The interval is for the signed difference {rate}({a}) - {rate}({b}) = {value:+.3f} "
        f"({out.ci(lo, hi)}, Newcombe's score interval), so it reaches below 0 when the data "
        "do not tell which group has the higher rate"
    )
    if comparisons > 1:
        pairs = "group pairs" if gf.class_gaps is None else "group pairs of all classes"
        text += (
            f"; it is simultaneous over the {comparisons} {pairs} (Bonferroni), as the pair "
            "was picked for having the largest gap"
        )
    return text + "."


def _graph_flip(ctx: AuditContext) -> tuple[FlipResult, bool]:
    """The graph-scope flip of the sensitive attribute on the audited nodes and whether it was
    reused from the sensitivity unit's result (else computed here, one forward pass)."""
    column = int(ctx.sensitive_column)  # type: ignore[arg-type]  # checked by the caller
    cached = ctx.results.get("sensitivity")
    flip = getattr(cached, "flips", {}).get("graph") if cached is not None else None
    if (
        isinstance(flip, FlipResult)
        and column in flip.columns
        and np.array_equal(flip.nodes, ctx.nodes)
    ):
        return flip, True
    opts = ctx.options
    flip = counterfactual_flip(
        ctx.adapter,
        ctx.data,
        column,
        mask=ctx.nodes,
        scope="graph",
        n_boot=opts.n_boot,
        random_state=opts.random_state,
        sensitive=ctx.sensitive,
        confidence=opts.confidence,
        base_logits=ctx.logits,
        progress=False,
    )
    return flip, False


def _cf_row(ctx: AuditContext, out: _Rows) -> None:
    """Counterfactual unfairness = the graph-scope flip rate (module docstring)."""
    name = ctx.sensitive_name
    if ctx.sensitive_column is None:
        out.notes.append(
            f"Counterfactual unfairness left out: {name} is not a model input, so it cannot be "
            "flipped."
        )
        return
    flip, reused = _graph_flip(ctx)
    out.notes.append(
        "Counterfactual unfairness is the graph-scope flip rate of "
        f"{name} on the audited nodes"
        + (", read from the sensitivity section (not recomputed)." if reused else ".")
    )
    if flip.kind != "binary":
        out.notes.append(
            f"{name} is {flip.kind}, not binary as in NIFTY: a node counts when the change used "
            "by the flip test (every other value; the opposite quantile for a continuous "
            "attribute), applied to every node at once, changes its decision."
        )
    out.add(
        "cf",
        (flip.rate, flip.ci_low, flip.ci_high),
        "exact (Clopper-Pearson)",
        f"Changing {name} for every node at once (NIFTY's counterfactual) changes the decision "
        f"of {flip.rate:.1%} of the audited nodes ({out.ci(flip.ci_low, flip.ci_high)}): "
        "NIFTY's counterfactual unfairness, the graph-scope flip rate of the sensitivity "
        f"section. {FLIP_RULE}",
        flip_flagged(flip.ci_low, flip.ci_high),
    )


def _instability_row(ctx: AuditContext, noise_std: float, out: _Rows) -> None:
    """Share of audited decisions changed by seeded N(0, noise_std^2) feature noise."""
    opts, nodes, x = ctx.options, ctx.nodes, ctx.data.x
    gen = torch.Generator().manual_seed(int(opts.random_state))
    noise = torch.randn(tuple(x.shape), generator=gen, dtype=x.dtype) * noise_std
    try:
        noisy = _noisy_logits(ctx, noise)
    except WorkerLostError:  # the cluster failed, not the model: the audit stops
        raise
    except Exception as exc:  # noqa: BLE001  # deliberate: noisy inputs leave the data's domain
        # a model may accept only the values its inputs take (codes it embeds, one-hot
        # lookups); the noise leaves that domain, so the figure is undefined, not a bug
        logger.warning("instability left out: the model failed on noisy features: %s", exc)
        out.notes.append(
            "Instability left out: the model cannot be evaluated on noisy features "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})."
        )
        return
    changed = noisy.argmax(dim=1).numpy()[nodes] != ctx.predictions[nodes]
    k, m = int(changed.sum()), int(nodes.size)
    lo, hi = binomial_interval(k, m, opts.confidence)
    out.add(
        "instability",
        (k / m, lo, hi),
        "exact (Clopper-Pearson)",
        f"Adding independent N(0, {noise_std:g}^2) noise (seed {opts.random_state}) to every "
        f"input feature, {ctx.sensitive_name or 'the sensitive one'} included, changes the "
        f"decision of {k / m:.1%} of the audited nodes ({out.ci(lo, hi)}): NIFTY's "
        "instability. Informational (no documented threshold; it depends on the features' "
        "scale).",
    )


def compute_rows(
    ctx: AuditContext, noise_std: float
) -> tuple[list[dict[str, Any]], dict[str, str], list[str]]:
    """Rows, explanations and notes of every metric that can be computed on ``ctx``."""
    out = _Rows(ctx.options.confidence)
    _quality_rows(ctx, out)
    if ctx.sensitive is None:
        out.notes.append(
            "No sensitive attribute: delta SP, delta EO and counterfactual unfairness left out."
        )
    else:
        _gap_rows(ctx, out)
        _cf_row(ctx, out)
    _instability_row(ctx, noise_std, out)
    if len(ctx.attributes) > 1:
        out.notes.append(
            f"The group figures cover the first sensitive attribute ({ctx.sensitive_name})."
        )
    out.notes.append(
        "Intervals: AUROC and F1 percentile bootstrap over the audited nodes; delta SP and "
        "delta EO the group-fairness unit's Newcombe score interval of the signed difference "
        "between the highest and the lowest group (Bonferroni over the group pairs when there "
        "are several), which can reach below 0; the two rates exact (Clopper-Pearson). "
        "Definitions: NIFTY (Agarwal et al. 2021), see the module "
        "gnnaudit.audit.fairness.literature_unit."
    )
    return out.rows, out.explanations, out.notes


def _noisy_logits(ctx: AuditContext, noise: torch.Tensor) -> torch.Tensor:
    """The model's logits on ``x + noise``: in this process, or on the cluster's partitions
    (the noise written once to the graph store's shared folder, each worker reading its
    rows) when the audit is distributed."""
    if ctx.distributed is None:
        return ctx.adapter.logits(
            ctx.data.x + noise.to(ctx.data.x.device),
            ctx.data.edge_index,
            stage="the instability's noisy pass",
        )
    from gnnaudit.audit.distributed.store import AddRows

    path = Path(ctx.distributed.store.folder) / "instability-noise.npy"
    np.save(path, noise.cpu().numpy())
    try:
        out: torch.Tensor = ctx.remote([AddRows(str(path))])
    finally:
        path.unlink(missing_ok=True)
    return out
