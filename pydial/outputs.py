"""Writing outputs safely: check the location first, write into a temporary sibling, move into place.

An interrupted or failed run leaves the old output or the new one, never a mix; the rules (pydial's marker file, links,
modes, temporaries ``.<name>.tmp-<pid>-<host>-*`` removed on ``SIGTERM``/``SIGHUP`` or by a later run) are in the
command-line guide (``docs/guide/cli.md``).  Every problem raises :class:`~pydial.exceptions.OutputError` naming the path.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import stat
import tempfile
import threading
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any, Iterator

import pandas as pd

from .exceptions import OutputError
from .formatting import by_score

MARKER = ".pydial-output"
"""Marker file of a folder written by pydial (its content names the command)."""

OUTPUT_NAMES: tuple[str, ...] = (
    "scores.csv", "data_summary.csv", "position_effects.csv", "gacv.csv", "consensus_loadings.csv", "tie_parameters.csv",
    "covariate_effects.csv", "covariate_effects.png", "summary.json",
    "report.md", "report.html", "scores.png", "position_effects.png", "gacv.png", "compare_intervals.csv",
    "compare_intervals.png", "posterior.nc",
    "plan.csv", "plan.png", "next_pairs.csv", "judges.csv", "judges.png", "panel_counts.csv", MARKER,
)
"""Every file name pydial writes into an output folder."""

CLEANUP_SIGNALS: tuple[str, ...] = ("SIGTERM", "SIGHUP")
"""Signals on which the open temporary outputs are removed before the signal takes its course."""

_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]
_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.(?:tmp|old)-(?P<pid>\d+)-(?P<host>[0-9a-f]{8})-[^/]*$")


# ------------------------------------------------------------------ paths
def _target(path: str | os.PathLike[str], what: str) -> Path:
    """Absolute path of an output, a symbolic link replaced by what it points to; refuse an empty path."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise OutputError(f"the {what} must be a path, got {path!r}") from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text.strip():
        raise OutputError(f"the {what} path is empty ({text!r}); name a {what.split()[-1]}, e.g. --out results")
    p = Path(text).expanduser().absolute()
    if p.is_symlink():
        try:
            p = p.resolve(strict=True)
        except FileNotFoundError:  # a dangling link: its target is created
            p = p.resolve(strict=False)
        except (OSError, RuntimeError) as e:  # a loop (ELOOP, or RuntimeError before Python 3.13)
            raise OutputError(f"cannot write the {what} {p}: it is a symbolic link that cannot be followed ({e})") from None
    return p


def _existing_ancestor(p: Path) -> Path:
    """Return the nearest ancestor of ``p`` that exists (``p`` itself excluded); refuse a file on the way."""
    a = p.parent
    while not a.exists() and a != a.parent:
        a = a.parent
    if not a.is_dir():
        raise OutputError(f"cannot write {p}: {a} is a file, not a folder")
    return a


def _temp_prefix(name: str, kind: str = "tmp") -> str:
    """Prefix of a temporary sibling of ``name``: it names this process and host (see the module docstring)."""
    return f".{name}.{kind}-{os.getpid()}-{_HOST}-"


