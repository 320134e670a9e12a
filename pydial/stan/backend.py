"""Choose a Stan backend (CmdStan through ``cmdstanpy`` when it resolves, else httpstan), compile and run programs.

Each backend is a :class:`~pydial.stan.compiled.BackendModule`; one compiled model per backend and text per process.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from . import cmdstan_backend, httpstan_backend
from .compiled import BackendModule, CompiledModel, StanBackendError, StanCompileError, StanRuntimeError
from .programs import PROGRAMS, program_code
from .results import OptimizeResult, SampleResult, SamplerWarning
from pydial.exceptions import ArgumentError

__all__ = ["BACKENDS", "BACKEND_ENV", "INSTALL_WAYS", "StanCompileError", "StanBackendError", "StanRuntimeError",
           "SamplerWarning", "CompiledModel", "OptimizeResult", "SampleResult", "backend_available", "stan_backend",
           "announce_compile", "compile_model", "precompile", "log_prob", "grad_log_prob", "optimize", "sample"]

BACKEND_MODULES: dict[str, BackendModule] = {cmdstan_backend.NAME: cmdstan_backend, httpstan_backend.NAME: httpstan_backend}
"""Backend name to the module implementing it, in order of preference."""

BACKENDS: tuple[str, ...] = tuple(BACKEND_MODULES)
"""Backends in order of preference."""

BACKEND_ENV = "PYDIAL_STAN_BACKEND"
"""Environment variable naming the default backend (``cmdstanpy`` or ``httpstan``)."""

INSTALL_WAYS = ("CmdStan for cmdstanpy (`python -m cmdstanpy.install_cmdstan`, or set CMDSTAN to an installed "
                "CmdStan), or the Stan bundled with httpstan (`pip install \"pydial[httpstan]\"`; Linux and macOS)")
"""The two ways to install a Stan backend, as the errors name them."""

_INSTALL_HINT = {
    "cmdstanpy": ("backend 'cmdstanpy' was requested but no CmdStan installation was found (cmdstanpy.cmdstan_path() "
                  "failed); install it with `python -m cmdstanpy.install_cmdstan` or use backend='httpstan'"),
    "httpstan": ("backend 'httpstan' was requested but cannot run here; `pip install \"pydial[httpstan]\"` "
                 "(Linux and macOS, Python <= 3.12) or use backend='cmdstanpy'"),
}


def backend_available(name: str) -> bool:
    """Whether the named Stan backend can run here.

    Parameters
    ----------
    name : {"cmdstanpy", "httpstan"}
        A name in :data:`BACKENDS`.

    Returns
    -------
    bool
        CmdStan: ``cmdstanpy.cmdstan_path()`` resolves; httpstan: ``httpstan`` and ``pystan`` import.

    Raises
    ------
    ValueError
        ``name`` is not one of :data:`BACKENDS`.
    """
    if name not in BACKEND_MODULES:
        raise ArgumentError(f"backend must be one of {BACKENDS}, got {name!r}")
    return bool(BACKEND_MODULES[name].available())


def stan_backend(prefer: str | None = None) -> str:
    """Name of the Stan backend to use: ``"cmdstanpy"`` or ``"httpstan"``.

    Parameters
    ----------
    prefer : {"cmdstanpy", "httpstan"} or None
        A name forces that backend; ``None`` reads ``PYDIAL_STAN_BACKEND`` and, when it is unset,
        picks CmdStan when ``cmdstanpy.cmdstan_path()`` resolves, else httpstan's bundled Stan.

    Returns
    -------
    str
        The backend's name.

    Raises
    ------
    ValueError
        ``prefer`` (or, with ``None``, the environment variable) is not one of :data:`BACKENDS`.
    StanBackendError
        The forced backend (or, with ``None``, every backend) is unavailable; the message says how
        to install it.
    """
    source, allowed = "backend", f"{BACKENDS} or None"
    if prefer is None:
        prefer = os.environ.get(BACKEND_ENV) or None
        source, allowed = f"the environment variable {BACKEND_ENV}", f"{BACKENDS} (or unset)"
    if prefer is not None:
        if prefer not in BACKENDS:
            raise ArgumentError(f"{source} must be one of {allowed}, got {prefer!r}")
        if not backend_available(prefer):
            reason = httpstan_backend.unavailable_reason() if prefer == httpstan_backend.NAME else None
            raise StanBackendError(_INSTALL_HINT[prefer] + (f" ({reason})" if reason else ""))
        return prefer
    for name in BACKENDS:
        if backend_available(name):
            return name
    raise StanBackendError(f"no Stan backend is installed; install {INSTALL_WAYS}")


def announce_compile(name: str, backend: str) -> None:
    """Write one line before a compilation: to the logger ``pydial.stan`` (INFO) when it has handlers, else stderr."""
    msg = (f"pydial: compiling the Stan program {Path(name).name!r} with "
           f"{'CmdStan' if backend == 'cmdstanpy' else 'the Stan bundled with httpstan'} "
           "(about a minute the first time; cached afterwards)")
    log = logging.getLogger("pydial.stan")
    if log.hasHandlers() and log.getEffectiveLevel() <= logging.INFO:
        log.info(msg)
    else:
        print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- compile
_COMPILED: dict[tuple[str, str], CompiledModel] = {}
_LOCK = threading.Lock()


def _key(backend: str, code: str) -> tuple[str, str]:
    return backend, hashlib.sha256(code.encode()).hexdigest()


def compile_model(program: str, *, backend: str | None = None, code: str | None = None) -> CompiledModel:
    """Compile (or load from the cache) one of pydial's Stan programs.

    Parameters
    ----------
    program : str
        A name in :data:`pydial.stan.programs.PROGRAMS` or a path to a ``.stan`` file.
    backend : {"cmdstanpy", "httpstan"} or None
        See :func:`stan_backend`.
    code : str, optional
        Program text to compile under the name ``program`` instead of reading the file (tests).

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
    text = program_code(program) if code is None else code  # program_code validates the name
    key = _key(be, text)
    with _LOCK:
        if key not in _COMPILED:
            impl = BACKEND_MODULES[be]
            if not impl.is_compiled(program, text):
                announce_compile(program, be)
            _COMPILED[key] = impl.compile_program(program, text)
        return _COMPILED[key]


