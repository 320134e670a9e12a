"""Output writing under hostile conditions: empty paths, symbolic links, umasks and
setgid folders, and runs killed (SIGTERM / SIGKILL) while writing."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pydial.cli import EXIT_DATA, main
from pydial.exceptions import OutputError
from pydial.outputs import MARKER, check_output_dir, check_output_file, output_dir, output_file, remove_stale_temporaries


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture(params=[0o022, 0o002], ids=["umask022", "umask002"])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ------------------------------------------------------------------------ empty path
@pytest.mark.parametrize("path", ["", " ", b""])
def test_empty_path_refused_by_name(path, tmp_path, monkeypatch):
    """``--out ''`` means no location: refused (not the current folder, not silently skipped)."""
    monkeypatch.chdir(tmp_path)
    for call in (lambda: check_output_dir(path), lambda: check_output_file(path)):
        with pytest.raises(OutputError, match="path is empty"):
            call()
    with pytest.raises(OutputError, match="path is empty"):
        with output_dir(path):
            pass
    with pytest.raises(OutputError, match="path is empty"):
        with output_file(path):
            pass
    assert list(tmp_path.iterdir()) == []


def test_cli_empty_out_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", "", "-N", "3", "-K", "2", "--n-llm", "30", "--n-human", "10"]) == EXIT_DATA
    assert "path is empty" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cli_empty_out_folder_refused_before_fitting(tmp_path, monkeypatch, capsys):
    """``fit --out ''`` is a usage error (exit 2), not a fit that silently writes nothing."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data" / "s.csv"
    assert main(["simulate", str(data), "-N", "4", "-K", "2", "--n-llm", "400", "--n-human", "100", "--seed", "1"]) == 0
    capsys.readouterr()
    for command in ("fit", "plan"):
        assert main([command, str(data), "--method", "human", "--out", ""]) == EXIT_DATA, command
        out, err = capsys.readouterr()
        assert "path is empty" in err and out == "", command  # refused before fitting
    assert [p.name for p in tmp_path.iterdir()] == ["data"]


# ---------------------------------------------------------------------- symlinks
def test_symlinked_output_folder_is_written_through(tmp_path):
    real, link = tmp_path / "run1", tmp_path / "latest"
    with output_dir(real, command="first") as d:
        (d / "scores.csv").write_text("old")
        (d / "gacv.csv").write_text("old")
    link.symlink_to(real, target_is_directory=True)
    assert check_output_dir(link) == real
    with output_dir(link, command="second") as d:
        (d / "scores.csv").write_text("new")
    assert link.is_symlink() and link.resolve() == real
    assert (real / "scores.csv").read_text() == "new" and not (real / "gacv.csv").exists()
    assert (real / MARKER).read_text() == "written by second\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "run1"]


def test_symlinked_output_file_is_written_through(tmp_path, capsys):
    real, link = tmp_path / "data" / "sim.csv", tmp_path / "sim.csv"
    real.parent.mkdir()
    real.write_text("stale")
    link.symlink_to(real)
    assert main(["simulate", str(link), "-N", "3", "-K", "2", "--n-llm", "30", "--n-human", "10"]) == 0
    assert link.is_symlink() and link.resolve() == real
    assert "judge" in real.read_text().splitlines()[0]  # the simulated judgments, not "stale"
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "data" / "new.csv")
    with output_file(dangling) as f:
        f.write_text("x")
    assert dangling.is_symlink() and (tmp_path / "data" / "new.csv").read_text() == "x"


