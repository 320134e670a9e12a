"""Compile and run pydial's Stan programs with CmdStan (cmdstanpy) or the bundled Stan (httpstan).

Backend order (DESIGN.md "Two engines, one model"): CmdStan through
``cmdstanpy`` when ``cmdstanpy.cmdstan_path()`` resolves, otherwise the Stan
that ships inside the ``httpstan`` wheel (used through ``httpstan`` and
``pystan``), which compiles offline with the system C++ compiler.

* **Compilation** is cached.  httpstan keeps compiled models in its per-user
  cache (``~/.cache/httpstan/<version>/models``), keyed by a hash of the
  program text; for CmdStan the expanded program and its executable go to
  ``platformdirs.user_cache_dir("pydial")/cmdstan/<hash>/``.  Nothing is
  written beside the installed ``.stan`` files.  A program that ``stanc``
  rejects raises :class:`StanCompileError` carrying stanc's message.
* **Log density.**  :meth:`CompiledModel.log_prob` and
  :meth:`CompiledModel.grad_log_prob` evaluate the model's ``log_prob`` on the
  *unconstrained* scale, by default without the Jacobian adjustment.  With
  httpstan the compiled extension module is called in-process (no HTTP
  round-trip).  With CmdStan, ``CmdStanModel.log_prob`` takes constrained
  values, so only programs whose parameters are all unconstrained (``dial``,
  ``judges``) are supported, through a parameter layout.
* **Optimization** (penalized MLE, ``jacobian=False``).  httpstan: scipy
  L-BFGS-B on the exact ``-log_prob`` and its gradient; CmdStan: its L-BFGS.
  Convergence is reported on the result, never assumed.
* **Sampling** (NUTS).  Draws come back as ``(chain, draw, *shape)`` arrays.
  Divergences, tree-depth saturation, low E-BFMI, R-hat > 1.01 and bulk ESS
  below 100 per chain on the monitored variables are collected in
  :attr:`SampleResult.problems` and raised as :class:`SamplerWarning`.

``pystan``/``httpstan`` run an asyncio event loop internally
(``asyncio.run``), which fails inside an already running loop (Jupyter).
Calls that need it are then run in a worker thread with its own loop, so
``nest_asyncio`` is not needed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import io
import os
import re
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

import numpy as np

from ..exceptions import DialError, DialWarning
from .programs import PROGRAMS, program_code, program_path

__all__ = [
    "BACKENDS",
    "BACKEND_ENV",
    "StanCompileError",
    "StanBackendError",
    "SamplerWarning",
    "CompiledModel",
    "OptimizeResult",
    "SampleResult",
    "stan_backend",
    "compile_model",
    "precompile",
    "log_prob",
    "grad_log_prob",
    "optimize",
    "sample",
]

BACKENDS: tuple[str, ...] = ("cmdstanpy", "httpstan")
"""Backends in order of preference."""

ROUNDOFF_FACTOR = 100.0
"""An L-BFGS run (CmdStan's or scipy's) stopped by a failed line search counts as converged when the
gradient is within this factor of the tolerance: no decrease of ``log p`` is resolvable there in double
precision (``log p`` includes the multinomial coefficients, so ``|log p|`` can be much smaller than the
sum of the magnitudes of its terms, which sets the round-off of the gradient)."""

BACKEND_ENV = "PYDIAL_STAN_BACKEND"
"""Environment variable naming the default backend (``cmdstanpy`` or ``httpstan``)."""

SAMPLER_STATS: tuple[str, ...] = (
    "lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__", "divergent__", "energy__",
)


class StanCompileError(DialError, ValueError):
    """A Stan program failed to compile; the message carries stanc's (or the C++ compiler's) output."""


class StanBackendError(DialError, RuntimeError):
    """The requested Stan backend is not available or failed to run."""


class SamplerWarning(DialWarning):
    """NUTS finished with diagnostics that call its draws into question."""


T = TypeVar("T")


# --------------------------------------------------------------------------- helpers
def _outside_event_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call ``fn`` here, or in a worker thread when this thread runs an asyncio loop.

    pystan/httpstan use ``asyncio.run``, which refuses to start inside a running
    loop (Jupyter, async frameworks).  A fresh thread has no loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn(*args, **kwargs)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as ex:
        return ex.submit(fn, *args, **kwargs).result()


def _one_blas_thread() -> Any:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _have_cmdstan() -> bool:
    try:
        import cmdstanpy
    except ImportError:
        return False
    try:
        cmdstanpy.cmdstan_path()
    except (ValueError, RuntimeError, OSError):
        return False
    return True


def _have_httpstan() -> bool:
    try:
        import httpstan.models  # noqa: F401
        import stan  # noqa: F401
    except ImportError:
        return False
    return True


def stan_backend(prefer: str | None = None) -> str:
    """Name of the Stan backend to use: ``"cmdstanpy"`` or ``"httpstan"``.

    Parameters
    ----------
    prefer : {"cmdstanpy", "httpstan"} or None
        ``None`` reads the environment variable ``PYDIAL_STAN_BACKEND``
        (``cmdstanpy`` or ``httpstan``) and, when it is unset, picks CmdStan
        when ``cmdstanpy.cmdstan_path()`` resolves and the bundled Stan of
        httpstan (through pystan) otherwise.  A name forces that backend.

    Raises
    ------
    ValueError
        ``prefer`` is not one of :data:`BACKENDS`.
    StanBackendError
        The forced backend (or, with ``None``, every backend) is unavailable; the
        message says how to install it.
    """
    if prefer is None:
        prefer = os.environ.get(BACKEND_ENV) or None
        if prefer is not None and prefer not in BACKENDS:
            raise ValueError(f"environment variable {BACKEND_ENV} must be one of {BACKENDS}, got {prefer!r}")
    if prefer is not None and prefer not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {prefer!r}")
    if prefer == "cmdstanpy":
        if not _have_cmdstan():
            raise StanBackendError(
                "backend 'cmdstanpy' was requested but no CmdStan installation was found "
                "(cmdstanpy.cmdstan_path() failed); install it with `python -m cmdstanpy.install_cmdstan` "
                "or use backend='httpstan'"
            )
        return "cmdstanpy"
    if prefer == "httpstan":
        if not _have_httpstan():
            raise StanBackendError("backend 'httpstan' was requested but pystan/httpstan are not importable; "
                                   "`pip install pystan`")
        return "httpstan"
    if _have_cmdstan():
        return "cmdstanpy"
    if _have_httpstan():
        return "httpstan"
    raise StanBackendError("no Stan backend: install CmdStan for cmdstanpy, or `pip install pystan` (bundled Stan)")


def _cmdstan_cache_dir() -> Path:
    try:
        import platformdirs

        base = Path(platformdirs.user_cache_dir("pydial"))
    except ImportError:  # pragma: no cover - platformdirs ships with most installs
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pydial"
    return base / "cmdstan"


def _as_stan_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """Numpy arrays with integer or float dtype (Python scalars kept), as both backends read them."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, (bool, np.bool_)):
            out[k] = int(v)
        elif isinstance(v, (int, np.integer)):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = float(v)
        else:
            a = np.asarray(v)
            if a.dtype == bool:
                a = a.astype(np.int64)
            if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
                raise TypeError(f"Stan data {k!r} must be numeric, got dtype {a.dtype}")
            out[k] = a
    return out


