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

from ..exceptions import ArgumentError, ConvergenceWarning, DataError, renamed_arguments
from .backend import CompiledModel, OptimizeResult, compile_model
from .parameters import optimize_dial
from .schema import (dial_data, empty_cells, human_cell_table, judges_data, llm_cell_table, pooled_cell_table, weighted_log_coef,
                     zero_beta)

__all__ = ["POINT_METHODS", "StanPointFit", "stan_fit_point"]

POINT_METHODS: tuple[str, ...] = ("joint", "staged", "llm", "human", "pooled", "judges")
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
        ``Chart(N, 1, 0, None, order)`` shared by every row of :attr:`theta`.
    theta : ndarray
        Reduced coordinates (layout of :class:`Chart`: ``A[:K-1]`` row-major,
        ``B[:N-1]`` row-major, calibration coordinate, ``b``).  For ``"judges"``
        a ``(K, chart.dim)`` array, one row per judge.
    scores : ndarray
        Calibrated human score ``s`` (N); for ``"llm"`` the consensus ``B e_1``
        scaled to unit mean loading; for ``"judges"`` the judges' mean score.
    S : ndarray
        Judge scores (K x N); for ``"human"`` the human score as one row.
    b : ndarray
        Order effects (K; zeros when off).
    lambda_ : float
        LLM weight ``lambda`` of eq. weighted-loss (``inf`` for the LLM-only and
        staged fits, ``0`` for ``"human"``).
    objective : float
        Paper-normalized loss at the optimum: ``Q_lambda`` (joint), ``l_LLM``
        (llm; the first stage of staged/pooled), ``l_H`` (human and the second
        stage of staged/pooled); includes the prior penalty divided by the same
        normalization when priors are on.
    converged : bool
        Every optimizer call reported convergence.
    grad_norm : float
        Largest max-norm gradient of the Stan target at the reported optima.
    stages : list of OptimizeResult
        The optimizer calls (one, or two for staged/pooled).
    backend : str
    seconds : float
        Total optimizer wall time (excluding compilation).
    llm_theta, llm_chart : ndarray, Chart or None
        First-stage LLM-only fit (staged and pooled).
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


def _check_converged(res: OptimizeResult, what: str) -> None:
    if not res.converged:
        warnings.warn(f"Stan optimizer ({what}) did not converge: {res.message}; max|grad| = {res.grad_norm:.2e}",
                      ConvergenceWarning, stacklevel=3)


