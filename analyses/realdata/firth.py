r"""Bias-reduced (Firth) fits on the real-data human-budget sweep: the heavy tail.

Reads the committed sweep (``results/human_budget.csv``, unpenalized methods) and the
rerun with the Firth variants (``results_firth/human_budget.csv``, same protocol,
seeds, splits and budgets; produced by::

    python -m analyses.realdata run --out analyses/realdata/results_firth \
        --sweeps human_budget --budgets 50,100,200,400,800,1600,3200 \
        --methods human,dial-anc,dial-ada,human-firth,dial-anc-firth,dial-ada-firth --no-report

and the same with ``--out analyses/realdata/results_firth_anchored --methods dial-ada-firth-anchored``) and writes ``results_firth/summary.md``: per budget and method the number of
splits with a fit, the mean excess held-out human log loss with its Monte Carlo
standard error, the median and the 90th percentile, the selected weight, and the
check that the rerun reproduces the committed unpenalized numbers.

Run from the repository root::

    python -m analyses.realdata.firth
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.simulation.compare import _md

from analyses.simulation.firth import tail_table

HERE = Path(__file__).resolve().parent
BEFORE = HERE / "results" / "human_budget.csv"
AFTER = HERE / "results_firth" / "human_budget.csv"
AFTER_ANCHORED = HERE / "results_firth_anchored" / "human_budget.csv"  # include_endpoints="anchored"


def load(path: Path, tag: str) -> pd.DataFrame:
    df = pd.read_csv(path, dtype={"message": str, "sources": str})
    df = df.assign(failed=df["status"] != "ok", run=tag)
    return df


PAIRS = (("dial-ada", "dial-anc"), ("dial-ada-firth", "dial-anc"), ("dial-ada-firth-anchored", "dial-anc"),
         ("dial-ada-firth-anchored", "dial-ada"), ("dial-anc-firth", "dial-anc"))


def paired(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and MC SE of the split-wise differences ``a - b`` of the excess loss, per budget,
    over the splits where both methods have a fit."""
    w = rows.loc[rows["status"] == "ok"].pivot_table(index=["setting", "split"], columns="method",
                                                     values="excess_loss")
    out = []
    for n_h, g in w.groupby(level="setting"):
        rec: dict[str, float] = {"n_H": n_h}
        for a, b in PAIRS:
            if a in g and b in g:
                d = (g[a] - g[b]).dropna()
                rec[f"{a} - {b}"] = d.mean()
                rec[f"se({a} - {b})"] = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else np.nan
        out.append(rec)
    return pd.DataFrame(out)


def summary(before: pd.DataFrame, after: pd.DataFrame) -> str:
    """Tail table of the unpenalized methods (committed run) beside the Firth variants
    (rerun), on the budgets and splits of the rerun."""
    firth = after.loc[after["method"].str.contains("-firth")]
    budgets = sorted(firth["setting"].unique())
    splits = sorted(firth["split"].unique())
    # the tasks every variant has reached (runs in progress stop at different points)
    tasks = set.intersection(*(set(zip(g["setting"], g["split"])) for _, g in firth.groupby("method")))
    firth = firth.loc[[(st, sp) in tasks for st, sp in zip(firth["setting"], firth["split"])]]
    plain = before.loc[[(st, sp) in tasks for st, sp in zip(before["setting"], before["split"])]]
    plain = plain.loc[plain["method"].isin(["human", "dial-anc", "dial-ada"])]
    key = ["setting", "split", "method"]
    both = plain.merge(after, on=key, suffixes=("_before", "_after"))
    gap = float(np.nanmax(np.abs(both["excess_loss_before"] - both["excess_loss_after"]))) if len(both) else np.nan
    rows = pd.concat([plain, firth], ignore_index=True)
    tab = tail_table(rows, "excess_loss", "setting").rename(columns={"setting": "n_H"})
    ok = rows.loc[rows["status"] == "ok"]
    shares = ok.assign(share_lambda_inf=np.isinf(ok["lambda_multiple"]), share_lambda_0=ok["lambda_multiple"] == 0)
    shares = shares.groupby(["setting", "method"])[["share_lambda_inf", "share_lambda_0"]].mean().reset_index()
    tab = tab.merge(shares.rename(columns={"setting": "n_H"}), on=["n_H", "method"], how="left")
    wide = {stat: tab.pivot(index="n_H", columns="method", values=stat) for stat in ("mean", "median", "p90")}
    verdict = []
    for n_h, row in wide["mean"].iterrows():
        for ada, anc in (("dial-ada", "dial-anc"), ("dial-ada-firth", "dial-anc"), ("dial-ada-firth-anchored", "dial-anc"),
                         ("dial-ada-firth-anchored", "dial-anc-firth")):
            if ada in row and anc in row and row[ada] > row[anc]:
                verdict.append(f"n_H = {int(n_h)}: {ada} mean {row[ada]:.5f} > {anc} mean {row[anc]:.5f}")
    text = ["# Real-data human-budget sweep: Firth (bias-reduced) fits and the heavy tail", "",
            f"Up to {len(splits)} record splits per budget (n_H = {', '.join(str(int(b)) for b in budgets)}; `n` per "
            "row); excess "
            "held-out human log loss against the test-pool human BTL. Unpenalized methods: the committed run "
            "(results/human_budget.csv); `*-firth`: `pydial.fit(..., penalty=\"firth\")` on the same tasks "
            "(results_firth/human_budget.csv). failed = no fit (no finite estimate, no admissible candidate, or "
            "an error).",
            f"Unpenalized methods refitted in the rerun reproduce the committed numbers: max |difference| = {gap:.2e} "
            f"({len(both)} fits).", "", _md(tab.round(5)), ""]
    for stat in ("mean", "median", "p90"):
        text += [f"## {stat} excess loss by budget", "", _md(wide[stat].round(5).reset_index()), ""]
    text += ["## Paired differences in excess loss (same splits), mean (MC SE)", "", _md(paired(rows).round(5)), ""]
    text += ["## Budgets where DIAL-Ada is worse than DIAL-Anc in mean excess loss", ""]
    text += [f"* {v}" for v in verdict] or ["* none"]
    return "\n".join(text) + "\n"


def main() -> int:
    after = load(AFTER, "after")
    if AFTER_ANCHORED.exists():
        after = pd.concat([after, load(AFTER_ANCHORED, "after")], ignore_index=True)
    text = summary(load(BEFORE, "before"), after)
    (AFTER.parent / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
