"""Memory estimates checked before any work starts, memory reuse in large fits, and progress output for long fits.

:func:`check_memory` compares the numpy engine's estimate (a few arrays per cell, a few dense ``P x P`` matrices) with
the memory available, :func:`check_bytes` any predictable request; both raise :class:`~pydial.exceptions.MemoryLimitError`
instead of letting the process be killed.  ``PYDIAL_MEMORY_LIMIT`` caps the memory planned for (:func:`memory_limit`).
:func:`reused_memory` keeps the memory a fit of a million cells or more frees for its next arrays (glibc).
"""

from __future__ import annotations

import ctypes
import functools
import numbers
import os
import platform
import sys
import threading
from contextlib import contextmanager
from typing import Any, Hashable, Iterable, Iterator, TypeVar

import numpy as np

from .exceptions import ArgumentError, ArgumentTypeError, MemoryLimitError

BYTES_PER_CELL = 400  # per LLM/human cell: predictors, weights, Jacobian entries, index
DENSE_COPIES = 12  # P x P float64 matrices alive at once (Hessian, eigh, pinv, meat, sandwich)
PROGRESS_MIN_CELLS = 200_000  # below this a fit takes seconds: no progress bar
MEMORY_LIMIT_ENV = "PYDIAL_MEMORY_LIMIT"
"""Environment variable capping the memory pydial plans for (bytes, or a number with KB, MB or GB)."""

T = TypeVar("T")

