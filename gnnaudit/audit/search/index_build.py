r"""The partitions of the paper's index (LocalCE-I, CE paper Sec. 5.1; the member tables the
queries read are in :mod:`gnnaudit.audit.search.index_cells`, the queries in
:mod:`gnnaudit.audit.search.index`).

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
   :mod:`gnnaudit.audit.search.spherical_caps`; caps that do not meet give :math:`w_v = 1`).
   The next round weights node v by the smallest weight it has had so far (its weight in its
   current index entry): nodes that every earlier partition leaves at a cluster boundary pull
   the next centroids toward them. Each round starts from a fresh k-means++ seeding drawn with
   probability :math:`\propto w_v (1 - \cos(x_v, \text{nearest seed}))` (a new random
   partition that favours the badly served nodes), followed by ``n_iter`` weighted Lloyd
   iterations (faiss ``Kmeans(spherical=True)``,
   :func:`~gnnaudit.audit.search.spherical_kmeans.weighted_lloyd`).
3. Index entry of v: :math:`C^*[v] = \arg\min_i w^i_v` and v's cluster there. Equal weights
   (in high dimension :math:`w_v` saturates: in d = 500 it exceeds 0.99 for every node
   farther than about 0.4 rad from its centroid) are broken by the largest cosine to the centroid, which
   is the same order since :math:`w` is a non-decreasing function of the angle.

Extension ``entry="margin"``: the paper's rule picks the partition whose centroid is closest
to v, which favours partitions that split a natural cluster into tight halves (on well
separated blobs it scans a half-blob and misses the other half). The margin rule picks the
partition where v is farthest from its cluster boundary, :math:`\cos(x_v,\mu_{c_v}) -
\max_{j\ne c_v}\cos(x_v,\mu_j)`, which is what the supplementary partitions are meant to
fix; ``benchmarks/results/faiss_tuning.md`` reports both.

Ablations: ``weighted=False`` runs plain (unweighted) k-means rounds, ``supplementary=False``
keeps one partition only (``n_partitions`` is then ignored).
In high dimension the Eq. 10 weights saturate at 1 for every node (Cora's KS embedding,
d = 1433: every node is more than 0.4 rad from its centroid), so ``weighted=False`` builds the
same partitions there; the weights matter in low dimension (see the tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tqdm.auto import trange

from gnnaudit.audit.search.spherical_kmeans import kmeanspp_seeds, weighted_lloyd

__all__ = ["Partitions", "build_partitions"]


@dataclass(frozen=True)
class Partitions:
    """The ``p`` partitions of ``m`` nodes into ``k`` clusters and each node's index entry.

    Attributes
    ----------
    labels : (p, m) int32 cluster of every node in every partition.
    centroids : (p, k, d) float32 unit centroids.
    weights, own_cos : (p, m) float32 Eq. 10 weight and cosine to the own centroid.
    entry_partition : (m,) int32 the partition of each node's index entry.
    entry_weight : (m,) its Eq. 10 weight there.
    """

    labels: np.ndarray
    centroids: np.ndarray
    weights: np.ndarray
    own_cos: np.ndarray
    entry_partition: np.ndarray
    entry_weight: np.ndarray


def build_partitions(
    x: np.ndarray,
    k_cl: int,
    n_part: int,
    *,
    weight_of_cos: Callable[[np.ndarray], np.ndarray],
    weighted: bool,
    entry: str,
    n_iter: int,
    rng: np.random.Generator,
    progress: bool,
) -> Partitions:
    """``n_part`` weighted spherical k-means rounds of ``k_cl`` clusters over the unit rows
    ``x`` and the index entry of every node (module docstring); ``weight_of_cos`` is Eq. 10 as
    a function of the cosine to the centroid."""
    m, d = x.shape
    labels = np.empty((n_part, m), dtype=np.int32)
    cents = np.empty((n_part, k_cl, d), dtype=np.float32)
    weights = np.empty((n_part, m), dtype=np.float32)
    own_cos = np.empty((n_part, m), dtype=np.float32)
    entry_w = np.full(m, np.inf)
    entry_cos = np.full(m, -np.inf)
    entry_part = np.zeros(m, dtype=np.int32)
    entry_margin = np.full(m, -np.inf)
    w_round = np.ones(m)
    for t in trange(n_part, desc="index partitions", disable=not progress, leave=False):
        seed_w = w_round if weighted else np.ones(m)
        c0 = kmeanspp_seeds(x, k_cl, seed_w, rng)
        cent, lab, cos, cos2 = weighted_lloyd(x, c0, seed_w, n_iter, seed=t)
        w = weight_of_cos(cos)
        labels[t], cents[t], weights[t], own_cos[t] = lab, cent, w, cos
        if entry == "weight":
            better = (w < entry_w) | ((w == entry_w) & (cos > entry_cos))
        else:  # margin to the cluster boundary
            better = (cos - cos2) > entry_margin
            entry_margin = np.where(better, cos - cos2, entry_margin)
        entry_w = np.where(better, w, entry_w)
        entry_cos = np.where(better, cos, entry_cos)
        entry_part[better] = t
        # the next round favours nodes still badly served
        w_round = np.minimum(w_round, w) if t else w
    return Partitions(labels, cents, weights, own_cos, entry_part, entry_w)