def _json_ready(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in data.items()}


# --------------------------------------------------------------------------- results
@dataclass
class OptimizeResult:
    """A (penalized) maximum of a Stan program's log density, without Jacobian.

    Attributes
    ----------
    u : ndarray
        Optimum on the unconstrained scale.
    log_prob : float
        ``log_prob(u)`` (no Jacobian).
    grad_norm : float
        Max-norm of the gradient at ``u`` over the free coordinates (``nan`` when
        the backend does not report it).
    converged : bool
        Whether the optimizer reported convergence.
    message : str
        The optimizer's message.
    iterations, evaluations : int
        Iterations and log-density evaluations (``-1`` if unknown).
    backend : str
    seconds : float
        Wall time of the optimization.
    values : dict of str to ndarray
        Parameters, transformed parameters and generated quantities at the
        optimum (CmdStan reports them; empty on the scipy path).
    """

    u: np.ndarray
    log_prob: float
    grad_norm: float
    converged: bool
    message: str
    iterations: int
    evaluations: int
    backend: str
    seconds: float
    values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)


@dataclass
class SampleResult:
    """NUTS draws of a Stan program.

    Attributes
    ----------
    draws : dict of str to ndarray
        Every parameter, transformed parameter and generated quantity, shaped
        ``(chain, draw, *shape)``.
    stats : dict of str to ndarray
        Sampler variables (``lp__``, ``divergent__``, ``treedepth__``, ...),
        shaped ``(chain, draw)``.
    chains, draws_per_chain, warmup, seed, max_depth : int
    backend : str
    seconds : float
        Wall time of the sampler call.
    diagnostics : pandas.DataFrame or None
        R-hat, bulk and tail ESS per monitored scalar (set by :meth:`check`).
    problems : list of str
        Human-readable sampler problems; empty when all checks pass.
    backend_fit : cmdstanpy.CmdStanMCMC or None
        The CmdStan fit (CmdStan backend only), for ``arviz.from_cmdstanpy``.
    """

    draws: dict[str, np.ndarray]
    stats: dict[str, np.ndarray]
    chains: int
    draws_per_chain: int
    warmup: int
    seed: int | None
    max_depth: int
    backend: str
    seconds: float
    diagnostics: Any = None
    problems: list[str] = field(default_factory=list)
    backend_fit: Any = field(default=None, repr=False)

    def check(
        self,
        monitor: Sequence[str] | None = None,
        *,
        rhat_max: float = 1.01,
        ess_per_chain: float = 100.0,
        ebfmi_min: float = 0.3,
        warn: bool = True,
        labels: Mapping[str, Sequence[Sequence[Any]]] | None = None,
    ) -> list[str]:
        """Run the sampler checks, store them and warn about each problem.

        Parameters
        ----------
        monitor : sequence of str, optional
            Variables whose R-hat and ESS are checked (default: all draws).  Pass
            the identified quantities only: gauge-dependent factors (``U``, ``V``)
            need not mix.
        rhat_max : float
            Largest acceptable rank-normalized split R-hat (Vehtari et al. 2021).
        ess_per_chain : float
            Smallest acceptable bulk and tail ESS per chain.
        ebfmi_min : float
            Smallest acceptable E-BFMI per chain.
        warn : bool
            Raise a :class:`SamplerWarning` listing the problems.
        labels : mapping, optional
            Per variable, the coordinate labels of each of its dimensions (e.g.
            ``{"s_H": [items]}``): the diagnostics then name scalars by label
            (``s_H[gpt-4]``) instead of by 0-based index (``s_H[3]``).

        Returns
        -------
        list of str
            The problems found (also stored in :attr:`problems`).
        """
        import arviz as az
        import pandas as pd

        problems: list[str] = []
        div = self.stats.get("divergent__")
        if div is not None:
            per_chain = div.sum(axis=1).astype(int)
            if per_chain.sum() > 0:
                problems.append(
                    f"{int(per_chain.sum())} divergent transitions after warmup (per chain {per_chain.tolist()}); "
                    "raise adapt_delta or reparameterize"
                )
        td = self.stats.get("treedepth__")
        if td is not None:
            hits = (td >= self.max_depth).sum(axis=1).astype(int)
            if hits.sum() > 0:
                problems.append(f"{int(hits.sum())} transitions hit the maximum tree depth {self.max_depth} "
                                f"(per chain {hits.tolist()})")
        en = self.stats.get("energy__")
        if en is not None and en.shape[1] > 2:
            num = np.sum(np.diff(en, axis=1) ** 2, axis=1) / en.shape[1]
            den = np.var(en, axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                ebfmi = num / den
            low = np.flatnonzero(ebfmi < ebfmi_min)
            if low.size:
                problems.append(f"E-BFMI below {ebfmi_min} in chain(s) {low.tolist()} ({np.round(ebfmi[low], 3).tolist()})")

        names = list(self.draws) if monitor is None else [m for m in monitor if m in self.draws]
        rows = []
        for name in names:
            x = np.asarray(self.draws[name], dtype=float)
            if x.ndim < 2 or x[0, 0].size == 0:
                continue
            flat = x.reshape(x.shape[0], x.shape[1], -1)
            for e in range(flat.shape[2]):
                v = flat[:, :, e]
                if np.ptp(v) == 0.0:  # constant (e.g. fixed zero): nothing to check
                    continue
                idx = np.unravel_index(e, x.shape[2:]) if x.ndim > 2 else ()
                lab = (labels or {}).get(name)
                if lab is not None and len(lab) == len(idx) and all(len(lv) == n for lv, n in zip(lab, x.shape[2:])):
                    parts = [str(lv[i]) for lv, i in zip(lab, idx)]
                else:
                    parts = [str(i) for i in idx]
                label = name + ("[" + ",".join(parts) + "]" if idx else "")
                rows.append(
                    {
                        "variable": label,
                        "rhat": float(az.rhat(v, method="rank")),
                        "ess_bulk": float(az.ess(v, method="bulk")),
                        "ess_tail": float(az.ess(v, method="tail")),
                    }
                )
        diag = pd.DataFrame(rows, columns=["variable", "rhat", "ess_bulk", "ess_tail"]).set_index("variable")
        if len(diag):
            bad = diag.index[diag["rhat"] > rhat_max]
            if len(bad):
                problems.append(
                    f"R-hat > {rhat_max} for {len(bad)} of {len(diag)} monitored scalars "
                    f"(max {diag['rhat'].max():.3f} at {diag['rhat'].idxmax()}); run longer chains or check multimodality"
                )
            need = ess_per_chain * self.chains
            low = diag.index[(diag["ess_bulk"] < need) | (diag["ess_tail"] < need)]
            if len(low):
                worst = diag[["ess_bulk", "ess_tail"]].min(axis=1)
                problems.append(
                    f"bulk or tail ESS below {need:.0f} ({ess_per_chain:.0f} per chain) for {len(low)} of {len(diag)} "
                    f"monitored scalars (min {worst.min():.0f} at {worst.idxmin()})"
                )
        self.diagnostics = diag
        self.problems = problems
        if warn and problems:
            warnings.warn("Stan sampler problems:\n  - " + "\n  - ".join(problems), SamplerWarning, stacklevel=3)
        return problems


# --------------------------------------------------------------------------- compiled model
@dataclass
class CompiledModel:
    """A compiled Stan program and the backend that runs it.

    Build with :func:`compile_model`.  ``name`` is the program name (one of
    :data:`pydial.stan.programs.PROGRAMS` or a file stem), which selects the
    parameter layout used to translate unconstrained vectors for CmdStan.
    """

    name: str
    code: str = field(repr=False)
    backend: str = "httpstan"
    compile_seconds: float = 0.0
    cached: bool = True
    stanc_warnings: str = field(default="", repr=False)
    model_name: str = ""          # httpstan model name
    exe_file: str = ""            # CmdStan executable
    _module: Any = field(default=None, repr=False)
    _cmdstan_model: Any = field(default=None, repr=False)
    _param_names: list[str] | None = field(default=None, repr=False)
    _shape_cache: dict[Any, dict[str, tuple[int, ...]]] = field(default_factory=dict, repr=False)

    # ---------------------------------------------------------------- httpstan
    def _services(self) -> Any:
        if self._module is None:
            self._module = _load_services(self.model_name)
        return self._module

    # ---------------------------------------------------------------- parameters
    def parameter_names(self) -> list[str]:
        """Names declared in the ``parameters`` block, in order (from ``stanc --info`` of this program)."""
        if self._param_names is None:
            if self.backend == "cmdstanpy":
                info = self._cmdstan_model.src_info()
            else:
                info = _stanc_info_httpstan(self.code)
            self._param_names = list(info.get("parameters", {}))
        return list(self._param_names)

    def parameter_shapes(self, data: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """Shapes of the parameters for these data, in declaration order, as the compiled model reports them.

        httpstan: the model's ``get_dims``; CmdStan: the variables of a one-draw
        ``fixed_param`` run (cached per set of integer data, which fixes every size).
        """
        data = _as_stan_data(data)
        names = self.parameter_names()
        if self.backend == "httpstan":
            mod = self._services()
            dims = dict(zip(mod.get_param_names(data), mod.get_dims(data)))
            return {n: tuple(int(x) for x in dims[n]) for n in names}
        key = _size_key(data)
        if key not in self._shape_cache:
            with _quiet_cmdstanpy():
                fit = self._cmdstan_model.sample(data=_json_ready(data), fixed_param=True, chains=1, iter_sampling=1,
                                                 iter_warmup=0, adapt_engaged=False, show_progress=False, seed=1)
            vars_ = fit.metadata.stan_vars
            # zero-size variables have no output columns: shape (0,)
            self._shape_cache[key] = {n: tuple(int(x) for x in vars_[n].dimensions) if n in vars_ else (0,)
                                      for n in names}
        return dict(self._shape_cache[key])

    def num_unconstrained(self, data: Mapping[str, Any]) -> int:
        """Number of unconstrained parameters for these data.

        The total size of the parameters (:meth:`parameter_shapes`): exact
        unless the program declares simplex, correlation, Cholesky-factor or
        other constrained container types (pydial's programs do not).
        """
        return int(sum(int(np.prod(s)) for s in self.parameter_shapes(data).values()))

    def unconstrain(self, data: Mapping[str, Any], values: Mapping[str, Any]) -> np.ndarray:
        """Unconstrained vector of named parameter values.

        httpstan: the model's own ``transform_inits``.  CmdStan: each
        parameter flattened column-major in declaration order, which is Stan's
        unconstrained vector for parameters of unconstrained types that are not
        arrays of vectors or matrices (all of pydial's programs; the tests check
        it against httpstan).
        """
        data = _as_stan_data(data)
        shapes = self.parameter_shapes(data)
        missing = [n for n, sh in shapes.items() if n not in values and int(np.prod(sh)) > 0]
        if missing:
            raise KeyError(f"{self.name}: no values for the parameters {missing}")
        values = {n: values.get(n, np.zeros(shapes[n])) for n in shapes}
        if self.backend == "httpstan":
            ctx = {n: np.asarray(values[n], float).reshape(shapes[n]) for n in shapes}
            return np.asarray(self._services().transform_inits(data, _json_ready(_as_stan_data(ctx))), float)
        parts = [np.asarray(values[n], float).reshape(shapes[n]).ravel(order="F") for n in shapes]
        return np.concatenate(parts) if parts else np.zeros(0)

    def _split(self, data: Mapping[str, Any], u: np.ndarray) -> dict[str, np.ndarray]:
        """Named parameter values of an unconstrained vector, column-major (see :meth:`unconstrain`)."""
        out, pos = {}, 0
        u = np.asarray(u, float).ravel()
        for n, shape in self.parameter_shapes(data).items():
            size = int(np.prod(shape))
            out[n] = u[pos:pos + size].reshape(shape, order="F")
            pos += size
        if pos != u.size:
            raise ValueError(f"{self.name}: the unconstrained vector has {u.size} entries, the parameters {pos}")
        return out

    def _inits(self, data: Mapping[str, Any], u: np.ndarray) -> dict[str, Any]:
        """Named values for CmdStan (zero-size parameters left out: CmdStan cannot read their shape)."""
        return {k: v.tolist() for k, v in self._split(data, u).items() if v.size}

    def _cmdstan_log_prob(self, data: Mapping[str, Any], u: np.ndarray, jacobian: bool) -> tuple[float, np.ndarray]:
        with _quiet_cmdstanpy():
            df = self._cmdstan_model.log_prob(self._inits(data, u), data=_json_ready(data), jacobian=jacobian,
                                              sig_figs=18)
        row = df.iloc[0].to_numpy(dtype=float)
        return float(row[0]), row[1:]

    # ---------------------------------------------------------------- log density
    def log_prob(self, data: Mapping[str, Any], u: Sequence[float], *, jacobian: bool = False) -> float:
        """``log p(u)`` on the unconstrained scale (default: without the Jacobian adjustment).

        Note that with httpstan, ``~`` statements drop constants (``propto``); the
        pydial programs only use ``target +=``, which keeps them.
        """
        data = _as_stan_data(data)
        u = np.asarray(u, dtype=float).ravel()
        if self.backend == "httpstan":
            try:
                return float(self._services().log_prob(data, u.tolist(), bool(jacobian)))
            except RuntimeError as e:
                raise StanBackendError(f"{self.name}: log_prob failed: {e}") from e
        return self._cmdstan_log_prob(data, u, jacobian)[0]

    def grad_log_prob(self, data: Mapping[str, Any], u: Sequence[float], *, jacobian: bool = False) -> np.ndarray:
        """Gradient of :meth:`log_prob` with respect to the unconstrained parameters."""
        data = _as_stan_data(data)
        u = np.asarray(u, dtype=float).ravel()
        if self.backend == "httpstan":
            try:
                return np.asarray(self._services().log_prob_grad(data, u.tolist(), bool(jacobian)), dtype=float)
            except RuntimeError as e:
                raise StanBackendError(f"{self.name}: log_prob_grad failed: {e}") from e
        return self._cmdstan_log_prob(data, u, jacobian)[1]

    def constrain(self, data: Mapping[str, Any], u: Sequence[float], *, include_tparams: bool = True,
                  include_gqs: bool = False) -> dict[str, np.ndarray]:
        """Named constrained values (and transformed parameters, generated quantities) at unconstrained ``u``.

        httpstan: the model's ``write_array`` in-process.  CmdStan: the
        parameters from :meth:`unconstrain`'s layout; transformed parameters and
        generated quantities from one ``fixed_param`` draw at those values.
        """
        data = _as_stan_data(data)
        u = np.asarray(u, float).ravel()
        if self.backend != "httpstan":
            params = self._split(data, u)
            if not (include_tparams or include_gqs):
                return params
            with _quiet_cmdstanpy():
                fit = self._cmdstan_model.sample(data=_json_ready(data), fixed_param=True, chains=1, iter_sampling=1,
                                                 iter_warmup=0, adapt_engaged=False, show_progress=False, seed=1, sig_figs=18,
                                                 inits={k: v.tolist() for k, v in params.items() if v.size})
            info = self._cmdstan_model.src_info()
            want = (list(info.get("transformed parameters", {})) if include_tparams else []) + \
                (list(info.get("generated quantities", {})) if include_gqs else [])
            out = dict(params)
            for n in want:  # zero-size variables have no output columns
                out[n] = np.asarray(fit.stan_variable(n), float)[0] if n in fit.metadata.stan_vars else np.zeros(0)
            return out
        mod = self._services()
        flat = np.asarray(mod.write_array(data, u.tolist(), include_tparams, include_gqs))
        names = mod.get_param_names(data)
        dims = mod.get_dims(data)
        out, pos = {}, 0
        for n, d in zip(names, dims):
            size = int(np.prod(d)) if d else 1
            if pos + size > flat.size:
                break
            out[n] = flat[pos : pos + size].reshape(tuple(d), order="F") if d else flat[pos]
            pos += size
        return out

    # ---------------------------------------------------------------- optimize
    def optimize(
        self,
        data: Mapping[str, Any],
        init: Sequence[float] | None = None,
        *,
        seed: int | None = None,
        fixed: Sequence[bool] | None = None,
        bounds: Sequence[tuple[float | None, float | None]] | None = None,
        gtol: float = 1e-8,
        max_iter: int = 20_000,
        method: str | None = None,
    ) -> OptimizeResult:
        """Maximize ``log_prob`` (no Jacobian) over the unconstrained parameters.

        Parameters
        ----------
        data : mapping
            Stan data.
        init : sequence of float, optional
            Start on the unconstrained scale; default uniform(-2, 2) draws from
            ``numpy.random.default_rng(seed)`` (Stan's own default).
        seed : int, optional
            Seed of the default start and of CmdStan.
        fixed : sequence of bool, optional
            Coordinates held at ``init`` (e.g. the LLM block in the second stage
            of eq. staged-calibrated-estimator).  httpstan only (scipy path);
            on CmdStan pass fixed coordinates as data.
        bounds : sequence of (low, high), optional
            Box on the unconstrained coordinates (scipy path only).
        gtol : float
            Relative gradient tolerance: converged when the max-norm of the
            (projected) gradient of ``log_prob`` is at most
            ``gtol * max(1, |log_prob|)`` (scipy path; also its stopping rule).
            CmdStan gets ``tol_grad = gtol``.
        max_iter : int
            Iteration budget.
        method : {"scipy", "cmdstan"} or None
            Force the optimizer; default CmdStan's L-BFGS on the cmdstanpy
            backend (stopping on the gradient test alone) and scipy
            L-BFGS-B on exact in-process gradients on httpstan.
        """
        data = _as_stan_data(data)
        n = self.num_unconstrained(data)
        rng = np.random.default_rng(seed)
        u0 = rng.uniform(-2, 2, size=n) if init is None else np.asarray(init, dtype=float).ravel().copy()
        if u0.size != n:
            raise ValueError(f"init has {u0.size} entries; program {self.name!r} has {n} unconstrained parameters")
        if method is None:
            method = "cmdstan" if self.backend == "cmdstanpy" else "scipy"
        if self.backend == "cmdstanpy" and method == "scipy":
            raise StanBackendError(
                "on CmdStan every log density is a subprocess, so pydial does not run scipy on it: hold "
                "coordinates fixed by passing them as data (dial.stan's fix_llm), or use backend='httpstan'")
        if method == "cmdstan" and (fixed is not None or bounds is not None):
            raise ValueError("fixed and bounds need method='scipy' (httpstan)")
        if method == "cmdstan":
            return self._optimize_cmdstan(data, u0, seed, gtol, max_iter)
        if method != "scipy":
            raise ValueError(f"method must be 'scipy', 'cmdstan' or None, got {method!r}")
        return self._optimize_scipy(data, u0, fixed, bounds, gtol, max_iter)

    def _optimize_scipy(self, data, u0, fixed, bounds, gtol, max_iter) -> OptimizeResult:
        from scipy.optimize import minimize

        free = np.ones(u0.size, bool) if fixed is None else ~np.asarray(fixed, bool)
        if free.size != u0.size:
            raise ValueError(f"fixed has {free.size} entries, expected {u0.size}")
        nfev = [0]

        def full(x: np.ndarray) -> np.ndarray:
            u = u0.copy()
            u[free] = x
            return u

        def fg(x: np.ndarray) -> tuple[float, np.ndarray]:
            u = full(x)
            nfev[0] += 1
            lp = self.log_prob(data, u)
            if not np.isfinite(lp):
                return np.inf, np.zeros(x.size)
            g = self.grad_log_prob(data, u)
            return -lp, -g[free]

        bnds = None if bounds is None else [b for b, f in zip(bounds, free) if f]
        t0 = time.perf_counter()
        # L-BFGS-B's small dense algebra is ~100x slower with multi-threaded OpenBLAS on a
        # loaded machine; one BLAS thread (as pydial.optim does for the numpy engine).
        with _one_blas_thread():
            x, res = u0[free], None
            # The verdict below is relative to |log p| at the end point, which L-BFGS-B
            # cannot know: run with half that tolerance measured at the current point,
            # and restart from the end point (fresh curvature pairs; also after a failed
            # line search) until the verdict holds, at most four runs.
            for _ in range(4):
                scale = max(1.0, abs(fg(x)[0]))
                options = {"maxiter": max_iter, "maxfun": 5 * max_iter, "gtol": 0.5 * gtol * scale, "ftol": 0.0,
                           "maxcor": 30}
                res = minimize(fg, x, jac=True, method="L-BFGS-B", bounds=bnds, options=options)
                x = res.x
                g_end = float(np.max(np.abs(res.jac))) if res.jac.size else 0.0
                if g_end <= gtol * max(1.0, abs(float(res.fun))) or res.nit >= max_iter:
                    break
        secs = time.perf_counter() - t0
        u = full(res.x)
        lp = self.log_prob(data, u)
        g = self.grad_log_prob(data, u)[free]
        if bnds is not None:  # projected gradient at active bounds
            lo = np.array([-np.inf if b[0] is None else b[0] for b in bnds])
            hi = np.array([np.inf if b[1] is None else b[1] for b in bnds])
            g = np.where((res.x <= lo) & (g < 0) | (res.x >= hi) & (g > 0), 0.0, g)
        gnorm = float(np.max(np.abs(g))) if g.size else 0.0
        # L-BFGS-B stops on a small projected gradient, on a relative decrease of f below
        # ftol, or on a failed line search (ABNORMAL) when round-off dominates near the
        # optimum.  The verdict is the gradient test alone, relative to the size of log p
        # (a sum over all comparisons, whose gradient carries that much round-off).
        # as on the CmdStan path: a failed line search (ABNORMAL), or no resolvable decrease of f
        # at all, within ROUNDOFF_FACTOR of the tolerance has reached the resolution of log p
        stalled = "ABNORMAL" in str(res.message) or "RELATIVE REDUCTION OF F" in str(res.message)
        converged = gnorm <= gtol * max(1.0, abs(float(lp))) * (ROUNDOFF_FACTOR if stalled else 1.0)
        return OptimizeResult(u=u, log_prob=float(lp), grad_norm=gnorm, converged=converged,
                              message=str(res.message), iterations=int(res.nit), evaluations=nfev[0],
                              backend=self.backend, seconds=secs)

    def _optimize_cmdstan(self, data, u0, seed, gtol, max_iter) -> OptimizeResult:
        u = u0
        lp, g = self._cmdstan_log_prob(data, u, False)
        t0 = time.perf_counter()
        vals: dict[str, np.ndarray] = {}
        message = "CmdStan L-BFGS"
        # Stop on the gradient alone (CmdStan's relative-objective and parameter tests would
        # stop early) at a quarter of the verdict's tolerance |grad| <= gtol |log p|; as on the
        # scipy path, restart from the end point (fresh curvature pairs, also after a failed
        # line search near the optimum) until the verdict holds, at most four runs.
        for _ in range(4):
            with _quiet_cmdstanpy():
                mle = self._cmdstan_model.optimize(
                    data=_json_ready(data), inits=self._inits(data, u), seed=seed, jacobian=False, algorithm="lbfgs",
                    iter=max_iter, tol_obj=1e-300, tol_rel_obj=1e-300, tol_grad=0.25 * gtol * max(1.0, abs(lp)),
                    tol_rel_grad=1e-300, tol_param=1e-300, history_size=30, require_converged=False, sig_figs=18,
                    show_console=False)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # cmdstanpy's notice about scalars becoming arrays
                    vals = {k: np.asarray(v, float) for k, v in mle.stan_variables().items()}
                    ok = bool(mle.converged)
            u = self.unconstrain(data, vals)
            lp, g = self._cmdstan_log_prob(data, u, False)
            if not ok:
                message = "CmdStan L-BFGS: line search failed or iteration limit"
            gnorm = float(np.max(np.abs(g))) if g.size else 0.0
            if gnorm <= gtol * max(1.0, abs(lp)):
                break
        secs = time.perf_counter() - t0
        # A line search that fails within ROUNDOFF_FACTOR of the tolerance has hit the
        # resolution of log p itself (the decrease g^2 / (2 h) left is below |log p| eps).
        tol = gtol * max(1.0, abs(lp)) * (1.0 if ok else ROUNDOFF_FACTOR)
        return OptimizeResult(u=u, log_prob=lp, grad_norm=gnorm, converged=gnorm <= tol,
                              message=message, iterations=-1, evaluations=-1, backend=self.backend, seconds=secs,
                              values=vals)

    # ---------------------------------------------------------------- sample
    def sample(
        self,
        data: Mapping[str, Any],
        *,
        chains: int = 4,
        draws: int = 1000,
        warmup: int = 1000,
        seed: int | None = None,
        inits: Sequence[Mapping[str, Any]] | None = None,
        adapt_delta: float = 0.8,
        max_depth: int = 10,
        refresh: int | None = None,
        quiet: bool = True,
        progress: bool | None = None,
    ) -> SampleResult:
        """Run NUTS (diagonal metric, adapted) and return the draws.

        ``inits`` gives one dict of constrained parameter values per chain
        (default: Stan's uniform(-2, 2) on the unconstrained scale).
        ``refresh`` is the sampler's progress interval (iterations) and
        ``quiet=True`` keeps the backends' progress output and log messages
        off the console.  ``progress`` shows a ``tqdm`` bar instead of the
        backends' progress lines (default: only when stderr is a terminal):
        one bar over all chains' iterations with httpstan, cmdstanpy's
        ``tqdm`` bar per chain with CmdStan.  With httpstan the fit that pystan stores in
        httpstan's cache is deleted afterwards (the draws are returned here;
        the cache would otherwise grow by the size of every run).
        Diagnostics are not checked here; call :meth:`SampleResult.check`.
        """
        for nm, v in (("chains", chains), ("draws", draws)):
            if int(v) < 1:
                raise ValueError(f"{nm} must be >= 1, got {v!r}")
        if int(warmup) < 0:
            raise ValueError(f"warmup must be >= 0, got {warmup!r}")
        if inits is not None and len(inits) != chains:
            raise ValueError(f"inits must give one dict per chain ({chains}), got {len(inits)}")
        data = _as_stan_data(data)
        if progress is None:
            import sys

            progress = sys.stderr.isatty()
        t0 = time.perf_counter()
        if self.backend == "httpstan":
            d, s = _outside_event_loop(self._sample_httpstan, data, chains, draws, warmup, seed, inits,
                                       adapt_delta, max_depth, refresh, quiet, progress)
        else:
            d, s, fit = self._sample_cmdstan(data, chains, draws, warmup, seed, inits, adapt_delta, max_depth,
                                             refresh, quiet, progress)
        return SampleResult(draws=d, stats=s, chains=chains, draws_per_chain=draws, warmup=warmup, seed=seed,
                            max_depth=max_depth, backend=self.backend, seconds=time.perf_counter() - t0,
                            backend_fit=fit if self.backend == "cmdstanpy" else None)

    def _sample_httpstan(self, data, chains, draws, warmup, seed, inits, adapt_delta, max_depth, refresh,
                         quiet=True, progress=False):
        import contextlib

        before = set(httpstan_fit_files(self.model_name))
        sink = _ProgressSink(chains * (draws + warmup), self.name) if progress else io.StringIO()
        ctx = (contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink)) if quiet or progress else ()
        done = time.time()
        try:
            with contextlib.ExitStack() as stack:
                if progress:
                    stack.callback(sink.close)
                for c in ctx:
                    stack.enter_context(c)
                for attempt in range(3):
                    try:
                        out = self._sample_httpstan_run(data, chains, draws, warmup, seed, inits, adapt_delta,
                                                        max_depth, refresh)
                        break
                    except RuntimeError as e:
                        # another process removed the cached fit between its write and pystan's read;
                        # a seeded run is deterministic, so running it again gives the same draws
                        if "not found" not in str(e) or attempt == 2:
                            raise
                done = time.time()
                return out
        finally:  # pystan keeps every seeded fit in httpstan's cache: remove the ones made here
            for f in set(httpstan_fit_files(self.model_name)) - before:
                _unlink_if_older(f, done)

    def _sample_httpstan_run(self, data, chains, draws, warmup, seed, inits, adapt_delta, max_depth, refresh):
        import stan

        post = stan.build(self.code, data=_json_ready(data), random_seed=None if seed is None else int(seed))
        kw: dict[str, Any] = dict(num_chains=chains, num_samples=draws, num_warmup=warmup, delta=adapt_delta,
                                  max_depth=max_depth)
        if refresh is not None:
            kw["refresh"] = refresh
        if inits is not None:
            kw["init"] = [_json_ready(_as_stan_data(i)) for i in inits]
        fit = post.sample(**kw)
        if fit is None:  # pystan returns None on KeyboardInterrupt
            raise StanBackendError("sampling was interrupted")

        def reshape(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
            # pystan stacks draws with the chain index varying fastest: column m = draw * chains + chain
            a = np.asarray(arr, dtype=float).reshape(*shape, draws, chains) if shape else \
                np.asarray(arr, dtype=float).reshape(draws, chains)
            return np.moveaxis(np.moveaxis(a, -1, 0), -1, 1)

        out = {}
        for name, dims in zip(fit.param_names, fit.dims):
            out[name] = reshape(fit[name], tuple(dims))
        stats = {name: reshape(fit[name], ()) for name in fit.sample_and_sampler_param_names}
        return out, stats

    def _sample_cmdstan(self, data, chains, draws, warmup, seed, inits, adapt_delta, max_depth, refresh, quiet=True,
                        progress=False):
        import contextlib

        with (_quiet_cmdstanpy() if quiet else contextlib.nullcontext()):
            fit = self._sample_cmdstan_fit(data, chains, draws, warmup, seed, inits, adapt_delta, max_depth, refresh,
                                           progress)
        out = {}
        for name in fit.metadata.stan_vars:
            v = np.asarray(fit.stan_variable(name), dtype=float)  # (chains * draws, *shape), chain-major
            out[name] = v.reshape(chains, draws, *v.shape[1:])
        stats = {name: np.asarray(v, float).reshape(draws, chains).T
                 for name, v in ((n, fit.draws()[:, :, i]) for i, n in enumerate(fit.column_names) if n.endswith("__"))}
        return out, stats, fit

    def _sample_cmdstan_fit(self, data, chains, draws, warmup, seed, inits, adapt_delta, max_depth, refresh,
                            progress=False):
        return self._cmdstan_model.sample(
            data=_json_ready(data), chains=chains, parallel_chains=min(chains, os.cpu_count() or 1), seed=seed,
            iter_warmup=warmup, iter_sampling=draws, adapt_delta=adapt_delta, max_treedepth=max_depth,
            inits=None if inits is None else [_json_ready(_as_stan_data(i)) for i in inits],
            show_progress=bool(progress), refresh=refresh, sig_figs=18,
        )


class _ProgressSink(io.StringIO):
    """Stand-in for stdout/stderr during pystan's sampling: swallows its output and
    moves one ``tqdm`` bar from its ``Sampling: x% (done/total)`` lines."""

    _ITER = re.compile(r"\((\d+)/(\d+)\)")

    def __init__(self, total: int, name: str) -> None:
        import sys

        from tqdm.auto import tqdm

        super().__init__()
        self.bar = tqdm(total=total, desc=f"sampling {Path(name).stem}", file=sys.stderr, leave=False,
                        mininterval=0.5)

    def write(self, text: str) -> int:
        m = None
        for m in self._ITER.finditer(text):
            pass
        if m is not None:
            self.bar.update(max(int(m.group(1)) - self.bar.n, 0))
        return len(text)

    def close(self) -> None:
        self.bar.refresh()
        self.bar.close()
        super().close()


def _unlink_if_older(f: Path, t: float) -> None:
    """Delete ``f`` unless it was written after time ``t`` (by a concurrent run)."""
    try:
        if f.stat().st_mtime <= t + 1.0:
            f.unlink(missing_ok=True)
    except FileNotFoundError:
        pass


def httpstan_fit_files(model_name: str = "") -> list[Path]:
    """Fit files in httpstan's cache (of one model, or of all models when ``model_name`` is empty).

    pystan stores every fit made with a random seed there
    (``~/.cache/httpstan/<version>/models/<model>/fits/``); pydial deletes the
    ones its own runs create.
    """
    try:
        import httpstan.cache
    except ImportError:
        return []
    if model_name:
        dirs = [httpstan.cache.model_directory(model_name) / "fits"]
    else:
        root = httpstan.cache.cache_directory() / "models"
        dirs = [p / "fits" for p in root.iterdir()] if root.is_dir() else []
    return [f for d in dirs if d.is_dir() for f in d.iterdir() if f.is_file()]


def _quiet_cmdstanpy() -> Any:
    """Silence cmdstanpy's logger (pydial reports convergence and errors itself)."""
    import contextlib
    import logging

    @contextlib.contextmanager
    def quiet():
        try:  # cmdstanpy configures its logger on first use (level DEBUG): do that first, then silence it
            from cmdstanpy.utils import get_logger

            log = get_logger()
        except ImportError:  # pragma: no cover
            log = logging.getLogger("cmdstanpy")
        level = log.level
        log.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            log.setLevel(level)

    return quiet()


def _size_key(data: Mapping[str, Any]) -> tuple:
    """The integer data, which fix every size of a Stan program's variables."""
    out = []
    for k in sorted(data):
        v = np.asarray(data[k])
        if np.issubdtype(v.dtype, np.integer):
            out.append((k, v.shape, v.tobytes()))
    return tuple(out)


_STANC_INFO: dict[str, dict] = {}


def _stanc_info_httpstan(code: str) -> dict:
    """``stanc --info`` of a program with the stanc binary of httpstan (declarations by block)."""
    import importlib.resources
    import json
    import subprocess
    import tempfile

    key = hashlib.sha256(code.encode()).hexdigest()
    if key not in _STANC_INFO:
        with importlib.resources.path("httpstan", "stanc") as stanc, tempfile.TemporaryDirectory() as tmp:
            f = Path(tmp) / "program.stan"
            f.write_text(code)
            out = subprocess.run([str(stanc), "--info", str(f)], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise StanCompileError(f"stanc --info failed:\n{out.stderr}")
        _STANC_INFO[key] = json.loads(out.stdout)
    return _STANC_INFO[key]


# --------------------------------------------------------------------------- compile
_COMPILED: dict[tuple[str, str], CompiledModel] = {}
_LOCK = threading.Lock()
_SERVICES: dict[str, Any] = {}
_SERVICE_FUNCTIONS = ("log_prob", "log_prob_grad", "write_array", "transform_inits", "get_param_names", "get_dims")


def _load_services(model_name: str) -> Any:
    """The functions of a compiled httpstan model, loaded once per process.

    Every httpstan model is an extension module named ``stan_services``.  CPython
    re-imports a single-phase extension module that was loaded before by updating
    the object ``sys.modules["stan_services"]`` in place, so a module object kept
    from a re-import would silently switch to the last model imported (by pydial,
    or by pystan's server when it builds or samples another model).  The function
    objects are therefore captured right after import, and the shared entry is
    removed from ``sys.modules``.
    """
    import types

    import httpstan.models

    fns = _SERVICES.get(model_name)
    if fns is None:
        mod = httpstan.models.import_services_extension_module(model_name)
        fns = types.SimpleNamespace(**{n: getattr(mod, n) for n in _SERVICE_FUNCTIONS}, model_name=model_name)
        import sys

        if sys.modules.get("stan_services") is mod:
            del sys.modules["stan_services"]
        _SERVICES[model_name] = fns
    return fns


def _stanc_retry(fn: Callable[..., T], *args: Any, attempts: int = 8) -> T:
    """Call ``fn``, again when httpstan's stanc run exceeds its fixed 1-second timeout (a loaded machine)."""
    import subprocess

    for k in range(attempts):
        try:
            return fn(*args)
        except subprocess.TimeoutExpired:
            if k == attempts - 1:
                raise
            time.sleep(1.0 + k)
    raise AssertionError("unreachable")


def _httpstan_module_exists(model_name: str) -> bool:
    from importlib.machinery import EXTENSION_SUFFIXES

    import httpstan.cache

    d = httpstan.cache.model_directory(model_name)
    return d.is_dir() and any(p.suffix in EXTENSION_SUFFIXES for p in d.iterdir())


def _compile_httpstan(name: str, code: str) -> CompiledModel:
    import httpstan.cache
    import httpstan.compile
    import httpstan.models

    model_name = httpstan.models.calculate_model_name(code)
    stan_model_name = f"model_{model_name.split('/')[1]}"
    if _httpstan_module_exists(model_name):
        # compiled before (the cache key is a hash of the text): no stanc run, whose fixed
        # 1-second timeout in httpstan a loaded machine can exceed
        module = _load_services(model_name)
        # pystan's cache lookup reads these two files beside the module
        mdir = httpstan.cache.model_directory(model_name)
        if not (mdir / "stderr.log").is_file():
            httpstan.cache.dump_services_extension_module_compiler_output("", model_name)
        if not (mdir / "stanc.log").is_file():
            httpstan.cache.dump_stanc_warnings("", model_name)
        return CompiledModel(name=name, code=code, backend="httpstan", compile_seconds=0.0, cached=True,
                             stanc_warnings="", model_name=model_name, _module=module)
    try:
        _, warn = _stanc_retry(httpstan.compile.compile, code, stan_model_name)
    except ValueError as e:
        raise StanCompileError(f"Stan program {name!r} failed to compile (stanc):\n{e}") from None
    httpstan.cache.delete_model_directory(model_name)
    t0 = time.perf_counter()
    try:
        out = _stanc_retry(lambda: _outside_event_loop(asyncio.run,
                                                       httpstan.models.build_services_extension_module(code)))
    except Exception as e:  # C++ compiler or linker failure
        raise StanCompileError(f"Stan program {name!r} failed to build with the C++ compiler: {e!r}") from e
    secs = time.perf_counter() - t0
    # What pystan's cache lookup expects beside the module.  The stanc warnings are the
    # pedantic-mode ones (priors switched by data look "missing"); they are kept on
    # CompiledModel.stanc_warnings instead of being printed by pystan at every build.
    httpstan.cache.dump_services_extension_module_compiler_output(out, model_name)
    httpstan.cache.dump_stanc_warnings("", model_name)
    module = _load_services(model_name)
    return CompiledModel(name=name, code=code, backend="httpstan", compile_seconds=secs, cached=False,
                         stanc_warnings=warn, model_name=model_name, _module=module)


def _compile_cmdstan(name: str, code: str) -> CompiledModel:
    import cmdstanpy

    digest = hashlib.sha256((code + cmdstanpy.cmdstan_path()).encode()).hexdigest()[:16]
    d = _cmdstan_cache_dir() / digest
    d.mkdir(parents=True, exist_ok=True)
    stan_file = d / f"{Path(name).stem}.stan"
    if not stan_file.is_file() or stan_file.read_text() != code:
        stan_file.write_text(code)
    exe = stan_file.with_suffix(".exe" if os.name == "nt" else "")
    cached = exe.is_file()
    t0 = time.perf_counter()
    try:
        with _quiet_cmdstanpy():  # pydial announces the compilation in one line itself
            model = cmdstanpy.CmdStanModel(stan_file=str(stan_file), exe_file=str(exe) if cached else None)
    except (ValueError, RuntimeError) as e:
        raise StanCompileError(f"Stan program {name!r} failed to compile (CmdStan):\n{e}") from None
    return CompiledModel(name=name, code=code, backend="cmdstanpy", compile_seconds=0.0 if cached else time.perf_counter() - t0,
                         cached=cached, exe_file=str(model.exe_file), _cmdstan_model=model)


def compile_model(program: str, *, backend: str | None = None, code: str | None = None) -> CompiledModel:
    """Compile (or load from the cache) one of pydial's Stan programs.

    Parameters
    ----------
    program : str
        A name in :data:`pydial.stan.programs.PROGRAMS` (``"dial"``,
        ``"dial_sample"``, ``"judges"``) or a path to a ``.stan`` file.
    backend : {"cmdstanpy", "httpstan"} or None
        See :func:`stan_backend`.
    code : str, optional
        Program text to compile under the name ``program`` instead of reading
        the file (used by tests).

    Returns
    -------
    CompiledModel
        ``compile_seconds`` is 0 and ``cached`` is True when no compilation was needed.

    Raises
    ------
    StanCompileError
        stanc or the C++ compiler rejected the program; the message has their output.
    """
    be = stan_backend(backend)
    text = program_code(program) if code is None else code
    if code is None:
        program_path(program)  # validates the name
    key = (be, hashlib.sha256(text.encode()).hexdigest())
    with _LOCK:
        if key in _COMPILED:
            return _COMPILED[key]
        if not _is_compiled(be, program, text):
            _announce_compile(program, be)
        cm = _compile_httpstan(program, text) if be == "httpstan" else _compile_cmdstan(program, text)
        _COMPILED[key] = cm
        return cm


def _is_compiled(backend: str, name: str, code: str) -> bool:
    """Whether the program is in the backend's on-disk cache (no compilation needed)."""
    if backend == "httpstan":
        import httpstan.models

        return _httpstan_module_exists(httpstan.models.calculate_model_name(code))
    import cmdstanpy

    digest = hashlib.sha256((code + cmdstanpy.cmdstan_path()).encode()).hexdigest()[:16]
    exe = (_cmdstan_cache_dir() / digest / Path(name).stem).with_suffix(".exe" if os.name == "nt" else "")
    return exe.is_file()


def _announce_compile(name: str, backend: str) -> None:
    """One line on stderr before a compilation (it takes a while and is silent otherwise)."""
    import logging
    import sys

    msg = (f"pydial: compiling the Stan program {Path(name).name!r} with "
           f"{'CmdStan' if backend == 'cmdstanpy' else 'the Stan bundled with httpstan'} "
           "(about a minute the first time; cached afterwards)")
    log = logging.getLogger("pydial.stan")
    if log.hasHandlers() and log.getEffectiveLevel() <= logging.INFO:
        log.info(msg)
    else:
        print(msg, file=sys.stderr, flush=True)


def _compile_in_subprocess(program: str, backend: str) -> float:
    return compile_model(program, backend=backend).compile_seconds


def precompile(programs: Sequence[str] | None = None, *, backend: str | None = None,
               processes: int | None = None) -> dict[str, CompiledModel]:
    """Compile several programs, in parallel processes, and load them here.

    Each compilation takes one core (about 1-3 minutes with the bundled Stan);
    programs already in the cache are only loaded.  Returns name -> model;
    each model's ``compile_seconds`` is the time its own compilation took.
    """
    be = stan_backend(backend)
    names = list(PROGRAMS) if programs is None else list(programs)
    todo = []
    for n in names:
        text = program_code(n)
        if (be, hashlib.sha256(text.encode()).hexdigest()) in _COMPILED:
            continue
        if be == "httpstan":
            import httpstan.models

            if _httpstan_module_exists(httpstan.models.calculate_model_name(text)):
                continue
        todo.append(n)
    secs: dict[str, float] = {}
    if len(todo) > 1:
        import multiprocessing as mp

        workers = min(len(todo), processes or os.cpu_count() or 1)
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
            futs = {n: ex.submit(_compile_in_subprocess, n, be) for n in todo}
            secs = {n: f.result() for n, f in futs.items()}
    out = {n: compile_model(n, backend=be) for n in names}
    for n, t in secs.items():
        out[n].compile_seconds = t
        out[n].cached = False
    return out


def _model(program: CompiledModel | str, backend: str | None = None) -> CompiledModel:
    return program if isinstance(program, CompiledModel) else compile_model(program, backend=backend)


# --------------------------------------------------------------------------- function interface
def log_prob(program: CompiledModel | str, data: Mapping[str, Any], unconstrained_params: Sequence[float], *,
             jacobian: bool = False, backend: str | None = None) -> float:
    """Log density of ``program`` at unconstrained parameters (no Jacobian by default)."""
    return _model(program, backend).log_prob(data, unconstrained_params, jacobian=jacobian)


def grad_log_prob(program: CompiledModel | str, data: Mapping[str, Any], unconstrained_params: Sequence[float], *,
                  jacobian: bool = False, backend: str | None = None) -> np.ndarray:
    """Gradient of :func:`log_prob` with respect to the unconstrained parameters."""
    return _model(program, backend).grad_log_prob(data, unconstrained_params, jacobian=jacobian)


def optimize(program: CompiledModel | str, data: Mapping[str, Any], init: Sequence[float] | None = None,
             seed: int | None = None, *, backend: str | None = None, **kwargs: Any) -> OptimizeResult:
    """Penalized MLE (no Jacobian) of ``program``; see :meth:`CompiledModel.optimize`."""
    return _model(program, backend).optimize(data, init, seed=seed, **kwargs)


def sample(program: CompiledModel | str, data: Mapping[str, Any], chains: int = 4, draws: int = 1000,
           warmup: int = 1000, seed: int | None = None, *, backend: str | None = None, **kwargs: Any) -> SampleResult:
    """NUTS draws of ``program``; see :meth:`CompiledModel.sample`."""
    return _model(program, backend).sample(data, chains=chains, draws=draws, warmup=warmup, seed=seed, **kwargs)
