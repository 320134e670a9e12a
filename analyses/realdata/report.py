"""Aggregation, figures and ``summary.md`` of the real-data protocol (:mod:`.protocol`).

Means are over the splits whose fit is finite (status ``ok``), with Monte Carlo standard
errors ``sd / sqrt(n_ok)``; the fraction of finite fits is reported beside them, and a
mean over fewer than all splits is flagged (hollow markers in the figures, ``*`` in the
tables).  Non-finite fits (IdentifiabilityError), failures (ConvergenceError) and errors
are counted, never averaged.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pydial.studies.robustness import summarize

from .protocol import LABELS, METHODS, SWEEPS, Config, base_data, load_results

COLORS = {"human": "#555555", "pooled": "#e08214", "dial-nopos": "#8c6bb1", "dial-anc": "#1f78b4",
          "dial-ada": "#d7301f", "atc": "#33a02c"}
MARKERS = {"human": "o", "pooled": "s", "dial-nopos": "v", "dial-anc": "^", "dial-ada": "D", "atc": "P"}
Z = 1.96
MIN_FINITE_PLOT = 3  # a point needs at least this many finite splits to be drawn


# ------------------------------------------------------------------- aggregation
def aggregate(df: pd.DataFrame) -> pd.DataFrame:
    """Per (setting, method) of one sweep: counts by status, finite fraction, means and MC SEs
    (:func:`pydial.studies.robustness.summarize`)."""
    if df.empty:
        return pd.DataFrame()
    return summarize(df).drop(columns=["sweep", "arm"])


# ----------------------------------------------------------------------- figures
def _x(agg: pd.DataFrame, sweep: str) -> pd.Series:
    if sweep == "llm_budget":  # "all" is plotted at its realized size
        return agg["setting"].where(np.isfinite(agg["setting"]), agg["n_llm_mean"])
    return agg["setting"]


def _draw(ax: Any, agg: pd.DataFrame, sweep: str, metric: str, methods: tuple[str, ...], *, logy: bool,
          oracle: bool = False) -> None:
    for m in methods:
        a = agg.loc[(agg["method"] == m)].copy()
        if a.empty:
            continue
        a["x"] = _x(a, sweep)
        a = a.sort_values("x")
        mean, se = a[f"{metric}_mean"], a[f"{metric}_se"].fillna(0.0)
        min_ok = max(1, min(MIN_FINITE_PLOT, int(agg["n_splits"].max())))  # quick runs have 2 splits
        show = (a["n_ok"] >= min_ok) & np.isfinite(mean)
        if not show.any():
            continue
        x, y, s = a["x"][show], mean[show], se[show]
        lo, hi = y - Z * s, y + Z * s
        if logy:
            lo = np.maximum(lo, y / 5)
        ax.fill_between(x, lo, hi, color=COLORS[m], alpha=0.15, lw=0)
        ax.plot(x, y, color=COLORS[m], lw=1.4, label=LABELS[m])
        full = a["frac_finite"][show] >= 1
        ax.scatter(x[full], y[full], color=COLORS[m], marker=MARKERS[m], s=22, zorder=3)
        ax.scatter(x[~full], y[~full], facecolor="white", edgecolor=COLORS[m], marker=MARKERS[m], s=26, zorder=3)
        if oracle and m == "dial-ada" and metric == "excess":
            om = a["oracle_mean"][show]
            ax.plot(x, om, color=COLORS[m], lw=1.0, ls=":", label="DIAL-Ada oracle weight")
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both", lw=0.5)


def plot_human_budget(agg: pd.DataFrame, path: Path, methods: tuple[str, ...], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    _draw(axes[0], agg, "human_budget", "excess", methods, logy=True)
    _draw(axes[1], agg, "human_budget", "tau", methods, logy=False)
    for m in methods:
        a = agg.loc[agg["method"] == m].sort_values("setting")
        if len(a) and (a["frac_finite"] < 1).any():
            wide = m == "human"  # Human and AtC coincide (AtC needs the human MLE): draw Human wider beneath
            axes[2].plot(a["setting"], a["frac_finite"], color=COLORS[m], marker=MARKERS[m], label=LABELS[m],
                         lw=4 if wide else 1.4, alpha=0.5 if wide else 1, ms=9 if wide else 6)
    axes[2].set_ylim(-0.03, 1.03)
    axes[2].grid(alpha=0.3, lw=0.5)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("human calibration budget $n_H$")
    axes[0].set_ylabel("excess held-out human log loss")
    axes[1].set_ylabel(r"Kendall's $\tau$ vs test-pool human BTL")
    axes[2].set_ylabel("fraction of splits with a finite fit")
    if axes[0].lines:
        axes[0].legend(fontsize=8)
    if axes[2].lines:
        axes[2].legend(fontsize=8)
    else:
        axes[2].text(0.5, 0.5, "every fit finite in every split", ha="center", transform=axes[2].transAxes)
    fig.suptitle(title + "\nmeans over finite splits, bands $\\pm1.96$ MC SE; hollow markers: finite in only part of the "
                 f"splits; points with fewer than {MIN_FINITE_PLOT} finite splits omitted (see summary.md)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_robustness(aggs: dict[str, pd.DataFrame], cfg: Config, path: Path, methods: tuple[str, ...]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = [s for s in ("pure_position", "anti_consensus", "llm_budget") if s in aggs and not aggs[s].empty]
    if not cols:
        return
    fig, axes = plt.subplots(2, len(cols), figsize=(4.8 * len(cols), 7.4), squeeze=False)
    titles = {
        "pure_position": f"(a) pure-position judges, $n_H={cfg.pure_n_human}$, P(first wins)={cfg.pure_prob}",
        "anti_consensus": f"(b) anti-consensus judges, $n_H={cfg.anti_n_human}$, $n_{{LLM}}={cfg.anti_n_llm}$ (+ injected)",
        "llm_budget": f"(c) LLM budget, $n_H={cfg.llm_n_human}$",
    }
    xlabels = {"pure_position": "injected pure-position judges $m$", "anti_consensus": "injected anti-consensus judges $m$",
               "llm_budget": "$n_{LLM}$ (tie-excluded panel judgments; rightmost = all)"}
    for c, sweep in enumerate(cols):
        for r, metric in enumerate(("excess", "tau")):
            ax = axes[r, c]
            _draw(ax, aggs[sweep], sweep, metric, methods, logy=(metric == "excess"),
                  oracle=sweep in ("llm_budget", "anti_consensus"))
            if sweep == "llm_budget":
                ax.set_xscale("log")
            else:
                ax.set_xticks(sorted(aggs[sweep]["setting"].unique()))
            ax.set_xlabel(xlabels[sweep])
            if r == 0:
                ax.set_title(titles[sweep], fontsize=9)
        axes[0, c].set_ylabel("excess held-out human log loss") if c == 0 else None
        axes[1, c].set_ylabel(r"Kendall's $\tau$") if c == 0 else None
    handles: dict[str, Any] = {}
    for ax in axes.ravel():
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=len(handles), fontsize=8,
                   frameon=False)
    fig.suptitle("Chatbot Arena robustness sweeps (3 LLM judges, one display order per battle); means over finite "
                 "splits $\\pm1.96$ MC SE; hollow markers: finite in only part of the splits", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)


# ----------------------------------------------------------------------- tables
def _fmt(mean: float, se: float, digits: int) -> str:
    if not np.isfinite(mean):
        return "–"
    if not np.isfinite(se):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {Z * se:.{digits}f}"


def _setting_label(sweep: str, x: float) -> str:
    if np.isinf(x):
        return "all"
    return f"{int(x)}"


def metric_table(agg: pd.DataFrame, sweep: str, metric: str, methods: tuple[str, ...], digits: int,
                 name: str) -> str:
    """Markdown table: settings x methods, ``mean ± 1.96 SE`` over finite splits; ``*`` marks
    means over only part of the splits (``n_ok/n``)."""
    head = f"| {name} | " + " | ".join(LABELS[m] for m in methods) + " |"
    lines = [head, "|" + "---|" * (len(methods) + 1)]
    for x in sorted(agg["setting"].unique()):
        cells = []
        for m in methods:
            a = agg.loc[(agg["setting"] == x) & (agg["method"] == m)]
            if a.empty:
                cells.append("")
                continue
            a = a.iloc[0]
            if a["n_ok"] == 0:
                cells.append(f"not finite (0/{a['n_splits']})")
                continue
            txt = _fmt(a[f"{metric}_mean"], a[f"{metric}_se"], digits)
            if metric == "oracle":
                txt = _fmt(a["oracle_mean"], a["oracle_se"], digits)
            if a["n_ok"] < a["n_splits"]:
                txt += f" *({a['n_ok']}/{a['n_splits']})*"
            cells.append(txt)
        lines.append(f"| {_setting_label(sweep, x)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def status_table(df: pd.DataFrame) -> str:
    bad = df.loc[df["status"] != "ok"]
    if bad.empty:
        return "Every fit of every task returned finite scores."
    g = bad.groupby(["sweep", "setting", "method", "status"]).size().rename("splits").reset_index()
    lines = ["| sweep | setting | method | status | splits |", "|---|---|---|---|---|"]
    for r in g.itertuples():
        lines.append(f"| {r.sweep} | {_setting_label(r.sweep, r.setting)} | {LABELS.get(r.method, r.method)} | "
                     f"{r.status} | {r.splits} |")
    msgs = bad.groupby(["status", "method"])["message"].agg(lambda s: s.astype(str).str.slice(0, 160).value_counts().index[0])
    lines += ["", "Most frequent message per status and method:", ""]
    for (st, m), msg in msgs.items():
        lines.append(f"* {st}, {LABELS.get(m, m)}: `{msg}`")
    return "\n".join(lines)


# ------------------------------------------------------------------ data summary
def data_summary(cfg: Config) -> dict[str, Any]:
    """Counts and LLM-only position effects of the full bundled data (for the notes)."""
    import pydial

    items, hj, long = base_data()
    data = pydial.datasets.arena().subset(judges=list(cfg.judges))
    out: dict[str, Any] = {"battles": int(long["is_human"].sum()), "records": int(long["record_id"].nunique()), "items": len(items),
                           "n_human": data.n_human, "n_llm": data.n_llm}
    per = []
    L = data.llm
    for k, name in enumerate(data.judges):
        m = L.judge == k
        rows = long.loc[long["judge"] == name]
        dec = rows.loc[rows["decisive"]]
        first_wins = float((dec["winner"] == dec["first"]).mean())
        # orientations: pairs seen with the canonical item first and second
        pos = set(zip(L.i[m & (L.a > 0)], L.j[m & (L.a > 0)]))
        neg = set(zip(L.i[m & (L.a < 0)], L.j[m & (L.a < 0)]))
        per.append({"judge": name, "judgments": len(rows), "tie_rate": float((rows["winner"] == "tie").mean()),
                    "first_shown_win_rate": first_wins, "n_plus": int(L.n[m & (L.a > 0)].sum()),
                    "n_minus": int(L.n[m & (L.a < 0)].sum()), "pairs_both_orders": len(pos & neg),
                    "pairs": len(pos | neg)})
    out["judges"] = per
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pydial.fit(data, "dial-anc", rank=cfg.rank)
    pe = res.position_effects
    out["position_effects"] = {k: (float(pe.loc[k, "b"]), float(pe.loc[k, "se"])) for k in pe.index}
    return out


# ---------------------------------------------------------------------- summary
def _get(agg: pd.DataFrame, setting: float, method: str, col: str) -> float:
    a = agg.loc[(agg["setting"] == setting) & (agg["method"] == method), col]
    return float(a.iloc[0]) if len(a) else np.nan


def write_report(cfg: Config, out_dir: Path) -> Path:
    """Aggregate every sweep present in ``out_dir``; write CSV summaries, figures and summary.md."""
    out_dir = Path(out_dir)
    methods = tuple(m for m in METHODS if m in cfg.methods)
    dfs = {s: load_results(out_dir, s, cfg) for s in SWEEPS}
    dfs = {s: d for s, d in dfs.items() if len(d)}
    aggs = {s: aggregate(d) for s, d in dfs.items()}
    for s, a in aggs.items():
        a.to_csv(out_dir / f"{s}_summary.csv", index=False)
    if "human_budget" in aggs:
        plot_human_budget(aggs["human_budget"], out_dir / "fig_human_budget.png", methods,
                          "Chatbot Arena: human-label efficiency with all tie-excluded judgments of the 3 LLM judges")
    if "human_budget_scarce" in aggs:
        plot_human_budget(aggs["human_budget_scarce"], out_dir / "fig_human_budget_scarce.png", methods,
                          f"Chatbot Arena: human-label efficiency with scarce LLM data (n_LLM = {cfg.scarce_n_llm})")
    plot_robustness(aggs, cfg, out_dir / "fig_robustness.png", methods)
    timings = json.loads((out_dir / "timings.json").read_text()) if (out_dir / "timings.json").exists() else {}
    text = _summary_text(cfg, dfs, aggs, timings, methods)
    path = out_dir / "summary.md"
    path.write_text(text)
    return path


def _summary_text(cfg: Config, dfs: dict[str, pd.DataFrame], aggs: dict[str, pd.DataFrame], timings: dict[str, Any],
                  methods: tuple[str, ...]) -> str:
    from .notes import findings, notes

    ds = data_summary(cfg)
    L: list[str] = []
    n_splits = {s: int(d["split"].nunique()) for s, d in dfs.items()}
    L += ["# Real-data protocol on Chatbot Arena (App. \"Real Data\" of the DIAL paper)", "",
          "Generated by `python -m analyses.realdata run` (figures and this file: `... report`). "
          "Per-split rows: `<sweep>.csv`; aggregated: `<sweep>_summary.csv`; figures: `fig_*.png`.", ""]
    L += ["## Data and design", "",
          f"* Bundled `pydial.datasets.arena()`: {ds['battles']:,} battles, {ds['records']:,} distinct records "
          f"(`question_id`; 9 ids occur twice and are kept together by the record split), {ds['items']} models.",
          f"* Decisive human labels {ds['n_human']:,} (ties and both-bad excluded); tie-excluded LLM judgments "
          f"{ds['n_llm']:,} from {len(cfg.judges)} judges ({', '.join(cfg.judges)}).",
          "* Display design: every LLM judge saw each battle **once**, with model_a shown first (an **assumption** "
          "about the source, which does not store the order; see the data README). model_a/model_b vary across "
          "battles, so the pairs occur in both canonical orientations across records (one order per record, both "
          "orientations across records) and the order effects are identified through length-two cycles. There are "
          "no swapped copies, so the paper's display-imbalance sweep (rho_swap) cannot be reproduced.", ""]
    L += ["| judge | judgments | tie rate | first-shown win rate (decisive) | canonical +1 / -1 | pairs seen in both "
          "orders | LLM-only b_k (SE), full data |", "|---|---|---|---|---|---|---|"]
    for j in ds["judges"]:
        b, se = ds["position_effects"].get(j["judge"], (np.nan, np.nan))
        L.append(f"| {j['judge']} | {j['judgments']:,} | {j['tie_rate']:.3f} | {j['first_shown_win_rate']:.3f} | "
                 f"{j['n_plus']:,} / {j['n_minus']:,} | {j['pairs_both_orders']} / {j['pairs']} | {b:.3f} ({se:.3f}) |")
    L += ["", "## Protocol", "",
          f"* {cfg.splits} record splits requested ({', '.join(f'{s}: {n}' for s, n in n_splits.items())} present), "
          f"{cfg.train_frac:.0%}/{1 - cfg.train_frac:.0%} train/test by record; root seed {cfg.seed}.",
          "* Human calibration sample: first n_H of a seeded permutation of the decisive train human labels "
          "(nested budgets, about 13.1k-13.3k labels per split). LLM data: tie-excluded train judgments of the panel, "
          "subsampled (nested, seeded) where a sweep sets n_LLM.",
          "* Reference: human BTL MLE on all decisive test-pool human labels (about 5.6k per split), s_test. "
          "Metrics: excess held-out human log loss l_H^test(s_hat) - l_H^test(s_test) (>= 0 by construction) and "
          "Kendall's tau_b(s_hat, s_test).",
          f"* Methods (rank r = {cfg.rank}, package defaults otherwise: GACV over 7 weights 0.01..10 x n_L/n_H plus "
          "the endpoints for DIAL-Ada and DIAL-noPos): " + ", ".join(LABELS[m] for m in methods) + ".",
          "* Not finite (IdentifiabilityError, e.g. no finite human BTL MLE: the directed human win graph is not "
          "strongly connected) and failed (ConvergenceError) fits are counted, not averaged. Table cells are "
          "mean ± 1.96 MC SE over the finite splits; `*(k/n)*` flags a mean over only k of n splits.",
          f"* Pure-position judges: each judges every train battle of `{cfg.pure_template}` in the same display "
          f"order and prefers the first-shown response with probability {cfg.pure_prob}. Anti-consensus judges: "
          "exact flipped copies of one randomly selected panel judge's retained judgments (one source per split, "
          f"shared by all m), with the panel subsampled to n_LLM = {cfg.anti_n_llm} before injection.", ""]
    L += ["## Run times", "", "| sweep | tasks | wall time | fit time (sum) | jobs |", "|---|---|---|---|---|"]
    for s in SWEEPS:
        if s in timings:
            t = timings[s]
            L.append(f"| {s} | {t['tasks_run']} | {t['wall_seconds'] / 60:.1f} min | {t['fit_seconds'] / 60:.1f} min | "
                     f"{t.get('jobs', '')} |")
    L += ["", "Wall times accumulate over resumed runs; the machine (2 cores) was shared with other jobs.", ""]

    sections = [
        ("human_budget", "Human-label efficiency (all LLM judgments)", "n_H", "fig_human_budget.png"),
        ("human_budget_scarce", f"Human-label efficiency with scarce LLM data (n_LLM = {cfg.scarce_n_llm})", "n_H",
         "fig_human_budget_scarce.png"),
        ("pure_position", f"(a) Injected pure-position judges (n_H = {cfg.pure_n_human})", "m", "fig_robustness.png"),
        ("anti_consensus", f"(b) Injected anti-consensus judges (n_H = {cfg.anti_n_human}, n_LLM = {cfg.anti_n_llm})",
         "m", "fig_robustness.png"),
        ("llm_budget", f"(c) LLM-budget subsampling (n_H = {cfg.llm_n_human})", "n_LLM", "fig_robustness.png"),
    ]
    L += ["## Results", ""]
    for sweep, title, name, fig in sections:
        if sweep not in aggs:
            continue
        a = aggs[sweep]
        L += [f"### {title}", "", f"Figure: `{fig}`. Splits: {n_splits[sweep]}.", "",
              "Excess held-out human log loss:", "", metric_table(a, sweep, "excess", methods, 4, name), "",
              "Kendall's tau vs the test-pool human BTL ranking:", "", metric_table(a, sweep, "tau", methods, 3, name), ""]
        fin = a.loc[a["frac_finite"] < 1]
        if len(fin):
            L += ["Fraction of splits with a finite fit (only methods/settings below 1 listed):", "",
                  "| " + name + " | " + " | ".join(LABELS[m] for m in methods if m in set(fin["method"])) + " |",
                  "|" + "---|" * (1 + len(set(fin["method"]))) ]
            for x in sorted(a["setting"].unique()):
                cells = [f"{_get(a, x, m, 'frac_finite'):.2f}" for m in methods if m in set(fin["method"])]
                L.append(f"| {_setting_label(sweep, x)} | " + " | ".join(cells) + " |")
            L.append("")
        if "dial-ada" in methods:
            lines = ["DIAL-Ada weight selection (fraction of splits selecting lambda = inf, i.e. the anchored "
                     "endpoint / lambda = 0, i.e. Human) and the oracle candidate (smallest test loss on the path):", "",
                     f"| {name} | lambda = inf | lambda = 0 | median multiple of n_L/n_H | oracle excess loss |",
                     "|---|---|---|---|---|"]
            for x in sorted(a["setting"].unique()):
                r = a.loc[(a["setting"] == x) & (a["method"] == "dial-ada")]
                if r.empty:
                    continue
                r = r.iloc[0]
                lines.append(f"| {_setting_label(sweep, x)} | {r['frac_lambda_inf']:.2f} | {r['frac_lambda_zero']:.2f} | "
                             f"{r['median_multiple']:.3g} | {_fmt(r['oracle_mean'], r['oracle_se'], 4)} |")
            L += lines + [""]
        if sweep in ("pure_position", "anti_consensus"):
            r = a.loc[(a["method"] == "dial-anc") & (a["setting"] > 0)]
            if len(r):
                L += ["Mean fitted order effect b_k of the injected judges (DIAL-Anc LLM-only fit): " +
                      ", ".join(f"m={int(x)}: {v:.3f}" for x, v in zip(r["setting"], r["b_injected_mean"])) +
                      (f" (logit({cfg.pure_prob}) = {np.log(cfg.pure_prob / (1 - cfg.pure_prob)):.3f})"
                       if sweep == "pure_position" else ""), ""]
    L += ["## Non-finite fits, failures and errors", "", status_table(pd.concat(dfs.values(), ignore_index=True)), ""]
    unconv = {s: int(((d["status"] == "ok") & ~d["converged"].astype(str).str.lower().eq("true")).sum())
              for s, d in dfs.items()}
    L += ["Finite fits flagged `converged = False` by pydial (an optimizer warning, typically the structured "
          "LLM-only fit at small n_LLM; they are averaged like the others): " +
          ", ".join(f"{s}: {n}" for s, n in unconv.items()) + ".", ""]
    L += ["## Findings (compare qualitatively with the paper)", ""] + findings(cfg, dfs, aggs) + [""]
    L += ["## Notes and caveats", ""] + notes(cfg) + [""]
    return "\n".join(L)
