"""Posteriors at leaderboard size: wall time and peak memory of each algorithm, one process each.

Usage::

    python benchmarks/bench_posterior_size.py [--data large] [--algorithms laplace,pathfinder,nuts]
                                              [--chains 2] [--draws 300] [--backend cmdstanpy]

For each algorithm a fresh Python process runs :func:`pydial.posterior` of the structured model (rank 1,
calibration ``mu``; ``draws`` draws, NUTS with ``chains`` chains and as many warmup iterations) on

* ``large``: ``simulate(N=100, K=10, rank=1, n_llm=1,000,000, n_human=10,000)`` (about 99,000 cells);
* ``wide``: ``simulate(N=300, K=30, rank=1, n_llm=50,000, n_human=5,000)``;

with the pointwise output left to ``log_lik="auto"`` (per cell when it fits in 2 GB, else left out with a
warning) and prints the wall time (data simulated beforehand, program compiled beforehand: the cache is
warmed by a first short run), the process's peak resident memory (``ru_maxrss``, the simulated data
included), the groups written, and the outcome: the posterior, or the pydial error that refused it (a
Pathfinder whose importance ratios have a Pareto k above 0.7 is refused, not returned collapsed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

DATA = {
    "large": dict(N=100, K=10, rank=1, n_llm=1_000_000, n_human=10_000, seed=1),
    "wide": dict(N=300, K=30, rank=1, n_llm=50_000, n_human=5_000, seed=1),
}


def run_one(data: str, algorithm: str, chains: int, draws: int, backend: str) -> dict:
    """Run one posterior in this process; return its figures (wall, peak memory, groups, outcome)."""
    import resource
    import time
    import warnings

    import pydial
    from pydial.exceptions import DialError
    from pydial.stan.idata import group_names

    comparisons = pydial.simulate(**DATA[data]).comparisons
    row: dict = {"data": data, "algorithm": algorithm}
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            idata = pydial.posterior(comparisons, rank=1, calibration="mu", chains=chains, draws=draws, warmup=draws,
                                     seed=1, algorithm=algorithm, backend=backend)
        row.update(outcome="ok", groups=sorted(group_names(idata)),
                   warnings=sorted({type(w.message).__name__ for w in caught if issubclass(w.category, UserWarning)}))
    except DialError as e:
        row.update(outcome=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
    row["seconds"] = round(time.perf_counter() - t0, 2)
    row["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3)
    return row


def main() -> None:
    """Run every algorithm in its own process and print one JSON line each."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="large", choices=sorted(DATA))
    ap.add_argument("--algorithms", default="laplace,pathfinder,nuts")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--backend", default="cmdstanpy")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one algorithm in this process
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.data, args.one, args.chains, args.draws, args.backend)))
        return
    import pydial
    from pydial.stan import compile_model

    compile_model("dial_sample", backend=args.backend)  # compiled once, outside the timings
    print(f"pydial {pydial.__version__}; data {args.data}: {DATA[args.data]}", flush=True)
    for algorithm in args.algorithms.split(","):
        out = subprocess.run([sys.executable, __file__, "--data", args.data, "--chains", str(args.chains), "--draws",
                              str(args.draws), "--backend", args.backend, "--one", algorithm],
                             capture_output=True, text=True)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        print(lines[-1] if lines else json.dumps({"algorithm": algorithm, "outcome": f"failed: {out.stderr[-400:]}"}),
              flush=True)


if __name__ == "__main__":
    main()
