r"""Coverage of 95% intervals, frequentist vs Bayesian, on the same replications.

For every replication of five data-generating processes (DGPs) the same data set gets
every interval pydial offers for the people's scores, their pairwise contrasts and the
judges' position effects ``b``:

* frequentist, from :func:`pydial.fit` (``multiples = SIMULATION_MULTIPLES`` for
  ``dial-ada``, as in :mod:`analyses.coverage.study`): Wald intervals from the Fisher
  information (``wald``) and the sandwiches with the binomial, judge-pair cell and record
  meats (``sandwich-binomial``, ``sandwich-cell``, ``sandwich-record``; through
  ``result.with_cov``), and the record bootstrap of the whole procedure
  (``bootstrap-basic`` and ``bootstrap-percentile``, ``B`` resamples, GACV selection
  included for ``dial-ada``);
* Bayesian, from :func:`pydial.stan.posterior` on CmdStan: the posterior matched to
  each estimator (``posterior``; NUTS): the ordinary posterior of the people alone for
  ``human``, each judge's own order-effect model for ``judges``, the cut posterior for
  ``dial-anc`` and the power posterior at the GACV-selected weight for ``dial-ada``
  (the cut posterior when GACV selects ``lambda = inf``, the people's posterior when it
  selects 0, the draws being the same); the ordinary DIAL posterior (weight 1 on the
  LLM likelihood, ``posterior-ordinary``, under ``dial-ada``); and CmdStan's Laplace
  approximation of the matched posterior (``laplace``) for ``human``, ``judges`` and
  ``dial-ada`` (at ``lambda = inf`` the Laplace cut posterior, whose second stage stays
  NUTS; it costs as much as the NUTS cut posterior, so ``dial-anc`` itself has no
  Laplace row).  Posterior intervals are equal-tailed
  (:func:`pydial.stan.compare_intervals`'s convention).

Estimands: ``scores`` (the ``N`` centered people's scores, pydial's gauge: the fits'
scores and the posteriors' ``s_H`` sum to zero, as ``truth.s_h`` does), ``contrasts``
(the ``N(N-1)/2`` differences ``s_i - s_j``, gauge-free) and ``b`` (the ``K`` judges'
position effects).  ``human``, ``dial-anc`` and ``dial-ada`` give scores and contrasts;
``judges`` gives ``b``; the DIAL fits report ``b`` from their LLM-only stage, the same
for ``dial-anc`` and ``dial-ada``, listed under ``dial-anc`` (the cut posterior's ``b`` is
the LLM-only posterior's, its counterpart); the power and ordinary DIAL posteriors give
the joint posterior's ``b``, listed under ``dial-ada``.

DGPs (:func:`pydial.simulate`, ``N = 8`` items, ``K = 4`` judges, rank 1, ``n_LLM =
10,000``, ``p_first = 0.75``; every DIAL fit and posterior with ``calibration="mu"``):

* ``well-specified``: consensus target ``s_H = mu``, ``n_H = 400``;
* ``overdispersed``: as above with ``overdispersion=1``: an effect ``eps_kij ~ N(0, 1)``
  per judge and item pair, shared by every repeat and both display orders of that pair
  by that judge (judge-pair random effects; each simulated judgment is its own record,
  so there are no record-level effects and the record meat equals the binomial one);
* ``misaligned``: ``target="misaligned"``, ``s_H = mu + c_V V`` with ``c_V ~ N(0,
  0.5^2)``, outside ``col(mu)``, the calibration basis of the fits; ``n_H = 400``;
* ``small-budget``: consensus target, ``n_H = 100``;
* ``record-overdispersed``: record-level random effects (:func:`with_record_effects`,
  ``sd = 1``): each record is one item pair judged by every judge in both display orders,
  with an effect ``eps_r ~ N(0, 1)`` on the logit shared by the record's 8 judgments (1,250
  records); consensus target, ``n_H = 400``.  The record meat and the record bootstrap
  cluster by record; the judge-pair cells of a pair share records across judges.

Each replication's coverage of an estimand is the share of its components covered
(e.g. of the 28 contrasts); the summary averages it over replications, with the Monte
Carlo standard error ``sd / sqrt(reps)`` of that average (replications are independent;
the components within one are not, which this standard error accounts for).

Seeds: replication ``rep`` draws its data from ``SeedSequence([seed, rep])`` in every
DGP (common random numbers: the same structure ``mu, V, gamma, U, b`` across DGPs), the
records of ``record-overdispersed`` from ``[seed, rep, 2]``, its bootstrap and Stan seeds
from ``[seed, dgp, rep, 1]``.  Rows (one per replication x
method x estimand x interval) are appended to ``results/bayes.csv`` one replication at a
time; a rerun skips finished replications, so a stopped run continues where it stopped.

Run from the repository root::

    python -m analyses.coverage.bayes run --reps 200 --jobs 2
    python -m analyses.coverage.bayes report      # results/bayes_summary.md, bayes_coverage.png
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from scipy.stats import norm

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CSV_NAME = "bayes.csv"
LEVEL = 0.95
DESIGN = dict(N=8, K=4, rank=1, n_llm=10_000, calibration="mu")
DGPS: dict[str, dict[str, Any]] = {
    "well-specified": dict(n_human=400, target="consensus", overdispersion=0.0),
    "overdispersed": dict(n_human=400, target="consensus", overdispersion=1.0),
    "misaligned": dict(n_human=400, target="misaligned", overdispersion=0.0),
    "small-budget": dict(n_human=100, target="consensus", overdispersion=0.0),
    "record-overdispersed": dict(n_human=400, target="consensus", overdispersion=0.0, record_sd=1.0),
}
METHODS = ("human", "dial-anc", "dial-ada", "judges")
ESTIMANDS = ("scores", "contrasts", "b")
MEATS = {"wald": "fisher", "sandwich-binomial": "binomial", "sandwich-cell": "cell", "sandwich-record": "record"}
INTERVALS = (*MEATS, "bootstrap-basic", "bootstrap-percentile", "posterior", "posterior-ordinary", "laplace")
COLUMNS = ("dgp", "rep", "method", "estimand", "interval", "coverage", "width", "n_targets", "multiple", "status",
           "flag", "rhat_max", "divergent", "error", "seconds", "rep_seconds")


@dataclass(frozen=True)
class Settings:
    """Costs of one replication: bootstrap resamples and the Stan runs.

    ``nuts`` is used for the single-program posteriors (people, judges, power and
    ordinary DIAL posteriors); ``cut`` for the cut posterior (its second stage's cost
    grows with the number of first-stage draws, and its warmup is ``min(warmup, 200)``);
    ``laplace_draws`` draws of each Laplace approximation (``laplace_warmup``: the
    warmup of the cut posterior's second stage behind the Laplace first stage).
    """

    B: int = 30
    chains: int = 2
    draws: int = 400
    warmup: int = 400
    cut_draws: int = 200
    cut_warmup: int = 150
    laplace_draws: int = 400
    laplace_warmup: int = 100
    bootstrap: tuple[str, ...] = METHODS


SMOKE = Settings(B=5, draws=100, warmup=100, cut_draws=50, cut_warmup=50, laplace_draws=100, laplace_warmup=50)
"""Tiny settings for the end-to-end test (intervals are noisy; the layout is what is checked)."""


# ----------------------------------------------------------------------------- interval arithmetic
def coverage(lo: np.ndarray, hi: np.ndarray, truth: np.ndarray) -> float:
    """Share of the components whose interval ``[lo, hi]`` holds the truth."""
    lo, hi, truth = (np.asarray(x, float) for x in (lo, hi, truth))
    return float(np.mean((lo <= truth) & (truth <= hi)))


def contrast_matrix(N: int) -> np.ndarray:
    """Rows ``e_i - e_j`` for the pairs ``i < j`` of ``np.triu_indices(N, 1)``."""
    iu, ju = np.triu_indices(N, 1)
    D = np.zeros((iu.size, N))
    D[np.arange(iu.size), iu] = 1.0
    D[np.arange(iu.size), ju] = -1.0
    return D


def wald_contrasts(s: np.ndarray, C: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Wald intervals of every contrast from the scores and their covariance."""
    D = contrast_matrix(len(s))
    est = D @ s
    se = np.sqrt(np.maximum(np.einsum("pi,ij,pj->p", D, C, D), 0.0))
    z = norm.ppf(0.5 + level / 2)
    return est - z * se, est + z * se


def quantile_intervals(draws: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed intervals of each column of ``draws``."""
    a = (1 - level) / 2
    lo, hi = np.quantile(np.asarray(draws, float), [a, 1 - a], axis=0)
    return lo, hi


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Coverage, its Monte Carlo standard error and the mean width per DGP x method x estimand x interval.

    ``reps`` counts the replications with a coverage; ``failed`` those whose fit, bootstrap or
    posterior raised (no coverage); ``flagged`` the share of the counted replications with a
    warning (``flag`` not empty: a posterior's sampler problems, a bootstrap's failed refits).
    """
    rows = []
    keys = ["dgp", "method", "estimand", "interval"]
    order = {k: {v: t for t, v in enumerate(vals)} for k, vals in
             (("dgp", tuple(DGPS)), ("method", METHODS), ("estimand", ESTIMANDS), ("interval", INTERVALS))}
    for key, g in df.groupby(keys, sort=False):
        v = g["coverage"].to_numpy(float)
        ok = np.isfinite(v)
        n = int(ok.sum())
        flag = g.loc[ok, "flag"].fillna("").astype(str) if "flag" in g else pd.Series([], dtype=str)
        rows.append({**dict(zip(keys, key)), "reps": n, "failed": int((~ok).sum()),
                     "coverage": float(v[ok].mean()) if n else np.nan,
                     "mc_se": float(v[ok].std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan,
                     "width": float(np.nanmean(g.loc[ok, "width"].to_numpy(float))) if n else np.nan,
                     "flagged": float(np.mean(flag.str.len() > 0)) if n else np.nan})
    out = pd.DataFrame(rows)
    if len(out):
        rank = np.lexsort([out[k].map(lambda x, k=k: order[k].get(x, 99)).to_numpy() for k in reversed(keys)])
        out = out.iloc[rank].reset_index(drop=True)
    return out


# ----------------------------------------------------------------------------- one replication
class _Rows:
    """Collects the rows of one replication."""

    def __init__(self, dgp: str, rep: int) -> None:
        self.dgp, self.rep, self.rows = dgp, rep, []
        self.multiple = np.nan

    def add(self, method: str, estimand: str, interval: str, lo: Any, hi: Any, truth: Any, *, seconds: float,
            status: str = "", flag: str = "", rhat_max: float = np.nan, divergent: float = np.nan) -> None:
        lo, hi = np.asarray(lo, float), np.asarray(hi, float)
        self.rows.append({"dgp": self.dgp, "rep": self.rep, "method": method, "estimand": estimand,
                          "interval": interval, "coverage": coverage(lo, hi, truth), "width": float(np.mean(hi - lo)),
                          "n_targets": int(lo.size), "status": status, "flag": flag, "rhat_max": rhat_max,
                          "divergent": divergent, "error": "", "seconds": seconds})

    def fail(self, method: str, estimands: tuple[str, ...], interval: str, err: BaseException, seconds: float) -> None:
        msg = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
        for e in estimands:
            self.rows.append({"dgp": self.dgp, "rep": self.rep, "method": method, "estimand": e, "interval": interval,
                              "coverage": np.nan, "width": np.nan, "n_targets": 0, "status": "", "flag": "",
                              "rhat_max": np.nan, "divergent": np.nan, "error": msg, "seconds": seconds})


def _quiet(f: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f()


def _timed(rows: _Rows, method: str, estimands: tuple[str, ...], intervals: str | tuple[str, ...],
           f: Callable[[], Any]) -> tuple[Any, float]:
    """``(f(), seconds)``, or ``(None, seconds)`` after recording the failure of every interval that needs it."""
    t = time.perf_counter()
    try:
        return _quiet(f), time.perf_counter() - t
    except Exception as e:  # noqa: BLE001 - every failure is recorded, the replication goes on
        for iv in (intervals,) if isinstance(intervals, str) else intervals:
            rows.fail(method, estimands, iv, e, time.perf_counter() - t)
        return None, time.perf_counter() - t


def _posterior_draws(idata: Any, var: str, dim: str, names: list[str]) -> np.ndarray | None:
    from pydial.stan import idata as azio

    post = azio.group_dataset(idata, "posterior")
    if var not in post or dim not in post[var].dims:
        return None
    da = post[var].transpose("chain", "draw", dim)
    x = np.asarray(da.values, float).reshape(-1, da.sizes[dim])
    got = [str(v) for v in da[dim].values]
    return x[:, [got.index(n) for n in names]]


def _diagnostics(idata: Any) -> dict[str, Any]:
    """Sampler problems (joined), the largest R-hat and the number of divergent transitions."""
    from pydial.stan import idata as azio

    attrs = azio.posterior_attrs(idata)
    problems = json.loads(attrs.get("sampler_problems", "[]") or "[]")
    diag = json.loads(attrs.get("sampler_diagnostics", "[]") or "[]")
    rhats = [float(d.get("r_hat", d.get("rhat", np.nan))) for d in diag if isinstance(d, dict)]
    rhat = float(np.nanmax(rhats)) if rhats and np.any(np.isfinite(rhats)) else np.nan
    div = np.nan
    try:
        ss = azio.group_dataset(idata, "sample_stats")
        if "diverging" in ss:
            div = float(np.asarray(ss["diverging"].values).sum())
    except Exception:  # noqa: BLE001 - an approximation has no NUTS statistics
        pass
    return {"flag": " | ".join(problems)[:300], "rhat_max": rhat, "divergent": div}


def _add_fit(rows: _Rows, method: str, res: Any, truth: Any, items: list[str], judges: list[str], *,
             estimands: tuple[str, ...], interval: str, seconds: float) -> None:
    """Rows of the frequentist intervals of ``res`` (its own covariance)."""
    status = str(getattr(res, "status", ""))
    if "scores" in estimands or "contrasts" in estimands:
        sc = res.scores.reindex(items)
        s = sc["score"].to_numpy(float)
        if "scores" in estimands:
            rows.add(method, "scores", interval, sc["ci_low"], sc["ci_high"], truth.s_h, seconds=seconds, status=status)
        if "contrasts" in estimands:
            C = res.cov.reindex(index=items, columns=items).to_numpy(float)
            lo, hi = wald_contrasts(s, C, res.level)
            rows.add(method, "contrasts", interval, lo, hi, contrast_matrix(len(items)) @ truth.s_h, seconds=seconds,
                     status=status)
    if "b" in estimands:
        pe = res.position_effects.reindex(judges)
        rows.add(method, "b", interval, pe["ci_low"], pe["ci_high"], truth.b, seconds=seconds, status=status)


def _add_bootstrap(rows: _Rows, method: str, bt: Any, truth: Any, items: list[str], judges: list[str], *,
                   estimands: tuple[str, ...], seconds: float) -> None:
    flag = f"{bt.n_failed} of {bt.B} refits failed" if bt.n_failed else ""
    for kind, (lo_c, hi_c) in (("basic", ("basic_low", "basic_high")), ("percentile", ("pct_low", "pct_high"))):
        name = f"bootstrap-{kind}"
        if "scores" in estimands:
            t = bt.scores.reindex(items)
            rows.add(method, "scores", name, t[lo_c], t[hi_c], truth.s_h, seconds=seconds, flag=flag)
        if "contrasts" in estimands:  # bt.contrasts is in np.triu_indices order, as contrast_matrix
            t = bt.contrasts
            rows.add(method, "contrasts", name, t[lo_c], t[hi_c], contrast_matrix(len(items)) @ truth.s_h,
                     seconds=seconds, flag=flag)
        if "b" in estimands and bt.position_effects is not None:
            t = bt.position_effects.reindex(judges)
            rows.add(method, "b", name, t[lo_c], t[hi_c], truth.b, seconds=seconds, flag=flag)


def _add_posterior(rows: _Rows, method: str, idata: Any, truth: Any, items: list[str], judges: list[str], *,
                   estimands: tuple[str, ...], interval: str, seconds: float) -> None:
    from pydial.stan.bayes import estimand as post_estimand

    d = _diagnostics(idata)
    est = post_estimand(idata)
    score_var = (est.scores if est is not None else None) or "s_H"
    if "scores" in estimands or "contrasts" in estimands:
        x = _posterior_draws(idata, score_var, "item", items)
        if x is None:
            raise KeyError(f"the posterior has no {score_var!r}")
        x = x - x.mean(axis=1, keepdims=True)  # pydial's gauge (already centered: a no-op up to rounding)
        if "scores" in estimands:
            lo, hi = quantile_intervals(x)
            rows.add(method, "scores", interval, lo, hi, truth.s_h, seconds=seconds, **d)
        if "contrasts" in estimands:
            D = contrast_matrix(len(items))
            lo, hi = quantile_intervals(x @ D.T)
            rows.add(method, "contrasts", interval, lo, hi, D @ truth.s_h, seconds=seconds, **d)
    if "b" in estimands:
        x = _posterior_draws(idata, "b", "judge", judges)
        if x is not None:
            lo, hi = quantile_intervals(x)
            rows.add(method, "b", interval, lo, hi, truth.b, seconds=seconds, **d)


def simulate_dgp(dgp: str, rep: int, seed: int) -> Any:
    """Simulate the data of replication ``rep`` of ``dgp``."""
    import pydial

    p = DGPS[dgp]
    sim = pydial.simulate(DESIGN["N"], DESIGN["K"], DESIGN["rank"], DESIGN["n_llm"], p["n_human"], target=p["target"],
                          seed=np.random.default_rng(np.random.SeedSequence([seed, rep])),
                          behavior=dict(overdispersion=p["overdispersion"]))
    if "record_sd" not in p:
        return sim
    return with_record_effects(sim, p["record_sd"], np.random.default_rng(np.random.SeedSequence([seed, rep, 2])))


def with_record_effects(sim: Any, sd: float, rng: np.random.Generator) -> Any:
    """Replace the LLM judgments of ``sim`` by records with a shared random effect.

    Each record is one comparison of an item pair ``(i, j)`` (drawn uniformly), judged by
    every judge in both display orders (``2K`` judgments, as when each battle is judged twice
    by every LLM judge); judgment ``(k, a)`` of record ``r`` has
    ``logit P(i wins) = S_ki - S_kj + a b_k + eps_r`` with ``eps_r ~ N(0, sd^2)`` shared by the
    record.  ``n_LLM // (2K)`` records; the people's judgments (one per record) and the true
    parameters are those of ``sim``.  The record meat and the record bootstrap resample
    these records; the judge-pair cells of one pair share the records' effects across judges.
    Averaged over ``eps_r`` the judgments follow a logistic model with coefficients scaled
    by about ``(1 + 0.346 sd^2)^{-1/2}`` (0.86 at ``sd = 1``), so the marginal ``b`` the
    fits estimate is about 14% smaller than the conditional ``b`` the truth holds.
    """
    from dataclasses import replace

    from scipy.special import expit

    from pydial.studies.simulate import HUMAN_JUDGE

    f, t = sim.frame, sim.truth
    K, N = t.S.shape
    R = len(f.loc[f["judge"] != HUMAN_JUDGE]) // (2 * K)
    pi, pj = np.triu_indices(N, 1)
    pair = rng.integers(0, pi.size, size=R)
    eps = sd * rng.standard_normal(R)
    rec, k, a = (x.ravel() for x in np.meshgrid(np.arange(R), np.arange(K), np.array([1.0, -1.0]), indexing="ij"))
    i, j = pi[pair[rec]], pj[pair[rec]]
    eta = t.S[k, i] - t.S[k, j] + a * t.b[k] + eps[rec]
    win_a = rng.random(eta.size) < expit(eta)
    items, judges = np.asarray(t.items, dtype=object), np.asarray(t.judges, dtype=object)
    llm = pd.DataFrame({"record_id": rec, "judge": judges[k], "item_a": items[i], "item_b": items[j],
                        "first": np.where(a > 0, "a", "b"), "winner": np.where(win_a, "a", "b")})
    human = f.loc[f["judge"] == HUMAN_JUDGE].assign(record_id=lambda d: R + np.arange(len(d)))
    frame = pd.concat([llm, human], ignore_index=True)
    return replace(sim, frame=frame, config={**sim.config, "record_sd": sd, "records": R})


def run_replication(dgp: str, rep: int, seed: int, settings: Settings = Settings()) -> list[dict[str, Any]]:
    """Every interval of every method on one data set of ``dgp``: the rows of the CSV."""
    import pydial
    from pydial.estimation.selection import SIMULATION_MULTIPLES
    from pydial.stan import posterior

    t0 = time.perf_counter()
    rows = _Rows(dgp, rep)
    sim = simulate_dgp(dgp, rep, seed)
    data, truth = sim.comparisons, sim.truth
    items, judges = list(data.items), list(data.judges)
    sub = int(np.random.SeedSequence([seed, list(DGPS).index(dgp), rep, 1]).generate_state(1)[0] % (2**31 - 2)) + 1
    rank, cal = DESIGN["rank"], DESIGN["calibration"]
    own = {"human": ("scores", "contrasts"), "dial-anc": ("scores", "contrasts", "b"),
           "dial-ada": ("scores", "contrasts"), "judges": ("b",)}
    fit_args = {"human": {}, "judges": {}, "dial-anc": dict(rank=rank, calibration=cal),
                "dial-ada": dict(rank=rank, calibration=cal, multiples=SIMULATION_MULTIPLES)}

    # frequentist fits, their four covariances, the bootstrap
    fits: dict[str, Any] = {}
    boot = ("bootstrap-basic", "bootstrap-percentile")
    for m in METHODS:
        needs = (*MEATS, *(boot if m in settings.bootstrap else ()))
        res, sec = _timed(rows, m, own[m], needs, lambda m=m: pydial.fit(data, m, level=LEVEL, **fit_args[m]))
        if res is None:
            continue
        fits[m] = res
        for name, meat in MEATS.items():
            r2, s2 = _timed(rows, m, own[m], name, lambda res=res, meat=meat: res.with_cov(meat))
            if r2 is not None:
                _add_fit(rows, m, r2, truth, items, judges, estimands=own[m], interval=name, seconds=sec + s2)
        if m in settings.bootstrap:
            bt, sb = _timed(rows, m, own[m], boot,
                            lambda res=res: res.bootstrap(settings.B, seed=sub, progress=False))
            if bt is not None:
                _add_bootstrap(rows, m, bt, truth, items, judges, estimands=own[m], seconds=sb)
    ada = fits.get("dial-ada")
    lam = float(ada.lambda_) if ada is not None else np.nan
    if ada is not None:
        rows.multiple = lam if lam == 0 or np.isinf(lam) else lam * data.n_human / data.n_llm

    # posteriors (NUTS) and Laplace approximations
    nuts = dict(chains=settings.chains, draws=settings.draws, warmup=settings.warmup, seed=sub, backend="cmdstanpy")
    cut = dict(nuts, draws=settings.cut_draws, warmup=settings.cut_warmup)
    lap = dict(chains=1, draws=settings.laplace_draws, warmup=settings.laplace_warmup, seed=sub, backend="cmdstanpy",
               algorithm="laplace")
    dial = dict(rank=rank, calibration=cal)
    runs = {
        ("human", "posterior"): lambda: posterior(data, "human", **nuts),
        ("judges", "posterior"): lambda: posterior(data, "judges", options={"include_human": False}, **nuts),
        ("dial-anc", "posterior"): lambda: posterior(data, "dial-anc", **dial, **cut),
        ("dial-ada", "posterior-ordinary"): lambda: posterior(data, "dial-ada", **dial, **nuts),
        ("human", "laplace"): lambda: posterior(data, "human", **lap),
        ("judges", "laplace"): lambda: posterior(data, "judges", options={"include_human": False}, **lap),
    }
    if ada is not None and np.isfinite(lam) and lam > 0:  # the power posterior at the selected weight
        runs[("dial-ada", "posterior")] = lambda: posterior(data, "dial-ada", lambda_=lam, **dial, **nuts)
        runs[("dial-ada", "laplace")] = lambda: posterior(data, "dial-ada", lambda_=lam, **dial, **lap)
    elif ada is not None and np.isinf(lam):  # the Laplace cut posterior (its second stage NUTS), run for dial-ada only
        runs[("dial-ada", "laplace")] = lambda: posterior(data, "dial-anc", **dial, **lap)
    post: dict[tuple[str, str], tuple[Any, float]] = {}
    for (m, name), f in runs.items():
        est = ("scores", "contrasts", "b") if m.startswith("dial") else own[m]
        idata, sec = _timed(rows, m, est, name, f)
        post[(m, name)] = (idata, sec)
        if idata is not None:
            _add_posterior(rows, m, idata, truth, items, judges, estimands=est, interval=name, seconds=sec)
    if ada is not None and (lam == 0 or np.isinf(lam)):  # the endpoints' posteriors are those of human / dial-anc
        src = "human" if lam == 0 else "dial-anc"
        for name in ("posterior", "laplace") if lam == 0 else ("posterior",):
            idata, sec = post.get((src, name), (None, 0.0))
            est = ("scores", "contrasts") if lam == 0 else ("scores", "contrasts", "b")
            if idata is None:
                rows.fail("dial-ada", est, name, RuntimeError(f"the {src} {name} failed"), 0.0)
            else:
                _add_posterior(rows, "dial-ada", idata, truth, items, judges, estimands=est, interval=name, seconds=sec)

    if ada is None:
        for name in ("posterior", "laplace"):
            rows.fail("dial-ada", ("scores", "contrasts", "b"), name, RuntimeError("the dial-ada fit failed"), 0.0)

    total = time.perf_counter() - t0
    for r in rows.rows:
        r["multiple"] = rows.multiple
        r["rep_seconds"] = total
    return rows.rows


# ----------------------------------------------------------------------------- the run
def _done(path: Path) -> set[tuple[str, int]]:
    if not path.exists() or path.stat().st_size == 0:
        return set()
    df = pd.read_csv(path, usecols=["dgp", "rep"])
    return {(str(a), int(b)) for a, b in zip(df["dgp"], df["rep"])}


def rounded(frame: pd.DataFrame) -> pd.DataFrame:
    """Round the rows as they are written to the CSV: coverages and widths to 6 decimals, R-hat to 4, seconds to 3."""
    digits = {"coverage": 6, "width": 6, "multiple": 6, "rhat_max": 4, "seconds": 3, "rep_seconds": 3}
    return frame.round({k: v for k, v in digits.items() if k in frame})


def _worker(dgp: str, rep: int, seed: int, settings: Settings) -> list[dict[str, Any]]:
    import logging

    logging.getLogger("cmdstanpy").setLevel(logging.ERROR)
    t = time.perf_counter()
    try:
        return run_replication(dgp, rep, seed, settings)
    except Exception as e:  # noqa: BLE001 - a replication that cannot run is one row, not the end of the run
        row = dict.fromkeys(COLUMNS, np.nan)
        row.update(dgp=dgp, rep=rep, method="(replication)", estimand="", interval="", flag="", status="",
                   error=f"{type(e).__name__}: {str(e)[:200]}", rep_seconds=time.perf_counter() - t)
        return [row]


def run(reps: int, jobs: int, seed: int, out: Path, settings: Settings = Settings(),
        dgps: tuple[str, ...] = tuple(DGPS)) -> None:
    """Run the pending replications (the DGPs interleaved), appending each one's rows as it finishes."""
    from joblib import Parallel, delayed

    out.mkdir(parents=True, exist_ok=True)
    path = out / CSV_NAME
    done = _done(path)
    tasks = [(g, r) for r in range(reps) for g in dgps if (g, r) not in done]
    print(f"{len(tasks)} replications to run ({len(done)} done); settings {asdict(settings)}", file=sys.stderr,
          flush=True)
    gen = Parallel(n_jobs=jobs, return_as="generator_unordered", batch_size=1)(
        delayed(_worker)(g, r, seed, settings) for g, r in tasks)
    for t, rows in enumerate(gen):
        frame = rounded(pd.DataFrame(rows, columns=list(COLUMNS)))
        frame.to_csv(path, mode="a", index=False, header=not path.exists() or path.stat().st_size == 0)
        print(f"[{time.strftime('%H:%M:%S')}] {t + 1}/{len(tasks)} {frame['dgp'].iloc[0]} rep {frame['rep'].iloc[0]}: "
              f"{frame['rep_seconds'].iloc[0]:.1f} s", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- report
INTERVAL_TEXT = {
    "wald": "Wald, Fisher information",
    "sandwich-binomial": "sandwich, binomial meat",
    "sandwich-cell": "sandwich, judge-pair cell meat",
    "sandwich-record": "sandwich, record meat",
    "bootstrap-basic": "record bootstrap, basic",
    "bootstrap-percentile": "record bootstrap, percentile",
    "posterior": "matched posterior (NUTS): ordinary (human, judges), cut (dial-anc), power at the selected weight "
                 "(dial-ada)",
    "posterior-ordinary": "ordinary DIAL posterior (weight 1 on the LLM likelihood; NUTS)",
    "laplace": "CmdStan's Laplace approximation of the matched posterior (human, judges, dial-ada; at lambda = inf "
               "the Laplace cut posterior)",
}


def _fmt(t: pd.DataFrame) -> pd.DataFrame:
    out = t.copy()
    out["coverage"] = [f"{c:.3f} ± {s:.3f}" if np.isfinite(c) else "—" for c, s in zip(t["coverage"], t["mc_se"])]
    out["width"] = t["width"].map(lambda w: f"{w:.3f}" if np.isfinite(w) else "—")
    out["flagged"] = t["flagged"].map(lambda w: f"{w:.2f}" if np.isfinite(w) else "—")
    return out.drop(columns=["mc_se"])


FLOOR = 0.5
"""Lower end of the figure's coverage axis."""


def overview(tab: pd.DataFrame, estimand: str) -> pd.DataFrame:
    """One estimand: rows method x interval, columns the DGPs, cells ``coverage ± MC SE (width)``."""
    t = tab[(tab["estimand"] == estimand) & (tab["reps"] > 0)]
    cells = {(m, iv, g): f"{c:.3f} ± {s:.3f} ({w:.2f})" for m, iv, g, c, s, w in
             zip(t["method"], t["interval"], t["dgp"], t["coverage"], t["mc_se"].fillna(0), t["width"])}
    dgps = [g for g in DGPS if g in set(t["dgp"])]
    rows = []
    for m in METHODS:
        for iv in INTERVALS:
            if any((m, iv, g) in cells for g in dgps):
                rows.append({"method": m, "interval": iv, **{g: cells.get((m, iv, g), "—") for g in dgps}})
    return pd.DataFrame(rows)


def plot(tab: pd.DataFrame, path: Path) -> Path:
    """Coverage ± 2 MC SE per interval type, one panel per estimand (rows) and DGP (columns)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dgps = [g for g in DGPS if g in set(tab["dgp"])]
    fig, axes = plt.subplots(len(ESTIMANDS), len(dgps), figsize=(3.6 * len(dgps), 3.2 * len(ESTIMANDS)),
                             sharey=True, sharex=True, squeeze=False)
    offsets = {m: (t - 1.5) * 0.17 for t, m in enumerate(METHODS)}
    x_of = {iv: t for t, iv in enumerate(INTERVALS)}
    for a, est in enumerate(ESTIMANDS):
        for c, g in enumerate(dgps):
            ax = axes[a, c]
            ax.axhline(LEVEL, color="k", lw=0.8, ls="--")
            for t, m in enumerate(METHODS):
                s = tab[(tab["dgp"] == g) & (tab["estimand"] == est) & (tab["method"] == m) & (tab["reps"] > 0)]
                if not len(s):
                    continue
                x = np.array([x_of[iv] for iv in s["interval"]]) + offsets[m]
                y = s["coverage"].to_numpy(float)
                ax.errorbar(x, y, yerr=2 * s["mc_se"].fillna(0).to_numpy(float), fmt="o", ms=3.5, capsize=2,
                            color=f"C{t}")
                low = y < FLOOR
                ax.plot(x[low], np.full(low.sum(), FLOOR + 0.012), "v", color=f"C{t}", ms=5)
                for xi, yi in zip(x[low], y[low]):
                    ax.annotate(f"{yi:.2f}", (xi, FLOOR + 0.03), fontsize=6, color=f"C{t}", ha="center",
                                rotation=90, va="bottom")
            ax.set_ylim(FLOOR, 1.0)
            ax.grid(axis="y", alpha=0.3)
            if a == 0:
                ax.set_title(f"{g} (n_H = {DGPS[g]['n_human']})", fontsize=10)
            if c == 0:
                ax.set_ylabel(f"{est}: coverage")
            ax.set_xticks(range(len(INTERVALS)))
            ax.set_xticklabels(INTERVALS, rotation=60, ha="right", fontsize=7)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", ls="", color=f"C{t}") for t in range(len(METHODS))]
    fig.legend(handles, list(METHODS), loc="upper center", ncol=len(METHODS), fontsize=9, bbox_to_anchor=(0.5, 1.0))
    fig.suptitle(f"Coverage of nominal 95% intervals (±2 Monte Carlo SE; values below {FLOOR} marked ▼ with "
                 "their value)", y=1.025, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path


def report(out: Path, settings: Settings = Settings()) -> Path:
    """Write ``bayes_summary.md`` and ``bayes_coverage.png`` from the CSV."""
    from analyses.simulation.compare import _md

    df = pd.read_csv(out / CSV_NAME, keep_default_na=False, na_values=[""])
    df["flag"] = df["flag"].fillna("")
    df["error"] = df["error"].fillna("")
    tab = summarize(df)
    plot(tab, out / "bayes_coverage.png")
    reps = df.groupby("dgp")["rep"].nunique()
    secs = df.drop_duplicates(["dgp", "rep"]).groupby("dgp")["rep_seconds"].median()
    sel = df.drop_duplicates(["dgp", "rep"]).groupby("dgp")["multiple"]
    head = pd.DataFrame({
        "dgp": list(reps.index),
        "n_H": [DGPS[g]["n_human"] for g in reps.index],
        "replications": reps.to_numpy(),
        "median wall s / replication": [f"{secs[g]:.1f}" for g in reps.index],
        "GACV: lambda = inf": [f"{np.mean(np.isinf(sel.get_group(g))):.2f}" for g in reps.index],
        "lambda = 0": [f"{np.mean(sel.get_group(g) == 0):.2f}" for g in reps.index],
        "finite lambda > 0": [f"{np.mean(np.isfinite(sel.get_group(g)) & (sel.get_group(g) > 0)):.2f}"
                              for g in reps.index],
    }).set_index("dgp").reindex([g for g in DGPS if g in reps.index]).reset_index()
    piece = (df.drop_duplicates(["dgp", "rep", "method", "interval"]).groupby(["method", "interval"])["seconds"]
             .median().unstack("interval").reindex(index=list(METHODS), columns=list(INTERVALS)).round(2))
    piece = piece.loc[:, piece.notna().any()]
    errs = df.loc[df["error"] != ""].drop_duplicates(["dgp", "rep", "method", "interval"])
    text = [
        "# Coverage of 95% intervals: frequentist vs Bayesian, on the same replications",
        "",
        "Generated by `python -m analyses.coverage.bayes report` from `bayes.csv` (one row per replication x "
        "method x estimand x interval; `python -m analyses.coverage.bayes run` appends to it and skips finished "
        "replications).  The module docstring of `analyses/coverage/bayes.py` defines every DGP, method and "
        "interval.",
        "",
        f"Design: N = {DESIGN['N']} items, K = {DESIGN['K']} judges, rank {DESIGN['rank']}, n_LLM = "
        f"{DESIGN['n_llm']:,}, p_first = 0.75, calibration `{DESIGN['calibration']}`; dial-ada over "
        "`SIMULATION_MULTIPLES` by GACV.  Costs: " + ", ".join(f"{k} = {v}" for k, v in asdict(settings).items()
                                                              if k != "bootstrap") + ".",
        "",
        "DGPs: **well-specified** (s_H = mu, n_H = 400); **overdispersed** (`overdispersion=1`: a N(0, 1) effect per "
        "judge and item pair, shared by all that judge's judgments of the pair in both orders; every judgment is "
        "its own record, so the record meat equals the binomial meat here); **misaligned** (s_H = mu + c_V V, "
        "c_V ~ N(0, 0.5^2), outside col(mu), the fits' calibration basis; n_H = 400); **small-budget** (s_H = mu, "
        "n_H = 100); **record-overdispersed** (record-level random effects: each record is one item pair judged by "
        "every judge in both display orders, with a N(0, 1) effect on the logit shared by its 8 judgments; 1,250 "
        "records; s_H = mu, n_H = 400; the truth's b is the conditional one, about 14% larger than the marginal b "
        "the fits estimate).",
        "",
        _md(head),
        "",
        "`coverage` is the mean over replications of the share of the estimand's components covered (8 scores, 28 "
        "contrasts, 4 position effects), ± its Monte Carlo standard error; `width` the mean interval width; "
        "`failed` the replications in which that interval could not be computed (the fit, bootstrap or "
        "posterior raised); `flagged` the share of the counted replications with a warning: for a posterior "
        "pydial's sampler warning (R-hat > 1.01, bulk or tail ESS below 100 per chain, divergences), for a "
        "bootstrap some failed refits.  DIAL's frequentist "
        "b (LLM-only stage) is the same for dial-anc and dial-ada and is listed under dial-anc; the b of dial-ada's "
        "posteriors is the joint (power or ordinary) posterior's.  When GACV selects lambda = inf (0), dial-ada's "
        "posterior and Laplace rows are dial-anc's cut (human's) posterior of the same replication.",
        "",
        "Intervals: " + "; ".join(f"`{k}`: {v}" for k, v in INTERVAL_TEXT.items()) + ".",
        "",
    ]
    text += ["## Overview: coverage ± MC SE (mean width) per DGP", "",
             "The full tables per DGP follow.  Common random numbers: well-specified, overdispersed and "
             "record-overdispersed share the people's judgments (identical `human` rows), well-specified, "
             "misaligned and small-budget share the LLM "
             "judgments (identical `judges` and DIAL `b` rows).", ""]
    for est in ESTIMANDS:
        t = overview(tab, est)
        if len(t):
            text += [f"### {est}", "", _md(t), ""]
    for g in [g for g in DGPS if g in set(tab["dgp"])]:
        t = tab[tab["dgp"] == g].drop(columns=["dgp"])
        text += [f"## {g} (n_H = {DGPS[g]['n_human']})", "", _md(_fmt(t)), ""]
    text += ["## Median wall seconds per piece (within one worker)", "",
             "Frequentist pieces include the fit; bootstrap is B refits; posteriors are CmdStan runs including "
             "cmdstanpy's I/O (two chains in parallel).  The run used 2 joblib workers on a 2-core machine shared "
             "with other jobs, so these are wall times under load.", "", _md(piece.reset_index()), ""]
    text += ["## Failures", ""]
    if len(errs):
        e = (errs.groupby(["dgp", "method", "error"])
             .agg(replications=("rep", "nunique"), intervals=("interval", lambda v: ", ".join(dict.fromkeys(v))))
             .reset_index()[["dgp", "method", "replications", "intervals", "error"]])
        text += ["A failed fit takes its covariances and bootstrap with it; the posteriors of the same replication "
                 "still run.", "", _md(e), ""]
    else:
        text += ["None.", ""]
    flagged = df.loc[df["flag"] != ""].drop_duplicates(["dgp", "rep", "method", "interval"])
    text += ["## Sampler warnings", ""]
    if len(flagged):
        f = flagged.assign(kind=flagged["flag"].str.split(" | ", regex=False).map(
            lambda ps: "; ".join(sorted({p.split(" for ")[0].split(":")[0].strip() for p in ps}))))
        runs = df.drop_duplicates(["dgp", "rep", "method", "interval"])
        nuts = runs[runs["rhat_max"].notna()]
        rh = (nuts.groupby(["method", "interval"])["rhat_max"]
              .agg(runs="size", median="median", p95=lambda v: v.quantile(0.95), max="max").round(3).reset_index())
        text += [_md(f.groupby(["dgp", "method", "interval", "kind"]).size().rename("replications").reset_index()),
                 "", "The largest R-hat of each NUTS run (over its monitored scalars; all DGPs):", "", _md(rh), "",
                 f"Divergent transitions in {int((runs['divergent'] > 0).sum())} runs.", ""]
    else:
        text += ["None.", ""]
    text += ["![coverage](bayes_coverage.png)", ""]
    path = out / "bayes_summary.md"
    path.write_text("\n".join(text))
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run`` (then the report) or ``report``."""
    p = argparse.ArgumentParser(prog="python -m analyses.coverage.bayes", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("run", "report"))
    p.add_argument("--reps", type=int, default=200, help="replications per DGP (default 200)")
    p.add_argument("--jobs", type=int, default=1, help="joblib workers over replications")
    p.add_argument("--seed", type=int, default=20262)
    p.add_argument("--dgps", default=",".join(DGPS), help="comma-separated subset of " + ", ".join(DGPS))
    p.add_argument("--B", type=int, default=Settings.B, help="bootstrap resamples per fit")
    p.add_argument("--out", default=str(RESULTS_DIR))
    args = p.parse_args(argv)
    out = Path(args.out)
    settings = Settings(B=args.B)
    if args.command == "run":
        run(args.reps, args.jobs, args.seed, out, settings, tuple(args.dgps.split(",")))
    print(f"wrote {report(out, settings)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
