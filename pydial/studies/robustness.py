r"""Position-robustness studies on judgments collected in both display orders (App. "Real Data" of the DIAL paper).

Protocol (App. "Protocol and estimators").  The records of the data are split
``train_frac`` / ``1 - train_frac`` into train and test pools over ``splits`` seeded
record splits; all judgments of a record (both display orders, every judge, the human
label) stay together.  A task (one sweep, one setting, one split) fits each method on

* the human calibration sample: the first ``n_H`` of a seeded permutation of the decisive
  train human labels (nested across budgets);
* the LLM data: the tie-excluded train judgments of the judge panel, perturbed by the sweep
  (:mod:`pydial.studies.robustness_sweeps`: display imbalance ``rho_swap``, injected
  pure-position or anti-consensus judges) and optionally subsampled to ``n_LLM`` rows;

and scores it against the human BTL fit on every decisive test-pool human label
(``s_test``): the excess held-out human log loss ``l_H^test(s_hat) - l_H^test(s_test)``
(non-negative) and Kendall's tau of ``s_hat`` against ``s_test``.  A fit that raises
:class:`~pydial.IdentifiabilityError` is recorded with status ``not_finite``, a
:class:`~pydial.ConvergenceError` with ``failed``, another error with ``error``; they are
counted by :func:`summarize`, never averaged.

Seeds: :func:`~pydial.studies.robustness_sweeps.rng_for` (``SeedSequence`` with CRC-32
keys), so a task's rows are a deterministic function of (seed, sweep, setting, split),
whatever the worker and the task order.

Results are appended per task to ``<out>/<sweep>.csv`` (one row per method, calibration
arm and split); a rerun skips the finished tasks.  Tasks run in parallel with
:mod:`joblib` (``n_jobs``; ``backend="dask"`` or an enclosing
:func:`joblib.parallel_config` sends them to a Dask cluster).

Example::

    from pydial.studies import robustness
    df = robustness.run(data, sweeps=[robustness.display_imbalance(), robustness.pure_position()],
                        splits=20, methods=("human", "dial-anc", "dial-ada"), out="robustness", n_jobs=2)
    robustness.summarize(df)
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from pydial.data.comparisons import Comparisons, HumanCells
from pydial.estimation.spec import check_count, check_level, check_seed, spec_from_arguments
from pydial.exceptions import (ArgumentError, ArgumentTypeError, ConvergenceError, DialError, IdentifiabilityError,
                               OutputError)
from pydial.model.cells import human_loss
from pydial.studies.metrics import kendall_tau
from pydial.studies.robustness_sweeps import (ANTI_PREFIX, KINDS, PURE_PREFIX, Sweep, TaskData, anti_consensus,
                                              calibration, display_imbalance, human_budget, llm_budget, prepare,
                                              pure_position, rng_for, split_records, task_frame)

__all__ = ["METHODS", "COLUMNS", "STATUSES", "Study", "Sweep", "display_imbalance", "pure_position", "anti_consensus",
           "llm_budget", "human_budget", "calibration", "sweep_by_name", "study", "pools", "training_frame",
           "run_task", "pending_tasks", "run",
           "load", "summarize", "plot"]

PROTOCOL_VERSION = 1
METHODS: tuple[str, ...] = ("human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc")
STATUSES = ("ok", "not_finite", "failed", "error", "no_reference")
COLUMNS: tuple[str, ...] = (
    "sweep", "config_id", "seed", "setting", "split", "method", "status",
    "excess_loss", "kendall_tau", "loss_test", "loss_ref",
    "lambda", "lambda_multiple", "oracle_excess_loss", "oracle_multiple", "converged", "fallback",
    "b_injected_mean", "n_human", "n_llm", "K", "n_injected", "sources",
    "n_train_records", "n_test_records", "n_test_human",
    "n_warnings", "message", "fit_seconds",
    "arm", "ct_statistic", "ct_df", "ct_p_value",
)
"""Per-task result columns (one row per method, calibration arm and split)."""
Z = 1.96


# ------------------------------------------------------------------------ set-up
@dataclass(frozen=True, eq=False)
class Study:
    """What every task of a run shares (sent to the workers): data, seed, split fraction, methods.

    ``methods`` maps a label (the ``method`` column) to ``(pydial.fit method, extra keyword
    arguments)``; ``token`` identifies the data and settings for the per-process caches.
    """

    data: TaskData
    seed: int
    train_frac: float
    rank: int
    methods: tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]
    token: str

    def config_id(self, sweep: Sweep) -> str:
        """Stable fingerprint of the parameters behind ``sweep``'s rows (rows of other runs are never mixed in)."""
        p = {"sweep": sweep.name, "version": PROTOCOL_VERSION, "seed": self.seed, "train_frac": self.train_frac,
             "judges": list(self.data.judges), "rank": self.rank, **sweep.params()}
        return hashlib.sha1(json.dumps(p, sort_keys=True).encode()).hexdigest()[:10]


