r"""Bias-reducing (Firth / Jeffreys-prior) penalty of the logistic likelihoods.

Firth (1993) replaces the log-likelihood :math:`l(\beta)` of a binomial logistic model
with linear predictor :math:`\eta = X\beta` by

.. math::

    l^*(\beta) = l(\beta) + \tfrac12 \log\det I(\beta), \qquad
    I(\beta) = X^\top \operatorname{diag}\{n_c p_c (1 - p_c)\} X ,

the log posterior under the Jeffreys prior.  Its maximizer removes the
:math:`O(n^{-1})` bias of the MLE and is finite whenever ``X`` has full column rank,
even under complete or quasi-complete separation (Kosmidis & Firth 2021), because
:math:`\log\det I \to -\infty` as any linear predictor with positive count diverges.
Its score is the adjusted score
:math:`X^\top\{y - n p + h (1/2 - p)\}` with leverages :math:`h_c = w_c x_c^\top I^{-1} x_c`.

pydial writes losses (to be minimized), so the term added to a loss is

.. math::

    P(\eta) = -\tfrac{\omega}{2} \log\det\bigl(X^\top \operatorname{diag}\{w(\eta)\} X\bigr),
    \qquad w_c = n_c p_c (1 - p_c),

with ``omega`` the loss normalization (``1/n_H`` for :math:`\ell_H`).  :class:`FirthPenalty`
gives its value, gradient and exact Hessian in the cells' linear predictors ``eta``;
the chain rule through ``d eta / d theta`` maps them to any chart:

.. math::

    \frac{\partial P}{\partial \eta_c} = -\tfrac{\omega}{2} w_c' Q_{cc}, \qquad
    \frac{\partial^2 P}{\partial \eta_c \partial \eta_e}
      = -\tfrac{\omega}{2}\bigl[w_c'' Q_{cc}\,\delta_{ce} - w_c' w_e' Q_{ce}^2\bigr],

where :math:`Q = X I^{-1} X^\top`, :math:`w' = w (1 - 2p)` and
:math:`w'' = w (1 - 6p + 6p^2)`.

Where pydial uses it (``fit(..., penalty="firth")``):

* ``human``: the human BTL in the centered chart (``X = D_H T``);
* ``judges``: each judge's order-effect BTL (``X = [D T, a]``);
* ``pooled``: both GLM stages (pooled BTL, then the scalar rescaling);
* ``dial-anc``: the calibration GLM ``argmin_c l_H(M c)`` (``X = D_H M``);
* ``dial-ada``: the ``lambda = 0`` endpoint (Firth human BTL), the ``lambda = inf``
  endpoint (as ``dial-anc``) and, for finite ``lambda``, the human block of
  :math:`Q_\lambda`: the Jeffreys prior of the calibration GLM ``X = D_H M(theta)``
  with the basis normalized (:class:`CalibrationFirthPenalty`), which tends to the
  ``dial-anc`` penalty as ``lambda -> inf``;
* with response covariates every design above has the covariate columns appended (e.g.
  ``X = [D_H M, Z_H]`` in ``(c, beta_H)`` for the calibration GLM), so the prior is that of
  the whole GLM, the covariate effects included;
* ``human`` and ``judges`` with ``ties="davidson"`` or ``"rao-kupper"`` (numpy engine): the
  Jeffreys prior of the tie GLM in ``(beta, log nu)`` (:class:`FirthPenalty` of the family), the family's
  Fisher information in place of ``X^T W X``.

Inference at a penalized estimate uses the unpenalized Fisher information (bread)
and the same meats as at the MLE (brglm2's convention); the penalty changes the
information by :math:`O(1)` against :math:`O(n)`, so the sandwich remains first-order
valid.

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
from pydial.model.families import BINARY, Family

PENALTIES: tuple[str | None, ...] = (None, "firth")


def check_penalty(penalty: str | None) -> str | None:
    """Validate the ``penalty`` argument of :func:`pydial.fit`."""
    if penalty not in PENALTIES:
        raise ArgumentError(f"penalty must be one of {PENALTIES}, got {penalty!r}")
    return penalty


@dataclass(frozen=True)
class FirthPenalty:
    r"""The Jeffreys prior of a paired-comparison GLM of any family: :math:`P(x) = -\frac{\omega}{2}\log\det I(x)`.

    The GLM has ``eta = X beta``; its coordinates are ``x = beta`` for the binary family and
    ``x = (beta, l)``, ``l = log nu``, for a tie family.  ``I`` is the family's expected
    information: :math:`X^\top \mathrm{diag}\{n p (1 - p)\} X` for the binary family, whose exact
    Hessian has the closed form of the module docstring (:meth:`derivatives`); for the Davidson
    or Rao-Kupper family the cell ``c`` of ``n_c`` comparisons has the information in its
    channels ``(eta_c, l)``

    .. math::

        I_c = n_c \sum_o P_{co} \begin{pmatrix} a_{co}^2 & a_{co} b_{co} \\ a_{co} b_{co} & b_{co}^2 \end{pmatrix},
        \qquad a_{co} = \frac{\partial \log P_{co}}{\partial \eta}, \quad
        b_{co} = \frac{\partial \log P_{co}}{\partial l},

    and the GLM's is :math:`I(x) = \sum_c j_c^\top I_c j_c` with ``j_c`` the rows ``(x_c, 0)`` and
    ``(0, 1)``.  Its gradient is exact (:func:`information_terms`); its Hessian the central
    difference of the exact gradient (the optimum, a zero of the exact gradient, does not depend
    on it).  A tie GLM without any tie is the binary one (the ``nu = 0`` boundary).

    Parameters
    ----------
    X : ndarray (m, q)
        Design of ``eta``: row ``c`` is ``d eta_c / d beta`` in a chart ``beta`` of full column
        rank (any other chart changes ``P`` by a constant).
    n : ndarray (m,)
        Comparisons per cell (ties included).
    weight : float
        Loss normalization ``omega``.
    family : Family
        The outcome family (:data:`~pydial.model.families.BINARY` by default).
    """

    X: np.ndarray
    n: np.ndarray
    weight: float = 1.0
    family: Family = BINARY

    def information(self, eta: np.ndarray) -> np.ndarray:
        """Unnormalized Fisher information ``X^T diag(n p (1-p)) X`` of the binary family at ``eta``."""
        self._binary_only("information")
        p = expit(eta)
        return (self.X.T * (self.n * p * (1 - p))) @ self.X

    def _binary_only(self, what: str) -> None:
        """Raise for a tie family: ``what`` is the binary family's closed form."""
        if not self.family.is_binary:
            raise ArgumentError(f"FirthPenalty.{what} is the binary family's closed form; "
                                f"the {self.family.name} family has value_grad and terms")

    def value(self, x: np.ndarray | None, eta: np.ndarray | None = None) -> float:
        """``P(x)``; ``+inf`` where the information is singular (a diverged predictor).

        ``eta``: the cells' predictors ``X beta`` when the caller has formed them (binary family; ``x``
        is then not used).
        """
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
        self._binary_only("derivatives")
        p = expit(eta)
        w = self.n * p * (1 - p)
        I = (self.X.T * w) @ self.X
        sign, logdet = np.linalg.slogdet(I)
        if sign <= 0:
            m = eta.size
            return np.inf, np.full(m, np.nan), (np.full((m, m), np.nan) if hess else None)
        Q = self.X @ np.linalg.solve(I, self.X.T)
        w1 = w * (1 - 2 * p)
        f = -0.5 * self.weight * logdet
        g = -0.5 * self.weight * w1 * np.diag(Q)
        if not hess:
            return float(f), g, None
        w2 = w * (1 - 6 * p + 6 * p * p)
        H = -0.5 * self.weight * (np.diag(w2 * np.diag(Q)) - np.outer(w1, w1) * Q * Q)
        return float(f), g, H

    def terms(self, x: np.ndarray, h: float = 1e-6) -> tuple[float, np.ndarray, np.ndarray]:
        """Value, gradient and Hessian in the GLM coordinates ``x``.

        Binary family: the exact Hessian, formed without the ``m x m`` matrix ``Q`` when the cells
        outnumber ``q^2`` (:func:`squared_leverage_gram`; e.g. one cell per judgment with
        covariates).  Tie family: the central difference (step ``h``) of the exact gradient.
        """
        if not self.family.is_binary:
            f, g = self.value_grad(x)
            return f, g, central_hessian(lambda z: self.value_grad(z)[1], x, h=h)
        X, beta = self.X, x
        m, q = X.shape
        if q * q >= m:  # few cells: through the m x m Hessian in eta
            f, g, H = self.derivatives(X @ beta)
            return f, X.T @ g, X.T @ H @ X
        p = expit(X @ beta)
        w = self.n * p * (1 - p)
        I = (X.T * w) @ X
        sign, logdet = np.linalg.slogdet(I)
        if sign <= 0:
            return np.inf, np.full(q, np.nan), np.full((q, q), np.nan)
        A = np.linalg.inv(I)
        h_ = np.einsum("ca,ab,cb->c", X, A, X)
        w1 = w * (1 - 2 * p)
        w2 = w * (1 - 6 * p + 6 * p * p)
        c = -0.5 * self.weight
        H = (X.T * (w2 * h_)) @ X - squared_leverage_gram(X, w1, X, A)
        return float(c * logdet), c * (X.T @ (w1 * h_)), c * 0.5 * (H + H.T)

