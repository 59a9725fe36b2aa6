r"""The paper's index for counterfactual-evidence search (LocalCE-I, CE paper Sec. 5.1).

Build (Alg. "supplementary partitioning" + "weighted clustering"), on the unit-normalised
embedding :math:`x^{agg}` (cosine geometry throughout):

1. ``n_partitions`` partitions :math:`C^1..C^p`, each made by a spherical k-means round with
   ``n_clusters`` clusters: assignment by the largest inner product with a unit centroid,
   centroids the renormalised weighted means (Eq. 8-9)

   .. math:: \mu_i = \frac{\sum_{v\in c_i} w_v x_v}{\lVert\sum_{v\in c_i} w_v x_v\rVert}.

2. After a round each node gets the weight of Eq. 10,

   .. math:: w_v = 1 - \frac{IA(\mu_{c_v}, x_v)}{SF(x_v)},

   :math:`SF` the area of a cap of angular radius :math:`\theta` on :math:`S^{d-1}`, :math:`IA`
   the area of the intersection of the caps of radius :math:`\theta` centred at :math:`x_v` and
   at its centroid (a function of the angle between them only, see
   :mod:`gnnaudit.audit.spherical_caps`; caps that do not meet give :math:`w_v = 1`).
   The next round weights node v by the smallest weight it has had so far (its weight in its
   current index entry): nodes that every earlier partition leaves at a cluster boundary pull
   the next centroids toward them. Each round starts from a fresh k-means++ seeding drawn with
   probability :math:`\propto w_v (1 - \cos(x_v, \text{nearest seed}))` (a new random
   partition that favours the badly served nodes), followed by ``n_iter`` weighted Lloyd
   iterations.
3. Index entry of v: :math:`C^*[v] = \arg\min_i w^i_v` and v's cluster there. Equal weights
   (in high dimension :math:`w_v` saturates at 1 for every node farther than about
   :math:`\pi/10` from its centroid) are broken by the largest cosine to the centroid, which
   is the same order since :math:`w` is a non-decreasing function of the angle.

Extension ``entry="margin"``: the paper's rule picks the partition whose centroid is closest
to v, which favours partitions that split a natural cluster into tight halves (on well
separated blobs it scans a half-blob and misses the other half). The margin rule picks the
partition where v is farthest from its cluster boundary, :math:`\cos(x_v,\mu_{c_v}) -
\max_{j\ne c_v}\cos(x_v,\mu_j)`, which is what the supplementary partitions are meant to
fix; ``benchmarks/results/faiss_tuning.md`` reports both.

Ablations: ``weighted=False`` runs plain (unweighted) k-means rounds, ``supplementary=False``
keeps one partition only (``n_partitions`` is then ignored).

Local query (Alg. 2, top-k): a query scans its entry cluster (exact inner products, candidates
of another predicted class only). If that cluster holds fewer than k candidates, or
``n_probe > 1``, the query continues with the next clusters of the same partition by centroid
similarity, so k results come back whenever k candidates exist (a partition covers all nodes).

Global query (Alg. 3, generalised to top-k): the local top-k of every test node through the
index, merged into unique unordered pairs and cut to the k best. With exact local lists this
is exact (a pair {v, u} of the global top-k has u among v's local top-k); with the index it is
as approximate as the local lists.

Cost: build ``O(n_partitions * (n_iter + n_clusters) * m * n_clusters * d)`` flops
(matrix products in float32); query ``O(|cluster| * d)`` per query; memory of a query batch is
bounded by blocks of at most ``_BLOCK`` (4M) similarities (16 MB) plus ``O(q * k * n_probe)``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from tqdm.auto import trange

from gnnaudit._validation import check_array, check_choice, check_float, check_int
from gnnaudit.audit.search_base import EvidenceSearcher, Neighbours, Pairs, SearchSpace
from gnnaudit.audit.spherical_caps import cap_intersection_ratio
from gnnaudit.errors import InvalidInputError, NotFittedError

__all__ = ["IndexSearcher"]

logger = logging.getLogger(__name__)

_BLOCK = 1 << 22  # max similarities materialised at once (float32: 16 MB)
_N_GRID = 2049  # angle grid of the weight lookup table
_PAIR_CHUNK = 4096  # queries per chunk of the global search


# ----------------------------------------------------------------------------- helpers
def check_space(space: Any) -> SearchSpace:
    """Validate a :class:`SearchSpace` (shapes, dtypes, finiteness, ascending ids)."""
    if not isinstance(space, SearchSpace):
        raise InvalidInputError(f"space must be a SearchSpace, got {type(space).__name__}")
    emb = check_array("space.embedding", space.embedding, ndim=2, dtype=np.float32, min_rows=1)
    pred = check_array("space.predictions", space.predictions, ndim=1, dtype=None, min_rows=1)
    ids = check_array("space.node_ids", space.node_ids, ndim=1, dtype=None, min_rows=1)
    if pred.dtype.kind not in "iu" or ids.dtype.kind not in "iu":
        raise InvalidInputError("space.predictions and space.node_ids must be integer arrays")
    if not (emb.shape[0] == pred.shape[0] == ids.shape[0]):
        raise InvalidInputError(
            f"space arrays disagree in length: embedding {emb.shape[0]}, predictions "
            f"{pred.shape[0]}, node_ids {ids.shape[0]}"
        )
    if ids.shape[0] > 1 and not (np.diff(ids) > 0).all():
        raise InvalidInputError("space.node_ids must be strictly ascending")
    return SearchSpace(
        embedding=np.ascontiguousarray(emb, dtype=np.float32),
        predictions=np.asarray(pred, dtype=np.int64),
        node_ids=np.asarray(ids, dtype=np.int64),
    )


def check_queries(queries: Any, size: int) -> np.ndarray:
    """Validate query positions (int array in ``[0, size)``)."""
    q = np.asarray(queries)
    if q.ndim == 0:
        q = q.reshape(1)
    if q.ndim != 1 or (q.size and q.dtype.kind not in "iu"):
        raise InvalidInputError(
            f"queries must be a 1-d integer array of positions, got shape {q.shape}, dtype {q.dtype}"
        )
    q = q.astype(np.int64)
    if q.size and (q.min() < 0 or q.max() >= size):
        raise InvalidInputError(
            f"queries must be positions in [0, {size - 1}], got values in [{q.min()}, {q.max()}]"
        )
    return q


def topk_by_row(
    rows: np.ndarray, sims: np.ndarray, cols: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep the k best ``(sim desc, col asc)`` triplets of each row; ``-inf`` entries dropped.

    Returns the kept triplets sorted by row, then similarity descending, then column.
    """
    keep = np.isfinite(sims)
    rows, sims, cols = rows[keep], sims[keep], cols[keep]
    order = np.lexsort((cols, -sims, rows))
    rows, sims, cols = rows[order], sims[order], cols[order]
    if rows.size == 0:
        return rows, sims, cols
    start = np.r_[0, np.flatnonzero(np.diff(rows)) + 1]
    run = np.diff(np.r_[start, rows.size])
    rank = np.arange(rows.size) - np.repeat(start, run)
    sel = rank < k
    return rows[sel], sims[sel], cols[sel]


