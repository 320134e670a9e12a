"""Plots and tables of an SBC run: ECDF-difference plots with simultaneous bands, per-scalar tests, a summary.

For each configuration ``results/`` receives ``ranks-<name>.csv`` (written by the
run), ``uniformity-<name>.csv`` (:func:`analyses.sbc.uniformity.uniformity_table`)
and ``ecdf-<name>.png``: per identified scalar the ECDF difference ``F(z) - z`` of
its fractional ranks with the simultaneous 95% band (Säilynoja et al. 2022; the
plot Stan users know from ``bayesplot::ppc_pit_ecdf`` / ``SBC::plot_ecdf_diff``).
``summary.csv`` / ``summary.md`` hold one row per configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from analyses.simulation.compare import _md

from .configs import Config
from .ranks import load, rank_columns
from .uniformity import FAMILY_ALPHA, envelope, ecdf_counts, uniformity_table, verdict

__all__ = ["plot_ecdf_diff", "summarize", "write_report"]


def plot_ecdf_diff(ranks: pd.DataFrame, table: pd.DataFrame, L: int, title: str, path: Path) -> None:
    """Write the ECDF-difference panels of every scalar of a ranks table to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(ranks.columns)
    ncol = 6
    nrow = int(np.ceil(len(names) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(1.75 * ncol, 1.35 * nrow + 0.5), sharex=True, sharey=True,
                             squeeze=False)
    cut = FAMILY_ALPHA / len(names)
    for ax, name in zip(axes.ravel(), names):
        r = ranks[name].dropna().to_numpy(np.int64)
        env = envelope(r.size, L)
        z = np.concatenate([[0.0], env.z, [1.0]])
        lo = np.concatenate([[0.0], env.lower / r.size - env.z, [0.0]])
        hi = np.concatenate([[0.0], env.upper / r.size - env.z, [0.0]])
        diff = np.concatenate([[0.0], ecdf_counts(r, L) / r.size - env.z, [0.0]])
        p = table.loc[name, "ecdf_p"]
        ax.fill_between(z, lo, hi, step="post", color="0.85", lw=0)
        ax.step(z, diff, where="post", lw=0.9, color="C3" if p < cut else "C0")
        ax.axhline(0, color="0.5", lw=0.5)
        ax.set_title(f"{name}  p={p:.2g}", fontsize=7, color="C3" if p < cut else "black")
        ax.tick_params(labelsize=6)
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    fig.suptitle(title, fontsize=8)
    fig.supxlabel("fractional rank z", fontsize=7)
    fig.supylabel("ECDF(z) - z", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def summarize(cfg: Config, ranks: pd.DataFrame, table: pd.DataFrame) -> dict[str, object]:
    """One summary row: design, simulations, sampler diagnostics, tests and the verdict."""
    ok = ranks["error"].fillna("") == ""
    fits = ranks[ok]
    L = int(ranks["L"].iloc[0])
    calibrated, adjusted = verdict(table)
    n = len(table)
    worst = table["ecdf_p"].idxmin()
    return {
        "config": cfg.name,
        "program": Path(cfg.program).name if cfg.program.endswith(".stan") else f"{cfg.program}.stan",
        "ties": cfg.ties or "binary",
        "M": {None: "-", "mu": "mu", "W": "W"}[cfg.calibration],
        "N": cfg.N, "K": cfg.K, "n_llm": cfg.n_llm, "n_human": cfg.n_human,
        "simulations": int(ok.sum()), "failed": int((~ok).sum()), "L": L,
        "scalars": n,
        "min ECDF p (scalar)": f"{table['ecdf_p'].min():.3g} ({worst})",
        "Bonferroni p": round(adjusted, 3),
        "ECDF p<0.05 (exp.)": f"{int((table['ecdf_p'] < 0.05).sum())} ({0.05 * n:.1f})",
        "chi2 p<0.05 (exp.)": f"{int((table['chi2_p'] < 0.05).sum())} ({0.05 * n:.1f})",
        "min chi2 p": float(f"{table['chi2_p'].min():.3g}"),
        "max KS D": round(float(table["ks_D"].max()), 3),
        "fits w/ divergences": int((fits["divergent"] > 0).sum()),
        "divergences": int(fits["divergent"].sum()),
        "treedepth hits": int(fits["treedepth_hits"].sum()),
        "median min ESS": int(np.median(np.minimum(fits["min_ess_bulk"], fits["min_ess_tail"]))),
        "fits min ESS < L": int((np.minimum(fits["min_ess_bulk"], fits["min_ess_tail"]) < L).sum()),
        "wall s": round(float(ranks.attrs.get("wall_seconds", np.nan))),
        "verdict": "calibrated" if calibrated else "NOT calibrated",
    }


def write_report(configs: Sequence[Config], out_dir: Path, *, plots: bool = True) -> pd.DataFrame:
    """Write the uniformity tables, plots and summary of the configurations run into ``out_dir``."""
    rows = []
    for cfg in configs:
        if not (out_dir / f"ranks-{cfg.name}.csv").exists():
            continue
        ranks = load(cfg, out_dir)
        fits = ranks[ranks["error"] == ""]
        L = int(ranks["L"].iloc[0])
        table = uniformity_table(fits[rank_columns(ranks)], L)
        table.round(4).to_csv(out_dir / f"uniformity-{cfg.name}.csv")
        if plots:
            plot_ecdf_diff(fits[rank_columns(ranks)], table, L,
                           f"SBC {cfg.name}: {len(fits)} simulations, L = {L}; 95% simultaneous bands", out_dir /
                           f"ecdf-{cfg.name}.png")
        rows.append(summarize(cfg, ranks, table))
    summary = pd.DataFrame(rows)
    if len(summary):
        summary.to_csv(out_dir / "summary.csv", index=False)
        (out_dir / "summary.md").write_text(
            "# SBC summary\n\nGenerated by `python -m analyses.sbc report`; ranks of every identified scalar "
            "among L thinned NUTS draws (see README.md).  *Bonferroni p*: smallest simultaneous-ECDF-band "
            f"p-value times the number of scalars; the verdict fails below {FAMILY_ALPHA}.\n\n" + _md(summary) + "\n")
    return summary