def test_symlink_loop_refused_by_name(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(OutputError, match=str(a.name)):
        check_output_dir(a)


# ------------------------------------------------------------------------- modes
def test_new_outputs_get_the_umask_modes(tmp_path, umask):
    with output_dir(tmp_path / "out") as d:
        (d / "scores.csv").write_text("x")
    assert _mode(tmp_path / "out") == 0o777 & ~umask
    assert _mode(tmp_path / "out" / "scores.csv") == _mode(tmp_path / "out" / MARKER) == 0o666 & ~umask
    with output_file(tmp_path / "sim.csv") as f:
        f.write_text("x")
    assert _mode(tmp_path / "sim.csv") == 0o666 & ~umask
    # a refit keeps the folder's mode, a rewrite the file's
    os.chmod(tmp_path / "out", 0o750)
    os.chmod(tmp_path / "sim.csv", 0o640)
    with output_dir(tmp_path / "out") as d:
        (d / "scores.csv").write_text("y")
    with output_file(tmp_path / "sim.csv") as f:
        f.write_text("y")
    assert _mode(tmp_path / "out") == 0o750 and _mode(tmp_path / "sim.csv") == 0o640


def _other_group() -> int:
    if os.geteuid() == 0:
        return 4242
    others = [g for g in os.getgroups() if g != os.getegid()]
    return others[0] if others else os.getegid()


@pytest.mark.parametrize("kind", ["empty", "earlier output"])
def test_group_shared_setgid_folder_keeps_mode_and_group(tmp_path, umask, kind):
    shared = tmp_path / "shared"
    shared.mkdir()
    if kind == "earlier output":
        (shared / MARKER).write_text("written by pydial\n")
    gid = _other_group()
    os.chown(shared, -1, gid)
    os.chmod(shared, 0o2770)
    with output_dir(shared) as d:
        (d / "scores.csv").write_text("x")
    st = shared.stat()
    assert stat.S_IMODE(st.st_mode) == 0o2770 and st.st_gid == gid
    assert (shared / "scores.csv").stat().st_gid == gid  # files inherit the group, as in the folder itself


def test_new_folder_in_setgid_parent_inherits_group(tmp_path, umask):
    parent = tmp_path / "team"
    parent.mkdir()
    gid = _other_group()
    os.chown(parent, -1, gid)
    os.chmod(parent, 0o2775)
    with output_dir(parent / "out") as d:
        (d / "scores.csv").write_text("x")
    st = (parent / "out").stat()
    assert st.st_gid == gid and st.st_mode & stat.S_ISGID and stat.S_IMODE(st.st_mode) & 0o777 == 0o777 & ~umask


# ---------------------------------------------------------- interrupted writes
WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pydial.outputs import output_dir, output_file

    kind, target = sys.argv[1], sys.argv[2]
    ctx = output_dir(target) if kind == "dir" else output_file(target)
    with ctx as tmp:
        (tmp / "scores.csv" if kind == "dir" else tmp).write_text("partial")
        print(tmp, flush=True)
        time.sleep(60)  # a slow write, killed here
""")


def _start_writer(tmp_path: Path, kind: str, target: Path) -> tuple[subprocess.Popen, Path]:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.Popen([sys.executable, str(script), kind, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line, "the writer did not start"
    return proc, Path(line)


def _old_output(kind: str, target: Path) -> None:
    if kind == "dir":
        with output_dir(target) as d:
            (d / "scores.csv").write_text("old")
    else:
        with output_file(target) as f:
            f.write_text("old")


def _content(kind: str, target: Path) -> str:
    return (target / "scores.csv" if kind == "dir" else target).read_text()


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_sigterm_mid_write_removes_the_temporary(tmp_path, kind):
    folder = tmp_path / "outs"
    folder.mkdir()
    target = folder / ("out" if kind == "dir" else "sim.csv")
    _old_output(kind, target)
    proc, tmp = _start_writer(tmp_path, kind, target)
    assert tmp.exists() and tmp.name.startswith(f".{target.name}.tmp-{proc.pid}-")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM  # the conventional status (shell: 128 + 15)
    assert not tmp.exists() and _hidden(folder) == []
    assert _content(kind, target) == "old"


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_sigkill_leftover_removed_by_the_next_run(tmp_path, kind):
    folder = tmp_path / "outs"
    folder.mkdir()
    target = folder / ("out" if kind == "dir" else "sim.csv")
    _old_output(kind, target)
    proc, tmp = _start_writer(tmp_path, kind, target)
    proc.kill()
    proc.wait(timeout=30)
    assert tmp.exists() and _content(kind, target) == "old"  # the target was never partial
    # a temporary of a live process (this one) is left alone
    live = folder / f".other.tmp-{os.getpid()}-{tmp.name.split('-')[2]}-abc"
    live.mkdir()
    with output_file(folder / "other.csv") as f:
        f.write_text("x")
    assert not tmp.exists() and live.exists()
    assert _hidden(folder) == [live.name]
    assert remove_stale_temporaries(folder) == []


def test_kill_between_moving_aside_and_in_restores_the_earlier_output(tmp_path):
    """Killed after the earlier output moved to ``.out.old-*`` but before the new one moved in: put it back."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with output_dir(tmp_path / "probe") as d:  # learn this host's tag from a temporary name
        host = d.name.split("-")[2]
    aside = tmp_path / f".out.old-{dead.pid}-{host}-abcdefgh"
    (aside / "out").mkdir(parents=True)
    (aside / "out" / "scores.csv").write_text("earlier")
    (aside / "out" / MARKER).write_text("written by pydial\n")
    assert sorted(p.name for p in remove_stale_temporaries(tmp_path)) == [aside.name]
    assert (tmp_path / "out" / "scores.csv").read_text() == "earlier" and not aside.exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigterm_of_a_forked_child_leaves_the_parents_temporary(tmp_path):
    """A worker forked while the output is written (e.g. a process pool, terminated with SIGTERM) removes nothing."""
    script = tmp_path / "fork.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys
        from pydial.outputs import output_dir

        with output_dir(sys.argv[1]) as tmp:
            (tmp / "scores.csv").write_text("new")
            pid = os.fork()
            if pid == 0:
                os.kill(os.getpid(), signal.SIGTERM)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status
            assert (tmp / "scores.csv").exists()
    """))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "scores.csv").read_text() == "new"
