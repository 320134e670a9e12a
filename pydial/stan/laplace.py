r"""The Laplace approximation of ``dial_sample.stan`` from its exact Hessian, evaluated in numpy.

CmdStan's ``laplace_sample`` differences the gradient numerically (a minute and more at N = 100, K = 10 and a
million judgments).  This module evaluates the program's log density ``log p(u)`` itself (every parameter is
unconstrained, so ``u`` is the parameters in declaration order, column-major, and the mode is the same with or
without the Jacobian):

* the scores ``phi = ([S; s_H], b, beta_free, log nu)`` of the cells (the family's kernels,
  :mod:`pydial.model.families`), their gradient ``g_phi`` and exact information ``H_phi`` (a sparse Laplacian per judge);
* the structure ``[S; s_H] = phi(m_raw, Z_raw, gamma_dev, P_raw, c)`` (:func:`transform`) and its adjoint
  (:func:`structure_vjp`, the gradient ``J' g_phi``);
* the Hessian ``J' H_phi J + T + H_prior``: ``J = d phi / d u`` and ``T = sum_l g_l d^2 phi_l / du du'`` by
  complex-step differentiation of the transform and of its adjoint, exact to rounding;

then Newton's method for the mode, draws ``u = u_hat + L^{-T} z`` with ``-H = L L'``, and the program's
transformed parameters and generated quantities at every draw, named and shaped as CmdStan writes them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import scipy.sparse as sp
from scipy.linalg import cho_factor, cho_solve, solve_triangular
from scipy.special import log_expit

from pydial.model.chart import helmert_basis
from pydial.model.families import FAMILIES, CellDerivatives, binary_cell, family_of_code, log_coef

from ..exceptions import ConvergenceError
from .schema import householder_perp

__all__ = ["LAPLACE_MAX_K", "SampleProgram", "LogDensity", "transform", "structure_vjp", "mode", "frame_scale",
           "laplace_sample", "normal_log_ratios", "nuts_start", "with_frame_sd"]

LAPLACE_MAX_K = 0.7
"""Largest Pareto k of the normal approximation's importance ratios ``log p - log q`` at which it is trusted: above it
a Laplace posterior is reported as a sampler problem."""

STEP = 1e-30
"""The complex step: ``f'(x) = Im f(x + i h) / h`` with no cancellation, exact to rounding for any small ``h``."""

STRUCTURE = ("m_raw", "Z_raw", "gamma_dev", "P_raw", "c")
"""The parameters the scores ``[S; s_H]`` depend on (the others enter the cells linearly)."""


