r"""Coverage of DIAL-Ada's 95% contrast intervals: sandwich vs record bootstrap.

The paper's main data-generating process (App. "Simulation Studies", Fig. simu-main
top row: N = 10 items, K = 4 judges, rank 1, consensus target, n_LLM = 20,000,
``p_first = 0.75``) at human budgets n_H in {100, 400}.  Per replication:

* DIAL-Ada with ``multiples = SIMULATION_MULTIPLES`` and the default judge-pair
  cell-clustered sandwich: coverage of the 45 pairwise contrasts' Wald intervals
  (conditional on the GACV-selected lambda);
* ``res.bootstrap(B, by="record")``: the whole procedure, GACV selection included,
  refitted on B record resamples; coverage of the percentile and basic intervals;
* the selected multiple ``lambda n_H / n_LLM`` and the share of bootstrap replicates
  that select another weight (how unstable the selection is).

Seeds: replication ``rep`` at budget ``n_H`` uses ``SeedSequence([seed, n_H, rep])``
for the data and ``[seed, n_H, rep, 1]`` as the bootstrap root; rows are appended to
``results/coverage.csv`` one replication at a time and a rerun skips finished ones.

Run from the repository root::

    python -m analyses.coverage.study run --reps 200 --B 200 --jobs 2
    python -m analyses.coverage.study report       # results/summary.md
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyses.simulation.compare import _md

import pydial
from pydial.studies import metrics
from pydial.exceptions import DialError
from pydial.estimation.selection import SIMULATION_MULTIPLES

RESULTS_DIR = Path(__file__).resolve().parent / "results"
LEVEL = 0.95
DESIGN = dict(N=10, K=4, rank=1, n_llm=20_000, target="consensus")
BUDGETS = (100, 400)
COLUMNS = ("n_human", "rep", "B", "failed", "error", "multiple", "cov_sandwich", "cov_percentile", "cov_basic",
           "width_sandwich", "width_percentile", "width_basic", "boot_other_lambda", "boot_failed", "seconds")


def _coverage(lo: np.ndarray, hi: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean((lo <= truth) & (truth <= hi)))


def run_replication(n_human: int, rep: int, B: int, seed: int) -> dict[str, Any]:
    """One data set: DIAL-Ada, its sandwich and its record bootstrap."""
    t0 = time.perf_counter()
    row: dict[str, Any] = {c: np.nan for c in COLUMNS}
    row.update(n_human=n_human, rep=rep, B=B, failed=False, error="")
    sim = pydial.simulate(DESIGN["N"], DESIGN["K"], DESIGN["rank"], DESIGN["n_llm"], n_human, target=DESIGN["target"],
                          seed=np.random.default_rng(np.random.SeedSequence([seed, n_human, rep])))
    data, s_true = sim.comparisons, sim.truth.s_h
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = pydial.fit(data, "dial-ada", rank=DESIGN["rank"], multiples=SIMULATION_MULTIPLES, level=LEVEL)
        boot = res.bootstrap(B, seed=int(np.random.SeedSequence([seed, n_human, rep, 1]).generate_state(1)[0]),
                             progress=False)
    except DialError as e:
        row.update(failed=True, error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return row
    items = list(data.items)
    s_hat = res.scores["score"].reindex(items).to_numpy(float)
    C = res.cov.reindex(index=items, columns=items).to_numpy(float)
    iu, ju = np.triu_indices(len(items), 1)
    truth = s_true[iu] - s_true[ju]
    ct = boot.contrasts
    z = metrics.contrast_coverage(s_hat, C, s_true, LEVEL)
    se = np.sqrt(np.maximum(C[iu, iu] + C[ju, ju] - 2 * C[iu, ju], 0.0))
    from scipy.stats import norm

    lam = float(res.lambda_)
    mult = lam if lam == 0 or np.isinf(lam) else lam * data.n_human / data.n_llm
    sel = boot.selection["multiple"].to_numpy(float)
    row.update(multiple=mult, cov_sandwich=z,
               cov_percentile=_coverage(ct["pct_low"].to_numpy(), ct["pct_high"].to_numpy(), truth),
               cov_basic=_coverage(ct["basic_low"].to_numpy(), ct["basic_high"].to_numpy(), truth),
               width_sandwich=float(np.mean(2 * norm.ppf(0.5 + LEVEL / 2) * se)),
               width_percentile=float(np.mean(ct["pct_high"] - ct["pct_low"])),
               width_basic=float(np.mean(ct["basic_high"] - ct["basic_low"])),
               boot_other_lambda=float(np.mean(~np.isclose(sel, mult) & ~(np.isinf(sel) & np.isinf(mult)))),
               boot_failed=boot.n_failed)
    row["seconds"] = time.perf_counter() - t0
    return row


def _done(path: Path) -> set[tuple[int, int]]:
    if not path.exists() or path.stat().st_size == 0:
        return set()
    df = pd.read_csv(path)
    return {(int(a), int(b)) for a, b in zip(df["n_human"], df["rep"])}


def run(reps: int, B: int, jobs: int, seed: int, out: Path, budgets: tuple[int, ...] = BUDGETS) -> None:
    """Run the pending replications (interleaving the budgets), appending rows as they finish."""
    from joblib import Parallel, delayed
    from tqdm.auto import tqdm

    out.mkdir(parents=True, exist_ok=True)
    path = out / "coverage.csv"
    done = _done(path)
    tasks = [(n, r) for r in range(reps) for n in budgets if (n, r) not in done]
    gen = Parallel(n_jobs=jobs, return_as="generator", batch_size=1)(
        delayed(run_replication)(n, r, B, seed) for n, r in tasks)
    for row in tqdm(gen, total=len(tasks), desc="coverage", disable=not sys.stderr.isatty()):
        pd.DataFrame([row], columns=list(COLUMNS)).to_csv(path, mode="a", index=False,
                                                          header=not path.exists() or path.stat().st_size == 0)


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Mean coverage per budget and interval type with its Monte Carlo standard error.

    Replications are independent; each replication's coverage averages 45 contrasts.
    """
    ok = df.loc[~df["failed"].astype(bool)]
    rows = []
    for n, g in ok.groupby("n_human"):
        for kind in ("sandwich", "percentile", "basic"):
            v = g[f"cov_{kind}"].to_numpy(float)
            rows.append({"n_human": int(n), "interval": kind, "reps": v.size, "B": int(g["B"].iloc[0]),
                         "coverage": v.mean(), "mc_se": v.std(ddof=1) / np.sqrt(v.size),
                         "all_45_covered": float(np.mean(v == 1.0)), "mean_width": g[f"width_{kind}"].mean()})
        rows.append({"n_human": int(n), "interval": "(selection)", "reps": len(g), "B": int(g["B"].iloc[0]),
                     "coverage": np.nan, "mc_se": np.nan, "all_45_covered": np.nan,
                     "mean_width": np.nan, "share_anchored": float(np.mean(np.isinf(g["multiple"]))),
                     "share_human": float(np.mean(g["multiple"] == 0)),
                     "boot_other_lambda": g["boot_other_lambda"].mean()})
    return pd.DataFrame(rows)


