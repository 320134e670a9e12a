"""Box-constrained damped Newton minimization on a (possibly gauge-singular) chart.

Each step is first tried by one Cholesky factorization of the Hessian completed on the known gauge
tangents, else by its eigen-decomposition: negligible curvature dropped (Moore-Penrose, Lemma
overparam-invariance), negative curvature replaced by its absolute value (saddle-free).  A
backtracking line search on the box-projected path guarantees descent; near the optimum this is
the plain Newton step.
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

GAUGE_ANGLE = 1e-6  # largest angle between the gauge tangents and the flat eigenvectors that pinv_gauge certifies

ROUNDOFF_FACTOR = 100.0
"""An L-BFGS run stopped by a failed line search counts as converged within this factor of the gradient
tolerance: no decrease of ``log p`` is resolvable there in double precision."""


F = TypeVar("F", bound=Callable)


def single_threaded_blas(func: F) -> F:
    """Run ``func`` with one BLAS thread (the matrices are small; parallelism belongs to the replications)."""

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
    """Outcome of :func:`newton` or :func:`lbfgs_minimize` (and Stan's, through the engines).

    ``x`` the final point, ``fun`` the objective there, ``grad_norm`` the max-norm of its free gradient,
    ``n_iter`` the iterations (of the last L-BFGS-B run), ``converged`` the optimizer's verdict,
    ``at_bound`` the coordinates on the box boundary, ``message`` why it stopped, ``hess``/``grad`` at
    ``x`` when known, ``n_eval`` the evaluations (``-1``: not counted), ``seconds`` the wall time.
    """

    x: np.ndarray
    fun: float
    grad_norm: float
    n_iter: int
    converged: bool
    at_bound: np.ndarray
    message: str
    hess: np.ndarray | None = field(default=None, repr=False, compare=False)
    grad: np.ndarray | None = field(default=None, repr=False, compare=False)
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
    """Warn with a ConvergenceWarning (``"at bound"``, ``"not converged"``) when ``opt`` is not resolved (``what``: the fit)."""
    status = "at bound" if opt.at_bound.any() else "not converged"
    if not opt.converged:
        warnings.warn(ConvergenceWarning(f"{what}: optimizer did not converge ({opt.message}; "
                                         f"max|grad| = {opt.grad_norm:.2e})", status), stacklevel=3)
    elif opt.at_bound.any():
        warnings.warn(ConvergenceWarning(f"{what}: {int(opt.at_bound.sum())} coordinate(s) on the optimization box "
                                         f"(|x| = {BOX:g}): the estimate is not resolved within the box", status),
                      stacklevel=3)


def pinv_sym(H: np.ndarray, rtol: float = ZERO_EIG_RTOL, gauge: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Moore-Penrose inverse of a symmetric matrix and the number of eigenvalues below ``rtol`` of the largest dropped.

    With ``gauge`` (the flat directions' tangents) first by one Cholesky factorization (:func:`pinv_gauge`).
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
    """:func:`pinv_sym` of a Hessian flat along the gauge tangents ``Z`` (Lemma overparam-invariance) by a Cholesky factor.

    It is ``(H + s Q Q^T)^{-1} - Q Q^T / s``, ``Q`` an orthonormal basis of ``span Z``, ``s`` the largest
    diagonal entry; returned only when certified, else None: the other eigenvalues above the cut, and ``span Z``
    within an angle ``||H Q|| ||(H + s Q Q^T)^{-1}|| <= 1e-6`` of the flat eigenvectors (gauge-invariant
    products ``a^T H^+ b``, ``a, b`` orthogonal to ``Z``, then agree with the eigen-decomposition's to its square).
    """
    from scipy.linalg import cho_factor, lapack

    H = H + H.T
    H *= 0.5
    if (shifted := _gauge_shift(H, Z)) is None:
        return None
    Q, scale, Ha = shifted
    flat = float(np.linalg.norm(H @ Q)) if Q.size else 0.0
    if flat > rtol * scale:  # curvature above the cut along the gauge: not a flat direction
        return None
    norm_H = np.linalg.norm(H)
    try:  # Ha is symmetric: its transpose is it in LAPACK's column order, factored and inverted in place
        c, _ = cho_factor(Ha.T, lower=True, check_finite=False, overwrite_a=True)
    except np.linalg.LinAlgError:
        return None
    inv, info = lapack.dpotri(c, lower=1, overwrite_c=1)
    if info != 0 or not np.all(np.isfinite(inv)):
        return None
    inv = np.tril(inv)
    inv += inv.T
    inv[np.diag_indices_from(inv)] *= 0.5
    norm_inv = np.linalg.norm(inv)
    if not 1.0 / norm_inv > 10.0 * rtol * norm_H or flat * norm_inv > GAUGE_ANGLE:
        return None
    if Q.size:
        inv -= (Q / scale) @ Q.T
    return inv, Q.shape[1]


def _gauge_shift(H: np.ndarray, Z: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, float, np.ndarray] | None:
    """``(Q, s, H + s Q Q^T)`` (in ``out`` if given): ``Q`` an orthonormal basis of ``span Z``, ``s`` the largest ``|H_ii|``."""
    scale = float(np.abs(np.diag(H)).max(initial=0.0))
    if not scale > 0.0:
        return None
    Q = np.linalg.qr(Z)[0] if Z.size else Z
    if not Q.size:
        return Q, scale, H
    Ha = np.matmul(Q, Q.T, out=out)  # H + s Q Q^T formed in one work array
    Ha *= scale
    Ha += H
    return Q, scale, Ha


def _cholesky_upper(A: np.ndarray, overwrite: bool = False) -> np.ndarray | None:
    """Return the upper Cholesky factor ``U`` (``A = U^T U``) of a symmetric positive definite ``A``, else None.

    LAPACK's ``potrf`` on ``A^T``, which is ``A`` in column order: 1.5-4x faster than numpy's ``cholesky`` from
    ``n = 300`` on (measured at ``n = 300 / 1,000 / 2,152``); numpy's below ``n = 64``, where it costs less.
    ``overwrite``: ``A`` is a work array, factored in place (no fresh ``n x n`` array).
    """
    from scipy.linalg import lapack

    if A.shape[0] < 64:
        try:
            return np.linalg.cholesky(A).T
        except np.linalg.LinAlgError:
            return None
    U, info = lapack.dpotrf(A.T, lower=0, clean=1, overwrite_a=int(overwrite))
    return U if info == 0 else None


def _gauge_cholesky_step(H: np.ndarray, g: np.ndarray, Z: np.ndarray, rtol: float,
                         work: np.ndarray | None = None) -> np.ndarray | None:
    """``-H^+ g`` off the gauge tangents ``Z`` by a Cholesky factor of ``H + s Q Q^T``; None if it fails or a pivot < ``rtol``."""
    from scipy.linalg import cho_solve

    if (shifted := _gauge_shift(H, Z, work)) is None:
        return None
    Q, _, Ha = shifted
    U = _cholesky_upper(Ha, overwrite=Ha is not H)
    if U is None:
        return None
    d = np.diag(U) ** 2
    if d.size == 0 or not d.min() > rtol * d.max():
        return None
    step = -cho_solve((U, False), g, check_finite=False)
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
    """Minimize a smooth function with exact Hessians ``fgh: x -> (f, grad, hess)`` inside the box ``|x_i| <= bound``.

    Converged when the max-norm of the projected gradient is below ``gtol`` and the Newton decrement
    below ``100 gtol^2``.  ``normalize``: a gauge move applied to every trial point; ``value``: ``f`` alone
    for the line search; ``cholesky``: convex problems, Cholesky first; ``gauge``: ``x -> Z``, the gauge
    tangents (:func:`_gauge_cholesky_step`); ``first``: ``fgh(x0)`` when known; ``polish``: one more step
    once the gradient is below ``gtol``.
    """
    value = value if value is not None else (lambda z: fgh(z)[0])
    x = np.clip(np.asarray(x0, dtype=float), -bound, bound)
    f, g, H = fgh(x) if first is None else first
    if not np.isfinite(f):
        raise FloatingPointError("objective is not finite at the starting point")
    converged, message = False, "maximum number of iterations reached"
    it, work = 0, None
    for it in range(1, max_iter + 1):
        step = _gauge_cholesky_step(H, g, np.empty((H.shape[0], 0)), 1e-10) if cholesky else None
        if step is None and gauge is not None:
            work = np.empty_like(H) if work is None else work  # one P x P work array for every step
            step = _gauge_cholesky_step(H, g, gauge(x), rtol_eig, work)
        if step is None:
            ev, Q = np.linalg.eigh(H)
            keep = np.abs(ev) > rtol_eig * max(np.abs(ev).max(initial=0.0), 1e-300)
            step = -(Q[:, keep] @ ((Q.T @ g)[keep] / np.abs(ev[keep])))
        # Coordinates pinned at the bound with the gradient pushing outwards are frozen.
        pinned = (np.abs(x) >= bound) & (np.sign(x) == -np.sign(g))
        step[pinned] = 0.0
        gfree = np.where(pinned, 0.0, g)
        decrement = float(-gfree @ step)
        if np.abs(gfree).max(initial=0.0) < gtol and decrement < gtol**2 * 1e2 + 1e-18:
            if polish and np.abs(gfree).max(initial=0.0) > 1e-3 * gtol:
                polish = False  # one more step to the rounding level
            else:
                converged, message = True, "gradient below tolerance"
                break
        # backtracking line search along the projected path, the trial points normalized (same value)
        def trial(t: float) -> np.ndarray:
            xt = np.clip(x + t * step, -bound, bound)
            return np.clip(normalize(xt), -bound, bound) if normalize is not None else xt

        t, accepted = 1.0, False
        slope = float(g @ step)
        if decrement < 1e-12 * max(1.0, abs(f)):
            # the predicted decrease is below the rounding noise of f: take the step
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
        # no decrease or no progress: a numerical optimum when the gradient is already tiny, else a failure
        small = np.abs(gfree).max(initial=0.0) < max(gtol, 1e3 * np.finfo(float).eps * max(1.0, abs(f)))
        if not accepted:
            converged, message = small, ("no further decrease (numerical optimum)" if small else "line search failed")
            break
        if np.max(np.abs(xn - x)) <= 1e-15 * (1.0 + np.max(np.abs(x))):
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


def _gradient_polish(fg: Callable[[np.ndarray], tuple[float, np.ndarray]], x: np.ndarray, gtol: float) -> np.ndarray:
    """At most ten Newton steps (:func:`_newton_cg`, halved at most three times) taken while they shrink ``max |g|``.

    L-BFGS-B's line search stalls where the decrease it needs, ``~ g' H^{-1} g / 2``, is below the rounding of ``f``,
    while the gradient still resolves the optimum.
    """
    f, g = fg(x)
    gmax = float(np.max(np.abs(g)))
    for _ in range(10):
        if gmax <= 0.5 * gtol * max(1.0, abs(f)):
            break
        step = _newton_cg(fg, x, g)
        for t in (1.0, 0.5, 0.25, 0.125):
            fn, gn = fg(x + t * step)
            if np.isfinite(fn) and float(np.max(np.abs(gn))) < gmax:
                break
        else:
            break
        x, f, g, gmax = x + t * step, fn, gn, float(np.max(np.abs(gn)))
    return x


def _newton_cg(fg: Callable[[np.ndarray], tuple[float, np.ndarray]], x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Newton step ``-H^{-1} g``: at most 50 CG steps on central differences of ``g``, stopping at negative curvature."""
    scale = np.sqrt(np.finfo(float).eps) * (1.0 + float(np.max(np.abs(x))))

    def hv(v: np.ndarray) -> np.ndarray:
        h = scale / max(float(np.max(np.abs(v))), 1e-300)
        return (fg(x + h * v)[1] - fg(x - h * v)[1]) / (2 * h)

    s, r = np.zeros_like(g), -g
    p, rr = r.copy(), float(r @ r)
    for _ in range(min(50, g.size)):
        q = hv(p)
        curv = float(p @ q)
        if curv <= 0:
            return s if s.any() else p
        s, r_new = s + rr / curv * p, r - rr / curv * q
        rr_new = float(r_new @ r_new)
        if np.sqrt(rr_new) <= 1e-3 * np.sqrt(float(g @ g)):
            return s
        p, r, rr = r_new + rr_new / rr * p, r_new, rr_new
    return s


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
    """Minimize ``fun_and_grad: x -> (f, grad)`` by scipy's L-BFGS-B with the ``fixed`` coordinates held at ``x0``.

    Converged when ``max |grad| <= gtol * max(1, |f|)`` over the free coordinates (projected at active
    ``bounds``), within ``roundoff_factor`` after a stalled run; restarted from its end point at most
    four times; a run without bounds that stalls short of that allowance is finished by Newton steps
    judged by the gradient (:func:`_gradient_polish`).  A non-finite ``f`` counts as ``+inf``.  Raises
    ArgumentError when ``fixed`` or ``bounds`` has not one entry per coordinate.
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
    assert res is not None
    stalled = "ABNORMAL" in str(res.message) or "RELATIVE REDUCTION OF F" in str(res.message)
    if stalled and bnds is None and g_end > gtol * max(1.0, abs(float(res.fun))) * roundoff_factor:
        x = _gradient_polish(fg, x, gtol)  # a stall short of even the rounding allowance: finish on the gradient
    secs = time.perf_counter() - t0
    u = full(x)
    f_end, g_all = fun_and_grad(u)
    g = np.asarray(g_all, dtype=float)[free]
    if bnds is not None:  # projected gradient at active bounds (a missing bound, NaN, is never active)
        lo, hi = np.array(bnds, dtype=float).reshape(-1, 2).T
        g = np.where((res.x <= lo) & (g > 0) | (res.x >= hi) & (g < 0), 0.0, g)
    gnorm = float(np.max(np.abs(g))) if g.size else 0.0
    # a failed line search (ABNORMAL) or no resolvable decrease of f has reached the resolution of f
    converged = gnorm <= gtol * max(1.0, abs(float(f_end))) * (roundoff_factor if stalled else 1.0)
    return OptimResult(x=u, fun=float(f_end), grad_norm=gnorm, n_iter=int(res.nit), converged=converged,
                       at_bound=np.zeros(u.size, bool), message=str(res.message), n_eval=n_eval[0], seconds=secs)
