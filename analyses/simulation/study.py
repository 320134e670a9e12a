r"""The paper's synthetic study (Sec. "Synthetic experiments", App. "Simulation Studies").

One command per figure regenerates its per-replication results, its PNG and the
comparison with the paper's "Numerical summary" paragraphs::

    python -m analyses.simulation --config main --jobs 2            # Fig. simu-main
    python -m analyses.simulation --config misaligned --jobs 2      # Fig. simu-misaligned
    python -m analyses.simulation --config pos-heterogeneity        # Fig. simu-pos-heterogeneity
    python -m analyses.simulation --config items20 --reps 50        # Fig. simu-items20
    python -m analyses.simulation --report                          # figures + comparison.md only

``--config`` takes a figure (``main``, ``items20``, ``misaligned``,
``pos-heterogeneity``, ``quick``, ``all``) or one row of it (``main-top``,
``main-bottom``, ...).  Every replication is seeded from a stable hash of
``(row, budget, replication)`` (:func:`task_seed`), so the numbers do not depend on
``--jobs`` nor on the backend nor on the order in which replications finish.

Results are appended to ``results/<row>.csv`` one replication (all methods) at a
time; a rerun skips the replications already there (resume after an interruption,
or raise ``--reps`` to add replications).  ``--fresh`` deletes them first.

Dask
----
``--backend dask`` runs the same replications through joblib's dask backend
(``joblib.parallel_config(backend="dask")``) on a ``distributed.Client``:
``--address tcp://scheduler:8786`` connects to a running cluster, without it a
``LocalCluster`` with ``--jobs`` single-threaded worker processes is started.  The
scheduler and workers need the same environment with ``pydial`` installed; the
``analyses`` package is uploaded to them as a zip (``Client.upload_file``), so they do
not need the repository.  Results come back to the client, which alone writes the CSV
files.  As for any joblib backend, a cluster with a single worker thread runs the
replications in the client process.  Needs ``pip install "dask[distributed]"``.

Methods (column ``method``)
---------------------------
``Human`` (Fisher covariance), ``Pooled``, ``DIAL-noPos`` (DIAL-Ada with ``b = 0``),
``DIAL-Anc``, ``DIAL-Ada``, ``DIAL-Ada (W)`` (judge-pair cell clustered covariance),
and ``Oracle``: among the admissible candidates of DIAL-Ada's weight path (the
endpoints ``lambda = 0`` and ``inf`` included) the one with the smallest population
excess human risk against the truth.  Structured fits use the true rank and
``multiples = pydial.estimation.selection.SIMULATION_MULTIPLES``.

Metrics: excess human risk, Kendall's tau against ``s_H``, coverage of the 95%
intervals of all pairwise contrasts (``coverage``; plus ``coverage_binomial`` for
DIAL-Ada with the binomial meat), ``rmse_b`` (``b_hat = 0`` for Pooled and
DIAL-noPos; NaN for Human and Oracle), the selected ``lambda`` and its
``multiple`` of ``n_LLM / n_H``, and ``failed`` / ``error`` (a
:class:`pydial.ConvergenceError` or :class:`pydial.IdentifiabilityError` is a failure,
reported and not averaged).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import pydial
from pydial.studies import metrics
from pydial.exceptions import ConvergenceWarning, DialError
from pydial.estimation.selection import SIMULATION_MULTIPLES

RESULTS_DIR = Path(__file__).resolve().parent / "results"
LEVEL = 0.95
STUDY_VERSION = 1  # part of every seed: bump to draw new data sets

METHODS: tuple[str, ...] = ("Human", "Pooled", "DIAL-noPos", "DIAL-Anc", "DIAL-Ada", "DIAL-Ada (W)", "Oracle")
ORDER_AGNOSTIC = ("Pooled", "DIAL-noPos")

COLUMNS: tuple[str, ...] = (
    "config", "figure", "panel", "x_name", "x", "N", "K", "r", "target", "n_llm", "n_human", "overdispersion",
    "sigma_pos", "rep", "seed", "method", "failed", "error", "converged", "fallback", "n_warnings", "lambda",
    "multiple", "excess_risk", "kendall_tau", "coverage", "coverage_binomial", "rmse_b", "time_s", "cpu_s", "rep_cpu_s",
)
KEY = ("config", "x", "rep")


# ============================================================== configurations
@dataclass(frozen=True)
class Budget:
    """One point of a row: budgets and misspecification levels."""

    n_llm: int
    n_human: int
    overdispersion: float = 0.0
    sigma_pos: float = 0.0


@dataclass(frozen=True)
class Config:
    """One row (panel) of a figure: fixed design and the budgets along its x axis."""

    name: str
    figure: str
    panel: str  # "top" / "bottom" / "single"
    N: int
    K: int
    r: int
    target: str
    x_name: str  # "n_human" / "n_llm" / "sigma_pos"
    budgets: tuple[Budget, ...]
    benchmarks: tuple[str, ...] = ("human", "mu", "W")

    def x_of(self, b: Budget) -> float:
        return float(getattr(b, self.x_name))


def _row(name, figure, panel, N, K, r, target, x_name, budgets, benchmarks=("human", "mu", "W")) -> Config:
    return Config(name, figure, panel, N, K, r, target, x_name, tuple(budgets), tuple(benchmarks))


def _configs() -> dict[str, Config]:
    out: list[Config] = []
    main_top = [Budget(20_000, n) for n in (100, 200, 400, 800, 1600)]
    main_bot = [Budget(n, 800, 1.0) for n in (400, 800, 1600, 3200, 6400, 12_800)]
    out += [_row("main-top", "main", "top", 10, 4, 1, "consensus", "n_human", main_top),
            _row("main-bottom", "main", "bottom", 10, 4, 1, "consensus", "n_llm", main_bot)]
    out += [_row("misaligned-top", "misaligned", "top", 10, 4, 1, "misaligned", "n_human", main_top, ("human", "W")),
            _row("misaligned-bottom", "misaligned", "bottom", 10, 4, 1, "misaligned", "n_llm", main_bot,
                 ("human", "W"))]
    out += [_row("items20-top", "items20", "top", 20, 6, 2, "consensus", "n_human",
                 [Budget(60_000, n) for n in (300, 600, 1200, 2400, 4800)]),
            _row("items20-bottom", "items20", "bottom", 20, 6, 2, "consensus", "n_llm",
                 [Budget(n, 2400, 1.0) for n in (2400, 4800, 9600, 19_200, 38_400, 76_800)])]
    out += [_row("pos-heterogeneity", "pos-heterogeneity", "single", 10, 4, 1, "consensus", "sigma_pos",
                 [Budget(20_000, 800, 0.0, s) for s in (0.0, 0.25, 0.5, 0.75, 1.0)])]
    # Small and fast: the test suite and smoke runs.
    out += [_row("quick-top", "quick", "top", 10, 4, 1, "consensus", "n_human", [Budget(2000, n) for n in (200, 400)]),
            _row("quick-bottom", "quick", "bottom", 10, 4, 1, "consensus", "n_llm", [Budget(1000, 400, 1.0)])]
    return {c.name: c for c in out}


CONFIGS: dict[str, Config] = _configs()
FIGURES: dict[str, tuple[str, ...]] = {}
for _c in CONFIGS.values():
    FIGURES.setdefault(_c.figure, tuple())
    FIGURES[_c.figure] = FIGURES[_c.figure] + (_c.name,)
PAPER_FIGURES = ("main", "misaligned", "pos-heterogeneity", "items20")


def resolve_configs(names: Iterable[str]) -> list[Config]:
    """Figure names (``main``, ``all``, ...) or row names to row configurations."""
    rows: list[str] = []
    for name in names:
        if name == "all":
            rows += [r for f in PAPER_FIGURES for r in FIGURES[f]]
        elif name in FIGURES:
            rows += list(FIGURES[name])
        elif name in CONFIGS:
            rows.append(name)
        else:
            raise SystemExit(f"unknown config {name!r}; choose from {sorted(FIGURES) + sorted(CONFIGS) + ['all']}")
    return [CONFIGS[r] for r in dict.fromkeys(rows)]


# ================================================================== seeding
def task_seed(config: str, x: float, rep: int) -> int:
    """128-bit entropy for ``np.random.SeedSequence`` from a stable hash (sha256, not ``hash()``)."""
    text = f"pydial-simulation-study|v{STUDY_VERSION}|{config}|{float(x)!r}|{int(rep)}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:16], "little")


@dataclass(frozen=True)
class Task:
    config: Config
    budget: Budget
    rep: int

    @property
    def x(self) -> float:
        return self.config.x_of(self.budget)

    @property
    def seed(self) -> int:
        return task_seed(self.config.name, self.x, self.rep)


# ============================================================ one replication
def _scores(res: pydial.DialResult, items: Sequence[str]) -> np.ndarray:
    return res.scores["score"].reindex(list(items)).to_numpy(float)


def _cov(res: pydial.DialResult, items: Sequence[str]) -> np.ndarray:
    return res.cov.reindex(index=list(items), columns=list(items)).to_numpy(float)


def _coverage(res: pydial.DialResult, items: Sequence[str], s_true: np.ndarray) -> float:
    C = _cov(res, items)
    if not np.all(np.isfinite(C)):
        return np.nan
    return metrics.contrast_coverage(_scores(res, items), C, s_true, LEVEL)


def _b_hat(res: pydial.DialResult, judges: Sequence[str]) -> np.ndarray:
    pe = res.position_effects
    return pe["b"].reindex(list(judges)).to_numpy(float)


def _multiple(lam: float, n_llm: int, n_human: int) -> float:
    return float(lam) if lam == 0 or np.isinf(lam) else float(lam) * n_human / n_llm


def run_replication(task: Task) -> list[dict[str, Any]]:
    """Simulate one data set and fit every method; one row per method."""
    cfg, bud = task.config, task.budget
    c_rep = time.process_time()
    sim = pydial.simulate(cfg.N, cfg.K, cfg.r, bud.n_llm, bud.n_human, target=cfg.target,
                          seed=np.random.default_rng(np.random.SeedSequence(task.seed)), behavior=dict(overdispersion=bud.overdispersion, sigma_pos=bud.sigma_pos))
    data, truth = sim.comparisons, sim.truth
    items, judges, s_h, b = truth.items, truth.judges, truth.s_h, truth.b
    base = dict(config=cfg.name, figure=cfg.figure, panel=cfg.panel, x_name=cfg.x_name, x=task.x, N=cfg.N, K=cfg.K,
                rank=cfg.r, target=cfg.target, n_llm=bud.n_llm, n_human=bud.n_human,
                overdispersion=bud.overdispersion, sigma_pos=bud.sigma_pos, rep=task.rep, seed=str(task.seed))
    specs: dict[str, tuple[str, dict]] = {
        "Human": ("human", {}),
        "Pooled": ("pooled", {}),
        "DIAL-noPos": ("dial-nopos", dict(rank=cfg.r, multiples=SIMULATION_MULTIPLES)),
        "DIAL-Anc": ("dial-anc", dict(rank=cfg.r)),
        "DIAL-Ada": ("dial-ada", dict(rank=cfg.r, multiples=SIMULATION_MULTIPLES)),
        "DIAL-Ada (W)": ("dial-ada", dict(rank=cfg.r, calibration="W", multiples=SIMULATION_MULTIPLES)),
    }
    rows: list[dict[str, Any]] = []
    ada: pydial.DialResult | None = None
    ada_error = ""
    for label, (method, kw) in specs.items():
        row = dict(base, method=label, failed=False, error="", converged=np.nan, fallback=False, n_warnings=0,
                   **{k: np.nan for k in ("lambda", "multiple", "excess_risk", "kendall_tau", "coverage",
                                          "coverage_binomial", "rmse_b")})
        t0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            try:
                res = pydial.fit(data, method, **kw)
            except DialError as e:  # ConvergenceError, IdentifiabilityError, DataError
                res = None
                row.update(failed=True, error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            if res is not None:
                s = _scores(res, items)
                row.update(converged=bool(res.converged), fallback=bool(res.fallback),
                           excess_risk=metrics.excess_risk(s, s_h), kendall_tau=metrics.kendall_tau(s, s_h),
                           coverage=_coverage(res, items, s_h), **{"lambda": float(res.lambda_)},
                           multiple=_multiple(res.lambda_, bud.n_llm, bud.n_human))
                if label in ORDER_AGNOSTIC:
                    row["rmse_b"] = metrics.rmse(np.zeros_like(b), b)
                elif res.position_effects is not None:
                    row["rmse_b"] = metrics.rmse(_b_hat(res, judges), b)
                if label == "DIAL-Ada":
                    ada = res
                    # the same fit (same GACV selection) with the binomial meat, from its linearization
                    row["coverage_binomial"] = _coverage(res.with_cov("binomial"), items, s_h)
            elif label == "DIAL-Ada":
                ada_error = row["error"]
        row["n_warnings"] = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        row["time_s"] = time.perf_counter() - t0
        row["cpu_s"] = time.process_time() - c0
        rows.append(row)
    rows.append(_oracle_row(base, ada, ada_error, s_h, bud))
    total = time.process_time() - c_rep
    for row in rows:
        row["rep_cpu_s"] = total
    return rows


def _oracle_row(base: dict, ada: pydial.DialResult | None, ada_error: str, s_h: np.ndarray, bud: Budget) -> dict:
    """The admissible candidate of DIAL-Ada's path with the smallest population excess risk."""
    row = dict(base, method="Oracle", failed=ada is None, error=ada_error, converged=np.nan, fallback=False,
               n_warnings=0, **{k: np.nan for k in ("lambda", "multiple", "excess_risk", "kendall_tau", "coverage",
                                                    "coverage_binomial", "rmse_b")}, time_s=0.0, cpu_s=0.0)
    if ada is None:
        return row
    cands = [e.candidate for e in ada.path if e.candidate.admissible and e.candidate.s is not None]
    if not cands:  # the fallback replication: only the anchored endpoint
        cands = [e.candidate for e in ada.path if np.isinf(e.candidate.lambda_) and e.candidate.s is not None]
    # candidate scores are in item order (data.items == truth.items for simulated data)
    risks = [metrics.excess_risk(c.s, s_h) for c in cands]
    best = cands[int(np.argmin(risks))]
    row.update(converged=True, excess_risk=float(min(risks)), kendall_tau=metrics.kendall_tau(best.s, s_h),
               **{"lambda": float(best.lambda_)}, multiple=_multiple(best.lambda_, bud.n_llm, bud.n_human))
    return row


