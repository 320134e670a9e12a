"""Core timing benchmark on a Chatbot-Arena-sized problem.

Run with ``python benchmarks/bench_core.py [--repeats 7] [--seed 0]``.

Builds ``pydial.simulate(N=20, K=21, rank=1, n_llm=300_000, n_human=2000)`` (about
8,000 judge-pair-order cells), then reports the median wall time of

* :class:`pydial.Comparisons` construction from the long table,
* ``pydial.fit(..., "dial-anc")`` (design check, structured LLM-only fit,
  calibration and cell-clustered sandwich),
* the human BTL fit ``pydial.fit(..., "human")`` and the bare optimizer
  :func:`pydial.estimation.glm.fit_human_btl`,
* choix's ``ilsr_pairwise`` and ``opt_pairwise`` on the same human comparisons
  (expanded to one ``(winner, loser)`` tuple per comparison),

and checks that the human BTL estimates agree with choix (max abs difference
after centering).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

import pydial
from pydial.studies import metrics
from pydial.estimation.glm import fit_human_btl


def median_time(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def expand_pairs(human) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i, j, n, y in zip(human.i, human.j, human.n, human.y):
        out += [(int(i), int(j))] * int(y) + [(int(j), int(i))] * int(n - y)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    try:
        import choix
    except ImportError:  # pragma: no cover
        choix = None

    t0 = time.perf_counter()
    sim = pydial.simulate(N=20, K=21, rank=1, n_llm=300_000, n_human=2000, seed=args.seed)
    t_sim = time.perf_counter() - t0
    t_data, data = median_time(lambda: pydial.Comparisons.from_frame(sim.frame, items=list(sim.truth.items)),
                               max(1, args.repeats // 2))
    print(f"problem: {data}")
    print(f"simulate: {t_sim:.3f} s (once)")

    pydial.fit(data, "dial-anc")  # warm-up (imports, caches)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", pydial.ConvergenceWarning)
        t_anc, res = median_time(lambda: pydial.fit(data, "dial-anc"), args.repeats)
        t_anc_nc, _ = median_time(lambda: pydial.fit(data, "dial-anc", check=False), args.repeats)
        t_hum, res_h = median_time(lambda: pydial.fit(data, "human"), args.repeats)
        t_btl, btl = median_time(lambda: fit_human_btl(data.human, data.N), args.repeats)
    s_h = res_h.scores["score"].to_numpy()
    rows += [
        ("Comparisons.from_frame", t_data, ""),
        ("pydial.fit dial-anc", t_anc, f"converged={res.converged}, tau={metrics.kendall_tau(res.scores['score'].to_numpy(), sim.truth.s_h):.3f}"),
        ("pydial.fit dial-anc (check=False)", t_anc_nc, ""),
        ("pydial.fit human", t_hum, f"converged={res_h.converged}"),
        ("fit_human_btl (optimizer only)", t_btl, f"max|s - fit(human)| = {np.abs(btl.s - s_h).max():.1e}"),
    ]
    if choix is not None:
        pairs = expand_pairs(data.human)
        t_ilsr, th_ilsr = median_time(lambda: choix.ilsr_pairwise(data.N, pairs, alpha=0.0, tol=1e-10, max_iter=1000),
                                      args.repeats)
        t_opt, th_opt = median_time(lambda: choix.opt_pairwise(data.N, pairs, alpha=0.0, tol=1e-10), args.repeats)
        d_ilsr = np.abs((th_ilsr - th_ilsr.mean()) - s_h).max()
        d_opt = np.abs((th_opt - th_opt.mean()) - s_h).max()
        rows += [
            ("choix.ilsr_pairwise", t_ilsr, f"max|diff| = {d_ilsr:.1e}; fit_human_btl is {t_ilsr / t_btl:.1f}x faster"),
            ("choix.opt_pairwise", t_opt, f"max|diff| = {d_opt:.1e}; fit_human_btl is {t_opt / t_btl:.1f}x faster"),
        ]
    else:
        print("choix is not installed: skipping the comparison")

    w = max(len(r[0]) for r in rows)
    print(f"\nmedian of {args.repeats} runs (seed {args.seed})")
    print(f"{'step':<{w}}  {'time [s]':>9}  notes")
    print(f"{'-' * w}  {'-' * 9}  {'-' * 40}")
    for name, t, note in rows:
        print(f"{name:<{w}}  {t:>9.4f}  {note}")
    ok = t_anc < 1.0
    print(f"\ndial-anc target (< 1 s): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
