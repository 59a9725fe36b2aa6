"""Where ExDBSCAN puts a counterfactual, and which cores can host one (paper Eq. 4, App. A.8, A.12).

A reference core :math:`q` of the target cluster yields the counterfactual (Eq. 4)

.. math::  c = q + \\varepsilon \\frac{x - q}{\\|x - q\\|},

the point of :math:`q`'s :math:`\\varepsilon`-sphere toward :math:`x`. With actionability
constraints (:mod:`gnnaudit.clustering.exdbscan_constraints`) the change :math:`c - x` must lie in
a box :math:`[l, u]`; :func:`project_to_box` clips :math:`q` into :math:`x + [l, u]` (the exact
projection for the separable metrics) and the counterfactual moves on the segment from that
projection :math:`p` toward :math:`x` as far as the ball allows (without constraints
:math:`p = q` and this is Eq. 4). A core is *eligible* iff :math:`d(q, p) \\le \\varepsilon`
(:func:`eligible_cores`).

Validity in floating point. The counterfactual is placed at radius
:math:`\\varepsilon (1 - 10^{-9})` and accepted only if the exact distance computation of
:meth:`CoreGraph.assign` agrees -- nearest core in the target cluster, within
:math:`\\varepsilon (1 - 10^{-11})`, and nearer than any core of another cluster by a relative
margin :math:`10^{-9}` -- else it is shrunk toward the core (:data:`SHRINK`) until it holds
(:func:`place_counterfactuals`). A sphere point can lie nearer to a core of another cluster than
to :math:`q`; "nearest core decides", so such a counterfactual moves toward :math:`q`.

Fallback (Euclidean). When even the projection :math:`p` fails -- with constraints the closest
admissible point to :math:`q` can lie nearer to a core of another cluster -- a valid point may
still exist elsewhere in the ball. :func:`repair_counterfactual` solves the convex problem

.. math::

    \\min_c \\|c - x\\|^2 \\quad \\text{s.t.} \\quad c - x \\in [l, u], \\quad
    \\|c - q\\| \\le \\varepsilon, \\quad
    (o - q)^\\top (c - q) \\le \\tfrac12 \\|o - q\\|^2 \\ \\ \\forall o \\in O_q,

with :math:`O_q` the cores of other clusters within :math:`2\\varepsilon` of :math:`q` (the
halfspaces say that :math:`q` is nearer than every such core, so the nearest core is a target
core), for every allowed box that meets the ball, with SLSQP; the result is verified like any
other counterfactual.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from gnnaudit.clustering.exdbscan_constraints import FeatureConstraints
from gnnaudit.errors import InfeasibleError
from gnnaudit.graph_ops._distances import rowwise_distances
from gnnaudit.graph_ops.core_graph import CoreGraph

__all__ = [
    "PLACE_REL",
    "VERIFY_REL",
    "TIE_REL",
    "SHRINK",
    "project_to_box",
    "eligible_cores",
    "place_counterfactuals",
    "repair_counterfactual",
    "valid_counterfactuals",
]

logger = logging.getLogger(__name__)

#: Counterfactuals are placed at radius eps * (1 - PLACE_REL) from their core ...
PLACE_REL = 1e-9
#: ... and accepted if the exact distance is <= eps * (1 - VERIFY_REL) and the nearest core
#: of another cluster is further by a relative margin TIE_REL.
VERIFY_REL = 1e-11
TIE_REL = 1e-9
#: Factors by which the step toward x shrinks while a counterfactual fails validation.
SHRINK = (1 - 1e-9, 1 - 1e-6, 1 - 1e-3, 0.9, 0.5, 0.25, 0.1, 0.01, 0.0)


def project_to_box(points: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Clip ``points`` into the box ``x + [lo, hi]`` (bounds on the change, broadcasting).

    Zero-width features (``lo == hi``: immutable, or a monotone bound of 0) take ``x`` bit for
    bit. For the separable metrics this is the exact projection onto the box.
    """
    out = np.clip(points, x + lo, x + hi)
    fixed = lo == hi
    if np.any(fixed):
        out = np.where(fixed, x, out)
    return np.asarray(out)