# ================================================================ CSV store
def csv_path(out_dir: Path, config: str) -> Path:
    return Path(out_dir) / f"{config}.csv"


def read_results(path: Path) -> pd.DataFrame:
    """Per-replication rows; replications with a partial set of method rows (an
    interrupted write) are dropped so that they are run again."""
    if not Path(path).exists():
        return pd.DataFrame(columns=list(COLUMNS))
    try:
        df = pd.read_csv(path, dtype={"seed": str, "error": str}, on_bad_lines="skip")
    except pd.errors.EmptyDataError:  # killed before the header reached the disk
        return pd.DataFrame(columns=list(COLUMNS))
    df["error"] = df["error"].fillna("")
    n = df.groupby(list(KEY))["method"].transform("nunique")
    return df.loc[n == len(METHODS)].reset_index(drop=True)


def _write_rows(fh, rows: list[dict]) -> None:
    pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(fh, header=False, index=False)
    fh.flush()


def _rewrite_sorted(path: Path) -> None:
    df = read_results(path)
    order = {m: k for k, m in enumerate(METHODS)}
    df = df.drop_duplicates(subset=list(KEY) + ["method"], keep="first")
    df = df.assign(_m=df["method"].map(order)).sort_values(["x", "rep", "_m"]).drop(columns="_m")
    tmp = path.with_suffix(".csv.tmp")
    df.to_csv(tmp, index=False, columns=list(COLUMNS))
    os.replace(tmp, path)


