"""A user's Stan program: Stan's own errors, labelled variables, nothing written in the working directory.

* A point that Stan refuses (a ``reject()``, a domain error) raises
  :class:`pydial.stan.StanRuntimeError` (a :class:`pydial.DialError`) carrying Stan's
  message, from ``log_prob``, ``grad_log_prob`` and ``optimize``, on both backends.
* The sizes of the judges (``K``), the judges and the people (``K + 1``) and the items
  (``N``) label a user's variables (:func:`pydial.stan.programs.user_dims`).
* Compiling a new program leaves the working directory empty (httpstan's C++ build
  used to write ``build/temp.*`` there).
* :func:`pydial.stan.posterior` has :func:`pydial.fit`'s default method.
"""

from __future__ import annotations

import inspect
import os
import shutil
import types
import uuid

import pytest

import pydial
from pydial.stan import StanRuntimeError, compile_model
from pydial.stan.programs import user_axes, user_dims
from pydial.stan.cmdstan_backend import stan_output

REFUSER = """
data { real y; real sigma; real limit; int<lower=0, upper=1> fail_gq; }
parameters { real mu; }
model {
  if (abs(mu) > limit) reject("mu = ", mu, " is beyond the limit ", limit);
  y ~ normal(mu, sigma);
}
generated quantities {
  if (fail_gq) reject("generated quantities refused at mu = ", mu);
}
"""
"""A program that refuses: a reject() beyond a limit, a domain error for sigma < 0, a reject() in its output."""

DATA = {"y": 1.0, "sigma": 1.0, "limit": 10.0, "fail_gq": 0}


@pytest.fixture(scope="module")
def refuser(stan_backend_name):
    return compile_model("refuser", backend=stan_backend_name, code=REFUSER)


def test_the_program_evaluates_where_stan_accepts(refuser):
    """log p of y ~ normal(mu, 1) (Stan's ~ drops the constant) and its gradient, and the optimum mu = y."""
    assert refuser.log_prob(DATA, [0.25]) == pytest.approx(-0.5 * 0.75**2, abs=1e-10)
    assert refuser.grad_log_prob(DATA, [0.25]) == pytest.approx([0.75], abs=1e-10)
    assert refuser.optimize(DATA, [0.0]).u == pytest.approx([1.0], abs=1e-6)


@pytest.mark.parametrize("call, data, u, said", [
    ("log_prob", {"sigma": -1.0}, 0.0, r"normal_lpdf: Scale parameter is -1, but must be positive"),
    ("grad_log_prob", {"sigma": -1.0}, 0.0, r"Scale parameter is -1"),
    ("log_prob", {}, 50.0, r"mu = 50 is beyond the limit 10"),
    ("grad_log_prob", {}, -50.0, r"mu = -50 is beyond the limit 10"),
    ("optimize", {}, 50.0, r"mu = 50 is beyond the limit 10"),
    ("optimize", {"sigma": -1.0}, 0.0, r"Scale parameter is -1"),
])
def test_a_refused_point_raises_stans_message(refuser, call, data, u, said):
    with pytest.raises(StanRuntimeError, match=said) as info:
        getattr(refuser, call)({**DATA, **data}, [u])
    assert isinstance(info.value, pydial.DialError) and "refuser" in str(info.value)
    assert "Method 'log_prob' failed" not in str(info.value)


def test_cmdstan_optimizer_failure_carries_stans_message(refuser, stan_backend_name):
    """CmdStan's optimizer writes the generated quantities at the optimum: their reject() is its failure.

    The scipy path (httpstan) does not evaluate the generated quantities and reaches mu = y.
    """
    data = {**DATA, "fail_gq": 1}
    if stan_backend_name == "httpstan":
        assert refuser.optimize(data, [0.0]).u == pytest.approx([1.0], abs=1e-6)
        return
    from cmdstanpy.utils import get_logger

    handlers = list(get_logger().handlers)
    with pytest.raises(StanRuntimeError, match=r"generated quantities refused at mu = 1"):
        refuser.optimize(data, [0.0])
    assert get_logger().handlers == handlers  # cmdstanpy's logger is restored


