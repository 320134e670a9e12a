"""Command line of the synthetic study: run the replications, then draw the figures and comparison.md.

    python -m analyses.simulation --config main --jobs 2      # see analyses/simulation/README.md
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Sequence

from . import study
from .report import write_reports
from .study import RESULTS_DIR, csv_path, resolve_configs, run

def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analyses.simulation", description=study.__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", nargs="+", default=["main"],
                    help="figure(s) main, items20, misaligned, pos-heterogeneity, quick, all, or rows such as main-top")
    ap.add_argument("--reps", type=int, default=50, help="replications per budget (default 50)")
    ap.add_argument("--jobs", type=int, default=max(1, os.cpu_count() or 1), help="parallel workers (default: all cores)")
    ap.add_argument("--backend", choices=("loky", "dask"), default="loky")
    ap.add_argument("--address", default=None, help="dask scheduler address (default: start a LocalCluster)")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR, help=f"results directory (default {RESULTS_DIR})")
    ap.add_argument("--fresh", action="store_true", help="delete the CSVs of the selected rows first")
    ap.add_argument("--report", action="store_true", help="only redraw figures and comparison.md from the CSVs")
    ap.add_argument("--no-report", action="store_true", help="do not draw figures / comparison.md after the run")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    configs = resolve_configs(a.config)
    if a.fresh and not a.report:
        for c in configs:
            csv_path(a.out, c.name).unlink(missing_ok=True)
    if not a.report:
        rec = run(configs, reps=a.reps, jobs=a.jobs, backend=a.backend, address=a.address, out_dir=a.out,
                  progress=not a.no_progress)
        print(f"ran {rec['tasks']} replications of {', '.join(rec['configs'])} in {rec['wall_s']:.1f} s "
              f"(jobs={a.jobs}, backend={a.backend})")
    if not a.no_report:
        for path in write_reports(a.out, figures={c.figure for c in configs} if not a.report else None):
            print(f"wrote {path}")
    return 0


