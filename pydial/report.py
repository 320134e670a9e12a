"""Plots (matplotlib, PNG) and written reports (Markdown or HTML, CSV tables, ``summary.json``) of a fit.

The position effects ``b_k`` are plotted against each judge's first-position win rate (as Fig. real-diagnostics a).
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, Callable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import chi2

from pydial.data.comparisons import Comparisons
from pydial.estimation.results import DialResult
from pydial.exceptions import ArgumentError
from pydial.formatting import ITEMS_LABEL, by_score, cov_label, display_table, format_pvalue_from_log, wald_log_pvalue
from pydial.resources import check_choice

from .outputs import output_dir

REPORT_FORMATS: tuple[str, ...] = ("md", "html")


def first_position_rates(data: Comparisons) -> pd.DataFrame:
    """Per judge: decisive judgments, wins of the first-shown item and their rate."""
    L = data.llm
    first_wins = np.where(L.a > 0, L.y, L.n - L.y)
    n = np.bincount(L.judge, weights=L.n, minlength=data.K)
    w = np.bincount(L.judge, weights=first_wins, minlength=data.K)
    return pd.DataFrame({"n": n.astype(int), "first_wins": w.astype(int), "first_rate": w / np.maximum(n, 1)},
                        index=pd.Index(data.judges, name="judge"))


def _interval_text(res: DialResult) -> str:
    """``"95% intervals, sandwich (cell-clustered)"``: the level and covariance of a fit's intervals."""
    return f"{res.level:.0%} intervals, {cov_label(res.cov_type, res.anchored_cov)}"


def _new_axes(ax: Any, figsize: tuple[float, float]) -> Any:
    return plt.subplots(figsize=figsize, layout="constrained")[1] if ax is None else ax


def plot_scores(res: DialResult, ax: Any = None) -> Any:
    """Forest plot of the calibrated scores with their intervals, items by fitted score (highest on top)."""
    tab = by_score(res.scores)
    ax = _new_axes(ax, (6.5, 0.3 * len(tab) + 1.4))
    y = np.arange(len(tab))
    err = np.vstack([tab["score"] - tab["ci_low"], tab["ci_high"] - tab["score"]]) if "ci_low" in tab else None
    ax.errorbar(tab["score"], y, xerr=None if err is None else np.where(np.isfinite(err), err, 0), fmt="o", color="C0",
                capsize=2)
    ax.set_yticks(y, [str(n) for n in tab.index])
    ax.invert_yaxis()
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_ylabel(ITEMS_LABEL)
    ax.set_xlabel("score (log-odds, centered)\n" + ("no standard errors (AtC)" if res.method == "atc"
                                                    else _interval_text(res)))
    ax.set_title(f"{res.method}: calibrated scores")
    return ax


def plot_position_effects(res: DialResult, data: Comparisons, ax: Any = None) -> Any:
    """Position effects ``b_k`` (LLM-only fit) against the empirical first-position win rate."""
    if res.position_effects is None:
        raise ArgumentError(f"method {res.method!r} has no position effects")
    pe = res.position_effects.join(first_position_rates(data))
    ax = _new_axes(ax, (6.5, 4.5))
    err = np.vstack([pe["b"] - pe["ci_low"], pe["ci_high"] - pe["b"]])
    ax.errorbar(pe["first_rate"], pe["b"], yerr=err, fmt="o", capsize=2)
    ax.margins(x=0.1, y=0.15)
    mid = float(np.mean(ax.get_xlim()))
    for name, row in pe.iterrows():  # labels point inwards, so none leaves the axes
        right = row["first_rate"] > mid
        ax.annotate(str(name), (row["first_rate"], row["b"]), fontsize=8, xytext=(-6 if right else 6, 4),
                    textcoords="offset points", ha="right" if right else "left")
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0.5, color="grey", lw=0.5)
    ax.set_xlabel("empirical rate at which the first-shown item wins")
    ax.set_ylabel(f"position effect b (log-odds)\n{_interval_text(res)}")
    ax.set_title("Judge position effects (b > 0 favours the first-shown item)", fontsize=10)
    return ax


