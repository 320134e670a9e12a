r"""The steps of DIAL-Anc, -Ada and -noPos for every outcome family (:func:`pydial.estimation.dial.fit_dial`).

Coordinates ``x = (theta, log nu)``: a tie parameter per judge and ``nu_H`` for the people (none for the binary
family; a group without ties has ``nu = 0``).  The optimizers are the engine's
(:class:`~pydial.estimation.engines.Optimizers`); every covariance, GACV and test is numpy's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pydial.cache import derived
from pydial.data.comparisons import Comparisons
from pydial.estimation.engines import Optimizers, StagedFit
from pydial.estimation.glm import (NUMPY, human_calibration_design, human_design, human_effect_row, human_effects,
                                   numpy_optimizers, staged_fit)
from pydial.estimation.results import tie_log_nu
from pydial.estimation.selection import SCORE_LIMIT, Candidate, finite_candidate
from pydial.inference.calibration_test import CalibrationTest, calibration_lrt
from pydial.inference.linearization import Linearization, target_slices
from pydial.inference.sandwich import (Influence, finite_influence, gacv_trace, glm_influence, judge_effect_linearizations,
                                       staged_influence)
from pydial.model.chart import Chart, centering_basis
from pydial.model.design import Design
from pydial.model.families import BINARY, Family
from pydial.model.identifiability import check_human_mle, undirected_labels
from pydial.model.cells import family_totals, human_counts, human_log_nu, human_loss_at, tie_human_loss
from pydial.optim import OptimResult

__all__ = ["NUMPY", "Steps", "numpy_optimizers"]


def family_human_fit(data: Comparisons, family: Family, engine: Optimizers = NUMPY,
                     penalty: str | None = None) -> tuple[OptimResult, bool, Design]:
    """Fit the people's model (eq. human-only-estimator) by ``engine``, cached: ``(optimum, log nu_H free, design)``."""
    hc = human_counts(data, family)
    X = human_design(data, family)
    free = bool(hc[:, 2].sum() > 0)
    x0 = np.append(np.zeros(X.shape[1]), family.log_nu_start(hc)) if free else np.zeros(X.shape[1])
    return derived(data, ("family_human_fit", family.name, engine.name, penalty),
                   lambda: engine.human(data, family, x0, penalty=penalty)), free, X


def human_parameters(data: Comparisons, x: np.ndarray, free: bool) -> tuple[np.ndarray, np.ndarray | None, float]:
    """Split the people's ``x = (beta_s, free beta_H, log nu_H)`` into ``(s, beta_H row or None, log nu_H or -inf)``."""
    N, p = data.N, data.p
    p_h = human_effects(data).size
    return (centering_basis(N) @ x[: N - 1], human_effect_row(data, x[N - 1 : N - 1 + p_h]) if p else None,
            float(x[N - 1 + p_h]) if free else -np.inf)


def family_human_influence(data: Comparisons, family: Family, engine: Optimizers = NUMPY,
                           penalty: str | None = None) -> tuple[OptimResult, Influence, float]:
    """Return the people's model's optimum, the influence of ``(s, log nu_H if free, beta_H)`` and ``log nu_H``."""
    N = data.N
    p = human_effects(data).size
    opt, free, X = family_human_fit(data, family, engine, penalty)
    E = np.zeros((N + free + p, X.shape[1] + free))
    E[:N, : N - 1] = centering_basis(N)
    E[N : N + free, -1] = 1.0
    E[N + free:, N - 1 : N - 1 + p] = np.eye(p)
    U, _ = glm_influence(data, family, X, opt.x, 1.0 / family_totals(data, family)[1], E)
    return opt, U, human_parameters(data, opt.x, free)[2]


def family_human_candidate(data: Comparisons, family: Family, engine: Optimizers = NUMPY,
                           penalty: str | None = None) -> Candidate:
    """Return the ``lambda = 0`` GACV candidate (eq. gacv) of ``family``.

    The binary MLE needs a strongly connected win graph (Ford 1957), Firth's a connected comparison graph.
    """
    what = "human BTL" if family.is_binary else "human tie model"
    if family.is_binary and penalty is None:
        exists, detail = check_human_mle(data.items, data)
        if not exists:
            return Candidate(0.0, 0.0, None, reason=f"human MLE does not exist: {detail}")
    elif family.is_binary and undirected_labels(data.N, data.human.i, data.human.j)[0] != 1:
        return Candidate(0.0, 0.0, None, reason="human comparison graph not connected: no Firth estimate")
    opt, free, X = family_human_fit(data, family, engine, penalty)
    s, beta_h, lh = human_parameters(data, opt.x, free)
    cand = Candidate(0.0, 0.0, s, opt.x, opt, loss_human=tie_human_loss(family, s, lh, data, beta_h))
    if not opt.resolved:
        cand.reason = f"{what} not resolved within the box" if opt.converged else f"not converged ({opt.message})"
    elif np.abs(s).max() > SCORE_LIMIT:
        cand.reason = f"||s||_inf = {np.abs(s).max():.3g} > {SCORE_LIMIT:g}"
    else:
        cand.admissible, cand.trace = True, _glm_trace(data, family, X, opt.x, bool(free), penalty)
    return cand


