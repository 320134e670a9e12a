r"""The optimizer interface shared by the two engines and the fit records they return.

The estimators (:mod:`pydial.estimation.estimators`, :mod:`pydial.estimation.steps`, :mod:`pydial.estimation.btl`)
compute every covariance, GACV and test with numpy at an optimum that an engine
supplies.  An engine is one set of optimizers, :class:`Optimizers`.  The numpy engine's are built in
:mod:`pydial.estimation.steps`; the Stan engine's in
:mod:`pydial.stan.engine`.  Both return the records defined here, so this module
imports neither: it sits below both engines.

Records: :class:`BTLFit` (a centered BTL-type fit), :class:`StructuredFit` (a fit on a
:class:`~pydial.model.chart.Chart`), :class:`StagedFit` (the staged endpoint of Alg. DIAL-Anc)
and :class:`JudgesBTLFit` (each judge's BTL of a family, from Stan).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pydial.model.chart import Chart
from pydial.optim import OptimResult

if TYPE_CHECKING:
    from pydial.data.comparisons import Comparisons
    from pydial.model.likelihood import Objective

__all__ = ["BTLFit", "StructuredFit", "StagedFit", "JudgesBTLFit", "Optimizers", "StagedOptimizer", "JointOptimizer"]


# ================================================================= records
@dataclass(frozen=True)
class BTLFit:
    """A centered BTL-type fit: scores ``s`` (N), optional order effect ``b`` and the optimizer result."""

    s: np.ndarray
    b: float
    opt: OptimResult


@dataclass(frozen=True)
class StructuredFit:
    """A structured fit on a :class:`~pydial.model.chart.Chart`: reduced coordinates and optimizer result.

    ``objective`` is the :class:`~pydial.model.likelihood.Objective` that was minimized (``None``
    once dropped, e.g. in a cache).
    """

    chart: Chart
    theta: np.ndarray
    opt: OptimResult
    objective: Objective | None


@dataclass(frozen=True)
class StagedFit:
    """The staged endpoint in the calibrated chart (Alg. DIAL-Anc), for every outcome family.

    ``chart``, ``x``: the calibrated chart and the coordinates the weighted fits start from
    (its ``theta``, then the free log tie parameters of the groups ``free``: judges, then the
    people); ``llm_chart``, ``llm_x``, ``llm_free``: the structured LLM-only fit (first stage
    of eq. staged-calibrated-estimator) in the same layout; ``llm_opt``, ``cal_opt``: the
    optimizer results of the two stages (the second in the calibration coordinates ``c``,
    then ``log nu_H``).  The binary family has no free group, so ``x`` is ``theta``.
    """

    chart: Chart
    x: np.ndarray
    llm_opt: OptimResult
    cal_opt: OptimResult
    llm_chart: Chart
    llm_x: np.ndarray
    free: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    llm_free: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def theta(self) -> np.ndarray:
        """Return the calibrated chart's coordinates (``x`` without the log tie parameters)."""
        return self.x[: self.chart.dim]

    @property
    def llm_theta(self) -> np.ndarray:
        """Return the LLM-only chart's coordinates (``llm_x`` without the judges' log tie parameters)."""
        return self.llm_x[: self.llm_chart.dim]


@dataclass(frozen=True)
class JudgesBTLFit:
    """MLEs of each judge's BTL in one outcome family (binary, Davidson or Rao-Kupper), one row per judge.

    Attributes
    ----------
    S : ndarray
        Centered scores, ``(G, N)``.
    b : ndarray
        Order effects, ``(G,)`` (zeros without order effects).
    log_nu : ndarray
        Log tie parameters, ``(G,)`` (empty for the binary family).
    converged : bool
        Every optimizer call converged.
    grad_norm : float
        Largest gradient norm reported (``nan`` when not reported).
    message : str
        The optimizer's message.
    details : Any
        The engine's own record of the optimization (e.g. Stan's result), or ``None``.
    beta : ndarray or None
        Covariate effects, ``(G, p)`` (``None`` without response covariates).
    """

    S: np.ndarray
    b: np.ndarray
    log_nu: np.ndarray
    converged: bool
    grad_norm: float
    message: str
    details: Any = None
    beta: np.ndarray | None = None


# ================================================================ optimizers
class StagedOptimizer(Protocol):
    """``staged(data, rank, calibration, order=True, shared=False) -> StagedFit`` (Alg. DIAL-Anc, binary family)."""

    def __call__(self, data: Comparisons, rank: int, calibration: str, *, order: bool = ...,
                 shared: bool = ...) -> StagedFit:
        """Fit the staged endpoint."""
        ...


class JointOptimizer(Protocol):
    r"""``path(data, chart, lambda_, theta0, warm=None, polish=True) -> (theta, OptimResult)``: :math:`\arg\min Q_\lambda`.

    ``warm = (lambda_0, opt0)``: the previous weight's fit ending at ``theta0``, used or ignored;
    ``polish``: resolve the optimum to the rounding level where the optimizer can (:func:`~pydial.optim.newton`).
    """

    def __call__(self, data: Comparisons, chart: Chart, lambda_: float, theta0: np.ndarray, *,
                 warm: tuple[float, OptimResult] | None = None, polish: bool = True) -> tuple[np.ndarray, OptimResult]:
        """Fit the weighted joint loss (eq. weighted-joint-estimator)."""
        ...


@dataclass(frozen=True)
class Optimizers:
    r"""The optimizers of one engine (numpy's or Stan's) for every outcome family; inference is numpy's at their optimum.

    Every family (a :class:`~pydial.model.families.Family`): ``llm(data, family, chart, x0)``, the
    LLM-only loss on ``chart`` (``x = (theta, log nu_1..K)``); ``calibration(data, family, chart, theta, M,
    x0, penalty=None)``, the calibration GLM in the normalized coordinates ``(c, log nu_H)`` of ``M``
    (``chart``, ``theta``: the staged chart with ``A, B`` of the LLM-only fit); ``joint(data, family,
    chart, lambda_, x0, penalty=None)``: :math:`Q_\lambda`; ``human(data, family, x0, penalty=None)``: the
    people's model in ``(beta, log nu_H)``, ``s = T beta``.  Each returns an :class:`~pydial.optim.OptimResult`.

    The binary family's specializations, when the engine has them: ``staged``
    (:class:`StagedOptimizer`, the whole staged fit; Stan's) and ``path`` (:class:`JointOptimizer`,
    the weight path's fits, numpy's warm-started and polished), penalized by ``penalty``.  ``pooled_stages`` and ``btl``:
    Stan's pooled baseline and judge-wise BTL (None: numpy's GLM solver).
    """

    llm: Any
    calibration: Any
    joint: Any
    human: Any
    staged: StagedOptimizer | None = None
    path: JointOptimizer | None = None
    name: str = "numpy"
    penalty: str | None = None
    pooled_stages: Any = None
    btl: Any = None
