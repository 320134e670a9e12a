"""Draws from the priors that ``judges.stan`` and ``dial_sample.stan`` state, in numpy.

Written from the program headers, not from their code: each prior is sampled on the
quantities the header names and mapped to the identified quantities by the
definitions of the model, with distributions that are equal in law to the programs'
coordinates but computed differently (centering instead of a Helmert basis,
projection instead of a Householder frame, a normalized Gaussian instead of the
parameter expansion):

``judges.stan``
    ``s_raw, sH_raw ~ normal(0, s_sd)`` in the coordinates of an orthonormal basis of
    the centered subspace, so each judge's scores and the people's are
    ``N(0, s_sd^2 (I - 1 1'/N))``: an iid normal vector minus its mean.
    ``b ~ normal(0, b_sd)``, ``log nu ~ normal(log_nu_mean, log_nu_sd)`` (``K`` judges
    and the people).

``dial_sample.stan`` (paper eq. S-llm, ``S = gamma mu' + U V'``)
    ``m = S'1/K = gamma_bar mu ~ N(0, m_sd^2 (I - 1 1'/N))`` (centered iid normal), so
    ``gamma_bar = ||m|| / sqrt(N)`` and ``mu = m / gamma_bar``; ``gamma = gamma_bar 1 +``
    a centered ``N(0, gamma_sd^2)`` vector; ``U V' = P Z'`` with the item side ``Z``
    isotropic ``N(0, Z_sd^2)`` on ``{1, mu}^perp`` (an iid normal ``N x r`` matrix
    projected there) and the judge side ``P`` a uniform (Haar) orthonormal frame of
    ``{1}^perp`` in ``R^K`` (QR of a centered normal matrix, positive ``R``);
    ``V = sqrt(N) frame(Z)``; ``c ~ normal(0, c_sd)`` and ``s_H = M c`` with ``M = mu``
    or ``M = [mu, V]``; ``b``, ``log nu`` as above.

A prior scale of 0 (flat) has no draws and is refused.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .configs import Config

__all__ = ["draw_prior", "draw_judges", "draw_dial"]


def _centered(rng: np.random.Generator, sd: float, shape: tuple[int, ...]) -> np.ndarray:
    """Iid ``N(0, sd^2)`` draws centered along the last axis: ``N(0, sd^2 (I - 1 1'/n))``."""
    x = sd * rng.standard_normal(shape)
    return x - x.mean(axis=-1, keepdims=True)


def _frame(X: np.ndarray) -> np.ndarray:
    """Orthonormal frame of the columns of ``X``: the QR factor with positive diagonal ``R``."""
    Q, R = np.linalg.qr(X)
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def _proper(p: Mapping[str, float], names: tuple[str, ...]) -> None:
    flat = [n for n in names if not p[n] > 0]
    if flat:
        raise ValueError(f"SBC needs proper priors; flat (0) scale(s) {flat}")


def _tie_draws(rng: np.random.Generator, p: Mapping[str, float], groups: int, ties: str | None) -> np.ndarray:
    if ties is None:
        return np.zeros(0)
    _proper(p, ("log_nu_sd",))
    return np.exp(p["log_nu_mean"] + p["log_nu_sd"] * rng.standard_normal(groups))


def draw_judges(rng: np.random.Generator, priors: Mapping[str, float], *, N: int, K: int,
                ties: str | None) -> dict[str, np.ndarray]:
    """Draw the parameters of ``judges.stan`` (with people) from its prior.

    Parameters
    ----------
    rng : numpy.random.Generator
    priors : mapping
        ``s_sd, b_sd, log_nu_mean, log_nu_sd`` (:data:`pydial.stan.schema.JUDGES_PRIORS`).
    N, K : int
        Items and LLM judges.
    ties : {None, "davidson", "rao-kupper"}

    Returns
    -------
    dict of str to ndarray
        ``S`` (K x N), ``s_H`` (N), ``b`` (K) and ``nu`` (K + 1 with ties, judges then people).
    """
    _proper(priors, ("s_sd", "b_sd"))
    return {
        "S": _centered(rng, priors["s_sd"], (K, N)),
        "s_H": _centered(rng, priors["s_sd"], (N,)),
        "b": priors["b_sd"] * rng.standard_normal(K),
        "nu": _tie_draws(rng, priors, K + 1, ties),
    }


def draw_dial(rng: np.random.Generator, priors: Mapping[str, float], *, N: int, K: int, rank: int,
              calibration: str, ties: str | None) -> dict[str, np.ndarray]:
    """Draw the parameters of ``dial_sample.stan`` from its prior (paper eq. S-llm and eq. human-subspace-model).

    Parameters
    ----------
    rng : numpy.random.Generator
    priors : mapping
        :data:`pydial.stan.schema.DIAL_SAMPLE_PRIORS` names.
    N, K, rank : int
        Items, LLM judges and the disagreement rank ``r``.
    calibration : {"mu", "W"}
        ``M = mu`` or ``M = W = [mu, V]``.
    ties : {None, "davidson", "rao-kupper"}

    Returns
    -------
    dict of str to ndarray
        ``S`` (K x N), ``gamma`` (K), ``mu`` (N), ``V`` (N x r), ``c`` (1 or 1 + r),
        ``s_H`` (N), ``b`` (K), ``nu`` (K + 1 with ties).
    """
    _proper(priors, ("m_sd", "gamma_sd", "Z_sd", "b_sd", "c_sd"))
    m = _centered(rng, priors["m_sd"], (N,))
    gamma_bar = np.linalg.norm(m) / np.sqrt(N)
    mu = m / gamma_bar
    gamma = gamma_bar + _centered(rng, priors["gamma_sd"], (K,))
    ones = np.ones((N, 1)) / np.sqrt(N)
    B = np.hstack([ones, mu[:, None] / np.sqrt(N)])          # orthonormal basis of span{1, mu}
    Z = priors["Z_sd"] * rng.standard_normal((N, rank))
    Z -= B @ (B.T @ Z)                                      # isotropic normal on {1, mu}^perp
    P = _frame(_centered(rng, 1.0, (rank, K)).T)             # Haar frame of {1}^perp in R^K
    V = np.sqrt(N) * _frame(Z)
    M = mu[:, None] if calibration == "mu" else np.hstack([mu[:, None], V])
    c = priors["c_sd"] * rng.standard_normal(M.shape[1])
    return {
        "S": np.outer(gamma, mu) + P @ Z.T,
        "gamma": gamma,
        "mu": mu,
        "V": V,
        "c": c,
        "s_H": M @ c,
        "b": priors["b_sd"] * rng.standard_normal(K),
        "nu": _tie_draws(rng, priors, K + 1, ties),
    }


def draw_prior(rng: np.random.Generator, cfg: Config) -> dict[str, np.ndarray]:
    """Draw one parameter set of configuration ``cfg`` (:class:`analyses.sbc.configs.Config`) from its prior."""
    if cfg.kind == "judges":
        return draw_judges(rng, cfg.priors, N=cfg.N, K=cfg.K, ties=cfg.ties)
    assert cfg.calibration is not None
    return draw_dial(rng, cfg.priors, N=cfg.N, K=cfg.K, rank=1, calibration=cfg.calibration, ties=cfg.ties)