@dataclass(frozen=True)
class SampleProgram:
    """``dial_sample.stan``'s data as numpy constants: sizes, bases, priors and every cell (LLM, then human).

    Built by :meth:`from_data` from the program's data dictionary.  ``shapes`` are the parameters' shapes in
    declaration order; ``QN``, ``QK`` the Helmert bases, ``E`` and ``e`` the basis ``E_perp`` and ``e_ref`` of the
    program's transformed data; ``group`` the 0-based row of ``[S; s_H]`` of a cell (``K`` for people),
    ``nu_cell`` its entry of ``log_nu`` (-1: binary), ``beta_cell`` its row of ``beta`` (-1: none) and ``pos``
    the 0-based entry of ``beta_free`` of each (row, covariate) (-1: fixed at 0).
    """

    N: int
    K: int
    r: int
    dim_c: int
    frame_sd: float
    order: bool
    ties: int
    shapes: dict[str, tuple[int, ...]]
    QN: np.ndarray
    QK: np.ndarray
    E: np.ndarray
    e: np.ndarray
    priors: dict[str, float]
    group: np.ndarray
    i: np.ndarray
    j: np.ndarray
    a: np.ndarray
    counts: np.ndarray
    w: np.ndarray
    log_coef: np.ndarray
    z: np.ndarray
    beta_cell: np.ndarray
    pos: np.ndarray
    nu_cell: np.ndarray
    calc_log_lik: bool
    calc_win_prob: bool
    human_nu: int

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> "SampleProgram":
        """Read the program's data (:func:`pydial.stan.schema.dial_sample_data`)."""
        N, K, r, C, H = (int(d[k]) for k in ("N", "K", "rank", "C", "H"))
        cal, n_cov, n_beta, ties = int(d["calibration"]), int(d["n_cov"]), int(d["n_beta"]), int(d["ties"])
        order = bool(int(d["order"]))
        group = np.concatenate([np.asarray(d["cell_judge"], np.int64).reshape(C) - 1, np.full(H, K)])
        counts = np.vstack([np.asarray(d["cell_counts"], float).reshape(C, 3),
                            np.asarray(d["human_counts"], float).reshape(H, 3)])
        fixed = np.asarray(d["beta_fixed"], np.int64).reshape(n_beta, n_cov)
        pos = np.where(fixed == 1, -1, np.cumsum(1 - fixed).reshape(n_beta, n_cov) - 1)
        beta_row = np.asarray(d["beta_row"], np.int64).reshape(K + 1)
        nu_zero = np.asarray(d["nu_zero"], np.int64).reshape(K + 1)
        n_nu = 0 if ties == 0 else K + (H > 0)
        nu_index = np.full(K + 1, -1)
        if n_nu > (H > 0):
            nu_index[:K] = np.where(nu_zero[:K] == 1, -1, np.arange(K))
        if n_nu > 0 and H > 0 and not nu_zero[K]:
            nu_index[K] = n_nu - 1
        dim_c = {0: 0, 1: 1, 2: r + 1}[cal]
        e = np.asarray(d["mu_ref"], float) / np.linalg.norm(np.asarray(d["mu_ref"], float))
        names = ("prior_m_sd", "prior_gamma_sd", "prior_Z_sd", "prior_b_sd", "prior_beta_sd", "prior_c_sd",
                 "prior_log_nu_mean", "prior_log_nu_sd")
        shapes = {"m_raw": (N - 1,), "Z_raw": (N - 2, r), "gamma_dev": (K - 1,), "P_raw": (K - 1, r),
                  "b": (K if order else 0,), "beta_free": (int(n_beta * n_cov - fixed.sum()),), "c": (dim_c,),
                  "log_nu": (n_nu,)}
        return cls(
            N=N, K=K, r=r, dim_c=dim_c, frame_sd=float(d["frame_sd"]), order=order, ties=ties, shapes=shapes,
            QN=helmert_basis(N), QK=helmert_basis(K),
            E=householder_perp(e), e=e, priors={k[6:]: float(d[k]) for k in names}, group=group,
            i=np.concatenate([np.asarray(d["cell_i"], np.int64).reshape(C), np.asarray(d["human_i"], np.int64).reshape(H)]) - 1,
            j=np.concatenate([np.asarray(d["cell_j"], np.int64).reshape(C), np.asarray(d["human_j"], np.int64).reshape(H)]) - 1,
            a=np.concatenate([np.asarray(d["cell_a"], float).reshape(C), np.zeros(H)]), counts=counts,
            w=np.concatenate([np.asarray(d["cell_w"], float).reshape(C), np.asarray(d["human_w"], float).reshape(H)]),
            log_coef=log_coef(counts),
            z=np.vstack([np.asarray(d["cell_z"], float).reshape(C, n_cov), np.asarray(d["human_z"], float).reshape(H, n_cov)]),
            beta_cell=(beta_row[group] - 1) if n_cov else np.full(C + H, -1), pos=pos, nu_cell=nu_index[group],
            calc_log_lik=bool(int(d["calc_log_lik"])), calc_win_prob=bool(int(d["calc_win_prob"])), human_nu=int(nu_index[K]))

    @property
    def sizes(self) -> list[int]:
        """The number of entries of each parameter, in declaration order."""
        return [int(np.prod(s)) for s in self.shapes.values()]

    def split(self, u: np.ndarray) -> dict[str, np.ndarray]:
        """Cut Stan's unconstrained vector ``u`` (or a stack ``(..., P)``) into the named parameters, column-major."""
        lead = u.shape[:-1]
        parts = np.split(u, np.cumsum(self.sizes)[:-1], axis=-1)
        return {n: (p.reshape(*lead, s[1], s[0]).swapaxes(-1, -2) if len(s) == 2 else p)
                for (n, s), p in zip(self.shapes.items(), parts)}

    def join(self, params: Mapping[str, Any]) -> np.ndarray:
        """Return Stan's unconstrained vector(s) of named parameter values (the inverse of :meth:`split`)."""
        out = []
        for n, s in self.shapes.items():
            v = np.asarray(params[n]) if n in params else np.zeros(s)
            lead = v.shape[:v.ndim - len(s)]
            out.append((v.swapaxes(-1, -2) if len(s) == 2 else v).reshape(*lead, -1))
        lead = np.broadcast_shapes(*(o.shape[:-1] for o in out))
        return np.concatenate([np.broadcast_to(o, (*lead, o.shape[-1])) for o in out], axis=-1)

    def indices(self, names: tuple[str, ...]) -> np.ndarray:
        """Return the positions in ``u`` of the named parameters."""
        ends = np.cumsum(self.sizes)
        return np.concatenate([np.arange(ends[k] - s, ends[k]) for k, (n, s) in enumerate(zip(self.shapes, self.sizes))
                               if n in names]).astype(np.int64)


def _mv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Return ``A x`` over stacks (``A``: ``(..., n, m)``, ``x``: ``(..., m)``) by einsum, not a BLAS call per matrix."""
    return np.einsum("...ij,...j->...i", A, x)


def _mm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Return ``A B`` over stacks of small matrices (einsum: no BLAS call per stacked matrix)."""
    return np.einsum("...ij,...jk->...ik", A, B)


def _dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x' y`` over the last axis (no conjugation: complex-step safe)."""
    return np.sum(x * y, axis=-1)


def _t(X: np.ndarray) -> np.ndarray:
    """Return the transposes of a stack of matrices."""
    return np.swapaxes(X, -1, -2)