def test_points_refused_during_the_search_are_rejected_not_raised(refuser):
    """The optimum mu = 1 lies beyond the limit 0.5: the search stops inside it, not converged, without raising.

    (CmdStan's L-BFGS backtracks to near the limit; scipy's L-BFGS-B may stop at the start.)
    """
    res = refuser.optimize({**DATA, "limit": 0.5}, [0.0])
    assert 0.0 <= res.u[0] <= 0.5 and not res.converged
    assert res.log_prob == pytest.approx(-0.5 * (1.0 - res.u[0]) ** 2, abs=1e-10)


def test_stan_output_drops_cmdstans_argument_echo():
    logged = ("'log_prob' command failed!\nstdout:method = log_prob\n  log_prob\n    jacobian = true (Default)\n"
              "id = 1 (Default)\ndata\n  file = /tmp/x.json\n\n\nstderr:Error during log_prob calculation:\n"
              "Exception: mu is too large: 500 (in 'p.stan', line 4, column 16 to column 48)\n\n")
    assert stan_output(logged) == ("Error during log_prob calculation:\n"
                                   "Exception: mu is too large: 500 (in 'p.stan', line 4, column 16 to column 48)")
    raised = ("Error during optimization! Command 'p method=optimize' failed: console log output:\n\nmethod = optimize\n"
              "  optimize\n    algorithm = lbfgs (Default)\n      lbfgs\nnum_threads = 1 (Default)\n\n"
              "Rejecting initial value:\n  Error evaluating the log probability at the initial value.\n"
              "Initialization failed.\n")
    assert stan_output(raised) == ("Rejecting initial value:\n  Error evaluating the log probability at the initial "
                                   "value.\nInitialization failed.")


def test_compiling_writes_nothing_in_the_working_directory(stan_backend_name, tmp_path, monkeypatch):
    """A program compiled for the first time (a fresh text) leaves the working directory empty."""
    code = REFUSER + f"// {uuid.uuid4().hex}\n"
    monkeypatch.chdir(tmp_path)
    cm = compile_model("fresh", backend=stan_backend_name, code=code)
    try:
        assert not cm.cached and cm.log_prob(DATA, [0.0]) == pytest.approx(-0.5)
        assert os.listdir(tmp_path) == []
    finally:  # the fresh text would stay in the backend's cache
        if stan_backend_name == "httpstan":
            import httpstan.cache

            httpstan.cache.delete_model_directory(cm.model_name)
        else:
            shutil.rmtree(os.path.dirname(cm.exe_file), ignore_errors=True)


def _data(K: int, N: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(judges=tuple(f"j{k}" for k in range(K)), human_judge="human",
                                 items=tuple(f"i{n}" for n in range(N)))


def test_user_axes_label_judges_people_and_items():
    axes = user_axes(_data(3, 20), {"K": 3, "N": 20})
    assert axes == {3: ("judge", ["j0", "j1", "j2"]), 4: ("judge_human", ["j0", "j1", "j2", "human"]),
                    20: ("item", [f"i{n}" for n in range(20)])}
    # K + 1 = N: that size is ambiguous and labels nothing; K = 0 (the people alone): the people only
    assert user_axes(_data(3, 4), {"K": 3, "N": 4}) == {3: ("judge", ["j0", "j1", "j2"])}
    assert user_axes(_data(0, 5), {"K": 0, "N": 5}) == {1: ("judge_human", ["human"]),
                                                        5: ("item", [f"i{n}" for n in range(5)])}


def test_user_dims_name_each_axis_and_suffix_repeats():
    axes = user_axes(_data(3, 20), {"K": 3, "N": 20})
    coords: dict = {}
    assert user_dims("w", (20, 20), axes, coords) == ["item", "item_j"]
    assert coords["item_j"] == coords["item"] == [f"i{n}" for n in range(20)]
    assert user_dims("kappa", (4,), axes, coords) == ["judge_human"]
    assert user_dims("s_raw", (3, 19), axes, coords) == ["judge", "s_raw_dim_1"]
    assert user_dims("z", (19, 2), axes, coords) is None and user_dims("tau", (), axes, coords) is None
    assert user_dims("t", (20, 20, 20, 20), axes, coords) == ["item", "item_j", "item_k", "t_dim_3"]


def test_posterior_has_the_default_method_of_fit():
    default = inspect.signature(pydial.posterior).parameters["method"].default
    assert default == inspect.signature(pydial.fit).parameters["method"].default == "dial-ada"