def _dense(M: Any) -> np.ndarray:
    """``M`` (a dense or sparse matrix product) as a dense array."""
    return M.toarray() if sp.issparse(M) else np.asarray(M)


GRAM_CHUNK_ENTRIES = 1 << 22
"""Entries of the row-wise Kronecker products formed at once by :func:`squared_leverage_gram` (32 MB)."""


def squared_leverage_gram(J: Any, w: np.ndarray, X: np.ndarray, A: np.ndarray) -> np.ndarray:
    r"""``J^T [(w w^T) \circ Q \circ Q] J`` with ``Q = X A X^T``, without forming the ``m x m`` matrix ``Q``.

    The cross term of the Jeffreys priors' Hessians (:class:`FirthPenalty`, :class:`CalibrationFirthPenalty`).
    :math:`Q_{ce}^2 = (x_c^\top A x_e)^2 = (x_c \otimes x_c)^\top (A \otimes A)(x_e \otimes x_e)`, so the sum is
    :math:`P (A \otimes A) P^\top` with :math:`P = J^\top \mathrm{diag}(w) (X \ast X)`, ``X * X`` the row-wise
    Kronecker products (``q^2`` columns, formed in chunks of rows): work and memory linear in the
    cells.  ``J`` (m x k) dense or sparse, ``X`` (m x q), ``A`` (q x q) symmetric.
    """
    m, q = X.shape
    step = max(1, GRAM_CHUNK_ENTRIES // max(q * q, 1))
    P = np.zeros((J.shape[1], q * q))
    for lo in range(0, m, step):
        rows = slice(lo, min(lo + step, m))
        Xr = X[rows]
        P += _dense(J[rows].T @ ((w[rows, None] * Xr)[:, :, None] * Xr[:, None, :]).reshape(-1, q * q))
    P3 = P.reshape(-1, q, q)
    PAA = np.einsum("be,tbd,df->tef", A, P3, A).reshape(-1, q * q)
    return PAA @ P.T


def central_hessian(grad: Any, x: np.ndarray, coords: Any = None, h: float = 1e-6) -> np.ndarray:
    """Return the symmetrized central differences of the exact gradient ``grad(x)`` over ``coords`` (default: all).

    The Hessian of the tie-family Jeffreys priors (:class:`FirthPenalty`, :class:`CalibrationFirthPenalty` of a tie family);
    the columns of coordinates outside ``coords`` (on which the gradient does not depend) are zero.
    """
    x = np.asarray(x, float)
    H = np.zeros((x.size, x.size))
    for t in range(x.size) if coords is None else coords:
        e = np.zeros(x.size)
        e[t] = h
        H[:, t] = (grad(x + e) - grad(x - e)) / (2 * h)
    return 0.5 * (H + H.T)


def information_terms(family: Family, X: np.ndarray, n: np.ndarray, eta: np.ndarray,
                      l: float | None) -> tuple[float, np.ndarray, float, np.ndarray] | None:
    r"""``log det I`` of a paired-comparison GLM and its exact derivatives, or ``None`` where ``I`` is singular.

    ``I`` is the expected information of the GLM with design ``X`` at the cells' predictors ``eta``
    (``n`` comparisons each): in ``(beta, l)`` for a tie family with ``l = log nu``, in ``beta``
    alone for the binary family or ``l=None`` (a group at ``nu = 0``).  Returned: ``log det I``, its
    derivative in each ``eta_c`` (``X`` fixed), in ``l``, and in ``X`` (``eta`` fixed):

    .. math::

        \frac{\partial \log\det I}{\partial \eta_c} = \operatorname{tr}\Bigl(L_c \frac{\partial I_c}{\partial \eta_c}\Bigr),
        \qquad \frac{\partial \log\det I}{\partial X} = 2\,(E X A_{\beta\beta} + v A_{\beta l}^\top),

    with :math:`A = I^{-1}`, :math:`L_c` the cell's leverage in its channels (:class:`FirthPenalty`),
    ``E = diag(i_ee)`` and ``v = i_el`` the cells' information entries.
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


def calibration_columns(DM: np.ndarray, Z: np.ndarray | None) -> np.ndarray:
    """Return the dense calibration design ``[D_H M, Z_H]`` from ``D_H M`` (``D_H M`` itself without covariates).

    The dense form of :func:`pydial.model.design.calibration_design`, which the Jeffreys priors'
    leverages need.
    """
    return DM if Z is None else np.hstack([DM, np.asarray(Z, float).reshape(DM.shape[0], -1)])


@dataclass(frozen=True)
class CalibrationFirthPenalty:
    r"""Human-block Jeffreys prior of the joint fit :math:`Q_\lambda`, in the calibration space.

    In the chart of :mod:`pydial.model.chart` the human scores are ``s = M c`` with the item
    basis ``M = B E`` (``E = e_1`` for ``M = mu``, ``E = I`` for ``M = W``), so the human
    likelihood given ``M`` is a binomial GLM in ``c`` with design ``X = D_H M`` -- with response
    covariates a GLM in ``(c, beta_H)`` with design ``X = [D_H M, Z_H]`` (``z' beta_H`` of
    eq. binomial-model-human).  The loss term is its Jeffreys prior with the basis normalized,

    .. math::

        P(\theta) = -\frac{\omega}{2}\Bigl[\log\det(X^\top W X) - \log\det(M^\top M)\Bigr],
        \qquad W = \mathrm{diag}\{n_c p_c (1 - p_c)\},

    which is invariant to the gauge ``B -> B G`` of the chart, exists whenever
    ``rank(D_H M) = d`` (Cond. human-design; items never compared by people are
    allowed) and equals, up to a constant, the Firth penalty of the calibration GLM
    of DIAL-Anc when ``M`` is held at the LLM-only fit, so the path is continuous at
    ``lambda = inf``.

    Derivatives (``L = log det I - log det G``, ``I = X^T W X``, ``A = I^{-1}``,
    ``G = M^T M``, ``U = X A``, ``Q = X A X^T``, ``h_c = Q_cc``, ``Y_t = [D dM/d theta_t, 0]``,
    the derivative of ``X``: ``Z_H`` does not depend on ``theta``, so only the ``M`` columns move,
    while ``A``, ``U``, ``Q`` and ``h`` are those of the whole design):

    * ``dL/d eta_c = w'_c h_c``;  ``dL/dM = 2 D^T W U_M - 2 M G^{-1}`` (``U_M``: the ``M`` columns of ``U``);
    * ``d^2 L / d eta^2 = diag(w'' h) - (w' w'^T) * Q * Q``;
    * ``d^2 L / d eta_c d theta_t = 2 w'_c [ (Y_t U^T)_cc - sum_e w_e Q_ec (Y_t U^T)_ec ]``;
    * ``d^2 L / d theta_t d theta_u = 2 tr(Y_u^T W Y_t A) - 2 tr(V_u B_t A)
      - 2 tr(dM_u^T dM_t G^{-1}) + 2 tr(dM_u^T M G^{-1} R_t G^{-1})`` with
      ``V_u = Y_u^T W U``, ``B_t = Y_t^T W X + X^T W Y_t``, ``R_t = dM_t^T M + M^T dM_t``.

    ``M`` is linear in ``theta``, so it has no second derivative; the bilinear second
    derivative of ``eta`` is added by :class:`pydial.model.likelihood.Objective` through the
    per-cell gradient ``dP/d eta`` (``eta`` includes ``z' beta_H``, so ``beta_H`` enters through it).

    With a tie family the people's likelihood given ``M`` is the family's GLM in ``(c, l_H)``
    (``(c, beta_H, l_H)`` with covariates; ``l_H = log nu_H``, absent when the people have no
    tie), ``I`` its information (:class:`FirthPenalty`): :meth:`value_grad` gives the exact
    gradient (:func:`information_terms` through ``eta = D_H M c`` and ``M``), and
    :class:`pydial.model.likelihood.Objective` adds the central-difference Hessian of it.
    :meth:`value` and :meth:`terms` are the binary family's closed forms.

    Parameters
    ----------
    D : ndarray (m_H, N)
        Difference design of the human cells.
    n : ndarray (m_H,)
        Comparisons per human cell (ties included).
    weight : float
        Loss normalization ``omega = 1/n_H``.
    Z : ndarray (m_H, p) or None
        The human cells' response covariates ``Z_H`` (``None`` without covariates).
    family : Family
        The outcome family (:data:`~pydial.model.families.BINARY` by default).
    """

    D: np.ndarray
    n: np.ndarray
    weight: float
    Z: np.ndarray | None = None
    family: Family = BINARY

    def design(self, M: np.ndarray) -> np.ndarray:
        """Return the calibration design ``X = [D_H M, Z_H]`` in the basis ``M`` (``D_H M`` without covariates)."""
        return calibration_columns(self.D @ M, self.Z)

    @staticmethod
    def basis(chart, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``M`` (N x d) at ``theta`` and ``dM/d theta`` (dim x N x d) of a calibrated chart."""
        q, N, d = chart.q, chart.N, chart.d
        phi = chart.to_full(theta)
        M = phi[chart.off_B: chart.off_b].reshape(N, q)[:, :d]
        TB = np.asarray(chart.T)[chart.off_B: chart.off_b].reshape(N, q, -1)[:, :d, :]
        return M, np.moveaxis(TB, -1, 0)

    def value(self, chart, theta: np.ndarray, eta: np.ndarray) -> float:
        """``P`` at ``theta`` (``eta``: the human cells' predictors) of the binary family; ``+inf`` if singular."""
        self._binary_only("value")
        M, _ = self.basis(chart, theta)
        p = expit(eta)
        X = self.design(M)
        s1, l1 = np.linalg.slogdet((X.T * (self.n * p * (1 - p))) @ X)
        s2, l2 = np.linalg.slogdet(M.T @ M)
        return float(-0.5 * self.weight * (l1 - l2)) if s1 > 0 and s2 > 0 else np.inf

    def terms(self, chart, theta: np.ndarray, eta: np.ndarray, J: np.ndarray | None, *,
              hess: bool = True) -> tuple[float, np.ndarray, np.ndarray, np.ndarray | None]:
        """Return ``P``, ``dP/d eta`` (H), the gradient part through ``M`` (dim) and a Hessian.

        The Hessian is in ``theta``, without the ``sum_c dP/d eta_c d^2 eta_c`` term
        (needs ``J = d eta / d theta``).  The binary family's closed form.
        """
        self._binary_only("terms")
        M, dM = self.basis(chart, theta)
        p = expit(eta)
        w = self.n * p * (1 - p)
        w1 = w * (1 - 2 * p)
        X = self.design(M)
        d = M.shape[1]  # the columns of X that move with theta: D_H M; the covariate columns Z_H do not
        I = (X.T * w) @ X
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
        w2 = w * (1 - 6 * p + 6 * p * p)
        # J^T L_ee J with L_ee = diag(w'' h) - (w' w'^T) * Q * Q, without the m_H x m_H matrix Q
        JLJ = _dense(J.T @ (sp.diags(w2 * h) @ J)) - squared_leverage_gram(J, w1, X, A)
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
        MGi = M @ Gi
        T4 = 2 * np.einsum("und,na,tab,bd->tu", dM, MGi, R, Gi)
        JF = _dense(J.T @ F)
        H = JLJ + JF + JF.T + T1 + T2 + T3 + T4
        return float(c * (l1 - l2)), g_eta, g_M, c * 0.5 * (H + H.T)

    def _binary_only(self, what: str) -> None:
        """Raise for a tie family: ``what`` is the binary family's closed form."""
        if not self.family.is_binary:
            raise ArgumentError(f"CalibrationFirthPenalty.{what} is the binary family's closed form; "
                                f"the {self.family.name} family has value_grad")

    def value_grad(self, chart, theta: np.ndarray, eta: np.ndarray, l: float | None,
                   J: Any) -> tuple[float, np.ndarray, float]:
        """``P``, its gradient in ``theta`` and in ``l_H`` (``l=None``: the binary family, or the people at ``nu = 0``).

        ``eta`` are the human cells' predictors and ``J = d eta / d theta`` (sparse) at ``theta``.
        """
        M, dM = self.basis(chart, theta)
        G = M.T @ M
        s2, l2 = np.linalg.slogdet(G)
        t = information_terms(self.family, calibration_columns(self.D @ M, self.Z), self.n, eta, l)
        if t is None or s2 <= 0:
            return np.inf, np.full(theta.size, np.nan), np.nan
        logdet, g_eta, g_l, dX = t
        c = -0.5 * self.weight
        L_M = self.D.T @ dX[:, : M.shape[1]] - 2 * M @ np.linalg.inv(G)  # Z_H does not move with theta
        g_theta = np.asarray(J.T @ g_eta).ravel() + np.einsum("nd,pnd->p", L_M, dM)
        return float(c * (logdet - l2)), c * g_theta, c * g_l
