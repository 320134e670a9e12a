"""Hypothesis-driven cases: random long tables and random argument values, one row per example.

Each group runs in one forked process; every example has its own time limit (SIGALRM)
and is written to ``examples.jsonl`` as it finishes, so a group that is killed keeps
the examples it ran.
"""

from __future__ import annotations

import json
import math
import signal
import time
import unicodedata
import warnings
from typing import Any, Callable

import numpy as np
import pandas as pd

from . import checks as ck
from .harness import Case, ExampleTimeout, Wrong, first_line, run_one

EXAMPLE_TIMEOUT = 30
VALID_METHODS = ("judges", "human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc")


def random_table(seed: int, n: int, K: int, N: int, names: list[str], p_human: float = 0.3,
                 p_tie: float = 0.0, p_swap: float = 0.5) -> pd.DataFrame:
    """A well-formed long table of ``n`` records on ``N`` items named ``names`` (``K`` LLM judges plus people)."""
    rng = np.random.default_rng(seed)
    s = rng.normal(size=N)
    rows = []
    for r in range(n):
        i, j = rng.choice(N, 2, replace=False)
        for k in range(K + 1):
            if k == K and rng.random() > p_human:
                continue
            judge = "human" if k == K else f"j{k}"
            first = "a" if rng.random() < p_swap else "b"
            b = 0.0 if k == K else 0.5 - k * 0.4
            eta = s[i] - s[j] + b * (1 if first == "a" else -1)
            u = rng.random()
            w = "tie" if u < p_tie else ("a" if rng.random() < 1 / (1 + math.exp(-eta)) else "b")
            rows.append((r, judge, names[i], names[j], first, w))
    return pd.DataFrame(rows, columns=["record_id", "judge", "item_a", "item_b", "first", "winner"])


def _plain(x: Any) -> bool:
    return (isinstance(x, str) and x == x.strip() and x != "" and unicodedata.normalize("NFC", x) == x
            and all(unicodedata.category(c)[0] not in "CZ" for c in x))


def _alarm(signum: int, frame: Any) -> None:
    raise ExampleTimeout(f"example over {EXAMPLE_TIMEOUT} s")


def group(entry: str, desc: str, strategy_fn: Callable[[], Any], body: Callable[[Any], tuple[str, Callable[[], Any]]],
          max_examples: int, timeout: float = 1500, expect_fn: Callable[[Any], str] | None = None,
          names_fn: Callable[[Any], tuple[str, ...]] | None = None) -> Case:
    """A hypothesis group: ``body(example)`` returns ``(repro, thunk)``; the thunk runs the example with its check."""

    def fn() -> list[dict[str, Any]]:
        from hypothesis import HealthCheck, given, settings

        rows: list[dict[str, Any]] = []
        sink = open("examples.jsonl", "a", encoding="utf-8")
        signal.signal(signal.SIGALRM, _alarm)

        @settings(max_examples=max_examples, database=None, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck), print_blob=False)
        @given(strategy_fn())
        def test(example: Any) -> None:
            repro, thunk = body(example)
            sub = Case(entry, desc, thunk, expect_fn(example) if expect_fn else "either",
                       names_fn(example) if names_fn else ())
            signal.alarm(EXAMPLE_TIMEOUT)
            try:
                row = run_one(sub)
            except ExampleTimeout as e:
                row = {"class": "hang", "exception": "", "message": str(e), "note": "", "seconds": EXAMPLE_TIMEOUT}
            finally:
                signal.alarm(0)
            row.update(entry=entry, description=f"{desc} #{len(rows) + 1}", repro=repro)
            rows.append(row)
            sink.write(json.dumps(row, default=str) + "\n")
            sink.flush()

        try:
            test()
        except Exception as e:  # noqa: BLE001 - hypothesis itself failing is recorded, not fatal
            rows.append({"class": "untyped error", "exception": type(e).__name__, "message": first_line(str(e)),
                         "note": "hypothesis run failed", "entry": entry, "description": desc, "repro": ""})
        return rows

    return Case(entry, desc, fn, "either", (), kind="hypo", timeout=timeout)


