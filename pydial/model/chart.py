r"""The over-parameterized chart of the structured DIAL model (paper eq. overparam).

``S = A B^T`` with judge loadings ``A`` (K x (r+1)), ``A^T 1 = K e_1``, and item side ``B`` (N x (r+1)),
``B^T 1 = 0``, so ``B e_1 = S^T 1 / K`` is the gauge-invariant consensus direction; ``b`` the order
effects; the human score ``s = B c~`` with ``c~ = (alpha, 0, ..., 0)`` for ``M = mu`` and ``c~ = c`` for
``M = W``.  The reduced coordinates ``theta`` drop the last rows of ``A`` and ``B`` (the chart of the
optimization box); the full ones ``phi = (L, B, b, beta)``, ``L = [A; c~^T]``, give every comparison the
predictor ``eta = L_g^T (B_i - B_j) + a b_g``, and ``phi = phi_0 + T theta``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, cast

import numpy as np
from scipy import sparse

from pydial.exceptions import ArgumentError, IdentifiabilityError
from pydial.resources import check_choice

Calibration = Literal["mu", "W"]
CALIBRATIONS: tuple[str, ...] = ("mu", "W")
DEFAULT_RANK, DEFAULT_CALIBRATION = 1, "mu"
"""The rank and calibration of :func:`pydial.fit` when not given."""


@dataclass(frozen=True)
class Structure:
    r"""Identified quantities ``S = gamma mu^T + U V^T`` of the structured model (Cond. llm-structure).

    ``1^T mu = 0``, ``||mu||^2 = N``, ``V^T [1, mu] = 0``, ``V^T V = N I_r``, ``1^T U = 0``; singular vectors in
    decreasing order, each ``V`` column's largest-magnitude entry positive.
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
        """Return the human calibration basis ``M``: ``mu[:, None]`` for ``"mu"``, ``W = [mu, V]`` for ``"W"``."""
        return self.mu[:, None] if check_choice("calibration", calibration, CALIBRATIONS) == "mu" else self.W


def fixed_effects(data: Any, shared: bool, calibrated: bool) -> tuple[bool, ...] | None:
    """:attr:`Chart.fixed` of a chart of ``data``: the entries of ``beta`` whose covariate is 0 on all the row's cells.

    Rows: the judges (or one shared row), then the people's when ``calibrated``; None when all are free.
    """
    if not data.p:
        return None
    sup = data.covariate_support  # (K + 1, p)
    llm = sup[:-1].any(axis=0, keepdims=True) if shared else sup[:-1]
    rows = np.vstack([llm, sup[-1:]]) if calibrated else llm
    return None if rows.all() else tuple(bool(x) for x in ~rows.ravel())


def difference_design(i: np.ndarray, j: np.ndarray, N: int) -> sparse.csr_matrix:
    """Rows ``(e_i - e_j)^T`` of the item-difference design ``D`` (sparse m x N)."""
    m = i.size
    rows = np.repeat(np.arange(m), 2)
    cols = np.column_stack([i, j]).ravel()
    vals = np.tile([1.0, -1.0], m)
    return sparse.csr_matrix((vals, (rows, cols)), shape=(m, N))


def centering_basis(N: int) -> np.ndarray:
    """``T`` (N x N-1) with ``s = T beta`` centered (the last score minus the sum): the basis of every point estimate."""
    return np.vstack([np.eye(N - 1), -np.ones((1, N - 1))])


def helmert_basis(n: int) -> np.ndarray:
    """Return the ``n x (n-1)`` orthonormal (Helmert) basis of ``{x : 1'x = 0}`` (the NUTS programs' ``centered_basis``).

    With ``s = Q z`` the isotropic prior on ``z`` is exchangeable and well conditioned (``T'T`` of
    :func:`centering_basis` has condition number ``n``).
    """
    m = np.arange(1, n)
    h = 1.0 / np.sqrt(m * (m + 1.0))
    Q = np.triu(np.ones((n, max(n - 1, 0)))) * h  # column m - 1: h on the first m rows
    Q[m, m - 1] = -m * h
    return Q


