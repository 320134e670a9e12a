r"""Style control: the human target's ranking error with and without response covariates.

Design (beyond the paper; its App. simulation DGP with one response covariate):
``pydial.simulate(N=10, K=4, rank=1, n_llm=20_000, n_human=400, covariates=["length"],
beta=B)`` where every LLM judge prefers the longer response (``beta_k = 0.5`` per unit of
length) and people do not (``beta_H = 0``).  Each item has a mean length ``m_i ~ N(0, 1)``
and each response its own draw around it, so the judges' view of item ``i`` is shifted by
about ``beta_k m_i``: a length bias that the human target does not have.

Each replication fits ``judges``, ``dial-anc`` and ``dial-ada`` (and ``human``, the
reference) to the data read without and with the covariate (``Comparisons.from_frame(...,
covariates=["length"])``: the style-controlled scores at ``z = 0``), and records

* Kendall's tau between the estimated scores and the human target ``s_H``;
* the excess human risk ``R_H(s) - R_H(s_H)`` (App. simulation; uniform pair weights);
* with the covariate, whether each 95% interval of ``beta`` (every judge and the people,
  default cell-clustered meat and the judgment-level ``binomial`` meat) covers the truth on
  the standardized scale (``beta * data.covariate_scale``).

Results under ``analyses/covariates/results/``: ``replications.csv``, ``summary.csv``
(mean and Monte Carlo SE over the replications), ``coverage.csv``, ``summary.md`` and
``fig_beta.png`` (beta per judge with its intervals, first replication, DIAL-Ada).

Run ``python -m analyses.covariates.study [--reps 50] [--jobs 2]`` from the repository root
(``--quick``: 6 replications).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

import pydial
from pydial.studies import metrics

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("human", "judges", "dial-anc", "dial-ada")
DESIGN = dict(N=10, K=4, rank=1, n_llm=20_000, n_human=400)
BIAS = 0.5
"""Every LLM judge's effect of one unit of length; people have none."""


def truth_beta(K: int) -> np.ndarray:
    """The true ``beta`` (K judges, then the people) on the covariate's own scale."""
    return np.r_[np.full(K, BIAS), 0.0][:, None]


