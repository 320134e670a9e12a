"""The Stan engine of pydial: the DIAL models as Stan programs (top-level ``stan/``, installed as ``pydial.stan_files``).

``dial.stan`` (the structured model in the numpy engine's chart), ``dial_sample.stan`` (identified for
NUTS), ``judges.stan`` (judge-specific, human-only and pooled BTL) and ``dial_calibrate.stan`` (the cut
posterior's second stage), each with optional ties, read the same cells (:func:`standata`).  Backends:
CmdStan through cmdstanpy, else httpstan's Stan (:func:`stan_backend`); see ``docs/api/stan.rst``.
"""

from .backend import (BACKENDS, CompiledModel, OptimizeResult, SampleResult, SamplerWarning, StanBackendError, StanCompileError,
                      StanRuntimeError, backend_available, compile_model, grad_log_prob, log_prob, optimize, precompile, sample,
                      stan_backend)
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