# ------------------------------------------------------------------ strategies
def _tables():
    """Mostly well-formed tables (plain names, valid labels) with up to three cells replaced by wild values."""
    from hypothesis import strategies as st

    text = st.text(st.characters(codec="utf-8"), min_size=0, max_size=6)
    odd = st.one_of(st.none(), st.just(float("nan")), st.integers(-3, 3), st.floats(allow_nan=False, width=16),
                    st.binary(max_size=4), st.booleans())
    similar = st.sampled_from([" m1", "M1", "m1\u200b", "caf\u00e9", "cafe\u0301", "m1\t", "Human", " human"])
    wild_name = st.one_of(text, odd, similar)
    item = st.sampled_from(["m1", "m2", "m3", "m4", "m5", "caf\u00e9", "\u6a21\u578b"])
    judge = st.sampled_from(["human", "human", "j1", "j2", "\u00e9valuateur"])
    ab = st.sampled_from(["a", "b"])
    wins = st.sampled_from(["a", "b", "a", "b", "tie", "both_bad"])
    rid = st.integers(0, 8)
    cov = st.floats(-1e6, 1e6)
    wild_cov = st.sampled_from([1e300, -1e300, 1e-300, -1e-300, 0.0, float("nan"), float("inf"), 5e-324])
    row = st.tuples(rid, judge, item, item, ab, wins, cov, cov)
    wild = {0: st.one_of(st.sampled_from(["r1", "", None, "  "]), odd), 1: wild_name, 2: wild_name, 3: wild_name,
            4: st.sampled_from([None, "x", "A", 1, ""]), 5: st.sampled_from([None, "A", "x", 0, "draw", "Tie"]),
            6: wild_cov, 7: wild_cov}
    mutation = st.integers(0, 7).flatmap(lambda c: st.tuples(st.integers(0, 10 ** 6), st.just(c), wild[c]))
    return st.tuples(st.lists(row, min_size=1, max_size=40), st.booleans(), st.sampled_from(["keep", "drop", "raise"]),
                     st.lists(mutation, max_size=3)).map(_apply_mutations)


def _apply_mutations(t: Any) -> Any:
    rows, use_cov, dup, muts = t
    rows = [list(r) for r in rows]
    for k, c, v in muts:
        rows[k % len(rows)][c] = v
    return [tuple(r) for r in rows], use_cov, dup


def _table_body(ex: Any) -> tuple[str, Callable[[], Any]]:
    rows, use_cov, dup = ex
    cols = ["record_id", "judge", "item_a", "item_b", "first", "winner", "len_a", "len_b"]
    data = {c: [r[k] for r in rows] for k, c in enumerate(cols)}
    kw = f"duplicates={dup!r}" + (", covariates=['len']" if use_cov else "")
    repro = f"pydial.Comparisons.from_frame(pd.DataFrame({data!r}), {kw})"

    def thunk() -> Any:
        import pydial

        f = pd.DataFrame(data, columns=cols)
        kwargs: dict[str, Any] = {"duplicates": dup}
        if use_cov:
            kwargs["covariates"] = ["len"]
        out = pydial.Comparisons.from_frame(f, **kwargs)
        names_plain = all(_plain(v) for c in ("judge", "item_a", "item_b") for v in f[c])
        ck.require(out.n_human >= 0 and out.n_llm >= 0 and out.n_human + out.n_llm <= len(f),
                   f"n_human {out.n_human} + n_llm {out.n_llm} > {len(f)} rows")
        if names_plain and dup != "drop":
            lows = {str(v).casefold() for c in ("judge", "item_a", "item_b") for v in f[c]}
            raw = {str(v) for c in ("judge", "item_a", "item_b") for v in f[c]}
            if len(lows) == len(raw):  # no similar names to be refused
                dec = f.winner.isin(["a", "b"]) & (f.item_a != f.item_b)
                hum = f.judge == "human"
                ck.require(out.n_human == int((dec & hum).sum()), f"n_human {out.n_human} != {int((dec & hum).sum())} by hand")
                ck.require(out.n_llm == int((dec & ~hum).sum()), f"n_llm {out.n_llm} != {int((dec & ~hum).sum())} by hand")
                seen = set(f.item_a) | set(f.item_b)
                ck.require(set(out.items) <= seen, f"items {set(out.items) - seen} not in the table")
        if use_cov and out.covariate_scale is not None:
            sc = np.asarray(out.covariate_scale, dtype=float)
            ck.require(np.isfinite(sc).all() and (sc > 0).all(), f"covariate scale {sc}")
        return ""

    return repro, thunk


