"""Command-line cases (run through ``pydial`` in a subprocess) and output faults."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from .harness import Case, Outcome, Wrong, first_line

FIX: dict[str, str] = {"dir": "."}
DOCUMENTED = {0, 2, 3, 4, 5}


def _env() -> dict[str, str]:
    tmp = Path("clitmp").resolve()
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def _pydial() -> list[str]:
    exe = Path(sys.executable).with_name("pydial")
    return [str(exe)] if exe.exists() else ["pydial"]


def run_cli(args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    argv = _pydial() + shlex.split(args.replace("{FIX}", FIX["dir"]))
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env())


def judge_cli(p: subprocess.CompletedProcess, expect: int | tuple[int, ...], names: tuple[str, ...]) -> None:
    """Raise the Outcome of a finished command-line run (never returns normally for errors)."""
    expect = expect if isinstance(expect, tuple) else (expect,)
    err = [line for line in p.stderr.splitlines() if line.strip()]
    rc = p.returncode
    exc = f"exit {rc}"
    if "Traceback (most recent call last)" in p.stderr:
        raise Outcome("untyped error", f"traceback on stderr ({len(err)} lines)", exc, _last_exception(p.stderr))
    if rc == 0 and 0 not in expect:
        raise Wrong("exit 0 on input that must be refused")
    if rc != 0:
        if rc not in DOCUMENTED:
            raise Outcome("untyped error", "undocumented exit code", exc, first_line(p.stderr))
        if len(err) != 1:
            raise Outcome("CLI not one line", f"{len(err)} lines on stderr: " + " / ".join(e[:120] for e in err[:4]),
                          exc, err[0][:300] if err else "")
        if rc not in expect:
            raise Outcome("CLI wrong exit code", f"expected {expect}", exc, err[0][:300])
        if names and not any(n.casefold() in err[0].casefold() for n in names):
            raise Outcome("typed error (message off-target)", f"message names none of {list(names)}", exc, err[0][:300])
        raise Outcome("typed error", "" if 0 not in expect else "refused input the case expected to be accepted",
                      exc, err[0][:300])


def _last_exception(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(" ")]
    return lines[-1][:300] if lines else ""


def cli(desc: str, args: str, expect: int | tuple[int, ...] = 0, *names: str, check: Callable[[], Any] | None = None,
        pre: Callable[[], Any] | None = None, timeout: float = 240) -> Case:
    cmd = (args.split() or ["(none)"])[0]

    def fn() -> Any:
        if pre:
            pre()
        p = run_cli(args, timeout)
        rc_ok = p.returncode == 0 and (0 in (expect if isinstance(expect, tuple) else (expect,)))
        if not rc_ok:
            judge_cli(p, expect, names)
        if check:
            check()
        return f"exit 0, {len([x for x in p.stderr.splitlines() if x.strip()])} stderr lines"

    exp = expect if isinstance(expect, tuple) else (expect,)
    kind = "ok" if exp == (0,) else ("either" if 0 in exp else "error")
    return Case(f"cli: pydial {cmd}", desc, fn, kind, names,
                repro="pydial " + args.replace("{FIX}", "$FIX"), timeout=timeout + 30, kind="cli")


def exists(*paths: str) -> Callable[[], None]:
    def check() -> None:
        for p in paths:
            if not Path(p).exists():
                raise Wrong(f"{p} not written")
    return check


def scores_match(folder: str, method: str = "dial-ada", **kw: Any) -> Callable[[], None]:
    def check() -> None:
        import numpy as np

        import pydial

        got = pd.read_csv(Path(folder) / "scores.csv").set_index("item")
        ref = pydial.fit(pydial.Comparisons.from_csv(Path(FIX["dir"]) / "data.csv"), method, **kw).scores
        d = np.abs(got.loc[ref.index, "score"].to_numpy() - ref.score.to_numpy()).max()
        if not d < 1e-6:
            raise Wrong(f"scores.csv differs from pydial.fit by {d:.3g}")
    return check


def csv_rows(path: str, n: int) -> Callable[[], None]:
    def check() -> None:
        k = len(pd.read_csv(path))
        if k != n:
            raise Wrong(f"{path} has {k} rows, expected {n}")
    return check


def cli_cases() -> list[Case]:
    cs: list[Case] = []
    add = cs.append
    data = "{FIX}/data.csv"
    add(cli("fit dial-ada writes the outputs; scores equal pydial.fit", f"fit {data} --out o",
            check=lambda: (exists("o/scores.csv", "o/position_effects.csv", "o/summary.json", "o/report.md")(),
                           scores_match("o")())))
    for m in ("judges", "human", "pooled", "dial-nopos", "dial-anc", "atc"):
        add(cli(f"fit --method {m}", f"fit {data} --method {m} --out o", 0, check=scores_match("o", m)))
    add(cli("fit --ties davidson on tie data", "fit {FIX}/ties.csv --ties davidson --out o", 0, check=exists("o/scores.csv")))
    add(cli("fit --penalty firth --cov-type record --format html", f"fit {data} --penalty firth --cov-type record --format html --out o",
            0, check=exists("o/report.html")))
    add(cli("fit with covariates", "fit {FIX}/cov.csv --covariates length --out o", 0, check=exists("o/scores.csv")))
    add(cli("fit --rank auto", f"fit {data} --rank auto", 0))
    add(cli("fit --lambda 0.5,5 --no-endpoints", f"fit {data} --lambda 0.5,5 --no-endpoints", 0))
    add(cli("fit bundled synthetic", "fit synthetic --method dial-anc", 0))
    add(cli("fit missing file", "fit nope.csv", 2, "nope.csv"))
    add(cli("fit --rank x", f"fit {data} --rank x", 2, "rank"))
    add(cli("fit --rank -1", f"fit {data} --rank -1", 2, "rank"))
    add(cli("fit --level 2", f"fit {data} --level 2", 2, "level"))
    add(cli("fit --level nan", f"fit {data} --level nan", 2, "level"))
    add(cli("fit --method bogus", f"fit {data} --method bogus", 2, "method"))
    add(cli("fit --lambda a,b", f"fit {data} --lambda a,b", 2, "lambda"))
    add(cli("fit --multiples -1", f"fit {data} --multiples=-1", 2, "multiples"))
    add(cli("fit --covariates missing columns", f"fit {data} --covariates length", 2, "length"))
    add(cli("fit --columns bad field", f"fit {data} --columns colour=x", 2, "colour"))
    add(cli("fit --judge-col nonexistent", f"fit {data} --judge-col annotator", 2, "annotator"))
    add(cli("fit --human nobody (no human rows)", f"fit {data} --human nobody", (2, 3), "human", "nobody"))
    add(cli("fit --seed x", f"fit {data} --seed x", 2, "seed"))
    add(cli("fit unknown option", f"fit {data} --bogus", 2, "bogus"))
    add(cli("fit empty CSV", "fit e.csv", 2, "e.csv", pre=lambda: open("e.csv", "w").close()))
    add(cli("fit a directory as data", "fit {FIX}", 2, "director", "fold", "FIX", "pydial-fuzz"))
    add(cli("fit non-identifiable human design (exit 3)", "fit dis.csv --method human", 3, "item", pre=_disconnected))
    add(cli("fit --no-check on a non-identifiable design", "fit dis.csv --method human --no-check", (2, 3, 4), "item",
            pre=_disconnected))
    add(cli("fit --out an existing file", f"fit {data} --out f.txt", 2, "f.txt", pre=lambda: Path("f.txt").write_text("x")))
    add(cli("fit --out under /proc (cannot be created)", f"fit {data} --out /proc/pydial-fuzz-out", 2, "/proc"))
    add(cli("fit --out a folder under a file", f"fit {data} --out f.txt/sub", 2, "f.txt", pre=lambda: Path("f.txt").write_text("x")))
    add(cli("fit --out a non-empty foreign folder", f"fit {data} --out foreign", 2, "foreign", pre=_foreign))
    add(cli("fit --out a non-empty foreign folder with --force", f"fit {data} --out foreign --force", 0, pre=_foreign,
            check=lambda: (exists("foreign/scores.csv", "foreign/mine.txt")())))
    add(cli("fit twice into the same folder replaces it", f"fit {data} --method human --out o", 0,
            pre=lambda: run_cli(f"fit {data} --method dial-ada --out o"),
            check=lambda: _no_file("o/gacv.csv")))
    add(cli("check identifiable", f"check {data}", 0))
    add(cli("check --rank 5 (K=3)", f"check {data} --rank 5", (2, 3), "rank"))
    add(cli("check non-identifiable (exit 3)", "check dis.csv --method human", 3, "item", pre=_disconnected))
    add(cli("check binary garbage", "check g.csv", 2, "g.csv", pre=lambda: Path("g.csv").write_bytes(os.urandom(4000))))
    add(cli("simulate writes n_llm + n_human rows", "simulate s.csv -N 5 -K 2 --n-llm 300 --n-human 100 --seed 1", 0,
            check=csv_rows("s.csv", 400)))
    add(cli("simulate -N 1", "simulate s.csv -N 1", 2, "N", "items"))
    add(cli("simulate --n-llm -5", "simulate s.csv --n-llm -5", 2, "n_llm", "n-llm"))
    add(cli("simulate --p-first 2", "simulate s.csv --p-first 2", 2, "p_first", "p-first"))
    add(cli("simulate into a missing folder", "simulate nodir/s.csv --n-llm 100 --n-human 10", (0, 2), "nodir"))
    add(cli("simulate onto a directory", "simulate d --n-llm 100 --n-human 10", 2, "d", pre=lambda: Path("d").mkdir()))
    add(cli("simulate --rank 9 -N 5", "simulate s.csv --rank 9 -N 5", 2, "rank"))
    add(cli("plan theory", f"plan {data} --budgets 100,400 --next 5 --out p", 0, check=exists("p")))
    add(cli("plan --budgets x", f"plan {data} --budgets x", 2, "budgets"))
    add(cli("plan --budgets -5", f"plan {data} --budgets=-5", 2, "budgets"))
    add(cli("plan --next -1", f"plan {data} --next -1", 2, "next"))
    add(cli("plan --target unknown items", f"plan {data} --target 'nope - item01'", 2, "nope"))
    add(cli("plan --k 0", f"plan {data} --k 0", 2, "k"))
    add(cli("convert table round trip", f"convert table {data} --out long.csv", 0, check=lambda: csv_rows("long.csv", len(pd.read_csv(Path(FIX["dir"]) / "data.csv")))()))
    add(cli("convert arena missing file", "convert arena human=nope.jsonl --out long.csv", 2, "nope.jsonl"))
    add(cli("convert bogus format", "convert bogus x --out long.csv", 2, "bogus"))
    add(cli("convert mtbench garbage", "convert mtbench g.jsonl --out long.csv", 2, "g.jsonl",
            pre=lambda: Path("g.jsonl").write_text("not json\n")))
    add(cli("convert --out onto a directory", f"convert table {data} --out d", 2, "d", pre=lambda: Path("d").mkdir()))
    add(cli("judges on the test panel", "judges {FIX}/panel --n-boot 20 --out j", 0, check=exists("j/judges.csv")))
    add(cli("judges missing path", "judges nope", 2, "nope"))
    add(cli("judges --n-boot -1", "judges {FIX}/panel --n-boot -1", 2, "n_boot", "n-boot"))
    add(cli("judges --level 5", "judges {FIX}/panel --level 5", 2, "level"))
    add(cli("judges --max-tie-rate 2", "judges {FIX}/panel --max-tie-rate 2", 2, "tie"))
    add(cli("robustness one split", "robustness {FIX}/rob.csv --sweeps pure_position --splits 1 --methods human --out rb", (0,),
            timeout=400))
    add(cli("robustness --sweeps bogus", f"robustness {data} --sweeps bogus --out rb", 2, "bogus"))
    add(cli("robustness --splits 0", f"robustness {data} --splits 0 --out rb", 2, "splits"))
    add(cli("robustness --train-frac 2", f"robustness {data} --train-frac 2 --out rb", 2, "train"))
    add(cli("robustness without --out", f"robustness {data}", 2, "out"))
    add(cli("compare human, 1 chain, 100 draws", "compare hum.csv --method human --chains 1 --draws 100 --warmup 100 --out c",
            (0, 5), pre=_human_only, timeout=500))
    add(cli("compare --chains 0", f"compare {data} --chains 0", 2, "chains"))
    add(cli("compare --adapt-delta 1.5", f"compare {data} --adapt-delta 1.5", 2, "adapt"))
    add(cli("no command", "", 2, "command", "COMMAND"))
    add(cli("--version", "--version", 0))
    add(cli("unknown command", "bogus", 2, "bogus"))
    return cs


def _disconnected() -> None:
    f = pd.read_csv(Path(FIX["dir"]) / "data.csv")
    keep = (f.judge != "human") | (f.item_a.isin(["item00", "item01"]) & f.item_b.isin(["item00", "item01"]))
    f[keep].to_csv("dis.csv", index=False)


def _human_only() -> None:
    f = pd.read_csv(Path(FIX["dir"]) / "data.csv")
    f[f.judge == "human"].to_csv("hum.csv", index=False)


def _foreign() -> None:
    Path("foreign").mkdir(exist_ok=True)
    Path("foreign/mine.txt").write_text("not pydial's")


def _no_file(p: str) -> None:
    if Path(p).exists():
        raise Wrong(f"stale {p} left by the earlier run")


def _sigterm(args: str, target: str, desc: str) -> Case:
    """Start a command, SIGTERM it once its temporary sibling appears, then look for leftovers."""

    def fn() -> Any:
        argv = _pydial() + shlex.split(args.replace("{FIX}", FIX["dir"]))
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        t0, seen = time.time(), False
        while time.time() - t0 < 200 and p.poll() is None:
            if any(n.startswith(f".{target}.tmp-") for n in os.listdir(".")):
                seen = True
                time.sleep(0.05)
                p.send_signal(signal.SIGTERM)
                break
            time.sleep(0.005)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            raise Outcome("hang", "did not stop within 60 s of SIGTERM")
        left = [n for n in os.listdir(".") if ".tmp-" in n or ".old-" in n]
        if left:
            raise Outcome("leftover files", f"after SIGTERM: {left}", f"exit {p.returncode}")
        if not seen:
            return f"finished (exit {p.returncode}) before a temporary appeared; nothing left"
        if Path(target).exists() and p.returncode != 0:
            raise Wrong(f"{target} exists after an interrupted run (exit {p.returncode})")
        errl = [x for x in err.splitlines() if x.strip()]
        if "Traceback" in err:
            raise Outcome("untyped error", "traceback after SIGTERM", f"exit {p.returncode}", _last_exception(err))
        return f"SIGTERM while writing: exit {p.returncode}, no leftovers, {len(errl)} stderr lines"

    return Case("fault: SIGTERM mid-write", desc, fn, "ok", (), repro=f"pydial {args}  # SIGTERM once .{target}.tmp-* appears",
                timeout=300, kind="cli")


def fault_cases() -> list[Case]:
    return [
        _sigterm("fit {FIX}/data.csv --out o", "o", "fit --out o"),
        _sigterm("simulate big.csv --n-llm 3000000 --n-human 1000", "big.csv", "simulate a large file"),
        _sigterm("plan {FIX}/data.csv --budgets 100,400 --out p", "p", "plan --out p"),
    ]
