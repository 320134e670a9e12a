r"""Synthetic data from the data-generating process of the paper's simulation studies.

App. "Simulation Studies", "Data-generating process": structured LLM scores ``S = gamma mu^T + U V^T`` (Cond.
llm-structure), judge position effects ``b_k``, LLM and human outcomes from eq. binomial-model-llm and eq.
binomial-model-human, each comparison's pair uniform among the ``N(N-1)/2``. The output is the long table of
:meth:`pydial.Comparisons.from_frame` and the truth (:class:`Truth`).

``np.random.default_rng(seed)`` spawns five streams, in order: the structural parameters, the overdispersion, the
pair-varying position effects, the LLM and the human comparisons; so for one seed the true parameters do not depend on
the budgets or the misspecifications (common random numbers).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.special import expit

from pydial.data.comparisons import Comparisons
from pydial.data.features import covariate_names
from pydial.data.ingest import pair_index as triangle_pair_index
from pydial.exceptions import ArgumentError, ArgumentTypeError
from pydial.model.families import family_of
from pydial.resources import check_bytes, check_choice, check_count, check_seed

__all__ = ["TARGETS", "Truth", "Simulation", "JudgeBehavior", "simulate", "pair_index"]

TARGETS = ("consensus", "misaligned")
"""Allowed values of ``simulate(target=...)``."""

FIXED_JUDGE_B = 0.05
"""Position effect of the last judge (paper: "one judge fixed at :math:`b_k=0.05`")."""

HUMAN_JUDGE = "human"


def pair_index(i: np.ndarray | int, j: np.ndarray | int, N: int) -> np.ndarray:
    """Position of the canonical pairs ``(i, j)``, ``0 <= i < j < N``, in ``np.triu_indices(N, 1)`` (:attr:`Truth.pairs`)."""
    i, j = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    if np.any(i >= j) or np.any(i < 0) or np.any(j >= N):
        raise ArgumentError(f"pairs must satisfy 0 <= i < j < N={N}")
    return triangle_pair_index(i, j - 1, N - 1)  # the pairs i <= j' of N - 1 items, j' = j - 1


@dataclass(frozen=True, eq=False)
class Truth:
    r"""True parameters of one simulated data set.

    Attributes
    ----------
    s_h : ndarray, shape (N,)
        Centered human scores :math:`s_H` (``mu`` or ``W c_h``).
    S : ndarray, shape (K, N)
        LLM judge scores :math:`S=\gamma\mu^\top+UV^\top` (eq. S-llm); rows centered.
    b : ndarray, shape (K,)
        Judge-level position effects :math:`b_k` (the last 0.05 unless ``position_effects`` were given); with
        ``sigma_pos > 0`` the within-judge mean of :attr:`b_kij`.
    mu : ndarray, shape (N,)
        Consensus direction, :math:`1^\top\mu=0`, :math:`\|\mu\|_2^2=N`.
    gamma : ndarray, shape (K,)
        Consensus loadings, :math:`1^\top\gamma=K`.
    U : ndarray, shape (K, r)
        Disagreement loadings, zero column means.
    V : ndarray, shape (N, r)
        Disagreement directions, :math:`V^\top 1=0`, :math:`\mu^\top V=0`, :math:`N^{-1}V^\top V=I_r`.
    W : ndarray, shape (N, r + 1)
        :math:`W=[\mu, V]`.
    c_h : ndarray, shape (d,)
        Human calibration coordinates: ``(1,)`` for ``target="consensus"`` (basis :math:`M=\mu`), ``(1, c_V)`` for
        ``"misaligned"`` (:math:`M=W`).
    b_kij : ndarray, shape (K, n_pairs), or None
        Pair-varying position effects :math:`b_{kij}=b_k+\delta_{kij}` (``sigma_pos > 0`` only).
    eps_kij : ndarray, shape (K, n_pairs), or None
        Judge-pair overdispersion effects :math:`\varepsilon_{kij}` (``overdispersion > 0`` only).
    pairs : ndarray, shape (n_pairs, 2)
        Canonical pairs ``i < j`` (``np.triu_indices(N, 1)``), the columns of :attr:`b_kij` and :attr:`eps_kij`; see
        :func:`pair_index`.
    items, judges : tuple of str
        Item names ``item00 ..`` and LLM judge names ``judge0 ..``.
    nu : ndarray, shape (K + 1,), or None
        Tie parameters of the judges, then the people (``tie_rate > 0`` only): Davidson's ``nu`` or Rao-Kupper's
        threshold ``tau``.
    ties : {"davidson", "rao-kupper"} or None
        The outcome family of the tie draws (``None``: no ties).
    """

    s_h: np.ndarray
    S: np.ndarray
    b: np.ndarray
    mu: np.ndarray
    gamma: np.ndarray
    U: np.ndarray
    V: np.ndarray
    W: np.ndarray
    c_h: np.ndarray
    b_kij: np.ndarray | None
    eps_kij: np.ndarray | None
    pairs: np.ndarray
    items: tuple[str, ...] = ()
    judges: tuple[str, ...] = ()
    nu: np.ndarray | None = None
    ties: str | None = None
    covariates: tuple[str, ...] = ()
    beta: np.ndarray | None = None
    """``(K + 1, p)`` covariate effects on the raw comparison covariate ``x_a - x_b`` (rows: the
    judges, then the people); ``None`` without covariates."""
    item_style: np.ndarray | None = None
    """``(N, p)`` item means of the response features (each response adds standard normal noise)."""
    self_preference: dict[str, tuple[str, ...]] | None = None
    """Each mapped judge's own items (:func:`simulate`'s ``self_preference``); ``None`` without."""
    self_effect: np.ndarray | None = None
    """``(K,)`` self-preference effects: judge ``k``'s predictor adds ``self_effect[k] (1[i own_k] - 1[j own_k])``
    (0 for the judges not mapped); ``None`` without ``self_preference``."""

    @property
    def N(self) -> int:
        """Number of items."""
        return int(self.mu.size)

    @property
    def K(self) -> int:
        """Number of LLM judges."""
        return int(self.gamma.size)

    @property
    def r(self) -> int:
        r"""Rank of the disagreement part :math:`UV^\top`."""
        return int(self.V.shape[1])

    @property
    def M(self) -> np.ndarray:
        """Calibration basis in which the human target lies: ``mu[:, None]`` or ``W``."""
        return self.W[:, : self.c_h.size]

    def llm_eta(self, k: Any, i: Any, j: Any, a: Any) -> np.ndarray:
        r"""LLM linear predictor of canonical cells (judge ``k``, pair ``i<j``, order ``a``).

        :math:`\eta = s_{ki}-s_{kj}+a\,b_{kij}+\varepsilon_{kij}`, with :math:`b_{kij}=b_k` and
        :math:`\varepsilon_{kij}=0` when those effects are off.  The probability that item ``i`` wins is
        ``scipy.special.expit(eta)``.

        Parameters
        ----------
        k, i, j, a : array_like of int
            Judge index, canonical item indices ``i < j`` and display order in ``{-1, +1}`` (broadcast together).

        Returns
        -------
        numpy.ndarray
            The linear predictor, one value per cell.
        """
        k, i, j, a = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (k, i, j, a)))  # z = 0 (no style)
        return _llm_predictor(self.S, self.b, self.b_kij, self.eps_kij, k, i, j, pair_index(i, j, self.N), a)

    def human_prob(self, i: Any, j: Any) -> np.ndarray:
        r"""Probability :math:`\sigma(s_{Hi}-s_{Hj})` that people prefer item ``i`` to ``j``."""
        return expit(self.s_h[np.asarray(i, dtype=np.int64)] - self.s_h[np.asarray(j, dtype=np.int64)])

    def scores(self) -> pd.DataFrame:
        """Return the true scores as a table: one row per item, columns ``human`` and the judges."""
        cols = {HUMAN_JUDGE: self.s_h, **{name: self.S[k] for k, name in enumerate(self.judges)}}
        return pd.DataFrame(cols, index=pd.Index(self.items, name="item"))


def _llm_predictor(S: np.ndarray, b: np.ndarray, b_kij: np.ndarray | None, eps_kij: np.ndarray | None, k: np.ndarray,
                   i: np.ndarray, j: np.ndarray, p: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``eta = s_ki - s_kj + a b_kij + eps_kij`` of the cells ``(k, i, j, a)`` of pairs ``p`` (``b_k``, 0 when off)."""
    eta = S[k, i] - S[k, j] + a * (b[k] if b_kij is None else b_kij[k, p])
    return eta if eps_kij is None else eta + eps_kij[k, p]


