"""Distance helpers shared by the graph primitives (metrics, radius pairs, pdist indices).

Every distance here is computed *directly* from coordinate differences, never through the
expanded :math:`\\|a\\|^2 - 2 a \\cdot b + \\|b\\|^2` form, so results are accurate to a few
ulps at any scale and do not depend on where the data sit (translating ``X`` changes nothing
but the rounding of the input itself). Cosine distance is by nature not translation invariant.

* :func:`canonical_metric` -- the supported metrics and their aliases;
* :func:`rowwise_distances` / :func:`metric_distances` -- matching rows / all pairs;
* :func:`radius_pairs` -- all pairs within a radius (tree candidates, exact decision);
* :func:`condensed_index` / :func:`pairs_from_condensed` -- the pair layout of
  :func:`scipy.spatial.distance.pdist` (row-major upper triangle).

Scale safety. Squares of differences below about ``1e-154`` underflow and above about
``1e154`` overflow float64. Euclidean distances whose sum of squares leaves the safe range are
recomputed with each difference divided by its row's largest magnitude (as BLAS ``nrm2``
does); cosine distances normalise every vector by its largest magnitude first. Tree searches
(scipy / scikit-learn KD- and ball trees square internally) run on data divided by
:func:`power_of_two_scale`, a power of two, so the scaled coordinates and every distance are
exact multiples of the originals: data at ``1e-160`` or ``1e160`` give the same neighbours,
trees and clusterings as the same data at scale 1.

A private module: the public names are re-exported where they belong
(:mod:`gnnaudit.graph_ops.core_graph` for the metric helpers).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnaudit._validation import check_choice
from gnnaudit.errors import InvalidInputError

__all__ = [
    "SUPPORTED_METRICS",
    "CHUNK_ELEMS",
    "canonical_metric",
    "rowwise_distances",
    "metric_distances",
    "radius_pairs",
    "condensed_index",
    "pairs_from_condensed",
    "power_of_two_scale",
    "unit_scale",
]

#: Metrics the core graph (and ExDBSCAN) support; aliases map onto these.
SUPPORTED_METRICS: tuple[str, ...] = ("euclidean", "manhattan", "chebyshev", "cosine")
_ALIASES = {
    "l2": "euclidean",
    "l1": "manhattan",
    "cityblock": "manhattan",
    "taxicab": "manhattan",
    "infinity": "chebyshev",
}
#: Memory bound of the chunked distance computations, in float64 elements (32 MiB).
CHUNK_ELEMS = 1 << 22


def canonical_metric(metric: Any) -> str:
    """Return the canonical name of ``metric`` or raise :class:`InvalidInputError`."""
    if not isinstance(metric, str):
        raise InvalidInputError(
            f"metric must be one of {', '.join(SUPPORTED_METRICS)} (a string), got {metric!r}"
        )
    name = _ALIASES.get(metric.lower(), metric.lower())
    return str(check_choice("metric", name, SUPPORTED_METRICS))


#: sums of squares outside ``[SAFE_LOW, SAFE_HIGH]`` are recomputed rescaled (nrm2 style)
SAFE_LOW = 2.0**-960
SAFE_HIGH = 2.0**960


def power_of_two_scale(X: np.ndarray) -> float:
    """A power of two ``p`` with ``max |X| / p`` in ``[1, 2)`` (1 for all-zero or empty ``X``).

    Dividing by ``p`` is exact in floating point, so ``X / p`` keeps every digit and every
    distance of ``X / p`` is exactly the distance of ``X`` divided by ``p``.
    """
    if X.size == 0:
        return 1.0
    m = float(np.max(np.abs(X)))
    if m == 0.0 or not np.isfinite(m):
        return 1.0
    return float(np.ldexp(1.0, np.frexp(m)[1] - 1))


def _euclidean(diff: np.ndarray) -> np.ndarray:
    """Euclidean norms of the rows of ``diff``; rows whose sum of squares under- or overflows
    are recomputed scaled by their largest magnitude."""
    sq = np.einsum("...i,...i->...", diff, diff)
    bad = (sq < SAFE_LOW) | (sq > SAFE_HIGH)
    out = np.sqrt(sq)
    if bad.any():
        rows = diff[bad]
        m = np.abs(rows).max(axis=-1)
        safe = np.where(m > 0, m, 1.0)
        r = rows / safe[:, None]
        out[bad] = m * np.sqrt(np.einsum("...i,...i->...", r, r))
    return np.asarray(out)


def _reduce(diff: np.ndarray, metric: str) -> np.ndarray:
    if metric == "euclidean":
        return _euclidean(diff)
    if metric == "manhattan":
        return np.asarray(np.abs(diff).sum(axis=-1))
    if metric == "chebyshev":
        return np.asarray(np.abs(diff).max(axis=-1))
    raise AssertionError(metric)  # pragma: no cover


def unit_scale(a: np.ndarray) -> np.ndarray:
    """Every vector divided by its largest magnitude (cosine is scale invariant per vector)."""
    m = np.abs(a).max(axis=-1, keepdims=True) if a.shape[-1] else np.ones(a.shape[:-1] + (1,))
    return a / np.where(m > 0, m, 1.0)


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = unit_scale(a), unit_scale(b)
    na = np.sqrt(np.einsum("...i,...i->...", a, a))
    nb = np.sqrt(np.einsum("...i,...i->...", b, b))
    dot = np.einsum("...i,...i->...", a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        sim = dot / (na * nb)
    sim = np.where((na == 0) | (nb == 0), 0.0, sim)
    return np.clip(1.0 - sim, 0.0, 2.0)


def rowwise_distances(a: np.ndarray, b: np.ndarray, metric: str) -> np.ndarray:
    """Distances between matching rows, ``d(a[..., :], b[..., :])`` (broadcasting).

    ``metric`` must already be canonical (:func:`canonical_metric`). Finiteness is checked on
    the result (cheaper than on the inputs in inner loops): a NaN or inf coordinate, or a
    difference that overflows float64, raises :class:`InvalidInputError`.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        out = _cosine(a, b) if metric == "cosine" else _reduce(a - b, metric)
    if not np.all(np.isfinite(out)):
        raise InvalidInputError(
            f"{metric} distances need finite coordinates whose differences do not overflow "
            "float64; got NaN or inf"
        )
    return out


