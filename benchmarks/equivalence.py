"""Before/after equivalence of every estimator, covariance type, outcome family and engine.

A refactor must not move a number.  This script fits every method of :func:`pydial.fit` x
every ``cov_type`` x every outcome family x both engines on four data sets (the bundled
synthetic example, a simulated binary panel with a response covariate, and simulated tie data
for Davidson and Rao-Kupper), and records every numeric output of each result: scores and
their covariance, position effects, judge scores, calibration coefficients, the selected
weight and the GACV path, tie parameters, covariate effects, the calibration test,
log-likelihoods and information criteria.

    python benchmarks/equivalence.py data DIR            # write the data sets (CSV) once
    python benchmarks/equivalence.py record DIR OUT.pkl   # fit everything with the pydial on sys.path
    python benchmarks/equivalence.py compare A.pkl B.pkl  # largest relative difference per quantity

Run ``record`` once with the old tree first on ``PYTHONPATH`` and once with the new one; the
data sets are read from the same CSV files, so both see identical input.
"""

from __future__ import annotations

import pickle
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

COV_TYPES = ("fisher", "binomial", "cell", "record")
METHODS = ("judges", "human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc")
VARIANTS = [(m, {}) for m in METHODS] + [
    ("human", {"penalty": "firth"}), ("dial-ada", {"penalty": "firth"}), ("judges", {"penalty": "firth"}),
    ("dial-ada", {"rank": 2}), ("dial-anc", {"calibration": "W"}), ("dial-ada", {"lambda_": [0.5, 2.0]}),
]
"""Each method with its defaults, then the Firth penalty, a second rank, the calibration basis W and a given grid."""
SKIP = {"data", "fitter", "chart", "llm_chart", "structure", "linearization", "spec", "path", "fit_warnings",
        "problems", "excluded", "status", "verdict", "summary", "items", "judges", "method", "engine"}


def write_data(out: Path) -> None:
    """The four data sets as CSV files (simulated once, so every tree reads the same rows)."""
    import pydial

    out.mkdir(parents=True, exist_ok=True)
    pd.read_csv(pydial.datasets.path("synthetic")).to_csv(out / "synthetic.csv", index=False)
    sim = pydial.simulate(N=8, K=3, rank=1, n_llm=6000, n_human=400, covariates=["length"], beta=0.3, seed=3)
    sim.frame.to_csv(out / "binary_cov.csv", index=False)
    for fam in ("davidson", "rao-kupper"):
        sim = pydial.simulate(N=7, K=3, rank=1, n_llm=6000, n_human=500, tie_rate=0.25, ties=fam, seed=5)
        sim.frame.to_csv(out / f"ties_{fam}.csv", index=False)


def _numbers(value: object) -> np.ndarray | None:
    """The numbers of a table, array or scalar (None if it holds none)."""
    if isinstance(value, (pd.DataFrame, pd.Series)):
        num = value.select_dtypes("number") if isinstance(value, pd.DataFrame) else value
        if isinstance(num, pd.Series) and not pd.api.types.is_numeric_dtype(num):
            return None
        return np.asarray(num, dtype=float).ravel()
    if isinstance(value, (bool, np.bool_, int, float, np.integer, np.floating)):
        return np.array([float(value)])
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.astype(float).ravel()
    return None


def outputs(res: object) -> dict[str, np.ndarray]:
    """Every numeric public output of a fit result, by name."""
    out: dict[str, np.ndarray] = {}
    for name in dir(res):
        if name.startswith("_") or name in SKIP:
            continue
        try:
            value = getattr(res, name)
        except Exception:  # noqa: BLE001 - a property that does not apply to this method
            continue
        if callable(value):
            continue
        if name == "calibration_test" and value is not None:
            for f in ("statistic", "df", "pvalue"):
                if hasattr(value, f):
                    out[f"calibration_test.{f}"] = np.array([float(getattr(value, f))])
            continue
        x = _numbers(value)
        if x is not None:
            out[name] = x
    for name in ("conf_int", "position_test"):
        try:
            x = _numbers(getattr(res, name)())
        except Exception:  # noqa: BLE001
            continue
        if x is not None:
            out[f"{name}()"] = x
    return out


