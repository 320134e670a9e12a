r"""The estimators of the paper, run by :func:`estimate` with the optimizers of an engine (:func:`pydial.fit`).

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
from dataclasses import dataclass, field
from contextlib import contextmanager
from functools import partial
from typing import Any, Iterator, cast

import numpy as np
import pandas as pd

from pydial.cache import derived
from pydial.data.comparisons import Comparisons
from pydial.estimation.baselines import fit_atc, fit_pooled, numpy_pooled
from pydial.estimation.engines import Engine, PointEngine, StagedFit, StructuredFit
from pydial.estimation.glm import (
    fit_calibration,
    fit_human_btl,
    fit_order_btl,
    fit_structured,
    initial_theta,
)
from pydial.estimation.dial import fit_dial
from pydial.estimation.results import Estimate
from pydial.estimation.selection import Candidate, finite_candidate, numpy_joint
from pydial.estimation.steps import NUMPY_FAMILY, FamilySteps
from pydial.exceptions import ArgumentError, ConvergenceError, IdentifiabilityError
from pydial.inference.linearization import (
    Linearization,
    finite_influence,
    human_influence,
    judges_linearization,
    linearize,
    llm_only_linearization,
    staged_linearization,
)
from pydial.model.chart import Calibration, Chart
from pydial.model.identifiability import ESTIMATORS
from pydial.model.likelihood import human_loss
from pydial.optim import warn_unresolved

METHODS: tuple[str, ...] = ESTIMATORS
ENGINES: tuple[str, ...] = ("numpy", "stan")
NEEDS_HUMAN = ("human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc")
USES_RANK: tuple[str, ...] = ("dial-nopos", "dial-anc", "dial-ada", "atc")
"""Methods that fit the structured LLM model and so use ``rank``."""
DIAL_METHODS: tuple[str, ...] = ("dial-nopos", "dial-anc", "dial-ada")
"""The methods of :func:`pydial.estimation.dial.fit_dial`."""
USES_CALIBRATION: tuple[str, ...] = DIAL_METHODS
"""Methods that use ``calibration``: the DIAL methods (AtC always calibrates along ``mu``)."""
BASELINES = {"pooled": fit_pooled, "atc": fit_atc}
"""The baselines, one fit for every outcome family (:mod:`pydial.estimation.baselines`)."""


def method_arguments(method: str, **arguments: Any) -> dict[str, Any]:
    """Return the ``rank`` / ``calibration`` among ``arguments`` that ``method`` uses.

    They are passed to :func:`fit` for several methods without an
    :class:`ArgumentWarning`, e.g. ``fit(data, m, **method_arguments(m, rank=2))``.
    """
    users = {"rank": USES_RANK, "calibration": USES_CALIBRATION}
    return {k: v for k, v in arguments.items() if method in users.get(k, (method,))}


@contextmanager
def numerical_errors(what: str) -> Iterator[None]:
    """Turn numpy's numerical exceptions raised inside ``what`` into pydial's errors.

    The original is chained: a singular matrix into :class:`IdentifiabilityError`,
    any other :class:`numpy.linalg.LinAlgError` or a :class:`FloatingPointError` into
    :class:`ConvergenceError`.
    """
    try:
        yield
    except np.linalg.LinAlgError as e:
        if "singular" in str(e).lower():
            raise IdentifiabilityError(f"{what} failed: a matrix of the fit is singular ({e}); the design may not "
                                       "identify the parameters (see pydial.check_design)") from e
        raise ConvergenceError(f"{what} failed: a linear-algebra routine did not succeed ({e})") from e
    except FloatingPointError as e:
        raise ConvergenceError(f"{what} failed: a floating-point error ({e})") from e


def estimate(data: Comparisons, method: str, *, engine: Engine, calibration: str | None, lambda_: Any, multiples: Any,
             include_endpoints: bool | str, ties: str | None, seed: int | None, rank_grid: list[int],
             penalty: str | None) -> Estimate:
    """Run the estimator ``method`` with ``engine``'s optimizers (arguments validated by :class:`ModelSpec`).

    Returns the point estimates and their linearizations; :func:`pydial.estimation.results.build_result`
    forms the covariances and the result.
    """
    if method in BASELINES:
        return BASELINES[method](data, rank_grid[0], ties=ties, engine=engine)
    if ties is not None and method not in DIAL_METHODS:
        from pydial.estimation.tie_btl import fit_ties

        return fit_ties(data, method, ties=ties, seed=seed, engine=engine.family, penalty=penalty)
    if method == "human":
        return _fit_human(data, engine.point)
    if method == "judges":
        return _fit_judges(data, engine.point)
    order = method != "dial-nopos"
    cal = cast(str, calibration)
    steps = (BinarySteps(data, cal, order, engine=engine.family, penalty=penalty, point=engine.point) if ties is None
             else FamilySteps(data, cal, order, ties, engine.family, penalty, what="the lambda path of the tie model"))
    return fit_dial(data, steps, cal, adaptive=(method != "dial-anc"), lambdas=lambda_, multiples=multiples,
                    include_endpoints=include_endpoints, rank_grid=rank_grid)


def rank_candidates(rank: Any, data: Comparisons, method: str) -> list[int]:
    """Validate ``rank`` (int, list, or "auto") into a list of candidate ranks."""
    top = max(0, min(data.K - 1, data.N - 2, 3))
    if isinstance(rank, str):
        if rank != "auto":
            raise ArgumentError(f"rank must be a non-negative integer, a list of them, or 'auto', got {rank!r}")
        grid = list(range(top + 1))
    elif isinstance(rank, (int, np.integer)):
        grid = [int(rank)]
    else:
        try:
            grid = [int(r) for r in rank]
        except TypeError:
            raise ArgumentError(f"rank must be a non-negative integer, a list of them, or 'auto', got {rank!r}") from None
    if not grid or any(r < 0 for r in grid):
        raise ArgumentError(f"ranks must be non-negative integers, got {rank!r}")
    if len(grid) > 1 and method not in ("dial-ada", "dial-nopos"):
        raise ArgumentError(f"a rank grid (rank={rank!r}) needs method 'dial-ada' or 'dial-nopos', got {method!r}")
    return sorted(set(grid))


# ----------------------------------------------------------------- helpers
def _fit_human(data: Comparisons, point: "PointEngine | None" = None) -> Estimate:
    f = (point or NUMPY).human(data)
    warn_unresolved(f.opt, "human BTL")
    U, st, singular = human_influence(data, f.opt.x)
    return Estimate(s=f.s, lambda_=0.0, converged=f.opt.resolved and not singular, grad_norm=f.opt.grad_norm,
                    loss_human=human_loss(f.s, data.human), linearization=(linearize(U, st, "the human BTL scores"),))


def numpy_judges(data: Comparisons, *, penalty: str | None = None) -> list:
    """Each judge's order-effect BTL (eq. binomial-model-llm) by the numpy optimizer."""
    return [fit_order_btl(data.llm.select(data.llm.judge == k), data.N, penalty=penalty) for k in range(data.K)]