def metric_distances(a: np.ndarray, b: np.ndarray, metric: str) -> np.ndarray:
    """All distances ``(len(a), len(b))`` computed directly from coordinate differences.

    Memory: chunks of at most ``2**22`` float64 temporaries (32 MiB) besides the output.
    """
    a = np.atleast_2d(a)
    b = np.atleast_2d(b)
    out = np.empty((a.shape[0], b.shape[0]))
    rows = max(1, CHUNK_ELEMS // max(1, b.shape[0] * a.shape[1]))
    for i in range(0, a.shape[0], rows):
        out[i : i + rows] = rowwise_distances(a[i : i + rows, None, :], b[None, :, :], metric)
    return out


def radius_pairs(
    points: np.ndarray, eps: float, metric: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All ordered pairs ``(i, j)``, ``i != j``, with ``d(p_i, p_j) <= eps``.

    Candidates come from a tree (brute force for cosine) with a slightly larger radius; the
    exact direct distance then decides, so the pairs agree with :func:`metric_distances` at
    exact ties. The tree searches the points divided by :func:`power_of_two_scale` (exact), so
    tiny and huge magnitudes find the same candidates. Returns ``(rows, cols, distances)``.
    Memory: the pairs plus chunks of ``2**22`` float64 temporaries.
    """
    from sklearn.neighbors import NearestNeighbors

    algorithm = "brute" if metric == "cosine" else "ball_tree"
    if metric == "cosine":  # scale invariant per vector
        p, search = 1.0, unit_scale(points)
    else:
        p = power_of_two_scale(points)
        search = points / p
    nn = NearestNeighbors(radius=eps / p * (1 + 1e-9), metric=metric, algorithm=algorithm)
    graph = nn.fit(search).radius_neighbors_graph(mode="connectivity").tocoo()
    row, col = graph.row.astype(np.int64), graph.col.astype(np.int64)
    keep = row != col
    row, col = row[keep], col[keep]
    dist = np.empty(row.size)
    step = max(1, CHUNK_ELEMS // max(1, points.shape[1]))
    for i in range(0, row.size, step):
        dist[i : i + step] = rowwise_distances(
            points[row[i : i + step]], points[col[i : i + step]], metric
        )
    inside = dist <= eps
    return row[inside], col[inside], dist[inside]


def condensed_index(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Index of the unordered pairs ``(i, j)`` (``i != j``) in ``scipy.spatial.distance.pdist``
    order (row-major upper triangle)."""
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    return np.asarray(n * lo - lo * (lo + 1) // 2 + (hi - lo - 1))


def pairs_from_condensed(n: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`condensed_index` (vectorised, exact for every n < 2**26)."""
    idx = np.asarray(idx, dtype=np.int64)
    # row i starts at s(i) = i*n - i*(i+1)/2; invert the quadratic, then fix rounding.
    b = 2 * n - 1
    i = np.floor((b - np.sqrt(np.maximum(b * b - 8.0 * idx, 0.0))) / 2).astype(np.int64)
    i = np.clip(i, 0, n - 2)
    start = i * n - i * (i + 1) // 2
    too_far = start > idx
    i[too_far] -= 1
    start = i * n - i * (i + 1) // 2
    nxt = (i + 1) * n - (i + 1) * (i + 2) // 2
    short = nxt <= idx
    i[short] += 1
    start = i * n - i * (i + 1) // 2
    j = idx - start + i + 1
    return i, j