def _methods(methods: Sequence[str] | Mapping[str, Any]) -> tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]:
    from pydial.estimation.estimators import METHODS as KNOWN

    items = methods.items() if isinstance(methods, Mapping) else ((m, (m, {})) for m in methods)
    out = []
    for label, spec in items:
        base, kw = (spec, {}) if isinstance(spec, str) else spec
        if base not in KNOWN or base == "judges":
            raise ArgumentError(f"methods: unknown or unsuitable method {base!r}; known: {[m for m in KNOWN if m != 'judges']}")
        out.append((str(label), base, tuple(sorted(dict(kw).items()))))
    if not out:
        raise ArgumentError("methods must name at least one method")
    return tuple(out)


def study(data: Comparisons, *, judges: Sequence[str] | None = None, methods: Sequence[str] | Mapping[str, Any] = METHODS,
          seed: int = 20260, train_frac: float = 0.7, rank: int = 1) -> Study:
    """Prepare the shared part of a run (see :func:`run` for the arguments).

    The arguments of every fit are checked here, before any task runs: a bad ``rank`` or
    method argument is an :class:`~pydial.ArgumentError`, not a row of errors per task.
    """
    train_frac = check_level(train_frac, "train_frac")
    seed = check_seed(seed)
    if seed is None:
        raise ArgumentTypeError("seed must be a non-negative integer (the splits are seeded), got None")
    rank = check_count(rank, "rank", minimum=0)
    specs = _methods(methods)
    _check_fit_arguments(specs, rank)
    td = prepare(data, judges)
    h = hashlib.sha1(pd.util.hash_pandas_object(td.long, index=False).to_numpy().tobytes())
    h.update(repr((td.items, td.judges, seed, train_frac)).encode())
    return Study(td, seed, train_frac, rank, specs, h.hexdigest())


def _check_fit_arguments(methods: tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...], rank: int) -> None:
    """Build the model specification of each method's fits once (as :func:`pydial.fit` would; warnings aside)."""
    from pydial.estimation.estimators import method_arguments

    for label, base, kw in methods:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec_from_arguments(base, {**method_arguments(base, rank=rank), **dict(kw)}, caller=f"methods[{label!r}]")


def sweep_by_name(name: str) -> Sweep:
    """Return the sweep of kind ``name`` with its default settings (``display``, ``pure_position``, ...)."""
    makers: dict[str, Callable[[], Sweep]] = {
        "display": display_imbalance, "pure_position": pure_position, "anti_consensus": anti_consensus,
        "llm_budget": llm_budget, "human_budget": human_budget}
    if name not in makers:
        raise ArgumentError(f"sweeps: unknown sweep {name!r}; known: {list(makers)} (calibration needs subsets: "
                            "pydial.studies.robustness.calibration)")
    return makers[name]()


def _check_sweep(st: Study, sweep: Sweep) -> None:
    judges = set(st.data.long["judge"].astype(str))
    if sweep.kind == "pure_position" and (sweep.template or st.data.judges[0]) not in st.data.judges:
        raise ArgumentError(f"template {sweep.template!r} of sweep {sweep.name!r} is not in the panel {st.data.judges}")
    if sweep.kind in ("pure_position", "anti_consensus") and any(j.startswith((PURE_PREFIX, ANTI_PREFIX)) for j in judges):
        raise ArgumentError(f"sweeps: the data already have judges named {PURE_PREFIX}.. or {ANTI_PREFIX}..")
    if sweep.kind == "display":
        llm = st.data.long.loc[~st.data.long["is_human"] & st.data.long["decisive"], "first"]
        if not (llm == "b").any() or not (llm == "a").any():
            raise ArgumentError(f"sweeps: the display sweep {sweep.name!r} needs judgments in both display orders "
                                "(column first); these data have one order only")
    if sweep.kind == "calibration":
        known = set(st.data.records.tolist())
        for name, ids in sweep.subsets:
            if not set(ids) <= known or not ids:
                raise ArgumentError(f"subsets: subset {name!r} is empty or names unknown record ids")