def replication(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One data set: the score metrics of every method without and with the covariate, and the beta coverage."""
    warnings.simplefilter("ignore")
    sim = pydial.simulate(covariates=["length"], beta=truth_beta(DESIGN["K"]), seed=seed, **DESIGN)
    s_h = sim.truth.s_h
    plain = pydial.Comparisons.from_frame(sim.frame, items=list(sim.truth.items))
    styled = sim.comparisons
    rows, cover = [], []
    for covariates, data in (("without", plain), ("with", styled)):
        for method in METHODS:
            res = pydial.fit(data, method)
            s = res.scores["score"].to_numpy()
            rows.append(dict(seed=seed, method=method, covariates=covariates, kendall_tau=metrics.kendall_tau(s, s_h),
                             excess_risk=float(metrics.excess_risk(s, s_h))))
            if covariates == "with" and method in ("dial-anc", "dial-ada"):
                truth = (truth_beta(data.K) * data.covariate_scale.to_numpy()).ravel()
                labels = [*data.judges, data.human_judge]
                for meat in ("cell", "binomial"):
                    ce = res.with_cov(meat).covariate_effects
                    hit = (ce["ci_low"].to_numpy() <= truth) & (truth <= ce["ci_high"].to_numpy())
                    cover += [dict(seed=seed, method=method, meat=meat, judge=k, covered=bool(h)) for k, h in zip(labels, hit)]
    return rows, cover


def summarize(reps: pd.DataFrame) -> pd.DataFrame:
    """Mean and Monte Carlo SE of every metric by method and covariates."""
    g = reps.groupby(["method", "covariates"], sort=False)[["kendall_tau", "excess_risk"]]
    mean, se = g.mean(), g.std(ddof=1) / np.sqrt(g.count())
    out = pd.concat({"mean": mean, "mc_se": se}, axis=1).swaplevel(axis=1).sort_index(axis=1)
    return out.reindex(pd.MultiIndex.from_product([METHODS, ("without", "with")], names=["method", "covariates"]))


def coverage(cover: pd.DataFrame) -> pd.DataFrame:
    """Coverage of the 95% beta intervals by method and meat: LLM judges pooled, and people; binomial MC SE."""
    cover = cover.assign(who=np.where(cover["judge"] == "human", "people (beta_H = 0)", f"LLM judges (beta_k = {BIAS})"))
    g = cover.groupby(["method", "meat", "who"])["covered"]
    out = pd.DataFrame({"coverage": g.mean(), "intervals": g.count()})
    out["mc_se"] = np.sqrt(out["coverage"] * (1 - out["coverage"]) / out["intervals"])
    return out


def figure(seed: int, path: Path) -> None:
    """Plot beta per judge with its intervals (DIAL-Ada, the first replication's data)."""
    import matplotlib

    matplotlib.use("Agg")
    from pydial.report import plot_covariate_effects

    warnings.simplefilter("ignore")
    sim = pydial.simulate(covariates=["length"], beta=truth_beta(DESIGN["K"]), seed=seed, **DESIGN)
    ax = plot_covariate_effects(pydial.fit(sim.comparisons, "dial-ada"))
    truth = BIAS * sim.comparisons.covariate_scale.iloc[0]
    ax.axvline(truth, color="C3", ls="--", lw=0.8, label=f"true judges' beta ({truth:.2f})")
    ax.legend(fontsize=7)
    ax.figure.savefig(path, dpi=120)


def markdown(summary: pd.DataFrame, cov: pd.DataFrame, n: int, seconds: float) -> str:
    """The summary as the README's table."""
    lines = [f"Human target, {n} replications of N={DESIGN['N']}, K={DESIGN['K']}, n_LLM={DESIGN['n_llm']:,}, "
             f"n_H={DESIGN['n_human']}; judges' length effect {BIAS}, people's 0 (mean +- Monte Carlo SE; "
             f"{seconds / 60:.1f} min).", "",
             "| method | covariates | Kendall tau | excess risk |", "|---|---|---|---|"]
    for (m, c), r in summary.iterrows():
        lines.append(f"| {m} | {c} | {r[('kendall_tau', 'mean')]:.3f} +- {r[('kendall_tau', 'mc_se')]:.3f} | "
                     f"{r[('excess_risk', 'mean')]:.4f} +- {r[('excess_risk', 'mc_se')]:.4f} |")
    lines += ["", "| method | meat | effects | coverage of 95% intervals | intervals |", "|---|---|---|---|---|"]
    for (m, meat, who), r in cov.iterrows():
        lines.append(f"| {m} | {meat} | {who} | {r['coverage']:.3f} +- {r['mc_se']:.3f} | {int(r['intervals'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run the replications in parallel and write the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="6 replications")
    args = ap.parse_args()
    n = 6 if args.quick else args.reps
    RESULTS.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    out = Parallel(n_jobs=args.jobs)(delayed(replication)(1000 + r) for r in range(n))
    seconds = time.perf_counter() - t0
    reps = pd.DataFrame([row for rows, _ in out for row in rows])
    cov = pd.DataFrame([row for _, rows in out for row in rows])
    summary, cov_tab = summarize(reps), coverage(cov)
    reps.to_csv(RESULTS / "replications.csv", index=False)
    summary.to_csv(RESULTS / "summary.csv")
    cov_tab.to_csv(RESULTS / "coverage.csv")
    (RESULTS / "summary.md").write_text(markdown(summary, cov_tab, n, seconds))
    (RESULTS / "timings.json").write_text(json.dumps({"replications": n, "seconds": seconds, "jobs": args.jobs}, indent=1))
    figure(1000, RESULTS / "fig_beta.png")
    print(markdown(summary, cov_tab, n, seconds))


if __name__ == "__main__":
    main()
