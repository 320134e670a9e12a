"""The Stan bundled with httpstan (through ``httpstan`` and ``pystan``), a :class:`~pydial.stan.compiled.BackendModule`.

Models live in httpstan's cache, keyed by their text; log density, gradient and transforms run in-process, NUTS
through pystan.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import importlib.resources
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from .cache import build_dir, build_once, replace_dir
from .compiled import (CompiledModel, NutsDraws, StanBackendError, StanCompileError, StanRuntimeError, as_stan_data,
                       json_ready)

__all__ = ["NAME", "HttpstanModel", "available", "unavailable_reason", "bundled_pybind11", "is_compiled",
           "module_problem", "compile_program", "fit_files"]

NAME = "httpstan"
"""The backend's name in :data:`pydial.stan.backend.BACKENDS`."""

T = TypeVar("T")

_SERVICES: dict[str, Any] = {}
_SERVICE_FUNCTIONS = ("log_prob", "log_prob_grad", "write_array", "transform_inits", "get_param_names", "get_dims")


PYBIND11_FOR_PYTHON: dict[tuple[int, int], tuple[int, int]] = {(3, 13): (2, 12)}
"""Oldest pybind11 (httpstan bundles its own) whose modules load on a Python (3.13 removed ``_PyThreadState_UncheckedGet``)."""


def bundled_pybind11(httpstan_dir: Path) -> tuple[int, int] | None:
    """Version ``(major, minor)`` of the pybind11 headers inside an httpstan package directory (``None``: not found)."""
    header = httpstan_dir / "include" / "pybind11" / "detail" / "common.h"
    try:
        text = header.read_text()
    except OSError:
        return None
    found = [re.search(rf"#define PYBIND11_VERSION_{part}\s+(\d+)", text) for part in ("MAJOR", "MINOR")]
    return (int(found[0].group(1)), int(found[1].group(1))) if found[0] and found[1] else None


def unavailable_reason() -> str | None:
    """Return why httpstan's Stan cannot run here (not importable, or its pybind11 too old for this Python), or ``None``."""
    try:
        import httpstan
        import httpstan.models  # noqa: F401

        import stan  # noqa: F401
    except ImportError as exc:
        return f"pystan/httpstan are not importable ({exc})"
    py = sys.version_info[:2]
    need = max((v for k, v in PYBIND11_FOR_PYTHON.items() if py >= k), default=None)
    have = bundled_pybind11(Path(httpstan.__file__).parent)
    if need is not None and have is not None and have < need:
        return (f"httpstan {getattr(httpstan, '__version__', '?')} compiles models with pybind11 {have[0]}.{have[1]}, "
                f"whose modules do not load on Python {py[0]}.{py[1]} (pybind11 >= {need[0]}.{need[1]} is needed)")
    return None


def available() -> bool:
    """Return whether httpstan's Stan runs here (:func:`unavailable_reason` is ``None``)."""
    return unavailable_reason() is None


