r"""Bias-reduced (Firth) DIAL-Anc / DIAL-Ada on the paper's synthetic top row.

Regenerates the data sets of Fig. simu-main, top row (``main-top``: N = 10, K = 4,
r = 1, n_LLM = 20,000, n_H = 100 ... 1,600, 50 replications) with the seeds of
:mod:`analyses.simulation.study` (:func:`~analyses.simulation.study.task_seed`), so the
replications are the ones in ``results/main-top.csv``, and fits DIAL-Anc and DIAL-Ada
with ``penalty="firth"``; the unpenalized DIAL-Anc and DIAL-Ada are read from the
committed rows, and refitted on the first ``--check`` replications of every budget to
check that the data sets are the same (same numbers).

Output: ``results/firth-main-top.csv`` (one row per replication and method, appended
as replications finish; a rerun resumes) and ``results/firth-main-top.md`` (mean,
median and 90th percentile of the excess risk).

Run from the repository root::

    python -m analyses.simulation.firth --jobs 2
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import pydial
from pydial.studies import metrics
from pydial.exceptions import DialError
from pydial.estimation.selection import SIMULATION_MULTIPLES

from .compare import _md
from .study import CONFIGS, RESULTS_DIR, Task

PLAIN: dict[str, tuple[str, dict[str, Any]]] = {
    "DIAL-Anc": ("dial-anc", {}),
    "DIAL-Ada": ("dial-ada", {"multiples": SIMULATION_MULTIPLES}),
}
SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "DIAL-Anc (Firth)": ("dial-anc", {"penalty": "firth"}),
    "DIAL-Ada (Firth)": ("dial-ada", {"multiples": SIMULATION_MULTIPLES, "penalty": "firth"}),
    "DIAL-Ada (Firth, anchored)": ("dial-ada", {"multiples": SIMULATION_MULTIPLES, "penalty": "firth",
                                                "include_endpoints": "anchored"}),
}


def run_replication(task: Task, check: bool = False, only: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Fit the Firth variants ``only`` (default all; with ``check`` also the unpenalized ones)
    on one replication."""
    cfg, bud = task.config, task.budget
    sim = pydial.simulate(cfg.N, cfg.K, cfg.r, bud.n_llm, bud.n_human, target=cfg.target,
                          seed=np.random.default_rng(np.random.SeedSequence(task.seed)), behavior=dict(overdispersion=bud.overdispersion, sigma_pos=bud.sigma_pos))
    data, truth = sim.comparisons, sim.truth
    rows = []
    specs = {k: v for k, v in SPECS.items() if only is None or k in only}
    for label, (method, kw) in ({**PLAIN, **specs} if check else specs).items():
        row = {"config": cfg.name, "x": task.x, "rep": task.rep, "method": label, "failed": False,
               "excess_risk": np.nan, "multiple": np.nan}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = pydial.fit(data, method, rank=cfg.r, **kw)
            s = res.scores["score"].reindex(list(truth.items)).to_numpy(float)
            lam = float(res.lambda_)
            row.update(excess_risk=metrics.excess_risk(s, truth.s_h),
                       multiple=lam if lam == 0 or np.isinf(lam) else lam * bud.n_human / bud.n_llm)
        except DialError:
            row["failed"] = True
        rows.append(row)
    return rows


def tail_table(df: pd.DataFrame, value: str = "excess_risk", by: str = "x") -> pd.DataFrame:
    """Mean (with MC SE), median and 90th percentile of ``value`` per ``by`` and method."""
    ok = df.loc[~df["failed"].astype(bool)]
    g = ok.groupby([by, "method"])[value]
    out = pd.DataFrame({"n": g.size(), "mean": g.mean(), "mc_se": g.std(ddof=1) / np.sqrt(g.size()),
                        "median": g.median(), "p90": g.quantile(0.9)})
    failed = df.groupby([by, "method"])["failed"].sum()
    out = out.reindex(failed.index)
    out["n"] = out["n"].fillna(0).astype(int)
    out["failed"] = failed.astype(int)
    return out.reset_index()


def main(argv: list[str] | None = None) -> int:
    from joblib import Parallel, delayed

    p = argparse.ArgumentParser(prog="python -m analyses.simulation.firth", description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(RESULTS_DIR))
    p.add_argument("--check", type=int, default=2, help="replications per budget refitted without penalty")
    p.add_argument("--report", action="store_true", help="only summarize the replications already run")
    args = p.parse_args(argv)
    cfg = CONFIGS["main-top"]
    out = Path(args.out)
    path = out / "firth-main-top.csv"
    done: dict[tuple[float, int], set[str]] = {}
    if path.exists():
        prev = pd.read_csv(path)
        for x, r, m in zip(prev["x"], prev["rep"], prev["method"]):
            done.setdefault((float(x), int(r)), set()).add(m)
    todo = [] if args.report else [(Task(cfg, b, r), tuple(sorted(set(SPECS) - done.get((float(b.n_human), r), set()))))
                                   for r in range(args.reps) for b in cfg.budgets]
    todo = [(t, miss) for t, miss in todo if miss]
    gen = Parallel(n_jobs=args.jobs, batch_size=1, return_as="generator")(
        delayed(run_replication)(t, t.rep < args.check and len(miss) == len(SPECS), miss) for t, miss in todo)
    for rows in gen:
        pd.DataFrame(rows).to_csv(path, mode="a", index=False, header=not path.exists())
    df = pd.read_csv(path)
    committed = pd.read_csv(out / "main-top.csv")
    committed = committed.loc[committed["method"].isin(list(PLAIN))]
    mine = df.loc[df["method"].isin(list(PLAIN))].merge(
        committed[["x", "rep", "method", "excess_risk"]], on=["x", "rep", "method"], suffixes=("", "_committed"))
    gap = float(np.nanmax(np.abs(mine["excess_risk"] - mine["excess_risk_committed"]))) if len(mine) else np.nan
    firth = df.loc[df["method"].isin(list(SPECS))]
    keys = set(zip(firth["x"], firth["rep"]))
    plain = committed.loc[[(x, r) in keys for x, r in zip(committed["x"], committed["rep"])],
                          ["x", "rep", "method", "failed", "excess_risk", "multiple"]]
    tab = tail_table(pd.concat([plain, firth], ignore_index=True))
    text = ["# Firth (bias-reduced) DIAL on the synthetic top row (main-top)", "",
            "Replications of results/main-top.csv (`n` per row; unpenalized rows are the committed ones on the same "
            "replications). Excess human risk against the true scores: mean (MC SE), median, 90th percentile; "
            "failed = no admissible fit.", "",
            f"Unpenalized refits vs committed main-top.csv: max |difference in excess risk| = {gap:.2e} "
            f"({len(mine)} fits).", "", _md(tab.round(5)), ""]
    (out / "firth-main-top.md").write_text("\n".join(text))
    print("\n".join(text), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
