"""Stan on both backends beside the numpy engine: compile, NUTS and optimize times in one run.

Usage::

    python benchmarks/bench_stan.py [--chains 4] [--draws 1000] [--backends cmdstanpy,httpstan]

For each available backend (CmdStan through cmdstanpy; the Stan of httpstan):

* **compile**: wall time to compile each program, or ``cached`` when it was in
  the cache (delete ``~/.cache/pydial/cmdstan`` / ``~/.cache/httpstan`` for a
  cold run);
* **NUTS**: :func:`pydial.posterior` on the bundled Arena data (structured
  model, rank 1, calibration ``mu``: 1,330 cells) with ``chains x draws`` after
  as many warmup iterations;
* **optimize**: the joint fit at ``lambda = n_LLM / n_H`` and the staged DIAL-Anc
  fit on the Arena data through Stan's optimizer (``stan_fit_point``), beside the
  numpy engine (Newton on exact Hessians), with the largest score difference.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--backends", default="cmdstanpy,httpstan")
    args = ap.parse_args()

    import pydial
    from pydial.estimators import staged_fit
    from pydial.fitting import fit_structured, initial_theta
    from pydial.model import Chart
    from pydial.stan import PROGRAMS, compile_model, posterior, stan_fit_point
    from pydial.stan.backend import BACKENDS, backend_available

    data = pydial.datasets.arena()
    lam = data.n_llm / data.n_human
    ch = Chart(data.N, data.K, 1, "mu", True)
    th0 = initial_theta(data, ch)
    t0 = time.perf_counter()
    f_np = fit_structured(data, ch, lam, th0)
    t_joint_np = time.perf_counter() - t0
    t0 = time.perf_counter()
    sf = staged_fit(data, 1, "mu")
    t_staged_np = time.perf_counter() - t0
    s_joint, s_staged = ch.scores(f_np.theta), sf.chart.scores(sf.theta)

    have = {b: backend_available(b) for b in BACKENDS}
    rows = [{"backend": "numpy", "step": "optimize joint", "seconds": t_joint_np, "max|ds| vs numpy": 0.0},
            {"backend": "numpy", "step": "optimize staged", "seconds": t_staged_np, "max|ds| vs numpy": 0.0}]
    for be in args.backends.split(","):
        if not have.get(be):
            print(f"backend {be}: not available, skipped")
            continue
        for name in PROGRAMS:
            t0 = time.perf_counter()
            m = compile_model(name, backend=be)
            rows.append({"backend": be, "step": f"compile {name}",
                         "seconds": m.compile_seconds if not m.cached else time.perf_counter() - t0,
                         "note": "cached" if m.cached else "compiled"})
        dial = compile_model("dial", backend=be)
        t0 = time.perf_counter()
        sp = stan_fit_point(data, "joint", rank=1, calibration="mu", lam=lam, init=th0, model=dial)
        rows.append({"backend": be, "step": "optimize joint", "seconds": time.perf_counter() - t0,
                     "max|ds| vs numpy": float(np.max(np.abs(sp.scores - s_joint))), "note": f"converged={sp.converged}"})
        t0 = time.perf_counter()
        sp = stan_fit_point(data, "staged", rank=1, calibration="mu", model=dial)
        rows.append({"backend": be, "step": "optimize staged", "seconds": time.perf_counter() - t0,
                     "max|ds| vs numpy": float(np.max(np.abs(sp.scores - s_staged))), "note": f"converged={sp.converged}"})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            idata = posterior(data, rank=1, calibration="mu", chains=args.chains, draws=args.draws,
                              warmup=args.draws, seed=1, backend=be)
        rows.append({"backend": be, "step": f"NUTS {args.chains}x{args.draws} (Arena, {idata.log_likelihood.sizes['cell']} cells)",
                     "seconds": time.perf_counter() - t0, "note": f"sampler {idata.attrs['sampling_seconds']:.1f} s"})
    table = pd.DataFrame(rows).set_index(["backend", "step"])
    with pd.option_context("display.width", 160, "display.float_format", "{:.3g}".format):
        print(table.to_string())


if __name__ == "__main__":
    main()
