"""What users read: p-values, item order of the figures, the HTML report, compare_intervals.csv."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2, norm

from pydial.formatting import format_pvalue, format_pvalue_from_log, pvalue_from_log


@pytest.mark.parametrize("p, text", [
    (3.14e-8, "3.1e-08"), (8.1e-10, "8.1e-10"), (0.0423, "0.042"), (0.001, "0.001"), (0.5, "0.5"),
    (0.00099, "9.9e-04"), (1.0, "1"), (0.0, "< 1e-300"), (1e-320, "< 1e-300"), (math.nan, "nan"),
])
def test_format_pvalue(p, text):
    assert format_pvalue(p) == text


def test_format_pvalue_is_never_zero():
    for p in np.logspace(-330, 0, 400):
        assert format_pvalue(p) not in ("0", "0.0", "0.00")
        assert float(format_pvalue(p).lstrip("< ")) > 0


def test_format_pvalue_from_log_matches_direct_where_p_is_representable():
    """The two-sided Wald p-value of z = -5.63 is 1.8e-08 (R: 2*pnorm(-5.63) = 1.801e-08)."""
    logp = float(norm.logsf(5.63) + math.log(2))
    assert format_pvalue_from_log(logp) == format_pvalue(2 * norm.sf(5.63)) == "1.8e-08"
    assert pvalue_from_log(logp) == pytest.approx(1.801e-08, rel=1e-3)


def test_format_pvalue_from_log_below_the_floor():
    """z = 40 has a one-sided p of exp(-804.6): underflows as a float, its log does not."""
    logp = float(norm.logsf(40.0))
    assert norm.sf(40.0) == 0.0 and logp == pytest.approx(-804.608, abs=1e-3)
    assert format_pvalue_from_log(logp) == "< 1e-300"
    assert format_pvalue_from_log(math.nan) == "nan"
    assert format_pvalue_from_log(float(chi2.logsf(1450.0, 18))) == "2.6e-297"


# ---------------------------------------------------------------- figures, reports, CSV files
import json  # noqa: E402
import re  # noqa: E402
import types  # noqa: E402
import warnings  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import pydial  # noqa: E402
from pydial.exceptions import DataWarning  # noqa: E402
from pydial.inference.calibration_test import CalibrationTest  # noqa: E402
from pydial.outputs import read_interval_table, write_interval_table  # noqa: E402
from pydial.report import (  # noqa: E402
    calibration_sentence, plot_covariate_effects, plot_gacv, plot_position_effects, plot_scores, tie_parameter_name, write_report,
)
from pydial.stan.compare import IntervalComparison  # noqa: E402


@pytest.fixture(scope="module")
def fitted():
    data = pydial.datasets.synthetic()
    return pydial.fit(data, "dial-ada"), data


def _labels_top_down(ax) -> list[str]:
    """Y tick labels from the top of the axes down (whatever the axis direction)."""
    ticks = [(t.get_position()[1], t.get_text()) for t in ax.get_yticklabels()]
    top_first = ax.get_ylim()[0] > ax.get_ylim()[1]
    return [text for _, text in sorted(ticks, reverse=not top_first)]


def _descending(scores: pd.Series) -> list[str]:
    return [name for name, _ in sorted(scores.items(), key=lambda kv: -kv[1])]


def test_scores_plot_lists_items_by_fitted_score(fitted):
    res, _ = fitted
    ax = plot_scores(res)
    assert _labels_top_down(ax) == _descending(res.scores["score"])
    assert ax.get_ylabel() == "items, ordered by fitted score"
    assert "log-odds" in ax.get_xlabel() and "sandwich (cell-clustered)" in ax.get_xlabel()
    plt.close(ax.figure)


def test_position_effects_plot_names_scale_and_covariance(fitted):
    res, data = fitted
    ax = plot_position_effects(res, data)
    assert ax.get_ylabel().startswith("position effect b (log-odds)") and "95% intervals, sandwich" in ax.get_ylabel()
    ax.figure.canvas.draw()  # every judge's label inside the axes
    box = ax.get_window_extent()
    for t in ax.texts:
        bb = t.get_window_extent()
        assert box.x0 <= bb.x0 and bb.x1 <= box.x1, t.get_text()
    plt.close(ax.figure)


def test_gacv_plot_one_axis_in_multiples_with_the_endpoints_and_the_selection(fitted):
    res, _ = fitted
    ax = plot_gacv(res)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "0\n(human only)" and labels[-1] == "inf\n(anchored)"
    assert "multiples of n_LLM/n_H" in ax.get_xlabel() and "lambda =" not in ax.get_title()
    sel = res.lambda_ * res.n_human / res.n_llm  # the selected weight in multiples
    lines = [ln for ln in ax.get_lines() if ln.get_label().startswith("selected")]
    assert len(lines) == 1 and lines[0].get_xdata()[0] == pytest.approx(np.log10(sel))
    plt.close(ax.figure)


def _comparison(res) -> IntervalComparison:
    """A compare_intervals table without Stan: the fit's intervals and 'posterior' intervals 0.8 x as wide."""
    rows = []
    for q, tab, col in (("score", res.scores, "score"), ("b", res.position_effects, "b")):
        for name, r in tab.iterrows():
            half = 0.8 * (r["ci_high"] - r["ci_low"]) / 2
            rows.append({"quantity": q, "name": str(name), "estimate": r[col], "se": r["se"], "ci_low": r["ci_low"],
                         "ci_high": r["ci_high"], "post_mean": r[col], "post_sd": 0.8 * r["se"],
                         "cred_low": r[col] - half, "cred_high": r[col] + half, "width_ratio": 0.8,
                         "shift_se": 0.0, "level": 0.95})
    out = IntervalComparison(pd.DataFrame(rows).set_index(["quantity", "name"]))
    out.attrs.update(level=0.95, estimand="dial-ada; rank 1, calibration mu; lambda = 1.5; b from the LLM-only stage",
                     interval_frequentist="95% Wald interval, sandwich (cell-clustered)",
                     interval_bayes="95% equal-tailed posterior interval")
    return out


