r"""Sweeps of :mod:`pydial.studies.robustness`: record splits, seeded samples, perturbed training data.

App. "Real Data" of the DIAL paper.

A *task* is one sweep, one setting (the swept value) and one record split.  Its training
data are a deterministic function of (root seed, sweep, setting, split): every random draw
uses :func:`rng_for`, a generator seeded by ``SeedSequence([seed, role, split, ...])`` with
string keys mapped by CRC-32 (stable across processes, unlike :func:`hash`).  The roles are

``"split"``        the record split (plus the subset name for a stratified split);
``"human"``        the permutation of the decisive train human labels (budgets are its first rows);
``"llm"``          the permutation of the decisive train judgments of the panel (LLM budgets);
``"swap"``         the permutation of the swapped train judgments (display imbalance);
``"pure"``, ``t``  the verdicts of the ``t``-th injected pure-position judge;
``"anti-source"``  the panel judge copied by the anti-consensus judges (one per split).

Draws that do not depend on the setting are shared across settings and sweeps (common
random numbers: nested budgets, nested retained swapped copies, nested injected judges).
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pydial.data.comparisons import Comparisons, require_comparisons
from pydial.exceptions import ArgumentError, DataError, DataWarning

__all__ = ["KINDS", "PURE_PREFIX", "ANTI_PREFIX", "Sweep", "TaskData", "rng_for", "display_imbalance",
           "pure_position", "anti_consensus", "llm_budget", "human_budget", "calibration", "prepare",
           "split_records", "display_subset", "inject_pure_position", "inject_anti_consensus", "anti_source",
           "task_frame"]

KINDS = ("display", "pure_position", "anti_consensus", "llm_budget", "human_budget", "calibration")
"""The kinds of sweep, one constructor each."""
PURE_PREFIX = "pure-position-"
ANTI_PREFIX = "anti-consensus-"
SETTING_NAMES = {"display": "rho_swap", "pure_position": "m", "anti_consensus": "m", "llm_budget": "n_LLM",
                 "human_budget": "n_H", "calibration": "n_H"}
CONSENSUS = ("global", "subset")
LONG = ("record_id", "judge", "item_a", "item_b", "first", "winner")


# ------------------------------------------------------------------------- seeds
def _key(x: Any) -> int:
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0:
        return int(x)
    return zlib.crc32(str(x).encode())


def rng_for(seed: int, *keys: Any) -> np.random.Generator:
    """Return a generator seeded by ``SeedSequence([seed, *keys])``.

    Non-negative integers are used as they are, anything else through the CRC-32 of its
    text, so the stream is the same in every process and run.
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), *(_key(k) for k in keys)]))


# ------------------------------------------------------------------------ sweeps
def _budget(name: str, x: Any) -> float:
    v = float(x)
    if not (v > 0 or np.isinf(v)) or np.isnan(v):
        raise ArgumentError(f"{name} must be positive (or inf for all), got {x!r}")
    return v


def _plain(x: float) -> int | float:
    """Return an integral budget as int (stable JSON fingerprints), anything else as float."""
    return int(x) if np.isfinite(x) and float(x).is_integer() else float(x)


