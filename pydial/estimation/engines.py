r"""The optimizer interface shared by the two engines (numpy's and Stan's) and the fit records they return."""

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


@dataclass(frozen=True)
class BTLFit:
    """A centered BTL-type fit: scores ``s`` (N), optional order effect ``b`` and the optimizer result."""

    s: np.ndarray
    b: float
    opt: OptimResult


@dataclass(frozen=True)
class StructuredFit:
    """A structured fit on a :class:`~pydial.model.chart.Chart`: coordinates, optimizer result and the ``objective`` minimized."""

    chart: Chart
    theta: np.ndarray
    opt: OptimResult
    objective: Objective | None


@dataclass(frozen=True)
class StagedFit:
    """The staged endpoint in the calibrated chart (Alg. DIAL-Anc), for every outcome family.

    ``x``: the ``chart``'s coordinates, then the log tie parameters of the groups ``free``; ``llm_*`` alike for the
    LLM-only fit; ``llm_opt``, ``cal_opt``: the two stages' optimizer results (the second in ``(c, beta_H, log nu_H)``).
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
    """MLEs of each judge's BTL in one outcome family, one row per judge (Stan's judge-wise fits).

    ``S`` centered scores ``(G, N)``; ``b`` order effects; ``log_nu`` (empty for the binary family); ``grad_norm``
    the largest reported; ``details`` the engine's own record; ``beta`` covariate effects ``(G, p)`` or ``None``.
    """

    S: np.ndarray
    b: np.ndarray
    log_nu: np.ndarray
    converged: bool
    grad_norm: float
    message: str
    details: Any = None
    beta: np.ndarray | None = None


class StagedOptimizer(Protocol):
    """``staged(data, rank, calibration, order=True, shared=False) -> StagedFit`` (Alg. DIAL-Anc, binary family)."""

    def __call__(self, data: Comparisons, rank: int, calibration: str, *, order: bool = ...,
                 shared: bool = ...) -> StagedFit:
        """Fit the staged endpoint."""


class JointOptimizer(Protocol):
    r"""``path(data, chart, lambda_, theta0, warm=None, polish=True) -> (theta, OptimResult)``: :math:`\arg\min Q_\lambda`.

    ``warm = (lambda_0, opt0)``, the previous weight's fit ending at ``theta0``, may be used; ``polish``: resolve to rounding.
    """

    def __call__(self, data: Comparisons, chart: Chart, lambda_: float, theta0: np.ndarray, *,
                 warm: tuple[float, OptimResult] | None = None, polish: bool = True) -> tuple[np.ndarray, OptimResult]:
        """Fit the weighted joint loss (eq. weighted-joint-estimator)."""


@dataclass(frozen=True)
class Optimizers:
    r"""The optimizers of one engine (numpy's or Stan's) for every outcome family; inference is numpy's at their optimum.

    ``llm(data, family, chart, x0)`` the LLM-only loss; ``calibration(data, family, chart, theta, M, x0, penalty)``
    the calibration GLM in ``(c, beta_H, log nu_H)``; ``joint(data, family, chart, lambda_, x0, penalty)``
    :math:`Q_\lambda`; ``human(data, family, x0, penalty)`` the people's model: each an :class:`~pydial.optim.OptimResult`.
    The binary family's specializations, if any: ``staged`` and ``path``; ``pooled_stages``, ``btl``: Stan's.
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
