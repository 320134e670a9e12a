r"""The over-parameterized chart of the structured DIAL model (paper eq. overparam).

Notation (paper Sec. 3.2 and App. "Reduced score-space representation"):

* ``S = A B^T`` with ``A`` (K x (r+1)) the judge loadings and ``B`` (N x (r+1))
  the item side, ``B^T 1 = 0`` (centered scores) and ``A^T 1 = K e_1`` (the
  computational restriction that leaves the gauge ``{G : G e_1 = e_1}``);
* ``b`` (K) the judge order effects (eq. binomial-model-llm);
* the human score ``s = B \tilde c`` where ``\tilde c = (alpha, 0, ..., 0)`` for the
  consensus basis ``M = mu`` (so ``s = alpha B e_1``) and ``\tilde c = c`` for the full
  basis ``M = W`` (``s = B c``).

Because ``A^T 1 = K e_1``, ``B e_1 = S^T 1 / K`` is the mean judge score, i.e. the
consensus direction up to scale, and is invariant to the gauge.

The *reduced* coordinates ``theta`` eliminate the last row of ``A`` and of ``B``
(``A_K = K e_1 - sum_{k<K} A_k``, ``B_N = -sum_{i<N} B_i``): this is the
"centering-reduced chart" in which the paper's optimization box (bounds 10) is
stated.  The *full* coordinates ``phi = (L, B, b)`` stack ``L = [A; \tilde c^T]``
(the human is an extra row of loadings without an order effect), so that every
comparison, LLM or human, has the bilinear linear predictor

.. math:: \eta = L_g^\top (B_i - B_j) + a\, b_g ,

and the map ``theta -> phi`` is affine, ``phi = phi_0 + T theta``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, cast

import numpy as np
from scipy import sparse
from pydial.exceptions import ArgumentError

Calibration = Literal["mu", "W"]
CALIBRATIONS: tuple[str, ...] = ("mu", "W")
DEFAULT_RANK, DEFAULT_CALIBRATION = 1, "mu"
"""The rank and calibration of :func:`pydial.fit` when not given."""


@dataclass(frozen=True)
class Structure:
    r"""Identified quantities of the structured model (Cond. llm-structure).

    ``S = gamma mu^T + U V^T`` with ``1^T mu = 0``, ``N^{-1}||mu||^2 = 1``,
    ``V^T 1 = 0``, ``mu^T V = 0``, ``N^{-1} V^T V = I_r``, ``1^T U = 0``; ``W = [mu, V]``.
    ``U`` and ``V`` are fixed up to rotation by taking singular vectors in decreasing
    order with the largest-magnitude entry of each ``V`` column positive.
    """

    S: np.ndarray
    mu: np.ndarray
    gamma: np.ndarray
    U: np.ndarray
    V: np.ndarray

    @property
    def W(self) -> np.ndarray:
        """``W = [mu, V]`` (N x (r+1)), the full calibration basis of Sec. 3.2."""
        return np.column_stack([self.mu, self.V])

    def basis(self, calibration: str | None) -> np.ndarray:
        """Return the human calibration basis ``M`` (eq. staged-calibrated-estimator).

        ``mu[:, None]`` (N x 1) for ``calibration="mu"``, ``W = [mu, V]`` (N x (r+1)) for ``"W"``.
        """
        if calibration == "mu":
            return self.mu[:, None]
        if calibration == "W":
            return self.W
        raise ArgumentError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")


def fixed_effects(data: Any, shared: bool, calibrated: bool) -> tuple[bool, ...] | None:
    """Return :attr:`Chart.fixed` of a chart of ``data``: the entries of ``beta`` whose covariate is 0 on all the row's cells.

    Rows: one per judge (or one shared by them, fixed where the covariate is 0 on every LLM
    cell), then the people's when ``calibrated``; ``None`` when every entry is free (always
    without covariates), so that charts of such data are unchanged.
    """
    if not data.p:
        return None
    sup = data.covariate_support  # (K + 1, p)
    llm = sup[:-1].any(axis=0, keepdims=True) if shared else sup[:-1]
    rows = np.vstack([llm, sup[-1:]]) if calibrated else llm
    return None if rows.all() else tuple(bool(x) for x in ~rows.ravel())


def difference_design(i: np.ndarray, j: np.ndarray, N: int) -> sparse.csr_matrix:
    """Rows ``(e_i - e_j)^T`` of the item-difference design ``D`` (sparse m x N).

    ``D s`` are the score differences ``s_i - s_j`` of the comparisons' linear predictors
    (eq. binomial-model-human; eq. binomial-model-llm adds the order column).
    """
    m = i.size
    rows = np.repeat(np.arange(m), 2)
    cols = np.column_stack([i, j]).ravel()
    vals = np.tile([1.0, -1.0], m)
    return sparse.csr_matrix((vals, (rows, cols)), shape=(m, N))


def centering_basis(N: int) -> np.ndarray:
    """``T`` (N x N-1) with ``s = T beta`` centered: the last score is minus the sum.

    The basis of every point estimate (the reduced chart of :class:`Chart`, the GLMs of
    :mod:`pydial.estimation.glm`, ``dial.stan``): two nonzero entries per column, so products with
    ``T`` are sparse.  The NUTS programs use :func:`helmert_basis` instead.
    """
    return np.vstack([np.eye(N - 1), -np.ones((1, N - 1))])


def helmert_basis(n: int) -> np.ndarray:
    """Return the ``n x (n-1)`` orthonormal (Helmert) basis of ``{x : 1'x = 0}`` (``centered_basis`` of the Stan programs).

    Used by ``judges.stan`` and ``dial_sample.stan``, which NUTS samples: with ``s = Q z`` and
    ``Q`` orthonormal the isotropic prior ``z ~ normal(0, sigma)`` is exchangeable and the
    posterior of ``z`` is as well conditioned as that of ``s`` (with :func:`centering_basis`,
    ``T'T = I + 1 1'`` has condition number ``n``, which a diagonal mass matrix cannot undo).
    Python code working in those programs' coordinates goes through this function.
    """
    Q = np.zeros((n, max(n - 1, 0)))
    for m in range(1, n):
        h = 1.0 / np.sqrt(m * (m + 1.0))
        Q[:m, m - 1] = h
        Q[m, m - 1] = -m * h
    return Q


def consensus_direction(S: np.ndarray) -> np.ndarray:
    """``mu = sqrt(N) S^T 1 / ||S^T 1||`` (Sec. structured-llm); raises when ``S^T 1 = 0``."""
    N = S.shape[1]
    m = S.sum(axis=0)
    norm = np.linalg.norm(m)
    if norm == 0.0:
        from pydial.exceptions import IdentifiabilityError

        raise IdentifiabilityError("the judges' scores sum to zero (S^T 1 = 0): the consensus direction mu, "
                                   "proportional to S^T 1, is undefined")
    return np.sqrt(N) * m / norm


def consensus_gamma(S: np.ndarray) -> np.ndarray:
    """Consensus loadings ``gamma = N^{-1} S mu`` (Sec. structured-llm)."""
    return S @ consensus_direction(S) / S.shape[1]


def structure_from_S(S: np.ndarray, r: int) -> Structure:
    r"""Recover ``(mu, gamma, U, V)`` from a centered rank-(r+1) score matrix.

    ``mu = sqrt(N) S^T 1 / ||S^T 1||``, ``gamma = N^{-1} S mu``, ``R = S - gamma mu^T``
    and ``U V^T`` the rank-r SVD of ``R`` with ``V = sqrt(N) Q``, ``U = N^{-1/2} P Sigma``
    (paper App. "Reduced score-space representation").
    """
    K, N = S.shape
    mu = consensus_direction(S)
    gamma = S @ mu / N
    R = S - np.outer(gamma, mu)
    P, sv, Qt = np.linalg.svd(R, full_matrices=False)
    P, sv, Q = P[:, :r], sv[:r], Qt[:r].T
    sign = np.sign(Q[np.argmax(np.abs(Q), axis=0), np.arange(r)])
    sign[sign == 0] = 1.0
    Q, P = Q * sign, P * sign
    return Structure(S=S, mu=mu, gamma=gamma, U=P * sv / np.sqrt(N), V=np.sqrt(N) * Q)


@dataclass(frozen=True)
class Chart:
    """Reduced coordinates of the structured DIAL model.

    Parameters
    ----------
    N, K, r : int
        Items, LLM judges, disagreement rank (``S`` has rank ``r + 1``).
    calibration : {"mu", "W"} or None
        Human calibration basis; ``None`` for the LLM-only model (no human loading).
    order : bool
        Whether the order effects ``b`` are free (``False``: fixed at 0, DIAL-noPos).
    p : int
        Comparison covariates ``z`` (0: none).  Every comparison's predictor gains
        ``z' beta_g`` (eq. binomial-model-llm / -human with the style term).
    shared : bool
        One covariate effect ``beta_L`` for all LLM judges (``covariate_effects="shared"``)
        instead of one ``beta_k`` per judge; the people have their own ``beta_H`` either way.
    fixed : tuple of bool or None
        The entries of ``beta`` (row-major, :attr:`beta_rows` x ``p``) fixed at 0: a group whose
        covariate column is 0 on all its cells has no such effect (e.g. the people's and the
        unmapped judges' self-preference, :meth:`pydial.Comparisons.with_self_preference`).
        ``theta`` holds the free entries only, ``phi`` the whole ``beta`` (0 at the fixed
        entries).  ``None``: every entry free (:meth:`for_data` derives it from the data).

    Notes
    -----
    Layout of ``theta``: ``A[:K-1]`` row-major, ``B[:N-1]`` row-major, the
    calibration coordinate (``alpha`` for ``mu``, ``c`` for ``W``), then ``b``, then the
    covariate effects ``beta`` row-major (one row per :attr:`beta_rows`: the judges, or
    the one shared row, then the people's when calibrated; the free entries only, :attr:`beta_free`).
    The full coordinates ``phi = (L, B, b, beta)`` end with the whole ``beta``.
    """

    N: int
    K: int
    r: int
    calibration: Calibration | None = "mu"
    order: bool = True
    p: int = 0
    shared: bool = False
    fixed: tuple[bool, ...] | None = None

    @classmethod
    def for_data(cls, data: Any, rank: int, calibration: Calibration | str | None, order: bool = True,
                 shared: bool = False) -> "Chart":
        """Return the chart of a :class:`~pydial.Comparisons`' ``N``, ``K`` and covariates (``p = data.p``).

        The fixed entries of ``beta`` are those of covariates that are 0 on all of a row's cells
        (:attr:`~pydial.Comparisons.covariate_support`; the shared row: on all LLM cells).
        """
        return cls(data.N, data.K, rank, cast(Calibration | None, calibration), order, data.p, shared,
                   fixed_effects(data, shared, calibration is not None))

    def __post_init__(self) -> None:
        """Check the calibration option and the rank against ``K`` and ``N``."""
        if self.calibration is not None and self.calibration not in CALIBRATIONS:
            raise ArgumentError(f"calibration must be one of {CALIBRATIONS} or None, got {self.calibration!r}")
        if not 0 <= self.r <= self.K - 1 or self.r + 1 > self.N - 1:
            raise ArgumentError(
                f"rank r={self.r} needs r <= K-1 = {self.K - 1} and r+1 <= N-1 = {self.N - 1} (structured LLM representation)"
            )
        if self.fixed is not None and len(self.fixed) != self.beta_rows * self.p:
            raise ArgumentError(f"fixed must mark the {self.beta_rows * self.p} entries of beta, got {len(self.fixed)}")

    # ----------------------------------------------------------------- sizes
    @property
    def q(self) -> int:
        """Columns of A and B: ``r + 1``."""
        return self.r + 1

    @property
    def d(self) -> int:
        """Calibration dimension: 1 for ``mu``, ``r + 1`` for ``W``, 0 if LLM-only."""
        return {None: 0, "mu": 1, "W": self.r + 1}[self.calibration]

    @property
    def rows(self) -> int:
        """Rows of the loading matrix L (K judges plus the human if calibrated)."""
        return self.K + (self.calibration is not None)

    @property
    def n_beta_llm(self) -> int:
        """Rows of LLM covariate effects: 1 if :attr:`shared`, else ``K``."""
        return 1 if self.shared else self.K

    @property
    def beta_rows(self) -> int:
        """Rows of covariate effects ``beta``: the LLM rows, then the people's if calibrated (0 without covariates)."""
        return (self.n_beta_llm + (self.calibration is not None)) if self.p else 0

    @cached_property
    def beta_row(self) -> np.ndarray:
        """The row of ``beta`` of each loading row ``g`` (judges ``0..K-1``, people ``K``)."""
        llm = np.zeros(self.K, np.int64) if self.shared else np.arange(self.K)
        return np.append(llm, self.n_beta_llm) if self.calibration is not None else llm

    @cached_property
    def beta_free(self) -> np.ndarray:
        """Bool mask of the free entries of ``beta`` (row-major, :attr:`beta_rows` x ``p``): not :attr:`fixed`."""
        n = self.beta_rows * self.p
        return np.ones(n, bool) if self.fixed is None else ~np.asarray(self.fixed, bool)

    @cached_property
    def beta_index(self) -> np.ndarray:
        """Positions in the row-major ``beta`` of its free entries, the ``beta`` block of ``theta`` in order."""
        return np.flatnonzero(self.beta_free)

    @cached_property
    def sizes(self) -> dict[str, int]:
        """Number of reduced coordinates of each block ``A, B, c, b, beta``."""
        return {
            "A": (self.K - 1) * self.q,
            "B": (self.N - 1) * self.q,
            "c": self.d,
            "b": self.K if self.order else 0,
            "beta": int(self.beta_index.size),
        }

    @cached_property
    def slices(self) -> dict[str, slice]:
        """Position of each block ``A, B, c, b, beta`` in ``theta``."""
        out, start = {}, 0
        for k, n in self.sizes.items():
            out[k] = slice(start, start + n)
            start += n
        return out

    @property
    def dim(self) -> int:
        """Dimension of ``theta``."""
        return sum(self.sizes.values())

    @cached_property
    def llm_coordinates(self) -> np.ndarray:
        """Positions in ``theta`` of every block but the people's: ``c`` and ``beta_H``.

        In that order they are the coordinates of the LLM-only chart with the same ``N, K, r,
        order, p, shared`` (``calibration=None``), and the LLM loss depends on them alone.
        """
        return np.setdiff1d(np.arange(self.dim), self.human_coordinates)

    @cached_property
    def human_coordinates(self) -> np.ndarray:
        """Positions in ``theta`` of the people's calibration: ``c``, then ``beta_H`` (the free entries of the last row)."""
        c, be = self.slices["c"], self.slices["beta"]
        n_h = int(self.beta_free[-self.p:].sum()) if self.calibration is not None and self.p else 0
        return np.r_[np.arange(c.start, c.stop), np.arange(be.stop - n_h, be.stop)]

    @property
    def n_gauge(self) -> int:
        """Exact invariances of the chart: ``r (r + 1)`` (gauge with ``G e_1 = e_1``)."""
        return self.r * (self.r + 1)

    @property
    def dim_full(self) -> int:
        """Dimension of the full coordinates ``phi = (L, B, b, beta)``."""
        return self.rows * self.q + self.N * self.q + self.K + self.beta_rows * self.p

    # full layout offsets
    @property
    def off_B(self) -> int:
        """Offset of ``B`` in ``phi``."""
        return self.rows * self.q

    @property
    def off_b(self) -> int:
        """Offset of ``b`` in ``phi``."""
        return self.rows * self.q + self.N * self.q

    @property
    def off_beta(self) -> int:
        """Offset of ``beta`` in ``phi``."""
        return self.off_b + self.K

    @cached_property
    def T(self) -> np.ndarray:
        """The linear part of the affine map ``theta -> phi`` (dim_full x dim)."""
        q, K, N = self.q, self.K, self.N
        T = np.zeros((self.dim_full, self.dim))
        sA, sB, sc, sb = (self.slices[k] for k in ("A", "B", "c", "b"))
        for k in range(K - 1):
            for l in range(q):
                col = sA.start + k * q + l
                T[k * q + l, col] = 1.0
                T[(K - 1) * q + l, col] = -1.0
        for i in range(N - 1):
            for l in range(q):
                col = sB.start + i * q + l
                T[self.off_B + i * q + l, col] = 1.0
                T[self.off_B + (N - 1) * q + l, col] = -1.0
        if self.calibration == "mu":
            T[K * q, sc.start] = 1.0
        elif self.calibration == "W":
            for l in range(q):
                T[K * q + l, sc.start + l] = 1.0
        if self.order:
            for k in range(K):
                T[self.off_b + k, sb.start + k] = 1.0
        sbeta = self.slices["beta"]
        T[self.off_beta + self.beta_index, np.arange(sbeta.start, sbeta.stop)] = 1.0
        return T

    @cached_property
    def T_sparse(self) -> "sparse.csr_matrix":
        """:attr:`T` as a sparse matrix (about two entries per column).

        Cell Jacobians mapped to the reduced chart then stay sparse.
        """
        return sparse.csr_matrix(self.T)

    def pull_back(self, H_full: np.ndarray) -> np.ndarray:
        """``T^T H T`` for a dense ``H`` in the full coordinates (sparse ``T``)."""
        Ts = self.T_sparse
        X = np.asarray(Ts.T @ H_full)
        return np.asarray(Ts.T @ X.T).T

    @cached_property
    def phi0(self) -> np.ndarray:
        """The constant part of ``theta -> phi``: ``A_K`` carries ``K e_1``."""
        phi = np.zeros(self.dim_full)
        phi[(self.K - 1) * self.q] = float(self.K)
        return phi

    # ------------------------------------------------------------------ maps
    def to_full(self, theta: np.ndarray) -> np.ndarray:
        """Full coordinates ``phi = phi_0 + T theta`` (``L = [A; ctilde^T]``, ``B``, ``b``)."""
        return self.phi0 + self.T_sparse @ np.asarray(theta, dtype=float)

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Split ``theta`` into ``(A, B, ctilde, b)`` with ``ctilde`` the human loading row (length r+1)."""
        phi = self.to_full(np.asarray(theta, dtype=float))
        q = self.q
        L = phi[: self.off_B].reshape(self.rows, q)
        B = phi[self.off_B : self.off_b].reshape(self.N, q)
        b = phi[self.off_b : self.off_beta]
        ct = L[self.K] if self.calibration is not None else np.zeros(q)
        return L[: self.K], B, ct, b

    def covariate_effects(self, theta: np.ndarray) -> np.ndarray:
        """Return the covariate effects ``beta`` (:attr:`beta_rows` x ``p``): the judges' (or the shared row), then ``beta_H``.

        The fixed entries (:attr:`fixed`) are 0.
        """
        free = np.asarray(theta, float)[self.slices["beta"]]
        if self.fixed is None:
            return free.reshape(self.beta_rows, self.p)
        out = np.zeros(self.beta_rows * self.p)
        out[self.beta_index] = free
        return out.reshape(self.beta_rows, self.p)

    def human_effects(self, theta: np.ndarray) -> np.ndarray | None:
        """``beta_H``, the people's covariate effects (``None`` without covariates or without calibration)."""
        return self.covariate_effects(theta)[-1] if self.p and self.calibration is not None else None

    def target_jacobian(self, theta: np.ndarray) -> np.ndarray:
        """``d (s, beta) / d theta``: the calibrated scores (:meth:`score_jacobian`), then every free covariate effect."""
        return np.vstack([self.score_jacobian(theta), np.eye(self.dim)[self.slices["beta"]]])

    def pack(self, A: np.ndarray, B: np.ndarray, c: np.ndarray | float | None = None, b: np.ndarray | None = None,
             beta: np.ndarray | None = None) -> np.ndarray:
        """Reduced coordinates of ``(A, B, c, b, beta)``; ``c`` is ``alpha`` for ``mu``; ``beta`` as :meth:`covariate_effects`.

        ``A`` must satisfy ``A^T 1 = K e_1`` and ``B^T 1 = 0`` (checked).
        """
        A, B = np.asarray(A, float), np.asarray(B, float)
        if not np.allclose(A.sum(0), self.K * np.eye(self.q)[0], atol=1e-9 * self.K * max(1.0, np.abs(A).max())):
            raise ArgumentError("A must satisfy A^T 1 = K e_1")
        if not np.allclose(B.sum(0), 0.0, atol=1e-8 * max(1.0, np.abs(B).max())):
            raise ArgumentError("B must satisfy B^T 1 = 0")
        theta = np.zeros(self.dim)
        theta[self.slices["A"]] = A[: self.K - 1].ravel()
        theta[self.slices["B"]] = B[: self.N - 1].ravel()
        if self.d:
            theta[self.slices["c"]] = np.atleast_1d(np.asarray(c, float))[: self.d]
        if self.order and b is not None:
            theta[self.slices["b"]] = b
        if self.p and beta is not None:
            theta[self.slices["beta"]] = np.asarray(beta, float).ravel()[self.beta_index]
        return theta

    def scores(self, theta: np.ndarray) -> np.ndarray:
        """Calibrated human score ``s = B ctilde`` (centered)."""
        _, B, ct, _ = self.unpack(theta)
        return B @ ct

    def S(self, theta: np.ndarray) -> np.ndarray:
        """Judge score matrix ``S = A B^T`` (K x N)."""
        A, B, _, _ = self.unpack(theta)
        return A @ B.T

    def order_effects(self, theta: np.ndarray) -> np.ndarray:
        """Judge order effects ``b`` (eq. binomial-model-llm; zeros when ``order=False``)."""
        return self.unpack(theta)[3]

    def score_jacobian(self, theta: np.ndarray) -> np.ndarray:
        """``ds / dtheta`` (N x dim) of ``s = B ctilde``."""
        _, B, ct, _ = self.unpack(theta)
        J = np.zeros((self.N, self.dim_full))
        q = self.q
        for l in range(q):
            J[np.arange(self.N), self.off_B + np.arange(self.N) * q + l] = ct[l]
        if self.calibration is not None:
            J[:, self.K * q : (self.K + 1) * q] = B
        return J @ self.T

    def structure(self, theta: np.ndarray) -> Structure:
        """``(mu, gamma, U, V)`` of ``S = A B^T`` (Cond. llm-structure, :func:`structure_from_S`)."""
        return structure_from_S(self.S(theta), self.r)

    def calibration_coordinates(self, theta: np.ndarray) -> np.ndarray:
        """``c_H`` relative to the normalized basis ``M`` (``mu`` or ``W = [mu, V]``)."""
        st = self.structure(theta)
        M = st.basis(self.calibration)
        return M.T @ self.scores(theta) / self.N

    def from_structure(self, st: Structure, c: np.ndarray | float | None = None, b: np.ndarray | None = None,
                       beta: np.ndarray | None = None) -> np.ndarray:
        """Reduced coordinates of ``S = gamma mu^T + U V^T`` in the restricted gauge.

        ``A = [gamma K / 1^T gamma, U]`` and ``B = [mu 1^T gamma / K, V]``; ``c`` is
        given relative to the normalized basis ``M`` (as returned by
        :meth:`calibration_coordinates`); ``beta`` the covariate effects (:meth:`covariate_effects`).
        """
        g = st.gamma.sum()  # = ||S^T 1|| / sqrt(N) >= 0
        if not g > 1e-8 * self.K * max(np.abs(st.gamma).max(), 1e-300):
            from pydial.exceptions import IdentifiabilityError

            raise IdentifiabilityError(
                "the judges' consensus cancels (1^T gamma = ||S^T 1|| / sqrt(N) is numerically 0): the consensus "
                "direction mu is undefined (the structured LLM representation needs 1^T gamma > 0)"
            )
        A = np.column_stack([st.gamma * self.K / g, st.U])
        B = np.column_stack([st.mu * g / self.K, st.V])
        cc: float | np.ndarray | None = None
        if self.calibration == "mu" and c is not None:
            cc = float(np.atleast_1d(c)[0]) * self.K / float(g)  # s = c mu = alpha B e1
        elif self.calibration == "W" and c is not None:
            cc = np.asarray(c, float).copy()
            cc[0] *= self.K / g
        return self.pack(A, B, cc, b, beta)

    def gauge_directions(self, theta: np.ndarray) -> np.ndarray:
        """Tangents of the ``r (r + 1)`` gauge orbits (eq. gauge) at ``theta`` (dim x r(r+1), columns not normalized).

        The gauge ``A -> A G``, ``B -> B G^{-T}``, ``ctilde -> G^T ctilde`` with
        ``G^T e_1 = e_1`` leaves ``(s, S, b)`` unchanged; for ``G = I + t e_p e_l^T``
        (``p >= 1``) the tangent is ``dA = A e_p e_l^T``, ``dB = -B e_l e_p^T``,
        ``dctilde = ctilde_p e_l``.  The loss is flat along them, so its gradient is
        orthogonal to them and, at a stationary point, they span null directions of the Hessian.
        """
        A, B, ct, _ = self.unpack(theta)
        q, K, N = self.q, self.K, self.N
        sA, sB, sc = self.slices["A"], self.slices["B"], self.slices["c"]
        Z = np.zeros((self.dim, self.n_gauge))
        t = 0
        for p in range(1, q):
            for l in range(q):
                dA = np.zeros((K, q))
                dA[:, l] = A[:, p]
                dB = np.zeros((N, q))
                dB[:, p] = -B[:, l]
                Z[sA, t] = dA[: K - 1].ravel()
                Z[sB, t] = dB[: N - 1].ravel()
                if self.calibration == "W":
                    Z[sc.start + l, t] = ct[p]
                t += 1
        return Z

    def canonical(self, theta: np.ndarray) -> np.ndarray:
        """Return a gauge-equivalent point with ``B`` in the canonical form of :meth:`from_structure`.

        Same ``(s, S, b)``; used to keep iterates away from the box through gauge drift.
        """
        st = self.structure(theta)
        b = self.order_effects(theta) if self.order else None
        c = self.calibration_coordinates(theta) if self.calibration is not None else None
        return self.from_structure(st, c, b, self.covariate_effects(theta) if self.p else None)
