"""Time and peak memory of the fits on leaderboard-size data.

For each size ``pydial.simulate(N, K, rank=1, n_llm, n_human, seed=1)`` is drawn once,
in its own process, and aggregated to cell counts (the simulated long table is
summed per ``(judge, item_a, item_b, first)``), which are written to a Parquet file.
Every method then runs in a fresh process that reads the counts
(:meth:`pydial.Comparisons.from_counts`; the fits and the default cell-clustered
covariance equal those on the rows) and reports

* the wall time of the call (``check_design`` alone, or :func:`pydial.fit` with its
  design checks, LLM-only fit, weight path with GACV, cell sandwich, judge
  diagnostics and calibration LRT);
* the peak resident memory of the whole process (``ru_maxrss``: interpreter,
  imports, counts and fit) and, on Linux, the resident memory after reading the
  counts and the peak during the call alone (the high-water mark is reset before
  it through ``/proc/self/clear_refs``);
* the share of the fit's time in each stage (from ``cProfile`` cumulative times;
  the LLM-only fit without its start values);
* the wall time of the whole process (interpreter start, imports, reading the counts, the
  call and exit), as a user's script would take.  ``--no-profile`` runs the call without
  ``cProfile`` (no stage shares), for the whole-process figure without the profiler's cost.

The simulation process reports its own time and peak memory (simulating 10M
comparisons builds a 10M-row table).

``--covariates`` runs the response-covariate case instead: the medium size with two
comparison covariates (``simulate(..., covariates=["length", "lists"], beta=...)``, judges
biased towards length and people not), written as the long table with its per-side columns;
every method is timed twice on the same judgments, read with ``Comparisons.from_frame(df,
covariates=[...])`` (a cell per distinct covariate value: about one per judgment) and without
(the aggregated cells), and the ratios of time and peak memory during the call are printed.
``--load`` also writes a long table (``--load-size``, default the N=1000 one) as CSV, gzip CSV
and Parquet and measures :func:`pydial.read_comparisons` against ``pandas.read_csv`` of the whole file.

The machine is shared: the 1-minute load average is printed next to every figure, and so is the number
of threads of the per-cell passes (``PYDIAL_NUM_THREADS=1`` times them on one core).

Usage::

    python benchmarks/bench_scale.py [--sizes small,medium,large] [--methods ...] [--load] [--no-profile]
    python benchmarks/bench_scale.py --covariates [--methods dial-ada]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SIZES = {
    "small": dict(N=100, K=30, n_llm=2_000_000, n_human=20_000),
    "medium": dict(N=300, K=30, n_llm=2_000_000, n_human=20_000),
    "large": dict(N=1000, K=50, n_llm=10_000_000, n_human=100_000),
}
METHODS = ("check_design", "human", "judges", "dial-anc", "dial-ada")
COVARIATES = ("length", "lists")
COVARIATE_SIZE = "medium"
"""The covariate case: N=300, K=30, 2M LLM and 20k human judgments with two covariates."""
STAGES = {
    "design checks": "check_design",
    "start values (judge-wise fits)": "initial_theta",
    "LLM-only fit": "fit_structured (LLM-only)",
    "weight path + GACV": "finite_candidate",
    "human endpoint": "family_human_candidate",
    "linearizations (scores)": ("staged_influence", "finite_influence", "glm_influence", "pooled_linearization"),
    "judge linearizations (b, gamma)": ("judge_effect_linearizations",),
    "covariances (every meat of the fit)": ("covariances",),
}


def _rss_gb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux


def _load() -> float:
    return os.getloadavg()[0]


def _status_gb(field: str) -> float:
    """Return a memory field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in GB; NaN elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return float("nan")


