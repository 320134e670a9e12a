"""What a Stan backend returns, backend-neutral: an optimum, and draws ``(chain, draw, *shape)`` with the sampler checks."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..exceptions import DialWarning

__all__ = ["SamplerWarning", "OptimizeResult", "SampleResult"]


class SamplerWarning(DialWarning):
    """NUTS finished with diagnostics that call its draws into question."""


@dataclass
class OptimizeResult:
    """A (penalized) maximum of a Stan program's log density, without Jacobian.

    Attributes
    ----------
    u : ndarray
        Optimum on the unconstrained scale.
    log_prob : float
        ``log_prob(u)`` (no Jacobian).
    grad_norm : float
        Max-norm of the gradient at ``u`` over the free coordinates (``nan`` when not reported).
    converged : bool
        Whether the optimizer reported convergence.
    message : str
        The optimizer's message.
    n_iter, n_eval : int
        Iterations and log-density evaluations (``-1`` if unknown), as in :class:`pydial.optim.OptimResult`.
    backend : str
    seconds : float
        Wall time of the optimization.
    values : dict of str to ndarray
        Parameters, transformed parameters and generated quantities at the optimum (CmdStan's; empty on scipy).
    """

    u: np.ndarray
    log_prob: float
    grad_norm: float
    converged: bool
    message: str
    n_iter: int
    n_eval: int
    backend: str
    seconds: float
    values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)


def _scalar_label(name: str, idx: tuple[int, ...], shape: tuple[int, ...],
                  labels: Mapping[str, Sequence[Sequence[Any]]] | None) -> str:
    """``name[i,j]`` with the coordinate labels of ``labels[name]`` when they fit ``shape``, else 0-based indices."""
    lab = (labels or {}).get(name)
    if lab is None or len(lab) != len(idx) or any(len(lv) != n for lv, n in zip(lab, shape)):
        lab = [range(n) for n in shape]
    return name + ("[" + ",".join(str(lv[i]) for lv, i in zip(lab, idx)) + "]" if idx else "")


def _convergence_table(draws: Mapping[str, np.ndarray], names: Sequence[str],
                       labels: Mapping[str, Sequence[Sequence[Any]]] | None) -> Any:
    """R-hat, bulk and tail ESS (``arviz``) of every non-constant scalar of the named draws, one row each."""
    import pandas as pd

    from .idata import rhat_ess

    rows = []
    for name in names:
        x = np.asarray(draws[name], dtype=float)
        if x.ndim < 2 or x[0, 0].size == 0:
            continue
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # constant scalars, left out below
            rhat, bulk, tail = rhat_ess(x)
        for idx in np.ndindex(x.shape[2:]):
            if np.ptp(x[(..., *idx)]) == 0.0:  # constant (e.g. fixed zero): nothing to check
                continue
            rows.append({"variable": _scalar_label(name, idx, x.shape[2:], labels),
                         "rhat": float(rhat[idx]), "ess_bulk": float(bulk[idx]), "ess_tail": float(tail[idx])})
    return pd.DataFrame(rows, columns=["variable", "rhat", "ess_bulk", "ess_tail"]).set_index("variable")


DISTINCT_DRAWS_MIN = 0.1
"""Smallest share of distinct draws an approximation must keep: Pathfinder's importance resampling repeats draws
(Arena data: 70% distinct for the human model, 16% for DIAL-Ada) and can collapse to a few points (zero-width intervals)."""


def _degenerate_draws(draws: Mapping[str, np.ndarray], names: Sequence[str], algorithm: str) -> list[str]:
    """Report an approximation whose draws of ``names`` repeat (fewer than :data:`DISTINCT_DRAWS_MIN` distinct)."""
    if not names:
        return []
    rows = np.concatenate([np.asarray(draws[n], float).reshape(-1, int(np.prod(np.shape(draws[n])[2:], dtype=int)))
                           for n in names], axis=1)
    distinct = int(np.unique(rows, axis=0).shape[0])
    if distinct >= DISTINCT_DRAWS_MIN * rows.shape[0]:
        return []
    return [f"{algorithm} returned {distinct} distinct draws of {rows.shape[0]} (its importance resampling "
            "kept a few points): its intervals are unreliable; use algorithm='laplace' or 'nuts'"]


@dataclass
class SampleResult:
    """Posterior draws of a Stan program: NUTS, or an approximation (Laplace, Pathfinder).

    Attributes
    ----------
    draws : dict of str to ndarray
        Every parameter, transformed parameter and generated quantity, ``(chain, draw, *shape)``.
    stats : dict of str to ndarray
        Sampler variables (``lp__``, ``divergent__``, ``treedepth__``, ...), ``(chain, draw)``.
    chains, draws_per_chain, warmup, seed, max_depth : int
    backend : str
    seconds : float
        Wall time of the sampler call.
    diagnostics : pandas.DataFrame or None
        R-hat, bulk and tail ESS per monitored scalar (set by :meth:`check`).
    problems : list of str
        Human-readable sampler problems; empty when all checks pass.
    backend_fit : cmdstanpy.CmdStanMCMC or None
        The CmdStan fit (CmdStan backend only), for ``arviz.from_cmdstanpy``.
    algorithm : str
        ``"nuts"``, or the approximation that drew them (``"laplace"``, ``"pathfinder"``: one chain of
        approximately independent draws; no sampler statistics, no R-hat).
    metric : str
        NUTS's metric: ``"diag (adapted)"`` from the unit metric or from given variances, ``"dense (kept)"``
        a given dense inverse metric with only the step size adapted; ``""`` for an approximation.
    """

    draws: dict[str, np.ndarray]
    stats: dict[str, np.ndarray]
    chains: int
    draws_per_chain: int
    warmup: int
    seed: int | None
    max_depth: int
    backend: str
    seconds: float
    diagnostics: Any = None
    problems: list[str] = field(default_factory=list)
    backend_fit: Any = field(default=None, repr=False)
    algorithm: str = "nuts"
    metric: str = ""

    def check(self, monitor: Sequence[str] | None = None, *, rhat_max: float = 1.01, ess_per_chain: float = 100.0,
              ebfmi_min: float = 0.3, warn: bool = True,
              labels: Mapping[str, Sequence[Sequence[Any]]] | None = None) -> list[str]:
        """Run the sampler checks (arviz's rank-normalized split R-hat, bulk and tail ESS, E-BFMI), store them, warn.

        Parameters
        ----------
        monitor : sequence of str, optional
            Variables whose R-hat and ESS are checked (default: all draws); pass the identified
            quantities only (gauge-dependent factors such as ``U``, ``V`` need not mix).
        rhat_max : float
            Largest acceptable rank-normalized split R-hat (Vehtari et al. 2021).
        ess_per_chain : float
            Smallest acceptable bulk and tail ESS per chain.
        ebfmi_min : float
            Smallest acceptable E-BFMI per chain.
        warn : bool
            Raise a :class:`SamplerWarning` listing the problems.
        labels : mapping, optional
            Per variable, the coordinate labels of each dimension (``{"s_H": [items]}``): scalars are
            then named by label (``s_H[gpt-4]``) instead of 0-based index (``s_H[3]``).

        Returns
        -------
        list of str
            The problems found (also stored in :attr:`problems`).
        """
        from .idata import bfmi

        problems: list[str] = []
        zeros = np.zeros((0, 0))
        per_chain = self.stats.get("divergent__", zeros).sum(axis=1).astype(int)
        if per_chain.sum() > 0:
            problems.append(f"{int(per_chain.sum())} divergent transitions after warmup (per chain {per_chain.tolist()}); "
                            "raise adapt_delta or reparameterize")
        hits = (self.stats.get("treedepth__", zeros) >= self.max_depth).sum(axis=1).astype(int)
        if hits.sum() > 0:
            problems.append(f"{int(hits.sum())} transitions hit the maximum tree depth {self.max_depth} "
                            f"(per chain {hits.tolist()})")
        en = self.stats.get("energy__")
        if en is not None and en.shape[1] > 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                ebfmi = bfmi(en)
            low = np.flatnonzero(ebfmi < ebfmi_min)
            if low.size:
                problems.append(f"E-BFMI below {ebfmi_min} in chain(s) {low.tolist()} ({np.round(ebfmi[low], 3).tolist()})")
        names = list(self.draws) if monitor is None else [m for m in monitor if m in self.draws]
        if self.algorithm != "nuts":  # independent draws of an approximation: no chains to compare
            problems += _degenerate_draws(self.draws, names, self.algorithm)
            names = []
        diag = _convergence_table(self.draws, names, labels)
        bad = diag.index[diag["rhat"] > rhat_max]
        if len(bad):
            problems.append(f"R-hat > {rhat_max} for {len(bad)} of {len(diag)} monitored scalars (max "
                            f"{diag['rhat'].max():.3f} at {diag['rhat'].idxmax()}); run longer chains or check multimodality")
        need = ess_per_chain * self.chains
        low = diag.index[(diag["ess_bulk"] < need) | (diag["ess_tail"] < need)]
        if len(low):
            worst = diag[["ess_bulk", "ess_tail"]].min(axis=1)
            problems.append(f"bulk or tail ESS below {need:.0f} ({ess_per_chain:.0f} per chain) for {len(low)} of "
                            f"{len(diag)} monitored scalars (min {worst.min():.0f} at {worst.idxmin()})")
        self.diagnostics = diag
        self.problems = problems
        if warn and problems:
            warnings.warn("Stan sampler problems:\n  - " + "\n  - ".join(problems), SamplerWarning, stacklevel=3)
        return problems
