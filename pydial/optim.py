"""Box-constrained damped Newton minimization on a (possibly gauge-singular) chart.

The structured DIAL losses are non-convex and, in the over-parameterized chart,
have ``r (r + 1)`` exactly flat gauge directions.  When their tangents are known,
each step is first tried by one Cholesky factorization of the Hessian completed on
the gauge (the pseudo-inverse Newton step at a stationary point).  Otherwise, and
when the Hessian is not positive definite off the gauge, the step uses its
eigen-decomposition: directions with negligible curvature are dropped
(Moore-Penrose, Lemma overparam-invariance), negative curvature is replaced by its
absolute value (a saddle-free Newton step).  A backtracking line search on the
box-projected path guarantees descent.  Near the optimum this is the plain Newton
step, so convergence is quadratic.
"""

from __future__ import annotations

import functools
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypeVar

import numpy as np
from threadpoolctl import ThreadpoolController

from .exceptions import ArgumentError, ConvergenceWarning

BOX = 10.0  # coordinate bound of the paper's optimization box (App. DIAL Estimation Procedure)
ZERO_EIG_RTOL = 1e-9  # eigenvalues below this fraction of the largest count as zero (gauge) everywhere

ROUNDOFF_FACTOR = 100.0
"""An L-BFGS run (CmdStan's or scipy's) stopped by a failed line search counts as converged when the
gradient is within this factor of the tolerance: no decrease of ``log p`` is resolvable there in double
precision (``log p`` includes the multinomial coefficients, so ``|log p|`` can be much smaller than the
sum of the magnitudes of its terms, which sets the round-off of the gradient)."""


F = TypeVar("F", bound=Callable)


