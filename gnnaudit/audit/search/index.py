r"""The paper's index for counterfactual-evidence search (LocalCE-I, CE paper Sec. 5.1).

Build: supplementary partitions from weighted spherical k-means rounds (faiss
``Kmeans(spherical=True)``: the ``faiss`` extra), each node's index entry the partition that
serves it best (Eq. 8-10 and the ``entry`` rules, ablations ``weighted`` / ``supplementary``:
:mod:`gnnaudit.audit.search.index_build`); the member tables and the probe geometry the
queries read: :mod:`gnnaudit.audit.search.index_cells`.

Kept as the paper's method, not for speed. Measured recall@10 of the defaults against the
exact search (``benchmarks/results/evidence.md``): 0.944 on Cora (d = 1433, a KS embedding
with almost no k-means structure), 0.916 on a 20,000 x 500 synthetic PubMed-like embedding,
1.000 on 20,000 x 500 clustered data; 0.999-1.000 on clustered data of 5,000-100,000 nodes
(``search_crossover.md``). Measured crossover (``search_crossover.md``, clustered unit
embeddings, 3 classes, d = 16 / 128, one thread): the index was slower than the exact blocked
search at every size, 0.07-0.27x per batched query and 0.2-0.8x per single query, with 1-56 s
of build. ``backend="auto"`` never picks it.

Local query (Alg. 2, top-k, with a bound-based multi-probe): a query scans its entry cluster
first (exact inner products, candidates of another predicted class only), as in the paper.
It then visits the other clusters of the same partition by decreasing centroid similarity
while the *cap bound* says that an unscanned cluster may still hold a better candidate: with
:math:`r_j` the largest angle between centroid :math:`\mu_j` and a member of another class,
every such member u satisfies

.. math:: KS(q, u) \le \cos\bigl(\max(0, \angle(x_q, \mu_j) - r_j)\bigr),

so once the largest bound over the unscanned clusters is below the current k-th best
similarity the answer is exact (``ProbedLocalEvidence.certified``). Inside a cluster scanned
after the entry, members are kept sorted by their angle :math:`a_u` to the centroid and only
the annulus :math:`|a_u - \angle(x_q,\mu_j)| \le \arccos(s_k)` (:math:`s_k` the k-th best so
far) is read: by the triangle inequality on the sphere no other member can reach :math:`s_k`.
Both tests keep a small slack for float32 rounding, so they never drop a true answer.
The search also stops after ``max_probe`` clusters (default 7, chosen by measurement: recall@10
0.94 on Cora, where the KS embedding has almost no k-means structure and the bound never
stops, while on clustered data the bound stops after about 2.4 clusters with 99 % of the
answers certified; ``benchmarks/results/evidence.md``); it scans at least ``n_probe``
clusters, and more whenever fewer than k candidates were found, so k results come back
whenever k candidates exist. ``max_probe=1`` is the paper's rule (entry cluster only).

Single queries take a scalar fast path; a batch of queries is processed in rounds (round r
scans the r-th cluster of every query still active), grouped by (partition, cluster) with
one matrix product per group. Both return identical answers.

Global query (Alg. 3, generalised to top-k; the paper keeps the top-1 LCE of every node in a
bucket of size k): the local lists of every test node through the index, merged into unique
unordered pairs and cut to the k best. Local top-k lists suffice (a pair {v, u} of the global
top-k has u among v's local top-k); they are grown adaptively (16 first, longer only for the
nodes that can still contribute, see
:func:`~gnnaudit.audit.search.global_pairs.global_pairs_from_local`). With exact local lists this
is exact; with the index it is as approximate as the local lists.

Cost: build ``O(n_partitions * (n_iter + n_clusters) * m * n_clusters * d)`` flops
(matrix products in float32); query ``O(sum of the scanned cluster sizes * d)`` (at most
``max_probe`` clusters, fewer by the bound and the annulus). Memory: the member tables hold
``n_partitions * m`` int64 positions and float64 angles (16 bytes per node per partition; the
embedding itself is not copied per partition, a scanned cluster is gathered); a query batch
materialises blocks of at most ``BLOCK_ENTRIES`` (4M) similarities (16 MB) plus ``O(q * k)``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from gnnaudit._validation import check_array, check_bool, check_choice, check_float, check_int
from gnnaudit.audit.search.base import (
    EvidenceSearcher,
    SearchSpace,
    check_k,
    check_queries,
    check_space,
    make_rng,
    unknown_params,
)
from gnnaudit.audit.search.index_build import build_partitions
from gnnaudit.audit.search.index_cells import ANGLE_SLACK, cell_layout, probe_bounds, probe_order
from gnnaudit.audit.search.results import ProbedLocalEvidence
from gnnaudit.audit.search.spherical_caps import cap_intersection_ratio
from gnnaudit.audit.search.topk import (
    BLOCK_ENTRIES,
    block_topk,
    fill_rows,
    rescore_rows,
    sort_rows,
    topk_entries,
    zero_query_topk,
)

__all__ = ["IndexSearcher", "ProbedLocalEvidence"]

logger = logging.getLogger(__name__)

_N_GRID = 2049  # angle grid of the weight lookup table
_GEMV_ROWS = 4  # groups of at most this many queries use one matrix-vector product each
_BOUND_TOL = 1e-5  # a cluster is skipped only if its bound is below the k-th best - this


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
    n_iter : Lloyd iterations per k-means round.
    n_probe : clusters of the entry partition every query scans at least (default 1).
    max_probe : clusters scanned at most; between ``n_probe`` and ``max_probe`` the cap bound
        decides (see the module doc). Default 7; ``max_probe=1`` is the paper's query rule.
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
        "max_probe",
        "entry",
        "progress",
    )

    def __init__(  # noqa: PLR0913  # estimator-like index: mirrors its documented parameters
        self,
        n_partitions: int = 50,
        *,
        n_clusters: int = 10,
        theta: float = math.pi / 3,
        weighted: bool = True,
        supplementary: bool = True,
        n_iter: int = 5,
        n_probe: int = 1,
        max_probe: int = 7,
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
        self.max_probe = max_probe
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
            check_bool(f"index_params[{key!r}]", getattr(self, key))
        check_int("index_params['n_iter']", self.n_iter, minimum=1)
        check_int("index_params['n_probe']", self.n_probe, minimum=1)
        check_int("index_params['max_probe']", self.max_probe, minimum=1)
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

        parts = build_partitions(
            x,
            k_cl,
            n_part,
            weight_of_cos=self.weight_of_cos,
            weighted=bool(self.weighted),
            entry=self.entry,
            n_iter=int(self.n_iter),
            rng=rng,
            progress=bool(self.progress),
        )
        labels, entry_part = parts.labels, parts.entry_partition
        self.space_ = space
        self.labels_ = labels
        self.centroids_ = parts.centroids
        self.node_weights_ = parts.weights
        self.entry_partition_ = entry_part
        self.entry_cluster_ = labels[entry_part, np.arange(m)]
        self.entry_weight_ = parts.entry_weight
        self.classes_, cls = np.unique(space.predictions, return_inverse=True)
        self.class_index_ = cls.astype(np.int64)
        cells = cell_layout(labels, parts.own_cos, k_cl, self.class_index_, self.classes_.size)
        self.cells_ = cells
        self.members_ = cells.members
        self.member_angle_ = cells.member_angle
        self.cell_offsets_ = cells.cell_offsets
        self.cluster_radius_ = cells.cluster_radius
        self.probe_radius_ = cells.probe_radius
        self.n_candidates_ = cells.n_candidates
        self.n_total_ = cells.n_total
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
        cos = check_array("cos", cos, ndim=None, dtype=np.float64, min_rows=0)
        ang = np.arccos(np.clip(cos, -1.0, 1.0))
        return (1.0 - np.interp(ang, grid, ratio)).astype(np.float32)

    # -- queries
    def local(self, queries: np.ndarray, k: int) -> ProbedLocalEvidence:
        """Top-k evidences of each query through the index (see module doc).

        Returns a :class:`ProbedLocalEvidence`: the usual
        :class:`~gnnaudit.audit.search.results.LocalEvidence` plus the number of clusters
        each query scanned and whether its answer is certified exact by the cap bound.
        """
        space = self._built_space()
        k = check_k(k)
        q = check_queries(queries, space.size)
        sim, pos, probed, certified = self._search(q, k)
        return ProbedLocalEvidence.from_positions(
            space, q, pos, sim, n_probed=probed, certified=certified
        )

    def _local_positions(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        sim, pos, _, _ = self._search(queries, k)
        return sim, pos

    def _search(
        self, q: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(similarity, position, n_probed, certified)`` of each query."""
        n_q = q.size
        out_s = np.full((n_q, k), -np.inf)
        out_p = np.full((n_q, k), -1, dtype=np.int64)
        probed = np.zeros(n_q, dtype=np.int64)
        certified = np.ones(n_q, dtype=bool)
        zero = self.norms_[q] == 0
        if zero.any():
            out_s[zero], out_p[zero] = zero_query_topk(self.class_index_, q[zero], k)
        live = np.flatnonzero(~zero)
        if live.size == 1:
            s, p, probed[live], certified[live] = self._search_one(int(q[live[0]]), k)
            out_s[live, : s.size], out_p[live, : p.size] = s, p
        elif live.size:
            s, p, probed[live], certified[live] = self._search_many(q[live], k)
            out_s[live], out_p[live] = s, p
        return out_s, out_p, probed, certified

    def _search_one(self, qpos: int, k: int) -> tuple[np.ndarray, np.ndarray, int, bool]:
        """One query, scalar fast path (same answer as :meth:`_search_many`)."""
        x = self.space_.embedding
        xq = x[qpos]
        p = int(self.entry_partition_[qpos])
        c = int(self.class_index_[qpos])
        csim = self.centroids_[p] @ xq
        bound = probe_bounds(csim, self.probe_radius_[p, :, c], self.n_candidates_[p, :, c])
        order = probe_order(csim, int(self.entry_cluster_[qpos]))
        rest = np.maximum.accumulate(bound[order][::-1])[::-1]
        need = min(k, int(self.n_total_[c]))
        if need == 0:
            return np.empty(0), np.empty(0, dtype=np.int64), 1, True
        n_probe, max_probe = int(self.n_probe), int(self.max_probe)
        best_s = np.empty(0, dtype=np.float32)
        best_p = np.empty(0, dtype=np.int64)
        r = 0
        for r, j in enumerate(order.tolist()):
            b = rest[r]
            if b == -np.inf:
                break
            if r >= n_probe and best_s.size >= need:
                if r >= max_probe or b < best_s[need - 1] - _BOUND_TOL:
                    break
            lo, hi = 0.0, math.pi
            if best_s.size >= need:  # annulus: angle(q, u) >= |angle(q, mu) - angle(u, mu)|
                delta = math.acos(max(-1.0, float(best_s[need - 1]) - _BOUND_TOL))
                a_q = math.acos(min(1.0, max(-1.0, float(csim[j]))))
                lo, hi = a_q - delta - 2 * ANGLE_SLACK, a_q + delta + 2 * ANGLE_SLACK
            mem = self.cells_.candidates(p, j, c, lo, hi)
            if mem.size == 0:
                continue
            all_s = np.concatenate((best_s, x[mem] @ xq))
            best_s, best_p = topk_entries(all_s, np.concatenate((best_p, mem)), k)
        else:
            r = order.size
        n_probed = r
        certified = (
            r >= order.size
            or rest[r] == -np.inf
            or (best_s.size >= need and rest[r] < best_s[need - 1] - _BOUND_TOL)
        )
        s64 = x[best_p].astype(np.float64) @ xq.astype(np.float64)
        o = np.lexsort((best_p, -s64))
        return s64[o], best_p[o], n_probed, bool(certified)

    def _search_many(
        self, ql: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Batched rounds: round r scans the r-th cluster (probe order) of every query still
        active (see :meth:`_scan_round`), then merges it into the running top-k."""
        x = self.space_.embedding
        n_q = ql.size
        k_cl = self.centroids_.shape[1]
        part = self.entry_partition_[ql].astype(np.int64)
        qcls = self.class_index_[ql]
        csim = np.empty((n_q, k_cl), dtype=np.float32)
        for p in np.unique(part):
            rows = np.flatnonzero(part == p)
            csim[rows] = x[ql[rows]] @ self.centroids_[p].T
        cl = np.arange(k_cl)[None, :]
        pi, ci = part[:, None], qcls[:, None]
        bound = probe_bounds(csim, self.probe_radius_[pi, cl, ci], self.n_candidates_[pi, cl, ci])
        order = probe_order(csim, self.entry_cluster_[ql])
        rest = np.take_along_axis(bound, order, axis=1)
        rest = np.maximum.accumulate(rest[:, ::-1], axis=1)[:, ::-1]
        need = np.minimum(k, self.n_total_[qcls])
        best_s = np.full((n_q, k), -np.inf, dtype=np.float32)
        best_p = np.full((n_q, k), -1, dtype=np.int64)
        probed = np.zeros(n_q, dtype=np.int64)
        done = np.zeros(n_q, dtype=bool)
        row_idx = np.arange(n_q)
        for r in range(k_cl):
            b = rest[:, r]
            count = (best_p >= 0).sum(axis=1)
            kth = best_s[row_idx, np.maximum(need - 1, 0)]
            go = (r < self.n_probe) | (count < need)
            go |= (r < self.max_probe) & (b >= kth - _BOUND_TOL)
            go &= (b > -np.inf) & ~done
            done |= ~go
            rows = np.flatnonzero(go)
            if rows.size == 0:
                break
            probed[rows] += 1
            cluster = order[rows, r]
            # annulus of the triangle inequality once a row holds its k-th best
            delta = np.arccos(np.clip(kth[rows].astype(np.float64) - _BOUND_TOL, -1.0, 1.0))
            a_q = np.arccos(np.clip(csim[rows, cluster].astype(np.float64), -1.0, 1.0))
            full = count[rows] >= need[rows]
            lo = np.where(full, a_q - delta - 2 * ANGLE_SLACK, 0.0)
            hi = np.where(full, a_q + delta + 2 * ANGLE_SLACK, math.pi)
            new_s, new_p = self._scan_round(ql, rows, part, cluster, qcls, lo, hi, k)
            # merge into the running top-k, rows sorted by (similarity desc, position asc)
            all_s = np.concatenate((best_s[rows], new_s), axis=1)
            all_p = np.concatenate((best_p[rows], new_p), axis=1)
            top = sort_rows(all_s, all_p)[:, :k]
            best_s[rows] = np.take_along_axis(all_s, top, axis=1)
            best_p[rows] = np.take_along_axis(all_p, top, axis=1)
        nxt = rest[row_idx, np.minimum(probed, k_cl - 1)]
        nxt = np.where(probed >= k_cl, -np.inf, nxt)
        kth = best_s[row_idx, np.maximum(need - 1, 0)]
        full = (best_p >= 0).sum(axis=1) >= need
        certified = (nxt == -np.inf) | (full & (nxt < kth - _BOUND_TOL))
        s, p = rescore_rows(x, ql, best_s.astype(np.float64), best_p)
        return s, p, probed, certified

    def _scan_round(
        self,
        ql: np.ndarray,
        rows: np.ndarray,
        part: np.ndarray,
        cluster: np.ndarray,
        qcls: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        k: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k candidates of query ``rows`` in one cluster each (``cluster[i]`` of partition
        ``part[rows[i]]``) among the members whose angle to the centroid lies in
        ``[lo[i], hi[i]]``: grouped by (partition, cluster), the union of the group's angle
        ranges is scanned with one matrix product per group and row block (at most
        ``BLOCK_ENTRIES`` similarities), same-class members masked out.
        Returns ``(len(rows), k)`` float32 similarities / positions sorted within a row."""
        x = self.space_.embedding
        k_cl = self.centroids_.shape[1]
        key = part[rows] * k_cl + cluster
        srt = np.argsort(key, kind="stable")
        cuts = np.r_[0, np.flatnonzero(np.diff(key[srt])) + 1, key.size]
        new_s = np.full((rows.size, k), -np.inf, dtype=np.float32)
        new_p = np.full((rows.size, k), -1, dtype=np.int64)
        for a, e in zip(cuts[:-1], cuts[1:], strict=True):
            p, j = divmod(int(key[srt[a]]), k_cl)
            grp = srt[a:e]
            gcls = qcls[rows[grp]]
            skip = int(gcls[0]) if (gcls == gcls[0]).all() else -1
            mem = self.cells_.candidates(p, j, skip, float(lo[grp].min()), float(hi[grp].max()))
            if mem.size == 0:
                continue
            xm = x[mem]
            mcls = self.class_index_[mem]
            kk = min(k, mem.size)
            step = max(1, BLOCK_ENTRIES // mem.size)
            for b0 in range(a, e, step):
                idx = srt[b0 : min(b0 + step, e)]
                qr = rows[idx]
                if qr.size <= _GEMV_ROWS:  # BLAS gemm is slow for a few rows: gemv each
                    sim = np.stack([xm @ x[i] for i in ql[qr]])
                else:
                    sim = x[ql[qr]] @ xm.T
                sim[qcls[qr][:, None] == mcls[None, :]] = -np.inf
                if kk < mem.size:
                    top = np.argpartition(-sim, kk - 1, axis=1)[:, :kk]
                    vals = np.take_along_axis(sim, top, axis=1)
                    kth = vals.min(axis=1)
                    if (np.count_nonzero(sim >= kth[:, None], axis=1) == kk).all():
                        new_s[idx, :kk], new_p[idx, :kk] = vals, mem[top]
                        continue
                rr, ss, pp = block_topk(sim, mem, k)  # ties at the k-th value: exact rule
                ns, np_ = fill_rows(idx.size, k, rr, ss, pp)
                new_s[idx], new_p[idx] = ns, np_
        new_p = np.where(np.isfinite(new_s), new_p, -1)
        return new_s, new_p
