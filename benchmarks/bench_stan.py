"""Stan on both backends beside the numpy engine: compile, optimize, NUTS efficiency and the approximations.

Usage::

    python benchmarks/bench_stan.py [--chains 4] [--draws 1000] [--backends cmdstanpy,httpstan]
                                    [--posteriors arena,large,wide]

For each available backend (CmdStan through cmdstanpy; the Stan of httpstan):

* **compile**: wall time to compile each program, or ``cached`` when it was in
  the cache (delete ``~/.cache/pydial/cmdstan`` / ``~/.cache/httpstan`` for a
  cold run);
* **optimize**: the joint fit at ``lambda = n_LLM / n_H`` and the staged DIAL-Anc
  fit on the Arena data through Stan's optimizer (``stan_fit_point``), beside the
  numpy engine (Newton on exact Hessians), with the largest score difference;
* **posteriors** (``--posteriors``): :func:`pydial.posterior` of the structured
  model (rank 1, calibration ``mu``) with ``chains x draws`` after as many warmup
  iterations, on the data sets

  - ``arena``: the bundled Arena data (1,330 cells);
  - ``large``: ``simulate(N=100, K=10, rank=1, n_llm=1,000,000, n_human=10,000)``;
  - ``wide``: ``simulate(N=300, K=30, rank=1, n_llm=50,000, n_human=5,000)``;

  for NUTS: wall time, the sampler's own time, mean leapfrog steps per iteration,
  step size, divergences, the smallest E-BFMI of the chains, and the efficiency per
  second of sampling: the smallest bulk and tail ESS over ``s_H`` and ``b`` divided
  by the sampler's seconds; first NUTS set up as pydial 0.1.0 set it up (``nuts
  (0.1.0)``: the expansion scale fixed at 0.2, the point fits' start, CmdStan's
  diagonal metric adapted from the unit metric; today's programs, so the cheaper
  gradient of the cell likelihood is in both rows; ``--no-before`` leaves it out),
  then as it runs now (the scale matched to the posterior, each chain started at a
  draw of the Laplace approximation, its covariance as CmdStan's dense metric,
  ``metric``).  Then the Laplace approximation
  (pydial's, every backend) and Pathfinder (CmdStan), as many draws as NUTS: wall
  time, and against NUTS the largest difference of posterior means (in NUTS
  posterior sd) and the range of the ratio of 95% interval widths, over ``s_H``
  and ``b`` (a refused Pathfinder: its error).  The pointwise output is left out
  (``log_lik=None``) in every run.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import pandas as pd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--backends", default="cmdstanpy,httpstan")
    ap.add_argument("--posteriors", default="arena", help="comma-separated: arena, large, wide")
    ap.add_argument("--no-before", action="store_true", help="leave out NUTS as pydial 0.1.0 ran it")
    args = ap.parse_args()

    import pydial
    from pydial.estimation.glm import staged_fit
    from pydial.estimation.glm import fit_structured, initial_theta
    from pydial.model.chart import Chart
    from pydial.stan import PROGRAMS, compile_model, stan_fit_point
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
        sp = stan_fit_point(data, "dial-ada", rank=1, calibration="mu", lambda_=lam, init=th0, options={"model": dial})
        rows.append({"backend": be, "step": "optimize joint", "seconds": time.perf_counter() - t0,
                     "max|ds| vs numpy": float(np.max(np.abs(sp.scores - s_joint))), "note": f"converged={sp.converged}"})
        t0 = time.perf_counter()
        sp = stan_fit_point(data, "dial-anc", rank=1, calibration="mu", options={"model": dial})
        rows.append({"backend": be, "step": "optimize staged", "seconds": time.perf_counter() - t0,
                     "max|ds| vs numpy": float(np.max(np.abs(sp.scores - s_staged))), "note": f"converged={sp.converged}"})
        for name in args.posteriors.split(","):
            rows += posterior_rows(name, be, args.chains, args.draws, before=not args.no_before)
    table = pd.DataFrame(rows).set_index(["backend", "step"])
    with pd.option_context("display.width", 200, "display.max_colwidth", 80, "display.float_format", "{:.3g}".format):
        print(table.to_string())


POSTERIOR_DATA = {
    "large": dict(N=100, K=10, rank=1, n_llm=1_000_000, n_human=10_000, seed=1),
    "wide": dict(N=300, K=30, rank=1, n_llm=50_000, n_human=5_000, seed=1),
}


def _draws(idata, var: str) -> np.ndarray:
    from pydial.stan.idata import group_dataset

    x = group_dataset(idata, "posterior")[var].to_numpy()
    return x.reshape(-1, *x.shape[2:])


def _width(x: np.ndarray) -> np.ndarray:
    """Width of the equal-tailed 95% interval of each column of draws."""
    return np.subtract(*np.quantile(x, [0.975, 0.025], axis=0))


def _before_options(data, chains: int, seed: int) -> dict:
    """The NUTS set-up of pydial 0.1.0, for the before/after rows: the fixed expansion scale 0.2, the point fits'
    start (``initial_theta``, jittered) and CmdStan's unit starting metric."""
    import pydial
    from pydial.stan.schema import dial_sample_inits

    d = pydial.stan.standata(data, "dial_sample", rank=1, calibration="mu")
    inits = dial_sample_inits(data, d, chains=chains, rng=np.random.default_rng(seed))
    return {"frame_sd": 0.2, "init": inits}