def single_threaded_blas(func: F) -> F:
    """Run ``func`` with one BLAS thread.

    The matrices here are small (a few hundred rows at most); multi-threaded BLAS
    only adds synchronization cost (measured 100x slower ``eigh`` on a loaded 2-core
    machine).  Parallelism belongs at the level of replications (joblib).
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with _blas_controller().limit(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@functools.cache
def _blas_controller() -> ThreadpoolController:
    """Return the thread pools of the loaded libraries, inspected once (a scan costs milliseconds)."""
    return ThreadpoolController()



@dataclass(frozen=True)
class OptimResult:
    """Outcome of an optimizer: :func:`newton` or :func:`lbfgs_minimize` (and Stan's, through the engines).

    Attributes
    ----------
    x : ndarray
        Final point.
    fun : float
        Objective value at ``x``.
    grad_norm : float
        Max-norm of the gradient at ``x`` (free coordinates only).
    n_iter : int
        Iterations used (of the last run for L-BFGS-B).
    converged : bool
        Newton: gradient and Newton decrement below tolerance; L-BFGS-B: the gradient
        test ``grad_norm <= gtol * max(1, |fun|)`` (relaxed by ``roundoff_factor`` when it
        stalled at the resolution of ``fun``).
    at_bound : ndarray of bool
        Coordinates on the box boundary (a fit "not resolved within the box"; all False
        when the optimizer has no box).
    message : str
        Why the iteration stopped.
    n_eval : int
        Objective evaluations (``-1`` when not counted).
    seconds : float
        Wall time (``nan`` when not timed).
    """

    x: np.ndarray
    fun: float
    grad_norm: float
    n_iter: int
    converged: bool
    at_bound: np.ndarray
    message: str
    hess: np.ndarray | None = field(default=None, repr=False, compare=False)  # Hessian at ``x`` when known
    grad: np.ndarray | None = field(default=None, repr=False, compare=False)  # gradient at ``x`` when known
    n_eval: int = -1
    seconds: float = float("nan")

    @property
    def resolved(self) -> bool:
        """Converged with no coordinate on the box boundary."""
        return self.converged and not bool(self.at_bound.any())

    def hess_at(self, x: np.ndarray) -> np.ndarray | None:
        """Return the Hessian kept with the result when ``x`` is its final point, else ``None``."""
        return self.hess if self.hess is not None and np.array_equal(self.x, x) else None


def warn_unresolved(opt: OptimResult, what: str) -> None:
    """Warn with a :class:`~pydial.ConvergenceWarning` when ``opt`` is not a resolved optimum.

    Its status is ``"at bound"`` or ``"not converged"``; ``what`` names the fit.
    """
    status = "at bound" if opt.at_bound.any() else "not converged"
    if not opt.converged:
        warnings.warn(ConvergenceWarning(f"{what}: optimizer did not converge ({opt.message}; "
                                         f"max|grad| = {opt.grad_norm:.2e})", status), stacklevel=3)
    elif opt.at_bound.any():
        warnings.warn(ConvergenceWarning(f"{what}: {int(opt.at_bound.sum())} coordinate(s) on the optimization box "
                                         f"(|x| = {BOX:g}): the estimate is not resolved within the box", status),
                      stacklevel=3)


def pinv_sym(H: np.ndarray, rtol: float = ZERO_EIG_RTOL, gauge: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Moore-Penrose inverse of a symmetric matrix and the number of (near-)zero eigenvalues dropped.

    Eigenvalues below ``rtol`` times the largest absolute eigenvalue count as zero.
    With ``gauge`` (the tangents of the flat directions, possibly none) it is first formed
    by one Cholesky factorization (:func:`pinv_gauge`), the eigen-decomposition only when
    that is not certified.
    """
    if gauge is not None and (out := pinv_gauge(H, gauge, rtol)) is not None:
        return out
    w, V = np.linalg.eigh(0.5 * (H + H.T))
    return pinv_from_eigh(w, V, rtol=rtol)


def pinv_from_eigh(ev: np.ndarray, Q: np.ndarray, rtol: float = ZERO_EIG_RTOL) -> tuple[np.ndarray, int]:
    """:func:`pinv_sym` from the eigen-decomposition ``(ev, Q)`` of the symmetrized matrix."""
    cut = rtol * max(np.abs(ev).max(initial=0.0), 1e-300)
    keep = np.abs(ev) > cut
    inv = (Q[:, keep] / ev[keep]) @ Q[:, keep].T
    return inv, int((~keep).sum())


def pinv_gauge(H: np.ndarray, Z: np.ndarray, rtol: float = ZERO_EIG_RTOL) -> tuple[np.ndarray, int] | None:
    """:func:`pinv_sym` of a Hessian flat along the gauge tangents ``Z``, by one Cholesky factorization.

    With ``Q`` an orthonormal basis of ``span Z`` and ``s`` the largest diagonal entry of
    ``H``, ``H Q = 0`` gives ``(H + s Q Q^T)^{-1} = H^+ + Q Q^T / s`` (Lemma
    overparam-invariance: the gauge directions are the null space at a stationary point).
    Returned, with the ``r(r+1)`` zero eigenvalues, only when this is certified to be the
    pseudo-inverse :func:`pinv_sym` forms: the factorization succeeds, ``||H Q||`` is at
    the rounding level (the gauge eigenvalues fall below its cut) and ``1 / ||(H + s Q Q^T)^{-1}||_F``,
    a lower bound of the other eigenvalues, is above ``10 rtol ||H||_F``, an upper bound of the
    cut (so no other eigenvalue is zero or negative).  ``None`` otherwise: use the
    eigen-decomposition.
    """
    from scipy.linalg import cho_factor, lapack

    H = 0.5 * (H + H.T)
    scale = float(np.abs(np.diag(H)).max(initial=0.0))
    if not scale > 0.0:
        return None
    Q = np.linalg.qr(Z)[0] if Z.size else Z
    if Q.size and np.linalg.norm(H @ Q) > 1e-3 * rtol * scale:
        return None
    try:
        c, _ = cho_factor(H + scale * (Q @ Q.T) if Q.size else H, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    inv, info = lapack.dpotri(c, lower=1)
    if info != 0 or not np.all(np.isfinite(inv)):
        return None
    inv = np.tril(inv)
    inv += inv.T
    inv[np.diag_indices_from(inv)] *= 0.5
    if not 1.0 / np.linalg.norm(inv) > 10.0 * rtol * np.linalg.norm(H):
        return None
    if Q.size:
        inv -= (Q / scale) @ Q.T
    return inv, Q.shape[1]


def _gauge_cholesky_step(H: np.ndarray, g: np.ndarray, Z: np.ndarray, rtol: float) -> np.ndarray | None:
    """``-H^+ g`` on the complement of the gauge tangents ``Z`` by one Cholesky factorization.

    ``H + s Q Q^T`` (``Q`` an orthonormal basis of ``span Z``, ``s`` the largest diagonal
    entry of ``H``) is positive definite when ``H`` is on the complement of the gauge;
    where ``H Z = 0`` (at a stationary point) its solve equals the pseudo-inverse
    step, since the gradient is orthogonal to the gauge.  The gauge component of the
    step is removed.  ``None`` when the factorization fails or a pivot is below
    ``rtol`` of the largest (indefinite or nearly singular: use the eigen-decomposition).
    """
    from scipy.linalg import cho_solve

    Q = np.linalg.qr(Z)[0] if Z.size else Z
    scale = float(np.abs(np.diag(H)).max(initial=0.0))
    if not scale > 0.0:
        return None
    Ha = H + scale * (Q @ Q.T) if Q.size else H
    try:
        L = np.linalg.cholesky(Ha)  # numpy: no wrapper overhead on the small systems of the GLM fits
    except np.linalg.LinAlgError:
        return None
    d = np.diag(L) ** 2
    if d.size == 0 or not d.min() > rtol * d.max():
        return None
    step = -cho_solve((L, True), g, check_finite=False)
    if Q.size:
        step -= Q @ (Q.T @ step)
    return step if np.all(np.isfinite(step)) else None


def newton(
    fgh: Callable[[np.ndarray], tuple[float, np.ndarray, np.ndarray]],
    x0: np.ndarray,
    *,
    bound: float = BOX,
    gtol: float = 1e-9,
    max_iter: int = 200,
    rtol_eig: float = 1e-10,
    normalize: Callable[[np.ndarray], np.ndarray] | None = None,
    value: Callable[[np.ndarray], float] | None = None,
    cholesky: bool = False,
    gauge: Callable[[np.ndarray], np.ndarray] | None = None,
    first: tuple[float, np.ndarray, np.ndarray] | None = None,
    polish: bool = False,
) -> OptimResult:
    """Minimize a smooth function with exact Hessians inside the box ``|x_i| <= bound``.

    Parameters
    ----------
    fgh : callable
        ``x -> (f, grad, hess)``.
    x0 : ndarray
        Start (clipped into the box).
    gtol : float
        Convergence when the max-norm of the (projected) gradient is below ``gtol``
        and the Newton decrement ``-g . step`` below ``100 gtol^2``.
    normalize : callable, optional
        Maps an iterate to a point with the same objective value (a gauge move),
        applied to every trial point of the line search (so the accepted step lands
        on it) to stop drift along flat directions.
    value : callable, optional
        ``x -> f`` alone, used by the line search (defaults to ``fgh(x)[0]``).
    cholesky : bool, default False
        For convex problems (the GLMs): solve ``H step = -g`` by a Cholesky
        factorization, about ten times cheaper than the eigen-decomposition; falls
        back to the eigen-decomposition when ``H`` is not numerically positive definite
        (factorization fails or ``min/max`` of the Cholesky diagonal below ``1e-5``).
    gauge : callable, optional
        ``x -> Z``, the tangents of the flat (gauge) directions at ``x``.  Each step is
        then first tried by one Cholesky factorization on the complement of ``span Z``
        (:func:`_gauge_cholesky_step`, the pseudo-inverse Newton step at a stationary
        point), falling back to the eigen-decomposition when the Hessian is not
        positive definite there.  Once the gradient is below ``gtol`` but above
        ``1e-3 gtol``, one more step is taken, so the optimum is resolved to the
        rounding level (as the agreement of the sandwich across charts needs).
    first : tuple, optional
        ``fgh(x0)`` when already known (``x0`` inside the box): the first evaluation is skipped.
    """
    value = value if value is not None else (lambda z: fgh(z)[0])
    x = np.clip(np.asarray(x0, dtype=float), -bound, bound)
    f, g, H = fgh(x) if first is None else first
    if not np.isfinite(f):
        raise FloatingPointError("objective is not finite at the starting point")
    message = "maximum number of iterations reached"
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        step = _gauge_cholesky_step(H, g, np.empty((H.shape[0], 0)), 1e-10) if cholesky else None
        if step is None and gauge is not None:
            step = _gauge_cholesky_step(H, g, gauge(x), rtol_eig)
        if step is None:
            ev, Q = np.linalg.eigh(H)
            amax = np.abs(ev).max(initial=0.0)
            keep = np.abs(ev) > rtol_eig * max(amax, 1e-300)
            gq = Q.T @ g
            step = -(Q[:, keep] @ (gq[keep] / np.abs(ev[keep])))
        # Coordinates pinned at the bound with the gradient pushing outwards are frozen.
        pinned = (np.abs(x) >= bound) & (np.sign(x) == -np.sign(g))
        if pinned.any():
            step[pinned] = 0.0
        gfree = np.where(pinned, 0.0, g)
        decrement = float(-gfree @ step)
        if np.abs(gfree).max(initial=0.0) < gtol and decrement < gtol**2 * 1e2 + 1e-18:
            if polish and np.abs(gfree).max(initial=0.0) > 1e-3 * gtol:
                polish = False  # one more step to the rounding level
            else:
                converged, message = True, "gradient below tolerance"
                break
        # Backtracking line search along the projected path; the trial points are
        # normalized first (same value), so an objective evaluated there can reuse its work
        # when the next iterate's derivatives are formed.
        def trial(t: float) -> np.ndarray:
            xt = np.clip(x + t * step, -bound, bound)
            return np.clip(normalize(xt), -bound, bound) if normalize is not None else xt

        t, accepted = 1.0, False
        slope = float(g @ step)
        if decrement < 1e-12 * max(1.0, abs(f)):
            # Quadratic-convergence region: the predicted decrease is below the
            # rounding noise of f, so the Armijo test is meaningless; take the step.
            xn = trial(1.0)
            fn = float(value(xn))
            accepted = bool(np.isfinite(fn) and fn <= f + 1e-12 * max(1.0, abs(f)))
        for _ in range(0 if accepted else 60):
            xn = trial(t)
            fn = float(value(xn))
            if np.isfinite(fn) and fn <= f + 1e-4 * t * min(slope, 0.0):
                accepted = True
                break
            t *= 0.5
        if not accepted:
            # No decrease possible along the Newton direction: at numerical optimum if
            # the gradient is already tiny, otherwise report failure.
            small = np.abs(gfree).max(initial=0.0) < max(gtol, 1e3 * np.finfo(float).eps * max(1.0, abs(f)))
            converged, message = small, ("no further decrease (numerical optimum)" if small else "line search failed")
            break
        if np.max(np.abs(xn - x)) <= 1e-15 * (1.0 + np.max(np.abs(x))):
            small = np.abs(gfree).max(initial=0.0) < max(gtol, 1e3 * np.finfo(float).eps * max(1.0, abs(f)))
            where = " at the box boundary" if np.any(np.abs(x) >= bound * (1 - 1e-9)) else ""
            converged, message = small, ("numerical optimum (no further progress)" if small else f"no progress{where}")
            break
        x = xn
        f, g, H = fgh(x)
    at_bound = np.abs(x) >= bound * (1 - 1e-9)
    pinned = at_bound & (np.sign(x) == -np.sign(g))
    gnorm = float(np.abs(np.where(pinned, 0.0, g)).max(initial=0.0))
    return OptimResult(x=x, fun=float(f), grad_norm=gnorm, n_iter=it, converged=converged, at_bound=at_bound, message=message,
                       hess=H, grad=g)


@single_threaded_blas
def lbfgs_minimize(
    fun_and_grad: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x0: np.ndarray,
    *,
    fixed: Sequence[bool] | None = None,
    bounds: Sequence[tuple[float | None, float | None]] | None = None,
    gtol: float = 1e-8,
    max_iter: int = 20_000,
    roundoff_factor: float = ROUNDOFF_FACTOR,
) -> OptimResult:
    """Minimize a smooth function by scipy's L-BFGS-B with some coordinates held fixed.

    The convergence verdict is the gradient test alone, relative to the size of the
    objective (a sum over many terms, whose gradient carries that much round-off):
    ``max |grad| <= gtol * max(1, |f|)`` over the free coordinates, with the gradient
    projected at active bounds.  L-BFGS-B cannot know ``|f|`` at its end point, so it
    runs with half that tolerance measured at its start and is restarted from its end
    point (fresh curvature pairs, also after a failed line search) until the verdict
    holds, at most four runs.  A run stopped by a failed line search or by no
    resolvable decrease of ``f`` counts as converged within ``roundoff_factor`` of the
    tolerance.  BLAS runs single-threaded (L-BFGS-B's small dense algebra is much
    slower multi-threaded on a loaded machine).

    Parameters
    ----------
    fun_and_grad : callable
        ``x -> (f, grad)`` on all coordinates; a non-finite ``f`` is treated as ``+inf``
        (the gradient is then not used).
    x0 : ndarray
        Start; the fixed coordinates stay at these values.
    fixed : sequence of bool, optional
        Coordinates held at ``x0``.
    bounds : sequence of (low, high), optional
        Box on every coordinate (``None`` for no bound); the entries of fixed
        coordinates are ignored.
    gtol : float
        Relative gradient tolerance of the verdict.
    max_iter : int
        Iteration budget of each L-BFGS-B run (``5 * max_iter`` evaluations).
    roundoff_factor : float
        Relaxation of the verdict after a stalled run (see :data:`ROUNDOFF_FACTOR`).

    Returns
    -------
    OptimResult
        The end point on all coordinates, the objective and the verdict there.

    Raises
    ------
    ValueError
        ``fixed`` or ``bounds`` does not have one entry per coordinate.
    """
    from scipy.optimize import minimize

    x0 = np.asarray(x0, dtype=float).ravel()
    free = np.ones(x0.size, bool) if fixed is None else ~np.asarray(fixed, bool)
    if free.size != x0.size:
        raise ArgumentError(f"fixed has {free.size} entries, expected {x0.size}")
    if bounds is not None and len(bounds) != x0.size:
        raise ArgumentError(f"bounds has {len(bounds)} entries, expected {x0.size}")
    n_eval = [0]

    def full(x: np.ndarray) -> np.ndarray:
        u = x0.copy()
        u[free] = x
        return u

    def fg(x: np.ndarray) -> tuple[float, np.ndarray]:
        n_eval[0] += 1
        f, g = fun_and_grad(full(x))
        if not np.isfinite(f):
            return np.inf, np.zeros(x.size)
        return float(f), np.asarray(g, dtype=float)[free]

    bnds = None if bounds is None else [b for b, f in zip(bounds, free) if f]
    t0 = time.perf_counter()
    x, res = x0[free], None
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
    assert res is not None
    u = full(res.x)
    f_end, g_all = fun_and_grad(u)
    g = np.asarray(g_all, dtype=float)[free]
    if bnds is not None:  # projected gradient at active bounds
        lo = np.array([-np.inf if b[0] is None else b[0] for b in bnds])
        hi = np.array([np.inf if b[1] is None else b[1] for b in bnds])
        g = np.where((res.x <= lo) & (g > 0) | (res.x >= hi) & (g < 0), 0.0, g)
    gnorm = float(np.max(np.abs(g))) if g.size else 0.0
    # L-BFGS-B stops on a small projected gradient, on a relative decrease of f below ftol, or
    # on a failed line search (ABNORMAL) when round-off dominates near the optimum: a failed
    # line search, or no resolvable decrease of f at all, within roundoff_factor of the
    # tolerance has reached the resolution of f.
    stalled = "ABNORMAL" in str(res.message) or "RELATIVE REDUCTION OF F" in str(res.message)
    converged = gnorm <= gtol * max(1.0, abs(float(f_end))) * (roundoff_factor if stalled else 1.0)
    return OptimResult(x=u, fun=float(f_end), grad_norm=gnorm, n_iter=int(res.nit), converged=converged,
                       at_bound=np.zeros(u.size, bool), message=str(res.message), n_eval=n_eval[0], seconds=secs)
