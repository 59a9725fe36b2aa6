"""NIFTY's feature-similarity graph, built in row blocks with bounded memory, exactly.

NIFTY (Agarwal et al., UAI 2021) does not ship the edges of Credit and Bail; it derives them from
the node features. With :math:`d_{ij} = \\lVert x_i - x_j \\rVert_2` over the raw feature
columns, the similarity is

.. math:: s_{ij} = \\frac{1}{1 + d_{ij}},

and node :math:`i` links to every :math:`j \\ne i` with

.. math:: s_{ij} > \\tau \\cdot m_i, \\qquad m_i = \\max_{j \\ne i} s_{ij},

:math:`\\tau` being 0.8 (German), 0.7 (Credit) or 0.6 (Bail). The reference takes :math:`m_i` as
the second-largest entry of row :math:`i` of the dense similarity matrix; the largest is
:math:`s_{ii} = 1`, so this is the largest similarity to any *other* node, and it is 1 as soon as
node :math:`i` has an exact duplicate row (then :math:`i` links to every :math:`j` closer than
:math:`1/\\tau - 1`). The relation is not symmetric; NIFTY's loaders symmetrise the adjacency
afterwards (:func:`nifty_similarity_edges` returns the directed pairs, the loader makes them
undirected).

Exactness. The comparison is strict and many pairs sit exactly on the boundary for integer
features (e.g. when :math:`m_i = 1`), so the values compared must be bit-identical to the
reference's (``scipy.spatial.distance_matrix``: :math:`\\sum_l (x_{jl} - x_{il})^2` summed along
the feature axis, its square root, then ``1 / (1 + d)``). Two engines, same output:

* ``kdtree`` (default while there are at most 32 feature columns): a k-d tree gives each row's
  nearest other node, then every node inside the largest radius the rule can allow,
  :math:`r_i = (1 + d_{i,\\mathrm{nn}}) / \\tau - 1`, widened by a relative and absolute
  :math:`10^{-9}` against the tree's rounding. On those candidates (a superset of the edges
  that always holds the nearest other node) the squared distances are recomputed exactly as the
  reference computes them, and :math:`m_i` and the rule are applied to those values.
  Memory: the tree, O(n k), plus one block's candidates, at most ``block_rows * n`` pairs and in
  practice ``block_rows`` times the mean degree (``block_rows`` defaults to ``2**23 // n``).
* ``blocks``: squared distances of a block of rows from one matrix product,
  :math:`\\lVert a\\rVert^2 + \\lVert b\\rVert^2 - 2 a \\cdot b`. For integer-valued features
  whose squared norms stay below :math:`2^{51}` every partial sum is an integer below
  :math:`2^{53}`, so the product is exact and equals the reference bit for bit (NIFTY's Credit,
  Bail and German are integer-valued); the row cutoff then becomes an integer bound on the
  squared distance, so no square root is taken over the block. Otherwise the features are
  centred first, each entry carries the rounding bound
  :math:`4 (k + 2)\\,\\varepsilon\\,(\\lVert a\\rVert^2 + \\lVert b\\rVert^2)`, and every pair
  whose decision (or claim to the row maximum) that bound leaves open is recomputed the
  reference's way. Memory: at most ``6 * block_rows * n`` float64 values per block;
  ``block_rows`` defaults to ``2**19 // n`` (about 25 MB at any ``n``; small blocks stay in
  cache). No tree, so it does not degrade with many feature columns.

Both are checked against :func:`dense_similarity_edges`, the dense rule as the reference writes
it, in the tests.
"""

from __future__ import annotations

import logging
import time
from itertools import chain
from typing import Any

import numpy as np

from gnnaudit._validation import check_choice, check_float, check_int
from gnnaudit.errors import InvalidInputError

__all__ = ["NIFTY_THRESHOLDS", "nifty_similarity_edges", "dense_similarity_edges"]

logger = logging.getLogger(__name__)

#: NIFTY's similarity thresholds per dataset.
NIFTY_THRESHOLDS: dict[str, float] = {"german": 0.8, "credit": 0.7, "bail": 0.6}

_EXACT_LIMIT = 2.0**51  # squared norms below this keep integer arithmetic exact (4x < 2**53)
_KDTREE_MAX_COLUMNS = 32
_CANDIDATE_ELEMENTS = 2**23
_SLACK = 1e-9  # relative and absolute widening of the ball radius (tree rounding)
_BLOCK_ELEMENTS = 2**19  # small blocks stay in cache: 2-3x faster than 2**22


