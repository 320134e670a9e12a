"""Writing outputs safely: check the location first, write aside, move into place.

An output folder (``pydial fit --out DIR``) or file (``simulate``, ``convert``) is
written into a temporary sibling first and moved into place only when complete, so
an interrupted or failed run leaves either the old output or the new one, never a
mix of both.

Folder rules (:func:`output_dir`):

* a missing folder (and missing parents) is created;
* an empty folder, or a folder pydial wrote before (it holds the marker file
  :data:`MARKER`), is replaced as a whole, so no file of an earlier fit (e.g. the
  ``gacv.csv`` of another method) survives beside the new ones; the new folder keeps
  the old one's permissions and group (e.g. a group-shared, setgid folder stays so);
* any other non-empty folder is refused, unless ``force=True``: then only pydial's
  own file names (:data:`OUTPUT_NAMES`) in it are replaced and other files are left
  alone.

File rules (:func:`output_file`): the parent folder must exist (or be creatable) and
the path must not be a folder; an existing file is replaced atomically and keeps its
permissions and group.

Paths:

* an empty path is refused (it would otherwise mean the current folder);
* a symbolic link is written *through*: the folder or file it points to receives the
  output and the link itself is left as it is (a dangling link's target is created).

Permissions: new files and folders get the modes an ordinary ``open`` / ``mkdir``
gives them under the user's umask (e.g. ``rw-r--r--`` and ``rwxr-xr-x`` under umask
022), and a new folder in a setgid folder inherits its group, as ``mkdir`` does.

Interrupted runs: the temporary siblings are named ``.<name>.tmp-<pid>-<host>-*``
(``<host>`` a short hash of the host name).  On ``SIGTERM`` (and ``SIGHUP``) while one
is open, it is removed and the signal is delivered again with the handler the process
had before (by default the process ends with the signal's conventional status, 128 + 15
for ``SIGTERM``).  A run killed with ``SIGKILL`` cannot clean up; the next
:func:`output_dir` or :func:`output_file` in the same folder removes the temporaries
left by processes of this host that no longer run (:func:`remove_stale_temporaries`).

Every problem raises :class:`~pydial.exceptions.OutputError` naming the path, before
any fitting when :func:`check_output_dir` / :func:`check_output_file` are called first.

``compare_intervals.csv`` (:func:`write_interval_table`) carries in every row what its
numbers are: the columns ``estimand``, ``interval_frequentist`` and ``interval_bayes``.
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
from contextlib import contextmanager
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
    while not a.exists():
        if a == a.parent:
            break
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


def _is_pydial_dir(p: Path) -> bool:
    return (p / MARKER).is_file()


# ------------------------------------------------ stale temporaries, signals
def _pid_alive(pid: int) -> bool:
    if pid == os.getpid() or os.name == "nt":  # Windows: os.kill would end the process; never guess there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: the process exists (another user's)
        return True
    return True


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary outputs in ``folder`` left by pydial processes of this host that no longer run.

    Only names of the form ``.<name>.tmp-<pid>-<host>-*`` (and ``.old-``) of this host
    whose process ``<pid>`` is gone are touched.  A run killed between moving an earlier
    output folder aside (``.old-``) and moving the new one in left ``<name>`` missing: the
    earlier output is put back first.

    Parameters
    ----------
    folder : str or path-like
        The folder that holds outputs (an output's parent).

    Returns
    -------
    list of Path
        The removed temporaries.
    """
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
        try:
            if e.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


_OPEN_TEMPS: dict[Path, int] = {}  # temporary -> the pid that opened it (a forked child must not remove it)
_previous_handlers: dict[int, Any] = {}
_lock = threading.Lock()


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        try:
            p.unlink()
        except OSError:
            pass


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
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
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
            try:
                os.chown(tmp, -1, old.st_gid)
            except OSError:  # not a member of that group: the mode is still copied
                pass
        os.chmod(tmp, stat.S_IMODE(old.st_mode))
    else:
        os.chmod(tmp, (default & ~_umask()) | (st.st_mode & stat.S_ISGID))


