r"""The pooled baseline's cells, designs and two-step sandwich (eq. staged-calibrated-estimator with ``M = s_pool``).

Stage one the pooled BTL ``(beta, beta_L, log nu_L)``, stage two the people's calibration
``(c, beta_H, log nu_H)`` of ``s = c T beta``; the linearization by
:func:`pydial.inference.linearization.two_step_maps` and the GLM sandwiches of
:func:`pydial.inference.sandwich.family_glm_influence`.
"""

from __future__ import annotations

import numpy as np

from pydial.data.comparisons import Comparisons
from pydial.inference.linearization import Linearization, two_step_maps
from pydial.inference.sandwich import family_glm_influence, stack_outcome_influence
from pydial.model.cells import Cells
from pydial.model.chart import centering_basis
from pydial.model.families import Family
from pydial.model.design import Design, calibration_design, centered_design
from pydial.model.glm import FamilyGLM, has_tie_parameter
from pydial.optim import OptimResult

__all__ = ["POOLED_LABEL", "degenerate_direction", "family_cells", "pooled_cross_derivative", "pooled_designs",
           "pooled_linearization", "pooled_support"]


POOLED_LABEL = "(pooled LLM judges)"
"""Row of ``tie_parameters`` holding the pooled judges' ``nu_L``, and of ``covariate_effects`` holding their ``beta_L``."""



def family_cells(data: Comparisons, family: Family) -> tuple[Cells, Cells]:
    """Return the LLM and the human cells of the family, each weighted ``1 / (its number of comparisons)``.

    Decisive cells for ``ties=None``, else with their tie counts (the weights then count the ties).
    """
    tabs = [data.cell_table(which, with_ties=not family.is_binary) for which in ("llm", "human")]
    L, H = (Cells.from_tables([(t, 1.0 / float(t.n.sum()), h)], with_ties=True) for t, h in zip(tabs, (False, True)))
    return L, H


def pooled_support(data: Comparisons) -> tuple[np.ndarray, np.ndarray]:
    """Return the estimated entries of ``beta_L`` and ``beta_H`` (bool, ``p`` each).

    From :attr:`~pydial.Comparisons.covariate_support`.

    ``beta_L`` is shared by the pooled judges: a covariate has it unless it is 0 on every LLM cell.
    """
    sup = data.covariate_support
    return np.asarray(sup[:-1].any(axis=0), bool), np.asarray(sup[-1], bool)


def degenerate_direction(s_pool: np.ndarray) -> bool:
    """Whether the pooled scores are 0: no direction to calibrate."""
    return bool(np.abs(s_pool).max() < 1e-10)


def pooled_designs(data: Comparisons, L: Cells, H: Cells, s_pool: np.ndarray | None = None) -> tuple[Design, Design | None]:
    """Return the designs of the pooled baseline's two GLMs: ``[D T, Z_L]`` and ``[D_H s_pool, Z_H]``.

    The pooled BTL in the centered chart ``s_pool = T beta`` with the pooled judges' covariate
    columns (coordinates ``(beta, beta_L)``), and the calibration GLM in the direction ``s_pool``
    with the people's (coordinates ``(c, beta_H)``; ``None`` when ``s_pool`` is not given).
    Without covariates the columns ``Z`` are absent; a covariate 0 on all the LLM (or human)
    cells has no column there (:meth:`~pydial.Comparisons.effect_columns`: e.g. the people's
    self-preference).
    """
    N = data.N
    X1 = centered_design(L.i, L.j, N, z=data.effect_columns(L.z, None))
    return X1, None if s_pool is None else calibration_design(H.i, H.j, N, s_pool[:, None], data.effect_columns(H.z, data.K))