def consensus_direction(S: np.ndarray) -> np.ndarray:
    """``mu = sqrt(N) S^T 1 / ||S^T 1||`` (Sec. structured-llm); raises when ``S^T 1 = 0``."""
    m = S.sum(axis=0)
    norm = np.linalg.norm(m)
    if norm == 0.0:
        raise IdentifiabilityError("the judges' scores sum to zero (S^T 1 = 0): the consensus direction mu, "
                                   "proportional to S^T 1, is undefined")
    return np.sqrt(S.shape[1]) * m / norm


def consensus_gamma(S: np.ndarray) -> np.ndarray:
    """Consensus loadings ``gamma = N^{-1} S mu`` (Sec. structured-llm)."""
    return S @ consensus_direction(S) / S.shape[1]


def structure_from_S(S: np.ndarray, r: int) -> Structure:
    r"""Recover ``(mu, gamma, U, V)`` from a centered rank-(r+1) S: ``gamma = S mu / N``, the rank-r SVD of ``S - gamma mu^T``.

    ``V = sqrt(N) Q``, ``U = N^{-1/2} P Sigma`` (App. "Reduced score-space representation").
    """
    K, N = S.shape
    mu = consensus_direction(S)
    gamma = S @ mu / N
    R = S - np.outer(gamma, mu)
    P, sv, Qt = np.linalg.svd(R, full_matrices=False)
    P, sv, Q = P[:, :r], sv[:r], Qt[:r].T
    if r and np.abs(Q.sum(0)).max() > 1e-10:  # a zero singular value's vector may lean on 1: keep V off it
        Qc = np.linalg.qr(np.column_stack([np.ones(N), Q]))[0][:, 1:]
        Q = Qc * np.where(np.sum(Qc * Q, axis=0) < 0, -1.0, 1.0)  # the signs of the paired columns of P
    sign = np.sign(Q[np.argmax(np.abs(Q), axis=0), np.arange(r)])
    sign[sign == 0] = 1.0
    Q, P = Q * sign, P * sign
    return Structure(S=S, mu=mu, gamma=gamma, U=P * sv / np.sqrt(N), V=np.sqrt(N) * Q)


PullTerms = tuple[np.ndarray, np.ndarray, list[tuple[Any, int, float]]]
"""A sparse ``T``'s columns as ``(first rows, their values, [(columns, second row, value)])`` (:func:`pull_terms`)."""


def pull_terms(T: "sparse.spmatrix") -> "PullTerms | None":
    """Return :data:`PullTerms` of ``T`` (``P x p``), None when a column has no entry or more than two."""
    Tc = sparse.csc_matrix(T)
    Tc.sort_indices()
    nnz = np.diff(Tc.indptr)
    if nnz.size and (nnz.min() < 1 or nnz.max() > 2):
        return None
    r0, v0 = Tc.indices[Tc.indptr[:-1]], Tc.data[Tc.indptr[:-1]]
    two = np.flatnonzero(nnz == 2)
    r1, v1 = Tc.indices[Tc.indptr[two] + 1], Tc.data[Tc.indptr[two] + 1]
    groups: list[tuple[Any, int, float]] = []
    for r, v in sorted(set(zip(r1.tolist(), v1.tolist()))):
        cols = two[(r1 == r) & (v1 == v)]
        step = int(cols[1] - cols[0]) if cols.size > 1 else 1
        regular = step > 0 and bool(np.all(np.diff(cols) == step))  # a strided slice: updated in place
        groups.append((slice(int(cols[0]), int(cols[-1]) + 1, step) if regular else cols, r, v))
    return r0, v0, groups


def sparse_pull_back(terms: PullTerms, G: np.ndarray, work: "tuple[np.ndarray, np.ndarray] | None" = None) -> np.ndarray:
    """``T^T G T`` from :func:`pull_terms`: the sums of scipy's sparse products in their order (signed zeros included).

    ``work``: arrays to form ``T^T G`` (``p x P``) and the result in (at least ``p^2`` entries, ``G``'s own allowed).
    """
    r0, v0, groups = terms
    ones = bool(np.all(v0 == 1.0))
    p = r0.size
    # rows of T^T G: v0 G[r0] (+ v1 G[r1]), then + 0.0 (the products' zero start)
    X = np.take(G, r0, axis=0, out=None if work is None else work[0], mode="clip")
    if not ones:
        X *= v0[:, None]
    for cols, r, v in groups:
        X[cols] += v * G[r]
    X += 0.0
    out = np.take(X, r0, axis=1, out=None if work is None else work[1].reshape(-1)[: p * p].reshape(p, p), mode="clip")
    if not ones:
        out *= v0
    for cols, r, v in groups:
        out[:, cols] += (v * X[:, r])[:, None]
    out += 0.0
    return out