# =================================================================== runner
@contextlib.contextmanager
def _backend(backend: str, jobs: int, address: str | None) -> Iterator[int]:
    """joblib backend context; yields the ``n_jobs`` to pass to ``Parallel``."""
    import joblib

    if backend == "loky":
        with joblib.parallel_config(backend="loky", inner_max_num_threads=1):
            yield jobs
        return
    if backend != "dask":
        raise ValueError(f"backend must be 'loky' or 'dask', got {backend!r}")
    from distributed import Client, LocalCluster

    cluster = None
    if address:
        client = Client(address)
    else:
        cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        _ship_analyses(client)
        with joblib.parallel_config(backend="dask"):
            yield -1
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _ship_analyses(client) -> None:
    """Upload the ``analyses`` package (a zip of its .py files) to the scheduler and workers.

    Tasks reference :func:`run_replication` and :class:`Task` by module name, and the
    scheduler and workers unpickle them, so they must import ``analyses.simulation``;
    ``pydial`` itself must be installed there (same version as here).
    """
    import tempfile
    import zipfile

    root = Path(__file__).resolve().parents[1]  # .../analyses
    with tempfile.TemporaryDirectory() as tmp:
        z = Path(tmp) / "pydial_analyses.zip"
        with zipfile.ZipFile(z, "w") as zf:
            for f in sorted(root.rglob("*.py")):
                zf.write(f, f.relative_to(root.parent).as_posix())
        client.upload_file(str(z), load=True)  # load: put the zip on sys.path there


