"""The ``pydial`` command line: ``check``, ``fit``, ``simulate``, ``convert``, ``compare``, ``plan``.

Bad input ends with a one-line cause and a non-zero exit code, never a traceback:
exit 2 for malformed data, arguments or output paths (checked before fitting), exit 3
when the design cannot identify the requested fit, exit 4 when no admissible fit
exists: the optimizer did not converge, a parameter is on the box bound, no weight
candidate is admissible, or a covariance is degenerate (``fit --allow-nonconverged``
keeps such numbers, marked by their status), exit 5 when ``compare``'s sampler reports
divergences, R-hat or ESS problems (``--allow-warnings`` keeps the results; the table,
plot and InferenceData are written in either case when ``--out`` is given).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from pydial.data.comparisons import DUPLICATES

from .exceptions import (
    ArgumentError,
    ConvergenceError,
    ConvergenceWarning,
    CovarianceWarning,
    DataError,
    DialError,
    DialWarning,
    IdentifiabilityError,
    OutputError,
)
from .outputs import check_output_dir, check_output_file, output_dir, output_file

EXIT_DATA, EXIT_IDENT, EXIT_FIT, EXIT_SAMPLER = 2, 3, 4, 5

DESCRIPTION = """\
Statistically sound LLM-as-a-judge evaluation (DIAL).

Input: a CSV (.csv, .csv.gz) or Parquet (.parquet) file with one row per judgment and columns
  record_id  the prompt/record (judgments of one record stay together)
  judge      judge name; rows of the human judge (default 'human') are human labels
  item_a, item_b  the two items (models) compared
  first      a|b: which response was displayed first (ignored for human rows)
  winner     a|b|tie|both_bad
Instead of a path, 'arena' (real Chatbot Arena data: people and three LLM judges) or
'synthetic' names a bundled data set.

Each LLM judge gets its own position effect b_k (b > 0: the first-shown item is
favoured) separated from its preferences; judges share a consensus score plus rank-r
disagreement; human labels calibrate that consensus (dial-anc) or are weighed against
it with a weight chosen by GACV, an approximate leave-one-out criterion (dial-ada).
"""


@contextmanager
def _warnings_to_stderr(skip: tuple[type[Warning], ...] = ()) -> Iterator[list]:
    """Print pydial's warnings as ``pydial: warning: ...`` lines.

    Not Python's two-line format; warnings of the classes in ``skip`` are collected
    but not printed.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DialWarning)
        yield caught
    for w in caught:
        if issubclass(w.category, DialWarning) and not issubclass(w.category, skip):
            print(f"pydial: warning: {w.message}", file=sys.stderr)


def _load(args: argparse.Namespace):
    from pydial.data.comparisons import Comparisons
    from pydial.data.datasets import NAMES
    from pydial.data.datasets import path as bundled
    from pydial.data.files import is_parquet

    src = bundled(args.data) if args.data in NAMES else args.data
    read = Comparisons.from_parquet if is_parquet(src) else Comparisons.from_csv
    with _warnings_to_stderr():
        return read(src, human_judge=args.human, drop_empty_judges=args.drop_empty_judges,
                    strip_names=not args.keep_whitespace, allow_similar_names=args.allow_similar_names,
                    duplicates=args.duplicates, covariates=args.covariates,
                    covariate_transform=args.covariate_transform)


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _names(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return names


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _rank(text: str):
    if text == "auto":
        return "auto"
    try:
        vals = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"rank must be an integer, a comma-separated list or 'auto', got {text!r}") from None
    return vals[0] if len(vals) == 1 else vals


