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
:mod:`~pydial.stan.backend` chooses among them and compiles.  Compiled programs
are cached (CmdStan: ``PYDIAL_STAN_CACHE`` moves pydial's cache; httpstan keeps its
own), built aside and published whole under a lock between processes, and a broken
cached program is rebuilt with a :class:`StanCacheWarning` (:mod:`~pydial.stan.cache`).

All programs (and ``dial_calibrate.stan``, the cut posterior's second stage) read
one data schema (``stan/include/schema_data.stan``, :func:`standata`) and write
the cell likelihood once (``stan/include/paired_likelihoods.stan``: the linear
predictor with its covariate term ``z' beta`` and the binary, Davidson-Beaver and
Rao-Kupper cell likelihoods; ``cell_*.stan``: their inputs, target and outputs;
``covariate_*.stan``: the covariate effects every program shares).  Each program's header says
how to extend it by adding to its blocks, and
``posterior(..., program=PATH, extra=...)`` samples the extended program.
Worked extensions are installed with pydial: :func:`example_programs` lists
them and :func:`example_program` returns the path of one (``"tie_gap"``:
``judges.stan`` plus a tie rate that depends on the score gap, fitted by
``python -m pydial.stan.examples.tie_gap``).

Public functions: :func:`posterior` (NUTS, or CmdStan's Laplace and
Pathfinder approximations; an ``xarray.DataTree`` on arviz 1.x, an
``arviz.InferenceData`` on 0.x),
:func:`standata` (the data dictionary of any program),
:func:`compare_intervals` (sandwich vs posterior intervals, an
:class:`IntervalComparison`),
:func:`example_program` and :func:`example_programs` (the installed extensions),
:func:`stan_fit_point` (penalized MLE in the numpy chart), :func:`stan_optimizers`
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
from .cache import CACHE_ENV, StanCacheWarning
from .compare import IntervalComparison, compare_intervals, interval_settings
from .engine import stan_optimizers
from .point import POINT_METHODS, StanPointFit, stan_fit_point
from .programs import EXAMPLES, PROGRAMS, example_program, example_programs, program_code, program_path
from .schema import standata

__all__ = [
    "BACKENDS",
    "CACHE_ENV",
    "EXAMPLES",
    "PROGRAMS",
    "POINT_METHODS",
    "CompiledModel",
    "OptimizeResult",
    "SampleResult",
    "SamplerWarning",
    "StanBackendError",
    "StanCacheWarning",
    "StanCompileError",
    "StanRuntimeError",
    "StanPointFit",
    "backend_available",
    "IntervalComparison",
    "compare_intervals",
    "estimand",
    "example_program",
    "example_programs",
    "interval_settings",
    "compile_model",
    "stan_optimizers",
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
