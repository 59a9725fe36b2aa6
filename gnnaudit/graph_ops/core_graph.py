"""DBSCAN core graph: core points, eps-edges between them, cluster labels, shortest paths.

For a DBSCAN clustering with radius :math:`\\varepsilon` the *core graph* of cluster
:math:`C` is the undirected weighted graph :math:`G_C = (V_C, E_C)` with

.. math::

    V_C = \\{q : q \\text{ core point}, \\ell(q) = C\\}, \\qquad
    E_C = \\{(q_i, q_j) : d(q_i, q_j) \\le \\varepsilon\\}, \\qquad w_{ij} = d(q_i, q_j),

and :math:`D(q_i, q_j)` is the weighted shortest-path distance in :math:`G_C` (ExDBSCAN paper,
Sec. 3). Membership of a new point :math:`p` (DBSCAN fixed): :math:`p \\in C` iff some core
:math:`q` of :math:`C` has :math:`d(p, q) \\le \\varepsilon`; the nearest core decides.

Duplicate core points have distance 0 and a zero-weight edge would vanish from a scipy sparse
matrix, so weights are stored as :math:`\\max(d, \\varepsilon \\cdot 10^{-12})`
(:attr:`CoreGraph.min_weight`).

Distances used for membership decisions are computed *directly* (coordinate differences, never
the expanded :math:`\\|a\\|^2 - 2a\\cdot b + \\|b\\|^2` form), so they are accurate to a few ulps
at any scale and offset.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from gnnaudit._validation import check_array, check_float, check_int
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops._distances import (
    canonical_metric,
    power_of_two_scale,
    radius_pairs,
    rowwise_distances,
    unit_scale,
)

__all__ = ["CoreGraph", "MIN_WEIGHT_REL"]

logger = logging.getLogger(__name__)

#: Relative floor of edge weights (duplicate points would otherwise give zero-weight edges).
MIN_WEIGHT_REL = 1e-12


class _NeighbourIndex:
    """k-nearest core search. A ``BallTree`` (distances from coordinate differences, exact at
    any offset, no joblib overhead per query); cosine is no tree metric and goes brute force.
    Points and queries are divided by the same power of two (exact), so magnitudes whose
    squares under- or overflow keep their neighbour order."""

    def __init__(self, points: np.ndarray, metric: str) -> None:
        from sklearn.neighbors import BallTree, NearestNeighbors

        self._cosine = metric == "cosine"
        self._p = 1.0 if self._cosine else power_of_two_scale(points)
        points = self._scaled(points)
        if metric == "cosine":
            self._nn = NearestNeighbors(metric=metric, algorithm="brute").fit(points)
            self._tree = None
        else:
            self._tree = BallTree(points, metric=metric)

    def _scaled(self, pts: np.ndarray) -> np.ndarray:
        return unit_scale(pts) if self._cosine else pts / self._p

    def kneighbors(self, pts: np.ndarray, n_neighbors: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices (and distances of the scaled points, for ordering only) of the nearest."""
        pts = self._scaled(pts)
        if self._tree is not None:
            dist, ind = self._tree.query(pts, k=n_neighbors)
            return np.asarray(dist), np.asarray(ind)
        dist, ind = self._nn.kneighbors(pts, n_neighbors=n_neighbors)
        return np.asarray(dist), np.asarray(ind)