def pending_tasks(configs: Sequence[Config], reps: int, out_dir: Path) -> list[Task]:
    tasks = []
    for cfg in configs:
        done = read_results(csv_path(out_dir, cfg.name))
        have = set(zip(done["x"].astype(float), done["rep"].astype(int)))
        for bud in cfg.budgets:
            for rep in range(reps):
                if (cfg.x_of(bud), rep) not in have:
                    tasks.append(Task(cfg, bud, rep))
    return tasks


def run(configs: Sequence[Config], *, reps: int = 50, jobs: int = 1, backend: str = "loky",
        address: str | None = None, out_dir: Path = RESULTS_DIR, progress: bool = True) -> dict[str, Any]:
    """Run the replications missing from ``out_dir`` and append them to the CSV files.

    Returns a small record (tasks run, wall time) that is also appended to ``runs.jsonl``.
    """
    import joblib
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = pending_tasks(configs, reps, out_dir)
    # longest first for a better load balance (bigger problems, more LLM cells)
    tasks.sort(key=lambda t: -(t.config.N * t.config.K * 1000 + t.budget.n_llm / 100 + t.budget.n_human))
    t0 = time.perf_counter()
    handles: dict[str, Any] = {}
    try:
        for cfg in configs:
            p = csv_path(out_dir, cfg.name)
            if p.exists():
                _rewrite_sorted(p)  # drops partial replications of an interrupted run
            new = not p.exists() or p.stat().st_size == 0
            handles[cfg.name] = open(p, "a", newline="")  # noqa: SIM115 (closed in finally)
            if new:
                handles[cfg.name].write(",".join(COLUMNS) + "\n")
                handles[cfg.name].flush()
        if tasks:
            with _backend(backend, jobs, address) as n_jobs:
                if n_jobs == 1 and backend == "loky":
                    results: Iterable[list[dict]] = map(run_replication, tasks)
                else:
                    results = joblib.Parallel(n_jobs=n_jobs, return_as="generator_unordered")(
                        joblib.delayed(run_replication)(t) for t in tasks)
                bar = tqdm(total=len(tasks), desc="replications", disable=not progress, unit="rep", smoothing=0.05)
                for rows in results:
                    _write_rows(handles[rows[0]["config"]], rows)
                    bar.update(1)
                bar.close()
    finally:
        for h in handles.values():
            h.close()
    for cfg in configs:
        _rewrite_sorted(csv_path(out_dir, cfg.name))
    wall = time.perf_counter() - t0
    record = dict(configs=[c.name for c in configs], reps=reps, tasks=len(tasks), jobs=jobs, backend=backend,
                  wall_s=round(wall, 2), cpu_count=os.cpu_count(), when=time.strftime("%Y-%m-%d %H:%M:%S"),
                  pydial=pydial.__version__)
    if tasks:
        with open(out_dir / "runs.jsonl", "a") as fh:
            fh.write(json.dumps(record) + "\n")
    return record