def _reset_peak() -> None:
    """Reset the resident-memory high-water mark ``VmHWM`` (Linux; ignored elsewhere)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


# ------------------------------------------------------------- child tasks
def task_simulate(size: str, out: str) -> dict:
    """Simulate one size, aggregate it to cell counts and write them to Parquet."""
    import pandas as pd

    import pydial

    t0 = time.perf_counter()
    sim = pydial.simulate(rank=1, seed=1, **SIZES[size])
    t_sim = time.perf_counter() - t0
    f = sim.frame
    t0 = time.perf_counter()
    cnt = (f.assign(wins_a=f["winner"].eq("a").astype("int64"), wins_b=f["winner"].eq("b").astype("int64"), ties=0)
           .groupby(["judge", "item_a", "item_b", "first"], as_index=False, observed=True)[["wins_a", "wins_b", "ties"]].sum())
    cnt.loc[cnt["judge"] == "human", "first"] = ""
    t_agg = time.perf_counter() - t0
    pd.DataFrame(cnt).to_parquet(out)
    return dict(simulate_s=t_sim, aggregate_s=t_agg, rows=len(f), count_rows=len(cnt), peak_gb=_rss_gb(), load=_load())


def task_simulate_covariates(out: str) -> dict:
    """Simulate the covariate case (judges biased towards length, people not) and write its long table to Parquet."""
    import numpy as np

    import pydial

    cfg = SIZES[COVARIATE_SIZE]
    beta = np.zeros((cfg["K"] + 1, len(COVARIATES)))
    beta[:-1, 0] = np.linspace(0.0, 0.6, cfg["K"])  # length bias of the judges, none for the people
    beta[:-1, 1] = 0.1
    t0 = time.perf_counter()
    f = pydial.simulate(rank=1, seed=1, covariates=list(COVARIATES), beta=beta, **cfg).frame
    t_sim = time.perf_counter() - t0
    f.to_parquet(out)
    return dict(simulate_s=t_sim, aggregate_s=0.0, rows=len(f), count_rows=len(f), peak_gb=_rss_gb(), load=_load())


def task_fit(counts: str, method: str, covariates: str = "") -> dict:
    """Read the counts and time one method (or ``check_design``) with its stage shares and memory.

    ``covariates`` ("a,b"): ``counts`` is a long table read with those covariates ("-": the same
    long table without them).
    """
    import cProfile
    import pstats

    import pandas as pd

    import pydial

    t0 = time.perf_counter()
    if covariates:
        cov = [] if covariates == "-" else covariates.split(",")
        data = pydial.Comparisons.from_frame(pd.read_parquet(counts), covariates=cov or None)
    else:
        data = pydial.Comparisons.from_counts(pd.read_parquet(counts))
    t_read = time.perf_counter() - t0
    read_gb = _status_gb("VmRSS")
    _reset_peak()
    prof = cProfile.Profile()
    profile = os.environ.get("PYDIAL_BENCH_PROFILE", "1") == "1"
    t0 = time.perf_counter()
    if profile:
        prof.enable()
    if method == "check_design":
        pydial.check_design(data, rank=1, method="dial-ada").raise_if_failed()
    else:
        res = pydial.fit(data, method)
    prof.disable()
    t_fit = time.perf_counter() - t0
    fit_gb = _status_gb("VmHWM")
    st = pstats.Stats(prof).stats if profile else {}
    cum: dict[str, float] = {}
    for (_, _, fn), (_, _, _, ct, _) in st.items():
        cum[fn] = max(cum.get(fn, 0.0), ct)
    cum["fit_structured (LLM-only)"] = cum.get("llm_only_fit", 0.0) - cum.get("initial_theta", 0.0)
    stages = {}
    for label, names in STAGES.items():
        names = (names,) if isinstance(names, str) else names
        stages[label] = sum(cum.get(n, 0.0) for n in names)
    from pydial.model.blocks import cell_threads

    out = dict(method=method, read_counts_s=t_read, time_s=t_fit, peak_gb=_rss_gb(), read_gb=read_gb, fit_peak_gb=fit_gb,
               load=_load(), threads=cell_threads(),
               cells=len(data.llm), human_cells=len(data.human), stages=stages)
    if method != "check_design":
        out["converged"] = bool(res.converged)
        out["lambda"] = float(res.lambda_)
    return out


def task_write(counts_dir: str, size: str) -> dict:
    """Write the simulated long table as CSV, gzip CSV and Parquet (chunk by chunk)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import pydial

    f = pydial.simulate(rank=1, seed=1, **SIZES[size]).frame
    paths = {k: os.path.join(counts_dir, f"long{k}") for k in (".csv", ".csv.gz", ".parquet")}
    step = 1_000_000
    for k in (".csv", ".csv.gz"):
        for lo in range(0, len(f), step):
            f.iloc[lo:lo + step].to_csv(paths[k], mode="w" if lo == 0 else "a", header=lo == 0, index=False,
                                        compression="gzip" if k.endswith("gz") else None)
    writer = None
    for lo in range(0, len(f), step):
        tab = pa.Table.from_pandas(f.iloc[lo:lo + step].astype(str), preserve_index=False)
        writer = writer or pq.ParquetWriter(paths[".parquet"], tab.schema)
        writer.write_table(tab)
    writer.close()
    return {k: os.path.getsize(p) / 1e9 for k, p in paths.items()}


def task_read(path: str, how: str) -> dict:
    """Time one reader on a long-table file."""
    import pandas as pd

    import pydial

    t0 = time.perf_counter()
    if how == "pandas.read_csv (whole frame)":
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
        n = len(df)
    else:
        n = pydial.read_comparisons(path).n_llm
    return dict(time_s=time.perf_counter() - t0, peak_gb=_rss_gb(), load=_load(), n=n)


