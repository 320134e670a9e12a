"""CmdStan through ``cmdstanpy``, a :class:`~pydial.stan.compiled.BackendModule`.

Programs and executables go to :func:`cache_dir` ``/<hash>/`` (hash of the text and the CmdStan path).
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import logging.handlers
import os
import re
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..exceptions import ConvergenceError
from ..optim import ROUNDOFF_FACTOR
from .cache import build_dir, build_once, pydial_cache_dir
from .compiled import (CompiledModel, NutsDraws, StanBackendError, StanCompileError, StanRuntimeError, as_stan_data,
                       json_ready)
from .results import OptimizeResult

__all__ = ["NAME", "CmdstanpyModel", "available", "cache_dir", "executable_problem", "is_compiled", "compile_program",
           "stan_output"]

NAME = "cmdstanpy"
"""The backend's name in :data:`pydial.stan.backend.BACKENDS`."""

PATHFINDER_PATHS = 4
"""Pathfinder's paths; each gives as many draws from its normal approximation as the posterior asks for."""

PATHFINDER_MAX_K = 0.7
"""The largest Pareto ``k`` of Pathfinder's importance ratios for which its draws are resampled and returned."""


def available() -> bool:
    """Return whether ``cmdstanpy`` imports and ``cmdstanpy.cmdstan_path()`` resolves."""
    try:
        import cmdstanpy

        cmdstanpy.cmdstan_path()
    except (ImportError, ValueError, RuntimeError, OSError):
        return False
    return True


def cache_dir() -> Path:
    """Return the directory of pydial's compiled CmdStan programs (:func:`~pydial.stan.cache.pydial_cache_dir` ``/cmdstan``)."""
    return pydial_cache_dir() / "cmdstan"


@contextlib.contextmanager
def _quiet_cmdstanpy() -> Iterator[list[logging.LogRecord]]:
    """Silence cmdstanpy's logger; yield its ERROR records meanwhile (where a failed ``log_prob`` puts CmdStan's output)."""
    try:  # cmdstanpy configures its logger on first use (level DEBUG): do that first, then silence it
        from cmdstanpy.utils import get_logger

        log = get_logger()
    except ImportError:  # pragma: no cover
        log = logging.getLogger("cmdstanpy")
    saved = log.level, log.handlers[:], log.propagate
    keep = logging.handlers.BufferingHandler(capacity=1 << 30)  # never flushed: holds every record
    log.setLevel(logging.ERROR)
    log.handlers, log.propagate = [keep], False
    try:
        yield keep.buffer
    finally:
        log.setLevel(saved[0])
        log.handlers, log.propagate = saved[1], saved[2]


_ARGUMENT_ECHO = re.compile(r"^\s*(\w+( = .*)?)?\s*$")
"""A line of CmdStan's echo of its arguments (``method = optimize``, ``  lbfgs``) or a blank line."""


def stan_output(text: str) -> str:
    """Return Stan's own messages in a cmdstanpy error text: the lines after its last output marker, without the argument echo."""
    text = next((text.partition(m)[2] for m in ("stderr:", "console log output:") if m in text), text)
    return "\n".join(line.rstrip() for line in text.splitlines() if not _ARGUMENT_ECHO.match(line)).strip()


def _paths(name: str, code: str) -> tuple[Path, Path]:
    """Return the cached ``.stan`` file and executable of a program (keyed by its text and the CmdStan path)."""
    import cmdstanpy

    digest = hashlib.sha256((code + cmdstanpy.cmdstan_path()).encode()).hexdigest()[:16]
    stan_file = cache_dir() / digest / f"{Path(name).stem}.stan"
    return stan_file, stan_file.with_suffix(".exe" if os.name == "nt" else "")


EXE_INFO_TIMEOUT = 120.0
"""Seconds that the check of a cached executable (its ``info`` run) may take."""


