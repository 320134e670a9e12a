"""The Stan engine of pydial: the DIAL models as Stan programs.

Programs (top-level ``stan/``, installed as ``pydial.stan_files``):

* ``dial.stan`` -- the structured model in the numpy engine's computational
  chart, weights as data: log density and penalized MLE;
* ``dial_sample.stan`` -- the same model in an identified parameterization
  for NUTS;
* ``judges.stan`` -- judge-specific order-effect BTL (also human-only and
  pooled);

each with optional Davidson-Beaver or Rao-Kupper ties.

Backends: CmdStan through cmdstanpy when installed, else the Stan bundled with
httpstan/pystan; ``backend=`` or ``PYDIAL_STAN_BACKEND`` chooses
(:func:`stan_backend`).  Each backend is one module
(:mod:`~pydial.stan.cmdstan_backend`, :mod:`~pydial.stan.httpstan_backend`)
implementing :class:`CompiledModel` (:mod:`~pydial.stan.compiled`);
:mod:`~pydial.stan.backend` chooses among them and compiles.

All programs (and ``dial_calibrate.stan``, the cut posterior's second stage) read
one data schema (``stan/include/schema_data.stan``, :func:`standata`) and write
the cell likelihood once (``stan/include/paired_likelihoods.stan``: the linear
predictor with its covariate term ``z' beta`` and the binary, Davidson-Beaver and
Rao-Kupper cell likelihoods; ``cell_*.stan``: their inputs, target and outputs;
``covariate_*.stan``: the covariate effects every program shares).  Each program's header says
how to extend it by adding to its blocks (``examples/tie_gap.stan``), and
``posterior(..., program=PATH, extra=...)`` samples the extended program.

Public functions: :func:`posterior` (NUTS, or CmdStan's Laplace and
Pathfinder approximations; an ``xarray.DataTree`` on arviz 1.x, ``arviz.InferenceData``
on 0.x),
:func:`standata` (the data dictionary of any program),
:func:`compare_intervals` (sandwich vs posterior intervals),
:func:`stan_fit_point` (penalized MLE in the numpy chart), :func:`stan_point_engine`
(the optimizers behind ``pydial.fit(..., engine="stan")``), and the low-level
:func:`compile_model`, :func:`log_prob`, :func:`grad_log_prob`,
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
from .compare import IntervalComparison, compare_intervals, interval_settings
from .engine import stan_point_engine
from .point import POINT_METHODS, StanPointFit, stan_fit_point
from .programs import PROGRAMS, program_code, program_path
from .schema import standata

__all__ = [
    "BACKENDS",
    "PROGRAMS",
    "POINT_METHODS",
    "CompiledModel",
    "OptimizeResult",
    "SampleResult",
    "SamplerWarning",
    "StanBackendError",
    "StanCompileError",
    "StanPointFit",
    "backend_available",
    "IntervalComparison",
    "compare_intervals",
    "estimand",
    "interval_settings",
    "compile_model",
    "stan_point_engine",
    "grad_log_prob",
    "log_prob",
    "optimize",
    "posterior",
    "precompile",
    "program_code",
    "program_path",
    "sample",
    "stan_backend",
    "stan_fit_point",
    "standata",
]
