"""Command line of the real-data protocol: run the sweeps, then write the figures and summary.md.

    python -m analyses.realdata run --splits 50 --jobs 2
    python -m analyses.realdata report          # figures + summary.md only
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from . import protocol
from .protocol import FIRTH_METHODS, METHODS, QUICK, QUICK_DIR, RESULTS_DIR, SWEEPS, Config, check_sweep, run
from .report import write_report


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float("inf") if x.strip().lower() in ("all", "inf") else float(x) for x in text.split(",") if x.strip())


def config_from_args(args: argparse.Namespace) -> Config:
    base = QUICK if args.quick else Config()
    kw: dict[str, Any] = {}
    for name, conv in (("splits", int), ("seed", int), ("budgets", _ints), ("scarce_budgets", _ints),
                       ("pure_m", _ints), ("anti_m", _ints), ("llm_budgets", _floats), ("pure_n_human", int),
                       ("anti_n_human", int), ("anti_n_llm", int), ("llm_n_human", int), ("scarce_n_llm", int)):
        v = getattr(args, name, None)
        if v is not None:
            kw[name] = conv(v)
    if args.judges:
        kw["judges"] = tuple(args.judges.split(","))
        if base.pure_template not in kw["judges"]:
            kw["pure_template"] = kw["judges"][0]
    if args.methods:
        kw["methods"] = tuple(args.methods.split(","))
    return dataclasses.replace(base, **kw)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m analyses.realdata", description=protocol.__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("run", "report"), help="run the sweeps (then report), or only report")
    p.add_argument("--out", default=None,
                   help="output directory (default analyses/realdata/results; with --quick analyses/realdata/results_quick)")
    p.add_argument("--sweeps", default=",".join(SWEEPS), help=f"comma-separated subset of {','.join(SWEEPS)}")
    p.add_argument("--jobs", type=int, default=1, help="joblib workers (keep at 1 or 2)")
    p.add_argument("--quick", action="store_true", help="tiny configuration (2 splits, 2 budgets, small sweeps)")
    p.add_argument("--fresh", action="store_true", help="discard existing CSVs of the selected sweeps")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-report", action="store_true", help="run without writing figures and summary.md")
    p.add_argument("--splits", help="number of record splits (default 50)")
    p.add_argument("--seed", help="root seed (default 20260)")
    p.add_argument("--judges", help="comma-separated LLM judge panel (default: all three)")
    p.add_argument("--methods", help=f"comma-separated subset of {','.join(METHODS + tuple(FIRTH_METHODS))}")
    p.add_argument("--budgets", help="n_H grid of human_budget, e.g. 50,100,200")
    p.add_argument("--scarce-budgets", dest="scarce_budgets", help="n_H grid of human_budget_scarce")
    p.add_argument("--scarce-n-llm", dest="scarce_n_llm", help="n_LLM of human_budget_scarce (default 2000)")
    p.add_argument("--pure-m", dest="pure_m", help="numbers of pure-position judges, e.g. 0,2,4,8")
    p.add_argument("--pure-n-human", dest="pure_n_human", help="n_H of the pure-position sweep (default 300)")
    p.add_argument("--anti-m", dest="anti_m", help="numbers of anti-consensus judges, e.g. 0,1,2,3")
    p.add_argument("--anti-n-llm", dest="anti_n_llm", help="n_LLM of the anti-consensus sweep (default 2000)")
    p.add_argument("--anti-n-human", dest="anti_n_human", help="n_H of the anti-consensus sweep (default 1000)")
    p.add_argument("--llm-budgets", dest="llm_budgets", help="n_LLM grid, 'all' for every judgment")
    p.add_argument("--llm-n-human", dest="llm_n_human", help="n_H of the LLM-budget sweep (default 1000)")
    args = p.parse_args(argv)
    cfg = config_from_args(args)
    out = Path(args.out) if args.out else (QUICK_DIR if args.quick else RESULTS_DIR)
    sweeps = [s.strip() for s in args.sweeps.split(",") if s.strip()]
    for s in sweeps:
        check_sweep(s)
    if args.command == "run":
        stats = run(cfg, out, sweeps=sweeps, jobs=args.jobs, progress=not args.no_progress, fresh=args.fresh)
        for s, st in stats.items():
            print(f"{s}: {st['tasks_run']} task(s) in {st['wall_seconds']:.1f} s", file=sys.stderr)
        if args.no_report:
            return 0
    path = write_report(cfg, out)
    print(f"wrote {path}", file=sys.stderr)
    return 0