def _direct_sq(x: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Squared distances of the pairs (rows, cols), summed along the feature axis as scipy does."""
    diff = x[cols] - x[rows]
    return np.sum(diff * diff, axis=-1)


def _similarity(sq: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.sqrt(sq))


def _check_features(features: np.ndarray) -> np.ndarray:
    x = np.asarray(features)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        raise InvalidInputError(
            f"features must be a 2-D array with at least 2 rows and 1 column, got shape {x.shape}"
        )
    try:
        x = np.ascontiguousarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"features must be numeric, got dtype {x.dtype}") from exc
    if not np.isfinite(x).all():
        raise InvalidInputError("features hold NaN or infinite values; the similarity needs finite")
    return x


class _Gram:
    """Squared distances of a row block to every row, with a per-entry rounding bound."""

    def __init__(self, x: np.ndarray) -> None:
        self.raw = x
        norms = np.einsum("ij,ij->i", x, x)
        self.exact = bool(np.array_equal(x, np.round(x)) and norms.max() < _EXACT_LIMIT)
        work = x if self.exact else x - x.mean(axis=0)
        self.work = work
        self.minus_two = np.ascontiguousarray((-2.0 * work).T)
        self.norms = np.einsum("ij,ij->i", work, work)
        self.gamma = 0.0 if self.exact else 4.0 * (x.shape[1] + 2) * np.finfo(np.float64).eps

    def block(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Squared distances of rows ``start:stop`` to all rows (``inf`` on the diagonal)."""
        sq = self.work[start:stop] @ self.minus_two
        sq += self.norms[start:stop, None]
        sq += self.norms[None, :]
        rows = np.arange(stop - start)
        sq[rows, start + rows] = np.inf  # j != i everywhere below
        if self.exact:  # integers below 2**53: exact, never negative
            return sq, None
        np.maximum(sq, 0.0, out=sq)
        tol = self.norms[start:stop, None] + self.norms[None, :]
        tol *= self.gamma
        return sq, tol


def _row_max_similarity(
    gram: _Gram, sq: np.ndarray, tol: np.ndarray | None, start: int
) -> np.ndarray:
    """Largest similarity of each block row to any other row, exactly as the reference."""
    best = sq.min(axis=1)
    if tol is not None:  # recompute every pair that may hold the row minimum
        r, c = np.nonzero(sq - tol <= (best + tol.max(axis=1))[:, None])
        exact = _direct_sq(gram.raw, start + r, c)
        best = np.full(sq.shape[0], np.inf)
        np.minimum.at(best, r, exact)
    return _similarity(best)


def _integer_cutoff(cut: np.ndarray) -> np.ndarray:
    """Largest integer ``t >= 0`` with ``1 / (1 + sqrt(t)) > cut`` per row (-1 if none).

    The similarity computed in floating point is non-increasing in ``t``, so on integer squared
    distances ``s > cut`` is the same test as ``t <= cutoff``; the estimate from the inverse is
    corrected by stepping until both sides of the boundary are verified.
    """
    with np.errstate(divide="ignore"):
        guess = np.floor((1.0 / cut - 1.0) ** 2)
    t = np.clip(np.nan_to_num(guess, posinf=2.0**53), 0.0, 2.0**53)
    for _ in range(64):
        up = _similarity(t + 1.0) > cut
        down = (t >= 0) & ~(_similarity(np.maximum(t, 0.0)) > cut)
        if not (up.any() or down.any()):
            return t
        t = t + up - down
    raise RuntimeError("NIFTY similarity cutoff did not settle")  # pragma: no cover


def _block_pairs(
    gram: _Gram, start: int, stop: int, thresh: float
) -> tuple[np.ndarray, np.ndarray]:
    sq, tol = gram.block(start, stop)
    cut = thresh * _row_max_similarity(gram, sq, tol, start)
    if tol is None:
        keep = sq <= _integer_cutoff(cut)[:, None]
    else:
        keep = _similarity(sq + tol) > cut[:, None]
        maybe = _similarity(np.maximum(sq - tol, 0.0)) > cut[:, None]
        r, c = np.nonzero(maybe & ~keep)
        keep[r, c] = _similarity(_direct_sq(gram.raw, start + r, c)) > cut[r]
    flat = np.flatnonzero(keep)  # 20x faster than a 2-D nonzero
    return flat // keep.shape[1] + start, flat % keep.shape[1]


def _blocks_engine(x: np.ndarray, thresh: float, block_rows: int) -> tuple[np.ndarray, np.ndarray]:
    gram = _Gram(x)
    heads: list[np.ndarray] = []
    tails: list[np.ndarray] = []
    for start in range(0, x.shape[0], block_rows):
        r, c = _block_pairs(gram, start, min(x.shape[0], start + block_rows), thresh)
        heads.append(r)
        tails.append(c)
    return np.concatenate(heads), np.concatenate(tails)


def _kdtree_block(
    tree: Any, x: np.ndarray, start: int, stop: int, thresh: float
) -> tuple[np.ndarray, np.ndarray]:
    """Candidates from a ball query, then the rule on distances computed the reference's way."""
    q = x[start:stop]
    near = tree.query(q, k=2)[0][:, 1]  # the row itself and its nearest other (0 for a duplicate)
    radius = ((1.0 + near) / thresh - 1.0) * (1.0 + _SLACK) + _SLACK
    hits = tree.query_ball_point(q, radius, return_sorted=False)
    counts = np.fromiter(map(len, hits), dtype=np.int64, count=len(hits))
    cols = np.fromiter(chain.from_iterable(hits), dtype=np.int64, count=int(counts.sum()))
    rows = np.repeat(np.arange(start, stop, dtype=np.int64), counts)
    other = cols != rows
    rows, cols = rows[other], cols[other]
    sq = _direct_sq(x, rows, cols)
    # the ball holds the nearest other node of every row (radius >= its distance), so each row
    # has candidates and the segment minimum is the exact nearest squared distance
    offsets = np.concatenate(([0], np.cumsum(np.bincount(rows - start, minlength=stop - start))))
    best = np.minimum.reduceat(sq, offsets[:-1])
    keep = _similarity(sq) > thresh * _similarity(best)[rows - start]
    return rows[keep], cols[keep]


def _kdtree_engine(x: np.ndarray, thresh: float, block_rows: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.spatial import cKDTree

    tree = cKDTree(x)
    heads: list[np.ndarray] = []
    tails: list[np.ndarray] = []
    for start in range(0, x.shape[0], block_rows):
        r, c = _kdtree_block(tree, x, start, min(x.shape[0], start + block_rows), thresh)
        heads.append(r)
        tails.append(c)
    return np.concatenate(heads), np.concatenate(tails)


def nifty_similarity_edges(
    features: np.ndarray,
    thresh: float,
    *,
    method: str = "auto",
    block_rows: int | None = None,
) -> np.ndarray:
    """Directed pairs ``(i, j)`` of NIFTY's similarity rule (see the module docstring).

    Parameters
    ----------
    features : (n, k) numeric array, the raw feature columns (no standardisation).
    thresh : :math:`\\tau \\in (0, 1]`.
    method : ``"kdtree"``: a k-d tree finds, per row, the nearest other node and then every node
        within the radius the rule allows (slightly enlarged); the rule is applied to those
        candidates with distances computed exactly as the reference does. Memory: the tree
        (O(n k)) plus the candidates of one block, at most ``block_rows * n`` pairs and in
        practice about ``block_rows`` times the mean degree. Fast while ``k`` is small.
        ``"blocks"``: matrix-product squared distances, about ``6 * block_rows * n`` float64
        values per block; no tree, for many feature columns. ``"auto"`` (default): ``kdtree``
        when ``k <= 32``, else ``blocks``.
    block_rows : rows per block. Default ``max(1, 2**19 // n)`` for ``blocks`` and
        ``max(1, 2**23 // n)`` for ``kdtree``.

    Returns
    -------
    (2, m) int64 array of directed pairs, ``i != j``, sorted by ``i`` then ``j``; the same set
    as NIFTY's ``build_relationship`` (which emits them in a shuffled order per row).
    """
    x = _check_features(features)
    thresh = check_float("thresh", thresh, minimum=0.0, maximum=1.0, inclusive=(False, True))
    method = check_choice("method", method, ("auto", "kdtree", "blocks"))
    n, k = x.shape
    if method == "auto":
        method = "kdtree" if k <= _KDTREE_MAX_COLUMNS else "blocks"
    budget = _BLOCK_ELEMENTS if method == "blocks" else _CANDIDATE_ELEMENTS
    block_rows = max(1, budget // n) if block_rows is None else block_rows
    block_rows = check_int("block_rows", block_rows, minimum=1)
    began = time.perf_counter()
    engine = _blocks_engine if method == "blocks" else _kdtree_engine
    heads, tails = engine(x, thresh, block_rows)
    order = np.lexsort((tails, heads))
    pairs = np.stack([heads[order], tails[order]]).astype(np.int64)
    logger.info(
        "NIFTY similarity edges: n=%d, k=%d, thresh=%.2f, %d directed pairs in %.2f s "
        "(method=%s, block_rows=%d)",
        n,
        k,
        thresh,
        pairs.shape[1],
        time.perf_counter() - began,
        method,
        block_rows,
    )
    return pairs


def dense_similarity_edges(features: np.ndarray, thresh: float) -> np.ndarray:
    """Reference implementation: the dense rule as NIFTY writes it (O(n^2) memory).

    Builds the full similarity matrix from ``scipy.spatial.distance_matrix``, takes the
    second-largest entry of each row from a sort, and keeps ``s_ij > thresh * m_i``, ``j != i``.
    For tests and benchmarks on small ``n`` only.
    """
    from scipy.spatial import distance_matrix

    x = _check_features(features)
    sim = 1.0 / (1.0 + distance_matrix(x, x))
    second = np.sort(sim, axis=1)[:, -2]
    keep = sim > thresh * second[:, None]
    np.fill_diagonal(keep, False)
    return np.stack(np.nonzero(keep)).astype(np.int64)
