"""Data-driven findings and fixed caveats for ``summary.md`` (see :mod:`.report`).

Every number in :func:`findings` is computed from the per-split results; statements
compare settings through paired per-split differences (the splits and the human samples
are shared across settings), given as mean ± 1.96 MC SE over the splits where both fits
are finite.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .protocol import LABELS, Config

Z = 1.96


def _paired(df: pd.DataFrame, method: str, x0: float, x1: float, metric: str = "excess_loss",
            method1: str | None = None) -> tuple[float, float, int]:
    """Mean and SE of ``metric(method1 at x1) - metric(method at x0)`` over common finite splits."""
    method1 = method1 or method
    a = df.loc[(df["method"] == method) & (df["setting"] == x0) & (df["status"] == "ok")].set_index("split")[metric]
    b = df.loc[(df["method"] == method1) & (df["setting"] == x1) & (df["status"] == "ok")].set_index("split")[metric]
    d = (b - a).dropna()
    if len(d) < 2:
        return np.nan, np.nan, len(d)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d))), len(d)


def _m(agg: pd.DataFrame, x: float, method: str, col: str = "excess_mean") -> float:
    a = agg.loc[(agg["setting"] == x) & (agg["method"] == method), col]
    return float(a.iloc[0]) if len(a) else np.nan


def _pm(mean: float, se: float, digits: int = 4) -> str:
    if not np.isfinite(mean):
        return "n/a"
    return f"{mean:+.{digits}f} ± {Z * se:.{digits}f}" if np.isfinite(se) else f"{mean:+.{digits}f}"


def _sig(mean: float, se: float) -> str:
    if not (np.isfinite(mean) and np.isfinite(se)):
        return "undetermined"
    if mean - Z * se > 0:
        return "worse"
    if mean + Z * se < 0:
        return "better"
    return "not distinguishable"


def _lab(x: float) -> str:
    return "all" if np.isinf(x) else f"{int(x)}"


def _tail(df: pd.DataFrame, x: float, what: str) -> list[str]:
    """DIAL-Ada's excess-loss tail at the smallest human budget and the weights behind it."""
    r = df.loc[(df["method"] == "dial-ada") & (df["setting"] == x) & (df["status"] == "ok")]
    anc = df.loc[(df["method"] == "dial-anc") & (df["setting"] == x) & (df["status"] == "ok")]
    if len(r) < 2 or anc.empty:
        return []
    e = r["excess_loss"]
    bad = r.loc[e > 0.1]
    small = (pd.to_numeric(bad["lambda_multiple"], errors="coerce") <= 0.1).mean() if len(bad) else np.nan
    txt = (f"  DIAL-Ada at n_H = {_lab(x)} ({what}) has a heavy tail: median {e.median():.4f} (DIAL-Anc "
           f"{anc['excess_loss'].median():.4f}), 90th percentile {e.quantile(0.9):.4f}, max {e.max():.4f}; "
           f"{len(bad)} of {len(r)} splits exceed 0.1")
    if len(bad):
        txt += (f", {small:.0%} of them with a selected weight <= 0.1 x n_L/n_H. There the human MLE does not exist and "
                "GACV prefers a weakly weighted joint fit that overfits the few human labels (in the splits inspected by "
                "refitting: train human loss 0.17-0.33, far below the anchored fit's, and max|s| 4-9), i.e. the GACV "
                "optimism correction is too small at such budgets")
    return [txt + "."]