# ---------------------------------------------------------------- pools (cached)
_CACHE: dict[tuple[Any, ...], Any] = {}
_CACHE_SIZE = 64


def _cached(key: tuple[Any, ...], make: Any) -> Any:
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = make()
    return _CACHE[key]


def pools(st: Study, split: int, strata: tuple[tuple[str, tuple[Any, ...]], ...] = ()) -> dict[str, Any]:
    """Row indices into ``st.data.long`` of split ``split`` (cached per process).

    ``human`` and ``llm``: the decisive train human labels and panel judgments in their
    seeded sampling order (roles ``"human"`` and ``"llm"``); ``train``: every train row;
    ``test``: the decisive test human labels; and the numbers of train and test records.
    ``strata``: the named subsets of a stratified split (:func:`split_records`).
    """
    def make() -> dict[str, Any]:
        long = st.data.long
        train = split_records(st.data.records, st.seed, split, st.train_frac, strata)
        in_train = long["record_id"].isin(train).to_numpy()
        is_h, dec = long["is_human"].to_numpy(), long["decisive"].to_numpy()
        th = np.flatnonzero(in_train & is_h & dec)
        th = th[rng_for(st.seed, "human", split).permutation(th.size)]
        tl = np.flatnonzero(in_train & long["judge"].isin(list(st.data.judges)).to_numpy() & dec)
        tl = tl[rng_for(st.seed, "llm", split).permutation(tl.size)]
        return {"human": th, "llm": tl, "train": np.flatnonzero(in_train), "test": np.flatnonzero(~in_train & is_h & dec),
                "n_train_records": len(train), "n_test_records": st.data.records.size - len(train)}

    return _cached((st.token, "pools", split, repr(strata)), make)