def load(configs: Sequence[Config] | None = None, out_dir: Path = RESULTS_DIR) -> pd.DataFrame:
    """All per-replication rows of ``configs`` (default: every CSV present)."""
    names = [c.name for c in configs] if configs is not None else list(CONFIGS)
    frames = [read_results(csv_path(out_dir, n)) for n in names if csv_path(out_dir, n).exists()]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))


# ================================================================ summaries
METRICS = ("excess_risk", "kendall_tau", "coverage", "coverage_binomial", "rmse_b", "multiple")


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Mean, Monte Carlo SE, median, count and failures per (config, x, method, metric)."""
    out = []
    for (cfg, x, method), g in df.groupby(["config", "x", "method"], sort=False):
        ok = g.loc[~g["failed"].astype(bool)]
        for m in METRICS:
            v = ok[m].to_numpy(float)
            if m == "multiple":
                v = v[np.isfinite(v)]
            else:
                v = v[~np.isnan(v)]
            n = v.size
            out.append(dict(config=cfg, x=x, method=method, metric=m, n=n, n_failed=int(g["failed"].sum()),
                            mean=v.mean() if n else np.nan,
                            se=v.std(ddof=1) / np.sqrt(n) if n > 1 else np.nan,
                            median=np.median(v) if n else np.nan))
    return pd.DataFrame(out)


def benchmark(kind: str, cfg: Config, n_human: Any) -> Any:
    """First-order excess-risk benchmarks dim/(2 n_H) of Thm. population-risk-tradeoff."""
    dim = {"human": cfg.N - 1, "mu": 1, "W": cfg.r + 1}[kind]
    return metrics.first_order_risk(n_human, dim)
