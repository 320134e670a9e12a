"""``pydial.fit(..., engine="stan")``: Stan's optimizers (:class:`~pydial.stan.point.StanRun`), numpy's inference."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from pydial.data.comparisons import CellTable, Comparisons
from pydial.estimation.engines import JudgesBTLFit, Optimizers, StagedFit
from pydial.model.cells import family_totals
from pydial.model.chart import Chart, centering_basis, fixed_effects
from pydial.model.families import Family
from pydial.model.penalty import check_penalty

from ..optim import BOX, OptimResult
from .backend import OptimizeResult
from .point import StanRun, judges_fit, people_fit, point_options, stan_fit_point
from .schema import pooled_cell_table

__all__ = ["stan_optimizers", "stan_pooled_stages"]

GTOL = 1e-9
"""The optimizers' tolerance of the tie families' fits, the pooled baseline's and the people's model."""


def _as_optim(res: OptimizeResult, x: np.ndarray, fun: float) -> OptimResult:
    """Return Stan's result ``res`` as the numpy engine's :class:`~pydial.optim.OptimResult` at ``x`` and ``fun``."""
    x = np.atleast_1d(np.asarray(x, float))
    return OptimResult(x=x, fun=float(fun), grad_norm=float(res.grad_norm), n_iter=int(res.n_iter),
                       converged=bool(res.converged), at_bound=np.abs(x) >= BOX,
                       message=f"Stan ({res.backend}): {res.message}")


def _canonical(ch: Chart, x: np.ndarray) -> np.ndarray:
    """Return ``x = (theta, log nu)`` with ``theta`` in the chart's canonical gauge."""
    return np.concatenate([ch.canonical(x[: ch.dim]), x[ch.dim:]]) if ch.r > 0 else x


def stan_optimizers(seed: int | None = None, penalty: str | None = None, backend: str | None = None) -> Optimizers:
    """Return the Stan engine of ``pydial.fit(..., engine="stan")``: every optimizer of every family is Stan's.

    The calls of :func:`~pydial.stan.point.stan_fit_point` (``dial.stan``: the LLM-only, calibration
    and weighted fits; ``judges.stan``: the people's and the judge-wise models), each optimum in the
    canonical gauge, where the numpy engine computes every covariance, GACV and test.
    """
    def staged(data: Comparisons, rank: int, calibration: str, *, order: bool = True, shared: bool = False) -> StagedFit:
        sp = stan_fit_point(data, "dial-anc" if order else "dial-nopos", rank=rank, calibration=calibration,
                            lambda_=np.inf, seed=seed, penalty=penalty, backend=backend,
                            covariate_effects="shared" if shared else "judge")
        assert sp.llm_chart is not None and sp.llm_theta is not None  # a staged fit has its first stage
        # the calibration GLM's coordinates (c, free beta_H), as numpy's (pydial.estimation.glm.fit_calibration)
        c_M = np.append(sp.chart.calibration_coordinates(sp.theta), sp.theta[sp.chart.human_coordinates[sp.chart.d:]])
        llm_theta = _canonical(sp.llm_chart, sp.llm_theta)
        llm_opt = _as_optim(sp.stages[0], llm_theta, sp.details["llm_objective"])
        cal_opt = _as_optim(sp.stages[1], c_M, sp.objective)
        return StagedFit(sp.chart, _canonical(sp.chart, sp.theta), llm_opt, cal_opt, sp.llm_chart, llm_theta)

    def path(data: Comparisons, chart: Any, lambda_: float, theta0: np.ndarray, warm: Any = None,
             polish: bool = True) -> tuple[np.ndarray, Any]:
        # warm and polish are not used: Stan's optimizer evaluates its own start and stops at its own tolerances
        sp = stan_fit_point(data, "dial-ada" if chart.order else "dial-nopos", rank=chart.r, calibration=chart.calibration,
                            lambda_=lambda_, init=theta0, seed=seed, penalty=penalty, backend=backend,
                            covariate_effects="shared" if chart.shared else "judge", options={"warn": False})
        theta = _canonical(chart, sp.theta)
        return theta, _as_optim(sp.stages[0], theta, sp.objective)

    def run(data: Comparisons, family: Family) -> StanRun:
        return StanRun(data, family, seed, backend, point_options(None, gtol=GTOL, warn=False))

    def firth(penalty: str | None) -> int:
        return 2 if check_penalty(penalty) else 0

    def llm(data: Comparisons, family: Family, ch: Chart, x0: np.ndarray) -> Any:
        st = run(data, family).dial(ch, x0, "LLM-only stage", w_llm=1.0)
        return _as_optim(st.res, _canonical(ch, st.x), st.objective)

    def calibration(data: Comparisons, family: Family, ch: Chart, theta: np.ndarray, M: np.ndarray, x0: np.ndarray,
                    penalty: str | None = None) -> Any:
        # the program's (c, free beta_H, log nu_H) are chart coordinates; x0 and the optimum numpy's (c relative to M)
        people = ch.human_coordinates
        head = people.size
        st = run(data, family).dial(ch, np.append(theta[people], x0[head:]), "calibration stage", w_llm=0.0, w_human=1.0,
                                  fix_llm=theta, firth=firth(penalty))
        th = np.array(theta, float)
        th[people] = st.x[:head]
        return _as_optim(st.res, np.concatenate([ch.calibration_coordinates(th), st.x[ch.d:head], st.x[head:]]),
                         st.objective)

    def joint(data: Comparisons, family: Family, ch: Chart, lambda_: float, x0: np.ndarray,
              penalty: str | None = None) -> Any:
        n_l, n_h = family_totals(data, family)
        st = run(data, family).dial(ch, x0, f"joint fit, lambda = {lambda_:.4g}", w_llm=lambda_ * n_h / n_l, w_human=1.0,
                                  firth=firth(penalty))
        return _as_optim(st.res, _canonical(ch, st.x), st.objective)

    def human(data: Comparisons, family: Family, x0: np.ndarray, penalty: str | None = None) -> Any:
        st = people_fit(run(data, family), x0, bool(check_penalty(penalty)))[0]
        return _as_optim(st.res, st.x, st.objective)

    return Optimizers(llm, calibration, joint, human, staged, path, name="stan", penalty=penalty,
                      pooled_stages=partial(stan_pooled_stages, seed=seed, backend=backend), btl=stan_btl)