# ---------------------------------------------------------------- checks
def check_output_dir(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Check that an output folder can be written (see the module docstring).

    Returns the absolute path (of the folder a symbolic link points to); raises
    :class:`OutputError` otherwise.
    """
    p = _target(path, "output folder")
    if p.exists() and not p.is_dir():
        raise OutputError(f"cannot write the output folder {p}: it is a file")
    anc = _existing_ancestor(p)
    _probe(anc, p)
    if p.is_dir():
        _probe(p, p)
        entries = list(p.iterdir())
        if entries and not _is_pydial_dir(p):
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
def _output_name(error: OSError, tmp: Path, target: Path) -> Path | None:
    """Return the output that an error while writing into ``tmp`` concerns (``target`` or its file); None for another path."""
    if not isinstance(error.filename, (str, bytes, os.PathLike)):
        return target
    written = Path(os.fsdecode(error.filename)).absolute()
    return target / written.relative_to(tmp) if written.is_relative_to(tmp) else None


@contextmanager
def output_dir(path: str | os.PathLike[str], *, force: bool = False, command: str = "pydial") -> Iterator[Path]:
    """Yield a temporary folder to write into; on success it replaces ``path``.

    On an exception (or ``SIGTERM``) the temporary folder is removed and ``path`` is untouched.
    """
    target = check_output_dir(path, force=force)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(target.parent)
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(target.name), dir=target.parent))
    except OSError as e:
        raise OutputError(f"cannot write {target}: {e.strerror or e}") from None
    _register(tmp)
    try:
        try:
            _copy_mode(tmp, target if target.is_dir() else None, 0o777)
        except OSError as e:
            raise OutputError(f"cannot write {target}: {e.strerror or e}") from None
        try:
            yield tmp
            (tmp / MARKER).write_text(f"written by {command}\n")
        except OSError as e:  # e.g. disk full, quota, read-only: name the output, not the temporary
            name = _output_name(e, tmp, target)
            if isinstance(e, OutputError) or name is None:
                raise
            raise OutputError(f"cannot write {name}: {e.strerror or e}") from None
        _install_dir(tmp, target)
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


def _install_dir(tmp: Path, target: Path) -> None:
    with _signals_deferred():
        _move_into_place(tmp, target)


def _move_into_place(tmp: Path, target: Path) -> None:
    try:
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
        if _is_pydial_dir(target):  # replace the earlier output as a whole
            old = Path(tempfile.mkdtemp(prefix=_temp_prefix(target.name, "old"), dir=target.parent))
            os.rename(target, old / "out")
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
            return
        # force=True into a foreign folder: replace pydial's own names only
        for name in OUTPUT_NAMES:
            q = target / name
            if q.is_file() and not (tmp / name).exists():
                q.unlink()
        for f in tmp.iterdir():
            if f.name != MARKER:  # the folder stays the user's: never mark it as pydial's to replace
                os.replace(f, target / f.name)
    except OSError as e:
        raise OutputError(f"cannot write {target}: {e.strerror or e}") from None


@contextmanager
def output_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary file path; on success it atomically replaces ``path``.

    On an exception (or ``SIGTERM``) the temporary file is removed and ``path`` is untouched.
    """
    target = check_output_file(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(target.parent)
        fd, name = tempfile.mkstemp(prefix=_temp_prefix(target.name), dir=target.parent)
        os.close(fd)
    except OSError as e:
        raise OutputError(f"cannot write {target}: {e.strerror or e}") from None
    tmp = Path(name)
    _register(tmp)
    try:
        _copy_mode(tmp, target if target.is_file() else None, 0o666)
        yield tmp
        os.replace(tmp, target)
    except OSError as e:
        raise OutputError(f"cannot write {target}: {e.strerror or e}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
        _unregister(tmp)


INTERVAL_METADATA: tuple[str, ...] = ("estimand", "interval_frequentist", "interval_bayes")
"""The columns of ``compare_intervals.csv`` that say what its numbers are (the same in every row)."""


def write_interval_table(table: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write a :func:`pydial.stan.compare_intervals` table as CSV with what it estimates in every row.

    ``compare_intervals.csv`` has the index columns ``quantity, name`` (the scores by
    estimate, highest first, then the other quantities), the numeric
    columns of the table at full precision, then :data:`INTERVAL_METADATA`: ``estimand``
    (what both sides estimate, e.g. ``"dial-ada; rank 1, calibration mu; lambda = 0.3455;
    b from the LLM-only stage on both sides"``), ``interval_frequentist`` (e.g. ``"95% Wald
    interval, sandwich (cell-clustered)"``) and ``interval_bayes`` (e.g. ``"95% equal-tailed
    posterior interval"``), taken from ``table.attrs``.  Read it back with
    :func:`read_interval_table` (or ``pandas.read_csv(path, index_col=[0, 1])``).

    Parameters
    ----------
    table : DataFrame
        The table (its ``attrs`` hold the metadata; a missing entry is written empty).
    path : str or path-like
        The CSV file.
    """
    meta = {k: str(table.attrs.get(k, "")) for k in INTERVAL_METADATA}
    q = table.index.get_level_values("quantity")
    rows = pd.concat([by_score(table[q == "score"], "estimate"), table[q != "score"]])
    rows.assign(**meta).to_csv(path)


def read_interval_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a ``compare_intervals.csv`` written by :func:`write_interval_table`.

    Parameters
    ----------
    path : str or path-like
        The CSV file.

    Returns
    -------
    DataFrame
        Indexed by ``(quantity, name)`` with the numeric columns; the metadata columns
        moved into ``attrs`` (with ``level``).

    Raises
    ------
    OutputError
        The file has no metadata columns (not written by :func:`write_interval_table`).
    """
    tab = pd.read_csv(path, index_col=[0, 1], keep_default_na=False, na_values=[""])
    missing = [k for k in INTERVAL_METADATA if k not in tab]
    if missing:
        raise OutputError(f"{path} is not a compare_intervals.csv of pydial: no column(s) {missing}")
    out = tab.drop(columns=list(INTERVAL_METADATA))
    out.attrs.update({k: "" if pd.isna(tab[k].iloc[0]) else str(tab[k].iloc[0]) for k in INTERVAL_METADATA}
                     if len(tab) else {})
    if len(tab):
        out.attrs["level"] = float(tab["level"].iloc[0])
    return out
