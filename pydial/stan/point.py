r"""Penalized maximum likelihood through Stan's optimizer in the numpy engine's chart, for every outcome family.

:func:`stan_fit_point` fits the estimators with ``stan/dial.stan`` (``stan/judges.stan`` for the people's and the
judge-wise models); the same calls (:class:`StanRun`) are the optimizers of ``pydial.fit(..., engine="stan")``.  The
Stan target is the weighted log-likelihood (``-n_H Q_lambda``, ``-n_LLM l_LLM``), so that the optimizer's tolerances
refer to the information scale; :attr:`StanPointFit.objective` is the paper's normalized loss.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, cast

import numpy as np

from pydial.data.comparisons import CellTable, Comparisons, require_comparisons
from pydial.estimation.engines import JudgesBTLFit
from pydial.estimation.glm import human_effect_row, initial_theta
from pydial.estimation.spec import COVARIATE_EFFECTS
from pydial.model.cells import family_totals
from pydial.model.chart import Calibration, Chart, helmert_basis
from pydial.model.families import BINARY, Family, family_of
from pydial.model.penalty import check_penalty
from pydial.resources import check_choice

from ..exceptions import ArgumentError, ConvergenceWarning, DataError
from .backend import CompiledModel, OptimizeResult, compile_model
from .parameters import optimize_dial
from .schema import (dial_data, human_cell_table, judges_data, llm_cell_table, pooled_cell_table, tie_start,
                     weighted_log_coef, zero_beta)

__all__ = ["POINT_METHODS", "StanPointFit", "stan_fit_point"]

POINT_METHODS: tuple[str, ...] = ("dial-ada", "dial-nopos", "dial-anc", "human", "judges", "pooled")
"""Estimators of :func:`stan_fit_point`."""

OPTIONS: dict[str, Any] = {"gtol": 1e-8, "max_iter": 20_000, "priors": None, "model": None, "warn": True}
"""The defaults of :func:`stan_fit_point`'s ``options``."""


@dataclass
class StanPointFit:
    """A Stan optimum expressed in the reduced chart of :class:`pydial.model.chart.Chart`.

    Attributes
    ----------
    method : str
        One of :data:`POINT_METHODS`.
    chart : Chart
        The chart of :attr:`theta` (``"judges"``: the one-judge chart ``Chart(N, 1, 0, None, True)`` of every row).
    theta : ndarray
        Reduced coordinates (:class:`Chart`'s layout: ``A[:K-1]`` and ``B[:N-1]`` row-major, the
        calibration coordinate, ``b``); for ``"judges"`` a ``(K, chart.dim)`` array, a row per judge.
    scores : ndarray
        Calibrated human score ``s`` (N); for ``"judges"`` the judges' mean score.
    S : ndarray
        Judge scores (K x N); for ``"human"`` the human score as one row.
    b : ndarray
        Order effects (K; zeros when off).
    lambda_ : float
        LLM weight ``lambda`` of eq. weighted-loss (``inf`` for the staged fits, ``0`` for ``"human"``).
    objective : float
        Paper-normalized loss at the optimum (the prior penalty alike): ``Q_lambda`` at a finite weight, ``l_H``
        (human; the staged fits' second stage, ``details["llm_objective"]`` the first's ``l_LLM``), ``l_LLM``
        (judges).  The tie families count ties in ``n_LLM``, ``n_H``.
    converged : bool
        Every optimizer call reported convergence.
    grad_norm : float
        Largest max-norm gradient of the Stan target at the reported optima.
    stages : list of OptimizeResult
        The optimizer calls (one, or two for the staged fits).
    backend : str
    seconds : float
        Total optimizer wall time (excluding compilation).
    llm_theta, llm_chart : ndarray, Chart or None
        First-stage LLM-only fit (the staged fits).
    beta : ndarray or None
        Covariate effects (:meth:`Chart.covariate_effects` rows; ``"judges"``: a row per judge, ``"human"``:
        the people's row); ``None`` without covariates.
    ties : {None, "davidson", "rao-kupper"}
        The outcome family.
    log_nu : ndarray or None
        A tie family's log tie parameters (Davidson's ``log nu``, Rao-Kupper's ``log tau``), one per group: the
        judges (one for ``"pooled"``), then the people; ``-inf`` for a group without a tie (``nu = 0``).  ``None``
        for the binary family.
    """

    method: str
    chart: Chart
    theta: np.ndarray
    scores: np.ndarray
    S: np.ndarray
    b: np.ndarray
    lambda_: float
    objective: float
    converged: bool
    grad_norm: float
    stages: list[OptimizeResult]
    backend: str
    seconds: float
    llm_theta: np.ndarray | None = None
    llm_chart: Chart | None = None
    details: dict[str, Any] = field(default_factory=dict, repr=False)
    beta: np.ndarray | None = None
    ties: str | None = None
    log_nu: np.ndarray | None = None

    def __repr__(self) -> str:
        """Summarize the fit: method, family, dimension, weight, objective, convergence and backend."""
        return (f"StanPointFit(method={self.method!r}, ties={self.ties!r}, dim={self.chart.dim}, lambda_={self.lambda_}, "
                f"objective={self.objective:.6g}, converged={self.converged}, backend={self.backend!r})")


