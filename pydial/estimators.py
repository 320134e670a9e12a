r"""The estimators of the paper behind one entry point, :func:`fit`.

========== ==================================================================
method     estimator
========== ==================================================================
judges     each judge's own order-effect BTL (eq. binomial-model-llm), no humans
human      centered human BTL MLE :math:`\hat s_0` (eq. human-only-estimator)
pooled     pooled LLM BTL ignoring judge and order, rescaled to the humans
dial-anc   staged LLM-anchored endpoint (Alg. DIAL-Anc, eq. staged-calibrated-estimator)
dial-ada   weighted joint fits on the lambda path selected by GACV (Alg. DIAL-Ada)
dial-nopos DIAL-Ada with the order effects fixed at 0 (order-agnostic ablation)
atc        human BTL ordering + isotonic calibration of the LLM consensus (AtC)
========== ==================================================================
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit

from .data import Comparisons
from .exceptions import ConvergenceError, ConvergenceWarning, DataError, IdentifiabilityError
from .fit import (
    centering_basis,
    difference_design,
    fit_calibration,
    fit_human_btl,
    fit_order_btl,
    fit_structured,
    glm_information,
    initial_theta,
    logistic_glm,
)
from .inference import CellStats, check_cov_type, influence_covariance, wald_table
from .penalty import check_penalty
from .likelihood import Cells, Objective, human_loss
from .model import CALIBRATIONS, Chart
from .design import ESTIMATORS
from .results import DialResult
from .selection import numpy_joint
from .optim import OptimResult, pinv_sym, single_threaded_blas

METHODS: tuple[str, ...] = ESTIMATORS
ENGINES: tuple[str, ...] = ("numpy", "stan")
NEEDS_HUMAN = ("human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc")
ANCHORED_COVS: tuple[str, ...] = ("two-step", "fixed-basis")


# ====================================================================== fit
@single_threaded_blas
def fit(
    data: Comparisons,
    method: str = "dial-anc",
    *,
    rank: int | str | list[int] = 1,
    calibration: str = "mu",
    engine: str = "numpy",
    cov: str | None = None,
    level: float = 0.95,
    lambdas: Any = None,
    multiples: Any = None,
    include_endpoints: bool | str = True,
    anchored_cov: str = "two-step",
    ties: str | None = None,
    seed: int | None = None,
    check: bool = True,
    penalty: str | None = None,
) -> DialResult:
    """Fit one of the paper's estimators.

    Parameters
    ----------
    data : Comparisons
        Validated judgments (:meth:`Comparisons.from_frame`).
    method : {"judges", "human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc"}
        Estimator (see the module docstring).
    rank : int, list of int or "auto", default 1
        Disagreement rank ``r`` of ``S = gamma mu^T + U V^T`` (Cond. llm-structure).
        For ``dial-ada`` a list (or ``"auto"``: ``0 .. min(K-1, N-2, 3)``) selects
        ``(r, lambda)`` jointly by GACV (App. rank-selection).
    calibration : {"mu", "W"}, default "mu"
        Human calibration basis: the consensus ``mu`` (``d = 1``) or ``W = [mu, V]``
        (``d = r + 1``).
    engine : {"numpy", "stan"}
        Optimizer; ``"stan"`` runs the same model through Stan's optimizer.
    cov : {"fisher", "binomial", "cell", "record"}, optional
        Meat of the covariance (see :mod:`pydial.inference`); default ``"fisher"``
        for ``human`` and ``"cell"`` (judge-pair clustered) otherwise.
    level : float, default 0.95
        Level of every interval reported.
    seed : int, optional
        Seed of the generic-rank design checks (and of Stan when used).
    lambdas : sequence of float, optional
        Explicit finite candidate weights for ``dial-ada`` / ``dial-nopos`` (absolute
        values of lambda in eq. weighted-loss).
    multiples : sequence of float, optional
        Candidate weights as multiples of ``n_L / n_H``; default seven log-spaced
        values from 0.01 to 10 (App. lambda-selection).
    include_endpoints : bool or "anchored", default True
        Whether the endpoints ``lambda = 0`` (human BTL) and ``inf`` (DIAL-Anc) compete
        in GACV; ``inf`` remains the fallback when no finite weight is admissible.
        ``"anchored"``: only ``inf`` competes; the human-only endpoint is fitted and
        listed in ``result.gacv`` but not selected (with ``penalty="firth"`` at small
        human budgets GACV's trace term under-states the optimism of the ``N - 1``
        parameter human fit; see ``analyses/realdata/results_firth/summary.md``).
    anchored_cov : {"two-step", "fixed-basis"}
        Covariance at ``lambda = inf``: the two-step delta method (the
        ``lambda -> inf`` limit of the sandwich at the observed ``n_H/n_L``; default)
        or the ``M`` fixed limit ``M H_M^{-1} M^T`` of Cor. uniform-lambda.
    ties : {None, "davidson"}
        ``None``: ties are excluded (binary models, counted in ``data.summary()``).
        ``"davidson"``: Davidson's model for ``method="human"`` and the
        Davidson-Beaver model for ``method="judges"`` use the ties, with
        judge-specific tie parameters (``result.tie_parameters``); needs
        ``engine="stan"`` and gives model-based standard errors.
    check : bool, default True
        Run :func:`pydial.check_design` first and raise
        :class:`~pydial.IdentifiabilityError` when the fit cannot exist.
    penalty : {None, "firth"}
        ``"firth"``: maximize ``l(theta) + 1/2 log det I(theta)`` (Firth 1993, the
        Jeffreys prior; :mod:`pydial.penalty`) instead of ``l``, which removes the
        ``O(1/n)`` bias and is finite whenever the design is connected, even under
        complete separation.  Applies to the human BTL (``human``, the ordering of
        ``atc``, the ``lambda = 0`` endpoint of ``dial-ada``), each judge's BTL
        (``judges``), both stages of ``pooled``, the calibration GLM of ``dial-anc``
        (and the ``lambda = inf`` endpoint) and the human block of the finite-weight
        fits of ``dial-ada``.  Standard errors are the sandwich (or Fisher) covariance
        at the penalized estimate, with the unpenalized information as bread.  The
        calibration LRT stays a likelihood-ratio test of the unpenalized fits.

    Returns
    -------
    DialResult
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if not 0 < level < 1:
        raise ValueError(f"level ({level}) must be in the open interval (0, 1)")
    check_penalty(penalty)
    if include_endpoints not in (True, False, "anchored"):
        raise ValueError(f"include_endpoints must be True, False or 'anchored', got {include_endpoints!r}")
    rank_grid = _rank_grid(rank, data, method)
    if anchored_cov not in ANCHORED_COVS:
        raise ValueError(f"anchored_cov must be one of {ANCHORED_COVS}, got {anchored_cov!r}")
    cov_arg = cov
    cov = check_cov_type(cov if cov is not None else ("fisher" if method == "human" else "cell"))
    if method in NEEDS_HUMAN and data.n_human == 0:
        raise DataError(
            f"method {method!r} needs human comparisons, but no decisive rows have judge == {data.human_judge!r}"
        )
    if method != "human" and data.K == 0:
        raise DataError(f"method {method!r} needs LLM judgments, but there are none")
    if check:
        from .design import check_design

        for r in rank_grid:
            key = ("check_design", r, calibration, method, 0 if seed is None else seed, penalty)
            if key not in data._cache:  # the data are immutable: check each design once
                data._cache[key] = check_design(data, rank=r, calibration=calibration, method=method, seed=key[-2],
                                                penalty=penalty)
            data._cache[key].raise_if_failed()
    common = dict(method=method, rank=rank_grid[0], calibration=calibration, engine=engine, cov_type=cov, level=level,
                  items=data.items, judges=data.judges, n_human=data.n_human, n_llm=data.n_llm)
    if ties is not None:
        from .stan.ties import TIE_METHODS, TIE_MODELS, fit_ties

        if ties not in TIE_MODELS:
            raise ValueError(f"ties must be None or one of {TIE_MODELS}, got {ties!r}")
        if engine != "stan":
            raise ValueError("ties='davidson' is fitted by the Stan engine: pass engine='stan'")
        if method not in TIE_METHODS:
            raise NotImplementedError(f"ties='davidson' is available for methods {TIE_METHODS}, not {method!r}")
        if penalty is not None:
            raise NotImplementedError(f"penalty={penalty!r} is not available with ties={ties!r}")
        return fit_ties(data, method, {**common, "cov_type": cov if cov_arg is not None else "fisher"}, seed=seed)
    if engine == "stan":
        from .stan.engine import stan_point_engine

        point = stan_point_engine(seed, penalty=penalty)
    else:
        point = numpy_engine(penalty)
    if method == "human":
        res = _fit_human(data, common, point)
    elif method == "judges":
        res = _fit_judges(data, common, point)
    elif method == "pooled":
        res = _fit_pooled(data, common, point)
    elif method == "atc":
        res = _fit_atc(data, common, point)
    else:
        res = _fit_dial(data, common, order=(method != "dial-nopos"), adaptive=(method != "dial-anc"),
                        lambdas=lambdas, multiples=multiples, include_endpoints=include_endpoints,
                        anchored_cov=anchored_cov, rank_grid=rank_grid, point=point, penalty=penalty)
    res.penalty = penalty
    # what res.bootstrap needs to refit the whole procedure on resampled records
    res.details["refit"] = (data, dict(method=method, rank=rank, calibration=calibration, engine=engine, cov=cov_arg,
                                       level=level, lambdas=lambdas, multiples=multiples,
                                       include_endpoints=include_endpoints, anchored_cov=anchored_cov, seed=seed,
                                       penalty=penalty))
    return res


