r"""Weighted spherical k-means, the clustering rounds of the paper's index (CE Sec. 5.1).

On unit vectors (cosine geometry): a point is assigned to the centroid with the largest inner
product, and a centroid is the renormalised *weighted* mean of its points (CE Eq. 8-9)

.. math:: \mu_i = \frac{\sum_{v\in c_i} w_v x_v}{\lVert\sum_{v\in c_i} w_v x_v\rVert}.

Seeding is spherical k-means++ with sampling probability
:math:`\propto w_v (1 - \max_s \cos(x_v, \mu_s))`, so heavy points far from every seed are
favoured. Both steps are matrix products (float32) plus one sparse weighted sum per Lloyd
iteration: ``O(n_iter * m * k * d)`` time, ``O(m * k)`` extra memory.

Building blocks of :class:`~gnnaudit.audit.search.index.IndexSearcher`, whose ``build``
validates the embedding (finite unit rows): they trust their input.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["normalise_rows", "kmeanspp_seeds", "weighted_lloyd"]


def normalise_rows(a: np.ndarray) -> np.ndarray:
    """Rows divided by their norm; zero rows stay zero."""
    n = np.linalg.norm(a, axis=1, keepdims=True)
    return np.divide(a, n, out=np.zeros_like(a), where=n > 0)


def kmeanspp_seeds(x: np.ndarray, k: int, w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``k`` spherical k-means++ seeds of the unit rows ``x`` (sampling weight
    ``w_v * (1 - max cos to the seeds)``), as a ``(k, d)`` copy."""
    m = x.shape[0]
    p = w / w.sum() if w.sum() > 0 else np.full(m, 1.0 / m)
    first = int(rng.choice(m, p=p))
    seeds = [first]
    best = x @ x[first]
    for _ in range(1, k):
        score = np.clip(1.0 - best, 0.0, None).astype(np.float64) * w
        total = score.sum()
        if total <= 0:  # every point coincides with a seed: take unused points in order
            unused = np.setdiff1d(np.arange(m), seeds)
            nxt = int(unused[0])
        else:
            nxt = int(rng.choice(m, p=score / total))
        seeds.append(nxt)
        np.maximum(best, x @ x[nxt], out=best)
    return x[seeds].copy()


def weighted_lloyd(
    x: np.ndarray, cent: np.ndarray, w: np.ndarray, n_iter: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Weighted spherical Lloyd iterations from the centroids ``cent`` (stops early at
    convergence). Returns ``(centroids, labels, cos to the own centroid, cos to the
    runner-up centroid)``; an empty (or zero-weight) cluster is reseeded at the worst-served
    points."""
    m, k = x.shape[0], cent.shape[0]
    rows = np.arange(m)
    wf = w.astype(np.float32)
    labels = None
    for _ in range(n_iter):
        sim = x @ cent.T
        new = np.argmax(sim, axis=1)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        one_hot = sp.csr_matrix((wf, (labels, rows)), shape=(k, m))
        summed = np.asarray(one_hot @ x, dtype=np.float32)
        norms = np.linalg.norm(summed, axis=1)
        dead = np.flatnonzero(norms <= 1e-12)
        cent = normalise_rows(summed)
        if dead.size:
            own = sim[rows, labels]
            far = np.argsort(own, kind="stable")[: dead.size]
            cent[dead] = normalise_rows(x[far])
    sim = x @ cent.T
    labels = np.argmax(sim, axis=1)
    own = sim[rows, labels]
    if k > 1:
        sim[rows, labels] = -np.inf
        runner_up = sim.max(axis=1)
    else:
        runner_up = np.full(m, -1.0, dtype=sim.dtype)
    return cent, labels.astype(np.int32), own, runner_up