def plot_covariate_effects(res: DialResult, ax: Any = None) -> Any:
    """Plot ``beta`` (:attr:`DialResult.covariate_effects`) per judge and people with intervals, a marker per covariate."""
    ce = res.covariate_effects
    if ce is None:
        raise ArgumentError(f"this {res.method!r} fit has no covariate effects (fit data with covariates=)")
    labels = list(ce.index.unique("judge"))
    names = list(ce.index.unique("covariate"))
    ax = _new_axes(ax, (6.5, 1.4 + 0.35 * len(labels) * len(names)))
    y = np.arange(len(labels), dtype=float)
    step = 0.7 / max(len(names), 1)
    for t, c in enumerate(names):
        rows = ce.xs(c, level="covariate").reindex(labels)  # NaN where a judge has no such effect (fixed at 0)
        err = np.vstack([rows["beta"] - rows["ci_low"], rows["ci_high"] - rows["beta"]])
        ax.errorbar(rows["beta"], y + (t - (len(names) - 1) / 2) * step, xerr=err, fmt="o", capsize=2, label=c)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel(f"beta (log-odds per standard deviation of the covariate)\n{_interval_text(res)}")
    ax.set_title("Covariate effects (beta > 0 favours the response with more of it)", fontsize=10)
    if len(names) > 1:
        ax.legend(fontsize=7)
    return ax


def plot_gacv(res: DialResult, ax: Any = None) -> Any:
    """GACV over the weight path in multiples of n_LLM/n_H (log axis), the selected weight marked.

    ``lambda = 0`` and ``lambda = inf`` sit at labelled positions one decade beyond, set apart by dotted lines.
    """
    if res.gacv is None:
        raise ArgumentError(f"method {res.method!r} has no weight path")
    g = res.gacv[res.gacv["admissible"]]
    m = g["multiple"].to_numpy(float)
    fin = m[np.isfinite(m) & (m > 0)]
    lo, hi = (float(np.log10(fin.min())), float(np.log10(fin.max()))) if len(fin) else (0.0, 0.0)
    zero_x, inf_x = np.floor(lo) - 1.0, np.ceil(hi) + 1.0

    def pos(v: float) -> float:
        return zero_x if v == 0 else inf_x if np.isinf(v) else float(np.log10(v))

    ax = _new_axes(ax, (6.5, 4.2))
    for r, sub in g.groupby("rank") if "rank" in g else [(res.rank, g)]:
        sub = sub.sort_values("multiple")
        x = np.array([pos(v) for v in sub["multiple"]])
        inner = (x > zero_x) & (x < inf_x)
        line, = ax.plot(x[inner], sub["gacv"][inner], "o-", label=f"rank {r}")
        ax.plot(x, sub["gacv"], ":", color=line.get_color())
        ax.plot(x[~inner], sub["gacv"][~inner], "D", color=line.get_color())
    decades = np.arange(np.floor(lo), np.ceil(hi) + 1)
    ax.set_xticks([zero_x, *decades, inf_x],
                  ["0\n(human only)", *[f"{10 ** d:g}" for d in decades], "inf\n(anchored)"])
    for x in (zero_x + 0.5, inf_x - 0.5):
        ax.axvline(x, color="grey", lw=0.6, ls=":")
    hit = res.gacv.loc[res.gacv["lambda"] == res.lambda_, "multiple"]  # the selected weight's row, when it is one
    sel = float(hit.iloc[0]) if len(hit) else float(res.lambda_) * res.n_human / res.n_llm
    ax.axvline(pos(sel), color="C3", ls="--",
               label=f"selected: {sel:.3g} x n_LLM/n_H (lambda = {res.lambda_:.3g})")
    ax.set_xlabel(f"weight lambda, in multiples of n_LLM/n_H = {res.n_llm}/{res.n_human} = {res.n_llm / res.n_human:.4g}")
    ax.set_ylabel("GACV")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("GACV over the weight path")
    return ax


FIT_STATISTICS: tuple[str, ...] = ("llf", "llf_human", "objective", "df_model", "nobs", "aic", "bic")
"""Fit statistics of a :class:`DialResult` written to the summary and reports when the result has them."""