def stan_fit_point(data: Comparisons, method: str = "dial-ada", *, ties: str | None = None, rank: int = 1,
                   calibration: str | None = "mu", lambda_: float | None = None, init: np.ndarray | None = None,
                   backend: str | None = None, seed: int | None = 0, penalty: str | None = None,
                   covariate_effects: str = "judge", options: Mapping[str, Any] | None = None) -> StanPointFit:
    r"""Penalized MLE of a DIAL estimator in any outcome family through Stan's optimizer, in the numpy engine's chart.

    Parameters
    ----------
    data : Comparisons
        Validated judgments.
    method : {"dial-ada", "dial-nopos", "dial-anc", "human", "judges", "pooled"}
        The estimators of :func:`pydial.fit` (:data:`POINT_METHODS`) at one weight: ``"dial-ada"``,
        :math:`\arg\min Q_\lambda` at ``lambda_`` (eq. weighted-joint-estimator) on ``Chart.for_data(data, rank,
        calibration)`` (``lambda_ = inf``: the staged fit); ``"dial-nopos"``, without order effects; ``"dial-anc"``,
        the staged fit (eq. staged-calibrated-estimator: the LLM-only fit :attr:`StanPointFit.llm_theta`, then
        ``argmin_c l_H`` with the LLM block fixed); ``"human"``, the people's ``argmin l_H`` (``Chart(N, 1, 0, None,
        False)``, ``theta = s[:N-1]``); ``"judges"``, each judge's order-effect model (``judges.stan``; a row of
        ``theta`` per judge); ``"pooled"``, the pooled LLM model rescaled to the people (staged on ``Chart(N, 1, 0,
        "mu", False)``).
    ties : {None, "davidson", "rao-kupper"}
        The outcome family, as in :func:`pydial.fit`: ``None`` the binary model (ties dropped), else Davidson's or
        Rao and Kupper's, a tie parameter per judge and one for the people (:attr:`StanPointFit.log_nu`).
    rank : int
        Disagreement rank ``r``.
    calibration : {"mu", "W"}
        Human calibration basis of the DIAL methods.
    lambda_ : float, optional
        LLM weight of ``"dial-ada"`` / ``"dial-nopos"``; default ``n_LLM / n_H`` (the ordinary likelihood).
    init : ndarray, optional
        Warm start in the reduced chart of the (first-stage) fit, optionally followed by the free log tie
        parameters; default the numpy engine's start (each ``log nu`` at its group's tie rate).
    backend : {"cmdstanpy", "httpstan"} or None
        See :func:`pydial.stan.stan_backend`.
    seed : int, optional
        Seed passed to the optimizer.
    penalty : {None, "firth"}
        ``"firth"`` adds the Jeffreys prior of :mod:`pydial.model.penalty` to the people's, pooled and judges'
        models, the calibration stage and the human block of the joint fit (not the LLM-only structured stage).
    covariate_effects : {"judge", "shared"}
        With response covariates: one covariate effect per LLM judge, or one for all of them.
    options : mapping, optional
        The optimizer's rarer options: ``gtol`` (default ``1e-8``: converged when the max-norm gradient of the
        Stan target is at most ``gtol * max(1, |log p|)``), ``max_iter`` (20,000 per call), ``priors`` (normal
        penalty scales of ``dial.stan``; default flat, the MLE; not gauge invariant), ``model`` (a compiled
        program to reuse) and ``warn`` (default True: a :class:`pydial.ConvergenceWarning` when a call fails).

    Returns
    -------
    StanPointFit
        ``theta`` in the numpy engine's chart, scores, ``S``, ``b``, ``log_nu``, the objective and convergence.

    Raises
    ------
    ArgumentError
        Unknown method, family or option, or invalid calibration / lambda.
    DataError
        The method needs human (or LLM) comparisons that the data lack.

    Examples
    --------
    >>> sp = stan_fit_point(data, "dial-anc", rank=1)  # doctest: +SKIP
    >>> sp.scores, sp.llm_chart.S(sp.llm_theta)  # doctest: +SKIP
    >>> stan_fit_point(data, "dial-ada", ties="davidson", lambda_=2.0).log_nu  # doctest: +SKIP
    """
    data = require_comparisons(data)
    check_choice("method", method, POINT_METHODS)
    check_choice("covariate_effects", covariate_effects, COVARIATE_EFFECTS)
    run = StanRun(data, family_of(ties), seed, backend, point_options(options))
    n_l, n_h = family_totals(data, run.family)
    if method != "judges" and n_h == 0:
        raise DataError(f"method {method!r} needs human comparisons; there are none")
    if method != "human" and n_l == 0:
        raise DataError(f"method {method!r} needs LLM comparisons; there are none")
    firth = check_penalty(penalty) == "firth"
    if method == "human":  # eq. human-full-loss, no LLM judge
        st, s, beta = people_fit(run, None, firth)
        return _point_fit(run, [st.res], "human", Chart(data.N, 1, 0, None, False), s[: data.N - 1].copy(), s, s[None, :],
                          np.zeros(1), 0.0, st.objective, st.log_nu,
                          beta=human_effect_row(data, np.zeros(0) if beta is None else beta)[None, :] if data.p else None)
    if method == "judges":  # each judge's order-effect model, started at each judge's tie rate
        from pydial.estimation.btl import tie_log_nu_start

        cells = llm_cell_table(data, run.family)
        f = judges_fit(run, cells, N=data.N, groups=data.K, log_nu0=tie_log_nu_start(run.family, cells, data.K), firth=firth)
        res, d = f.details
        tied = np.bincount(cells.judge, weights=cells.tie_counts, minlength=data.K)[: f.log_nu.size] > 0  # others: nu -> 0
        theta = np.column_stack([f.S[:, : data.N - 1], f.b[:, None]])
        return _point_fit(run, [res], "judges", Chart(data.N, 1, 0, None, True), theta, f.S.mean(axis=0), f.S, f.b, np.inf,
                          -(res.log_prob - weighted_log_coef(d)) / n_l, np.where(tied, f.log_nu, -np.inf), beta=f.beta)
    if method == "pooled":
        return _fit_staged(run, 1, 0, "mu", False, False, None, firth)
    if calibration is None:
        raise ArgumentError(f"method {method!r} needs a calibration basis ('mu' or 'W'), got None")
    order, shared = method != "dial-nopos", covariate_effects == "shared"
    weight = n_l / n_h if lambda_ is None else float(lambda_)
    if method == "dial-anc" or np.isinf(weight):
        return _fit_staged(run, data.K, rank, calibration, order, shared, init, firth, method)
    if not (np.isfinite(weight) and weight > 0):
        raise ArgumentError(f"lambda_ must be > 0 for the weighted fit, got {lambda_!r}")
    return _fit_joint(run, method, Chart.for_data(data, rank, cast(Calibration, calibration), order, shared), weight,
                      init, firth)


