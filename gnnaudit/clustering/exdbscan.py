"""ExDBSCAN: valid, proximal and diverse counterfactuals for a DBSCAN clustering.

Given a point :math:`x` and a target cluster :math:`C` of a fixed DBSCAN clustering, ExDBSCAN
selects :math:`k` reference core points :math:`S \\subseteq V_C` minimising the energy
(paper Eq. 2-3, normalisation App. A.4)

.. math::

    E(S) = \\alpha \\sum_{s \\in S} d(x, s)^2
         + (1 - \\alpha) \\frac{d_{\\min}}{\\bar w} \\sum_{\\{s, t\\} \\subseteq S} \\frac{1}{D(s, t)},

with :math:`d` the metric of the clustering, :math:`d_{\\min}` the distance from :math:`x` to its
nearest eligible target core, :math:`\\bar w` the mean edge weight of the target core graph
and :math:`D` the shortest-path distance in it (:class:`~gnnaudit.graph_ops.CoreGraph`).
The greedy solver starts with the nearest core (optimal for :math:`k = 1`, Prop. 3.3) and
adds the candidate of least energy; each step is one vector operation over all candidates and
one Dijkstra run from the newly selected core. Each reference core :math:`q` yields the
counterfactual (Eq. 4)

.. math::  c = q + \\varepsilon \\frac{x - q}{\\|x - q\\|},

placed strictly inside the ball (radius :math:`\\varepsilon (1 - 10^{-9})`) and verified with the
same exact distance computation as :meth:`CoreGraph.assign` -- nearest core in the target
cluster and within :math:`\\varepsilon` -- shrinking toward the core until it holds, so validity
(Theorem 3.5) is guaranteed in floating point. (A sphere point can lie nearer to a core of
another cluster than to :math:`q`; "nearest core decides", so such a counterfactual is moved
toward :math:`q` -- or dropped and replaced if even the closest admissible point fails.)
Without a target (App. A.2.3) the candidates are the cores of every other cluster and
repulsion acts only within a cluster.

Note on units: the attraction term scales as :math:`L^2` and the repulsion term as
:math:`L^{-1}` (:math:`d_{\\min}/\\bar w` is dimensionless), so rescaling the data by
:math:`s` changes their balance by :math:`s^3`; standardise features first (as the paper does).

Cost per query (k counterfactuals, n_C candidate cores, E_C target-graph edges):
O(n_C d) distances, k-1 Dijkstra runs O(E_C + n_C log n_C), O(k n_C) greedy updates; memory
O(n_C (d + k)).
"""

from __future__ import annotations

import logging
import math
import numbers
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin

from gnnaudit._validation import check_array, check_choice, check_float, check_int
from gnnaudit.clustering.exdbscan_constraints import FeatureConstraints, parse_constraints
from gnnaudit.errors import InfeasibleError, InvalidInputError, NotFittedError
from gnnaudit.graph_ops.core_graph import CoreGraph, canonical_metric, rowwise_distances

__all__ = ["ExDBSCAN", "CounterfactualSet", "STRATEGIES"]

logger = logging.getLogger(__name__)

STRATEGIES: tuple[str, ...] = ("energy", "random", "nearest", "furthest")
#: Counterfactuals are placed at radius eps * (1 - PLACE_REL) from their core ...
PLACE_REL = 1e-9
#: ... and accepted if the exact distance is <= eps * (1 - VERIFY_REL) and the nearest core
#: of another cluster is further by a relative margin TIE_REL.
VERIFY_REL = 1e-11
TIE_REL = 1e-9
_SHRINK = (1 - 1e-9, 1 - 1e-6, 1 - 1e-3, 0.9, 0.5, 0.25, 0.1, 0.01, 0.0)