@dataclass(frozen=True)
class Sweep:
    """One robustness sweep: its kind, swept values and fixed parameters.

    Build with the constructors (:func:`display_imbalance`, :func:`pure_position`,
    :func:`anti_consensus`, :func:`llm_budget`, :func:`human_budget`, :func:`calibration`).

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    values : tuple of float
        The swept values: ``rho_swap``, the number ``m`` of injected judges, ``n_LLM`` or ``n_H``.
    name : str
        The name of the sweep (its CSV is ``<out>/<name>.csv``).
    n_human, n_llm : float
        The fixed human and LLM budgets (``inf``: every train judgment) where not swept.
    prob : float
        Pure-position judges: probability that the first-shown response wins.
    template : str or None
        Pure-position judges: the panel judge whose train rows they judge (default: the first judge).
    subsets : tuple of (str, tuple)
        Calibration: named disjoint record subsets.
    consensus : tuple of str
        Calibration: ``"global"`` (LLM judgments of all train records) and/or ``"subset"``
        (the consensus refitted on the subset's train records).
    """

    kind: str
    values: tuple[float, ...]
    name: str = ""
    n_human: float = np.inf
    n_llm: float = np.inf
    prob: float = 0.9
    template: str | None = None
    subsets: tuple[tuple[str, tuple[Any, ...]], ...] = field(default=(), repr=False)
    consensus: tuple[str, ...] = CONSENSUS

    def __post_init__(self) -> None:
        """Check the kind and the values; name the sweep after its kind by default."""
        if self.kind not in KINDS:
            raise ArgumentError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.values:
            raise ArgumentError(f"sweep {self.kind!r} needs at least one value")
        object.__setattr__(self, "name", self.name or self.kind)

    @property
    def setting_name(self) -> str:
        """What the values are: ``rho_swap``, ``m``, ``n_LLM`` or ``n_H``."""
        return SETTING_NAMES[self.kind]

    def arms(self) -> tuple[str, ...]:
        """Return the fits of one task besides the methods: ``"<subset>:<consensus>"`` for calibration, else ``""``."""
        if self.kind != "calibration":
            return ("",)
        return tuple(f"{s}:{c}" for s, _ in self.subsets for c in self.consensus)

    def n_human_at(self, value: float) -> float:
        """Return the human budget of the task with setting ``value``."""
        return value if self.kind in ("human_budget", "calibration") else self.n_human

    def n_llm_at(self, value: float) -> float:
        """Return the LLM budget of the task with setting ``value``."""
        return value if self.kind == "llm_budget" else self.n_llm

    def params(self) -> dict[str, Any]:
        """Return the fixed parameters that define the sweep's rows (part of its fingerprint)."""
        p: dict[str, Any] = {}
        if self.kind not in ("human_budget", "calibration") and np.isfinite(self.n_human):
            p["n_human"] = _plain(self.n_human)
        if self.kind != "llm_budget" and np.isfinite(self.n_llm):
            p["n_llm"] = _plain(self.n_llm)
        if self.kind == "pure_position":
            p.update(prob=self.prob, template=self.template)
        if self.kind == "calibration":
            p.update(subsets={s: len(r) for s, r in self.subsets}, consensus=list(self.consensus),
                     subsets_crc=zlib.crc32(repr(self.subsets).encode()))
        return p


def _values(name: str, values: Sequence[Any], check: Any) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not len(values):
        raise ArgumentError(f"{name} must be a non-empty sequence of numbers, got {values!r}")
    return tuple(check(name, v) for v in values)


def _count(name: str, x: Any) -> float:
    if isinstance(x, bool) or float(x) != int(x) or int(x) < 0:
        raise ArgumentError(f"{name} must hold non-negative integers, got {x!r}")
    return float(x)


def _fraction(name: str, x: Any) -> float:
    v = float(x)
    if not 0.0 <= v <= 1.0:
        raise ArgumentError(f"{name} must hold fractions in [0, 1], got {x!r}")
    return v