def point_options(options: Mapping[str, Any] | None, **defaults: Any) -> dict[str, Any]:
    """Return :data:`OPTIONS` updated by ``defaults``, then by the caller's ``options`` (unknown names raise)."""
    unknown = sorted(set(options or {}) - set(OPTIONS))
    if unknown:
        raise ArgumentError(f"unknown options {unknown}: the options are {sorted(OPTIONS)}")
    return {**OPTIONS, **defaults, **(options or {})}


@dataclass(frozen=True)
class _Stage:
    """One optimizer call: Stan's result, ``x`` (numpy's coordinates, free ``log nu``), the loss, ``log_nu`` (-inf: nu = 0)."""

    res: OptimizeResult
    x: np.ndarray
    objective: float
    log_nu: np.ndarray


@dataclass(frozen=True)
class StanRun:
    """The data, family, seed, backend and options of Stan's optimizers: every call to ``dial.stan`` and ``judges.stan``."""

    data: Comparisons
    family: Family
    seed: int | None
    backend: str | None
    opts: Mapping[str, Any]

    def model(self, name: str) -> CompiledModel:
        return self.opts["model"] if self.opts["model"] is not None else compile_model(name, backend=self.backend)

    def optimize(self, model: CompiledModel, d: Mapping[str, Any], x0: np.ndarray, what: str, *,
                 chart: bool = True) -> OptimizeResult:
        """Optimize from ``x0``: the chart coordinates of ``dial.stan`` (:func:`optimize_dial`), else the program's own."""
        opts = dict(seed=self.seed, gtol=self.opts["gtol"], max_iter=self.opts["max_iter"])
        res = optimize_dial(model, d, x0, **opts) if chart else model.optimize(d, x0, **opts)
        if self.opts["warn"] and not res.converged:
            warnings.warn(f"Stan optimizer ({what}) did not converge: {res.message}; max|grad| = {res.grad_norm:.2e}",
                          ConvergenceWarning, stacklevel=5)
        return res

    def dial(self, ch: Chart, x0: np.ndarray, what: str, *, w_llm: float, w_human: float = 0.0,
             llm: CellTable | None = None, fix_llm: np.ndarray | None = None, firth: int = 0) -> _Stage:
        """Maximize ``dial.stan`` on ``ch`` from ``x0`` (numpy's coordinates; without ``log nu``: each at its tie rate).

        A group without a tie gets ``nu_zero``: its ``log_nu`` entry is held at 0 and dropped from ``x``.
        """
        tie = not self.family.is_binary
        d = dial_data(self.data, ch, w_llm=w_llm, w_human=w_human, priors=self.opts["priors"], llm=llm, family=self.family,
                      fix_llm=fix_llm, firth=firth, boundary_nu=tie)
        head = ch.human_coordinates.size if fix_llm is not None else ch.dim
        groups = ([] if fix_llm is not None else list(range(ch.K))) + ([ch.K] if d["H"] > 0 else []) if tie else []
        free = np.array([not d["nu_zero"][g] for g in groups], bool)
        x0 = np.asarray(x0, float)
        log_nu = np.zeros(free.size)  # given after the chart coordinates, else each free group's start at its tie rate
        log_nu[free] = x0[head:] if x0.size > head or not free.any() else tie_start(d)[groups][free]
        res = self.optimize(self.model("dial"), d, np.concatenate([x0[:head], log_nu]), what)
        n_l, n_h = family_totals(self.data, self.family)
        return _Stage(res, np.concatenate([res.u[:head], res.u[head:][free]]),
                      -(res.log_prob - weighted_log_coef(d)) / (n_h if w_human else n_l), np.where(free, res.u[head:], -np.inf))

    def judges(self, L: CellTable, H: CellTable | None, *, N: int, K: int, family: Family, firth: bool,
               init: Callable[[Mapping[str, Any]], dict], what: str) -> tuple[OptimizeResult, dict, dict]:
        """Maximize ``judges.stan`` (flat priors) from ``init(d)``; return Stan's result, the named optimum and the data ``d``."""
        model = self.model("judges")
        d = judges_data(L, H, N=N, K=K, order=K > 0, family=family, flat=True, log_lik=False, firth=firth)
        res = self.optimize(model, d, model.unconstrain(d, init(d)), what, chart=False)
        return res, model.constrain(d, res.u, include_tparams=False), d