def findings(cfg: Config, dfs: dict[str, pd.DataFrame], aggs: dict[str, pd.DataFrame]) -> list[str]:
    out: list[str] = []
    if "human_budget" in aggs:
        a, df = aggs["human_budget"], dfs["human_budget"]
        xs = sorted(a["setting"].unique())
        h = a.loc[a["method"] == "human"].set_index("setting")
        if len(h):
            full = [x for x in xs if h.loc[x, "frac_finite"] >= 1]
            first_full = _lab(full[0]) if full else "none of the budgets"
            fin_text = ", ".join(f"{h.loc[x, 'frac_finite']:.0%} at n_H={_lab(x)}" for x in xs[:5])
            out.append("* **Human-label efficiency.** The human BTL MLE (and hence AtC, which aggregates the humans by "
                       f"BTL) is finite in {fin_text} "
                       f"of the splits; it is finite in every split from n_H = {first_full} on. "
                       "Human/AtC means at the other budgets are over the finite splits only (flagged).")
        x0 = xs[0]
        parts = [f"{LABELS[m]} {_m(a, x0, m):.4f} (tau {_m(a, x0, m, 'tau_mean'):.3f})" for m in
                 ("dial-anc", "dial-ada", "pooled", "dial-nopos") if m in set(a["method"])]
        out.append(f"* At the smallest budget n_H = {_lab(x0)} the LLM-based fits are finite in every split: excess loss "
                   + "; ".join(parts) + ".")
        out += _tail(df, x0, "all LLM judgments")
        fx = [x for x in xs if _m(a, x, "human", "frac_finite") >= 1]
        if fx:
            x = fx[0]
            d, se, n = _paired(df, "human", x, x, method1="dial-ada")
            d2, se2, _ = _paired(df, "human", x, x, method1="dial-anc")
            out.append(f"* At n_H = {_lab(x)} (Human finite everywhere): DIAL-Ada minus Human excess loss {_pm(d, se)} "
                       f"({_sig(d, se)} than Human), DIAL-Anc minus Human {_pm(d2, se2)} ({_sig(d2, se2)}); "
                       f"Kendall tau Human {_m(a, x, 'human', 'tau_mean'):.3f}, DIAL-Anc {_m(a, x, 'dial-anc', 'tau_mean'):.3f}, "
                       f"DIAL-Ada {_m(a, x, 'dial-ada', 'tau_mean'):.3f}, AtC {_m(a, x, 'atc', 'tau_mean'):.3f}.")
        xl = xs[-1]
        d, se, _ = _paired(df, "human", xl, xl, method1="dial-ada")
        d2, se2, _ = _paired(df, "human", xl, xl, method1="dial-anc")
        out.append(f"* At the largest budget n_H = {_lab(xl)}: Human {_m(a, xl, 'human'):.4f}, DIAL-Anc {_m(a, xl, 'dial-anc'):.4f}, "
                   f"DIAL-Ada {_m(a, xl, 'dial-ada'):.4f}, Pooled {_m(a, xl, 'pooled'):.4f}; DIAL-Ada minus Human {_pm(d, se)} "
                   f"({_sig(d, se)}), DIAL-Anc minus Human {_pm(d2, se2)} ({_sig(d2, se2)}). DIAL-Ada selected a finite "
                   f"weight or lambda = 0 in {1 - _m(a, xl, 'dial-ada', 'frac_lambda_inf'):.0%} of the splits here "
                   f"versus {1 - _m(a, x0, 'dial-ada', 'frac_lambda_inf'):.0%} at n_H = {_lab(x0)}.")
    if "human_budget_scarce" in aggs:
        a = aggs["human_budget_scarce"]
        xs = sorted(a["setting"].unique())
        out.append(f"* **Scarce LLM data (n_LLM = {cfg.scarce_n_llm}).** From n_H = {_lab(xs[0])} to {_lab(xs[-1])}: DIAL-Anc "
                   f"excess loss {_m(a, xs[0], 'dial-anc'):.4f} → {_m(a, xs[-1], 'dial-anc'):.4f} (tau "
                   f"{_m(a, xs[0], 'dial-anc', 'tau_mean'):.3f} → {_m(a, xs[-1], 'dial-anc', 'tau_mean'):.3f}), DIAL-Ada "
                   f"{_m(a, xs[0], 'dial-ada'):.4f} → {_m(a, xs[-1], 'dial-ada'):.4f} (tau "
                   f"{_m(a, xs[0], 'dial-ada', 'tau_mean'):.3f} → {_m(a, xs[-1], 'dial-ada', 'tau_mean'):.3f}), Human at "
                   f"n_H = {_lab(xs[-1])} {_m(a, xs[-1], 'human'):.4f} (tau {_m(a, xs[-1], 'human', 'tau_mean'):.3f}).")
        out += _tail(dfs["human_budget_scarce"], xs[0], f"n_LLM = {cfg.scarce_n_llm}")
    if "pure_position" in aggs:
        a, df = aggs["pure_position"], dfs["pure_position"]
        xs = sorted(a["setting"].unique())
        x0, x1 = xs[0], xs[-1]
        parts = []
        for m in ("pooled", "dial-nopos", "dial-anc", "dial-ada", "atc"):
            if m not in set(a["method"]):
                continue
            d, se, n = _paired(df, m, x0, x1)
            parts.append(f"{LABELS[m]} {_m(a, x0, m):.4f} → {_m(a, x1, m):.4f} (paired change {_pm(d, se)}, n={n})")
        out.append(f"* **Pure-position judges** (n_H = {cfg.pure_n_human}), m = {_lab(x0)} → {_lab(x1)}: " + "; ".join(parts)
                   + ". Human (no LLM data) is the same in every setting: "
                   f"{_m(a, x0, 'human'):.4f} over {_m(a, x0, 'human', 'n_ok'):.0f} finite splits. The fitted order effect "
                   f"of the injected judges is {_m(a, x1, 'dial-anc', 'b_injected_mean'):.3f} "
                   f"(logit {cfg.pure_prob} = {np.log(cfg.pure_prob / (1 - cfg.pure_prob)):.3f}).")
    if "anti_consensus" in aggs:
        a, df = aggs["anti_consensus"], dfs["anti_consensus"]
        xs = sorted(a["setting"].unique())
        parts = []
        for m in ("pooled", "dial-nopos", "dial-anc", "dial-ada", "atc"):
            if m not in set(a["method"]):
                continue
            ch = [f"{_m(a, x, m):.4f}" for x in xs]
            d, se, _ = _paired(df, m, xs[0], xs[-1])
            parts.append(f"{LABELS[m]} " + " / ".join(ch) + f" (m={_lab(xs[0])}→{_lab(xs[-1])} {_pm(d, se)})")
        lam = " / ".join(f"{_m(a, x, 'dial-ada', 'frac_lambda_inf'):.0%}" for x in xs)
        out.append(f"* **Anti-consensus judges** (n_H = {cfg.anti_n_human}, n_LLM = {cfg.anti_n_llm}), excess loss at m = "
                   + " / ".join(_lab(x) for x in xs) + ": " + "; ".join(parts)
                   + f". Human: {_m(a, xs[0], 'human'):.4f}. DIAL-Ada chose the anchored endpoint in {lam} of the splits.")
        tau = "; ".join(f"{LABELS[m]} " + " / ".join(f"{_m(a, x, m, 'tau_mean'):.3f}" for x in xs)
                        for m in ("dial-anc", "dial-ada", "human") if m in set(a["method"]))
        out.append(f"  Kendall tau at the same m: {tau}.")
    if "llm_budget" in aggs:
        a, df = aggs["llm_budget"], dfs["llm_budget"]
        xs = sorted(a["setting"].unique())
        rows = []
        for x in xs:
            rows.append(f"n_LLM={_lab(x)}: Anc {_m(a, x, 'dial-anc'):.4f}, Ada {_m(a, x, 'dial-ada'):.4f}, "
                        f"Pooled {_m(a, x, 'pooled'):.4f}, oracle {_m(a, x, 'dial-ada', 'oracle_mean'):.4f}")
        d, se, _ = _paired(df, "dial-anc", xs[0], xs[0], method1="dial-ada")
        out.append(f"* **LLM budget** (n_H = {cfg.llm_n_human}; Human {_m(a, xs[0], 'human'):.4f}): " + "; ".join(rows)
                   + f". At n_LLM = {_lab(xs[0])}, DIAL-Ada minus DIAL-Anc {_pm(d, se)} ({_sig(d, se)}).")
    out += comparison(dfs, aggs)
    return out


