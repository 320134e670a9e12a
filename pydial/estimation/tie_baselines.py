r"""The baselines with ties: ``fit(data, "pooled" | "atc", ties="davidson" | "rao-kupper")``.

Every comparison keeps its three outcomes and follows the tie model of
:mod:`pydial.model.families` (Davidson 1970 or Rao-Kupper 1967) in place of the binary
BTL likelihood of the binary baselines (Sec. Experiments, App. related-comparison):

* ``pooled`` (either engine): one BTL score vector for all LLM judgments pooled (no judge or
  position effects) with one tie parameter ``nu_L`` for the pooled judges, then
  the people's scale ``c`` and ``nu_H`` of the calibration GLM with design
  ``D_H s_pooled``; ``s = c s_pooled``.  The standard errors are the two-step
  sandwich (stacked estimating equations, the cross derivative of the second
  stage in the first-stage scores in closed form, :func:`pooled_cross_derivative`)
  with the meats of :func:`pydial.inference.linearization.outcome_meat`.
* ``atc``: the anchored consensus of DIAL-Anc with ties (``M = mu``,
  :func:`pydial.estimation.tie_fits.tie_staged_fit`) isotonic-regressed on the ordering of
  the people's tie-model scores (:func:`pydial.estimation.atc.atc_scores`); no
  standard errors, as for the binary AtC.

A group without ties has the boundary MLE ``nu = 0`` and follows the binary model
(as in :mod:`pydial.estimation.tie_fits`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pydial.data.comparisons import Comparisons
from pydial.estimation.atc import atc_scores
from pydial.estimation.glm import FamilyGLM, glm, has_tie_parameter
from pydial.estimation.tie_fits import (
    NUMPY_TIE,
    TieOptimizers,
    human_tie_fit,
    judge_tie_tables,
    log_nu_start,
    stack_tie_influence,
    tie_glm_influence,
    tie_staged_fit,
)
from pydial.exceptions import IdentifiabilityError
from pydial.inference.linearization import Linearization, tie_table, two_step_maps
from pydial.model.chart import centering_basis, difference_design
from pydial.model.design import Design, centered_design
from pydial.model.likelihood import TieCells, tie_human_loss, tie_totals

__all__ = ["fit_pooled_ties", "fit_atc_ties", "pooled_cross_derivative"]

POOLED_LABEL = "(pooled LLM judges)"
"""Row of ``tie_parameters`` holding the pooled judges' ``nu_L``."""


def pooled_cross_derivative(ties: str, human: TieCells, N: int, beta: np.ndarray, x2: np.ndarray,
                            weight: float) -> np.ndarray:
    r"""``d psi_2 / d beta``: derivative of the calibration score equations in the pooled scores.

    The cross term of the two-step sandwich (eq. weighted-empirical-sandwich, two-step form).

    ``psi_2`` is the gradient in ``(c, log nu_H)`` of ``weight * l_H(c T beta, nu_H)``; with
    ``g, H`` the gradient and Hessian of that loss in the centered coordinates ``beta' = c beta``,
    ``d psi_c / d beta = g_beta + c H_{beta beta} beta`` and ``d psi_l / d beta = c H_{l beta}``.
    Returns a ``(1 + free) x (N - 1)`` array, ``free`` when the people's cells hold a tie.
    """
    c = float(x2[0])
    model = FamilyGLM(ties, human.counts, centered_design(human.i, human.j, N), weight)
    free = model.free
    _, g, H = model.terms(np.append(c * beta, x2[1:]))
    p = N - 1
    G = np.zeros((1 + int(free), p))
    G[0] = g[:p] + c * H[:p, :p] @ beta
    if free:
        G[1] = c * H[p, :p]
    return G


