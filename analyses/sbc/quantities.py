"""The identified scalars whose ranks SBC records.

``judges.stan``: every judge score ``S[k, i]``, the people's scores ``s_H[i]``, the
order effects ``b[k]`` and the tie parameters ``nu``.  ``dial_sample.stan`` adds the
consensus loadings ``gamma[k]``, the consensus direction ``mu[i]`` and the
calibration: ``c[1]`` (the coordinate on ``mu``) and, for ``M = W = [mu, V]``, the
length ``||c_V||`` of the coordinates on ``V``.  ``V`` and ``c_V`` are identified only
up to a common rotation (a sign flip for rank 1, which a chain does not cross; see the
header of ``dial_sample.stan``), so ``c_V`` itself is not a calibration target but
``s_H = M c`` and ``||c_V||`` are.  Labels are 1-based, as in Stan.

One test quantity summarizes a block (Modrák et al. 2023: a function of the parameters
tests what no single coordinate does): for ``dial_sample.stan`` the size of the
disagreement ``||U V'||_F = ||S - gamma mu'||_F`` (``disagreement_norm``), whose rank
moves when the prior scale of ``Z`` is wrong although each ``S[k, i]`` barely does.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

__all__ = ["identified"]

_ORDER = ("S", "s_H", "gamma", "mu", "b", "c", "nu")


def _labels(name: str, shape: tuple[int, ...]) -> list[str]:
    return [f"{name}[{','.join(str(t + 1) for t in idx)}]" for idx in np.ndindex(*shape)]


def identified(values: Mapping[str, np.ndarray], *, ndim_draws: int = 0) -> dict[str, np.ndarray]:
    """Flatten the identified quantities of a parameter set (or of draws) into named scalars.

    Parameters
    ----------
    values : mapping
        Among ``S, s_H, gamma, mu, b, c, nu`` (others ignored); each with ``ndim_draws``
        leading draw axes.  ``c`` of length 2 or more is read as ``(c_mu, c_V)``.
    ndim_draws : int
        Leading axes that index draws (0 for a true parameter set).

    Returns
    -------
    dict of str to ndarray
        Label (``S[1,2]``, ``c_V_norm``) to a scalar or an array of the draw shape.
    """
    out: dict[str, np.ndarray] = {}
    for name in _ORDER:
        if name not in values:
            continue
        v = np.asarray(values[name], float)
        lead, shape = v.shape[:ndim_draws], v.shape[ndim_draws:]
        if name == "c" and shape and shape[0] > 1:
            out["c[1]"] = v[..., 0]
            out["c_V_norm"] = np.linalg.norm(v[..., 1:], axis=-1)
            continue
        flat = v.reshape(*lead, -1)
        for t, label in enumerate(_labels(name, shape)):
            out[label] = flat[..., t]
    if all(k in values for k in ("S", "gamma", "mu")):
        S, g, mu = (np.asarray(values[k], float) for k in ("S", "gamma", "mu"))
        out["disagreement_norm"] = np.sqrt(np.sum((S - g[..., :, None] * mu[..., None, :]) ** 2, axis=(-2, -1)))
    return out
