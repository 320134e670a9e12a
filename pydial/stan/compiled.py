"""The interface of a compiled Stan program, shared by every backend (:class:`CompiledModel`, :class:`BackendModule`).

Each backend subclasses :class:`CompiledModel` with its own part (shapes, transforms, log density, NUTS); argument
checks, the scipy L-BFGS-B path and the assembly of results live here.
"""
from __future__ import annotations

import abc
import contextlib
import sys
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

from ..estimation.spec import check_choice, check_count, check_level
from ..exceptions import ArgumentError, ArgumentTypeError, DialError
from ..optim import lbfgs_minimize
from .results import OptimizeResult, SampleResult

__all__ = ["APPROXIMATIONS", "StanCompileError", "StanBackendError", "StanRuntimeError", "CompiledModel",
           "BackendModule", "NutsDraws", "as_stan_data", "json_ready"]


class StanCompileError(DialError, ValueError):
    """A Stan program failed to compile; the message carries stanc's (or the C++ compiler's) output."""


class StanBackendError(DialError, RuntimeError):
    """The requested Stan backend is not available or failed to run."""


class StanRuntimeError(StanBackendError):
    """Stan refused to evaluate a program (a ``reject()``, a domain error, data it rejects); the message carries Stan's.

    Raised by :meth:`CompiledModel.log_prob`, :meth:`~CompiledModel.grad_log_prob` and :meth:`~CompiledModel.optimize`.
    """


APPROXIMATIONS: tuple[str, ...] = ("laplace", "pathfinder")
"""CmdStan's approximate posteriors: Laplace at the mode (unconstrained scale, Jacobian) and multi-path Pathfinder."""


def as_stan_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return Stan data as both backends read them: ints, floats, numeric arrays (booleans as int64; else a TypeError)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, (bool, np.bool_, int, np.integer)):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = float(v)
        else:
            a = np.asarray(v)
            if a.dtype == bool:
                a = a.astype(np.int64)
            if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
                raise ArgumentTypeError(f"Stan data {k!r} must be numeric, got dtype {a.dtype}")
            out[k] = a
    return out