def record(data_dir: Path, out: Path, engines: tuple[str, ...] = ("numpy", "stan")) -> None:
    """Fit every case with the pydial on sys.path and pickle {case: outputs or error text}."""
    import pydial

    print("pydial from", pydial.__file__, file=sys.stderr)
    cases: dict[str, object] = {}
    sets = {p.stem: pydial.Comparisons.from_frame(pd.read_csv(p)) for p in sorted(data_dir.glob("*.csv"))}
    t0 = time.time()
    for set_name, data in sets.items():
        families = [None] if not set_name.startswith("ties") else ["davidson", "rao-kupper"]
        for ties in families:
            for engine in engines:
                for method, extra in VARIANTS:
                    key = f"{set_name}|{ties}|{engine}|{method}" + "".join(f"|{k}={v}" for k, v in extra.items())
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            res = pydial.fit(data, method, ties=ties, engine=engine, seed=1, **extra)
                            for cov_type in COV_TYPES:
                                try:
                                    cases[f"{key}|{cov_type}"] = outputs(res.with_cov(cov_type=cov_type))
                                except Exception as exc:  # noqa: BLE001
                                    cases[f"{key}|{cov_type}"] = f"{type(exc).__name__}: {exc}"
                    except Exception as exc:  # noqa: BLE001
                        cases[f"{key}|*"] = f"{type(exc).__name__}: {exc}"
                    print(f"[{time.time() - t0:6.1f} s] {key}", file=sys.stderr)
    with open(out, "wb") as fh:
        pickle.dump(cases, fh)


def compare(a_path: Path, b_path: Path, tol: float = 1e-10) -> int:
    """Print the largest relative difference per case; exit 1 if any exceeds ``tol``."""
    a, b = (pickle.load(open(p, "rb")) for p in (a_path, b_path))
    worst, bad = 0.0, 0
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, str) or isinstance(y, str) or x is None or y is None:
            same = (x if isinstance(x, str) else "ok") == (y if isinstance(y, str) else "ok")
            if not same or x is None or y is None:
                print(f"{key}: {'missing' if x is None else str(x)[:80]!s} | {'missing' if y is None else str(y)[:80]!s}")
                bad += not (isinstance(x, str) and isinstance(y, str))
            continue
        for name in sorted(set(x) | set(y)):
            if name not in x or name not in y:
                print(f"{key}: {name} only in {'A' if name in x else 'B'}")
                continue
            u, v = x[name], y[name]
            if u.shape != v.shape:
                print(f"{key}: {name} shape {u.shape} vs {v.shape}")
                bad += 1
                continue
            same = (u == v) | (np.isnan(u) & np.isnan(v))
            with np.errstate(invalid="ignore"):
                d = np.where(same, 0.0, np.abs(u - v) / np.maximum(1.0, np.abs(u)))
            m = float(np.nanmax(d, initial=0.0)) if d.size else 0.0
            if np.isnan(d).any():
                m = np.inf
            worst = max(worst, m)
            if m > tol:
                bad += 1
                print(f"{key}: {name} differs by {m:.2e}")
    print(f"{len(set(a) & set(b))} cases in both; largest relative difference {worst:.2e}; {bad} above {tol:g}")
    return 1 if bad else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "data":
        write_data(Path(sys.argv[2]))
    elif cmd == "record":
        engines = tuple(sys.argv[4].split(",")) if len(sys.argv) > 4 else ("numpy", "stan")
        record(Path(sys.argv[2]), Path(sys.argv[3]), engines)
    elif cmd == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) > 4 else 1e-10))
    else:
        sys.exit(__doc__)
