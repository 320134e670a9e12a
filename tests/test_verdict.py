"""No number without a verdict: status of fits that are not resolved optima, degenerate
covariances, argument errors, and the design refused by the judge-subset condition."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial import Comparisons, check_design
from pydial.exceptions import ConvergenceWarning, CovarianceWarning
from pydial.studies.simulate import simulate


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    """The issue's data: N=6, K=3, n_LLM=3000, n_H=400, seed 1."""
    return simulate(6, 3, 1, 3000, 400, seed=1).frame


def first_always_wins(df: pd.DataFrame, judge: str = "judge0") -> pd.DataFrame:
    d = df.copy()
    m = d.judge == judge
    d.loc[m, "winner"] = d.loc[m, "first"]
    return d


def test_clean_fit_is_ok(frame):
    res = pydial.fit(Comparisons.from_frame(frame), "dial-anc")
    assert res.status == "ok" and res.ok and res.problems == ()
    assert "status: ok" in res.summary()


def test_first_shown_judge_refused_up_front(frame):
    data = Comparisons.from_frame(first_always_wins(frame))
    rep = check_design(data, rank=1, method="dial-anc")
    assert ("judge0", "separation") in set(zip(rep.problems["judge"], rep.problems["condition"]))
    with pytest.raises(pydial.IdentifiabilityError, match=r"'judge0'.*first-shown item won all .* not identified"):
        pydial.fit(data, "dial-anc")
    # nopos ignores the display order: nothing to refuse
    assert check_design(data, rank=1, method="dial-nopos").ok


def test_first_shown_judge_without_check_is_marked_not_clean(frame):
    data = Comparisons.from_frame(first_always_wins(frame))
    with pytest.warns(ConvergenceWarning):
        res = pydial.fit(data, "dial-anc", check=False)
    assert not res.ok and res.status in ("at bound", "no admissible candidate", "not converged")
    text = " ".join(res.problems)
    assert "judge 'judge0'" in text and "box bound" in text
    assert "NOT A VALID FIT" in res.summary() and "problem:" in res.summary()
    assert "status=" in repr(res)


def test_one_item_winning_everything_has_no_admissible_candidate(frame):
    d = frame.copy()
    d.loc[d.item_a == "item00", "winner"] = "a"
    d.loc[d.item_b == "item00", "winner"] = "b"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = pydial.fit(Comparisons.from_frame(d), "dial-ada")
    assert res.status == "no admissible candidate"
    assert any("item00" in p for p in res.problems)  # the separating item is named


def test_total_order_pooled_is_at_bound(frame):
    d = frame.copy()
    d["winner"] = np.where(d.item_a < d.item_b, "a", "b")
    data = Comparisons.from_frame(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = pydial.fit(data, "pooled")
    assert res.status == "at bound" and any("separation" in p for p in res.problems)
    with pytest.raises(pydial.ConvergenceError, match=r"no admissible candidate on the lambda path \(lambda="):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            pydial.fit(data, "dial-ada")


def test_record_meat_with_one_record_gives_nan_not_zero(frame):
    d = frame.copy()
    d["record_id"] = "r1"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pydial.exceptions.DataWarning)
        data = Comparisons.from_frame(d)
    with pytest.warns(CovarianceWarning, match=r"'record' covariance of the calibrated scores .* 1 independent cluster"):
        res = pydial.fit(data, "dial-anc", cov_type="record")
    assert res.status == "degenerate covariance"
    assert res.scores["se"].isna().all() and res.scores["ci_low"].isna().all()
    assert np.isfinite(res.scores["score"]).all()


def two_item_frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(3):
        for t in range(200):
            rows.append((len(rows), f"judge{k}", "x", "y", "a" if t % 2 else "b", "a" if rng.random() < 0.6 else "b"))
    for _ in range(100):
        rows.append((len(rows), "human", "x", "y", "a", "a" if rng.random() < 0.6 else "b"))
    return pd.DataFrame(rows, columns=["record_id", "judge", "item_a", "item_b", "first", "winner"])


