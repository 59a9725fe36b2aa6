r"""The warnings of :meth:`FairFinetune.finetune <gnnaudit.training.FairFinetune.finetune>`
about the candidate its selection (:mod:`gnnaudit.training.fair_selection`) returned, read off
the ``selection_`` table of :func:`~gnnaudit.training.fair_selection.select_candidate` (row 0:
the model as given).

**Warning** (:func:`warn_unless_fairer`): a ``UserWarning`` when the vanilla model is chosen
(for its targeted gaps above 0) or a targeted gap of the chosen one is above the vanilla
model's, naming each such gap with both figures, the budget and what to change.

**Decision warning** (:func:`warn_if_decisions_worse`): the budget bounds how well the chosen
candidate *ranks* the validation nodes, not how well its argmax *decides*; a fine-tuned model
can keep (or raise) AUROC while its decision threshold moves (NIFTY bail: validation AUROC 0.890
-> 0.895, balanced accuracy 0.840 -> 0.717, ``benchmarks/results/fair_gnn.json``). A
``UserWarning`` names both balanced accuracies and top shares when the chosen candidate's
validation balanced accuracy is more than ``max_bacc_drop`` below the model as given's, or
``max_auroc_drop`` when no ``max_bacc_drop`` is set (the point estimates; the AUROC budget then
also states how much decision quality the user trades).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

import pandas as pd

from gnnaudit.audit.model_quality import PREDICTION_SHARE
from gnnaudit.training import fair_selection
from gnnaudit.training.fair_selection import BUDGET_TOL, check_targets

__all__ = ["warn_unless_fairer", "warn_if_decisions_worse"]

_GAP_LABELS = {"cf": "counterfactual unfairness", "dsp": "ΔSP", "deo": "ΔEO"}


def _budget_text(
    table: pd.DataFrame, max_auroc_drop: float, max_bacc_drop: float | None = None
) -> str:
    base = float(table["val_auroc"].iloc[0])
    if math.isnan(base):
        text = "no AUROC budget (the validation nodes hold one class)"
    else:
        text = (
            f"AUROC budget: validation AUROC - {fair_selection.BUDGET_Z:g} x its paired standard error >= "
            f"{base - max_auroc_drop:.4f} (vanilla {base:.4f} - max_auroc_drop "
            f"{max_auroc_drop:g})"
        )
    text += f", decisions not collapsed (no class above {PREDICTION_SHARE:.0%})"
    if max_bacc_drop is not None:
        text += (
            f", validation balanced accuracy >= {float(table['val_bacc'].iloc[0]) - max_bacc_drop:.4f}"
            f" (max_bacc_drop {max_bacc_drop:g})"
        )
    return text


def warn_unless_fairer(
    table: pd.DataFrame,
    targets: str | Iterable[str],
    max_auroc_drop: float,
    *,
    selected_last: bool = False,
    stacklevel: int = 3,
    max_bacc_drop: float | None = None,
) -> list[str]:
    """Warn (``UserWarning``) when the chosen row of a
    :func:`~gnnaudit.training.fair_selection.select_candidate` table is the vanilla model
    (naming its targeted gaps above 0) or has a targeted selection gap above the vanilla
    model's; returns the targets named. ``selected_last``: made with ``select=False``."""
    targets = check_targets(targets)
    vanilla, chosen = table.iloc[0], table[table["chosen"]].iloc[0]
    kept_vanilla = bool(table["chosen"].iloc[0])
    named = []
    for t in targets:  # a gap already 0 (or undefined) on validation cannot be lowered
        before, after = float(vanilla[f"val_{t}"]), float(chosen[f"val_{t}"])
        if (kept_vanilla and before > 0) or (not math.isnan(after) and after > before):
            named.append(t)
    if not named:
        return []
    figures = "; ".join(
        f"{_GAP_LABELS[t]} (val_{t}) {float(vanilla[f'val_{t}']):.4f} vanilla vs "
        f"{float(chosen[f'val_{t}']):.4f} chosen"
        for t in named
    )
    if kept_vanilla:
        head = (
            "FairFinetune kept the model as given: no fine-tuned candidate lowered the sum of "
            "the targeted gaps (as the selection measures them) within the AUROC budget"
        )
    else:
        why = "the final weights, select=False" if selected_last else "the lowest gap sum"
        head = (
            f"FairFinetune's returned candidate ({chosen['candidate']}: {why}) has a targeted "
            "gap (as the selection measures it) above the model as given"
        )
    warnings.warn(
        f"{head}: {figures}; {_budget_text(table, max_auroc_drop, max_bacc_drop)}. To trade "
        "more AUROC for "
        "fairness raise max_auroc_drop; or fine-tune longer (epochs) or with larger weights "
        "of the terms (lambda_cf, lambda_cov, lambda_eo); targets=... restricts the gaps "
        "that count.",
        UserWarning,
        stacklevel=stacklevel,
    )
    return named


def warn_if_decisions_worse(
    table: pd.DataFrame,
    max_auroc_drop: float,
    *,
    stacklevel: int = 3,
    max_bacc_drop: float | None = None,
) -> float | None:
    """Warn (``UserWarning``) when the chosen row of a
    :func:`~gnnaudit.training.fair_selection.select_candidate` table decides worse than the
    model as given: validation balanced accuracy more than ``max_bacc_drop`` (None:
    ``max_auroc_drop``) below row 0's (module docstring). Returns the drop when warned, else
    None (also when the model as given is chosen or a balanced accuracy is NaN)."""
    allowed = max_auroc_drop if max_bacc_drop is None else max_bacc_drop
    vanilla, chosen = table.iloc[0], table[table["chosen"]].iloc[0]
    if bool(table["chosen"].iloc[0]):
        return None
    before, after = float(vanilla["val_bacc"]), float(chosen["val_bacc"])
    drop = before - after
    if math.isnan(drop) or drop <= allowed + BUDGET_TOL:
        return None
    warnings.warn(
        f"FairFinetune's returned candidate ({chosen['candidate']}) ranks the validation nodes "
        f"with val_auroc {float(vanilla['val_auroc']):.4f} vanilla vs "
        f"{float(chosen['val_auroc']):.4f} chosen but decides worse: validation balanced "
        f"accuracy (val_bacc) {before:.4f} vanilla vs {after:.4f} chosen, a drop of {drop:.4f} "
        f"above {'max_auroc_drop' if max_bacc_drop is None else 'max_bacc_drop'} {allowed:g}; "
        "its most frequent decision covers "
        f"{float(chosen['val_top_share']):.1%} of the validation nodes against "
        f"{float(vanilla['val_top_share']):.1%}. Its decision threshold moved: pass "
        "max_bacc_drop=... to keep only candidates that decide about as well (selection_ "
        "shows what that costs in gaps), lower the covariance weights (lambda_grid) or "
        "restrict targets=..., or set the decision threshold on held-out nodes before using "
        "its decisions.",
        UserWarning,
        stacklevel=stacklevel,
    )
    return drop
