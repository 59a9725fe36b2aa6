"""Clustering metrics: counterfactual quality (validity, proximity, DPP diversity, sparsity)
and fair density-based clustering quality (balance, DCSI, noise-adjusted ARI / NMI)."""

from gnnaudit.clustering.metrics.counterfactual import dpp_diversity, proximity, sparsity, validity
from gnnaudit.clustering.metrics.fairness import (
    adjusted_rand_noise,
    balance,
    dcsi,
    group_mix,
    noise_fraction,
    normalized_mutual_info_noise,
)

__all__ = [
    "validity",
    "proximity",
    "dpp_diversity",
    "sparsity",
    "balance",
    "group_mix",
    "dcsi",
    "adjusted_rand_noise",
    "normalized_mutual_info_noise",
    "noise_fraction",
]