def fit_pooled_ties(data: Comparisons, common: dict, *, ties: str, engine: TieOptimizers = NUMPY_TIE) -> Any:
    """Fit the pooled baseline with ties (see the module docstring): a DialResult with ``tie_parameters``.

    Two stages as eq. staged-calibrated-estimator with the basis ``M = s_pool``, linearized
    by :func:`pydial.inference.linearization.two_step_maps`.

    ``engine.pooled_stages`` (Stan's: :func:`pydial.stan.engine.stan_pooled_tie_stages`) optimizes
    both stages when given;
    the inference is numpy's at the optimum on either engine.
    """
    from pydial.estimation.results import DialResult
    from pydial.inference.linearization import score_tables, unknown_cov
    from pydial.optim import warn_unresolved

    N = data.N
    n_l, n_h = tie_totals(data)
    L, Hc = TieCells.stack(data, 1.0, 0.0), TieCells.stack(data, 0.0, 1.0)
    free1, free2 = has_tie_parameter(ties, L.counts), has_tie_parameter(ties, Hc.counts)
    w1, w2 = 1.0 / n_l, 1.0 / n_h
    X1 = centered_design(L.i, L.j, N)
    T = centering_basis(N)
    x0 = np.append(np.zeros(N - 1), [log_nu_start(ties, L.counts)] if free1 else [])
    l2 = log_nu_start(ties, Hc.counts)
    if engine.pooled_stages is not None:
        o1, o2 = engine.pooled_stages(data, ties, x0, l2, free1, free2)
    else:
        o1 = glm(ties, L.counts, X1, x0, weight=w1)
    warn_unresolved(o1, "pooled LLM tie model")
    beta = o1.x[: N - 1]
    s_pool = T @ beta
    if np.abs(s_pool).max() < 1e-10:
        raise IdentifiabilityError("the pooled LLM tie-model scores are all equal (the judges' preferences cancel): "
                                   "there is no direction to rescale to the human comparisons")
    X2 = Design(difference_design(Hc.i, Hc.j, N), s_pool[:, None])
    if engine.pooled_stages is None:
        o2 = glm(ties, Hc.counts, X2, np.append(1.0, [l2] if free2 else []), weight=w2)
    warn_unresolved(o2, "pooled calibration tie model")
    c = float(o2.x[0])
    s = c * s_pool
    # two-step linearization (inference.two_step_maps): targets (s, log nu_L, log nu_H), stage 1 (beta, log nu_L),
    # stage 2 (c, log nu_H); the stage-one map is applied with H1^{-1} by tie_glm_influence
    _, _, H2 = FamilyGLM(ties, Hc.counts, X2, w2).terms(o2.x)
    G21 = np.zeros((1 + free2, N - 1 + free1))
    G21[:, : N - 1] = pooled_cross_derivative(ties, Hc, N, beta, o2.x, w2)
    q = N + free1 + free2
    Z1 = np.zeros((q, N - 1 + free1))
    Z1[:N, : N - 1] = c * T
    Z2 = np.zeros((q, 1 + free2))
    Z2[:N, 0] = s_pool
    if free1:
        Z1[N, N - 1] = 1.0
    if free2:
        Z2[N + free1, 1] = 1.0
    total, _ = two_step_maps(Z1, Z2, H2, G21, "(c, nu_H) of the pooled tie model")
    U_L, _ = tie_glm_influence(data, ties, X1, o1.x, w1, total, cells=L)
    U_H, _ = tie_glm_influence(data, ties, X2, o2.x, w2, Z2, cells=Hc)
    free = np.flatnonzero([free1, free2])
    names = [POOLED_LABEL, data.human_judge]
    lin = stack_tie_influence([U_L, U_H]).linearization(
        "the pooled scores", {"scores": slice(0, N), "log_nu": slice(N, N + free.size)},
        tie_labels=tuple(names[int(g)] for g in free))
    level = common["level"]
    scores, cov = score_tables(s, unknown_cov(N), data.items, level)
    lognu = np.array([o1.x[-1] if free1 else -np.inf, o2.x[-1] if free2 else -np.inf])
    tab = tie_table(names, np.arange(2), free, lognu[free], np.full(free.size, np.nan), level, ties)
    res = DialResult(**common, scores=scores, cov=cov, position_effects=None, judge_scores=None, structure=None,
                     calibration_coef=np.array([c * np.linalg.norm(s_pool) / np.sqrt(N)]), lambda_=np.inf,
                     converged=o1.resolved and o2.resolved, grad_norm=max(o1.grad_norm, o2.grad_norm),
                     loss_human=tie_human_loss(ties, s, lognu[1], data),
                     stage_scores=pd.DataFrame({"pooled": s_pool}, index=pd.Index(data.items, name="item")),
                     linearization=(lin,))
    res.tie_parameters = tab
    return res


def fit_atc_ties(data: Comparisons, common: dict, *, ties: str, engine: TieOptimizers = NUMPY_TIE) -> Any:
    """Fit AtC with ties (App. related-comparison; see the module docstring): a DialResult with ``tie_parameters``."""
    from pydial.estimation.results import DialResult
    from pydial.optim import warn_unresolved

    N, level = data.N, common["level"]
    opt, free_h, X = human_tie_fit(data, ties, engine)
    warn_unresolved(opt, "human tie model (AtC ordering)")
    sf = tie_staged_fit(data, ties, common["rank"], "mu", order=True, engine=engine)
    warn_unresolved(sf.llm_opt, "structured LLM-only tie fit")
    base = sf.chart.scores(sf.x[: sf.chart.dim])
    s_h = centering_basis(N) @ opt.x[: N - 1]
    s, scores, cov = atc_scores(base, s_h, data.items)
    pos, pos_cov, tj, consensus, lin_j = judge_tie_tables(data, ties, sf, level)
    lins: tuple[Linearization, ...] = (lin_j,)
    # the people's nu_H from their own tie model (the ordering)
    lh = float(opt.x[N - 1]) if free_h else -np.inf
    if free_h:
        E = np.zeros((1, N))
        E[0, -1] = 1.0
        U, _ = tie_glm_influence(data, ties, X, opt.x, 1.0 / tie_totals(data)[1], E)
        lins += (U.linearization("the people's tie parameter", {"log_nu": slice(0, 1)},
                                    tie_labels=(data.human_judge,)),)
    th = tie_table([data.human_judge], np.array([0]), np.array([0]) if free_h else np.zeros(0, np.int64),
                   np.array([lh]), np.array([np.nan]), level, ties)
    tab = pd.concat([tj, th])
    tab.attrs["model"] = ties
    structure = sf.llm_chart.structure(sf.llm_x[: sf.llm_chart.dim])
    res = DialResult(**{**common, "calibration": "mu"}, scores=scores, cov=cov, position_effects=pos,
                     position_effects_cov=pos_cov, judge_scores=None, structure=structure, calibration_coef=None, lambda_=np.inf,
                     converged=opt.resolved and sf.llm_opt.resolved, grad_norm=max(opt.grad_norm, sf.llm_opt.grad_norm),
                     loss_human=tie_human_loss(ties, s, lh, data),
                     stage_scores=pd.DataFrame({"anchored": base, "human": s_h}, index=pd.Index(data.items, name="item")),
                     linearization=lins)
    if consensus is not None:
        res.consensus = consensus
    res.tie_parameters = tab
    return res
