"""pydial beside other Bradley-Terry tools on the same human-only data.

One long table per size (``bench_ingest.long_table`` with people only: uniform random
pairs, Bernoulli outcomes from standard normal scores) is written as Parquet once.
Every tool then runs in a fresh process that loads the table with pandas and imports
the tool before its clock starts, and is timed from that long pandas table to scores
(and standard errors where the tool gives them):

* ``pydial``: ``Comparisons.from_frame`` + ``fit(data, "human")`` (Fisher standard errors);
  ``pydial (file)``: ``read_comparisons`` of the Parquet file + the same fit;
* ``arena-rank``: ``PairDataset.from_pandas`` + ``BradleyTerry.compute_ratings_and_cis``
  (sandwich standard errors; ratings turned back into natural-log units);
* ``statsmodels``: pair counts (``pd.factorize`` + ``np.bincount``) and a binomial
  ``GLM`` on the dense pair design (Fisher standard errors); skipped when that design
  would exceed ``--statsmodels-max-gb``;
* ``choix``: ``ilsr_pairwise_dense`` on the win matrix (``pd.factorize`` +
  ``np.bincount``), ``ilsr_pairwise`` and ``opt_pairwise`` on the (winner, loser) array
  (point estimates only).

Printed per tool: the median wall time over ``--repeat`` runs, the peak resident memory
of the process in all and above the loaded table, the ratio of the time to pydial's,
and the largest absolute difference of the scores from pydial's, every tool's scores
centered to mean zero on the natural-log scale first.  A tool that is not installed, or
does not finish within ``--timeout`` seconds, is reported as such.  The peers are
optional (``pip install pydial[bench]``).

Usage::

    python benchmarks/bench_peers.py [--sizes 2000000:300,10000000:1000] [--repeat 3] [--tools ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOOLS = ("pydial", "pydial (file)", "arena-rank", "statsmodels", "choix ilsr_pairwise_dense", "choix ilsr_pairwise",
         "choix opt_pairwise")
IMPORTS = {"pydial": ["pydial"], "pydial (file)": ["pydial"], "statsmodels": ["statsmodels.api"],
           "arena-rank": ["arena_rank.models.bradley_terry", "arena_rank.utils.data_utils"],
           **{t: ["choix"] for t in TOOLS if t.startswith("choix")}}
STANDARD_ERRORS = {"pydial": "Fisher", "pydial (file)": "Fisher", "arena-rank": "sandwich", "statsmodels": "Fisher"}


# ------------------------------------------------------------ child side
def _codes(table):
    """Item codes of both columns (``pd.factorize`` of the two stacked), the item names and ``a won``."""
    import numpy as np
    import pandas as pd

    n = len(table)
    codes, names = pd.factorize(pd.concat([table["item_a"], table["item_b"]], ignore_index=True))
    return codes[:n], codes[n:], list(map(str, names)), (table["winner"] == "a").to_numpy()


def _winner_loser(table):
    import numpy as np

    a, b, names, a_won = _codes(table)
    return np.where(a_won, a, b), np.where(a_won, b, a), names


def run_tool(tool: str, table, path: str) -> tuple[dict[str, float], bool]:
    """Scores (item name -> score, natural-log scale) of ``tool`` from the long ``table``, and whether it gave SEs."""
    import numpy as np

    if tool in ("pydial", "pydial (file)"):
        import pydial

        data = pydial.Comparisons.from_frame(table) if tool == "pydial" else pydial.read_comparisons(path)
        res = pydial.fit(data, "human")
        assert np.isfinite(res.scores["se"]).all()
        return dict(zip(res.scores.index, res.scores["score"])), True
    if tool == "arena-rank":
        import pandas as pd
        from arena_rank.models.bradley_terry import BradleyTerry
        from arena_rank.utils.data_utils import PairDataset

        frame = pd.DataFrame({"model_a": table["item_a"], "model_b": table["item_b"],
                              "winner": np.where(table["winner"].to_numpy() == "a", "model_a", "model_b")})
        ds = PairDataset.from_pandas(frame)
        model = BradleyTerry(n_competitors=len(ds.competitors))
        out = model.compute_ratings_and_cis(ds)
        scores = (np.asarray(out["ratings"]) - model.init_rating) / model.alpha
        assert np.isfinite(np.asarray(out["rating_lower"])).all()
        return dict(zip(out["competitors"], scores)), True
    if tool == "statsmodels":
        import statsmodels.api as sm

        a, b, names, a_won = _codes(table)
        N = len(names)
        i, j = np.minimum(a, b), np.maximum(a, b)
        i_won = np.where(a < b, a_won, ~a_won)
        key = i * N + j
        n = np.bincount(key, minlength=N * N)
        y = np.bincount(key, weights=i_won, minlength=N * N)
        pairs = np.flatnonzero(n)
        X = np.zeros((pairs.size, N - 1))  # the last item is the reference (score 0)
        rows = np.arange(pairs.size)
        pi, pj = pairs // N, pairs % N
        X[rows[pi < N - 1], pi[pi < N - 1]] = 1.0
        X[rows[pj < N - 1], pj[pj < N - 1]] = -1.0
        fit = sm.GLM(np.column_stack([y[pairs], n[pairs] - y[pairs]]), X, family=sm.families.Binomial()).fit()
        assert np.isfinite(fit.bse).all()
        return dict(zip(names, np.append(fit.params, 0.0))), True
    import choix

    if tool == "choix ilsr_pairwise_dense":
        a, b, names, a_won = _codes(table)
        N = len(names)
        w, l = np.where(a_won, a, b), np.where(a_won, b, a)
        wins = np.bincount(w * N + l, minlength=N * N).reshape(N, N).astype(float)
        return dict(zip(names, choix.ilsr_pairwise_dense(wins))), False
    w, l, names = _winner_loser(table)
    data = np.column_stack([w, l])
    fn = choix.ilsr_pairwise if tool == "choix ilsr_pairwise" else choix.opt_pairwise
    return dict(zip(names, fn(len(names), data))), False


def child(tool: str, path: str, out: str) -> dict:
    """Run ``tool`` on the table of ``path`` in this (fresh) process; its scores go to the JSON file ``out``."""
    import gc
    import importlib

    import pandas as pd

    from bench_ingest import mem_gb, peak_reset

    table = pd.read_parquet(path)
    for module in IMPORTS[tool]:  # imports are a fixed cost: outside the clock, for every tool
        importlib.import_module(module)
    gc.collect()
    base = mem_gb("VmRSS")
    peak_reset()
    t0 = time.perf_counter()
    scores, se = run_tool(tool, table, path)
    wall = time.perf_counter() - t0
    Path(out).write_text(json.dumps({str(k): float(v) for k, v in scores.items()}))
    return {"wall": wall, "peak": mem_gb("VmHWM"), "peak_above": mem_gb("VmHWM") - base, "se": se,
            "load": os.getloadavg()[0]}


# ------------------------------------------------------------ parent side
def run_child(tool: str, path: Path, timeout: float, out: Path) -> dict:
    """Run :func:`child` in a fresh interpreter with a time limit."""
    code = (f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import bench_peers as b; "
            f"print(json.dumps(b.child({tool!r}, {str(path)!r}, {str(out)!r})))")
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:.0f} s"}
    if res.returncode:
        last = (res.stderr.strip().splitlines() or ["killed"])[-1]
        return {"error": "not installed" if "ModuleNotFoundError" in last else last[:120]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def centered(scores: dict[str, float]) -> dict[str, float]:
    """Scores minus their mean."""
    m = statistics.fmean(scores.values())
    return {k: v - m for k, v in scores.items()}


def main() -> None:
    """Write the tables and run every tool on them."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="2000000:300,10000000:1000", help="ROWS:N pairs")
    p.add_argument("--tools", default=",".join(TOOLS), help="comma-separated, from: " + ", ".join(TOOLS))
    p.add_argument("--repeat", type=int, default=3, help="runs per tool (median time, largest peak)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run before a tool is given up")
    p.add_argument("--statsmodels-max-gb", type=float, default=2.0, help="largest dense GLM design statsmodels is given")
    p.add_argument("--dir", default=None, help="folder for the files (default: a temporary one)")
    args = p.parse_args()
    tools = [t for t in args.tools.split(",") if t]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        for size in filter(None, args.sizes.split(",")):
            rows, N = (int(x) for x in size.split(":"))
            path = folder / f"human_{N}_{rows}.parquet"
            subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(HERE)!r}); import bench_ingest as b; "
                            f"b.long_table({N}, {rows}, K=0).to_parquet({str(path)!r}, index=False)"], check=True)
            print(f"\nhuman-only BTL, N = {N:,} items, {rows:,} comparisons (load {os.getloadavg()[0]:.2f})", flush=True)
            print("| tool | standard errors | time | peak RSS (above the table) | time / pydial | max abs score difference |")
            print("|---|---|---|---|---|---|")
            ref: dict[str, float] | None = None
            ref_time = None
            for tool in tools:
                design_gb = N * (N - 1) / 2 * (N - 1) * 8 / 1e9
                if tool == "statsmodels" and design_gb > args.statsmodels_max_gb:
                    print(f"| {tool} | Fisher | not run: the dense GLM design would take {design_gb:.1f} GB | | | |")
                    continue
                runs = []
                for _ in range(args.repeat):
                    out = folder / "scores.json"
                    r = run_child(tool, path, args.timeout, out)
                    if "error" in r:
                        break
                    r["scores"] = centered(json.loads(out.read_text()))
                    runs.append(r)
                if not runs:
                    print(f"| {tool} | {STANDARD_ERRORS.get(tool, 'none')} | {r['error']} | | | |", flush=True)
                    continue
                wall = statistics.median(x["wall"] for x in runs)
                peak = max(x["peak"] for x in runs)
                above = max(x["peak_above"] for x in runs)
                load = max(x["load"] for x in runs)
                scores = runs[0]["scores"]
                if ref is None and tool.startswith("pydial"):
                    ref, ref_time = scores, wall
                diff = max(abs(scores[k] - ref[k]) for k in ref) if ref is not None else float("nan")
                ratio = wall / ref_time if ref_time else float("nan")
                se = STANDARD_ERRORS.get(tool, "none") if runs[0]["se"] else "none"
                print(f"| {tool} | {se} | {wall:.2f} s (load {load:.1f}) | {peak:.2f} GB (+{above:.2f} GB) | "
                      f"{ratio:.2f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
