r"""Bias-reducing (Firth / Jeffreys-prior) penalty of the paired-comparison likelihoods (``penalty="firth"``).

The term added to a loss is ``P(eta) = -omega/2 log det(X^T diag{w(eta)} X)``, ``w = n p (1 - p)``, with
``dP/d eta_c = -omega/2 w'_c Q_cc`` and ``d^2P/d eta_c d eta_e = -omega/2 [w''_c Q_cc delta_ce - w'_c w'_e Q_ce^2]``,
``Q = X I^{-1} X^T``, ``w' = w (1 - 2p)``, ``w'' = w (1 - 6p + 6p^2)``; for dial-ada at finite ``lambda`` it is
the calibration prior :class:`CalibrationFirthPenalty`.  Inference uses the unpenalized information.

References
----------
Firth, D. (1993). Bias reduction of maximum likelihood estimates. *Biometrika* 80, 27-38.
Kosmidis, I. and Firth, D. (2021). Jeffreys-prior penalty, finiteness and shrinkage in
binomial-response generalized linear models. *Biometrika* 108, 71-82.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from pydial.exceptions import ArgumentError
from pydial.resources import check_choice
from pydial.model.design import dense_design
from pydial.model.families import BINARY, Family

PENALTIES: tuple[str | None, ...] = (None, "firth")


def check_penalty(penalty: str | None) -> str | None:
    """Validate the ``penalty`` argument of :func:`pydial.fit`."""
    return check_choice("penalty", penalty, PENALTIES)


def _binary_only(pen: Any, what: str) -> None:
    """Raise for a tie family: ``pen.what`` is the binary family's closed form."""
    if not pen.family.is_binary:
        has = "value_grad and terms" if isinstance(pen, FirthPenalty) else "value_grad"
        raise ArgumentError(f"{type(pen).__name__}.{what} is the binary family's closed form; "
                            f"the {pen.family.name} family has {has}")


