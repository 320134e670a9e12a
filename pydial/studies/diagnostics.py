r"""Per-judge position-robustness diagnostics of a panel judged in both display orders.

The quantities behind the paper's Fig. 1(b) (order sensitivity against human agreement
across LLM judges) and Fig. real-diagnostics (a) (fitted order effects :math:`\hat b_k`
against the swap-inconsistency rate), computed from judgments with record ids
(e.g. :func:`pydial.read_judge_responses`): :func:`judge_diagnostics` gives the table,
:func:`plot_judge_diagnostics` and :func:`plot_position_vs_swap` the two plots.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pydial.data.comparisons import BOTH_BAD, I_WINS, J_WINS, TIE, Comparisons, require_comparisons
from pydial.data.ingest import duplicated, pack, rows_text
from pydial.estimation.results import DialResult
from pydial.estimation.spec import check_count, check_level, check_seed
from pydial.exceptions import ArgumentError, DataError

__all__ = ["RATES", "judge_diagnostics", "plot_judge_diagnostics", "plot_position_vs_swap"]

RATES: dict[str, tuple[str, str]] = {
    "swap_inconsistency": ("n_changed", "n_decided_both"),
    "first_position_rate": ("n_first_wins", "n_decisive"),
    "tie_rate": ("n_ties", "n_judgments"),
    "both_bad_rate": ("n_both_bad", "n_judgments"),
    "agreement": ("n_agree", "n_consistent_labelled"),
    "coverage": ("n_both_orders", "n_records"),
}
"""Each rate of :func:`judge_diagnostics` -> (numerator, denominator) count columns."""

BOOT_CHUNK = 200  # bootstrap replicates drawn at a time


def _record_table(data: Comparisons) -> tuple[np.ndarray, np.ndarray, int, pd.Index]:
    """Verdicts per (record, judge, order) and the human label per record.

    Returns ``v`` (records x judges x 2, int8: the canonical outcome shown with item ``i``
    first ``[..., 0]`` and with item ``j`` first ``[..., 1]``, ``-1`` none), ``human`` (per
    record, the canonical outcome of its decisive human label or ``-1``), the number of
    self-comparisons left out and the record ids.
    """
    if data.aggregated:
        raise DataError("judge diagnostics need judgments with record ids (Comparisons.from_frame, "
                        "pydial.read_judge_responses), not aggregated counts")
    f = data.frame
    rec, ids = pd.factorize(f["record_id"])
    k = f["k"].to_numpy(np.int64)
    a = f["a"].to_numpy()
    out = f["outcome"].to_numpy(np.int8)
    other = ~f["self"].to_numpy(bool)
    llm = (k < data.K) & other
    slot = (a[llm] < 0).astype(np.int64)
    dup = duplicated(pack([rec[llm], k[llm], slot], [len(ids), data.K, 2]))
    if dup.any():
        bad = f.index[np.flatnonzero(llm)[dup]]
        raise DataError(f"judge diagnostics need at most one judgment per record, judge and display order; repeated "
                        f"at {rows_text(bad)}")
    v = np.full((len(ids), data.K, 2), -1, np.int8)
    v[rec[llm], k[llm], slot] = out[llm]
    hum = (k == data.K) & other
    twice = duplicated(rec[hum])
    if twice.any():
        raise DataError(f"judge diagnostics need at most one human label per record; records "
                        f"{list(ids[rec[hum][twice]][:5])} have several")
    human = np.full(len(ids), -1, np.int8)
    decisive = hum & ((out == I_WINS) | (out == J_WINS))
    human[rec[decisive]] = out[decisive]
    return v, human, int((~other).sum()), ids


def _counts(v: np.ndarray, human: np.ndarray) -> dict[str, np.ndarray]:
    """Per record and judge (records x judges), the counts behind every rate of :data:`RATES`."""
    seen = v >= 0
    dec = (v == I_WINS) | (v == J_WINS)
    # slot 0: item i shown first, so a first-position win is I_WINS; slot 1: J_WINS
    first_wins = (v[..., 0] == I_WINS).astype(np.int8) + (v[..., 1] == J_WINS)
    both_dec = dec.all(axis=2)
    changed = both_dec & (v[..., 0] != v[..., 1])
    labelled = both_dec & ~changed & (human[:, None] >= 0)
    return {
        "n_records": seen.any(axis=2), "n_both_orders": seen.all(axis=2), "n_judgments": seen.sum(axis=2),
        "n_ties": (v == TIE).sum(axis=2), "n_both_bad": (v == BOTH_BAD).sum(axis=2), "n_decisive": dec.sum(axis=2),
        "n_first_wins": first_wins, "n_decided_both": both_dec, "n_changed": changed,
        "n_consistent_labelled": labelled, "n_agree": labelled & (v[..., 0] == human[:, None]),
    }


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _bootstrap(counts: dict[str, np.ndarray], n_boot: int, seed: Any, level: float) -> dict[str, np.ndarray]:
    """Record-clustered percentile intervals of every rate: ``{rate}_ci_low`` / ``_ci_high`` per judge.

    Each replicate draws the records with replacement (multinomial weights, all judges of a
    record together) and recomputes every rate as a ratio of weighted sums.
    """
    names = list(counts)
    R, K = counts[names[0]].shape
    M = np.concatenate([counts[c].astype(np.float64) for c in names], axis=1)  # R x (columns * K)
    rng = np.random.default_rng(seed)
    reps = []
    for start in range(0, n_boot, BOOT_CHUNK):
        b = min(BOOT_CHUNK, n_boot - start)
        draws = rng.integers(0, R, size=(b, R)) + R * np.arange(b)[:, None]  # records drawn by replicate
        w = np.bincount(draws.ravel(), minlength=b * R).reshape(b, R).astype(np.float64)
        reps.append(w @ M)
    S = np.concatenate(reps).reshape(n_boot, len(names), K)
    col = {c: t for t, c in enumerate(names)}
    q = [(1 - level) / 2, (1 + level) / 2]
    out = {}
    for rate, (num, den) in RATES.items():
        r = _ratio(S[:, col[num]], S[:, col[den]])
        ok = np.isfinite(r).any(axis=0)
        lo_hi = np.full((2, K), np.nan)
        if ok.any():
            lo_hi[:, ok] = np.nanquantile(r[:, ok], q, axis=0)
        out[f"{rate}_ci_low"], out[f"{rate}_ci_high"] = lo_hi
    return out


def judge_diagnostics(data: Comparisons, *, n_boot: int = 1000, seed: Any = None, level: float = 0.95) -> pd.DataFrame:
    """Per judge: swap inconsistency, first-position, tie and both-bad rates, agreement and coverage.

    For judge ``k``, over the records ``r`` it judged (a record is one prompt with its two
    responses, each judge queried once per display order):

    * ``swap_inconsistency``: among the records ``k`` decides in both orders (a verdict for
      one response, not a tie or "both bad", in each order), the share whose winning
      response changes when the two responses are swapped -- the swap-inconsistency rate
      of the paper's Fig. real-diagnostics (a);
    * ``first_position_rate``: the share of ``k``'s decisive verdicts that favour the
      response shown first (0.5 for a judge without order effect, above 0.5 when
      ``b_k > 0``);
    * ``tie_rate`` and ``both_bad_rate``: the shares of ``k``'s verdicts that are ties and
      "both bad" (the paper excludes a judge whose tie rate exceeds 50%);
    * ``agreement`` (order-consistent agreement, the y-axis of the paper's Fig. 1(b)): among
      the records where ``k`` gives the same decisive verdict in both orders and the human
      label is decisive, the share where ``k``'s verdict is the human's;
    * ``coverage``: the share of the records ``k`` judged that it judged in both orders.

    Under the order-effect BTL model (``logit P(first shown wins) = s_first - s_second +
    b_k``) a binary judge on a pair with score difference ``d`` changes its verdict with
    probability ``p+ (1 - p-) + (1 - p+) p-``, ``p+- = expit(d +- b_k)``, which grows with
    ``|b_k|``.

    Parameters
    ----------
    data : Comparisons
        Judgments with record ids, at most one per record, judge and display order, and at
        most one human label per record.  Self-comparisons are left out (counted in
        ``attrs["self_comparisons"]``).
    n_boot : int, default 1000
        Bootstrap replicates; ``0`` skips the intervals (``NaN``).
    seed : int, Generator or None
        Seed of the bootstrap (the same seed gives the same intervals).
    level : float, default 0.95
        Level of the percentile intervals.

    Returns
    -------
    pandas.DataFrame
        Indexed by judge: the six rates; the counts behind them (``n_records``,
        ``n_both_orders``, ``n_judgments``, ``n_ties``, ``n_both_bad``, ``n_decisive``,
        ``n_first_wins``, ``n_decided_both``, ``n_changed``, ``n_consistent_labelled``,
        ``n_agree``; :data:`RATES` pairs them); and ``<rate>_ci_low``, ``<rate>_ci_high``,
        record-clustered bootstrap percentile intervals (records drawn with replacement,
        all of a record's judgments together).  A rate with a zero denominator is ``NaN``.
        ``attrs`` holds ``level``, ``n_boot``, ``seed``, ``records`` (records with an LLM
        judgment) and ``self_comparisons``.

    Raises
    ------
    DataError
        Aggregated data (no record ids), two judgments of one record, judge and order, or
        two human labels of one record.
    ArgumentError
        ``n_boot`` negative or ``level`` outside (0, 1).
    ArgumentTypeError
        ``data`` is not a :class:`Comparisons`, ``n_boot`` not an integer, ``seed`` not an
        integer, Generator or None, ``level`` not a number.
    """
    data = require_comparisons(data)
    n_boot = check_count(n_boot, "n_boot", minimum=0)
    seed = check_seed(seed, generator=True)
    level = check_level(level)
    v, human, n_self, _ = _record_table(data)
    active = (v >= 0).any(axis=(1, 2))
    counts = _counts(v[active], human[active])
    n = {c: x.sum(axis=0).astype(np.int64) for c, x in counts.items()}
    rates = {rate: _ratio(n[num].astype(float), n[den].astype(float)) for rate, (num, den) in RATES.items()}
    table = pd.DataFrame({**rates, **n}, index=pd.Index(list(data.judges), name="judge"))
    if n_boot:
        for c, x in _bootstrap(counts, n_boot, seed, level).items():
            table[c] = x
    else:
        for rate in RATES:
            table[f"{rate}_ci_low"] = table[f"{rate}_ci_high"] = np.nan
    table.attrs.update(level=level, n_boot=n_boot, seed=seed if isinstance(seed, (int, type(None))) else repr(seed),
                       records=int(active.sum()), self_comparisons=n_self)
    return table


# ------------------------------------------------------------------ plots
def _err(table: pd.DataFrame, rate: str) -> np.ndarray:
    """Error-bar lengths (2 x judges) of ``rate`` from its interval columns (0 where undefined)."""
    e = np.vstack([table[rate] - table[f"{rate}_ci_low"], table[f"{rate}_ci_high"] - table[rate]])
    return np.where(np.isfinite(e), np.maximum(e, 0), 0)


LABEL_OFFSETS = ((4, 3), (4, -10), (4, 11), (4, -18), (4, 19), (-4, 3), (-4, -10), (-4, 11))
"""Label positions tried in turn (points right/left of and above/below the marker) until one is free."""


def _label_points(ax: Any, x: pd.Series, y: pd.Series) -> None:
    """Name each point, moving a label to the first of :data:`LABEL_OFFSETS` that overlaps no earlier label."""
    renderer = ax.figure.canvas.get_renderer()
    placed: list[Any] = []
    for name in x.index:
        for dx, dy in LABEL_OFFSETS:
            text = ax.annotate(str(name), (x[name], y[name]), fontsize=7, xytext=(dx, dy), textcoords="offset points",
                               ha="left" if dx > 0 else "right", va="center")
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in placed) or (dx, dy) == LABEL_OFFSETS[-1]:
                placed.append(box)
                break
            text.remove()


def _require(table: pd.DataFrame, rates: tuple[str, ...]) -> None:
    missing = [c for r in rates for c in (r, f"{r}_ci_low", f"{r}_ci_high") if c not in table.columns]
    if missing:
        raise ArgumentError(f"table lacks column(s) {missing}; pass the output of pydial.judge_diagnostics")


def _note_left_out(ax: Any, left: list[str]) -> None:
    if left:
        ax.text(0.01, 0.01, f"not shown (rate undefined): {', '.join(left[:4])}{' ...' if len(left) > 4 else ''}",
                transform=ax.transAxes, fontsize=7, color="grey", va="bottom")


def plot_judge_diagnostics(table: pd.DataFrame, ax: Any = None) -> Any:
    """Swap inconsistency (x) against order-consistent human agreement (y), one labelled point per judge.

    The layout of the paper's Fig. 1(b); bars are the table's bootstrap intervals.  Judges
    whose rates are undefined (no record decided in both orders, or none with a human
    label) are named in a note.  Returns the matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    _require(table, ("swap_inconsistency", "agreement"))
    ok = table["swap_inconsistency"].notna() & table["agreement"].notna()
    t = table[ok]
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 6))
    ax.margins(x=0.2, y=0.1)
    ax.errorbar(t["swap_inconsistency"], t["agreement"], xerr=_err(t, "swap_inconsistency"), yerr=_err(t, "agreement"),
                fmt="o", capsize=2, elinewidth=0.8)
    _label_points(ax, t["swap_inconsistency"], t["agreement"])
    _note_left_out(ax, [str(k) for k in table.index[~ok]])
    level = table.attrs.get("level", 0.95)
    ax.set_xlabel("swap inconsistency (verdict changes when the responses are swapped)")
    ax.set_ylabel("agreement with humans (order-consistent verdicts)")
    ax.set_title(f"Judges: position sensitivity vs human agreement ({level:.0%} record-bootstrap intervals)", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.figure.tight_layout()
    return ax


def plot_position_vs_swap(result: DialResult, table: pd.DataFrame, ax: Any = None) -> Any:
    """Fitted position effects ``b_k`` with intervals (y) against the swap-inconsistency rate (x).

    The layout of the paper's Fig. real-diagnostics (a); ``result`` is a fit with position
    effects (e.g. ``pydial.fit(data, method="llm")``) and ``table`` the
    :func:`judge_diagnostics` of the same data.  Returns the matplotlib Axes.

    Raises
    ------
    ArgumentError
        A fit without position effects, a table without the rate, or no judge in both.
    """
    import matplotlib.pyplot as plt

    pe = getattr(result, "position_effects", None)
    if pe is None:
        raise ArgumentError(f"this fit ({getattr(result, 'method', '?')!r}) has no position effects")
    _require(table, ("swap_inconsistency",))
    both = pe.join(table, how="inner")
    if both.empty:
        raise ArgumentError(f"no judge is both in the fit {list(pe.index)} and in the table {list(table.index)}")
    ok = both["swap_inconsistency"].notna()
    t = both[ok]
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 6))
    ax.margins(x=0.2, y=0.1)
    yerr = np.vstack([t["b"] - t["ci_low"], t["ci_high"] - t["b"]])
    ax.errorbar(t["swap_inconsistency"], t["b"], xerr=_err(t, "swap_inconsistency"),
                yerr=np.where(np.isfinite(yerr), yerr, 0), fmt="o", capsize=2, elinewidth=0.8)
    _label_points(ax, t["swap_inconsistency"], t["b"])
    _note_left_out(ax, [str(k) for k in both.index[~ok]])
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlabel("swap inconsistency")
    level = getattr(result, "level", 0.95)
    ax.set_ylabel(f"fitted position effect b_k ({level:.0%} interval)")
    ax.set_title("Position effects vs swap inconsistency (b > 0 favours the first-shown response)", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.figure.tight_layout()
    return ax
