"""Brute-force oracles shared by the clustering tests (imported, not collected)."""

from __future__ import annotations

import numpy as np


def distances_to_rows(a: np.ndarray, B: np.ndarray, metric: str = "euclidean") -> np.ndarray:
    """Distances from the point ``a`` to every row of ``B``, written out per metric."""
    diff = B - a[None, :]
    if metric == "euclidean":
        return np.sqrt((diff * diff).sum(axis=1))
    if metric == "manhattan":
        return np.abs(diff).sum(axis=1)
    if metric == "chebyshev":
        return np.abs(diff).max(axis=1)
    na, nb = np.linalg.norm(a), np.linalg.norm(B, axis=1)
    return 1.0 - (B @ a) / (na * nb)


def dbscan_membership(c: np.ndarray, X: np.ndarray, db, metric: str = "euclidean") -> int:
    """Cluster of a new point under a fitted sklearn DBSCAN, by brute force over its core
    points: the nearest core decides if it lies within eps, else noise (-1)."""
    cores = X[db.core_sample_indices_]
    labs = db.labels_[db.core_sample_indices_]
    d = distances_to_rows(c, cores, metric)
    j = int(np.argmin(d))
    return int(labs[j]) if d[j] <= db.eps else -1


def honours(labels: np.ndarray, ml, cl) -> bool:
    """Do ``labels`` keep every must-link pair together and every cannot-link pair apart?"""
    ml = np.asarray(ml, dtype=int).reshape(-1, 2)
    cl = np.asarray(cl, dtype=int).reshape(-1, 2)
    return bool(
        np.all(labels[ml[:, 0]] == labels[ml[:, 1]])
        and np.all(labels[cl[:, 0]] != labels[cl[:, 1]])
    )


def labelled_pairs(rng: np.random.Generator, y: np.ndarray, m: int):
    """``m`` random pairs (self pairs dropped) labelled by ``y``: ``(must_link, cannot_link)``."""
    n = len(y)
    i, j = rng.integers(0, n, size=(2, m))
    keep = i != j
    i, j = i[keep], j[keep]
    same = y[i] == y[j]
    return np.stack([i[same], j[same]], 1), np.stack([i[~same], j[~same]], 1)
