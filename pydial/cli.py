"""The ``pydial`` command line: ``check``, ``fit``, ``simulate``, ``convert``, ``compare``, ``plan``, ``judges``.

Every failure is one line on stderr and an exit code (2 bad input, 3 not identifiable, 4 no admissible fit, 5 sampler
problems, 130 Ctrl-C), never a traceback; the table of exit codes is in the command-line guide (``docs/guide/cli.md``).
"""

from __future__ import annotations

import argparse
import errno
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, NoReturn, Sequence

import numpy as np

from pydial.data.construction import DUPLICATES
from pydial.data.ingest import COLUMN_HINT, COLUMNS
from pydial.model.methods import DEFAULT_METHOD

from . import __version__
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
from .outputs import check_output_dir, check_output_file, output_dir, output_file, write_interval_table

EXIT_DATA, EXIT_IDENT, EXIT_FIT, EXIT_SAMPLER, EXIT_INTERRUPTED = 2, 3, 4, 5, 130  # 130: 128 + SIGINT, as shells report

DESCRIPTION = """\
Statistically sound LLM-as-a-judge evaluation (DIAL).

Input: a CSV (.csv, .csv.gz) or Parquet (.parquet) file with one row per judgment and columns
  record_id  the prompt/record (judgments of one record stay together)
  judge      judge name; rows of the human judge (default 'human') are human labels
  item_a, item_b  the two items (models) compared
  first      a|b: which response was displayed first (ignored for human rows)
  winner     a|b|tie|both_bad
Columns named otherwise are mapped with --judge-col annotator, --item-a-col model_a, ...
or --columns judge=annotator,item_a=model_a,...  Instead of a path, 'arena' (real Chatbot
Arena data: people and three LLM judges) or 'synthetic' names a bundled data set.

Each LLM judge gets its own position effect b_k (b > 0: the first-shown item is
favoured) separated from its preferences; judges share a consensus score plus rank-r
disagreement; human labels calibrate that consensus (dial-anc) or are weighed against
it with a weight chosen by GACV, an approximate leave-one-out criterion (dial-ada).
"""


@contextmanager
def _warnings_to_stderr(skip: tuple[type[Warning], ...] = ()) -> Iterator[list]:
    """Print pydial's warnings as ``pydial: warning: ...`` lines, collecting but not printing those of ``skip``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DialWarning)
        yield caught
    for w in caught:
        if issubclass(w.category, DialWarning) and not issubclass(w.category, skip):
            print(f"pydial: warning: {w.message}", file=sys.stderr)


def _load(args: argparse.Namespace):
    from pydial.data.comparisons import Comparisons
    from pydial.data.datasets import NAMES, load
    from pydial.data.files import is_parquet

    # the bundled data sets through load: their documented duplicated rows raise no warning
    read: Any = load if args.data in NAMES else Comparisons.from_parquet if is_parquet(args.data) else Comparisons.from_csv
    with _warnings_to_stderr(), _column_hints():
        return read(args.data, human_judge=args.human, drop_empty_judges=args.drop_empty_judges,
                    strip_names=not args.keep_whitespace, allow_similar_names=args.allow_similar_names,
                    duplicates=args.duplicates, covariates=args.covariates,
                    covariate_transform=args.covariate_transform, columns=_column_mapping(args))


def _column_flag(field: str) -> str:
    """Return the option naming the file's column for ``field``: ``item_a -> --item-a-col``."""
    return f"--{field.replace('_', '-')}-col"


CLI_COLUMN_HINT = ("Map other names with " + ", ".join(f"{_column_flag(c)} NAME" for c in COLUMNS)
                   + ", or --columns judge=NAME,item_a=NAME,...")
"""How the command line maps column names (replaces the readers' ``columns=`` hint)."""


@contextmanager
def _column_hints() -> Iterator[None]:
    """Re-raise a missing-column :class:`DataError` with the command-line options instead of Python keywords."""
    try:
        yield
    except DataError as e:
        msg = str(e)
        if COLUMN_HINT in msg:
            msg = msg.replace(COLUMN_HINT, CLI_COLUMN_HINT)
        elif "missing column" in msg:
            msg = f"{msg}. {CLI_COLUMN_HINT}"
        else:
            raise
        raise DataError(msg) from e


