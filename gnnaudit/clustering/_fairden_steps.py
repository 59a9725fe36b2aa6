"""The steps of :class:`gnnaudit.clustering.FairDen`'s fit: Alg. 1's spectral loop and the
roundings of its partition (paper's, repair candidates and their choice, exact quotas), with
the relabelling of the surviving clusters. Private; see :mod:`gnnaudit.clustering.fairden` for
the method.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.cluster import KMeans
from sklearn.utils import check_random_state

from gnnaudit.clustering.fair_spectral import (
    AffinityOperator,
    FairEmbedding,
    fair_embedding_dense,
    fair_embedding_matrix_free,
    fairness_matrix,
)
from gnnaudit.clustering.fairden_candidates import Choice, choose_candidate, score_candidates
from gnnaudit.clustering.fairden_repair import (
    MOVE_PATHS,
    RepairResult,
    noise_after,
    path_labels,
    repair_problem,
)
from gnnaudit.clustering.fairden_rounding import balanced_kmeans_rounding
from gnnaudit.clustering.goodall import Goodall1
from gnnaudit.clustering.metrics.fairness import balance
from gnnaudit.errors import InfeasibleError
from gnnaudit.graph_ops.dc_tree import DCTree

__all__ = [
    "PARETO_STEPS",
    "FitInputs",
    "Alg1Result",
    "run_alg1",
    "relabel",
    "balanced_rounding",
    "RepairOutcome",
    "repair_rounding",
]

logger = logging.getLogger(__name__)

#: steps ``t`` of the moving repair paths evaluated by ``rounding="repair"`` (when the paper's
#: rounding misses ``min_balance``) and ``"pareto"``, plus each path's smallest step reaching
#: ``min_balance`` (the noise path has only that one)
PARETO_STEPS = np.linspace(0.0, 1.0, 11)


@dataclass
class FitInputs:
    """Validated fit inputs: ``X`` (n, d_n), combined group codes and their values,
    categorical codes (or None), ``minPts``, excluded points and the used ones."""

    X: np.ndarray
    groups: np.ndarray
    group_values: np.ndarray
    cat: np.ndarray | None
    min_samples: int
    excluded: np.ndarray
    used: np.ndarray
    g_used: np.ndarray


@dataclass
class Alg1Result:
    """Result of Alg. 1's loop: k-means labels ``lab`` of the used points (``0..k-1``),
    which clusters are big enough (``big``), the final ``k`` and the embedding."""

    lab: np.ndarray
    big: np.ndarray
    k: int
    emb: FairEmbedding


def run_alg1(
    est: Any, inp: FitInputs, tree: DCTree, solver: str, timings: dict[str, float], bar: Any
) -> Alg1Result:
    """Affinity, constrained embedding and Alg. 1's k-means / noise loop (``est``: the
    FairDen estimator, read only). Adds to ``timings``."""
    k0, m, min_samples = est.n_clusters, inp.used.size, inp.min_samples
    rng = check_random_state(est.random_state)
    t0 = time.perf_counter()
    d_n = inp.X.shape[1]
    d_c = 0 if inp.cat is None else inp.cat.shape[1]
    goodall = Goodall1(inp.cat[inp.used]) if inp.cat is not None else None
    op = AffinityOperator(tree, goodall, d_n / (d_n + d_c), d_c / (d_n + d_c))
    F = fairness_matrix(inp.g_used)
    emb_cap = m - F.shape[1] - 1  # largest embedding dimension
    if emb_cap < k0:
        raise InfeasibleError(
            f"n_clusters={k0} is too large for {m} points with {F.shape[1]} fairness constraints"
        )
    k_cap = min(max(k0, m // min_samples), m)
    if est.noise_loop == "recompute":
        k_cap = min(k_cap, emb_cap)
    A_dense = op.to_dense() if solver == "dense" else None
    timings["affinity"] = time.perf_counter() - t0
    bar.update()

    def embed(dim: int) -> FairEmbedding:
        t = time.perf_counter()
        if A_dense is not None:
            out = fair_embedding_dense(A_dense, F, dim)
        else:
            out = fair_embedding_matrix_free(op, F, dim, random_state=rng)
        timings["eigensolver"] += time.perf_counter() - t
        return out

    k = k0
    emb = embed(k0)
    while True:
        if k > k0 and est.noise_loop == "recompute":
            emb = embed(k)
        t1 = time.perf_counter()
        lab = KMeans(n_clusters=k, n_init=est.n_init, random_state=rng).fit(emb.H).labels_
        timings["kmeans"] += time.perf_counter() - t1
        bar.set_postfix_str(f"k={k}")
        big = np.bincount(lab, minlength=k) >= min_samples
        if big.sum() >= k0 or k >= k_cap:
            if big.sum() < k0:
                logger.warning(
                    "FairDen: only %d clusters with >= minPts=%d points at the cap k=%d",
                    int(big.sum()),
                    min_samples,
                    k,
                )
            break
        logger.info("FairDen: k=%d gave %d non-noise clusters; trying k=%d", k, big.sum(), k + 1)
        k += 1
    bar.update()
    return Alg1Result(lab.astype(np.int64), big, k, emb)


def relabel(lab: np.ndarray, alg: Alg1Result, inp: FitInputs) -> np.ndarray:
    """Surviving clusters renumbered ``0..`` in order of first appearance in the paper's
    labels (so a repaired cluster keeps its paper id); small clusters, excluded points and
    the points ``lab`` marks -1 (dropped as noise) are -1."""
    k = alg.big.size
    new_id = np.full(k, -1, dtype=np.int64)
    survivors = np.flatnonzero(alg.big)
    first = np.full(k, alg.lab.size, dtype=np.int64)
    np.minimum.at(first, alg.lab, np.arange(alg.lab.size))
    new_id[survivors[np.argsort(first[survivors], kind="stable")]] = np.arange(survivors.size)
    labels = np.full(inp.X.shape[0], -1, dtype=np.int64)
    labels[inp.used] = np.where(lab >= 0, new_id[lab], -1)
    return labels


def balanced_rounding(alg: Alg1Result, groups: np.ndarray) -> tuple[np.ndarray, str]:
    """Exact-quota re-rounding of the kept points; kept only when it raises the balance."""
    keep = alg.big[alg.lab]
    ids = np.flatnonzero(alg.big)
    compact = np.searchsorted(ids, alg.lab[keep])
    result = balanced_kmeans_rounding(alg.emb.H[keep], compact, groups[keep])
    new = alg.lab.copy()
    new[keep] = ids[result.labels]
    old_b = balance(np.where(keep, alg.lab, -1), groups)
    if balance(np.where(keep, new, -1), groups) > old_b:
        return new, "balanced"
    return alg.lab, "kmeans"


@dataclass
class RepairOutcome:
    """The candidates of ``rounding="repair"`` / ``"pareto"`` and the one chosen: its labels
    (all points), step, path (``None``: the paper's labels), the candidate table with its
    ``chosen`` column, every candidate's labels (one row each) and the rule's verdict."""

    labels: np.ndarray
    t: float
    path: str | None
    frame: pd.DataFrame
    all_labels: np.ndarray
    choice: Choice


def repair_rounding(
    est: Any, inp: FitInputs, tree: DCTree, alg: Alg1Result, keep: np.ndarray, paper: Any
) -> RepairOutcome:
    """Candidates and choice (:mod:`gnnaudit.clustering.fairden_candidates`); ``paper``: the
    :class:`~gnnaudit.clustering.fairden_candidates.ClusteredScores` of the paper's rounding.
    ``rounding="repair"`` stops at the paper's labels when they reach ``min_balance``;
    ``"pareto"`` always evaluates every path. When no candidate reaches ``min_balance`` while
    keeping ``min_dcsi_share`` of the paper's DCSI, the noise path also continues from each moving
    path's most balanced step that keeps it (paths ``"exchange+noise"``,
    ``"min_moves+noise"``)."""
    rep_args = (tree, alg.emb.H, keep, inp.g_used, inp.min_samples, est.max_noise)
    if est.rounding == "repair" and paper.balance >= est.min_balance - 1e-12:
        runs = [("paper", RepairResult(alg.lab, 0.0, np.zeros((0, 0)), 0), alg.lab)]
    else:
        rep, ids = repair_problem(tree, alg.emb.H, alg.lab, keep, *rep_args[3:])
        runs = path_labels(rep, ids, alg.lab, keep, PARETO_STEPS, est.min_balance)
    full = [(path, res, relabel(lab, alg, inp)) for path, res, lab in runs]
    seen: dict[bytes, Any] = {full[0][2].tobytes(): paper}  # the paper's row is scored
    score_args = (inp.X, inp.groups, inp.min_samples, paper.dcsi, est.min_balance)
    frame = score_candidates(full, *score_args, est.min_dcsi_share, seen)
    if len(frame) > 1 and est.max_noise > 0 and not (frame.reaches & frame.keeps_density).any():
        for path in MOVE_PATHS:  # two paths
            rows = frame[(frame["path"] == path) & frame["keeps_density"] & ~frame["reaches"]]
            if len(rows):
                i = rows.sort_values(["balance", "dcsi"], ascending=False).index[0]
                more = noise_after(rep_args, runs[i][2], runs[i][1], est.min_balance)
                full += [(f"{path}+noise", r, relabel(lab, alg, inp)) for r, lab in more]
        frame = score_candidates(full, *score_args, est.min_dcsi_share, seen)
    choice = choose_candidate(frame)
    frame["chosen"] = frame.index == choice.index
    path = str(frame.loc[choice.index, "path"])
    return RepairOutcome(
        full[choice.index][2],
        float(frame.loc[choice.index, "t"]),
        None if path == "paper" else path,
        frame,
        np.stack([lab for _, _, lab in full]),
        choice,
    )