@dataclass(frozen=True, eq=False)
class Simulation:
    """A simulated data set: the long table, the truth that generated it, and its settings.

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per judgment, columns ``record_id, judge, item_a, item_b, first, winner`` (LLM rows first, then human
        rows).
    truth : Truth
        The parameters that generated :attr:`frame`.
    config : dict
        The arguments of :func:`simulate` (``seed`` is the ``seed`` argument when it was an int or None, otherwise the
        string ``"Generator"``).
    """

    frame: pd.DataFrame
    truth: Truth
    config: dict = field(default_factory=dict)

    @cached_property
    def comparisons(self) -> Comparisons:
        """:class:`pydial.Comparisons` built from :attr:`frame` (on first access, cached).

        All ``N`` items are kept in their index order even when some item was never compared.  Judges come from the
        data, so with a tiny ``n_llm`` a judge that drew no comparison is absent from ``comparisons.judges``.
        """
        names = list(self.truth.covariates) or None
        return Comparisons.from_frame(self.frame, human_judge=HUMAN_JUDGE, items=list(self.truth.items), covariates=names,
                                      self_preference=self.truth.self_preference)

    def __repr__(self) -> str:
        """Show the simulation's configuration."""
        shown = ("N", "K", "rank", "n_llm", "n_human", "target", "seed")
        return f"Simulation({', '.join(f'{k}={self.config.get(k)!r}' for k in shown)})"