def _binary_information(X: np.ndarray, n: np.ndarray,
                        eta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(w, w', w'', I)`` of the binary fit: ``w = n p (1 - p)``, its derivatives in ``eta``, ``I = X^T diag(w) X``."""
    p = expit(eta)
    w = n * p * (1 - p)
    return w, w * (1 - 2 * p), w * (1 - 6 * p + 6 * p * p), (X.T * w) @ X


@dataclass(frozen=True)
class FirthPenalty:
    r"""The Jeffreys prior ``P(x) = -omega/2 log det I(x)`` of a paired-comparison GLM ``eta = X beta`` of any family.

    ``x = beta`` (binary, closed-form Hessian) or ``(beta, log nu)`` (tie family, information
    ``sum_c j_c^T I_c j_c`` in the channels ``(eta_c, l)``, exact gradient and central-difference Hessian);
    ``X`` (m, q) of full column rank, ``n`` comparisons per cell, ``weight`` the loss normalization ``omega``.
    """

    X: np.ndarray
    n: np.ndarray
    weight: float = 1.0
    family: Family = BINARY

    def information(self, eta: np.ndarray) -> np.ndarray:
        """Unnormalized Fisher information ``X^T diag(n p (1-p)) X`` of the binary family at ``eta``."""
        _binary_only(self, "information")
        return _binary_information(self.X, self.n, eta)[3]

    def value(self, x: np.ndarray | None, eta: np.ndarray | None = None) -> float:
        """``P(x)``, ``+inf`` where the information is singular; ``eta``: the binary family's ``X beta`` when formed."""
        if not self.family.is_binary:
            assert x is not None, "a tie family's penalty takes x = (beta, l)"
            return self.value_grad(x)[0]
        if eta is None:
            assert x is not None, "the penalty takes x or eta"
            eta = self.X @ x
        sign, logdet = np.linalg.slogdet(self.information(eta))
        return float(-0.5 * self.weight * logdet) if sign > 0 else np.inf

    def value_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """``P(x)`` and its exact gradient in ``x`` (:func:`information_terms`)."""
        p = self.X.shape[1]
        l = None if self.family.is_binary else float(x[p])
        t = information_terms(self.family, self.X, self.n, self.X @ x[:p], l)
        if t is None:
            return np.inf, np.full(x.size, np.nan)
        logdet, g_eta, g_l, _ = t
        c = -0.5 * self.weight
        g = self.X.T @ (c * g_eta)
        return float(c * logdet), (g if l is None else np.append(g, c * g_l))

    def derivatives(self, eta: np.ndarray, *, hess: bool = True) -> tuple[float, np.ndarray, np.ndarray | None]:
        """``P``, ``dP/d eta`` (m) and, with ``hess``, ``d^2 P / d eta^2`` (m x m) of the binary family."""
        _binary_only(self, "derivatives")
        _, w1, w2, I = _binary_information(self.X, self.n, eta)
        sign, logdet = np.linalg.slogdet(I)
        if sign <= 0:
            m = eta.size
            return np.inf, np.full(m, np.nan), (np.full((m, m), np.nan) if hess else None)
        Q = self.X @ np.linalg.solve(I, self.X.T)
        c = -0.5 * self.weight
        H = c * (np.diag(w2 * np.diag(Q)) - np.outer(w1, w1) * Q * Q) if hess else None
        return float(c * logdet), c * w1 * np.diag(Q), H

    def terms(self, x: np.ndarray, h: float = 1e-6) -> tuple[float, np.ndarray, np.ndarray]:
        """Value, gradient and Hessian in ``x``: exact for the binary family (no ``m x m`` ``Q`` if ``m > q^2``), else central."""
        if not self.family.is_binary:
            f, g = self.value_grad(x)
            return f, g, central_hessian(lambda z: self.value_grad(z)[1], x, h=h)
        X, beta = self.X, x
        m, q = X.shape
        if q * q >= m:  # few cells: through the m x m Hessian in eta
            f, g, H = self.derivatives(X @ beta)
            return f, X.T @ g, X.T @ H @ X
        _, w1, w2, I = _binary_information(X, self.n, X @ beta)
        sign, logdet = np.linalg.slogdet(I)
        if sign <= 0:
            return np.inf, np.full(q, np.nan), np.full((q, q), np.nan)
        A = np.linalg.inv(I)
        h_ = np.einsum("ca,ab,cb->c", X, A, X)
        c = -0.5 * self.weight
        H = (X.T * (w2 * h_)) @ X - squared_leverage_gram(X, w1, X, A)
        return float(c * logdet), c * (X.T @ (w1 * h_)), c * 0.5 * (H + H.T)


GRAM_CHUNK_ENTRIES = 1 << 22
"""Entries of the row-wise Kronecker products formed at once by :func:`squared_leverage_gram` (32 MB)."""


def squared_leverage_gram(J: Any, w: np.ndarray, X: np.ndarray, A: np.ndarray) -> np.ndarray:
    r"""``J^T [(w w^T) o Q o Q] J`` with ``Q = X A X^T``, without the ``m x m`` matrix ``Q``.

    ``Q_ce^2 = (x_c (x) x_c)^T (A (x) A) (x_e (x) x_e)``, so it is ``P (A (x) A) P^T`` with
    ``P = J^T diag(w) (X * X)`` (row-wise Kronecker products, in chunks): linear in the cells.
    """
    m, q = X.shape
    step = max(1, GRAM_CHUNK_ENTRIES // max(q * q, 1))
    P = np.zeros((J.shape[1], q * q))
    for lo in range(0, m, step):
        rows = slice(lo, min(lo + step, m))
        Xr = X[rows]
        P += dense_design(J[rows].T @ ((w[rows, None] * Xr)[:, :, None] * Xr[:, None, :]).reshape(-1, q * q))
    return np.einsum("be,tbd,df->tef", A, P.reshape(-1, q, q), A).reshape(-1, q * q) @ P.T


def central_hessian(grad: Any, x: np.ndarray, coords: Any = None, h: float = 1e-6) -> np.ndarray:
    """Symmetrized central differences of the exact gradient ``grad`` over ``coords`` (default all; other columns 0)."""
    x = np.asarray(x, float)
    H = np.zeros((x.size, x.size))
    for t in range(x.size) if coords is None else coords:
        e = np.zeros(x.size)
        e[t] = h
        H[:, t] = (grad(x + e) - grad(x - e)) / (2 * h)
    return 0.5 * (H + H.T)


def information_terms(family: Family, X: np.ndarray, n: np.ndarray, eta: np.ndarray,
                      l: float | None) -> tuple[float, np.ndarray, float, np.ndarray] | None:
    r"""``log det I`` of a paired-comparison GLM and its derivatives in ``eta_c``, ``l`` and ``X``; None if singular.

    ``I`` the expected information in ``(beta, l = log nu)`` (``beta`` alone when ``l`` is None):
    ``d log det I / d eta_c = tr(L_c dI_c/d eta_c)``, ``d log det I / dX = 2 (E X A_bb + v A_bl^T)``.
    """
    P, a, b, ae, al, bl = (family if l is not None else BINARY).outcome_terms(eta, 0.0 if l is None else l)
    i_ee, i_el, i_ll = (n * np.sum(P * u * v, axis=1) for u, v in ((a, a), (a, b), (b, b)))
    p = X.shape[1]
    info = (X.T * i_ee) @ X
    if l is not None:
        cross = X.T @ i_el
        info = np.block([[info, cross[:, None]], [cross[None, :], np.array([[i_ll.sum()]])]])
    sign, logdet = np.linalg.slogdet(info)
    if sign <= 0:
        return None
    A = np.linalg.inv(info)
    L_ee = np.einsum("cp,pq,cq->c", X, A[:p, :p], X)
    be = al  # d b / d eta = d a / d l
    # derivatives of (i_ee, i_el, i_ll) in eta (per cell) and in l
    d_eta = [n * np.sum(P * t, axis=1) for t in (a**3 + 2 * a * ae, a * a * b + ae * b + a * be, a * b * b + 2 * b * be)]
    if l is None:
        return float(logdet), L_ee * d_eta[0], 0.0, 2 * (i_ee[:, None] * X) @ A
    L_el = X @ A[:p, p]
    L_ll = A[p, p]
    d_l = [n * np.sum(P * t, axis=1) for t in (b * a * a + 2 * a * al, b * a * b + al * b + a * bl, b**3 + 2 * b * bl)]
    g_eta = L_ee * d_eta[0] + 2 * L_el * d_eta[1] + L_ll * d_eta[2]
    g_l = float(np.sum(L_ee * d_l[0] + 2 * L_el * d_l[1] + L_ll * d_l[2]))
    dX = 2 * ((i_ee[:, None] * X) @ A[:p, :p] + np.outer(i_el, A[:p, p]))
    return float(logdet), g_eta, g_l, dX


@dataclass(frozen=True)
class CalibrationFirthPenalty:
    r"""Human-block Jeffreys prior of the joint fit ``Q_lambda`` in the calibration space.

    ``P(theta) = -omega/2 [log det(X^T W X) - log det(M^T M)]`` with ``X = [D_H M, Z_H]``, ``M = B E``
    the chart's item basis: gauge-invariant, finite when ``rank(D_H M) = d``, and DIAL-Anc's calibration
    penalty at ``lambda = inf``.  :meth:`terms` has the binary closed-form Hessian (without the
    ``sum_c dP/d eta_c d^2 eta_c`` term, added by :class:`pydial.model.likelihood.Objective`); tie
    families use :meth:`value_grad` and a central-difference Hessian.
    """

    D: np.ndarray
    n: np.ndarray
    weight: float
    Z: np.ndarray | None = None
    family: Family = BINARY

    def design(self, M: np.ndarray) -> np.ndarray:
        """Return the calibration design ``X = [D_H M, Z_H]`` in the basis ``M`` (``D_H M`` without covariates)."""
        DM = self.D @ M
        return DM if self.Z is None else np.hstack([DM, np.asarray(self.Z, float).reshape(DM.shape[0], -1)])

    @staticmethod
    def basis(chart, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``M`` (N x d) at ``theta`` and ``dM/d theta`` (dim x N x d) of a calibrated chart."""
        q, N, d = chart.q, chart.N, chart.d
        M = chart.to_full(theta)[chart.off_B: chart.off_b].reshape(N, q)[:, :d]
        TB = np.asarray(chart.T)[chart.off_B: chart.off_b].reshape(N, q, -1)[:, :d, :]
        return M, np.moveaxis(TB, -1, 0)

    def value(self, chart, theta: np.ndarray, eta: np.ndarray) -> float:
        """``P`` at ``theta`` (``eta``: the human cells' predictors) of the binary family; ``+inf`` if singular."""
        _binary_only(self, "value")
        M, _ = self.basis(chart, theta)
        s1, l1 = np.linalg.slogdet(_binary_information(self.design(M), self.n, eta)[3])
        s2, l2 = np.linalg.slogdet(M.T @ M)
        return float(-0.5 * self.weight * (l1 - l2)) if s1 > 0 and s2 > 0 else np.inf

    def terms(self, chart, theta: np.ndarray, eta: np.ndarray, J: np.ndarray | None, *,
              hess: bool = True) -> tuple[float, np.ndarray, np.ndarray, np.ndarray | None]:
        """``P``, ``dP/d eta``, the gradient part through ``M`` and (``hess``) the Hessian in ``theta``.

        ``L = log det I - log det G``: ``dL/dM = 2 D^T W U_M - 2 M G^{-1}``, ``d^2L/d eta^2 = diag(w'' h) - (w' w'^T) o Q o Q``.
        """
        _binary_only(self, "terms")
        M, dM = self.basis(chart, theta)
        X = self.design(M)
        w, w1, w2, I = _binary_information(X, self.n, eta)
        d = M.shape[1]  # the columns of X that move with theta: D_H M; the covariate columns Z_H do not
        G = M.T @ M
        s1, l1 = np.linalg.slogdet(I)
        s2, l2 = np.linalg.slogdet(G)
        dim = dM.shape[0]
        if s1 <= 0 or s2 <= 0:
            return np.inf, np.full(eta.size, np.nan), np.full(dim, np.nan), (np.full((dim, dim), np.nan) if hess else None)
        c = -0.5 * self.weight
        A = np.linalg.inv(I)
        Gi = np.linalg.inv(G)
        U = X @ A
        h = np.einsum("hd,hd->h", U, X)
        L_M = 2 * self.D.T @ (w[:, None] * U[:, :d]) - 2 * M @ Gi
        g_eta = c * w1 * h
        g_M = c * np.einsum("nd,pnd->p", L_M, dM)
        if not hess:
            return float(c * (l1 - l2)), g_eta, g_M, None
        assert J is not None, "the Hessian needs J = d eta / d theta"
        # J^T L_ee J with L_ee = diag(w'' h) - (w' w'^T) * Q * Q, without the m_H x m_H matrix Q
        JLJ = dense_design(J.T @ (sp.diags(w2 * h) @ J)) - squared_leverage_gram(J, w1, X, A)
        # Y_t: the M columns of dX/d theta_t (its Z_H columns are 0, so the blocks of A, U, B_t, V_u they meet are cut)
        Y = np.einsum("hn,pnd->phd", self.D, dM)
        Yw = w[None, :, None] * Y
        Km = np.einsum("the,hd->ted", Yw, X)  # Y_t^T W X (d x (d + p))
        # F_ct = 2 w'_c [(Y_t U^T)_cc - sum_e w_e Q_ec (Y_t U^T)_ec], the sum being u_c^T (Y_t^T W X) U_c
        F = 2 * w1[:, None] * (np.einsum("phd,hd->hp", Y, U[:, :d]) - np.einsum("hd,pda,ha->hp", U[:, :d], Km, U))
        T1 = 2 * np.einsum("uhd,the,ed->tu", Yw, Y, A[:d, :d])
        K = np.zeros((Y.shape[0], X.shape[1], X.shape[1]))
        K[:, :d, :] = Km  # Y_t^T W X in the rows of the M columns
        Bt = K + np.swapaxes(K, 1, 2)
        V = np.einsum("uhd,ha->uda", Yw, U)
        T2 = -2 * np.einsum("uda,tab,bd->tu", V, Bt, A[:, :d])
        T3 = -2 * np.einsum("und,tne,ed->tu", dM, dM, Gi)
        R = np.einsum("tnd,ne->tde", dM, M)
        R = R + np.swapaxes(R, 1, 2)
        T4 = 2 * np.einsum("und,na,tab,bd->tu", dM, M @ Gi, R, Gi)
        JF = dense_design(J.T @ F)
        H = JLJ + JF + JF.T + T1 + T2 + T3 + T4
        return float(c * (l1 - l2)), g_eta, g_M, c * 0.5 * (H + H.T)

    def value_grad(self, chart, theta: np.ndarray, eta: np.ndarray, l: float | None,
                   J: Any) -> tuple[float, np.ndarray, float]:
        """``P`` and its gradient in ``theta`` and ``l_H`` (None: binary or ``nu = 0``); ``J = d eta / d theta``."""
        M, dM = self.basis(chart, theta)
        G = M.T @ M
        s2, l2 = np.linalg.slogdet(G)
        t = information_terms(self.family, self.design(M), self.n, eta, l)
        if t is None or s2 <= 0:
            return np.inf, np.full(theta.size, np.nan), np.nan
        logdet, g_eta, g_l, dX = t
        c = -0.5 * self.weight
        L_M = self.D.T @ dX[:, : M.shape[1]] - 2 * M @ np.linalg.inv(G)  # Z_H does not move with theta
        g_theta = np.asarray(J.T @ g_eta).ravel() + np.einsum("nd,pnd->p", L_M, dM)
        return float(c * (logdet - l2)), c * g_theta, c * g_l