def _rank_grid(rank: Any, data: Comparisons, method: str) -> list[int]:
    """Validate ``rank`` (int, list, or "auto") into a list of candidate ranks."""
    top = max(0, min(data.K - 1, data.N - 2, 3))
    if isinstance(rank, str):
        if rank != "auto":
            raise ValueError(f"rank must be a non-negative integer, a list of them, or 'auto', got {rank!r}")
        grid = list(range(top + 1))
    elif isinstance(rank, (int, np.integer)):
        grid = [int(rank)]
    else:
        try:
            grid = [int(r) for r in rank]
        except TypeError:
            raise ValueError(f"rank must be a non-negative integer, a list of them, or 'auto', got {rank!r}") from None
    if not grid or any(r < 0 for r in grid):
        raise ValueError(f"ranks must be non-negative integers, got {rank!r}")
    if len(grid) > 1 and method not in ("dial-ada", "dial-nopos"):
        raise ValueError(f"a rank grid (rank={rank!r}) needs method 'dial-ada' or 'dial-nopos', got {method!r}")
    return sorted(set(grid))


# ----------------------------------------------------------------- helpers
def _warn_if(opt: OptimResult, what: str) -> None:
    if not opt.converged:
        warnings.warn(f"{what}: optimizer did not converge ({opt.message}; max|grad| = {opt.grad_norm:.2e})",
                      ConvergenceWarning, stacklevel=3)
    elif opt.at_bound.any():
        warnings.warn(f"{what}: {int(opt.at_bound.sum())} coordinate(s) on the optimization box (|x| = 10): "
                      "the estimate is not resolved within the box", ConvergenceWarning, stacklevel=3)


