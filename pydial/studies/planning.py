r"""Planning human labels from a pilot fit: how many (:func:`plan`; which pairs: :mod:`pydial.studies.pair_design`).

Both evaluate the paper's first-order theory at the pilot's estimates and human design.  Per human comparison drawn
with pair probabilities :math:`\rho_{ij}`, the human loss has information (eq. comparison-laplacian)

.. math:: L = \sum_{i<j}\rho_{ij}\,p_{ij}(1-p_{ij})\,(e_i-e_j)(e_i-e_j)^\top ,
          \qquad p_{ij}=\sigma(\hat s_i-\hat s_j),

and the excess human risk is, to second order, :math:`\tfrac12(\hat s-s_H)^\top L(\hat s-s_H)`.

* **Human** (eq. human-only-estimator): :math:`\mathrm{Cov}=L^{+}/n_H`, excess risk :math:`(N-1)/(2n_H)`
  (Thm. population-risk-tradeoff).
* **DIAL-Anc** (eq. staged-calibrated-estimator): :math:`\hat s=\hat M\hat c`,
  :math:`\mathrm{Cov}=\hat M(\hat M^\top L\hat M)^{-1}\hat M^\top/n_H+V_{\rm LLM}` (the oracle covariance of Cor.
  staged-oracle-equivalence plus the LLM-stage part of the pilot's two-step sandwich,
  :func:`pydial.inference.sandwich.staged_influence`, fixed in ``n_H``).  Excess risk
  :math:`d/(2n_H)+\max\{\tfrac12\mathrm{tr}(LV_{\rm LLM}),\hat\Delta_M\}`, the approximation error estimated from the
  calibration LRT (Prop. calibration-test, :math:`T\approx\chi^2_{\mathrm{df}}(2n_H\Delta_M)`) beyond its null critical
  value, :math:`\hat\Delta_M=\max\{0,T-\chi^2_{\mathrm{df},1-\alpha}\}/(2n_H^{\rm pilot})`: the moment estimate
  :math:`(T-\mathrm{df})/(2n_H)` has noise :math:`\sqrt{2\,\mathrm{df}}/(2n_H)`, which would swamp :math:`d/(2n_H)`.
* **DIAL-Ada**: with the eigenvalues of the shrinkage operator :math:`A_\lambda` (Prop. local-misalignment) taken
  equal, :math:`\kappa`, on the :math:`\mathrm{df}=N-1-d` directions the calibration removes, the fit
  :math:`\hat s_A+\kappa D`, :math:`D=\hat s_H-\hat s_A`, has covariance
  :math:`(1-\kappa^2)C_{A0}+\kappa^2C_H+(1-\kappa)^2V_{\rm LLM}` and risk
  :math:`\{d+\kappa^2\mathrm{df}\}/(2n_H)+(1-\kappa)^2\Delta` (Cor. finite-weight-risk), :math:`\Delta` the bias term
  above.  GACV (eq. gacv) is at first order :math:`(1-\kappa)^2T+2\kappa\,\mathrm{df}` (units :math:`1/(2n_H)`),
  minimized by the Stein weight :math:`\hat\kappa=(1-\mathrm{df}/T)_+`, :math:`T=n_H\|D\|_L^2\sim\chi^2_{\mathrm{df}}(\nu)`,
  :math:`\nu=2n_H\Delta`.  The weight depends on :math:`D`, so by the identities of Judge and Bock (1978)

  .. math:: R_{\rm Ada}=\frac{d+\mathrm{df}\,E[\hat\kappa^2(\chi^2_{\mathrm{df}+2})]}{2n_H}
            +\Delta\,\bigl\{1-2E[\hat\kappa(\chi^2_{\mathrm{df}+2})]+E[\hat\kappa^2(\chi^2_{\mathrm{df}+4})]\bigr\},

  by quadrature (:func:`shrinkage_moment`); widths and ``p_topk_correct`` average the fixed-:math:`\kappa` predictions
  over quantile nodes of :math:`T` (:meth:`Pilot.ada_weights`); a mixture of the endpoints with AIC selection
  probabilities would be 20-30% too low on the paper's DGP.  Left out: unequal eigenvalues of :math:`A_\lambda`, the
  finite weight grid and the noise of GACV's trace term; ``method="simulate"`` measures the actual GACV selection.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import chdtri, expit, ndtri

from pydial.api import fit
from pydial.data.comparisons import Comparisons, require_comparisons
from pydial.estimation.estimators import method_arguments
from pydial.estimation.glm import fit_human_btl, staged_fit
from pydial.estimation.results import DialResult
from pydial.estimation.spec import check_level
from pydial.exceptions import ArgumentError, ArgumentTypeError, DataError, DialError
from pydial.inference.calibration_test import calibration_test
from pydial.inference.meats import MeatSource, as_sparse
from pydial.inference.sandwich import Influence, staged_influence
from pydial.model.chart import difference_design
from pydial.model.design import glm_information
from pydial.model.likelihood import Cells, Objective
from pydial.optim import pinv_sym
from pydial.resources import check_bytes, check_choice, check_count, check_n_jobs, n_workers
from pydial.studies.metrics import excess_risk
from pydial.studies.simulate import pair_index

PLAN_METHODS: tuple[str, ...] = ("human", "dial-anc", "dial-ada")
PLAN_MODES: tuple[str, ...] = ("theory", "simulate")
OBJECTIVES: tuple[str, ...] = ("contrast", "ranking", "D")
DESIGNS: tuple[str, ...] = ("pilot", "uniform")
PLAN_COLUMNS: tuple[str, ...] = ("budget", "method", "excess_risk", "ci_width", "contrast_ci_width", "p_topk_correct")


@dataclass(frozen=True)
class Pilot:
    """The pilot's estimates and design for :func:`plan` and :func:`next_pairs`.

    ``s`` centered scores; ``pairs``, ``rho`` pairs and human probabilities; ``L`` human information; ``B = ds/dc`` and
    ``V_llm`` (LLM-stage sandwich) of the anchored fit; ``delta`` the estimated ``Delta_M``; ``llm_p`` LLM cell fits.
    """

    items: tuple[str, ...]
    s: np.ndarray
    pairs: np.ndarray
    rho: np.ndarray
    L: np.ndarray
    B: np.ndarray | None
    V_llm: np.ndarray | None
    delta: float
    llm_p: np.ndarray | None = None

    @property
    def N(self) -> int:
        """Number of items."""
        return len(self.items)

    def _anchored(self, method: str) -> tuple[np.ndarray, np.ndarray]:
        """``(B, V_llm)``, refused for a pilot without LLM judgments."""
        if self.B is None or self.V_llm is None:
            raise DataError(f"method {method!r} needs LLM judgments in the pilot data")
        return self.B, self.V_llm

    def covariance(self, method: str, n: float) -> np.ndarray:
        """First-order covariance of the centered scores at ``n`` human comparisons."""
        if method == "human":
            return pinv_sym(self.L)[0] / n
        B, V_llm = self._anchored(method)
        return B @ np.linalg.solve(B.T @ self.L @ B, B.T) / n + V_llm

    @property
    def bias(self) -> float:
        """``Delta``: the anchored endpoint's bias term, ``max(tr(L V_llm) / 2, Delta_M)`` (the first from the basis)."""
        return max(0.0 if self.V_llm is None else 0.5 * float(np.trace(self.L @ self.V_llm)), self.delta)

    @property
    def df(self) -> int:
        """``N - 1 - d``: directions the calibration restriction removes (the LRT's df)."""
        return self.N - 1 - self._anchored("dial-ada")[0].shape[1]

    def weighted_covariance(self, n: float, kappa: float) -> np.ndarray:
        """Return ``(1 - kappa^2) C_A0 + kappa^2 C_H + (1 - kappa)^2 V_llm``, the covariance of ``s_A + kappa (s_H - s_A)``."""
        V_llm = self._anchored("dial-ada")[1]
        C_A0 = self.covariance("dial-anc", n) - V_llm
        return (1 - kappa**2) * C_A0 + kappa**2 * self.covariance("human", n) + (1 - kappa) ** 2 * V_llm

    def ada_weights(self, n: float, nodes: int = 32) -> np.ndarray:
        """Return the GACV shrinkage ``(1 - df / T)_+`` at the ``(j - 1/2) / nodes`` quantiles of ``T ~ chi2_df(2 n Delta)``."""
        if self.df <= 0:
            return np.zeros(nodes)
        t = _chi2(self.df, 2.0 * n * self.bias).ppf((np.arange(nodes) + 0.5) / nodes)
        return shrinkage_weight(t, self.df)

    def excess_risk(self, method: str, n: float) -> float:
        """Return the first-order expected excess human risk (Thm. population-risk-tradeoff; ``R_Ada`` for DIAL-Ada)."""
        if method == "human":
            return 0.5 * float(np.trace(self.L @ self.covariance("human", n)))
        d = self._anchored(method)[0].shape[1]
        if method == "dial-anc" or self.df <= 0:
            return d / (2.0 * n) + self.bias
        df, nc = self.df, 2.0 * n * self.bias
        e1, e2 = shrinkage_moment(df, nc, 1, 2), shrinkage_moment(df, nc, 2, 2)
        return d / (2.0 * n) + df * e2 / (2.0 * n) + self.bias * (1.0 - 2.0 * e1 + shrinkage_moment(df, nc, 2, 4))