def human_only_lrt(data: Comparisons, family: Family, loss_restricted: float, d: int,
                   hum: Candidate | None = None) -> CalibrationTest:
    """Return the likelihood-ratio test of a ``d``-dimensional calibration restriction against the people's own model.

    Prop. calibration-test: ``T = 2 n_H (l_H(restricted) - l_H(s_0))`` on ``N - 1 - d`` df, ``s_0`` the people's MLE
    (the candidate ``hum``, default the unpenalized numpy fit's).
    """
    hum = family_human_candidate(data, family) if hum is None else hum
    ok = hum.opt is not None and hum.opt.resolved
    return calibration_lrt(loss_restricted, hum.loss_human if ok else None, family_totals(data, family)[1],
                           data.N - 1 - d, hum.reason or "the human-only MLE is not resolved")


def _glm_trace(data: Comparisons, family: Family, X: Design, x: np.ndarray, free: bool, penalty: str | None) -> float:
    """Return GACV's trace term of a GLM of the people's cells (design ``X``, ``x = (beta, log nu_H)``; eq. gacv)."""
    n_h = family_totals(data, family)[1]
    U, H = glm_influence(data, family, X, x, 1.0 / n_h, np.zeros((1, X.shape[1] + free)), unit=True, penalty=penalty)
    return gacv_trace(H, U.source.J, U.source.stats, sp.block_diag([X.basis_csr, sp.identity(int(free))], format="csr"), n_h)


def family_anchored_candidate(data: Comparisons, sf: StagedFit, family: Family, penalty: str | None = None) -> Candidate:
    """Return the ``lambda = inf`` GACV candidate of the staged fit ``sf``: ``(c, beta_H, log nu_H)`` with ``M`` fixed."""
    ch, x = sf.chart, sf.x
    s = ch.scores(x[: ch.dim])
    cand = Candidate(np.inf, np.inf, s, loss_human=human_loss_at(data, family, ch, x, sf.free), opt=sf.cal_opt)
    if not sf.llm_opt.converged:
        cand.reason = f"LLM-only fit not converged ({sf.llm_opt.message})"
    elif not sf.cal_opt.resolved:
        cand.reason = ("calibration not resolved within the box" if sf.cal_opt.converged
                       else f"not converged ({sf.cal_opt.message})")
    else:
        X = human_calibration_design(data, family, sf.llm_chart.structure(sf.llm_theta).basis(ch.calibration))
        cand.admissible, cand.trace = True, _glm_trace(data, family, X, sf.cal_opt.x, ch.K in sf.free, penalty)
    return cand


SHARED_JUDGES = "LLM judges (shared)"
"""The row label of the covariate effect shared by every LLM judge (``covariate_effects="shared"``)."""


def beta_labels(data: Comparisons, ch: Chart) -> tuple[str, ...]:
    """Names of the rows of ``ch``'s covariate effects: the judges (or :data:`SHARED_JUDGES`), then the people."""
    llm = (SHARED_JUDGES,) if ch.shared else tuple(data.judges)
    return llm + ((data.human_judge,) if ch.calibration is not None else ())