def stan_fit_point(
    data: Comparisons,
    method: str = "joint",
    *,
    rank: int = 1,
    calibration: str | None = "mu",
    lambda_: float | None = None,
    order: bool = True,
    init: np.ndarray | None = None,
    priors: Mapping[str, float] | None = None,
    backend: str | None = None,
    seed: int | None = 0,
    gtol: float = 1e-8,
    max_iter: int = 20_000,
    model: CompiledModel | None = None,
    warn: bool = True,
    penalty: str | None = None,
    shared: bool = False,
    **deprecated: Any,
) -> StanPointFit:
    r"""Penalized MLE of a DIAL estimator through Stan's optimizer.

    Parameters
    ----------
    data : Comparisons
        Validated judgments.
    method : {"joint", "staged", "llm", "human", "pooled", "judges"}
        * ``"joint"``: :math:`\arg\min Q_\lambda` (eq. weighted-joint-estimator)
          on ``Chart(N, K, rank, calibration, order)``;
        * ``"staged"``: DIAL-Anc (eq. staged-calibrated-estimator): LLM-only fit
          on ``Chart(N, K, rank, None, order)``, then ``argmin_c l_H`` with the
          LLM block held fixed, returned in ``Chart(N, K, rank, calibration,
          order)``; ``order=False`` gives DIAL-noPos;
        * ``"llm"``: the LLM-only structured fit ``argmin l_LLM``
          (``Chart(N, K, rank, None, order)``);
        * ``"human"``: human BTL ``argmin l_H`` (``Chart(N, 1, 0, None,
          False)`` with the people as the one judge; ``theta = s[:N-1]``);
        * ``"pooled"``: pooled LLM BTL ignoring judge and order, rescaled to the
          people (staged on ``Chart(N, 1, 0, "mu", False)``);
        * ``"judges"``: each judge's order-effect BTL (``judges.stan``);
          ``theta`` has one row per judge in ``Chart(N, 1, 0, None, order)``.
    rank : int
        Disagreement rank ``r``.
    calibration : {"mu", "W"} or None
        Human calibration basis (joint and staged).
    lambda_ : float, optional
        LLM weight of the joint fit; default ``n_LLM / n_H`` (the ordinary
        joint likelihood).  The old name ``lam=`` still works with a
        :class:`DeprecationWarning`.
    order : bool
        Estimate the judges' order effects (``False``: ``b = 0``).
    init : ndarray, optional
        Warm start in the reduced chart of the (first-stage) fit; default the numpy
        engine's start: :func:`pydial.estimation.glm.initial_theta` for the structured fits,
        zero for the GLMs (the human, judge-wise and pooled BTL, the calibration stage).
    priors : mapping, optional
        Normal penalty scales ``{"A", "B", "c", "b"}`` of ``dial.stan``
        (default 0 = flat: the MLE).  Not gauge invariant; leave flat unless
        the MLE does not exist.
    backend : {"cmdstanpy", "httpstan"} or None
        See :func:`pydial.stan.stan_backend`.
    seed : int, optional
        Seed passed to the optimizer.
    gtol : float
        Relative gradient tolerance: converged when the max-norm gradient of
        the Stan target (log-likelihood scale) is at most
        ``gtol * max(1, |log p|)`` (see :meth:`CompiledModel.optimize`).
    max_iter : int
        Iteration budget per optimizer call.
    model : CompiledModel, optional
        A compiled ``dial`` (or ``judges``) program to reuse.
    warn : bool
        Emit :class:`pydial.ConvergenceWarning` when an optimizer call fails.
    penalty : {None, "firth"}
        ``"firth"`` adds the Jeffreys prior of :mod:`pydial.model.penalty` (the ``firth``
        flag of ``dial.stan`` / ``judges.stan``): to the human BTL, the pooled BTL,
        every judge's BTL, the calibration stage and the human block of the joint
        fit; the LLM-only structured stage is not penalized.
    shared : bool
        With response covariates: one covariate effect for all LLM judges
        (``covariate_effects="shared"``) instead of one per judge.  The data's
        covariates enter every method's linear predictor (``z' beta``); the pooled
        fit has none.

    Returns
    -------
    StanPointFit
        ``theta`` in the numpy engine's chart, plus scores, ``S``, ``b``, the
        paper-normalized objective and the convergence record.

    Raises
    ------
    ValueError
        Unknown method or invalid rank / calibration / lambda.
    DataError
        The method needs human (or LLM) comparisons that the data lack.
    """
    data = require_comparisons(data)
    if deprecated:
        lambda_ = renamed_arguments("stan_fit_point", deprecated, {"lam": "lambda_"}, ["lambda_"]).get("lambda_", lambda_)
    if method not in POINT_METHODS:
        raise ArgumentError(f"method must be one of {POINT_METHODS}, got {method!r}")
    n_h, n_l = data.n_human, data.n_llm
    if method in ("joint", "staged", "human", "pooled") and n_h == 0:
        raise DataError(f"method {method!r} needs decisive human comparisons; there are none")
    if method != "human" and n_l == 0:
        raise DataError(f"method {method!r} needs decisive LLM comparisons; there are none")
    if method in ("joint", "staged") and calibration is None:
        raise ArgumentError(f"method {method!r} needs a calibration basis ('mu' or 'W'), got None")
    t_total = 0.0
    from pydial.model.penalty import check_penalty

    firth = check_penalty(penalty) == "firth"

    if method == "judges":
        return _fit_judges(data, order=order, backend=backend, seed=seed, gtol=gtol, max_iter=max_iter,
                           model=model, warn=warn, firth=firth)

    if method == "human":
        return _fit_human(data, backend=backend, seed=seed, gtol=gtol, max_iter=max_iter, model=model, warn=warn,
                          firth=firth)

    dial = model if model is not None else compile_model("dial", backend=backend)

    if method == "joint":
        lam_ = n_l / n_h if lambda_ is None else float(lambda_)
        if not (np.isfinite(lam_) and lam_ > 0):
            raise ArgumentError(f"lambda_ must be finite and > 0 for the joint fit, got {lambda_!r}")
        ch = Chart.for_data(data, rank, cast(Calibration | None, calibration), order, shared)
        d = dial_data(data, ch, w_llm=lam_ * n_h / n_l, w_human=1.0, priors=priors, firth=2 if firth else 0)
        th0 = initial_theta(data, ch) if init is None else np.asarray(init, float)
        res = optimize_dial(dial, d, th0, seed=seed, gtol=gtol, max_iter=max_iter)
        if warn:
            _check_converged(res, f"joint fit, lambda = {lam_:.4g}")
        A, B, ct, b = ch.unpack(res.u)
        return StanPointFit(method, ch, res.u, ch.scores(res.u), A @ B.T, b if order else np.zeros(data.K), lam_,
                            -(res.log_prob - weighted_log_coef(d)) / n_h, res.converged, res.grad_norm, [res], dial.backend,
                            res.seconds, beta=_beta(ch, res.u))

    # LLM-only first stage (llm, staged, pooled)
    pooled = method == "pooled"
    K = 1 if pooled else data.K
    r = 0 if pooled else rank
    use_order = False if pooled else order
    cal = "mu" if pooled else calibration
    cells = pooled_cell_table(data) if pooled else None
    chL = Chart(data.N, K, r, None, use_order) if pooled else Chart.for_data(data, r, None, use_order, shared)
    dL = dial_data(data, chL, w_llm=1.0, llm=cells, priors=priors, firth=1 if (firth and pooled) else 0)
    if init is not None:
        th0 = np.asarray(init, float)
    else:  # the numpy engine's starts: the pooled BTL GLM from 0, the structured fit from initial_theta
        th0 = np.zeros(chL.dim) if pooled else initial_theta(data, chL)
    r1 = optimize_dial(dial, dL, th0, seed=seed, gtol=gtol, max_iter=max_iter)
    if warn:
        _check_converged(r1, "LLM-only stage")
    t_total += r1.seconds
    bL = chL.order_effects(r1.u) if use_order else np.zeros(K)
    if method == "llm":
        st = chL.structure(r1.u)
        return StanPointFit(method, chL, r1.u, st.mu * st.gamma.mean(), chL.S(r1.u), bL, np.inf,
                            -(r1.log_prob - weighted_log_coef(dL)) / n_l, r1.converged, r1.grad_norm, [r1], dial.backend, t_total,
                            beta=_beta(chL, r1.u))

    # second stage: argmin_(c, beta_H) l_H(M c, beta_H) with the LLM block fixed (eq. staged-calibrated-estimator)
    assert cal is not None  # checked above for "staged"; "mu" for "pooled"
    ch = Chart(data.N, K, r, cast(Calibration, cal), use_order) if pooled else \
        Chart.for_data(data, r, cast(Calibration, cal), use_order, shared)
    st = chL.structure(r1.u)
    M = st.basis(cal)
    # start: c = 0 (and beta_H = 0), as the numpy engine's calibration GLM (pydial.estimation.glm.fit_calibration)
    beta0 = np.vstack([chL.covariate_effects(r1.u), np.zeros(ch.p)]) if ch.p else None
    th1 = ch.from_structure(st, np.zeros(M.shape[1]), bL if use_order else None, beta0)
    # A and B of the first stage are data (fix_llm): Stan optimizes the calibration alone, (c, beta_H)
    d2 = dial_data(data, ch, w_llm=0.0, w_human=1.0, priors=priors, fix_llm=th1, firth=2 if firth else 0)
    people = ch.human_coordinates
    r2 = optimize_dial(dial, d2, th1[people], seed=seed, gtol=gtol, max_iter=max_iter)
    if warn:
        _check_converged(r2, "calibration stage")
    t_total += r2.seconds
    theta = th1.copy()
    theta[people] = r2.u
    return StanPointFit(method, ch, theta, ch.scores(theta), ch.S(theta), bL, np.inf,
                        -(r2.log_prob - weighted_log_coef(d2)) / n_h, r1.converged and r2.converged,
                        max(r1.grad_norm, r2.grad_norm), [r1, r2], dial.backend, t_total, llm_theta=r1.u,
                        llm_chart=chL, details={"llm_objective": -(r1.log_prob - weighted_log_coef(dL)) / n_l},
                        beta=_beta(ch, theta))


