"""The thread pool of the per-cell passes (pydial.model.blocks): its settings, order, errors and forks."""

from __future__ import annotations

import multiprocessing
import os

import pytest

import pydial.model.blocks as blocks
from pydial.exceptions import ArgumentError


def _squares() -> list[int]:
    """``t * t`` for 40 tasks through the pool, in task order."""
    return list(blocks.ordered_map(lambda t: t * t, 40, blocks.THREADED_CELLS))


@pytest.fixture
def threaded(monkeypatch):
    """Two threads for every pass."""
    monkeypatch.setenv(blocks.THREADS_ENV, "2")


def test_cell_threads_from_the_environment(monkeypatch):
    """``PYDIAL_NUM_THREADS`` first, then ``OMP_NUM_THREADS`` (joblib's workers' share), else the usable cores;
    a value that is not a positive integer is named in the error."""
    monkeypatch.delenv(blocks.THREADS_ENV, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert blocks.cell_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert blocks.cell_threads() == 3
    monkeypatch.setenv(blocks.THREADS_ENV, "1")
    assert blocks.cell_threads() == 1
    for bad in ("two", "0", "-1"):
        monkeypatch.setenv(blocks.THREADS_ENV, bad)
        with pytest.raises(ArgumentError, match=f"PYDIAL_NUM_THREADS='{bad}' must be a positive integer"):
            blocks.cell_threads()


def test_results_come_in_task_order_from_the_threads(threaded):
    """Tasks that finish out of order (the even ones wait) are yielded in task order, computed off the caller's
    thread; a pass below THREADED_CELLS runs in the caller's thread."""
    import threading
    import time

    def task(t: int) -> tuple[int, str]:
        time.sleep(0.01 if t % 2 == 0 else 0.0)
        return t, threading.current_thread().name

    out = list(blocks.ordered_map(task, 12, blocks.THREADED_CELLS))
    assert [t for t, _ in out] == list(range(12))
    assert all(name.startswith("pydial-cells") for _, name in out)
    small = list(blocks.ordered_map(task, 3, blocks.THREADED_CELLS - 1))
    assert {name for _, name in small} == {threading.current_thread().name}


def test_an_error_in_a_task_reaches_the_caller(threaded):
    """The first failing task's exception is raised where its result is read."""
    def task(t: int) -> int:
        if t == 5:
            raise ValueError("block 5")
        return t

    with pytest.raises(ValueError, match="block 5"):
        list(blocks.ordered_map(task, 20, blocks.THREADED_CELLS))
    assert _squares() == [t * t for t in range(40)]  # the pool still works


@pytest.mark.skipif(os.name != "posix", reason="fork is POSIX")
def test_a_forked_process_gets_its_own_pool(threaded):
    """A child forked after the parent's pool started has no live pool threads: it builds its own instead of
    waiting forever on the copied one."""
    assert _squares() == [t * t for t in range(40)]  # the parent's pool exists now
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_squares).get(timeout=60) == [t * t for t in range(40)]


def test_nested_maps_run_in_the_pool_thread(threaded):
    """A map started inside a pool thread runs there (a pool waiting on itself would deadlock)."""
    out = list(blocks.ordered_map(lambda t: sum(blocks.ordered_map(lambda u: u + t, 5, blocks.THREADED_CELLS)), 8,
                                  blocks.THREADED_CELLS))
    assert out == [sum(u + t for u in range(5)) for t in range(8)]
