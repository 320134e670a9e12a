r"""Penalized maximum likelihood through Stan's optimizer, in the numpy engine's chart.

:func:`stan_fit_point` fits the estimators of the paper with ``stan/dial.stan``
(and ``stan/judges.stan`` for the judge-wise fits) and returns the optimum as
the reduced-chart ``theta`` of :class:`pydial.model.chart.Chart` -- the same
coordinates as the numpy engine -- so that :mod:`pydial.model.likelihood`,
:mod:`pydial.inference.linearization` and :mod:`pydial.estimation.selection` can evaluate gradients,
Hessians, sandwiches and GACV at the Stan optimum.

The Stan target is the weighted log-likelihood on the *log-likelihood scale*,
``-n_H Q_lambda`` for the joint fit (per-judgment weights ``1`` for people and
``lambda n_H / n_LLM`` for LLM judgments) and ``-n_LLM l_LLM`` for the LLM-only
stage, so that optimizer tolerances refer to the information scale.
:attr:`StanPointFit.objective` reports the paper's normalized loss.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, cast

import numpy as np

from pydial.data.comparisons import Comparisons, require_comparisons
from pydial.estimation.glm import initial_theta
from pydial.model.chart import Calibration, Chart, helmert_basis

from ..exceptions import ArgumentError, ConvergenceWarning, DataError
from .backend import CompiledModel, OptimizeResult, compile_model
from .parameters import optimize_dial
from .schema import (dial_data, empty_cells, human_cell_table, judges_data, llm_cell_table, pooled_cell_table, weighted_log_coef,
                     zero_beta)

__all__ = ["POINT_METHODS", "StanPointFit", "stan_fit_point"]

POINT_METHODS: tuple[str, ...] = ("dial-ada", "dial-nopos", "dial-anc", "human", "judges", "pooled")
"""Estimators of :func:`stan_fit_point`."""


@dataclass
class StanPointFit:
    """A Stan optimum expressed in the reduced chart of :class:`pydial.model.chart.Chart`.

    Attributes
    ----------
    method : str
        One of :data:`POINT_METHODS`.
    chart : Chart
        The chart of :attr:`theta`.  For ``"judges"`` it is the one-judge chart
        ``Chart(N, 1, 0, None, True)`` shared by every row of :attr:`theta`.
    theta : ndarray
        Reduced coordinates (layout of :class:`Chart`: ``A[:K-1]`` row-major,
        ``B[:N-1]`` row-major, calibration coordinate, ``b``).  For ``"judges"``
        a ``(K, chart.dim)`` array, one row per judge.
    scores : ndarray
        Calibrated human score ``s`` (N); for ``"judges"`` the judges' mean score.
    S : ndarray
        Judge scores (K x N); for ``"human"`` the human score as one row.
    b : ndarray
        Order effects (K; zeros when off).
    lambda_ : float
        LLM weight ``lambda`` of eq. weighted-loss (``inf`` for the staged fits, ``0`` for ``"human"``).
    objective : float
        Paper-normalized loss at the optimum: ``Q_lambda`` (a finite weight), ``l_H`` (human and
        the second stage of the staged fits; ``details["llm_objective"]`` the first stage's
        ``l_LLM``), ``l_LLM`` (judges); with the prior penalty divided by the same normalization.
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
        Covariate effects (data with response covariates): the chart's ``beta`` rows
        (:meth:`Chart.covariate_effects`); for ``"judges"`` one row per judge, for ``"human"``
        the people's one row.  ``None`` without covariates.
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

    def __repr__(self) -> str:
        """Summarize the fit: method, dimension, weight, objective, convergence and backend."""
        return (f"StanPointFit(method={self.method!r}, dim={self.chart.dim}, lambda_={self.lambda_}, "
                f"objective={self.objective:.6g}, converged={self.converged}, backend={self.backend!r})")