def display_imbalance(rho_swap: Sequence[float] = (1.0, 0.5, 0.2, 0.05, 0.0), *, n_human: float = 300,
                      n_llm: float = np.inf, name: str = "") -> Sweep:
    r"""Display-imbalance sweep: keep every canonical-first judgment and a fraction of the swapped ones.

    The canonical orientation of a pair is pydial's: item ``i`` before ``j`` in
    ``data.items`` (``item_a`` of :meth:`Comparisons.to_frame`).  A *canonical-first*
    judgment shows item ``i`` first (``first == "a"`` there, display sign ``a = +1``); a
    *swapped* one shows ``j`` first (``first == "b"``, ``a = -1``).  Of the decisive train
    judgments of the panel, a task keeps every canonical-first one and the first
    ``round(rho_swap * n_swapped)`` swapped ones of a seeded permutation (role ``"swap"``:
    nested across ``rho_swap``); ``rho_swap = 1`` is the balanced both-order design,
    ``0`` the one-sided one.  The data must hold both display orders.

    Parameters
    ----------
    rho_swap : sequence of float
        Fractions in ``[0, 1]`` of the swapped judgments kept.
    n_human, n_llm : float
        Human budget (paper: 300) and LLM budget after the imbalance (``inf``: all).
    name : str
        Name of the sweep (default ``"display"``).

    Returns
    -------
    Sweep
    """
    return Sweep("display", _values("rho_swap", rho_swap, _fraction), name, _budget("n_human", n_human),
                 _budget("n_llm", n_llm))


def pure_position(m: Sequence[int] = (0, 2, 4, 8), *, n_human: float = 300, prob: float = 0.9,
                  template: str | None = None, n_llm: float = np.inf, name: str = "") -> Sweep:
    """Injected pure-position judges: ``m`` extra judges that prefer the first-shown response with probability ``prob``.

    Each judges every train row of the ``template`` judge (ties included), in the same
    display order, independently of the items (:func:`inject_pure_position`).

    Parameters
    ----------
    m : sequence of int
        Numbers of injected judges (nested: the first ``m`` of a larger panel).
    n_human : float
        Human budget (paper: 300).
    prob : float
        Probability that the first-shown response wins (paper: 0.9).
    template : str, optional
        Panel judge whose rows are judged (default: the first judge of the panel).
    n_llm : float
        Budget of the real panel judgments (``inf``: all).
    name : str
        Name of the sweep (default ``"pure_position"``).

    Returns
    -------
    Sweep
    """
    return Sweep("pure_position", _values("m", m, _count), name, _budget("n_human", n_human), _budget("n_llm", n_llm),
                 prob=_fraction("prob", prob), template=template)


def anti_consensus(m: Sequence[int] = (0, 1, 2, 3), *, n_human: float = 1000, n_llm: float = 2000,
                   name: str = "") -> Sweep:
    """Injected anti-consensus judges: ``m`` exact copies of one panel judge's retained judgments with flipped verdicts.

    The source judge is drawn uniformly from the panel once per split (role
    ``"anti-source"``, shared by every ``m``); see :func:`inject_anti_consensus`.

    Parameters
    ----------
    m : sequence of int
        Numbers of injected judges.
    n_human, n_llm : float
        Human budget and budget of the real panel judgments before the injection (paper: scarce LLM data).
    name : str
        Name of the sweep (default ``"anti_consensus"``).

    Returns
    -------
    Sweep
    """
    return Sweep("anti_consensus", _values("m", m, _count), name, _budget("n_human", n_human), _budget("n_llm", n_llm))


def llm_budget(n_llm: Sequence[float] = (500, 1000, 2000, 5000, 20000, np.inf), *, n_human: float = 1000,
               name: str = "") -> Sweep:
    """LLM-budget sweep: the panel's decisive train judgments subsampled to ``n_llm`` rows (nested, role ``"llm"``).

    Parameters
    ----------
    n_llm : sequence of float
        LLM budgets (``inf``: all train judgments).
    n_human : float
        Human budget.
    name : str
        Name of the sweep (default ``"llm_budget"``).

    Returns
    -------
    Sweep
    """
    return Sweep("llm_budget", _values("n_llm", n_llm, _budget), name, _budget("n_human", n_human))


def human_budget(n_human: Sequence[float] = (50, 100, 200, 400, 800, 1600), *, n_llm: float = np.inf,
                 name: str = "") -> Sweep:
    """Human-budget sweep: the first ``n_human`` of a seeded permutation of the decisive train human labels (nested).

    Parameters
    ----------
    n_human : sequence of float
        Human budgets (``inf``: all train labels).
    n_llm : float
        LLM budget (``inf``: all).
    name : str
        Name of the sweep (default ``"human_budget"``).

    Returns
    -------
    Sweep
    """
    return Sweep("human_budget", _values("n_human", n_human, _budget), name, n_llm=_budget("n_llm", n_llm))