REUSE_CELLS = 1 << 20
"""Cells from which a fit keeps the memory its arrays free for its next ones (:func:`reused_memory`)."""
GLIBC_MMAP_MAX = 32 << 20
"""glibc's threshold for blocks taken from fresh pages once its dynamic adjustment has seen large blocks freed."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_reuse_lock = threading.Lock()
_reuse_depth = 0  # fits inside reused_memory


def available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` (Linux); ``None`` where unknown."""
    try:
        with open("/proc/meminfo") as fh:
            return next((int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:")), None)
    except OSError:
        return None


def memory_limit() -> int | None:
    """Return the bytes a request may plan for: :func:`available_bytes` capped by ``PYDIAL_MEMORY_LIMIT`` (e.g. ``4GB``)."""
    avail = available_bytes()
    raw = os.environ.get(MEMORY_LIMIT_ENV, "")
    text = raw.strip().upper()
    if not text:
        return avail
    scale = next((10 ** (3 * (k + 1)) for k, unit in enumerate(("KB", "MB", "GB")) if text.endswith(unit)), 1)
    try:
        value = float(text[:-2] if scale > 1 else text)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise ArgumentError(f"{MEMORY_LIMIT_ENV}={raw!r} is not a number of bytes (e.g. 4000000000 or 4GB); "
                            f"correct or unset it")
    limit = int(value * scale)
    return limit if avail is None else min(avail, limit)


def check_bytes(need: float, what: str, remedy: str, *, detail: str = "", available: int | None = None) -> None:
    """Raise :class:`MemoryLimitError` when ``need`` bytes of ``what`` exceed ``available``, naming ``detail`` and ``remedy``."""
    if available is None:
        release_arrow_cache()
        available = memory_limit()
    if available is not None and need > available:
        made_of = f" ({detail})" if detail else ""
        raise MemoryLimitError(
            f"{what} needs about {need / 1e9:,.3g} GB{made_of}, but only {available / 1e9:.2f} GB are available "
            f"(the available memory, capped by {MEMORY_LIMIT_ENV} when set); {remedy}")


def check_n_jobs(n_jobs: object, name: str = "n_jobs") -> int:
    """Return ``n_jobs`` (joblib's convention; not 0) as an int, else raise an :class:`ArgumentError` naming ``name``."""
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be an integer (1: serial, -1: all cores), got {n_jobs!r}")
    if n_jobs == 0:
        raise ArgumentError(f"{name} must be a positive number of workers or negative (-1: all cores, -2: all "
                            "but one), got 0")
    return int(n_jobs)


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``allowed``, else raise :class:`ArgumentError` naming ``name``."""
    allowed = tuple(allowed)
    try:
        ok = isinstance(value, Hashable) and value in allowed  # not an array, even of one allowed value
    except TypeError:  # pd.NA: its comparison has no truth value
        ok = False
    if not ok:
        raise ArgumentError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def check_fraction(value: Any, name: str) -> float:
    """Return ``value`` as a float in the closed interval [0, 1] (a rate or share)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a number in [0, 1], got {value!r}")
    if not 0 <= float(value) <= 1:
        raise ArgumentError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def check_level(level: Any, name: str = "level") -> float:
    """Return ``level`` as a float in the open interval (0, 1)."""
    if isinstance(level, bool) or not isinstance(level, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a number in (0, 1), got {level!r}")
    if not 0 < float(level) < 1:
        raise ArgumentError(f"{name} ({level}) must be in the open interval (0, 1)")
    return float(level)


def check_count(value: Any, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int ``>= minimum`` (``chains``, ``draws``, ...)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if int(value) < minimum:
        raise ArgumentError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_seed(seed: Any, *, generator: bool = False) -> Any:
    """Return ``seed`` (None or an integer in ``[0, 2**32)``); ``generator=True`` also accepts numpy generators as given."""
    if seed is None:
        return None
    rngs = (np.random.Generator, np.random.SeedSequence, np.random.BitGenerator)
    if generator and isinstance(seed, rngs):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        also = ", a numpy.random.Generator" if generator else ""
        raise ArgumentTypeError(f"seed must be None{also} or a non-negative integer, got {seed!r}")
    if not 0 <= int(seed) < 2**32:
        raise ArgumentError(f"seed must be in [0, 2**32), got {seed!r}")
    return int(seed)


def n_workers(n_jobs: int) -> int:
    """Return the number of processes ``n_jobs`` (joblib's convention, see :func:`check_n_jobs`) runs at once."""
    return n_jobs if n_jobs > 0 else max(1, (os.cpu_count() or 1) + 1 + n_jobs)


def fit_bytes(n_cells: int, P: int) -> int:
    """Estimated working memory of a structured fit with ``n_cells`` cells and ``P`` full coordinates."""
    return BYTES_PER_CELL * n_cells + DENSE_COPIES * 8 * P * P


def release_arrow_cache() -> None:
    """Return the memory pyarrow's pool keeps from freed tables to the OS (about 1 GB after 9M rows); no-op without pyarrow."""
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()


@functools.cache
def _glibc() -> Any:
    """Return the C library when it is glibc (its ``mallopt`` and ``malloc_trim``), else None."""
    if platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(None)
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


@contextmanager
def reused_memory(n_cells: int) -> Iterator[None]:
    """Run a fit of ``n_cells`` cells reusing the memory its arrays free; a no-op below :data:`REUSE_CELLS` cells.

    glibc takes each block above 32 MB (an array of 4M cells) from fresh pages of the system, which the kernel zeroes
    on first touch, and returns it when freed: at N = 1,000, K = 50 and 10M judgments, zeroing pages took a fifth of
    the fit's processor time.  Inside, such blocks come from the heap and freed ones are reused (``mallopt``), at a
    higher peak; at the end the heap's free memory goes back to the system (``malloc_trim``) and the thresholds are
    set to :data:`GLIBC_MMAP_MAX` and twice it, where glibc's own adjustment ends once large blocks are freed (a
    ``MALLOC_MMAP_THRESHOLD_`` of the environment is not restored).  Nothing changes without glibc.  Figures: the
    performance guide.
    """
    global _reuse_depth
    libc = _glibc() if n_cells >= REUSE_CELLS else None
    if libc is None:
        yield
        return
    with _reuse_lock:
        _reuse_depth += 1
        libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30)
        libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
    try:
        yield
    finally:
        with _reuse_lock:
            _reuse_depth -= 1
            if _reuse_depth == 0:  # the last fit inside ends
                libc.mallopt(_M_MMAP_THRESHOLD, GLIBC_MMAP_MAX)
                libc.mallopt(_M_TRIM_THRESHOLD, 2 * GLIBC_MMAP_MAX)
                libc.malloc_trim(0)


def check_memory(n_cells: int, P: int, what: str, available: int | None = None) -> None:
    """Raise :class:`MemoryLimitError` when :func:`fit_bytes` exceeds ``available`` (default :func:`memory_limit`)."""
    check_bytes(fit_bytes(n_cells, P), what,
                "reduce the rank, drop judges or items, or fit on a machine with more memory",
                detail=f"{n_cells:,} cells x {BYTES_PER_CELL} B + {DENSE_COPIES} dense {P} x {P} matrices",
                available=available)


def progress(it: Iterable[T], n_cells: int, desc: str, total: int | None = None) -> Iterable[T]:
    """``tqdm`` progress over ``it`` on a terminal for large fits; ``it`` unchanged otherwise."""
    if n_cells < PROGRESS_MIN_CELLS or not sys.stderr.isatty():
        return it
    from tqdm import tqdm

    return tqdm(it, desc=desc, total=total, leave=False)
