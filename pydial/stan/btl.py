r"""Stan's optimizer for the judges' models of every outcome family (``judges.stan``).

:func:`stan_btl` maximizes each LLM judge's BTL with its own order effect (``method="judges"``;
the people's model goes through :func:`pydial.stan.engine.stan_optimizers`): the binary
model or Davidson-Beaver's (1977) / Rao and Kupper's (1967), ``ties`` 0, 1 and 2 of
``stan/include/paired_likelihoods.stan``, and returns the optimum as a plain
:class:`pydial.estimation.engines.JudgesBTLFit`; :func:`pydial.estimation.btl.fit_btl` computes the
standard errors and assembles the result.
"""

from __future__ import annotations

import numpy as np

from pydial.data.comparisons import CellTable
from pydial.estimation.engines import JudgesBTLFit
from pydial.model.chart import helmert_basis

from .backend import compile_model
from .point import stan_beta
from .schema import judges_data, zero_beta

__all__ = ["stan_btl"]


def stan_btl(cells: CellTable, *, N: int, groups: int, ties: str | None, log_nu0: np.ndarray,
             seed: int | None = None, backend: str | None = None, penalty: str | None = None) -> JudgesBTLFit:
    """Fit each judge ``0..groups-1`` in the family ``ties`` by maximum likelihood, with judge-specific order effects.

    Parameters
    ----------
    cells : CellTable
        The judges' cells (with tie counts for a tie family; with covariates ``z``, each
        judge then has its own covariate effects).
    N, groups : int
        Items and judges.
    ties : {None, "davidson", "rao-kupper"}
    log_nu0 : ndarray
        Starting ``log nu`` per group (:func:`pydial.estimation.btl.tie_log_nu_start`; empty for the binary
        family); the scores start at 0.
    seed, backend
        Passed to Stan.
    penalty : {None, "firth"}
        ``"firth"``: each group's Jeffreys prior (``judges.stan``'s ``firth = 1``), Firth's estimates.

    Returns
    -------
    JudgesBTLFit
        Scores ``S`` (``(groups, N)``, centered), ``b``, ``log nu``, ``beta``; ``details`` is Stan's result.
    """
    model = compile_model("judges", backend=backend)
    Q = helmert_basis(N)
    d = judges_data(cells, None, N=N, K=groups, order=True, ties=ties, flat=True, log_lik=False,
                    firth=penalty == "firth")
    init = {"s_raw": np.zeros((groups, N - 1)), "b": np.zeros(groups), "beta_free": zero_beta(d), "log_nu": log_nu0}
    opt = model.optimize(d, model.unconstrain(d, init), seed=seed)
    if not np.isfinite(opt.log_prob):
        raise FloatingPointError("the judges' log density is not finite at the optimum")
    parts = model.constrain(d, opt.u, include_tparams=False)
    S = np.asarray(parts["s_raw"], float).reshape(groups, N - 1) @ Q.T
    b = np.asarray(parts["b"], float).reshape(-1)
    return JudgesBTLFit(S, b, np.asarray(parts["log_nu"], float).reshape(-1), bool(opt.converged), float(opt.grad_norm),
                        opt.message, opt, stan_beta(parts, d))