def _jsonable(x: Any) -> Any:
    """``x`` as JSON: NaN and infinities as ``None``, numpy scalars as Python numbers, tables as dicts/records."""
    if isinstance(x, pd.DataFrame):
        return [_jsonable(row) for row in x.reset_index().to_dict("records")]
    if isinstance(x, (pd.Series, dict)):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if np.isfinite(x) else None
    return x if x is None or isinstance(x, str) else str(x)


def fit_statistics(res: DialResult) -> dict[str, Any]:
    """Return the fit statistics of :data:`FIT_STATISTICS` the result has (log-likelihood, AIC, BIC, ...)."""
    return {k: getattr(res, k) for k in FIT_STATISTICS if getattr(res, k, None) is not None}


def tie_parameter_name(tab: pd.DataFrame) -> str:
    """Return the tie parameter's name: its column (``tau`` for Rao-Kupper, ``nu`` for Davidson)."""
    return next((c for c in ("tau", "nu") if c in tab.columns), str(tab.columns[0]))


def calibration_sentence(res: DialResult) -> str:
    """Return the calibration test as one sentence (empty without a test), its p-value exact where it underflows."""
    ct = res.calibration_test
    if ct is None:
        return ""
    space = {"mu": "col(mu)", "W": "col(W) = col([mu, V])"}.get(str(res.calibration), f"the {res.calibration} space")
    if not ct.defined:
        return f"The calibration test of s_H in {space} is undefined: {ct.reason}."
    alpha = 1.0 - res.level
    logp = float(chi2.logsf(ct.statistic, ct.df))
    verdict = "rejects" if logp < np.log(alpha) else "does not reject"
    prefers = {"anchored": "the anchored fit (s_H in the calibration space)",
               "unrestricted": "the unrestricted human scores"}.get(ct.aic_prefers, ct.aic_prefers)
    return (f"The calibration test {verdict} s_H in {space} at the {alpha:.0%} level: LR = {ct.statistic:.1f} on "
            f"{ct.df} df, p = {format_pvalue_from_log(logp)}; AIC prefers {prefers}.")


def summary_dict(res: DialResult) -> dict[str, Any]:
    """Machine-readable summary of a fit (JSON-serializable; items by fitted score, highest first)."""
    ct = res.calibration_test
    ties = res.tie_parameters
    return _jsonable({
        "method": res.method, "rank": res.rank, "calibration": res.calibration, "engine": res.engine,
        "cov": res.cov_type, "cov_description": cov_label(res.cov_type, res.anchored_cov),
        "anchored_cov": res.anchored_cov, "cluster_correction": res.cluster_correction,
        "level": res.level, "lambda": res.lambda_,
        "lambda_is_infinite": bool(np.isinf(res.lambda_)), "converged": bool(res.converged),
        "status": res.status, "problems": list(res.problems),
        "grad_norm": float(res.grad_norm), "n_human": res.n_human, "n_llm": res.n_llm,
        **fit_statistics(res),
        "n_obs_by_judge": res.n_obs_by_judge, "excluded": res.excluded,
        "items": list(res.items), "judges": list(res.judges),
        "item_order": "scores by fitted score, highest first",
        "scores": {k: {c: v[c] for c in ("score", "se", "ci_low", "ci_high")} for k, v in by_score(res.scores).iterrows()},
        "position_effects": None if res.position_effects is None else {
            k: {c: v[c] for c in ("b", "se", "ci_low", "ci_high", "z", "p_value") if c in v}
            for k, v in res.position_effects.iterrows()},
        "covariate_effects": None if res.covariate_effects is None else [
            {"judge": k, "covariate": c, **{col: v[col] for col in ("beta", "se", "ci_low", "ci_high", "z", "p_value")
                                            if col in v}}
            for (k, c), v in res.covariate_effects.iterrows()],
        "covariate_scale": res.covariate_scale,
        "tie_parameters": None if ties is None else {
            "name": tie_parameter_name(ties), "model": ties.attrs.get("model"),
            "values": {str(k): dict(v) for k, v in ties.iterrows()}},
        "calibration_test": None if ct is None else {
            "statistic": ct.statistic, "df": ct.df, "p_value": ct.p_value,
            "log_p_value": float(chi2.logsf(ct.statistic, ct.df)) if ct.defined else None,
            "aic_prefers": ct.aic_prefers, "defined": ct.defined, "reason": ct.reason,
            "sentence": calibration_sentence(res)},
    })