def _beta(chart: Chart, theta: np.ndarray) -> np.ndarray | None:
    """Return the chart's covariate effects at ``theta`` (``None`` without covariates)."""
    return chart.covariate_effects(theta) if chart.p else None


def _fit_human(data: Comparisons, *, backend: str | None, seed: int | None, gtol: float, max_iter: int,
               model: CompiledModel | None, warn: bool, firth: bool = False) -> StanPointFit:
    """Human BTL, eq. human-full-loss, with ``judges.stan`` (no LLM judge, ``K = 0``).

    With ``firth``, Firth's estimate; with response covariates also ``beta_H`` (``beta``).
    """
    jm = model if model is not None else compile_model("judges", backend=backend)
    N = data.N
    H = human_cell_table(data)
    d = judges_data(empty_cells(), H, N=N, K=0, order=False, flat=True, log_lik=False, firth=firth)
    Q = helmert_basis(N)
    # start: s = 0, as the numpy engine's human BTL (pydial.estimation.glm.fit_human_btl)
    u0 = jm.unconstrain(d, {"s_raw": np.zeros((0, N - 1)), "sH_raw": np.zeros(N - 1),
                            "b": np.zeros(0), "beta_free": zero_beta(d), "log_nu": np.zeros(0)})
    res = jm.optimize(d, u0, seed=seed, gtol=gtol, max_iter=max_iter)
    if warn:
        _check_converged(res, "human BTL")
    parts = jm.constrain(d, res.u, include_tparams=False)
    s = Q @ parts["sH_raw"]
    ch = Chart(N, 1, 0, None, False)
    return StanPointFit("human", ch, s[: N - 1].copy(), s, s[None, :], np.zeros(1), 0.0,
                        -(res.log_prob - weighted_log_coef(d)) / data.n_human, res.converged, res.grad_norm, [res],
                        jm.backend, res.seconds, beta=stan_beta(parts, d))


