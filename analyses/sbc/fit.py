"""Fit one simulated data set with NUTS through pydial and return thinned identified draws.

The Stan data are built by :mod:`pydial.stan.schema` exactly as
:func:`pydial.stan.posterior` builds them, with the configuration's priors passed
explicitly: ``judges.stan`` from the cell tables (:func:`~pydial.stan.schema.judges_data`;
a judge whose judgments are all ties is kept, as the program allows), and
``dial_sample.stan`` from a :class:`pydial.Comparisons` built from the counts table
(:func:`~pydial.stan.schema.dial_sample_data`, the reference direction ``mu_ref``
and the jittered start of :func:`~pydial.stan.schema.dial_sample_inits`, as
``posterior(options={"init": "point-start"})``).  One chain per fit; the kept draws are every
``thin``-th of ``kept * thin`` post-warmup draws (Talts et al. 2018, Sec. 5: thin to
nearly independent draws), and the sampler diagnostics of the whole chain are
returned with them.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

import pydial
from pydial.data.comparisons import CellTable
from pydial.model.families import family_of
from pydial.stan import compile_model
from pydial.stan.idata import rhat_ess
from pydial.exceptions import DialError
from pydial.stan.dial_posterior import dense_pays
from pydial.stan.laplace import LogDensity, SampleProgram, frame_scale, mode, nuts_start, with_frame_sd
from pydial.stan.schema import dial_sample_data, dial_sample_inits, judges_data

from .configs import Config
from .quantities import identified
from .simulate import HUMAN, counts_frame

__all__ = ["NutsSettings", "stan_data", "fit_draws"]

@dataclass(frozen=True)
class NutsSettings:
    """NUTS settings of every SBC fit.

    Attributes
    ----------
    warmup : int
        Warmup iterations.
    kept : int
        Kept draws ``L`` per fit: ranks lie in ``0..L``.
    thin : int
        Thinning; the chain runs ``kept * thin`` post-warmup iterations.
    adapt_delta : float
        Target acceptance rate (0.9, the default of :func:`pydial.stan.posterior`).
    """

    warmup: int = 500
    kept: int = 99
    thin: int = 10
    adapt_delta: float = 0.9


def stan_data(cfg: Config, llm: CellTable, human: CellTable,
              rng: np.random.Generator) -> tuple[dict[str, Any], list[dict[str, Any]] | None, np.ndarray | None]:
    """Return the Stan data of ``cfg`` for simulated cells, the chain's initial values (``None``: Stan's) and metric.

    ``dial_sample.stan`` is set up as :func:`pydial.posterior` sets it up: the expansion scale ``frame_sd`` matched
    to the posterior at its mode (Newton from the jittered point start), the chain started at a draw of the
    Laplace approximation there and CmdStan's metric from it as ``metric="auto"`` chooses (``dense_pays``: its
    covariance, kept, where the posterior is close to normal; else its variances, adapted); where no mode is found, the
    jittered point start, ``frame_sd = 0.2`` and the unit metric.
    """
    if cfg.kind == "judges":
        d = judges_data(llm, human, N=cfg.N, K=cfg.K, order=True, family=family_of(cfg.ties), priors=cfg.priors,
                        log_lik=False)
        return d, None, None
    data = pydial.Comparisons.from_counts(counts_frame(llm, human, N=cfg.N, K=cfg.K), human_judge=HUMAN)
    d, _, _ = dial_sample_data(data, rank=1, calibration=cfg.calibration, family=family_of(cfg.ties), priors=cfg.priors,
                               log_lik=False)
    inits = dial_sample_inits(data, d, chains=1, rng=rng)
    try:
        prog = SampleProgram.from_data(d)
        u_hat, pt, _ = mode(LogDensity(prog), prog.join(inits[0]))
        prog, hess = with_frame_sd(prog, u_hat, pt.hess, frame_scale(prog, u_hat, pt.hess))
        starts, cov = nuts_start(prog, u_hat, hess, chains=1, rng=rng)   # posterior's metric="auto"
        return d | {"frame_sd": prog.frame_sd}, starts, cov if dense_pays(prog, u_hat, hess, rng) else np.diag(cov).copy()
    except DialError:
        return d, inits, None


def fit_draws(cfg: Config, d: dict[str, Any], inits: list[dict[str, Any]] | None, *, seed: int,
              settings: NutsSettings, inv_metric: np.ndarray | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Run NUTS on ``d`` (``inv_metric``: a dense metric kept, or a diagonal one to adapt from) and return the thinned draws and diagnostics.

    Returns
    -------
    draws : dict of str to ndarray
        :func:`analyses.sbc.quantities.identified` of the kept draws (each of length ``kept``).
    diagnostics : dict
        ``divergent`` (post-warmup divergent transitions), ``treedepth_hits``,
        ``min_ess_bulk``, ``min_ess_tail`` over the identified scalars (whole chain,
        before thinning) and ``min_ess_at`` (the scalar of the smaller of the two),
        ``stepsize``, ``seconds``.
    """
    cm = compile_model(cfg.program)
    n = settings.kept * settings.thin
    res = cm.sample(d, chains=1, draws=n, warmup=settings.warmup, seed=seed, inits=inits,
                    adapt_delta=settings.adapt_delta, quiet=True, progress=False,
                    inv_metric=inv_metric if cm.backend == "cmdstanpy" else None)
    full = identified(res.draws, ndim_draws=2)              # (chain, draw) per identified scalar
    names = list(full)
    import arviz

    arviz_log = getattr(arviz, "_log", logging.getLogger("arviz"))   # arviz's own logger instance
    level = arviz_log.level
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")                       # one chain: arviz's R-hat is undefined
        arviz_log.setLevel(logging.ERROR)
        try:
            _, bulk, tail = rhat_ess(np.stack([full[k] for k in names], axis=-1))
        finally:
            arviz_log.setLevel(level)
    info = {
        "divergent": float(res.stats["divergent__"].sum()),
        "treedepth_hits": float((res.stats["treedepth__"] >= res.max_depth).sum()),
        "min_ess_bulk": float(np.min(bulk)),
        "min_ess_tail": float(np.min(tail)),
        "min_ess_at": names[int(np.argmin(np.minimum(bulk, tail)))],
        "stepsize": float(np.mean(res.stats["stepsize__"])),
        "frame_sd": float(d.get("frame_sd", np.nan)),
        "seconds": float(res.seconds),
    }
    kept = {k: v[0, settings.thin - 1::settings.thin] for k, v in full.items()}
    return kept, info
