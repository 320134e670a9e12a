"""A model: data and a :class:`~pydial.ModelSpec`, fitted into a frozen :class:`~pydial.DialResult` (statsmodels' Model).

``DialModel(data, spec).fit()`` checks the data against the spec, runs the estimator with the
spec's engine, forms every covariance of the estimate's linearization under the spec's meat and
decides the verdict, once.  :func:`pydial.fit` is this with the spec built from its keywords;
:meth:`pydial.DialResult.with_cov` builds the result of another meat from the same estimate.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, cast

from pydial.data.comparisons import Comparisons
from pydial.estimation.engines import Engine
from pydial.estimation.estimators import estimate, numerical_errors, numpy_optimizers
from pydial.estimation.results import DialResult, Estimate
from pydial.estimation.spec import ModelSpec
from pydial.estimation.verdict import calibration_warning, verdict
from pydial.exceptions import ArgumentTypeError, CovarianceWarning, caller_stacklevel
from pydial.inference.wald import covariances, tables
from pydial.optim import single_threaded_blas

__all__ = ["DialModel", "fit_spec", "optimizers", "result_of"]


def optimizers(engine: str, seed: int | None = None, penalty: str | None = None) -> Engine:
    """Return the optimizers of ``engine``: numpy's (Newton on exact derivatives) or Stan's (its optimizer)."""
    if engine == "stan":
        from pydial.stan.engine import stan_engine

        return stan_engine(seed, penalty)
    return numpy_optimizers(penalty)


@dataclass(frozen=True)
class DialModel:
    """The data and the specification of a fit (``result.model``); :meth:`fit` fits it."""

    data: Comparisons
    spec: ModelSpec

    @single_threaded_blas
    def fit(self) -> DialResult:
        """Check the data, run the estimator, and return the result with its covariances and verdict (:func:`pydial.fit`)."""
        data, spec = self.data, self.spec
        with numerical_errors(f"the design check of method {spec.method!r}"):
            rank_grid = spec.check_data(data)
        with warnings.catch_warnings(record=True) as caught, numerical_errors(f"method {spec.method!r}"):
            warnings.simplefilter("always")
            est = estimate(data, spec, optimizers(spec.engine, spec.seed, spec.penalty), rank_grid)
            C, tabs = _covariance_tables(self, est)
        _reissue(caught)
        found = [cast(Warning, w.message) for w in caught]  # warnings.warn made each message an instance
        rejected = calibration_warning(spec, est)
        if rejected is not None:
            warnings.warn(rejected, stacklevel=caller_stacklevel())
            found.append(rejected)
        with numerical_errors(f"the diagnosis of the {spec.method!r} fit"):
            return result_of(self, est, C, tabs, found)


def _covariance_tables(model: DialModel, est: Estimate) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every covariance of ``est``'s linearization under the model's meat, and the tables they give."""
    spec = model.spec
    anchored = spec.anchored_cov_type if spec.uses_calibration else None
    C = covariances(est.linearization, model.data, spec.resolved_cov_type, anchored, spec.cluster_correction)
    return C, tables(est, C, model.data, spec.level, spec.ties)


def _reissue(caught: list[warnings.WarningMessage]) -> None:
    """Hand every recorded warning on to the caller's filters."""
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def result_of(model: DialModel, est: Estimate, C: dict[str, Any], tabs: dict[str, Any],
              caught: list[Warning]) -> DialResult:
    """Return the frozen result of an estimate, its covariances and tables, with the verdict of the warnings ``caught``."""
    from pydial.estimation.fitstats import judgment_counts

    status, problems = verdict(model.spec, est, model.data, caught)
    used, excluded = judgment_counts(model.data, model.spec.ties, model.spec.method)
    return DialResult(model=model, estimate=est, covariances=C, tables=tabs, status=status, problems=problems,
                      fit_warnings=tuple(caught), n_obs_by_judge=used, excluded=excluded)


def with_meat(result: DialResult, spec: ModelSpec) -> DialResult:
    """Return ``result`` under ``spec`` (another meat): covariances and tables formed again from its estimate."""
    model = DialModel(result.model.data, spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        C, tabs = _covariance_tables(model, result.estimate)
    _reissue(caught)
    keep = [w for w in result.fit_warnings if not isinstance(w, CovarianceWarning)]
    return result_of(model, result.estimate, C, tabs, keep + [cast(Warning, w.message) for w in caught])


def fit_spec(data: Comparisons, *, spec: ModelSpec) -> DialResult:
    """Fit ``spec`` on ``data``: ``DialModel(data, spec).fit()`` (``result.fitter``, as :func:`pydial.fit` with ``spec=``)."""
    if not isinstance(spec, ModelSpec):
        raise ArgumentTypeError(f"spec must be a pydial.ModelSpec, got {type(spec).__name__}")
    return DialModel(data, spec).fit()
