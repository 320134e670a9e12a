r"""Real-data protocol of the DIAL paper (App. "Real Data", "Protocol and estimators") on the
bundled Chatbot Arena battles (:func:`pydial.datasets.arena`).

Protocol (one *task* = one sweep, one setting, one record split):

* records (``question_id``) are split 70/30 into train/test pools with a generator seeded
  by the split index only, so every sweep and setting sees the same split ``b``;
* the human calibration sample of budget ``n_H`` is the first ``n_H`` rows of a seeded
  permutation of the decisive train human labels (nested across budgets);
* the LLM data are the tie-excluded train judgments of the judge panel (all three LLM
  judges by default), optionally subsampled to ``n_LLM`` rows (the first ``n_LLM`` of a
  seeded permutation, nested across budgets and shared by the sweeps that use it);
* the reference is the human BTL fit on all decisive test-pool human labels
  (``s_test``); the metrics are the excess held-out human log loss
  ``l_H^test(s_hat) - l_H^test(s_test)`` and Kendall's tau of ``s_hat`` against
  ``s_test``;
* methods Human, Pooled, DIAL-noPos, DIAL-Anc, DIAL-Ada and AtC at rank ``r = 1``.  A fit
  that raises :class:`pydial.IdentifiabilityError` (e.g. no finite human MLE at small
  ``n_H``, which also blocks AtC) is recorded with status ``not_finite``; a
  :class:`pydial.ConvergenceError` (no admissible candidate) with status ``failed``;
  neither is averaged.

Sweeps:

``human_budget``        n_H grid, all LLM judgments of the panel (paper Fig. real-efficiency top,
                        Fig. real-calibration (a));
``human_budget_scarce`` n_H grid with the panel subsampled to n_LLM = 2000 (Fig. real-calibration (b));
``pure_position``       m injected pure-position judges at n_H = 300: each judges every train
                        record of a template judge, in the same display order, and prefers the
                        first-shown response with probability 0.9;
``anti_consensus``      m injected anti-consensus judges at n_H = 1000 and n_LLM = 2000: each
                        reproduces the flipped verdicts (on the retained LLM subsample) of one
                        randomly selected panel judge (drawn once per split);
``llm_budget``          n_LLM grid at n_H = 1000.

Display design of the Arena data: each LLM judge saw every battle once, with model_a shown
first (an assumption about the source, see the data README); model_a/model_b vary across
battles, so every pair occurs in both canonical orientations across records.  There are no
swapped copies, so the paper's display-imbalance sweep (rho_swap) is not possible here.

Seeds: every random draw uses ``numpy.random.SeedSequence([seed, role, split, ...])`` with
string keys mapped by CRC-32 (stable across processes, unlike ``hash()``); the roles are
``"split"`` (record split), ``"human"`` (calibration-sample permutation), ``"llm"`` (LLM
subsample permutation), ``"pure"`` + judge number (pure-position verdicts) and
``"anti-source"`` (source judge).  A task's data are therefore a deterministic function of
(root seed, sweep, setting, split), independent of the worker and of the task order.  Draws
that do not depend on the setting are shared across settings and sweeps (common random
numbers; nested budgets, nested injected judges), so curves compare settings on the same
splits and samples.

Results are appended per task to ``<out>/<sweep>.csv`` (one row per method and split);
a rerun skips the (setting, split) tasks already complete (resume).

Run from the repository root::

    python -m analyses.realdata run --splits 50 --jobs 2
    python -m analyses.realdata report          # figures + summary.md only
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

import pydial
from pydial.data.comparisons import HumanCells
from pydial.estimation.estimators import method_arguments
from pydial.exceptions import ConvergenceError, DialError, IdentifiabilityError
from pydial.model.likelihood import human_loss
from pydial.studies.metrics import kendall_tau

PROTOCOL_VERSION = 1
METHODS: tuple[str, ...] = ("human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc")
# Bias-reduced variants (``pydial.fit(..., penalty="firth")``), not part of the default run:
# name -> (method, extra keyword arguments of pydial.fit).
FIRTH_METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    **{f"{m}-firth": (m, {"penalty": "firth"}) for m in ("human", "pooled", "dial-anc", "dial-ada", "dial-nopos", "atc")},
    "dial-ada-firth-anchored": ("dial-ada", {"penalty": "firth", "include_endpoints": "anchored"}),
}
LABELS = {"human": "Human", "pooled": "Pooled", "dial-nopos": "DIAL-noPos", "dial-anc": "DIAL-Anc",
          "dial-ada": "DIAL-Ada", "atc": "AtC", "human-firth": "Human (Firth)", "pooled-firth": "Pooled (Firth)",
          "dial-anc-firth": "DIAL-Anc (Firth)", "dial-ada-firth": "DIAL-Ada (Firth)",
          "dial-nopos-firth": "DIAL-noPos (Firth)", "atc-firth": "AtC (Firth)",
          "dial-ada-firth-anchored": "DIAL-Ada (Firth, lambda = 0 not competing)"}
SWEEPS: tuple[str, ...] = ("human_budget", "human_budget_scarce", "pure_position", "anti_consensus", "llm_budget")
PANEL: tuple[str, ...] = ("gpt-4-0125-preview", "claude-3-opus-20240229", "gpt-3.5-turbo")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
QUICK_DIR = Path(__file__).resolve().parent / "results_quick"  # smoke runs (git-ignored)
PURE_PREFIX = "pure-position-"
ANTI_PREFIX = "anti-consensus-"
STATUSES = ("ok", "not_finite", "failed", "error", "no_reference")

# Per-split result columns (one row per method, setting and split).
COLUMNS: tuple[str, ...] = (
    "sweep", "config_id", "seed", "setting", "split", "method", "status",
    "excess_loss", "kendall_tau", "loss_test", "loss_ref",
    "lambda", "lambda_multiple", "oracle_excess_loss", "oracle_multiple", "converged", "fallback",
    "b_injected_mean", "n_human", "n_llm", "K", "n_injected", "sources",
    "n_train_records", "n_test_records", "n_test_human",
    "n_warnings", "message", "fit_seconds",
)


# ------------------------------------------------------------------ configuration
@dataclass(frozen=True)
class Config:
    """Everything that defines a run (see the module docstring)."""

    splits: int = 50
    seed: int = 20260
    train_frac: float = 0.7
    judges: tuple[str, ...] = PANEL
    methods: tuple[str, ...] = METHODS
    rank: int = 1
    budgets: tuple[int, ...] = (50, 100, 200, 400, 800, 1600, 3200, 6400, 12800)
    scarce_n_llm: int = 2000
    scarce_budgets: tuple[int, ...] = (50, 100, 200, 400, 800, 1600, 3200)
    pure_m: tuple[int, ...] = (0, 2, 4, 8)
    pure_n_human: int = 300
    pure_prob: float = 0.9
    pure_template: str = "gpt-4-0125-preview"
    anti_m: tuple[int, ...] = (0, 1, 2, 3)
    anti_n_llm: int = 2000
    anti_n_human: int = 1000
    llm_budgets: tuple[float, ...] = (500, 1000, 2000, 5000, 20000, float("inf"))
    llm_n_human: int = 1000

    def __post_init__(self) -> None:
        unknown = sorted(set(self.methods) - set(METHODS) - set(FIRTH_METHODS))
        if unknown:
            raise ValueError(f"unknown method(s) {unknown}; known: {METHODS + tuple(FIRTH_METHODS)}")
        if self.pure_template not in self.judges:
            raise ValueError(f"pure_template {self.pure_template!r} is not in the judge panel {self.judges}")

    def settings(self, sweep: str) -> tuple[float, ...]:
        """The swept values of ``sweep`` (n_H, m or n_LLM)."""
        return tuple(float(x) for x in {
            "human_budget": self.budgets, "human_budget_scarce": self.scarce_budgets, "pure_position": self.pure_m,
            "anti_consensus": self.anti_m, "llm_budget": self.llm_budgets}[check_sweep(sweep)])

    def setting_name(self, sweep: str) -> str:
        return {"human_budget": "n_H", "human_budget_scarce": "n_H", "pure_position": "m",
                "anti_consensus": "m", "llm_budget": "n_LLM"}[check_sweep(sweep)]

    def n_human(self, sweep: str, setting: float) -> int:
        if sweep in ("human_budget", "human_budget_scarce"):
            return int(setting)
        return {"pure_position": self.pure_n_human, "anti_consensus": self.anti_n_human,
                "llm_budget": self.llm_n_human}[check_sweep(sweep)]

    def n_llm(self, sweep: str, setting: float) -> float:
        """Target LLM budget (``inf``: all tie-excluded train judgments)."""
        if sweep == "llm_budget":
            return float(setting)
        return {"human_budget": np.inf, "human_budget_scarce": float(self.scarce_n_llm), "pure_position": np.inf,
                "anti_consensus": float(self.anti_n_llm)}[check_sweep(sweep)]

    def sweep_params(self, sweep: str) -> dict[str, Any]:
        """Parameters that define a sweep's rows, except the list of settings and of splits."""
        p: dict[str, Any] = {"version": PROTOCOL_VERSION, "seed": self.seed, "train_frac": self.train_frac,
                             "judges": list(self.judges), "rank": self.rank}
        if sweep == "human_budget_scarce":
            p["n_llm"] = self.scarce_n_llm
        elif sweep == "pure_position":
            p.update(n_human=self.pure_n_human, prob=self.pure_prob, template=self.pure_template)
        elif sweep == "anti_consensus":
            p.update(n_human=self.anti_n_human, n_llm=self.anti_n_llm)
        elif sweep == "llm_budget":
            p["n_human"] = self.llm_n_human
        return p

    def config_id(self, sweep: str) -> str:
        """Stable fingerprint of :meth:`sweep_params` (rows of other runs are never mixed in)."""
        text = json.dumps({"sweep": sweep, **self.sweep_params(sweep)}, sort_keys=True)
        return hashlib.sha1(text.encode()).hexdigest()[:10]