def _project(Q: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Clip points ``Q`` into the box ``x + [lo, hi]``; zero-width features take ``x`` bit for
    bit (the exact projection for the separable metrics)."""
    P = np.clip(Q, x + lo, x + hi)
    fixed = lo == hi
    if fixed.any():
        P = np.where(fixed, x, P)
    return P


@dataclass
class CounterfactualSet:
    """Counterfactuals of one point.

    Attributes
    ----------
    x : ndarray (d,)
        The explained point.
    counterfactuals : ndarray (k, d)
    reference_cores : ndarray (k,)
        Data indices of the reference core points (one per counterfactual).
    targets : ndarray (k,)
        Cluster of each counterfactual.
    valid : ndarray (k,) of bool
        ``CoreGraph.assign(counterfactuals) == targets`` (always true by construction).
    proximity : float
        Mean distance from ``x`` to the counterfactuals (clustering metric).
    diversity : float
        :math:`\\det K`, :math:`K_{ij} = 1 / (1 + D(q_i, q_j))` over the reference cores.
    energy : float
        Energy :math:`E(S)` of the reference cores (with the model's ``alpha``).
    source_label : int
        Cluster of ``x`` (``-1`` noise).
    strategy : str
    greedy_energy : float or None
        Energy of the plain greedy set when ``refine`` or ``exact`` changed it (else equal
        to ``energy``), to report the greedy gap.
    feature_names : list of str
    metric : str
        Metric of the clustering (distances in :meth:`summary`).
    """

    x: np.ndarray
    counterfactuals: np.ndarray
    reference_cores: np.ndarray
    targets: np.ndarray
    valid: np.ndarray
    proximity: float
    diversity: float
    energy: float
    source_label: int
    strategy: str = "energy"
    greedy_energy: float | None = None
    feature_names: list[str] = field(default_factory=list)
    metric: str = "euclidean"

    def __len__(self) -> int:
        return int(self.counterfactuals.shape[0])

    def _names(self, feature_names: Sequence[str] | None) -> list[str]:
        d = self.x.shape[0]
        names = list(feature_names) if feature_names is not None else list(self.feature_names)
        if not names:
            names = [f"x{i}" for i in range(d)]
        if len(names) != d:
            raise InvalidInputError(f"feature_names must have {d} entries, got {len(names)}")
        return names

    def to_frame(self, feature_names: Sequence[str] | None = None) -> Any:
        """Per-feature changes, one row per (counterfactual, changed feature).

        Columns: ``counterfactual, target, valid, feature, original, new, change``.
        """
        import pandas as pd

        names = self._names(feature_names)
        delta = self.counterfactuals - self.x[None, :]
        cf, feat = np.nonzero(delta != 0)
        return pd.DataFrame(
            {
                "counterfactual": cf,
                "target": self.targets[cf],
                "valid": self.valid[cf],
                "feature": [names[f] for f in feat],
                "original": self.x[feat],
                "new": self.counterfactuals[cf, feat],
                "change": delta[cf, feat],
            }
        )

    def summary(self) -> Any:
        """One row per counterfactual: target, reference core, validity, distance to ``x``
        and number of changed features."""
        import pandas as pd

        delta = self.counterfactuals - self.x[None, :]
        return pd.DataFrame(
            {
                "counterfactual": np.arange(len(self)),
                "target": self.targets,
                "reference_core": self.reference_cores,
                "valid": self.valid,
                "distance": rowwise_distances(self.x[None, :], self.counterfactuals, self.metric),
                "n_changed": (delta != 0).sum(axis=1),
            }
        )


class _Query:
    """Candidate cores of one query with lazily computed graph distances."""

    def __init__(
        self,
        cg: CoreGraph,
        x: np.ndarray,
        cand: np.ndarray,
        box: np.ndarray,
        lo_table: np.ndarray,
        hi_table: np.ndarray,
        alpha: float,
    ) -> None:
        self.cg = cg
        self.x = x
        self.cand = cand
        self.box = box
        self.lo_table = lo_table
        self.hi_table = hi_table
        self.alpha = alpha
        self.cluster = cg.labels[cand]
        self.local = cg.local_positions(cand)
        self.dx = cg.distances(x, cand)
        self.dx2 = self.dx**2
        d_min = float(self.dx.min())
        w_mean = cg.mean_edge_weight(np.unique(self.cluster))
        if not np.isfinite(w_mean) or w_mean <= 0:
            w_mean = cg.eps
        self.coef = (1.0 - alpha) * d_min / w_mean
        self._rows: dict[int, np.ndarray] = {}

    @property
    def n(self) -> int:
        return int(self.cand.size)

    def drow(self, j: int) -> np.ndarray:
        """Graph distances ``D`` from candidate ``j`` to every candidate (inf across clusters)."""
        if j not in self._rows:
            c = int(self.cluster[j])
            full = self.cg.local_shortest_paths(c, np.array([self.local[j]]))[0]
            row = np.full(self.n, np.inf)
            same = self.cluster == c
            row[same] = full[self.local[same]]
            row[j] = 0.0
            self._rows[j] = row
        return self._rows[j]

    def inv_row(self, j: int) -> np.ndarray:
        row = self.drow(j)
        with np.errstate(divide="ignore"):
            inv = np.where(row > 0, 1.0 / row, 0.0)
        return inv

    def dmatrix(self, sel: Sequence[int]) -> np.ndarray:
        """Graph distances between the selected candidates, from cached rows where possible
        (the matrix is symmetric, so the last greedy pick needs no Dijkstra run of its own)."""
        sel = list(sel)
        m = len(sel)
        D = np.zeros((m, m))
        for a in range(m):
            for b in range(a + 1, m):
                if sel[a] in self._rows or sel[b] not in self._rows:
                    D[a, b] = self.drow(sel[a])[sel[b]]
                else:
                    D[a, b] = self._rows[sel[b]][sel[a]]
                D[b, a] = D[a, b]
        return D

    def energy(self, sel: Sequence[int]) -> float:
        sel = list(sel)
        D = self.dmatrix(sel)
        with np.errstate(divide="ignore"):
            inv = np.where(D > 0, 1.0 / D, 0.0)
        return float(self.alpha * self.dx2[sel].sum() + self.coef * np.triu(inv, 1).sum())

    # -------------------------------------------------------------- selection strategies
    def greedy(self, k: int, first: int, attraction: bool) -> list[int]:
        sel = [first]
        rep = np.zeros(self.n)
        for _ in range(1, k):
            rep += self.inv_row(sel[-1])
            score = (self.alpha * self.dx2 + self.coef * rep) if attraction else rep.copy()
            score[sel] = np.inf
            sel.append(int(np.argmin(score)))
        return sel

    def swap(self, sel: list[int], max_iter: int = 100) -> tuple[list[int], int]:
        """Best-improvement swaps from ``sel`` (paper App. A.3)."""
        sel = list(sel)
        n_swaps = 0
        for _ in range(max_iter):
            R = np.array([self.inv_row(j) for j in sel])
            rsum = R.sum(axis=0)
            inner = R[:, sel].sum(axis=1)
            cur = self.energy(sel)
            M = (
                cur
                - self.alpha * self.dx2[sel][:, None]
                - self.coef * inner[:, None]
                + self.alpha * self.dx2[None, :]
                + self.coef * (rsum[None, :] - R)
            )
            M[:, sel] = np.inf
            i, v = np.unravel_index(int(np.argmin(M)), M.shape)
            if not M[i, v] < cur - 1e-12 * abs(cur):
                break
            sel[i] = int(v)
            n_swaps += 1
        return sel, n_swaps

    def exact(self, k: int, max_combinations: int) -> list[int]:
        """Exhaustive minimum of E over all k-subsets of the candidates."""
        import itertools

        total = math.comb(self.n, k)
        if total > max_combinations:
            raise InvalidInputError(
                f"exact=True enumerates C({self.n}, {k}) = {total} subsets, more than "
                f"max_exact_combinations={max_combinations}; use refine='swap', fewer "
                "counterfactuals or constraints that shrink the candidate set"
            )
        inv = np.array([self.inv_row(j) for j in range(self.n)])
        best_e, best = np.inf, None
        chunk = max(1, 2_000_000 // max(k, 1))
        it = itertools.combinations(range(self.n), k)
        while True:
            flat = np.fromiter(
                itertools.chain.from_iterable(itertools.islice(it, chunk)), dtype=np.int64
            )
            if flat.size == 0:
                break
            combos = flat.reshape(-1, k)
            e = self.alpha * self.dx2[combos].sum(axis=1)
            for a in range(k):
                for b in range(a + 1, k):
                    e = e + self.coef * inv[combos[:, a], combos[:, b]]
            i = int(np.argmin(e))
            if e[i] < best_e:
                best_e, best = float(e[i]), combos[i].tolist()
        assert best is not None
        return best

    # -------------------------------------------------------------- placement
    def place(self, sel: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Counterfactuals of the selected cores and a validity mask (see module doc)."""
        cg, x = self.cg, self.x
        sel = np.asarray(sel, dtype=np.int64)
        Q = cg.X[self.cand[sel]]
        lo_d = self.lo_table[self.box[sel]]
        hi_d = self.hi_table[self.box[sel]]
        P = np.where(lo_d == hi_d, x[None, :], np.clip(Q, x[None, :] + lo_d, x[None, :] + hi_d))
        lo = x[None, :] + lo_d
        hi = x[None, :] + hi_d
        target = self.cluster[sel]
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
            lo_t = np.zeros(len(sel))
            hi_t = np.ones(len(sel))
            inside = rowwise_distances(x[None, :], Q, cg.metric) <= r
            for _ in range(64):
                mid = 0.5 * (lo_t + hi_t)
                ok = rowwise_distances(P + mid[:, None] * B, Q, cg.metric) <= r
                lo_t = np.where(ok, mid, lo_t)
                hi_t = np.where(ok, hi_t, mid)
            t = np.where(inside, 1.0, lo_t)
        C = self._build(P, B, t, lo, hi)
        valid = self._valid(C, Q, target)
        for factor in _SHRINK:
            if valid.all():
                break
            bad = ~valid
            t[bad] = t[bad] * factor
            C[bad] = self._build(P[bad], B[bad], t[bad], lo[bad], hi[bad])
            valid[bad] = self._valid(C[bad], Q[bad], target[bad])
        return C, valid

    def _build(
        self, P: np.ndarray, B: np.ndarray, t: np.ndarray, lo: np.ndarray, hi: np.ndarray
    ) -> np.ndarray:
        C = np.clip(P + t[:, None] * B, lo, hi)
        fixed = lo == hi  # immutable (or zero-width) features: copy x bit for bit
        if fixed.any():
            C = np.where(fixed, self.x[None, :], C)
        return C

    def _valid(self, C: np.ndarray, Q: np.ndarray, target: np.ndarray) -> np.ndarray:
        cg = self.cg
        if C.shape[0] == 0:
            return np.zeros(0, dtype=bool)
        dq = rowwise_distances(C, Q, cg.metric)
        dist, idx = cg.nearest_cores(C, k=min(8, cg.n_cores))
        is_t = cg.labels[idx] == target[:, None]
        dt = np.minimum(dq, np.where(is_t, dist, np.inf).min(axis=1))
        dn = np.where(is_t, np.inf, dist).min(axis=1)
        return (dt <= cg.eps * (1.0 - VERIFY_REL)) & (dt < dn * (1.0 - TIE_REL))


class ExDBSCAN(ClusterMixin, BaseEstimator):
    """Counterfactual explanations of a DBSCAN clustering (ExDBSCAN, scikit-learn style).

    Parameters
    ----------
    eps, min_samples, metric
        DBSCAN parameters (ignored for the clustering when ``fit(X, dbscan=fitted)`` is given:
        the fitted estimator's own parameters are used). ``metric`` is one of
        ``euclidean, manhattan, chebyshev, cosine`` (App. A.5).
    n_counterfactuals : int
        Default ``k``.
    strategy : {"energy", "random", "nearest", "furthest"}
        ``energy``: greedy minimisation of :math:`E` (paper); ``random``: uniform reference
        cores (``random_state``); ``nearest``: attraction only (the k nearest cores);
        ``furthest``: repulsion only (greedy from a random first core).
    alpha : float in [0, 1]
        Weight of the attraction term.
    random_state : int
        Seed of the ``random`` and ``furthest`` strategies (each query reseeds it).
    max_exact_combinations : int
        Largest number of subsets ``explain(exact=True)`` enumerates.

    Attributes
    ----------
    labels_, core_sample_indices_ : sklearn DBSCAN semantics.
    core_graph_ : :class:`~gnnaudit.graph_ops.CoreGraph`
    eps_, min_samples_, metric_ : parameters of the explained clustering.
    n_features_in_, feature_names_in_
    """

    def __init__(
        self,
        eps: float = 0.5,
        min_samples: int = 5,
        metric: str = "euclidean",
        n_counterfactuals: int = 5,
        strategy: str = "energy",
        alpha: float = 0.5,
        random_state: int | None = 0,
        max_exact_combinations: int = 500_000,
    ) -> None:
        self.eps = eps
        self.min_samples = min_samples
        self.metric = metric
        self.n_counterfactuals = n_counterfactuals
        self.strategy = strategy
        self.alpha = alpha
        self.random_state = random_state
        self.max_exact_combinations = max_exact_combinations

    # ------------------------------------------------------------------ fitting
    def _check_params(self) -> None:
        check_float("eps", self.eps, minimum=0.0, inclusive=(False, True))
        check_int("min_samples", self.min_samples, minimum=1)
        canonical_metric(self.metric)
        check_int("n_counterfactuals", self.n_counterfactuals, minimum=1)
        check_choice("strategy", self.strategy, STRATEGIES)
        check_float("alpha", self.alpha, minimum=0.0, maximum=1.0)
        check_int("max_exact_combinations", self.max_exact_combinations, minimum=1)
        if self.random_state is not None:
            check_int("random_state", self.random_state, minimum=0)

    def fit(
        self, X: Any, y: Any = None, dbscan: Any = None, feature_names: Sequence[str] | None = None
    ) -> ExDBSCAN:
        """Cluster ``X`` with sklearn's DBSCAN (or take the fitted ``dbscan``) and build the
        core graph. ``X`` may be a pandas DataFrame (its columns name the features)."""
        self._check_params()
        names = None
        if hasattr(X, "columns"):
            names = [str(c) for c in X.columns]
            X = X.to_numpy(dtype=np.float64)
        if feature_names is not None:
            names = [str(n) for n in feature_names]
        X = check_array("X", X)
        if names is not None and len(names) != X.shape[1]:
            raise InvalidInputError(
                f"feature_names must have {X.shape[1]} entries, got {len(names)}"
            )
        if dbscan is None:
            cg = CoreGraph.from_dbscan(X, self.eps, self.min_samples, self.metric)
        else:
            cg = CoreGraph.from_fitted(X, dbscan)
        self.core_graph_ = cg
        self.labels_ = cg.labels.copy()
        self.core_sample_indices_ = np.flatnonzero(cg.core_mask)
        self.eps_, self.min_samples_, self.metric_ = cg.eps, cg.min_samples, cg.metric
        self.n_features_in_ = X.shape[1]
        self.feature_names_in_ = np.asarray(names, dtype=object) if names is not None else None
        if cg.n_clusters == 0:
            warnings.warn(
                f"DBSCAN(eps={cg.eps}, min_samples={cg.min_samples}) found no cluster: every "
                "point is noise, so nothing can be explained",
                UserWarning,
                stacklevel=2,
            )
        return self

    def fit_predict(self, X: Any, y: Any = None, **kwargs: Any) -> np.ndarray:
        return self.fit(X, **kwargs).labels_

    def _feature_names(self) -> list[str]:
        if getattr(self, "feature_names_in_", None) is not None:
            return list(self.feature_names_in_)
        return [f"x{i}" for i in range(self.n_features_in_)]

    # ------------------------------------------------------------------ explaining
    def _resolve_point(self, x_or_index: Any) -> tuple[np.ndarray, int, bool]:
        cg = self.core_graph_
        if isinstance(x_or_index, (numbers.Integral,)) and not isinstance(x_or_index, bool):
            i = int(x_or_index)
            n = cg.X.shape[0]
            if not 0 <= i < n:
                raise InvalidInputError(f"x_or_index: index {i} is outside [0, {n - 1}]")
            return cg.X[i].copy(), int(cg.labels[i]), True
        if hasattr(x_or_index, "to_numpy"):
            x_or_index = x_or_index.to_numpy(dtype=np.float64)
        x = check_array("x", x_or_index, ndim=(1, 2))
        if x.ndim == 2:
            if x.shape[0] != 1:
                raise InvalidInputError(f"x must be one point, got shape {x.shape}")
            x = x[0]
        if x.shape[0] != self.n_features_in_:
            raise InvalidInputError(f"x must have {self.n_features_in_} features, got {x.shape[0]}")
        x = np.array(x, dtype=np.float64)
        return x, int(cg.assign(x)[0]), False

    def _resolve_targets(self, target: Any, source: int, x: np.ndarray, indexed: bool) -> list[int]:
        cg = self.core_graph_
        clusters = cg.clusters.tolist()
        if not clusters:
            raise InfeasibleError(
                f"the clustering has no cluster (DBSCAN eps={cg.eps}, min_samples="
                f"{cg.min_samples} labelled every point noise); nothing to explain toward"
            )
        if target is None:
            others = [c for c in clusters if c != source]
            if not others:
                raise InfeasibleError(
                    f"the point is in cluster {source}, the only cluster; there is no other "
                    "cluster to explain toward"
                )
            return others
        if isinstance(target, bool) or not isinstance(target, numbers.Integral):
            raise InvalidInputError(f"target must be a cluster id (int) or None, got {target!r}")
        target = int(target)
        if target == -1:
            raise InvalidInputError(
                f"target=-1 is noise, not a cluster; allowed targets are {clusters}"
            )
        if target not in clusters:
            raise InvalidInputError(f"unknown target cluster {target}; clusters are {clusters}")
        if target == source:
            what = "the point's own cluster" if indexed else "the cluster the point is already in"
            raise InvalidInputError(
                f"target={target} is {what}; choose another cluster among "
                f"{[c for c in clusters if c != source]} (or target=None)"
            )
        return [target]

    def _eligible(
        self, x: np.ndarray, cand: np.ndarray, cons: FeatureConstraints
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Filter candidates by the constraints.

        Returns ``(mask, box_id, lo_table, hi_table)``: eligibility per candidate, the index of
        the allowed box (sign pattern) nearest to each candidate's ball and the box bounds on
        :math:`\\delta = c - x`. Loops over the boxes (at most ``2**10``), memory
        O(n_candidates * d).
        """
        cg = self.core_graph_
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
        names = self._feature_names()
        count_before = cand.size
        for stage, lo, hi in cons.stage_boxes():
            best_d = np.full(cand.size, np.inf)
            best = np.zeros(cand.size, dtype=np.int64)
            for b in range(lo.shape[0]):
                P = _project(Q, x, lo[b], hi[b])
                dist = rowwise_distances(P, Q, cg.metric)
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

    def explain(
        self,
        x_or_index: Any,
        target: int | None = None,
        n_counterfactuals: int | None = None,
        immutable: Any = (),
        monotone: dict[Any, Any] | None = None,
        correlated: Iterable[tuple[Any, Any, int]] | None = None,
        refine: str | None = None,
        exact: bool = False,
    ) -> CounterfactualSet:
        """Counterfactuals of a point (data index or coordinates) toward ``target``.

        ``target=None`` explains toward any other cluster (App. A.2.3). Constraints:
        ``immutable`` (feature names or indices), ``monotone={"age": "increase"}`` or with a
        bound ``{"age": ("decrease", 5.0)}``, ``correlated=[("rooms", "bedrooms", +1)]``.
        ``refine="swap"`` improves the greedy set by best-improvement swaps (App. A.3);
        ``exact=True`` returns the exhaustive minimum of :math:`E` (small candidate sets).

        If fewer eligible cores than ``n_counterfactuals`` exist, fewer counterfactuals are
        returned and a ``UserWarning`` is issued.

        Raises
        ------
        InvalidInputError
            bad point, target (noise, unknown, the point's own cluster) or constraint.
        InfeasibleError
            no cluster to explain toward, or no eligible core under the constraints (the
            message names the excluding constraint).
        """
        if getattr(self, "core_graph_", None) is None:
            raise NotFittedError("ExDBSCAN is not fitted yet (missing core_graph_); call fit first")
        cg = self.core_graph_
        k = self.n_counterfactuals if n_counterfactuals is None else n_counterfactuals
        k = check_int("n_counterfactuals", k, minimum=1)
        if refine is not None:
            check_choice("refine", refine, ("swap",))
        if not isinstance(exact, (bool, np.bool_)):
            raise InvalidInputError(f"exact must be True or False, got {exact!r}")
        x, source, indexed = self._resolve_point(x_or_index)
        targets = self._resolve_targets(target, source, x, indexed)
        cons = parse_constraints(
            self.n_features_in_,
            self._feature_names() if self.feature_names_in_ is not None else None,
            immutable,
            monotone,
            correlated,
        )
        cand = np.concatenate([cg.cluster_cores(c) for c in targets])
        mask, box, lo_table, hi_table = self._eligible(x, cand, cons)
        q = _Query(cg, x, cand[mask], box[mask], lo_table, hi_table, float(self.alpha))
        banned = np.zeros(q.n, dtype=bool)
        for _attempt in range(6):
            sel, greedy_energy = self._select(q, k, refine, exact, banned)
            C, valid = q.place(sel)
            if valid.all():
                break
            logger.debug("dropping %d reference cores whose counterfactual failed", (~valid).sum())
            banned[np.asarray(sel)[~valid]] = True
            if banned.all():
                break
        keep = valid
        sel = list(np.asarray(sel)[keep])
        C = C[keep]
        if not sel:
            raise InfeasibleError("no reference core yields a valid counterfactual for this point")
        if len(sel) < k:
            warnings.warn(
                f"only {len(sel)} eligible core point(s) for {k} requested counterfactuals; "
                f"returning {len(sel)}",
                UserWarning,
                stacklevel=2,
            )
        ref = q.cand[sel]
        tgt = q.cluster[sel]
        D = q.dmatrix(sel)
        return CounterfactualSet(
            x=x,
            counterfactuals=C,
            reference_cores=ref,
            targets=tgt,
            valid=cg.assign(C) == tgt,
            proximity=float(rowwise_distances(x[None, :], C, cg.metric).mean()),
            diversity=float(np.linalg.det(1.0 / (1.0 + D))),
            energy=q.energy(sel),
            source_label=source,
            strategy=self.strategy,
            greedy_energy=greedy_energy,
            feature_names=self._feature_names(),
            metric=cg.metric,
        )

    def _select(
        self, q: _Query, k: int, refine: str | None, exact: bool, banned: np.ndarray
    ) -> tuple[list[int], float | None]:
        allowed = np.flatnonzero(~banned)
        k = min(k, allowed.size)
        if banned.any():  # restrict the problem to the allowed candidates
            sub = _Query.__new__(_Query)
            sub.__dict__.update(q.__dict__)
            for name in ("cand", "box", "cluster", "local", "dx", "dx2"):
                setattr(sub, name, getattr(q, name)[allowed])
            sub._rows = {}
            sel, ge = self._select(sub, k, refine, exact, np.zeros(allowed.size, dtype=bool))
            return [int(allowed[j]) for j in sel], ge
        rng = np.random.default_rng(self.random_state)
        if self.strategy == "energy":
            sel = q.greedy(k, int(np.argmin(q.dx)), attraction=True)
        elif self.strategy == "nearest":
            sel = np.argsort(q.dx, kind="stable")[:k].tolist()
        elif self.strategy == "random":
            sel = rng.choice(q.n, size=k, replace=False).tolist()
        else:
            sel = q.greedy(k, int(rng.integers(q.n)), attraction=False)
        greedy_energy = q.energy(sel)
        if exact:
            sel = q.exact(k, self.max_exact_combinations)
        elif refine == "swap":
            sel, _ = q.swap(sel)
        return [int(s) for s in sel], greedy_energy

    def explain_many(
        self,
        indices: Iterable[Any],
        target: int | None = None,
        progress: bool = False,
        **kwargs: Any,
    ) -> list[CounterfactualSet]:
        """:meth:`explain` for a batch of points (indices or coordinate rows), same options."""
        from tqdm.auto import tqdm

        items = list(indices)
        return [
            self.explain(i, target=target, **kwargs)
            for i in tqdm(items, desc="ExDBSCAN", disable=not progress)
        ]