@dataclass(frozen=True)
class JudgeBehavior:
    r"""How the simulated LLM judges behave beyond the paper's main design (:func:`simulate`'s ``behavior``).

    Attributes
    ----------
    p_first : float, default 0.75
        Probability that the canonical item is displayed first (paper: 0.75; not used with
        ``simulate(both_orders=True)``).
    position_effects : sequence of float, optional
        The judges' position effects :math:`b_k` (``K`` numbers) instead of the drawn ones (still drawn, so the other
        parameters do not change).
    overdispersion : float, default 0
        Standard deviation of the judge-pair effects :math:`\varepsilon_{kij}` (0 = off; paper: 1).
    sigma_pos : float, default 0
        Within-judge standard deviation of the pair-varying position effects (0 = off; paper: 0 to 1).  Needs
        ``N >= 3``.
    self_preference : mapping of str to sequence of str, optional
        Self-preference (beyond the paper): each mapped judge's own items, by name (``{"judge0": ["item00", "item01"]}``).
        Judge ``k``'s predictor adds ``self_effect_k (1[i own_k] - 1[j own_k])``; :attr:`Simulation.comparisons` carries
        the covariate (:meth:`~pydial.Comparisons.with_self_preference`, scale 1).
    self_effect : float or mapping of str to float, default 0
        The self-preference effect of every mapped judge, or of each (by judge name; unmapped 0).

    Examples
    --------
    >>> sim = simulate(N=6, K=3, n_llm=500, n_human=50, behavior=JudgeBehavior(overdispersion=1.0), seed=1)
    >>> sim.config["overdispersion"]
    1.0
    >>> simulate(N=6, K=3, n_llm=500, n_human=50, behavior={"overdispersion": 1.0}, seed=1).frame.equals(sim.frame)
    True
    """

    p_first: float = 0.75
    position_effects: Sequence[float] | None = None
    overdispersion: float = 0.0
    sigma_pos: float = 0.0
    self_preference: Mapping[str, Sequence[str]] | None = None
    self_effect: float | Mapping[str, float] = 0.0

    @classmethod
    def of(cls, value: "JudgeBehavior | Mapping[str, Any] | None") -> "JudgeBehavior":
        """Return ``value`` (a :class:`JudgeBehavior`, a mapping of its fields, or None) as a :class:`JudgeBehavior`.

        Raises
        ------
        pydial.ArgumentTypeError
            ``value`` is neither.
        pydial.ArgumentError
            The mapping has a key that is not a field (named, with the fields).
        """
        if value is None or isinstance(value, cls):
            return value or cls()
        known = [f.name for f in fields(cls)]
        if not isinstance(value, Mapping):
            raise ArgumentTypeError(f"behavior must be a JudgeBehavior or a mapping with keys {known}, got {value!r}")
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            raise ArgumentError(f"behavior has unknown key(s) {unknown}; the keys are {known}")
        return cls(**value)


