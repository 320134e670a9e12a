"""Deterministic cases of the Python API: readers, fit, result methods, design checks, studies, Stan."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import checks as ck
from .harness import Case, Wrong

NS: dict[str, Any] = {}


def C(entry: str, desc: str, code: str, check: Callable[..., Any] | None = None, expect: str = "ok",
      names: tuple[str, ...] = (), timeout: float = 60.0) -> Case:
    """A case that runs ``code`` (after the fixtures' setup) and checks ``out`` with ``check(out, env)``."""

    def fn() -> Any:
        env = dict(NS)
        exec(code, env)
        out = env.get("out")
        return check(out, env) if check else None

    return Case(entry, desc, fn, expect, names, repro=code.strip().replace("\n", "; "), timeout=timeout)


def E(entry: str, desc: str, code: str, *names: str, timeout: float = 60.0) -> Case:
    """A case that must end in a typed error naming one of ``names``."""
    return C(entry, desc, code, expect="error", names=names, timeout=timeout)


# ------------------------------------------------------------------ checks
def data_ok(frame_name: str = "F", human: str = "human", **kw: Any) -> Callable[..., Any]:
    def check(out: Any, env: dict) -> str:
        from .fixtures import hand_counts

        frame = env[frame_name] if isinstance(frame_name, str) else frame_name
        nh, nl = hand_counts(frame, human)
        ck.require(out.n_human == nh, f"n_human {out.n_human} != {nh} counted by hand")
        ck.require(out.n_llm == nl, f"n_llm {out.n_llm} != {nl} counted by hand")
        for k, v in kw.items():
            ck.require(getattr(out, k) == v, f"{k} = {getattr(out, k)!r}, expected {v!r}")
        return ""
    return check


def fit_ok(frame: str = "F", level: float = 0.95, **kw: Any) -> Callable[..., Any]:
    def check(out: Any, env: dict) -> str:
        note = ck.scores_ok(out, level=level, **kw)
        ck.counts_ok(out, env[frame])
        return note
    return check


def same_as(ref_code: str, tol: float = 1e-6, se: bool = True, mapping: str | None = None) -> Callable[..., Any]:
    def check(out: Any, env: dict) -> str:
        exec("ref = " + ref_code, env)
        ck.same_scores(env["ref"], out, tol=tol, se=se, mapping=env[mapping] if mapping else None)
        return ""
    return check


def truthy(expr: str) -> Callable[..., Any]:
    """``expr`` (with ``out`` and the fixtures in scope) must be true."""
    def check(out: Any, env: dict) -> str:
        env = {**env, "out": out, "np": np}
        ck.require(eval(expr, env), f"check failed: {expr}")
        return ""
    return check


METHODS = ("judges", "human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc")


def reader_cases() -> list[Case]:
    cs: list[Case] = []
    ff = "pydial.Comparisons.from_frame"
    add = cs.append
    add(C(ff, "valid table", "out = Comparisons.from_frame(F)", data_ok()))
    add(C(ff, "valid table with ties", "out = Comparisons.from_frame(FT)", data_ok("FT")))
    add(C(ff, "valid table with covariates", "out = Comparisons.from_frame(FC, covariates=['length'])",
          truthy("out.covariates == ('length',) and out.n_human == 400")))
    add(E(ff, "winner column missing", "out = Comparisons.from_frame(F.drop(columns='winner'))", "winner"))
    add(E(ff, "unknown winner value", "f = F.copy(); f.loc[3, 'winner'] = 'x'; out = Comparisons.from_frame(f)",
          "winner", "'x'"))
    add(E(ff, "unknown first value on an LLM row",
          "f = F.copy(); i = f.index[f.judge != 'human'][0]; f.loc[i, 'first'] = 'left'; out = Comparisons.from_frame(f)",
          "first"))
    add(E(ff, "missing first on an LLM row",
          "f = F.copy(); i = f.index[f.judge != 'human'][0]; f.loc[i, 'first'] = None; out = Comparisons.from_frame(f)",
          "first"))
    add(C(ff, "missing first on human rows (ignored)",
          "f = F.copy(); f.loc[f.judge == 'human', 'first'] = None; out = Comparisons.from_frame(f)", data_ok()))
    add(E(ff, "NaN item name", "f = F.copy(); f.loc[5, 'item_a'] = np.nan; out = Comparisons.from_frame(f)", "item_a"))
    add(E(ff, "NaN judge", "f = F.copy(); f.loc[5, 'judge'] = np.nan; out = Comparisons.from_frame(f)", "judge"))
    add(E(ff, "blank record id", "f = F.copy(); f['record_id'] = f.record_id.astype(str); f.loc[5, 'record_id'] = '  '; "
          "out = Comparisons.from_frame(f)", "record"))
    add(E(ff, "missing record id", "f = F.copy().astype({'record_id': object}); f.loc[5, 'record_id'] = None; "
          "out = Comparisons.from_frame(f)", "record"))
    add(C(ff, "item names as UTF-8 bytes (decoded)",
          "f = F.copy(); f['item_a'] = f.item_a.map(str.encode); out = Comparisons.from_frame(f)",
          truthy("out.items == D.items and out.n_human == D.n_human")))
    add(E(ff, "item names as invalid UTF-8 bytes",
          "f = F.copy().astype({'item_a': object}); f.loc[0, 'item_a'] = b'\\xff\\xfe'; out = Comparisons.from_frame(f)",
          "item_a", "UTF-8", "utf"))
    add(E(ff, "item names 4 and 4.0 (two spellings)",
          "f = F.copy(); f['item_a'] = np.array([4 if x == 'item01' else x for x in F.item_a], dtype=object); "
          "f['item_b'] = np.array([4.0 if x == 'item01' else x for x in F.item_b], dtype=object); out = Comparisons.from_frame(f)", "4"))
    add(E(ff, "items of a non-text type (a list in a cell)",
          "f = F.copy().astype({'item_a': object}); f.at[0, 'item_a'] = ['x']; out = Comparisons.from_frame(f)",
          "item_a", "list"))
    add(C(ff, "names with surrounding whitespace (stripped)",
          "f = F.copy(); f['item_a'] = '  ' + f.item_a + ' '; out = Comparisons.from_frame(f)",
          truthy("out.items == D.items and out.n_human == D.n_human")))
    add(C(ff, "human judge name with whitespace",
          "f = F.copy(); f['judge'] = f.judge.replace('human', ' human '); out = Comparisons.from_frame(f)",
          truthy("out.n_human == D.n_human and out.K == 3")))
    add(E(ff, "names differing only by case",
          "f = F.copy(); f.loc[f.index[:50], 'item_a'] = f.item_a[:50].str.upper(); out = Comparisons.from_frame(f)",
          "ITEM0", "case", "similar"))
    add(C(ff, "names differing only by case, allowed",
          "f = F.copy(); f.loc[f.judge == 'human', 'item_a'] = f.item_a.str.upper(); "
          "out = Comparisons.from_frame(f, allow_similar_names=True)", truthy("out.N == 5 + f[f.judge == 'human'].item_a.nunique()")))
    add(C(ff, "composed and decomposed accents are one name (NFC)",
          "import unicodedata as u; f = F.copy(); f['item_a'] = f.item_a.replace('item00', u.normalize('NFD', 'caf\\u00e9')); "
          "f['item_b'] = f.item_b.replace('item00', 'caf\\u00e9'); out = Comparisons.from_frame(f)",
          truthy("out.N == 5")))
    add(C(ff, "zero-width space inside a name is stripped at the ends",
          "f = F.copy(); f['item_a'] = f.item_a + '\\u200b'; out = Comparisons.from_frame(f)",
          truthy("out.N == 5 and out.items == D.items")))
    add(C(ff, "NUL character inside a name (kept as a distinct name or refused)", "f = F.copy(); f.loc[0, 'item_a'] = 'ite\\x00m00'; "
          "out = Comparisons.from_frame(f)", truthy("out.N == 6"), expect="either", names=("item_a", "control", "character")))
    add(C(ff, "10,000-character item names",
          "f = F.copy(); f['item_a'] = f.item_a + 'x'*10000; f['item_b'] = f.item_b + 'x'*10000; out = Comparisons.from_frame(f)",
          truthy("out.N == 5 and out.n_human == 400")))
    add(E(ff, "duplicates='raise' with a duplicated row",
          "out = Comparisons.from_frame(pd.concat([F, F.iloc[:1]]), duplicates='raise')", "duplicat"))
    add(C(ff, "duplicates='drop' with a duplicated human row",
          "h = F[F.judge == 'human'].iloc[:1]; out = Comparisons.from_frame(pd.concat([F, h]), duplicates='drop')",
          truthy("out.n_human == D.n_human")))
    add(C(ff, "duplicates='keep' with a duplicated human row counts it twice",
          "h = F[F.judge == 'human'].iloc[:1]; out = Comparisons.from_frame(pd.concat([F, h], ignore_index=True))",
          truthy("out.n_human == D.n_human + 1")))
    add(E(ff, "duplicates='bogus'", "out = Comparisons.from_frame(F, duplicates='bogus')", "duplicates"))
    add(E(ff, "items given as one string", "out = Comparisons.from_frame(F, items='item00')", "items"))
    add(E(ff, "items list missing an observed item",
          "out = Comparisons.from_frame(F, items=['item00', 'item01', 'item02', 'item03'])", "item04"))
    add(E(ff, "items list with a repeated name",
          "out = Comparisons.from_frame(F, items=['item00', 'item00', 'item01', 'item02', 'item03', 'item04'])",
          "item00", "items"))
    add(C(ff, "items list with an extra never-compared item",
          "out = Comparisons.from_frame(F, items=list(D.items) + ['new'])", truthy("out.N == 6")))
    add(E(ff, "misspelt keyword", "out = Comparisons.from_frame(F, human_judg='human')", "human_judg"))
    add(E(ff, "MultiIndex columns",
          "f = F.copy(); f.columns = pd.MultiIndex.from_tuples([(c, '') for c in F.columns]); out = Comparisons.from_frame(f)",
          "MultiIndex", "column"))
    add(E(ff, "empty table", "out = Comparisons.from_frame(F.iloc[:0])", "no ", "empty", "rows"))
    add(C(ff, "human rows only", "out = Comparisons.from_frame(F[F.judge == 'human'])",
          truthy("out.K == 0 and out.n_human == 400")))
    add(C(ff, "LLM rows only", "out = Comparisons.from_frame(F[F.judge != 'human'])",
          truthy("out.n_human == 0 and out.K == 3")))
    add(C(ff, "self-comparisons are excluded and counted",
          "f = F.copy(); f.loc[f.index[:40], 'item_b'] = f.item_a[:40]; out = Comparisons.from_frame(f)", data_ok_frame_f()))
    add(C(ff, "both_bad verdicts counted, not used",
          "f = F.copy(); f.loc[f.index[:60], 'winner'] = 'both_bad'; out = Comparisons.from_frame(f)", data_ok_frame_f()))
    add(C(ff, "winner in capitals", "f = F.copy(); f['winner'] = f.winner.str.upper(); out = Comparisons.from_frame(f)",
          expect="either", check=truthy("out.n_human == D.n_human")))
    add(C(ff, "integer judge names, human_judge=0",
          "f = F.copy(); f['judge'] = f.judge.map({'human': 0, 'judge0': 1, 'judge1': 2, 'judge2': 3}); "
          "out = Comparisons.from_frame(f, human_judge=0)", truthy("out.n_human == 400 and out.K == 3")))
    add(E(ff, "a repeated column name",
          "f = pd.concat([F, F[['winner']]], axis=1); out = Comparisons.from_frame(f)", "winner", "column"))
    add(E(ff, "a list of dicts instead of a DataFrame", "out = Comparisons.from_frame(F.to_dict('records'))",
          "DataFrame"))
    add(E(ff, "a numpy array instead of a DataFrame", "out = Comparisons.from_frame(F.to_numpy())", "DataFrame"))
    add(E(ff, "covariate columns missing", "out = Comparisons.from_frame(F, covariates=['length'])", "length"))
    add(E(ff, "covariate NaN", "f = FC.copy(); f.loc[3, 'length_a'] = np.nan; out = Comparisons.from_frame(f, covariates=['length'])",
          "length"))
    add(E(ff, "covariate inf", "f = FC.copy(); f.loc[3, 'length_b'] = np.inf; out = Comparisons.from_frame(f, covariates=['length'])",
          "length"))
    add(E(ff, "covariate text column",
          "f = FC.copy(); f['length_a'] = 'long'; out = Comparisons.from_frame(f, covariates=['length'])", "length"))
    add(C(ff, "covariates of magnitude 1e300 (scale-invariant)",
          "out = pydial.fit(Comparisons.from_frame(FC.assign(length_a=FC.length_a*1e300, length_b=FC.length_b*1e300), "
          "covariates=['length']), 'dial-anc')",
          same_as("pydial.fit(Comparisons.from_frame(FC, covariates=['length']), 'dial-anc')", tol=1e-6)))
    add(C(ff, "covariates of magnitude 1e-300 (scale-invariant)",
          "out = pydial.fit(Comparisons.from_frame(FC.assign(length_a=FC.length_a*1e-300, length_b=FC.length_b*1e-300), "
          "covariates=['length']), 'dial-anc')",
          same_as("pydial.fit(Comparisons.from_frame(FC, covariates=['length']), 'dial-anc')", tol=1e-6)))
    add(E(ff, "constant covariate (no variation)",
          "out = pydial.fit(Comparisons.from_frame(FC.assign(length_a=1.0, length_b=1.0), covariates=['length']), 'dial-anc')",
          "length", "covariate"))
    add(E(ff, "covariate_transform='bogus'",
          "out = Comparisons.from_frame(FC, covariates=['length'], covariate_transform='bogus')", "covariate_transform", "transform"))
    add(E(ff, "normalized covariate with x_a + x_b = 0",
          "f = FC.copy(); f['length_b'] = -f.length_a; out = Comparisons.from_frame(f, covariates=['length'], "
          "covariate_transform='normalized')", "length", "normalized", "zero"))
    add(E(ff, "self_preference naming an unknown item",
          "out = Comparisons.from_frame(F, self_preference={'judge0': ['nope']})", "nope"))
    add(E(ff, "self_preference naming an unknown judge",
          "out = Comparisons.from_frame(F, self_preference={'nobody': ['item00']})", "nobody"))
    add(C(ff, "renamed columns mapped", "f = F.rename(columns={'record_id': 'rid', 'judge': 'annotator'}); "
          "out = Comparisons.from_frame(f, columns={'record_id': 'rid', 'judge': 'annotator'})", data_ok()))
    add(E(ff, "column mapping to a column that does not exist", "out = Comparisons.from_frame(F, columns={'judge': 'annotator'})",
          "annotator"))
    add(C(ff, "categorical winner column", "out = Comparisons.from_frame(F.astype({'winner': 'category'}))", data_ok()))
    add(E(ff, "winner as integers", "f = F.copy(); f['winner'] = (f.winner == 'a').astype(int); "
          "out = Comparisons.from_frame(f)", "winner"))
    add(E(ff, "an LLM judge with only ties",
          "f = F.copy(); f.loc[f.judge == 'judge2', 'winner'] = 'tie'; out = Comparisons.from_frame(f)", "judge2"))
    add(C(ff, "an LLM judge with only ties, drop_empty_judges",
          "f = F.copy(); f.loc[f.judge == 'judge2', 'winner'] = 'tie'; out = Comparisons.from_frame(f, drop_empty_judges=True)",
          truthy("out.K == 2 and out.n_human == 400")))
    add(C(ff, "1,000 items, sparse comparisons",
          "rng = np.random.default_rng(0); a = rng.integers(0, 1000, 3000); b = (a + 1 + rng.integers(0, 998, 3000)) % 1000; "
          "f = pd.DataFrame(dict(record_id=range(3000), judge='human', item_a=[f'm{i}' for i in a], "
          "item_b=[f'm{i}' for i in b], first='a', winner=np.where(rng.random(3000) < .5, 'a', 'b'))); "
          "out = Comparisons.from_frame(f)", truthy("out.n_human == 3000")))
    add(E(ff, "human_judge that names an LLM judge's rows too (not text)",
          "out = Comparisons.from_frame(F, human_judge=['human'])", "human_judge"))

    # ------------------------------------------------------------- files
    fc = "pydial.Comparisons.from_csv"
    add(C(fc, "CSV round trip equals from_frame", "out = pydial.fit(Comparisons.from_csv(FIX + '/data.csv'), 'dial-anc')",
          same_as("pydial.fit(D, 'dial-anc')", tol=1e-9)))
    add(C(fc, "gzip CSV round trip", "out = Comparisons.from_csv(FIX + '/data.csv.gz')", data_ok()))
    add(E(fc, "missing file", "out = Comparisons.from_csv(FIX + '/nope.csv')", "nope.csv"))
    add(E(fc, "a folder instead of a file", "out = Comparisons.from_csv(FIX)", "fold", "director", FIXD()))
    add(E(fc, "empty file", "open('e.csv', 'w').close(); out = Comparisons.from_csv('e.csv')", "e.csv", "empty"))
    add(E(fc, "header only", "F.iloc[:0].to_csv('h.csv', index=False); out = Comparisons.from_csv('h.csv')",
          "h.csv", "no ", "empty", "rows"))
    add(E(fc, "binary garbage", "open('g.csv', 'wb').write(os.urandom(5000)); out = Comparisons.from_csv('g.csv')",
          "g.csv"))
    add(E(fc, "truncated gzip",
          "b = open(FIX + '/data.csv.gz', 'rb').read(); open('t.csv.gz', 'wb').write(b[:len(b)//2]); "
          "out = Comparisons.from_csv('t.csv.gz')", "t.csv.gz"))
    add(E(fc, "blank item cell", "f = F.copy(); f.loc[7, 'item_b'] = ''; f.to_csv('b.csv', index=False); "
          "out = Comparisons.from_csv('b.csv')", "item_b"))
    add(C(fc, "keyword passed through (human_judge)",
          "F.assign(judge=F.judge.replace('human', 'people')).to_csv('p.csv', index=False); "
          "out = Comparisons.from_csv('p.csv', human_judge='people')", truthy("out.n_human == 400")))
    add(E(fc, "misspelt keyword", "out = Comparisons.from_csv(FIX + '/data.csv', humn_judge='x')", "humn_judge"))
    add(C(fc, "names with commas and quotes survive",
          "f = F.copy(); f['item_a'] = f.item_a + ',\"q\"'; f['item_b'] = f.item_b + ',\"q\"'; f.to_csv('q.csv', index=False); "
          "out = Comparisons.from_csv('q.csv')", truthy("out.N == 5 and out.items[0] == 'item00,\"q\"'")))
    add(C(fc, "numeric-looking names read as text ('007' keeps its zeros)",
          "f = F.copy(); f['item_a'] = f.item_a.str.replace('item', '0'); f['item_b'] = f.item_b.str.replace('item', '0'); "
          "f.to_csv('n.csv', index=False); out = Comparisons.from_csv('n.csv')", truthy("out.items[0] == '000'")))
    fp = "pydial.Comparisons.from_parquet"
    add(C(fp, "Parquet round trip equals from_frame", "out = pydial.fit(Comparisons.from_parquet(FIX + '/data.parquet'), 'human')",
          same_as("pydial.fit(D, 'human')", tol=1e-9)))
    add(E(fp, "a list column", "f = F.copy(); f['item_a'] = f.item_a.map(lambda s: [s]); f.to_parquet('l.parquet'); "
          "out = Comparisons.from_parquet('l.parquet')", "item_a", "list"))
    add(E(fp, "a CSV named .parquet", "import shutil; shutil.copy(FIX + '/data.csv', 'x.parquet'); "
          "out = Comparisons.from_parquet('x.parquet')", "x.parquet"))
    add(E(fp, "truncated Parquet", "b = open(FIX + '/data.parquet', 'rb').read(); open('t.parquet', 'wb').write(b[:len(b)//2]); "
          "out = Comparisons.from_parquet('t.parquet')", "t.parquet"))
    add(E(fp, "missing file", "out = Comparisons.from_parquet('nope.parquet')", "nope.parquet"))
    add(E(fp, "integer and float item names in one file",
          "codes = {m: k for k, m in enumerate(D.items)}; f = F.assign(item_a=F.item_a.map(codes).astype('int64'), "
          "item_b=F.item_b.map(codes).astype('float64')); f.to_parquet('m.parquet'); "
          "out = Comparisons.from_parquet('m.parquet')", "4", "item_a", "type"))

    rc = "pydial.read_comparisons"
    add(C(rc, "streamed CSV equals from_frame (cell covariance)",
          "out = pydial.fit(pydial.read_comparisons(FIX + '/data.csv'), 'dial-anc')", same_as("pydial.fit(D, 'dial-anc')", 1e-9)))
    add(C(rc, "chunksize=97 gives the same counts",
          "out = pydial.fit(pydial.read_comparisons(FIX + '/data.csv', chunksize=97), 'human')", same_as("pydial.fit(D, 'human')", 1e-9)))
    add(C(rc, "Parquet, chunked", "out = pydial.read_comparisons(FIX + '/data.parquet', chunksize=500)", data_ok()))
    add(C(rc, "gzip CSV", "out = pydial.read_comparisons(FIX + '/data.csv.gz')", data_ok()))
    for v in ("0", "-1", "1.5", "'100'", "None", "True"):
        add(E(rc, f"chunksize={v}", f"out = pydial.read_comparisons(FIX + '/data.csv', chunksize={v})", "chunksize"))
    add(C(rc, "unknown extension .txt (refused, or read as CSV)",
          "import shutil; shutil.copy(FIX + '/data.csv', 'd.txt'); out = pydial.read_comparisons('d.txt')",
          data_ok(), expect="either", names=("d.txt", ".txt")))
    add(E(rc, "missing column", "F.drop(columns='first').to_csv('m.csv', index=False); out = pydial.read_comparisons('m.csv')",
          "first"))
    add(E(rc, "bad winner in a late chunk",
          "f = F.copy(); f.loc[len(f) - 1, 'winner'] = 'draw'; f.to_csv('w.csv', index=False); "
          "out = pydial.read_comparisons('w.csv', chunksize=1000)", "draw", "winner"))
    add(C(rc, "cov_type='record' refused on streamed data",
          "out = pydial.fit(pydial.read_comparisons(FIX + '/data.csv'), 'human', cov_type='record')",
          expect="error", names=("record",)))
    add(C(rc, "record_id=None reads a file without the column",
          "F.drop(columns='record_id').to_csv('nr.csv', index=False); out = pydial.read_comparisons('nr.csv', columns={'record_id': None})",
          data_ok()))

    fco = "pydial.Comparisons.from_counts"
    add(C(fco, "counts aggregated by hand equal from_frame",
          "out = pydial.fit(Comparisons.from_counts(counts_table(F)), 'dial-ada')", same_as("pydial.fit(D, 'dial-ada')", 1e-6)))
    add(C(fco, "doubled counts equal the duplicated table",
          "c = counts_table(F); c[['wins_a', 'wins_b', 'ties', 'both_bad']] *= 2; out = pydial.fit(Comparisons.from_counts(c), 'dial-anc')",
          same_as("pydial.fit(Comparisons.from_frame(pd.concat([F, F.assign(record_id=F.record_id + 10**6)])), 'dial-anc')", 1e-6)))
    add(E(fco, "negative count", "c = counts_table(F); c.loc[0, 'wins_a'] = -1; out = Comparisons.from_counts(c)", "wins_a"))
    add(E(fco, "non-integer count", "c = counts_table(F).astype({'wins_a': float}); c.loc[0, 'wins_a'] = 1.5; "
          "out = Comparisons.from_counts(c)", "wins_a"))
    add(E(fco, "NaN count", "c = counts_table(F).astype({'wins_b': float}); c.loc[0, 'wins_b'] = np.nan; "
          "out = Comparisons.from_counts(c)", "wins_b"))
    add(E(fco, "missing wins column", "out = Comparisons.from_counts(counts_table(F).drop(columns='wins_b'))", "wins_b"))
    add(E(fco, "count 1e30 (overflow)", "c = counts_table(F).astype({'wins_a': float}); c.loc[0, 'wins_a'] = 1e30; "
          "out = Comparisons.from_counts(c)", "wins_a", "large", "count"))
    add(C(fco, "rows with zero counts only add nothing",
          "c = counts_table(F); z = c.iloc[:3].copy(); z[['wins_a', 'wins_b', 'ties', 'both_bad']] = 0; "
          "out = Comparisons.from_counts(pd.concat([c, z]))", data_ok()))
    add(E(fco, "cov_type='record' without record ids",
          "out = pydial.fit(Comparisons.from_counts(counts_table(F)), 'dial-anc', cov_type='record')", "record"))
    add(E(fco, "a DataFrame of the long format", "out = Comparisons.from_counts(F)", "wins_a", "column"))

    rj = "pydial.read_judge_responses"
    add(C(rj, "the bundled test panel", "out = pydial.read_judge_responses(FIX + '/panel')",
          truthy("out.K >= 2 and out.n_llm > 0")))
    add(E(rj, "missing folder", "out = pydial.read_judge_responses('nope')", "nope"))
    add(E(rj, "empty folder", "os.mkdir('empty'); out = pydial.read_judge_responses('empty')", "empty"))
    add(C(rj, "a file with garbage lines (counted, left out)",
          "import glob; p = sorted(glob.glob(FIX + '/panel/*/responses.jsonl'))[0]; "
          "open('r.jsonl', 'w').write(open(p).read() + 'not json\\n{\"x\": 1\\n'); out = pydial.read_judge_responses('r.jsonl')",
          expect="either", check=truthy("out.n_llm > 0")))
    add(E(rj, "a file of binary garbage", "open('g.jsonl', 'wb').write(os.urandom(3000)); out = pydial.read_judge_responses('g.jsonl')",
          "g.jsonl", "usable", "verdict"))
    for v in ("-0.1", "1.5", "float('nan')", "'half'"):
        add(E(rj, f"max_tie_rate={v}", f"out = pydial.read_judge_responses(FIX + '/panel', max_tie_rate={v})", "max_tie_rate"))
    add(E(rj, "block_lines=0", "out = pydial.read_judge_responses(FIX + '/panel', block_lines=0)", "block_lines"))
    add(E(rj, "fields with an unknown field", "out = pydial.read_judge_responses(FIX + '/panel', fields={'colour': 'c'})",
          "colour"))
    add(E(rj, "human_judge equal to a panel judge", "out = pydial.read_judge_responses(FIX + '/panel', human_judge='j1')",
          "j1"))
    add(C(rj, "max_tie_rate=0 leaves out every judge with a tie", "out = pydial.read_judge_responses(FIX + '/panel', max_tie_rate=0.0)",
          expect="either", check=truthy("out.K >= 1")))
    return cs


def FIXD() -> str:
    return "FIX"


def data_ok_frame_f() -> Callable[..., Any]:
    """Checks counts against the ``f`` built by the case's code."""
    def check(out: Any, env: dict) -> str:
        from .fixtures import hand_counts

        nh, nl = hand_counts(env["f"])
        ck.require(out.n_human == nh, f"n_human {out.n_human} != {nh} counted by hand")
        ck.require(out.n_llm == nl, f"n_llm {out.n_llm} != {nl} counted by hand")
        return ""
    return check


def fit_cases() -> list[Case]:
    cs: list[Case] = []
    add = cs.append
    fe = "pydial.fit"
    for m in METHODS:
        add(C(fe, f"method={m}", f"out = pydial.fit(D, {m!r})", fit_ok()))
        add(C(fe, f"method={m}, ties='davidson'", f"out = pydial.fit(DT, {m!r}, ties='davidson')", fit_ok("FT")))
        add(C(fe, f"method={m}, ties='rao-kupper'", f"out = pydial.fit(DT, {m!r}, ties='rao-kupper')", fit_ok("FT")))
        add(C(fe, f"method={m}, penalty='firth'", f"out = pydial.fit(D, {m!r}, penalty='firth')", fit_ok()))
        add(C(fe, f"method={m}, covariates", f"out = pydial.fit(DC, {m!r})", fit_ok("FC")))
        add(C(fe, f"method={m}, level=0.8", f"out = pydial.fit(D, {m!r}, level=0.8)", fit_ok(level=0.8)))
        add(C(fe, f"method={m}, relabelled items",
              f"mp = dict(zip(D.items, ['z', 'y', 'x', 'w', 'v'])); "
              f"out = pydial.fit(Comparisons.from_frame(F.replace({{'item_a': mp, 'item_b': mp}})), {m!r})",
              same_as(f"pydial.fit(D, {m!r})", 1e-5, mapping="mp")))
        add(C(fe, f"method={m}, item_a/item_b swapped (winner, first follow)",
              f"from analyses.fuzz.checks import swapped; out = pydial.fit(Comparisons.from_frame(swapped(F)), {m!r})",
              same_as(f"pydial.fit(D, {m!r})", 1e-5)))
        add(C(fe, f"method={m}, rows shuffled",
              f"out = pydial.fit(Comparisons.from_frame(F.sample(frac=1, random_state=3)), {m!r})",
              same_as(f"pydial.fit(D, {m!r})", 1e-6)))
    for cov in ("fisher", "binomial", "cell", "record"):
        for m in ("human", "dial-anc", "dial-ada", "judges"):
            add(C(fe, f"method={m}, cov_type={cov}", f"out = pydial.fit(D, {m!r}, cov_type={cov!r})", fit_ok()))
    add(C(fe, "rank=0", "out = pydial.fit(D, rank=0)", fit_ok()))
    add(C(fe, "rank=2 (K=3)", "out = pydial.fit(D, 'dial-anc', rank=2)", fit_ok()))
    add(C(fe, "rank='auto'", "out = pydial.fit(D, rank='auto')", fit_ok()))
    add(C(fe, "rank=[0, 1]", "out = pydial.fit(D, rank=[0, 1])", fit_ok()))
    add(C(fe, "rank=np.int64(1)", "out = pydial.fit(D, rank=np.int64(1))", fit_ok()))
    add(C(fe, "calibration='W'", "out = pydial.fit(D, 'dial-anc', calibration='W')", fit_ok()))
    add(C(fe, "selection=('endpoint-margin', 2.0)", "out = pydial.fit(D, selection=('endpoint-margin', 2.0))", fit_ok()))
    add(C(fe, "selection dict with tolerance", "out = pydial.fit(D, selection={'rule': 'gacv', 'tolerance': 1e-4})", fit_ok()))
    add(C(fe, "lambda_=[0.5, 5]", "out = pydial.fit(D, lambda_=[0.5, 5])", fit_ok()))
    add(C(fe, "multiples=[0.1, 1]", "out = pydial.fit(D, multiples=[0.1, 1])", fit_ok()))
    add(C(fe, "include_endpoints=False", "out = pydial.fit(D, include_endpoints=False)", fit_ok()))
    add(C(fe, "include_endpoints='anchored'", "out = pydial.fit(D, include_endpoints='anchored')", fit_ok()))
    add(C(fe, "anchored_cov_type='fixed-basis'", "out = pydial.fit(D, 'dial-anc', anchored_cov_type='fixed-basis')", fit_ok()))
    add(C(fe, "cluster_correction=True widens cell intervals",
          "out = pydial.fit(D, 'dial-anc', cluster_correction=True)",
          lambda out, env: ck.require((out.scores.se.values >= pydial_fit(env, "dial-anc").scores.se.values - 1e-12).all(),
                                      "corrected se smaller")))
    add(C(fe, "covariate_effects='shared'", "out = pydial.fit(DC, covariate_effects='shared')", fit_ok("FC")))
    add(C(fe, "human BTL equals statsmodels Logit (scores and Fisher se)", "out = pydial.fit(D, 'human', cov_type='fisher')",
          sm_check))
    add(C(fe, "human BTL on ties data equals statsmodels (ties excluded)", "out = pydial.fit(DT, 'human', cov_type='fisher')",
          lambda out, env: sm_check(out, env, "FT")))
    add(C(fe, "human fit ignores the LLM rows", "out = pydial.fit(Comparisons.from_frame(F[F.judge == 'human']), 'human')",
          same_as("pydial.fit(D, 'human')", 1e-9)))
    add(C(fe, "flipping every display order negates the position effects",
          "f = F.copy(); f['first'] = f['first'].map({'a': 'b', 'b': 'a'}); out = pydial.fit(Comparisons.from_frame(f), 'judges')",
          lambda out, env: ck.require(np.allclose(out.position_effects.b, -pydial_fit(env, "judges").position_effects.b, atol=1e-5),
                                      "b not negated")))
    add(C(fe, "duplicating the table halves the variances",
          "out = pydial.fit(Comparisons.from_frame(pd.concat([F, F.assign(record_id=F.record_id + 10**6)])), 'human', cov_type='fisher')",
          lambda out, env: ck.require(np.allclose(out.scores.se.values * np.sqrt(2), pydial_fit(env, "human", cov_type="fisher").scores.se.values,
                                                  rtol=1e-5), "se not divided by sqrt(2)")))
    add(C(fe, "engine='stan' (dial-anc)", "out = pydial.fit(D, 'dial-anc', engine='stan', seed=1)",
          lambda out, env: ck.same_scores(pydial_fit(env, "dial-anc"), out, tol=2e-3, se=False), timeout=300))
    add(C(fe, "ModelSpec refit", "s = pydial.fit(D, 'dial-anc', rank=0).spec; out = pydial.fit(D, spec=s)",
          same_as("pydial.fit(D, 'dial-anc', rank=0)", 1e-9)))
    # invalid arguments
    bad = [("method='bogus'", "method"), ("method=None", "method"), ("rank=-1", "rank"), ("rank=1.5", "rank"),
           ("rank='x'", "rank"), ("rank=99", "rank"), ("rank=[]", "rank"), ("rank=True", "rank"),
           ("level=0", "level"), ("level=1", "level"), ("level=1.5", "level"), ("level=float('nan')", "level"),
           ("level='0.9'", "level"), ("cov_type='bogus'", "cov_type"), ("ties='bogus'", "ties"),
           ("penalty='ridge'", "penalty"), ("lambda_=-1", "lambda"), ("lambda_=float('nan')", "lambda"),
           ("lambda_=[]", "lambda"), ("lambda_=float('inf')", "lambda"), ("multiples=[0]", "multiples"),
           ("multiples=[-1]", "multiples"), ("multiples='x'", "multiples"), ("selection='bogus'", "selection"),
           ("selection=('endpoint-margin', -1)", "margin", "selection"), ("engine='bogus'", "engine"),
           ("seed='x'", "seed"), ("seed=-1", "seed"), ("seed=1.5", "seed"), ("covariate_effects='bogus'", "covariate_effects"),
           ("include_endpoints='x'", "include_endpoints"), ("calibration='x'", "calibration"),
           ("anchored_cov_type='bogus'", "anchored_cov_type"), ("cluster_correction='yes'", "cluster_correction"),
           ("lambda_=[1, 'a']", "lambda"), ("bogus_kw=1", "bogus_kw")]
    for arg, *names in bad:
        add(E(fe, f"dial-ada with {arg}", f"out = pydial.fit(D, {arg})", *names))
    add(E(fe, "a DataFrame instead of Comparisons", "out = pydial.fit(F)", "Comparisons", "from_frame"))
    add(E(fe, "data=None", "out = pydial.fit(None)", "Comparisons", "data"))
    add(E(fe, "method='human' without human rows", "out = pydial.fit(Comparisons.from_frame(F[F.judge != 'human']), 'human')",
          "human"))
    add(E(fe, "dial-ada without human rows", "out = pydial.fit(Comparisons.from_frame(F[F.judge != 'human']))", "human"))
    add(E(fe, "judges without LLM rows", "out = pydial.fit(Comparisons.from_frame(F[F.judge == 'human']), 'judges')",
          "judge", "LLM"))
    add(C(fe, "a judge that always shows item_a first (one order only)",
          "f = FC.copy(); f.loc[f.judge == 'judge0', 'first'] = 'a'; out = pydial.fit(Comparisons.from_frame(f), 'judges')",
          fit_ok("FC"), expect="either", names=("judge0",)))
    add(E(fe, "a judge whose first-shown item always wins (no finite b)",
          "f = F.copy(); j = f.judge == 'judge0'; f.loc[j, 'winner'] = f.loc[j, 'first']; "
          "out = pydial.fit(Comparisons.from_frame(f), 'judges')", "judge0"))
    add(E(fe, "human comparisons on a disconnected design",
          "f = F[(F.judge != 'human') | F.item_a.isin(['item00', 'item01']) & F.item_b.isin(['item00', 'item01'])]; "
          "out = pydial.fit(Comparisons.from_frame(f), 'human')", "item0", "connect"))
    add(E(fe, "human MLE does not exist (an item always wins)",
          "f = F.copy(); h = f.judge == 'human'; f.loc[h & (f.item_a == 'item00'), 'winner'] = 'a'; "
          "f.loc[h & (f.item_b == 'item00'), 'winner'] = 'b'; out = pydial.fit(Comparisons.from_frame(f), 'human')", "item00"))
    add(C(fe, "the same always-winning item with penalty='firth' is finite",
          "f = F.copy(); h = f.judge == 'human'; f.loc[h & (f.item_a == 'item00'), 'winner'] = 'a'; "
          "f.loc[h & (f.item_b == 'item00'), 'winner'] = 'b'; out = pydial.fit(Comparisons.from_frame(f), 'human', penalty='firth')",
          lambda out, env: ck.scores_ok(out)))
    add(E(fe, "spec and method together", "s = pydial.ModelSpec('dial-anc'); out = pydial.fit(D, 'human', spec=s)",
          "spec", "method"))
    add(C(fe, "rank given to 'human' is ignored with a warning", "out = pydial.fit(D, 'human', rank=2)", fit_ok()))
    add(E(fe, "covariate_test-free data with covariate_effects='shared' and a bad rank",
          "out = pydial.fit(DC, covariate_effects='shared', rank=5)", "rank"))
    add(C(fe, "check=False on a design that cannot be fitted: an error or a status other than ok",
          "f = F[(F.judge != 'human') | F.item_a.isin(['item00', 'item01']) & F.item_b.isin(['item00', 'item01'])]; "
          "out = pydial.fit(Comparisons.from_frame(f), 'human', check=False)",
          truthy("out.status != 'ok'"), expect="either", names=("item", "ident", "singular", "converge")))
    return cs


def pydial_fit(env: dict, method: str, **kw: Any) -> Any:
    return env["pydial"].fit(env["D"], method, **kw)


def sm_check(out: Any, env: dict, frame: str = "F") -> str:
    s, se = ck.statsmodels_btl(env[frame], list(out.items))
    d = np.abs(out.scores.score.to_numpy() - s).max()
    e = np.abs(out.scores.se.to_numpy() - se).max()
    if d > 1e-5 or e > 1e-5:
        raise Wrong(f"differs from statsmodels: scores by {d:.2g}, se by {e:.2g}")
    return ""


def result_cases() -> list[Case]:
    cs: list[Case] = []
    add = cs.append
    R = "r = pydial.fit(D); "
    add(C("DialResult.contrast", "contrast equals the score difference, antisymmetric",
          R + "out = r.contrast('item00', 'item01'); back = r.contrast('item01', 'item00')",
          truthy("abs(out.estimate - (r.scores.score['item00'] - r.scores.score['item01'])) < 1e-10 and "
                 "abs(out.estimate + back.estimate) < 1e-12 and abs(out.win_prob + back.win_prob - 1) < 1e-10 and "
                 "out.ci_low <= out.estimate <= out.ci_high")))
    add(C("DialResult.contrast", "contrast at level=0.5 is narrower", R + "out = r.contrast('item00', 'item02', level=0.5)",
          truthy("out.ci_high - out.ci_low < r.contrast('item00', 'item02').ci_high - r.contrast('item00', 'item02').ci_low")))
    add(E("DialResult.contrast", "unknown item", R + "out = r.contrast('item00', 'nope')", "nope"))
    add(E("DialResult.contrast", "item index instead of name", R + "out = r.contrast(0, 1)", "item", "0"))
    add(C("DialResult.contrast", "an item with itself", R + "out = r.contrast('item00', 'item00')", expect="either",
          check=truthy("out.estimate == 0")))
    for lv in ("0", "1.2", "float('nan')", "'high'"):
        add(E("DialResult.contrast", f"level={lv}", R + f"out = r.contrast('item00', 'item01', level={lv})", "level"))
    add(C("DialResult.conf_int", "Wald intervals score +- z se at level 0.9", R + "out = r.conf_int(0.9)",
          lambda out, env: _wald(out, env, 0.9)))
    add(C("DialResult.conf_int", "position effects", R + "out = r.conf_int(what='position_effects')", expect="either",
          check=truthy("len(out) == 3")))
    add(E("DialResult.conf_int", "what='bogus'", R + "out = r.conf_int(what='bogus')", "what", "bogus"))
    add(E("DialResult.conf_int", "level=-1", R + "out = r.conf_int(-1)", "level"))
    add(E("DialResult.conf_int", "cov_type='bogus'", R + "out = r.conf_int(cov_type='bogus')", "cov_type"))
    add(C("DialResult.conf_int", "cov_type='record' equals with_cov('record')", R + "out = r.conf_int(cov_type='record')",
          truthy("np.allclose(out.ci_low, r.with_cov('record').scores.ci_low)")))
    add(C("DialResult.position_test", "b_0 = b_1 equals the difference of b", R + "out = r.position_test('judge0', 'judge1')",
          truthy("abs(out.difference - (r.position_effects.b['judge0'] - r.position_effects.b['judge1'])) < 1e-10 and 0 <= out.p_value <= 1")))
    add(E("DialResult.position_test", "unknown judge", R + "out = r.position_test('judge0', 'nobody')", "nobody"))
    add(C("DialResult.position_test", "a judge with itself: refused or a NaN test, never a p-value",
          R + "out = r.position_test('judge0', 'judge0')", truthy("np.isnan(out.p_value)"), expect="either",
          names=("judge0", "same", "itself")))
    add(E("DialResult.position_test", "on the human fit", "r = pydial.fit(D, 'human'); out = r.position_test('judge0', 'judge1')",
          "position", "human"))
    add(E("DialResult.position_test", "on dial-nopos", "r = pydial.fit(D, 'dial-nopos'); out = r.position_test('judge0', 'judge1')",
          "position", "nopos"))
    RC = "r = pydial.fit(DC); "
    add(C("DialResult.covariate_test", "judge0's covariate effect is 0", RC + "out = r.covariate_test('judge0')",
          truthy("0 <= out.p_value <= 1")))
    add(C("DialResult.covariate_test", "judge0 against human", RC + "out = r.covariate_test('judge0', against='human')",
          truthy("0 <= out.p_value <= 1")))
    add(E("DialResult.covariate_test", "without covariates", R + "out = r.covariate_test('judge0')", "covariate"))
    add(E("DialResult.covariate_test", "unknown covariate", RC + "out = r.covariate_test('judge0', covariates=['width'])", "width"))
    add(E("DialResult.covariate_test", "unknown judge", RC + "out = r.covariate_test('nobody')", "nobody"))
    add(E("DialResult.covariate_test", "against itself", RC + "out = r.covariate_test('judge0', against='judge0')",
          "judge0", "itself", "same"))
    for cov in ("fisher", "binomial", "cell", "record"):
        add(C("DialResult.with_cov", f"with_cov({cov!r}) keeps the scores, equals a refit",
              R + f"out = r.with_cov({cov!r})", same_as(f"pydial.fit(D, cov_type={cov!r})", 1e-8)))
    add(E("DialResult.with_cov", "bogus", R + "out = r.with_cov('bogus')", "cov_type", "bogus"))
    add(E("DialResult.with_cov", "record on counts data", "r = pydial.fit(Comparisons.from_counts(counts_table(F)), 'dial-anc'); "
          "out = r.with_cov('record')", "record"))
    add(C("DialResult.bootstrap", "B=8 record bootstrap", R + "out = r.bootstrap(B=8, seed=1)",
          lambda out, env: _boot(out)))
    add(C("DialResult.bootstrap", "B=8 by judge-pair cell", "r = pydial.fit(D, 'dial-anc'); out = r.bootstrap(B=8, by='cell', seed=1)",
          expect="either", check=lambda out, env: _boot(out)))
    for arg, nm in (("B=0", "B"), ("B=-3", "B"), ("B=2.5", "B"), ("B=8, by='bogus'", "by"), ("B=8, level=2", "level"),
                    ("B=8, n_jobs=0", "n_jobs"), ("B=8, seed='x'", "seed")):
        add(E("DialResult.bootstrap", arg, R + f"out = r.bootstrap({arg})", nm))
    add(E("DialResult.bootstrap", "on counts data (no records)",
          "r = pydial.fit(Comparisons.from_counts(counts_table(F)), 'human'); out = r.bootstrap(B=5)", "record"))
    add(C("DialResult.loo_cv", "dial-ada (rank 0, 3 weights)",
          "r = pydial.fit(D, rank=0, multiples=[0.1, 1, 10]); out = r.loo_cv(D)",
          truthy("len(out) >= 1 and np.isfinite(out.select_dtypes('number').to_numpy(float)).any()"), timeout=300))
    add(E("DialResult.loo_cv", "other data", "r = pydial.fit(D, rank=0); out = r.loo_cv(DT)", "data"))
    add(E("DialResult.loo_cv", "on a human fit", "r = pydial.fit(D, 'human'); out = r.loo_cv(D)", "dial-ada", "method"))
    add(E("DialResult.loo_cv", "a DataFrame", "r = pydial.fit(D, rank=0); out = r.loo_cv(F)", "Comparisons"))
    for m in METHODS:
        add(C("DialResult.summary", f"summary of {m}", f"r = pydial.fit(D, {m!r}); out = r.summary()",
              truthy(f"isinstance(out, str) and {m!r} in out.lower() and 'nan' not in out.lower()")))
    add(C("DialResult.summary", "summary of a ties fit", "r = pydial.fit(DT, ties='davidson'); out = r.summary()",
          truthy("isinstance(out, str) and len(out) > 100")))
    add(C("DialResult.win_probabilities", "a probability matrix with p_ij + p_ji = 1", R + "out = r.win_probabilities()",
          truthy("np.allclose(out.to_numpy() + out.to_numpy().T, 1) or np.allclose(np.nan_to_num(out.to_numpy() + out.to_numpy().T, nan=1), 1)")))
    return cs


def _wald(out: Any, env: dict, level: float) -> str:
    from scipy.stats import norm

    r = env["r"]
    z = norm.ppf(0.5 + level / 2)
    ck.require(np.allclose(out.iloc[:, 0], r.scores.score), "conf_int estimates are not the scores")
    lo = r.scores.score - z * r.scores.se
    ck.require(np.allclose(out.iloc[:, -2], lo, atol=1e-10), "conf_int lower bound is not score - z se")
    return ""


def _boot(out: Any) -> str:
    t = getattr(out, "scores", None)
    ck.require(t is not None and len(t) == 5, "bootstrap result has no scores table of 5 items")
    num = t.select_dtypes("number").to_numpy(float)
    ck.require(np.isfinite(num).any(), "bootstrap table all NaN")
    return ""


def study_cases() -> list[Case]:
    cs: list[Case] = []
    add = cs.append
    cd = "pydial.check_design"
    add(C(cd, "identifiable design", "out = pydial.check_design(D)", truthy("out.ok")))
    for m in METHODS:
        add(C(cd, f"method={m}", f"out = pydial.check_design(D, method={m!r})", truthy("out.ok")))
    add(C(cd, "rank 5 with K=3 is not identifiable", "out = pydial.check_design(D, rank=5)", expect="either",
          check=truthy("not out.ok")))
    add(C(cd, "disconnected human design", "f = F[(F.judge != 'human') | F.item_a.isin(['item00', 'item01']) & "
          "F.item_b.isin(['item00', 'item01'])]; out = pydial.check_design(Comparisons.from_frame(f), method='human')",
          truthy("not out.ok")))
    add(E(cd, "method='bogus'", "out = pydial.check_design(D, method='bogus')", "method"))
    add(E(cd, "a DataFrame", "out = pydial.check_design(F)", "Comparisons"))
    add(E(cd, "rank=-2", "out = pydial.check_design(D, rank=-2)", "rank"))

    sm = "pydial.simulate"
    add(C(sm, "row counts and centered truth", "s = pydial.simulate(N=6, K=2, n_llm=300, n_human=100, seed=4); out = s",
          truthy("len(out.frame) == 400 and abs(out.truth.s_h.sum()) < 1e-9 and out.comparisons.n_human == 100")))
    add(C(sm, "same seed, same data", "a = pydial.simulate(n_llm=200, n_human=50, seed=7).frame; out = pydial.simulate(n_llm=200, n_human=50, seed=7).frame",
          truthy("out.equals(a)")))
    add(C(sm, "both orders", "out = pydial.simulate(n_llm=200, n_human=50, seed=7, both_orders=True)",
          truthy("(out.frame[out.frame.judge != 'human'].groupby(['record_id', 'judge'])['first'].nunique() == 2).all()")))
    add(C(sm, "rao-kupper ties", "out = pydial.simulate(n_llm=300, n_human=80, seed=7, tie_rate=0.2, ties='rao-kupper')",
          truthy("(out.frame.winner == 'tie').any()")))
    add(C(sm, "misaligned target, overdispersion, sigma_pos", "out = pydial.simulate(n_llm=300, n_human=80, seed=7, "
          "target='misaligned', behavior={'overdispersion': 1, 'sigma_pos': 0.5})", truthy("len(out.frame) == 380")))
    add(C(sm, "covariates with beta", "out = pydial.simulate(n_llm=300, n_human=80, seed=7, covariates=['len', 'lists'], beta=0.3)",
          truthy("'len_a' in out.frame.columns and 'lists_b' in out.frame.columns")))
    add(C(sm, "position_effects given", "out = pydial.simulate(K=2, n_llm=300, n_human=80, seed=7, behavior={'position_effects': [1.0, -0.5]})",
          truthy("np.allclose(out.truth.b, [1.0, -0.5])")))
    for arg, *nm in (("N=1", "N"), ("N=0", "N"), ("K=0", "K"), ("n_llm=-1", "n_llm"), ("n_human=-5", "n_human"),
                    ("N=4, rank=3", "rank"), ("behavior={'p_first': 1.5}", "p_first"), ("tie_rate=1", "tie_rate"),
                    ("tie_rate=0.1, ties='bogus'", "ties"), ("seed='x'", "seed"), ("target='bogus'", "target"),
                    ("behavior={'position_effects': [1.0]}", "position_effects"), ("covariates=['x'], beta=[1, 2, 3, 4, 5, 6, 7]", "beta"),
                    ("behavior={'overdispersion': -1}", "overdispersion"), ("N=2.5", "N"), ("both_orders=True, n_llm=3", "n_llm", "both_orders"),
                    ("N=10**6, K=10**4", "memory", "N", "K"), ("behavior={'self_preference': {'judge0': ['nope']}, 'self_effect': 1}", "nope"),
                    ("bogus=1", "bogus")):
        add(E(sm, arg, f"out = pydial.simulate({arg})", *nm))
    add(C(sm, "n_human=0 (LLM only)", "out = pydial.simulate(n_llm=200, n_human=0, seed=1)",
          truthy("out.comparisons.n_human == 0")))

    pl = "pydial.plan"
    P = "r = pydial.fit(D, 'dial-anc'); "
    add(C(pl, "theory over 3 budgets", P + "out = pydial.plan(r, budgets=[100, 400, 1600], data=D)",
          truthy("len(out) >= 3 and np.isfinite(out.select_dtypes('number').to_numpy(float)).all()")))
    add(C(pl, "excess risk of human decreases with the budget", P + "out = pydial.plan(r, budgets=[100, 400, 1600], data=D)",
          lambda out, env: _decreasing(out)))
    add(C(pl, "simulate mode, 3 draws", P + "out = pydial.plan(r, budgets=[100, 200], data=D, method='simulate', n_sim=3)",
          truthy("len(out) >= 2"), timeout=300))
    for arg, nm in (("budgets=[]", "budgets"), ("budgets=[-1]", "budgets"), ("budgets=['x']", "budgets"),
                    ("target='nope - item01'", "nope"), ("k=0", "k"), ("k=99", "k"), ("method='bogus'", "method"),
                    ("design='bogus'", "design"), ("level=1", "level"), ("n_sim=0, method='simulate'", "n_sim"),
                    ("alpha=2", "alpha"), ("methods=['bogus']", "bogus")):
        add(E(pl, arg, P + f"out = pydial.plan(r, data=D, {arg})", nm))
    add(E(pl, "pilot data of another fit", P + "out = pydial.plan(r, data=DT)", "data"))
    add(E(pl, "a DataFrame as result", "out = pydial.plan(F)", "DialResult", "result"))

    nx = "pydial.next_pairs"
    add(C(nx, "5 pairs of known items", P + "out = pydial.next_pairs(r, 5, data=D)",
          truthy("out.n.sum() == 5 and set(out.item_a).union(out.item_b) <= set(D.items) and (out.item_a != out.item_b).all()")))
    for obj in ("ranking", "D"):
        add(C(nx, f"objective={obj}", P + f"out = pydial.next_pairs(r, 3, {obj!r}, data=D)", truthy("out.n.sum() == 3")))
    add(C(nx, "costs per pair", P + "out = pydial.next_pairs(r, 3, data=D, costs=1.0)", expect="either",
          check=truthy("out.n.sum() == 3")))
    for arg, nm in (("0", "n"), ("-1", "n"), ("2.5", "n"), ("3, 'bogus'", "objective"), ("3, target=('nope', 'item00')", "nope"),
                    ("3, costs=-1", "costs"), ("3, 'ranking', k=0", "k")):
        add(E(nx, f"n={arg}", P + f"out = pydial.next_pairs(r, {arg}, data=D)", nm))

    jd = "pydial.judge_diagnostics"
    add(C(jd, "rates within [0, 1], intervals around them", "out = pydial.judge_diagnostics(D, n_boot=50, seed=1)",
          lambda out, env: _rates(out)))
    add(C(jd, "ties data", "out = pydial.judge_diagnostics(DT, n_boot=20, seed=1)", expect="either",
          check=lambda out, env: _rates(out)))
    add(C(jd, "the test panel", "out = pydial.judge_diagnostics(pydial.read_judge_responses(FIX + '/panel'), n_boot=20, seed=1)",
          lambda out, env: _rates(out)))
    for arg, nm in (("n_boot=-1", "n_boot"), ("n_boot=2.5", "n_boot"), ("level=2", "level"), ("seed='x'", "seed")):
        add(E(jd, arg, f"out = pydial.judge_diagnostics(D, {arg})", nm))
    add(E(jd, "a DataFrame", "out = pydial.judge_diagnostics(F)", "Comparisons"))
    add(E(jd, "counts data (no records)", "out = pydial.judge_diagnostics(Comparisons.from_counts(counts_table(F)))", "record"))

    rb = "pydial.studies.robustness.run"
    RB = "from pydial.studies import robustness; "
    add(C(rb, "display sweep, one split, human and dial-anc",
          RB + "out = robustness.run(DR, ['display'], splits=1, methods=['human', 'dial-anc'])",
          truthy("len(out) >= 2"), expect="either", timeout=300))
    add(C(rb, "pure_position sweep, one split, out folder, resumed",
          RB + "out = robustness.run(DR, ['pure_position'], splits=1, methods=['human'], out='rob'); "
          "again = robustness.run(DR, ['pure_position'], splits=1, methods=['human'], out='rob')",
          truthy("len(out) >= 1 and len(again) == len(out)"), expect="either", timeout=300))
    for arg, nm in (("['bogus']", "bogus"), ("['display'], splits=0", "splits"), ("['display'], methods=['bogus']", "bogus"),
                    ("['display'], train_frac=1.5", "train_frac"), ("['display'], judges=['nobody']", "nobody"),
                    ("['display'], splits=1, out=FIX + '/data.csv'", "data.csv"), ("['display'], rank=-1", "rank")):
        add(C(rb, arg, RB + f"out = robustness.run(DR, {arg})", _rob_rows, expect="error", names=(nm,), timeout=300))
    add(E(rb, "counts data (no records)", RB + "out = robustness.run(Comparisons.from_counts(counts_table(F)), ['display'], splits=1)",
          "record", timeout=300))
    return cs


def _rob_rows(out: Any, env: dict) -> str:
    bad = out[out["status"] != "ok"]
    return (f"the run returned {len(out)} rows, {len(bad)} with status {sorted(set(bad['status']))}: "
            + (str(bad["message"].iloc[0])[:80] if len(bad) else ""))


def _decreasing(out: Any) -> str:
    num = out.select_dtypes("number")
    ck.require(len(out) > 0, "empty plan")
    return ""


def _rates(out: Any) -> str:
    rates = [c for c in out.columns if c.endswith("_rate") or c.endswith("inconsistency")]
    ck.require(rates, f"no rate columns in {list(out.columns)}")
    v = out[rates].to_numpy(float)
    ck.require(((v[np.isfinite(v)] >= 0) & (v[np.isfinite(v)] <= 1)).all(), "a rate outside [0, 1]")
    return ""


def stan_cases() -> list[Case]:
    cs: list[Case] = []
    add = cs.append
    add(C("pydial.stan.standata", "data of dial_sample", "from pydial.stan import standata; out = standata(D)",
          truthy("isinstance(out, dict) and out.get('N') == 5")))
    add(E("pydial.stan.standata", "unknown program", "from pydial.stan import standata; out = standata(D, 'bogus')", "bogus"))
    add(E("pydial.stan.standata", "rank=-1", "from pydial.stan import standata; out = standata(D, rank=-1)", "rank"))
    add(C("pydial.posterior", "human BTL, 1 chain, 100 draws",
          "out = pydial.posterior(Comparisons.from_frame(F[F.judge == 'human']), 'human', chains=1, draws=100, warmup=100, seed=1)",
          lambda out, env: None, timeout=600))
    add(E("pydial.posterior", "draws=0", "out = pydial.posterior(D, 'human', chains=1, draws=0, warmup=10)", "draws", timeout=300))
    add(E("pydial.posterior", "backend='bogus'", "out = pydial.posterior(D, 'human', chains=1, draws=10, backend='bogus')",
          "backend", timeout=300))
    add(C("pydial.compare_intervals", "human fit vs its posterior",
          "d = Comparisons.from_frame(F[F.judge == 'human']); r = pydial.fit(d, 'human'); "
          "p = pydial.posterior(d, 'human', chains=1, draws=200, warmup=200, seed=1); out = pydial.compare_intervals(r, p)",
          lambda out, env: None, timeout=600))
    add(E("pydial.compare_intervals", "posterior of another method",
          "r = pydial.fit(D, 'dial-anc'); "
          "p = pydial.posterior(D, 'human', chains=1, draws=100, warmup=100, seed=1); out = pydial.compare_intervals(r, p)",
          "method", "estimand", timeout=600))
    return cs


def all_cases() -> list[Case]:
    return reader_cases() + fit_cases() + result_cases() + study_cases() + stan_cases()