def _left(A: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Return ``A X`` for a stack of matrices ``X`` (``(..., n, r)``) as one matrix product, not one per matrix."""
    n, r = X.shape[-2:]
    out = A @ np.moveaxis(X, -2, 0).reshape(n, -1)
    return np.moveaxis(out.reshape(A.shape[0], *X.shape[:-2], r), 0, -2)


def _frame(X: np.ndarray) -> np.ndarray:
    """``orthonormal_frame`` of ``bases.stan`` on a stack ``(..., m, r)``: classical Gram-Schmidt, no conjugation."""
    F = np.zeros_like(X)
    for l in range(X.shape[-1]):
        x = X[..., :, l]
        v = x - _mv(F[..., :, :l], _mv(_t(F[..., :, :l]), x))
        F[..., :, l] = v / np.sqrt(_dot(v, v))[..., None]
    return F


def _frame_vjp(X: np.ndarray, F: np.ndarray, Fbar: np.ndarray) -> np.ndarray:
    """Adjoint of ``F = frame(X) = X R^{-1}``: ``Xbar = [Fbar + F C] R^{-T}``, ``C`` the symmetric copy of ``tril(-Fbar' F)``."""
    if X.shape[-1] == 0:
        return np.zeros_like(X)
    R = np.triu(_mm(_t(F), X))
    M = -_mm(_t(Fbar), F)
    return _t(np.linalg.solve(R, _t(Fbar + _mm(F, np.tril(M) + _t(np.tril(M, -1))))))


def transform(prog: SampleProgram, p: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Return the transformed parameters of ``dial_sample.stan`` at the parameters ``p`` (real or complex, stacked).

    The structure ``S = gamma mu' + U V'`` (paper eq. S-llm, Cond. llm-structure) and the calibrated human score
    ``s_H = M c`` (eq. human-subspace-model) in the program's identified parameterization (its header).

    Parameters
    ----------
    prog : SampleProgram
        The program's data.
    p : mapping of str to ndarray
        The named parameters (:meth:`SampleProgram.split`), with any leading stack axes; complex values give
        complex-step derivatives.

    Returns
    -------
    dict of str to ndarray
        ``consensus_scale``, ``mu``, ``gamma``, ``V``, ``U``, ``S`` and ``s_H`` as the program computes them, plus
        the intermediates the adjoint reuses (``rho = ||m_raw||``, ``w``, ``Y``, ``Zc``, ``Pm`` = P, ``Z``).
    """
    N = prog.N
    m, c = p["m_raw"], p["c"]
    rho = np.sqrt(_dot(m, m))
    s = rho / np.sqrt(N)
    mu = (m @ prog.QN.T) / s[..., None]
    gamma = s[..., None] + p["gamma_dev"] @ prog.QK.T
    w = prog.e + m / rho[..., None]                        # Householder vector: e_ref -> -mu_dir
    Y = _left(prog.E, p["Z_raw"])
    Zc = Y - (2 / _dot(w, w))[..., None, None] * w[..., :, None] * np.einsum("...i,...ir->...r", w, Y)[..., None, :]
    Pm = _left(prog.QK, _frame(p["P_raw"]))
    Z = _left(prog.QN, Zc)
    V = np.sqrt(N) * _left(prog.QN, _frame(Zc))
    s_H = 0 * mu
    if prog.dim_c:
        s_H = c[..., :1] * mu + (np.einsum("...nr,...r->...n", V, c[..., 1:]) if prog.dim_c > 1 else 0)
    return {"consensus_scale": s, "mu": mu, "gamma": gamma, "V": V, "U": _mm(Pm, _mm(_t(Z), V)) / N,
            "S": gamma[..., :, None] * mu[..., None, :] + _mm(Pm, _t(Z)), "s_H": s_H,
            "rho": rho, "w": w, "Y": Y, "Zc": Zc, "Pm": Pm, "Z": Z}


def structure_vjp(prog: SampleProgram, p: Mapping[str, np.ndarray], G: np.ndarray, g_H: np.ndarray) -> dict[str, np.ndarray]:
    """Return the gradient of ``<G, S> + <g_H, s_H>`` in the structure's parameters (reverse mode, by hand).

    Parameters
    ----------
    prog : SampleProgram
        The program's data.
    p : mapping of str to ndarray
        The named parameters (stacked or not, real or complex as in :func:`transform`).
    G, g_H : ndarray
        Weights of ``S`` (``K x N``) and ``s_H`` (``N``), shared by a stack; the cells' score gradients give ``J' g_phi``.

    Returns
    -------
    dict of str to ndarray
        The gradients in ``m_raw``, ``Z_raw``, ``gamma_dev``, ``P_raw`` and ``c``, shaped as the parameters.
    """
    N, t = prog.N, transform(prog, p)
    m, c, rho, mu, gamma, V, w, Y, Zc = p["m_raw"], p["c"], t["rho"], t["mu"], t["gamma"], t["V"], t["w"], t["Y"], t["Zc"]
    mu_bar, gamma_bar = gamma @ G, mu @ G.T                 # S = gamma mu' + P Z'
    P_bar, Z_bar = _left(G, t["Z"]), _left(G.T, t["Pm"])
    c_bar, V_bar = 0 * c, 0 * V
    if prog.dim_c:                                          # s_H = c_0 mu + V c_V
        c_bar = np.concatenate([_dot(mu, g_H)[..., None], np.einsum("n,...nr->...r", g_H, V)[..., :prog.dim_c - 1]],
                               axis=-1)
        mu_bar = mu_bar + c[..., :1] * g_H
        if prog.dim_c > 1:
            V_bar = g_H[:, None] * c[..., None, 1:] + 0 * V
    Zc_bar = _left(prog.QN.T, Z_bar) + _frame_vjp(Zc, _frame(Zc), np.sqrt(N) * _left(prog.QN.T, V_bar))
    P_raw_bar = _frame_vjp(p["P_raw"], _frame(p["P_raw"]), _left(prog.QK.T, P_bar))
    s = rho / np.sqrt(N)
    x = m @ prog.QN.T                                       # mu = x / s, gamma = s 1 + Q_K gamma_dev
    s_bar = np.sum(gamma_bar, axis=-1) - _dot(mu_bar, x) / s**2
    m_bar = (mu_bar @ prog.QN) / s[..., None] + (s_bar / np.sqrt(N) / rho)[..., None] * m
    alpha = 2 / _dot(w, w)                                  # Zc = (I - alpha w w') Y
    q = _mv(_t(Y), w)
    wZ = _mv(_t(Zc_bar), w)
    Y_bar = Zc_bar - alpha[..., None, None] * w[..., :, None] * wZ[..., None, :]
    w_bar = -alpha[..., None] * (_mv(Zc_bar, q) + _mv(Y, wZ)) + (alpha**2 * _dot(wZ, q))[..., None] * w
    m_bar = m_bar + (w_bar - (_dot(w_bar, m) / rho**2)[..., None] * m) / rho[..., None]   # w = e + m / ||m||
    return {"m_raw": m_bar, "Z_raw": _left(prog.E.T, Y_bar), "gamma_dev": gamma_bar @ prog.QK, "P_raw": P_raw_bar, "c": c_bar}


def _normal(x: np.ndarray, mean: float, sd: float, axes: int) -> tuple[Any, np.ndarray]:
    """``normal_lpdf(x | mean, sd)`` summed over the last ``axes`` axes of a parameter, and its gradient; ``sd = 0``: flat (0)."""
    if sd <= 0:
        return 0.0, 0 * x
    z = (x.reshape(*x.shape[:x.ndim - axes], -1) - mean) / sd
    return np.sum(-0.5 * z * z, axis=-1) - z.shape[-1] * (np.log(sd) + 0.5 * np.log(2 * np.pi)), (-z / sd).reshape(x.shape)


def _prior(prog: SampleProgram, p: Mapping[str, np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
    """Return the model block's priors and their gradients by parameter (stacked or not; complex-step safe)."""
    pr = prog.priors
    A = _mm(_t(p["P_raw"]), p["P_raw"]) - np.eye(prog.r)
    value = -0.5 * np.sum(A * A, axis=(-1, -2)) / prog.frame_sd**2
    grad = {"P_raw": -2 * _mm(p["P_raw"], A) / prog.frame_sd**2}
    for name, key, mean in (("m_raw", "m", 0.0), ("gamma_dev", "gamma", 0.0), ("b", "b", 0.0), ("beta_free", "beta", 0.0),
                            ("c", "c", 0.0), ("log_nu", "log_nu", pr["log_nu_mean"]), ("Z_raw", "Z", 0.0)):
        v, grad[name] = _normal(p[name], mean, pr[key + "_sd"], len(prog.shapes[name]))
        value = value + v
    return value, grad


def _cells(prog: SampleProgram, eta: np.ndarray, l: np.ndarray) -> CellDerivatives:
    """Log-likelihood kernel of every cell (without the coefficient) and its derivatives in ``(eta, log nu)``."""
    tie = prog.nu_cell >= 0
    if prog.ties == 0 or not tie.any():
        return binary_cell(prog.counts, eta)
    fam = family_of_code(prog.ties)
    if tie.all():
        return fam.cell(prog.counts, eta, l)
    parts = (binary_cell(prog.counts[~tie], eta[..., ~tie]), fam.cell(prog.counts[tie], eta[..., tie], l[..., tie]))
    out = {}
    for f in ("value", "d_eta", "d_l", "d_eta_eta", "d_eta_l", "d_l_l"):
        v = np.empty(eta.shape)
        v[..., ~tie], v[..., tie] = getattr(parts[0], f), getattr(parts[1], f)
        out[f] = v
    return CellDerivatives(**out)


@dataclass
class _Point:
    """``log p(u)``, its gradient and, with ``hess``, its Hessian at ``u``."""

    value: float
    grad: np.ndarray
    hess: np.ndarray | None


def _design(prog: SampleProgram) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Sparse ``d eta / d phi`` and ``d log nu / d phi`` of the cells, ``phi = ([S; s_H] row-major, b, beta_free, log nu)``."""
    n, NS = prog.group.size, (prog.K + 1) * prog.N
    nb, nbf, nl = prog.shapes["b"][0], prog.shapes["beta_free"][0], prog.shapes["log_nu"][0]
    cell = prog.group * prog.N  # (rows, columns, values) of D_eta's entries:
    entries = [(np.arange(n), cell + prog.i, np.ones(n)), (np.arange(n), cell + prog.j, -np.ones(n))]
    if nb:
        llm = np.flatnonzero(prog.group < prog.K)
        entries.append((llm, NS + prog.group[llm], prog.a[llm]))
    for k in range(prog.z.shape[1]):
        free = np.flatnonzero((prog.beta_cell >= 0) & (prog.pos[np.maximum(prog.beta_cell, 0), k] >= 0))
        entries.append((free, NS + nb + prog.pos[prog.beta_cell[free], k], prog.z[free, k]))
    shape = (n, NS + nb + nbf + nl)
    rows, cols, vals = (np.concatenate(parts) for parts in zip(*entries))
    D_eta = sp.csr_matrix((vals, (rows, cols)), shape=shape)
    tie = np.flatnonzero(prog.nu_cell >= 0)
    D_l = sp.csr_matrix((np.ones(tie.size), (tie, NS + nb + nbf + prog.nu_cell[tie])), shape=shape)
    return D_eta, D_l


class LogDensity:
    """``log p(u)`` of ``dial_sample.stan`` on its data, with the exact gradient and Hessian (module docstring).

    Calling it at Stan's unconstrained vector ``u`` returns the value, the gradient and (``hess=True``) the Hessian;
    :meth:`value` evaluates a stack of points (the draws' ``log_p__``).

    Parameters
    ----------
    prog : SampleProgram
        The program's data.
    """

    def __init__(self, prog: SampleProgram) -> None:
        self.prog = prog
        self.struct = prog.indices(STRUCTURE)
        self.rest = np.setdiff1d(np.arange(sum(prog.sizes)), self.struct)   # b, beta_free, log nu: linear in the cells
        self.D_eta, self.D_l = _design(prog)

    def inputs(self, p: Mapping[str, np.ndarray], t: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Every cell's ``eta`` and ``log nu`` (``-inf``: binary), ``(..., cells)``, at parameters ``p`` with transform ``t``."""
        Sx = np.concatenate([t["S"], t["s_H"][..., None, :]], axis=-2)
        phi = np.concatenate([Sx.reshape(*Sx.shape[:-2], -1), p["b"], p["beta_free"], p["log_nu"]], axis=-1)
        eta = (self.D_eta @ phi.reshape(-1, phi.shape[-1]).T).T.reshape(*phi.shape[:-1], -1)
        l = (self.D_l @ phi.reshape(-1, phi.shape[-1]).T).T.reshape(eta.shape)
        return eta, np.where(self.prog.nu_cell >= 0, l, -np.inf)

    def value(self, us: np.ndarray) -> np.ndarray:
        """``log p(u)`` at every row of the stack ``us`` (``(draws, P)``)."""
        prog = self.prog
        p = prog.split(us)
        eta, l = self.inputs(p, transform(prog, p))
        if prog.nu_cell.max() < 0:   # binary cells: w_i log sigma(eta) + w_j log sigma(-eta), one log_expit
            kernel = log_expit(eta) @ (prog.w * (prog.counts[:, 0] + prog.counts[:, 1])) - eta @ (prog.w * prog.counts[:, 1])
        else:
            kernel = _cells(prog, eta, l).value @ prog.w
        return kernel + prog.w @ prog.log_coef + _prior(prog, p)[0]

    def __call__(self, u: np.ndarray, hess: bool = False) -> _Point:
        """``log p(u)``, its gradient, and (``hess``) its Hessian."""
        prog = self.prog
        p = prog.split(u)
        eta, l = self.inputs(p, transform(prog, p))
        cd = _cells(prog, eta, l)
        prior, g_prior = _prior(prog, p)
        value = float(prog.w @ (prog.log_coef + cd.value) + prior)
        g_phi = self.D_eta.T @ (prog.w * cd.d_eta) + self.D_l.T @ (prog.w * cd.d_l)
        NS = (prog.K + 1) * prog.N
        Gx = g_phi[:NS].reshape(prog.K + 1, prog.N)
        grad = structure_vjp(prog, p, Gx[:-1], Gx[-1])
        grad |= dict(zip(("b", "beta_free", "log_nu"), np.split(g_phi[NS:], np.cumsum(prog.sizes[4:6]))))
        g_u = prog.join({n: g + g_prior[n] for n, g in grad.items()})
        return _Point(value, g_u, self._hessian(u, cd, Gx) if hess else None)

    def _hessian(self, u: np.ndarray, cd: CellDerivatives, Gx: np.ndarray) -> np.ndarray:
        """``J' H_phi J + T + H_prior`` (module docstring); ``J`` and ``T`` by complex steps in the structure."""
        prog, w, k = self.prog, self.prog.w, self.struct
        W = lambda v: sp.diags(w * v)  # noqa: E731
        H_phi = (self.D_eta.T @ W(cd.d_eta_eta) @ self.D_eta + self.D_l.T @ W(cd.d_l_l) @ self.D_l
                 + self.D_eta.T @ W(cd.d_eta_l) @ self.D_l + self.D_l.T @ W(cd.d_eta_l) @ self.D_eta)
        P, NS = u.size, (prog.K + 1) * prog.N
        steps = np.broadcast_to(u.astype(complex), (k.size, P)).copy()
        steps[np.arange(k.size), k] += 1j * STEP             # one complex step per structural coordinate
        p = prog.split(steps)
        t = transform(prog, p)
        J = np.zeros((H_phi.shape[0], P))
        J[:NS, k] = np.concatenate([t["S"], t["s_H"][:, None, :]], axis=1).reshape(k.size, NS).T.imag / STEP
        J[NS:, self.rest] = np.eye(self.rest.size)
        g, g_prior = structure_vjp(prog, p, Gx[:-1], Gx[-1]), _prior(prog, p)[1]
        T = prog.join({n: g[n] + g_prior[n] for n in STRUCTURE})[:, k].imag / STEP
        H = J.T @ (H_phi @ J)
        H[np.ix_(k, k)] += 0.5 * (T + T.T)
        pr = prog.priors
        H[self.rest, self.rest] -= np.concatenate([np.full(prog.shapes[n][0], 1 / pr[s] ** 2 if pr[s] > 0 else 0.0)
                                                   for n, s in (("b", "b_sd"), ("beta_free", "beta_sd"),
                                                                ("log_nu", "log_nu_sd"))])
        return H


def mode(logp: LogDensity, u0: np.ndarray, *, tol: float = 1e-10, max_iter: int = 100) -> tuple[np.ndarray, _Point, int]:
    """Find the mode of ``log p`` from ``u0`` by Newton's method with a backtracking line search.

    A Hessian that is not negative definite is shifted by a multiple of the identity until it is (Levenberg-Marquardt).

    Parameters
    ----------
    logp : LogDensity
        The log density.
    u0 : ndarray
        The start (Stan's unconstrained vector).
    tol : float
        Stop when the Newton decrement ``g' (-H)^{-1} g / 2`` is below it.
    max_iter : int
        Most iterations.

    Returns
    -------
    u : ndarray
        The mode.
    point
        ``log p``, its gradient and Hessian there (``.value``, ``.grad``, ``.hess``).
    iterations : int
        Newton's iterations.

    Raises
    ------
    pydial.ConvergenceError
        A non-finite density, no ascent along a Newton step, or ``max_iter`` iterations.
    """
    u = np.asarray(u0, float).copy()
    for it in range(1, max_iter + 1):
        pt = logp(u, hess=True)
        assert pt.hess is not None
        if not (np.isfinite(pt.value) and np.all(np.isfinite(pt.hess))):
            raise ConvergenceError(f"dial_sample.stan's log density or its Hessian is not finite at the start of Newton's "
                                   f"iteration {it} (log p = {pt.value:.6g}); use algorithm='nuts'")
        A, shift = -pt.hess, 0.0
        while True:
            try:
                cf = cho_factor(A + shift * np.eye(u.size))
                break
            except np.linalg.LinAlgError:
                shift = max(4 * shift, 1e-8 * max(1.0, float(np.abs(np.diag(A)).max())))
        step = cho_solve(cf, pt.grad)
        dec = float(pt.grad @ step) / 2
        if shift == 0.0 and dec < tol:
            return u, pt, it
        t = 1.0
        while True:
            new = logp(u + t * step)
            if np.isfinite(new.value) and new.value >= pt.value + 1e-4 * t * 2 * dec:
                break
            t /= 2
            if t < 1e-10:
                raise ConvergenceError(f"dial_sample.stan's mode: no ascent along the Newton step at iteration {it} "
                                       f"(Newton decrement {dec:.3g}); use algorithm='nuts'")
        u = u + t * step
    raise ConvergenceError(f"dial_sample.stan's mode: Newton did not converge in {max_iter} iterations; use algorithm='nuts'")


def frame_scale(prog: SampleProgram, u_hat: np.ndarray, hess: np.ndarray, *, bounds: tuple[float, float] = (1e-3, 0.2)) -> float:
    """Return the ``frame_sd`` that gives ``P_raw`` one posterior scale: twice the sd of the frame's own directions.

    The frame ``F = frame(P_raw)`` moves along ``dim = (K - 1) r - r (r + 1) / 2`` directions (not those that change
    ``P_raw' P_raw``), of mean variance ``s^2 = tr Cov(F) / dim`` under the Laplace approximation at ``u_hat``.  The
    expansion's density ``exp(-||P_raw' P_raw - I||^2 / (2 frame_sd^2))`` gives the length of ``P_raw`` the sd
    ``frame_sd / 2``; ``frame_sd = 2 s`` (within ``bounds``) matches the two.  Only NUTS's geometry depends on it.

    Parameters
    ----------
    prog : SampleProgram
        The program's data (its ``frame_sd`` is returned for rank 0).
    u_hat, hess : ndarray
        The mode, and the Hessian of ``log p`` there.
    bounds : tuple of float
        The range of the result.

    Returns
    -------
    float
        The matched ``frame_sd``.
    """
    k = prog.indices(("P_raw",))
    r = prog.r
    dim = k.size - r * (r + 1) // 2
    if r == 0 or dim <= 0:
        return prog.frame_sd
    P_raw = prog.split(u_hat)["P_raw"]
    steps = np.broadcast_to(P_raw.ravel(order="F").astype(complex), (k.size, k.size)).copy()
    steps[np.arange(k.size), np.arange(k.size)] += 1j * STEP
    F = _frame(_t(steps.reshape(k.size, r, -1)))                     # (k, K - 1, r), one step per column
    J = _t(F).reshape(k.size, -1).imag.T / STEP                    # d vec(F') / d P_raw
    cov = np.linalg.inv(-hess)[np.ix_(k, k)]
    s = np.sqrt(max(np.trace(J @ cov @ J.T), 0.0) / dim)
    return float(np.clip(2 * s, *bounds))


def with_frame_sd(prog: SampleProgram, u: np.ndarray, hess: np.ndarray, frame_sd: float) -> tuple[SampleProgram, np.ndarray]:
    """Return the program at another ``frame_sd`` and its Hessian at ``u``: only the expansion's term changes.

    The term ``-||P_raw' P_raw - I||^2 / (2 frame_sd^2)`` scales with ``1 / frame_sd^2``; its Hessian (the
    complex-step Jacobian of its gradient) is swapped, exactly, without evaluating the cells again.
    """
    new = dataclasses.replace(prog, frame_sd=float(frame_sd))
    k = prog.indices(("P_raw",))
    if k.size == 0:
        return new, hess
    steps = np.broadcast_to(u.astype(complex), (k.size, u.size)).copy()
    steps[np.arange(k.size), k] += 1j * STEP
    unit = dataclasses.replace(prog, frame_sd=1.0)
    E = _prior(unit, unit.split(steps))[1]["P_raw"]            # the gradient at frame_sd = 1, one step per row
    T = _t(E).reshape(k.size, -1).imag / STEP                 # rows: d grad(P_raw, column-major) / d u_k
    out = hess.copy()
    out[np.ix_(k, k)] += (1 / new.frame_sd**2 - 1 / prog.frame_sd**2) * 0.5 * (T + T.T)
    return new, out


def _cholesky(hess: np.ndarray, what: str) -> np.ndarray:
    """Lower Cholesky factor ``L`` of ``-hess`` (``-hess = L L'``); a :class:`~pydial.ConvergenceError` naming ``what``."""
    try:
        return np.linalg.cholesky(-hess)
    except np.linalg.LinAlgError:
        ev = np.linalg.eigvalsh(-hess)[0]
        raise ConvergenceError(f"dial_sample.stan's Hessian at the mode is not negative definite (smallest eigenvalue "
                               f"of -H {ev:.3g}): {what}") from None


def _normal_draws(u_hat: np.ndarray, L: np.ndarray, zs: np.ndarray) -> np.ndarray:
    """Draws ``u_hat + L^{-T} z`` of ``N(u_hat, (L L')^{-1})``, one per row of the standard normal ``zs``."""
    return u_hat + solve_triangular(L.T, zs.T, lower=False).T


def normal_log_ratios(prog: SampleProgram, u_hat: np.ndarray, hess: np.ndarray, *, draws: int,
                      rng: np.random.Generator, chunk: int = 50) -> np.ndarray:
    """Return ``log p(u) - log q(u)`` at ``draws`` draws from the normal approximation ``q = N(u_hat, (-hess)^{-1})``.

    The importance ratios up to a constant (``log_p__ - log_q__`` of :func:`laplace_sample`): their Pareto k
    (:func:`pydial.stan.idata.psislw`) says how close the posterior is to that normal (:data:`LAPLACE_MAX_K`).

    Raises
    ------
    pydial.ConvergenceError
        ``-hess`` is not positive definite.
    """
    L = _cholesky(hess, "no normal approximation to weigh")
    zs = rng.standard_normal((draws, u_hat.size))
    us = _normal_draws(u_hat, L, zs)
    logp = LogDensity(prog)
    return np.concatenate([logp.value(us[a:a + chunk]) for a in range(0, draws, chunk)]) + 0.5 * np.sum(zs**2, axis=1)


def nuts_start(prog: SampleProgram, u_hat: np.ndarray, hess: np.ndarray, *, chains: int,
               rng: np.random.Generator) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    """Return NUTS's start: one draw per chain from the normal approximation ``N(u_hat, (-hess)^{-1})``, and its covariance.

    Parameters
    ----------
    prog : SampleProgram
        The program's data.
    u_hat, hess : ndarray
        The mode (or a point near it), and the Hessian of ``log p`` there.
    chains : int
        Number of chains.
    rng : numpy.random.Generator
        The draws' generator.

    Returns
    -------
    inits : list of dict
        Named parameter values, one dict per chain: in the bulk of the posterior, apart from each other.
    covariance : ndarray
        The approximation's covariance ``(-hess)^{-1}``: NUTS's dense inverse metric (its diagonal: one to adapt from).

    Raises
    ------
    pydial.ConvergenceError
        ``-hess`` is not positive definite.
    """
    L = _cholesky(hess, "no normal approximation to start NUTS from")
    us = _normal_draws(u_hat, L, rng.standard_normal((u_hat.size, chains)).T)
    L_inv = solve_triangular(L, np.eye(u_hat.size), lower=True)
    cov = L_inv.T @ L_inv
    return [prog.split(u) for u in us], (cov + cov.T) / 2


def laplace_sample(d: Mapping[str, Any], init: Mapping[str, Any], *, draws: int, seed: int | None,
                   chunk: int = 50, hess: np.ndarray | None = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """Draw from the Laplace approximation of ``dial_sample.stan`` at its mode (module docstring).

    The posterior is the program's: paper eqs. binomial-model-llm and binomial-model-human (the power posterior of
    eq. weighted-loss with the data's cell weights) under the structure of eq. S-llm and the program's priors.

    Parameters
    ----------
    d : mapping
        The program's data (:func:`pydial.stan.schema.dial_sample_data`).
    init : mapping
        Named parameter values to start Newton's method from (the numpy fit's estimates).
    draws : int
        Number of draws.
    seed : int, optional
        Seed of the normal draws and the replicated counts.
    chunk : int
        Draws evaluated at a time (their cells' arrays are ``chunk x cells``).
    hess : ndarray, optional
        The Hessian of ``log p`` at ``init`` when ``init`` is the mode already: Newton's method is skipped.

    Returns
    -------
    draws : dict of str to ndarray
        Every program variable (parameters, transformed parameters, generated quantities), ``(1, draws, *shape)``.
    stats : dict of str to ndarray
        ``log_p__`` and ``log_q__`` (the log density and the normal's at each draw), as CmdStan writes them, ``(1, draws)``.
    iterations : int
        Newton's iterations to the mode.

    Raises
    ------
    pydial.ConvergenceError
        Newton's method fails, or the Hessian at the mode is not negative definite.
    """
    logp = LogDensity(SampleProgram.from_data(d))
    u_hat, iterations = logp.prog.join(init), 0
    if hess is None:
        u_hat, pt, iterations = mode(logp, u_hat)
        assert pt.hess is not None
        L = _cholesky(pt.hess, "the Laplace approximation does not exist here; use algorithm='nuts'")
    else:
        L = _cholesky(hess, "no Laplace approximation; use algorithm='nuts'")
    rng = np.random.default_rng(seed)
    zs = rng.standard_normal((draws, u_hat.size))
    us = _normal_draws(u_hat, L, zs)
    log_q = -0.5 * np.sum(zs**2, axis=1)   # CmdStan's log_q__: the normal's log density up to its constant
    parts = [_variables(logp, us[a:a + chunk], rng) for a in range(0, draws, chunk)]
    out = {k: np.concatenate([q[k] for q in parts])[None] for k in parts[0] if parts[0][k].size}   # CmdStan: no zero-size
    log_p = np.concatenate([logp.value(us[a:a + chunk]) for a in range(0, draws, chunk)])
    return out, {"log_p__": log_p[None], "log_q__": log_q[None]}, iterations


def _variables(logp: LogDensity, us: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Return the variables ``dial_sample.stan`` writes at the draws ``us``: parameters, transformed, generated (those on)."""
    prog = logp.prog
    p = prog.split(us)
    t = transform(prog, p)
    D, S, s_H = us.shape[0], t["S"], t["s_H"]
    out = dict(p) | {k: t[k] for k in ("consensus_scale", "mu", "gamma", "V", "U", "S", "s_H")}
    free = prog.pos >= 0                                   # beta's rows, 0 where fixed
    out["beta"] = np.zeros((D, *prog.pos.shape))
    out["beta"][:, free] = p["beta_free"][:, prog.pos[free]]
    out["consensus_strength"] = np.sqrt(np.sum(S.sum(axis=1) ** 2, axis=-1)) / np.sqrt(prog.K * np.sum(S * S, axis=(1, 2)))
    out["nu"] = np.exp(p["log_nu"])
    if prog.calc_win_prob:
        l_h = p["log_nu"][:, prog.human_nu] if prog.human_nu >= 0 else np.full(D, -np.inf)
        diff = s_H[:, :, None] - s_H[:, None, :]
        fam = family_of_code(prog.ties) if prog.human_nu >= 0 else FAMILIES[None]
        out["win_prob"] = fam.probabilities(diff.ravel(), np.repeat(np.where(np.isfinite(l_h), l_h, 0.0),
                                                                    prog.N**2))[:, 0].reshape(D, prog.N, prog.N)
    if prog.calc_log_lik:
        eta, l = logp.inputs(p, t)
        out["log_lik"] = prog.log_coef + _cells(prog, eta, l).value
        out["counts_rep"] = _replicate(prog, eta, l, rng)
    return out


def _replicate(prog: SampleProgram, eta: np.ndarray, l: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``paired_rng`` at every draw: replicated counts per cell with each cell's total (binary cells: their decisive total)."""
    tie = prog.nu_cell >= 0
    out = np.zeros((*eta.shape, 3))
    m = (prog.counts[~tie, 0] + prog.counts[~tie, 1]).astype(np.int64)
    out[:, ~tie, 0] = rng.binomial(m, 1 / (1 + np.exp(-eta[:, ~tie])))
    out[:, ~tie, 1] = m - out[:, ~tie, 0]
    if tie.any():
        P = np.maximum(family_of_code(prog.ties).probabilities(eta[:, tie].ravel(), l[:, tie].ravel()), 0)
        n = np.broadcast_to(prog.counts[tie].sum(axis=1).astype(np.int64), eta[:, tie].shape).ravel()
        out[:, tie] = rng.multinomial(n, P / P.sum(axis=1, keepdims=True)).reshape(eta.shape[0], -1, 3)
    return out
