r"""The binary family's fast path: the staged fit, the LLM-only fit and the DIAL steps over the LLM cells.

The binary family (decisive comparisons, ``ties=None``) is one case of the steps of every
family (:class:`~pydial.estimation.steps.FamilySteps`); at leaderboard size the passes over
millions of LLM cells dominate, and here they use the logistic kernel's cell residuals
``n p - y`` (:class:`~pydial.inference.meats.CellStats`), the LLM-only fit cached on the data and
shared by DIAL-Anc, DIAL-Ada and AtC (:func:`llm_only_fit`), the weight path's warm-start
derivatives and Newton's polishing step (:func:`~pydial.estimation.glm.fit_structured`).
:func:`family_steps` picks the steps of a family.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from pydial.cache import derived
from pydial.data.comparisons import Comparisons
from pydial.estimation.engines import Engine, PointEngine, StagedFit, StructuredFit
from pydial.estimation.glm import fit_calibration, fit_structured, initial_theta
from pydial.estimation.selection import Candidate, finite_candidate
from pydial.estimation.steps import FamilySteps, human_effect_row
from pydial.inference.linearization import (
    Linearization,
    finite_influence,
    linearize,
    llm_only_linearization,
    staged_linearization,
    target_slices,
)
from pydial.model.chart import Calibration, Chart

__all__ = ["BinarySteps", "family_steps", "llm_only_fit", "staged_fit"]


def staged_fit(data: Comparisons, rank: int, calibration: str, *, order: bool = True,
               penalty: str | None = None, shared: bool = False) -> StagedFit:
    """Alg. DIAL-Anc: structured LLM-only fit, then ``argmin_c l_H(M c)``.

    With ``penalty="firth"``, the calibration GLM is Firth's estimate.  With covariates the
    calibration GLM fits ``(c, beta_H)`` (``l_H(M c, beta_H)``); ``shared``: one covariate
    effect for all LLM judges (:class:`~pydial.model.chart.Chart`).
    """
    chL, fL = llm_only_fit(data, rank, order, shared)
    st = chL.structure(fL.theta)
    M = st.basis(calibration)
    # the people's design [D_H M, Z_H] has the covariates with an effect on them (Comparisons.effect_columns)
    human = data.human if not data.p else dataclasses.replace(data.human, z=data.effect_columns(data.human.z, data.K))
    oc = fit_calibration(human, M, penalty=penalty)
    ch = Chart.for_data(data, rank, cast(Calibration, calibration), order, shared)
    b = chL.order_effects(fL.theta) if order else None
    d = M.shape[1]
    beta = np.vstack([chL.covariate_effects(fL.theta), human_effect_row(data, oc.x[d:])]) if data.p else None
    theta = ch.from_structure(st, oc.x[:d], b, beta)
    theta[ch.llm_coordinates] = fL.theta  # the same point up to rounding; exactly the first stage's coordinates
    return StagedFit(ch, theta, fL.opt, oc, chL, fL.theta)


def llm_only_fit(data: Comparisons, rank: int, order: bool = True, shared: bool = False) -> tuple[Chart, StructuredFit]:
    """Return the structured LLM-only fit (eq. staged-calibrated-estimator, first stage).

    It is computed once per ``(rank, order, shared)`` and cached on ``data``: DIAL-Anc,
    DIAL-Ada (its anchored endpoint and warm start) and AtC share it.
    """
    def build() -> tuple[Chart, Any]:
        chL = Chart.for_data(data, rank, None, order, shared)
        fL = fit_structured(data, chL, np.inf, initial_theta(data, chL))
        return chL, dataclasses.replace(fL, objective=None)  # keep the fit, not its objective (per-cell index arrays)

    return derived(data, ("llm_only_fit", int(rank), bool(order), bool(shared and data.p)), build)



@dataclass(frozen=True)
class BinarySteps(FamilySteps):
    """The binary family's fast path through the steps of :func:`pydial.estimation.dial.fit_dial` (ties left out).

    The steps that pass over the LLM cells use the logistic kernel's cell residuals
    ``n p - y`` (:class:`~pydial.inference.meats.CellStats`), the LLM-only fit cached on the data
    and shared with AtC, the weight path's warm-start derivatives and the polishing step;
    the people's endpoints are the general steps of :class:`FamilySteps` with ``ties=None``,
    which give the same estimates (a test checks every step).  ``point`` supplies the binary
    optimizers; with ``penalty="firth"`` the human BTL, the calibration GLM and the human
    block of every weighted fit are Firth's (:mod:`pydial.model.penalty`).
    """

    ties: None = None
    point: PointEngine = field(kw_only=True)

    def staged(self, rank: int) -> StagedFit:
        """Fit the staged endpoint with ``point`` (:func:`staged_fit` for numpy)."""
        return self.point.staged(self.data, rank, self.calibration, order=self.order, shared=self.shared)

    def finite(self, chart: Chart, lam: float, x0: np.ndarray, multiple: float, warm: Candidate | None = None) -> Candidate:
        """Fit the weighted loss to the optimizer's tolerance (:func:`~pydial.estimation.selection.finite_candidate`)."""
        return finite_candidate(self.data, chart, lam, x0, multiple, self.point.joint, penalty=self.penalty, warm=warm,
                                polish=False)

    def polish(self, chart: Chart, cand: Candidate) -> Candidate:
        """Continue the selected weight's fit from its optimum with the polishing step (numpy; Stan's fit as it is)."""
        if self.point.name != "numpy" or cand.theta is None:
            return cand
        out = finite_candidate(self.data, chart, cand.lam, cand.theta, cand.multiple, self.point.joint,
                               penalty=self.penalty, warm=cand)
        return out if out.admissible else cand

    def scores_linearization(self, sf: StagedFit, best: Candidate) -> tuple[Linearization, float]:
        """Linearize the selected scores: the two-step form at ``lambda = inf``, the sandwich at a finite weight (fast path)."""
        if best.lam == 0:
            return super().scores_linearization(sf, best)
        if np.isinf(best.lam):
            return staged_linearization(self.data, sf), -np.inf
        # the bread is the unpenalized Hessian (pydial.model.penalty): the candidate's H^+ only without a penalty
        assert best.theta is not None and best.s is not None  # a selected finite weight is admissible
        U, stt = finite_influence(self.data, sf.chart, best.lam, best.theta, best.hess_pinv if self.penalty is None else None)
        return linearize(U, stt, "the calibrated scores", **target_slices(self.data.N, U.A.shape[0])), -np.inf

    def judge_effects(self, sf: StagedFit) -> tuple[np.ndarray | None, np.ndarray | None, pd.Series | None,
                                                     tuple[Linearization, ...]]:
        """Return the position effects and consensus loadings of the LLM-only fit with their linearizations (fast path)."""
        if not self.order:
            return None, None, None, ()
        ch, th = sf.llm_chart, sf.llm_theta
        lins = llm_only_linearization(self.data, ch, th, hess=sf.llm_opt.hess_at(th))
        return ch.order_effects(th), ch.structure(th).gamma, None, lins


def family_steps(data: Comparisons, calibration: str, order: bool, ties: str | None, engine: Engine,
                 penalty: str | None = None, shared: bool = False) -> FamilySteps:
    """Return the steps of Alg. DIAL-Anc / DIAL-Ada in the family ``ties`` run by ``engine`` (binary: the fast path).

    ``shared``: one covariate effect for all LLM judges (``covariate_effects="shared"``).
    """
    if ties is None:
        return BinarySteps(data, calibration, order, engine=engine.family, penalty=penalty, point=engine.point,
                           shared=shared)
    return FamilySteps(data, calibration, order, ties, engine.family, penalty, what="the lambda path of the tie model",
                       shared=shared)
