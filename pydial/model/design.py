r"""GLM designs of the model: item-difference rows ``e_i - e_j`` (and the order column) in a chart.

:class:`Design` keeps ``X B`` factored; :func:`pair_information` and :func:`glm_information` give
``X^T diag(d) X``, the Hessian and Fisher information of the binomial logistic loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import cast

import numpy as np
import scipy.sparse as sp

from pydial.model.chart import PullTerms, centering_basis, difference_design, pull_terms, sparse_pull_back

__all__ = ["Design", "calibration_design", "centered_design", "pair_information", "glm_information", "gram", "dense_design",
           "rmatvec"]


@dataclass(frozen=True)
class Design:
    """A GLM design ``X B`` kept factored: sparse rows ``X`` (m x P) times a dense basis ``B`` (P x p)."""

    X: sp.csr_matrix
    basis: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray | None, int] | None = None  # (i, j, a, N) of the rows of X

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, p)``."""
        return self.X.shape[0], self.basis.shape[1]

    def __matmul__(self, beta: np.ndarray) -> np.ndarray:
        """Return ``X B beta``."""
        return self.X @ (self.basis @ beta)

    def rmatvec(self, r: np.ndarray) -> np.ndarray:
        """``(X B)^T r``."""
        return self.basis.T @ np.asarray(self._XT @ r).ravel()

    def pull_back(self, G: np.ndarray) -> np.ndarray:
        """``B^T G B`` (``G`` symmetric), with ``B`` sparse for large ``P`` (``O(P^2)`` for the centering basis)."""
        if self.basis.shape[0] <= _DENSE_PULL_BACK:
            return self.basis.T @ G @ self.basis
        if self._pull_terms is not None:
            return sparse_pull_back(self._pull_terms, G)
        return np.asarray(self._basis_T @ np.asarray(self._basis_T @ G).T).T

    @cached_property
    def _pull_terms(self) -> PullTerms | None:
        return pull_terms(self.basis_csr)

    @cached_property
    def basis_csr(self) -> sp.csr_matrix:
        """``B`` as a sparse matrix."""
        return sp.csr_matrix(self.basis)

    @cached_property
    def _basis_T(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.basis.T)

    @cached_property
    def _XT(self) -> sp.csr_matrix:
        return self.X.T.tocsr()


_DENSE_PULL_BACK = 256
"""Largest ``P`` for which :meth:`Design.pull_back` multiplies densely."""


def centered_design(i: np.ndarray, j: np.ndarray, N: int, a: np.ndarray | None = None,
                    z: np.ndarray | None = None) -> Design:
    """``D T`` in the centered chart ``s = T beta``, then the order column ``a`` and the covariate columns ``z`` when given."""
    extra = [np.asarray(a, float)[:, None]] if a is not None else []
    if z is not None:
        extra.append(np.asarray(z, float).reshape(np.size(i), -1))
    pairs = (np.asarray(i), np.asarray(j), None if a is None else np.asarray(a, float), N) if z is None else None
    return _bordered(i, j, N, centering_basis(N), np.hstack(extra) if extra else None, pairs)


def calibration_design(i: np.ndarray, j: np.ndarray, N: int, M: np.ndarray, z: np.ndarray | None = None) -> Design:
    """``[D_H M, Z_H]``: the people's calibration design in the basis ``M``, coordinates ``c`` (and ``beta_H``)."""
    return _bordered(i, j, N, M, None if z is None else np.asarray(z, float).reshape(np.size(i), -1))


def _bordered(i: np.ndarray, j: np.ndarray, N: int, basis: np.ndarray, E: np.ndarray | None,
              pairs: tuple[np.ndarray, np.ndarray, np.ndarray | None, int] | None = None) -> Design:
    """``[D basis, E]`` as a factored :class:`Design`: the item differences in ``basis``, then the columns ``E``."""
    D = difference_design(i, j, N)
    if E is None:
        return Design(D, basis, pairs)
    q, d = E.shape[1], basis.shape[1]
    full = np.zeros((N + q, d + q))
    full[:N, :d] = basis
    full[N:, d:] = np.eye(q)
    return Design(sp.csr_matrix(sp.hstack([D, sp.csr_matrix(E)])), full, pairs)


def pair_information(i: np.ndarray, j: np.ndarray, a: np.ndarray | None, N: int, d: np.ndarray) -> np.ndarray:
    """``X^T diag(d) X`` of :func:`centered_design`'s rows ``e_i - e_j`` (and ``a``), from the item-pair totals.

    The weighted comparison Laplacian (eq. comparison-laplacian), bordered by the order column's terms.
    """
    W: np.ndarray = np.bincount(i * N + j, weights=d, minlength=N * N).reshape(N, N)
    W += W.T.copy()
    W *= -1.0
    W[np.diag_indices(N)] -= W.sum(axis=1)
    if a is None:
        return W
    da = d * a
    col = np.bincount(i, weights=da, minlength=N) - np.bincount(j, weights=da, minlength=N)
    return np.block([[W, col[:, None]], [col[None, :], np.array([[np.sum(da * a)]])]])


def glm_information(X: "np.ndarray | sp.spmatrix | Design", n: np.ndarray, p: np.ndarray, weight: float = 1.0) -> np.ndarray:
    """``weight * X^T diag(n p (1 - p)) X``: Hessian and Fisher information of the weighted binomial logistic loss."""
    d = weight * n * p * (1 - p)
    if isinstance(X, Design) and X.pairs is not None and X.pairs[3] ** 2 <= 16 * d.size + 250_000:
        i, j, a, N = X.pairs
        return X.pull_back(pair_information(i, j, a, N, d))
    return gram(X, d)


def gram(X: "np.ndarray | sp.spmatrix | Design", d: np.ndarray) -> np.ndarray:
    """``X^T diag(d) X`` (dense p x p) for a dense, sparse or factored design; ``d`` of any sign."""
    if isinstance(X, Design):
        return X.pull_back(gram(X.X, d))
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        return np.asarray((X.T @ (sp.diags(d) @ X)).toarray())
    return (X.T * d) @ X


def dense_design(X: "np.ndarray | sp.spmatrix | Design") -> np.ndarray:
    """``X`` (a dense, sparse or factored design, or a matrix product) as a dense array."""
    if isinstance(X, Design):
        return np.asarray(X.X @ X.basis)
    return cast(sp.spmatrix, X).toarray() if sp.issparse(X) else np.asarray(X, float)


def rmatvec(X: "np.ndarray | sp.spmatrix | Design", r: np.ndarray) -> np.ndarray:
    """``X^T r`` for a dense, sparse or factored design."""
    return X.rmatvec(r) if isinstance(X, Design) else np.asarray(X.T @ r).ravel()