QUICK = Config(splits=2, budgets=(20, 400), scarce_budgets=(400,), pure_m=(0, 2), anti_m=(0, 1),
               llm_budgets=(1000, float("inf")))


def check_sweep(sweep: str) -> str:
    if sweep not in SWEEPS:
        raise ValueError(f"unknown sweep {sweep!r}; known: {SWEEPS}")
    return sweep


# ------------------------------------------------------------------------- seeds
def _key(x: Any) -> int:
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0:
        return int(x)
    return zlib.crc32(str(x).encode())


def rng_for(seed: int, *keys: Any) -> np.random.Generator:
    """Generator seeded by ``SeedSequence([seed, *keys])`` (strings by CRC-32: stable across runs)."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), *(_key(k) for k in keys)]))


# -------------------------------------------------------------------------- data
@lru_cache(maxsize=1)
def base_data() -> tuple[tuple[str, ...], str, pd.DataFrame]:
    """``(items, human_judge, long)``: the Arena battles in long format (canonical item
    orientation, ``first`` = the canonical item shown first) with helper columns
    ``is_human`` and ``decisive``."""
    data = pydial.datasets.arena()
    long = data.to_frame().reset_index(drop=True)
    long["is_human"] = long["judge"].eq(data.human_judge).to_numpy()
    long["decisive"] = (long["winner"].isin(["a", "b"]) & long["item_a"].ne(long["item_b"])).to_numpy()
    return data.items, data.human_judge, long


@dataclass(frozen=True)
class SplitPools:
    """Row indices (into :func:`base_data`'s frame) of one record split and its reference."""

    split: int
    train_human: np.ndarray      # decisive train human rows, in sampling order
    train_llm: np.ndarray        # decisive train rows of the panel, in sampling order
    train_template: np.ndarray   # all train rows of the pure-position template judge (ties included)
    test_human: HumanCells | None
    s_test: np.ndarray | None
    loss_ref: float
    reference_message: str
    n_train_records: int
    n_test_records: int


@lru_cache(maxsize=None)
def split_pools(seed: int, train_frac: float, judges: tuple[str, ...], template: str, split: int) -> SplitPools:
    """The train/test pools of split ``split`` and the test-pool human BTL reference."""
    items, _, long = base_data()
    rec = np.array(sorted(pd.unique(long["record_id"]).tolist()), dtype=object)
    perm = rng_for(seed, "split", split).permutation(rec.size)
    n_train = int(round(train_frac * rec.size))
    in_train = long["record_id"].isin(set(rec[perm[:n_train]].tolist())).to_numpy()
    is_h, dec = long["is_human"].to_numpy(), long["decisive"].to_numpy()
    panel = long["judge"].isin(list(judges)).to_numpy()
    th = np.flatnonzero(in_train & is_h & dec)
    th = th[rng_for(seed, "human", split).permutation(th.size)]
    tl = np.flatnonzero(in_train & panel & dec)
    tl = tl[rng_for(seed, "llm", split).permutation(tl.size)]
    tt = np.flatnonzero(in_train & long["judge"].eq(template).to_numpy())
    test = pydial.Comparisons.from_frame(long.loc[~in_train & is_h & dec, list(pydial.data.comparisons.COLUMNS)], items=items)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = pydial.fit(test, "human")
        s_test = ref.scores["score"].to_numpy()
        msg = "" if ref.converged else "reference human BTL not converged"
        loss_ref = human_loss(s_test, test.human)
    except DialError as e:  # pragma: no cover - the Arena test pools always identify the BTL
        s_test, loss_ref, msg = None, np.nan, f"no test-pool reference: {_first_line(e)}"
    return SplitPools(split, th, tl, tt, test.human, s_test, loss_ref, msg, n_train, rec.size - n_train)


def _first_line(e: BaseException, limit: int = 300) -> str:
    text = str(e).strip().splitlines()
    return (f"{type(e).__name__}: " + (text[0] if text else ""))[:limit]


def _flip(winner: np.ndarray) -> np.ndarray:
    return np.where(winner == "a", "b", np.where(winner == "b", "a", winner))


def anti_source(cfg: Config, split: int) -> str:
    """The panel judge whose flipped verdicts the anti-consensus judges of split ``split``
    reproduce (drawn uniformly, once per split, shared by every m)."""
    return cfg.judges[int(rng_for(cfg.seed, "anti-source", split).integers(len(cfg.judges)))]


def task_frame(cfg: Config, sweep: str, setting: float, split: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The long-format training frame of one task and a description of its draws.

    Columns are pydial's long format (``record_id, judge, item_a, item_b, first, winner``).
    """
    items, _, long = base_data()
    pools = split_pools(cfg.seed, cfg.train_frac, cfg.judges, cfg.pure_template, split)
    cols = list(pydial.data.comparisons.COLUMNS)
    n_h = cfg.n_human(sweep, setting)
    if n_h > pools.train_human.size:
        raise ValueError(f"n_H = {n_h} exceeds the {pools.train_human.size} decisive train human labels of split {split}")
    target = cfg.n_llm(sweep, setting)
    llm_idx = pools.train_llm if not np.isfinite(target) else pools.train_llm[: int(target)]
    llm = long.loc[np.sort(llm_idx), cols]
    extra: list[pd.DataFrame] = []
    info: dict[str, Any] = {"n_injected": 0, "sources": ""}
    if sweep == "pure_position":
        m = int(setting)
        tpl = long.loc[pools.train_template, cols]
        first = tpl["first"].to_numpy()
        for t in range(1, m + 1):
            wins_first = rng_for(cfg.seed, "pure", split, t).random(len(tpl)) < cfg.pure_prob
            extra.append(tpl.assign(judge=f"{PURE_PREFIX}{t:02d}",
                                    winner=np.where(wins_first, first, _flip(first))))
        info.update(n_injected=m, sources=cfg.pure_template if m else "")
    elif sweep == "anti_consensus":
        m = int(setting)
        src = anti_source(cfg, split)
        rows = llm.loc[llm["judge"] == src]
        flipped = _flip(rows["winner"].to_numpy())
        for t in range(1, m + 1):
            extra.append(rows.assign(judge=f"{ANTI_PREFIX}{t:02d}", winner=flipped))
        info.update(n_injected=m, sources=src if m else "")
    human = long.loc[pools.train_human[:n_h], cols]
    frame = pd.concat([llm, *extra, human], ignore_index=True)
    return frame, info


# -------------------------------------------------------------------------- tasks
def _fit(data: pydial.Comparisons, method: str, rank: int) -> tuple[Any, list[str]]:
    """Fit ``method`` (a name of :data:`FIRTH_METHODS` fits its base method with its options)."""
    base, kw = FIRTH_METHODS.get(method, (method, {}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = pydial.fit(data, base, **method_arguments(base, rank=rank), **kw)
    return res, [str(w.message) for w in caught]


def run_task(cfg: Config, sweep: str, setting: float, split: int) -> list[dict[str, Any]]:
    """Fit every method of ``cfg`` on one task; one result row per method."""
    items, _, _ = base_data()
    pools = split_pools(cfg.seed, cfg.train_frac, cfg.judges, cfg.pure_template, split)
    common = {"sweep": sweep, "config_id": cfg.config_id(sweep), "seed": cfg.seed, "setting": float(setting),
              "split": int(split), "n_train_records": pools.n_train_records, "n_test_records": pools.n_test_records,
              "n_test_human": int(pools.test_human.n.sum()) if pools.test_human is not None else 0}
    if pools.s_test is None:  # pragma: no cover
        return [_row(common, method=m, status="no_reference", message=pools.reference_message) for m in cfg.methods]
    frame, info = task_frame(cfg, sweep, setting, split)
    data = pydial.Comparisons.from_frame(frame, items=items, drop_empty_judges=True)
    common.update(n_human=data.n_human, n_llm=data.n_llm, K=data.K, **info)
    out = []
    for method in cfg.methods:
        row = _row(common, method=method)
        t0 = time.perf_counter()
        msgs: list[str] = []
        try:
            res, msgs = _fit(data, method, cfg.rank)
            s = res.scores["score"].to_numpy()
            loss = human_loss(s, pools.test_human)
            lam = float(res.lambda_)
            row.update(status="ok", loss_test=loss, loss_ref=pools.loss_ref, excess_loss=loss - pools.loss_ref,
                       kendall_tau=kendall_tau(s, pools.s_test), converged=bool(res.converged),
                       fallback=bool(res.fallback), **{"lambda": lam},
                       lambda_multiple=lam * data.n_human / data.n_llm if np.isfinite(lam) and lam > 0 else lam)
            if FIRTH_METHODS.get(method, (method, {}))[0] in ("dial-ada", "dial-nopos"):
                row.update(_oracle(res, data, pools))
            if res.position_effects is not None and info["n_injected"]:
                b = res.position_effects["b"]
                inj = [k for k in b.index if str(k).startswith((PURE_PREFIX, ANTI_PREFIX))]
                row["b_injected_mean"] = float(b[inj].mean()) if inj else np.nan
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
        out.append(row)
    return out


def _row(common: dict[str, Any], **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {c: np.nan for c in COLUMNS}
    row.update(message="", n_warnings=0, n_injected=0, sources="")
    row.update(common)
    row.update(kw)
    return row


def _oracle(res: Any, data: pydial.Comparisons, pools: SplitPools) -> dict[str, float]:
    """Best candidate of the weight path by test loss (the paper's dotted oracle line)."""
    best, mult = np.inf, np.nan
    for c in (e.candidate for e in res.path):
        if c.s is None or not c.admissible:
            continue
        ex = human_loss(np.asarray(c.s), pools.test_human) - pools.loss_ref
        if ex < best:
            best, mult = ex, float(c.multiple)
    return {"oracle_excess_loss": best if np.isfinite(best) else np.nan, "oracle_multiple": mult}


# ------------------------------------------------------------------------ driver
def _read(path: Path) -> pd.DataFrame:
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=list(COLUMNS))
    return pd.read_csv(path, keep_default_na=True, dtype={"message": str, "sources": str})


def pending_tasks(cfg: Config, sweep: str, out_dir: Path) -> list[tuple[float, int]]:
    """Tasks of ``sweep`` not yet complete in ``<out_dir>/<sweep>.csv``.

    Rows of incomplete tasks (a method missing) are removed from the file so that the
    rerun does not duplicate them; rows of another configuration raise.
    """
    path = Path(out_dir) / f"{sweep}.csv"
    df = _read(path)
    cid = cfg.config_id(sweep)
    other = df.loc[df["config_id"].astype(str) != cid]
    if len(other):
        raise RuntimeError(f"{path} holds rows of another configuration (config_id {sorted(set(other['config_id']))} "
                           f"!= {cid}); use another --out or --fresh")
    need = set(cfg.methods)
    done: set[tuple[float, int]] = set()
    if len(df):
        for (st, sp), g in df.groupby(["setting", "split"]):
            if need <= set(g["method"]):
                done.add((float(st), int(sp)))
        keep = [(float(st), int(sp)) in done for st, sp in zip(df["setting"], df["split"])]
        if not all(keep):
            df.loc[keep].to_csv(path, index=False)
    return [(st, sp) for sp in range(cfg.splits) for st in cfg.settings(sweep) if (st, sp) not in done]


def run_sweep(cfg: Config, sweep: str, out_dir: Path, *, jobs: int = 1, progress: bool = True) -> dict[str, Any]:
    """Run the pending tasks of one sweep, appending each task's rows to the sweep CSV."""
    from joblib import Parallel, delayed
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{sweep}.csv"
    tasks = pending_tasks(cfg, sweep, out_dir)
    t0 = time.perf_counter()
    task_seconds = 0.0
    if tasks:
        par = Parallel(n_jobs=jobs, return_as="generator", batch_size=1)
        gen = par(delayed(run_task)(cfg, sweep, st, sp) for st, sp in tasks)
        for rows in tqdm(gen, total=len(tasks), desc=sweep, disable=not progress, mininterval=2.0):
            df = pd.DataFrame(rows, columns=list(COLUMNS))
            task_seconds += float(df["fit_seconds"].sum())
            df.to_csv(path, mode="a", header=not path.exists() or path.stat().st_size == 0, index=False)
    wall = time.perf_counter() - t0
    stats = {"tasks_run": len(tasks), "wall_seconds": round(wall, 2), "fit_seconds": round(task_seconds, 2),
             "jobs": jobs}
    _update_timings(out_dir, sweep, stats)
    return stats


def _update_timings(out_dir: Path, sweep: str, stats: dict[str, Any]) -> None:
    path = out_dir / "timings.json"
    t = json.loads(path.read_text()) if path.exists() else {}
    cur = t.get(sweep, {"tasks_run": 0, "wall_seconds": 0.0, "fit_seconds": 0.0, "runs": 0})
    if stats["tasks_run"]:
        cur = {"tasks_run": cur["tasks_run"] + stats["tasks_run"],
               "wall_seconds": round(cur["wall_seconds"] + stats["wall_seconds"], 2),
               "fit_seconds": round(cur["fit_seconds"] + stats["fit_seconds"], 2),
               "runs": cur.get("runs", 0) + 1, "jobs": stats["jobs"]}
    t[sweep] = cur
    path.write_text(json.dumps(t, indent=2, sort_keys=True) + "\n")


def run(cfg: Config, out_dir: Path, *, sweeps: Iterable[str] = SWEEPS, jobs: int = 1, progress: bool = True,
        fresh: bool = False) -> dict[str, dict[str, Any]]:
    """Run several sweeps (resuming unless ``fresh``); returns per-sweep timing stats."""
    out_dir = Path(out_dir)
    stats = {}
    for sweep in sweeps:
        check_sweep(sweep)
        if fresh:
            (out_dir / f"{sweep}.csv").unlink(missing_ok=True)
            tp = out_dir / "timings.json"
            if tp.exists():
                t = json.loads(tp.read_text())
                t.pop(sweep, None)
                tp.write_text(json.dumps(t, indent=2, sort_keys=True) + "\n")
        stats[sweep] = run_sweep(cfg, sweep, out_dir, jobs=jobs, progress=progress)
    return stats


def load_results(out_dir: Path, sweep: str, cfg: Config | None = None) -> pd.DataFrame:
    """The per-split rows of a sweep (restricted to ``cfg``'s settings and splits if given)."""
    df = _read(Path(out_dir) / f"{sweep}.csv")
    if cfg is not None and len(df):
        df = df.loc[(df["config_id"].astype(str) == cfg.config_id(sweep)) & df["setting"].isin(cfg.settings(sweep))
                    & (df["split"] < cfg.splits) & df["method"].isin(cfg.methods)]
    return df.reset_index(drop=True)
