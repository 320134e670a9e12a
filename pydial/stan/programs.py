"""Locate pydial's Stan programs and expand their ``#include`` lines; check and label a user's program.

:func:`program_code` is the one text either backend compiles (and the key of the compiled-program cache); a user's
program in :func:`pydial.stan.posterior` has its data checked before it is compiled and its own variables labelled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from pydial.data.comparisons import Comparisons
from pydial.exceptions import ArgumentError

__all__ = ["PROGRAMS", "EXAMPLES", "program_dir", "program_path", "program_code", "expand_includes", "data_names",
           "example_program", "example_programs", "USER_DIM_SUFFIXES", "user_axes", "user_dims", "add_user_variables",
           "check_extra"]

PROGRAMS: dict[str, str] = {
    "dial": "DIAL in the computational chart (log density, penalized MLE), optional ties",
    "dial_sample": "DIAL in an identified parameterization for NUTS, optional ties",
    "judges": "judge-specific order-effect BTL, unstructured (also human-only and pooled), optional ties",
    "dial_calibrate": "second stage of the DIAL-Anc cut posterior: human calibration c given draws of M",
}
"""The Stan programs shipped with pydial: name -> one-line description."""

EXAMPLES: dict[str, str] = {
    "tie_gap": "judges.stan plus a tie rate that decays with the squared score gap: log nu_g - kappa_g eta^2, one "
               "kappa per LLM judge and one for the people (run: python -m pydial.stan.examples.tie_gap)",
}
"""Worked extensions installed with pydial (``pydial/stan/examples/<name>.stan``): name -> one-line description."""

_INCLUDE = re.compile(r"^[ \t]*#include[ \t]+[<\"]?([^>\"\s]+)[>\"]?[ \t]*$", re.MULTILINE)


def program_dir() -> Path:
    """Return the directory of the ``.stan`` files: the package ``pydial.stan_files``, else the checkout's ``stan/``."""
    with contextlib.suppress(ModuleNotFoundError, TypeError, OSError):
        for entry in resources.files("pydial.stan_files").iterdir():  # a namespace package has no str() path; its entries do
            if entry.name == "dial.stan":
                return Path(str(entry)).parent
    p = Path(__file__).resolve().parents[2] / "stan"
    if (p / "dial.stan").is_file():
        return p
    raise FileNotFoundError("cannot find pydial's Stan programs: neither the package 'pydial.stan_files' nor the "
                            f"source directory {p} holds dial.stan; reinstall pydial")


def program_path(name: str) -> Path:
    """Path of a program: one of :data:`PROGRAMS`, of :data:`EXAMPLES`, or a path to any ``.stan`` file."""
    if name in PROGRAMS:
        return program_dir() / f"{name}.stan"
    if name in EXAMPLES:
        return example_program(name)
    p = Path(name)
    if p.suffix == ".stan" and p.is_file():
        return p
    raise ArgumentError(f"unknown Stan program {name!r}; pydial ships {sorted(PROGRAMS)} and the examples "
                        f"{sorted(EXAMPLES)} (or pass a path to a .stan file)")


def example_programs() -> dict[str, str]:
    """Return the worked extensions installed with pydial.

    Returns
    -------
    dict of str to str
        Name (for :func:`example_program`) to a one-line description, a copy of :data:`EXAMPLES`.
    """
    return dict(EXAMPLES)


def example_program(name: str) -> Path:
    """Return the path of an installed worked extension (a ``.stan`` file).

    Pass it as ``program=`` to :func:`pydial.stan.posterior` or :func:`pydial.stan.compile_model`, or copy it to
    start a program of your own (its ``#include`` lines find pydial's include files wherever it is);
    :func:`program_code` gives the text with them expanded.

    Parameters
    ----------
    name : str
        A name in :data:`EXAMPLES` (:func:`example_programs`), e.g. ``"tie_gap"``.

    Returns
    -------
    pathlib.Path
        The installed file ``pydial/stan/examples/<name>.stan``.

    Raises
    ------
    pydial.ArgumentError
        ``name`` is not one of :data:`EXAMPLES`.
    """
    if name not in EXAMPLES:
        raise ArgumentError(f"unknown example program {name!r}; pydial ships {sorted(EXAMPLES)}")
    return Path(__file__).resolve().with_name("examples") / f"{name}.stan"


def expand_includes(text: str, include_dirs: list[Path], _seen: tuple[str, ...] = ()) -> str:
    """Replace each ``#include file`` line by the file's text from ``include_dirs``, recursively (missing: FileNotFoundError)."""

    def repl(m: re.Match[str]) -> str:
        fname = m.group(1)
        if fname in _seen:
            raise ArgumentError(f"#include cycle: {' -> '.join(_seen + (fname,))}")
        for d in include_dirs:
            f = Path(d) / fname
            if f.is_file():
                body = expand_includes(f.read_text(), include_dirs, _seen + (fname,))
                return f"// ---- begin #include {fname}\n{body.rstrip()}\n// ---- end #include {fname}"
        raise FileNotFoundError(f"#include {fname}: not found in {[str(d) for d in include_dirs]}")

    return _INCLUDE.sub(repl, text)