def stan_btl(cells: CellTable, *, N: int, groups: int, family: Family, log_nu0: np.ndarray, seed: int | None = None,
             backend: str | None = None, penalty: str | None = None) -> JudgesBTLFit:
    """Fit each judge ``0..groups-1`` of ``cells`` in ``family`` with ``judges.stan`` from ``log_nu0`` (``penalty``: Jeffreys)."""
    run = StanRun(None, family, seed, backend, point_options(None, warn=False))  # type: ignore[arg-type]  # no data: the cells
    return judges_fit(run, cells, N=N, groups=groups, log_nu0=log_nu0, firth=penalty == "firth")


def stan_pooled_stages(data: Comparisons, family: Family, x0: np.ndarray, l2: float, free1: bool, free2: bool,
                       seed: int | None = None, backend: str | None = None,
                       penalty: str | None = None) -> tuple[Any, Any]:
    """Run the pooled fit's two stages (:func:`pydial.estimation.baselines.fit_pooled`) by Stan.

    One judge holding the pooled LLM cells, then ``fix_llm``; the optima in numpy's ``(beta, beta_L, log nu_L)`` and
    ``(c, beta_H, log nu_H)``.  ``free1``, ``free2``: whether the ``log nu`` are free; ``penalty="firth"``: Jeffreys.
    """
    N, p = data.N, data.p
    r = StanRun(data, family, seed, backend, point_options(None, gtol=GTOL, warn=False))
    # S = B': B_free = beta (s = T beta), then beta_L (the pooled judges' effects, shared; the free ones)
    chL = Chart(N, 1, 0, None, False, p, True, fixed_effects(data, True, False))
    head = chL.dim  # (beta, beta_L)
    firth = bool(check_penalty(penalty))
    s1 = r.dial(chL, x0 if free1 else x0[:head], "pooled LLM stage", w_llm=1.0, firth=1 if firth else 0,
                llm=pooled_cell_table(data, family))
    beta = s1.x[: N - 1]
    ch = Chart(N, 1, 0, "mu", False, p, True, fixed_effects(data, True, True))
    th = ch.from_structure(chL.structure(s1.x[:head]), np.ones(1),
                           beta=np.vstack([chL.covariate_effects(s1.x[:head]), np.zeros(p)]) if p else None)
    people = ch.human_coordinates  # (c, beta_H)
    s2 = r.dial(ch, np.append(th[people], [l2] if free2 else []), "pooled calibration stage", w_llm=0.0, w_human=1.0,
                fix_llm=th, firth=2 if firth else 0)
    th[people] = s2.x[: people.size]
    s_pool = centering_basis(N) @ beta
    c = float(ch.scores(th) @ s_pool / (s_pool @ s_pool))  # s = c s_pool
    return (_as_optim(s1.res, s1.x, s1.objective),
            _as_optim(s2.res, np.concatenate([[c], s2.x[1:]]), s2.objective))
