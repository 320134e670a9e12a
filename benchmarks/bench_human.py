"""The human-only fit against a plain Newton Bradley-Terry fit, checks and standard errors included.

Run with ``python benchmarks/bench_human.py [--repeats 7]``.

For each size of :data:`SIZES` (LLM judgments included: a human-only fit must not pay for them),
``pydial.simulate`` gives the comparisons; then the median wall time (warm: the data object built once, as a user fits it) of

* ``pydial.fit(data, "human")``: design check, Newton on exact derivatives, the sandwich/Fisher
  standard errors, the labelled tables and the fit statistics;
* a plain Newton BTL in numpy: pair counts by ``np.bincount``, the exact gradient and Hessian of
  the Bradley-Terry log-likelihood with the last score fixed at 0 (then centred), iterated to a
  gradient norm of 1e-10, and the standard errors of the centred scores from the inverse Hessian;

and prints the ratio (of the warm fit; the first fit on a new data object, which builds its caches, is
shown too) and the largest score difference between the two (they fit the same model).
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import numpy as np

import pydial
from bench_core import median_time  # the benchmarks' median of repeated wall times

SIZES = (dict(N=20, K=21, n_llm=300_000, n_human=2_000), dict(N=100, K=30, n_llm=2_000_000, n_human=20_000),
         dict(N=300, K=30, n_llm=2_000_000, n_human=20_000))
"""The paper-sized benchmark (bench_core.py) and the small and medium sizes of bench_scale.py."""


def plain_btl(i: np.ndarray, j: np.ndarray, y: np.ndarray, N: int) -> tuple[np.ndarray, np.ndarray]:
    """Newton's method on the BTL log-likelihood of ``y`` (1 if ``i`` beat ``j``); centred scores and SEs."""
    key = i * N + j
    n = np.bincount(key, minlength=N * N).reshape(N, N)
    w = np.bincount(key, weights=y, minlength=N * N).reshape(N, N)
    nn, ww = n + n.T, w + (n - w).T  # comparisons of (a, b) either way; wins of a over b
    a, b = np.nonzero(np.triu(nn, 1))
    m, k = nn[a, b], ww[a, b]
    s = np.zeros(N)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(s[a] - s[b])))
        r = k - m * p
        g = np.bincount(a, r, N) - np.bincount(b, r, N)
        v = m * p * (1 - p)
        H = np.zeros((N, N))
        np.add.at(H, (a, a), v)
        np.add.at(H, (b, b), v)
        np.add.at(H, (a, b), -v)
        np.add.at(H, (b, a), -v)
        step = np.linalg.solve(H[:-1, :-1], g[:-1])
        s[:-1] += step
        if np.abs(g).max() < 1e-10:
            break
    C = np.eye(N) - 1.0 / N  # centring: s_c = C s, with s_N = 0 fixed
    V = np.zeros((N, N))
    V[:-1, :-1] = np.linalg.inv(H[:-1, :-1])
    return C @ s, np.sqrt(np.diag(C @ V @ C.T))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print(f"{'N':>5} {'n_human':>8} {'first s':>9} {'pydial s':>9} {'plain s':>9} {'ratio':>6} {'max |ds|':>9} {'max |dse|':>9}")
    for size in SIZES:
        N, n_human = size["N"], size["n_human"]
        sim = pydial.simulate(**size, seed=1)
        data, frame = sim.comparisons, sim.frame
        hum = frame[frame["judge"] == "human"]
        pos = {name: x for x, name in enumerate(data.items)}
        i = hum["item_a"].map(pos).to_numpy()
        j = hum["item_b"].map(pos).to_numpy()
        y = (hum["winner"] == "a").to_numpy(float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fresh = [pydial.Comparisons.from_frame(frame) for _ in range(3)]
            t_first = statistics.median(median_time(lambda: pydial.fit(d, "human"), 1)[0] for d in fresh)
            pydial.fit(data, "human")  # the first fit builds the data's caches, as any first fit does
            t_fit, res = median_time(lambda: pydial.fit(data, "human"), args.repeats)
        t_plain, (s, se) = median_time(lambda: plain_btl(i, j, y, N), args.repeats)
        est = res.scores["score"].to_numpy()
        diff = float(np.abs((est - est.mean()) - s).max())
        dse = float(np.abs(res.scores["se"].to_numpy() - se).max())
        print(f"{N:>5} {n_human:>8} {t_first:>9.4f} {t_fit:>9.4f} {t_plain:>9.4f} {t_fit / t_plain:>6.1f} {diff:>9.1e} {dse:>9.1e}")


if __name__ == "__main__":
    main()