def pooled_cross_derivative(family: Family, human: Cells, N: int, beta: np.ndarray, x2: np.ndarray,
                            weight: float, z: np.ndarray | None = None) -> np.ndarray:
    r"""``d psi_2 / d beta``: derivative of the calibration score equations in the pooled scores.

    The cross term of the two-step sandwich (eq. weighted-empirical-sandwich, two-step form).

    ``psi_2`` is the gradient in ``x2 = (c, beta_H, log nu_H)`` of ``weight * l_H(c T beta, beta_H, nu_H)``
    (``beta_H`` with response covariates, ``z' beta_H`` in the predictor); with ``g, H`` the gradient
    and Hessian of that loss in the people's centered coordinates ``(beta' = c beta, beta_H, log nu_H)``
    (design ``[D_H T, Z_H]``), ``d psi_c / d beta = g_beta' + c H_{beta' beta'} beta`` and, for the other
    coordinates ``v`` of ``x2``, ``d psi_v / d beta = c H_{v beta'}``.
    Returns a ``(1 + p + free) x (N - 1)`` array, ``free`` when the people's cells hold a tie.
    ``z``: the columns ``Z_H`` of ``beta_H`` (default the cells' covariates; :func:`pooled_designs`).
    """
    c = float(x2[0])
    model = FamilyGLM(family, human.counts, centered_design(human.i, human.j, N, z=human.z if z is None else z), weight)
    _, g, H = model.terms(np.append(c * beta, x2[1:]))
    q = N - 1
    return np.vstack([g[:q] + c * H[:q, :q] @ beta, c * H[q:, :q]])


def pooled_linearization(data: Comparisons, family: Family, o1: OptimResult, o2: OptimResult) -> Linearization:
    """Two-step linearization of ``(s, log nu_L, log nu_H, beta_L, beta_H)`` of the pooled baseline.

    Only the free ``nu``, and ``beta`` only with response covariates (blocks ``"scores"``,
    ``"log_nu"``, ``"beta"``: the rows :data:`POOLED_LABEL`, then the people).  Stage one
    ``(beta, beta_L, log nu_L)``, stage two ``(c, beta_H, log nu_H)`` of ``s = c T beta`` (eq.
    staged-calibrated-estimator with ``M = T beta``), by
    :func:`pydial.inference.linearization.two_step_maps` as DIAL-Anc; the meats of
    :func:`pydial.inference.linearization.parameter_meat`.
    """
    N = data.N
    L, Hc = family_cells(data, family)
    p1, p2 = (int(m.sum()) for m in pooled_support(data))  # the free entries of beta_L, beta_H
    free1, free2 = has_tie_parameter(family, L.counts), has_tie_parameter(family, Hc.counts)
    w1, w2 = float(L.w[0]), float(Hc.w[0])
    T = centering_basis(N)
    beta = o1.x[: N - 1]
    s_pool, c = T @ beta, float(o2.x[0])
    X1, X2 = pooled_designs(data, L, Hc, s_pool)
    assert X2 is not None  # s_pool given
    _, _, H2 = FamilyGLM(family, Hc.counts, X2, w2).terms(o2.x)
    n1, n2 = N - 1 + p1 + free1, 1 + p2 + free2  # the stages' coordinates
    G21 = np.zeros((n2, n1))
    G21[:, : N - 1] = pooled_cross_derivative(family, Hc, N, beta, o2.x, w2, data.effect_columns(Hc.z, data.K))
    nl = free1 + free2
    q = N + nl + p1 + p2  # targets (s, log nu_L, log nu_H, beta_L, beta_H), as target_slices orders them
    Z1, Z2 = np.zeros((q, n1)), np.zeros((q, n2))
    Z1[:N, : N - 1] = c * T
    Z2[:N, 0] = s_pool
    Z1[N + nl + np.arange(p1), N - 1 + np.arange(p1)] = 1.0
    Z2[N + nl + p1 + np.arange(p2), 1 + np.arange(p2)] = 1.0
    if free1:
        Z1[N, n1 - 1] = 1.0
    if free2:
        Z2[N + free1, n2 - 1] = 1.0
    total, _ = two_step_maps(Z1, Z2, H2, G21, "the pooled scale c" + (" and beta_H" if p2 else "")
                             + (" and nu_H" if free2 else ""))
    # the stage-one map is applied with H1^{-1} by family_glm_influence
    U_L, _ = family_glm_influence(data, family, X1, o1.x, w1, total, cells=L)
    U_H, _ = family_glm_influence(data, family, X2, o2.x, w2, Z2, cells=Hc)
    labels = tuple(name for name, free in ((POOLED_LABEL, free1), (data.human_judge, free2)) if free)
    blocks = ({"scores": slice(0, N)} | ({"log_nu": slice(N, N + nl)} if nl else {})
              | ({"beta": slice(N + nl, q)} if q > N + nl else {}))
    return stack_outcome_influence([U_L, U_H]).linearization("the pooled scores", blocks, tie_labels=labels)
