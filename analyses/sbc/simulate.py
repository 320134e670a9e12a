"""Judgments simulated from drawn parameters, in numpy (not by the programs' generated quantities).

The outcome probabilities of one comparison of items ``x`` (shown first) and ``y``
(shown second) with log-odds ``eta = S[k, x] - S[k, y] + b_k`` (paper
eq. binomial-model-llm; people: ``eta = s_H[x] - s_H[y]``, no order effect,
eq. binomial-model-human):

* binary: ``P(x) = 1 / (1 + exp(-eta))``;
* Davidson (1970) with the Davidson-Beaver (1977) order effect:
  ``P(x) : P(y) : P(tie) = exp(eta / 2) : exp(-eta / 2) : nu``;
* Rao-Kupper (1967) with threshold ``tau = nu``:
  ``P(x) = 1 / (1 + exp(tau - eta))``, ``P(y) = 1 / (1 + exp(tau + eta))``, the rest a tie.

The design is complete: every judge compares every pair ``n_llm`` times in each
display order, the people every pair ``n_human`` times.  The counts are drawn per
cell in pydial's canonical orientation (pair ``i < j``, ``a = +1`` when ``i`` was
shown first; paper Sec. 3.1) as :class:`pydial.data.comparisons.CellTable` s, and
:func:`counts_frame` writes them as the user-facing table of
:meth:`pydial.Comparisons.from_counts` (``item_a`` = ``i``, ``first = "a"`` or ``"b"``).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from pydial.data.comparisons import CellTable

from .configs import Config

__all__ = ["outcome_probabilities", "simulate_cells", "counts_frame", "item_names", "judge_names", "HUMAN"]

HUMAN = "human"


def item_names(N: int) -> list[str]:
    """Item names ``i000, i001, ...`` (sorted as the indices, so ``Comparisons`` keeps this order)."""
    return [f"i{t:03d}" for t in range(N)]


def judge_names(K: int) -> list[str]:
    """LLM judge names ``j0, j1, ...``."""
    return [f"j{k}" for k in range(K)]


def outcome_probabilities(eta: np.ndarray, ties: str | None, nu: np.ndarray | float) -> np.ndarray:
    """Probabilities of (first-named item wins, second wins, tie) for log-odds ``eta``.

    Parameters
    ----------
    eta : ndarray
        Log-odds of each comparison.
    ties : {None, "davidson", "rao-kupper"}
    nu : ndarray or float
        Tie parameter of each comparison (``nu`` of Davidson, ``tau`` of Rao-Kupper).

    Returns
    -------
    ndarray
        ``eta.shape + (3,)``, rows summing to 1.
    """
    eta = np.asarray(eta, float)
    nu = np.broadcast_to(np.asarray(nu, float), eta.shape)
    if ties is None:
        p = 1.0 / (1.0 + np.exp(-eta))
        return np.stack([p, 1.0 - p, np.zeros_like(p)], axis=-1)
    if ties == "davidson":
        w = np.stack([np.exp(eta / 2), np.exp(-eta / 2), nu], axis=-1)
        return w / w.sum(axis=-1, keepdims=True)
    if ties == "rao-kupper":
        px = 1.0 / (1.0 + np.exp(nu - eta))
        py = 1.0 / (1.0 + np.exp(nu + eta))
        return np.stack([px, py, np.clip(1.0 - px - py, 0.0, 1.0)], axis=-1)
    raise ValueError(f"unknown tie model {ties!r}")


def simulate_cells(rng: np.random.Generator, theta: dict[str, np.ndarray], cfg: Config) -> tuple[CellTable, CellTable]:
    """Simulate the judgments of configuration ``cfg`` given parameters ``theta``.

    Parameters
    ----------
    rng : numpy.random.Generator
    theta : dict
        ``S`` (K x N), ``s_H`` (N), ``b`` (K) and, with ties, ``nu`` (judges, then people).
    cfg : Config

    Returns
    -------
    (CellTable, CellTable)
        LLM cells (judges ``0..K-1``, ``a = +1`` and ``-1`` per pair) and human cells
        (judge index ``K``, ``a = 0``), with tie counts.
    """
    nu = theta["nu"] if cfg.ties else np.zeros(cfg.K + 1)
    i, j = (np.asarray(v, np.int64) for v in zip(*combinations(range(cfg.N), 2)))
    k, a = np.repeat(np.arange(cfg.K), 2 * i.size), np.tile(np.repeat([1, -1], i.size), cfg.K)
    li, lj = np.tile(i, 2 * cfg.K), np.tile(j, 2 * cfg.K)
    eta = theta["S"][k, li] - theta["S"][k, lj] + a * theta["b"][k]
    llm = _draw(rng, k, li, lj, a, eta, nu[k], cfg.n_llm, cfg.ties)
    human = _draw(rng, np.full(i.size, cfg.K), i, j, np.zeros_like(i), theta["s_H"][i] - theta["s_H"][j],
                  np.full(i.size, nu[cfg.K]), cfg.n_human, cfg.ties)
    return llm, human


def _draw(rng: np.random.Generator, k: np.ndarray, i: np.ndarray, j: np.ndarray, a: np.ndarray, eta: np.ndarray,
          nu: np.ndarray, n: int, ties: str | None) -> CellTable:
    c = rng.multinomial(n, outcome_probabilities(eta, ties, nu))
    return CellTable.from_counts(k, i, j, a, c[:, 0], c[:, 1], c[:, 2])


def counts_frame(llm: CellTable, human: CellTable, *, N: int, K: int) -> pd.DataFrame:
    """Write canonical cells of ``N`` items and ``K`` judges as the counts of :meth:`pydial.Comparisons.from_counts`."""
    items = item_names(N)
    judges = judge_names(K) + [HUMAN]
    judge = np.concatenate([llm.judge, human.judge])
    a = np.concatenate([llm.a, human.a])
    i, j = np.concatenate([llm.i, human.i]), np.concatenate([llm.j, human.j])
    c = np.vstack([llm.counts, human.counts])
    return pd.DataFrame({
        "judge": [judges[g] for g in judge],
        "item_a": [items[t] for t in i],
        "item_b": [items[t] for t in j],
        "first": np.select([a == 1, a == -1], ["a", "b"], ""),
        "wins_a": c[:, 0],
        "wins_b": c[:, 1],
        "ties": c[:, 2],
    })