def test_two_items_judges_cell_meat_is_degenerate():
    data = Comparisons.from_frame(two_item_frame())
    with pytest.warns(CovarianceWarning, match=r"'cell' covariance of the mean judge scores .* 3 independent cluster"):
        res = pydial.fit(data, "judges")
    assert res.status == "degenerate covariance"
    assert res.scores["se"].isna().all() and res.position_effects["p_value"].isna().all()
    # with the binomial meat every comparison is a cluster: finite, positive se
    ok = pydial.fit(data, "judges", cov_type="binomial")
    assert ok.ok and (ok.scores["se"] > 0).all()


def test_zero_variance_is_nan_with_warning():
    from pydial.inference.linearization import wald_table

    C = np.diag([0.04, 0.0, 0.09])
    with pytest.warns(CovarianceWarning, match="zero variance for b"):
        tab = wald_table(np.array([1.0, 2.0, 3.0]), C, ["a", "b", "c"], 0.95, "x")
    assert np.isnan(tab.loc["b", "se"]) and np.isnan(tab.loc["b", "p_value"]) and tab.loc["a", "se"] == 0.2


@pytest.mark.parametrize("bad", [-5.0, [], [0.0, 1.0], [[1.0]], "1,2", {"a": 1.0}, [1.0, float("nan")]])
def test_lambdas_must_be_a_sequence_of_positive_numbers(frame, bad):
    data = Comparisons.from_frame(frame)
    with pytest.raises(pydial.ArgumentError, match="lambda_ must be a non-empty sequence"):
        pydial.fit(data, "dial-ada", lambda_=bad)
    with pytest.raises(pydial.ArgumentError, match="multiples must be a non-empty sequence"):
        pydial.fit(data, "dial-ada", multiples=bad)


# ---------------------------------------------------------------- valid design refused
def six_of_eight(seed: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """4 judges, each comparing 6 of 8 items (judge k misses items 2k, 2k+1)."""
    full = simulate(8, 4, 1, 12000, 800, seed=seed).frame
    items = sorted(set(full.item_a) | set(full.item_b))
    parts = []
    for k in range(4):
        miss = {items[2 * k], items[2 * k + 1]}
        m = (full.judge == f"judge{k}") & ~full.item_a.isin(miss) & ~full.item_b.isin(miss)
        parts.append(full[m])
    parts.append(full[full.judge == "human"])
    return pd.concat(parts, ignore_index=True), full


def row(rep, judge, cond):
    t = rep.table
    return t[(t.judge == judge) & (t.condition == cond)].iloc[0]


def test_six_of_eight_design_is_identified_and_fits():
    part, full = six_of_eight()
    data = Comparisons.from_frame(part)
    rep = check_design(data, rank=1, method="dial-ada")
    assert not row(rep, "judge0", "ident-LLM")["ok"] and row(rep, "judge0", "ident-lowrank")["ok"]
    ss = row(rep, "all judges", "sufficient-subset")
    assert ss["ok"] and "full rank 22" in ss["detail"], ss["detail"]
    res = pydial.fit(data, "dial-anc")
    ref = pydial.fit(Comparisons.from_frame(full), "dial-anc")
    assert res.ok
    # the partial design estimates the same scores, up to its own sampling error
    assert (np.abs(res.scores["score"] - ref.scores["score"]) < 3 * res.scores["se"]).all()


def test_disjoint_judges_are_not_identified_by_the_jacobian():
    # judge a sees items 0-2 only, judge b items 3-5 only: the parameter count holds
    # (12 cells for 12 parameters) but the scores of the two halves are never linked.
    rows = []
    for judge, block in (("a", (0, 1, 2)), ("b", (3, 4, 5))):
        for i, j in ((block[0], block[1]), (block[1], block[2]), (block[0], block[2])):
            for first in ("a", "b"):
                for w in ("a", "b", "a"):
                    rows.append((len(rows), judge, f"m{i}", f"m{j}", first, w))
    for i in range(5):
        for w in ("a", "b"):
            rows.append((len(rows), "human", f"m{i}", f"m{i + 1}", "a", w))
    data = Comparisons.from_frame(pd.DataFrame(rows, columns=["record_id", "judge", "item_a", "item_b", "first", "winner"]))
    rep = check_design(data, rank=1, method="dial-anc")
    assert row(rep, "all judges", "parameter-count")["ok"]
    ss = row(rep, "all judges", "sufficient-subset")
    assert not ss["ok"] and "rank 6 < 12" in ss["detail"]
    with pytest.raises(pydial.IdentifiabilityError, match="sufficient-subset"):
        pydial.fit(data, "dial-anc")
