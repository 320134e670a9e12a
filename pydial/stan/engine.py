"""``pydial.fit(..., engine="stan")``: Stan's optimizer, numpy inference at its optimum.

:func:`stan_optimizers` supplies the optimizers used by :func:`pydial.fit` when
``engine="stan"``.  The point estimate comes from Stan (:func:`stan_fit_point`);
the covariance, position-effect tests, consensus loadings and the calibration
LRT are computed by the numpy engine's own functions at that point, so the two
engines differ only in the optimizer.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import numpy as np

from pydial.data.comparisons import Comparisons
from pydial.estimation.engines import Optimizers, StagedFit
from pydial.model.families import Family
from pydial.model.penalty import check_penalty

from .backend import OptimizeResult
from .parameters import optimize_dial
from .point import StanPointFit, stan_beta, stan_fit_point
from .btl import stan_btl

__all__ = ["stan_optimizers", "stan_pooled_stages"]



def _as_optim(res: OptimizeResult, x: np.ndarray, fun: float) -> Any:
    from ..optim import BOX, OptimResult

    x = np.atleast_1d(np.asarray(x, float))
    return OptimResult(x=x, fun=float(fun), grad_norm=float(res.grad_norm), n_iter=int(res.n_iter),
                       converged=bool(res.converged), at_bound=np.abs(x) >= BOX,
                       message=f"Stan ({res.backend}): {res.message}")


def _binary_optimizers(seed: int | None, penalty: str | None) -> tuple[Any, Any]:
    """Stan's ``staged`` and ``path`` of the binary family (:class:`~pydial.estimation.engines.Optimizers`).

    Each optimum is re-expressed in the canonical gauge of the chart (same ``(s, S, b)``) before
    the box and regularity guards; ``penalty="firth"`` optimizes the Jeffreys-prior penalized targets.
    """
    def staged(data: Comparisons, rank: int, calibration: str, *, order: bool = True, shared: bool = False) -> StagedFit:
        sp: StanPointFit = stan_fit_point(data, "dial-anc" if order else "dial-nopos", rank=rank, calibration=calibration,
                                          lambda_=np.inf, seed=seed, penalty=penalty, shared=shared)
        assert sp.llm_chart is not None and sp.llm_theta is not None  # a staged fit has its first stage
        # the calibration GLM's coordinates (c, free beta_H), as numpy's (pydial.estimation.glm.fit_calibration)
        c_M = np.append(sp.chart.calibration_coordinates(sp.theta), sp.theta[sp.chart.human_coordinates[sp.chart.d:]])
        llm_theta = sp.llm_chart.canonical(sp.llm_theta) if rank > 0 else sp.llm_theta
        theta = sp.chart.canonical(sp.theta) if rank > 0 else sp.theta
        llm_opt = _as_optim(sp.stages[0], llm_theta, sp.details["llm_objective"])
        cal_opt = _as_optim(sp.stages[1], c_M, sp.objective)
        return StagedFit(sp.chart, theta, llm_opt, cal_opt, sp.llm_chart, llm_theta)

    def joint(data: Comparisons, chart: Any, lambda_: float, theta0: np.ndarray, warm: Any = None,
              polish: bool = True) -> tuple[np.ndarray, Any]:
        # warm (the previous weight's fit) is not used: Stan's optimizer evaluates its own start;
        # polish neither: it stops at its own tolerances
        sp = stan_fit_point(data, "dial-ada" if chart.order else "dial-nopos", rank=chart.r, calibration=chart.calibration,
                            lambda_=lambda_, init=theta0, seed=seed, penalty=penalty, shared=chart.shared,
                            options={"warn": False})
        theta = chart.canonical(sp.theta) if chart.r > 0 else sp.theta
        return theta, _as_optim(sp.stages[0], theta, sp.objective)

    return staged, joint


def stan_optimizers(seed: int | None = None, penalty: str | None = None, backend: str | None = None) -> Optimizers:
    """Return the Stan engine of ``pydial.fit(..., engine="stan")``: every optimizer of every family is Stan's.

    ``dial.stan`` with the family's ``ties`` code for the LLM-only stage, the calibration
    stage (``fix_llm``) and the weighted fits (weights ``lambda n_H / n_L`` and 1, ``n``
    counting the ties of a tie family); ``judges.stan`` for the people alone; the binary
    family's staged and weighted fits through :func:`~pydial.stan.point.stan_fit_point`
    (``penalty``: their Jeffreys prior), the pooled baseline's stages and the judge-wise
    BTL too.  Each optimum is re-expressed in the
    canonical gauge; the numpy engine computes every covariance, GACV and test there.
    A judge or the people without any tie get ``nu_zero`` (``nu = 0``, binary cells; their
    unused ``log nu`` entries of the program are held at 0 and dropped from the optimum), as
    the numpy engine fixes them (:func:`pydial.model.cells.tie_groups`).
    """
    from pydial.model.chart import helmert_basis
    from pydial.model.cells import family_totals

    from .backend import compile_model
    from .schema import dial_data, empty_cells, human_cell_table, judges_data, weighted_log_coef

    gtol = 1e-9

    def canonical(ch: Any, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, float)
        return np.concatenate([ch.canonical(x[: ch.dim]), x[ch.dim:]]) if ch.r > 0 else x

    def free_entries(d: dict, ch: Any) -> np.ndarray:
        """Which entries of the program's ``log_nu`` (judges unless ``fix_llm``, then people) are free."""
        groups = ([] if d["fix_llm"] else list(range(ch.K))) + ([ch.K] if d["H"] > 0 else [])
        return np.array([not d["nu_zero"][g] for g in groups], bool)

    def run(d: dict, ch: Any, x0: np.ndarray, head: int) -> tuple[Any, np.ndarray]:
        """Optimize from ``x0`` (``head`` structural entries, then the free ``log nu``).

        Return the optimizer's result and the optimum in the same layout.
        """
        free = free_entries(d, ch)
        lognu = np.zeros(free.size)
        lognu[free] = x0[head:]
        res = optimize_dial(compile_model("dial", backend=backend), d, np.concatenate([x0[:head], lognu]), seed=seed,
                           gtol=gtol)
        return res, np.concatenate([res.u[:head], res.u[head:][free]])

    def llm(data: Comparisons, family: Family, ch: Any, x0: np.ndarray) -> Any:
        n_l, _ = family_totals(data, family)
        d = dial_data(data, ch, w_llm=1.0, ties=family.name, boundary_nu=True)
        res, u = run(d, ch, x0, ch.dim)
        return _as_optim(res, canonical(ch, u), -(res.log_prob - weighted_log_coef(d)) / n_l)

    def calibration(data: Comparisons, family: Family, ch: Any, theta: np.ndarray, M: np.ndarray, x0: np.ndarray,
                    penalty: str | None = None) -> Any:
        # the program's parameters are the people's chart coordinates (c, free beta_H), then log nu_H;
        # x0 and the optimum are in numpy's (c relative to M, free beta_H, log nu_H)
        _, n_h = family_totals(data, family)
        people = ch.human_coordinates
        d = dial_data(data, ch, w_llm=0.0, w_human=1.0, fix_llm=theta, ties=family.name, boundary_nu=True,
                      firth=2 if check_penalty(penalty) else 0)
        head = people.size
        res, u = run(d, ch, np.append(theta[people], x0[head:]), head)
        th = np.array(theta, float)
        th[people] = u[:head]
        x = np.concatenate([ch.calibration_coordinates(th), u[ch.d:head], u[head:]])
        return _as_optim(res, x, -(res.log_prob - weighted_log_coef(d)) / n_h)

    def joint(data: Comparisons, family: Family, ch: Any, lambda_: float, x0: np.ndarray, penalty: str | None = None) -> Any:
        n_l, n_h = family_totals(data, family)
        d = dial_data(data, ch, w_llm=lambda_ * n_h / n_l, w_human=1.0, ties=family.name, boundary_nu=True,
                      firth=2 if check_penalty(penalty) else 0)
        res, u = run(d, ch, x0, ch.dim)
        return _as_optim(res, canonical(ch, u), -(res.log_prob - weighted_log_coef(d)) / n_h)

    def human(data: Comparisons, family: Family, x0: np.ndarray, penalty: str | None = None) -> Any:
        _, n_h = family_totals(data, family)
        N = data.N
        H = human_cell_table(data, ties=not family.is_binary)
        if data.p:  # the covariates with an effect on the people (numpy's people's design)
            H = dataclasses.replace(H, z=data.effect_columns(H.z, data.K))
        assert H.tie_counts is not None  # filled in by CellTable
        free = bool((H.tie_counts > 0).any())  # without ties: the binary model (nu = 0)
        d = judges_data(empty_cells(), H, N=N, K=0, order=False, ties=family.name if free else None, flat=True,
                        log_lik=False, firth=bool(check_penalty(penalty)))
        model = compile_model("judges", backend=backend)
        Q = helmert_basis(N)
        p = int(d["n_cov"])
        s0 = np.append(x0[: N - 1], -x0[: N - 1].sum())
        # x = (s[:N-1], free beta_H, log nu_H), as numpy's people's model
        init = {"sH_raw": Q.T @ s0, "beta_free": x0[N - 1: N - 1 + p], "log_nu": np.atleast_1d(x0[N - 1 + p:])}
        res = model.optimize(d, model.unconstrain(d, init), seed=seed, gtol=gtol)
        parts = model.constrain(d, res.u, include_tparams=False)
        s = Q @ np.asarray(parts["sH_raw"], float)
        beta = stan_beta(parts, d)
        x = np.concatenate([s[: N - 1], [] if beta is None else beta[0], np.asarray(parts["log_nu"], float).reshape(-1)])
        return _as_optim(res, x, -(res.log_prob - weighted_log_coef(d)) / n_h)

    staged, path = _binary_optimizers(seed, penalty)
    return Optimizers(llm, calibration, joint, human, staged, path, name="stan", penalty=penalty,
                      pooled_stages=partial(stan_pooled_stages, seed=seed), btl=stan_btl)


