r"""The baselines ``pooled`` and ``atc`` (Sec. Experiments, App. related-comparison) for every outcome family.

``pooled``: one BTL ``s_pool`` of all LLM judgments pooled, rescaled by the people's calibration GLM with design
``[D_H s_pool, Z_H]``.  ``atc``: DIAL-Anc's consensus isotonic-regressed on the order of the people's scores.
Inference is numpy's at the optimum on either engine.
"""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np

from pydial.data.comparisons import Comparisons
from pydial.estimation.engines import Optimizers
from pydial.estimation.fitstats import FitStats, cell_log_likelihood
from pydial.estimation.glm import glm
from pydial.estimation.results import Estimate, tie_log_nu
from pydial.estimation.selection import Candidate
from pydial.estimation.steps import Steps, beta_labels, family_human_fit, human_loss_at, human_only_lrt, human_parameters
from pydial.exceptions import IdentifiabilityError
from pydial.inference.pooled import (POOLED_LABEL, degenerate_direction, family_cells, pooled_designs,
                                     pooled_linearization, pooled_support)
from pydial.inference.sandwich import glm_influence
from pydial.model.cells import family_totals, tie_human_loss
from pydial.model.chart import centering_basis
from pydial.model.design import Design
from pydial.model.families import BINARY, Family
from pydial.model.glm import FamilyGLM, has_tie_parameter
from pydial.optim import OptimResult, warn_unresolved

__all__ = ["fit_pooled", "fit_atc", "human_only_lrt", "numpy_pooled", "atc_scores"]


def numpy_pooled(data: Comparisons, family: Family = BINARY, *,
                 penalty: str | None = None) -> tuple[OptimResult, OptimResult]:
    """Fit both stages of the pooled baseline by :func:`~pydial.estimation.glm.glm` (Firth's with ``penalty``)."""
    N = data.N
    L, Hc = family_cells(data, family)
    o1 = glm(family, L.counts, pooled_designs(data, L, Hc)[0], weight=float(L.w[0]), penalty=penalty)
    s_pool = centering_basis(N) @ o1.x[: N - 1]
    if degenerate_direction(s_pool):  # no direction to calibrate: reported by the caller
        return o1, o1
    X2 = cast(Design, pooled_designs(data, L, Hc, s_pool)[1])
    return o1, glm(family, Hc.counts, X2, weight=float(Hc.w[0]), penalty=penalty)


def fit_pooled(data: Comparisons, rank: int | None = None, *, family: Family, engine: Optimizers,
               shared: bool = True) -> Estimate:
    """Fit the pooled baseline of ``family`` by ``engine``'s optimizers; ``rank`` and ``shared`` are unused.

    ``s_H = c s_pool`` is tested against the people's own model (:func:`~pydial.estimation.steps.human_only_lrt`, ``N - 2`` df).
    """
    N, p = data.N, data.p
    what = "pooled LLM " + ("BTL" if family.is_binary else "tie model")
    if engine.pooled_stages is not None:
        L, Hc = family_cells(data, family)
        m1 = FamilyGLM(family, L.counts, pooled_designs(data, L, Hc)[0])
        free2 = has_tie_parameter(family, Hc.counts)
        o1, o2 = engine.pooled_stages(data, family, m1.start(), family.log_nu_start(Hc.counts) if free2 else 0.0,
                                             m1.free, free2, penalty=engine.penalty)
    else:
        o1, o2 = numpy_pooled(data, family, penalty=engine.penalty)
    warn_unresolved(o1, what)
    s_pool = centering_basis(N) @ o1.x[: N - 1]
    if degenerate_direction(s_pool):
        raise IdentifiabilityError(f"the {what} scores are all equal (the judges' preferences cancel): "
                                   "there is no direction to rescale to the human comparisons")
    warn_unresolved(o2, "pooled calibration" + ("" if family.is_binary else " tie model"))
    c = float(o2.x[0])
    s = c * s_pool
    # o1.x = (beta, free beta_L, [log nu_L]), o2.x = (c, free beta_H, [log nu_H])
    sup_l, sup_h = pooled_support(data)
    p1, p2 = int(sup_l.sum()), int(sup_h.sum())
    lognu = np.array([o1.x[N - 1 + p1] if o1.x.size > N - 1 + p1 else -np.inf,
                      o2.x[1 + p2] if o2.x.size > 1 + p2 else -np.inf])
    beta = None
    if p:
        beta = np.zeros((2, p))
        beta[0, sup_l], beta[1, sup_h] = o1.x[N - 1: N - 1 + p1], o2.x[1: 1 + p2]
    loss = tie_human_loss(family, s, lognu[1], data, None if beta is None else beta[1])
    t = data.cell_table("llm", with_ties=not family.is_binary)
    eta = s_pool[t.i] - s_pool[t.j] + (t.z @ beta[0] if beta is not None and t.z is not None else 0.0)
    l_h = -family_totals(data, family)[1] * loss
    stats = FitStats(cell_log_likelihood(family, t, eta, lognu[0]) + l_h, int(o1.x.size + o2.x.size), l_h)
    return Estimate(s=s, calibration_coef=np.array([c * np.linalg.norm(s_pool) / np.sqrt(N)]), lambda_=np.inf,
                    converged=o1.resolved and o2.resolved, grad_norm=max(o1.grad_norm, o2.grad_norm),
                    loss_human=loss, stage_scores={"pooled": s_pool},
                    linearization=(pooled_linearization(data, family, o1, o2),),
                    log_nu=None if family.is_binary else tie_log_nu([POOLED_LABEL, data.human_judge], lognu),
                    beta=beta, beta_labels=(POOLED_LABEL, data.human_judge) if p else (), stats=stats,
                    calibration_test=human_only_lrt(data, family, loss, 1))


