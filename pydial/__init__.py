"""pydial: position-debiased LLM judges with adaptive human preference calibration (DIAL).

Main entry points: :class:`Comparisons` (data), :func:`check_design`
(identifiability), :func:`fit` (estimators), :func:`simulate` (the paper's
data-generating process).
"""

from . import datasets, io
from .counts import read_comparisons
from .data import Comparisons
from .design import DesignReport, check_design
from .estimators import DialResult, fit
from .exceptions import (ConvergenceError, ConvergenceWarning, DataError, DialError, IdentifiabilityError,
                         MemoryLimitError)
from .simulate import Simulation, simulate

__all__ = [
    "Comparisons",
    "read_comparisons",
    "datasets",
    "io",
    "check_design",
    "DesignReport",
    "fit",
    "DialResult",
    "simulate",
    "Simulation",
    "DataError",
    "IdentifiabilityError",
    "ConvergenceError",
    "ConvergenceWarning",
    "DialError",
    "MemoryLimitError",
]
__version__ = "0.1.0"
