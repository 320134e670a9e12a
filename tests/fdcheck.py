"""Central finite differences, the independent reference of the derivative tests."""

import numpy as np


def fd_jacobian(fun, x: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """``d fun / d x`` by central differences, one column per coordinate of ``x``."""
    cols = []
    for t in range(x.size):
        e = np.zeros_like(x)
        e[t] = h
        cols.append((fun(x + e) - fun(x - e)) / (2 * h))
    return np.column_stack(cols)
