"""Shared inputs of the fuzz cases, built once in the parent process before the cases fork.

:data:`SETUP` is the code that builds them; every case's reproduction runs after it.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

SETUP = """\
import os, warnings, numpy as np, pandas as pd, pydial
from pydial import Comparisons
F  = pydial.simulate(N=5, K=3, n_llm=1500, n_human=400, seed=1, both_orders=True).frame   # both display orders
FC = pydial.simulate(N=5, K=3, n_llm=1500, n_human=400, seed=2, covariates=["length"]).frame  # length_a, length_b
FT = pydial.simulate(N=5, K=3, n_llm=1500, n_human=400, seed=3, tie_rate=0.15, ties="davidson").frame  # ties
D, DT = Comparisons.from_frame(F), Comparisons.from_frame(FT)
DC = Comparisons.from_frame(FC, covariates=["length"])
FR = pydial.simulate(N=5, K=3, n_llm=1500, n_human=1200, seed=4, both_orders=True).frame  # enough people for the sweeps
DR = Comparisons.from_frame(FR)
FIX = os.environ.get("FUZZ_FIXTURES", ".")   # folder of data.csv, data.csv.gz, data.parquet, counts.csv, panel/
"""


def hand_counts(frame: Any, human: str = "human") -> tuple[int, int]:
    """Decisive human and LLM judgments counted by hand: winner a or b, two different items."""
    f = frame
    decisive = f["winner"].isin(["a", "b"]) & (f["item_a"].astype(str) != f["item_b"].astype(str))
    hum = f["judge"].astype(str) == human
    return int((decisive & hum).sum()), int((decisive & ~hum).sum())


def counts_table(frame: Any) -> Any:
    """The long table aggregated by hand to the columns of ``Comparisons.from_counts``."""
    import pandas as pd

    f = frame.copy()
    f.loc[f["judge"] == "human", "first"] = ""
    for w, col in (("a", "wins_a"), ("b", "wins_b"), ("tie", "ties"), ("both_bad", "both_bad")):
        f[col] = (f["winner"] == w).astype(int)
    g = f.groupby(["judge", "item_a", "item_b", "first"], as_index=False)[["wins_a", "wins_b", "ties", "both_bad"]].sum()
    return pd.DataFrame(g)


def build(folder: Path | None = None) -> dict[str, Any]:
    """Run :data:`SETUP`, write the fixture files into ``folder``; return the namespace of the cases."""
    import os

    folder = Path(folder or tempfile.mkdtemp(prefix="pydial-fuzz-fixtures-"))
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["FUZZ_FIXTURES"] = str(folder)
    ns: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(SETUP, ns)
    F = ns["F"]
    F.to_csv(folder / "data.csv", index=False)
    F.to_csv(folder / "data.csv.gz", index=False)
    F.to_parquet(folder / "data.parquet", index=False)
    ns["FC"].to_csv(folder / "cov.csv", index=False)
    ns["FT"].to_csv(folder / "ties.csv", index=False)
    ns["FR"].to_csv(folder / "rob.csv", index=False)
    counts_table(F).to_csv(folder / "counts.csv", index=False)
    panel = Path(__file__).resolve().parents[2] / "tests" / "data" / "panel" / "hand" / "results"
    if panel.is_dir():
        shutil.copytree(panel, folder / "panel", dirs_exist_ok=True)
    ns.update(hand_counts=hand_counts, counts_table=counts_table, FIXDIR=folder)
    return ns
