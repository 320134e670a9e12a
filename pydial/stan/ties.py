r"""Stan's optimizer for the tie models of the people and the judges (``judges.stan``).

:func:`stan_tie_btl` maximizes Davidson's (1970) or Rao and Kupper's (1967) model of
the people (``method="human"``) or Davidson-Beaver's with judge-specific order effects
of each LLM judge (``method="judges"``), ``ties`` 1 and 2 of
``stan/include/paired_likelihoods.stan``, and returns the optimum as a plain
:class:`pydial.estimation.engines.TieBTLFit`; :func:`pydial.estimation.tie_btl.fit_ties` computes the
standard errors and assembles the result.
"""

from __future__ import annotations

import numpy as np

from pydial.data.comparisons import CellTable
from pydial.estimation.engines import TieBTLFit
from pydial.model.chart import helmert_basis

from .backend import compile_model
from .schema import empty_cells, judges_data

__all__ = ["stan_tie_btl"]


def stan_tie_btl(cells: CellTable, *, N: int, groups: int, human: bool, ties: str, log_nu0: np.ndarray,
                 seed: int | None = None, backend: str | None = None, penalty: str | None = None) -> TieBTLFit:
    """Tie-model MLE of the people (``human``: ``cells`` of group 0) or of each judge ``0..groups-1``.

    Parameters
    ----------
    cells : CellTable
        The cells with tie counts (judge index ``0`` for the people).
    N, groups : int
        Items and groups (judges, or 1 for the people).
    human : bool
        The people's model (``judges.stan`` with ``K = 0``, no order effect); otherwise the
        judges' model with judge-specific order effects.
    ties : {"davidson", "rao-kupper"}
    log_nu0 : ndarray
        Starting ``log nu`` per group (:func:`pydial.estimation.tie_btl.tie_log_nu_start`); the scores start at 0.
    seed, backend
        Passed to Stan.
    penalty : {None, "firth"}
        ``"firth"``: each group's Jeffreys prior (``judges.stan``'s ``firth = 1``), Firth's estimates.

    Returns
    -------
    TieBTLFit
        Scores ``S`` (``(groups, N)``, centered), ``b``, ``log nu``; ``details`` is Stan's result.
    """
    model = compile_model("judges", backend=backend)
    Q = helmert_basis(N)
    if human:
        d = judges_data(empty_cells(), cells, N=N, K=0, order=False, ties=ties, flat=True,
                        log_lik=False, firth=penalty == "firth")
        init = {"sH_raw": np.zeros(N - 1), "log_nu": log_nu0}
    else:
        d = judges_data(cells, None, N=N, K=groups, order=True, ties=ties, flat=True, log_lik=False,
                        firth=penalty == "firth")
        init = {"s_raw": np.zeros((groups, N - 1)), "b": np.zeros(groups), "log_nu": log_nu0}
    opt = model.optimize(d, model.unconstrain(d, init), seed=seed)
    if not np.isfinite(opt.log_prob):
        raise FloatingPointError("the tie model's log density is not finite at the optimum")
    parts = model.constrain(d, opt.u, include_tparams=False)
    if human:
        S = (Q @ np.asarray(parts["sH_raw"], float))[None, :]
        b = np.zeros(1)
    else:
        S = np.asarray(parts["s_raw"], float).reshape(groups, N - 1) @ Q.T
        b = np.asarray(parts["b"], float).reshape(-1)
    return TieBTLFit(S, b, np.asarray(parts["log_nu"], float).reshape(-1), bool(opt.converged), float(opt.grad_norm),
                     opt.message, opt)