def stan_fit_point(data: Comparisons, method: str = "dial-ada", *, rank: int = 1, calibration: str | None = "mu",
                   lambda_: float | None = None, init: np.ndarray | None = None, backend: str | None = None,
                   seed: int | None = 0, penalty: str | None = None, shared: bool = False,
                   options: Mapping[str, Any] | None = None) -> StanPointFit:
    r"""Penalized MLE of a DIAL estimator through Stan's optimizer, in the numpy engine's chart.

    Parameters
    ----------
    data : Comparisons
        Validated judgments.
    method : {"dial-ada", "dial-nopos", "dial-anc", "human", "judges", "pooled"}
        The estimators of :func:`pydial.fit` (:data:`POINT_METHODS`), at one weight:

        * ``"dial-ada"``: :math:`\arg\min Q_\lambda` at ``lambda_`` (eq. weighted-joint-estimator)
          on ``Chart.for_data(data, rank, calibration)``; ``lambda_ = inf`` is the staged fit;
        * ``"dial-nopos"``: the same without the judges' order effects;
        * ``"dial-anc"``: the staged fit (eq. staged-calibrated-estimator): the LLM-only fit
          (:attr:`StanPointFit.llm_theta` on :attr:`StanPointFit.llm_chart`), then
          ``argmin_c l_H`` with the LLM block held fixed;
        * ``"human"``: human BTL ``argmin l_H`` (``Chart(N, 1, 0, None, False)``; ``theta = s[:N-1]``);
        * ``"judges"``: each judge's order-effect BTL (``judges.stan``); ``theta`` has one row
          per judge in ``Chart(N, 1, 0, None, True)``;
        * ``"pooled"``: pooled LLM BTL ignoring judge and order, rescaled to the people
          (staged on ``Chart(N, 1, 0, "mu", False)``).
    rank : int
        Disagreement rank ``r``.
    calibration : {"mu", "W"}
        Human calibration basis of the DIAL methods.
    lambda_ : float, optional
        LLM weight of ``"dial-ada"`` / ``"dial-nopos"``; default ``n_LLM / n_H`` (the ordinary
        joint likelihood).
    init : ndarray, optional
        Warm start in the reduced chart of the (first-stage) fit; default the numpy
        engine's start: :func:`pydial.estimation.glm.initial_theta` for the structured fits,
        zero for the GLMs (the human, judge-wise and pooled BTL, the calibration stage).
    backend : {"cmdstanpy", "httpstan"} or None
        See :func:`pydial.stan.stan_backend`.
    seed : int, optional
        Seed passed to the optimizer.
    penalty : {None, "firth"}
        ``"firth"`` adds the Jeffreys prior of :mod:`pydial.model.penalty` (the ``firth``
        flag of ``dial.stan`` / ``judges.stan``): to the human BTL, the pooled BTL,
        every judge's BTL, the calibration stage and the human block of the joint
        fit; the LLM-only structured stage is not penalized.
    shared : bool
        With response covariates: one covariate effect for all LLM judges
        (``covariate_effects="shared"``) instead of one per judge.
    options : mapping, optional
        The optimizer's rarer options: ``gtol`` (default ``1e-8``: converged when the
        max-norm gradient of the Stan target is at most ``gtol * max(1, |log p|)``,
        :meth:`CompiledModel.optimize`), ``max_iter`` (default 20,000 per optimizer call),
        ``priors`` (normal penalty scales ``{"A", "B", "c", "b"}`` of ``dial.stan``, default
        flat: the MLE; not gauge invariant), ``model`` (a compiled program to reuse) and
        ``warn`` (default True: a :class:`pydial.ConvergenceWarning` when a call fails).

    Returns
    -------
    StanPointFit
        ``theta`` in the numpy engine's chart, plus scores, ``S``, ``b``, the
        paper-normalized objective and the convergence record.

    Raises
    ------
    ArgumentError
        Unknown method or option, or invalid calibration / lambda.
    DataError
        The method needs human (or LLM) comparisons that the data lack.

    Examples
    --------
    >>> sp = stan_fit_point(data, "dial-anc", rank=1)  # doctest: +SKIP
    >>> sp.scores, sp.llm_chart.S(sp.llm_theta)  # doctest: +SKIP
    """
    from pydial.model.penalty import check_penalty

    data = require_comparisons(data)
    if method not in POINT_METHODS:
        raise ArgumentError(f"method must be one of {POINT_METHODS}, got {method!r}")
    opts = {"gtol": 1e-8, "max_iter": 20_000, "priors": None, "model": None, "warn": True}
    unknown = sorted(set(options or {}) - set(opts))
    if unknown:
        raise ArgumentError(f"unknown options {unknown}: the options are {sorted(opts)}")
    opts.update(options or {})
    if method != "judges" and data.n_human == 0:
        raise DataError(f"method {method!r} needs decisive human comparisons; there are none")
    if method != "human" and data.n_llm == 0:
        raise DataError(f"method {method!r} needs decisive LLM comparisons; there are none")
    firth = check_penalty(penalty) == "firth"
    run = _Run(data, opts, seed)
    if method in ("human", "judges"):
        return _fit_btl(run, method, backend, firth)
    if method == "pooled":
        return _fit_staged(run, 1, 0, "mu", False, False, None, backend, firth)
    if calibration is None:
        raise ArgumentError(f"method {method!r} needs a calibration basis ('mu' or 'W'), got None")
    order = method != "dial-nopos"
    weight = data.n_llm / data.n_human if lambda_ is None else float(lambda_)
    if method == "dial-anc" or np.isinf(weight):
        return _fit_staged(run, data.K, rank, calibration, order, shared, init, backend, firth, method)
    if not (np.isfinite(weight) and weight > 0):
        raise ArgumentError(f"lambda_ must be > 0 for the weighted fit, got {lambda_!r}")
    return _fit_joint(run, method, Chart.for_data(data, rank, cast(Calibration, calibration), order, shared), weight,
                      init, backend, firth)


