r"""How sure is the validation gain of :meth:`FairFinetune.finetune
<gnnaudit.training.FairFinetune.finetune>`'s chosen candidate? A paired bootstrap of the gaps.

The selection (:mod:`~gnnaudit.training.fair_selection`) compares point estimates of the gaps on
the validation nodes. On a few hundred nodes a gap's standard error is several points (NBA's
stratified split: 78 validation nodes, about 15 in the smaller group), so a candidate can
"lower" ΔSP on validation by chance alone. :func:`gain_table` says, for every targeted gap and
their sum, how much the chosen candidate lowers it and a 95% interval of that reduction;
:func:`warn_if_gain_uncertain` warns when a gap the candidate lowered has an interval that
reaches 0 (the reduction is not distinguishable from no change on these nodes).

**Paired stratified bootstrap.** The selection's nodes (ΔSP and CF on every node outside the
test mask, ΔEO on the validation label-1 nodes among them:
:func:`~gnnaudit.training.fair_selection.label_free_nodes`) are split into strata by sensitive
group and label flag (a validation node with ``y == 1`` or not); each of ``n_boot`` resamples
draws every stratum's nodes with replacement, its size fixed (multinomial counts
:math:`w_{bv}`), so every group keeps its size and its label-1 count and no gap is ever
undefined. Both models, the vanilla one (:math:`a`) and the chosen one (:math:`c`), are scored
on the *same* resample:

.. math::

    r^{SP}_{bg}(m) = \frac{\sum_{v \in g} w_{bv}\, \hat y^m_v}{n_g}, \quad
    r^{EO}_{bg}(m) = \frac{\sum_{v \in g,\, y_v = 1} w_{bv}\, \hat y^m_v}{n_{g,1}}, \quad
    CF_b(m) = \frac{\sum_v w_{bv}\, f^m_v}{n}

(:math:`\hat y^m_v` the class-1 decision, :math:`f^m_v` whether the decision changes in a
counterfactual world), the gaps :math:`\Delta_b(m) = \max_g r_{bg} - \min_g r_{bg}` as in
:func:`~gnnaudit.training.fair_selection.validation_metrics`, and the reduction
:math:`\delta_b = \Delta_b(a) - \Delta_b(c)` (per gap and for the sum of the targeted ones).
The interval is the percentile interval of :math:`\delta_b` (confidence 0.95); the point
estimate is the observed reduction. Pairing matters: most nodes decide alike under both
models, so the reduction varies far less than either gap.

**It is optimistic.** The chosen candidate won the selection on these same nodes, and the
interval does not account for that choice among dozens of candidates (the winner's curse:
its validation gaps are low partly by chance). An interval that reaches 0 therefore means the
gain is *not* established; one above 0 is necessary, not sufficient, for a gain on new nodes.
The test nodes, or fresh labelled nodes, decide.

Cost: ``n_boot`` x the selection's nodes multinomial counts and one product of them with the
two models' decisions per stratum, time linear in both (``benchmarks/bench_selection_gain.py``:
3 s for 50,000 nodes); none when both models decide alike on every node (the vanilla model
kept). Memory: the counts are drawn per stratum in chunks of at most
:data:`~gnnaudit.audit.bootstrap.MAX_CELLS` cells.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from gnnaudit.audit.bootstrap import MAX_CELLS, as_generator, percentile_interval

__all__ = [
    "GAIN_COLUMNS",
    "DEFAULT_N_BOOT",
    "GAIN_CONFIDENCE",
    "gain_table",
    "warn_if_gain_uncertain",
]

#: columns of the ``selection_gain_`` table
GAIN_COLUMNS: list[str] = "gap vanilla chosen reduction ci_low ci_high established".split()
#: bootstrap resamples of :func:`gain_table`
DEFAULT_N_BOOT = 1000
#: confidence of the reduction's interval
GAIN_CONFIDENCE = 0.95
_LABELS = {"cf": "counterfactual unfairness", "dsp": "ΔSP", "deo": "ΔEO", "sum": "their sum"}


def _spread(rates: np.ndarray) -> np.ndarray:
    """Row-wise max - min over the columns (groups); NaN rows when fewer than 2 columns."""
    if rates.shape[1] < 2:
        return np.full(rates.shape[0], math.nan)
    return rates.max(axis=1) - rates.min(axis=1)


def _resampled_gaps(
    decisions: Mapping[str, np.ndarray],
    groups: np.ndarray,
    label1: np.ndarray,
    n_boot: int,
    rng: np.random.Generator,
) -> dict[str, dict[str, np.ndarray]]:
    """Per model of ``decisions`` (name -> ``(nodes, 2)`` array: class-1 decision, changed
    flag), the resampled gaps ``dsp, deo, cf`` (``n_boot`` values each, all models on the same
    resamples) and the observed ones (row ``n_boot``, the last: all counts 1)."""
    codes = np.unique(groups)
    names = list(decisions)
    # per stratum (group, label-1): resampled sums of both columns of every model
    sums: dict[tuple[int, bool], np.ndarray] = {}
    for g in codes:
        for pos in (False, True):
            nodes = np.flatnonzero((groups == g) & (label1 == pos))
            if nodes.size == 0:
                continue
            values = np.stack([decisions[m][nodes] for m in names], axis=1)  # (k, models, 2)
            total = np.empty((n_boot + 1, len(names), 2))
            rows = max(1, MAX_CELLS // nodes.size)
            for start in range(0, n_boot, rows):
                stop = min(n_boot, start + rows)
                counts = rng.multinomial(
                    nodes.size, np.full(nodes.size, 1.0 / nodes.size), stop - start
                )
                total[start:stop] = np.einsum("bk,kmc->bmc", counts, values)
            total[n_boot] = values.sum(axis=0)
            sums[(int(g), pos)] = total
    out: dict[str, dict[str, np.ndarray]] = {}
    n = groups.size
    for i, m in enumerate(names):
        sp, eo = [], []
        for g in codes:
            parts = [sums[(int(g), p)][:, i, 0] for p in (False, True) if (int(g), p) in sums]
            size = np.count_nonzero(groups == g)
            sp.append(np.sum(parts, axis=0) / size)
            if (int(g), True) in sums:
                eo.append(sums[(int(g), True)][:, i, 0] / np.count_nonzero((groups == g) & label1))
        cf = np.sum([s[:, i, 1] for s in sums.values()], axis=0) / n
        out[m] = {
            "dsp": _spread(np.stack(sp, axis=1)),
            "deo": _spread(np.stack(eo, axis=1)) if eo else np.full(n_boot + 1, math.nan),
            "cf": cf,
        }
    return out


def gain_table(
    vanilla: np.ndarray,
    chosen: np.ndarray,
    groups: np.ndarray,
    label1: np.ndarray,
    targets: Iterable[str],
    *,
    n_boot: int = DEFAULT_N_BOOT,
    random_state: int = 0,
) -> pd.DataFrame:
    """The reduction of every targeted validation gap (and their sum, NaN gaps counted 0 as in
    the selection's ``gap_sum``) from the ``vanilla`` model to the ``chosen`` one, with its
    paired bootstrap interval (module docstring); one row per gap, then ``"sum"``, columns
    :data:`GAIN_COLUMNS` (``established``: the interval lies above 0).

    ``vanilla`` / ``chosen``: ``(nodes, 2)`` arrays over the validation nodes, column 0 the
    class-1 decision (0/1), column 1 whether the decision changes in a counterfactual world;
    ``groups``: the nodes' sensitive group codes; ``label1``: whether their label is 1."""
    targets = list(targets)
    rng = as_generator(random_state)
    groups = np.asarray(groups, dtype=np.int64)
    label1 = np.asarray(label1, dtype=bool)
    models = {"vanilla": np.asarray(vanilla, float), "chosen": np.asarray(chosen, float)}
    # the same decisions on every node (the vanilla model kept): every resampled reduction is
    # 0, so no resample is drawn and the interval is the point [0, 0]
    n_boot = 0 if np.array_equal(models["vanilla"], models["chosen"]) else n_boot
    gaps = _resampled_gaps(models, groups, label1, n_boot, rng)
    rows = []
    totals = {m: np.zeros(n_boot + 1) for m in models}
    for t in [*targets, "sum"]:
        if t == "sum":
            before, after = totals["vanilla"], totals["chosen"]
        else:
            before, after = gaps["vanilla"][t], gaps["chosen"][t]
            for m in models:
                totals[m] = totals[m] + np.nan_to_num(gaps[m][t], nan=0.0)
        delta = before - after
        if np.isnan(delta).all():
            low = high = math.nan
        elif n_boot == 0:
            low = high = float(delta[0])
        else:
            low, high = percentile_interval(delta[:n_boot], GAIN_CONFIDENCE)
        rows.append(
            {
                "gap": t,
                "vanilla": float(before[n_boot]),
                "chosen": float(after[n_boot]),
                "reduction": float(delta[n_boot]),
                "ci_low": low,
                "ci_high": high,
                "established": bool(low > 0) if not math.isnan(low) else False,
            }
        )
    return pd.DataFrame(rows, columns=GAIN_COLUMNS)


def warn_if_gain_uncertain(
    gain: pd.DataFrame,
    n_val: int,
    *,
    chosen_name: str,
    stacklevel: int = 3,
    n_free: int | None = None,
) -> list[str]:
    """Warn (``UserWarning``) when a targeted gap that the candidate ``chosen_name`` lowered
    (reduction > 0) has a reduction interval reaching 0 or below, on ``n_val`` validation nodes
    (and ``n_free`` nodes for the label-free gaps, when given); returns the gaps named (none
    when the vanilla model was kept: every reduction is 0)."""
    rows = gain[(gain["gap"] != "sum") & (gain["reduction"] > 0) & ~gain["established"]]
    if rows.empty:
        return []
    total = gain[gain["gap"] == "sum"].iloc[0]
    figures = "; ".join(
        f"{_LABELS[r.gap]} {r.vanilla:.4f} -> {r.chosen:.4f} (reduction {r.reduction:.4f}, 95% "
        f"interval {r.ci_low:.4f} to {r.ci_high:.4f})"
        for r in rows.itertuples()
    )
    overall = "is" if bool(total["established"]) else "is not"
    nodes = f"{n_val} validation nodes"
    if n_free is not None:
        nodes = f"{n_free} nodes outside the test set for ΔSP and CF and {n_val} validation nodes"
    warnings.warn(
        f"FairFinetune's returned candidate ({chosen_name}) lowers these gaps by no "
        f"more than chance could on {nodes} (paired bootstrap, the interval "
        f"reaches 0): {figures}. The reduction of the targeted gaps' sum {overall} established "
        f"({total.reduction:.4f}, interval {total.ci_low:.4f} to {total.ci_high:.4f}); the "
        "intervals ignore that this candidate was picked on the same nodes, so they are "
        "optimistic. Check the gaps on the test nodes (the audit's before/after section) or "
        "on more labelled nodes before relying on them; selection_gain_ has every figure.",
        UserWarning,
        stacklevel=stacklevel,
    )
    return list(rows["gap"])
