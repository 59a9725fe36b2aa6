"""One ExDBSCAN query (:meth:`~gnnaudit.clustering.ExDBSCAN.explain`), after its point, targets
and constraints are resolved: the eligible target cores, the valid reference cores and the
:class:`~gnnaudit.clustering.counterfactual_set.CounterfactualSet`.

The reference cores are selected (greedy energy, a swap refinement, the exhaustive minimum or
a baseline strategy: :func:`~gnnaudit.clustering._exdbscan_energy.select_reference_cores`),
their counterfactuals placed and checked
(:meth:`~gnnaudit.clustering._exdbscan_energy.CandidateCores.place`); the cores whose
counterfactual fails are banned and the selection runs again (:func:`select_valid`), at most
once per candidate core.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnnaudit.clustering._exdbscan_energy import CandidateCores, select_reference_cores
from gnnaudit.clustering._exdbscan_placement import eligible_cores
from gnnaudit.clustering.counterfactual_set import CounterfactualSet
from gnnaudit.errors import InfeasibleError
from gnnaudit.graph_ops._distances import rowwise_distances
from gnnaudit.graph_ops.core_graph import CoreGraph

__all__ = ["SelectionRule", "select_valid", "counterfactual_set"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SelectionRule:
    """How the reference cores of one query are chosen: ``k`` of them by ``strategy``
    (``random_state`` for ``"random"``), the energy's ``alpha``, a ``refine="swap"`` pass,
    the ``exact`` minimum (up to ``max_exact_combinations`` subsets)."""

    k: int
    strategy: str
    alpha: float
    random_state: Any
    refine: str | None
    exact: bool
    max_exact_combinations: int


def select_valid(q: CandidateCores, rule: SelectionRule) -> tuple[list[int], np.ndarray, float]:
    """Reference cores whose counterfactuals are valid: select, place, ban the cores whose
    counterfactual failed and select again (each round bans at least one core, so at most
    ``q.n`` rounds). Returns the kept selection, its counterfactuals and the greedy energy
    reported by the last selection round."""
    banned = np.zeros(q.n, dtype=bool)
    while True:
        sel, greedy_energy = select_reference_cores(
            q,
            rule.k,
            rule.strategy,
            rule.random_state,
            refine=rule.refine,
            exact=rule.exact,
            max_exact_combinations=rule.max_exact_combinations,
            banned=banned,
        )
        C, valid = q.place(sel)
        if valid.all():
            break
        logger.debug("dropping %d reference cores whose counterfactual failed", (~valid).sum())
        banned[np.asarray(sel)[~valid]] = True
        if banned.all():
            break
    return list(np.asarray(sel)[valid]), C[valid], greedy_energy


def counterfactual_set(
    cg: CoreGraph,
    x: np.ndarray,
    source: int,
    targets: list[int],
    constraints: Any,
    feature_names: list[str],
    rule: SelectionRule,
) -> CounterfactualSet:
    """The counterfactuals of point ``x`` (of cluster ``source``, -1 noise) toward the
    clusters ``targets`` under the parsed ``constraints``; a ``UserWarning`` when fewer than
    ``rule.k`` come back, an :class:`~gnnaudit.errors.InfeasibleError` when none does."""
    cand = np.concatenate([cg.cluster_cores(c) for c in targets])
    mask, box, lo_table, hi_table = eligible_cores(cg, x, cand, constraints, feature_names)
    q = CandidateCores(cg, x, cand[mask], box[mask], lo_table, hi_table, float(rule.alpha))
    sel, C, greedy_energy = select_valid(q, rule)
    if not sel:
        raise InfeasibleError(
            f"no reference core yields a valid counterfactual for this point: each of the "
            f"{q.n} eligible target core(s) is outbid by a core of another cluster wherever "
            "its eps-ball meets the region the constraints allow"
        )
    if len(sel) < rule.k:
        warnings.warn(
            f"only {len(sel)} eligible core point(s) for {rule.k} requested counterfactuals; "
            f"returning {len(sel)}",
            UserWarning,
            stacklevel=3,
        )
    tgt = q.cluster[sel]
    return CounterfactualSet(
        x=x,
        counterfactuals=C,
        reference_cores=q.cand[sel],
        targets=tgt,
        valid=cg.assign(C) == tgt,
        proximity=float(rowwise_distances(x[None, :], C, cg.metric).mean()),
        diversity=float(np.linalg.det(1.0 / (1.0 + q.dmatrix(sel)))),
        energy=q.energy(sel),
        source_label=source,
        strategy=rule.strategy,
        greedy_energy=greedy_energy,
        feature_names=feature_names,
        metric=cg.metric,
    )