def _score_frame(s: np.ndarray, C: np.ndarray, items: tuple[str, ...], level: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    if not np.all(np.isfinite(s)):
        raise ConvergenceError("the fit produced non-finite scores")
    tab = wald_table(s, C, list(items), level, "score")[["score", "se", "ci_low", "ci_high"]]
    tab.index.name = "item"
    cov = pd.DataFrame(C, index=pd.Index(items, name="item"), columns=pd.Index(items, name="item"))
    return tab, cov


def _glm_influence(X: np.ndarray, opt: OptimResult, n: np.ndarray, y: np.ndarray, w: float, E: np.ndarray,
                   what: str = "fit") -> tuple[np.ndarray, np.ndarray, bool]:
    """Influence directions ``u_c = E H^{-1} x_c`` of a GLM fit and its probabilities.

    The reduced GLM charts have no gauge, so a singular Hessian means the design does
    not identify the parameters (possible only with ``check=False``): it is reported
    with a :class:`ConvergenceWarning` and the third return value ``True``.
    """
    p = expit(X @ opt.x)
    Hinv, n_zero = pinv_sym(glm_information(X, n, p, w))
    if n_zero:
        warnings.warn(f"{what}: the Hessian is singular in {n_zero} direction(s); the design does not identify "
                      "the parameters (run pydial.check_design)", ConvergenceWarning, stacklevel=3)
    return X @ Hinv @ E.T, p, bool(n_zero)


def _fit_human(data: Comparisons, common: dict, point: "PointEngine | None" = None) -> DialResult:
    N = data.N
    f = (point or NUMPY).human(data)
    _warn_if(f.opt, "human BTL")
    T = centering_basis(N)
    X = difference_design(data.human.i, data.human.j, N) @ T
    U, p, singular = _glm_influence(X, f.opt, data.human.n, data.human.y, 1.0 / data.n_human, T, "human BTL")
    st = CellStats.from_parts([(data.human.n, data.human.y, p, 1.0 / data.n_human, True)])
    C = influence_covariance(U, st, data, common["cov_type"])
    scores, cov = _score_frame(f.s, C, data.items, common["level"])
    return DialResult(**common, scores=scores, cov=cov, position_effects=None, judge_scores=None, structure=None,
                      calibration_coef=None, lambda_=0.0, converged=f.opt.resolved and not singular, grad_norm=f.opt.grad_norm,
                      loss_human=human_loss(f.s, data.human))


def numpy_judges(data: Comparisons, *, penalty: str | None = None) -> list:
    """Each judge's order-effect BTL (eq. binomial-model-llm) by the numpy optimizer."""
    return [fit_order_btl(data.llm.select(data.llm.judge == k), data.N, penalty=penalty) for k in range(data.K)]


def numpy_pooled(data: Comparisons, *, penalty: str | None = None) -> tuple[OptimResult, OptimResult]:
    """Pooled LLM BTL (centered reduced chart ``beta``), then ``argmin_c l_H(c s_pool)``."""
    N, L, Hc = data.N, data.llm, data.human
    T = centering_basis(N)
    o1 = logistic_glm(difference_design(L.i, L.j, N) @ T, L.n, L.y, weight=1.0 / data.n_llm, penalty=penalty)
    if np.abs(T @ o1.x).max() < 1e-10:  # no direction to calibrate: reported by the caller
        return o1, o1
    x2 = difference_design(Hc.i, Hc.j, N) @ (T @ o1.x)
    return o1, logistic_glm(x2[:, None], Hc.n, Hc.y, weight=1.0 / data.n_human, penalty=penalty)


def _fit_judges(data: Comparisons, common: dict, point: "PointEngine | None" = None) -> DialResult:
    N, K = data.N, data.K
    fits = (point or NUMPY).judges(data)
    T = centering_basis(N)
    E = np.zeros((N + 1, N))
    E[:N, : N - 1] = T
    E[N, N - 1] = 1.0
    S = np.zeros((K, N))
    b = np.zeros(K)
    covs, parts = [], []
    conv, gmax = True, 0.0
    for k in range(K):
        m = data.llm.judge == k
        cells = data.llm.select(m)
        f = fits[k]
        _warn_if(f.opt, f"judge {data.judges[k]!r}")
        conv &= f.opt.resolved
        gmax = max(gmax, f.opt.grad_norm)
        X = np.column_stack([difference_design(cells.i, cells.j, N) @ T, cells.a.astype(float)])
        U, p, singular = _glm_influence(X, f.opt, cells.n, cells.y, 1.0 / cells.n.sum(), E, f"judge {data.judges[k]!r}")
        conv &= not singular
        st = CellStats(cells.n, cells.y, p, np.full(cells.n.size, 1.0 / cells.n.sum()), np.zeros(cells.n.size, bool),
                       np.flatnonzero(m), np.full(cells.n.size, -1))
        covs.append(influence_covariance(U, st, data, common["cov_type"]))
        parts.append((m, U, p))
        S[k], b[k] = f.s, f.b
    # One stacked influence matrix over all judges' cells, targets (mean score, b), so that
    # the record meat sees judgments of different judges on the same record together.
    U_all = np.zeros((len(data.llm), N + K))
    p_all = np.zeros(len(data.llm))
    w_all = np.zeros(len(data.llm))
    for k, (m, Uk, pk) in enumerate(parts):
        U_all[m, :N] = Uk[:, :N] / K
        U_all[m, N + k] = Uk[:, N]
        p_all[m], w_all[m] = pk, 1.0 / data.llm.n[m].sum()
    st_all = CellStats(data.llm.n, data.llm.y, p_all, w_all, np.zeros(len(data.llm), bool),
                       np.arange(len(data.llm)), np.full(len(data.llm), -1))
    C_all = influence_covariance(U_all, st_all, data, common["cov_type"])
    Cs, Cb = C_all[:N, :N], C_all[N:, N:]
    pos = wald_table(b, Cb, list(data.judges), common["level"], "b")
    pos.index.name = "judge"
    pos.attrs["cov"] = Cb
    scores, cov = _score_frame(S.mean(0), Cs, data.items, common["level"])
    judge_scores = pd.DataFrame(S, index=pd.Index(data.judges, name="judge"), columns=pd.Index(data.items, name="item"))
    se = pd.DataFrame(np.sqrt(np.array([np.diag(c)[:N] for c in covs])), index=judge_scores.index, columns=judge_scores.columns)
    return DialResult(**common, scores=scores, cov=cov, position_effects=pos, judge_scores=judge_scores, structure=None,
                      calibration_coef=None, lambda_=np.inf, converged=conv, grad_norm=gmax, loss_human=np.nan,
                      details={"judge_score_se": se, "judge_cov": covs})


def _fit_pooled(data: Comparisons, common: dict, point: "PointEngine | None" = None) -> DialResult:
    N = data.N
    L, Hc = data.llm, data.human
    T = centering_basis(N)
    X1 = difference_design(L.i, L.j, N) @ T
    w1, w2 = 1.0 / data.n_llm, 1.0 / data.n_human
    o1, o2 = (point or NUMPY).pooled(data)
    _warn_if(o1, "pooled LLM BTL")
    sp_ = T @ o1.x
    if np.abs(sp_).max() < 1e-10:
        raise IdentifiabilityError("the pooled LLM BTL scores are all equal (the judges' preferences cancel): "
                                   "there is no direction to rescale to the human comparisons")
    D2 = difference_design(Hc.i, Hc.j, N)
    x2 = D2 @ sp_
    _warn_if(o2, "pooled calibration")
    c = float(o2.x[0])
    s = c * sp_
    # Two-step linearization: stage 1 beta (pooled BTL), stage 2 c.
    p1 = expit(X1 @ o1.x)
    H1 = glm_information(X1, L.n, p1, w1)
    p2 = expit(c * x2)
    Cc = w2 * np.sum(Hc.n * p2 * (1 - p2) * x2**2)
    d2 = D2 @ T
    X21 = w2 * ((Hc.n * p2 * (1 - p2) * x2 * c + (Hc.n * p2 - Hc.y)) @ d2)
    total = c * T - np.outer(sp_, X21 / Cc)
    U_L = X1 @ np.linalg.solve(H1, total.T)
    U_H = (x2 / Cc)[:, None] * sp_[None, :]
    st = CellStats.from_parts([(L.n, L.y, p1, w1, False), (Hc.n, Hc.y, p2, w2, True)])
    C = influence_covariance(np.vstack([U_L, U_H]), st, data, common["cov_type"])
    scores, cov = _score_frame(s, C, data.items, common["level"])
    return DialResult(**common, scores=scores, cov=cov, position_effects=None, judge_scores=None, structure=None,
                      calibration_coef=np.array([c * np.linalg.norm(sp_) / np.sqrt(N)]), lambda_=np.inf,
                      converged=o1.resolved and o2.resolved,
                      grad_norm=max(o1.grad_norm, o2.grad_norm), loss_human=human_loss(s, Hc),
                      details={"pooled_scores": sp_})


@dataclass(frozen=True)
class StagedFit:
    """The staged endpoint in the calibrated chart (Alg. DIAL-Anc)."""

    chart: Chart
    theta: np.ndarray
    llm_opt: OptimResult
    cal_opt: OptimResult
    llm_chart: Chart
    llm_theta: np.ndarray


@dataclass(frozen=True)
class PointEngine:
    """The optimizers behind the estimators: numpy by default; ``pydial.stan``
    supplies Stan's (``engine="stan"``).  Inference is always computed by numpy at
    the returned optimum, so two engines differ only in the optimizer.

    ``staged(data, rank, calibration, order) -> StagedFit``;
    ``joint(data, chart, lam, theta0) -> (theta, OptimResult)``;
    ``human(data) -> BTLFit``; ``judges(data) -> list[BTLFit]`` (optimizer ``x`` =
    ``(s[:N-1], b)``); ``pooled(data) -> (OptimResult, OptimResult)`` (pooled BTL in
    the reduced chart ``s = T x``, then the scalar calibration ``c``).
    """

    staged: Any
    joint: Any
    human: Any
    judges: Any
    pooled: Any
    name: str = "numpy"
    penalty: str | None = None


def staged_fit(data: Comparisons, rank: int, calibration: str, *, order: bool = True,
               penalty: str | None = None) -> StagedFit:
    """Alg. DIAL-Anc: structured LLM-only fit, then ``argmin_c l_H(M c)`` (Firth's
    estimate of the calibration GLM with ``penalty="firth"``)."""
    chL = Chart(data.N, data.K, rank, None, order)
    fL = fit_structured(data, chL, np.inf, initial_theta(data, chL))
    st = chL.structure(fL.theta)
    M = st.mu[:, None] if calibration == "mu" else st.W
    oc = fit_calibration(data.human, M, penalty=penalty)
    ch = Chart(data.N, data.K, rank, calibration, order)
    b = chL.order_effects(fL.theta) if order else None
    theta = ch.from_structure(st, oc.x, b)
    return StagedFit(ch, theta, fL.opt, oc, chL, fL.theta)


def numpy_human(data: Comparisons, *, penalty: str | None = None) -> Any:
    """The centered human BTL (eq. human-only-estimator) by the numpy optimizer."""
    return fit_human_btl(data.human, data.N, penalty=penalty)


def numpy_engine(penalty: str | None = None) -> PointEngine:
    """The numpy optimizers, with the likelihoods penalized by ``penalty`` (:mod:`pydial.penalty`)."""
    if penalty is None:
        return PointEngine(staged=staged_fit, joint=numpy_joint, human=numpy_human, judges=numpy_judges,
                           pooled=numpy_pooled)
    return PointEngine(staged=partial(staged_fit, penalty=penalty), joint=partial(numpy_joint, penalty=penalty),
                       human=partial(numpy_human, penalty=penalty), judges=partial(numpy_judges, penalty=penalty),
                       pooled=partial(numpy_pooled, penalty=penalty), penalty=penalty)


NUMPY = numpy_engine()


def staged_influence(data: Comparisons, fit_: StagedFit, *, fixed_basis: bool = False) -> tuple[np.ndarray, CellStats]:
    """Two-step influence directions of the calibrated scores at the staged endpoint.

    LLM cells: ``u = (ds/dxi - ds/dc C^{-1} H_{c xi}) H_xi^+ d eta/d xi``; human cells:
    ``u = ds/dc C^{-1} d eta/dc`` (see :mod:`pydial.inference`).  This is the
    ``lambda -> inf`` limit of the finite-weight sandwich at the observed ``n_H/n_L``.
    With ``fixed_basis=True`` the LLM contributions are dropped, giving the
    ``M H_M^{-1} M^T`` limit of Cor. uniform-lambda (``n_H/n_L -> 0``), which ignores
    the estimation error of ``M`` and under-covers in finite samples.
    """
    ch, th = fit_.chart, fit_.theta
    oL = Objective(ch, Cells.stack(data, 1.0 / data.n_llm, 0.0))
    oH = Objective(ch, Cells.stack(data, 0.0, 1.0 / data.n_human))
    _, _, HL = oL.value_grad_hess(th)
    _, _, HH = oH.value_grad_hess(th)
    cs = ch.slices["c"]
    xi = np.r_[np.arange(0, cs.start), np.arange(cs.stop, ch.dim)]
    C = HH[cs, cs]
    if np.linalg.matrix_rank(C) < C.shape[0]:
        raise IdentifiabilityError("the human calibration block is singular: the human comparisons do not identify "
                                   "c_H in the estimated basis (Cond. human-design, rank(D_H M) = d)")
    Cinv = np.linalg.inv(C)
    sdot = ch.score_jacobian(th)
    S_xi, S_c = sdot[:, xi], sdot[:, cs]
    total = S_xi - S_c @ Cinv @ HH[cs][:, xi]
    HLp, _ = pinv_sym(HL[np.ix_(xi, xi)])
    U_L = oL.cell_jacobian(th)[:, xi] @ (total @ HLp).T
    if fixed_basis:
        U_L = np.zeros_like(U_L)
    U_H = oH.cell_jacobian(th)[:, cs] @ (S_c @ Cinv).T
    st = CellStats.from_parts([(data.llm.n, data.llm.y, oL.probabilities(th), 1.0 / data.n_llm, False),
                               (data.human.n, data.human.y, oH.probabilities(th), 1.0 / data.n_human, True)])
    return np.vstack([U_L, U_H]), st


def llm_only_effects(data: Comparisons, chart: Chart, theta: np.ndarray, cov: str, level: float) -> pd.DataFrame:
    """Judge position effects ``b_k`` from the LLM-only fit with Wald tests of ``b_k = 0``
    (Prop. stage-one-normality); bread ``H(l_L)^+``, meat of type ``cov``."""
    o = Objective(chart, Cells.stack(data, 1.0 / data.n_llm, 0.0))
    _, _, H = o.value_grad_hess(theta)
    Hp, _ = pinv_sym(H)
    E = np.zeros((data.K, chart.dim))
    E[np.arange(data.K), np.arange(chart.slices["b"].start, chart.slices["b"].stop)] = 1.0
    U = o.cell_jacobian(theta) @ (E @ Hp).T
    st = CellStats.from_parts([(data.llm.n, data.llm.y, o.probabilities(theta), 1.0 / data.n_llm, False)])
    C = influence_covariance(U, st, data, cov)
    tab = wald_table(chart.order_effects(theta), C, list(data.judges), level, "b")
    tab.index.name = "judge"
    tab.attrs["cov"] = C
    return tab


def consensus_loadings(data: Comparisons, chart: Chart, theta: np.ndarray, cov: str, level: float) -> pd.DataFrame:
    """Consensus loadings ``gamma_k = N^{-1} (S mu)_k`` of the LLM-only fit with Wald
    intervals (Prop. stage-one-normality); the Jacobian of the gauge-invariant map
    ``theta -> gamma`` is taken by central differences."""
    o = Objective(chart, Cells.stack(data, 1.0 / data.n_llm, 0.0))
    _, _, H = o.value_grad_hess(theta)
    Hp, _ = pinv_sym(H)
    gamma = chart.structure(theta).gamma
    h = 1e-6
    E = np.empty((data.K, chart.dim))
    for t in range(chart.dim):
        e = np.zeros(chart.dim)
        e[t] = h
        E[:, t] = (chart.structure(theta + e).gamma - chart.structure(theta - e).gamma) / (2 * h)
    U = o.cell_jacobian(theta) @ (E @ Hp).T
    st = CellStats.from_parts([(data.llm.n, data.llm.y, o.probabilities(theta), 1.0 / data.n_llm, False)])
    C = influence_covariance(U, st, data, cov)
    tab = wald_table(gamma, C, list(data.judges), level, "gamma")[["gamma", "se", "ci_low", "ci_high"]]
    tab.index.name = "judge"
    return tab


def finite_influence(data: Comparisons, ch: Chart, lam: float, theta: np.ndarray) -> tuple[np.ndarray, CellStats]:
    """Sandwich influence directions ``u_c = sdot H^+ d eta_c/d theta`` at a finite weight
    (eq. weighted-empirical-sandwich; pseudo-inverse in the over-parameterized chart)."""
    obj = Objective.weighted(ch, data, lam)
    _, _, H = obj.value_grad_hess(theta)
    Hp, _ = pinv_sym(H)
    U = obj.cell_jacobian(theta) @ (ch.score_jacobian(theta) @ Hp).T
    p = obj.probabilities(theta)
    h = obj.cells.is_human
    st = CellStats.from_parts([(data.llm.n, data.llm.y, p[~h], lam / data.n_llm, False),
                               (data.human.n, data.human.y, p[h], 1.0 / data.n_human, True)])
    return U, st


def human_influence(data: Comparisons, beta: np.ndarray) -> tuple[np.ndarray, CellStats]:
    """Influence directions of the centered human BTL fit (reduced chart ``s = T beta``)."""
    T = centering_basis(data.N)
    X = difference_design(data.human.i, data.human.j, data.N) @ T
    p = expit(X @ beta)
    U = X @ np.linalg.solve(glm_information(X, data.human.n, p, 1.0 / data.n_human), T.T)
    return U, CellStats.from_parts([(data.human.n, data.human.y, p, 1.0 / data.n_human, True)])


def _fit_dial(data: Comparisons, common: dict, *, order: bool, adaptive: bool, lambdas: Any, multiples: Any,
              include_endpoints: bool | str, anchored_cov: str, rank_grid: list[int], point: PointEngine = NUMPY,
              penalty: str | None = None) -> DialResult:
    from .calibration_test import calibration_test
    from .exceptions import ConvergenceError
    from .selection import (DEFAULT_MULTIPLES, anchored_candidate, candidate_weights, finite_candidate,
                            human_candidate, path_table)

    cal = common["calibration"]
    hum, _ = human_candidate(data, point.human, penalty=penalty)
    tables, options = [], []
    staged: dict[int, StagedFit] = {}
    for r in rank_grid:
        sf = point.staged(data, r, cal, order=order)
        staged[r] = sf
        _warn_if(sf.llm_opt, f"structured LLM-only fit (rank {r})")
        st = sf.llm_chart.structure(sf.llm_theta)
        M = st.mu[:, None] if cal == "mu" else st.W
        cands = [anchored_candidate(data, M, sf.chart.scores(sf.theta), sf.cal_opt, sf.llm_opt, penalty=penalty)]
        if adaptive:
            if lambdas is not None:
                lams = np.sort(np.asarray(lambdas, float))[::-1]
                if np.any(~np.isfinite(lams)) or np.any(lams <= 0):
                    raise ValueError(f"lambdas must be finite and positive (the endpoints 0 and inf are added by include_endpoints), got {lambdas!r}")
            else:
                mult = DEFAULT_MULTIPLES if multiples is None else tuple(np.asarray(multiples, float).ravel())
                if not mult or not np.all(np.isfinite(mult)) or min(mult) <= 0:
                    raise ValueError(f"multiples must be finite and positive, got {multiples!r}")
                lams = np.sort(candidate_weights(data.n_llm, data.n_human, mult))[::-1]
            theta = sf.theta
            for lam in lams:
                c = finite_candidate(data, sf.chart, float(lam), theta, float(lam * data.n_human / data.n_llm), point.joint,
                                     penalty=penalty)
                if c.admissible:
                    theta = c.theta
                cands.append(c)
        if adaptive:
            anc = cands[0]
            if not include_endpoints:
                anc = dataclasses.replace(anc, admissible=False, reason=anc.reason or "endpoint excluded (include_endpoints=False); fallback only")
            if include_endpoints == "anchored" and hum.admissible:
                hum = dataclasses.replace(hum, admissible=False,
                                          reason="human-only endpoint listed, not competing (include_endpoints='anchored')")
            allc = ([hum] if include_endpoints else []) + cands[:0:-1] + [anc]
        else:
            allc = cands
        tables.append(path_table(allc, r))
        options += [(r, c) for c in allc]
    table = pd.concat(tables, ignore_index=True)
    if len(rank_grid) > 1 and adaptive and include_endpoints:
        # the human endpoint does not depend on the rank: list it once
        dup = (table["lambda"] == 0) & table.duplicated(subset=["lambda"], keep="first")
        table = table.loc[~dup].reset_index(drop=True)
    ok = [(r, c) for r, c in options if c.admissible]
    fallback = False
    if not ok:
        anc = [(r, c) for r, c in options if np.isinf(c.lam) and c.opt is not None and c.opt.resolved and c.s is not None]
        if not anc:
            raise ConvergenceError("no admissible candidate on the lambda path (see the reasons):\n" + table.to_string())
        ok, fallback = anc[:1], True
        warnings.warn("no candidate of the lambda path passed the regularity guards; falling back to the anchored "
                      "endpoint lambda = inf (see result.gacv for the reasons)", ConvergenceWarning, stacklevel=3)
    r_sel, best = min(ok, key=lambda rc: rc[1].gacv if np.isfinite(rc[1].gacv) else np.inf)
    sf = staged[r_sel]
    common = {**common, "rank": r_sel}
    if best.lam == 0:
        U, stt = human_influence(data, best.theta)
        C = influence_covariance(U, stt, data, common["cov_type"])
        s = best.s
    elif np.isinf(best.lam):
        U, stt = staged_influence(data, sf, fixed_basis=(anchored_cov == "fixed-basis"))
        C = influence_covariance(U, stt, data, common["cov_type"])
        s = sf.chart.scores(sf.theta)
    else:
        U, stt = finite_influence(data, sf.chart, best.lam, best.theta)
        C = influence_covariance(U, stt, data, common["cov_type"])
        s = best.s
    scores, cov = _score_frame(s, C, data.items, common["level"])
    pos = llm_only_effects(data, sf.llm_chart, sf.llm_theta, common["cov_type"], common["level"]) if order else None
    structure = sf.llm_chart.structure(sf.llm_theta)
    judge_scores = pd.DataFrame(structure.S, index=pd.Index(data.judges, name="judge"), columns=pd.Index(data.items, name="item"))
    d = sf.chart.d
    if penalty is not None:  # the LRT compares the unpenalized likelihoods
        hum, _ = human_candidate(data, NUMPY.human)
    ct = calibration_test(data, sf.chart.scores(sf.theta), hum.s if hum.opt is not None and hum.opt.resolved else None, d,
                          hum.reason)
    if np.isinf(best.lam):
        c_coef = sf.chart.calibration_coordinates(sf.theta)
    elif best.lam == 0:
        c_coef = None
    else:
        c_coef = sf.chart.calibration_coordinates(best.theta)
    opts = [sf.llm_opt, sf.cal_opt] + ([best.opt] if best.opt is not None else [])
    res = DialResult(**common, scores=scores, cov=cov, position_effects=pos, judge_scores=judge_scores,
                     structure=structure, calibration_coef=c_coef, lambda_=best.lam,
                     converged=all(o.resolved for o in opts), grad_norm=max(o.grad_norm for o in opts),
                     loss_human=human_loss(s, data.human),
                     details={"theta": best.theta if np.isfinite(best.lam) and best.lam > 0 else sf.theta,
                              "chart": sf.chart, "llm_theta": sf.llm_theta, "llm_chart": sf.llm_chart,
                              "fallback": fallback, "anchored_cov": anchored_cov,
                              "candidates": [(staged[r].chart, staged[r].theta, c) for r, c in options]})
    res.gacv = table if adaptive else None
    res.calibration_test = ct
    if order:
        res.consensus = consensus_loadings(data, sf.llm_chart, sf.llm_theta, common["cov_type"], common["level"])
    return res


def _fit_atc(data: Comparisons, common: dict, point: "PointEngine | None" = None) -> DialResult:
    """AtC baseline (Sec. Experiments, App. related-comparison): the human comparisons
    are aggregated by BTL into an ordering, and the position-debiased LLM consensus
    score (DIAL-Anc with ``M = mu``) is isotonic-calibrated to respect it."""
    from scipy.optimize import isotonic_regression

    point = point or NUMPY
    h = point.human(data)
    _warn_if(h.opt, "human BTL (AtC ordering)")
    sf = point.staged(data, common["rank"], "mu", order=True)
    _warn_if(sf.llm_opt, "structured LLM-only fit")
    base = sf.chart.scores(sf.theta)
    order = np.argsort(-h.s, kind="stable")
    fitted = isotonic_regression(base[order], increasing=False).x
    s = np.empty(data.N)
    s[order] = fitted
    s -= s.mean()
    nan = np.full((data.N, data.N), np.nan)
    scores = pd.DataFrame({"score": s, "se": np.nan, "ci_low": np.nan, "ci_high": np.nan},
                          index=pd.Index(data.items, name="item"))
    cov = pd.DataFrame(nan, index=scores.index, columns=scores.index)
    pos = llm_only_effects(data, sf.llm_chart, sf.llm_theta, common["cov_type"], common["level"])
    return DialResult(**{**common, "calibration": "mu"}, scores=scores, cov=cov, position_effects=pos,
                      judge_scores=None, structure=sf.llm_chart.structure(sf.llm_theta), calibration_coef=None,
                      lambda_=np.inf, converged=h.opt.resolved and sf.llm_opt.resolved,
                      grad_norm=max(h.opt.grad_norm, sf.llm_opt.grad_norm), loss_human=human_loss(s, data.human),
                      details={"human_btl": h.s, "anchored": base})
