"""Shared pytest fixtures."""

from __future__ import annotations

# --- clustering fixtures ---
import numpy as np
import pytest
from sklearn.cluster import DBSCAN
from sklearn.datasets import load_iris, make_blobs


@pytest.fixture(scope="session")
def iris():
    """Iris features and labels ``(X, y)`` (scikit-learn's copy, no download)."""
    return load_iris(return_X_y=True)


@pytest.fixture(scope="session")
def blobs_dbscan():
    """Four 2-D Gaussian blobs (600 points) and a fitted ``DBSCAN(eps=0.5, min_samples=5)``:
    four clusters and some noise."""
    X, _ = make_blobs(600, centers=4, n_features=2, cluster_std=0.7, random_state=3)
    return X, DBSCAN(eps=0.5, min_samples=5).fit(X)


@pytest.fixture(scope="session")
def fair_blobs():
    """Three 3-D blobs (240 points) with a random binary sensitive attribute ``(X, s)``."""
    X, _ = make_blobs(240, n_features=3, centers=3, cluster_std=0.8, random_state=4)
    return X, np.random.default_rng(0).integers(0, 2, size=240)


# --- end clustering fixtures ---