NORMAL_NONCENTRALITY = 1e9
"""Noncentrality above which the noncentral chi-square is its normal limit (scipy's ``ncx2`` is NaN from ~1e12)."""


def _chi2(k: int, nc: float) -> Any:
    """Return the (noncentral) chi-square distribution, or its normal limit above :data:`NORMAL_NONCENTRALITY`."""
    from scipy.stats import chi2, ncx2, norm  # scipy.stats takes half a second to import: only when planning

    if nc > NORMAL_NONCENTRALITY:
        return norm(loc=k + nc, scale=np.sqrt(2.0 * (k + 2.0 * nc)))
    return ncx2(k, nc) if nc > 0 else chi2(k)


def shrinkage_weight(t: np.ndarray, df: int) -> np.ndarray:
    """Return ``(1 - df / t)_+``, the minimizer over ``kappa`` in [0, 1] of GACV's C_p form ``(1 - kappa)^2 t + 2 kappa df``."""
    t = np.asarray(t, float)
    return np.clip(1.0 - df / np.maximum(t, 1e-300), 0.0, 1.0)


def shrinkage_moment(df: int, nc: float, power: int, shift: int) -> float:
    """Return ``E[kappa(X)^power]`` for ``X ~ chi2_{df + shift}(nc)`` (quadrature; ``kappa`` of :func:`shrinkage_weight`)."""
    dist = _chi2(df + shift, nc)
    lo, hi = max(float(dist.ppf(1e-13)), df), float(dist.isf(1e-13))  # the mass, where kappa > 0
    if hi <= df:
        return 0.0
    from scipy.integrate import quad  # imports scipy.optimize: only when planning

    return float(quad(lambda t: (1.0 - df / t) ** power * dist.pdf(t), lo, hi, limit=200, epsabs=1e-12)[0])


