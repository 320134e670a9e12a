r"""Per-cell paired-comparison likelihoods with ties: value, score and curvature, and the outcome families.

A cell holds the counts ``(w_i, w_j, t)`` of one judge on one ordered pair, with predictor ``eta``
(eq. binomial-model-llm) and, for the tie models, ``l = log nu``.  Each kernel returns the log-likelihood
of every cell (without the coefficient, :func:`log_coef`) and its derivatives in ``(eta, l)``; the
Stan programs use the same models (``stan/include/paired_likelihoods.stan``, ``ties`` 0, 1, 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy.special import expit, gammaln, log_expit, softmax
from pydial.exceptions import ArgumentError
from pydial.model.blocks import scratch

__all__ = ["CellDerivatives", "Family", "BINARY", "DAVIDSON", "RAO_KUPPER", "FAMILIES", "family_of", "family_of_code",
           "binary_cell", "davidson_cell", "rao_kupper_cell", "log_coef", "LossTerms", "softplus"]


@dataclass(frozen=True)
class CellDerivatives:
    """Log-likelihood kernel per cell and its derivatives in ``(eta, l)``, ``l = log nu`` (the ``l`` terms 0 for binary)."""

    value: np.ndarray
    d_eta: np.ndarray
    d_l: np.ndarray
    d_eta_eta: np.ndarray
    d_eta_l: np.ndarray
    d_l_l: np.ndarray


def _cells(counts: np.ndarray, eta: np.ndarray, log_nu: np.ndarray | float = 0.0) -> tuple[np.ndarray, ...]:
    """``(w_i, w_j, t, eta, l)`` of the cells as floats, ``l`` broadcast to the shape of ``eta``."""
    c = np.asarray(counts, float).reshape(-1, 3)
    eta = np.asarray(eta, float)
    return c[:, 0], c[:, 1], c[:, 2], eta, np.broadcast_to(np.asarray(log_nu, float), eta.shape)


def log_coef(counts: np.ndarray) -> np.ndarray:
    """Log multinomial coefficient ``log(n! / (w_i! w_j! t!))`` of each cell."""
    c = np.asarray(counts, float).reshape(-1, 3)
    return gammaln(c.sum(axis=1) + 1) - gammaln(c + 1).sum(axis=1)


def binary_cell(counts: np.ndarray, eta: np.ndarray, log_nu: np.ndarray | float = 0.0) -> CellDerivatives:
    """Binomial model ``w_i ~ Binomial(w_i + w_j, sigma(eta))`` of the decisive outcomes (Stan ``ties = 0``), no ties."""
    wi, wj, t, eta, _ = _cells(counts, eta)
    if np.any(t > 0):
        raise ArgumentError("the binary model takes cells without ties")
    p = expit(eta)
    n = wi + wj
    z = np.zeros_like(eta)
    return CellDerivatives(wi * log_expit(eta) + wj * log_expit(-eta), wi - n * p, z, -n * p * (1 - p), z, z)


def davidson_cell(counts: np.ndarray, eta: np.ndarray, log_nu: np.ndarray | float) -> CellDerivatives:
    """Davidson (1970), Davidson-Beaver (1977) order effect (Stan ``ties = 1``): softmax of ``(eta/2, -eta/2, log nu)``."""
    wi, wj, t, eta, l = _cells(counts, eta, log_nu)
    x = 0.5 * eta
    z = np.logaddexp(np.logaddexp(x, -x), l)
    p1, p2, p3 = np.exp(x - z), np.exp(-x - z), np.exp(l - z)
    n = wi + wj + t
    d = p1 - p2
    value = wi * (x - z) + wj * (-x - z) + t * (l - z)
    return CellDerivatives(value, 0.5 * (wi - wj - n * d), t - n * p3, -0.25 * n * (p1 + p2 - d * d),
                           0.5 * n * d * p3, -n * p3 * (1 - p3))


def rao_kupper_cell(counts: np.ndarray, eta: np.ndarray, log_nu: np.ndarray | float) -> CellDerivatives:
    """Rao-Kupper (1967), Stan ``ties = 2``: ``P(i) = sigma(eta - tau)``, ``P(j) = sigma(-eta - tau)``, ``tau = exp(log_nu)``."""
    wi, wj, t, eta, l = _cells(counts, eta, log_nu)
    tau = np.exp(l)
    A, B = eta - tau, -eta - tau
    m1, m2 = wi + t, wj + t
    qA, qB = expit(-A), expit(-B)                    # d log sigma(x) / dx = 1 - sigma(x)
    vA, vB = qA * (1 - qA), qB * (1 - qB)            # sigma(x) (1 - sigma(x))
    em = -np.expm1(-2 * tau)                         # 1 - e^{-2 tau}
    g = 2 * tau + np.log(em)                         # log(e^{2 tau} - 1)
    g1 = 2 / em
    g2 = -4 * np.exp(-2 * tau) / em**2
    value = m1 * log_expit(A) + m2 * log_expit(B) + t * g
    d_tau = -m1 * qA - m2 * qB + t * g1
    d_tau_tau = -m1 * vA - m2 * vB + t * g2
    return CellDerivatives(value, m1 * qA - m2 * qB, tau * d_tau, -m1 * vA - m2 * vB, tau * (m1 * vA - m2 * vB),
                           tau**2 * d_tau_tau + tau * d_tau)


def binary_probabilities(eta: np.ndarray, l: np.ndarray) -> np.ndarray:
    """``(sigma(eta), 1 - sigma(eta), 0)`` per cell."""
    p = expit(eta)
    return np.column_stack([p, 1 - p, np.zeros_like(p)])


def davidson_probabilities(eta: np.ndarray, l: np.ndarray) -> np.ndarray:
    """Return the softmax of ``(eta / 2, -eta / 2, l)`` per cell."""
    return softmax(np.column_stack([0.5 * eta, -0.5 * eta, l]), axis=1)


def rao_kupper_probabilities(eta: np.ndarray, l: np.ndarray) -> np.ndarray:
    """``(sigma(eta - tau), sigma(-eta - tau), the rest)`` per cell, ``tau = exp(l)``."""
    tau = np.exp(l)
    pi, pj = expit(eta - tau), expit(-eta - tau)
    return np.column_stack([pi, pj, np.clip(1 - pi - pj, 0.0, 1.0)])


def softplus(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``log(1 + exp(x))`` without overflow, ``max(x, 0) + log1p(exp(-|x|))``, in one work array (``out`` if given)."""
    x = np.asarray(x, dtype=float)
    out = np.abs(x, out=out)
    np.negative(out, out=out)
    np.exp(out, out=out)
    np.log1p(out, out=out)
    np.add(out, x, out=out, where=x > 0.0)
    return out