def _fit_tables():
    from hypothesis import strategies as st

    name = st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "S"]), min_size=1, max_size=5)
    return st.tuples(st.integers(0, 10 ** 6), st.integers(5, 120), st.integers(0, 3), st.integers(2, 6),
                     st.lists(name, min_size=6, max_size=6, unique_by=lambda s: unicodedata.normalize("NFC", s).casefold()),
                     st.floats(0.0, 1.0), st.sampled_from([0.0, 0.0, 0.2]), st.floats(0.0, 1.0),
                     st.sampled_from(VALID_METHODS), st.sampled_from([None, None, "davidson", "rao-kupper"]),
                     st.sampled_from([None, None, "firth"]))


def _fit_body(ex: Any) -> tuple[str, Callable[[], Any]]:
    seed, n, K, N, names, ph, pt, ps, method, ties, penalty = ex
    args = f"random_table({seed}, {n}, {K}, {N}, {names!r}, {ph!r}, {pt!r}, {ps!r})"
    repro = (f"from analyses.fuzz.hypo import random_table; f = {args}; "
             f"pydial.fit(pydial.Comparisons.from_frame(f), {method!r}, ties={ties!r}, penalty={penalty!r})")

    def thunk() -> Any:
        import pydial

        f = random_table(seed, n, K, N, names, ph, pt, ps)
        d = pydial.Comparisons.from_frame(f)
        res = pydial.fit(d, method, ties=ties, penalty=penalty)
        if res.status != "ok":
            return f"status {res.status}"
        ck.scores_ok(res, allow_nan_se=False)
        nh = int(((f.judge == "human") & f.winner.isin(["a", "b"])).sum())
        if res.n_human and ties is None:
            ck.require(res.n_human == nh, f"n_human {res.n_human} != {nh} by hand")
        return ""

    return repro, thunk


def _fit_args():
    from hypothesis import strategies as st

    method = st.sampled_from(list(VALID_METHODS) + ["bogus", "DIAL-ADA", ""])
    rank = st.one_of(st.none(), st.integers(-2, 4), st.sampled_from(["auto", "x", 1.5, 1.0, [0, 1], [], [-1], True]))
    level = st.one_of(st.just(0.95), st.floats(-1, 2), st.sampled_from([0.0, 1.0, float("nan"), float("inf"), "0.9"]))
    cov = st.sampled_from([None, "fisher", "binomial", "cell", "record", "bogus"])
    ties = st.sampled_from([None, "davidson", "rao-kupper", "bogus"])
    pen = st.sampled_from([None, "firth", "bogus"])
    lam = st.one_of(st.none(), st.floats(-1, 100), st.lists(st.floats(0.01, 50), min_size=1, max_size=3),
                    st.sampled_from([float("nan"), float("inf"), [], "x"]))
    cal = st.sampled_from([None, "mu", "W", "x"])
    wild = {"method": method, "rank": rank, "level": level, "cov_type": cov, "ties": ties,
            "penalty": pen, "lambda_": lam, "calibration": cal}
    valid = {"method": st.sampled_from(VALID_METHODS), "rank": st.sampled_from([None, 0, 1, 2]),
             "level": st.floats(0.5, 0.99), "cov_type": st.sampled_from([None, "fisher", "binomial", "cell", "record"]),
             "ties": st.just(None), "penalty": st.sampled_from([None, "firth"]),
             "lambda_": st.one_of(st.none(), st.lists(st.floats(0.01, 50), min_size=1, max_size=3)),
             "calibration": st.sampled_from([None, "mu", "W"])}
    return _mutated(valid, wild)


def _args_invalid(a: dict[str, Any]) -> list[str]:
    bad = []
    if a["method"] not in VALID_METHODS:
        bad.append("method")
    lv = a["level"]
    if not (isinstance(lv, float) and 0 < lv < 1):
        bad.append("level")
    r = a["rank"]
    if r is not None and not (r == "auto" or (type(r) is int and r >= 0)
                              or (isinstance(r, list) and r and all(type(x) is int and x >= 0 for x in r))):
        bad.append("rank")
    for k, ok in (("cov_type", (None, "fisher", "binomial", "cell", "record")), ("ties", (None, "davidson", "rao-kupper")),
                  ("penalty", (None, "firth")), ("calibration", (None, "mu", "W"))):
        if a[k] not in ok:
            bad.append(k)
    lam = a["lambda_"]
    if lam is not None:
        vals = lam if isinstance(lam, list) else [lam]
        if not vals or not all(isinstance(x, float) and math.isfinite(x) and x > 0 for x in vals):
            bad.append("lambda_")
    return bad


