"""Shared pytest fixtures."""

from __future__ import annotations

import pytest


# --- search fixtures ---
@pytest.fixture(scope="module")
def faiss_one_thread():
    """faiss with one OpenMP thread for the module (deterministic HNSW graphs, no
    oversubscription on a shared machine); skips when faiss is missing."""
    faiss = pytest.importorskip("faiss")
    old = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield faiss
    faiss.omp_set_num_threads(old)


# --- end search fixtures ---
