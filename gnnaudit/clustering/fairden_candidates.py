"""FairDen's repair candidates: their scores on the clustered points and the rule that picks one
(issue 38).

Candidates. The paper's rounding (``t = 0``) and the steps of every repair path
(:mod:`gnnaudit.clustering.fairden_repair`: two paths that move points, one that makes the
surplus of over-represented groups noise).

Scores (:func:`clustered_scores`), all on the *clustered* points (label ``>= 0``):

* ``balance``: Eq. 6 per cluster, the mean over the clusters (what ``min_balance`` targets);
* ``min_cluster_balance``: the worst cluster's balance;
* ``dcsi``: DCSI with squared distances (the paper's published evaluation);
* ``noise_ratio``: the share of *all* points labelled -1 (Alg. 1's small clusters, points of
  excluded groups, and those the noise path drops).

The paper's noise-adjusted figures are ``balance * (1 - noise_ratio)`` and
``dcsi * (1 - noise_ratio)``; keeping the noise share apart lets a clustering that drops a few
surplus points be compared with one that moves them, and says how many were dropped.

Rule (:func:`choose_candidate`), with ``b`` = ``min_balance`` and ``s`` = ``min_dcsi_share``:

1. among the candidates whose balance reaches ``b``, the one with the highest DCSI (ties: the
   higher balance, then less noise, then fewer moves);
2. when that one keeps less than ``s`` of the paper rounding's DCSI (then every candidate that
   reaches ``b`` does), or no candidate reaches ``b``: the most balanced candidate that keeps
   at least ``s`` of it (ties: higher DCSI, less noise, fewer moves), with a warning naming
   both candidates and the parameters that force the other (:func:`rule_warnings`).

Either way the choice is not dominated by any candidate (higher or equal balance *and* DCSI,
one of them higher): a dominating candidate would also reach ``b`` with a higher DCSI in case 1,
or keep ``s`` with a higher balance in case 2. ``s = 0`` makes ``b`` a hard target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit.clustering.fairden_repair import RepairResult, cluster_balances, pareto_mask
from gnnaudit.clustering.metrics.fairness import dcsi

__all__ = [
    "CANDIDATE_COLUMNS",
    "DENSITY_WARNING_SHARE",
    "ClusteredScores",
    "clustered_scores",
    "score_candidates",
    "Choice",
    "choose_candidate",
    "rule_warnings",
]

#: columns of ``FairDen.candidates_``
CANDIDATE_COLUMNS = (
    "path",
    "t",
    "n_moved",
    "n_noise",
    "noise_ratio",
    "balance",
    "min_cluster_balance",
    "dcsi",
    "dcsi_share",
    "reaches",
    "keeps_density",
    "pareto",
    "chosen",
)
#: a returned clustering that keeps less than this share of the paper rounding's DCSI warns
#: (possible only with ``min_dcsi_share`` below it)
DENSITY_WARNING_SHARE = 0.7
_TOL = 1e-12


@dataclass(frozen=True)
class ClusteredScores:
    """Scores of one labelling on its clustered points (module docstring)."""

    balance: float
    min_cluster_balance: float
    dcsi: float
    noise_ratio: float


def clustered_scores(
    X: np.ndarray, labels: np.ndarray, groups: np.ndarray, min_samples: int
) -> ClusteredScores:
    """Balance (mean and worst cluster, Eq. 6 over the combined ``groups`` codes), squared
    DCSI with ``min_samples`` and the noise share of ``labels`` (-1: noise)."""
    labels = np.asarray(labels)
    keep = labels >= 0
    if not keep.any():
        return ClusteredScores(0.0, 0.0, 0.0, 1.0)
    lab = np.unique(labels[keep], return_inverse=True)[1].reshape(-1)
    grp = np.unique(np.asarray(groups)[keep], return_inverse=True)[1].reshape(-1)
    counts = np.zeros((int(lab.max()) + 1, int(grp.max()) + 1), dtype=np.int64)
    np.add.at(counts, (lab, grp), 1)
    per = cluster_balances(counts)
    d = dcsi(X[keep], labels[keep], min_samples, squared=True) if keep.sum() > 1 else 0.0
    return ClusteredScores(float(per.mean()), float(per.min()), float(d), float(1 - keep.mean()))


def score_candidates(
    runs: list[tuple[str, RepairResult, np.ndarray]],
    X: np.ndarray,
    groups: np.ndarray,
    min_samples: int,
    paper_dcsi: float,
    min_balance: float,
    min_dcsi_share: float,
    seen: dict[bytes, ClusteredScores] | None = None,
) -> pd.DataFrame:
    """The candidate table (:data:`CANDIDATE_COLUMNS` but ``chosen``) of ``runs``: ``(path,
    result, labels of all points)``; identical labelings are scored once (``seen``: the scores
    of earlier calls, by the labels' bytes, updated)."""
    rows: list[dict[str, Any]] = []
    seen = {} if seen is None else seen
    for path, res, lab in runs:
        key = np.asarray(lab, dtype=np.int64).tobytes()
        if key not in seen:
            seen[key] = clustered_scores(X, lab, groups, min_samples)
        sc = seen[key]
        rows.append(
            {
                "path": path,
                "t": float(res.t),
                "n_moved": int(res.n_moved),
                "n_noise": int(res.n_noise),
                "noise_ratio": sc.noise_ratio,
                "balance": sc.balance,
                "min_cluster_balance": sc.min_cluster_balance,
                "dcsi": sc.dcsi,
            }
        )
    frame = pd.DataFrame(rows)
    frame["dcsi_share"] = frame["dcsi"] / paper_dcsi if paper_dcsi > 0 else 1.0
    frame["reaches"] = frame["balance"] >= min_balance - _TOL
    frame["keeps_density"] = frame["dcsi"] >= min_dcsi_share * paper_dcsi - _TOL
    frame["pareto"] = pareto_mask(frame["balance"], frame["dcsi"], frame["noise_ratio"])
    return frame


@dataclass(frozen=True)
class Choice:
    """The chosen row ``index``; ``fallback``: the density rule overrode rule 1 (or no
    candidate reaches the target and the most balanced one loses the density); ``other``: the
    row rule 1 (or the most balanced row) would have given then; ``reached``: some candidate
    reaches ``min_balance``."""

    index: int
    fallback: bool
    other: int | None
    reached: bool


def _best(frame: pd.DataFrame, mask: pd.Series, by_dcsi: bool) -> int:
    """The first row of ``frame[mask]`` in the rule's order (module docstring)."""
    sub = frame[mask].assign(_row=frame.index[mask])
    keys = ["dcsi", "balance"] if by_dcsi else ["balance", "dcsi"]
    order = sub.sort_values(
        [*keys, "noise_ratio", "n_moved", "_row"], ascending=[False, False, True, True, True]
    )
    return int(order["_row"].iloc[0])


def choose_candidate(frame: pd.DataFrame) -> Choice:
    """The rule of the module docstring on a table from :func:`score_candidates` (whose
    ``reaches`` / ``keeps_density`` columns carry ``min_balance`` and ``min_dcsi_share``)."""
    reaches, keeps = frame["reaches"], frame["keeps_density"]
    if not keeps.any():  # cannot happen with the paper's row present (it keeps 100%)
        keeps = pd.Series(True, index=frame.index)
    everything = pd.Series(True, index=frame.index)
    reached = bool(reaches.any())
    top = _best(frame, reaches, True) if reached else _best(frame, everything, False)
    if keeps[top]:
        return Choice(top, False, None, reached)
    return Choice(_best(frame, keeps, False), True, top, reached)


def _floor3(x: float) -> float:
    return math.floor(x * 1000 + 1e-9) / 1000


def _describe(row: pd.Series) -> str:
    where = "the paper's rounding" if row["path"] == "paper" else f"{row['path']} path"
    where += "" if row["path"] == "paper" else f", t={row['t']:.3f}"
    return (
        f"balance {row['balance']:.3f} (worst cluster {row['min_cluster_balance']:.3f}) at "
        f"DCSI {row['dcsi']:.3f}, {row['noise_ratio']:.1%} noise ({where})"
    )


def rule_warnings(
    frame: pd.DataFrame,
    choice: Choice,
    paper_balance: float,
    paper_dcsi: float,
    min_balance: float,
    min_dcsi_share: float,
) -> list[str]:
    """The warnings the choice owes the user: the density rule overrode the balance target
    (both candidates, and how to force the other); the target is out of reach; or the chosen
    clustering kept less than :data:`DENSITY_WARNING_SHARE` of the paper rounding's DCSI."""
    row = frame.loc[choice.index]
    out = []
    if choice.fallback and choice.other is not None:
        other = frame.loc[choice.other]
        kept = f"{other['dcsi_share']:.0%}" if paper_dcsi > 0 else "all"
        if choice.reached:
            head = (
                f"FairDen: no repair candidate reaches min_balance={min_balance:g} and keeps "
                f"{min_dcsi_share:.0%} of the paper rounding's DCSI ({paper_dcsi:.3f}). The "
                f"best one that reaches it, {_describe(other)}, keeps only {kept} of it: the "
                "points it moves or drops blur the density clusters."
            )
        else:
            head = (
                f"FairDen: no repair candidate reaches min_balance={min_balance:g}; the most "
                f"balanced one, {_describe(other)}, keeps {kept} of the paper rounding's DCSI "
                f"({paper_dcsi:.3f})."
            )
        out.append(
            f"{head} Returned instead the most balanced candidate that keeps "
            f"{min_dcsi_share:.0%} of it: {_describe(row)}. To force the other, pass "
            f"min_balance={_floor3(other['balance']):.3f} with min_dcsi_share=0; with "
            f"min_balance <= {_floor3(row['balance']):.3f} the target is met without this "
            "warning. Every candidate is in candidates_."
        )
    elif not choice.reached:
        out.append(
            f"FairDen: no repair candidate reaches min_balance={min_balance:g}; returned the "
            f"most balanced one, {_describe(row)} (the paper's rounding: balance "
            f"{paper_balance:.3f}). The moving paths end at the data's group shares and the "
            "noise path at max_noise: lower min_balance or raise max_noise. Every candidate "
            "is in candidates_."
        )
    if paper_dcsi > 0 and row["dcsi"] < DENSITY_WARNING_SHARE * paper_dcsi - _TOL:
        out.append(
            f"FairDen: reaching balance {row['balance']:.3f} (the paper's rounding gives "
            f"{paper_balance:.3f}) cost most of the density structure: DCSI "
            f"{row['dcsi']:.3f} against {paper_dcsi:.3f} (below "
            f"{DENSITY_WARNING_SHARE:.0%} of it, allowed by min_dcsi_share={min_dcsi_share:g});"
            " the groups' shares differ too much between the density clusters. Raise "
            "min_dcsi_share to keep the density, or lower min_balance; every candidate is in "
            "candidates_."
        )
    return out