def _compile_in_subprocess(program: str, backend: str) -> float:
    return compile_model(program, backend=backend).compile_seconds


def precompile(programs: Sequence[str] | None = None, *, backend: str | None = None,
               processes: int | None = None) -> dict[str, CompiledModel]:
    """Compile several programs in parallel processes (one core and 1-3 minutes each), and load them here.

    Parameters
    ----------
    programs : sequence of str, optional
        Program names (default: all of :data:`pydial.stan.programs.PROGRAMS`); cached ones are only loaded.
    backend : {"cmdstanpy", "httpstan"} or None
        See :func:`stan_backend`.
    processes : int, optional
        Largest number of parallel compilations (default: the number of CPUs).

    Returns
    -------
    dict of str to CompiledModel
        Name to model; ``compile_seconds`` is the time its own compilation took (a copy of the model
        :func:`compile_model` keeps, which records no compilation).
    """
    be = stan_backend(backend)
    impl = BACKEND_MODULES[be]
    names = list(PROGRAMS) if programs is None else list(programs)
    todo = [n for n, text in zip(names, map(program_code, names)) if _key(be, text) not in _COMPILED
            and not impl.is_compiled(n, text)]
    secs: dict[str, float] = {}
    if len(todo) > 1:
        import multiprocessing as mp

        workers = min(len(todo), processes or os.cpu_count() or 1)
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
            futs = {n: ex.submit(_compile_in_subprocess, n, be) for n in todo}
            secs = {n: f.result() for n, f in futs.items()}
    out = {n: compile_model(n, backend=be) for n in names}
    # copies: the models cached for compile_model keep their own (load) record
    return {n: dataclasses.replace(cm, compile_seconds=secs[n], cached=False) if n in secs else cm
            for n, cm in out.items()}


def _model(program: CompiledModel | str, backend: str | None = None) -> CompiledModel:
    return program if isinstance(program, CompiledModel) else compile_model(program, backend=backend)


# --------------------------------------------------------------------------- function interface
def log_prob(program: CompiledModel | str, data: Mapping[str, Any], unconstrained_params: ArrayLike, *,
             jacobian: bool = False, backend: str | None = None) -> float:
    """:meth:`CompiledModel.log_prob` of ``program``, a compiled model or a name for :func:`compile_model` on ``backend``."""
    return _model(program, backend).log_prob(data, unconstrained_params, jacobian=jacobian)


def grad_log_prob(program: CompiledModel | str, data: Mapping[str, Any], unconstrained_params: ArrayLike, *,
                  jacobian: bool = False, backend: str | None = None) -> np.ndarray:
    """:meth:`CompiledModel.grad_log_prob` of ``program`` (as for :func:`log_prob`)."""
    return _model(program, backend).grad_log_prob(data, unconstrained_params, jacobian=jacobian)


def optimize(program: CompiledModel | str, data: Mapping[str, Any], init: ArrayLike | None = None,
             seed: int | None = None, *, backend: str | None = None, **kwargs: Any) -> OptimizeResult:
    """:meth:`CompiledModel.optimize` of ``program`` (as for :func:`log_prob`); ``kwargs`` go to the method."""
    return _model(program, backend).optimize(data, init, seed=seed, **kwargs)


def sample(program: CompiledModel | str, data: Mapping[str, Any], chains: int = 4, draws: int = 1000,
           warmup: int = 1000, seed: int | None = None, *, backend: str | None = None, **kwargs: Any) -> SampleResult:
    """:meth:`CompiledModel.sample` of ``program`` (as for :func:`log_prob`); ``kwargs`` go to the method."""
    return _model(program, backend).sample(data, chains=chains, draws=draws, warmup=warmup, seed=seed, **kwargs)
