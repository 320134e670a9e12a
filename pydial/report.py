"""Plots and written reports of a fit (matplotlib, PNG; Markdown or HTML).

* :func:`plot_scores` -- forest plot of the calibrated scores with intervals;
* :func:`plot_position_effects` -- judge position effects ``b_k`` with intervals
* :func:`plot_covariate_effects` -- covariate effects ``beta`` per judge with intervals
  against each judge's empirical first-position win rate (as Fig. real-diagnostics a);
* :func:`plot_gacv` -- the GACV curve over the weight path with the selected weight;
* :func:`write_report` -- an output folder with tables, plots, a report and a JSON summary.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pydial.data.comparisons import Comparisons
from pydial.estimation.results import DialResult

from .outputs import output_dir
from pydial.exceptions import ArgumentError

REPORT_FORMATS: tuple[str, ...] = ("md", "html")


def first_position_rates(data: Comparisons) -> pd.DataFrame:
    """Per judge: decisive judgments, wins of the first-shown item and their rate."""
    L = data.llm
    first_wins = np.where(L.a > 0, L.y, L.n - L.y)
    n = np.bincount(L.judge, weights=L.n, minlength=data.K)
    w = np.bincount(L.judge, weights=first_wins, minlength=data.K)
    return pd.DataFrame({"n": n.astype(int), "first_wins": w.astype(int), "first_rate": w / np.maximum(n, 1)},
                        index=pd.Index(data.judges, name="judge"))


def plot_scores(res: DialResult, ax: Any = None) -> Any:
    """Forest plot: items sorted by score with ``level`` intervals."""
    tab = res.scores.sort_values("score")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 0.3 * len(tab) + 1.2))
    y = np.arange(len(tab))
    err = np.vstack([tab["score"] - tab["ci_low"], tab["ci_high"] - tab["score"]])
    ax.errorbar(tab["score"], y, xerr=np.where(np.isfinite(err), err, 0), fmt="o", color="C0", capsize=2)
    ax.set_yticks(y, tab.index)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel(f"score (centered), {res.level:.0%} intervals")
    ax.set_title(f"{res.method}: calibrated scores")
    ax.figure.tight_layout()
    return ax


def plot_position_effects(res: DialResult, data: Comparisons, ax: Any = None) -> Any:
    """Position effects ``b_k`` (LLM-only fit) against the empirical first-position win rate."""
    if res.position_effects is None:
        raise ArgumentError(f"method {res.method!r} has no position effects")
    pe = res.position_effects.join(first_position_rates(data))
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    err = np.vstack([pe["b"] - pe["ci_low"], pe["ci_high"] - pe["b"]])
    ax.errorbar(pe["first_rate"], pe["b"], yerr=err, fmt="o", capsize=2)
    for name, row in pe.iterrows():
        ax.annotate(str(name), (row["first_rate"], row["b"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0.5, color="grey", lw=0.5)
    ax.set_xlabel("empirical rate at which the first-shown item wins")
    ax.set_ylabel(f"b_k ({res.level:.0%} interval, {res.cov_type} meat)")
    ax.set_title("Judge position effects (b > 0 favours the first-shown item)")
    ax.figure.tight_layout()
    return ax


def plot_covariate_effects(res: DialResult, ax: Any = None) -> Any:
    """Plot the covariate effects ``beta`` per judge (and people) with their intervals, one marker per covariate.

    ``beta`` of the term ``z' beta`` added to eq. binomial-model-llm / -human (:attr:`DialResult.covariate_effects`).
    """
    ce = res.covariate_effects
    if ce is None:
        raise ArgumentError(f"this {res.method!r} fit has no covariate effects (fit data with covariates=)")
    labels = list(ce.index.unique("judge"))
    names = list(ce.index.unique("covariate"))
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 0.9 + 0.35 * len(labels) * len(names)))
    y = np.arange(len(labels), dtype=float)
    step = 0.7 / max(len(names), 1)
    for t, c in enumerate(names):
        rows = ce.xs(c, level="covariate").loc[labels]
        err = np.vstack([rows["beta"] - rows["ci_low"], rows["ci_high"] - rows["beta"]])
        ax.errorbar(rows["beta"], y + (t - (len(names) - 1) / 2) * step, xerr=err, fmt="o", capsize=2, label=c)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel(f"beta per standard deviation of the covariate ({res.level:.0%} interval, {res.cov_type} meat)")
    ax.set_title("Covariate effects (beta > 0 favours the response with more of it)")
    if len(names) > 1:
        ax.legend(fontsize=7)
    ax.figure.tight_layout()
    return ax


def plot_gacv(res: DialResult, ax: Any = None) -> Any:
    """GACV over the finite weights (log scale, as multiples of n_LLM/n_H) with the endpoints."""
    if res.gacv is None:
        raise ArgumentError(f"method {res.method!r} has no weight path")
    g = res.gacv
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    labelled: set[str] = set()
    for r, sub in g.groupby("rank") if "rank" in g else [(res.rank, g)]:
        fin = sub[np.isfinite(sub["multiple"]) & (sub["multiple"] > 0) & sub["admissible"]]
        ax.plot(fin["multiple"], fin["gacv"], "o-", label=f"rank {r}")
        for lam, mk, lab in ((0.0, "<", "lambda=0"), (np.inf, ">", "lambda=inf")):
            e = sub[(sub["lambda"] == lam) & sub["admissible"]]
            if len(e) and len(fin):
                x = fin["multiple"].min() / 3 if lam == 0 else fin["multiple"].max() * 3
                ax.plot([x], e["gacv"], mk, color="k")
                if lab not in labelled:
                    labelled.add(lab)
                    ax.annotate(lab, (x, float(e["gacv"].iloc[0])), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    sel = res.lambda_ * res.n_human / res.n_llm if np.isfinite(res.lambda_) and res.lambda_ > 0 else None
    if sel is not None:
        ax.axvline(sel, color="C3", ls="--", label="selected")
    ax.set_xlabel("lambda / (n_LLM / n_H)")
    ax.set_ylabel("GACV")
    ax.legend(fontsize=8)
    ax.set_title(f"GACV path (selected lambda = {res.lambda_:.4g})")
    ax.figure.tight_layout()
    return ax


def summary_dict(res: DialResult) -> dict[str, Any]:
    """Machine-readable summary of a fit (JSON-serializable)."""
    ct = res.calibration_test
    fin = lambda x: None if x is None or not np.isfinite(x) else float(x)  # noqa: E731
    return {
        "method": res.method, "rank": res.rank, "calibration": res.calibration, "engine": res.engine,
        "cov": res.cov_type, "anchored_cov": res.anchored_cov, "cluster_correction": res.cluster_correction,
        "level": res.level, "lambda": fin(res.lambda_),
        "lambda_is_infinite": bool(np.isinf(res.lambda_)), "converged": bool(res.converged),
        "status": res.status, "problems": list(res.problems),
        "grad_norm": float(res.grad_norm), "n_human": res.n_human, "n_llm": res.n_llm,
        "items": list(res.items), "judges": list(res.judges),
        "scores": {k: {c: fin(v[c]) for c in ("score", "se", "ci_low", "ci_high")} for k, v in res.scores.iterrows()},
        "position_effects": None if res.position_effects is None else {
            k: {c: fin(v[c]) for c in ("b", "se", "ci_low", "ci_high", "p_value")} for k, v in res.position_effects.iterrows()},
        "covariate_effects": None if res.covariate_effects is None else [
            {"judge": k, "covariate": c, **{col: fin(v[col]) for col in ("beta", "se", "ci_low", "ci_high", "p_value")}}
            for (k, c), v in res.covariate_effects.iterrows()],
        "covariate_scale": None if res.covariate_scale is None else {k: float(v) for k, v in res.covariate_scale.items()},
        "calibration_test": None if ct is None else {
            "statistic": fin(ct.statistic), "df": ct.df, "p_value": fin(ct.p_value), "aic_prefers": ct.aic_prefers,
            "defined": ct.defined, "reason": ct.reason},
    }


def write_report(res: DialResult, data: Comparisons, out: str | Path, *, fmt: str = "md",
                 force: bool = False) -> list[Path]:
    """Write tables (CSV), plots (PNG), ``report.md``/``report.html`` and ``summary.json`` into ``out``.

    The folder is written aside and moved into place when complete
    (:func:`pydial.outputs.output_dir`): a folder of an earlier pydial run is replaced
    as a whole, a non-empty folder pydial did not write is refused unless
    ``force=True`` (then only pydial's own files in it are replaced).

    Returns the written paths.

    Raises
    ------
    OutputError
        ``out`` cannot be written (named in the message).
    """
    if fmt not in REPORT_FORMATS:
        raise ArgumentError(f"fmt must be one of {REPORT_FORMATS}, got {fmt!r}")
    with output_dir(out, force=force, command=f"pydial fit --method {res.method}") as tmp:
        names = [p.name for p in _write_report(res, data, tmp, fmt)]
    return [Path(out) / name for name in names]


def _write_report(res: DialResult, data: Comparisons, out: Path, fmt: str) -> list[Path]:
    written: list[Path] = []

    def save_csv(df: pd.DataFrame, name: str, index: bool = True) -> None:
        p = out / name
        df.to_csv(p, index=index)
        written.append(p)

    def save_fig(ax: Any, name: str) -> str:
        p = out / name
        ax.figure.savefig(p, dpi=120)
        plt.close(ax.figure)
        written.append(p)
        return name

    save_csv(res.scores.reset_index(), "scores.csv", index=False)
    save_csv(data.summary(), "data_summary.csv")
    figs = [("Scores", save_fig(plot_scores(res), "scores.png"))]
    if res.position_effects is not None:
        pe = res.position_effects.join(first_position_rates(data))
        save_csv(pe.reset_index(), "position_effects.csv", index=False)
        figs.append(("Position effects", save_fig(plot_position_effects(res, data), "position_effects.png")))
    if res.gacv is not None:
        save_csv(res.gacv, "gacv.csv", index=False)
        figs.append(("GACV path", save_fig(plot_gacv(res), "gacv.png")))
    if res.consensus is not None:
        save_csv(res.consensus.reset_index(), "consensus_loadings.csv", index=False)
    if res.covariate_effects is not None:
        save_csv(res.covariate_effects.reset_index(), "covariate_effects.csv", index=False)
        figs.append(("Covariate effects", save_fig(plot_covariate_effects(res), "covariate_effects.png")))
    tie_parameters = getattr(res, "tie_parameters", None)
    if tie_parameters is not None:
        save_csv(tie_parameters.reset_index(), "tie_parameters.csv", index=False)
    p = out / "summary.json"
    p.write_text(json.dumps(summary_dict(res), indent=2))
    written.append(p)
    text = res.summary()
    if fmt == "md":
        body = ["# pydial report", "", "```", text, "```", ""] + [f"## {t}\n\n![{t}]({f})\n" for t, f in figs]
        body += ["## Data", "", "```", data.summary().to_string(), "```", ""]
        p = out / "report.md"
        p.write_text("\n".join(body))
    else:
        imgs = "".join(f"<h2>{html.escape(t)}</h2><img src='{f}'>" for t, f in figs)
        p = out / "report.html"
        p.write_text(f"<html><head><meta charset='utf-8'><title>pydial report</title></head><body><h1>pydial report</h1>"
                     f"<pre>{html.escape(text)}</pre>{imgs}<h2>Data</h2><pre>{html.escape(data.summary().to_string())}</pre>"
                     "</body></html>")
    written.append(p)
    return written