def _verdict(ok: bool | None) -> str:
    return {True: "**consistent with the paper**", False: "**differs from the paper**", None: "undetermined"}[ok]


def comparison(dfs: dict[str, pd.DataFrame], aggs: dict[str, pd.DataFrame]) -> list[str]:
    """Checks of the paper's qualitative claims (App. Real Data), each with its evidence."""
    out = ["", "Qualitative checks against the paper's claims:", ""]
    if "human_budget" in aggs:
        a, df = aggs["human_budget"], dfs["human_budget"]
        xs = [x for x in sorted(a["setting"].unique()) if _m(a, x, "human", "frac_finite") < 1]
        if xs:
            anc = [_m(a, x, "dial-anc") for x in xs]
            hum = [_m(a, x, "human") for x in xs]
            ok = all(np.isnan(h) or c < h for c, h in zip(anc, hum))
            ada_vs_anc = [_paired(df, "dial-anc", x, x, method1="dial-ada") for x in xs]
            out.append(f"* DIAL-Anc/DIAL-Ada strong at small budgets where Human is often not finite (n_H = "
                       f"{', '.join(_lab(x) for x in xs)}): DIAL-Anc below Human's finite-split mean at each: {_verdict(ok)}. "
                       "DIAL-Ada minus DIAL-Anc there: " + ", ".join(_pm(d, se) for d, se, _ in ada_vs_anc)
                       + (" (DIAL-Ada less stable than anchoring at the smallest budgets; the paper reports the same for "
                          "its small judge panel)." if ada_vs_anc[0][0] > 0 else "."))
    if "pure_position" in aggs:
        df = dfs["pure_position"]
        xs = sorted(df["setting"].unique())
        ch = {m: _paired(df, m, xs[0], xs[-1]) for m in ("pooled", "dial-nopos", "dial-anc", "dial-ada")}
        deg = all(_sig(*ch[m][:2]) == "worse" for m in ("pooled", "dial-nopos"))
        stab = all(abs(ch[m][0]) < 0.1 * abs(ch["pooled"][0]) for m in ("dial-anc", "dial-ada"))
        out.append(f"* Order-agnostic methods degrade with pure-position judges, order-aware DIAL stays stable: "
                   f"{_verdict(deg and stab)} (paired change m={_lab(xs[0])}→{_lab(xs[-1])}: "
                   + ", ".join(f"{LABELS[m]} {_pm(*ch[m][:2])}" for m in ch) + ").")
    if "anti_consensus" in aggs:
        df = dfs["anti_consensus"]
        xs = sorted(df["setting"].unique())
        ada = _paired(df, "dial-ada", xs[0], xs[-1])
        anc = _paired(df, "dial-anc", xs[0], xs[-1])
        a = aggs["anti_consensus"]
        pooled = [_m(a, x, "pooled") for x in xs]
        nonmono = any(pooled[i + 1] < pooled[i] for i in range(len(pooled) - 1))
        out.append(f"* DIAL-Ada more stable than anchoring under anti-consensus corruption: "
                   f"{_verdict(ada[0] < anc[0] and _sig(*anc[:2]) == 'worse')} (change m={_lab(xs[0])}→{_lab(xs[-1])}: "
                   f"DIAL-Ada {_pm(*ada[:2])}, DIAL-Anc {_pm(*anc[:2])}); behaviour at the strongest corruption is "
                   + ("non-monotone for Pooled (the paper also reports non-monotone behaviour at the strongest corruption)."
                      if nonmono else "monotone here."))
    if "llm_budget" in aggs:
        df, a = dfs["llm_budget"], aggs["llm_budget"]
        xs = sorted(a["setting"].unique())
        d0 = _paired(df, "dial-anc", xs[0], xs[0], method1="dial-ada")
        d1 = _paired(df, "dial-anc", xs[-1], xs[-1], method1="dial-ada")
        ok = _sig(*d0[:2]) == "better" and abs(d1[0]) < abs(d0[0]) / 5
        out.append(f"* With scarce LLM data DIAL-Anc degrades while DIAL-Ada stays competitive with the better endpoint, "
                   f"and the two converge as n_LLM grows: {_verdict(ok)} (DIAL-Ada minus DIAL-Anc at n_LLM = {_lab(xs[0])}: "
                   f"{_pm(*d0[:2])}; at {_lab(xs[-1])}: {_pm(*d1[:2])}; Human {_m(a, xs[0], 'human'):.4f}).")
    return out