def _fit_args_body(a: dict[str, Any]) -> tuple[str, Callable[[], Any]]:
    kw = ", ".join(f"{k}={v!r}" for k, v in a.items() if k != "method")
    repro = f"pydial.fit(D, {a['method']!r}, {kw})".replace("nan", "float('nan')").replace("inf", "float('inf')")

    def thunk() -> Any:
        import pydial

        from . import cases_api

        kwargs = {k: v for k, v in a.items() if k != "method"}
        res = pydial.fit(cases_api.NS["D"], a["method"], **kwargs)
        bad = _args_invalid(a)
        # arguments a method does not use are ignored with a warning: only check the ones every method uses
        used_bad = [b for b in bad if b in ("method", "level", "cov_type", "ties", "penalty")]
        if used_bad:
            raise Wrong(f"accepted invalid {', '.join(f'{b}={a[b]!r}' for b in used_bad)}")
        if res.status == "ok":
            ck.scores_ok(res, level=a["level"])
        return f"status {res.status}; invalid but unused: {bad}" if bad else f"status {res.status}"

    return repro, thunk


def _sim_args():
    from hypothesis import strategies as st

    valid = {"N": st.integers(3, 9), "K": st.integers(1, 4), "rank": st.integers(0, 1), "n_llm": st.integers(0, 400),
             "n_human": st.integers(0, 150), "p_first": st.floats(0, 1), "tie_rate": st.just(0.0),
             "ties": st.just(None), "overdispersion": st.floats(0, 3), "seed": st.integers(0, 2 ** 32)}
    return _mutated(valid, {
        "N": st.one_of(st.integers(-1, 9), st.sampled_from([2.5, "5"])),
        "K": st.integers(-1, 5), "rank": st.integers(-1, 3),
        "n_llm": st.integers(-5, 400), "n_human": st.integers(-5, 150),
        "p_first": st.one_of(st.floats(-0.5, 1.5), st.just(float("nan"))),
        "tie_rate": st.one_of(st.just(0.0), st.floats(-0.2, 1.2)),
        "ties": st.sampled_from([None, "davidson", "rao-kupper"]),
        "overdispersion": st.one_of(st.just(0.0), st.floats(-1, 3)),
        "seed": st.one_of(st.integers(0, 2 ** 32), st.sampled_from([-1, "x", 1.5])),
    })


def _mutated(valid: dict[str, Any], wild: dict[str, Any]):
    """Valid values of every argument, then up to two of them drawn from the wild strategies."""
    from hypothesis import strategies as st

    keys = sorted(valid)
    return st.tuples(st.fixed_dictionaries(valid), st.lists(st.sampled_from(keys), max_size=2, unique=True),
                     st.fixed_dictionaries(wild)).map(lambda t: {k: (t[2][k] if k in t[1] else t[0][k]) for k in keys})


def _sim_invalid(a: dict[str, Any]) -> list[str]:
    bad = []
    if not (type(a["N"]) is int and a["N"] >= 2):
        bad.append("N")
    if a["K"] < 1:
        bad.append("K")
    if a["rank"] < 0 or (type(a["N"]) is int and a["rank"] > max(0, a["N"] - 2)) or a["rank"] > max(a["K"] - 1, 0):
        bad.append("rank?")
    if a["n_llm"] < 0:
        bad.append("n_llm")
    if a["n_human"] < 0:
        bad.append("n_human")
    if not (0 <= a["p_first"] <= 1):
        bad.append("p_first")
    if not (0 <= a["tie_rate"] < 1):
        bad.append("tie_rate")
    if a["tie_rate"] > 0 and a["ties"] is None:
        bad.append("ties?")
    if a["overdispersion"] < 0:
        bad.append("overdispersion")
    if not (type(a["seed"]) is int and a["seed"] >= 0):
        bad.append("seed")
    return bad


def _sim_body(a: dict[str, Any]) -> tuple[str, Callable[[], Any]]:
    behavior = {k: a[k] for k in ("p_first", "overdispersion")}
    kw = {**{k: v for k, v in a.items() if k not in behavior}, "behavior": behavior}
    repro = "pydial.simulate(" + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")"
    repro = repro.replace("nan", "float('nan')")

    def thunk() -> Any:
        import pydial

        s = pydial.simulate(**kw)
        bad = [b for b in _sim_invalid(a) if not b.endswith("?")]
        if bad:
            raise Wrong(f"accepted invalid {', '.join(f'{b}={a[b]!r}' for b in bad)}")
        ck.require(len(s.frame) == a["n_llm"] + a["n_human"], f"{len(s.frame)} rows != n_llm + n_human")
        ck.require(abs(float(np.sum(s.truth.s_h))) < 1e-8, "true human scores not centered")
        return ""

    return repro, thunk