@dataclass(frozen=True)
class _Run:
    """The data, optimizer options and seed of one :func:`stan_fit_point` call."""

    data: Comparisons
    opts: Mapping[str, Any]
    seed: int | None

    def model(self, name: str, backend: str | None) -> CompiledModel:
        return self.opts["model"] if self.opts["model"] is not None else compile_model(name, backend=backend)

    def optimize(self, model: CompiledModel, d: Mapping[str, Any], x0: np.ndarray, what: str, *,
                 chart: bool = True) -> OptimizeResult:
        """Optimize from ``x0``: the chart coordinates of ``dial.stan`` (:func:`optimize_dial`), else the program's own."""
        opts = dict(seed=self.seed, gtol=self.opts["gtol"], max_iter=self.opts["max_iter"])
        res = optimize_dial(model, d, x0, **opts) if chart else model.optimize(d, x0, **opts)
        if self.opts["warn"] and not res.converged:
            warnings.warn(f"Stan optimizer ({what}) did not converge: {res.message}; max|grad| = {res.grad_norm:.2e}",
                          ConvergenceWarning, stacklevel=4)
        return res


def _fit_joint(run: _Run, method: str, ch: Chart, lambda_: float, init: np.ndarray | None, backend: str | None,
               firth: bool) -> StanPointFit:
    """Minimize ``Q_lambda`` on ``ch`` with ``dial.stan`` (weights ``lambda n_H / n_L`` and 1)."""
    data = run.data
    n_h, n_l = data.n_human, data.n_llm
    dial = run.model("dial", backend)
    d = dial_data(data, ch, w_llm=lambda_ * n_h / n_l, w_human=1.0, priors=run.opts["priors"], firth=2 if firth else 0)
    th0 = initial_theta(data, ch) if init is None else np.asarray(init, float)
    res = run.optimize(dial, d, th0, f"joint fit, lambda = {lambda_:.4g}")
    A, B, _, b = ch.unpack(res.u)
    return StanPointFit(method, ch, res.u, ch.scores(res.u), A @ B.T, b if ch.order else np.zeros(data.K), lambda_,
                        -(res.log_prob - weighted_log_coef(d)) / n_h, res.converged, res.grad_norm, [res], dial.backend,
                        res.seconds, beta=_beta(ch, res.u))


