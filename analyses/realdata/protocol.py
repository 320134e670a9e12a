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

The machinery (splits, seeded samples, injected judges, fits, resumable parallel driver)
is :mod:`pydial.studies.robustness`; this module holds the Arena configuration.  Results
are appended per task to ``<out>/<sweep>.csv`` (one row per method and split); a rerun
skips the (setting, split) tasks already complete (resume).

Run from the repository root::

    python -m analyses.realdata run --splits 50 --jobs 2
    python -m analyses.realdata report          # figures + summary.md only
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

import pydial
from pydial.studies import robustness as R
from pydial.studies.robustness import COLUMNS, STATUSES
from pydial.studies.robustness_sweeps import ANTI_PREFIX, PURE_PREFIX, rng_for
from pydial.studies.robustness_sweeps import anti_source as _anti_source

__all__ = ["COLUMNS", "STATUSES", "ANTI_PREFIX", "PURE_PREFIX", "rng_for", "Config", "QUICK", "run", "run_task",
           "task_frame", "pending_tasks", "load_results"]

METHODS: tuple[str, ...] = R.METHODS
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

    def sweep(self, sweep: str) -> R.Sweep:
        """The :class:`pydial.studies.robustness.Sweep` of ``sweep``."""
        return {
            "human_budget": lambda: R.human_budget(self.budgets),
            "human_budget_scarce": lambda: R.human_budget(self.scarce_budgets, n_llm=self.scarce_n_llm,
                                                          name="human_budget_scarce"),
            "pure_position": lambda: R.pure_position(self.pure_m, n_human=self.pure_n_human, prob=self.pure_prob,
                                                     template=self.pure_template),
            "anti_consensus": lambda: R.anti_consensus(self.anti_m, n_human=self.anti_n_human, n_llm=self.anti_n_llm),
            "llm_budget": lambda: R.llm_budget(self.llm_budgets, n_human=self.llm_n_human),
        }[check_sweep(sweep)]()

    def settings(self, sweep: str) -> tuple[float, ...]:
        """The swept values of ``sweep`` (n_H, m or n_LLM)."""
        return self.sweep(sweep).values

    def setting_name(self, sweep: str) -> str:
        return self.sweep(sweep).setting_name

    def n_human(self, sweep: str, setting: float) -> float:
        return self.sweep(sweep).n_human_at(setting)

    def n_llm(self, sweep: str, setting: float) -> float:
        """Target LLM budget (``inf``: all tie-excluded train judgments)."""
        return self.sweep(sweep).n_llm_at(setting)

    def method_specs(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """Label -> (method of pydial.fit, its extra keyword arguments)."""
        return {m: FIRTH_METHODS.get(m, (m, {})) for m in self.methods}

    def config_id(self, sweep: str) -> str:
        """Stable fingerprint of the parameters behind ``sweep``'s rows (rows of other runs are never mixed in)."""
        return study(self).config_id(self.sweep(sweep))


QUICK = Config(splits=2, budgets=(20, 400), scarce_budgets=(400,), pure_m=(0, 2), anti_m=(0, 1),
               llm_budgets=(1000, float("inf")))


def check_sweep(sweep: str) -> str:
    if sweep not in SWEEPS:
        raise ValueError(f"unknown sweep {sweep!r}; known: {SWEEPS}")
    return sweep


# -------------------------------------------------------------------------- data
@lru_cache(maxsize=1)
def arena() -> pydial.Comparisons:
    return pydial.datasets.arena()


def base_data() -> tuple[tuple[str, ...], str, pd.DataFrame]:
    """``(items, human_judge, long)``: the Arena battles in long format (canonical item
    orientation, ``first`` = the canonical item shown first) with helper columns
    ``is_human`` and ``decisive``."""
    td = study(Config()).data
    return td.items, td.human_judge, td.long


@lru_cache(maxsize=8)
def study(cfg: Config) -> R.Study:
    """The shared part of every task of ``cfg`` (data, panel, methods, seed)."""
    return R.study(arena(), judges=cfg.judges, methods=cfg.method_specs(), seed=cfg.seed, train_frac=cfg.train_frac,
                   rank=cfg.rank)


def anti_source(cfg: Config, split: int) -> str:
    """The panel judge whose flipped verdicts the anti-consensus judges of split ``split``
    reproduce (drawn uniformly, once per split, shared by every m)."""
    return _anti_source(cfg.judges, cfg.seed, split)


def task_frame(cfg: Config, sweep: str, setting: float, split: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The long-format training frame of one task and a description of its draws."""
    return R.training_frame(study(cfg), cfg.sweep(sweep), setting, split)


# -------------------------------------------------------------------------- tasks
def run_task(cfg: Config, sweep: str, setting: float, split: int) -> list[dict[str, Any]]:
    """Fit every method of ``cfg`` on one task; one result row per method."""
    return R.run_task(study(cfg), cfg.sweep(sweep), setting, split)


def pending_tasks(cfg: Config, sweep: str, out_dir: Path) -> list[tuple[float, int]]:
    """Tasks of ``sweep`` not yet complete in ``<out_dir>/<sweep>.csv`` (see
    :func:`pydial.studies.robustness.pending_tasks`)."""
    return R.pending_tasks(study(cfg), cfg.sweep(sweep), cfg.splits, out_dir)


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
        res = R.run_sweep(study(cfg), cfg.sweep(sweep), cfg.splits, out_dir, n_jobs=jobs, progress=progress)
        stats[sweep] = {k: v for k, v in res.items() if k != "rows"}
    return stats


def load_results(out_dir: Path, sweep: str, cfg: Config | None = None) -> pd.DataFrame:
    """The per-split rows of a sweep (restricted to ``cfg``'s settings and splits if given)."""
    df = R.load(Path(out_dir) / f"{sweep}.csv")
    if cfg is not None and len(df):
        df = df.loc[(df["config_id"].astype(str) == cfg.config_id(sweep)) & df["setting"].isin(cfg.settings(sweep))
                    & (df["split"] < cfg.splits) & df["method"].isin(cfg.methods)]
    return df.reset_index(drop=True)