def json_ready(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``data`` with numpy arrays as nested lists (for JSON and the backends' ``data=``)."""
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in data.items()}


@dataclass
class NutsDraws:
    """What a backend's NUTS run or approximation returns: ``draws`` and ``stats`` shaped ``(chain, draw, ...)``, and ``fit``."""

    draws: dict[str, np.ndarray]
    stats: dict[str, np.ndarray]
    fit: Any = None


def _checked_metric(inv_metric: Any) -> np.ndarray:
    """Return ``inv_metric`` as an array: positive variances, or a symmetric positive definite matrix."""
    m = np.asarray(inv_metric, float)
    if m.ndim == 1 and np.all(np.isfinite(m) & (m > 0)):
        return m
    square = m.ndim == 2 and m.shape[0] == m.shape[1] and np.all(np.isfinite(m))
    if square and np.allclose(m, m.T, rtol=0, atol=1e-10 * np.abs(m).max()):
        with contextlib.suppress(np.linalg.LinAlgError):
            np.linalg.cholesky(m)
            return m
    raise ArgumentError("inv_metric must be a vector of positive numbers (a diagonal inverse metric) or a symmetric "
                        f"positive definite matrix (a dense one), got an array of shape {m.shape}")


@dataclass
class CompiledModel(abc.ABC):
    """A compiled Stan program and the backend that runs it (build with :func:`pydial.stan.compile_model`).

    ``name`` is the program's name (:data:`pydial.stan.programs.PROGRAMS`) or a file stem.  The unconstrained
    vector ``u`` of every method is Stan's: each parameter column-major in declaration order (pydial's
    programs declare unconstrained types only).
    """

    name: str
    code: str = field(repr=False)
    backend: str = ""
    compile_seconds: float = 0.0
    cached: bool = True
    stanc_warnings: str = field(default="", repr=False)

    default_optimizer: ClassVar[str] = "scipy"
    """The optimizer :meth:`optimize` runs when ``method`` is ``None`` (``"scipy"`` or ``"cmdstan"``)."""

    # ---------------------------------------------------------------- parameters
    @abc.abstractmethod
    def _stanc_info(self) -> dict[str, Any]:
        """Return ``stanc --info`` of this program (its declarations by block), run once."""

    def parameter_names(self) -> list[str]:
        """Names declared in the ``parameters`` block, in order.

        Returns
        -------
        list of str
            The parameter names, from ``stanc --info`` of this program.
        """
        return list(self._stanc_info().get("parameters", {}))

    @abc.abstractmethod
    def parameter_shapes(self, data: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """Shapes of the parameters for these data, in declaration order, as the compiled model reports them.

        Parameters
        ----------
        data : mapping
            Stan data (fix the sizes).

        Returns
        -------
        dict of str to tuple of int
            Parameter name to its shape (``()`` for a scalar, ``(0,)`` for an empty one).
        """

    def num_unconstrained(self, data: Mapping[str, Any]) -> int:
        """Count the unconstrained parameters for these data (exact for the unconstrained types of pydial's programs)."""
        return int(sum(int(np.prod(s)) for s in self.parameter_shapes(data).values()))

    def split_unconstrained(self, data: Mapping[str, Any], u: ArrayLike) -> dict[str, np.ndarray]:
        """Named parameter values of an unconstrained vector, each parameter read column-major in declaration order.

        Parameters
        ----------
        data : mapping
            Stan data (fix the parameter shapes).
        u : array_like
            Unconstrained vector.

        Returns
        -------
        dict of str to ndarray
            Parameter name to its values, shaped as declared.

        Raises
        ------
        ValueError
            ``u`` does not have one entry per unconstrained parameter.
        """
        x = np.asarray(u, float).ravel()
        shapes = self.parameter_shapes(data)
        sizes = [int(np.prod(s)) for s in shapes.values()]
        if sum(sizes) != x.size:
            raise ArgumentError(f"{self.name}: the unconstrained vector has {x.size} entries, the parameters {sum(sizes)}")
        return {n: p.reshape(s, order="F") for (n, s), p in zip(shapes.items(), np.split(x, np.cumsum(sizes)[:-1]))}

    def unconstrain(self, data: Mapping[str, Any], values: Mapping[str, Any]) -> np.ndarray:
        """Unconstrained vector of named parameter values.

        Parameters
        ----------
        data : mapping
            Stan data.
        values : mapping
            Parameter name to its constrained value; zero-size parameters may be left out.

        Returns
        -------
        ndarray
            Stan's unconstrained vector (see the class docstring for its layout).

        Raises
        ------
        KeyError
            A parameter of nonzero size has no value.
        """
        data = as_stan_data(data)
        shapes = self.parameter_shapes(data)
        missing = [n for n, sh in shapes.items() if n not in values and int(np.prod(sh)) > 0]
        if missing:
            raise KeyError(f"{self.name}: no values for the parameters {missing}")
        shaped = {n: np.asarray(values.get(n, np.zeros(shapes[n])), float).reshape(shapes[n]) for n in shapes}
        return self._unconstrain(data, shaped)

    def _unconstrain(self, data: dict[str, Any], values: dict[str, np.ndarray]) -> np.ndarray:
        """Return the unconstrained vector of every parameter's value (shaped as declared): each flattened column-major."""
        parts = [v.ravel(order="F") for v in values.values()]
        return np.concatenate(parts) if parts else np.zeros(0)

    @abc.abstractmethod
    def constrain(self, data: Mapping[str, Any], u: ArrayLike, *, include_tparams: bool = True,
                  include_gqs: bool = False) -> dict[str, np.ndarray]:
        """Named constrained values (and transformed parameters, generated quantities) at unconstrained ``u``.

        Parameters
        ----------
        data : mapping
            Stan data.
        u : array_like
            Unconstrained vector.
        include_tparams, include_gqs : bool
            Add the transformed parameters, the generated quantities.

        Returns
        -------
        dict of str to ndarray
            Variable name to its value, shaped as declared.
        """

    # ---------------------------------------------------------------- log density
    def log_prob(self, data: Mapping[str, Any], u: ArrayLike, *, jacobian: bool = False) -> float:
        """``log p(u)`` on the unconstrained scale (default: without the Jacobian adjustment).

        Parameters
        ----------
        data : mapping
            Stan data.
        u : array_like
            Point on the unconstrained scale.
        jacobian : bool
            Include the Jacobian adjustment of the constraining transforms.

        Returns
        -------
        float
            ``log p`` at ``u``.

        Raises
        ------
        StanRuntimeError
            Stan refused to evaluate the program at ``u`` (a ``reject()``, a domain error); the message carries Stan's.
        """
        return self._log_prob_grad(as_stan_data(data), np.asarray(u, float).ravel(), jacobian, grad=False)[0]

    def grad_log_prob(self, data: Mapping[str, Any], u: ArrayLike, *, jacobian: bool = False) -> np.ndarray:
        """Gradient of :meth:`log_prob` with respect to the unconstrained parameters.

        Parameters
        ----------
        data, u, jacobian
            As for :meth:`log_prob`.

        Returns
        -------
        ndarray
            One entry per unconstrained parameter.
        """
        return self._log_prob_grad(as_stan_data(data), np.asarray(u, float).ravel(), jacobian, grad=True)[1]

    @abc.abstractmethod
    def _log_prob_grad(self, data: dict[str, Any], x: np.ndarray, jacobian: bool, grad: bool) -> tuple[float, np.ndarray]:
        """Return ``log p(x)`` and, with ``grad``, its gradient; Stan's refusal is a :class:`StanRuntimeError`."""

    # ---------------------------------------------------------------- optimize
    def optimize(self, data: Mapping[str, Any], init: ArrayLike | None = None, *, seed: int | None = None,
                 fixed: Sequence[bool] | None = None, bounds: Sequence[tuple[float | None, float | None]] | None = None,
                 gtol: float = 1e-8, max_iter: int = 20_000, method: str | None = None) -> OptimizeResult:
        """Maximize ``log_prob`` (no Jacobian) over the unconstrained parameters.

        Parameters
        ----------
        data : mapping
            Stan data.
        init : array_like, optional
            Start on the unconstrained scale; default Stan's uniform(-2, 2) from ``default_rng(seed)``.
        seed : int, optional
            Seed of the default start and of CmdStan.
        fixed : sequence of bool, optional
            Coordinates held at ``init`` (e.g. the LLM block of eq. staged-calibrated-estimator's second stage);
            scipy path only (on CmdStan pass them as data).
        bounds : sequence of (low, high), optional
            Box on the unconstrained coordinates (scipy path only).
        gtol : float
            Converged when the max-norm of the (projected) gradient is at most ``gtol * max(1, |log_prob|)`` (the
            scipy path's stopping rule).  CmdStan's L-BFGS, which stops on the absolute gradient alone, runs at a
            quarter of that tolerance, restarted from its end point until the verdict holds (at most four runs).
        max_iter : int
            Iteration budget.
        method : {"scipy", "cmdstan"} or None
            Force the optimizer; default CmdStan's L-BFGS on cmdstanpy, scipy's L-BFGS-B on httpstan's gradients.

        Returns
        -------
        OptimizeResult
            The optimum and the convergence verdict.

        Raises
        ------
        StanRuntimeError
            Stan rejects the start, or CmdStan's optimizer fails (the message carries Stan's); a point
            rejected later, in a line search, counts as an infinite objective.
        """
        data = as_stan_data(data)
        n = self.num_unconstrained(data)
        u0 = np.random.default_rng(seed).uniform(-2, 2, size=n) if init is None else np.asarray(init, float).ravel().copy()
        if u0.size != n:
            raise ArgumentError(f"init has {u0.size} entries; program {self.name!r} has {n} unconstrained parameters")
        method = self.default_optimizer if method is None else method
        if method == "scipy":
            return self._optimize_scipy(data, u0, fixed, bounds, gtol, max_iter)
        if method == "cmdstan":
            if fixed is not None or bounds is not None:
                raise ArgumentError("fixed and bounds need method='scipy' (httpstan)")
            return self._optimize_native(data, u0, seed, gtol, max_iter)
        raise ArgumentError(f"method must be 'scipy', 'cmdstan' or None, got {method!r}")

    def _optimize_native(self, data: dict[str, Any], u0: np.ndarray, seed: int | None, gtol: float,
                         max_iter: int) -> OptimizeResult:
        """Run the backend's own optimizer (``method="cmdstan"``)."""
        raise StanBackendError(f"method='cmdstan' needs the cmdstanpy backend, not {self.backend!r}")

    def _optimize_scipy(self, data: dict[str, Any], u0: np.ndarray, fixed: Sequence[bool] | None,
                        bounds: Sequence[tuple[float | None, float | None]] | None, gtol: float,
                        max_iter: int) -> OptimizeResult:
        """Minimize ``-log_prob`` by L-BFGS-B (:func:`pydial.optim.lbfgs_minimize`) on exact gradients."""
        self.log_prob(data, u0)  # a start that Stan rejects raises StanRuntimeError with Stan's message

        def neg_log_prob(u: np.ndarray) -> tuple[float, np.ndarray]:
            try:
                lp = self.log_prob(data, u)
            except StanRuntimeError:  # a point Stan rejects: an infinite objective, as in Stan's own optimizers
                return np.inf, np.zeros(u.size)
            if not np.isfinite(lp):
                return -lp, np.zeros(u.size)
            return -lp, -self.grad_log_prob(data, u)

        res = lbfgs_minimize(neg_log_prob, u0, fixed=fixed, bounds=bounds, gtol=gtol, max_iter=max_iter)
        return OptimizeResult(u=res.x, log_prob=-res.fun, grad_norm=res.grad_norm, converged=res.converged,
                              message=res.message, n_iter=res.n_iter, n_eval=res.n_eval,
                              backend=self.backend, seconds=res.seconds)

    # ---------------------------------------------------------------- sample
    def sample(self, data: Mapping[str, Any], *, chains: int = 4, draws: int = 1000, warmup: int = 1000,
               seed: int | None = None, inits: Sequence[Mapping[str, Any]] | None = None, adapt_delta: float = 0.8,
               max_depth: int = 10, refresh: int | None = None, quiet: bool = True, progress: bool | None = None,
               inv_metric: np.ndarray | None = None) -> SampleResult:
        """Run NUTS and return the draws; check them with :meth:`SampleResult.check`.

        ``inits``: one dict of constrained values per chain (default Stan's uniform(-2, 2) on the unconstrained
        scale); ``refresh``: the progress interval; ``quiet``: keep the backends' output off the console;
        ``progress``: a ``tqdm`` bar instead (default: when stderr is a terminal); ``inv_metric`` (CmdStan only):
        a vector, the diagonal inverse metric the adaptation starts from (default the unit metric), or a symmetric
        positive definite matrix, a dense one kept through warmup, which adapts the step size only (CmdStan's
        windowed estimate of a dense metric is singular beyond a few hundred parameters).  httpstan's cached fit
        is deleted afterwards.
        """
        chains, draws = check_count(chains, "chains"), check_count(draws, "draws")
        warmup = check_count(warmup, "warmup", minimum=0)
        adapt_delta = check_level(adapt_delta, "adapt_delta")
        if inits is not None and len(inits) != chains:
            raise ArgumentError(f"inits must give one dict per chain ({chains}), got {len(inits)}")
        data = as_stan_data(data)
        init_values = None if inits is None else [json_ready(as_stan_data(i)) for i in inits]
        inv_metric = None if inv_metric is None else _checked_metric(inv_metric)
        t0 = time.perf_counter()
        run = self._run_nuts(data, chains=chains, draws=draws, warmup=warmup, seed=seed, inits=init_values,
                             adapt_delta=adapt_delta, max_depth=max_depth, refresh=refresh, quiet=quiet,
                             progress=sys.stderr.isatty() if progress is None else bool(progress), inv_metric=inv_metric)
        dense = inv_metric is not None and inv_metric.ndim == 2
        return SampleResult(draws=run.draws, stats=run.stats, chains=chains, draws_per_chain=draws, warmup=warmup,
                            seed=seed, max_depth=max_depth, backend=self.backend, seconds=time.perf_counter() - t0,
                            backend_fit=run.fit, metric="dense (kept)" if dense else "diag (adapted)")

    @abc.abstractmethod
    def _run_nuts(self, data: dict[str, Any], *, chains: int, draws: int, warmup: int, seed: int | None,
                  inits: list[dict[str, Any]] | None, adapt_delta: float, max_depth: int,
                  refresh: int | None, quiet: bool, progress: bool, inv_metric: np.ndarray | None = None) -> NutsDraws:
        """Run the backend's NUTS on marshalled data and per-chain ``inits`` (arguments checked by :meth:`sample`)."""

    def approximate(self, data: Mapping[str, Any], *, algorithm: str, draws: int = 1000, seed: int | None = None,
                    init: Mapping[str, Any] | None = None, quiet: bool = True) -> SampleResult:
        """Draw from an approximate posterior: the Laplace approximation at the mode, or Pathfinder.

        Parameters
        ----------
        data : mapping
            The program's data.
        algorithm : {"laplace", "pathfinder"}
            CmdStan's ``laplace_sample`` (the mode by L-BFGS with the Jacobian, then normal draws on the unconstrained
            scale, mapped back), or multi-path Pathfinder with importance resampling.
        draws : int, default 1000
            Number of draws (returned as one chain).
        seed : int, optional
            Random seed.
        init : mapping, optional
            Constrained initial values (of the optimizer, or of every Pathfinder path).
        quiet : bool, default True
            Keep CmdStan's output and log messages off the console.

        Returns
        -------
        SampleResult
            One chain of ``draws`` draws, ``algorithm`` set; no sampler statistics.

        Raises
        ------
        StanBackendError
            The backend has no approximate posteriors (httpstan): the message names CmdStan.
        """
        check_choice("algorithm", algorithm, APPROXIMATIONS)
        draws = check_count(draws, "draws")
        data = as_stan_data(data)
        init_values = None if init is None else json_ready(as_stan_data(init))
        t0 = time.perf_counter()
        out = self._run_approximation(data, algorithm=algorithm, draws=draws, seed=seed, init=init_values, quiet=quiet)
        return SampleResult(draws=out.draws, stats=out.stats, chains=1, draws_per_chain=draws, warmup=0,
                            seed=seed, max_depth=0, backend=self.backend, seconds=time.perf_counter() - t0,
                            algorithm=algorithm)

    def _run_approximation(self, data: dict[str, Any], *, algorithm: str, draws: int, seed: int | None,
                           init: dict[str, Any] | None, quiet: bool) -> NutsDraws:
        """Run the backend's approximation (arguments checked by :meth:`approximate`); CmdStan only by default."""
        raise StanBackendError(
            f"the {algorithm!r} approximation is CmdStan's and the {self.backend!r} backend has none: install "
            "CmdStan (`python -m cmdstanpy.install_cmdstan`) and pass backend='cmdstanpy', or use algorithm='nuts'")


@runtime_checkable
class BackendModule(Protocol):
    """The interface of a backend module, through which :mod:`pydial.stan.backend` picks a backend and compiles."""

    NAME: str
    """The backend's name in :data:`pydial.stan.backend.BACKENDS`."""

    def available(self) -> bool:
        """Return whether the backend can run here (its packages import; for CmdStan, an installation is found)."""

    def is_compiled(self, name: str, code: str) -> bool:
        """Return whether program ``name`` with text ``code`` is in the backend's cache (loading needs no compilation)."""

    def compile_program(self, name: str, code: str) -> CompiledModel:
        """Compile program text ``code`` (named ``name`` in messages) or load it from the cache.

        Raises :class:`StanCompileError` with stanc's or the C++ compiler's output.
        """