def pilot_data(result: DialResult, data: Comparisons | None) -> Comparisons:
    """Return the pilot data (``data``, default ``result.data``), checked against the result."""
    if not isinstance(result, DialResult):
        raise ArgumentTypeError(f"result must be a DialResult from pydial.fit, got {type(result).__name__}")
    if data is None:
        data = result.data
        if data is None:
            raise DataError("data: the result carries no data (result.data is None); pass data=, the "
                            "Comparisons the pilot result was fitted to")
    data = require_comparisons(data)
    if not result.used_the_judgments_of(data):
        raise DataError("data does not match result: pass the Comparisons the pilot result was fitted to "
                        f"(items {len(data.items)} vs {len(result.items)}, decisive n_H {data.n_human}, n_LLM "
                        f"{data.n_llm}; the result used n_H {result.n_human}, n_LLM {result.n_llm})")
    if not np.all(np.isfinite(result.scores["score"].to_numpy())):
        raise DataError("result has no finite scores to plan from")
    if data.p:
        raise ArgumentError(f"the pilot data carry response covariates {list(data.covariates)}: planning human labels "
                            "(plan, next_pairs) does not model them yet; plan from a fit of the data loaded without "
                            "covariates=")
    return data


def pilot_design(data: Comparisons, design: str = "pilot") -> tuple[np.ndarray, np.ndarray]:
    """Return all pairs ``i < j`` and their human probabilities: the pilot's frequencies or uniform (``design``)."""
    check_choice("design", design, DESIGNS)
    N = data.N
    pi, pj = np.triu_indices(N, 1)
    pairs = np.column_stack([pi, pj])
    if design == "uniform":
        return pairs, np.full(pi.size, 1.0 / pi.size)
    w = np.bincount(pair_index(data.human.i, data.human.j, N), weights=data.human.n, minlength=pi.size)
    if w.sum() <= 0:
        raise DataError("the pilot has no human comparisons: pass design='uniform'")
    return pairs, w / w.sum()