def write_report(res: DialResult, data: Comparisons, out: str | Path, *, fmt: str = "md",
                 force: bool = False) -> list[Path]:
    """Write tables (CSV), plots (PNG), ``report.<fmt>`` and ``summary.json`` into ``out``; return the written files.

    Items by fitted score; the folder is written aside and moved into place (``force``: :func:`pydial.outputs.output_dir`).
    """
    check_choice("fmt", fmt, REPORT_FORMATS)
    names: list[str] = []
    with output_dir(out, force=force, command=f"pydial fit --method {res.method}") as tmp:

        def save_csv(df: pd.DataFrame, name: str) -> None:
            names.append(name)
            _flat(df).to_csv(tmp / name, index=False)

        def save_fig(ax: Any, name: str) -> None:
            names.append(f"{name}.png")
            ax.figure.savefig(tmp / names[-1], dpi=120)
            plt.close(ax.figure)

        save_csv(by_score(res.scores), "scores.csv")
        save_csv(data.summary(), "data_summary.csv")
        save_fig(plot_scores(res), "scores")
        if res.position_effects is not None:
            save_csv(with_log10_p(res.position_effects.join(first_position_rates(data))), "position_effects.csv")
            save_fig(plot_position_effects(res, data), "position_effects")
        if res.gacv is not None:
            save_csv(res.gacv.reset_index(drop=True), "gacv.csv")
            save_fig(plot_gacv(res), "gacv")
        if res.consensus is not None:
            save_csv(res.consensus, "consensus_loadings.csv")
        if res.covariate_effects is not None:
            save_csv(with_log10_p(res.covariate_effects), "covariate_effects.csv")
            save_fig(plot_covariate_effects(res), "covariate_effects")
        if res.tie_parameters is not None:
            save_csv(res.tie_parameters, "tie_parameters.csv")
        names += ["summary.json", f"report.{fmt}"]
        (tmp / "summary.json").write_text(json.dumps(summary_dict(res), indent=2))
        sections = _sections(res, data)
        (tmp / names[-1]).write_text(_markdown(sections, res.method) if fmt == "md" else _html(sections, res.method, tmp))
    return [Path(out) / name for name in names]


def with_log10_p(table: pd.DataFrame) -> pd.DataFrame:
    """Add ``log10_p_value`` after ``p_value`` (from ``z``: exact where ``p_value`` underflows to 0)."""
    if "p_value" not in table or "z" not in table:
        return table
    out = table.copy()
    out.insert(out.columns.get_loc("p_value") + 1, "log10_p_value",
               [wald_log_pvalue(z) / np.log(10.0) for z in table["z"].to_numpy(float)])
    return out


def _header(res: DialResult) -> pd.DataFrame:
    """Return the fit's settings and statistics as a two-column table."""
    lam = "n/a" if np.isnan(res.lambda_) else f"{res.lambda_:.4g}"
    rows: dict[str, Any] = {
        "method": res.method, "rank": res.rank, "calibration": res.calibration, "engine": res.engine,
        "weight lambda": lam, "items N": len(res.items), "LLM judges K": len(res.judges),
        "n_LLM": res.n_llm, "n_H": res.n_human, "covariance": cov_label(res.cov_type, res.anchored_cov),
        "cluster correction G/(G-1)": res.cluster_correction, "interval level": f"{res.level:.0%}",
        "converged": res.converged, "status": res.status,
    }
    rows.update({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in fit_statistics(res).items()})
    return pd.DataFrame({"value": [str(v) for v in rows.values()]}, index=pd.Index(list(rows), name="setting"))


