"""pydial.fit(..., ties="davidson", engine="stan"): Davidson (people) and Davidson-Beaver
(LLM judges) MLEs against an independent numpy/scipy implementation."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp

from pydial.model.families import family_of
import pydial

pytestmark = [pytest.mark.stan, pytest.mark.usefixtures("stan_backend_name")]


def davidson_nll(s, log_nu, b, i, j, a, wi, wj, t):
    """Negative log-likelihood of Davidson-Beaver: softmax(x, -x, log nu), x = (s_i - s_j + a b)/2."""
    x = 0.5 * (s[i] - s[j] + a * b)
    L = np.stack([x, -x, np.full_like(x, log_nu)], axis=1)
    lse = logsumexp(L, axis=1)
    return -np.sum(wi * (x - lse) + wj * (-x - lse) + t * (log_nu - lse))


def simulate_ties(rng, N=6, n=6000, nu=0.6, b=0.7, judge="g"):
    s = rng.normal(size=N)
    s -= s.mean()
    i = rng.integers(N, size=n)
    j = (i + rng.integers(1, N, size=n)) % N
    first_a = rng.random(n) < 0.5
    ai = np.where(first_a, 1.0, -1.0)  # +1 when item_a (= i here) shown first
    x = 0.5 * (s[i] - s[j] + ai * b)
    P = np.exp(np.stack([x, -x, np.full(n, np.log(nu))], 1))
    P /= P.sum(1, keepdims=True)
    u = rng.random(n)
    out = np.where(u < P[:, 0], "a", np.where(u < P[:, 0] + P[:, 1], "b", "tie"))
    df = pd.DataFrame({"record_id": np.arange(n), "judge": judge, "item_a": [f"m{k}" for k in i],
                       "item_b": [f"m{k}" for k in j], "first": np.where(first_a, "a", "b"), "winner": out})
    return df, s


def test_human_davidson_matches_scipy_mle_and_recovers_nu():
    rng = np.random.default_rng(5)
    df, s_true = simulate_ties(rng, nu=0.6, b=0.0, judge="human")
    llm, _ = simulate_ties(rng, n=200, judge="g")  # an LLM judge is not needed by the human model
    data = pydial.Comparisons.from_frame(pd.concat([df, llm]))
    res = pydial.fit(data, "human", ties="davidson", engine="stan")
    assert res.converged and list(res.tie_parameters.index) == ["human"]
    t = data.tie_cells(human=True)
    t = t[t.k == data.K]
    i, j, wi, wj, tt = (t[c].to_numpy() for c in ("i", "j", "wins_i", "wins_j", "ties"))
    N = data.N

    def f(z):
        s = np.append(z[: N - 1], -z[: N - 1].sum())
        return davidson_nll(s, z[-1], 0.0, i, j, np.zeros(i.size), wi, wj, tt)

    opt = minimize(f, np.zeros(N), method="BFGS", options={"gtol": 1e-9})
    s_ref = np.append(opt.x[: N - 1], -opt.x[: N - 1].sum())
    np.testing.assert_allclose(res.scores["score"].to_numpy(), s_ref, atol=1e-5)
    assert res.tie_parameters.loc["human", "nu"] == pytest.approx(np.exp(opt.x[-1]), rel=1e-5)
    # recovery: nu within 4 SE of the truth, scores close to the truth
    tp = res.tie_parameters.loc["human"]
    assert abs(tp["nu"] - 0.6) < 4 * tp["se"]
    assert np.max(np.abs(res.scores["score"].to_numpy() - (s_true - s_true.mean()))) < 0.2
    # model-based SE of nu from the numpy Hessian of the same likelihood (log-nu delta method)
    h = 1e-4
    z0 = opt.x
    Hm = np.empty((N, N))
    for a_ in range(N):
        for b_ in range(N):
            ea, eb = np.eye(N)[a_] * h, np.eye(N)[b_] * h
            Hm[a_, b_] = (f(z0 + ea + eb) - f(z0 + ea - eb) - f(z0 - ea + eb) + f(z0 - ea - eb)) / (4 * h * h)
    se_lognu = np.sqrt(np.linalg.inv(Hm)[-1, -1])
    assert tp["se"] == pytest.approx(tp["nu"] * se_lognu, rel=1e-3)


def test_judges_davidson_beaver_recovers_nu_and_b():
    rng = np.random.default_rng(11)
    d1, _ = simulate_ties(rng, nu=0.3, b=0.8, judge="g1")
    d2, _ = simulate_ties(rng, nu=1.2, b=-0.4, judge="g2")
    data = pydial.Comparisons.from_frame(pd.concat([d1, d2.assign(record_id=d2.record_id + 10**6)]))
    res = pydial.fit(data, "judges", ties="davidson", engine="stan")
    tp, pe = res.tie_parameters, res.position_effects
    for name, nu, b in (("g1", 0.3, 0.8), ("g2", 1.2, -0.4)):
        assert abs(tp.loc[name, "nu"] - nu) < 4 * tp.loc[name, "se"], tp
        assert abs(pe.loc[name, "b"] - b) < 4 * pe.loc[name, "se"], pe
        assert tp.loc[name, "ci_low"] < tp.loc[name, "nu"] < tp.loc[name, "ci_high"]


def test_ties_argument_errors():
    data = pydial.datasets.synthetic()
    with pytest.raises(ValueError, match="ties must be"):
        pydial.fit(data, "human", ties="bradley", engine="stan")


def test_stan_tie_fit_without_any_tie_is_the_binary_fit():
    """No tie anywhere: every group gets nu_zero, and the Stan tie fit is the binary DIAL-Anc fit."""
    data = pydial.datasets.synthetic()
    a = pydial.fit(data, "dial-anc")
    b = pydial.fit(data, "dial-anc", ties="davidson", engine="stan")
    np.testing.assert_allclose(b.scores.to_numpy(), a.scores.to_numpy(), atol=1e-6)
    assert (b.tie_parameters["nu"] == 0).all()


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_simulated_ties_recover_nu_b_and_human_scores(ties):
    """simulate(tie_rate=...) draws from either tie model; the tie fits recover nu, b and s_H."""
    sim = pydial.simulate(N=6, K=2, rank=0, n_llm=16_000, n_human=6_000, tie_rate=0.25, ties=ties, seed=5)
    data = sim.comparisons
    t = sim.truth
    assert t.ties == ties and t.nu.shape == (3,)
    col = family_of(ties).label  # Davidson's nu, Rao-Kupper's tau (the truth keeps both in ``nu``)
    rj = pydial.fit(data, "judges", ties=ties, engine="stan")
    tp, pe = rj.tie_parameters, rj.position_effects
    assert tp.attrs["model"] == ties
    for k, name in enumerate(data.judges):
        assert abs(tp.loc[name, col] - t.nu[k]) < 4 * tp.loc[name, "se"], tp
        assert abs(pe.loc[name, "b"] - t.b[k]) < 4 * pe.loc[name, "se"], pe
    rh = pydial.fit(data, "human", ties=ties, engine="stan")
    sc = rh.scores
    assert np.all(np.abs(sc["score"].to_numpy() - t.s_h) < 4 * sc["se"].to_numpy()), (sc, t.s_h)
    assert abs(rh.tie_parameters[col].iloc[0] - t.nu[-1]) < 4 * rh.tie_parameters["se"].iloc[0]


def test_no_ties_in_the_data_gives_the_binary_fit():
    """Without ties the tie parameter goes to 0 and the Davidson fit is the binary BTL fit."""
    data = pydial.simulate(N=6, K=2, rank=0, n_llm=4_000, n_human=1_500, seed=8).comparisons
    for method in ("human", "judges"):
        rb = pydial.fit(data, method, engine="stan")
        rt = pydial.fit(data, method, ties="davidson", engine="stan")
        np.testing.assert_allclose(rt.scores["score"].to_numpy(), rb.scores["score"].to_numpy(), atol=1e-5)
        assert np.all(rt.tie_parameters["nu"].to_numpy() < 1e-4)
        if method == "judges":
            np.testing.assert_allclose(rt.position_effects["b"].to_numpy(), rb.position_effects["b"].to_numpy(),
                                       atol=1e-5)


def test_rao_kupper_stan_optimum_equals_numpy_mle():
    """The Rao-Kupper MLE through Stan equals a scipy maximization of pydial.model.families.rao_kupper_cell,
    and its standard errors are the inverse of pydial.model.families' exact information."""
    from pydial.model.families import rao_kupper_cell

    sim = pydial.simulate(N=5, K=1, rank=0, n_llm=200, n_human=5_000, tie_rate=0.3, ties="rao-kupper", seed=2)
    data = sim.comparisons
    res = pydial.fit(data, "human", ties="rao-kupper", engine="stan")
    t = data.tie_cells(human=True)
    t = t[t.k == data.K]
    i, j = t["i"].to_numpy(), t["j"].to_numpy()
    counts = t[["wins_i", "wins_j", "ties"]].to_numpy()
    N = data.N

    def nll(z):
        s = np.append(z[: N - 1], -z[: N - 1].sum())
        return -rao_kupper_cell(counts, s[i] - s[j], z[-1]).value.sum()

    opt = minimize(nll, np.zeros(N), method="BFGS", options={"gtol": 1e-10})
    s_ref = np.append(opt.x[: N - 1], -opt.x[: N - 1].sum())
    np.testing.assert_allclose(res.scores["score"].to_numpy(), s_ref, atol=1e-6)
    tau = res.tie_parameters[family_of("rao-kupper").label].iloc[0]
    assert tau == pytest.approx(np.exp(opt.x[-1]), rel=1e-6)
    assert abs(tau - sim.truth.nu[-1]) < 4 * res.tie_parameters["se"].iloc[0]


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_numpy_and_stan_tie_fits_agree(ties):
    """The numpy engine (Newton on pydial.model.families' exact derivatives) and Stan reach the same optimum."""
    data = pydial.simulate(N=6, K=3, rank=1, n_llm=9_000, n_human=3_000, tie_rate=0.2, ties=ties, seed=13).comparisons
    for method in ("human", "judges"):
        rn = pydial.fit(data, method, ties=ties)
        rs = pydial.fit(data, method, ties=ties, engine="stan")
        assert rn.converged and rs.converged
        np.testing.assert_allclose(rn.scores[["score", "se"]].to_numpy(), rs.scores[["score", "se"]].to_numpy(), atol=1e-6)
        np.testing.assert_allclose(rn.tie_parameters.to_numpy(), rs.tie_parameters.to_numpy(), rtol=1e-5, atol=1e-7)
        if method == "judges":
            np.testing.assert_allclose(rn.position_effects[["b", "se"]].to_numpy(),
                                       rs.position_effects[["b", "se"]].to_numpy(), atol=1e-6)


