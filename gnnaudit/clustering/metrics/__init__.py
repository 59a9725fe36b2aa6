"""Clustering metrics: counterfactual quality (validity, proximity, DPP diversity, sparsity)
and fair density-based clustering quality (balance, DCSI, noise-adjusted ARI / NMI)."""

__all__: list[str] = []
