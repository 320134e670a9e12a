r"""The pooled baseline's cells, designs and two-step sandwich (eq. staged-calibrated-estimator with ``M = s_pool``)."""

from __future__ import annotations

import numpy as np

from pydial.data.comparisons import Comparisons
from pydial.inference.linearization import Linearization, target_slices, two_step_maps
from pydial.inference.sandwich import glm_influence, stack_influence
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
    """Return the family's LLM and human cells (with ties unless binary), each weighted ``1 / (its comparisons)``."""
    tabs = [data.cell_table(which, with_ties=not family.is_binary) for which in ("llm", "human")]
    L, H = (Cells.from_tables([(t, 1.0 / float(t.n.sum()), h)], with_ties=True) for t, h in zip(tabs, (False, True)))
    return L, H


def pooled_support(data: Comparisons) -> tuple[np.ndarray, np.ndarray]:
    """Return the estimated entries of ``beta_L`` (shared by the pooled judges) and ``beta_H``, bool ``p`` each."""
    sup = data.covariate_support
    return np.asarray(sup[:-1].any(axis=0), bool), np.asarray(sup[-1], bool)


def degenerate_direction(s_pool: np.ndarray) -> bool:
    """Whether the pooled scores are 0: no direction to calibrate."""
    return bool(np.abs(s_pool).max() < 1e-10)


def pooled_designs(data: Comparisons, L: Cells, H: Cells, s_pool: np.ndarray | None = None) -> tuple[Design, Design | None]:
    """Designs ``[D T, Z_L]`` of the pooled BTL and ``[D_H s_pool, Z_H]`` of the calibration (None without ``s_pool``)."""
    N = data.N
    X1 = centered_design(L.i, L.j, N, z=data.effect_columns(L.z, None))
    return X1, None if s_pool is None else calibration_design(H.i, H.j, N, s_pool[:, None], data.effect_columns(H.z, data.K))


def pooled_cross_derivative(family: Family, human: Cells, N: int, beta: np.ndarray, x2: np.ndarray,
                            weight: float, z: np.ndarray | None = None) -> np.ndarray:
    r"""``d psi_2 / d beta``, the two-step cross term: the calibration score in ``x2 = (c, beta_H, log nu_H)``.

    With ``g, H`` of the people's loss in ``(c beta, beta_H, log nu_H)``: ``g_beta' + c H beta`` for ``c`` and
    ``c H_{v beta'}`` for the others; ``(1 + p + free) x (N - 1)``.  ``z``: the columns ``Z_H``.
    """
    c = float(x2[0])
    model = FamilyGLM(family, human.counts, centered_design(human.i, human.j, N, z=human.z if z is None else z), weight)
    _, g, H = model.terms(np.append(c * beta, x2[1:]))
    q = N - 1
    return np.vstack([g[:q] + c * H[:q, :q] @ beta, c * H[q:, :q]])


def pooled_linearization(data: Comparisons, family: Family, o1: OptimResult, o2: OptimResult) -> Linearization:
    """Two-step linearization of ``(s, log nu_L, log nu_H, beta_L, beta_H)`` of the pooled baseline.

    Stage one ``(beta, beta_L, log nu_L)``, stage two ``(c, beta_H, log nu_H)`` of ``s = c T beta``, by
    :func:`pydial.inference.linearization.two_step_maps`; only the free ``nu`` and ``beta``.
    """
    N = data.N
    L, Hc = family_cells(data, family)
    p1, p2 = (int(m.sum()) for m in pooled_support(data))  # the free entries of beta_L, beta_H
    free1, free2 = (int(has_tie_parameter(family, c.counts)) for c in (L, Hc))  # 1: the stage's log nu is free
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
    # each stage's own (beta, log nu) coordinates are targets: rows (beta_L, log nu_L) and (beta_H, log nu_H)
    Z1[np.r_[N + nl + np.arange(p1), np.full(free1, N)], N - 1 + np.arange(p1 + free1)] = 1.0
    Z2[np.r_[N + nl + p1 + np.arange(p2), np.full(free2, N + free1)], 1 + np.arange(p2 + free2)] = 1.0
    total, _ = two_step_maps(Z1, Z2, H2, G21, "the pooled scale c" + (" and beta_H" if p2 else "")
                             + (" and nu_H" if free2 else ""))
    # the stage-one map is applied with H1^{-1} by glm_influence
    U_L, _ = glm_influence(data, family, X1, o1.x, w1, total, cells=L)
    U_H, _ = glm_influence(data, family, X2, o2.x, w2, Z2, cells=Hc)
    labels = tuple(name for name, free in ((POOLED_LABEL, free1), (data.human_judge, free2)) if free)
    return stack_influence([U_L, U_H]).linearization("the pooled scores", target_slices(N, q, nl), tie_labels=labels)