def _fit_judges(data: Comparisons, *, order: bool, backend: str | None, seed: int | None, gtol: float,
                max_iter: int, model: CompiledModel | None, warn: bool, firth: bool = False) -> StanPointFit:
    jm = model if model is not None else compile_model("judges", backend=backend)
    N, K = data.N, data.K
    L = llm_cell_table(data)
    d = judges_data(L, None, N=N, K=K, order=order, flat=True, log_lik=False, firth=firth)
    Q = helmert_basis(N)
    # start: s = 0, b = 0, as the numpy engine's judge-wise BTL (pydial.estimation.glm.fit_order_btl)
    u0 = jm.unconstrain(d, {"s_raw": np.zeros((K, N - 1)), "sH_raw": np.zeros(0), "b": np.zeros(K) if order else np.zeros(0),
                            "beta_free": zero_beta(d), "log_nu": np.zeros(0)})
    res = jm.optimize(d, u0, seed=seed, gtol=gtol, max_iter=max_iter)
    if warn:
        _check_converged(res, "judge-wise BTL")
    parts = jm.constrain(d, res.u, include_tparams=False)
    S = np.asarray(parts["s_raw"]).reshape(K, N - 1) @ Q.T
    b = np.asarray(parts["b"]).reshape(-1) if order else np.zeros(K)
    ch = Chart(N, 1, 0, None, order)
    theta = np.column_stack([S[:, : N - 1], b[:, None]]) if order else S[:, : N - 1].copy()
    return StanPointFit("judges", ch, theta, S.mean(axis=0), S, b, np.inf,
                        -(res.log_prob - weighted_log_coef(d)) / data.n_llm, res.converged, res.grad_norm, [res],
                        jm.backend, res.seconds, beta=stan_beta(parts, d))


def stan_beta(parts: Mapping[str, Any], d: Mapping[str, Any]) -> np.ndarray | None:
    """Return the program's covariate effects (rows x ``n_cov``, 0 where ``beta_fixed``) from ``parts["beta_free"]``, or None."""
    if not int(d["n_cov"]):
        return None
    fixed = np.asarray(d["beta_fixed"], bool)
    beta = np.zeros(fixed.shape)
    beta[~fixed] = np.asarray(parts["beta_free"], float).reshape(-1)  # row-major, as free_positions of paired_likelihoods.stan
    return beta