def _reference(st: Study, split: int, strata: Any, subset: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """``(test human cells, s_test, loss_ref, message)`` of the test-pool human BTL fit (of a subset)."""
    def make() -> tuple[Any, ...]:
        import pydial

        long = st.data.long
        rows = pools(st, split, strata)["test"]
        if subset is not None:
            rows = rows[long["record_id"].iloc[rows].isin(set(subset)).to_numpy()]
        try:
            test = st.data.comparisons(long.loc[rows])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = pydial.fit(test, "human")
            s = ref.scores["score"].to_numpy()
            return test.human, s, human_loss(s, test.human), "" if ref.converged else "reference human BTL not converged"
        except DialError as e:
            return None, None, np.nan, f"no test-pool reference: {_first_line(e)}"

    return _cached((st.token, "ref", split, repr(strata), subset), make)


# -------------------------------------------------------------------------- tasks
def _first_line(e: BaseException, limit: int = 300) -> str:
    text = str(e).strip().splitlines()
    return (f"{type(e).__name__}: " + (text[0] if text else ""))[:limit]


def _row(common: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {c: np.nan for c in COLUMNS}
    row.update(message="", n_warnings=0, n_injected=0, sources="", arm="")
    row.update(common)
    row.update(kw)
    return row


def _oracle(res: Any, test: HumanCells, loss_ref: float) -> dict[str, float]:
    """Best admissible candidate of the weight path by test loss (the paper's dotted oracle line)."""
    best, mult = np.inf, np.nan
    for c in (e.candidate for e in res.path):
        if c.s is None or not c.admissible:
            continue
        ex = human_loss(np.asarray(c.s), test) - loss_ref
        if ex < best:
            best, mult = ex, float(c.multiple)
    return {"oracle_excess_loss": best if np.isfinite(best) else np.nan, "oracle_multiple": mult}


def _metrics(res: Any, data: Comparisons, ref: tuple[Any, ...], injected: bool) -> dict[str, Any]:
    test, s_test, loss_ref, _ = ref
    s = res.scores["score"].to_numpy()
    loss, lam = human_loss(s, test), float(res.lambda_)
    out = {"status": "ok", "loss_test": loss, "loss_ref": loss_ref, "excess_loss": loss - loss_ref,
           "kendall_tau": kendall_tau(s, s_test), "converged": bool(res.converged), "fallback": bool(res.fallback),
           "lambda": lam, "lambda_multiple": lam * data.n_human / data.n_llm if np.isfinite(lam) and lam > 0 else lam}
    if res.gacv is not None and res.path:
        out.update(_oracle(res, test, loss_ref))
    if injected and res.position_effects is not None:
        b = res.position_effects["b"]
        inj = [k for k in b.index if str(k).startswith((PURE_PREFIX, ANTI_PREFIX))]
        out["b_injected_mean"] = float(b[inj].mean()) if inj else np.nan
    ct = res.calibration_test
    if ct is not None:
        out.update(ct_statistic=float(ct.statistic), ct_df=int(ct.df), ct_p_value=float(ct.p_value))
    return out


def _fit_row(st: Study, data: Comparisons, spec: tuple[str, str, tuple[tuple[str, Any], ...]],
             ref: tuple[Any, ...], common: Mapping[str, Any], injected: bool) -> dict[str, Any]:
    import pydial
    from pydial.estimation.estimators import method_arguments

    label, base, kw = spec
    row = _row(common, method=label)
    t0 = time.perf_counter()
    msgs: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = pydial.fit(data, base, **method_arguments(base, rank=st.rank), **dict(kw))
        msgs = [str(w.message) for w in caught]
        row.update(_metrics(res, data, ref, injected))
    except IdentifiabilityError as e:
        row.update(status="not_finite", message=_first_line(e))
    except ConvergenceError as e:
        row.update(status="failed", message=_first_line(e))
    except (DialError, FloatingPointError, np.linalg.LinAlgError, ValueError) as e:
        row.update(status="error", message=_first_line(e))
    row["n_warnings"] = len(msgs)
    if msgs and not row["message"]:
        row["message"] = ("warning: " + msgs[0].splitlines()[0])[:300]
    row["fit_seconds"] = round(time.perf_counter() - t0, 3)
    return row


def training_frame(st: Study, sweep: Sweep, setting: float, split: int, arm: str = "") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Return the long-format training rows of one task (of one calibration ``arm``, ``"<subset>:<consensus>"``).

    Returns the rows and ``{"n_injected", "sources"}`` (the injected judges and the judge they copy).
    """
    strata = sweep.subsets if sweep.kind == "calibration" else ()
    if arm not in sweep.arms():
        raise ArgumentError(f"arm must be one of {sweep.arms()} for sweep {sweep.name!r}, got {arm!r}")
    subset = dict(sweep.subsets)[arm.split(":")[0]] if arm else None
    return task_frame(st.data, pools(st, split, strata), sweep, setting, st.seed, split, subset,
                      arm.split(":")[1] if arm else "global")


def run_task(st: Study, sweep: Sweep, setting: float, split: int) -> list[dict[str, Any]]:
    """Fit every method on one task (each calibration arm); one result row per method and arm."""
    strata = sweep.subsets if sweep.kind == "calibration" else ()
    split_pools = pools(st, split, strata)
    common = {"sweep": sweep.name, "config_id": st.config_id(sweep), "seed": st.seed, "setting": float(setting),
              "split": int(split), "n_train_records": split_pools["n_train_records"],
              "n_test_records": split_pools["n_test_records"]}
    subsets: dict[str, tuple[Any, ...]] = dict(sweep.subsets)
    out = []
    for arm in sweep.arms():
        subset = subsets[arm.split(":")[0]] if arm else None
        ref = _reference(st, split, strata, subset)
        arm_common = {**common, "arm": arm, "n_test_human": int(ref[0].n.sum()) if ref[0] is not None else 0}
        if ref[1] is None:
            out += [_row(arm_common, method=m[0], status="no_reference", message=ref[3]) for m in st.methods]
            continue
        frame, info = training_frame(st, sweep, setting, split, arm)
        data = st.data.comparisons(frame)
        arm_common.update(n_human=data.n_human, n_llm=data.n_llm, K=data.K, **info)
        out += [_fit_row(st, data, m, ref, arm_common, bool(info["n_injected"])) for m in st.methods]
    return out


# ------------------------------------------------------------------------ driver
def load(path: str | Path) -> pd.DataFrame:
    """Read a results CSV (empty frame with :data:`COLUMNS` when absent); columns of older files are added."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=list(COLUMNS))
    df = pd.read_csv(path, keep_default_na=True, dtype={"message": str, "sources": str, "arm": str})
    df = df.reindex(columns=list(COLUMNS)).assign(arm=_arms(df))
    df[["message", "sources"]] = df[["message", "sources"]].fillna("")
    return df


def _arms(df: pd.DataFrame) -> list[str]:
    """Return the ``arm`` column as text (``""`` where missing: rows of files without calibration arms)."""
    if "arm" not in df:
        return [""] * len(df)
    return ["" if pd.isna(a) else str(a) for a in df["arm"]]


def pending_tasks(st: Study, sweep: Sweep, splits: int, out: str | Path) -> list[tuple[float, int]]:
    """Tasks ``(setting, split)`` of ``sweep`` not yet complete in ``<out>/<sweep.name>.csv``.

    A task is complete when it has a row for every method and arm.  Rows of incomplete
    tasks are removed from the file (the rerun would duplicate them); rows of another
    configuration raise :class:`ArgumentError`.
    """
    path = Path(out) / f"{sweep.name}.csv"
    df = load(path)
    cid = st.config_id(sweep)
    other = df.loc[df["config_id"].astype(str) != cid]
    if len(other):
        raise ArgumentError(f"out: {path} holds rows of another configuration (config_id "
                            f"{sorted(set(other['config_id'].astype(str)))} != {cid}); use another folder or fresh=True")
    need = {(a, m[0]) for a in sweep.arms() for m in st.methods}
    done: set[tuple[float, int]] = set()
    if len(df):
        for (s, b), g in df.groupby(["setting", "split"]):
            if need <= set(zip(g["arm"], g["method"])):
                done.add((float(s), int(b)))
        keep = np.array([(float(s), int(b)) in done for s, b in zip(df["setting"], df["split"])])
        header = pd.read_csv(path, nrows=0).columns.tolist()
        if not keep.all() or header != list(COLUMNS):
            df.loc[keep].to_csv(path, index=False)
    return [(float(s), b) for b in range(splits) for s in sweep.values if (float(s), b) not in done]


def _append(path: Path | None, rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    if path is not None:
        df.to_csv(path, mode="a", header=not path.exists() or path.stat().st_size == 0, index=False)
    return df


def _update_timings(out: Path, sweep: str, stats: dict[str, Any]) -> None:
    path = out / "timings.json"
    t = json.loads(path.read_text()) if path.exists() else {}
    cur = t.get(sweep, {"tasks_run": 0, "wall_seconds": 0.0, "fit_seconds": 0.0, "runs": 0})
    if stats["tasks_run"]:
        cur = {"tasks_run": cur["tasks_run"] + stats["tasks_run"],
               "wall_seconds": round(cur["wall_seconds"] + stats["wall_seconds"], 2),
               "fit_seconds": round(cur["fit_seconds"] + stats["fit_seconds"], 2),
               "runs": cur.get("runs", 0) + 1, "jobs": stats["jobs"]}
    t[sweep] = cur
    path.write_text(json.dumps(t, indent=2, sort_keys=True) + "\n")


def _out_folder(out: str | Path) -> Path:
    """Make the folder ``out`` of a run (with its parents) and return it; :class:`~pydial.OutputError` if it cannot be."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise OutputError(f"cannot write the output folder {p}: it is a file; name a folder as out=")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot write the output folder {p}: {e.strerror or e}") from None
    return p


def run_sweep(st: Study, sweep: Sweep, splits: int, out: str | Path | None = None, *, n_jobs: int | None = None,
              backend: str | None = None, progress: bool = False) -> dict[str, Any]:
    """Run the pending tasks of one sweep in parallel, appending each task's rows to its CSV as it finishes.

    Returns timing statistics (``tasks_run``, ``wall_seconds``, ``fit_seconds``, ``jobs``)
    and, under ``"rows"``, the rows computed now.
    """
    from joblib import Parallel, delayed
    from tqdm.auto import tqdm

    _check_sweep(st, sweep)
    path = None
    if out is not None:
        path = _out_folder(out) / f"{sweep.name}.csv"
    tasks = pending_tasks(st, sweep, splits, out) if out is not None else \
        [(float(s), b) for b in range(splits) for s in sweep.values]
    t0, fit_s, frames = time.perf_counter(), 0.0, []
    if tasks:
        par = Parallel(n_jobs=n_jobs, backend=backend, return_as="generator", batch_size=1)
        gen = par(delayed(run_task)(st, sweep, s, b) for s, b in tasks)
        for rows in tqdm(gen, total=len(tasks), desc=sweep.name, disable=not progress, mininterval=2.0):
            frames.append(_append(path, rows))
            fit_s += float(frames[-1]["fit_seconds"].sum())
    stats = {"tasks_run": len(tasks), "wall_seconds": round(time.perf_counter() - t0, 2),
             "fit_seconds": round(fit_s, 2), "jobs": n_jobs}
    if out is not None:
        _update_timings(Path(out), sweep.name, stats)
    return {**stats, "rows": pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))}


def _sweeps(sweeps: Sequence[Sweep | str] | Sweep | str) -> list[Sweep]:
    items = [sweeps] if isinstance(sweeps, (Sweep, str)) else list(sweeps)
    out = [sweep_by_name(s) if isinstance(s, str) else s for s in items]
    if not out or not all(isinstance(s, Sweep) for s in out):
        raise ArgumentError(f"sweeps must name or hold Sweep objects of kinds {KINDS}, got {sweeps!r}")
    names = [s.name for s in out]
    if len(set(names)) < len(names):
        raise ArgumentError(f"sweeps: two sweeps share a name ({names}); pass name= to tell them apart")
    return out


def run(data: Comparisons | Study, sweeps: Sequence[Sweep | str] | Sweep | str = ("display", "pure_position"), *,
        splits: int = 50, methods: Sequence[str] | Mapping[str, Any] = METHODS, judges: Sequence[str] | None = None,
        out: str | Path | None = None, n_jobs: int | None = None, backend: str | None = None, seed: int = 20260,
        train_frac: float = 0.7, rank: int = 1, fresh: bool = False, progress: bool = False) -> pd.DataFrame:
    """Run robustness sweeps over seeded record splits; return one row per method, arm, setting and split.

    Parameters
    ----------
    data : Comparisons or Study
        Judgments with record ids (:meth:`Comparisons.from_frame`) and human labels; the
        display sweep needs both display orders.  A :class:`Study` (:func:`study`) carries
        its own ``judges``, ``methods``, ``seed``, ``train_frac`` and ``rank``.
    sweeps : sequence of Sweep or str
        Sweeps (:func:`display_imbalance`, :func:`pure_position`, :func:`anti_consensus`,
        :func:`llm_budget`, :func:`human_budget`, :func:`calibration`) or kind names (default settings).
    splits : int
        Number of record splits (splits ``0 .. splits - 1``).
    methods : sequence of str or mapping
        Methods of :func:`pydial.fit`, or labels mapped to ``(method, extra keyword arguments)``.
    judges : sequence of str, optional
        The LLM judge panel (default: every judge).
    out : path, optional
        Folder of the per-sweep CSVs and ``timings.json``; with it the run resumes (finished tasks are skipped).
    n_jobs : int, optional
        Parallel workers of :class:`joblib.Parallel` (default: the enclosing
        :func:`joblib.parallel_config`, else 1).
    backend : str, optional
        joblib backend, e.g. ``"dask"`` (needs a ``dask.distributed.Client``).
    seed : int
        Root seed.
    train_frac : float
        Fraction of records in the train pool.
    rank : int
        Disagreement rank ``r`` of the DIAL methods.
    fresh : bool
        Discard the existing CSVs of these sweeps in ``out`` first.
    progress : bool
        Show a progress bar.

    Returns
    -------
    pandas.DataFrame
        The rows of every requested task (:data:`COLUMNS`), read back from ``out`` when given.

    Raises
    ------
    ArgumentError
        Bad sweeps, methods, judges, budgets, ``rank`` or other fit arguments (checked before
        any task runs), or an ``out`` folder with rows of another configuration.
    OutputError
        ``out`` is a file, lies under a file, or is a folder in which no file can be created.
    """
    splits = check_count(splits, "splits")
    st = data if isinstance(data, Study) else study(data, judges=judges, methods=methods, seed=seed,
                                                    train_frac=train_frac, rank=rank)
    if out is not None:
        _out_folder(out)
    frames = []
    for sweep in _sweeps(sweeps):
        if fresh and out is not None:
            (Path(out) / f"{sweep.name}.csv").unlink(missing_ok=True)
        res = run_sweep(st, sweep, int(splits), out, n_jobs=n_jobs, backend=backend, progress=progress)
        df = res["rows"] if out is None else load(Path(out) / f"{sweep.name}.csv")
        frames.append(df.loc[df["setting"].isin([float(v) for v in sweep.values]) & (df["split"] < splits)])
    return pd.concat(frames, ignore_index=True).sort_values(["sweep", "setting", "split", "arm"], kind="stable") \
        .reset_index(drop=True)


# ------------------------------------------------------------------- summaries
def _mean_se(x: pd.Series) -> tuple[float, float, int]:
    v = pd.to_numeric(x, errors="coerce").to_numpy(float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return np.nan, np.nan, 0
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else np.nan, int(v.size)


def _summary_row(g: pd.DataFrame, alpha: float) -> dict[str, Any]:
    ref = g.loc[g["status"] != "no_reference"]
    ok = ref.loc[ref["status"] == "ok"]
    ex, ex_se, _ = _mean_se(ok["excess_loss"])
    tau, tau_se, n_tau = _mean_se(ok["kendall_tau"])
    orc, orc_se, _ = _mean_se(ok["oracle_excess_loss"])
    lam = pd.to_numeric(ok["lambda"], errors="coerce")
    conv = ok["converged"].astype(str).str.lower().eq("true")
    pv = pd.to_numeric(ok["ct_p_value"], errors="coerce").dropna()
    count = {s: int((g["status"] == s).sum()) for s in ("not_finite", "failed", "error", "no_reference")}
    mean = {c: float(pd.to_numeric(g[c], errors="coerce").mean()) for c in ("b_injected_mean", "n_llm", "n_human")}
    return {
        "n_splits": len(ref), "n_ok": len(ok), "n_not_finite": count["not_finite"],
        "n_failed": count["failed"],
        "n_error": count["error"], "n_no_reference": count["no_reference"],
        "frac_finite": len(ok) / len(ref) if len(ref) else np.nan,
        "excess_mean": ex, "excess_se": ex_se, "tau_mean": tau, "tau_se": tau_se, "n_tau": n_tau,
        "oracle_mean": orc, "oracle_se": orc_se,
        "frac_lambda_inf": float(np.isinf(lam).mean()) if len(lam) else np.nan,
        "frac_lambda_zero": float((lam == 0).mean()) if len(lam) else np.nan,
        "median_multiple": float(np.nanmedian(pd.to_numeric(ok["lambda_multiple"], errors="coerce")))
        if len(ok) and pd.to_numeric(ok["lambda_multiple"], errors="coerce").notna().any() else np.nan,
        "n_unconverged": int((~conv).sum()), "n_with_warnings": int((pd.to_numeric(ok["n_warnings"]) > 0).sum()),
        "n_test_defined": len(pv), "reject_rate": float((pv < alpha).mean()) if len(pv) else np.nan,
        "b_injected_mean": mean["b_injected_mean"], "n_llm_mean": mean["n_llm"], "n_human_mean": mean["n_human"],
    }


def summarize(df: pd.DataFrame, *, alpha: float = 0.05) -> pd.DataFrame:
    """Per sweep, arm, setting and method: status counts, finite fraction, means over the finite splits and MC SEs.

    Means use only the splits with status ``ok``; the SE is ``sd / sqrt(n_ok)``.
    ``not_finite`` (IdentifiabilityError), ``failed`` (ConvergenceError) and ``error``
    fits are counted, never averaged.  ``reject_rate`` is the share of the defined
    calibration tests with p-value below ``alpha``.
    """
    if not 0.0 < alpha < 1.0:
        raise ArgumentError(f"alpha ({alpha}) must be in the open interval (0, 1)")
    if df.empty:
        return pd.DataFrame()
    df = df.reindex(columns=list(COLUMNS)).assign(arm=_arms(df))
    rows = [{"sweep": sw, "arm": arm, "setting": float(s), "method": m, **_summary_row(g, alpha)}
            for (sw, arm, s, m), g in df.groupby(["sweep", "arm", "setting", "method"], sort=True)]
    return pd.DataFrame(rows)


def _finite_x(x: pd.Series) -> pd.Series:
    """Place settings ``inf`` (all judgments) at twice the largest finite setting."""
    fin = x[np.isfinite(x)]
    return x.where(np.isfinite(x), 2.0 * float(fin.max()) if len(fin) and fin.max() > 0 else 1.0)


def plot(summary: pd.DataFrame, *, metrics: Sequence[str] = ("excess", "tau"), min_ok: int = 1) -> Any:
    """Curves of :func:`summarize`: one column per sweep (and arm), one row per metric, ``mean ± 1.96 SE``.

    Points with fewer than ``min_ok`` finite splits are left out; hollow markers are means
    over only part of the splits.  Returns the :class:`matplotlib.figure.Figure`.
    """
    import matplotlib.pyplot as plt

    bad = [m for m in metrics if m not in ("excess", "tau", "oracle")]
    if bad or summary.empty:
        raise ArgumentError(f"metrics must be of ('excess', 'tau', 'oracle') and summary non-empty, got {list(metrics)}")
    panels = list(summary.groupby(["sweep", "arm"], sort=False).groups)
    fig, axes = plt.subplots(len(metrics), len(panels), figsize=(4.4 * len(panels), 3.4 * len(metrics)), squeeze=False)
    ylabels = {"excess": "excess held-out human log loss", "tau": "Kendall's tau", "oracle": "oracle excess loss"}
    for c, (sw, arm) in enumerate(panels):
        part = summary.loc[(summary["sweep"] == sw) & (summary["arm"] == arm)]
        for r, metric in enumerate(metrics):
            ax = axes[r, c]
            for k, (m, a) in enumerate(part.groupby("method", sort=False)):
                a = a.sort_values("setting")
                a = a.loc[(a["n_ok"] >= min_ok) & np.isfinite(a[f"{metric}_mean"])]
                x = _finite_x(a["setting"])
                y, s = a[f"{metric}_mean"], a[f"{metric}_se"].fillna(0.0)
                color = f"C{k}"
                ax.fill_between(x, y - Z * s, y + Z * s, color=color, alpha=0.15, lw=0)
                ax.plot(x, y, color=color, lw=1.4, marker="o", mfc="white", label=m)
                full = a["frac_finite"] >= 1
                ax.scatter(x[full], y[full], color=color, s=20, zorder=3)
            ax.grid(alpha=0.3, lw=0.5)
            ax.set_xlabel(sw + (f" [{arm}]" if arm else ""))
            if c == 0:
                ax.set_ylabel(ylabels[metric])
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def command(data: Comparisons, out: str | Path, *, sweeps: Sequence[str] = ("display", "pure_position"),
            splits: int = 50, methods: Sequence[str] = METHODS, judges: Sequence[str] | None = None,
            n_jobs: int | None = None, backend: str | None = None, seed: int = 20260, train_frac: float = 0.7,
            rank: int = 1, n_human: float | None = None, fresh: bool = False, progress: bool = True) -> Path:
    """Run sweeps by name into ``out`` and write ``summary.csv`` and ``robustness.png`` there (``pydial robustness``).

    ``n_human`` replaces the fixed human budget of the display, pure-position,
    anti-consensus and LLM-budget sweeps (their defaults are the paper's 300, 300, 1000, 1000).
    The other arguments are those of :func:`run`.  Returns the path of ``summary.csv``.
    """
    import dataclasses

    import matplotlib

    matplotlib.use("Agg")
    chosen = [sweep_by_name(s) for s in sweeps]
    if n_human is not None:
        budget = float(n_human)
        if not budget > 0:
            raise ArgumentError(f"n_human must be positive, got {n_human!r}")
        chosen = [s if s.kind == "human_budget" else dataclasses.replace(s, n_human=budget) for s in chosen]
    df = run(data, chosen, splits=splits, methods=methods, judges=judges, out=out, n_jobs=n_jobs, backend=backend,
             seed=seed, train_frac=train_frac, rank=rank, fresh=fresh, progress=progress)
    summary = summarize(df)
    path = Path(out) / "summary.csv"
    summary.to_csv(path, index=False)
    if not summary.empty:
        plot(summary).savefig(Path(out) / "robustness.png", dpi=120)
    return path