@pytest.mark.parametrize("method", ["human", "judges"])
def test_group_without_ties_gets_nu_zero(method):
    """A judge (or the people) without a tie: nu = 0, the boundary MLE, with no standard error (not a
    tiny nu with an interval [0, inf)); the other groups keep their estimates; the scores equal the
    binary fit's for that group."""
    f = pydial.simulate(N=5, K=2, rank=0, n_llm=4000, n_human=1500, tie_rate=0.25, seed=8).frame
    who = "human" if method == "human" else "judge0"
    f = f.loc[~((f["judge"] == who) & (f["winner"] == "tie"))]
    data = pydial.Comparisons.from_frame(f, human_judge="human")
    res = pydial.fit(data, method, ties="davidson")
    t = res.tie_parameters
    assert t.loc[who, "nu"] == 0 and np.isnan(t.loc[who, ["se", "ci_low", "ci_high"]].to_numpy(float)).all()
    if method == "judges":
        assert t.loc["judge1", "nu"] > 0 and np.isfinite(t.loc["judge1", "se"])
        binary = pydial.fit(data, "judges", cov_type="fisher")
        np.testing.assert_allclose(res.judge_scores.loc["judge0"], binary.judge_scores.loc["judge0"], atol=1e-6)
    else:
        binary = pydial.fit(data, "human")
        np.testing.assert_allclose(res.scores["score"], binary.scores["score"], atol=1e-6)
        np.testing.assert_allclose(res.scores["se"], binary.scores["se"], rtol=1e-5)
