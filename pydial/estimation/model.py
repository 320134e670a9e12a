"""A model: data and a :class:`~pydial.ModelSpec`, fitted into a frozen :class:`~pydial.DialResult` (statsmodels' Model)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

from pydial.data.comparisons import Comparisons
from pydial.estimation.engines import Optimizers
from pydial.estimation.estimators import estimate, numerical_errors
from pydial.estimation.results import DialResult, covariances_of, reissue, result_of
from pydial.estimation.spec import ModelSpec
from pydial.estimation.glm import numpy_optimizers
from pydial.estimation.verdict import calibration_warning
from pydial.exceptions import ArgumentTypeError, caller_stacklevel
from pydial.model.cells import Cells
from pydial.model.chart import Chart
from pydial.model.families import Family, family_of
from pydial.optim import single_threaded_blas
from pydial.resources import reused_memory

__all__ = ["DialModel", "ENGINE_OPTIMIZERS", "optimizers"]


ENGINE_OPTIMIZERS: dict[str, Callable[[int | None, str | None], Optimizers]] = {
    "numpy": lambda seed, penalty: numpy_optimizers(penalty)}
"""The optimizers of each engine, by name, called with ``(seed, penalty)``; :mod:`pydial.api`, which sits
above Stan, adds ``"stan"`` (this layer never imports Stan)."""


def optimizers(engine: str, seed: int | None = None, penalty: str | None = None) -> Optimizers:
    """Return the optimizers of ``engine`` (:data:`ENGINE_OPTIMIZERS`)."""
    return ENGINE_OPTIMIZERS[engine](seed, penalty)


@dataclass(frozen=True)
class DialModel:
    """The data and the specification of a fit (``result.model``); :meth:`fit` fits it.

    It owns what the two determine: the outcome :attr:`family`, the :attr:`cells` and the :attr:`chart`.
    """

    data: Comparisons
    spec: ModelSpec

    @property
    def family(self) -> Family:
        """The outcome family of ``spec.ties`` (binary, Davidson, Rao-Kupper)."""
        return family_of(self.spec.ties)

    @cached_property
    def cells(self) -> Cells:
        """The data's LLM then human cells at unit weights, as the family reads them (tie cells with a tie model)."""
        return Cells.stack(self.data, 1.0, 1.0, with_ties=self.spec.ties is not None)

    @cached_property
    def chart(self) -> Chart | None:
        """The chart of the joint structured fit at ``spec.rank``; None for a method without one or a rank grid."""
        spec = self.spec
        if not (spec.uses_calibration and isinstance(spec.rank, int)):
            return None
        return Chart.for_data(self.data, spec.rank, spec.calibration, spec.order, spec.covariate_effects == "shared")

    @single_threaded_blas
    def fit(self) -> DialResult:
        """Check the data, run the estimator, and return the result with its covariances and verdict (:func:`pydial.fit`)."""
        data, spec = self.data, self.spec
        with numerical_errors(f"the design check of method {spec.method!r}"):
            rank_grid = spec.check_data(data)
        with reused_memory(len(data.llm) + len(data.human)):
            with warnings.catch_warnings(record=True) as caught, numerical_errors(f"method {spec.method!r}"):
                warnings.simplefilter("always")
                est = estimate(data, spec, optimizers(spec.engine, spec.seed, spec.penalty), rank_grid)
                C = covariances_of(self, est)
            found = reissue(caught)
            rejected = calibration_warning(spec, est)
            if rejected is not None:
                warnings.warn(rejected, stacklevel=caller_stacklevel())
                found.append(rejected)
            with numerical_errors(f"the diagnosis of the {spec.method!r} fit"):
                return result_of(self, est, C, found)

    @classmethod
    def fit_spec(cls, data: Comparisons, *, spec: ModelSpec) -> DialResult:
        """Fit ``spec`` on ``data``: ``DialModel(data, spec).fit()`` (``result.fitter``; :func:`pydial.fit` with ``spec=``)."""
        if not isinstance(spec, ModelSpec):
            raise ArgumentTypeError(f"spec must be a pydial.ModelSpec, got {type(spec).__name__}")
        return cls(data, spec).fit()