def _sections(res: DialResult, data: Comparisons) -> list[tuple[str, str, pd.DataFrame | None, str]]:
    """Return the report's sections: ``(title, text, table, figure file)`` (the figures :func:`write_report` saves)."""
    iv = _interval_text(res)
    style = "" if res.covariate_scale is None else "; style-controlled: the scores of a comparison with z = 0"
    out: list[tuple[str, str, pd.DataFrame | None, str]] = [
        ("Fit", calibration_sentence(res), _header(res), ""),
        ("Scores", f"Calibrated scores (log-odds, centered{style}), items by fitted score; {iv}.", by_score(res.scores),
         "scores.png"),
    ]
    if res.position_effects is not None:
        out.append(("Position effects", "Position effects b of the LLM-only fit (log-odds; b > 0 favours the "
                    f"first-shown item), Wald tests of b = 0; {iv}.",
                    display_table(res.position_effects.join(first_position_rates(data))), "position_effects.png"))
    if res.covariate_effects is not None:
        out.append(("Covariate effects", f"Covariate effects beta (log-odds per standard deviation); {iv}.",
                    display_table(res.covariate_effects), "covariate_effects.png"))
    ties = res.tie_parameters
    if ties is not None:
        out.append(("Tie parameters", f"Tie parameter {tie_parameter_name(ties)} ({ties.attrs.get('model', 'tie model')}); "
                    f"{iv}.", ties, ""))
    if res.gacv is not None:
        out.append(("GACV path", "Weights lambda as multiples of n_LLM/n_H.", res.gacv, "gacv.png"))
    if res.n_obs_by_judge is not None:
        out.append(("Observations by judge", "Judgments in the likelihood.", pd.DataFrame(res.n_obs_by_judge), ""))
    if res.excluded is not None and len(res.excluded):
        out.append(("Judgments not in the likelihood", "", res.excluded, ""))
    out.append(("Data", "", data.summary(), ""))
    return out


def _float_format(title: str) -> Callable[[float], str]:
    return (lambda x: f"{x:.6f}") if title == "GACV path" else (lambda x: f"{x:.4f}")


def _flat(df: pd.DataFrame) -> pd.DataFrame:
    """Return ``df`` with its index (unless a plain row number) as the first column(s)."""
    return df if isinstance(df.index, pd.RangeIndex) else df.reset_index(names=[n or "" for n in df.index.names])


def _markdown_table(df: pd.DataFrame, fmt: Callable[[float], str]) -> str:
    """Render a Markdown pipe table (no extra dependency): the index as the first column."""
    t = _flat(df)
    cells = [[fmt(float(v)) if isinstance(v, (float, np.floating)) else str(v) for v in row] for row in t.itertuples(index=False)]
    lines = ["| " + " | ".join(map(str, t.columns)) + " |", "|" + "---|" * len(t.columns)]
    return "\n".join(lines + ["| " + " | ".join(c).replace("\n", " ") + " |" for c in cells])


def _markdown(sections: list[tuple[str, str, pd.DataFrame | None, str]], method: str) -> str:
    body = [f"# pydial report: {method}", ""]
    for title, text, table, fig in sections:
        body += [f"## {title}", ""] + ([text, ""] if text else [])
        if table is not None:
            body += [_markdown_table(table, _float_format(title)), ""]
        if fig:
            body += [f"![{title}]({fig})", ""]
    return "\n".join(body)


def _html(sections: list[tuple[str, str, pd.DataFrame | None, str]], method: str, folder: Path) -> str:
    parts = []
    for title, text, table, fig in sections:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if text:
            parts.append(f"<p>{html.escape(text)}</p>")
        if table is not None:
            parts.append(_flat(table).to_html(float_format=_float_format(title), na_rep="", border=0, index=False))
        if fig:
            data = base64.b64encode((folder / fig).read_bytes()).decode("ascii")
            parts.append(f"<figure><img src='data:image/png;base64,{data}' alt='{html.escape(title)}'>"
                         f"<figcaption>{html.escape(fig)}</figcaption></figure>")
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto}table.dataframe{border-collapse:collapse}"
             "table.dataframe td,table.dataframe th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}"
             "img{max-width:100%}")
    return (f"<html><head><meta charset='utf-8'><title>pydial report: {html.escape(method)}</title>"
            f"<style>{style}</style></head><body><h1>pydial report: {html.escape(method)}</h1>"
            + "".join(parts) + "</body></html>")