def _columns(text: str) -> dict[str, str]:
    """Parse ``--columns judge=annotator,item_a=model_a`` into pydial's field -> the file's column name."""
    out: dict[str, str] = {}
    for part in (x.strip() for x in text.split(",") if x.strip()):
        field, sep, name = (x.strip() for x in part.partition("="))
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"expected FIELD=COLUMN pairs, got {part!r}")
        if field not in COLUMNS:
            raise argparse.ArgumentTypeError(f"unknown field {field!r}; the fields are {', '.join(COLUMNS)}")
        if field in out:
            raise argparse.ArgumentTypeError(f"field {field!r} given twice")
        out[field] = name
    if not out:
        raise argparse.ArgumentTypeError(f"expected FIELD=COLUMN pairs, got {text!r}")
    return out


def _column_mapping(args: argparse.Namespace) -> dict[str, str]:
    """Return ``--columns`` and ``--<field>-col`` as the readers' ``columns`` (a field mapped twice: :class:`ArgumentError`)."""
    mapping = dict(args.columns or {})
    for field in COLUMNS:
        name = getattr(args, f"col_{field}")
        if name is None:
            continue
        if mapping.get(field, name) != name:
            raise ArgumentError(f"{_column_flag(field)} {name!r} contradicts --columns {field}={mapping[field]}")
        mapping[field] = name
    return mapping


def _add_column_args(q: argparse.ArgumentParser, scope: str = "") -> None:
    """Add the options mapping pydial's six fields to a file's column names (``scope``: where they apply)."""
    g = q.add_argument_group("column names", "map the six fields to a file's columns named otherwise "
                                             f"(e.g. an Arena table's model_a, model_b){scope}")
    for field in COLUMNS:
        flags = [_column_flag(field)] + (["--record-col"] if field == "record_id" else [])
        g.add_argument(*flags, dest=f"col_{field}", metavar="NAME", default=None,
                       help=f"the file's column holding {field} (default: {field})")
    g.add_argument("--columns", type=_columns, default=None, metavar="FIELD=NAME,...",
                   help=f"several at once, e.g. 'judge=annotator,item_a=model_a'; fields: {', '.join(COLUMNS)}")


