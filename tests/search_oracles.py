"""Brute-force oracles and data shared by the search-backend tests (imported, not collected)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from gnnaudit.audit.search.base import SearchSpace


def brute_local(x: np.ndarray, pred: np.ndarray, q: np.ndarray, k: int):
    """Top-k other-class positions of each query by sorting all similarities (ties: position);
    ``(q, k)`` arrays padded with ``-inf`` / ``-1``."""
    s = x[q].astype(np.float64) @ x.T.astype(np.float64)
    s[pred[q][:, None] == pred[None, :]] = -np.inf
    s = np.concatenate([s, np.full((q.size, max(0, k - x.shape[0])), -np.inf)], axis=1)
    cols = np.broadcast_to(np.arange(s.shape[1]), s.shape)
    order = np.lexsort((cols, -s), axis=1)[:, :k]
    sim = np.take_along_axis(s, order, axis=1)
    pos = np.where(np.isfinite(sim), order, -1)
    return sim, pos


def brute_global(x: np.ndarray, pred: np.ndarray, k: int):
    """Top-k unordered other-class pairs by sorting all pairs (ties: smaller (u, v))."""
    s = x.astype(np.float64) @ x.T.astype(np.float64)
    u, v = np.triu_indices(x.shape[0], 1)
    keep = pred[u] != pred[v]
    u, v, sv = u[keep], v[keep], s[u[keep], v[keep]]
    order = np.lexsort((v, u, -sv))[:k]
    return sv[order], u[order], v[order]


def clustered(m: int, d: int, n_centres: int, n_classes: int, seed: int, spread: float = 0.6):
    """Unit vectors around random centres; predictions follow the centre with 30% noise."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_centres, d))
    lab = rng.integers(0, n_centres, m)
    x = centres[lab] + spread * rng.standard_normal((m, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    flip = rng.random(m) < 0.3
    pred = np.where(flip, rng.integers(0, n_classes, m), lab % n_classes)
    return x.astype(np.float32), pred.astype(np.int64)


def space_of(x: np.ndarray, pred: np.ndarray, id_stride: int = 1) -> SearchSpace:
    """A search space over ``x``; node ids ``stride * i + (stride > 1)`` (ascending)."""
    return SearchSpace(
        embedding=x.astype(np.float32),
        predictions=pred.astype(np.int64),
        node_ids=np.arange(x.shape[0], dtype=np.int64) * id_stride + int(id_stride > 1),
    )


def recall(pos: np.ndarray, ref: np.ndarray) -> float:
    """Mean fraction of the reference positions found, per query."""
    hits = [
        len(set(a[a >= 0]) & set(b[b >= 0])) / max(1, (b >= 0).sum())
        for a, b in zip(pos, ref, strict=True)
    ]
    return float(np.mean(hits))


def assert_valid(x, pred, q, sim, pos, k):
    """Every row: padding last, no self, other class only, unique, sorted, exact similarities."""
    assert sim.shape == pos.shape == (q.size, k)
    for i, qi in enumerate(q):
        p = pos[i][pos[i] >= 0]
        assert (pos[i][: p.size] >= 0).all(), "padding must come last"
        assert np.isneginf(sim[i][p.size :]).all()
        assert qi not in p
        assert (pred[p] != pred[qi]).all()
        assert len(set(p.tolist())) == p.size
        s = sim[i][: p.size]
        assert (np.diff(s) <= 0).all()
        np.testing.assert_allclose(s, x[p].astype(np.float64) @ x[qi].astype(np.float64), atol=1e-6)


def positions(searcher, res) -> tuple[np.ndarray, np.ndarray]:
    """``(similarity, position)`` of a LocalEvidence answer, the evidences mapped back to
    positions into ``searcher.space_`` (padding stays ``-1``)."""
    ids = searcher.space_.node_ids
    ev = res.evidence
    pos = np.where(ev >= 0, np.searchsorted(ids, np.maximum(ev, 0)), -1)
    assert (ids[pos[ev >= 0]] == ev[ev >= 0]).all(), "evidences must be node ids of the space"
    return np.asarray(res.similarity), pos


def pair_positions(searcher, g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(similarity, u, v)`` of a GlobalEvidence answer as positions into the space."""
    ids = searcher.space_.node_ids
    u, v = np.searchsorted(ids, g.node_u), np.searchsorted(ids, g.node_v)
    assert (ids[u] == g.node_u).all() and (ids[v] == g.node_v).all()
    return np.asarray(g.similarity), u, v


@st.composite
def quantised_spaces(draw, max_nodes: int = 25):
    """``(embedding, predictions)`` with entries in {-1, -1/2, 0, 1/2, 1}: every dot product
    is exact in float32, so ties are exact and plentiful (duplicate rows, zero rows)."""
    m = draw(st.integers(1, max_nodes))
    d = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    emb = (rng.integers(-2, 3, size=(m, d)) / 2).astype(np.float32)
    if m > 3:
        emb[rng.integers(0, m, size=2)] = emb[0]  # duplicate rows -> exact ties
    pred = rng.integers(0, draw(st.integers(1, 4)), size=m).astype(np.int64)
    return emb, pred
