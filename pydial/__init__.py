"""pydial: position-debiased LLM judges with adaptive human preference calibration (DIAL).

Main entry points: :class:`Comparisons` (data), :func:`check_design` (identifiability), :func:`fit`
(estimators), :func:`simulate` (the paper's data-generating process), :func:`plan` and :func:`next_pairs`
(human label planning); the Stan side, imported on first use (``import pydial`` loads no cmdstanpy,
pystan or arviz): :func:`posterior` (NUTS, Laplace or Pathfinder), :func:`compare_intervals` (sandwich
vs posterior intervals) and :func:`stan_backend`.
"""

from pydial.api import fit
from pydial.estimation.spec import ModelSpec
from pydial.data import datasets, features, io
from pydial.data.comparisons import Comparisons
from pydial.data.counts import read_comparisons
from pydial.data.panel import read_judge_responses, write_judge_responses
from pydial.estimation.results import DialResult
from pydial.model.identifiability import DesignReport, check_design
from pydial.studies.diagnostics import judge_diagnostics
from pydial.studies.pair_design import next_pairs
from pydial.studies.planning import plan, plot_plan
from pydial.studies.simulate import JudgeBehavior, Simulation, simulate

from .exceptions import (ArgumentError, ArgumentTypeError, ArgumentWarning, BootstrapWarning, CalibrationWarning,
                         ConvergenceError, ConvergenceWarning, CovarianceWarning, DataError, DataWarning, DependencyError,
                         DialError, DialWarning, EstimandMismatchError, IdentifiabilityError, MemoryLimitError, OutputError,
                         UnknownNameError)

__version__ = "0.1.0"

__all__ = [
    # data
    "Comparisons", "read_comparisons", "read_judge_responses", "write_judge_responses", "judge_diagnostics", "datasets",
    "features", "io", "check_design", "DesignReport",
    # fits and studies
    "fit", "ModelSpec", "DialResult", "simulate", "Simulation", "JudgeBehavior", "plan", "plot_plan", "next_pairs",
    # errors and warnings
    "ArgumentError", "ArgumentTypeError", "DataError", "IdentifiabilityError", "ConvergenceError", "OutputError",
    "UnknownNameError", "DialError", "DependencyError", "MemoryLimitError", "EstimandMismatchError", "ConvergenceWarning",
    "CovarianceWarning", "CalibrationWarning", "BootstrapWarning", "DataWarning", "ArgumentWarning", "DialWarning",
    # Stan, imported on first use
    "posterior", "compare_intervals", "stan_backend",
]


def __getattr__(name: str):
    """``pydial.posterior``, ``pydial.compare_intervals`` and ``pydial.stan_backend`` from :mod:`pydial.stan`."""
    if name in ("posterior", "compare_intervals", "stan_backend"):
        from . import stan

        return getattr(stan, name)
    raise AttributeError(f"module 'pydial' has no attribute {name!r}")
