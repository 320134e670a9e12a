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
  :math:`Q_\lambda`: the Jeffreys prior of the human BTL evaluated at the calibrated
  scores ``s(theta)`` (``X = D_H T`` on the human cells' predictors ``s_i - s_j``),
  which equals the ``lambda = 0`` penalty, so the path is continuous at its lower end.

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

import numpy as np
from scipy.special import expit

PENALTIES: tuple[str | None, ...] = (None, "firth")


def check_penalty(penalty: str | None) -> str | None:
    """Validate the ``penalty`` argument of :func:`pydial.fit`."""
    if penalty not in PENALTIES:
        raise ValueError(f"penalty must be one of {PENALTIES}, got {penalty!r}")
    return penalty


@dataclass(frozen=True)
class FirthPenalty:
    r"""The loss term :math:`P(\eta) = -\frac{\omega}{2}\log\det(X^\top \mathrm{diag}\{w(\eta)\} X)`.

    Parameters
    ----------
    X : ndarray (m, q)
        Design of the penalized model: row ``c`` is ``d eta_c / d beta`` in a chart
        ``beta`` of full column rank (any other chart changes ``P`` by a constant).
    n : ndarray (m,)
        Cell counts.
    weight : float
        Loss normalization ``omega``.
    """

    X: np.ndarray
    n: np.ndarray
    weight: float = 1.0

    def information(self, eta: np.ndarray) -> np.ndarray:
        """Unnormalized Fisher information ``X^T diag(n p (1-p)) X`` at ``eta``."""
        p = expit(eta)
        return (self.X.T * (self.n * p * (1 - p))) @ self.X

    def value(self, eta: np.ndarray) -> float:
        """``P(eta)``; ``+inf`` where the information is singular (a diverged predictor)."""
        sign, logdet = np.linalg.slogdet(self.information(eta))
        return float(-0.5 * self.weight * logdet) if sign > 0 else np.inf

    def derivatives(self, eta: np.ndarray, *, hess: bool = True) -> tuple[float, np.ndarray, np.ndarray | None]:
        """``P``, ``dP/d eta`` (m) and, with ``hess``, ``d^2 P / d eta^2`` (m x m)."""
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

    def glm_terms(self, beta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Value, gradient and Hessian in the GLM chart ``eta = X beta``."""
        f, g, H = self.derivatives(self.X @ beta)
        return f, self.X.T @ g, self.X.T @ H @ self.X