def test_compare_plot_orders_items_by_score_and_shows_the_b_widths(fitted):
    res, _ = fitted
    fig = _comparison(res).plot()
    ax_s, ax_b = fig.axes[:2]
    assert _labels_top_down(ax_s) == _descending(res.scores["score"])
    assert ax_s.get_ylabel() == "items, ordered by fitted score" and ax_s.get_xlabel() == "score (log-odds)"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("sandwich (cell-clustered)" in t for t in legend) and any("equal-tailed posterior" in t for t in legend)
    # the b panel spans the intervals, not the spread of the b's: the widths (ratio 0.8) are visible
    half = float(((res.position_effects["ci_high"] - res.position_effects["ci_low"]) / 2).max())
    lo, hi = ax_b.get_xlim()
    assert hi - lo < 3 * 2 * half and lo < -half and hi > half
    assert "log-odds" in ax_b.get_xlabel()
    assert {t.get_text() for t in ax_b.texts} >= {"0.80"}
    plt.close(fig)


def test_compare_intervals_csv_round_trip(fitted, tmp_path):
    res, _ = fitted
    tab = _comparison(res)
    write_interval_table(tab, tmp_path / "compare_intervals.csv")
    raw = pd.read_csv(tmp_path / "compare_intervals.csv")
    assert list(raw.columns[:2]) == ["quantity", "name"]
    assert (raw["interval_frequentist"] == "95% Wald interval, sandwich (cell-clustered)").all()
    assert (raw["interval_bayes"] == "95% equal-tailed posterior interval").all()
    assert raw["estimand"].nunique() == 1 and raw["estimand"].iloc[0].startswith("dial-ada")
    back = read_interval_table(tmp_path / "compare_intervals.csv")
    scores_first = back.xs("score", level="quantity").index.tolist()
    assert scores_first == _descending(res.scores["score"]) and list(back.index[:len(scores_first)].get_level_values(0)) == [
        "score"] * len(scores_first)
    pd.testing.assert_frame_equal(back.loc[tab.index], pd.DataFrame(tab), check_exact=True)
    assert back.attrs["interval_frequentist"] == tab.attrs["interval_frequentist"] and back.attrs["level"] == 0.95


