"""Similarity blocks of a class-sorted embedding, and the candidates each block hands back.

The exact search (:mod:`gnnaudit.audit.search.exact`) scans blocks of ``E[rows] @ E[cols].T``
and keeps, of each block, only the entries that can still enter a top-k:

* local search: the entries of each row at or above that row's ``k``-th largest value
  (every tie at the ``k``-th value stays, so the final sort applies the exact tie rule);
* global search: the entries at or above ``max(t, b_k)``, with ``t`` the running k-th
  similarity and ``b_k`` the block's own ``k``-th largest value.

Two implementations of the same three operations:

* :class:`HostBlocks`: numpy, products through BLAS (the CPU path and Dask workers);
* :class:`DeviceBlocks`: torch on a device (CUDA): the embedding is copied there once, the
  product *and* the selection run there, and only the candidates (``O(rows x k)`` for a local
  block, ``O(k)`` for a global block, plus ties) come back to the host. Copying whole blocks
  back instead would move ``m^2 / 2`` floats for a global search (125 GB at 250,000 test
  nodes) and make the GPU slower than the CPU.

Both return ``(row, column, similarity)`` numpy triplets (int64, int64, float32), columns
relative to the block. The selection is exact on each device's own float32 products; a GPU
product may differ from BLAS in the last bits, so a near-tie can swap places between devices.

Memory: one block of ``rows x cols`` float32 (the caller sizes it: ``block_bytes``) plus its
boolean mask; the candidates are at most the block's entries in the worst case of massive
ties, typically ``O(rows x k)`` / ``O(k)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnaudit.audit.search.topk import row_candidates

__all__ = ["HostBlocks", "DeviceBlocks"]

Triplets = tuple[np.ndarray, np.ndarray, np.ndarray]


def _threshold(thr: float, block_kth: float) -> float:
    return block_kth if not np.isfinite(thr) else max(thr, block_kth)


class HostBlocks:
    """Blocks of ``emb @ emb.T`` through numpy's BLAS (``emb``: float32, C-contiguous)."""

    def __init__(self, emb: np.ndarray) -> None:
        self.emb = emb

    def outside(self, slots: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """``(len(slots), m - (hi - lo))`` similarities of ``emb[slots]`` with every row outside
        ``lo:hi`` (columns: ``0:lo`` then ``hi:m``)."""
        m = self.emb.shape[0]
        q = self.emb[slots]
        sim = np.empty((slots.size, m - (hi - lo)), dtype=np.float32)
        if lo:
            sim[:, :lo] = np.matmul(q, self.emb[:lo].T)
        if hi < m:
            sim[:, lo:] = np.matmul(q, self.emb[hi:].T)
        return sim

    def local_candidates(self, slots: np.ndarray, lo: int, hi: int, k: int) -> Triplets:
        """Row candidates (see :func:`~gnnaudit.audit.search.topk.row_candidates`) of :meth:`outside`."""
        return row_candidates(self.outside(slots, lo, hi), k)

    def global_candidates(self, r0: int, r1: int, c0: int, c1: int, thr: float, k: int) -> Triplets:
        """Entries of ``emb[r0:r1] @ emb[c0:c1].T`` at or above ``max(thr, block k-th)``."""
        sim = np.matmul(self.emb[r0:r1], self.emb[c0:c1].T)
        n_ge = int(np.count_nonzero(sim >= thr)) if np.isfinite(thr) else sim.size
        if n_ge > k:  # tighten with the block's own k-th value
            flat = sim.reshape(-1)
            thr = _threshold(thr, float(-np.partition(-flat, k - 1)[k - 1]))
        r, c = np.nonzero(sim >= thr)
        return r.astype(np.int64, copy=False), c.astype(np.int64, copy=False), sim[r, c]


class DeviceBlocks:
    """The same blocks and selections in torch on ``device``; only candidates leave it."""

    def __init__(self, emb: np.ndarray, device: Any) -> None:
        import torch

        self.torch = torch
        self.emb = torch.from_numpy(emb).to(device)

    def _back(self, r: Any, c: Any, vals: Any) -> Triplets:
        return (
            r.cpu().numpy().astype(np.int64),
            c.cpu().numpy().astype(np.int64),
            vals.cpu().numpy().astype(np.float32),
        )

    def local_candidates(self, slots: np.ndarray, lo: int, hi: int, k: int) -> Triplets:
        """Row candidates of ``emb[slots]`` against every row outside ``lo:hi``, selected on
        the device with ``torch.topk`` (each row's k-th value) and a ``>=`` mask."""
        torch, t = self.torch, self.emb
        m = t.shape[0]
        q = t[torch.from_numpy(slots).to(t.device)]
        parts = []
        if lo:
            parts.append(q @ t[:lo].T)
        if hi < m:
            parts.append(q @ t[hi:].T)
        sim = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        if sim.shape[1] > k:
            kth = torch.topk(sim, k, dim=1, sorted=False).values.min(dim=1).values
            r, c = torch.nonzero(sim >= kth[:, None], as_tuple=True)
        else:
            r, c = torch.nonzero(torch.ones_like(sim, dtype=torch.bool), as_tuple=True)
        return self._back(r, c, sim[r, c])

    def global_candidates(self, r0: int, r1: int, c0: int, c1: int, thr: float, k: int) -> Triplets:
        """Entries of ``emb[r0:r1] @ emb[c0:c1].T`` at or above ``max(thr, block k-th)``, the
        block's k-th value from ``torch.topk`` on the device."""
        torch, t = self.torch, self.emb
        sim = t[r0:r1] @ t[c0:c1].T
        flat = sim.reshape(-1)
        if flat.numel() > k:
            block_kth = float(torch.topk(flat, k, sorted=False).values.min())
            thr = _threshold(thr, block_kth)
        if np.isfinite(thr):
            # a float32 threshold compares exactly with float32 entries
            r, c = torch.nonzero(sim >= torch.tensor(thr, dtype=sim.dtype), as_tuple=True)
        else:
            r, c = torch.nonzero(torch.ones_like(sim, dtype=torch.bool), as_tuple=True)
        return self._back(r, c, sim[r, c])
