"""Run fuzz cases, each in a fresh forked process with a timeout and an address-space cap, and classify them.

A case is a function run in its own working folder.  It returns normally (a result that
passed the case's check), raises :class:`Wrong` (a result that failed its check), raises
:class:`Outcome` (a class decided by the case itself, used by the command-line cases) or
raises whatever the code under test raised.  The parent classifies:

* ``correct``: the call returned and the check passed;
* ``typed error``: a :class:`pydial.DialError` whose message names one of the case's
  relevant words (``typed error (message off-target)`` when it names none of them);
* ``untyped error``: any other exception;
* ``silent wrong``: a result that fails its check, or bad input accepted;
* ``hang`` / ``memory`` / ``leftover files``: over the time limit, a plain
  :class:`MemoryError` or killed under the address-space cap, temporary files left behind;
* ``CLI not one line`` / ``CLI wrong exit code``: command-line runs.
"""

from __future__ import annotations

import csv
import json
import multiprocessing as mp
import os
import re
import resource
import shutil
import signal
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

CLEAN = ("correct", "typed error")
CLASSES = ("correct", "typed error", "typed error (message off-target)", "untyped error", "silent wrong",
           "hang", "memory", "leftover files", "CLI not one line", "CLI wrong exit code")
MEMORY_CAP = 4 * 1024 ** 3
LEFTOVER = re.compile(r"\.(tmp|old)-\d+-")


class Wrong(Exception):
    """A result failed the case's check (silent wrong)."""


class Outcome(Exception):
    """A case decides its own class (``cls``) with a note."""

    def __init__(self, cls: str, note: str = "", exc_type: str = "", message: str = "") -> None:
        super().__init__(note)
        self.cls, self.note, self.exc_type, self.message = cls, note, exc_type, message


class ExampleTimeout(BaseException):
    """Raised by SIGALRM inside a hypothesis example."""


@dataclass
class Case:
    entry: str
    desc: str
    fn: Callable[[], Any]
    expect: str = "ok"            # "ok": must succeed; "error": must fail typed; "either"
    names: tuple[str, ...] = ()   # words one of which a typed error's message must contain
    repro: str = ""
    timeout: float = 60.0
    kind: str = "py"              # "py", "cli" or "hypo" (many rows)
    extra: dict = field(default_factory=dict)


def first_line(text: str) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def classify_exception(case: Case, e: BaseException) -> dict[str, Any]:
    from pydial.exceptions import DialError

    msg = str(e)
    row = {"exception": type(e).__module__ + "." + type(e).__qualname__, "message": first_line(msg)}
    if isinstance(e, Wrong):
        return {"class": "silent wrong", "exception": "", "message": "", "note": first_line(msg)}
    if isinstance(e, Outcome):
        return {"class": e.cls, "exception": e.exc_type, "message": e.message, "note": e.note}
    if isinstance(e, ExampleTimeout):
        return {**row, "class": "hang", "exception": ""}
    if isinstance(e, DialError):
        if case.expect == "ok":
            # a typed refusal of input the case considered valid: still typed, but noted
            row["note"] = "refused input the case expected to be accepted"
        low = msg.casefold()
        if case.names and not any(n.casefold() in low for n in case.names):
            return {**row, "class": "typed error (message off-target)",
                    "note": f"message names none of {list(case.names)}"}
        if not msg.strip():
            return {**row, "class": "typed error (message off-target)", "note": "empty message"}
        return {**row, "class": "typed error"}
    if isinstance(e, MemoryError):
        return {**row, "class": "memory"}
    tb = traceback.extract_tb(e.__traceback__)
    where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb) if "/pydial/" in f.filename), "")
    return {**row, "class": "untyped error", "note": f"raised at {where}" if where else ""}


def run_one(case: Case) -> dict[str, Any] | list[dict[str, Any]]:
    """Run ``case`` in the current process (the forked child) and classify it."""
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            note = case.fn()
            if case.kind == "hypo":
                return note
            if case.expect == "error":
                row = {"class": "silent wrong", "exception": "", "message": "",
                       "note": "bad input accepted" + (f": {note}" if note else "")}
            else:
                row = {"class": "correct", "exception": "", "message": "", "note": str(note or "")}
        except BaseException as e:  # noqa: BLE001 - everything is classified
            row = classify_exception(case, e)
    kinds = sorted({type(w.message).__name__ for w in caught})
    row["warnings"] = ",".join(kinds)
    row["seconds"] = round(time.perf_counter() - t0, 3)
    return row


def _child(case: Case, workdir: str, conn: Any) -> None:
    os.setpgrp()  # the parent can end this case and the processes it starts as one group
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    os.chdir(workdir)
    tmp = Path(workdir) / "tmp"
    tmp.mkdir(exist_ok=True)
    tempfile.tempdir = str(tmp)
    os.environ["TMPDIR"] = str(tmp)
    try:
        out = run_one(case)
    except BaseException as e:  # noqa: BLE001
        out = {"class": "untyped error", "exception": type(e).__name__, "message": first_line(str(e)),
               "note": "harness-level failure", "seconds": 0.0}
    try:
        conn.send(out)
    except Exception as e:  # noqa: BLE001 - e.g. an unpicklable value
        conn.send({"class": "untyped error", "exception": type(e).__name__, "message": first_line(str(e)),
                   "note": "result could not be sent", "seconds": 0.0})
    conn.close()


