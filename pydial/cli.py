"""The ``pydial`` command line: ``check`` and ``fit`` on a long-format CSV.

Bad input ends with a one-line cause and a non-zero exit code, never a traceback:
exit 2 for malformed data or arguments, exit 3 when the design cannot identify the
requested fit.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from .exceptions import ConvergenceWarning, DataError, IdentifiabilityError

EXIT_DATA, EXIT_IDENT = 2, 3


def _load(path: str, human: str):
    from .data import Comparisons
    from .datasets import NAMES
    from .datasets import path as bundled

    src = bundled(path) if path in NAMES else path
    return Comparisons.from_csv(src, human_judge=human)


def _parser() -> argparse.ArgumentParser:
    from .estimators import METHODS
    from .inference import COV_TYPES

    p = argparse.ArgumentParser(
        prog="pydial",
        description=(
            "Statistically sound LLM-as-a-judge evaluation. Input: a CSV with one row per judgment and columns "
            "record_id, judge, item_a, item_b, first (a|b: which response was shown first), winner "
            "(a|b|tie|both_bad). Rows whose judge is the human label name (default 'human') are human labels. "
            "Use 'arena' (real Chatbot Arena data: people and three LLM judges) or 'synthetic' instead of a path "
            "for a bundled data set."
        ),
    )
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="identifiability diagnostics: can the requested fit exist on this design?")
    f = sub.add_parser("fit", help="fit an estimator and write scores, position effects and a report to --out")
    for q in (c, f):
        q.add_argument("data", help="long-format CSV, or a bundled data set: arena, synthetic")
        q.add_argument("--human", default="human", help="judge name of the human labels (default: human)")
        q.add_argument("--rank", type=int, default=1, help="disagreement rank r of the judge score matrix (default 1)")
        q.add_argument("--calibration", choices=("mu", "W"), default="mu",
                       help="calibrate humans along the LLM consensus mu (d=1) or the full space W=[mu,V] (d=r+1)")
        q.add_argument("--method", choices=METHODS, default="dial-anc", help="estimator (default dial-anc)")
    f.add_argument("--cov", choices=COV_TYPES, default=None,
                   help="covariance meat: fisher, binomial, cell (judge-pair clustered, default for LLM methods), record")
    f.add_argument("--level", type=float, default=0.95, help="confidence level of all intervals (default 0.95)")
    f.add_argument("--out", default=None, help="output folder (default: print to the terminal only)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        data = _load(args.data, args.human)
        if args.command == "check":
            from .design import check_design

            rep = check_design(data, rank=args.rank, calibration=args.calibration, method=args.method)
            print(rep.table.to_string(index=False))
            if not rep.ok:
                print(f"pydial: the {args.method} fit cannot exist on this design:", file=sys.stderr)
                print(rep.problems.to_string(index=False), file=sys.stderr)
                return EXIT_IDENT
            print(f"design ok for method {args.method}")
            return 0
        from .estimators import fit

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            res = fit(data, args.method, rank=args.rank, calibration=args.calibration, cov=args.cov, level=args.level)
        for w in caught:
            print(f"warning: {w.message}", file=sys.stderr)
        print(res.summary())
        if args.out:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            res.scores.reset_index().to_csv(out / "scores.csv", index=False)
            if res.position_effects is not None:
                res.position_effects.reset_index().to_csv(out / "position_effects.csv", index=False)
            data.summary().to_csv(out / "data_summary.csv")
            summary = {
                "method": res.method, "rank": res.rank, "calibration": res.calibration, "cov": res.cov_type,
                "level": res.level, "lambda": None if np.isinf(res.lambda_) else res.lambda_,
                "converged": res.converged, "grad_norm": res.grad_norm, "n_human": res.n_human, "n_llm": res.n_llm,
                "scores": res.scores["score"].to_dict(),
            }
            (out / "summary.json").write_text(json.dumps(summary, indent=2))
            (out / "report.md").write_text("```\n" + res.summary() + "\n```\n")
            print(f"wrote {out}/scores.csv, position_effects.csv, summary.json, report.md")
        return 0
    except DataError as e:
        print(f"pydial: bad input: {e}", file=sys.stderr)
        return EXIT_DATA
    except IdentifiabilityError as e:
        print(f"pydial: not identifiable: {e}", file=sys.stderr)
        return EXIT_IDENT
    except (ValueError, FileNotFoundError) as e:
        print(f"pydial: {e}", file=sys.stderr)
        return EXIT_DATA
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