def calibration(subsets: Mapping[str, Sequence[Any]], n_human: Sequence[float] = (np.inf,), *,
                consensus: Sequence[str] = CONSENSUS, n_llm: float = np.inf, name: str = "") -> Sweep:
    """Calibration-space test (``result.calibration_test``) on named record subsets.

    The record split is stratified by subset (each subset split ``train_frac`` /
    ``1 - train_frac``, role ``"split"`` with the subset name).  Per subset, the human
    labels are the subset's train labels (budget ``n_human``) and the reference the
    human BTL fit on its test labels; the LLM judgments are those of every train record
    (``"global"`` consensus) or of the subset's train records (``"subset"``: the consensus
    refitted within the subset).

    Parameters
    ----------
    subsets : mapping of str to sequence
        Disjoint record subsets by name (e.g. prompt language).
    n_human : sequence of float
        Human budgets per subset (``inf``: every train label of the subset).
    consensus : sequence of {"global", "subset"}
        Which consensus fits to test.
    n_llm : float
        LLM budget (``inf``: all).
    name : str
        Name of the sweep (default ``"calibration"``).

    Returns
    -------
    Sweep
    """
    if not isinstance(subsets, Mapping) or not subsets:
        raise ArgumentError(f"subsets must be a non-empty mapping of name to record ids, got {type(subsets).__name__}")
    bad = [c for c in consensus if c not in CONSENSUS] or ([] if consensus else ["(none)"])
    if bad:
        raise ArgumentError(f"consensus must hold values of {CONSENSUS}, got {list(consensus)}")
    named = tuple((str(k), tuple(v)) for k, v in subsets.items())
    seen: set[Any] = set()
    for k, ids in named:
        if seen & set(ids):
            raise ArgumentError(f"subsets must be disjoint: subset {k!r} shares records with an earlier one")
        seen |= set(ids)
    return Sweep("calibration", _values("n_human", n_human, _budget), name, n_llm=_budget("n_llm", n_llm),
                 subsets=named, consensus=tuple(consensus))


# -------------------------------------------------------------------------- data
@dataclass(frozen=True, eq=False)
class TaskData:
    """The user's judgments in long format, with what every task needs (sent to the workers).

    Attributes
    ----------
    long : DataFrame
        :meth:`Comparisons.to_frame` (canonical orientation) with the boolean columns
        ``is_human`` and ``decisive``.
    items : tuple of str
    human_judge : str
    judges : tuple of str
        The LLM judge panel.
    records : ndarray
        The distinct record ids, sorted.
    covariates : tuple of str
        Response covariates passed on to every task's :class:`Comparisons`.
    """

    long: pd.DataFrame
    items: tuple[str, ...]
    human_judge: str
    judges: tuple[str, ...]
    records: np.ndarray
    covariates: tuple[str, ...] = ()
    covariate_transform: str = "difference"
    self_preference: Mapping[str, tuple[str, ...]] | None = None

    def comparisons(self, frame: pd.DataFrame) -> Comparisons:
        """Build a :class:`Comparisons` of some rows of :attr:`long` (judges left without judgments dropped).

        ``frame`` may hold extra columns; :meth:`Comparisons.from_frame` reads the long format
        (and the covariate columns).
        """
        cov = [c for c in self.covariates if self.self_preference is None or c != "self_preference"]
        with warnings.catch_warnings():  # rows of validated data: their duplicates were reported once already
            warnings.simplefilter("ignore", DataWarning)
            return Comparisons.from_frame(frame, items=self.items, human_judge=self.human_judge, drop_empty_judges=True,
                                          covariates=cov or None, covariate_transform=self.covariate_transform,
                                          self_preference=self.self_preference)