def staged_parts(result: DialResult, data: Comparisons) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """Return ``(B, V_llm, V_human, fit)`` of the anchored fit at the pilot (the sandwich split by influence rows)."""
    order = result.method != "dial-nopos"
    sf = staged_fit(data, *result.dial_model(), order=order, penalty=result.penalty)  # the pilot's own estimator
    U, _ = staged_influence(data, sf)
    J, st = as_sparse(U.source.J), U.source.stats
    cov_type = result.cov_type if result.method != "human" else "cell"
    keep = st.is_human.astype(float)  # each block's covariance: the other block's rows of the influence zeroed
    V_llm, V_h = (Influence(MeatSource(sp.diags(w) @ J, st), U.A).covariance(data, cov_type) for w in (1.0 - keep, keep))
    B = sf.chart.score_jacobian(sf.theta)[:, sf.chart.slices["c"]]
    return B, V_llm, V_h, sf


def make_pilot(result: DialResult, *, data: Comparisons | None = None, design: str = "pilot",
               alpha: float = 0.01) -> Pilot:
    """Collect the pilot's estimates and design (:class:`Pilot`); ``data`` defaults to the result's."""
    data = pilot_data(result, data)
    check_level(alpha, "alpha")
    s = result.scores["score"].to_numpy(float)
    s = s - s.mean()
    pairs, rho = pilot_design(data, design)
    D = difference_design(pairs[:, 0], pairs[:, 1], data.N)
    L = glm_information(D, rho, expit(D @ s))  # the human information (eq. comparison-laplacian)
    B = V_llm = llm_p = None
    delta = 0.0
    if data.K > 0:
        B, V_llm, _, sf = staged_parts(result, data)
        llm_p = Objective(sf.llm_chart, Cells.stack(data, 1.0 / data.n_llm, 0.0)).probabilities(sf.llm_theta)
        lrt = result.calibration_test if data is result.data else None  # the pilot's own test (DIAL methods)
        if lrt is None:
            h = fit_human_btl(data.human, data.N)
            lrt = calibration_test(data, sf.chart.scores(sf.theta), h.s if h.opt.resolved else None, B.shape[1])
        if lrt.defined and lrt.df > 0:
            delta = max(0.0, lrt.statistic - float(chdtri(lrt.df, alpha))) / (2.0 * data.n_human)
    return Pilot(tuple(result.items), s, pairs, rho, L, B, V_llm, delta, llm_p)


# ------------------------------------------------------------------ targets
def resolve_contrast(items: Sequence[str], s: np.ndarray, target: Any) -> tuple[str, str]:
    """Resolve a named contrast: ``None`` (top-1 vs top-2 of the pilot), ``"a - b"`` or ``(a, b)``."""
    if target is None:
        o = np.argsort(-s, kind="stable")
        return items[o[0]], items[o[1]]
    if isinstance(target, str):
        parts = [p.strip() for p in target.split(" - ")]
        if len(parts) != 2:
            raise ArgumentError(f"target must be 'item_a - item_b' (spaces around '-') or a pair, got {target!r}")
    else:
        parts = list(target)
        if len(parts) != 2:
            raise ArgumentError(f"target must name two items, got {target!r}")
    for p in parts:
        if p not in items:
            raise DataError(f"target: unknown item {p!r}")
    if parts[0] == parts[1]:
        raise ArgumentError(f"target must name two different items, got {target!r}")
    return str(parts[0]), str(parts[1])


