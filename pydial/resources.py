"""Memory estimates checked before a fit, and progress output for long fits.

The numpy engine holds, besides the data, a few arrays per cell (a dozen floats for
the linear predictors, weights and the sparse Jacobian with ``3(r+1)+1`` entries)
and a few dense ``P x P`` matrices (Hessian, its eigenvectors, pseudo-inverse and
meat), ``P = (r+1)(K+N+1)+K`` the full coordinates of :class:`pydial.model.chart.Chart`.
:func:`check_memory` compares that estimate with the memory the operating system
reports as available and raises :class:`~pydial.exceptions.MemoryLimitError` instead
of letting the process be killed.
"""

from __future__ import annotations

import sys
from typing import Iterable, TypeVar

from .exceptions import MemoryLimitError

BYTES_PER_CELL = 400  # per LLM/human cell: predictors, weights, Jacobian entries, index
DENSE_COPIES = 12  # P x P float64 matrices alive at once (Hessian, eigh, pinv, meat, sandwich)
PROGRESS_MIN_CELLS = 200_000  # below this a fit takes seconds: no progress bar

T = TypeVar("T")


def available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` (Linux); ``None`` where unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def fit_bytes(n_cells: int, P: int) -> int:
    """Estimated working memory of a structured fit with ``n_cells`` cells and ``P`` full coordinates."""
    return BYTES_PER_CELL * n_cells + DENSE_COPIES * 8 * P * P


def release_arrow_cache() -> None:
    """Return the memory pyarrow's allocator keeps from freed tables to the operating system.

    Reading a table through pyarrow (Parquet, pandas' pyarrow-backed strings) leaves its
    freed buffers cached in pyarrow's pool: about 1 GB after reading 9M count rows,
    which the process would otherwise hold through the fit.  A no-op when pyarrow was not imported.
    """
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()


def check_memory(n_cells: int, P: int, what: str, available: int | None = None) -> None:
    """Raise :class:`MemoryLimitError` when the estimate of :func:`fit_bytes` exceeds the available memory.

    ``available`` defaults to :func:`available_bytes`, after :func:`release_arrow_cache`.
    """
    need = fit_bytes(n_cells, P)
    if available is None:
        release_arrow_cache()
    avail = available_bytes() if available is None else available
    if avail is not None and need > avail:
        raise MemoryLimitError(
            f"{what} needs about {need / 1e9:.1f} GB ({n_cells:,} cells x {BYTES_PER_CELL} B + "
            f"{DENSE_COPIES} dense {P} x {P} matrices), but only {avail / 1e9:.1f} GB are available; "
            "reduce the rank, drop judges or items, or fit on a machine with more memory")


def progress(it: Iterable[T], n_cells: int, desc: str, total: int | None = None) -> Iterable[T]:
    """``tqdm`` progress over ``it`` on a terminal for large fits; ``it`` unchanged otherwise."""
    if n_cells < PROGRESS_MIN_CELLS or not sys.stderr.isatty():
        return it
    from tqdm import tqdm

    return tqdm(it, desc=desc, total=total, leave=False)