# --------------------------------------------------------------------------- helpers
def _check_float(name: str, value: Any, lo: float, hi: float | None = None) -> float:
    """Return ``value`` as a finite float in ``[lo, hi]`` (``[lo, inf)`` without ``hi``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{name} must be a real number, got {value!r}") from None
    if not np.isfinite(v) or v < lo or (hi is not None and v > hi):
        raise ArgumentError(f"{name} must be in [{lo}, {'inf)' if hi is None else f'{hi}]'}, got {value!r}")
    return v


def _orth(G: np.ndarray) -> np.ndarray:
    """Orthonormal basis of ``col(G)`` by QR with the sign fixed so that ``diag(R) > 0``."""
    Q, R = np.linalg.qr(G)
    sgn = np.sign(np.diag(R))
    sgn[sgn == 0] = 1.0
    return Q * sgn


def _covariate_effects(beta: Any, K: int, p: int) -> np.ndarray:
    """``beta`` of :func:`simulate` as a ``(K + 1, p)`` array (a number or ``(p,)``: the judges', people 0)."""
    if beta is None:
        return np.zeros((K + 1, p))
    if p == 0:
        raise ArgumentError("beta= needs covariates= (the names of the response covariates)")
    try:
        arr = np.asarray(beta, float)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"beta must be a number, a vector of {p} or a ({K + 1}, {p}) array of numbers "
                                f"(judges, then people), got {beta!r}") from None
    if not (arr.ndim <= 1 and arr.size in (1, p)) and arr.shape != (K + 1, p):
        raise ArgumentError(f"beta must be a number, a vector of {p} or a ({K + 1}, {p}) array (judges, then people), "
                            f"got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ArgumentError(f"beta must be finite, got {beta!r}")
    if arr.shape == (K + 1, p):
        return arr.copy()
    out = np.zeros((K + 1, p))
    out[:K] = arr.reshape(-1)  # one number or one per covariate, for every judge
    return out


SIM_BYTES_PER_ROW = 200  # per judgment: draws, indices, predictors and the frame's columns (measured ~165 B)
SIM_BYTES_PER_COVARIATE = 40  # per judgment and covariate: both sides' draws and frame columns (measured ~32 B)
SIM_BYTES_PER_PAIR = 48  # per item pair: the pair indices and the triangle mask (measured ~34 B)
SIM_BYTES_PER_JUDGE_PAIR = 40  # per judge and pair: noise draws, overdispersion, pair-varying effects


def _check_size(N: int, K: int, n_llm: int, n_human: int, p: int) -> None:
    """Refuse (before drawing) a simulation whose arrays exceed the memory available."""
    n_pairs = N * (N - 1) // 2
    rows = n_llm + n_human
    need = (rows * (SIM_BYTES_PER_ROW + SIM_BYTES_PER_COVARIATE * p)
            + n_pairs * (SIM_BYTES_PER_PAIR + SIM_BYTES_PER_JUDGE_PAIR * K))
    check_bytes(need, f"simulate(N={N:,}, K={K:,}, n_llm={n_llm:,}, n_human={n_human:,})",
                "reduce n_llm + n_human (the rows) or N (the item pairs)",
                detail=f"{rows:,} rows x {SIM_BYTES_PER_ROW + SIM_BYTES_PER_COVARIATE * p} B + {n_pairs:,} pairs x "
                       f"{SIM_BYTES_PER_PAIR + SIM_BYTES_PER_JUDGE_PAIR * K} B")


def _names(N: int, K: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return the simulated items ``item00 ..`` and judges ``judge0 ..`` (zero-padded: sorted names keep the order)."""
    width = len(str(K - 1))
    return tuple(f"item{t:02d}" for t in range(N)), tuple(f"judge{k:0{width}d}" for k in range(K))


def _self_preference(own: Mapping[str, Sequence[str]] | None, effect: float | Mapping[str, float], N: int,
                     K: int) -> tuple[dict[str, tuple[str, ...]] | None, np.ndarray | None, np.ndarray]:
    """Return the judges' own items (a name alone is one item), indicators ``(K, N)`` and effects ``(K,)``."""
    item_names, judge_names = _names(N, K)
    judges = {name: k for k, name in enumerate(judge_names)}
    items = {name: t for t, name in enumerate(item_names)}
    self_k = np.zeros(K)
    if own is None:
        if isinstance(effect, Mapping) or effect != 0.0:
            raise ArgumentError("self_effect= needs self_preference= (the judges' own items)")
        return None, None, self_k
    mine = {str(k): (v,) if isinstance(v, str) else tuple(str(x) for x in v) for k, v in own.items()}
    bad_j = sorted(k for k in mine if k not in judges)
    bad_i = sorted({x for v in mine.values() for x in v if x not in items})
    if bad_j or bad_i:
        raise ArgumentError(f"self_preference names unknown judge(s) {bad_j} / item(s) {bad_i}; the judges are "
                            f"{list(judges)[:4]}..., the items {list(items)[:4]}...")
    O = np.zeros((K, N))
    for k, v in mine.items():
        O[judges[k], [items[x] for x in v]] = 1.0
    if isinstance(effect, Mapping):
        unknown = sorted(str(k) for k in effect if k not in mine)
        if unknown:
            raise ArgumentError(f"self_effect names judge(s) {unknown} not in self_preference")
        for k, e in effect.items():
            self_k[judges[k]] = float(e)
    else:
        self_k[[judges[k] for k in mine]] = float(effect)
    if not np.all(np.isfinite(self_k)):
        raise ArgumentError("self_effect must be finite")
    return mine, O, self_k


def _check_both_orders(both_orders: Any, n_llm: int, n_human: int, K: int) -> int:
    """Check :func:`simulate`'s ``both_orders``; return the number of LLM rows it gives."""
    if not isinstance(both_orders, (bool, np.bool_)):
        raise ArgumentTypeError(f"both_orders must be True or False, got {both_orders!r}")
    if both_orders and n_human > n_llm:
        raise ArgumentError(f"n_human ({n_human}) must be <= n_llm ({n_llm}) with both_orders=True: each human "
                            "label is given to one of the n_llm records")
    return 2 * K * n_llm if both_orders else n_llm


def _position_effects(values: Sequence[float] | None, K: int) -> np.ndarray | None:
    """:func:`simulate`'s ``position_effects`` as a finite ``(K,)`` array (``None`` when not given)."""
    if values is None:
        return None
    try:
        b = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"position_effects must be {K} numbers (one per judge), got {values!r}") from None
    if b.shape != (K,) or not np.all(np.isfinite(b)):
        raise ArgumentError(f"position_effects must be {K} finite numbers (one per judge, K={K}), got {values!r}")
    return b


def _llm_design(gen: np.random.Generator, n_llm: int, n_pairs: int, K: int, p_first: float,
                both_orders: bool) -> tuple[np.ndarray, ...]:
    """Draw ``(pair, judge, canonical_first, record, record_pairs)``: one per record, or each judge in both orders."""
    rec_pairs = gen.integers(0, n_pairs, size=n_llm)
    if not both_orders:
        k = gen.integers(0, K, size=n_llm)
        a_first = gen.random(n_llm) < p_first
        return rec_pairs, k, a_first, np.arange(n_llm, dtype=np.int64), rec_pairs
    rec = np.repeat(np.arange(n_llm, dtype=np.int64), 2 * K)
    k = np.tile(np.repeat(np.arange(K, dtype=np.int64), 2), n_llm)
    a_first = np.tile(np.array([True, False]), K * n_llm)
    return rec_pairs[rec], k, a_first, rec, rec_pairs


def _check_design(N: Any, K: Any, rank: Any, n_llm: Any, n_human: Any) -> tuple[int, int, int, int, int]:
    """Check :func:`simulate`'s dimensions and budgets; return them as ints."""
    N, K, r = check_count(N, "N", minimum=2), check_count(K, "K"), check_count(rank, "rank", minimum=0)
    if r > K - 1:
        raise ArgumentError(f"rank ({r}) must satisfy rank <= K-1 = {K - 1} "
                            "(structured LLM representation: rank(U) = r with 1^T U = 0)")
    if r + 1 > N - 1:
        raise ArgumentError(f"rank ({r}) must satisfy rank+1 <= N-1 = {N - 1} "
                            "(structured LLM representation: W = [mu, V] centered)")
    return N, K, r, check_count(n_llm, "n_llm", minimum=0), check_count(n_human, "n_human", minimum=0)


def _check_ties(tie_rate: Any, ties: Any) -> tuple[float, str]:
    """Check :func:`simulate`'s ``tie_rate`` and ``ties``; return them (``ties`` Davidson by default)."""
    tie_rate = _check_float("tie_rate", tie_rate, 0.0, 1.0)
    if tie_rate >= 1.0:
        raise ArgumentError(f"tie_rate must be < 1, got {tie_rate}")
    if ties not in (None, "davidson", "rao-kupper"):
        raise ArgumentError(f"ties must be 'davidson', 'rao-kupper' or None, got {ties!r}")
    if ties is not None and tie_rate == 0:
        raise ArgumentError(f"ties={ties!r} needs tie_rate > 0 (the tie probability at equal scores)")
    return tie_rate, ties or "davidson"


def _draw(gen: np.random.Generator, ties: str, eta: np.ndarray, nu: float | None) -> np.ndarray:
    """Outcome codes 0 (item i wins), 1 (item j wins), 2 (tie) from the tie family ``ties``; decisive only when ``nu`` is None."""
    if nu is None:
        return np.where(gen.random(eta.size) < expit(eta), 0, 1)
    P = family_of(ties).probabilities(eta, np.full(eta.size, np.log(nu)))
    u = gen.random(eta.size)
    return np.where(u < P[:, 0], 0, np.where(u < P[:, 0] + P[:, 1], 1, 2))


def _frame(items: tuple[str, ...], judges: tuple[str, ...], k_llm: np.ndarray, a_first: np.ndarray,
           record: np.ndarray, i: np.ndarray, j: np.ndarray, outcome: np.ndarray) -> pd.DataFrame:
    """Return the long table: the ``k_llm.size`` LLM rows, then the human rows (judge ``human``, first ``a``)."""
    n_human = outcome.size - k_llm.size
    ab = np.array(["a", "b", "tie"], dtype=object)
    judge_col = np.concatenate([np.asarray(judges, dtype=object)[k_llm], np.full(n_human, HUMAN_JUDGE, dtype=object)])
    first_col = np.concatenate([ab[(~a_first).astype(np.int64)], np.full(n_human, "a", dtype=object)])
    item_arr = np.asarray(items, dtype=object)
    return pd.DataFrame({"record_id": record, "judge": judge_col, "item_a": item_arr[i], "item_b": item_arr[j],
                         "first": first_col, "winner": ab[outcome.astype(np.int64)]})


def _parameters(gen: np.random.Generator, N: int, K: int, r: int, target: str, c_v_sd: float,
                b_given: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Draw the structural parameters ``(mu, V, gamma, U, S, W, b, c_h, s_h)`` of :func:`simulate` (Cond. llm-structure)."""
    mu = gen.standard_normal(N)
    mu = mu - mu.mean()
    mu = mu * np.sqrt(N) / np.linalg.norm(mu)
    V = gen.standard_normal((N, r))
    if r > 0:  # projected orthogonal to {1, mu} and orthonormalized
        Q0 = _orth(np.column_stack([np.ones(N), mu]))
        V = _orth(V - Q0 @ (Q0.T @ V))
        V = _orth(V - Q0 @ (Q0.T @ V))  # a second pass removes the O(eps) leakage of the QR back into span{1, mu}
    V = np.sqrt(N) * V
    gamma = 1.0 + 0.3 * gen.standard_normal(K)
    gamma = gamma * K / gamma.sum()
    U = gen.standard_normal((K, r))
    U = U - U.mean(axis=0, keepdims=True)
    S = np.outer(gamma, mu) + U @ V.T
    W = np.column_stack([mu, V])
    b = gen.uniform(0.3, 1.2, size=K) * np.where(gen.random(K) < 0.8, 1.0, -1.0)
    b[-1] = FIXED_JUDGE_B
    if b_given is not None:  # drawn all the same: the other parameters do not depend on position_effects
        b = b_given
    c_v = c_v_sd * gen.standard_normal(r)
    c_h = np.ones(1) if target == "consensus" else np.concatenate([[1.0], c_v])
    s_h = mu.copy() if target == "consensus" else W @ c_h
    return mu, V, gamma, U, S, W, b, c_h, s_h


def simulate(N: int = 10, K: int = 4, rank: int = 1, n_llm: int = 20_000, n_human: int = 800, *,
             target: Literal["consensus", "misaligned"] = "consensus", c_v_sd: float = 0.5, both_orders: bool = False,
             tie_rate: float = 0.0, ties: Literal["davidson", "rao-kupper"] | None = None,
             covariates: Sequence[str] | None = None, beta: Any = None,
             behavior: JudgeBehavior | Mapping[str, Any] | None = None,
             seed: np.random.Generator | int | None = None) -> Simulation:
    r"""Simulate LLM and human pairwise judgments from the paper's DGP (App. "Simulation Studies").

    Structure (normalized as :class:`Truth` says).  :math:`\mu`, :math:`V` and :math:`U` standard Gaussian, :math:`V`
    projected orthogonal to :math:`\{1_N,\mu\}` and orthonormalized by QR; :math:`\gamma_k=1+0.3z_k`,
    :math:`z_k\sim N(0,1)`; :math:`S=\gamma\mu^\top+UV^\top`.

    Position effects.  :math:`b_k=\beta_k\xi_k`, :math:`\beta_k\sim U(0.3,1.2)`, a random sign :math:`\xi_k` with
    :math:`\Pr(\xi_k=1)=0.8` (our reading of the paper's :math:`\xi_k`); the last judge has :math:`b_K=0.05`.  Human
    target: ``"consensus"`` :math:`s_H=\mu` (:math:`c_H=(1)`), ``"misaligned"`` :math:`s_H=Wc_H`, :math:`c_H=(1,c_V)`,
    :math:`c_V\sim N(0,\texttt{c\_v\_sd}^2 I_r)`.

    Comparisons.  Each draws its pair uniformly (LLM comparisons also the judge); the canonical item :math:`i<j` is
    shown first (:math:`a=+1`) with probability ``behavior.p_first``.  Item :math:`i` wins an LLM comparison with
    probability :math:`\sigma(s_{ki}-s_{kj}+ab_{kij}+\varepsilon_{kij})` and a human one with
    :math:`\sigma(s_{Hi}-s_{Hj})`.  Misspecification (``behavior``): ``overdispersion``,
    :math:`\varepsilon_{kij}\sim N(0,\texttt{overdispersion}^2)` once per judge-pair (shared by repeats and orders; the
    paper's bottom row uses 1); ``sigma_pos``, :math:`b_{kij}=b_k+\delta_{kij}` with :math:`\delta_{kij}` standard
    normal draws centered within judge over the :math:`P=N(N-1)/2` pairs and scaled to population standard deviation
    :math:`\sigma_{pos}` exactly, so :math:`P^{-1}\sum_{i<j}b_{kij}=b_k`.

    Parameters
    ----------
    N, K, rank : int
        Items, LLM judges and disagreement rank :math:`r`; need ``0 <= rank <= K-1``, ``rank+1 <= N-1`` and ``N >= 2``.
    n_llm, n_human : int
        Numbers of LLM and human comparisons (each ``>= 0``).
    target : {"consensus", "misaligned"}
        Human target :math:`s_H=\mu` or :math:`s_H=Wc_H`.
    c_v_sd : float
        Standard deviation of :math:`c_V` (``target="misaligned"``; paper: 0.5).
    tie_rate : float
        ``> 0``: every judge and the people produce ties, with probability ``tie_rate`` at equal scores (one tie
        parameter for all, ``truth.nu``), drawn from the family ``ties``. 0 (default): no ties, the draws are unchanged.
    ties : {"davidson", "rao-kupper"} or None
        Outcome family of the tie draws, as ``fit(ties=)`` (:mod:`pydial.model.families`); None (default) is Davidson
        when ``tie_rate > 0``; a family with ``tie_rate=0`` is an error.
    both_orders : bool, default False
        The design of the paper's real-data panel: ``n_llm`` *records* (pairs drawn uniformly), each judged by every
        judge in both display orders (independent draws): ``2 K n_llm`` LLM rows sharing their record's ``record_id``.
        The ``n_human <= n_llm`` human labels go to the first ``n_human`` records, and response covariates are drawn
        once per record. False (default): one judgment per record, the draws are unchanged.
    covariates : sequence of str, optional
        Response covariates (beyond the paper: style bias), e.g. ``["length"]``.  Each item has a mean feature
        ``m_i ~ N(0, 1)`` per covariate (``truth.item_style``), each response ``m_i + N(0, 1)`` (columns ``<name>_a``,
        ``<name>_b``).  The predictors add ``(x_a - x_b)' beta_k`` (people: ``beta_H``) on the raw difference: a fit on
        the standardized covariate estimates ``beta * scale`` (``Comparisons.covariate_scale``).
    beta : float or array, optional
        The covariate effects: a number or a ``(p,)`` vector shared by the LLM judges (people 0), or a ``(K + 1, p)``
        array (judges, then people).  Default 0.
    behavior : JudgeBehavior or mapping, optional
        The judges' display design and misspecifications, as a :class:`JudgeBehavior` or a mapping of some of its fields
        (e.g. ``{"overdispersion": 1.0}``).
    seed : numpy.random.Generator, int or None
        Seed (an integer in ``[0, 2**32)``) or generator, for :func:`numpy.random.default_rng`; the same seed gives
        identical output.

    Returns
    -------
    Simulation
        ``frame`` (long table), ``truth`` (:class:`Truth`), ``config`` and the lazily built ``comparisons``.

    Raises
    ------
    pydial.ArgumentError
        Invalid dimensions, budgets, target or noise levels, or an unknown ``behavior`` key (the message echoes the bad
        value).
    pydial.ArgumentTypeError
        An argument of the wrong type, e.g. ``behavior`` neither a mapping nor a :class:`JudgeBehavior`.

    Notes
    -----
    Each row is its own record (``record_id = 0, 1, ...``), except with ``both_orders``.  Rows put the canonical item
    :math:`i<j` in ``item_a``, so ``first == "a"`` means :math:`a=+1` and ``winner == "a"`` that item :math:`i` won.
    Human rows have judge ``"human"`` and ``first = "a"`` (the human model ignores display order).

    Examples
    --------
    >>> sim = simulate(N=6, K=3, rank=1, n_llm=2000, n_human=200, seed=1)
    >>> sim.frame.shape
    (2200, 6)
    >>> round(float(sim.truth.mu @ sim.truth.mu), 10)
    6.0
    """
    N, K, r, n_llm, n_human = _check_design(N, K, rank, n_llm, n_human)
    seed = check_seed(seed, generator=True)
    jb = JudgeBehavior.of(behavior)
    n_rows = _check_both_orders(both_orders, n_llm, n_human, K)
    b_given = _position_effects(jb.position_effects, K)
    _check_size(N, K, n_rows, n_human, 0 if covariates is None else len(covariates))
    check_choice("target", target, TARGETS)
    c_v_sd = _check_float("c_v_sd", c_v_sd, 0.0)
    overdispersion = _check_float("overdispersion", jb.overdispersion, 0.0)
    sigma_pos = _check_float("sigma_pos", jb.sigma_pos, 0.0)
    p_first = _check_float("p_first", jb.p_first, 0.0, 1.0)
    tie_rate, family = _check_ties(tie_rate, ties)
    names = [] if covariates is None else covariate_names(covariates)
    beta_kp = _covariate_effects(beta, K, len(names))
    own_items, own, self_k = _self_preference(jb.self_preference, jb.self_effect, N, K)
    n_pairs = N * (N - 1) // 2
    if sigma_pos > 0 and n_pairs < 2:
        raise ArgumentError(f"sigma_pos ({sigma_pos}) > 0 needs at least two pairs (N >= 3), got N={N}")

    gen = np.random.default_rng(seed)
    seed_label = seed if (seed is None or isinstance(seed, (int, np.integer))) else "Generator"
    g_struct, g_eps, g_pos, g_llm, g_hum = gen.spawn(5)

    mu, V, gamma, U, S, W, b, c_h, s_h = _parameters(g_struct, N, K, r, target, c_v_sd, b_given)  # (1) structure
    pi, pj = np.triu_indices(N, 1)

    # (2) Overdispersion and (3) pair-varying position effects, per judge-pair.
    eps_kij = overdispersion * g_eps.standard_normal((K, n_pairs)) if overdispersion > 0 else None
    b_kij = None
    if sigma_pos > 0:
        g = g_pos.standard_normal((K, n_pairs))
        g = g - g.mean(axis=1, keepdims=True)
        b_kij = b[:, None] + sigma_pos * g / np.sqrt(np.mean(g**2, axis=1, keepdims=True))

    # (4) LLM and (5) human comparisons: the designs, then the predictors.
    p_llm, k_llm, a_first, rec_llm, rec_pairs = _llm_design(g_llm, n_llm, n_pairs, K, p_first, both_orders)
    p_hum = rec_pairs[:n_human] if both_orders else g_hum.integers(0, n_pairs, size=n_human)
    i_l, j_l, i_h, j_h = pi[p_llm], pj[p_llm], pi[p_hum], pj[p_hum]
    eta = _llm_predictor(S, b, b_kij, eps_kij, k_llm, i_l, j_l, p_llm, np.where(a_first, 1.0, -1.0))
    if own is not None:  # self-preference: beta_k (1[i own_k] - 1[j own_k]), no draws
        eta += self_k[k_llm] * (own[k_llm, i_l] - own[k_llm, j_l])
    eta_h = s_h[i_h] - s_h[j_h]
    style = None
    if names:  # drawn from a generator of their own: without covariates the draws are unchanged
        g_cov = np.random.default_rng(gen.integers(2**63))
        style = g_cov.standard_normal((N, len(names)))
        # one response per record side, shown to every judge in both orders (and labelled by the people with both_orders)
        xa_r, xb_r = (style[q[rec_pairs]] + g_cov.standard_normal((n_llm, len(names))) for q in (pi, pj))
        xa_l, xb_l = xa_r[rec_llm], xb_r[rec_llm]
        if both_orders:
            xa_h, xb_h = xa_r[:n_human], xb_r[:n_human]
        else:
            xa_h, xb_h = (style[q[p_hum]] + g_cov.standard_normal((n_human, len(names))) for q in (pi, pj))
        eta += np.einsum("cp,cp->c", xa_l - xb_l, beta_kp[k_llm])
        eta_h = eta_h + (xa_h - xb_h) @ beta_kp[K]
    t = None  # P(tie) = tie_rate at equal scores: nu / (2 + nu) (Davidson), tanh(tau / 2) (Rao-Kupper)
    if tie_rate > 0:
        t = 2 * tie_rate / (1 - tie_rate) if family == "davidson" else 2 * np.arctanh(tie_rate)
    outcome = np.concatenate([_draw(g_llm, family, eta, t), _draw(g_hum, family, eta_h, t)])

    items, judges = _names(N, K)
    record = (np.concatenate([rec_llm, np.arange(n_human, dtype=np.int64)]) if both_orders
              else np.arange(n_rows + n_human, dtype=np.int64))
    frame = _frame(items, judges, k_llm, a_first, record, np.concatenate([i_l, i_h]), np.concatenate([j_l, j_h]), outcome)
    for c, name in enumerate(names):  # the responses' features, LLM rows then human rows
        frame[f"{name}_a"] = np.concatenate([xa_l[:, c], xa_h[:, c]])
        frame[f"{name}_b"] = np.concatenate([xb_l[:, c], xb_h[:, c]])
    truth = Truth(
        s_h=s_h, S=S, b=b, mu=mu, gamma=gamma, U=U, V=V, W=W, c_h=c_h, b_kij=b_kij, eps_kij=eps_kij,
        pairs=np.column_stack([pi, pj]).astype(np.int64), items=items, judges=judges,
        nu=None if t is None else np.full(K + 1, t), ties=family if tie_rate > 0 else None,
        covariates=tuple(names), beta=beta_kp if names else None, item_style=style,
        self_preference=own_items, self_effect=self_k if own is not None else None,
    )
    config = dict(
        N=N, K=K, rank=r, n_llm=n_llm, n_human=n_human, target=target, c_v_sd=c_v_sd,
        overdispersion=overdispersion, sigma_pos=sigma_pos, p_first=p_first, seed=seed_label,
        **({"both_orders": True} if both_orders else {}),
        **({"position_effects": b.tolist()} if b_given is not None else {}),
        **({"tie_rate": tie_rate, "ties": family} if tie_rate > 0 else {}),
        **({"covariates": tuple(names), "beta": beta_kp.tolist()} if names else {}),
        **({"self_preference": {k: list(v) for k, v in (own_items or {}).items()},
            "self_effect": self_k.tolist()} if own is not None else {}),
    )
    return Simulation(frame=frame, truth=truth, config=config)