def stan_pooled_stages(data: Comparisons, family: Family, x0: np.ndarray, l2: float, free1: bool, free2: bool,
                       seed: int | None = None, backend: str | None = None,
                       penalty: str | None = None) -> tuple[Any, Any]:
    """Run the two stages of the pooled fit of ``family`` (:func:`pydial.estimation.baselines.fit_pooled`) by Stan.

    ``dial.stan`` with one judge holding the pooled LLM cells, ``r = 0``, no order
    effects; then ``fix_llm`` for ``(c, log nu_H)``.  The optima are in the numpy
    coordinates ``(beta, log nu_L)`` and ``(c, log nu_H)``; with response covariates
    ``(beta, beta_L, log nu_L)`` and ``(c, beta_H, log nu_H)`` (the one judge's and the
    people's rows of the program's ``beta``).  ``penalty="firth"``: both stages' Jeffreys
    priors (``firth`` 1 and 2).
    """
    from pydial.model.chart import Chart, centering_basis, fixed_effects
    from pydial.model.cells import family_totals

    from .backend import compile_model
    from .schema import dial_data, pooled_cell_table, weighted_log_coef

    N, p = data.N, data.p
    n_l, n_h = family_totals(data, family)
    dial = compile_model("dial", backend=backend)
    pooled = pooled_cell_table(data, ties=not family.is_binary)
    # S = B': B_free = beta (s = T beta), then beta_L (the pooled judges' effects, shared; the free ones)
    chL = Chart(N, 1, 0, None, False, p, True, fixed_effects(data, True, False))
    head = chL.dim  # (beta, beta_L)
    firth = bool(check_penalty(penalty))
    dL = dial_data(data, chL, w_llm=1.0, llm=pooled, ties=family.name, boundary_nu=True, firth=1 if firth else 0)
    no_nu: list[float] = [] if family.is_binary else [0.0]  # the program's log nu of a group at nu = 0 (none when binary)
    r1 = optimize_dial(dial, dL, np.append(x0[:head], x0[head:] if free1 else no_nu), seed=seed, gtol=1e-9)
    beta = r1.u[: N - 1]
    o1 = _as_optim(r1, np.append(r1.u[:head], r1.u[head:] if free1 else []), -(r1.log_prob - weighted_log_coef(dL)) / n_l)
    ch = Chart(N, 1, 0, "mu", False, p, True, fixed_effects(data, True, True))
    th = ch.from_structure(chL.structure(r1.u[: chL.dim]), np.ones(1),
                           beta=np.vstack([chL.covariate_effects(r1.u[: chL.dim]), np.zeros(p)]) if p else None)
    people = ch.human_coordinates  # (c, beta_H)
    d2 = dial_data(data, ch, w_llm=0.0, w_human=1.0, fix_llm=th, ties=family.name, boundary_nu=True, firth=2 if firth else 0)
    r2 = optimize_dial(dial, d2, np.append(th[people], [l2] if free2 else no_nu), seed=seed, gtol=1e-9)
    th[people] = r2.u[: people.size]
    s_pool = centering_basis(N) @ beta
    c = float(ch.scores(th) @ s_pool / (s_pool @ s_pool))  # s = c s_pool
    o2 = _as_optim(r2, np.concatenate([[c], r2.u[1:people.size], r2.u[people.size:] if free2 else []]),
                   -(r2.log_prob - weighted_log_coef(d2)) / n_h)
    return o1, o2
