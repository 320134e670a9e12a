"""``pydial.fit(..., engine="stan")``: Stan's optimizer, numpy inference at its optimum.

:func:`stan_point_engine` supplies the optimizers used by :func:`pydial.fit` when
``engine="stan"``.  The point estimate comes from Stan (:func:`stan_fit_point`);
the covariance, position-effect tests, consensus loadings and the calibration
LRT are computed by the numpy engine's own functions at that point, so the two
engines differ only in the optimizer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data import Comparisons
from .backend import OptimizeResult
from .point import StanPointFit, stan_fit_point

__all__ = ["stan_point_engine"]



def _as_optim(res: OptimizeResult, x: np.ndarray, fun: float) -> Any:
    from ..optim import BOX, OptimResult

    x = np.atleast_1d(np.asarray(x, float))
    return OptimResult(x=x, fun=float(fun), grad_norm=float(res.grad_norm), n_iter=int(res.iterations),
                       converged=bool(res.converged), at_bound=np.abs(x) >= BOX,
                       message=f"Stan ({res.backend}): {res.message}")


def stan_point_engine(seed: int | None = None, penalty: str | None = None) -> Any:
    """A :class:`pydial.estimators.PointEngine` whose optimizers are Stan's.

    The staged endpoint, every finite weight of the DIAL-Ada path (warm-started as
    in Alg. DIAL-Ada) and the human BTL are optimized by Stan; each optimum is
    re-expressed in the canonical gauge of the chart (same ``(s, S, b)``) before the
    box and regularity guards are applied.  ``penalty="firth"`` optimizes the
    Jeffreys-prior penalized targets (the ``firth`` flag of the programs).
    """
    from .. import estimators as E
    from ..fit import BTLFit

    def staged(data: Comparisons, rank: int, calibration: str, order: bool = True) -> Any:
        sp: StanPointFit = stan_fit_point(data, "staged", rank=rank, calibration=calibration, order=order, seed=seed,
                                          penalty=penalty)
        c_M = sp.chart.calibration_coordinates(sp.theta)
        llm_theta = sp.llm_chart.canonical(sp.llm_theta) if rank > 0 else sp.llm_theta
        theta = sp.chart.canonical(sp.theta) if rank > 0 else sp.theta
        llm_opt = _as_optim(sp.stages[0], llm_theta, sp.details["llm_objective"])
        cal_opt = _as_optim(sp.stages[1], c_M, sp.objective)
        return E.StagedFit(sp.chart, theta, llm_opt, cal_opt, sp.llm_chart, llm_theta)

    def joint(data: Comparisons, chart: Any, lam: float, theta0: np.ndarray) -> tuple[np.ndarray, Any]:
        sp = stan_fit_point(data, "joint", rank=chart.r, calibration=chart.calibration, lam=lam, order=chart.order,
                            init=theta0, seed=seed, warn=False, penalty=penalty)
        theta = chart.canonical(sp.theta) if chart.r > 0 else sp.theta
        return theta, _as_optim(sp.stages[0], theta, sp.objective)

    def human(data: Comparisons) -> Any:
        sp = stan_fit_point(data, "human", seed=seed, warn=False, penalty=penalty)
        return BTLFit(sp.scores, 0.0, _as_optim(sp.stages[0], sp.theta, sp.objective))

    def judges(data: Comparisons) -> list:
        sp = stan_fit_point(data, "judges", seed=seed, warn=False, penalty=penalty)
        res = sp.stages[0]
        out = []
        for k in range(data.K):
            s, b = sp.chart.S(sp.theta[k])[0], float(sp.chart.order_effects(sp.theta[k])[0])
            out.append(BTLFit(s, b, _as_optim(res, np.append(s[:-1], b), sp.objective)))
        return out

    def pooled(data: Comparisons) -> tuple[Any, Any]:
        sp = stan_fit_point(data, "pooled", seed=seed, warn=False, penalty=penalty)
        s_pool = sp.llm_chart.S(sp.llm_theta)[0]  # K = 1, A = [1]: B e_1 = the pooled BTL scores
        c = float(s_pool @ sp.scores / (s_pool @ s_pool))
        return (_as_optim(sp.stages[0], s_pool[:-1], sp.details["llm_objective"]),
                _as_optim(sp.stages[1], np.array([c]), sp.objective))

    return E.PointEngine(staged=staged, joint=joint, human=human, judges=judges, pooled=pooled, name="stan",
                         penalty=penalty)