def _fit_staged(run: _Run, K: int, r: int, cal: str, order: bool, shared: bool, init: np.ndarray | None,
                backend: str | None, firth: bool, method: str = "pooled") -> StanPointFit:
    """Fit the staged endpoint: the LLM-only stage, then ``argmin_(c, beta_H) l_H(M c, beta_H)`` with the LLM block fixed.

    ``method="pooled"``: one judge holding the pooled LLM cells (``K = 1``, ``r = 0``, no order effects).
    """
    data = run.data
    n_h, n_l = data.n_human, data.n_llm
    pooled = method == "pooled"
    dial = run.model("dial", backend)
    chL = Chart(data.N, K, r, None, order) if pooled else Chart.for_data(data, r, None, order, shared)
    dL = dial_data(data, chL, w_llm=1.0, llm=pooled_cell_table(data) if pooled else None, priors=run.opts["priors"],
                   firth=1 if (firth and pooled) else 0)
    if init is not None:
        th0 = np.asarray(init, float)
    else:  # the numpy engine's starts: the pooled BTL GLM from 0, the structured fit from initial_theta
        th0 = np.zeros(chL.dim) if pooled else initial_theta(data, chL)
    r1 = run.optimize(dial, dL, th0, "LLM-only stage")
    bL = chL.order_effects(r1.u) if order else np.zeros(K)
    ch = Chart(data.N, K, r, cast(Calibration, cal), order) if pooled else \
        Chart.for_data(data, r, cast(Calibration, cal), order, shared)
    st = chL.structure(r1.u)
    M = st.basis(cal)
    # start: c = 0 (and beta_H = 0), as the numpy engine's calibration GLM (pydial.estimation.glm.fit_calibration)
    beta0 = np.vstack([chL.covariate_effects(r1.u), np.zeros(ch.p)]) if ch.p else None
    th1 = ch.from_structure(st, np.zeros(M.shape[1]), bL if order else None, beta0)
    # A and B of the first stage are data (fix_llm): Stan optimizes the calibration alone, (c, beta_H)
    d2 = dial_data(data, ch, w_llm=0.0, w_human=1.0, priors=run.opts["priors"], fix_llm=th1, firth=2 if firth else 0)
    people = ch.human_coordinates
    r2 = run.optimize(dial, d2, th1[people], "calibration stage")
    theta = th1.copy()
    theta[people] = r2.u
    return StanPointFit(method, ch, theta, ch.scores(theta), ch.S(theta), bL, np.inf,
                        -(r2.log_prob - weighted_log_coef(d2)) / n_h, r1.converged and r2.converged,
                        max(r1.grad_norm, r2.grad_norm), [r1, r2], dial.backend, r1.seconds + r2.seconds,
                        llm_theta=r1.u, llm_chart=chL,
                        details={"llm_objective": -(r1.log_prob - weighted_log_coef(dL)) / n_l}, beta=_beta(ch, theta))


def _beta(chart: Chart, theta: np.ndarray) -> np.ndarray | None:
    """Return the chart's covariate effects at ``theta`` (``None`` without covariates)."""
    return chart.covariate_effects(theta) if chart.p else None


def _fit_btl(run: _Run, method: str, backend: str | None, firth: bool) -> StanPointFit:
    """Fit the human BTL (eq. human-full-loss, no LLM judge) or each judge's order-effect BTL with ``judges.stan``.

    Started at ``s = 0, b = 0`` as the numpy engine's (:func:`pydial.estimation.glm.fit_human_btl`,
    :func:`~pydial.estimation.glm.fit_order_btl`); with response covariates also ``beta``.
    """
    data = run.data
    jm = run.model("judges", backend)
    N, human = data.N, method == "human"
    K = 0 if human else data.K
    if human:
        d = judges_data(empty_cells(), human_cell_table(data), N=N, K=0, order=False, flat=True, log_lik=False,
                        firth=firth)
    else:
        d = judges_data(llm_cell_table(data), None, N=N, K=K, order=True, flat=True, log_lik=False, firth=firth)
    u0 = jm.unconstrain(d, {"s_raw": np.zeros((K, N - 1)), "sH_raw": np.zeros(N - 1 if human else 0),
                            "b": np.zeros(K), "beta_free": zero_beta(d), "log_nu": np.zeros(0)})
    res = run.optimize(jm, d, u0, "human BTL" if human else "judge-wise BTL", chart=False)
    parts = jm.constrain(d, res.u, include_tparams=False)
    Q = helmert_basis(N)
    common = (res.converged, res.grad_norm, [res], jm.backend, res.seconds)
    if human:
        s = Q @ parts["sH_raw"]
        return StanPointFit("human", Chart(N, 1, 0, None, False), s[: N - 1].copy(), s, s[None, :], np.zeros(1), 0.0,
                            -(res.log_prob - weighted_log_coef(d)) / data.n_human, *common, beta=stan_beta(parts, d))
    S = np.asarray(parts["s_raw"]).reshape(K, N - 1) @ Q.T
    b = np.asarray(parts["b"]).reshape(-1)
    return StanPointFit("judges", Chart(N, 1, 0, None, True), np.column_stack([S[:, : N - 1], b[:, None]]),
                        S.mean(axis=0), S, b, np.inf, -(res.log_prob - weighted_log_coef(d)) / data.n_llm, *common,
                        beta=stan_beta(parts, d))


def stan_beta(parts: Mapping[str, Any], d: Mapping[str, Any]) -> np.ndarray | None:
    """Return the program's covariate effects (rows x ``n_cov``, 0 where ``beta_fixed``) from ``parts["beta_free"]``, or None."""
    if not int(d["n_cov"]):
        return None
    fixed = np.asarray(d["beta_fixed"], bool)
    beta = np.zeros(fixed.shape)
    beta[~fixed] = np.asarray(parts["beta_free"], float).reshape(-1)  # row-major, as free_positions of paired_likelihoods.stan
    return beta
