"""One SBC simulation, and the parallel seeded run over simulations and configurations.

Simulation ``sim`` of configuration ``cfg`` (Talts et al. 2018, Algorithm 1):
draw ``theta ~ prior`` (:mod:`.priors`), data ``y ~ p(y | theta)``
(:mod:`.simulate`), ``L`` thinned posterior draws given ``y`` (:mod:`.fit`), and
record the rank ``#{l : theta_l < theta}`` in ``0..L`` of every identified scalar
(:mod:`.quantities`).  Its random numbers come from
``SeedSequence([seed, crc32(cfg.name), sim])``: the same simulation gets the same
parameters and data whichever program (e.g. a modified copy) fits them, and
whichever worker runs it.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from pydial.exceptions import DialError
from pydial.stan import compile_model

from .configs import Config
from .fit import NutsSettings, fit_draws, stan_data
from .priors import draw_prior
from .quantities import identified
from .simulate import simulate_cells

__all__ = ["META", "simulate_once", "run", "rank_columns", "save", "load", "with_program"]

META = ("sim", "L", "error", "divergent", "treedepth_hits", "min_ess_bulk", "min_ess_tail", "min_ess_at", "stepsize",
        "frame_sd", "seconds")
"""Columns of a ranks table besides the ranks (one column per identified scalar)."""


def _seeds(cfg: Config, sim: int, seed: int) -> tuple[np.random.Generator, int]:
    ss = np.random.SeedSequence([seed, zlib.crc32(cfg.name.encode()), sim])
    return np.random.default_rng(ss), int(ss.generate_state(1)[0] % (2**31 - 1)) + 1


def simulate_once(cfg: Config, sim: int, *, seed: int = 2024, settings: NutsSettings = NutsSettings()) -> dict[str, Any]:
    """Run simulation ``sim`` of ``cfg`` and return its row: :data:`META` and the rank of each identified scalar.

    A simulation whose data pydial refuses (:class:`pydial.exceptions.DialError`) or whose
    fit fails is kept with its ``error`` and no ranks (the run reports how many).
    """
    rng, stan_seed = _seeds(cfg, sim, seed)
    row: dict[str, Any] = {"sim": sim, "L": settings.kept, "error": ""}
    theta = draw_prior(rng, cfg)
    llm, human = simulate_cells(rng, theta, cfg)
    try:
        d, inits, metric = stan_data(cfg, llm, human, rng)
        draws, info = fit_draws(cfg, d, inits, seed=stan_seed, settings=settings, inv_metric=metric)
    except (DialError, RuntimeError, ValueError) as e:
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        return row
    row.update(info)
    for name, true in identified(theta).items():
        row[name] = int(np.sum(draws[name] < true))
    return row


def run(configs: Sequence[Config], sims: int, *, jobs: int = 2, seed: int = 2024,
        settings: NutsSettings = NutsSettings(), out_dir: Path | None = None, verbose: bool = True) -> dict[str, pd.DataFrame]:
    """Run ``sims`` simulations of each configuration on ``jobs`` processes (joblib).

    Returns the ranks table of each configuration (and writes ``ranks-<name>.csv`` to
    ``out_dir`` when given).
    """
    from joblib import Parallel, delayed

    out: dict[str, pd.DataFrame] = {}
    for cfg in configs:
        compile_model(cfg.program)                     # once, before the workers load it from the cache
        t0 = time.perf_counter()
        rows = Parallel(n_jobs=jobs)(delayed(simulate_once)(cfg, s, seed=seed, settings=settings) for s in range(sims))
        df = pd.DataFrame(rows).sort_values("sim").reset_index(drop=True)
        df.attrs["wall_seconds"] = time.perf_counter() - t0
        out[cfg.name] = df
        if out_dir is not None:
            save(df, cfg, out_dir)
        if verbose:
            failed = int((df["error"].fillna("") != "").sum())
            print(f"{cfg.name}: {sims} simulations in {df.attrs['wall_seconds']:.0f} s ({jobs} workers), "
                  f"{failed} failed, {int(df['divergent'].fillna(0).gt(0).sum())} with divergences", flush=True)
    return out


def rank_columns(df: pd.DataFrame) -> list[str]:
    """The identified scalars of a ranks table (its columns other than :data:`META`)."""
    return [c for c in df.columns if c not in META]


def save(df: pd.DataFrame, cfg: Config, out_dir: Path) -> Path:
    """Write a ranks table to ``out_dir/ranks-<name>.csv``, the wall time in a ``# wall_seconds`` header line."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"ranks-{cfg.name}.csv"
    with open(path, "w") as f:
        f.write(f"# wall_seconds={df.attrs.get('wall_seconds', float('nan')):.1f} program={cfg.program}\n")
        df.to_csv(f, index=False)
    return path


def load(cfg: Config, out_dir: Path) -> pd.DataFrame:
    """Read the ranks table of ``cfg`` written by :func:`save`."""
    path = out_dir / f"ranks-{cfg.name}.csv"
    with open(path) as f:
        header = f.readline()
    df = pd.read_csv(path, comment="#", keep_default_na=False, na_values=[""])
    df["error"] = df["error"].fillna("")
    df.attrs["wall_seconds"] = float(header.split("wall_seconds=")[1].split()[0])
    return df


def with_program(cfg: Config, program: str) -> Config:
    """Return ``cfg`` fitted by another program (a path to a modified copy of its program); same simulations."""
    return replace(cfg, program=str(program))