def posterior_rows(name: str, backend: str, chains: int, draws: int, before: bool = True) -> list[dict]:
    """NUTS efficiency on one data set (and, with ``before``, NUTS as pydial 0.1.0 ran it); the approximations against NUTS."""
    import pydial
    from pydial.stan import posterior
    from pydial.stan.idata import group_dataset

    data = pydial.datasets.arena() if name == "arena" else pydial.simulate(**POSTERIOR_DATA[name]).comparisons
    label = f"{name} (N={data.N}, K={data.K}, {data.n_llm:,} LLM judgments)"
    runs = {}
    rows = []
    algorithms = (["nuts (0.1.0)"] if before else []) + ["nuts", "laplace", "pathfinder"]
    for algorithm in algorithms:
        if algorithm == "pathfinder" and backend != "cmdstanpy":
            continue
        options = {"log_lik": None} | (_before_options(data, chains, 1) if algorithm == "nuts (0.1.0)" else {})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            try:
                idata = posterior(data, rank=1, calibration="mu", chains=chains, draws=draws, warmup=draws, seed=1,
                                  backend=backend, algorithm=algorithm.split()[0], options=options)
            except pydial.ConvergenceError as e:
                rows.append({"backend": backend, "step": f"{algorithm}: {label}", "seconds": time.perf_counter() - t0,
                             "note": str(e).splitlines()[0][:90]})
                continue
        runs[algorithm] = idata
        row = {"backend": backend, "step": f"{algorithm} {chains}x{draws}: {label}", "seconds": time.perf_counter() - t0}
        if algorithm.startswith("nuts"):
            diag = pd.DataFrame(json.loads(idata.attrs["sampler_diagnostics"])).set_index("variable")
            keep = diag[diag.index.str.startswith(("s_H[", "b["))]
            secs = float(idata.attrs["sampling_seconds"])
            ss = group_dataset(idata, "sample_stats")
            energy = ss["energy"].to_numpy()
            bfmi = np.mean(np.diff(energy, axis=1) ** 2, axis=1) / np.var(energy, axis=1)
            row.update({"sampler s": secs, "leapfrog/iter": float(ss["n_steps"].mean()),
                        "step size": float(ss["step_size"].mean()), "divergent": int(ss["diverging"].sum()),
                        "min E-BFMI": float(bfmi.min()), "min bulk ESS": keep["ess_bulk"].min(),
                        "bulk ESS/s": keep["ess_bulk"].min() / secs, "tail ESS/s": keep["ess_tail"].min() / secs,
                        "frame_sd": float(idata.attrs["frame_sd"]), "metric": idata.attrs["metric"]})
        else:
            diffs, ratios = [], []
            for var in ("s_H", "b"):
                ref, x = _draws(runs["nuts"], var), _draws(idata, var)
                diffs.append(np.max(np.abs(x.mean(0) - ref.mean(0)) / ref.std(0, ddof=1)))
                ratios.append(_width(x) / _width(ref))
            r = np.concatenate(ratios)
            row.update({"max|mean diff|/sd vs NUTS": max(diffs), "width ratio vs NUTS": f"{r.min():.2f}-{r.max():.2f}"})
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
