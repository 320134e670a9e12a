"""Time of a covariance on demand (``DialResult.with_cov``) against a refit with that ``cov=``.

One ``pydial.simulate`` draw; for each method, one fit with the default meat, then
every other meat twice: by ``res.with_cov(cov)`` (from the fit's linearization; the
first call, which forms that meat) and by ``pydial.fit(data, method, cov=cov)`` (median
of ``--repeat`` refits; the design checks and the LLM-only fit are cached on the data
after the first fit, so the refits are warm too).  Reports wall times and the peak
resident memory of the process.

Usage::

    python benchmarks/bench_with_cov.py [--N 100] [--K 10] [--n-llm 500000] [--n-human 10000]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
import warnings

import pydial

METHODS = ("human", "judges", "dial-anc", "dial-ada")
MEATS = ("fisher", "binomial", "cell", "record")


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=100)
    ap.add_argument("--K", type=int, default=10)
    ap.add_argument("--n-llm", type=int, default=500_000)
    ap.add_argument("--n-human", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    data = pydial.simulate(N=args.N, K=args.K, rank=1, n_llm=args.n_llm, n_human=args.n_human, seed=1).comparisons
    print(f"N={args.N} K={args.K} n_llm={args.n_llm:,} n_human={args.n_human:,} (load {os.getloadavg()[0]:.1f})")
    print(f"{'method':>9} {'meat':>9} {'with_cov':>10} {'refit':>10} {'ratio':>7}")
    for method in METHODS:
        res = pydial.fit(data, method)
        for cov in MEATS:
            if cov == res.cov_type:
                continue
            t_on, _ = timed(lambda: res.with_cov(cov), 1)  # the first call forms the meat
            t_re, _ = timed(lambda: pydial.fit(data, method, cov_type=cov, check=False), args.repeat)
            print(f"{method:>9} {cov:>9} {t_on:9.3f}s {t_re:9.3f}s {t_re / t_on:6.1f}x")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB")


if __name__ == "__main__":
    main()