def check_k(k: int, N: int) -> int:
    """Return the top-set size ``k`` of ``N`` items, checked to be an integer in ``[1, N - 1]``."""
    if not isinstance(k, (int, np.integer)) or not 1 <= k < N:
        raise ArgumentError(f"k must be an integer in [1, N-1] = [1, {N - 1}], got {k!r}")
    return int(k)


def topk_probability(s: np.ndarray, cov: np.ndarray, k: int, *, draws: int = 4000,
                     seed: np.random.Generator | int | Sequence[int] | None = 0) -> float:
    """``P(top-k set of s_hat = top-k set of s)`` for ``s_hat ~ N(s, cov)`` (Monte Carlo)."""
    gen = np.random.default_rng(seed)
    eig, Q = np.linalg.eigh(0.5 * (cov + cov.T))
    Z = gen.standard_normal((draws, s.size)) * np.sqrt(np.clip(eig, 0.0, None))
    return topk_hits(s + Z @ Q.T, s, k).mean()


def topk_hits(X: np.ndarray, s: np.ndarray, k: int) -> np.ndarray:
    """Whether each row of ``X`` has the same top-k set as ``s``."""
    top = np.zeros(s.size, bool)
    top[np.argsort(-s, kind="stable")[:k]] = True
    X = np.atleast_2d(X)
    return np.all((X >= -np.sort(-X, axis=1)[:, k - 1 : k]) == top, axis=1)  # at least the row's k-th largest