@dataclass(frozen=True)
class LossTerms:
    """Per-cell derivatives of an objective's weighted loss ``sum_c w_c loss_c`` in ``eta`` and ``l = log nu``.

    ``d_eta_eta`` is ``None`` without the Hessian, the ``l`` terms ``None`` for the binary kernel.
    """

    d_eta: np.ndarray
    d_eta_eta: np.ndarray | None
    d_l: np.ndarray | None = None
    d_eta_l: np.ndarray | None = None
    d_l_l: np.ndarray | None = None


# The loss kernels of :class:`pydial.model.likelihood.Objective` (``obj``): its cells, cell blocks and work arrays.
def _binary_loss(obj: Any, x: np.ndarray, eta: np.ndarray) -> float:
    """``sum_c w_c [n_c softplus(eta_c) - y_c eta_c]``, block by block."""
    c = obj.cells

    def block(_: int, sl: slice) -> float:  # into the block work arrays: fresh temporaries would cost their page faults
        t, ye = scratch(sl)
        softplus(eta[sl], out=t)
        t *= c.n[sl]
        t -= np.multiply(c.y[sl], eta[sl], out=ye)
        return float(t @ c.w[sl])

    return sum(obj._map_blocks(block), 0.0)


def _binary_terms(obj: Any, x: np.ndarray, eta: np.ndarray, hess: bool) -> LossTerms:
    """Return the logistic residuals ``w (n p - y)`` and curvatures ``w n p (1 - p)``, block by block into work arrays."""
    c, wn = obj.cells, obj._wn
    res, curv = obj._work[1], obj._work[2] if hess else None

    def block(_: int, sl: slice) -> None:  # into the work arrays: fresh temporaries would cost their page faults
        p = expit(eta[sl], out=scratch(sl)[0])
        r = np.multiply(c.n[sl], p, out=res[sl])
        r -= c.y[sl]
        r *= c.w[sl]
        if curv is not None:
            np.multiply(wn[sl], p, out=curv[sl])
            curv[sl] *= np.subtract(1.0, p, out=p)

    for _ in obj._map_blocks(block):
        pass
    return LossTerms(res, curv)


def _outcome_loss(obj: Any, x: np.ndarray, eta: np.ndarray) -> float:
    """``-sum_c w_c log p(w_i, w_j, t | eta_c, l_c)`` from the cells' outcome kernels."""
    return float(-np.sum(obj.cells.w * obj.cell_derivatives(x, eta).value))