def _fit_joint(run: StanRun, method: str, ch: Chart, lambda_: float, init: np.ndarray | None, firth: bool) -> StanPointFit:
    """Minimize ``Q_lambda`` on ``ch`` with ``dial.stan`` (weights ``lambda n_H / n_L`` and 1)."""
    n_l, n_h = family_totals(run.data, run.family)
    th0 = initial_theta(run.data, ch) if init is None else np.asarray(init, float)
    st = run.dial(ch, th0, f"joint fit, lambda = {lambda_:.4g}", w_llm=lambda_ * n_h / n_l, w_human=1.0,
                  firth=2 if firth else 0)
    theta = st.x[: ch.dim]
    A, B, _, b = ch.unpack(theta)
    return _point_fit(run, [st.res], method, ch, theta, ch.scores(theta), A @ B.T, b if ch.order else np.zeros(ch.K),
                      lambda_, st.objective, st.log_nu, beta=ch.covariate_effects(theta) if ch.p else None)


def _fit_staged(run: StanRun, K: int, r: int, cal: str, order: bool, shared: bool, init: np.ndarray | None,
                firth: bool, method: str = "pooled") -> StanPointFit:
    """Fit the LLM-only stage, then ``argmin_(c, beta_H) l_H`` with the LLM block fixed (``"pooled"``: one pooled judge)."""
    data, pooled = run.data, method == "pooled"
    chL = Chart(data.N, K, r, None, order) if pooled else Chart.for_data(data, r, None, order, shared)
    # the numpy engine's starts: the pooled BTL GLM from 0, the structured fit from initial_theta
    th0 = np.asarray(init, float) if init is not None else (np.zeros(chL.dim) if pooled else initial_theta(data, chL))
    s1 = run.dial(chL, th0, "LLM-only stage", w_llm=1.0, firth=1 if (firth and pooled) else 0,
                  llm=pooled_cell_table(data, run.family) if pooled else None)
    thL = s1.x[: chL.dim]
    bL = chL.order_effects(thL) if order else np.zeros(K)
    ch = Chart(data.N, K, r, cast(Calibration, cal), order) if pooled else \
        Chart.for_data(data, r, cast(Calibration, cal), order, shared)
    st = chL.structure(thL)
    # start: c = 0 (and beta_H = 0), as the numpy engine's calibration GLM (pydial.estimation.glm.fit_calibration)
    beta0 = np.vstack([chL.covariate_effects(thL), np.zeros(ch.p)]) if ch.p else None
    th1 = ch.from_structure(st, np.zeros(st.basis(cal).shape[1]), bL if order else None, beta0)
    # A and B of the first stage are data (fix_llm): Stan optimizes the calibration alone, (c, beta_H)
    people = ch.human_coordinates
    s2 = run.dial(ch, th1[people], "calibration stage", w_llm=0.0, w_human=1.0, fix_llm=th1, firth=2 if firth else 0)
    theta = th1.copy()
    theta[people] = s2.x[: people.size]
    return _point_fit(run, [s1.res, s2.res], method, ch, theta, ch.scores(theta), ch.S(theta), bL, np.inf, s2.objective,
                      np.append(s1.log_nu, s2.log_nu), llm_theta=thL, llm_chart=chL,
                      details={"llm_objective": s1.objective}, beta=ch.covariate_effects(theta) if ch.p else None)