def plan(result: DialResult, budgets: Sequence[int] = (100, 200, 400, 800, 1600, 3200), target: Any = None, *,
         data: Comparisons | None = None, k: int = 1, methods: Sequence[str] = PLAN_METHODS, method: str = "theory",
         design: str = "pilot", level: float = 0.95, alpha: float = 0.01, n_sim: int = 100, n_jobs: int = 1,
         seed: int = 0, llm: str = "resample") -> pd.DataFrame:
    r"""Predict, for each human budget, what Human, DIAL-Anc and DIAL-Ada would deliver.

    Parameters
    ----------
    result : DialResult
        Pilot fit (any method).
    budgets : sequence of int
        Candidate total numbers of human comparisons ``n_H``.
    target : str or (str, str), optional
        The contrast whose interval width is predicted, ``"item_a - item_b"``; default: the pilot's top-1 vs top-2.
    data : Comparisons, optional
        The pilot data, by default ``result.data``; a data set other than the fit's raises :class:`~pydial.DataError`.
        Its LLM design is kept, the human comparisons replaced.
    k : int, default 1
        Size of the top set for ``p_topk_correct``.
    methods : sequence of {"human", "dial-anc", "dial-ada"}
    method : {"theory", "simulate"}
        ``"theory"``: the first-order formulas of ``help(pydial.studies.planning)`` at the pilot's scores and design.
        ``"simulate"``: ``n_sim`` parametric replications per budget with the pilot scores as the truth (human pairs
        from the design, outcomes from the human BTL model, LLM judgments per ``llm``), every method refitted with
        :func:`pydial.fit` (parallel with joblib, seeded).
    design : {"pilot", "uniform"}
        Human pair probabilities: the pilot's pair frequencies or uniform.
    level : float
        Interval level.
    alpha : float, default 0.01
        Level of the calibration LRT whose critical value is subtracted from the statistic to estimate the approximation
        error (see ``help(pydial.studies.planning)``).
    n_sim, n_jobs, seed : int
        Replications, joblib workers and seed of ``method="simulate"`` (the seed also drives the Monte Carlo of
        ``p_topk_correct`` under ``"theory"``).
    llm : {"resample", "fixed"}
        LLM judgments of ``method="simulate"``: redrawn from the pilot's LLM fit on its LLM design (as the theory, with
        the LLM-stage variance) or the pilot's own (no LLM-stage error).

    Returns
    -------
    DataFrame
        One row per budget and method: ``budget, method, excess_risk, ci_width`` (mean width of the score intervals),
        ``contrast_ci_width, p_topk_correct``; with ``method="simulate"`` also ``excess_risk_mcse`` and ``n_ok`` (fits
        that succeeded).  ``attrs`` records the pilot, target, k, level and mode.

    Notes
    -----
    Under ``"theory"``, ``p_topk_correct`` is the probability that a draw ``N(s, Cov)`` keeps the pilot's top-k set (the
    variance only; the anchored bias enters ``excess_risk``). First-order predictions are least accurate for Human at
    small budgets, where the MLE's finite-sample bias adds to the risk; ``method="simulate"`` captures it.

    Examples
    --------
    >>> import pydial
    >>> pilot = pydial.fit(pydial.datasets.synthetic(), "dial-anc")
    >>> tab = pydial.plan(pilot, budgets=[100, 400])
    >>> tab[["budget", "method"]].values.tolist()
    [[100, 'human'], [100, 'dial-anc'], [100, 'dial-ada'], [400, 'human'], [400, 'dial-anc'], [400, 'dial-ada']]
    >>> bool((tab.groupby("method", sort=False)["excess_risk"].diff().dropna() < 0).all())
    True
    """
    check_choice("method", method, PLAN_MODES)
    check_choice("llm", llm, ("resample", "fixed"))
    methods = tuple(methods)
    if not methods or not set(methods) <= set(PLAN_METHODS):
        raise ArgumentError(f"methods must be a non-empty subset of {PLAN_METHODS}, got {list(methods)!r}")
    budgets_arr = np.asarray(list(budgets))
    if budgets_arr.size == 0 or not np.issubdtype(budgets_arr.dtype, np.number) or np.any(budgets_arr <= 0) \
            or np.any(budgets_arr != np.round(budgets_arr)):
        raise ArgumentError(f"budgets must be positive integers, got {list(budgets)!r}")
    level = check_level(level)
    data = pilot_data(result, data)
    if method == "simulate":
        _check_simulation_size(budgets_arr, data, n_sim, n_jobs)
    pilot = make_pilot(result, data=data, design=design, alpha=alpha)
    if pilot.B is None and any(m != "human" for m in methods):
        raise DataError(f"methods {[m for m in methods if m != 'human']} need LLM judgments; the pilot data have none")
    k = check_k(k, pilot.N)
    a, b = resolve_contrast(pilot.items, pilot.s, target)
    ns = [int(x) for x in budgets_arr]
    if method == "theory":
        table = _plan_theory(pilot, ns, methods, (a, b), k, level, seed)
    else:
        table = _plan_simulate(pilot, data, ns, methods, (a, b), k, n_sim, n_jobs, seed, *result.dial_model(), llm)
    table.attrs.update(mode=method, target=f"{a} - {b}", k=k, level=level, design=design,
                       pilot_method=result.method, pilot_n_human=data.n_human, delta=pilot.delta)
    return table


def _plan_theory(p: Pilot, budgets: list[int], methods: tuple[str, ...], contrast: tuple[str, str], k: int,
                 level: float, seed: int) -> pd.DataFrame:
    zq = ndtri(0.5 + level / 2)
    g = np.zeros(p.N)
    g[p.items.index(contrast[0])], g[p.items.index(contrast[1])] = 1.0, -1.0

    def predicted(Cs: list[np.ndarray], seeds: list[Any], draws: int) -> dict[str, float]:
        """Mean score-interval width, contrast-interval width and P(top-k) over the covariances ``Cs``."""
        return {"ci_width": float(np.mean([np.mean(2 * zq * np.sqrt(np.clip(np.diag(C), 0, None))) for C in Cs])),
                "contrast_ci_width": float(np.mean([2 * zq * np.sqrt(max(g @ C @ g, 0.0)) for C in Cs])),
                "p_topk_correct": float(np.mean([topk_probability(p.s, C, k, draws=draws, seed=sd)
                                                 for sd, C in zip(seeds, Cs)]))}

    rows = []
    for n in budgets:
        pred = {m: {"excess_risk": p.excess_risk(m, n), **predicted([p.covariance(m, n)], [[seed, n]], 4000)}
                for m in ("human", "dial-anc") if m == "human" or p.B is not None}
        if p.B is not None and "dial-ada" in methods:
            kap = p.ada_weights(n)
            pred["dial-ada"] = {"excess_risk": p.excess_risk("dial-ada", n),
                                **predicted([p.weighted_covariance(n, x) for x in kap],
                                            [[seed, n, t] for t in range(len(kap))], 250)}
        rows += [{"budget": n, "method": m, **pred[m]} for m in methods]
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))


