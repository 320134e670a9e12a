"""Per-cell tie likelihoods (pydial.model.families): finite-difference derivatives, probabilities, limits."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammaln

from fdcheck import fd_jacobian
from pydial.model.families import FAMILIES, binary_cell, davidson_cell, family_of, log_coef, rao_kupper_cell

RNG = np.random.default_rng(3)
COUNTS = np.array([[5, 2, 1], [0, 3, 4], [7, 0, 0], [2, 2, 9], [1, 1, 0]])
ETA = np.array([0.3, -1.2, 2.0, 0.05, -0.4])
LOGNU = np.array([-0.7, 0.4, -2.0, 1.1, 0.0])


@pytest.mark.parametrize("fn", [davidson_cell, rao_kupper_cell])
def test_derivatives_match_finite_differences(fn):
    for t in range(len(ETA)):
        x0 = np.array([ETA[t], LOGNU[t]])
        c = COUNTS[t:t + 1]

        def val(x):
            return np.array([fn(c, x[:1], x[1:]).value[0]])

        def grad(x):
            d = fn(c, x[:1], x[1:])
            return np.array([d.d_eta[0], d.d_l[0]])

        d = fn(c, x0[:1], x0[1:])
        np.testing.assert_allclose(grad(x0), fd_jacobian(val, x0)[0], rtol=1e-7, atol=1e-8)
        H = np.array([[d.d_eta_eta[0], d.d_eta_l[0]], [d.d_eta_l[0], d.d_l_l[0]]])
        np.testing.assert_allclose(H, fd_jacobian(grad, x0), rtol=1e-6, atol=1e-7)


def test_binary_derivatives_match_finite_differences():
    c = COUNTS.copy()
    c[:, 2] = 0
    d = binary_cell(c, ETA)
    g = fd_jacobian(lambda e: binary_cell(c, e).value, ETA)
    np.testing.assert_allclose(d.d_eta, np.diag(g), rtol=1e-7)
    h = fd_jacobian(lambda e: binary_cell(c, e).d_eta, ETA)
    np.testing.assert_allclose(d.d_eta_eta, np.diag(h), rtol=1e-6)


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_kernel_plus_coefficient_is_the_multinomial_log_pmf(ties):
    p = family_of(ties).probabilities(ETA, LOGNU)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    n = COUNTS.sum(axis=1)
    ref = gammaln(n + 1) - gammaln(COUNTS + 1).sum(axis=1) + (COUNTS * np.log(p)).sum(axis=1)
    got = log_coef(COUNTS) + FAMILIES[ties].cell(COUNTS, ETA, LOGNU).value
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_davidson_closed_form_and_decisive_conditional():
    """P(i):P(j):P(tie) = sqrt(theta_i / theta_j) : sqrt(theta_j / theta_i) : nu (Davidson 1970)."""
    si, sj, nu = 0.8, -0.1, 0.6
    th_i, th_j = np.exp(si), np.exp(sj)
    den = th_i + th_j + nu * np.sqrt(th_i * th_j)
    p = family_of("davidson").probabilities(np.array([si - sj]), np.log(nu))[0]
    np.testing.assert_allclose(p, [th_i / den, th_j / den, nu * np.sqrt(th_i * th_j) / den], rtol=1e-12)
    np.testing.assert_allclose(p[0] / (p[0] + p[1]), 1 / (1 + np.exp(-(si - sj))), rtol=1e-12)


def test_rao_kupper_closed_form():
    """P(i) = pi_i / (pi_i + theta pi_j), P(tie) = (theta^2 - 1) pi_i pi_j / (...)(...) (Rao & Kupper 1967)."""
    si, sj, tau = 0.4, -0.3, 0.7
    th = np.exp(tau)
    pi, pj = np.exp(si), np.exp(sj)
    p = family_of("rao-kupper").probabilities(np.array([si - sj]), np.log(tau))[0]
    np.testing.assert_allclose(p[0], pi / (pi + th * pj), rtol=1e-12)
    np.testing.assert_allclose(p[1], pj / (pj + th * pi), rtol=1e-12)
    np.testing.assert_allclose(p[2], (th**2 - 1) * pi * pj / ((pi + th * pj) * (th * pi + pj)), rtol=1e-12)


@pytest.mark.parametrize("fn", [davidson_cell, rao_kupper_cell])
def test_vanishing_tie_parameter_gives_the_binary_model(fn):
    c = COUNTS.copy()
    c[:, 2] = 0
    np.testing.assert_allclose(fn(c, ETA, -40.0).value, binary_cell(c, ETA).value, atol=1e-12)
    np.testing.assert_allclose(fn(c, ETA, -40.0).d_eta, binary_cell(c, ETA).d_eta, atol=1e-12)