def _point_fit(run: StanRun, stages: list[OptimizeResult], method: str, chart: Chart, theta: np.ndarray,
               scores: np.ndarray, S: np.ndarray, b: np.ndarray, lambda_: float, objective: float, log_nu: np.ndarray,
               **more: Any) -> StanPointFit:
    """Return the :class:`StanPointFit` of the optimizer calls ``stages`` (``log_nu``: ``None`` for the binary family)."""
    return StanPointFit(method, chart, theta, scores, S, b, lambda_, objective, all(r.converged for r in stages),
                        max(r.grad_norm for r in stages), stages, stages[0].backend, sum(r.seconds for r in stages),
                        ties=run.family.name, log_nu=None if run.family.is_binary else np.asarray(log_nu, float), **more)


def people_fit(run: StanRun, x0: np.ndarray | None, firth: bool) -> tuple[_Stage, np.ndarray, np.ndarray | None]:
    """Fit the people's model with ``judges.stan`` in numpy's ``x = (s[:N-1], free beta_H, log nu_H)`` (binary without a tie).

    ``x0 = None``: 0 and ``log nu_H`` at the tie rate; returns the stage, the scores ``s`` and the free ``beta_H``.
    """
    data, N = run.data, run.data.N
    H = human_cell_table(data, run.family)
    if data.p:
        H = dataclasses.replace(H, z=data.effect_columns(H.z, data.K))
    assert H.tie_counts is not None  # filled in by CellTable
    free = bool((H.tie_counts > 0).any())  # without a tie: the binary model (nu = 0)
    Q = helmert_basis(N)

    def init(d: Mapping[str, Any]) -> dict:
        if x0 is None:
            return {"sH_raw": np.zeros(N - 1), "beta_free": zero_beta(d),
                    "log_nu": [run.family.log_nu_start(H.counts)] if free else np.zeros(0)}
        p = int(d["n_cov"])
        return {"sH_raw": Q.T @ np.append(x0[: N - 1], -x0[: N - 1].sum()), "beta_free": x0[N - 1: N - 1 + p],
                "log_nu": np.atleast_1d(x0[N - 1 + p:])}

    res, parts, d = run.judges(CellTable.empty(), H, N=N, K=0, family=run.family if free else BINARY, firth=firth, init=init,
                               what="people's model")
    s = Q @ np.asarray(parts["sH_raw"], float)
    beta = stan_beta(parts, d)
    log_nu = np.asarray(parts["log_nu"], float).reshape(-1)
    x = np.concatenate([s[: N - 1], [] if beta is None else beta[0], log_nu])
    n_h = family_totals(data, run.family)[1]
    stage = _Stage(res, x, -(res.log_prob - weighted_log_coef(d)) / n_h, log_nu if free else np.full(1, -np.inf))
    return stage, s, None if beta is None else beta[0]