def report(out: Path) -> Path:
    """Write ``summary.md`` from ``coverage.csv``."""
    df = pd.read_csv(out / "coverage.csv")
    tab = summarize(df)
    text = ["# Coverage of DIAL-Ada's 95% contrast intervals: sandwich vs record bootstrap", "",
            f"Design: {DESIGN}, multiples = SIMULATION_MULTIPLES, judge-pair cell-clustered sandwich.",
            f"Failed replications (no admissible fit): {int(df['failed'].astype(bool).sum())}.", "",
            "`coverage` is the mean over replications of the share of the 45 contrasts covered; `mc_se` its "
            "Monte Carlo standard error.", "", _md(tab.round(4)), ""]
    path = out / "summary.md"
    path.write_text("\n".join(text))
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run`` (then the report) or ``report``."""
    p = argparse.ArgumentParser(prog="python -m analyses.coverage.study", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("run", "report"))
    p.add_argument("--reps", type=int, default=200, help="replications per budget (default 200)")
    p.add_argument("--B", type=int, default=200, help="bootstrap replicates per fit (default 200)")
    p.add_argument("--jobs", type=int, default=1, help="joblib workers over replications")
    p.add_argument("--seed", type=int, default=20261)
    p.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="human budgets, e.g. 100,400")
    p.add_argument("--out", default=str(RESULTS_DIR))
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.command == "run":
        run(args.reps, args.B, args.jobs, args.seed, out, tuple(int(x) for x in args.budgets.split(",")))
    print(f"wrote {report(out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
