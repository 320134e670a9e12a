r"""The steps of DIAL-Anc, -Ada and -noPos for every outcome family (:func:`pydial.estimation.dial.fit_dial`).

The outcome family is a parameter of the cell likelihood (:mod:`pydial.model.families`):
the binary model (``ties=None``, decisive comparisons), or every comparison with its three
outcomes (``i`` wins, ``j`` wins, tie) under the Davidson-Beaver or the Rao-Kupper model,
with a tie parameter ``nu_k`` per LLM judge and ``nu_H`` for the people (Stan ``ties``
0 / 1 / 2 of ``stan/dial.stan``).  The linear predictor is that of the structured model
(eq. binomial-model-llm / binomial-model-human); the coordinates are ``x = (theta, log nu)``:

* LLM-only structured fit (eq. staged-calibrated-estimator, first stage) of
  :class:`~pydial.model.likelihood.Objective` in ``(theta, log nu_1..K)``;
* DIAL-Anc: the calibration GLM ``argmin_{c, nu_H} l_H(M c, nu_H)`` with ``M``
  fixed (second stage);
* DIAL-Ada / DIAL-noPos: the weighted fits :math:`Q_\lambda = \ell_H + \lambda \ell_L`
  (eq. weighted-loss, ``n_H`` and ``n_L`` counting the ties of a tie family) on the lambda
  path, warm-started at the staged fit, with the guards of App. lambda-selection and
  GACV (eq. gacv) whose trace term uses the per-comparison human scores in
  ``(eta, log nu_H)``; the endpoints are the people's model (``lambda = 0``)
  and DIAL-Anc (``lambda = inf``);
* sandwich covariances (eq. weighted-empirical-sandwich, the two-step form at
  ``lambda = inf``) with the meats of :func:`pydial.inference.linearization.parameter_meat`;
* the calibration LRT (Prop. calibration-test) on the family's likelihood, ``nu_H``
  free under both hypotheses.

A group (judge or the people) without any tie has the boundary MLE ``nu = 0``
(the log-likelihood decreases in ``nu`` when no tie is observed, for both
models); its tie parameter is fixed there and its cells follow the binary
model exactly (:func:`pydial.model.cells.tie_groups`); the binary family is the
case of no free group.  Judges' tie parameters and position effects are reported from
the LLM-only fit (Prop. stage-one-normality); the people's ``nu_H`` from the selected fit.

The optimizers are those of :class:`Optimizers`: numpy's Newton method by
default, Stan's (``dial.stan``, ``judges.stan`` for the people) with ``engine="stan"``;
every covariance, GACV and test is computed by numpy at the optimum.  The binary family's
specialization (:class:`Steps`, the engine's ``staged`` and ``path``) replaces the steps that pass
over the LLM cells and gives the same estimates.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pydial.cache import derived
from pydial.data.comparisons import Comparisons
from pydial.estimation.engines import Optimizers, StagedFit
from pydial.estimation.glm import (
    NUMPY,
    human_calibration_design,
    human_design,
    human_effect_row,
    human_effects,
    human_table,
    numpy_optimizers,
    staged_fit,
)
from pydial.estimation.results import tie_log_nu
from pydial.estimation.selection import SCORE_LIMIT, Candidate, finite_candidate
from pydial.inference.calibration_test import CalibrationTest, calibration_lrt
from pydial.inference.linearization import (
    Linearization,
    finite_influence,
    linearize,
    llm_only_linearization,
    staged_linearization,
    target_slices,
)
from pydial.inference.sandwich import (
    OutcomeInfluence,
    family_finite_influence,
    family_glm_influence,
    family_staged_influence,
    objective_outcome_influence,
    gacv_trace,
)
from pydial.model.chart import Chart, centering_basis, consensus_gamma
from pydial.model.design import Design
from pydial.model.families import BINARY, Family
from pydial.model.likelihood import Objective
from pydial.model.cells import family_totals, human_log_nu, human_loss_at, tie_human_loss
from pydial.optim import OptimResult, pinv_sym

__all__ = ["NUMPY", "Steps", "numpy_optimizers"]


def _human_free(data: Comparisons, family: Family) -> bool:
    return bool(human_table(data, family).counts[:, 2].sum() > 0)


# ================================================================ inference


def family_human_fit(data: Comparisons, family: Family, engine: Optimizers = NUMPY,
                     penalty: str | None = None) -> tuple[OptimResult, bool, Design]:
    """Fit the ``lambda = 0`` endpoint: the people's model of the family in the centered chart ``s = T beta``.

    Eq. human-only-estimator on the family's cells, by ``engine``; with ``penalty="firth"`` the
    Firth estimate (:class:`~pydial.model.penalty.FirthPenalty`).
    """
    hc = human_table(data, family).counts.astype(float)
    X = human_design(data, family)
    free = _human_free(data, family)
    x0 = np.append(np.zeros(X.shape[1]), family.log_nu_start(hc)) if free else np.zeros(X.shape[1])
    return derived(data, ("family_human_fit", family.name, engine.name, penalty),
                   lambda: engine.human(data, family, x0, penalty=penalty)), free, X


def human_parameters(data: Comparisons, x: np.ndarray, free: bool) -> tuple[np.ndarray, np.ndarray | None, float]:
    """Split the people's model coordinates ``x = (beta_s, beta_H, log nu_H)`` (eq. human-only-estimator).

    Returns the centered scores ``s = T beta_s``, the covariate effects ``beta_H`` (``None``
    without covariates; the whole row, 0 at the covariates without an effect on the people,
    :func:`human_effects`, which ``x`` leaves out) and ``log nu_H`` (``-inf`` when not ``free``:
    people without ties).
    """
    N, p = data.N, data.p
    p_h = human_effects(data).size if p else 0
    return (centering_basis(N) @ x[: N - 1], human_effect_row(data, x[N - 1 : N - 1 + p_h]) if p else None,
            float(x[N - 1 + p_h]) if free else -np.inf)


def family_human_influence(data: Comparisons, family: Family, engine: Optimizers = NUMPY,
                           penalty: str | None = None) -> tuple[OptimResult, OutcomeInfluence, float]:
    """Fit the people's model (:func:`family_human_fit`) and return its optimum, the influence of ``(s, log nu_H)``, ``log nu_H``.

    The ``lambda = 0`` endpoint of eq. human-only-estimator with the bread of eq.
    weighted-empirical-sandwich (:func:`family_glm_influence`); ``log nu_H`` is ``-inf`` (and not a
    target) when the people's cells hold no tie.  With covariates the influence covers
    ``(s, log nu_H, beta_H)``, in that order.
    """
    N = data.N
    p = human_effects(data).size if data.p else 0  # the free entries of beta_H
    opt, free, X = family_human_fit(data, family, engine, penalty)
    E = np.zeros((N + free + p, X.shape[1] + free))
    E[:N, : N - 1] = centering_basis(N)
    if free:
        E[N, -1] = 1.0
    E[N + free:, N - 1 : N - 1 + p] = np.eye(p)
    U, _ = family_glm_influence(data, family, X, opt.x, 1.0 / family_totals(data, family)[1], E)
    return opt, U, human_parameters(data, opt.x, free)[2]




# ================================================================ candidates
def family_human_candidate(data: Comparisons, family: Family, engine: Optimizers = NUMPY,
                           penalty: str | None = None) -> tuple[Candidate, float]:
    """Return the ``lambda = 0`` GACV candidate (eq. gacv): the people's model of the family in ``s = T beta``.

    Also returns its ``log nu_H`` (``-inf`` without human ties).  With ``penalty="firth"``
    the people's Firth estimate, and GACV uses the Hessian of the penalized criterion.
    The binary MLE needs a strongly connected directed win graph (Ford 1957), Firth's
    estimate a connected comparison graph: both are checked before fitting.
    """
    from pydial.model.identifiability import check_human_mle, undirected_labels

    what = "human BTL" if family.is_binary else "human tie model"
    if family.is_binary and penalty is None:
        exists, detail = check_human_mle(data.items, data)
        if not exists:
            return Candidate(0.0, 0.0, None, reason=f"human MLE does not exist: {detail}"), -np.inf
    elif family.is_binary and undirected_labels(data.N, data.human.i, data.human.j)[0] != 1:
        return Candidate(0.0, 0.0, None, reason="human comparison graph not connected: no Firth estimate"), -np.inf
    opt, free, X = family_human_fit(data, family, engine, penalty)
    _, n_h = family_totals(data, family)
    s, beta_h, lh = human_parameters(data, opt.x, free)
    cand = Candidate(0.0, 0.0, s, opt.x, opt, loss_human=tie_human_loss(family, s, lh, data, beta_h))
    if not opt.resolved:
        cand.reason = f"{what} not resolved within the box" if opt.converged else f"not converged ({opt.message})"
    elif np.abs(s).max() > SCORE_LIMIT:
        cand.reason = f"||s||_inf = {np.abs(s).max():.3g} > {SCORE_LIMIT:g}"
    else:
        E = np.zeros((1, X.shape[1] + free))
        U, H = family_glm_influence(data, family, X, opt.x, 1.0 / n_h, E, unit=True, penalty=penalty)
        basis = sp.block_diag([sp.csr_matrix(X.basis), sp.identity(int(free))], format="csr")
        cand.admissible = True
        cand.trace = gacv_trace(H, U.J2, U.st, basis, n_h)
    return cand, lh


def family_anchored_candidate(data: Comparisons, sf: StagedFit, family: Family, penalty: str | None = None) -> Candidate:
    """Return the ``lambda = inf`` GACV candidate (eq. gacv, eq. staged-calibrated-estimator) of the family.

    The coordinates are ``(c, beta_H, log nu_H)`` with ``M`` fixed at the LLM-only fit; GACV uses the
    Hessian of the criterion penalized by ``penalty``.
    """
    ch, x = sf.chart, sf.x
    s = ch.scores(x[: ch.dim])
    _, n_h = family_totals(data, family)
    cand = Candidate(np.inf, np.inf, s, loss_human=human_loss_at(data, family, ch, x, sf.free), opt=sf.cal_opt)
    if not sf.llm_opt.converged:
        cand.reason = f"LLM-only fit not converged ({sf.llm_opt.message})"
    elif not sf.cal_opt.resolved:
        cand.reason = ("calibration not resolved within the box" if sf.cal_opt.converged
                       else f"not converged ({sf.cal_opt.message})")
    else:
        st = sf.llm_chart.structure(sf.llm_x[: sf.llm_chart.dim])
        M = st.basis(ch.calibration)
        X = human_calibration_design(data, family, M)
        free = ch.K in sf.free
        U, H = family_glm_influence(data, family, X, sf.cal_opt.x, 1.0 / n_h, np.zeros((1, X.shape[1] + free)), unit=True,
                                 penalty=penalty)
        basis = sp.block_diag([sp.csr_matrix(X.basis), sp.identity(int(free))], format="csr")
        cand.admissible = True
        cand.trace = gacv_trace(H, U.J2, U.st, basis, n_h)
    return cand


# ==================================================================== tables
def family_judge_effects(data: Comparisons, family: Family, chL: Chart, xL: np.ndarray,
                         freeL: np.ndarray) -> tuple[np.ndarray, Linearization]:
    """Estimates and linearization of ``(b, log nu_free, gamma)`` of the family's LLM-only fit.

    Sandwich with bread ``H(l_L)^+`` (Prop. stage-one-normality); ``gamma`` by central
    differences of :func:`pydial.model.chart.consensus_gamma`.  The blocks are ``"b"``,
    ``"log_nu"`` (the judges with ties, rows ``freeL`` of the tie table) and ``"gamma"``.
    """
    obj = Objective.weighted(chL, data, np.inf, ties=family, free=freeL)
    H = obj.value_grad_hess(xL)[2]
    Hp, _ = pinv_sym(H)
    th = xL[: chL.dim]
    nb = data.K if chL.order else 0
    E = np.zeros((nb + obj.n_tie + data.K, obj.dim))
    sb = chL.slices["b"]
    E[np.arange(nb), np.arange(sb.start, sb.stop)] = 1.0
    E[nb + np.arange(obj.n_tie), chL.dim + np.arange(obj.n_tie)] = 1.0
    h = 1e-6
    for t in range(chL.dim):
        e = np.zeros(chL.dim)
        e[t] = h
        E[nb + obj.n_tie:, t] = (consensus_gamma(chL.S(th + e)) - consensus_gamma(chL.S(th - e))) / (2 * h)
    U = objective_outcome_influence(data, obj, xL, E @ Hp)
    nt = obj.n_tie
    blocks = {"b": slice(0, nb), "log_nu": slice(nb, nb + nt), "gamma": slice(nb + nt, nb + nt + data.K)}
    if not nb:
        del blocks["b"]
    lin = U.linearization("the position effects, tie parameters and consensus loadings", blocks,
                          tie_labels=tuple(data.judges[int(g)] for g in obj.free))
    est = np.concatenate([chL.order_effects(th)[:nb], xL[chL.dim:], chL.structure(th).gamma])
    return est, lin


def family_judge_estimates(data: Comparisons, family: Family, sf: StagedFit
                           ) -> tuple[np.ndarray | None, pd.Series, np.ndarray | None, Linearization]:
    """Return the judges' effects of the LLM-only fit of ``sf`` and their linearization (:func:`family_judge_effects`).

    Position effects and consensus loadings (``None`` without order effects), the judges'
    log tie parameters (:func:`~pydial.estimation.results.tie_log_nu`) and the linearization of all three.
    """
    chL, freeL = sf.llm_chart, sf.llm_free
    est, lin = family_judge_effects(data, family, chL, sf.llm_x, freeL)
    nb = data.K if chL.order else 0
    nt = freeL.size
    log_nu = tie_log_nu(list(data.judges), est[nb:nb + nt], freeL)
    if not chL.order:
        return None, log_nu, None, lin
    return est[:nb], log_nu, est[nb + nt:], lin


# ===================================================================== steps
@dataclass(frozen=True)
class Selected:
    r"""What a family reports at the selected candidate (step 5 of :func:`pydial.estimation.dial.fit_dial`).

    ``s`` the calibrated scores; ``loss_human`` :math:`\ell_H` at them (the family's kernel);
    ``linearization`` of the scores and of the judges' effects; ``b``, ``gamma`` the judges'
    position effects and consensus loadings of the LLM-only fit (``None`` without order
    effects); ``log_nu`` the log tie parameters (``None`` for the binary family);
    ``calibration_test`` Prop. calibration-test.
    """

    s: np.ndarray
    loss_human: float
    linearization: tuple[Linearization, ...]
    b: np.ndarray | None
    gamma: np.ndarray | None
    log_nu: pd.Series | None
    calibration_test: CalibrationTest
    beta: np.ndarray | None = None
    """The covariate effects of the selected fit (rows :attr:`beta_labels`), ``None`` without covariates."""
    beta_labels: tuple[str, ...] = ()


SHARED_JUDGES = "LLM judges (shared)"
"""The row label of the covariate effect shared by every LLM judge (``covariate_effects="shared"``)."""


def beta_labels(data: Comparisons, ch: Chart) -> tuple[str, ...]:
    """Names of the rows of ``ch``'s covariate effects: the judges (or :data:`SHARED_JUDGES`), then the people."""
    llm = (SHARED_JUDGES,) if ch.shared else tuple(data.judges)
    return llm + ((data.human_judge,) if ch.calibration is not None else ())


@dataclass(frozen=True)
class Steps:
    """The steps of :func:`pydial.estimation.dial.fit_dial` for an outcome family (see the module docstring).

    The coordinates are ``x = (theta, log nu)`` (no ``log nu`` for the binary family); ``n_L`` and
    ``n_H`` count the ties of a tie family; ``engine`` supplies the optimizers (numpy's
    :data:`NUMPY` by default, :func:`pydial.stan.engine.stan_optimizers` for Stan).  With
    ``penalty="firth"`` the people's model at ``lambda = 0`` and the calibration GLM are Firth's
    estimates, and every weighted fit has the people's Jeffreys prior in the calibration space
    (:mod:`pydial.model.penalty`).  ``shared``: with covariates, one effect for all LLM judges.

    The binary family's specialization: the steps that pass over the LLM cells use the logistic
    kernel's cell residuals ``n p - y`` (:class:`~pydial.inference.meats.CellStats`), the LLM-only
    fit cached on the data and shared with AtC, the weight path's warm-start derivatives and the
    polishing step (the engine's ``staged`` and ``path``); the general steps give the same
    estimates (a test checks every step).
    """

    data: Comparisons
    calibration: str
    order: bool
    family: Family = BINARY
    engine: Optimizers = field(default_factory=lambda: NUMPY)
    penalty: str | None = None
    shared: bool = field(default=False, kw_only=True)
    fast: bool = field(default=True, kw_only=True)
    """Take the binary family's specialization (``False``: its general steps, which a test compares)."""

    @property
    def _binary(self) -> bool:
        return self.fast and self.family.is_binary

    @property
    def _engine(self) -> Optimizers:
        """The engine, without its binary specializations ``staged`` and ``path`` unless :attr:`fast`."""
        return self.engine if self.fast else replace(self.engine, staged=None, path=None)

    @property
    def what(self) -> str:
        """The path's name in messages."""
        return "the lambda path" if self.family.is_binary else "the lambda path of the tie model"

    def totals(self) -> tuple[int, int]:
        """Return ``(n_L, n_H)``, the comparisons of the LLM and human losses (eq. weighted-loss)."""
        return family_totals(self.data, self.family)

    def human(self) -> Candidate:
        """Fit the ``lambda = 0`` candidate (eq. human-only-estimator; :func:`family_human_candidate`)."""
        return family_human_candidate(self.data, self.family, self.engine, self.penalty)[0]

    def staged(self, rank: int) -> StagedFit:
        """Fit the staged endpoint of ``rank`` (Alg. DIAL-Anc; :func:`~pydial.estimation.glm.staged_fit`)."""
        return staged_fit(self.data, rank, self.calibration, family=self.family, order=self.order, engine=self._engine,
                          penalty=self.penalty, shared=self.shared)

    def anchored(self, sf: StagedFit) -> Candidate:
        """Return the ``lambda = inf`` candidate of the staged fit ``sf`` (:func:`family_anchored_candidate`)."""
        return family_anchored_candidate(self.data, sf, self.family, self.penalty)

    def finite(self, chart: Chart, lambda_: float, x0: np.ndarray, multiple: float, warm: Candidate | None = None) -> Candidate:
        """Fit the candidate of the weight ``lambda_`` from ``x0`` to the optimizer's tolerance, warm-started by ``warm``.

        :func:`~pydial.estimation.selection.finite_candidate`; ``warm`` is the candidate whose fit ends at ``x0``.
        """
        return finite_candidate(self.data, chart, lambda_, x0, multiple, self.family, self._engine, penalty=self.penalty,
                                warm=warm, polish=False)

    def polish(self, chart: Chart, cand: Candidate) -> Candidate:
        """Return the selected finite candidate ``cand`` with its optimum resolved for its linearization.

        The path's candidates stop at the optimizer's tolerance, which GACV needs; the binary
        family's numpy fit continues with the polishing step (:func:`~pydial.optim.newton`), the
        others' linearization takes that optimum as it is.
        """
        if not self._binary or self.engine.name != "numpy" or cand.theta is None:
            return cand
        out = finite_candidate(self.data, chart, cand.lambda_, cand.theta, cand.multiple, self.family, self.engine,
                               penalty=self.penalty, warm=cand)
        return out if out.admissible else cand

    def scores_linearization(self, sf: StagedFit, best: Candidate) -> tuple[Linearization, float]:
        """Return the linearization of the selected scores (and of ``log nu_H`` when free), and ``log nu_H``.

        At ``lambda = 0`` the people's GLM, at ``lambda = inf`` the two-step form of
        :func:`family_staged_influence`, else the sandwich of :func:`family_finite_influence`.
        """
        data, family, ch = self.data, self.family, sf.chart
        if self._binary and np.isinf(best.lambda_):
            return staged_linearization(data, sf), -np.inf
        if self._binary and best.lambda_ != 0:
            # the bread is the unpenalized Hessian (pydial.model.penalty): the candidate's H^+ only without a penalty
            assert best.theta is not None and best.s is not None  # a selected finite weight is admissible
            U_b, stt = finite_influence(data, ch, best.lambda_, best.theta, best.hess_pinv if self.penalty is None else None)
            return linearize(U_b, stt, "the calibrated scores", **target_slices(data.N, U_b.A.shape[0])), -np.inf
        if best.lambda_ == 0:
            _, U, lh = family_human_influence(data, family, self.engine, self.penalty)
            stage_one = None
        elif np.isinf(best.lambda_):
            U, n_one = family_staged_influence(data, sf, family)
            lh, stage_one = human_log_nu(ch, sf.free, sf.x), slice(0, n_one)
        else:
            assert best.theta is not None
            # the bread is the unpenalized Hessian (pydial.model.penalty): the optimizer's only without a penalty
            known = (best.opt.hess if self.penalty is None and best.opt is not None
                     and np.array_equal(best.opt.x, best.theta) else None)
            U = family_finite_influence(data, ch, best.lambda_, best.theta, family, known)
            lh, stage_one = human_log_nu(ch, sf.free, best.theta), None
        blocks = target_slices(data.N, U.A.shape[0], bool(np.isfinite(lh)))
        lin = U.linearization("the calibrated scores", blocks, stage_one=stage_one,
                              tie_labels=(data.human_judge,) if "log_nu" in blocks else ())
        return lin, lh

    def judge_effects(self, sf: StagedFit) -> tuple[np.ndarray | None, np.ndarray | None, pd.Series | None,
                                                     tuple[Linearization, ...]]:
        """Return ``b``, ``gamma``, the judges' ``log nu`` and their linearizations (:func:`family_judge_estimates`)."""
        if self._binary:
            if not self.order:
                return None, None, None, ()
            ch, th = sf.llm_chart, sf.llm_theta
            lins = llm_only_linearization(self.data, ch, th, hess=sf.llm_opt.hess_at(th))
            return ch.order_effects(th), ch.structure(th).gamma, None, lins
        b, log_nu, gamma, lin = family_judge_estimates(self.data, self.family, sf)
        return b, gamma, log_nu, (lin,)

    def selected(self, sf: StagedFit, best: Candidate, hum: Candidate) -> Selected:
        """Return the estimates, linearizations and the calibration LRT at the selected candidate ``best``.

        The LRT compares the unpenalized likelihoods of the family (``nu_H`` free under both hypotheses).
        """
        data, family, ch = self.data, self.family, sf.chart
        lin, lh = self.scores_linearization(sf, best)
        s = best.s if np.isfinite(best.lambda_) else ch.scores(sf.theta)
        assert s is not None  # a selected candidate has its scores
        b, gamma, log_nu_j, lins_j = self.judge_effects(sf)
        log_nu = None if family.is_binary else pd.concat([log_nu_j, tie_log_nu([data.human_judge], np.array([lh]))])
        beta, labels = self.covariate_effects(sf, best)
        loss = tie_human_loss(family, s, lh, data, None if beta is None else beta[-1])
        if self.penalty is not None:
            hum = family_human_candidate(data, family, NUMPY)[0]
        loss_anc = human_loss_at(data, family, ch, sf.x, sf.free)
        ok_h = hum.opt is not None and hum.opt.resolved
        ct = calibration_lrt(loss_anc, hum.loss_human if ok_h else None, self.totals()[1], data.N - 1 - ch.d,
                             hum.reason or "the human-only MLE is not resolved")
        return Selected(s, loss, (lin, *lins_j), b, gamma, log_nu, ct, beta, labels)

    def covariate_effects(self, sf: StagedFit, best: Candidate) -> tuple[np.ndarray | None, tuple[str, ...]]:
        """Return the covariate effects of the selected fit and their row labels (``None`` without covariates).

        At ``lambda = 0`` the people's model has the people's effects ``beta_H`` alone.
        """
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