def _fit_judges(data: Comparisons, point: "PointEngine | None" = None) -> Estimate:
    fits = (point or NUMPY).judges(data)
    for k, f in enumerate(fits):
        warn_unresolved(f.opt, f"judge {data.judges[k]!r}")
    lins, regular = judges_linearization(data, fits)
    S = np.array([f.s for f in fits])
    return Estimate(s=S.mean(0), b=np.array([f.b for f in fits]), judge_scores=S, lambda_=np.nan,
                    converged=regular and all(f.opt.resolved for f in fits), grad_norm=max(f.opt.grad_norm for f in fits),
                    loss_human=np.nan, linearization=lins)


def staged_fit(data: Comparisons, rank: int, calibration: str, *, order: bool = True,
               penalty: str | None = None) -> StagedFit:
    """Alg. DIAL-Anc: structured LLM-only fit, then ``argmin_c l_H(M c)``.

    With ``penalty="firth"``, the calibration GLM is Firth's estimate.
    """
    chL, fL = llm_only_fit(data, rank, order)
    st = chL.structure(fL.theta)
    M = st.basis(calibration)
    oc = fit_calibration(data.human, M, penalty=penalty)
    ch = Chart(data.N, data.K, rank, cast(Calibration, calibration), order)
    b = chL.order_effects(fL.theta) if order else None
    theta = ch.from_structure(st, oc.x, b)
    theta[ch.llm_coordinates] = fL.theta  # the same point up to rounding; exactly the first stage's coordinates
    return StagedFit(ch, theta, fL.opt, oc, chL, fL.theta)


