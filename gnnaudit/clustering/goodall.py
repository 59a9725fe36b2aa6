"""Goodall1 similarity for categorical attributes (Boriah, Chandola & Kumar 2008), as used by
FairDen for mixed-type data (Eq. 15).

For attribute ``k`` with value frequencies :math:`f_k(a)` over ``N`` objects,
:math:`\\hat p_k(a) = f_k(a)/N` and :math:`\\hat p^2_k(a) = f_k(a)(f_k(a)-1) / (N(N-1))`:

.. math::

    S_k(x, y) = \\begin{cases} 1 - \\sum_{q:\\, \\hat p_k(q) \\le \\hat p_k(x_k)} \\hat p^2_k(q)
    & x_k = y_k \\\\ 0 & \\text{otherwise} \\end{cases}, \\qquad
    S_G(x, y) = \\frac{1}{d_c} \\sum_{k=1}^{d_c} S_k(x, y)

Matching a rare value is worth more than matching a frequent one. :class:`Goodall1` never forms
the ``n x n`` matrix: :math:`S_G V` is a sum over attributes of per-value group sums of ``V``
(``O(n * d_c * columns)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from gnnaudit._validation import check_array
from gnnaudit.errors import InvalidInputError

__all__ = ["Goodall1", "encode_columns"]


def encode_columns(name: str, values: Any) -> np.ndarray:
    """Map every column of ``values`` (any hashable entries) to codes ``0..m-1``; shape (n, c)."""
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise InvalidInputError(f"{name} must be 1-D or 2-D, got shape {arr.shape}")
    out = np.empty(arr.shape, dtype=np.int64)
    for c in range(arr.shape[1]):  # loop over columns (few), not rows
        col = arr[:, c]
        if col.dtype == object:
            if pd.isna(col).any():
                raise InvalidInputError(f"{name} column {c} holds missing values (None / NaN)")
            col = col.astype(str)
        elif col.dtype.kind == "f" and not np.isfinite(col).all():
            raise InvalidInputError(f"{name} column {c} holds NaN or inf")
        out[:, c] = np.unique(col, return_inverse=True)[1].reshape(-1)
    return out


class Goodall1:
    """Goodall1 similarity of categorical codes (n, d_c), as a matrix-free operator."""

    def __init__(self, codes: np.ndarray) -> None:
        codes = np.asarray(codes, dtype=np.int64)
        if codes.ndim != 2 or codes.shape[1] == 0:
            raise InvalidInputError(
                f"codes must have shape (n, d_c) with d_c >= 1, got {codes.shape}"
            )
        self.codes = codes
        n, dc = codes.shape
        self.n, self.d_c = n, dc
        sims = []
        for k in range(dc):  # loop over attributes (few)
            f = np.bincount(codes[:, k]).astype(np.float64)
            p = f / n
            p2 = f * (f - 1.0) / (n * (n - 1.0)) if n > 1 else np.zeros_like(f)
            order = np.argsort(p, kind="stable")
            cum = np.cumsum(p2[order])
            # all q with p(q) <= p(a), ties included
            upto = np.searchsorted(p[order], p, side="right") - 1
            sims.append(1.0 - cum[upto])
        self.value_similarity = sims
        # indicator matrices: column k block maps each row to its value of attribute k
        offsets = np.cumsum([0] + [s.size for s in sims])
        rows = np.repeat(np.arange(n), dc)
        cols = (codes + offsets[:-1][None, :]).reshape(-1)
        self._ind = sp.csr_matrix((np.ones(n * dc), (rows, cols)), shape=(n, offsets[-1]))
        self._weights = np.concatenate(sims) / dc
        self.diagonal = self._ind @ self._weights  # S_G(i, i)

    def matvec(self, V: np.ndarray) -> np.ndarray:
        """:math:`S_G V` including the diagonal, ``O(n * d_c * columns)``; ``V`` finite, of
        shape ``(n,)`` or ``(n, c)``."""
        V = check_array("V", V, ndim=(1, 2), min_rows=0)
        if V.shape[0] != self.n:
            raise InvalidInputError(f"V must have {self.n} rows, got shape {V.shape}")
        V2 = V.reshape(self.n, -1)
        group_sums = self._ind.T @ V2  # (values, cols)
        out = self._ind @ (self._weights[:, None] * group_sums)
        return np.asarray(out.reshape(V.shape))

    def to_dense(self) -> np.ndarray:
        """Dense :math:`S_G` (small ``n`` only)."""
        W = self._ind.multiply(self._weights[None, :]).tocsr()
        return np.asarray((W @ self._ind.T).todense())