def _sorted_ids(ids: Sequence[Any]) -> np.ndarray:
    vals = list(pd.unique(pd.Series(list(ids), dtype=object)))
    try:
        out = sorted(vals)
    except TypeError:  # mixed types: by text
        out = sorted(vals, key=str)
    return np.asarray(out, dtype=object)


def prepare(data: Comparisons, judges: Sequence[str] | None = None) -> TaskData:
    """Long-format judgments of ``data`` for the sweeps (needs record ids).

    Raises
    ------
    ArgumentTypeError
        ``data`` is not a :class:`~pydial.Comparisons`.
    DataError
        ``data`` is aggregated (no record ids) or has no human label.
    ArgumentError
        ``judges`` names a judge that ``data`` does not have.
    """
    data = require_comparisons(data)
    if data.rows is None:
        raise DataError("robustness studies need record ids: build the data with Comparisons.from_frame, not from counts")
    if data.n_human == 0:
        raise DataError("robustness studies need human labels (the test-pool reference and the calibration sample)")
    panel = tuple(data.judges) if judges is None else tuple(str(k) for k in judges)
    unknown = sorted(set(panel) - set(data.judges))
    if unknown or not panel:
        raise ArgumentError(f"judges {unknown or '(none)'} are not LLM judges of the data; known: {list(data.judges)}")
    long = data.to_frame().reset_index(drop=True)
    long["is_human"] = long["judge"].eq(data.human_judge).to_numpy()
    long["decisive"] = (long["winner"].isin(["a", "b"]) & long["item_a"].ne(long["item_b"])).to_numpy()
    return TaskData(long, tuple(data.items), data.human_judge, panel, _sorted_ids(data.record_ids), data.covariates,
                    data.covariate_transform or "difference", data.self_preference)


def split_records(records: np.ndarray, seed: int, split: int, train_frac: float,
                  strata: Sequence[tuple[str, Sequence[Any]]] = ()) -> set[Any]:
    """Return the train records of split ``split``: ``round(train_frac * n)`` of a seeded permutation.

    With ``strata`` (named disjoint subsets) each subset, and the records in none, is
    split on its own (role ``"split"`` plus the subset name).  Every judgment of a
    record, in both display orders, goes with its record.
    """
    if not strata:
        perm = rng_for(seed, "split", split).permutation(records.size)
        return set(records[perm[: int(round(train_frac * records.size))]].tolist())
    train: set[Any] = set()
    rest = set(records.tolist())
    for name, ids in strata:
        sub = _sorted_ids([r for r in ids if r in rest])
        rest -= set(sub.tolist())
        perm = rng_for(seed, "split", split, name).permutation(sub.size)
        train |= set(sub[perm[: int(round(train_frac * sub.size))]].tolist())
    other = _sorted_ids(sorted(rest, key=str))
    perm = rng_for(seed, "split", split, "").permutation(other.size)
    return train | set(other[perm[: int(round(train_frac * other.size))]].tolist())


def display_subset(rows: pd.DataFrame, rho_swap: float, seed: int, split: int) -> np.ndarray:
    """Mask of the judgments of ``rows`` kept at ``rho_swap`` (see :func:`display_imbalance`).

    Every row with ``first == "a"`` is kept; of those with ``first == "b"``, the first
    ``round(rho_swap * n_swapped)`` of a permutation drawn by ``rng_for(seed, "swap",
    split)`` over the swapped rows in index order.
    """
    swapped = rows["first"].to_numpy() == "b"
    idx = np.flatnonzero(swapped)
    order = rng_for(seed, "swap", split).permutation(idx.size)
    keep = ~swapped
    keep[idx[order[: int(round(float(rho_swap) * idx.size))]]] = True
    return keep


def _flip(winner: np.ndarray) -> np.ndarray:
    return np.where(winner == "a", "b", np.where(winner == "b", "a", winner))


