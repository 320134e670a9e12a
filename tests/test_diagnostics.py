"""pydial.judge_diagnostics: counts by hand, the order-effect BTL theory of swap inconsistency, plots."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

import pydial
from pydial.exceptions import ArgumentError, DataError
from pydial.studies.diagnostics import RATES, plot_judge_diagnostics, plot_position_vs_swap

DATA = Path(__file__).parent / "data" / "panel"


def test_hand_counts():
    """tests/data/panel/hand (see test_panel.py): j1 and j3 counted by hand."""
    t = pydial.judge_diagnostics(pydial.read_judge_responses(DATA / "hand"), n_boot=0)
    j1 = t.loc["j1"]
    # records R1..R5; both orders R1, R2, R3; 8 verdicts: R3 tie + both bad
    assert j1[["n_records", "n_both_orders", "n_judgments", "n_ties", "n_both_bad"]].tolist() == [5, 3, 8, 1, 1]
    # decisive: R1 (first wins, second wins), R2 (first, first), R4 (second), R5 (first) -> 4 of 6 first
    assert j1[["n_decisive", "n_first_wins"]].tolist() == [6, 4]
    # decided in both orders: R1 (X, X) and R2 (X, Z): one change; R1 agrees with the human label X
    assert j1[["n_decided_both", "n_changed", "n_consistent_labelled", "n_agree"]].tolist() == [2, 1, 1, 1]
    assert j1["swap_inconsistency"] == 0.5 and j1["first_position_rate"] == pytest.approx(4 / 6)
    assert j1["tie_rate"] == j1["both_bad_rate"] == 0.125 and j1["agreement"] == 1.0 and j1["coverage"] == 0.6
    j3 = t.loc["j3"]
    assert j3["tie_rate"] == 0.75 and j3["first_position_rate"] == 1.0 and j3["coverage"] == 1.0
    assert np.isnan(j3["swap_inconsistency"]) and np.isnan(j3["agreement"])  # no record decided in both orders
    for rate, (num, den) in RATES.items():
        assert np.allclose(t[rate], t[num] / t[den].where(t[den] > 0), equal_nan=True)


def test_real_lines_counts():
    """phi4 keeps its verdict on all 5 records; stablelm2 ties 6 of 9 and flips on the one record it decides twice."""
    t = pydial.judge_diagnostics(pydial.read_judge_responses(DATA / "real"), n_boot=0)
    phi, slm = t.loc["ollama-phi4-14b-direct"], t.loc["ollama-stablelm2-12b-direct"]
    assert phi[["swap_inconsistency", "first_position_rate", "agreement", "coverage"]].tolist() == [0, 0.5, 1, 1]
    assert slm[["n_changed", "n_decided_both", "n_ties", "n_judgments", "n_first_wins", "n_decisive"]].tolist() == [
        1, 1, 6, 9, 1, 3]
    assert slm["coverage"] == 0.8 and np.isnan(slm["agreement"])


def _both_orders(b: list[float], R: int, seed: int, N: int = 8) -> tuple[pd.DataFrame, np.ndarray]:
    """Binary judges of the order-effect BTL model, each record judged in both orders.

    Returns the long table and, per record, the score difference ``d = s_a - s_b`` of its pair.
    """
    rng = np.random.default_rng(seed)
    s = rng.normal(0, 1, N)
    pair = np.array([rng.choice(N, 2, replace=False) for _ in range(R)])
    d = s[pair[:, 0]] - s[pair[:, 1]]
    rows = []
    for k, bk in enumerate(b):
        a_wins_first = rng.random(R) < expit(d + bk)  # item_a shown first: P(first wins) = expit(d + b)
        b_wins_first = rng.random(R) < expit(-d + bk)  # item_b shown first
        for r in range(R):
            rows.append((r, f"j{k}", pair[r, 0], pair[r, 1], "a", "a" if a_wins_first[r] else "b"))
            rows.append((r, f"j{k}", pair[r, 0], pair[r, 1], "b", "b" if b_wins_first[r] else "a"))
    human = rng.random(R) < expit(d)
    rows += [(r, "human", pair[r, 0], pair[r, 1], "a", "a" if human[r] else "b") for r in range(R)]
    df = pd.DataFrame(rows, columns=["record_id", "judge", "item_a", "item_b", "first", "winner"])
    df[["item_a", "item_b"]] = "m" + df[["item_a", "item_b"]].astype(str)
    return df, d


def expected_swap_inconsistency(d: np.ndarray, b: float) -> np.ndarray:
    """P(the winner changes when the two responses are swapped) of a binary judge, per record.

    Item ``i`` wins with probability ``p = expit(d + b)`` when shown first and, shown second,
    with ``1 - expit(-d + b) = expit(d - b) = q``; the two queries are independent, so the
    winner changes with probability ``p (1 - q) + (1 - p) q``.  At ``b = 0`` this is
    ``2 p (1 - p)``; as ``|b|`` grows it tends to 1 (the first-shown, or the second-shown,
    response always wins).
    """
    p, q = expit(d + b), expit(d - b)
    return p * (1 - q) + (1 - p) * q


def test_swap_inconsistency_grows_with_the_position_effect_as_the_model_implies():
    b = [0.0, 0.5, -0.5, 1.0, 2.0, -2.0]
    R = 3000
    df, d = _both_orders(b, R, seed=7)
    t = pydial.judge_diagnostics(pydial.Comparisons.from_frame(df), n_boot=0)
    expected = []
    for k, bk in enumerate(b):
        e = expected_swap_inconsistency(d, bk)
        se = np.sqrt(np.sum(e * (1 - e))) / R  # independent records: the sum of Bernoulli variances
        got = t.loc[f"j{k}", "swap_inconsistency"]
        assert t.loc[f"j{k}", "n_decided_both"] == R
        assert abs(got - e.mean()) < 4 * se, (bk, got, e.mean(), se)
        # first-position rate: the mean of expit(d + b) and expit(-d + b) over the records
        first = (expit(d + bk) + expit(-d + bk)).mean() / 2
        assert abs(t.loc[f"j{k}", "first_position_rate"] - first) < 4 * np.sqrt(0.25 / (2 * R))
        expected.append(e.mean())
    # the expectation is even in b and increasing in |b|
    assert expected[1] == pytest.approx(expected[2]) and expected[4] == pytest.approx(expected[5])
    assert expected[0] < expected[1] < expected[3] < expected[4]
    assert t.loc["j0", "swap_inconsistency"] < t.loc["j3", "swap_inconsistency"] < t.loc["j4", "swap_inconsistency"]


def test_bootstrap_intervals_are_seeded_and_cover_the_estimate():
    df, _ = _both_orders([0.0, 1.5], 400, seed=3)
    data = pydial.Comparisons.from_frame(df)
    a = pydial.judge_diagnostics(data, n_boot=300, seed=11)
    b = pydial.judge_diagnostics(data, n_boot=300, seed=11)
    pd.testing.assert_frame_equal(a, b)
    for rate in RATES:
        assert (a[f"{rate}_ci_low"] <= a[rate] + 1e-12).all() and (a[rate] <= a[f"{rate}_ci_high"] + 1e-12).all()
    # the interval width is about 2 x 1.96 binomial standard errors of the records
    p, n = a.loc["j1", "swap_inconsistency"], a.loc["j1", "n_decided_both"]
    width = a.loc["j1", "swap_inconsistency_ci_high"] - a.loc["j1", "swap_inconsistency_ci_low"]
    assert width == pytest.approx(2 * 1.96 * np.sqrt(p * (1 - p) / n), rel=0.25)
    assert a.attrs["records"] == 400 and a.attrs["level"] == 0.95
    c = pydial.judge_diagnostics(data, n_boot=0)
    assert c["tie_rate_ci_low"].isna().all()


def test_refusals():
    df, _ = _both_orders([0.5], 20, seed=1)
    with pytest.raises(DataError, match="at most one judgment per record, judge and display order"):
        pydial.judge_diagnostics(pydial.Comparisons.from_frame(pd.concat([df, df.iloc[:1]], ignore_index=True)))
    with pytest.raises(DataError, match="at most one human label"):
        pydial.judge_diagnostics(pydial.Comparisons.from_frame(pd.concat([df, df.iloc[-1:]], ignore_index=True)))
    counts = df.assign(wins_a=(df["winner"] == "a").astype(int), wins_b=(df["winner"] == "b").astype(int), ties=0)
    with pytest.raises(DataError, match="record ids"):
        pydial.judge_diagnostics(pydial.Comparisons.from_counts(counts.drop(columns=["record_id", "winner"])))
    data = pydial.Comparisons.from_frame(df)
    with pytest.raises(ArgumentError, match="n_boot"):
        pydial.judge_diagnostics(data, n_boot=-1)
    with pytest.raises(ArgumentError, match="level"):
        pydial.judge_diagnostics(data, level=1.0)
    with pytest.raises(ArgumentError, match="judge_diagnostics"):
        plot_judge_diagnostics(pd.DataFrame({"swap_inconsistency": [0.1]}))


def test_plots(tmp_path):
    df, _ = _both_orders([0.0, 0.6, -1.2, 2.0], 300, seed=5)
    data = pydial.Comparisons.from_frame(df)
    table = pydial.judge_diagnostics(data, n_boot=200, seed=0)
    ax = plot_judge_diagnostics(table)
    assert len(ax.texts) == 4 and ax.get_xlabel().startswith("swap inconsistency")
    ax.figure.savefig(tmp_path / "judges.png", dpi=80)
    res = pydial.fit(data, method="judges")
    ax = plot_position_vs_swap(res, table)
    labels = {t.get_text() for t in ax.texts}
    assert {"j0", "j1", "j2", "j3"} <= labels
    ax.figure.savefig(tmp_path / "position.png", dpi=80)
    assert (tmp_path / "judges.png").stat().st_size > 0 and (tmp_path / "position.png").stat().st_size > 0
    # fitted b_k track the simulated ones, and |b_k| tracks swap inconsistency
    b = res.position_effects["b"].reindex(table.index)
    assert np.corrcoef(b.abs(), table["swap_inconsistency"])[0, 1] > 0.9

    class NoPositions:
        position_effects = None
        method = "human"

    with pytest.raises(ArgumentError, match="no position effects"):
        plot_position_vs_swap(NoPositions(), table)  # type: ignore[arg-type]
