"""What both backends' compile caches share: the location, a lock between processes, publication, repair.

A program is built aside, validated and renamed into place under :func:`file_lock`, so readers see no program or a
complete one; a broken one warns (:func:`report_broken`) and is rebuilt.  CmdStan's go to :func:`pydial_cache_dir`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from ..exceptions import DialWarning

__all__ = ["CACHE_ENV", "StanCacheWarning", "pydial_cache_dir", "file_lock", "build_dir", "replace_dir",
           "report_broken", "build_once"]

T = TypeVar("T")

CACHE_ENV = "PYDIAL_STAN_CACHE"
"""Environment variable naming the directory of pydial's compiled Stan programs (CmdStan executables)."""


class StanCacheWarning(DialWarning):
    """A compiled Stan program in a cache was broken (empty, not executable, failed to load) and is rebuilt."""


def pydial_cache_dir() -> Path:
    """Return pydial's own Stan cache: ``$PYDIAL_STAN_CACHE``, else ``platformdirs.user_cache_dir("pydial")``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("pydial"))
    except ImportError:  # pragma: no cover - platformdirs ships with most installs
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pydial"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock between processes on the file ``path`` (created if needed, never deleted)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        if sys.platform == "win32":  # pragma: no cover - POSIX in the tests
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:  # LK_LOCK gives up after 10 s
                    time.sleep(1.0)
            try:
                yield
            finally:
                fh.seek(0)
                msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def build_dir(parent: Path, tag: str = "") -> Iterator[Path]:
    """Yield a fresh build directory in ``parent`` (under the entry's lock: a dead process's ones are removed first)."""
    parent.mkdir(parents=True, exist_ok=True)
    prefix = f".pydial-build-{tag}-"
    for stale in parent.glob(prefix + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def replace_dir(new: Path, target: Path) -> None:
    """Rename the complete directory ``new`` to ``target``, replacing a broken ``target``; call under :func:`file_lock`."""
    old = None
    if target.exists():
        old = target.with_name(f".pydial-old-{target.name}-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def report_broken(path: Path, reason: str, backend: str) -> None:
    """Warn (:class:`StanCacheWarning`) that the cached program at ``path`` is broken (``reason``) and is rebuilt."""
    warnings.warn(f"pydial: the compiled Stan program {str(path)!r} in the {backend} cache {reason}; "
                  "rebuilding it (delete the file to rebuild it by hand)", StanCacheWarning, stacklevel=5)


def build_once(lock: Path, problem: Callable[[], str | None], build: Callable[[], T], backend: str,
               broken: Callable[[], Path]) -> T | None:
    """Return ``None`` if ``problem()`` finds the entry sound (again under ``lock``), else ``build()`` under ``lock``.

    An entry broken rather than missing first warns by :func:`report_broken` at ``broken()``.
    """
    if problem() is None:
        return None
    with file_lock(lock):
        found = problem()
        if found is None:
            return None
        if found != "is missing":
            report_broken(broken(), found, backend)
        return build()