def inject_pure_position(template: pd.DataFrame, m: int, prob: float, seed: int, split: int) -> list[pd.DataFrame]:
    """Return the rows of ``m`` pure-position judges ``pure-position-01 ..`` (nested in ``m``).

    Judge ``t`` copies the rows of ``template`` (records, pairs and display orders) and
    lets the first-shown response win with probability ``prob`` (draws of
    ``rng_for(seed, "pure", split, t)``), whatever the items.
    """
    first = template["first"].to_numpy()
    out = []
    for t in range(1, int(m) + 1):
        wins_first = rng_for(seed, "pure", split, t).random(len(template)) < prob
        out.append(template.assign(judge=f"{PURE_PREFIX}{t:02d}", winner=np.where(wins_first, first, _flip(first))))
    return out


def inject_anti_consensus(llm: pd.DataFrame, source: str, m: int) -> list[pd.DataFrame]:
    """Return the rows of ``m`` anti-consensus judges ``anti-consensus-01 ..``: ``source``'s rows of ``llm`` flipped."""
    rows = llm.loc[llm["judge"] == source]
    flipped = _flip(rows["winner"].to_numpy())
    return [rows.assign(judge=f"{ANTI_PREFIX}{t:02d}", winner=flipped) for t in range(1, int(m) + 1)]


def anti_source(judges: Sequence[str], seed: int, split: int) -> str:
    """Return the panel judge copied by the anti-consensus judges of split ``split`` (uniform, shared by every ``m``)."""
    return judges[int(rng_for(seed, "anti-source", split).integers(len(judges)))]


def _take(pool: np.ndarray, budget: float, what: str, sweep: Sweep) -> np.ndarray:
    if not np.isfinite(budget):
        return pool
    if what == "n_human" and budget > pool.size:
        raise ArgumentError(f"n_human = {_plain(budget)} of sweep {sweep.name!r} exceeds the {pool.size} decisive "
                            "train human labels of a split")
    return pool[: int(budget)]


def task_frame(td: TaskData, pools: Mapping[str, np.ndarray], sweep: Sweep, value: float, seed: int, split: int,
               subset: Sequence[Any] | None = None, consensus: str = "global") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Return the long-format training rows of one task (one calibration arm) and a description of its draws.

    ``pools`` holds row indices into ``td.long``: ``"human"`` and ``"llm"`` (decisive train
    rows in their seeded sampling order) and ``"train"`` (every train row, in order).
    """
    long, cols = td.long, [c for c in td.long.columns if c not in ("is_human", "decisive")]
    human, llm_pool = pools["human"], pools["llm"]
    if subset is not None:
        in_sub = long["record_id"].isin(set(subset)).to_numpy()
        human = human[in_sub[human]]
        llm_pool = llm_pool[in_sub[llm_pool]] if consensus == "subset" else llm_pool
    if sweep.kind == "display":
        llm_pool = llm_pool[display_subset(long.loc[llm_pool], value, seed, split)]
    llm = long.loc[np.sort(_take(llm_pool, sweep.n_llm_at(value), "n_llm", sweep)), cols]
    info: dict[str, Any] = {"n_injected": 0, "sources": ""}
    extra: list[pd.DataFrame] = []
    if sweep.kind == "pure_position" and value > 0:
        src = sweep.template or td.judges[0]
        train = pools["train"]
        extra = inject_pure_position(long.loc[train[(long["judge"].to_numpy() == src)[train]], cols], int(value),
                                     sweep.prob, seed, split)
        info.update(n_injected=int(value), sources=src)
    elif sweep.kind == "anti_consensus" and value > 0:
        src = anti_source(td.judges, seed, split)
        extra = inject_anti_consensus(llm, src, int(value))
        info.update(n_injected=int(value), sources=src)
    hum = long.loc[_take(human, sweep.n_human_at(value), "n_human", sweep), cols]
    return pd.concat([llm, *extra, hum], ignore_index=True), info