def block_topk(
    sim: np.ndarray, cols: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-k of each row of a dense block ``sim`` (``-inf`` = not a candidate).

    ``cols`` (ascending) are the positions of the block's columns; ties keep the smaller
    position. Returns ``(row, sim, position)`` triplets.
    """
    r, n = sim.shape
    if n > k:
        kth = np.partition(sim, n - k, axis=1)[:, n - k]
        mask = sim >= kth[:, None]
    else:
        mask = np.ones_like(sim, dtype=bool)
    rr, cc = np.nonzero(mask)
    return topk_by_row(rr, sim[rr, cc], cols[cc], k)


def fill_neighbours(
    n_rows: int, k: int, rows: np.ndarray, sims: np.ndarray, pos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Scatter sorted triplets (at most k per row) into padded ``(n_rows, k)`` arrays."""
    out_s = np.full((n_rows, k), -np.inf, dtype=np.float64)
    out_p = np.full((n_rows, k), -1, dtype=np.int64)
    if rows.size:
        start = np.r_[0, np.flatnonzero(np.diff(rows)) + 1]
        rank = np.arange(rows.size) - np.repeat(start, np.diff(np.r_[start, rows.size]))
        out_s[rows, rank] = sims
        out_p[rows, rank] = pos
    return out_s, out_p


def exact_rescore(
    emb: np.ndarray, queries: np.ndarray, sim: np.ndarray, pos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Recompute the similarities of selected pairs in float64 and re-sort each row by
    ``(sim desc, position asc)``; padding stays at the end."""
    valid = pos >= 0
    if not valid.any():
        return sim, pos
    qi, ki = np.nonzero(valid)
    sim = sim.copy()
    step = max(1, _BLOCK // max(1, emb.shape[1]))  # pairs per chunk: 2 x 32 MB of float64
    for lo in range(0, qi.size, step):
        i, j = qi[lo : lo + step], ki[lo : lo + step]
        a = emb[queries[i]].astype(np.float64)
        b = emb[pos[i, j]].astype(np.float64)
        sim[i, j] = np.einsum("ij,ij->i", a, b)
    key_pos = np.where(valid, pos, np.iinfo(np.int64).max)
    # row-wise lexsort: sort by position first, then stably by similarity descending
    o1 = np.argsort(key_pos, axis=1, kind="stable")
    s1 = np.take_along_axis(sim, o1, axis=1)
    o2 = np.argsort(-s1, axis=1, kind="stable")
    final = np.take_along_axis(o1, o2, axis=1)
    return np.take_along_axis(sim, final, axis=1), np.take_along_axis(pos, final, axis=1)


def zero_query_answer(
    predictions: np.ndarray, queries: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Exact answer for queries whose embedding is the zero vector: every candidate has
    similarity 0, so the k smallest positions of another class win (tie rule)."""
    sims = np.full((queries.size, k), -np.inf)
    pos = np.full((queries.size, k), -1, dtype=np.int64)
    qcls = predictions[queries]
    for c in np.unique(qcls):
        cand = np.flatnonzero(predictions != c)[:k]
        rows = np.flatnonzero(qcls == c)
        pos[np.ix_(rows, np.arange(cand.size))] = cand
        sims[np.ix_(rows, np.arange(cand.size))] = 0.0
    return sims, pos


def pairs_from_neighbours(
    queries: np.ndarray, sim: np.ndarray, pos: np.ndarray, k: int, best: Pairs | None
) -> Pairs:
    """Merge local lists into unique unordered pairs, keep the k best (tie: smaller (u, v))."""
    valid = pos >= 0
    qi, ki = np.nonzero(valid)
    a, b = queries[qi], pos[qi, ki]
    u, v, s = np.minimum(a, b), np.maximum(a, b), sim[qi, ki]
    if best is not None:
        u, v, s = np.r_[best.u, u], np.r_[best.v, v], np.r_[best.similarity, s]
    order = np.lexsort((v, u, -s))
    u, v, s = u[order], v[order], s[order]
    # drop duplicates (the same pair found from both ends; equal similarity)
    _, first = np.unique(np.stack([u, v], axis=1), axis=0, return_index=True)
    first = np.sort(first)[:k]
    return Pairs(similarity=s[first], u=u[first], v=v[first])


def pad_pairs(pairs: Pairs, k: int) -> Pairs:
    """Pad a pair list to length k with -inf / -1."""
    n = pairs.similarity.size
    if n >= k:
        return pairs
    return Pairs(
        similarity=np.r_[pairs.similarity, np.full(k - n, -np.inf)],
        u=np.r_[pairs.u, np.full(k - n, -1, dtype=np.int64)].astype(np.int64),
        v=np.r_[pairs.v, np.full(k - n, -1, dtype=np.int64)].astype(np.int64),
    )


def global_from_local(searcher: EvidenceSearcher, size: int, k: int) -> Pairs:
    """Alg. 3 generalised to top-k: local top-k of every node, merged into unique pairs."""
    k_local = max(1, min(k, size - 1))
    best: Pairs | None = None
    all_q = np.arange(size, dtype=np.int64)
    for lo in range(0, size, _PAIR_CHUNK):
        q = all_q[lo : lo + _PAIR_CHUNK]
        res = searcher.local(q, k_local)
        best = pairs_from_neighbours(q, res.similarity, res.position, k, best)
    assert best is not None
    return pad_pairs(best, k)


def make_rng(random_state: Any) -> np.random.Generator:
    """``None`` | int >= 0 | ``np.random.Generator`` -> a Generator (validated)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None:
        return np.random.default_rng()
    return np.random.default_rng(check_int("random_state", random_state, minimum=0))


def check_k(k: Any) -> int:
    return check_int("k", k, minimum=1)


def unknown_params(cls_name: str, unknown: dict[str, Any], allowed: tuple[str, ...]) -> None:
    if unknown:
        key = sorted(unknown)[0]
        raise InvalidInputError(
            f"unknown index_params key {key!r} for {cls_name}; allowed keys: {', '.join(allowed)}"
        )


# ----------------------------------------------------------------------------- k-means
def _normalise_rows(a: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(a, axis=1, keepdims=True)
    return np.divide(a, n, out=np.zeros_like(a), where=n > 0)


def _kmeanspp(x: np.ndarray, k: int, w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Spherical k-means++ seeding; sampling weight w_v * (1 - max cos to the seeds)."""
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


def _lloyd(
    x: np.ndarray, cent: np.ndarray, w: np.ndarray, n_iter: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Weighted spherical Lloyd iterations; returns (centroids, labels, cos to the own
    centroid, cos to the runner-up centroid)."""
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
        cent = _normalise_rows(summed)
        if dead.size:  # empty (or zero-weight) cluster: reseed at the worst-served points
            own = sim[rows, labels]
            far = np.argsort(own, kind="stable")[: dead.size]
            cent[dead] = _normalise_rows(x[far])
    sim = x @ cent.T
    labels = np.argmax(sim, axis=1)
    own = sim[rows, labels]
    if k > 1:
        sim[rows, labels] = -np.inf
        runner_up = sim.max(axis=1)
    else:
        runner_up = np.full(m, -1.0, dtype=sim.dtype)
    return cent, labels.astype(np.int32), own, runner_up


# ----------------------------------------------------------------------------- searcher
class IndexSearcher(EvidenceSearcher):
    """LocalCE-I: supplementary partitions from weighted spherical k-means (see module doc).

    Parameters
    ----------
    n_partitions : number of partitions p (paper default 50).
    n_clusters : clusters per partition m (paper default 10); capped at the space size.
    theta : cap radius of the similar field, radians in (0, pi) (paper default pi/3).
    weighted : weight the k-means rounds by Eq. 10 (False = ablation "w/o WC").
    supplementary : build ``n_partitions`` partitions (False = ablation "w/o SP": one).
    n_iter : Lloyd iterations per k-means round (each round stops early at convergence).
    n_probe : clusters of the entry partition every query scans (1 = the paper).
    entry : how a node's entry partition is chosen: ``"weight"`` (the paper: smallest Eq. 10
        weight, ties by the largest cosine to the centroid) or ``"margin"`` (largest gap
        between the cosine to the own centroid and to the runner-up centroid, i.e. farthest
        from the cluster boundary; an extension, see the module doc).
    progress : show a tqdm bar over the partitions while building.
    random_state : seed (int) or ``np.random.Generator`` of the k-means++ seedings; the
        build is deterministic given an int seed.
    """

    name = "index"
    _PARAMS = (
        "n_partitions",
        "n_clusters",
        "theta",
        "weighted",
        "supplementary",
        "n_iter",
        "n_probe",
        "entry",
        "progress",
    )

    def __init__(
        self,
        n_partitions: int = 50,
        n_clusters: int = 10,
        theta: float = math.pi / 3,
        weighted: bool = True,
        supplementary: bool = True,
        n_iter: int = 5,
        n_probe: int = 1,
        entry: str = "weight",
        progress: bool = False,
        random_state: Any = None,
        **unknown: Any,
    ) -> None:
        unknown_params(type(self).__name__, unknown, self._PARAMS)
        self.n_partitions = n_partitions
        self.n_clusters = n_clusters
        self.theta = theta
        self.weighted = weighted
        self.supplementary = supplementary
        self.n_iter = n_iter
        self.n_probe = n_probe
        self.entry = entry
        self.progress = progress
        self.random_state = random_state

    # -- validation
    def _check_params(self) -> None:
        check_int("index_params['n_partitions']", self.n_partitions, minimum=1)
        check_int("index_params['n_clusters']", self.n_clusters, minimum=1)
        check_float(
            "index_params['theta']",
            self.theta,
            minimum=0.0,
            maximum=math.pi,
            inclusive=(False, False),
        )
        for key in ("weighted", "supplementary"):
            if not isinstance(getattr(self, key), (bool, np.bool_)):
                raise InvalidInputError(
                    f"index_params[{key!r}] must be True or False, got {getattr(self, key)!r}"
                )
        check_int("index_params['n_iter']", self.n_iter, minimum=1)
        check_int("index_params['n_probe']", self.n_probe, minimum=1)
        check_choice("index_params['entry']", self.entry, ("weight", "margin"))

    # -- build
    def build(self, space: SearchSpace) -> IndexSearcher:
        """Build the partitions and the index entries of every node of ``space``."""
        self._check_params()
        space = check_space(space)
        x = space.embedding
        m, d = x.shape
        k_cl = min(int(self.n_clusters), m)
        n_part = int(self.n_partitions) if self.supplementary else 1
        rng = make_rng(self.random_state)

        grid = np.linspace(0.0, math.pi, _N_GRID)
        ratio = cap_intersection_ratio(grid, float(self.theta), max(d, 1))
        self.sf_table_ = (grid, ratio)

        labels = np.empty((n_part, m), dtype=np.int32)
        cents = np.empty((n_part, k_cl, d), dtype=np.float32)
        weights = np.empty((n_part, m), dtype=np.float32)
        entry_w = np.full(m, np.inf)
        entry_cos = np.full(m, -np.inf)
        entry_part = np.zeros(m, dtype=np.int32)
        entry_margin = np.full(m, -np.inf)
        w_round = np.ones(m)
        for t in trange(n_part, desc="index partitions", disable=not self.progress, leave=False):
            seed_w = w_round if self.weighted else np.ones(m)
            c0 = _kmeanspp(x, k_cl, seed_w, rng)
            cent, lab, cos, cos2 = _lloyd(x, c0, seed_w, int(self.n_iter))
            w = self.weight_of_cos(cos)
            labels[t], cents[t], weights[t] = lab, cent, w
            if self.entry == "weight":
                better = (w < entry_w) | ((w == entry_w) & (cos > entry_cos))
            else:  # margin to the cluster boundary
                better = (cos - cos2) > entry_margin
                entry_margin = np.where(better, cos - cos2, entry_margin)
            entry_w = np.where(better, w, entry_w)
            entry_cos = np.where(better, cos, entry_cos)
            entry_part[better] = t
            # the next round favours nodes still badly served
            w_round = np.minimum(w_round, w) if t else w
        self.space_ = space
        self.labels_ = labels
        self.centroids_ = cents
        self.node_weights_ = weights
        self.entry_partition_ = entry_part
        self.entry_cluster_ = labels[entry_part, np.arange(m)]
        self.entry_weight_ = entry_w
        # members of every (partition, cluster), ascending positions
        self.order_ = np.argsort(labels, axis=1, kind="stable").astype(np.int64)
        counts = np.stack([np.bincount(lab, minlength=k_cl) for lab in labels])
        self.offsets_ = np.concatenate([np.zeros((n_part, 1), np.int64), counts.cumsum(1)], 1)
        self.classes_, self.class_index_ = np.unique(space.predictions, return_inverse=True)
        n_cls = self.classes_.size
        flat = (labels.astype(np.int64) * n_cls + self.class_index_[None, :]).reshape(n_part, m)
        self.class_counts_ = np.stack(
            [np.bincount(f, minlength=k_cl * n_cls).reshape(k_cl, n_cls) for f in flat]
        )
        self.norms_ = np.linalg.norm(x, axis=1)
        logger.info(
            "IndexSearcher built: %d partitions x %d clusters over %d nodes (d=%d)",
            n_part,
            k_cl,
            m,
            d,
        )
        return self

    def weight_of_cos(self, cos: np.ndarray) -> np.ndarray:
        """Eq. 10 weight from the cosine to the centroid (lookup table on the angle)."""
        grid, ratio = self.sf_table_
        ang = np.arccos(np.clip(cos.astype(np.float64), -1.0, 1.0))
        return (1.0 - np.interp(ang, grid, ratio)).astype(np.float32)

    def _fitted(self) -> None:
        if getattr(self, "space_", None) is None:
            raise NotFittedError("IndexSearcher is not built yet; call build(space) first")

    # -- queries
    def local(self, queries: np.ndarray, k: int) -> Neighbours:
        """Top-k evidences of each query through the index (see module doc)."""
        self._fitted()
        k = check_k(k)
        q = check_queries(queries, self.space_.size)
        sim, pos = self._search(q, k)
        return Neighbours(similarity=sim, position=pos)

    def _search(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        x = self.space_.embedding
        cls = self.class_index_
        n_q = q.size
        out_s = np.full((n_q, k), -np.inf)
        out_p = np.full((n_q, k), -1, dtype=np.int64)
        if n_q == 0:
            return out_s, out_p
        zero = self.norms_[q] == 0
        if zero.any():
            zs, zp = zero_query_answer(cls, q[zero], k)
            out_s[zero], out_p[zero] = zs, zp
        live = np.flatnonzero(~zero)
        if live.size == 0:
            return out_s, out_p
        ql = q[live]
        part = self.entry_partition_[ql]
        k_cl = self.centroids_.shape[1]
        # probe order: entry cluster first, then the others by centroid similarity
        csim = np.empty((ql.size, k_cl), dtype=np.float32)
        for p in np.unique(part):
            rows = np.flatnonzero(part == p)
            csim[rows] = x[ql[rows]] @ self.centroids_[p].T
        csim[np.arange(ql.size), self.entry_cluster_[ql]] = np.inf
        probe = np.argsort(-csim, axis=1, kind="stable")
        sizes = np.diff(self.offsets_, axis=1)[part[:, None], probe]
        same = self.class_counts_[part[:, None], probe, cls[ql][:, None]]
        enough = np.cumsum(sizes - same, axis=1) >= k
        n_scan = np.where(enough.any(axis=1), enough.argmax(axis=1) + 1, k_cl)
        n_scan = np.maximum(n_scan, min(int(self.n_probe), k_cl))
        # tasks (query row, partition, cluster), grouped by (partition, cluster)
        rank = np.arange(k_cl)[None, :] < n_scan[:, None]
        t_row, t_rank = np.nonzero(rank)
        t_key = part[t_row].astype(np.int64) * k_cl + probe[t_row, t_rank]
        order = np.argsort(t_key, kind="stable")
        t_row, t_key = t_row[order], t_key[order]
        bounds = np.r_[0, np.flatnonzero(np.diff(t_key)) + 1, t_key.size]
        got_r, got_s, got_p = [], [], []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            p, j = divmod(int(t_key[a]), k_cl)
            members = self.order_[p, self.offsets_[p, j] : self.offsets_[p, j + 1]]
            rows = t_row[a:b]
            if members.size == 0:
                continue
            xm = x[members]
            mcls = cls[members]
            step = max(1, _BLOCK // members.size)
            for lo in range(0, rows.size, step):
                r = rows[lo : lo + step]
                s = x[ql[r]] @ xm.T
                s[cls[ql[r]][:, None] == mcls[None, :]] = -np.inf
                rr, ss, pp = block_topk(s, members, k)
                got_r.append(r[rr])
                got_s.append(ss.astype(np.float64))
                got_p.append(pp)
        if got_r:
            rr, ss, pp = topk_by_row(
                np.concatenate(got_r), np.concatenate(got_s), np.concatenate(got_p), k
            )
            ls, lp = fill_neighbours(ql.size, k, rr, ss, pp)
            ls, lp = exact_rescore(x, ql, ls, lp)
            out_s[live], out_p[live] = ls, lp
        return out_s, out_p

    def global_pairs(self, k: int) -> Pairs:
        """Top-k unordered pairs from the index's local lists (Alg. 3, see module doc)."""
        self._fitted()
        k = check_k(k)
        return global_from_local(self, self.space_.size, k)