def _outside_event_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call ``fn`` here, or in a fresh thread when this thread runs an asyncio loop (pystan's ``asyncio.run`` refuses one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn(*args, **kwargs)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as ex:
        return ex.submit(fn, *args, **kwargs).result()


# --------------------------------------------------------------------------- httpstan's cache
def fit_files(model_name: str = "") -> list[Path]:
    """Return the fit files in httpstan's cache of ``model_name`` (all models when empty), which pydial deletes."""
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


def _module_file(model_name: str) -> Path | None:
    """Return the compiled extension module of ``model_name`` in httpstan's cache (``None``: there is none)."""
    import httpstan.cache

    d = httpstan.cache.model_directory(model_name)
    try:
        return next((p for p in d.iterdir() if p.suffix in EXTENSION_SUFFIXES), None)
    except (FileNotFoundError, NotADirectoryError):
        return None


def module_problem(model_name: str) -> str | None:
    """Return what is wrong with the cached module of ``model_name`` without loading it, or ``None``."""
    f = _module_file(model_name)
    if f is None:
        return "is missing"
    try:
        if f.stat().st_size == 0:
            return "is empty (0 bytes)"
    except FileNotFoundError:
        return "is missing"
    return None


def is_compiled(name: str, code: str) -> bool:
    """Return whether ``code`` is in httpstan's on-disk cache (keyed by the text alone; ``name`` is unused)."""
    import httpstan.models

    return module_problem(httpstan.models.calculate_model_name(code)) is None


def _load_services(model_name: str) -> Any:
    """Load a compiled model's functions once per process (captured at import: every module is ``stan_services``)."""
    import httpstan.models

    if model_name not in _SERVICES:
        mod = httpstan.models.import_services_extension_module(model_name)
        _SERVICES[model_name] = types.SimpleNamespace(**{n: getattr(mod, n) for n in _SERVICE_FUNCTIONS}, model_name=model_name)
        if sys.modules.get("stan_services") is mod:
            del sys.modules["stan_services"]
    return _SERVICES[model_name]


@functools.lru_cache(maxsize=None)
def _run_stanc_info(code: str) -> dict:
    """``stanc --info`` of a program with the stanc binary of httpstan (declarations by block), once per text."""
    with importlib.resources.as_file(importlib.resources.files("httpstan") / "stanc") as stanc, \
            tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "program.stan"
        f.write_text(code)
        out = subprocess.run([str(stanc), "--info", str(f)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise StanCompileError(f"stanc --info failed:\n{out.stderr}")
    return json.loads(out.stdout)


def _stanc_retry(fn: Callable[..., T], *args: Any, attempts: int = 8) -> T:
    """Call ``fn``, again when httpstan's stanc run exceeds its fixed 1-second timeout (a loaded machine)."""
    for k in range(attempts - 1):
        try:
            return fn(*args)
        except subprocess.TimeoutExpired:
            time.sleep(1.0 + k)
    return fn(*args)


# --------------------------------------------------------------------------- compile
def _build_child() -> None:
    """Build ``argv[1]``'s module into ``argv[2]`` and import it (the child process of :func:`_build`)."""
    import httpstan.cache
    import httpstan.models

    code = Path(sys.argv[1]).read_text()
    out = Path(sys.argv[2])
    httpstan.cache.model_directory = lambda model_name: out  # this process builds one model, into ``out``
    model_name = httpstan.models.calculate_model_name(code)
    log = _stanc_retry(lambda: asyncio.run(httpstan.models.build_services_extension_module(code)))
    httpstan.cache.dump_services_extension_module_compiler_output(str(log), model_name)
    httpstan.cache.dump_stanc_warnings("", model_name)
    httpstan.models.import_services_extension_module(model_name)


def _load_problem(model_name: str) -> str | None:
    """Load the cached module of ``model_name``; what is wrong with it when it cannot be loaded, else ``None``."""
    import httpstan.cache

    problem = module_problem(model_name)
    if problem is not None:
        return problem
    try:
        _load_services(model_name)
    except (ImportError, OSError) as e:
        return f"does not load ({type(e).__name__}: {e})"
    # pystan's cache lookup reads these two files beside the module
    mdir = httpstan.cache.model_directory(model_name)
    if not (mdir / "stderr.log").is_file():
        httpstan.cache.dump_services_extension_module_compiler_output("", model_name)
    if not (mdir / "stanc.log").is_file():
        httpstan.cache.dump_stanc_warnings("", model_name)
    return None


def _build(name: str, code: str, model_name: str) -> tuple[float, str]:
    """Run stanc, build the module aside (child process :func:`_build_child`), rename it into the cache, load it.

    Returns the build's seconds and stanc's warnings.
    """
    import httpstan.cache
    import httpstan.compile

    key = model_name.split("/")[1]
    try:
        _, warn = _stanc_retry(httpstan.compile.compile, code, f"model_{key}")
    except ValueError as e:
        raise StanCompileError(f"Stan program {name!r} failed to compile (stanc):\n{e}") from None
    target = httpstan.cache.model_directory(model_name)
    t0 = time.perf_counter()
    with build_dir(httpstan.cache.cache_directory(), key) as tmp:
        (tmp / "program.stan").write_text(code)
        (tmp / "work").mkdir()
        cmd = [sys.executable, "-c", "from pydial.stan.httpstan_backend import _build_child; _build_child()",
               str(tmp / "program.stan"), str(tmp / "model")]
        root = str(Path(__file__).resolve().parents[2])  # the directory holding this pydial, also when not installed
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))))
        run = subprocess.run(cmd, cwd=tmp / "work", env=env, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            said = "\n".join((run.stderr or run.stdout).strip().splitlines()[-30:])
            raise StanCompileError(f"Stan program {name!r} failed to build with the C++ compiler (httpstan):\n{said}")
        secs = time.perf_counter() - t0
        target.parent.mkdir(parents=True, exist_ok=True)
        replace_dir(tmp / "model", target)
    _SERVICES.pop(model_name, None)
    try:
        _load_services(model_name)
    except (ImportError, OSError) as e:
        raise StanBackendError(f"the Stan program {name!r} was built but its module in {str(target)!r} does "
                               f"not load: {e}") from None
    return secs, warn


def compile_program(name: str, code: str) -> HttpstanModel:
    """Compile a program with httpstan's Stan (``stanc_warnings`` kept), or load it from the cache.

    Built aside by a child process, renamed into the cache under a lock; a broken cached module warns and is rebuilt.
    """
    import httpstan.cache
    import httpstan.models

    model_name = httpstan.models.calculate_model_name(code)
    # the lock is outside the entry, which is replaced as a whole
    lock = httpstan.cache.cache_directory() / "pydial-locks" / f"{model_name.split('/')[1]}.lock"
    built = build_once(lock, lambda: _load_problem(model_name), lambda: _build(name, code, model_name), NAME,
                       lambda: _module_file(model_name) or httpstan.cache.model_directory(model_name))
    secs, warn = built or (0.0, "")
    return HttpstanModel(name=name, code=code, compile_seconds=secs, cached=built is None, stanc_warnings=warn,
                         model_name=model_name, _module=_load_services(model_name))


# --------------------------------------------------------------------------- the model
@dataclass
class HttpstanModel(CompiledModel):
    """A program compiled by httpstan (``model_name`` ``models/<hash>``): its functions in-process, NUTS through pystan."""

    backend: str = NAME
    model_name: str = ""
    _module: Any = field(default=None, repr=False)

    def services(self) -> Any:
        """Return the compiled model's functions (``log_prob``, ``write_array``, ...), loaded once per process."""
        if self._module is None:
            self._module = _load_services(self.model_name)
        return self._module

    def _call(self, function: str, *args: Any) -> Any:
        """Call one of the model's functions; Stan's ``ValueError`` or ``RuntimeError`` becomes a :class:`StanRuntimeError`."""
        try:
            return getattr(self.services(), function)(*args)
        except (RuntimeError, ValueError) as e:
            raise StanRuntimeError(f"{self.name}: {function} failed: {e}") from None

    # ---------------------------------------------------------------- parameters
    def _stanc_info(self) -> dict[str, Any]:
        """``stanc --info`` with httpstan's stanc."""
        return _run_stanc_info(self.code)

    def parameter_shapes(self, data: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """See :meth:`CompiledModel.parameter_shapes`; the model's ``get_dims``."""
        data = as_stan_data(data)
        dims = dict(zip(self._call("get_param_names", data), self._call("get_dims", data)))
        return {n: tuple(int(x) for x in dims[n]) for n in self.parameter_names()}

    def _unconstrain(self, data: dict[str, Any], values: dict[str, np.ndarray]) -> np.ndarray:
        """Unconstrain by the model's own ``transform_inits``."""
        return np.asarray(self._call("transform_inits", data, json_ready(values)), float)

    def constrain(self, data: Mapping[str, Any], u: ArrayLike, *, include_tparams: bool = True,
                  include_gqs: bool = False) -> dict[str, np.ndarray]:
        """See :meth:`CompiledModel.constrain`; the model's ``write_array``."""
        data = as_stan_data(data)
        x = np.asarray(u, float).ravel()
        flat = np.asarray(self._call("write_array", data, x.tolist(), include_tparams, include_gqs))
        info = self._stanc_info()
        written = {*info.get("parameters", {}), *(info.get("transformed parameters", {}) if include_tparams else ()),
                   *(info.get("generated quantities", {}) if include_gqs else ())}
        out, pos = {}, 0
        for n, d in zip(self._call("get_param_names", data), self._call("get_dims", data)):
            if n in written:  # the names come in block order, the blocks left out by the flags skipped
                size = int(np.prod(d)) if d else 1
                out[n] = flat[pos : pos + size].reshape(tuple(d), order="F") if d else flat[pos]
                pos += size
        return out

    # ---------------------------------------------------------------- log density
    def _log_prob_grad(self, data: dict[str, Any], x: np.ndarray, jacobian: bool,
                       grad: bool) -> tuple[float, np.ndarray]:
        """Call ``log_prob``, or ``log_prob_grad`` alone (``log p`` nan), in-process (``target +=`` keeps the constants)."""
        if grad:
            return np.nan, np.asarray(self._call("log_prob_grad", data, x.tolist(), bool(jacobian)), float)
        return float(self._call("log_prob", data, x.tolist(), bool(jacobian))), np.zeros(0)

    # ---------------------------------------------------------------- sample
    def _run_nuts(self, data: dict[str, Any], *, chains: int, draws: int, warmup: int, seed: int | None,
                  inits: list[dict[str, Any]] | None, adapt_delta: float, max_depth: int,
                  refresh: int | None, quiet: bool, progress: bool, inv_metric: np.ndarray | None = None) -> NutsDraws:
        """NUTS through pystan (in a worker thread inside a running event loop); its cached fit is removed."""
        if inv_metric is not None:
            raise StanBackendError("httpstan's NUTS adapts its metric from the unit metric and takes no initial one: "
                                   "pass inv_metric=None, or use backend='cmdstanpy'")
        before = set(fit_files(self.model_name))
        sink: io.StringIO = _ProgressSink(chains * (draws + warmup), self.name) if progress else io.StringIO()
        done = time.time()
        try:
            with sink, contextlib.ExitStack() as stack:  # the redirections end before the sink (its bar) closes
                if quiet or progress:
                    stack.enter_context(contextlib.redirect_stdout(sink))
                    stack.enter_context(contextlib.redirect_stderr(sink))
                for attempt in range(3):
                    try:
                        out = _outside_event_loop(self._sample_run, data, chains, draws, warmup, seed, inits,
                                                  adapt_delta, max_depth, refresh)
                        break
                    except RuntimeError as e:
                        # another process removed the cached fit between its write and pystan's read;
                        # a seeded run is deterministic, so running it again gives the same draws
                        if "not found" not in str(e) or attempt == 2:
                            raise
                done = time.time()
                return out
        finally:  # pystan keeps every seeded fit in httpstan's cache: remove the ones made here
            for f in set(fit_files(self.model_name)) - before:
                with contextlib.suppress(FileNotFoundError):
                    if f.stat().st_mtime <= done + 1.0:  # not one written later, by a concurrent run
                        f.unlink(missing_ok=True)

    def _sample_run(self, data: dict[str, Any], chains: int, draws: int, warmup: int, seed: int | None,
                    inits: list[dict[str, Any]] | None, adapt_delta: float, max_depth: int,
                    refresh: int | None) -> NutsDraws:
        """Build and sample the program with pystan; the draws and statistics shaped ``(chain, draw, ...)``."""
        import stan

        post = stan.build(self.code, data=json_ready(data), random_seed=None if seed is None else int(seed))
        given = {"refresh": refresh, "init": inits}
        fit = post.sample(num_chains=chains, num_samples=draws, num_warmup=warmup, delta=adapt_delta, max_depth=max_depth,
                          **{k: v for k, v in given.items() if v is not None})
        if fit is None:  # pystan returns None on KeyboardInterrupt
            raise StanBackendError("sampling was interrupted")

        def reshape(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
            # pystan stacks draws with the chain index varying fastest: column m = draw * chains + chain
            a = np.asarray(arr, dtype=float).reshape(*shape, draws, chains)
            return np.moveaxis(np.moveaxis(a, -1, 0), -1, 1)

        return NutsDraws(draws={name: reshape(fit[name], tuple(dims)) for name, dims in zip(fit.param_names, fit.dims)},
                         stats={name: reshape(fit[name], ()) for name in fit.sample_and_sampler_param_names})


class _ProgressSink(io.StringIO):
    """Stand-in for stdout/stderr during pystan's sampling: swallows its output and moves one ``tqdm`` bar."""

    _ITER = re.compile(r"\((\d+)/(\d+)\)")

    def __init__(self, total: int, name: str) -> None:
        from tqdm.auto import tqdm

        super().__init__()
        self.bar = tqdm(total=total, desc=f"sampling {Path(name).stem}", file=sys.stderr, leave=False,
                        mininterval=0.5)

    def write(self, text: str) -> int:
        done = self._ITER.findall(text)
        if done:
            self.bar.update(max(int(done[-1][0]) - self.bar.n, 0))
        return len(text)

    def close(self) -> None:
        self.bar.refresh()
        self.bar.close()
        super().close()