# ------------------------------------------------------------------ driver
def covariate_case(methods: str) -> None:
    """Time every method with and without the two covariates on the same judgments; print the ratios."""
    cfg = SIZES[COVARIATE_SIZE]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "long.parquet")
        sim = _child("simulate-covariates", path)
        print(f"\n== covariates {', '.join(COVARIATES)}: N={cfg['N']}, K={cfg['K']}, n_llm={cfg['n_llm']:,}, "
              f"n_human={cfg['n_human']:,}; simulate {sim.get('simulate_s', float('nan')):.1f} s "
              f"{sim.get('error', '')}", flush=True)
        for method in methods.split(","):
            runs = {label: _child("fit", path, method, cov) for label, cov in (("without", "-"),
                                                                             ("with", ",".join(COVARIATES)))}
            for label, r in runs.items():
                if "error" in r:
                    print(f"{method:>13} {label:>7}: FAILED {r['error']}", flush=True)
                    continue
                print(f"{method:>13} {label:>7} covariates: {r['time_s']:7.2f} s, peak during the call "
                      f"{r['fit_peak_gb']:.2f} GB (process {r['peak_gb']:.2f} GB), read {r['read_counts_s']:.1f} s, "
                      f"{r['cells']:,} LLM cells, load {r['load']:.1f}", flush=True)
            if all("error" not in r for r in runs.values()):
                w, wo = runs["with"], runs["without"]
                print(f"{method:>13}   ratio: time {w['time_s'] / wo['time_s']:.2f}x, peak during the call "
                      f"{w['fit_peak_gb'] / wo['fit_peak_gb']:.2f}x", flush=True)


def _child(*args: str) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "process_s": time.perf_counter() - t0}


def main() -> None:
    """Run the tasks, each in a fresh process, and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="small,medium,large")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--load", action="store_true", help="also measure the chunked readers on a long table")
    ap.add_argument("--load-size", default="large", choices=list(SIZES), help="size of that table (default large)")
    ap.add_argument("--covariates", action="store_true", help="run the response-covariate case (see above)")
    ap.add_argument("--no-profile", action="store_true", help="time the fits without cProfile (no stage shares)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.no_profile:
        os.environ["PYDIAL_BENCH_PROFILE"] = "0"
    if args.child:
        kind, *rest = args.child
        fn = {"simulate": task_simulate, "simulate-covariates": task_simulate_covariates, "fit": task_fit,
              "write": task_write, "read": task_read}[kind]
        print(json.dumps(fn(*rest)))
        return
    if args.covariates:
        covariate_case(args.methods if args.methods != ",".join(METHODS) else "human,judges,dial-anc,dial-ada")
        return
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            cfg = SIZES[size]
            counts = os.path.join(tmp, f"{size}.parquet")
            sim = _child("simulate", size, counts)
            print(f"\n== {size}: N={cfg['N']}, K={cfg['K']}, n_llm={cfg['n_llm']:,}, n_human={cfg['n_human']:,}")
            print(f"simulate {sim.get('simulate_s', float('nan')):.1f} s, aggregate to counts "
                  f"{sim.get('aggregate_s', float('nan')):.1f} s, peak {sim.get('peak_gb', float('nan')):.2f} GB "
                  f"(load {sim.get('load', float('nan')):.1f}) {sim.get('error', '')}", flush=True)
            for method in args.methods.split(","):
                r = _child("fit", counts, method)
                if "error" in r:
                    print(f"{method:>13}: FAILED {r['error']}", flush=True)
                    continue
                tot = r["time_s"]
                share = ", ".join(f"{k} {100 * v / tot:.0f}%" for k, v in r["stages"].items() if v > 0.01 * tot)
                print(f"{method:>13}: {tot:7.2f} s (whole process {r['process_s']:.1f} s: reading the counts "
                      f"{r['read_counts_s']:.1f} s), peak RSS {r['peak_gb']:.2f} GB (during the call {r['fit_peak_gb']:.2f} GB, "
                      f"{r['read_gb']:.2f} GB after reading the counts), load {r['load']:.1f}; "
                      f"{r['cells']:,} LLM cells, {r['threads']} thread(s) for the cell passes; stages: {share}", flush=True)
        if args.load:
            sizes = _child("write", tmp, args.load_size)
            rows = SIZES[args.load_size]["n_llm"] + SIZES[args.load_size]["n_human"]
            print(f"\n== reading the {args.load_size} long table ({rows:,} rows): file sizes (GB) {sizes}")
            for k in (".csv", ".csv.gz", ".parquet"):
                r = _child("read", os.path.join(tmp, f"long{k}"), "read_comparisons")
                print(f"read_comparisons {k:>9}: {r.get('time_s', float('nan')):6.1f} s, peak RSS "
                      f"{r.get('peak_gb', float('nan')):.2f} GB, load {r.get('load', float('nan')):.1f} {r.get('error', '')}",
                      flush=True)
            r = _child("read", os.path.join(tmp, "long.csv"), "pandas.read_csv (whole frame)")
            print(f"pandas.read_csv whole frame (.csv): {r.get('time_s', float('nan')):6.1f} s, peak RSS "
                  f"{r.get('peak_gb', float('nan')):.2f} GB, load {r.get('load', float('nan')):.1f}", flush=True)


if __name__ == "__main__":
    main()