def notes(cfg: Config) -> list[str]:
    return [
        "* **Display order is an assumption.** The source files do not store which response each LLM judge saw "
        "first; following the data README, model_a is assumed to have been shown first ('Assistant A'). The strong "
        "first-position preference of gpt-3.5-turbo is consistent with it. If the assumption were wrong, the "
        "order-aware fits would estimate the order effects with the wrong sign for the affected battles.",
        "* **One order per record.** Each battle was judged in a single display order by each LLM judge; the two "
        "canonical orientations occur only across different battles. The order effects are still identified (cycle "
        "criterion, length-two cycles), but the paper's balanced design (both orders per record) and its display-"
        "imbalance sweep cannot be reproduced; the order-agnostic baselines here face the as-collected imbalance of "
        "each pair's orientation rather than a controlled one.",
        f"* **Only {len(cfg.judges)} judges** (gpt-4-0125-preview, claude-3-opus-20240229, gpt-3.5-turbo) versus the "
        "paper's 21 (and its 5-judge order-sensitive panel for the robustness sweeps), about 65k tie-excluded LLM "
        "judgments instead of 300k, and a different record set (26,910 Arena battles with the human vote of the "
        "original Arena data, versus the paper's 7,738 records). The numbers therefore differ from the paper's figures; "
        "compare the qualitative patterns only.",
        "* The test pool (30% of records, about 5.6k decisive human labels) is itself noisy: the reference s_test is "
        "an estimate, so even the full-train Human fit has a positive excess loss and a Kendall tau below 1; excess "
        "losses and taus compare methods against a common noisy target.",
        "* The human labels of the Arena data are crowd votes on the same battles the LLMs judged; ties and "
        "'both bad' votes are excluded (binary models), as are LLM ties (gpt-4/claude-3 tie on about 28-29% of "
        "battles).",
        "* Anti-consensus design choice: all m injected judges copy the flipped verdicts of one source judge drawn per "
        "split. Drawing a different source per injected judge would, with 3 judges and m = 3, make the LLM data "
        "exactly self-cancelling (every real judge paired with its flip), where pydial's consensus direction is "
        "undefined and pydial stops with a bare ValueError ('A must satisfy A^T 1 = K e_1') instead of an "
        "IdentifiabilityError (package issue).",
        "* Injected judges use nested draws: the judges of a smaller m are a subset of those of a larger m; human "
        "samples and LLM subsamples are nested across budgets and shared across sweeps. Settings are therefore "
        "compared on the same splits (paired differences in the findings).",
        "* With r = 1 and calibration in span(mu), DIAL-Anc's scores are alpha * mu: the human labels only scale the "
        "LLM consensus, so its ranking (Kendall tau) is the same at every n_H (and AtC/Pooled rankings similarly depend "
        "on the humans only through the isotonic step / the scale). Its excess loss plateaus at the consensus' "
        "misfit to the human target.",
        "* DIAL-Ada and DIAL-noPos use pydial's default GACV grid (multiples 0.01-10 of n_L/n_H plus the endpoints "
        "lambda = 0 and inf); the 'oracle' is the admissible path candidate with the smallest test loss (uses the "
        "test pool; for reference only).",
        "* Fits that pydial flags as not converged (e.g. the structured LLM-only fit at the smallest n_LLM) are kept "
        "and averaged; their counts are listed above. At the smallest LLM budgets read the curves as trends "
        "(the paper makes the same caveat).",
    ]
