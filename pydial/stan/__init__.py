"""The Stan engine of pydial: the DIAL models as Stan programs.

Programs (top-level ``stan/``, installed as ``pydial.stan_files``), each with optional
Davidson-Beaver or Rao-Kupper ties: ``dial.stan`` (the structured model in the numpy
engine's chart, weights as data: log density and penalized MLE), ``dial_sample.stan``
(the same model in an identified parameterization for NUTS), ``judges.stan``
(judge-specific order-effect BTL, also human-only and pooled) and
``dial_calibrate.stan`` (the cut posterior's second stage).  They read the same cells
(:func:`standata`) and call the same cell likelihood
(``stan/include/paired_likelihoods.stan``); each reads top to bottom, its model stated
in its header and ``#include`` only in its ``functions`` block (:func:`program_code`
gives the expanded text).  :mod:`~pydial.stan.parameters` maps the named parameters of
``dial.stan`` to the numpy engine's chart coordinates.  An extension is a copy of a
program with lines added (:func:`example_program`: ``"tie_gap"``), sampled by
``posterior(..., options={"program": PATH, "extra": ...})``.

Backends: CmdStan through cmdstanpy when installed, else the Stan bundled with
httpstan/pystan (:func:`stan_backend`; ``backend=`` or ``PYDIAL_STAN_BACKEND``
chooses), one module each implementing :class:`CompiledModel`; compiled programs are
cached (:mod:`~pydial.stan.cache`).

Public functions: :func:`posterior` (NUTS, or CmdStan's Laplace and Pathfinder
approximations), :func:`standata`, :func:`compare_intervals`, :func:`program_code`,
:func:`example_program`, :func:`example_programs`, :func:`stan_fit_point`,
:func:`stan_optimizers` (the optimizers behind ``pydial.fit(..., engine="stan")``), and
the low-level :func:`compile_model`, :func:`log_prob`, :func:`grad_log_prob`,
:func:`optimize`, :func:`sample`.
"""

from .backend import (
    BACKENDS,
    CompiledModel,
    OptimizeResult,
    SampleResult,
    SamplerWarning,
    StanBackendError,
    StanCompileError,
    StanRuntimeError,
    backend_available,
    compile_model,
    grad_log_prob,
    log_prob,
    optimize,
    precompile,
    sample,
    stan_backend,
)
from .bayes import estimand, posterior
from .dial_posterior import Estimand
from .cache import CACHE_ENV, StanCacheWarning
from .compare import IntervalComparison, compare_intervals, interval_settings
from .engine import stan_optimizers
from .point import POINT_METHODS, StanPointFit, stan_fit_point
from .programs import EXAMPLES, PROGRAMS, example_program, example_programs, program_code, program_path
from .schema import standata

__all__ = ["BACKENDS", "CACHE_ENV", "EXAMPLES", "PROGRAMS", "POINT_METHODS", "CompiledModel", "OptimizeResult",
           "SampleResult", "SamplerWarning", "StanBackendError", "StanCacheWarning", "StanCompileError",
           "StanRuntimeError", "StanPointFit", "backend_available", "IntervalComparison", "compare_intervals",
           "estimand", "Estimand", "example_program", "example_programs", "interval_settings", "compile_model", "stan_optimizers",
           "grad_log_prob", "log_prob", "optimize", "posterior", "precompile", "program_code", "program_path", "sample",
           "stan_backend", "stan_fit_point", "standata"]