def program_code(name: str | Path) -> str:
    """Return the text of a Stan program with its ``#include`` lines expanded: what the backends compile.

    Parameters
    ----------
    name : str or pathlib.Path
        A shipped program (:data:`PROGRAMS`), an installed example (:data:`EXAMPLES`) or a ``.stan`` file.

    Returns
    -------
    str
        The text with every ``#include file`` line replaced by the file between ``// ---- begin #include
        file`` and ``// ---- end #include file`` lines; included files are searched in the program's
        ``include/`` directory, its own directory, then pydial's ``stan/include``.

    Raises
    ------
    pydial.ArgumentError
        ``name`` is neither a known program nor a ``.stan`` file, or its includes form a cycle.
    FileNotFoundError
        An included file is found nowhere.

    Examples
    --------
    >>> from pydial.stan import program_code
    >>> code = program_code("judges")
    >>> [line for line in code.splitlines() if line.startswith("#include")]
    []
    >>> "real paired_target(" in code
    True
    """
    path = program_path(str(name)).resolve()
    return _program_code(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=None)
def _program_code(path: str, mtime_ns: int) -> str:
    """Return the expanded text of the program file ``path`` (cached per path and modification time)."""
    p = Path(path)
    return expand_includes(p.read_text(), [p.parent / "include", p.parent, program_dir() / "include"])


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/|#[^\n]*", re.DOTALL)
_DATA_BLOCK = re.compile(r"\b(transformed\s+)?data\s*\{")


def data_names(name: str) -> tuple[str, ...]:
    """Return the names declared in the ``data`` block of program ``name`` (includes expanded), in order."""
    code = _COMMENT.sub("", program_code(name))
    start = next((m.end() for m in _DATA_BLOCK.finditer(code) if m.group(1) is None), None)
    if start is None:
        return ()
    depth, end = 1, start
    while depth and end < len(code):
        depth += {"{": 1, "}": -1}.get(code[end], 0)
        end += 1
    statements = code[start:end - 1].split(";")
    names = (re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", st.strip()) for st in statements if st.strip())
    return tuple(m.group(1) for m in names if m)


# --------------------------------------------------------------------------- a user's program in a posterior
def check_extra(program: str, extra: Mapping[str, Any] | None, model: str) -> None:
    """Check that ``extra`` gives exactly the data ``program`` declares beyond the schema of ``model``'s shipped program.

    Raises :class:`~pydial.ArgumentError` naming the unknown or missing entries.
    """
    declared = data_names(program)
    schema = set(data_names("dial_sample" if model == "dial" else "judges"))
    own = [n for n in declared if n not in schema]
    given = set(extra or {})
    unknown = sorted(given - set(declared))
    if unknown:
        raise ArgumentError(f"extra data {unknown} are not declared in the data block of {program}; it reads "
                            f"{own or 'no data'} beyond the schema of pydial's {model!r} programs")
    missing = [n for n in own if n not in given]
    if missing:
        raise ArgumentError(f"{program} declares the data {missing} that pydial does not provide: pass them with "
                            "extra={...}")


USER_DIM_SUFFIXES: tuple[str, ...] = ("", "_j", "_k")
"""Suffixes of a labelled dimension that occurs more than once in one variable (``item``, ``item_j``, ``item_k``)."""


def user_axes(data: Comparisons, d: Mapping[str, Any]) -> dict[int, tuple[str, list[str]]]:
    """Return size -> (dimension, labels): ``K`` judge, ``K + 1`` judge_human (+ the people), ``N`` item; not shared sizes."""
    K, N = int(d["K"]), int(d["N"])
    judges = list(data.judges)[:K]
    candidates = [(K, "judge", judges), (K + 1, "judge_human", judges + [data.human_judge]), (N, "item", list(data.items))]
    sizes = [size for size, _, _ in candidates]
    return {size: (dim, labels) for size, dim, labels in candidates if size > 0 and sizes.count(size) == 1}


def user_dims(name: str, shape: Sequence[int], axes: Mapping[int, tuple[str, list[str]]],
              coords: dict[str, Any]) -> list[str] | None:
    """Return the dimensions of a variable of ``shape`` by :func:`user_axes` (labels to ``coords``); None: none labelled.

    A repeated dimension is suffixed; an unlabelled axis is ``<name>_dim_<axis>`` (arviz's default).
    """
    dims: list[str] = []
    for axis, size in enumerate(shape):
        dim = f"{name}_dim_{axis}"
        base, labels = axes.get(int(size), ("", []))
        free = [base + suffix for suffix in USER_DIM_SUFFIXES if base and base + suffix not in dims]
        if free:
            dim = free[0]
            coords[dim] = labels
        dims.append(dim)
    return dims if any(not dm.startswith(f"{name}_dim_") for dm in dims) else None


def add_user_variables(s: Any, data: Comparisons, program: str) -> None:
    """Add a user's program's own variables (not ``log_lik``, ``counts_rep``) to the posterior, labelled by :func:`user_dims`."""
    axes = user_axes(data, s.d)
    for name, v in s.res.draws.items():
        if name in s.post or name in ("log_lik", "counts_rep"):
            continue
        s.post[name] = v
        dims = user_dims(name, np.shape(v)[2:], axes, s.coords)
        if dims is not None:
            s.dims[name] = dims
    s.program = program
    s.estimand = dataclasses.replace(s.estimand, program=str(program))
