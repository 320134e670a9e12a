r"""Evaluation metrics of the paper's simulation studies.

App. "Simulation Studies", paragraph "Estimation and metrics": excess human risk :math:`R_H(\hat s)-R_H(s_H)`, Kendall's
:math:`\tau` between :math:`\hat s` and :math:`s_H`, :math:`\mathrm{RMSE}(\hat b,b)` and coverage of pairwise
human-score contrasts; plus the first-order risk benchmarks of Thm. population-risk-tradeoff.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit, ndtri
from pydial.exceptions import ArgumentError
from pydial.resources import check_choice, check_level

__all__ = ["pair_weights_uniform", "human_risk", "excess_risk", "kendall_tau", "rmse", "contrast_coverage",
           "first_order_risk"]

EXCESS_RISK_METHODS = ("kl", "difference")


def _scores(name: str, s: ArrayLike) -> np.ndarray:
    x = np.asarray(s, dtype=float)
    if x.ndim < 1 or x.shape[-1] < 2:
        raise ArgumentError(f"{name} must have a last axis of at least 2 items, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ArgumentError(f"{name} contains non-finite values")
    return x


def pair_weights_uniform(N: int) -> np.ndarray:
    """Uniform weights ``1 / (N(N-1)/2)`` over the pairs ``np.triu_indices(N, 1)``."""
    P = N * (N - 1) // 2
    return np.full(P, 1.0 / P)


def _weights(pair_weights: ArrayLike | None, N: int) -> np.ndarray:
    P = N * (N - 1) // 2
    if pair_weights is None:
        return pair_weights_uniform(N)
    w = np.asarray(pair_weights, dtype=float)
    if w.shape != (P,):
        raise ArgumentError(f"pair_weights must have shape ({P},) (pairs i<j in np.triu_indices({N}, 1) order), "
                            f"got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ArgumentError("pair_weights must be finite, nonnegative and not all zero")
    return w / w.sum()


def _pairs(s: ArrayLike, s_h: ArrayLike, pair_weights: ArrayLike | None) -> tuple[np.ndarray, ...]:
    """Return the checked score differences of ``s`` and ``s_h`` over the pairs ``i < j``, the weights and ``p``."""
    s, s_h = _scores("s", s), _scores("s_h", s_h)
    if s.shape[-1] != s_h.shape[-1]:
        raise ArgumentError(f"s has {s.shape[-1]} items but s_h has {s_h.shape[-1]}")
    i, j = np.triu_indices(s.shape[-1], 1)
    dh = s_h[..., i] - s_h[..., j]
    return s[..., i] - s[..., j], dh, _weights(pair_weights, s.shape[-1]), expit(dh)


def _scalar(out: np.ndarray) -> np.ndarray | float:
    return float(out) if np.ndim(out) == 0 else out


def human_risk(s: ArrayLike, s_h: ArrayLike, pair_weights: ArrayLike | None = None) -> np.ndarray | float:
    r"""Compute the population human comparison risk :math:`R_H(s)` (Sec. 4.2 of the paper).

    .. math::

        R_H(s) = \sum_{i<j}\rho_{ij}\bigl[\log\{1+\exp(s_i-s_j)\}
                 - \sigma(s_{Hi}-s_{Hj})\,(s_i-s_j)\bigr],

    the expected per-comparison loss :math:`h_t(s)` for pairs drawn with probabilities :math:`\rho_{ij}` and
    :math:`Z\sim\mathrm{Bernoulli}\{\sigma(s_{HI}-s_{HJ})\}` (Thm. population-risk-tradeoff): the cross-entropy between
    the human and the model's win probabilities.  ``s`` and ``s_h`` have shape ``(..., N)`` (leading axes broadcast);
    ``pair_weights`` are the :math:`\rho_{ij}` in ``np.triu_indices(N, 1)`` order (normalized; default uniform).
    """
    d, _, w, p = _pairs(s, s_h, pair_weights)
    return _scalar((np.logaddexp(0.0, d) - p * d) @ w)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def excess_risk(s: ArrayLike, s_h: ArrayLike, pair_weights: ArrayLike | None = None, *,
                method: Literal["kl", "difference"] = "kl") -> np.ndarray | float:
    r"""Excess human risk :math:`R_H(s)-R_H(s_H)`, the headline metric of App. simulation.

    The excess risk equals the :math:`\rho`-weighted mean Kullback-Leibler divergence between the human and the model's
    Bernoulli win probabilities,

    .. math::

        R_H(s)-R_H(s_H) = \sum_{i<j}\rho_{ij}\,
        \mathrm{KL}\bigl(\mathrm{Ber}(p_{ij})\,\|\,\mathrm{Ber}(q_{ij})\bigr),
        \quad p_{ij}=\sigma(s_{Hi}-s_{Hj}),\ q_{ij}=\sigma(s_i-s_j),

    nonnegative, zero iff :math:`s-s_H` is constant (uniform weights), shift invariant.  Arguments as in
    :func:`human_risk`; ``method="kl"`` sums the KL divergences on the log scale (exactly 0 at ``s = s_h``,
    clipped at 0), ``"difference"`` subtracts the risks.
    """
    if check_choice("method", method, EXCESS_RISK_METHODS) == "difference":
        return human_risk(s, s_h, pair_weights) - human_risk(s_h, s_h, pair_weights)
    d, dh, w, p = _pairs(s, s_h, pair_weights)
    # KL = p (log p - log q) + (1 - p) (log(1-p) - log(1-q)), log(1-x) = log sigma(-.)
    kl = p * (_log_sigmoid(dh) - _log_sigmoid(d)) + (1.0 - p) * (_log_sigmoid(-dh) - _log_sigmoid(-d))
    return _scalar(np.maximum(kl @ w, 0.0))


def kendall_tau(s: ArrayLike, s_h: ArrayLike) -> float:
    r"""Kendall's :math:`\tau_b` between estimated and true human scores (App. simulation).

    :func:`scipy.stats.kendalltau` (``variant="b"``) of two ``(N,)`` vectors; NaN if either is constant.
    """
    s, s_h = np.asarray(s, dtype=float), np.asarray(s_h, dtype=float)
    if s.ndim != 1 or s.shape != s_h.shape:
        raise ArgumentError(f"s and s_h must be 1-d of equal length, got shapes {s.shape} and {s_h.shape}")
    from scipy.stats import kendalltau

    return float(kendalltau(s, s_h, variant="b").statistic)


def rmse(b_hat: ArrayLike, b: ArrayLike) -> float:
    r"""Root mean squared error :math:`\{K^{-1}\sum_k(\hat b_k-b_k)^2\}^{1/2}` of position effects.

    The :math:`\mathrm{RMSE}(\hat b,b)` of App. simulation; with pair-varying position effects ``b`` is the judge-level
    mean :math:`b_k`.
    """
    b_hat, b = np.asarray(b_hat, dtype=float), np.asarray(b, dtype=float)
    if b_hat.shape != b.shape or b.size == 0:
        raise ArgumentError(f"b_hat and b must be non-empty with equal shapes, got {b_hat.shape} and {b.shape}")
    return float(np.sqrt(np.mean((b_hat - b) ** 2)))


def contrast_coverage(s_hat: ArrayLike, cov: ArrayLike, s_true: ArrayLike, level: float = 0.95) -> float:
    r"""Fraction of pairwise contrasts whose Wald interval covers the truth (App. simulation).

    For every pair :math:`i<j`, with :math:`v=e_i-e_j`, the interval
    :math:`v^\top\hat s\pm z_{(1+\text{level})/2}\sqrt{v^\top\Sigma v}` is checked against :math:`v^\top s_{\mathrm{true}}`.
    Contrasts are shift-invariant, so centered and uncentered scores give the same answer.  ``cov`` is the ``(N, N)``
    covariance of ``s_hat``.
    """
    level = check_level(level)
    s_hat, s_true, cov = (np.asarray(x, dtype=float) for x in (s_hat, s_true, cov))
    N = s_hat.size
    if s_hat.ndim != 1 or s_true.shape != s_hat.shape or cov.shape != (N, N) or N < 2:
        raise ArgumentError(f"need s_hat, s_true of shape (N,) and cov of shape (N, N) with N >= 2; got {s_hat.shape}, "
                            f"{s_true.shape}, {cov.shape}")
    i, j = np.triu_indices(N, 1)
    var = cov[i, i] + cov[j, j] - cov[i, j] - cov[j, i]
    scale = max(1.0, float(np.max(np.abs(np.diag(cov)))))
    if np.any(var < -1e-10 * scale):
        raise ArgumentError("cov gives a negative contrast variance; it is not positive semidefinite")
    half = ndtri(0.5 + 0.5 * float(level)) * np.sqrt(np.maximum(var, 0.0))
    err = (s_hat[i] - s_hat[j]) - (s_true[i] - s_true[j])
    return float(np.mean(np.abs(err) <= half))


def first_order_risk(n_human: ArrayLike, dim: ArrayLike) -> np.ndarray | float:
    r"""First-order expected excess risk :math:`\mathrm{dim}/(2n_H)` (Thm. population-risk-tradeoff).

    Use ``dim = N - 1`` for the human-only estimator :math:`\hat s_0` and ``dim = d`` (1 for :math:`M=\mu`, :math:`r+1`
    for :math:`M=W`) for the anchored estimator :math:`\tilde s_\infty` when :math:`s_H\in\mathrm{col}(M)`
    (``n_human > 0``, ``dim >= 0``).
    """
    n, d = np.asarray(n_human, dtype=float), np.asarray(dim, dtype=float)
    if np.any(n <= 0):
        raise ArgumentError(f"n_human must be positive, got {n_human!r}")
    if np.any(d < 0):
        raise ArgumentError(f"dim must be nonnegative, got {dim!r}")
    return _scalar(d / (2.0 * n))