def _leftovers(workdir: Path) -> list[str]:
    found = []
    for root, dirs, files in os.walk(workdir):
        for name in dirs + files:
            if LEFTOVER.search(name):
                found.append(str(Path(root, name).relative_to(workdir)))
    cli_tmp = workdir / "clitmp"
    if cli_tmp.is_dir():
        found += [f"clitmp/{p.name}" for p in cli_tmp.iterdir()]
    return found


def _finish(case: Case, out: Any, workdir: Path, seconds: float) -> list[dict[str, Any]]:
    base = {"entry": case.entry, "description": case.desc, "repro": case.repro}
    rows = out if isinstance(out, list) else [out]
    if case.kind == "hypo":
        rows = [{**base, **r} for r in rows] or [{**base, "class": "untyped error", "note": "no examples ran"}]
    else:
        rows = [{**base, **r} for r in rows]
        rows[0].setdefault("seconds", round(seconds, 3))
    left = _leftovers(workdir)
    if left and rows and rows[-1]["class"] in CLEAN + ("typed error (message off-target)",):
        rows[-1]["class"] = "leftover files"
        rows[-1]["note"] = (rows[-1].get("note", "") + f" leftovers: {left[:5]}").strip()
    return rows


def run_cases(cases: list[Case], jobs: int = 2, scratch: Path | None = None, log: Callable[[str], None] = print
              ) -> list[dict[str, Any]]:
    """Run every case in a forked child (``jobs`` at a time); return one row per case (several for hypothesis groups)."""
    ctx = mp.get_context("fork")
    scratch = Path(scratch or tempfile.mkdtemp(prefix="pydial-fuzz-"))
    pending = list(enumerate(cases))
    running: dict[int, tuple[Any, Any, float, Path]] = {}
    results: dict[int, list[dict[str, Any]]] = {}
    while pending or running:
        while pending and len(running) < jobs:
            i, case = pending.pop(0)
            wd = scratch / f"case{i:04d}"
            wd.mkdir(parents=True, exist_ok=True)
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_child, args=(case, str(wd), child), daemon=False)
            p.start()
            child.close()
            running[i] = (p, parent, time.perf_counter(), wd)
        time.sleep(0.02)
        for i, (p, conn, t0, wd) in list(running.items()):
            case = cases[i]
            elapsed = time.perf_counter() - t0
            out = None
            if conn.poll():
                try:
                    out = conn.recv()
                except EOFError:
                    out = None
                p.join(5)
            elif not p.is_alive():
                p.join()
                code = p.exitcode
                cls = "memory" if code in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT) else "untyped error"
                out = {"class": cls, "exception": "", "message": "",
                       "note": f"case process ended with exit code {code} without a result"}
            elif elapsed > case.timeout:
                _kill(p)
                out = {"class": "hang", "exception": "", "message": "",
                       "note": f"no result after {case.timeout:.0f} s (killed)"}
                if case.kind == "hypo":
                    out = _partial_hypo(wd, out)
            else:
                continue
            if p.is_alive():
                _kill(p)
            conn.close()
            del running[i]
            rows = _finish(case, out, wd, elapsed)
            results[i] = rows
            for r in rows[:1]:
                log(f"[{len(results):4d}/{len(cases)}] {r['class']:<22} {case.entry}: {case.desc}"
                    + (f" (+{len(rows) - 1} examples)" if len(rows) > 1 else ""))
            shutil.rmtree(wd, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    return [r for i in sorted(results) for r in results[i]]


def _partial_hypo(wd: Path, out: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    f = wd / "examples.jsonl"
    if f.exists():
        rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return rows + [out]


def _kill(p: Any) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    p.join(5)


COLUMNS = ["entry", "description", "class", "exception", "message", "seconds", "warnings", "note", "repro"]


def write_results(rows: list[dict[str, Any]], out: Path, meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "cases.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in COLUMNS})
    (out / "summary.md").write_text(summary_markdown(rows, meta), encoding="utf-8")


def summary_markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    entries = sorted({r["entry"] for r in rows})
    present = [c for c in CLASSES if any(r["class"] == c for r in rows)]
    lines = ["# pydial fuzz run", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["", f"{len(rows)} cases; {sum(r['class'] in CLEAN for r in rows)} clean (correct or typed error).", ""]
    lines += ["## Counts by class", "", "| class | cases |", "|---|---:|"]
    lines += [f"| {c} | {sum(r['class'] == c for r in rows)} |" for c in present]
    lines += ["", "## Counts by entry point and class", ""]
    lines += ["| entry point | " + " | ".join(present) + " | total |", "|---|" + "---:|" * (len(present) + 1)]
    for e in entries:
        sub = [r for r in rows if r["entry"] == e]
        lines.append(f"| `{e}` | " + " | ".join(str(sum(r["class"] == c for r in sub) or "") for c in present)
                     + f" | {len(sub)} |")
    bad = [r for r in rows if r["class"] not in CLEAN]
    lines += ["", f"## Cases that are not clean ({len(bad)})", ""]
    if not bad:
        lines.append("None.")
    for r in bad:
        detail = "; ".join(x for x in (r.get("exception", ""), r.get("message", ""), r.get("note", "")) if x)
        lines.append(f"- **{r['class']}** `{r['entry']}`: {r['description']}. {md(detail)}")
        if r.get("repro"):
            lines.append(f"  - reproduce: `{md(r['repro'])}`")
    lines.append("")
    return "\n".join(lines)


def md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("`", "'").replace("\n", " ")
