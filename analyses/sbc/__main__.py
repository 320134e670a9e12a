"""Command line of the SBC study.

Run from the repository root::

    python -m analyses.sbc run                       # every configuration, 200 simulations, 2 workers
    python -m analyses.sbc run --configs judges-binary --sims 50
    python -m analyses.sbc run --configs judges-binary --program /tmp/judges_modified.stan --out /tmp/sbc
    python -m analyses.sbc report                    # tables and plots from the ranks already written
    python -m analyses.sbc prior-predictive
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .configs import CONFIGS, config
from .fit import NutsSettings
from .prior_predictive import write_prior_predictive
from .ranks import run, with_program
from .report import write_report

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and run ``run``, ``report`` or ``prior-predictive``."""
    ap = argparse.ArgumentParser(prog="python -m analyses.sbc", description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["run", "report", "prior-predictive"])
    ap.add_argument("--configs", nargs="+", default=[c.name for c in CONFIGS], help="configuration names")
    ap.add_argument("--sims", type=int, default=200, help="simulations per configuration")
    ap.add_argument("--jobs", type=int, default=2, help="parallel worker processes")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--warmup", type=int, default=NutsSettings.warmup)
    ap.add_argument("--kept", type=int, default=NutsSettings.kept, help="kept (thinned) draws L per fit")
    ap.add_argument("--thin", type=int, default=NutsSettings.thin)
    ap.add_argument("--program", help="a modified copy of the configurations' program to fit instead")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR)
    ap.add_argument("--no-plots", action="store_true")
    a = ap.parse_args(argv)
    configs = [config(n) for n in a.configs]
    if a.program:
        configs = [with_program(c, a.program) for c in configs]
    if a.command == "run":
        t0 = time.perf_counter()
        run(configs, a.sims, jobs=a.jobs, seed=a.seed, settings=NutsSettings(a.warmup, a.kept, a.thin), out_dir=a.out)
        print(f"total wall time {time.perf_counter() - t0:.0f} s")
    if a.command in ("run", "report"):
        summary = write_report(configs, a.out, plots=not a.no_plots)
        print(summary[["config", "simulations", "failed", "Bonferroni p", "fits w/ divergences", "verdict"]]
              .to_string(index=False))
    if a.command == "prior-predictive":
        print(write_prior_predictive(a.out).to_string(index=False))


if __name__ == "__main__":
    main()