# ---------------------------------------------------------- parametric simulation
def human_frame(items: Sequence[str], s: np.ndarray, pairs: np.ndarray, rho: np.ndarray, n: int,
                rng: np.random.Generator, *, judge: str = "human", record_start: int = 0) -> pd.DataFrame:
    """Draw ``n`` human comparisons in long format: pairs by ``rho``, ``i`` winning with ``sigma(s_i - s_j)``."""
    idx = rng.choice(pairs.shape[0], size=n, p=rho)
    i, j = pairs[idx, 0], pairs[idx, 1]
    won = rng.random(n) < expit(s[i] - s[j])
    it = np.asarray(items, dtype=object)
    return pd.DataFrame({"record_id": [f"h{record_start + t}" for t in range(n)], "judge": judge,
                         "item_a": it[i], "item_b": it[j], "first": "a", "winner": np.where(won, "a", "b")})


def llm_frame(data: Comparisons, p: np.ndarray | None = None, rng: np.random.Generator | None = None) -> pd.DataFrame:
    """Return the pilot's decisive LLM judgments in long format, redrawn as ``Binomial(n_c, p_c)`` when ``p`` is given."""
    L = data.llm
    n = L.n.astype(int)
    if p is None:
        y = L.y.astype(int)
    elif rng is None:
        raise ArgumentError("redrawing the LLM outcomes (p given) needs rng")
    else:
        y = rng.binomial(n, p)
    cell = np.repeat(np.arange(n.size), n)
    rank_in_cell = np.arange(cell.size) - np.repeat(np.cumsum(n) - n, n)
    won = rank_in_cell < y[cell]
    it, jd = np.asarray(data.items, dtype=object), np.asarray(data.judges, dtype=object)
    return pd.DataFrame({"record_id": [f"l{t}" for t in range(cell.size)], "judge": jd[L.judge[cell]],
                         "item_a": it[L.i[cell]], "item_b": it[L.j[cell]],
                         "first": np.where(L.a[cell] > 0, "a", "b"), "winner": np.where(won, "a", "b")})


def with_human(llm: pd.DataFrame, human: pd.DataFrame, items: Sequence[str], human_judge: str = "human") -> Comparisons:
    """:class:`Comparisons` of fixed LLM judgments plus new human ones."""
    return Comparisons.from_frame(pd.concat([llm, human], ignore_index=True), human_judge=human_judge, items=list(items))


def _sim_one(p: Pilot, data: Comparisons, llm: pd.DataFrame | None, n: int, methods: tuple[str, ...],
             contrast: tuple[str, str], k: int, rank: int, calibration: str, seed: Any) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    hf = human_frame(p.items, p.s, p.pairs, p.rho, n, rng, judge=data.human_judge)
    if data.K > 0 and llm is None:
        llm = llm_frame(data, p.llm_p, rng)
    data = with_human(llm if llm is not None else hf.iloc[:0], hf, p.items, data.human_judge)
    out = []
    for m in methods:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = fit(data, m, **method_arguments(m, rank=rank, calibration=calibration), check=(m == "human"))
        except DialError:
            out.append({"budget": n, "method": m, "ok": False})
            continue
        sc = res.scores
        s_hat = sc["score"].to_numpy()
        out.append({"budget": n, "method": m, "ok": bool(res.converged),
                    "excess_risk": excess_risk(s_hat, p.s, p.rho),
                    "ci_width": float((sc["ci_high"] - sc["ci_low"]).mean()),
                    "contrast_ci_width": float(2 * ndtri(0.5 + res.level / 2) * res.contrast(*contrast)["se"]),
                    "p_topk_correct": float(topk_hits(s_hat[None, :], p.s, k)[0])})
    return out


