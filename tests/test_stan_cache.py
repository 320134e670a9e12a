"""The compile caches of both Stan backends: atomic, safe between processes, self-repairing.

A program is built aside, checked (CmdStan: the executable runs ``info``; httpstan: the
module imports) and renamed into place under a lock between processes
(:mod:`pydial.stan.cache`).  The backend tests point both caches at a temporary
directory (``PYDIAL_STAN_CACHE`` for CmdStan, ``XDG_CACHE_HOME`` for httpstan's own
cache) and run each compilation in a fresh process, with a tiny program.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pydial.stan import cache
from pydial.stan.cmdstan_backend import executable_problem

CHILD = r"""
import json, sys, warnings
from pydial.stan import cmdstan_backend, httpstan_backend
from pydial.stan.cache import StanCacheWarning
backend, mean = sys.argv[1], sys.argv[2]
code = "parameters { real x; } model { target += -0.5 * square(x - %s); }\n" % mean
impl = {"cmdstanpy": cmdstan_backend, "httpstan": httpstan_backend}[backend]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    cm = impl.compile_program("tiny_cache", code)
    lp = cm.log_prob({}, [0.0])
print(json.dumps({"cached": cm.cached, "log_prob": lp,
                  "warnings": [str(w.message) for w in caught if issubclass(w.category, StanCacheWarning)]}))
"""


def _env(tmp: Path, backend: str) -> dict[str, str]:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "xdg"), PYDIAL_STAN_BACKEND=backend)
    env[cache.CACHE_ENV] = str(tmp / "pydial")
    return env


def _start(tmp: Path, backend: str, mean: str = "1.5") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, backend, mean], env=_env(tmp, backend),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=1800)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _compile(tmp: Path, backend: str) -> dict:
    return _finish(_start(tmp, backend))


def _cached_program(tmp: Path, backend: str) -> Path:
    """The executable (CmdStan) or extension module (httpstan) of the tiny program in the temporary cache."""
    if backend == "cmdstanpy":
        found = list((tmp / "pydial" / "cmdstan").glob("*/tiny_cache"))
    else:
        found = list((tmp / "xdg" / "httpstan").glob("*/models/*/stan_services_*"))
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def compiled_cache(tmp_path_factory, stan_backend_name):
    """An empty cache and the backend; the tiny program compiles into it in two processes at once (once per backend)."""
    tmp = tmp_path_factory.mktemp(f"cache-{stan_backend_name}")
    procs = [_start(tmp, stan_backend_name) for _ in range(2)]
    runs = [_finish(p) for p in procs]
    return tmp, stan_backend_name, runs


@pytest.fixture
def stan_cache(compiled_cache, tmp_path):
    """A copy of :func:`compiled_cache`'s directory (for a test to damage) and that compilation's runs."""
    src, backend, runs = compiled_cache
    shutil.copytree(src, tmp_path, dirs_exist_ok=True)
    return tmp_path, backend, runs


# --------------------------------------------------------------------------- no compilation
def test_cache_env_moves_pydials_cache(monkeypatch, tmp_path):
    from pydial.stan.cmdstan_backend import cache_dir

    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "c"))
    assert cache.pydial_cache_dir() == tmp_path / "c"
    assert cache_dir() == tmp_path / "c" / "cmdstan"


def _hold(path: str, log: str, tag: str) -> None:
    with cache.file_lock(Path(path)):
        with open(log, "a") as fh:
            fh.write(f"{tag} in\n")
            fh.flush()
            time.sleep(0.5)
            fh.write(f"{tag} out\n")


def test_file_lock_excludes_other_processes(tmp_path):
    lock, log = str(tmp_path / "entry.lock"), str(tmp_path / "log")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_hold, args=(lock, log, t)) for t in ("a", "b", "c")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = Path(log).read_text().split()
    # each holder's "in" is followed by its own "out": the critical sections never overlap
    pairs = [lines[k:k + 4] for k in range(0, len(lines), 4)]
    assert all(p[0] == p[2] and p[1] == "in" and p[3] == "out" for p in pairs), lines


@pytest.mark.parametrize("content,mode,reason", [
    (b"", 0o755, "is empty (0 bytes)"),
    (b"#!/bin/sh\nexit 0\n", 0o644, "is not executable"),
    (b"\x7fELF garbage", 0o755, "does not run"),
    (b"#!/bin/sh\necho broken >&2\nexit 3\n", 0o755, "does not run"),
])
def test_executable_problem_names_what_is_wrong(tmp_path, content, mode, reason):
    exe = tmp_path / "prog"
    exe.write_bytes(content)
    exe.chmod(mode)
    assert reason in executable_problem(exe)
    assert executable_problem(tmp_path / "missing") == "is missing"


def test_replace_dir_publishes_a_whole_directory(tmp_path):
    target, new = tmp_path / "entry", tmp_path / "new"
    target.mkdir()
    (target / "module.so").write_bytes(b"")  # broken
    new.mkdir()
    (new / "module.so").write_bytes(b"built")
    cache.replace_dir(new, target)
    assert (target / "module.so").read_bytes() == b"built"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]


# --------------------------------------------------------------------------- both backends
def test_two_processes_compile_one_program_into_an_empty_cache(stan_cache):
    """Both succeed; the lock makes one compile and the other load its result."""
    tmp, backend, runs = stan_cache
    assert [r["log_prob"] for r in runs] == [pytest.approx(-1.125)] * 2
    assert sorted(r["cached"] for r in runs) == [False, True]
    assert not any(r["warnings"] for r in runs)
    prog = _cached_program(tmp, backend)
    assert prog.stat().st_size > 0
    assert not list(prog.parent.parent.glob(".pydial-*")) and not list(prog.parent.glob(".pydial-*"))


@pytest.mark.parametrize("damage", ["empty", "garbage"])
def test_broken_cached_program_is_rebuilt_with_a_warning(stan_cache, damage):
    tmp, backend, _ = stan_cache
    prog = _cached_program(tmp, backend)
    prog.write_bytes(b"" if damage == "empty" else b"\x7fELF this is not a program")
    run = _compile(tmp, backend)
    assert run["cached"] is False and run["log_prob"] == pytest.approx(-1.125)
    assert len(run["warnings"]) == 1 and str(prog) in run["warnings"][0], run["warnings"]
    assert ("empty (0 bytes)" if damage == "empty" else "does not") in run["warnings"][0]
    again = _compile(tmp, backend)
    assert again["cached"] is True and not again["warnings"]


def test_killed_compile_leaves_no_program_in_the_cache(tmp_path, stan_backend_name):
    """A compilation killed midway publishes nothing; the next one compiles and runs."""
    proc = _start(tmp_path, stan_backend_name)
    root = tmp_path / ("pydial" if stan_backend_name == "cmdstanpy" else "xdg")
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not list(root.rglob(".pydial-build-*")):
        time.sleep(0.2)
    time.sleep(1.0)  # inside the build
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    published = [p for p in root.rglob("*") if p.name in ("tiny_cache",) or p.name.startswith("stan_services_")]
    published = [p for p in published if ".pydial-build-" not in str(p)]
    for p in published:  # only a build that finished before the kill publishes, and then a whole program
        assert p.stat().st_size > 0
    run = _compile(tmp_path, stan_backend_name)
    assert run["log_prob"] == pytest.approx(-1.125) and not run["warnings"]
    assert not list(root.rglob(".pydial-build-*"))  # the dead build's directory was cleared under the lock