@dataclass(frozen=True)
class Chart:
    """Reduced coordinates of the structured DIAL model: ``N`` items, ``K`` judges, rank ``r``.

    ``calibration`` the human basis (None: LLM-only), ``order`` whether ``b`` is free, ``p`` covariates
    with one effect row per judge (or one ``shared``) plus the people's, ``fixed`` the entries of ``beta``
    fixed at 0 (None: all free; :meth:`for_data` derives them).  ``theta`` is ``A[:K-1]``, ``B[:N-1]``
    (row-major), ``c``, ``b``, then the free entries of ``beta``; ``phi = (L, B, b, beta)``.
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
        """Return the chart of a :class:`~pydial.Comparisons` (``N``, ``K``, ``p`` and the fixed entries of ``beta``)."""
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
        return np.ones(self.beta_rows * self.p, bool) if self.fixed is None else ~np.asarray(self.fixed, bool)

    @cached_property
    def beta_index(self) -> np.ndarray:
        """Positions in the row-major ``beta`` of its free entries, the ``beta`` block of ``theta`` in order."""
        return np.flatnonzero(self.beta_free)

    @cached_property
    def sizes(self) -> dict[str, int]:
        """Number of reduced coordinates of each block ``A, B, c, b, beta``."""
        return {"A": (self.K - 1) * self.q, "B": (self.N - 1) * self.q, "c": self.d, "b": self.K if self.order else 0,
                "beta": int(self.beta_index.size)}

    @cached_property
    def slices(self) -> dict[str, slice]:
        """Position of each block ``A, B, c, b, beta`` in ``theta``."""
        ends = np.cumsum(list(self.sizes.values()))
        return {k: slice(int(end - n), int(end)) for (k, n), end in zip(self.sizes.items(), ends)}

    @property
    def dim(self) -> int:
        """Dimension of ``theta``."""
        return sum(self.sizes.values())

    @cached_property
    def llm_coordinates(self) -> np.ndarray:
        """Positions in ``theta`` of every block but the people's: the LLM-only chart's coordinates, in order."""
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
        q = self.q
        T = np.zeros((self.dim_full, self.dim))
        cols = {k: np.arange(s.start, s.stop) for k, s in self.slices.items()}
        for row0, k, n in ((0, "A", self.K), (self.off_B, "B", self.N)):  # the last row is minus the others' sum
            T[row0 + cols[k] - cols[k][:1], cols[k]] = 1.0
            T[row0 + (n - 1) * q + np.arange(cols[k].size) % q, cols[k]] = -1.0
        for rows, k in ((self.K * q + np.arange(self.d), "c"), (self.off_b + np.arange(self.sizes["b"]), "b"),
                        (self.off_beta + self.beta_index, "beta")):
            T[rows, cols[k]] = 1.0
        return T

    @cached_property
    def T_sparse(self) -> "sparse.csr_matrix":
        """:attr:`T` as a sparse matrix (about two entries per column)."""
        return sparse.csr_matrix(self.T)

    def pull_back(self, H_full: np.ndarray, work: "tuple[np.ndarray, np.ndarray] | None" = None) -> np.ndarray:
        """``T^T H T`` for a dense ``H`` in the full coordinates (:func:`sparse_pull_back`, in ``work`` if given)."""
        terms = self._pull_terms
        assert terms is not None  # the chart's T has one or two entries per column
        return sparse_pull_back(terms, H_full, work)

    @cached_property
    def _pull_terms(self) -> "PullTerms | None":
        return pull_terms(self.T_sparse)

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
        ct = L[self.K] if self.calibration is not None else np.zeros(q)
        return L[: self.K], B, ct, phi[self.off_b : self.off_beta]

    def covariate_effects(self, theta: np.ndarray) -> np.ndarray:
        """Return the covariate effects ``beta`` (:attr:`beta_rows` x ``p``), the fixed entries 0."""
        out = np.zeros(self.beta_rows * self.p)
        out[self.beta_index] = np.asarray(theta, float)[self.slices["beta"]]
        return out.reshape(self.beta_rows, self.p)

    def human_effects(self, theta: np.ndarray) -> np.ndarray | None:
        """``beta_H``, the people's covariate effects (``None`` without covariates or without calibration)."""
        return self.covariate_effects(theta)[-1] if self.p and self.calibration is not None else None

    def target_jacobian(self, theta: np.ndarray) -> np.ndarray:
        """``d (s, beta) / d theta``: the calibrated scores (:meth:`score_jacobian`), then every free covariate effect."""
        return np.vstack([self.score_jacobian(theta), np.eye(self.dim)[self.slices["beta"]]])

    def pack(self, A: np.ndarray, B: np.ndarray, c: np.ndarray | float | None = None, b: np.ndarray | None = None,
             beta: np.ndarray | None = None) -> np.ndarray:
        """Pack ``(A, B, c, b, beta)`` into ``theta`` (``c``: ``alpha`` for ``mu``); checks ``A^T 1 = K e_1``, ``B^T 1 = 0``."""
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
        J[:, self.off_B : self.off_b].reshape(self.N, self.N, q)[np.arange(self.N), np.arange(self.N)] = ct
        if self.calibration is not None:
            J[:, self.K * q : (self.K + 1) * q] = B
        return J @ self.T

    def structure(self, theta: np.ndarray) -> Structure:
        """``(mu, gamma, U, V)`` of ``S = A B^T`` (Cond. llm-structure, :func:`structure_from_S`)."""
        return structure_from_S(self.S(theta), self.r)

    def calibration_coordinates(self, theta: np.ndarray) -> np.ndarray:
        """``c_H`` relative to the normalized basis ``M`` (``mu`` or ``W = [mu, V]``)."""
        M = self.structure(theta).basis(self.calibration)
        return M.T @ self.scores(theta) / self.N

    def from_structure(self, st: Structure, c: np.ndarray | float | None = None, b: np.ndarray | None = None,
                       beta: np.ndarray | None = None) -> np.ndarray:
        """Reduced coordinates of ``S = gamma mu^T + U V^T`` in the restricted gauge.

        ``A = [gamma K / 1^T gamma, U]``, ``B = [mu 1^T gamma / K, V]``; ``c`` relative to the normalized ``M``.
        """
        g = st.gamma.sum()  # = ||S^T 1|| / sqrt(N) >= 0
        if not g > 1e-8 * self.K * max(np.abs(st.gamma).max(), 1e-300):
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
        """Tangents of the ``r (r + 1)`` gauge orbits at ``theta`` (dim x r(r+1), not normalized; eq. gauge).

        For ``G = I + t e_p e_l^T`` (``p >= 1``): ``dA = A e_p e_l^T``, ``dB = -B e_l e_p^T``, ``dc~ = c~_p e_l``.
        """
        A, B, ct, _ = self.unpack(theta)
        q = self.q
        Z = np.zeros((self.dim, self.n_gauge))
        ZA = Z[self.slices["A"]].reshape(self.K - 1, q, self.n_gauge)  # views of Z
        ZB = Z[self.slices["B"]].reshape(self.N - 1, q, self.n_gauge)
        for p in range(1, q):
            for l in range(q):
                t = (p - 1) * q + l
                ZA[:, l, t] = A[:-1, p]
                ZB[:, p, t] = -B[:-1, l]
                if self.calibration == "W":
                    Z[self.slices["c"].start + l, t] = ct[p]
        return Z

    def canonical(self, theta: np.ndarray) -> np.ndarray:
        """Return a gauge-equivalent point in the canonical form of :meth:`from_structure` (keeps iterates off the box)."""
        b = self.order_effects(theta) if self.order else None
        c = self.calibration_coordinates(theta) if self.calibration is not None else None
        return self.from_structure(self.structure(theta), c, b, self.covariate_effects(theta) if self.p else None)