class CoreGraph:
    """Core points of a DBSCAN clustering with their per-cluster eps-graph.

    Build it with :meth:`from_dbscan` or :meth:`from_fitted`. Core points are stored sorted by
    cluster, so the graph of one cluster is a contiguous diagonal block of :attr:`adjacency`.

    Attributes
    ----------
    X : ndarray (n, d)
        The clustered data.
    eps, min_samples, metric
        DBSCAN parameters.
    labels : ndarray (n,)
        Cluster labels with sklearn semantics (``-1`` noise).
    core_mask : ndarray (n,) of bool
    core_indices : ndarray (m,)
        Data indices of the core points, sorted by (cluster, index).
    core_labels : ndarray (m,)
    clusters : ndarray
        Sorted ids of the clusters (labels >= 0).
    adjacency : scipy.sparse.csr_matrix (m, m)
        Edge ``(i, j)`` iff ``d(q_i, q_j) <= eps`` and both in one cluster; weight
        ``max(d, min_weight)``. Rows/columns follow :attr:`core_indices`.
    """

    def __init__(
        self,
        X: np.ndarray,
        labels: np.ndarray,
        core_sample_indices: np.ndarray,
        eps: float,
        min_samples: int,
        metric: str = "euclidean",
        pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.X = check_array("X", X)
        n = self.X.shape[0]
        self.eps = check_float("eps", eps, minimum=0.0, inclusive=(False, True))
        self.min_samples = check_int("min_samples", min_samples, minimum=1)
        self.metric = canonical_metric(metric)
        labels = np.asarray(labels)
        if labels.shape != (n,):
            raise InvalidInputError(f"labels must have shape ({n},), got {labels.shape}")
        self.labels = labels.astype(np.int64)
        core = np.asarray(core_sample_indices, dtype=np.int64).reshape(-1)
        if core.size and (core.min() < 0 or core.max() >= n):
            raise InvalidInputError("core_sample_indices hold indices outside [0, n)")
        if core.size and (self.labels[core] < 0).any():
            raise InvalidInputError("core_sample_indices contain points labelled noise (-1)")
        self.core_mask = np.zeros(n, dtype=bool)
        self.core_mask[core] = True
        core = np.flatnonzero(self.core_mask)
        order = np.lexsort((core, self.labels[core]))
        self.core_indices = core[order]
        self.core_labels = self.labels[self.core_indices]
        self.clusters = np.unique(self.core_labels)
        bounds = np.asarray(
            np.searchsorted(self.core_labels, np.r_[self.clusters, np.iinfo(np.int64).max])
        )
        self._slices = {
            int(c): (int(bounds[i]), int(bounds[i + 1])) for i, c in enumerate(self.clusters)
        }
        self.min_weight = self.eps * MIN_WEIGHT_REL
        self.adjacency = self._build_adjacency(pairs)
        self._core_points = self.X[self.core_indices]
        self._index = _NeighbourIndex(self._core_points, self.metric) if core.size else None
        self._block_cache: dict[int, sp.csr_matrix] = {}

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_dbscan(
        cls, X: Any, eps: float, min_samples: int, metric: str = "euclidean"
    ) -> CoreGraph:
        """Run DBSCAN on ``X`` and build the core graph.

        One radius search (exact distances, see
        :func:`~gnnaudit.graph_ops._distances.radius_pairs`) serves both: sklearn's
        ``DBSCAN(metric="precomputed")`` clusters the sparse eps-neighbourhood graph and the
        core graph is its restriction to core points. Memory: O(n + number of eps-pairs).
        """
        from sklearn.cluster import DBSCAN

        X = check_array("X", X)
        eps = check_float("eps", eps, minimum=0.0, inclusive=(False, True))
        min_samples = check_int("min_samples", min_samples, minimum=1)
        metric = canonical_metric(metric)
        n = X.shape[0]
        row, col, dist = radius_pairs(X, eps, metric)
        diag = np.arange(n)
        # explicit zeros (self and duplicates) are neighbours for sklearn's precomputed mode
        graph = sp.csr_matrix(
            (np.r_[dist, np.zeros(n)], (np.r_[row, diag], np.r_[col, diag])), shape=(n, n)
        )
        db = DBSCAN(eps=eps, min_samples=min_samples, metric="precomputed").fit(graph)
        return cls(
            X, db.labels_, db.core_sample_indices_, eps, min_samples, metric, (row, col, dist)
        )

    @classmethod
    def from_fitted(cls, X: Any, dbscan: Any) -> CoreGraph:
        """Build the core graph of an already fitted ``sklearn.cluster.DBSCAN``."""
        X = check_array("X", X)
        for attr in ("labels_", "core_sample_indices_"):
            if getattr(dbscan, attr, None) is None:
                raise InvalidInputError(
                    f"dbscan must be a fitted sklearn DBSCAN (missing {attr}); call fit first"
                )
        if len(dbscan.labels_) != X.shape[0]:
            raise InvalidInputError(
                f"dbscan was fitted on {len(dbscan.labels_)} points but X has {X.shape[0]} rows"
            )
        metric = dbscan.metric
        if metric == "minkowski":
            p = dbscan.p if dbscan.p is not None else 2
            metric = {1: "manhattan", 2: "euclidean"}.get(p, f"minkowski(p={p})")
        return cls(
            X, dbscan.labels_, dbscan.core_sample_indices_, dbscan.eps, dbscan.min_samples, metric
        )

    # ------------------------------------------------------------------ structure
    @property
    def n_cores(self) -> int:
        """Number of core points."""
        return int(self.core_indices.size)

    @property
    def n_clusters(self) -> int:
        """Number of clusters (labels >= 0 that own a core point)."""
        return int(self.clusters.size)

    @property
    def core_points(self) -> np.ndarray:
        """Coordinates of the core points, ``(m, d)``, in :attr:`core_indices` order."""
        return self._core_points

    def _build_adjacency(
        self, pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    ) -> sp.csr_matrix:
        """Core-graph adjacency from the eps-pairs of all points (``pairs``, data indices,
        as computed by :meth:`from_dbscan`) or from a radius search over the core points."""
        m = self.core_indices.size
        if m == 0:
            return sp.csr_matrix((0, 0))
        pos_of = np.full(self.X.shape[0], -1, dtype=np.int64)
        pos_of[self.core_indices] = np.arange(m)
        if pairs is None:
            row, col, dist = radius_pairs(self.X[self.core_indices], self.eps, self.metric)
        else:
            r, c, dist = pairs
            keep = self.core_mask[r] & self.core_mask[c]
            row, col, dist = pos_of[r[keep]], pos_of[c[keep]], dist[keep]
        same = self.core_labels[row] == self.core_labels[col]
        row, col, dist = row[same], col[same], dist[same]
        weight = np.maximum(dist, self.min_weight)
        adj = sp.coo_matrix((weight, (row, col)), shape=(m, m)).tocsr()
        adj = adj.maximum(adj.T).tocsr()  # exact symmetry
        adj.sort_indices()
        return adj

    def _check_cluster(self, cluster: Any) -> int:
        if isinstance(cluster, (bool, np.bool_)) or not isinstance(cluster, (int, np.integer)):
            raise InvalidInputError(f"cluster must be an integer cluster id, got {cluster!r}")
        if int(cluster) not in self._slices:
            raise InvalidInputError(
                f"cluster {cluster!r} is not a cluster of this clustering; clusters are "
                f"{self.clusters.tolist()}"
            )
        return int(cluster)

    def cluster_slice(self, cluster: int) -> tuple[int, int]:
        """``(start, stop)`` of the cluster's core points in :attr:`core_indices` order."""
        return self._slices[self._check_cluster(cluster)]

    def cluster_cores(self, cluster: int) -> np.ndarray:
        """Data indices of the core points of ``cluster`` (column order of its graph)."""
        s, e = self.cluster_slice(cluster)
        return self.core_indices[s:e]

    def cluster_graph(self, cluster: int) -> sp.csr_matrix:
        """Sparse weighted graph over the core points of ``cluster`` (cached)."""
        c = self._check_cluster(cluster)
        if c not in self._block_cache:
            s, e = self._slices[c]
            self._block_cache[c] = self.adjacency[s:e, s:e].tocsr()
        return self._block_cache[c]

    def mean_edge_weight(self, clusters: Any = None) -> float:
        """Mean edge weight over the graphs of ``clusters`` (all clusters if ``None``);
        ``nan`` if they have no edge. O(#clusters) from per-cluster sums cached at build."""
        if not hasattr(self, "_edge_stats"):
            row_cluster = np.repeat(self.core_labels, np.diff(self.adjacency.indptr))
            pos = np.searchsorted(self.clusters, row_cluster)
            sums = np.bincount(pos, weights=self.adjacency.data, minlength=self.n_clusters)
            counts = np.bincount(pos, minlength=self.n_clusters)
            self._edge_stats = (sums, counts)
        sums, counts = self._edge_stats
        if clusters is None:
            sel = np.arange(self.n_clusters)
        else:
            sel = np.searchsorted(
                self.clusters, [self._check_cluster(c) for c in np.atleast_1d(clusters)]
            )
        total = counts[sel].sum()
        return float(sums[sel].sum() / total) if total else float("nan")

    def shortest_paths(self, sources: Any, cluster: int | None = None) -> np.ndarray:
        """Shortest-path distances ``D`` from core points ``sources`` (data indices) to every
        core of their cluster, via ``scipy.sparse.csgraph.dijkstra``.

        Returns an array ``(len(sources), n_cores_of_cluster)`` whose columns follow
        :meth:`cluster_cores`. All sources must be cores of one cluster.
        """
        src = np.atleast_1d(self._point_ids("sources", sources))
        if src.size == 0:
            raise InvalidInputError("sources must hold at least one core point index")
        if not self.core_mask[src].all():
            raise InvalidInputError(
                f"sources must be data indices of core points, got {src.tolist()}"
            )
        labs = np.unique(self.labels[src])
        if labs.size != 1:
            raise InvalidInputError(
                f"sources must lie in one cluster, got clusters {labs.tolist()}"
            )
        c = int(labs[0]) if cluster is None else self._check_cluster(cluster)
        if c != int(labs[0]):
            raise InvalidInputError(f"sources lie in cluster {int(labs[0])}, not in cluster {c}")
        local = self.local_positions(src)
        return self.local_shortest_paths(c, local)

    def _point_ids(self, name: str, value: Any) -> np.ndarray:
        """``value`` as int64 data indices in ``[0, n)``, else :class:`InvalidInputError`."""
        idx = np.asarray(value)
        if idx.size == 0:
            return idx.astype(np.int64)
        if idx.dtype.kind not in "iu":
            raise InvalidInputError(
                f"{name} must hold integer point indices, got dtype {idx.dtype}"
            )
        n = self.X.shape[0]
        if idx.min() < 0 or idx.max() >= n:
            raise InvalidInputError(
                f"{name} holds indices in [{idx.min()}, {idx.max()}] but must lie in [0, {n - 1}]"
            )
        return idx.astype(np.int64)

    def local_positions(self, core_data_indices: np.ndarray) -> np.ndarray:
        """Positions of core points (data indices) inside their cluster's graph."""
        glob = self.global_positions(core_data_indices)
        if glob.size and glob.min() < 0:
            raise InvalidInputError("core_data_indices must be data indices of core points")
        idx = self.core_indices[glob]
        starts = np.searchsorted(self.core_labels, self.labels[idx], side="left")
        return np.asarray(glob - starts)

    def global_positions(self, core_data_indices: np.ndarray) -> np.ndarray:
        """Positions of core points (data indices) in :attr:`core_indices` order, i.e. the
        rows of :attr:`adjacency`; ``-1`` for points that are not core points."""
        idx = self._point_ids("core_data_indices", core_data_indices)
        if not hasattr(self, "_pos_of"):
            pos_of = np.full(self.X.shape[0], -1, dtype=np.int64)
            pos_of[self.core_indices] = np.arange(self.n_cores)
            self._pos_of = pos_of
        return np.asarray(self._pos_of[idx])

    def local_shortest_paths(self, cluster: int, local_sources: np.ndarray) -> np.ndarray:
        """Dijkstra from cluster-local positions ``local_sources`` inside ``cluster``."""
        graph = self.cluster_graph(cluster)
        # the adjacency is exactly symmetric, so the directed run gives the undirected
        # distances without scipy converting the matrix on every call
        return np.asarray(csgraph.dijkstra(graph, directed=True, indices=np.asarray(local_sources)))

    @property
    def edge_index(self) -> np.ndarray:
        """Core-graph edges ``(2, E)`` as data indices (both directions)."""
        coo = self.adjacency.tocoo()
        return np.vstack([self.core_indices[coo.row], self.core_indices[coo.col]])

    @property
    def edge_weight(self) -> np.ndarray:
        """Weights of :attr:`edge_index` (distances, floored at :attr:`min_weight`)."""
        return np.asarray(self.adjacency.tocoo().data.copy())

    # ------------------------------------------------------------------ queries
    def nearest_cores(self, points: Any, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest core points of each point: ``(distances, data indices)``, both
        ``(p, k)``, ordered by distance. Distances are recomputed directly (exact)."""
        pts = check_array("points", points, ndim=(1, 2))
        pts = np.atleast_2d(pts)
        if pts.shape[1] != self.X.shape[1]:
            raise InvalidInputError(
                f"points must have {self.X.shape[1]} features, got {pts.shape[1]}"
            )
        if self.n_cores == 0:
            raise InvalidInputError("the clustering has no core point (every point is noise)")
        k = min(check_int("k", k, minimum=1), self.n_cores)
        assert self._index is not None  # built whenever there is a core point
        _, pos = self._index.kneighbors(pts, n_neighbors=k)
        dist = rowwise_distances(pts[:, None, :], self.core_points[pos], self.metric)
        # exact ties: the core first in core order (lower cluster id, then lower index) wins
        order = np.lexsort((pos, dist), axis=1)
        dist = np.take_along_axis(dist, order, axis=1)
        pos = np.take_along_axis(pos, order, axis=1)
        return dist, self.core_indices[pos]

    def assign(self, points: Any) -> np.ndarray:
        """Cluster of new points: the cluster of the nearest core point if it lies within
        ``eps``, else ``-1``. Exact distance ties go to the lower cluster id.

        Note: for border points of the fitted data sklearn keeps the first cluster that
        reached them, which may differ from the nearest core's cluster.
        """
        # a few neighbours so that exact distance ties are broken deterministically
        dist, idx = self.nearest_cores(points, k=4)
        out = self.labels[idx[:, 0]].copy()
        out[dist[:, 0] > self.eps] = -1
        return np.asarray(out)

    def distances(self, x: Any, indices: Any) -> np.ndarray:
        """Exact distances from one point ``x`` (``d`` finite coordinates) to the data points
        ``indices``."""
        x = check_array("x", x, ndim=1)
        if x.shape[0] != self.X.shape[1]:
            raise InvalidInputError(f"x must have {self.X.shape[1]} features, got {x.shape[0]}")
        return rowwise_distances(
            x[None, :], self.X[self._point_ids("indices", indices)], self.metric
        )

    def __repr__(self) -> str:
        return (
            f"CoreGraph(n={self.X.shape[0]}, cores={self.n_cores}, clusters={self.n_clusters}, "
            f"edges={self.adjacency.nnz // 2}, eps={self.eps}, metric={self.metric!r})"
        )