def _result_args():
    from hypothesis import strategies as st

    item = st.one_of(st.sampled_from(["item00", "item01", "item04", "ITEM00", " item00", "nope", ""]), st.integers(-1, 5),
                     st.text(max_size=4))
    judge = st.one_of(st.sampled_from(["judge0", "judge1", "judge2", "human", "nobody", ""]), st.integers(0, 3))
    level = st.one_of(st.none(), st.floats(-0.5, 1.5), st.sampled_from([float("nan"), 0.0, 1.0]))
    call = st.sampled_from(["contrast", "conf_int", "position_test", "bootstrap", "with_cov"])
    return st.tuples(call, item, item, judge, judge, level, st.integers(-2, 6),
                     st.sampled_from([None, "fisher", "binomial", "cell", "record", "bogus", 3]))


def _result_body(ex: Any) -> tuple[str, Callable[[], Any]]:
    call, i, j, k1, k2, level, B, cov = ex
    if call == "contrast":
        expr = f"r.contrast({i!r}, {j!r}, level={level!r})"
    elif call == "conf_int":
        expr = f"r.conf_int(level={level!r}, cov_type={cov!r})"
    elif call == "position_test":
        expr = f"r.position_test({k1!r}, {k2!r})"
    elif call == "bootstrap":
        expr = f"r.bootstrap(B={B!r}, seed=1, level={level!r})"
    else:
        expr = f"r.with_cov({cov!r})"
    repro = f"r = pydial.fit(D, rank=0); {expr}".replace("nan", "float('nan')")

    def thunk() -> Any:
        from . import cases_api

        import pydial

        if "_R0" not in cases_api.NS:
            cases_api.NS["_R0"] = pydial.fit(cases_api.NS["D"], rank=0)
        r = cases_api.NS["_R0"]
        out = eval(expr, {"r": r, "nan": float("nan")})
        lv_bad = level is not None and not (0 < level < 1)
        items, judges = set(r.items), set(r.judges)
        if call == "contrast":
            if lv_bad or i not in items or j not in items:
                raise Wrong(f"accepted contrast({i!r}, {j!r}, level={level!r})")
            ck.require(abs(out.estimate - (r.scores.score[i] - r.scores.score[j])) < 1e-10, "estimate != s_i - s_j")
        elif call == "conf_int":
            if lv_bad or cov not in (None, "fisher", "binomial", "cell", "record"):
                raise Wrong(f"accepted conf_int(level={level!r}, cov_type={cov!r})")
        elif call == "position_test":
            if k1 not in judges or k2 not in judges:
                raise Wrong(f"accepted position_test({k1!r}, {k2!r})")
            ck.require(0 <= out.p_value <= 1 or (k1 == k2 and np.isnan(out.p_value)), f"p-value {out.p_value}")
        elif call == "bootstrap":
            if lv_bad or B < 1:
                raise Wrong(f"accepted bootstrap(B={B}, level={level!r})")
        else:
            if cov not in (None, "fisher", "binomial", "cell", "record"):
                raise Wrong(f"accepted with_cov({cov!r})")
            ck.require(np.allclose(out.scores.score, r.scores.score), "with_cov changed the scores")
        return ""

    return repro, thunk


def hypo_cases(scale: float = 1.0) -> list[Case]:
    n = lambda k: max(1, int(k * scale))  # noqa: E731
    return [
        group("hypothesis: Comparisons.from_frame", "random long table", _tables, _table_body, n(120), timeout=1200),
        group("hypothesis: pydial.fit on random tables", "random well-formed table and method", _fit_tables, _fit_body,
              n(50), timeout=1800),
        group("hypothesis: pydial.fit arguments", "random fit arguments on D", _fit_args, _fit_args_body, n(70),
              timeout=1800, names_fn=lambda a: tuple(b.rstrip("_") for b in _args_invalid(a))),
        group("hypothesis: pydial.simulate arguments", "random simulate arguments", _sim_args, _sim_body, n(50), timeout=900,
              names_fn=lambda a: tuple(b.rstrip("?") for b in _sim_invalid(a))),
        group("hypothesis: result methods", "random result-method arguments", _result_args, _result_body, n(50),
              timeout=1200),
    ]
