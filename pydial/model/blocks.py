"""The per-cell passes of large objectives, block by block, on the machine's cores.

The cells are cut into blocks of :data:`CELL_BLOCK`, whose temporaries fit in the cache and in two reused
work arrays per thread (:func:`scratch`).  numpy releases the GIL inside its loops, so the blocks of one pass
run on up to :func:`cell_threads` threads at once (:func:`ordered_map`); every block's result is combined in
block order, so a fit's numbers do not depend on the number of threads.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterator, TypeVar

import numpy as np

from pydial.exceptions import ArgumentError

CELL_BLOCK = 1 << 19
"""Cells per block of the per-cell passes: their temporaries (4 MB) stay in cache and in memory the allocator
reuses, where arrays over all of millions of cells would each be freshly mapped (and zeroed by the system)
on every evaluation."""
THREADED_CELLS = 2 * CELL_BLOCK
"""Fewest cells a pass spreads over threads (a shorter pass takes milliseconds: handing out its blocks costs more)."""
THREADS_ENV = "PYDIAL_NUM_THREADS"
"""Environment variable setting the threads of the per-cell passes (else ``OMP_NUM_THREADS``, else the usable cores)."""

T = TypeVar("T")
_local = threading.local()
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (process id, threads, pool)
_pool_lock = threading.Lock()
_PREFIX = "pydial-cells"


def blocks(m: int) -> list[slice]:
    """Return the cells ``0 .. m-1`` in blocks of :data:`CELL_BLOCK` (one empty block when ``m = 0``)."""
    return [slice(s, min(s + CELL_BLOCK, m)) for s in range(0, m, CELL_BLOCK)] or [slice(0, 0)]


def scratch(block: slice) -> tuple[np.ndarray, np.ndarray]:
    """Two work arrays of the size of ``block``, owned by the calling thread (reused by its every pass)."""
    n = block.stop - block.start
    work = getattr(_local, "work", None)
    if work is None or work[0].size < n:
        work = _local.work = (np.empty(max(n, 1)), np.empty(max(n, 1)))
    return work[0][:n], work[1][:n]


def cell_threads() -> int:
    """Threads of the per-cell passes: :data:`THREADS_ENV`, else ``OMP_NUM_THREADS``, else the usable cores.

    joblib's workers get ``OMP_NUM_THREADS`` set to their share of the cores, so replications run in
    parallel do not compete for them.
    """
    for name in (THREADS_ENV, "OMP_NUM_THREADS"):
        raw = os.environ.get(name, "").strip()
        if raw:
            if not raw.isdigit() or int(raw) < 1:
                raise ArgumentError(f"environment variable {name}={raw!r} must be a positive integer")
            return int(raw)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _executor(threads: int) -> ThreadPoolExecutor:
    """Return the process's pool of ``threads`` threads (a new one after a fork or a change of the count)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[:2] != (os.getpid(), threads):
            if _pool is not None and _pool[0] == os.getpid():
                _pool[2].shutdown(wait=False)
            _pool = (os.getpid(), threads, ThreadPoolExecutor(threads, thread_name_prefix=_PREFIX))
        return _pool[2]


def ordered_map(fn: Callable[[int], T], n: int, cells: int) -> Iterator[T]:
    """Yield ``fn(t)`` for ``t = 0 .. n-1`` in order, on up to :func:`cell_threads` threads.

    ``t`` is a block of a pass over ``cells`` cells, or a judge's fit; at most two calls per thread are pending
    at once.  Calls made from the pool's own threads run in their thread (no pool waits on itself).
    """
    threads = min(cell_threads(), n) if cells >= THREADED_CELLS else 1
    if threads <= 1 or threading.current_thread().name.startswith(_PREFIX):
        yield from (fn(t) for t in range(n))
        return
    pool, pending = _executor(threads), deque[Future[T]]()
    for t in range(n):
        if len(pending) == 2 * threads:
            yield pending.popleft().result()
        pending.append(pool.submit(fn, t))
    while pending:
        yield pending.popleft().result()