def judges_fit(run: StanRun, cells: CellTable, *, N: int, groups: int, log_nu0: np.ndarray, firth: bool) -> JudgesBTLFit:
    """Fit each judge's order-effect model with ``judges.stan`` from ``s = b = beta = 0`` and ``log_nu0``.

    Returns the centered scores ``S`` (groups x N), ``b``, ``log nu`` and ``beta``; ``details``: Stan's result and data.
    """
    def init(d: Mapping[str, Any]) -> dict:
        return {"s_raw": np.zeros((groups, N - 1)), "b": np.zeros(groups), "beta_free": zero_beta(d), "log_nu": log_nu0}

    res, parts, d = run.judges(cells, None, N=N, K=groups, family=run.family, firth=firth, init=init, what="judge-wise model")
    if not np.isfinite(res.log_prob):
        raise FloatingPointError("the judges' log density is not finite at the optimum")
    S = np.asarray(parts["s_raw"], float).reshape(groups, N - 1) @ helmert_basis(N).T
    return JudgesBTLFit(S, np.asarray(parts["b"], float).reshape(-1), np.asarray(parts["log_nu"], float).reshape(-1),
                        bool(res.converged), float(res.grad_norm), res.message, (res, d), stan_beta(parts, d))


def stan_beta(parts: Mapping[str, Any], d: Mapping[str, Any]) -> np.ndarray | None:
    """Return the program's covariate effects (rows x ``n_cov``, 0 where ``beta_fixed``) from ``parts["beta_free"]``, or None."""
    if not int(d["n_cov"]):
        return None
    fixed = np.asarray(d["beta_fixed"], bool)
    beta = np.zeros(fixed.shape)
    beta[~fixed] = np.asarray(parts["beta_free"], float).reshape(-1)  # row-major, as free_positions of paired_likelihoods.stan
    return beta