def executable_problem(exe: Path) -> str | None:
    """Return what is wrong with a cached executable (missing, empty, not executable, ``info`` fails), or ``None``."""
    try:
        size = exe.stat().st_size
    except FileNotFoundError:
        return "is missing"
    if not exe.is_file():
        return "is not a file"
    if size == 0:
        return "is empty (0 bytes)"
    if not os.access(exe, os.X_OK):
        return "is not executable"
    try:
        out = subprocess.run([str(exe), "info"], capture_output=True, text=True, timeout=EXE_INFO_TIMEOUT,
                             check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"does not run ({type(e).__name__}: {e})"
    if out.returncode != 0:
        said = (out.stderr or out.stdout).strip().splitlines()
        return f"does not run (`{exe.name} info` exited with {out.returncode}{': ' + said[-1] if said else ''})"
    return None


def is_compiled(name: str, code: str) -> bool:
    """Return whether the executable of ``code`` (named by the stem of ``name``) is a non-empty file in the cache."""
    exe = _paths(name, code)[1]
    return exe.is_file() and exe.stat().st_size > 0 and os.access(exe, os.X_OK)


def _build(name: str, code: str, stan_file: Path, exe: Path) -> float:
    """Compile aside in the cache entry's directory, check that it runs, rename it into place; return the seconds taken."""
    import cmdstanpy

    t0 = time.perf_counter()
    with build_dir(stan_file.parent, exe.name) as tmp:
        src = tmp / stan_file.name
        src.write_text(code)
        try:
            with _quiet_cmdstanpy():  # pydial announces the compilation in one line itself
                model = cmdstanpy.CmdStanModel(stan_file=str(src))
        except (ValueError, RuntimeError) as e:
            raise StanCompileError(f"Stan program {name!r} failed to compile (CmdStan):\n{e}") from None
        built = Path(str(model.exe_file))
        problem = executable_problem(built)
        if problem is not None:
            raise StanBackendError(f"CmdStan built Stan program {name!r} but the executable {problem}: check the "
                                   f"C++ toolchain of the CmdStan at {cmdstanpy.cmdstan_path()}")
        os.replace(src, stan_file)
        os.replace(built, exe)
    return time.perf_counter() - t0


def compile_program(name: str, code: str) -> CmdstanpyModel:
    """Compile a program with CmdStan, or load its executable from :func:`cache_dir`.

    Built aside and renamed into place once it runs, under a lock; a cached one that does not run warns and is rebuilt.
    """
    import cmdstanpy

    stan_file, exe = _paths(name, code)
    secs = build_once(stan_file.parent / ".lock", lambda: executable_problem(exe),
                      lambda: _build(name, code, stan_file, exe), NAME, lambda: exe)
    if secs is None and not stan_file.is_file():  # a sound executable whose program text went missing
        tmp_file = stan_file.with_name(f".{stan_file.name}.{os.getpid()}")
        tmp_file.write_text(code)
        os.replace(tmp_file, stan_file)
    try:
        with _quiet_cmdstanpy():
            model = cmdstanpy.CmdStanModel(stan_file=str(stan_file), exe_file=str(exe))
    except (ValueError, RuntimeError) as e:
        raise StanBackendError(f"cannot load the compiled Stan program {str(exe)!r} (CmdStan): {e}") from None
    return CmdstanpyModel(name=name, code=code, compile_seconds=secs or 0.0, cached=secs is None,
                          exe_file=str(model.exe_file), _cmdstan_model=model)


def _console_tail(out_dir: Path, message: str, lines: int = 12) -> str:
    """Return the last ``lines`` lines CmdStan wrote to its console files in ``out_dir`` (``message`` when there are none)."""
    text = [ln for f in sorted(out_dir.glob("*stdout*.txt")) for ln in f.read_text(errors="replace").splitlines()
            if ln.strip()]
    return "\n".join(text[-lines:]) if text else message


def _pathfinder_draws(raw: np.ndarray, names: list[str], draws: int, seed: int | None) -> np.ndarray:
    """Return ``draws`` rows of Pathfinder's output resampled by Pareto-smoothed weights of ``lp__ - lp_approx__``.

    A Pareto ``k`` above :data:`PATHFINDER_MAX_K` (resampling would repeat a few points) is a ConvergenceError.
    """
    from .idata import psislw

    lr = raw[:, names.index("lp__")] - raw[:, names.index("lp_approx__")]
    ok = np.isfinite(lr)  # a draw outside the support has weight 0
    lw, k = psislw(lr[ok]) if ok.sum() > 1 else (np.zeros(0), np.inf)
    if not k <= PATHFINDER_MAX_K:
        raise ConvergenceError(
            "Pathfinder's normal approximations do not match this posterior: the Pareto k of the importance ratios of their "
            f"{raw.shape[0]:,} draws ({PATHFINDER_PATHS} paths) is {k:.2f} > {PATHFINDER_MAX_K}, so importance resampling would "
            "keep only a few distinct draws and the intervals would be wrong (it happens on the posteriors of large data and of "
            "the structured DIAL models); use algorithm='laplace' (the normal approximation at the mode) or 'nuts'")
    w = np.exp(lw)
    return np.flatnonzero(ok)[np.random.default_rng(seed).choice(lw.size, size=draws, p=w / w.sum())]


def _stan_variables(fit: Any, chains: int, draws: int) -> dict[str, np.ndarray]:
    """Return every Stan variable of a cmdstanpy fit shaped ``(chain, draw, *shape)`` (its draws are chain-major)."""
    out = {}
    for name in fit.metadata.stan_vars:
        v = np.asarray(fit.stan_variable(name), dtype=float)  # (chains * draws, *shape), chain-major
        if v.shape[0] != chains * draws:
            raise StanBackendError(
                f"CmdStan's output holds {v.shape[0]:,} draws of {name!r} where {chains} chain(s) x {draws:,} draws were "
                f"asked for ({v.size:,} values): the run's output is incomplete (e.g. a full disk, or too little "
                "memory for it); ask for fewer draws, or leave the pointwise output out with options={'log_lik': None}")
        out[name] = v.reshape(chains, draws, *v.shape[1:])
    return out


@dataclass
class CmdstanpyModel(CompiledModel):
    """A program compiled by CmdStan (executable ``exe_file``); every evaluation is a CmdStan run."""

    backend: str = NAME
    exe_file: str = ""
    _cmdstan_model: Any = field(default=None, repr=False)
    _info: dict[str, Any] | None = field(default=None, repr=False)
    _shape_cache: dict[Any, dict[str, tuple[int, ...]]] = field(default_factory=dict, repr=False)

    default_optimizer: ClassVar[str] = "cmdstan"

    # ---------------------------------------------------------------- parameters
    def _stanc_info(self) -> dict[str, Any]:
        """Return cmdstanpy's ``src_info`` (a stanc run), kept."""
        if self._info is None:
            self._info = self._cmdstan_model.src_info()
        return self._info

    def parameter_shapes(self, data: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """See :meth:`CompiledModel.parameter_shapes`; from a one-draw ``fixed_param`` run, cached per integer data."""
        data = as_stan_data(data)
        names = self.parameter_names()
        arrays = ((k, np.asarray(data[k])) for k in sorted(data))  # the integer data fix every size: the cache key
        key = tuple((k, v.shape, v.tobytes()) for k, v in arrays if np.issubdtype(v.dtype, np.integer))
        if key not in self._shape_cache:
            vars_ = self._fixed_param(data).metadata.stan_vars
            # zero-size variables have no output columns: shape (0,)
            self._shape_cache[key] = {n: tuple(int(x) for x in vars_[n].dimensions) if n in vars_ else (0,)
                                      for n in names}
        return dict(self._shape_cache[key])

    def _fixed_param(self, data: dict[str, Any], inits: dict[str, Any] | None = None) -> Any:
        """Return one ``fixed_param`` draw at ``inits``; a failure raises :class:`StanRuntimeError` with Stan's message."""
        with _quiet_cmdstanpy():
            try:
                return self._cmdstan_model.sample(data=json_ready(data), fixed_param=True, chains=1, iter_sampling=1,
                                                  iter_warmup=0, adapt_engaged=False, show_progress=False, seed=1,
                                                  sig_figs=18, inits=inits)
            except RuntimeError as e:
                raise StanRuntimeError(f"{self.name}: Stan failed: {stan_output(str(e))}") from None

    def _inits(self, data: Mapping[str, Any], u: ArrayLike) -> dict[str, Any]:
        """Named values for CmdStan (zero-size parameters left out: CmdStan cannot read their shape)."""
        return {k: v.tolist() for k, v in self.split_unconstrained(data, u).items() if v.size}

    def constrain(self, data: Mapping[str, Any], u: ArrayLike, *, include_tparams: bool = True,
                  include_gqs: bool = False) -> dict[str, np.ndarray]:
        """See :meth:`CompiledModel.constrain`; transformed parameters and generated quantities from one ``fixed_param`` draw."""
        data = as_stan_data(data)
        params = self.split_unconstrained(data, u)
        if not (include_tparams or include_gqs):
            return params
        fit = self._fixed_param(data, {k: v.tolist() for k, v in params.items() if v.size})
        blocks = [b for b, on in (("transformed parameters", include_tparams), ("generated quantities", include_gqs)) if on]
        out = dict(params)
        for n in [n for b in blocks for n in self._stanc_info().get(b, {})]:  # zero-size variables have no output columns
            out[n] = np.asarray(fit.stan_variable(n), float)[0] if n in fit.metadata.stan_vars else np.zeros(0)
        return out

    # ---------------------------------------------------------------- log density
    def _log_prob_grad(self, data: Mapping[str, Any], u: np.ndarray, jacobian: bool,
                       grad: bool = True) -> tuple[float, np.ndarray]:
        """``log p`` and its gradient from one CmdStan ``log_prob`` run (:class:`StanRuntimeError` with Stan's message)."""
        with _quiet_cmdstanpy() as messages:
            try:
                df = self._cmdstan_model.log_prob(self._inits(data, u), data=json_ready(data), jacobian=jacobian,
                                                  sig_figs=18)
            except RuntimeError as e:
                said = "\n".join(filter(None, (stan_output(r.getMessage()) for r in messages))) or str(e)
                raise StanRuntimeError(f"{self.name}: log_prob failed: {said}") from None
        row = df.iloc[0].to_numpy(dtype=float)
        return float(row[0]), row[1:]

    # ---------------------------------------------------------------- optimize
    def _optimize_scipy(self, data: dict[str, Any], u0: np.ndarray, fixed: Sequence[bool] | None,
                        bounds: Sequence[tuple[float | None, float | None]] | None, gtol: float,
                        max_iter: int) -> OptimizeResult:
        """Refused: every log density is a CmdStan subprocess."""
        raise StanBackendError("on CmdStan every log density is a subprocess, so pydial does not run scipy on it: hold "
                               "coordinates fixed by passing them as data (dial.stan's fix_llm), or use backend='httpstan'")

    def _optimize_native(self, data: dict[str, Any], u0: np.ndarray, seed: int | None, gtol: float,
                         max_iter: int) -> OptimizeResult:
        """CmdStan's L-BFGS, stopping on the gradient alone, restarted until the verdict holds."""
        u, lp = u0, self._log_prob_grad(data, u0, False)[0]
        t0 = time.perf_counter()
        # Stop on the gradient alone at a quarter of the verdict's |grad| <= gtol |log p| (CmdStan's other tests stop
        # early); restart from the end point until the verdict holds (at most four runs) unless a run left log p unchanged.
        for _ in range(4):
            lp_start = lp
            with _quiet_cmdstanpy():
                try:
                    mle = self._cmdstan_model.optimize(
                        data=json_ready(data), inits=self._inits(data, u), seed=seed, jacobian=False,
                        algorithm="lbfgs", iter=max_iter, tol_obj=1e-300, tol_rel_obj=1e-300,
                        tol_grad=0.25 * gtol * max(1.0, abs(lp)), tol_rel_grad=1e-300, tol_param=1e-300,
                        history_size=30, require_converged=False, sig_figs=18, show_console=False)
                except RuntimeError as e:
                    raise StanRuntimeError(f"{self.name}: CmdStan's optimizer failed: {stan_output(str(e))}") from None
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # cmdstanpy's notice about scalars becoming arrays
                    vals = {k: np.asarray(v, float) for k, v in mle.stan_variables().items()}
                    ok = bool(mle.converged)
            u = self.unconstrain(data, vals)
            lp, g = self._log_prob_grad(data, u, False)
            gnorm = float(np.max(np.abs(g))) if g.size else 0.0
            stalled = bool(abs(lp - lp_start) <= 4.0 * np.finfo(float).eps * max(1.0, abs(lp)))
            if gnorm <= gtol * max(1.0, abs(lp)) or stalled:
                break
        message = ("CmdStan L-BFGS: no change of log p at its resolution" if stalled else "CmdStan L-BFGS" if ok
                   else "CmdStan L-BFGS: line search failed or iteration limit")
        # a failed line search (or a stall) within ROUNDOFF_FACTOR of the tolerance has hit the resolution of log p
        tol = gtol * max(1.0, abs(lp)) * (1.0 if ok and not stalled else ROUNDOFF_FACTOR)
        return OptimizeResult(u=u, log_prob=lp, grad_norm=gnorm, converged=gnorm <= tol, message=message, n_iter=-1,
                              n_eval=-1, backend=self.backend, seconds=time.perf_counter() - t0, values=vals)

    # ---------------------------------------------------------------- sample
    def _run_nuts(self, data: dict[str, Any], *, chains: int, draws: int, warmup: int, seed: int | None,
                  inits: list[dict[str, Any]] | None, adapt_delta: float, max_depth: int,
                  refresh: int | None, quiet: bool, progress: bool, inv_metric: np.ndarray | None = None) -> NutsDraws:
        """NUTS by CmdStan (parallel chains); the fit is kept.

        A dense ``inv_metric`` is kept through warmup, which adapts the step size only (init buffer and metric window 0,
        which CmdStan's windowed adaptation reads as no metric window).
        """
        dense = inv_metric is not None and inv_metric.ndim == 2
        step_only = {"adapt_init_phase": 0, "adapt_metric_window": 0, "adapt_step_size": warmup} if dense and warmup else {}
        with (_quiet_cmdstanpy() if quiet else contextlib.nullcontext()):
            fit = self._cmdstan_model.sample(
                data=json_ready(data), chains=chains, parallel_chains=min(chains, os.cpu_count() or 1), seed=seed,
                iter_warmup=warmup, iter_sampling=draws, adapt_delta=adapt_delta, max_treedepth=max_depth,
                inits=inits, metric="dense_e" if dense else "diag_e", **step_only,
                inv_metric=None if inv_metric is None else {"inv_metric": inv_metric.tolist()},
                show_progress=bool(progress), refresh=refresh, sig_figs=18)
        raw = fit.draws()  # (draw, chain, column)
        stats = {n: np.asarray(raw[:, :, i], float).T for i, n in enumerate(fit.column_names) if n.endswith("__")}
        return NutsDraws(draws=_stan_variables(fit, chains, draws), stats=stats, fit=fit)

    def _run_approximation(self, data: dict[str, Any], *, algorithm: str, draws: int, seed: int | None,
                           init: dict[str, Any] | None, quiet: bool) -> NutsDraws:
        """Run CmdStan's ``laplace_sample`` or ``pathfinder``; draws as one chain with their log densities."""
        model = self._cmdstan_model
        with (_quiet_cmdstanpy() if quiet else contextlib.nullcontext()), tempfile.TemporaryDirectory() as out_dir:
            try:
                if algorithm == "laplace":
                    fit = model.laplace_sample(data=json_ready(data), draws=draws, seed=seed, jacobian=True,
                                               sig_figs=18, output_dir=out_dir,
                                               opt_args={"inits": init, "algorithm": "lbfgs", "iter": 20000})
                else:  # every path's draws with both log densities; pydial resamples them (below)
                    fit = model.pathfinder(data=json_ready(data), draws=draws, seed=seed, inits=init, sig_figs=18,
                                           num_paths=PATHFINDER_PATHS, num_single_draws=draws, psis_resample=False,
                                           calculate_lp=True, output_dir=out_dir)
            except RuntimeError as e:
                raise ConvergenceError(f"CmdStan's {algorithm} failed on program {self.name!r}; its last messages:\n"
                                       + _console_tail(Path(out_dir), str(e))
                                       + "\nTry another algorithm (algorithm='laplace', or 'nuts' for the exact "
                                       "posterior).") from None
            names = list(fit.column_names)
            raw = np.asarray(fit.draws(), dtype=float).reshape(-1, len(names))
            keep = np.arange(raw.shape[0]) if algorithm == "laplace" else _pathfinder_draws(raw, names, draws, seed)
            out = {k: v[:, keep] for k, v in _stan_variables(fit, 1, raw.shape[0]).items()}  # while CmdStan's files exist
        stats = {n: raw[keep, names.index(n)][None, :] for n in names if n.endswith("__")}
        return NutsDraws(draws=out, stats=stats, fit=None)