@dataclass(frozen=True)
class Steps:
    """The steps of :func:`pydial.estimation.dial.fit_dial` for an outcome family, by ``engine``, penalized by ``penalty``.

    ``shared``: one covariate effect for all LLM judges.  The binary family's optimizer specializations (the
    engine's ``staged`` and ``path``, the polish) give the same estimates as its general steps (``fast=False``).
    """

    data: Comparisons
    calibration: str
    order: bool
    family: Family = BINARY
    engine: Optimizers = field(default_factory=lambda: NUMPY)
    penalty: str | None = None
    shared: bool = field(default=False, kw_only=True)
    fast: bool = field(default=True, kw_only=True)
    """Take the binary family's optimizer specializations (``False``: its general steps, which a test compares)."""

    @property
    def _engine(self) -> Optimizers:
        """The engine, without its binary specializations ``staged`` and ``path`` unless :attr:`fast`."""
        return self.engine if self.fast else replace(self.engine, staged=None, path=None)

    @property
    def what(self) -> str:
        """The path's name in messages."""
        return "the lambda path" if self.family.is_binary else "the lambda path of the tie model"

    def staged(self, rank: int) -> StagedFit:
        """Fit the staged endpoint of ``rank`` (Alg. DIAL-Anc; :func:`~pydial.estimation.glm.staged_fit`)."""
        return staged_fit(self.data, rank, self.calibration, family=self.family, order=self.order, engine=self._engine,
                          penalty=self.penalty, shared=self.shared)

    def finite(self, chart: Chart, lambda_: float, x0: np.ndarray, multiple: float, warm: Candidate | None = None) -> Candidate:
        """Fit the candidate of ``lambda_`` from ``x0`` to the optimizer's tolerance, warm-started by ``warm``."""
        return finite_candidate(self.data, chart, lambda_, x0, multiple, self.family, self._engine, penalty=self.penalty,
                                warm=warm, polish=False)

    def polish(self, chart: Chart, cand: Candidate) -> Candidate:
        """Return the selected finite candidate with its optimum polished (the binary family's numpy fit; others as is)."""
        if not (self.fast and self.family.is_binary) or self.engine.name != "numpy" or cand.theta is None:
            return cand
        out = finite_candidate(self.data, chart, cand.lambda_, cand.theta, cand.multiple, self.family, self.engine,
                               penalty=self.penalty, warm=cand)
        return out if out.admissible else cand

    def scores_linearization(self, sf: StagedFit, best: Candidate) -> tuple[Linearization, float]:
        """Return the linearization of the selected scores (and of ``log nu_H`` when free), and ``log nu_H``."""
        data, family, ch = self.data, self.family, sf.chart
        if best.lambda_ == 0:
            _, U, lh = family_human_influence(data, family, self.engine, self.penalty)
            stage_one = None
        elif np.isinf(best.lambda_):
            U, n_one = staged_influence(data, sf, family)
            lh, stage_one = human_log_nu(ch, sf.free, sf.x), slice(0, n_one)
        else:
            assert best.theta is not None  # a selected finite weight is admissible
            # the bread is the unpenalized Hessian (pydial.model.penalty): the candidate's H^+ only without a penalty
            U = finite_influence(data, ch, best.lambda_, best.theta, family, best.hess_pinv if self.penalty is None else None)
            lh, stage_one = human_log_nu(ch, sf.free, best.theta), None
        blocks = target_slices(data.N, U.A.shape[0], bool(np.isfinite(lh)))
        lin = U.linearization("the calibrated scores", blocks, stage_one=stage_one,
                              tie_labels=(data.human_judge,) if "log_nu" in blocks else ())
        return lin, lh

    def judge_effects(self, sf: StagedFit, lh: float) -> tuple[np.ndarray | None, np.ndarray | None, pd.Series | None,
                                                                tuple[Linearization, ...]]:
        """Return ``b``, ``gamma``, the ``log nu`` of the LLM-only fit's judges and the people's ``lh``, and the linearizations.

        Bread ``H(l_L)^+`` (Prop. stage-one-normality; :func:`~pydial.inference.sandwich.judge_effect_linearizations`).
        """
        data, chL, th = self.data, sf.llm_chart, sf.llm_theta
        b, gamma = (chL.order_effects(th), chL.structure(th).gamma) if chL.order else (None, None)
        log_nu = None if self.family.is_binary else pd.concat([tie_log_nu(list(data.judges), sf.llm_x[chL.dim:], sf.llm_free),
                                                               tie_log_nu([data.human_judge], np.array([lh]))])
        return b, gamma, log_nu, judge_effect_linearizations(data, sf, self.family)

    def selected(self, sf: StagedFit, best: Candidate, hum: Candidate) -> dict[str, Any]:
        """Return the :class:`~pydial.estimation.results.Estimate` fields of ``best``: estimates, linearizations, LRT.

        The calibration LRT has ``nu_H`` free under both, and with a penalty the people's unpenalized fit.
        """
        data, family, ch = self.data, self.family, sf.chart
        lin, lh = self.scores_linearization(sf, best)
        s = best.s if np.isfinite(best.lambda_) else ch.scores(sf.theta)
        assert s is not None  # a selected candidate has its scores
        b, gamma, log_nu, lins_j = self.judge_effects(sf, lh)
        beta, labels = self.covariate_effects(sf, best)
        loss = tie_human_loss(family, s, lh, data, None if beta is None else beta[-1])
        ct = human_only_lrt(data, family, human_loss_at(data, family, ch, sf.x, sf.free), ch.d,
                            hum if self.penalty is None else None)
        return {"s": s, "loss_human": loss, "linearization": (lin, *lins_j), "b": b, "gamma": gamma, "log_nu": log_nu,
                "calibration_test": ct, "beta": beta, "beta_labels": labels}

    def covariate_effects(self, sf: StagedFit, best: Candidate) -> tuple[np.ndarray | None, tuple[str, ...]]:
        """Return the covariate effects of the selected fit and their row labels (``None`` without covariates)."""
        data = self.data
        if not data.p:
            return None, ()
        if best.lambda_ == 0:
            assert best.theta is not None  # the people's model has its fit
            beta_h = human_parameters(data, best.theta, False)[1]
            assert beta_h is not None  # the data have covariates
            return beta_h[None, :], (data.human_judge,)
        x = best.theta if np.isfinite(best.lambda_) else sf.x
        assert x is not None  # a selected finite weight is admissible, so it has its fit
        ch = sf.chart
        return ch.covariate_effects(x[: ch.dim]), beta_labels(data, ch)
