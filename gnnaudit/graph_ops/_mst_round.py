"""The state one Boruvka round of :func:`gnnaudit.graph_ops.mst.mst_boruvka` updates in place,
and the search options of its rounds (shared by the cell-pair search and the re-queries)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BoruvkaOptions", "RoundState"]


@dataclass(frozen=True)
class BoruvkaOptions:
    """Search options of the Boruvka rounds (the keywords of
    :func:`~gnnaudit.graph_ops.mst.mst_boruvka`): re-query a point with doubled ``k`` up to
    ``k_max`` neighbours, ``chunk`` points at a time (memory ``O(chunk * k)``); search a
    KD-tree of the complement when at most ``max_complement_trees`` components have unresolved
    points, with ``n_anchors`` anchors; ``n_cells`` k-means cells for the cell-pair search
    (0: none)."""

    max_complement_trees: int = 16
    k_max: int = 256
    chunk: int = 16384
    n_anchors: int = 256
    n_cells: int = 1024


@dataclass
class RoundState:
    """Per point (``n``) or per component (``n_comp``) arrays of one round, updated in place:
    ``comp`` the component of each point; ``pending`` the points whose cheapest foreign edge is
    still unknown and could improve their component's; ``comp_best`` each component's cheapest
    edge found so far (an upper bound: every found edge is real); ``best_w`` / ``best_v`` each
    point's cheapest foreign edge found so far and its other end."""

    comp: np.ndarray
    pending: np.ndarray
    comp_best: np.ndarray
    best_w: np.ndarray
    best_v: np.ndarray