def _seed(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer, got {text!r}") from None
    if not 0 <= seed < 2**32:
        raise argparse.ArgumentTypeError(f"seed must be in [0, 2**32), got {seed}")
    return seed


def _add_output(q: argparse.ArgumentParser, files: str) -> None:
    """Add ``--out DIR`` (the folder of ``files``, written aside and moved into place) and ``--force``."""
    q.add_argument("--out", default=None, metavar="DIR",
                   help=f"output folder for {files} (default: print only); written aside and moved into place when "
                        "complete; a folder of an earlier pydial run is replaced as a whole")
    q.add_argument("--force", action="store_true",
                   help="write into a non-empty folder pydial did not write (only pydial's own files are replaced)")


@contextmanager
def _plots_into(args: argparse.Namespace) -> Iterator[Path]:
    """Yield the temporary folder of ``--out``, with matplotlib's non-interactive backend."""
    import matplotlib

    matplotlib.use("Agg")
    with output_dir(args.out, force=args.force, command=f"pydial {args.command}") as out:
        yield out


def _add_seed(q: argparse.ArgumentParser, what: str) -> None:
    q.add_argument("--seed", type=_seed, default=0, help=f"random seed of {what} (default 0)")


def _list_of(kind: type, what: str, allow_empty: bool = True) -> Any:
    """Return the parser of a comma-separated list of ``kind`` (``what``: its name in the usage error)."""

    def parse(text: str) -> list[Any]:
        try:
            values = [kind(x.strip()) for x in text.split(",") if x.strip()]
        except ValueError:
            values = None
        if values is None or not (values or allow_empty):
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {text!r}")
        return values

    return parse


_floats, _ints, _names = _list_of(float, "numbers"), _list_of(int, "integers"), _list_of(str, "names", False)


def _non_negative_int(text: str) -> int:
    """Return a count that may be 0 (``--next``, ``--n-boot``); argparse's usage error names the option."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _rank(text: str):
    if text == "auto":
        return "auto"
    try:
        vals = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"rank must be an integer, a comma-separated list or 'auto', got {text!r}") from None
    return vals[0] if len(vals) == 1 else vals


def _add_data_args(q: argparse.ArgumentParser) -> None:
    """Input and model-space options shared by every subcommand that reads comparisons."""
    q.add_argument("data", help="long-format CSV (.csv, .csv.gz) or Parquet (.parquet) file, or a bundled data set: "
                                "arena, synthetic")
    q.add_argument("--human", default="human", help="judge name of the human labels (default: human)")
    q.add_argument("--rank", type=_rank, default=None, metavar="R",
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
    q.add_argument("--covariates", type=_names, default=None, metavar="NAME,...",
                   help="response covariates, e.g. 'length,md_lists': columns <name>_a and <name>_b of the two "
                        "responses; the scores are then style-controlled (z = 0)")
    q.add_argument("--covariate-transform", choices=("difference", "normalized"), default="difference",
                   help="comparison covariate: x_a - x_b (default) or (x_a - x_b) / (x_a + x_b); divided by its "
                        "standard deviation (reported)")
    _add_column_args(q)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line ``pydial fit: error: ... (see pydial fit --help)``, exit 2."""

    commands: dict[str, argparse.ArgumentParser]
    """The subcommands' parsers by name (set on the top-level parser by :func:`_parser`)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_DATA, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")

    def parse_command_line(self, argv: Sequence[str] | None) -> argparse.Namespace:
        """Parse ``argv``; an unrecognized argument is reported by the subcommand's parser it was given to."""
        args, extra = self.parse_known_args(argv)
        if extra:
            self.commands.get(getattr(args, "command", None) or "", self).error(
                f"unrecognized arguments: {' '.join(extra)}")
        return args


class _Help(argparse.HelpFormatter):
    """Help with each option's default: appended as ``(default: X)`` unless the text already names it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (action.option_strings and "default" not in text and action.default not in (None, False, argparse.SUPPRESS)
                and action.nargs != 0):
            text += " (default: %(default)s)"
        return text


def _command(sub: Any, name: str, text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=text, description=text, formatter_class=_Help)


def _parser() -> _Parser:
    from pydial.estimation.estimators import METHODS
    from pydial.inference.linearization import COV_TYPES
    from pydial.stan.bayes import POSTERIOR_METHODS

    from .report import REPORT_FORMATS

    p = _Parser(prog="pydial", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"pydial {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    c = _command(sub, "check", "identifiability diagnostics: can the requested fit exist on this design?")
    f = _command(sub, "fit", "fit an estimator; write scores, position effects, GACV path, plots and a report")
    cmp_ = _command(sub, "compare", "frequentist (sandwich) vs Bayesian intervals of one estimator: the fit of "
                                    "--method and the Stan NUTS posterior of exactly that estimator")
    for q in (c, f, cmp_):
        _add_data_args(q)
    for q in (c, f):
        q.add_argument("--method", choices=METHODS, default=DEFAULT_METHOD,
                       help="estimator: judges (each judge alone), human, pooled, dial-nopos (no position effects), "
                            "dial-anc (anchored), dial-ada (GACV-weighted; default), atc")
    _add_seed(c, "the generic-rank design checks")
    _add_seed(f, "the design checks and of Stan (--engine stan)")
    for q in (f, cmp_):
        q.add_argument("--cov-type", choices=COV_TYPES, default=None,
                       help="covariance meat: fisher, binomial, cell (judge-pair clustered; default for LLM methods), record")
        q.add_argument("--level", type=float, default=0.95, help="confidence level of all intervals (default 0.95)")
        _add_output(q, "the tables, plots and report")
        q.add_argument("--ties", choices=("davidson", "rao-kupper"), default=None,
                       help="use tie outcomes with this tie model (default: decisive outcomes only)")
    f.add_argument("--cluster-correction", action="store_true",
                   help="scale the clustered meats (cell, record) by the small-sample factor G/(G-1)")
    f.add_argument("--lambda", dest="lambda_", type=_floats, default=None, metavar="L1,L2,...",
                   help="explicit candidate weights, comma-separated (dial-ada)")
    f.add_argument("--multiples", type=_floats, default=None, metavar="M1,M2,...",
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
    cmp_.add_argument("--method", choices=POSTERIOR_METHODS, default=DEFAULT_METHOD,
                      help="estimator compared: dial-ada (GACV-selected lambda; power posterior at that lambda), "
                           "dial-anc (cut posterior), dial-nopos, judges, human (default dial-ada); pooled and atc "
                           "have no posterior counterpart")
    cmp_.add_argument("--warmup", type=int, default=1000, help="NUTS warm-up iterations per chain (default 1000)")
    cmp_.add_argument("--adapt-delta", type=float, default=0.9, help="NUTS target acceptance rate (default 0.9)")
    cmp_.add_argument("--allow-warnings", action="store_true",
                      help="exit 0 even when the sampler reports divergences, R-hat or ESS problems (default: exit 5)")
    cmp_.add_argument("--chains", type=int, default=4, help="NUTS chains (default 4)")
    cmp_.add_argument("--draws", type=int, default=1000, help="draws per chain after warm-up (default 1000)")
    _add_seed(cmp_, "the sampler, its initial values and the design checks")
    _add_study_commands(sub)
    p.commands = dict(sub.choices)
    return p


def _add_study_commands(sub: Any) -> None:
    """Add the subcommands around a fit: ``simulate``, ``convert``, ``plan``, ``judges`` and ``robustness``."""
    from pydial.studies.planning import DESIGNS, OBJECTIVES, PLAN_MODES

    s = _command(sub, "simulate", "long-format synthetic data from the paper's data-generating process")
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
    _add_seed(s, "the true parameters and the judgments")

    v = _command(sub, "convert", "convert Arena / MT-Bench / PandaLM / CSV/Parquet judgments to the long format")
    v.add_argument("format", choices=("arena", "mtbench", "pandalm", "table"))
    v.add_argument("inputs", nargs="+",
                   help="arena: JUDGE=FILE.jsonl[.gz] pairs (the human one named by --human); mtbench/pandalm/table: one file")
    v.add_argument("--out", required=True, help="output CSV")
    v.add_argument("--human", default="human", help="judge name of the human labels (arena)")
    v.add_argument("--first", choices=("a", "b"), default="a", help="which response the LLM judges saw first (arena, pandalm)")
    v.add_argument("--judge", default="judge", help="judge name for PandaLM files without a judge column")
    _add_column_args(v, "; format table only")

    q = _command(sub, "plan", "from pilot data: predicted excess risk, interval widths and top-k accuracy per "
                              "human budget, and the next human comparisons to collect")
    _add_data_args(q)
    q.add_argument("--method", choices=("human", "dial-anc", "dial-ada"), default="dial-anc",
                   help="pilot fit (default dial-anc)")
    q.add_argument("--budgets", type=_ints, default=[100, 200, 400, 800, 1600, 3200], metavar="N1,N2,...",
                   help="candidate human budgets, comma-separated (default 100,...,3200)")
    q.add_argument("--target", default=None, help="contrast 'item_a - item_b' (default: the pilot's top-1 vs top-2)")
    q.add_argument("--k", type=int, default=1, help="size of the top set for P(top-k correct) (default 1)")
    q.add_argument("--mode", choices=PLAN_MODES, default="theory",
                   help="first-order theory (default) or parametric simulation from the pilot")
    q.add_argument("--design", choices=DESIGNS, default="pilot", help="human pair probabilities (default pilot)")
    q.add_argument("--n-sim", type=int, default=100, help="replications per budget with --mode simulate (default 100)")
    q.add_argument("--jobs", type=int, default=1, help="parallel workers with --mode simulate (default 1)")
    _add_seed(q, "the pilot's design checks, --mode simulate and the top-k Monte Carlo")
    q.add_argument("--next", type=_non_negative_int, default=0, help="also propose this many next human comparisons (default 0)")
    q.add_argument("--objective", choices=OBJECTIVES, default="contrast",
                   help="design objective of --next: contrast (default), ranking (top-k boundary), D")
    _add_output(q, "plan.csv, plan.png, next_pairs.csv")

    q = _command(sub, "judges", "read a judge panel's responses.jsonl files (both display orders) and diagnose each "
                                "judge: swap inconsistency, first-position, tie and both-bad rates, human agreement")
    q.add_argument("source", nargs="+", metavar="FILE_OR_FOLDER",
                   help="responses.jsonl files, or folders of them (e.g. <study>/results with one folder per judge)")
    q.add_argument("--max-tie-rate", type=float, default=None,
                   help="leave out judges whose tie rate exceeds this (the paper: 0.5); default keep all")
    q.add_argument("--both-orders", action="store_true",
                   help="keep a judge's verdicts on a record only when it judged the record in both orders")
    q.add_argument("--n-boot", type=_non_negative_int, default=1000,
                   help="record-bootstrap replicates of the intervals (default 1000)")
    q.add_argument("--level", type=float, default=0.95, help="level of the intervals (default 0.95)")
    _add_seed(q, "the record bootstrap")
    _add_output(q, "judges.csv, judges.png, panel_counts.csv, data_summary.csv")

    q = _command(sub, "robustness", "position-robustness sweeps over seeded record splits (display imbalance, "
                                    "injected pure-position / anti-consensus judges, LLM and human budgets)")
    _add_data_args(q)
    q.add_argument("--out", required=True, metavar="DIR",
                   help="folder of the per-sweep CSVs (appended per task: a rerun resumes), summary.csv, robustness.png")
    q.add_argument("--sweeps", type=_names, default=["display", "pure_position"], metavar="NAME,...",
                   help="display, pure_position, anti_consensus, llm_budget, human_budget")
    q.add_argument("--splits", type=int, default=50, help="number of record splits")
    q.add_argument("--jobs", type=int, default=1, help="parallel workers (joblib)")
    q.add_argument("--backend", default=None, help="joblib backend, e.g. dask (needs a running dask cluster)")
    q.add_argument("--methods", type=_names, default=["human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc"],
                   metavar="NAME,...", help="estimators fitted on every task")
    q.add_argument("--judges", type=_names, default=None, metavar="NAME,...", help="LLM judge panel (default: all)")
    q.add_argument("--n-human", type=float, default=None,
                   help="human budget of the non-human-budget sweeps (default: the paper's 300 / 1000)")
    q.add_argument("--train-frac", type=float, default=0.7, help="fraction of records in the train pool")
    q.add_argument("--fresh", action="store_true", help="discard the CSVs of these sweeps in --out first")
    q.add_argument("--seed", type=_seed, default=20260, help="root seed of the splits and draws")


def _fit(args: argparse.Namespace) -> int:
    from pydial.api import fit

    from .report import write_report

    data = _load(args)
    with _warnings_to_stderr(skip=() if args.allow_nonconverged else (ConvergenceWarning, CovarianceWarning)) as caught:
        res = fit(data, args.method, rank=args.rank, calibration=args.calibration, cov_type=args.cov_type, level=args.level,
                  engine=args.engine, lambda_=args.lambda_, multiples=args.multiples, include_endpoints=not args.no_endpoints,
                  check=not args.no_check, ties=args.ties, penalty=args.penalty,
                  cluster_correction=args.cluster_correction, seed=args.seed)
        if not res.ok and not args.allow_nonconverged:
            caught.clear()
            print(f"pydial: fit failed ({args.method}): {res.verdict()}; pass --allow-nonconverged to keep the "
                  "marked numbers", file=sys.stderr)
            return EXIT_FIT
    print(res.summary())
    if args.out is not None:
        paths = write_report(res, data, args.out, fmt=args.format, force=args.force)
        print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def _compare(args: argparse.Namespace) -> int:
    import json

    from pydial.api import fit

    from .stan import SamplerWarning, compare_intervals, posterior

    for flag, value in (("--level", args.level), ("--adapt-delta", args.adapt_delta)):
        if not 0.0 < value < 1.0:
            raise ArgumentError(f"{flag} must be in (0, 1), got {value}")
    data = _load(args)
    with _warnings_to_stderr(skip=(SamplerWarning,)):
        res = fit(data, args.method, rank=args.rank, calibration=args.calibration, cov_type=args.cov_type, level=args.level,
                  ties=args.ties, seed=args.seed)
    if not res.ok:
        print(f"pydial: the frequentist fit failed: {res.verdict()}", file=sys.stderr)
        return EXIT_FIT
    # the posterior of exactly this estimator (its lambda, rank, calibration, ties and b convention)
    with _warnings_to_stderr(skip=(SamplerWarning,)):
        idata = posterior(data, like=res, chains=args.chains, draws=args.draws, warmup=args.warmup, seed=args.seed,
                          options={"adapt_delta": args.adapt_delta})
    tab = compare_intervals(res, idata, level=args.level)
    print(f"# {tab.attrs['estimand']}\n# {tab.attrs['interval']}")
    print(tab.to_string())
    problems = json.loads(idata.attrs["sampler_problems"])
    if args.out is not None:
        with _plots_into(args) as tmp:
            write_interval_table(tab, tmp / "compare_intervals.csv")
            tab.plot().savefig(tmp / "compare_intervals.png", dpi=120)
            idata.to_netcdf(str(tmp / "posterior.nc"))
        print("wrote " + ", ".join(str(Path(args.out) / n) for n in
                                   ("compare_intervals.csv", "compare_intervals.png", "posterior.nc")))
    if problems and not args.allow_warnings:  # one line: the problems and what to change
        print(f"pydial: the sampler reported problems: {'; '.join(problems)}; pass --allow-warnings to accept "
              "the draws", file=sys.stderr)
        return EXIT_SAMPLER
    for q in problems:
        print(f"pydial: sampler warning: {q}", file=sys.stderr)
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from pydial.studies.simulate import simulate

    check_output_file(args.out)
    behavior = {"overdispersion": args.overdispersion, "sigma_pos": args.sigma_pos, "p_first": args.p_first}
    sim = simulate(args.items, args.judges, args.rank, args.n_llm, args.n_human, target=args.target,
                   behavior=behavior, seed=args.seed)
    with output_file(args.out) as tmp:
        sim.frame.to_csv(tmp, index=False)
    print(f"wrote {len(sim.frame)} judgments to {args.out}")
    return 0


def _convert(args: argparse.Namespace) -> int:
    from pydial.data import io

    check_output_file(args.out)
    columns = _column_mapping(args)
    if columns and args.format != "table":
        raise ArgumentError(f"column names (--columns, --<field>-col) apply to 'convert table', not {args.format!r}")
    if args.format == "arena":
        for item in args.inputs:
            if "=" not in item:
                raise DataError(f"arena inputs are JUDGE=FILE pairs, got {item!r}")
        pairs = dict(item.split("=", 1) for item in args.inputs)
        frame, rep = io.from_arena(pairs, human_judge=args.human, first=args.first)
    elif len(args.inputs) != 1:
        raise DataError(f"{args.format} takes one input file, got {len(args.inputs)}")
    elif args.format == "mtbench":
        frame, rep = io.from_mtbench(args.inputs[0])
    elif args.format == "pandalm":
        frame, rep = io.from_pandalm(args.inputs[0], judge=args.judge, first=args.first)
    else:
        with _column_hints():
            frame, rep = io.from_table(args.inputs[0], columns=columns)
    with output_file(args.out) as tmp:
        frame.to_csv(tmp, index=False)
    print(rep)
    print(f"wrote {len(frame)} rows to {args.out}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from pydial.estimation.spec import rank_candidates
    from pydial.model.chart import DEFAULT_CALIBRATION, DEFAULT_RANK
    from pydial.model.identifiability import check_design

    data = _load(args)
    rank = DEFAULT_RANK if args.rank is None else args.rank
    ranks = rank_candidates(rank, data, "dial-ada" if rank == "auto" or isinstance(rank, list) else args.method)
    failed = []
    for r in ranks:
        rep = check_design(data, rank=r, calibration=args.calibration or DEFAULT_CALIBRATION, method=args.method,
                           seed=args.seed)
        print(rep.table.to_string(index=False))
        if not rep.ok:
            reasons = "; ".join(f"{row['judge']}: {row['condition']}: {row['detail']}" for _, row in rep.problems.iterrows())
            failed.append(f"the {args.method} fit (rank {r}) cannot exist on this design: {reasons}")
        else:
            print(f"design ok for method {args.method} (rank {r})")
    if failed:  # one line on stderr; the design tables are on stdout
        print("pydial: " + " ".join(" | ".join(failed).split()), file=sys.stderr)
        return EXIT_IDENT
    return 0


def _plan(args: argparse.Namespace) -> int:
    from pydial.api import fit
    from pydial.studies.pair_design import next_pairs
    from pydial.studies.planning import plan, plot_plan

    data = _load(args)
    with _warnings_to_stderr(skip=(ConvergenceWarning,)) as caught:
        res = fit(data, args.method, rank=args.rank, calibration=args.calibration, seed=args.seed)
        if not res.ok:  # a plan from a failed pilot would look like any other
            caught.clear()
            print(f"pydial: pilot fit failed ({args.method}): {res.verdict()}", file=sys.stderr)
            return EXIT_FIT
    methods = ("human",) if data.K == 0 else ("human", "dial-anc", "dial-ada")
    tab = plan(res, budgets=args.budgets, target=args.target, k=args.k, methods=methods,
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
    if args.out is not None:
        with _plots_into(args) as out:
            tab.to_csv(out / "plan.csv", index=False)
            plot_plan(tab).savefig(out / "plan.png", dpi=120)
            if nxt is not None:
                nxt.to_csv(out / "next_pairs.csv", index=False)
    return 0


def _judges(args: argparse.Namespace) -> int:
    from pydial.data.panel import panel_counts, read_judge_responses
    from pydial.studies.diagnostics import judge_diagnostics, plot_judge_diagnostics

    with _warnings_to_stderr():
        data = read_judge_responses(args.source, max_tie_rate=args.max_tie_rate,
                                    require_both_orders=args.both_orders, drop_empty_judges=True)
        tab = judge_diagnostics(data, n_boot=args.n_boot, seed=args.seed, level=args.level)
    summary = data.summary()
    print(summary.loc[[i for i in summary.index if str(i).startswith("panel:")]].to_string(header=False))
    print(tab[list(tab.columns[:6])].to_string(float_format=lambda x: f"{x:.3f}"))
    if args.out is not None:
        with _plots_into(args) as out:
            tab.to_csv(out / "judges.csv")
            panel_counts(data).to_csv(out / "panel_counts.csv")
            summary.to_csv(out / "data_summary.csv")
            plot_judge_diagnostics(tab).figure.savefig(out / "judges.png", dpi=120)
    return 0


def _robustness(args: argparse.Namespace) -> int:
    from pydial.studies.robustness import command

    if args.rank is not None and not isinstance(args.rank, int):
        raise DataError(f"--rank must be one integer for robustness sweeps, got {args.rank!r}")
    data = _load(args)
    with _warnings_to_stderr():
        path = command(data, args.out, sweeps=args.sweeps, splits=args.splits, methods=args.methods,
                       judges=args.judges, n_jobs=args.jobs, backend=args.backend, seed=args.seed,
                       train_frac=args.train_frac, rank=1 if args.rank is None else args.rank, n_human=args.n_human,
                       fresh=args.fresh, progress=False)
    print(f"wrote {path}")
    return 0


WRITE_ERRNOS: tuple[int, ...] = tuple(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM")
                                     if hasattr(errno, n))
"""Errors of writing (disk full, quota, read-only, no permission) that name ``--out`` when the system names no file."""


def _line(error: BaseException) -> str:
    """Return the message of ``error`` on one line (line breaks and runs of spaces become one space)."""
    return " ".join(str(error).split()) or type(error).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``pydial`` command line and return its exit code (0, or 2/3/4/5 on failure; usage errors exit 2)."""
    args = _parser().parse_command_line(argv)
    run = {"check": _check, "fit": _fit, "simulate": _simulate, "convert": _convert, "compare": _compare,
           "plan": _plan, "judges": _judges, "robustness": _robustness}[args.command]
    try:
        if "force" in args and args.out is not None:  # the --out DIR of _add_output, checked before any work
            check_output_dir(args.out, force=args.force)
        return run(args)
    except OutputError as e:
        message, code = _line(e), EXIT_DATA
    except DataError as e:
        message, code = f"bad input: {_line(e)}", EXIT_DATA
    except MemoryError as e:  # MemoryLimitError: refused before the work, with the estimate
        message, code = f"too large: {_line(e)}", EXIT_DATA
    except IdentifiabilityError as e:
        message, code = f"not identifiable: {_line(e)}", EXIT_IDENT
    except (ConvergenceError, FloatingPointError, np.linalg.LinAlgError) as e:
        message, code = f"fit failed: {_line(e)}", EXIT_FIT
    except NotImplementedError as e:
        message, code = f"not available: {_line(e)}", EXIT_DATA
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0
    except OSError as e:  # a write error for which the system names no file names the output path
        out = getattr(args, "out", None)
        unnamed = e.filename is None and e.errno in WRITE_ERRNOS and out
        message, code = (f"cannot write {out}: {e.strerror or _line(e)}" if unnamed else _line(e)), EXIT_DATA
    except ValueError as e:
        message, code = _line(e), EXIT_DATA
    except DialError as e:  # e.g. no Stan backend
        message, code = f"{type(e).__name__}: {_line(e)}", EXIT_FIT
    except KeyboardInterrupt:
        message, code = "interrupted", EXIT_INTERRUPTED
    print(f"pydial: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