def _probe(folder: Path, p: Path) -> None:
    """Refuse when no file can be created in ``folder``."""
    try:
        fd, name = tempfile.mkstemp(prefix=_temp_prefix("pydial-probe"), dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise OutputError(f"cannot write {p}: cannot create files in {folder} ({e.strerror})") from None


# ------------------------------------------------ stale temporaries, signals
def _pid_alive(pid: int) -> bool:
    if pid == os.getpid() or os.name == "nt":  # Windows: os.kill would end the process; never guess there
        return True
    try:
        os.kill(pid, 0)
    except OSError as e:  # e.g. PermissionError: the process exists (another user's)
        return not isinstance(e, ProcessLookupError)
    return True


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove and return this host's dead processes' temporaries in ``folder`` (an output moved aside is put back first)."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for e in entries:
        m = _TEMP_NAME.match(e.name)
        if m is None or m["host"] != _HOST or _pid_alive(int(m["pid"])):
            continue
        path = Path(e.path)
        earlier, target = path / "out", path.parent / m["name"]
        if e.name.startswith(f".{m['name']}.old-") and earlier.is_dir() and not os.path.lexists(target):
            try:  # killed between moving the earlier output aside and the new one in: restore the earlier
                os.rename(earlier, target)
            except OSError:
                continue
        if _remove(path):
            removed.append(path)
    return removed


_OPEN_TEMPS: dict[Path, int] = {}  # temporary -> the pid that opened it (a forked child must not remove it)
_previous_handlers: dict[int, Any] = {}
_lock = threading.Lock()


def _remove(p: Path) -> bool:
    """Remove the file or folder ``p`` (a link itself, not its target); return whether it is gone."""
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with suppress(OSError):
            p.unlink()
    return not os.path.lexists(p)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Remove the open temporaries, then let the signal take its course under the previous handler."""
    for p, pid in list(_OPEN_TEMPS.items()):
        if pid == os.getpid():
            _remove(p)
    _OPEN_TEMPS.clear()
    previous = _previous_handlers.pop(signum, signal.SIG_DFL)
    for other in list(_previous_handlers):  # every handler of ours goes: the process is on its way out
        signal.signal(other, _previous_handlers.pop(other))
    signal.signal(signum, previous)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_DFL:
        signal.raise_signal(signum)


def _register(p: Path) -> None:
    """Track ``p`` for removal on :data:`CLEANUP_SIGNALS` (handlers installed from the main thread only)."""
    with _lock:
        _OPEN_TEMPS[p] = os.getpid()
        if threading.current_thread() is not threading.main_thread():
            return
        for name in CLEANUP_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is None or sig in _previous_handlers:
                continue
            old = signal.getsignal(sig)
            if old in (signal.SIG_IGN, None):  # ignored (or set outside Python): leave it so
                continue
            _previous_handlers[sig] = old
            signal.signal(sig, _on_signal)


def _unregister(p: Path) -> None:
    with _lock:
        _OPEN_TEMPS.pop(p, None)
        if _OPEN_TEMPS or threading.current_thread() is not threading.main_thread():
            return
        for sig in list(_previous_handlers):
            if signal.getsignal(sig) is _on_signal:
                signal.signal(sig, _previous_handlers[sig])
            del _previous_handlers[sig]


# ------------------------------------------------------------------ modes
def _umask() -> int:
    """Return the process umask (read without changing it where the system reports it)."""
    with suppress(OSError, ValueError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    with _lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _copy_mode(tmp: Path, existing: Path | None, default: int) -> None:
    """Give ``tmp`` the mode (and group) of ``existing``, or ``default`` minus the umask (keeping an inherited setgid)."""
    st = tmp.stat()
    if existing is not None:
        old = existing.stat()
        if old.st_gid != st.st_gid and hasattr(os, "chown"):
            with suppress(OSError):  # not a member of that group: the mode is still copied
                os.chown(tmp, -1, old.st_gid)
        os.chmod(tmp, stat.S_IMODE(old.st_mode))
    else:
        os.chmod(tmp, (default & ~_umask()) | (st.st_mode & stat.S_ISGID))


# ---------------------------------------------------------------- checks
def check_output_dir(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Return the absolute path (through a link) of an output folder that can be written, else raise :class:`OutputError`."""
    p = _target(path, "output folder")
    if p.exists() and not p.is_dir():
        raise OutputError(f"cannot write the output folder {p}: it is a file")
    _probe(_existing_ancestor(p), p)
    if p.is_dir():
        _probe(p, p)
        entries = list(p.iterdir())
        if entries and not (p / MARKER).is_file():
            if not force:
                shown = ", ".join(sorted(e.name for e in entries)[:4])
                raise OutputError(f"the output folder {p} is not empty and was not written by pydial ({shown}"
                                  f"{', ...' if len(entries) > 4 else ''}); choose another folder or pass --force "
                                  "(force=True) to replace only pydial's files in it")
            for name in OUTPUT_NAMES:
                q = p / name
                if q.exists() and not q.is_file():
                    raise OutputError(f"cannot write {q}: a folder of that name is in the way")
    return p


def check_output_file(path: str | os.PathLike[str]) -> Path:
    """Check that an output file can be written; returns the absolute path (of the file a symbolic link points to)."""
    p = _target(path, "output file")
    if p.is_dir():
        raise OutputError(f"cannot write the output file {p}: it is a folder")
    if p.exists() and not p.is_file():
        raise OutputError(f"cannot write the output file {p}: it is not a regular file")
    _probe(_existing_ancestor(p), p)
    return p


# ---------------------------------------------------------------- writers
@contextmanager
def _cannot_write(target: Path) -> Iterator[None]:
    """Raise an :class:`OSError` of the block as an :class:`OutputError` naming ``target``."""
    try:
        yield
    except OSError as e:
        raise OutputError(f"cannot write {target}: {e.strerror or e}") from None


@contextmanager
def output_dir(path: str | os.PathLike[str], *, force: bool = False, command: str = "pydial") -> Iterator[Path]:
    """Yield a temporary folder that replaces ``path`` on success; on an exception or ``SIGTERM`` it is removed."""
    target = check_output_dir(path, force=force)
    with _cannot_write(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(target.parent)
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(target.name), dir=target.parent))
    _register(tmp)
    try:
        with _cannot_write(target):
            _copy_mode(tmp, target if target.is_dir() else None, 0o777)
        try:
            yield tmp
            (tmp / MARKER).write_text(f"written by {command}\n")
        except OSError as e:  # e.g. disk full, quota, read-only: name the output (or its file), not the temporary
            path_like = isinstance(e.filename, (str, bytes, os.PathLike))
            written = Path(os.fsdecode(e.filename)).absolute() if path_like else tmp  # no file named: the output
            if isinstance(e, OutputError) or not written.is_relative_to(tmp):  # or the error of another path
                raise
            raise OutputError(f"cannot write {target / written.relative_to(tmp)}: {e.strerror or e}") from None
        with _signals_deferred(), _cannot_write(target):
            _move_into_place(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        _unregister(tmp)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold :data:`CLEANUP_SIGNALS` back while outputs move into place (delivered right after)."""
    sigs = {getattr(signal, name) for name in CLEANUP_SIGNALS if hasattr(signal, name)}
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _move_into_place(tmp: Path, target: Path) -> None:
    """Move the folder ``tmp`` to ``target``: a rename, or pydial's own names only in a foreign folder (``force``)."""
    if not target.exists():
        os.rename(tmp, target)
        return
    if not any(target.iterdir()):
        try:
            os.rename(tmp, target)  # POSIX: replaces an empty folder atomically
        except OSError:
            target.rmdir()
            os.rename(tmp, target)
        return
    if (target / MARKER).is_file():  # replace the earlier output as a whole
        old = Path(tempfile.mkdtemp(prefix=_temp_prefix(target.name, "old"), dir=target.parent))
        os.rename(target, old / "out")
        os.rename(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
        return
    for name in OUTPUT_NAMES:
        q = target / name
        if q.is_file() and not (tmp / name).exists():
            q.unlink()
    for f in tmp.iterdir():
        if f.name != MARKER:  # the folder stays the user's: never mark it as pydial's to replace
            os.replace(f, target / f.name)


@contextmanager
def output_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary file path that atomically replaces ``path`` on success; on an exception or ``SIGTERM`` it is removed."""
    target = check_output_file(path)
    with _cannot_write(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(target.parent)
        fd, name = tempfile.mkstemp(prefix=_temp_prefix(target.name), dir=target.parent)
        os.close(fd)
    tmp = Path(name)
    _register(tmp)
    try:
        with _cannot_write(target):
            _copy_mode(tmp, target if target.is_file() else None, 0o666)
            yield tmp
            os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        _unregister(tmp)


INTERVAL_METADATA: tuple[str, ...] = ("estimand", "interval_frequentist", "interval_bayes")
"""The columns of ``compare_intervals.csv`` that say what its numbers are (the same in every row)."""


def write_interval_table(table: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write a :func:`pydial.stan.compare_intervals` table as CSV with :data:`INTERVAL_METADATA` in every row."""
    meta = {k: str(table.attrs.get(k, "")) for k in INTERVAL_METADATA}
    q = table.index.get_level_values("quantity")
    pd.concat([by_score(table[q == "score"], "estimate"), table[q != "score"]]).assign(**meta).to_csv(path)


def read_interval_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a ``compare_intervals.csv`` indexed by ``(quantity, name)``, its metadata into ``attrs`` (none: OutputError)."""
    tab = pd.read_csv(path, index_col=[0, 1], keep_default_na=False, na_values=[""])
    missing = [k for k in INTERVAL_METADATA if k not in tab]
    if missing:
        raise OutputError(f"{path} is not a compare_intervals.csv of pydial: no column(s) {missing}")
    out = tab.drop(columns=list(INTERVAL_METADATA))
    if len(tab):
        out.attrs.update({k: "" if pd.isna(tab[k].iloc[0]) else str(tab[k].iloc[0]) for k in INTERVAL_METADATA})
        out.attrs["level"] = float(tab["level"].iloc[0])
    return out
