"""Fairness-constrained normalised spectral embedding (FairDen, Sec. 2.2-2.4, Eq. 12-15).

.. math::

    \\min_{H \\in \\mathbb{R}^{n \\times k}} \\operatorname{tr}(H^\\top L H)
    \\quad \\text{s.t.} \\quad H^\\top \\mathcal{D} H = I_k, \\quad F^\\top H = 0,

with :math:`A_{ij} = \\tfrac{d_n}{d}\\big(1 - d_{dc}(i,j)/\\max d_{dc}\\big) +
\\tfrac{d_c}{d} S_G(i,j)` (:math:`A_{ii} = 0`), :math:`L = \\mathcal{D} - A`, and ``F`` one column
:math:`f^{S_x} - (|S_x|/n)\\mathbf{1}` per combined sensitive group but the last.

Two solvers:

* :func:`fair_embedding_dense` follows the paper: ``Z`` an orthonormal basis of
  :math:`\\operatorname{null}(F^\\top)`, :math:`Q = (Z^\\top \\mathcal{D} Z)^{1/2}`, ``V`` the ``k``
  smallest eigenvectors of :math:`Q^{-1} Z^\\top L Z Q^{-1}`, :math:`H = Z Q^{-1} V`
  (``O(n^3)`` time, ``O(n^2)`` memory).
* :func:`fair_embedding_matrix_free` substitutes :math:`y = \\mathcal{D}^{1/2} H`: the problem is
  the ``k`` smallest eigenvectors of :math:`M = \\mathcal{D}^{-1/2} L \\mathcal{D}^{-1/2}` on the
  subspace :math:`G^\\top y = 0`, :math:`G = \\mathcal{D}^{-1/2} F`. With ``P`` the orthogonal
  projector onto that subspace (``F`` has few columns, so ``P`` is applied through a thin
  orthonormal basis of ``G``), these are the largest eigenvectors of :math:`P (2I - M) P`
  (``M``'s spectrum lies in ``[0, 2]``, so the projected-out directions, eigenvalue 0, never
  compete). :func:`scipy.sparse.linalg.eigsh` runs on that ``LinearOperator``; the affinity is
  applied through the dc-tree (``O(n)`` per column) and Goodall1 value counts
  (``O(n d_c)``): no ``n x n`` array is allocated.

Degrees are clipped below at ``1e-12 * max degree`` for the normalisation only (a point whose
dc-distance to everyone is the maximum has degree 0; it then gets its own eigenvector and ends
up as noise), in both solvers alike.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

from gnnaudit._validation import check_array
from gnnaudit.clustering.goodall import Goodall1
from gnnaudit.errors import GnnAuditError, InvalidInputError
from gnnaudit.graph_ops.dc_tree import DCTree

__all__ = [
    "AffinityOperator",
    "FairEmbedding",
    "fairness_matrix",
    "fair_embedding_dense",
    "fair_embedding_matrix_free",
]

logger = logging.getLogger(__name__)


def _operand(name: str, V: Any, n: int) -> np.ndarray:
    """``V`` as a finite float64 array of shape ``(n,)`` or ``(n, c)``."""
    V = check_array(name, V, ndim=(1, 2), min_rows=0)
    if V.shape[0] != n:
        raise InvalidInputError(f"{name} must have shape (n,) or (n, c) with n={n}, got {V.shape}")
    return np.asarray(V)


def fairness_matrix(groups: np.ndarray) -> np.ndarray:
    """``F`` (n, g-1): columns :math:`f^{S_x} - (|S_x|/n) \\mathbf{1}` for groups ``0..g-2``."""
    groups = np.asarray(groups, dtype=np.int64)
    n = groups.size
    g = int(groups.max()) + 1 if n else 0
    if g <= 1:
        return np.zeros((n, 0))
    onehot = np.zeros((n, g - 1))
    mask = groups < g - 1
    onehot[np.flatnonzero(mask), groups[mask]] = 1.0
    return np.asarray(onehot - onehot.mean(axis=0, keepdims=True))


class AffinityOperator:
    """Matrix-free FairDen affinity (Eq. 1 / Eq. 15) with zero diagonal.

    ``w_num * (1 - D_dc / max D_dc) + w_cat * S_G``; when every dc-distance is 0 (all points
    coincide) the dc part is taken as 1 off the diagonal.
    """

    def __init__(self, tree: DCTree, goodall: Goodall1 | None, w_num: float, w_cat: float) -> None:
        self.tree, self.goodall = tree, goodall
        self.w_num, self.w_cat = float(w_num), float(w_cat)
        self.n = tree.n_
        self.scale = 1.0 / tree.max_distance_ if tree.max_distance_ > 0 else 0.0
        self.degree = self.matvec(np.ones(self.n))

    def matvec(self, V: np.ndarray) -> np.ndarray:
        """:math:`A V` for ``V`` of shape ``(n,)`` or ``(n, c)``: ``O(n * c)`` through the
        dc-tree plus ``O(n * d_c * c)`` for Goodall1; no ``n x n`` array."""
        V = _operand("V", V, self.n)
        V2 = V.reshape(self.n, -1)
        out = self.w_num * (V2.sum(axis=0, keepdims=True) - V2)
        if self.scale:
            out -= (self.w_num * self.scale) * self.tree.matvec(V2)
        if self.goodall is not None and self.w_cat:
            out += self.w_cat * (self.goodall.matvec(V2) - self.goodall.diagonal[:, None] * V2)
        return np.asarray(out.reshape(V.shape))

    def to_dense(self) -> np.ndarray:
        """Dense affinity (small ``n``)."""
        A = self.w_num * (1.0 - self.scale * self.tree.to_dense())
        if self.goodall is not None and self.w_cat:
            A += self.w_cat * self.goodall.to_dense()
        np.fill_diagonal(A, 0.0)
        return A


@dataclass
class FairEmbedding:
    """Spectral embedding ``H`` (n, k) with ``H^T D H = I`` and ``F^T H = 0``, and the ``k``
    smallest generalised eigenvalues of ``(L, D)`` on the constraint subspace."""

    H: np.ndarray
    eigenvalues: np.ndarray


def _regularised(degree: np.ndarray) -> np.ndarray:
    top = float(degree.max()) if degree.size else 0.0
    floor = max(1e-12 * top, np.finfo(float).tiny)
    return np.asarray(np.maximum(degree, floor))


def _check_k(k: int, n: int, n_con: int) -> None:
    if k < 1 or k > n - n_con - 1:
        raise InvalidInputError(
            f"the embedding dimension k={k} must lie in [1, n - #constraints - 1] = "
            f"[1, {n - n_con - 1}] for n={n} points and {n_con} fairness constraints"
        )


def fair_embedding_dense(A: np.ndarray, F: np.ndarray, k: int) -> FairEmbedding:
    """The paper's Z / Q construction (Alg. 1 lines 5-9). ``O(n^3)`` time, ``O(n^2)`` memory."""
    A = check_array("A", A)
    n = A.shape[0]
    if A.shape != (n, n):
        raise InvalidInputError(f"A must be a square affinity matrix, got shape {A.shape}")
    F = _operand("F", F, n).reshape(n, -1)
    _check_k(k, n, F.shape[1])
    degree = A.sum(axis=1)
    dreg = _regularised(degree)
    L = np.diag(degree) - A
    Z = sla.null_space(F.T) if F.shape[1] else np.eye(n)
    ZDZ = Z.T @ (dreg[:, None] * Z)
    lam, U = np.linalg.eigh((ZDZ + ZDZ.T) / 2)
    Qinv = (U / np.sqrt(lam)) @ U.T
    ZQ = Z @ Qinv
    Mz = ZQ.T @ L @ ZQ
    mu, V = sla.eigh((Mz + Mz.T) / 2, subset_by_index=[0, k - 1])
    return FairEmbedding(H=ZQ @ V, eigenvalues=mu)


