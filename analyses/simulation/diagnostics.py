r"""Diagnostic: where on the weight path the excess risk of DIAL-Ada (W) comes from.

For the data sets of a study row (the same seeds as :mod:`analyses.simulation.study`),
fits DIAL-Ada with ``M = mu`` and with ``M = W`` and records, for each, the excess
risk of the GACV-selected candidate, of the anchored endpoint (``lambda = inf``) and of
the oracle candidate of the same path, plus the selected multiple.  This separates the
cost of estimating an extra calibration direction (anchored W vs anchored mu, which
first-order theory puts at a factor 2 in mean) from the cost of the GACV selection
along the path::

    python -m analyses.simulation.diagnostics --config main-top --reps 50 --jobs 2

writes ``results/diagnostic_w_path.csv`` (one row per replication and calibration), read
by ``comparison.md``.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import pydial
from pydial.studies import metrics
from pydial.estimation.selection import SIMULATION_MULTIPLES

from .study import CONFIGS, RESULTS_DIR, Task

OUT_NAME = "diagnostic_w_path.csv"


def path_risks(task: Task) -> list[dict[str, Any]]:
    cfg, bud = task.config, task.budget
    sim = pydial.simulate(cfg.N, cfg.K, cfg.r, bud.n_llm, bud.n_human, target=cfg.target,
                          seed=np.random.default_rng(np.random.SeedSequence(task.seed)), behavior=dict(overdispersion=bud.overdispersion, sigma_pos=bud.sigma_pos))
    s_h = sim.truth.s_h
    rows = []
    for cal in ("mu", "W"):
        row = dict(config=cfg.name, x=task.x, rep=task.rep, calibration=cal)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                res = pydial.fit(sim.comparisons, "dial-ada", rank=cfg.r, calibration=cal,
                                 multiples=SIMULATION_MULTIPLES)
            except pydial.DialError as e:
                rows.append(dict(row, failed=True, error=type(e).__name__))
                continue
        s = res.scores["score"].reindex(list(sim.truth.items)).to_numpy(float)
        cands = [e.candidate for e in res.path if e.candidate.s is not None]
        adm = [c for c in cands if c.admissible] or [c for c in cands if np.isinf(c.lambda_)]
        anc = next(c for c in cands if np.isinf(c.lambda_))
        risks = [metrics.excess_risk(c.s, s_h) for c in adm]
        lam = res.lambda_
        rows.append(dict(row, failed=False, error="", selected=metrics.excess_risk(s, s_h),
                         anchored=metrics.excess_risk(anc.s, s_h), oracle=float(min(risks)),
                         multiple=lam if lam == 0 or np.isinf(lam) else lam * bud.n_human / bud.n_llm))
    return rows


def run(config: str = "main-top", reps: int = 50, jobs: int = 1, out_dir: Path = RESULTS_DIR) -> pd.DataFrame:
    import joblib

    cfg = CONFIGS[config]
    tasks = [Task(cfg, b, r) for b in cfg.budgets for r in range(reps)]
    with joblib.parallel_config(backend="loky", inner_max_num_threads=1):
        out = joblib.Parallel(n_jobs=jobs)(joblib.delayed(path_risks)(t) for t in tasks)
    df = pd.DataFrame([r for rows in out for r in rows])
    path = Path(out_dir) / OUT_NAME
    old = pd.read_csv(path) if path.exists() else None
    if old is not None:
        df = pd.concat([old[old.config != config], df], ignore_index=True)
    df.to_csv(path, index=False)
    return df


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and median of each risk per (config, x, calibration), and the W/mu ratios."""
    ok = df[~df.failed.astype(bool)]
    rows = []
    for (cfg, x), g in ok.groupby(["config", "x"]):
        mu, W = g[g.calibration == "mu"].set_index("rep"), g[g.calibration == "W"].set_index("rep")
        common = mu.index.intersection(W.index)
        mu, W = mu.loc[common], W.loc[common]
        row = {"config": cfg, "x": x, "n": len(common)}
        for col in ("anchored", "selected", "oracle"):
            row[f"mu {col} (median)"] = mu[col].median()
            row[f"W {col} (median)"] = W[col].median()
            row[f"W/mu {col}: ratio of medians"] = W[col].median() / mu[col].median()
            row[f"W/mu {col}: ratio of means"] = W[col].mean() / mu[col].mean()
        row["W: P(selected = anchored)"] = float(np.mean(np.isinf(W["multiple"])))
        row["mu: P(selected = anchored)"] = float(np.mean(np.isinf(mu["multiple"])))
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analyses.simulation.diagnostics", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="main-top")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS_DIR)
    a = ap.parse_args(argv)
    df = run(a.config, a.reps, a.jobs, a.out)
    with pd.option_context("display.width", 200, "display.max_columns", 40):
        print(summary(df[df.config == a.config]).round(4).T.to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
