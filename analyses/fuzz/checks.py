"""Checks of results: each raises :class:`~analyses.fuzz.harness.Wrong` naming what failed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .harness import Wrong


def require(cond: Any, what: str) -> None:
    if not bool(cond):
        raise Wrong(what)


def scores_ok(res: Any, level: float = 0.95, centered: bool = True, allow_nan_se: bool = False) -> str:
    """Finite, centered scores; se >= 0; intervals containing the score at the fit's level."""
    sc = res.scores
    require(isinstance(sc, pd.DataFrame) and len(sc) == len(res.items), "scores table does not list every item")
    s = sc["score"].to_numpy(float)
    require(np.isfinite(s).all(), f"non-finite scores {s}")
    if centered:
        require(abs(s.sum()) < 1e-6 * max(1.0, np.abs(s).max()), f"scores not centered: sum {s.sum():.3g}")
    se = sc["se"].to_numpy(float)
    if not allow_nan_se and res.status == "ok" and res.method != "atc":  # atc: point estimates only (documented)
        require(np.isfinite(se).all(), f"status ok but non-finite se {se}")
    fin = np.isfinite(se)
    require((se[fin] >= 0).all(), "negative se")
    lo, hi = sc["ci_low"].to_numpy(float)[fin], sc["ci_high"].to_numpy(float)[fin]
    require(((lo <= s[fin] + 1e-9) & (s[fin] <= hi + 1e-9)).all(), "interval does not contain the score")
    require(abs(float(res.level) - level) < 1e-12, f"result level {res.level} != {level}")
    return f"status={res.status}"


def counts_ok(res: Any, frame: pd.DataFrame, human: str = "human") -> None:
    from .fixtures import hand_counts

    nh, nl = hand_counts(frame, human)
    if getattr(res, "ties", None):  # the tie families use the ties
        tie = (frame["winner"] == "tie") & (frame["item_a"].astype(str) != frame["item_b"].astype(str))
        hum = frame["judge"].astype(str) == human
        nh, nl = nh + int((tie & hum).sum()), nl + int((tie & ~hum).sum())
    if res.n_human:
        require(res.n_human == nh, f"n_human {res.n_human} != {nh} counted by hand")
    if res.method in ("judges",) or res.n_llm:
        require(res.n_llm == nl, f"n_llm {res.n_llm} != {nl} counted by hand")


def same_scores(a: Any, b: Any, tol: float = 1e-6, what: str = "scores", mapping: dict | None = None,
                se: bool = True) -> None:
    sa, sb = a.scores, b.scores
    if mapping:
        sb = sb.rename(index={v: k for k, v in mapping.items()})
    sb = sb.loc[sa.index]
    d = np.abs(sa["score"].to_numpy() - sb["score"].to_numpy()).max()
    require(d < tol, f"{what}: scores differ by {d:.3g}")
    if se:
        e = np.nanmax(np.abs(sa["se"].to_numpy() - sb["se"].to_numpy()))
        require(not np.isfinite(e) or e < max(tol, 1e-4), f"{what}: se differ by {e:.3g}")


def swapped(frame: pd.DataFrame) -> pd.DataFrame:
    """The same judgments with item_a and item_b exchanged (winner and first follow)."""
    f = frame.copy()
    flip = {"a": "b", "b": "a"}
    f["item_a"], f["item_b"] = frame["item_b"].to_numpy(), frame["item_a"].to_numpy()
    f["winner"] = frame["winner"].map(lambda w: flip.get(w, w))
    f["first"] = frame["first"].map(lambda w: flip.get(w, w))
    for c in frame.columns:
        if c.endswith("_a") and c[:-2] + "_b" in frame.columns and c not in ("item_a",):
            f[c], f[c[:-2] + "_b"] = frame[c[:-2] + "_b"].to_numpy(), frame[c].to_numpy()
    return f


def statsmodels_btl(frame: pd.DataFrame, items: list[str], human: str = "human") -> tuple[np.ndarray, np.ndarray]:
    """Human BTL by statsmodels' Logit: centered scores and the se of the centered scores."""
    import statsmodels.api as sm

    h = frame[(frame["judge"] == human) & frame["winner"].isin(["a", "b"])]
    idx = {m: k for k, m in enumerate(items)}
    N = len(items)
    X = np.zeros((len(h), N))
    X[np.arange(len(h)), h["item_a"].map(idx).to_numpy()] += 1
    X[np.arange(len(h)), h["item_b"].map(idx).to_numpy()] -= 1
    y = (h["winner"] == "a").to_numpy(float)
    m = sm.Logit(y, X[:, 1:]).fit(disp=0, tol=1e-12, maxiter=200)
    beta = np.r_[0.0, m.params]
    C = np.zeros((N, N))
    C[1:, 1:] = m.cov_params()
    P = np.eye(N) - 1.0 / N
    return P @ beta, np.sqrt(np.diag(P @ C @ P))
