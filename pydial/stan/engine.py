"""``pydial.fit(..., engine="stan")``: Stan's optimizer, numpy inference at its optimum.

:func:`fit_stan` is the hook called by :func:`pydial.estimators.fit` when
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

__all__ = ["STAN_ENGINE_METHODS", "fit_stan"]

STAN_ENGINE_METHODS: tuple[str, ...] = ("human", "dial-anc", "dial-ada", "dial-nopos")
"""Methods that ``engine="stan"`` supports."""


def _as_optim(res: OptimizeResult, x: np.ndarray, fun: float) -> Any:
    from ..optim import BOX, OptimResult

    x = np.atleast_1d(np.asarray(x, float))
    return OptimResult(x=x, fun=float(fun), grad_norm=float(res.grad_norm), n_iter=int(res.iterations),
                       converged=bool(res.converged), at_bound=np.abs(x) >= BOX,
                       message=f"Stan ({res.backend}): {res.message}")


def stan_point_engine(seed: int | None = None) -> Any:
    """A :class:`pydial.estimators.PointEngine` whose optimizers are Stan's.

    The staged endpoint, every finite weight of the DIAL-Ada path (warm-started as
    in Alg. DIAL-Ada) and the human BTL are optimized by Stan; each optimum is
    re-expressed in the canonical gauge of the chart (same ``(s, S, b)``) before the
    box and regularity guards are applied.
    """
    from .. import estimators as E
    from ..fit import BTLFit

    def staged(data: Comparisons, rank: int, calibration: str, order: bool = True) -> Any:
        sp: StanPointFit = stan_fit_point(data, "staged", rank=rank, calibration=calibration, order=order, seed=seed)
        c_M = sp.chart.calibration_coordinates(sp.theta)
        llm_theta = sp.llm_chart.canonical(sp.llm_theta) if rank > 0 else sp.llm_theta
        theta = sp.chart.canonical(sp.theta) if rank > 0 else sp.theta
        llm_opt = _as_optim(sp.stages[0], llm_theta, sp.details["llm_objective"])
        cal_opt = _as_optim(sp.stages[1], c_M, sp.objective)
        return E.StagedFit(sp.chart, theta, llm_opt, cal_opt, sp.llm_chart, llm_theta)

    def joint(data: Comparisons, chart: Any, lam: float, theta0: np.ndarray) -> tuple[np.ndarray, Any]:
        sp = stan_fit_point(data, "joint", rank=chart.r, calibration=chart.calibration, lam=lam, order=chart.order,
                            init=theta0, seed=seed, warn=False)
        theta = chart.canonical(sp.theta) if chart.r > 0 else sp.theta
        return theta, _as_optim(sp.stages[0], theta, sp.objective)

    def human(data: Comparisons) -> Any:
        sp = stan_fit_point(data, "human", seed=seed, warn=False)
        return BTLFit(sp.scores, 0.0, _as_optim(sp.stages[0], sp.theta, sp.objective))

    return E.PointEngine(staged=staged, joint=joint, human=human, name="stan")


def fit_stan(
    data: Comparisons,
    method: str,
    common: dict[str, Any],
    *,
    rank_grid: list[int],
    lambdas: Any = None,
    multiples: Any = None,
    include_endpoints: bool = True,
    anchored_cov: str = "two-step",
    seed: int | None = None,
) -> Any:
    """The estimators of :func:`pydial.fit` with Stan's optimizer (``engine="stan"``).

    Same arguments and result as the numpy engine (see :func:`pydial.fit`); the
    optima come from Stan (:func:`stan_point_engine`), the inference from numpy at
    those optima.  Supported methods: :data:`STAN_ENGINE_METHODS`.

    Raises
    ------
    NotImplementedError
        For ``judges``, ``pooled`` and ``atc`` (use :func:`stan_fit_point` with
        ``method="judges"`` or ``"pooled"`` for their Stan optima).
    """
    if method not in STAN_ENGINE_METHODS:
        raise NotImplementedError(
            f"engine='stan' supports methods {STAN_ENGINE_METHODS}, not {method!r}; "
            "pydial.stan.stan_fit_point(data, 'judges' | 'pooled') gives those Stan optima"
        )
    from .. import estimators as E

    point = stan_point_engine(seed)
    if method == "human":
        return E._fit_human(data, common, point)
    return E._fit_dial(data, common, order=(method != "dial-nopos"), adaptive=(method != "dial-anc"),
                       lambdas=lambdas, multiples=multiples, include_endpoints=include_endpoints,
                       anchored_cov=anchored_cov, rank_grid=rank_grid, point=point)