def eligible_cores(
    cg: CoreGraph,
    x: np.ndarray,
    cand: np.ndarray,
    cons: FeatureConstraints,
    names: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Filter candidate cores (data indices ``cand``) by the constraints.

    Returns ``(mask, box_id, lo_table, hi_table)``: eligibility per candidate, the index of
    the allowed box (sign pattern) nearest to each candidate's ball and the box bounds on
    :math:`\\delta = c - x`. The stages (immutable, monotone, correlated) are applied in turn so
    that an :class:`~gnnaudit.errors.InfeasibleError` names the constraint that excluded every
    core. Loops over the boxes (at most ``2**10``), memory O(n_candidates * d).
    """
    d = x.shape[0]
    if cons.empty:
        return (
            np.ones(cand.size, dtype=bool),
            np.zeros(cand.size, dtype=np.int64),
            np.full((1, d), -np.inf),
            np.full((1, d), np.inf),
        )
    Q = cg.X[cand]
    r = cg.eps * (1.0 - PLACE_REL)
    count_before = cand.size
    ok = np.ones(cand.size, dtype=bool)
    best = np.zeros(cand.size, dtype=np.int64)
    lo = hi = np.zeros((1, d))
    for stage, lo, hi in cons.stage_boxes():
        best_d = np.full(cand.size, np.inf)
        best = np.zeros(cand.size, dtype=np.int64)
        for b in range(lo.shape[0]):
            dist = rowwise_distances(project_to_box(Q, x, lo[b], hi[b]), Q, cg.metric)
            better = dist < best_d
            best_d[better] = dist[better]
            best[better] = b
        ok = best_d <= r
        if not ok.any():
            raise InfeasibleError(
                f"no eligible core point: all {count_before} candidate cores were excluded "
                f"by the constraint {cons.describe(stage, names)} (no core's eps-ball "
                "reaches the region the constraints allow)"
            )
        count_before = int(ok.sum())
    return ok, best, lo, hi


def valid_counterfactuals(
    cg: CoreGraph, C: np.ndarray, Q: np.ndarray, target: np.ndarray
) -> np.ndarray:
    """Does each counterfactual ``C[i]`` join cluster ``target[i]`` with a margin? Its own
    core ``Q[i]`` (or another target core) within ``eps * (1 - VERIFY_REL)`` and every core of
    another cluster further by the relative margin ``TIE_REL``."""
    if C.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    dq = rowwise_distances(C, Q, cg.metric)
    dist, idx = cg.nearest_cores(C, k=min(8, cg.n_cores))
    is_t = cg.labels[idx] == target[:, None]
    dt = np.minimum(dq, np.where(is_t, dist, np.inf).min(axis=1))
    dn = np.where(is_t, np.inf, dist).min(axis=1)
    return np.asarray((dt <= cg.eps * (1.0 - VERIFY_REL)) & (dt < dn * (1.0 - TIE_REL)))


def place_counterfactuals(
    cg: CoreGraph,
    x: np.ndarray,
    Q: np.ndarray,
    box: np.ndarray,
    lo_table: np.ndarray,
    hi_table: np.ndarray,
    target: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Counterfactuals of the reference cores ``Q`` (rows) and a validity mask.

    ``box`` is each core's box in ``lo_table`` / ``hi_table`` (bounds on the change
    :math:`c - x`, see :func:`eligible_cores`); ``target`` is each core's cluster. The step from
    the projection ``p`` toward ``x`` is the largest within radius ``eps * (1 - PLACE_REL)`` of
    the core (closed form for Euclidean, 64 bisection steps otherwise), then shrunk by
    :data:`SHRINK` while the counterfactual fails :func:`valid_counterfactuals`; a Euclidean
    counterfactual that still fails goes to :func:`repair_counterfactual`.
    """
    lo, hi = lo_table[box], hi_table[box]
    P = project_to_box(Q, x[None, :], lo, hi)
    r = cg.eps * (1.0 - PLACE_REL)
    B = x[None, :] - P
    if cg.metric == "euclidean":
        A = P - Q
        ab = np.einsum("ij,ij->i", A, B)
        bb = np.einsum("ij,ij->i", B, B)
        aa = np.einsum("ij,ij->i", A, A)
        disc = np.maximum(ab * ab - bb * (aa - r * r), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(bb > 0, (-ab + np.sqrt(disc)) / bb, 0.0)
        t = np.clip(np.nan_to_num(t, nan=0.0), 0.0, 1.0)
    else:
        lo_t = np.zeros(Q.shape[0])
        hi_t = np.ones(Q.shape[0])
        inside = rowwise_distances(x[None, :], Q, cg.metric) <= r
        for _ in range(64):
            mid = 0.5 * (lo_t + hi_t)
            ok = rowwise_distances(P + mid[:, None] * B, Q, cg.metric) <= r
            lo_t = np.where(ok, mid, lo_t)
            hi_t = np.where(ok, hi_t, mid)
        t = np.where(inside, 1.0, lo_t)
    C = project_to_box(P + t[:, None] * B, x[None, :], lo, hi)
    valid = valid_counterfactuals(cg, C, Q, target)
    for factor in SHRINK:
        if valid.all():
            break
        bad = ~valid
        t[bad] = t[bad] * factor
        C[bad] = project_to_box(P[bad] + t[bad, None] * B[bad], x[None, :], lo[bad], hi[bad])
        valid[bad] = valid_counterfactuals(cg, C[bad], Q[bad], target[bad])
    if cg.metric == "euclidean":
        for i in np.flatnonzero(~valid):  # rare: only cores whose whole segment failed
            c = repair_counterfactual(cg, x, Q[i], int(target[i]), lo_table, hi_table)
            if c is not None:
                C[i], valid[i] = c, True
    return C, valid


def repair_counterfactual(
    cg: CoreGraph,
    x: np.ndarray,
    q: np.ndarray,
    target: int,
    lo_table: np.ndarray,
    hi_table: np.ndarray,
) -> np.ndarray | None:
    """A valid Euclidean counterfactual of core ``q`` in any allowed box, or ``None``.

    Solves the module's convex fallback problem with SLSQP in coordinates centred on ``q`` and
    scaled by ``eps`` (so offsets and scales do not matter), with slightly tightened ball and
    halfspaces, for every box whose region meets the ball (nearest box first), and returns the
    first solution that passes :func:`valid_counterfactuals`. Cost per box: one small QP in
    the free features with one constraint per nearby foreign core.
    """
    from scipy.optimize import minimize

    r = cg.eps * (1.0 - PLACE_REL)
    d_core = rowwise_distances(cg.core_points, q[None, :], "euclidean")
    foreign = (cg.core_labels != target) & (d_core < 2.0 * cg.eps)
    others = (cg.core_points[foreign] - q[None, :]) / r  # centred, scaled foreign cores
    half = 0.5 * np.einsum("ij,ij->i", others, others)
    margin = 1e-7
    reach = rowwise_distances(
        project_to_box(q[None, :], x[None, :], lo_table, hi_table), q[None, :], "euclidean"
    )
    for b in np.argsort(reach, kind="stable"):
        if reach[b] > r:
            break
        lo_c, hi_c = (x + lo_table[b] - q) / r, (x + hi_table[b] - q) / r  # box, centred
        fixed = lo_table[b] == hi_table[b]
        free = ~fixed
        xc = (x - q) / r
        base = np.where(fixed, xc, 0.0)

        def full(z: np.ndarray, base: np.ndarray = base, free: np.ndarray = free) -> np.ndarray:
            y = base.copy()
            y[free] = z
            return y

        start = np.clip(np.zeros(int(free.sum())), lo_c[free], hi_c[free])
        cons = [
            {
                "type": "ineq",
                "fun": lambda z, full=full: (1.0 - margin) ** 2 - full(z) @ full(z),
                "jac": lambda z, full=full, free=free: -2.0 * full(z)[free],
            }
        ]
        if others.shape[0]:
            cons.append(
                {
                    "type": "ineq",
                    "fun": lambda z, full=full: half * (1.0 - margin) - others @ full(z),
                    "jac": lambda z, free=free: -others[:, free],
                }
            )
        bounds = [
            (None if not np.isfinite(a) else a, None if not np.isfinite(c) else c)
            for a, c in zip(lo_c[free], hi_c[free], strict=True)
        ]
        res = minimize(
            lambda z, xf=xc[free]: float((z - xf) @ (z - xf)),
            start,
            jac=lambda z, xf=xc[free]: 2.0 * (z - xf),
            bounds=bounds,
            constraints=cons,
            method="SLSQP",
            options={"maxiter": 200, "ftol": 1e-12},
        )
        cand = project_to_box(q + r * full(res.x), x, lo_table[b], hi_table[b])
        if valid_counterfactuals(cg, cand[None, :], q[None, :], np.array([target]))[0]:
            logger.debug("fallback placement found a valid counterfactual in box %d", b)
            return cand
    return None