def fair_embedding_matrix_free(
    op: AffinityOperator,
    F: np.ndarray,
    k: int,
    *,
    random_state: np.random.RandomState | None = None,
    tol: float = 1e-8,
) -> FairEmbedding:
    """Constrained generalised eigenproblem through ``eigsh`` on ``P (2I - M) P``.

    Memory ``O(n * (k + ncv + g))``; each operator application costs ``O(n)`` per column
    (dc-tree) plus ``O(n d_c)`` (Goodall1).
    """
    n = op.n
    F = _operand("F", F, n).reshape(n, -1)
    _check_k(k, n, F.shape[1])
    degree = op.degree
    dreg = _regularised(degree)
    dinv_sqrt = 1.0 / np.sqrt(dreg)
    if F.shape[1]:
        Qg = sla.orth(F * dinv_sqrt[:, None])
    else:
        Qg = np.zeros((n, 0))

    def project(Y: np.ndarray) -> np.ndarray:
        return Y - Qg @ (Qg.T @ Y) if Qg.shape[1] else Y

    def apply(Y: np.ndarray) -> np.ndarray:
        Y2 = project(Y.reshape(n, -1))
        X = dinv_sqrt[:, None] * Y2
        MY = dinv_sqrt[:, None] * (degree[:, None] * X - op.matvec(X))
        return project(2.0 * Y2 - MY).reshape(Y.shape)

    B = LinearOperator((n, n), matvec=apply, matmat=apply, dtype=np.float64)
    rs = random_state if random_state is not None else np.random.RandomState(0)
    v0 = project(rs.uniform(0.5, 1.5, size=(n, 1)))[:, 0]
    ncv = min(n - 1, max(2 * k + 1, 20))
    try:
        theta, Y = eigsh(B, k=k, which="LA", v0=v0, ncv=ncv, tol=tol, maxiter=max(1000, 10 * n))
    except ArpackNoConvergence:
        logger.warning("eigsh did not converge with ncv=%d; retrying with a larger subspace", ncv)
        ncv = min(n - 1, max(4 * k + 1, 60))
        try:
            theta, Y = eigsh(B, k=k, which="LA", v0=v0, ncv=ncv, tol=max(tol, 1e-6))
        except ArpackNoConvergence as exc:
            raise GnnAuditError(
                f"the constrained eigensolver did not converge for k={k} (n={n}); try "
                "solver='dense' for small data or a different min_samples"
            ) from exc
    order = np.argsort(-theta)
    theta, Y = theta[order], Y[:, order]
    Y = project(Y)
    Y, _ = np.linalg.qr(Y)
    return FairEmbedding(H=dinv_sqrt[:, None] * Y, eigenvalues=2.0 - theta)
