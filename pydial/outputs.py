"""Writing outputs safely: check the location first, write aside, move into place.

An output folder (``pydial fit --out DIR``) or file (``simulate``, ``convert``) is
written into a temporary sibling first and moved into place only when complete, so
an interrupted or failed run leaves either the old output or the new one, never a
mix of both.

Folder rules (:func:`output_dir`):

* a missing folder (and missing parents) is created;
* an empty folder, or a folder pydial wrote before (it holds the marker file
  :data:`MARKER`), is replaced as a whole, so no file of an earlier fit (e.g. the
  ``gacv.csv`` of another method) survives beside the new ones;
* any other non-empty folder is refused, unless ``force=True``: then only pydial's
  own file names (:data:`OUTPUT_NAMES`) in it are replaced and other files are left
  alone.

File rules (:func:`output_file`): the parent folder must exist (or be creatable) and
the path must not be a folder; an existing file is replaced atomically.

Every problem raises :class:`~pydial.exceptions.OutputError` naming the path, before
any fitting when :func:`check_output_dir` / :func:`check_output_file` are called first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .exceptions import OutputError

MARKER = ".pydial-output"
"""Marker file of a folder written by pydial (its content names the command)."""

OUTPUT_NAMES: tuple[str, ...] = (
    "scores.csv", "data_summary.csv", "position_effects.csv", "gacv.csv", "consensus_loadings.csv", "tie_parameters.csv",
    "covariate_effects.csv", "covariate_effects.png", "summary.json",
    "report.md", "report.html", "scores.png", "position_effects.png", "gacv.png", "compare_intervals.csv",
    "compare_intervals.png", "posterior.nc",
    "plan.csv", "plan.png", "next_pairs.csv", MARKER,
)
"""Every file name pydial writes into an output folder."""


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


def _probe(folder: Path, p: Path) -> None:
    """Refuse when no file can be created in ``folder``."""
    try:
        fd, name = tempfile.mkstemp(prefix=".pydial-probe-", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise OutputError(f"cannot write {p}: cannot create files in {folder} ({e.strerror})") from None


def _is_pydial_dir(p: Path) -> bool:
    return (p / MARKER).is_file()


def check_output_dir(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Check that an output folder can be written (see the module docstring).

    Returns the absolute path; raises :class:`OutputError` otherwise.
    """
    p = Path(path).expanduser().absolute()
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
    """Check that an output file can be written; returns the absolute path."""
    p = Path(path).expanduser().absolute()
    if p.is_dir():
        raise OutputError(f"cannot write the output file {p}: it is a folder")
    if p.exists() and not p.is_file():
        raise OutputError(f"cannot write the output file {p}: it is not a regular file")
    _probe(_existing_ancestor(p), p)
    return p


@contextmanager
def output_dir(path: str | os.PathLike[str], *, force: bool = False, command: str = "pydial") -> Iterator[Path]:
    """Yield a temporary folder to write into; on success it replaces ``path``.

    On an exception the temporary folder is removed and ``path`` is untouched.
    """
    target = check_output_dir(path, force=force)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    except OSError as e:
        raise OutputError(f"cannot write {target}: {e.strerror or e}") from None
    try:
        yield tmp
        (tmp / MARKER).write_text(f"written by {command}\n")
        _install_dir(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _install_dir(tmp: Path, target: Path) -> None:
    try:
        if not target.exists():
            os.rename(tmp, target)
            return
        if not any(target.iterdir()):
            target.rmdir()
            os.rename(tmp, target)
            return
        if _is_pydial_dir(target):  # replace the earlier output as a whole
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
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
    """Yield a temporary file path; on success it atomically replaces ``path``."""
    target = check_output_file(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
        os.close(fd)
    except OSError as e:
        raise OutputError(f"cannot write {target}: {e.strerror or e}") from None
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, target)
    except OSError as e:
        raise OutputError(f"cannot write {target}: {e.strerror or e}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
