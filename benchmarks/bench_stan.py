"""Numpy engine vs Stan optimizer on the same DIAL fits: same optimum, relative speed.

Usage::

    python benchmarks/bench_stan.py [--repeats 3] [--backend httpstan]

For each configuration the weighted joint fit (eq. weighted-joint-estimator at
lambda = n_LLM / n_H) and the staged DIAL-Anc fit are run by the numpy engine
(``pydial.fit`` Newton on exact Hessians) and by Stan (``stan/dial.stan``
through :func:`pydial.stan.stan_fit_point`; L-BFGS on Stan's exact gradients),
both from the same deterministic start.  The table reports the best-of-
``repeats`` wall time of each, their ratio, and the largest difference of the
calibrated scores.  Compilation is excluded (reported once at the top).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd


def best_time(fn, repeats: int):
    out, best = None, np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default=None, choices=[None, "httpstan", "cmdstanpy"])
    args = ap.parse_args()

    from pydial.estimators import staged_fit
    from pydial.fit import fit_structured, initial_theta
    from pydial.model import Chart
    from pydial.simulate import simulate
    from pydial.stan import compile_model, stan_fit_point

    t0 = time.perf_counter()
    model = compile_model("dial", backend=args.backend)
    print(f"backend {model.backend}; dial.stan ready in {time.perf_counter() - t0:.1f} s "
          f"({'cached' if model.cached else f'compiled in {model.compile_seconds:.1f} s'})\n")

    configs = [
        dict(N=10, K=4, r=1, n_llm=20_000, n_human=800),
        dict(N=20, K=6, r=2, n_llm=60_000, n_human=2_000),
        dict(N=40, K=10, r=2, n_llm=200_000, n_human=4_000),
    ]
    rows = []
    for cfg in configs:
        data = simulate(**cfg, rng=1).comparisons
        lam = data.n_llm / data.n_human
        cells = len(data.llm) + len(data.human)
        for method in ("joint", "staged"):
            if method == "joint":
                ch = Chart(data.N, data.K, cfg["r"], "mu", True)
                th0 = initial_theta(data, ch)
                f_np, t_np = best_time(lambda: fit_structured(data, ch, lam, th0), args.repeats)
                s_np = ch.scores(f_np.theta)
                f_st, t_st = best_time(lambda: stan_fit_point(data, "joint", rank=cfg["r"], lam=lam, init=th0,
                                                              model=model), args.repeats)
            else:
                f_np, t_np = best_time(lambda: staged_fit(data, cfg["r"], "mu"), args.repeats)
                s_np = f_np.chart.scores(f_np.theta)
                chL = Chart(data.N, data.K, cfg["r"], None, True)
                th0 = initial_theta(data, chL)
                f_st, t_st = best_time(lambda: stan_fit_point(data, "staged", rank=cfg["r"], init=th0, model=model),
                                       args.repeats)
            rows.append({
                "N": data.N, "K": data.K, "r": cfg["r"], "cells": cells, "fit": method, "dim": f_st.chart.dim,
                "numpy_s": t_np, "stan_s": t_st, "stan/numpy": t_st / t_np,
                "max|ds|": float(np.max(np.abs(f_st.scores - s_np))), "stan_converged": f_st.converged,
            })
    tab = pd.DataFrame(rows)
    with pd.option_context("display.width", 140, "display.float_format", "{:.3g}".format):
        print(tab.to_string(index=False))


if __name__ == "__main__":
    main()
