"""What both backends' compile caches share: the cache location, a lock between processes, publication, repair.

A compiled program enters a cache in three steps: it is built aside (in a temporary
directory on the cache's file system), validated (CmdStan: the executable runs
``info``; httpstan: the extension module imports), then renamed into place.  A
reader therefore sees either no program or a complete one, never a half-written
file.  The build runs under :func:`file_lock`, an exclusive lock on a lock file
next to the cache entry, so that processes compiling one program at the same time
compile it once: the others wait and load the result.  A cached program that is
found broken (empty, not executable, does not load: e.g. left by a build that was
killed before this scheme, or damaged on disk) is reported by
:func:`report_broken` (a :class:`StanCacheWarning` naming its path) and rebuilt.

Locations: pydial's CmdStan executables go to :func:`pydial_cache_dir` ``/cmdstan``
(the environment variable :data:`CACHE_ENV`, ``PYDIAL_STAN_CACHE``, moves it);
httpstan's modules stay in httpstan's own cache, ``~/.cache/httpstan/<version>``
(on Linux ``XDG_CACHE_HOME`` moves it, and pydial's default with it).
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
from typing import Iterator

from ..exceptions import DialWarning

__all__ = ["CACHE_ENV", "StanCacheWarning", "pydial_cache_dir", "file_lock", "build_dir", "replace_dir",
           "report_broken"]

CACHE_ENV = "PYDIAL_STAN_CACHE"
"""Environment variable naming the directory of pydial's compiled Stan programs (CmdStan executables)."""


class StanCacheWarning(DialWarning):
    """A compiled Stan program in a cache was broken (empty, not executable, failed to load) and is rebuilt."""


def pydial_cache_dir() -> Path:
    """Directory of pydial's own Stan cache.

    Returns
    -------
    Path
        ``$PYDIAL_STAN_CACHE`` when set, else ``platformdirs.user_cache_dir("pydial")``
        (``$XDG_CACHE_HOME/pydial``, default ``~/.cache/pydial``, without platformdirs).
    """
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
    """Hold an exclusive lock on the file ``path`` (created if needed) between processes.

    Parameters
    ----------
    path : Path
        The lock file; it is never deleted (deleting a lock file races with its next user).

    Yields
    ------
    None
        While the lock is held.  A process that dies releases its lock.
    """
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
    """Make a fresh temporary directory inside ``parent`` (the cache's file system, so that a rename publishes).

    Call under the :func:`file_lock` of the entry that ``tag`` names: the build directories
    of that entry left by a process that died while building (a live builder would hold
    the lock) are removed first.

    Parameters
    ----------
    parent : Path
        Directory on the cache's file system; created if needed.
    tag : str
        Names the cache entry being built (part of the directory's name).

    Yields
    ------
    Path
        The temporary directory (``.pydial-build-<tag>-*``).
    """
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
    """Rename the directory ``new`` to ``target``, replacing a (broken) ``target``; call under :func:`file_lock`.

    Parameters
    ----------
    new : Path
        A complete, validated directory on the file system of ``target``.
    target : Path
        The cache entry.
    """
    old = None
    if target.exists():
        old = target.with_name(f".pydial-old-{target.name}-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def report_broken(path: Path, reason: str, backend: str) -> None:
    """Warn (:class:`StanCacheWarning`) that a cached program is broken and is being rebuilt.

    Parameters
    ----------
    path : Path
        The cached executable or module.
    reason : str
        What is wrong with it (``"is empty (0 bytes)"``, ...).
    backend : str
        The backend whose cache holds it.
    """
    warnings.warn(f"pydial: the compiled Stan program {str(path)!r} in the {backend} cache {reason}; "
                  "rebuilding it (delete the file to rebuild it by hand)", StanCacheWarning, stacklevel=4)
