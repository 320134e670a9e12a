r"""Stan's optimizer for the LLM judges' models of every outcome family (``judges.stan``, ``method="judges"``).

:func:`stan_btl` returns the optimum as a :class:`pydial.estimation.engines.JudgesBTLFit`;
:func:`pydial.estimation.btl.fit_btl` computes the standard errors and assembles the result.
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
    """Fit each judge ``0..groups-1`` of ``cells`` in the family ``ties`` by maximum likelihood, with its own order effect.

    Starts at scores 0 and ``log_nu0`` (empty for the binary family); ``penalty="firth"`` adds each group's Jeffreys
    prior.  Returns a :class:`JudgesBTLFit` (centered ``S``, ``b``, ``log nu``, ``beta``; ``details``: Stan's result).
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