class _Renamed(argparse.Action):
    """An option with a new name whose old spelling still works for one release, with a note on stderr."""

    def __init__(self, option_strings: list[str], dest: str, *, old: str, **kwargs: Any) -> None:
        self.old = old
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if option_string == self.old:
            new = next(o for o in self.option_strings if o != self.old)
            print(f"pydial: {self.old} is deprecated; use {new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _add_data_args(q: argparse.ArgumentParser) -> None:
    """Input and model-space options shared by every subcommand that reads comparisons."""
    q.add_argument("data", help="long-format CSV (.csv, .csv.gz) or Parquet (.parquet) file, or a bundled data set: "
                                "arena, synthetic")
    q.add_argument("--human", default="human", help="judge name of the human labels (default: human)")
    q.add_argument("--rank", type=_rank, default=None,
                   help="disagreement rank r of the judge score matrix (default 1); a list '0,1,2' or 'auto' selects "
                        "it by GACV (dial-ada); methods without the structured LLM model ignore it with a warning")
    q.add_argument("--calibration", choices=("mu", "W"), default=None,
                   help="calibrate humans along the LLM consensus mu (d=1, default) or the full space W=[mu,V] (d=r+1); "
                        "dial methods only")
    q.add_argument("--drop-empty-judges", action="store_true",
                   help="remove LLM judges without a decisive judgment (all ties / both bad) instead of refusing them")
    q.add_argument("--keep-whitespace", action="store_true",
                   help="keep surrounding whitespace in judge and item names (default: strip it and report)")
    q.add_argument("--allow-similar-names", action="store_true",
                   help="keep names differing only by letter case or whitespace as distinct (default: refuse them)")
    q.add_argument("--duplicates", choices=DUPLICATES, default="keep",
                   help="rows identical in all six columns: keep (default), drop, or raise; always counted")
    q.add_argument("--covariates", type=_names, default=None,
                   help="response covariates, e.g. 'length,md_lists': columns <name>_a and <name>_b of the two "
                        "responses; the scores are then style-controlled (z = 0)")
    q.add_argument("--covariate-transform", choices=("difference", "normalized"), default="difference",
                   help="comparison covariate: x_a - x_b (default) or (x_a - x_b) / (x_a + x_b); divided by its "
                        "standard deviation (reported)")


def _parser() -> argparse.ArgumentParser:
    from pydial.estimation.estimators import METHODS
    from pydial.inference.linearization import COV_TYPES

    from .report import REPORT_FORMATS

    p = argparse.ArgumentParser(prog="pydial", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="identifiability diagnostics: can the requested fit exist on this design?")
    f = sub.add_parser("fit", help="fit an estimator; write scores, position effects, GACV path, plots and a report")
    cmp_ = sub.add_parser("compare", help="frequentist (sandwich) vs Bayesian intervals of one estimator: the fit of "
                                          "--model and the Stan NUTS posterior of exactly that estimator")
    for q in (c, f, cmp_):
        _add_data_args(q)
    for q in (c, f):
        q.add_argument("--method", choices=METHODS, default="dial-ada",
                       help="estimator: judges (each judge alone), human, pooled, dial-nopos, dial-anc (anchored), "
                            "dial-ada (GACV-weighted; default), atc")
    for q in (f, cmp_):
        q.add_argument("--cov-type", "--cov", dest="cov_type", action=_Renamed, old="--cov", choices=COV_TYPES, default=None,
                       help="covariance meat: fisher, binomial, cell (judge-pair clustered; default for LLM methods), record")
        q.add_argument("--level", type=float, default=0.95, help="confidence level of all intervals (default 0.95)")
        q.add_argument("--out", default=None,
                       help="output folder (default: print only); written aside and moved into place when complete; "
                            "a folder of an earlier pydial run is replaced as a whole")
        q.add_argument("--force", action="store_true",
                       help="write into a non-empty folder pydial did not write (only pydial's own files are replaced)")
        q.add_argument("--ties", choices=("davidson", "rao-kupper"), default=None,
                       help="use tie outcomes with this tie model (default: decisive outcomes only)")
    f.add_argument("--cluster-correction", action="store_true",
                   help="scale the clustered meats (cell, record) by the small-sample factor G/(G-1)")
    f.add_argument("--lambda", "--lambdas", dest="lambda_", action=_Renamed, old="--lambdas", type=_floats, default=None,
                   help="explicit candidate weights, comma-separated (dial-ada)")
    f.add_argument("--multiples", type=_floats, default=None,
                   help="candidate weights as multiples of n_LLM/n_H (default: 7 log-spaced from 0.01 to 10)")
    f.add_argument("--no-endpoints", action="store_true", help="exclude lambda=0 and lambda=inf from GACV selection")
    f.add_argument("--format", choices=REPORT_FORMATS, default="md", help="report format (default md)")
    f.add_argument("--allow-nonconverged", action="store_true",
                   help="keep the numbers of a fit that did not converge, hit the box bound or had no admissible "
                        "candidate (marked by its status in the summary and summary.json) instead of exit 4")
    f.add_argument("--no-check", action="store_true",
                   help="skip the design checks of check_design (exit 3); the fit's own verdict still applies")
    f.add_argument("--penalty", choices=("firth",), default=None,
                   help="bias-reduced (Firth / Jeffreys-prior) fit: finite estimates under separation")
    f.add_argument("--engine", choices=("numpy", "stan"), default="numpy",
                   help="optimizer: numpy (default) or the same model through Stan's optimizer")
    cmp_.add_argument("--method", "--model", dest="method", action=_Renamed, old="--model",
                      choices=("dial-ada", "dial-anc", "judges", "human"), default="dial-ada",
                      help="estimator compared: dial-ada (GACV-selected lambda; power posterior at that lambda), "
                           "dial-anc (cut posterior), judges, human (default dial-ada)")
    cmp_.add_argument("--warmup", type=int, default=1000, help="NUTS warm-up iterations per chain (default 1000)")
    cmp_.add_argument("--adapt-delta", type=float, default=0.9, help="NUTS target acceptance rate (default 0.9)")
    cmp_.add_argument("--allow-warnings", action="store_true",
                      help="exit 0 even when the sampler reports divergences, R-hat or ESS problems (default: exit 5)")
    cmp_.add_argument("--chains", type=int, default=4, help="NUTS chains (default 4)")
    cmp_.add_argument("--draws", type=int, default=1000, help="draws per chain after warm-up (default 1000)")
    cmp_.add_argument("--seed", type=int, default=1, help="random seed (default 1)")

    s = sub.add_parser("simulate", help="long-format synthetic data from the paper's data-generating process")
    s.add_argument("out", help="output CSV")
    s.add_argument("--items", "-N", type=int, default=10, help="number of items N (default 10)")
    s.add_argument("--judges", "-K", type=int, default=4, help="number of LLM judges K (default 4)")
    s.add_argument("--rank", type=int, default=1, help="disagreement rank r (default 1)")
    s.add_argument("--n-llm", type=int, default=20000, help="LLM judgments (default 20000)")
    s.add_argument("--n-human", type=int, default=800, help="human judgments (default 800)")
    s.add_argument("--target", choices=("consensus", "misaligned"), default="consensus",
                   help="human target: the LLM consensus mu, or W c with a disagreement component")
    s.add_argument("--overdispersion", type=float, default=0.0, help="sd of judge-pair effects on the LLM logit (default 0)")
    s.add_argument("--sigma-pos", type=float, default=0.0, help="sd of pair-varying position effects (default 0)")
    s.add_argument("--p-first", type=float, default=0.75, help="probability the canonical item is shown first (default 0.75)")
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")

    v = sub.add_parser("convert", help="convert Arena / MT-Bench / PandaLM / CSV/Parquet judgments to the long format")
    v.add_argument("format", choices=("arena", "mtbench", "pandalm", "table"))
    v.add_argument("inputs", nargs="+",
                   help="arena: JUDGE=FILE.jsonl[.gz] pairs (the human one named by --human); mtbench/pandalm/table: one file")
    v.add_argument("--out", required=True, help="output CSV")
    v.add_argument("--human", default="human", help="judge name of the human labels (arena)")
    v.add_argument("--first", choices=("a", "b"), default="a", help="which response the LLM judges saw first (arena, pandalm)")
    v.add_argument("--judge", default="judge", help="judge name for PandaLM files without a judge column")
    _plan_parser(sub)
    return p


def _fit(args: argparse.Namespace) -> int:
    from pydial.api import fit

    from .report import write_report

    if args.out:
        check_output_dir(args.out, force=args.force)
    data = _load(args)
    with _warnings_to_stderr(skip=() if args.allow_nonconverged else (ConvergenceWarning, CovarianceWarning)) as caught:
        res = fit(data, args.method, rank=args.rank, calibration=args.calibration, cov_type=args.cov_type, level=args.level,
                  engine=args.engine, lambda_=args.lambda_, multiples=args.multiples, include_endpoints=not args.no_endpoints,
                  check=not args.no_check, ties=args.ties, penalty=args.penalty,
                  cluster_correction=args.cluster_correction)
        if not res.ok and not args.allow_nonconverged:
            caught.clear()
            print(f"pydial: fit failed ({args.method}): {res.verdict()}; pass --allow-nonconverged to keep the "
                  "marked numbers", file=sys.stderr)
            return EXIT_FIT
    print(res.summary())
    if args.out:
        paths = write_report(res, data, args.out, fmt=args.format, force=args.force)
        print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def _compare(args: argparse.Namespace) -> int:
    import json

    from pydial.api import fit

    from .stan import SamplerWarning, compare_intervals, posterior

    if args.out:
        check_output_dir(args.out, force=args.force)
    if not 0.0 < args.level < 1.0:
        raise ArgumentError(f"--level must be in (0, 1), got {args.level}")
    if not 0.0 < args.adapt_delta < 1.0:
        raise ArgumentError(f"--adapt-delta must be in (0, 1), got {args.adapt_delta}")
    data = _load(args)
    with _warnings_to_stderr(skip=(SamplerWarning,)):
        res = fit(data, args.method, rank=args.rank, calibration=args.calibration, cov_type=args.cov_type, level=args.level,
                  ties=args.ties)
    if not res.ok:
        print(f"pydial: the frequentist fit failed: {res.verdict()}", file=sys.stderr)
        return EXIT_FIT
    # the posterior of exactly this estimator (its lambda, rank, calibration, ties and b convention)
    with _warnings_to_stderr(skip=(SamplerWarning,)):
        idata = posterior(data, like=res, chains=args.chains, draws=args.draws, warmup=args.warmup, seed=args.seed,
                          adapt_delta=args.adapt_delta)
    tab = compare_intervals(res, idata, level=args.level)
    print(f"# {tab.attrs['estimand']}")
    print(f"# {tab.attrs['interval']}")
    print(tab.to_string())
    problems = json.loads(idata.attrs["sampler_problems"])
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        with output_dir(args.out, force=args.force, command="pydial compare") as tmp:
            tab.to_csv(tmp / "compare_intervals.csv")
            fig = tab.plot()
            fig.savefig(tmp / "compare_intervals.png", dpi=120)
            idata.to_netcdf(str(tmp / "posterior.nc"))
        print("wrote " + ", ".join(str(Path(args.out) / n) for n in
                                   ("compare_intervals.csv", "compare_intervals.png", "posterior.nc")))
    if problems:
        for q in problems:
            print(f"pydial: sampler warning: {q}", file=sys.stderr)
        if not args.allow_warnings:
            print("pydial: the sampler reported problems (above); pass --allow-warnings to accept the draws",
                  file=sys.stderr)
            return EXIT_SAMPLER
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from pydial.studies.simulate import simulate

    check_output_file(args.out)
    sim = simulate(args.items, args.judges, args.rank, args.n_llm, args.n_human, target=args.target,
                   overdispersion=args.overdispersion, sigma_pos=args.sigma_pos, p_first=args.p_first, seed=args.seed)
    with output_file(args.out) as tmp:
        sim.frame.to_csv(tmp, index=False)
    print(f"wrote {len(sim.frame)} judgments to {args.out}")
    return 0


def _convert(args: argparse.Namespace) -> int:
    from pydial.data import io

    check_output_file(args.out)
    if args.format == "arena":
        pairs = {}
        for item in args.inputs:
            if "=" not in item:
                raise DataError(f"arena inputs are JUDGE=FILE pairs, got {item!r}")
            name, path = item.split("=", 1)
            pairs[name] = path
        frame, rep = io.from_arena(pairs, human_judge=args.human, first=args.first)
    elif len(args.inputs) != 1:
        raise DataError(f"{args.format} takes one input file, got {len(args.inputs)}")
    elif args.format == "mtbench":
        frame, rep = io.from_mtbench(args.inputs[0])
    elif args.format == "pandalm":
        frame, rep = io.from_pandalm(args.inputs[0], judge=args.judge, first=args.first)
    else:
        frame, rep = io.from_table(args.inputs[0])
    with output_file(args.out) as tmp:
        frame.to_csv(tmp, index=False)
    print(rep)
    print(f"wrote {len(frame)} rows to {args.out}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from pydial.model.identifiability import check_design

    data = _load(args)
    from pydial.estimation.estimators import rank_candidates
    from pydial.model.chart import DEFAULT_CALIBRATION, DEFAULT_RANK

    rank = DEFAULT_RANK if args.rank is None else args.rank
    ranks = rank_candidates(rank, data, "dial-ada" if rank == "auto" or isinstance(rank, list) else args.method)
    status = 0
    for r in ranks:
        rep = check_design(data, rank=r, calibration=args.calibration or DEFAULT_CALIBRATION, method=args.method)
        print(rep.table.to_string(index=False))
        if not rep.ok:
            print(f"pydial: the {args.method} fit (rank {r}) cannot exist on this design:", file=sys.stderr)
            for _, row in rep.problems.iterrows():
                print(f"  {row['judge']}: {row['condition']}: {row['detail']}", file=sys.stderr)
            status = EXIT_IDENT
        else:
            print(f"design ok for method {args.method} (rank {r})")
    return status


def _plan_parser(sub) -> None:
    """Add the ``plan`` subcommand: budgets for human labels and the next pairs to label."""
    from pydial.studies.planning import DESIGNS, OBJECTIVES, PLAN_MODES

    q = sub.add_parser("plan", help="from pilot data: predicted excess risk, interval widths and top-k accuracy per "
                                    "human budget, and the next human comparisons to collect")
    _add_data_args(q)
    q.add_argument("--method", choices=("human", "dial-anc", "dial-ada"), default="dial-anc",
                   help="pilot fit (default dial-anc)")
    q.add_argument("--budgets", type=_ints, default=[100, 200, 400, 800, 1600, 3200],
                   help="candidate human budgets, comma-separated (default 100,...,3200)")
    q.add_argument("--target", default=None, help="contrast 'item_a - item_b' (default: the pilot's top-1 vs top-2)")
    q.add_argument("--k", type=int, default=1, help="size of the top set for P(top-k correct) (default 1)")
    q.add_argument("--mode", choices=PLAN_MODES, default="theory",
                   help="first-order theory (default) or parametric simulation from the pilot")
    q.add_argument("--design", choices=DESIGNS, default="pilot", help="human pair probabilities (default pilot)")
    q.add_argument("--n-sim", type=int, default=100, help="replications per budget with --mode simulate (default 100)")
    q.add_argument("--jobs", type=int, default=1, help="parallel workers with --mode simulate (default 1)")
    q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    q.add_argument("--next", type=int, default=0, help="also propose this many next human comparisons (default 0)")
    q.add_argument("--objective", choices=OBJECTIVES, default="contrast",
                   help="design objective of --next: contrast (default), ranking (top-k boundary), D")
    q.add_argument("--out", default=None, help="output folder for plan.csv, plan.png, next_pairs.csv (written aside "
                                               "and moved into place)")
    q.add_argument("--force", action="store_true", help="write into a non-empty folder pydial did not write")


def _plan(args: argparse.Namespace) -> int:
    from pydial.api import fit
    from pydial.studies.planning import next_pairs, plan, plot_plan

    if args.out:
        check_output_dir(args.out, force=args.force)
    data = _load(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = fit(data, args.method, rank=args.rank, calibration=args.calibration)
    if not res.ok:  # a plan from a failed pilot would look like any other
        print(f"pydial: pilot fit failed ({args.method}): {res.verdict()}", file=sys.stderr)
        return EXIT_FIT
    methods = ("human",) if data.K == 0 else ("human", "dial-anc", "dial-ada")
    tab = plan(res, budgets=[int(b) for b in args.budgets], target=args.target, k=args.k, methods=methods,
               method=args.mode, design=args.design, n_sim=args.n_sim, n_jobs=args.jobs, seed=args.seed)
    print(f"pilot: {args.method} fit, n_H={data.n_human}, n_LLM={data.n_llm}; target {tab.attrs['target']}, "
          f"k={tab.attrs['k']}, mode={args.mode}")
    print(tab.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    nxt = None
    if args.next:
        nxt = next_pairs(res, args.next, args.objective, target=args.target, k=args.k)
        print(f"\nnext {args.next} human comparisons ({nxt.attrs['target']}: {nxt.attrs['before']:.4g} -> "
              f"{nxt.attrs['after']:.4g}):")
        print(nxt.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        with output_dir(args.out, force=args.force, command="pydial plan") as out:
            tab.to_csv(out / "plan.csv", index=False)
            plot_plan(tab).savefig(out / "plan.png", dpi=120)
            if nxt is not None:
                nxt.to_csv(out / "next_pairs.csv", index=False)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``pydial`` command line; returns the exit code (0, or 2/3/4/5 on failure)."""
    args = _parser().parse_args(argv)
    run = {"check": _check, "fit": _fit, "simulate": _simulate, "convert": _convert, "compare": _compare,
           "plan": _plan}[args.command]
    try:
        return run(args)
    except OutputError as e:
        print(f"pydial: {e}", file=sys.stderr)
        return EXIT_DATA
    except DataError as e:
        print(f"pydial: bad input: {e}", file=sys.stderr)
        return EXIT_DATA
    except IdentifiabilityError as e:
        print(f"pydial: not identifiable: {e}", file=sys.stderr)
        return EXIT_IDENT
    except (ConvergenceError, FloatingPointError, np.linalg.LinAlgError) as e:
        print(f"pydial: fit failed: {str(e).splitlines()[0]}", file=sys.stderr)
        return EXIT_FIT
    except NotImplementedError as e:
        print(f"pydial: not available: {str(e).splitlines()[0]}", file=sys.stderr)
        return EXIT_DATA
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0
    except (ValueError, OSError) as e:
        print(f"pydial: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return EXIT_DATA
    except DialError as e:  # e.g. no Stan backend
        print(f"pydial: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
        return EXIT_FIT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
