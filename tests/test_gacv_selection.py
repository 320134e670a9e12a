"""GACV near-ties reported in ``result.gacv`` and the summary; the endpoint-margin selection rule."""

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial.estimation.selection import GACV_TOLERANCE, Selection, annotate_selection, endpoint_margin, selection_lines
from pydial.estimation.spec import ModelSpec
from pydial.exceptions import ArgumentError, ArgumentTypeError, ArgumentWarning


@pytest.fixture(scope="module")
def arena():
    return pydial.datasets.arena()


@pytest.fixture(scope="module")
def arena_fit(arena):
    return pydial.fit(arena, "dial-ada")


@pytest.fixture(scope="module")
def sim():
    return pydial.simulate(N=8, K=3, rank=1, n_llm=4000, n_human=150, seed=3).comparisons


@pytest.fixture(scope="module")
def sim_fit(sim):
    return pydial.fit(sim, "dial-ada")


def by_hand(tab: pd.DataFrame, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """The gap to the smallest admissible GACV and the near-ties of the selected row, from the gacv column."""
    ok = tab["admissible"].to_numpy(bool)
    g = tab["gacv"].to_numpy(float)
    gap = np.where(ok, g - g[ok].min(), np.nan)
    near = ok & (np.abs(g - g[tab.attrs["selected_row"]]) <= tol)
    return gap, near & (near.sum() > 1)


# ------------------------------------------------------------------ the default rule
def test_default_selection_is_gacv_and_unchanged_on_arena(arena_fit):
    res, tab = arena_fit, arena_fit.gacv
    assert res.lambda_ == pytest.approx(0.3455, abs=1e-4)
    ok = tab[tab.admissible]
    assert res.lambda_ == ok.loc[ok.gacv.idxmin(), "lambda"]
    assert res.spec.selection == Selection() and GACV_TOLERANCE == 1e-6
    assert tab.attrs["selection"] == "gacv" and tab.attrs["margin"] is None
    assert tab.attrs["near_tie_tolerance"] == GACV_TOLERANCE
    sel = tab.iloc[tab.attrs["selected_row"]]
    assert sel["lambda"] == res.lambda_ and sel["gap"] == 0.0
    gap, near = by_hand(tab, GACV_TOLERANCE)
    np.testing.assert_array_equal(tab["gap"].to_numpy(), gap)
    np.testing.assert_array_equal(tab["near_tie"].to_numpy(), near)
    assert not near.any()  # the arena's closest candidates differ by about 5e-5
    text = res.summary()
    assert "lambda selection: smallest GACV -> lambda = 0.3455" in text and "near-tie" not in text


# ------------------------------------------------------------------ near-ties
def test_two_weights_closer_than_the_tolerance_are_a_near_tie(sim):
    w = 2.0
    res = pydial.fit(sim, "dial-ada", lambda_=[w, w * (1 + 1e-7)], include_endpoints=False)
    tab = res.gacv
    fin = tab[tab.admissible]
    assert len(fin) == 2
    diff = abs(float(fin.gacv.iloc[0] - fin.gacv.iloc[1]))
    assert diff < GACV_TOLERANCE
    gap, near = by_hand(tab, GACV_TOLERANCE)
    np.testing.assert_array_equal(tab["gap"].to_numpy(), gap)
    np.testing.assert_array_equal(tab["near_tie"].to_numpy(), near)
    assert tab["near_tie"].tolist() == [True, True, False]  # the excluded endpoint is not a candidate
    line = [ln for ln in res.summary().splitlines() if ln.startswith("GACV near-tie")]
    assert line == [f"GACV near-tie: lambda = {res.lambda_:.8g} and lambda = "
                    f"{fin['lambda'][fin['lambda'] != res.lambda_].iloc[0]:.8g} differ by {diff:.1g} "
                    "(<= tolerance 1e-06): below what the optimizer resolves"]


def test_the_tolerance_sets_the_near_ties_and_not_the_choice(sim, sim_fit):
    gaps = np.sort(sim_fit.gacv["gap"].dropna().to_numpy())
    tol = 0.5 * (gaps[2] + gaps[3])  # three candidates within tol of the smallest GACV
    res = pydial.fit(sim, "dial-ada", selection={"tolerance": tol})
    tab = res.gacv
    assert res.lambda_ == sim_fit.lambda_ and res.spec.selection == Selection(tolerance=tol)
    np.testing.assert_array_equal(tab["gacv"].to_numpy(), sim_fit.gacv["gacv"].to_numpy())
    gap, near = by_hand(tab, tol)
    np.testing.assert_array_equal(tab["near_tie"].to_numpy(), near)
    assert near.sum() == 3 and tab.attrs["near_tie_tolerance"] == tol
    np.testing.assert_array_equal(near, tab["gap"].to_numpy() <= tol)  # GACV's choice is the smallest GACV
    line = [ln for ln in res.summary().splitlines() if ln.startswith("GACV near-tie")][0]
    for lam in tab.loc[near, "lambda"]:
        assert ("inf" if np.isinf(lam) else f"{lam:.4g}") in line


def test_a_hand_table_with_a_4e_7_near_tie_and_a_rank_grid():
    tab = pd.DataFrame({"rank": [0, 0, 0, 1, 1], "lambda": [0.0, 0.5, np.inf, 0.5, np.inf],
                        "gacv": [0.52, 0.5100004, 0.53, 0.51, np.nan],
                        "admissible": [True, True, True, True, False], "reason": ["", "", "", "", "not converged"]})
    out = annotate_selection(tab, 1, 0.5, Selection(), n_human=200)
    assert "gap" not in tab  # the input is left as it was
    np.testing.assert_allclose(out["gap"].to_numpy(), [0.01, 4e-7, 0.02, 0.0, np.nan], atol=1e-15)
    assert out["near_tie"].tolist() == [False, True, False, True, False]
    assert out.attrs["selected_row"] == 3
    assert out.attrs["endpoint_gap"] == pytest.approx(0.02)
    assert selection_lines(out) == [
        "lambda selection: smallest GACV -> (r = 1, lambda = 0.5)",
        "GACV near-tie: (r = 1, lambda = 0.5) and (r = 0, lambda = 0.5) differ by 4e-07 (<= tolerance 1e-06): "
        "below what the optimizer resolves"]


# ------------------------------------------------------------------ the endpoint-margin rule
def test_endpoint_margin_chooses_inf_exactly_when_within_c_over_n_h(arena, arena_fit):
    tab = arena_fit.gacv
    ok = tab[tab.admissible]
    d = float(ok.loc[np.isinf(ok["lambda"]), "gacv"].iloc[0] - ok.loc[np.isfinite(ok["lambda"]), "gacv"].min())
    assert d > 0 and d == pytest.approx(tab.attrs["endpoint_gap"], rel=1e-12)
    n_h = arena_fit.n_human
    above = pydial.fit(arena, "dial-ada", selection=("endpoint-margin", d * n_h * (1 + 1e-6)))
    below = pydial.fit(arena, "dial-ada", selection=("endpoint-margin", d * n_h * (1 - 1e-6)))
    assert np.isinf(above.lambda_) and below.lambda_ == arena_fit.lambda_
    for res, holds in ((above, True), (below, False)):
        a = res.gacv.attrs
        np.testing.assert_array_equal(res.gacv["gacv"].to_numpy(), tab["gacv"].to_numpy())  # the same path
        assert a["selection"] == "endpoint-margin" and a["margin_threshold"] == pytest.approx(a["margin"] / n_h)
        assert (a["endpoint_gap"] <= a["margin_threshold"]) == holds
        assert res.gacv["lambda"].iloc[a["selected_row"]] == res.lambda_
        line = next(ln for ln in res.summary().splitlines() if ln.startswith("lambda selection:"))
        assert "endpoint-margin rule" in line and "beyond the paper" in line
        assert line.endswith("-> lambda = inf" if holds else "-> lambda = 0.3455")
        assert ("<= c/n_H" if holds else "> c/n_H") in line
    # at lambda = inf the fit is DIAL-Anc's
    anc = pydial.fit(arena, "dial-anc")
    np.testing.assert_allclose(above.scores["score"], anc.scores["score"], atol=1e-10)


def test_endpoint_margin_on_candidates():
    def cand(lam, g):
        c = pydial.estimation.selection.Candidate(lam, lam, None, admissible=True, loss_human=g, trace=0.0)
        return (1, c)

    ok = [cand(0.0, 0.50), cand(1.0, 0.40), cand(np.inf, 0.41)]
    assert endpoint_margin(ok, 0.01)[1].lambda_ == np.inf
    assert endpoint_margin(ok, 0.0099) is None
    assert endpoint_margin(ok[:2], 1.0) is None  # no anchored endpoint
    assert endpoint_margin([cand(np.inf, 0.3)], 0.0)[1].lambda_ == np.inf


def test_endpoint_margin_with_dial_nopos_and_the_spec_round_trip(sim):
    res = pydial.fit(sim, "dial-nopos", selection=("endpoint-margin", 0.5))
    assert res.spec.selection == Selection("endpoint-margin", 0.5)
    assert res.gacv.attrs["selection"] == "endpoint-margin" and res.gacv.attrs["margin"] == 0.5
    again = pydial.fit(sim, **res.fit_arguments)
    assert again.lambda_ == res.lambda_ and again.spec == res.spec


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("value, error, match", [
    ("bogus", ArgumentError, "selection rule"),
    (("endpoint-margin",), ArgumentError, "margin c goes with the rule 'endpoint-margin'"),
    (("gacv", 1.0), ArgumentError, "margin c goes with the rule 'endpoint-margin'"),
    (("endpoint-margin", -1.0), ArgumentError, "selection margin c must be a finite number >= 0"),
    (("endpoint-margin", np.inf), ArgumentError, "selection margin c"),
    (("endpoint-margin", "2"), ArgumentTypeError, "selection margin c"),
    ({"tolerance": -1e-6}, ArgumentError, "selection tolerance"),
    ({"rule": "gacv", "c": 1}, ArgumentTypeError, "selection must be"),
    (3.0, ArgumentTypeError, "selection must be"),
])
def test_invalid_selection_is_refused(value, error, match):
    with pytest.raises(error, match=match):
        ModelSpec("dial-ada", selection=value)


def test_selection_forms_and_where_they_apply(sim):
    assert ModelSpec("dial-ada", selection=["endpoint-margin", 2]).selection == Selection("endpoint-margin", 2.0)
    assert ModelSpec("dial-ada", selection=Selection("endpoint-margin", 2.0, 1e-4)).selection.tolerance == 1e-4
    with pytest.raises(ArgumentError, match="include_endpoints=False"):
        ModelSpec("dial-ada", selection=("endpoint-margin", 2.0), include_endpoints=False)
    with pytest.warns(ArgumentWarning, match="selection=.* is ignored: method 'dial-anc'"):
        spec = ModelSpec("dial-anc", selection=("endpoint-margin", 2.0))
    assert spec.selection == Selection()
    with pytest.raises(ArgumentError, match="selection"):
        pydial.fit(sim, "dial-ada", selection="bogus")