def test_calibration_sentence_arena_numbers():
    """LR = 80.21 on 18 df: R pchisq(80.21, 18, lower.tail = FALSE) = 7.858e-10."""
    res = types.SimpleNamespace(calibration="mu", level=0.95, calibration_test=CalibrationTest(
        80.21, 18, 7.858e-10, "unrestricted", True))
    assert calibration_sentence(res) == ("The calibration test rejects s_H in col(mu) at the 5% level: LR = 80.2 on "
                                         "18 df, p = 7.9e-10; AIC prefers the unrestricted human scores.")
    res.calibration_test = CalibrationTest(10.0, 18, float(chi2.sf(10.0, 18)), "anchored", True)
    assert calibration_sentence(res).startswith("The calibration test does not reject s_H in col(mu)")
    assert "p = 0.93;" in calibration_sentence(res)  # chi2.sf(10, 18) = 0.9319


def test_html_report_has_tables_sentence_and_embedded_figures(fitted, tmp_path):
    res, data = fitted
    write_report(res, data, tmp_path / "h", fmt="html")
    text = (tmp_path / "h" / "report.html").read_text()
    assert text.count("<table") >= 4 and "<pre>" not in text and "CalibrationTest(" not in text
    assert text.count("data:image/png;base64,") == 3
    ct = res.calibration_test
    sentence = re.search(r"The calibration test (rejects|does not reject) s_H in col\(mu\) at the 5% level: "
                         r"LR = ([\d.]+) on (\d+) df, p = ([^;]+);", text)
    assert sentence is not None
    assert float(sentence[2]) == pytest.approx(ct.statistic, abs=0.05) and int(sentence[3]) == ct.df == 10 - 1 - 1
    assert sentence[4] == format_pvalue(chi2.sf(ct.statistic, ct.df))
    # the scores table lists the items by fitted score
    rows = re.findall(r"<tr>\s*<td>([^<]+)</td>", text.split("<h2>Scores</h2>")[1].split("<tbody>")[1].split("</tbody>")[0])
    assert rows == _descending(res.scores["score"])


def test_markdown_report_csv_and_summary(fitted, tmp_path):
    res, data = fitted
    write_report(res, data, tmp_path / "m")
    md = (tmp_path / "m" / "report.md").read_text()
    assert calibration_sentence(res) in md and "| item | score | se | ci_low | ci_high |" in md
    scores = pd.read_csv(tmp_path / "m" / "scores.csv")
    assert scores["item"].tolist() == _descending(res.scores["score"])
    pe = pd.read_csv(tmp_path / "m" / "position_effects.csv")
    np.testing.assert_allclose(pe["p_value"], 2 * norm.sf(np.abs(pe["z"])), rtol=1e-12)
    np.testing.assert_allclose(pe["log10_p_value"], np.log10(2 * norm.sf(np.abs(pe["z"]))), rtol=1e-10)
    summary = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert list(summary["scores"]) == _descending(res.scores["score"])
    assert summary["calibration_test"]["sentence"] == calibration_sentence(res)
    for key in ("llf", "aic", "bic", "nobs", "df_model"):
        if getattr(res, key, None) is not None:
            assert summary[key] == pytest.approx(float(getattr(res, key)))


def test_tie_parameter_is_written_under_its_name():
    assert tie_parameter_name(pd.DataFrame(columns=["tau", "se", "ci_low", "ci_high"])) == "tau"
    assert tie_parameter_name(pd.DataFrame(columns=["nu", "se", "ci_low", "ci_high"])) == "nu"


def test_bundled_arena_loads_without_warning_and_reports_its_duplicates():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = pydial.datasets.arena()
    assert data.summary().loc["duplicated rows (identical in all six columns)", "value"] == "26 (kept)"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dropped = pydial.datasets.load("arena", duplicates="drop")
    assert not [w for w in caught if issubclass(w.category, DataWarning)]
    assert dropped.summary().loc["duplicated rows (identical in all six columns)", "value"] == "26 (dropped)"


def test_covariate_plot_with_an_effect_of_one_judge_only():
    """Self-preference mapped for one judge: the other judges have no such effect and get no marker (not a KeyError)."""
    sim = pydial.simulate(N=6, K=3, rank=1, n_llm=6_000, n_human=1_500, seed=2, covariates=["length"], beta=0.3, behavior=dict(self_preference={"judge0": ["item00", "item01"]}, self_effect=0.5))
    res = pydial.fit(sim.comparisons, "dial-anc")
    ax = plot_covariate_effects(res)
    judges = [t.get_text() for t in ax.get_yticklabels()]
    assert set(res.covariate_effects.index.unique("judge")) == set(judges)
    plt.close(ax.figure)
