r"""Figures and the comparison table of the synthetic study.

``write_reports(out_dir)`` draws ``simu-<figure>.png`` for every figure whose CSVs
are present (rows = top/bottom, columns = excess risk (log y), Kendall's tau,
coverage, RMSE(b); means with +-1.96 Monte Carlo SE bands; dotted first-order
benchmarks), writes ``summary.csv`` (mean, MC SE, median per point) and
``comparison.md`` (each number of the paper's "Numerical summary" paragraphs beside
ours; see :mod:`analyses.simulation.compare`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from .study import (
    CONFIGS,
    FIGURES,
    METHODS,
    RESULTS_DIR,
    Config,
    benchmark,
    load,
    summarize,
)

STYLE = {
    "Human": dict(color="#222222", marker="o"),
    "Pooled": dict(color="#8c564b", marker="v"),
    "DIAL-noPos": dict(color="#9467bd", marker="^"),
    "DIAL-Anc": dict(color="#1f77b4", marker="s"),
    "DIAL-Ada": dict(color="#d62728", marker="D"),
    "DIAL-Ada (W)": dict(color="#ff7f0e", marker="P"),
    "Oracle": dict(color="#2ca02c", marker="*"),
}
BENCH_STYLE = {"human": ("#222222", r"$(N-1)/(2n_H)$"), "mu": ("#1f77b4", r"$1/(2n_H)$"),
               "W": ("#ff7f0e", r"$(r+1)/(2n_H)$")}
PANELS = {  # metric, title, methods shown
    "excess_risk": ("Excess human risk", METHODS),
    "kendall_tau": (r"Kendall's $\tau$", METHODS),
    "coverage": ("95% contrast coverage", tuple(m for m in METHODS if m != "Oracle")),
    "rmse_b": (r"RMSE$(\hat b, b)$", ("Pooled", "DIAL-noPos", "DIAL-Anc", "DIAL-Ada", "DIAL-Ada (W)")),
}
XLABEL = {"n_human": r"$n_H$", "n_llm": r"$n_{LLM}$", "sigma_pos": r"$\sigma_{pos}$"}


def _panel(ax, summ: pd.DataFrame, cfg: Config, metric: str) -> None:
    title, methods = PANELS[metric]
    for method in methods:
        g = summ[(summ.method == method) & (summ.metric == metric)].sort_values("x")
        if g.empty or g["mean"].isna().all():
            continue
        x, m, se = g["x"].to_numpy(float), g["mean"].to_numpy(float), np.nan_to_num(g["se"].to_numpy(float))
        st = STYLE[method]
        lw = 1.4
        if metric == "rmse_b" and method == "Pooled":  # coincides with DIAL-noPos: wider band beneath
            ax.fill_between(x, m - 1.96 * se - 0.01, m + 1.96 * se + 0.01, color=st["color"], alpha=0.25, lw=0)
            ax.plot(x, m, color=st["color"], lw=4, alpha=0.5, label=method)
            continue
        ax.fill_between(x, np.maximum(m - 1.96 * se, 1e-6) if metric == "excess_risk" else m - 1.96 * se,
                        m + 1.96 * se, color=st["color"], alpha=0.15, lw=0)
        ax.plot(x, m, color=st["color"], marker=st["marker"], ms=4, lw=lw, label=method,
                ls=":" if method == "Oracle" else "-")
        if metric == "coverage" and method == "DIAL-Ada":
            gb = summ[(summ.method == method) & (summ.metric == "coverage_binomial")].sort_values("x")
            if not gb.empty and gb["mean"].notna().any():
                mb, sb = gb["mean"].to_numpy(float), np.nan_to_num(gb["se"].to_numpy(float))
                ax.fill_between(x, mb - 1.96 * sb, mb + 1.96 * sb, color=st["color"], alpha=0.08, lw=0)
                ax.plot(x, mb, color=st["color"], ls="--", lw=1.0, marker="d", ms=3, mfc="white",
                        label="DIAL-Ada, binomial meat")
    if metric == "excess_risk":
        ax.set_yscale("log")
        xs = np.asarray(sorted(summ["x"].unique()), float)
        n_h = xs if cfg.x_name == "n_human" else np.full(xs.size, cfg.budgets[0].n_human, float)
        # bottom rows (n_H fixed, LLM misspecified): only the Human benchmark is meaningful
        for kind in (cfg.benchmarks if cfg.x_name == "n_human" else ("human",)):
            color, lab = BENCH_STYLE[kind]
            ax.plot(xs, benchmark(kind, cfg, n_h), ls=(0, (1, 1.5)), color=color, lw=1.2, label=lab)
    if metric == "coverage":
        ax.axhline(0.95, color="grey", lw=0.8, ls="--")
    if cfg.x_name in ("n_human", "n_llm"):
        ax.set_xscale("log", base=2)
        xs = sorted(summ["x"].unique())
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{int(v):,}" for v in xs], rotation=45, fontsize=7)
        ax.minorticks_off()
    ax.set_xlabel(XLABEL[cfg.x_name])
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)


def plot_figure(figure: str, df: pd.DataFrame, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [CONFIGS[n] for n in FIGURES[figure] if n in set(df["config"])]
    metrics_ = ["excess_risk", "kendall_tau", "rmse_b"] if figure == "pos-heterogeneity" else list(PANELS)
    fig, axes = plt.subplots(len(rows), len(metrics_), figsize=(3.6 * len(metrics_), 3.2 * len(rows) + 0.9),
                             squeeze=False)
    for r, cfg in enumerate(rows):
        summ = summarize(df[df.config == cfg.name])
        for c, m in enumerate(metrics_):
            _panel(axes[r, c], summ, cfg, m)
        b = cfg.budgets[0]
        if cfg.x_name == "n_human":
            lab = f"{cfg.panel}: $n_{{LLM}}$={b.n_llm:,}" + (", overdispersion" if b.overdispersion else "")
        elif cfg.x_name == "n_llm":
            lab = f"{cfg.panel}: $n_H$={b.n_human:,}" + (f", overdispersion {b.overdispersion:g}" if b.overdispersion else "")
        else:
            lab = f"$n_H$={b.n_human:,}, $n_{{LLM}}$={b.n_llm:,}"
        axes[r, 0].set_ylabel(lab)
    reps = df.groupby(["config", "x"])["rep"].nunique()
    cfg0 = rows[0]
    fig.suptitle(f"Fig. simu-{figure}: N={cfg0.N}, K={cfg0.K}, r={cfg0.r}, target={cfg0.target}; "
                 f"means $\\pm$1.96 MC SE over {reps.min()}" + (f"-{reps.max()}" if reps.max() != reps.min() else "")
                 + " replications", fontsize=11)
    handles: dict = {}
    for ax in axes.ravel():
        for h, l in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(l, h)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=min(6, len(handles)),
               fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.09 if len(handles) > 6 else 0.06, 1, 0.96))
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def write_reports(out_dir: Path = RESULTS_DIR, figures: Iterable[str] | None = None) -> list[Path]:
    """Figures of ``figures`` (default: all with results), ``summary.csv`` and ``comparison.md``."""
    from .compare import write_comparison

    out_dir = Path(out_dir)
    df = load(out_dir=out_dir)
    written: list[Path] = []
    if df.empty:
        return written
    present = {CONFIGS[c].figure for c in df["config"].unique()}
    for fig in sorted(present if figures is None else set(figures) & present):
        written.append(plot_figure(fig, df[df.config.isin(FIGURES[fig])], out_dir / f"simu-{fig}.png"))
    summ = summarize(df)
    summ.to_csv(out_dir / "summary.csv", index=False)
    written.append(out_dir / "summary.csv")
    written.append(write_comparison(df, out_dir / "comparison.md"))
    return written
