"""``python -m analyses.fuzz run --out analyses/fuzz/results``: run every case and write cases.csv and summary.md."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analyses.fuzz", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the cases and write the results")
    run.add_argument("--out", default="analyses/fuzz/results", help="results folder (cases.csv, summary.md)")
    run.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    run.add_argument("--only", default=None, help="run only cases whose entry point or description contains this text")
    run.add_argument("--hypothesis-scale", type=float, default=1.0, help="multiply the hypothesis example counts")
    run.add_argument("--no-stan", action="store_true", help="leave out the cases that compile or run Stan")
    run.add_argument("--no-hypothesis", action="store_true", help="leave out the hypothesis groups")
    run.add_argument("--list", action="store_true", help="list the cases and exit")
    a = ap.parse_args(argv)

    from . import cases_api, cases_cli, fixtures, harness, hypo

    fixdir = Path(tempfile.mkdtemp(prefix="pydial-fuzz-fixtures-"))
    try:
        cases_api.NS.update(fixtures.build(fixdir))
        cases_cli.FIX["dir"] = str(fixdir)
        cases = cases_api.all_cases() + cases_cli.cli_cases() + cases_cli.fault_cases()
        if not a.no_hypothesis:
            cases += hypo.hypo_cases(a.hypothesis_scale)
        if a.no_stan:
            cases = [c for c in cases if not _uses_stan(c)]
        if a.only:
            cases = [c for c in cases if a.only.casefold() in (c.entry + " " + c.desc).casefold()]
        # the long groups first, so that they overlap the many short cases
        cases.sort(key=lambda c: (c.kind != "hypo", c.timeout < 300))
        if a.list:
            for c in cases:
                print(f"{c.entry}\t{c.desc}")
            return 0
        t0 = time.time()
        rows = harness.run_cases(cases, jobs=a.jobs)
        import pydial

        meta = {"pydial": pydial.__version__, "python": platform.python_version(), "cases run": len(cases),
                "rows (hypothesis examples counted one by one)": len(rows), "parallel jobs": a.jobs,
                "wall time": f"{time.time() - t0:.0f} s",
                "limits": f"per case {harness.MEMORY_CAP // 1024 ** 3} GB address space; time limits per case in the code",
                "reproductions run after": "the fixture code below (analyses/fuzz/fixtures.py SETUP)"}
        harness.write_results(rows, Path(a.out), meta)
        text = (Path(a.out) / "summary.md").read_text()
        setup = "\n## Fixtures of the reproductions\n\n```python\n" + fixtures.SETUP + "```\n"
        (Path(a.out) / "summary.md").write_text(text.replace("\n## Counts by class", setup + "\n## Counts by class", 1))
        print(f"wrote {a.out}/cases.csv and {a.out}/summary.md ({len(rows)} rows)")
    finally:
        shutil.rmtree(fixdir, ignore_errors=True)
    return 0


def _uses_stan(c) -> bool:
    return any(w in (c.entry + c.desc + c.repro) for w in ("stan", "posterior", "compare_intervals", "compare "))


if __name__ == "__main__":
    sys.exit(main())