def _outcome_terms(obj: Any, x: np.ndarray, eta: np.ndarray, hess: bool) -> LossTerms:
    """Return the weighted derivatives of minus the cells' outcome kernels in ``(eta, l)``."""
    w = obj.cells.w
    d = obj.cell_derivatives(x, eta)
    return LossTerms(-w * d.d_eta, -w * d.d_eta_eta, -w * d.d_l, -w * d.d_eta_l, -w * d.d_l_l)


@dataclass(frozen=True, eq=False)
class Family:
    """An outcome family: its cell kernel, probabilities, tie start and labels, and its objectives' loss kernel.

    :data:`BINARY` (``ties=None``), :data:`DAVIDSON` or :data:`RAO_KUPPER` (:func:`family_of`).  ``code`` is Stan's
    ``ties``; ``label`` the tie parameter's name; ``log_nu_of_rate`` the ``log nu`` of a tie rate at equal
    scores (``None``: binary); ``loss`` and ``terms`` the weighted loss of an objective's cells and its
    derivatives (the binary family's: the logistic residuals ``n p - y``, block by block).
    """

    name: str | None
    code: int
    label: str
    cell: Callable[..., CellDerivatives]
    probs: Callable[[np.ndarray, np.ndarray], np.ndarray]
    log_nu_of_rate: Callable[[float], float] | None = None
    loss: Callable[[Any, np.ndarray, np.ndarray], float] = _outcome_loss
    terms: Callable[[Any, np.ndarray, np.ndarray, bool], LossTerms] = _outcome_terms

    @property
    def is_binary(self) -> bool:
        """Whether this is the binary family (no tie outcome, no tie parameter)."""
        return self.log_nu_of_rate is None

    def __repr__(self) -> str:
        """``Family('davidson')``."""
        return f"Family({self.name!r})"

    def probabilities(self, eta: np.ndarray, log_nu: np.ndarray | float) -> np.ndarray:
        """``(P(i wins), P(j wins), P(tie))`` per cell, shape ``(m, 3)``."""
        eta = np.atleast_1d(np.asarray(eta, float))
        return self.probs(eta, np.broadcast_to(np.asarray(log_nu, float), eta.shape))

    def log_nu_start(self, counts: np.ndarray) -> float:
        """Return the starting ``log nu`` of a group with outcome counts ``counts`` (both engines).

        The tie rate (with half a tie added) at equal scores: ``nu / (2 + nu)`` (Davidson), ``tanh(tau / 2)`` (Rao-Kupper).
        """
        if self.log_nu_of_rate is None:
            raise ArgumentError("the binary family has no tie parameter")
        c = counts.sum(axis=0)
        return self.log_nu_of_rate((c[2] + 0.5) / (c.sum() + 1.0))

    def outcome_terms(self, eta: np.ndarray, l: np.ndarray | float) -> list[np.ndarray]:
        """Return ``P, a, b, a_eta, a_l, b_l`` of every (cell, outcome), each ``(m, 3)``: ``P`` and ``log P``'s derivatives."""
        eta = np.asarray(eta, float)
        out = [np.zeros((eta.size, 3)) for _ in range(6)]
        for o in range(2 if self.is_binary else 3):
            unit = np.zeros((eta.size, 3))
            unit[:, o] = 1.0
            d = self.cell(unit, eta, l)
            for arr, v in zip(out, (np.exp(d.value), d.d_eta, d.d_l, d.d_eta_eta, d.d_eta_l, d.d_l_l)):
                arr[:, o] = v
        return out


BINARY = Family(None, 0, "nu", binary_cell, binary_probabilities, None, _binary_loss, _binary_terms)
DAVIDSON = Family("davidson", 1, "nu", davidson_cell, davidson_probabilities,
                  lambda rate: float(np.log(2 * rate / (1 - rate))))
RAO_KUPPER = Family("rao-kupper", 2, "tau", rao_kupper_cell, rao_kupper_probabilities,
                    lambda rate: float(np.log(2 * np.arctanh(rate))))
FAMILIES: dict[str | None, Family] = {f.name: f for f in (BINARY, DAVIDSON, RAO_KUPPER)}
"""The family of each ``ties=`` option (``None``: the binary model)."""


def family_of_code(code: int) -> Family:
    """Return the :class:`Family` of Stan's datum ``ties`` (0 binary, 1 Davidson, 2 Rao-Kupper)."""
    for f in FAMILIES.values():
        if f.code == int(code):
            return f
    raise ArgumentError(f"ties must be a family code {[f.code for f in FAMILIES.values()]}, got {code!r}")


def family_of(ties: "str | None | Family") -> Family:
    """Return the :class:`Family` of a ``ties=`` option (a family is returned as it is)."""
    if isinstance(ties, Family):
        return ties
    if ties not in FAMILIES:
        raise ArgumentError(f"ties must be one of {list(FAMILIES)}, got {ties!r}")
    return FAMILIES[ties]