PLAN_BYTES_PER_ROW = 600  # per simulated judgment: the long frame (record-id strings), from_frame's copy, the cells
PLAN_BYTES_PER_TASK = 2_000  # per replication: its seed sequence, task tuple and result rows


def _check_simulation_size(budgets: np.ndarray, data: Comparisons, n_sim: Any, n_jobs: Any) -> None:
    """Refuse ``plan(method="simulate")`` arguments whose replications (one per worker) would not fit in memory."""
    check_count(n_sim, "n_sim", minimum=2)
    workers = n_workers(check_n_jobs(n_jobs))
    rows = int(budgets.max()) + data.n_llm
    tasks = int(n_sim) * budgets.size
    need = workers * rows * PLAN_BYTES_PER_ROW + tasks * PLAN_BYTES_PER_TASK
    check_bytes(need, f"plan(method='simulate', budgets up to {int(budgets.max()):,}, n_sim={int(n_sim):,})",
                "reduce the largest budget, n_sim or n_jobs, or use method='theory'",
                detail=f"{workers} worker(s) x {rows:,} judgments x {PLAN_BYTES_PER_ROW} B + {tasks:,} "
                       f"replications x {PLAN_BYTES_PER_TASK} B")


def _plan_simulate(p: Pilot, data: Comparisons, budgets: list[int], methods: tuple[str, ...],
                   contrast: tuple[str, str], k: int, n_sim: int, n_jobs: int, seed: int,
                   rank: int, calibration: str, llm: str) -> pd.DataFrame:
    from joblib import Parallel, delayed

    fixed = llm_frame(data) if (llm == "fixed" and data.K > 0) else None
    seeds = np.random.SeedSequence(seed).spawn(len(budgets) * n_sim)
    tasks = [(n, seeds[b * n_sim + t]) for b, n in enumerate(budgets) for t in range(n_sim)]
    runs = Parallel(n_jobs=n_jobs)(
        delayed(_sim_one)(p, data, fixed, n, methods, contrast, k, rank, calibration, sq) for n, sq in tasks)
    df = pd.DataFrame([r for run in runs for r in run])
    rows = []
    for n in budgets:
        for m in methods:
            d = df[(df["budget"] == n) & (df["method"] == m) & df["ok"]] if "excess_risk" in df else df.iloc[:0]
            ok = len(d)
            rows.append({"budget": n, "method": m,
                         **{c: float(d[c].mean()) if ok else np.nan for c in PLAN_COLUMNS[2:]},
                         "excess_risk_mcse": float(d["excess_risk"].std(ddof=1) / np.sqrt(ok)) if ok > 1 else np.nan,
                         "n_ok": ok})
    return pd.DataFrame(rows, columns=[*PLAN_COLUMNS, "excess_risk_mcse", "n_ok"])


def plot_plan(table: pd.DataFrame, columns: Sequence[str] = ("excess_risk", "contrast_ci_width", "p_topk_correct"),
              ax: Any = None) -> Any:
    """Plot a :func:`plan` table: one panel per column, budget on a log x-axis, one line per method; return the Figure."""
    import matplotlib.pyplot as plt

    missing = [c for c in ("budget", "method", *columns) if c not in table.columns]
    if missing:
        raise ArgumentError(f"table lacks column(s) {missing}; pass the output of pydial.plan")
    cols = list(columns)
    axes = plt.subplots(1, len(cols), figsize=(4.2 * len(cols), 3.4), squeeze=False)[1][0] if ax is None else np.atleast_1d(ax)
    fig = axes[0].figure
    labels = {"excess_risk": "expected excess human risk", "ci_width": "mean 95% CI width (scores)",
              "contrast_ci_width": f"95% CI width ({table.attrs.get('target', 'contrast')})",
              "p_topk_correct": f"P(top-{table.attrs.get('k', 'k')} set correct)"}
    for a, c in zip(axes, cols):
        for m, d in table.groupby("method", sort=False):
            a.plot(d["budget"], d[c], marker="o", label=m)
        a.set_xscale("log")
        if c in ("excess_risk", "ci_width", "contrast_ci_width"):
            a.set_yscale("log")
        a.set_xlabel("human comparisons n_H")
        a.set_ylabel(labels.get(c, c))
        a.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    return fig