def llm_only_fit(data: Comparisons, rank: int, order: bool = True) -> tuple[Chart, StructuredFit]:
    """Return the structured LLM-only fit (eq. staged-calibrated-estimator, first stage).

    It is computed once per ``(rank, order)`` and cached on ``data``: DIAL-Anc,
    DIAL-Ada (its anchored endpoint and warm start) and AtC share it.
    """
    def build() -> tuple[Chart, Any]:
        chL = Chart(data.N, data.K, rank, None, order)
        fL = fit_structured(data, chL, np.inf, initial_theta(data, chL))
        return chL, dataclasses.replace(fL, objective=None)  # keep the fit, not its objective (per-cell index arrays)

    return derived(data, ("llm_only_fit", int(rank), bool(order)), build)



def numpy_human(data: Comparisons, *, penalty: str | None = None) -> Any:
    """Fit the centered human BTL (eq. human-only-estimator) by the numpy optimizer."""
    return fit_human_btl(data.human, data.N, penalty=penalty)


def numpy_engine(penalty: str | None = None) -> PointEngine:
    """Return the numpy optimizers, with the likelihoods penalized by ``penalty`` (:mod:`pydial.model.penalty`)."""
    if penalty is None:
        return PointEngine(staged=staged_fit, joint=numpy_joint, human=numpy_human, judges=numpy_judges,
                           pooled=numpy_pooled)
    return PointEngine(staged=partial(staged_fit, penalty=penalty), joint=partial(numpy_joint, penalty=penalty),
                       human=partial(numpy_human, penalty=penalty), judges=partial(numpy_judges, penalty=penalty),
                       pooled=partial(numpy_pooled, penalty=penalty), penalty=penalty)


NUMPY = numpy_engine()


def numpy_optimizers(penalty: str | None = None) -> Engine:
    """Return the numpy engine: Newton on the exact derivatives for every fit (``fit(..., engine="numpy")``)."""
    return Engine(numpy_engine(penalty), NUMPY_FAMILY)


@dataclass(frozen=True)
class BinarySteps(FamilySteps):
    """The binary family's fast path through the steps of :func:`pydial.estimation.dial.fit_dial` (ties left out).

    The steps that pass over the LLM cells use the logistic kernel's cell residuals
    ``n p - y`` (:class:`~pydial.model.meats.CellStats`), the LLM-only fit cached on the data
    and shared with AtC, the weight path's warm-start derivatives and the polishing step;
    the people's endpoints are the general steps of :class:`FamilySteps` with ``ties=None``,
    which give the same estimates (a test checks every step).  ``point`` supplies the binary
    optimizers; with ``penalty="firth"`` the human BTL, the calibration GLM and the human
    block of every weighted fit are Firth's (:mod:`pydial.model.penalty`).
    """

    ties: None = None
    point: PointEngine = field(default_factory=lambda: NUMPY)

    def staged(self, rank: int) -> StagedFit:
        """Fit the staged endpoint with ``point`` (:func:`staged_fit` for numpy)."""
        return self.point.staged(self.data, rank, self.calibration, order=self.order)

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
        return linearize(U, stt, "the calibrated scores"), -np.inf

    def judge_effects(self, sf: StagedFit) -> tuple[np.ndarray | None, np.ndarray | None, pd.Series | None,
                                                     tuple[Linearization, ...]]:
        """Return the position effects and consensus loadings of the LLM-only fit with their linearizations (fast path)."""
        if not self.order:
            return None, None, None, ()
        ch, th = sf.llm_chart, sf.llm_theta
        lins = llm_only_linearization(self.data, ch, th, hess=sf.llm_opt.hess_at(th))
        return ch.order_effects(th), ch.structure(th).gamma, None, lins