def atc_scores(base: np.ndarray, human: np.ndarray) -> np.ndarray:
    """AtC's scores: ``base`` isotonic-regressed on the order of the people's scores ``human``, centered (no linearization)."""
    from scipy.optimize import isotonic_regression

    order = np.argsort(-human, kind="stable")
    s = np.empty(base.size)
    s[order] = isotonic_regression(base[order], increasing=False).x
    s -= s.mean()
    return s


def fit_atc(data: Comparisons, rank: int, *, family: Family, engine: Optimizers, shared: bool = False) -> Estimate:
    """Fit AtC of ``family`` (App. related-comparison): the people's ordering, DIAL-Anc's consensus (``M = mu``).

    ``b``, ``gamma``, the judges' ``nu`` and the covariate effects are the staged fit's; the test is DIAL-Anc's
    (``N - 2`` df).  Not a likelihood fit: only the people's log-likelihood at the scores.
    """
    penalty = engine.penalty
    steps = Steps(data, "mu", True, family, engine, penalty, shared=shared)
    opt, free_h, X = family_human_fit(data, family, engine, penalty)
    s_h, _, lh = human_parameters(data, opt.x, free_h)
    warn_unresolved(opt, ("human BTL" if family.is_binary else "human tie model") + " (AtC ordering)")
    sf = steps.staged(rank)
    warn_unresolved(sf.llm_opt, "structured LLM-only fit")
    base = sf.chart.scores(sf.theta)
    b, gamma, log_nu, lins = steps.judge_effects(sf, lh)
    if free_h:  # the people's nu_H from their own tie model (the ordering)
        E = np.eye(1, X.shape[1] + 1, X.shape[1])  # selects log nu_H
        U, _ = glm_influence(data, family, X, opt.x, 1.0 / family_totals(data, family)[1], E)
        lins += (U.linearization("the people's tie parameter", {"log_nu": slice(0, 1)}, tie_labels=(data.human_judge,)),)
    beta = sf.chart.covariate_effects(sf.theta) if data.p else None
    if beta is not None:  # the staged fit's two-step linearization cut to its block "beta"
        lin, _ = steps.scores_linearization(sf, Candidate(np.inf, np.inf, None))
        rows = lin.blocks["beta"]
        lins += (dataclasses.replace(lin, A=lin.A[rows], blocks={"beta": slice(0, rows.stop - rows.start)},
                                     what="the covariate effects of the anchored fit"),)
    s = atc_scores(base, s_h)
    loss = tie_human_loss(family, s, lh, data, None if beta is None else beta[-1])
    return Estimate(s=s, rank=rank, calibration="mu", b=b, gamma=gamma, log_nu=log_nu,
                    structure=sf.llm_chart.structure(sf.llm_theta), lambda_=np.inf,
                    converged=opt.resolved and sf.llm_opt.resolved, grad_norm=max(opt.grad_norm, sf.llm_opt.grad_norm),
                    loss_human=loss, stats=FitStats(np.nan, None, -family_totals(data, family)[1] * loss),
                    calibration_test=human_only_lrt(data, family, human_loss_at(data, family, sf.chart, sf.x, sf.free), 1),
                    stage_scores={"anchored": base, "human": s_h}, linearization=lins,
                    beta=beta, beta_labels=beta_labels(data, sf.chart) if beta is not None else ())
