"""Time and peak memory of reading judgments into :class:`pydial.Comparisons`.

One long table per size is generated once (:func:`long_table`: uniform random pairs,
Bernoulli outcomes from normal scores, K LLM judges plus about 1% human rows, random
display order; names as text) and written as Parquet (and, with ``--files``, as CSV
and gzip CSV).  Every reader then runs in a fresh process:

* ``from_frame``: :meth:`Comparisons.from_frame` of the table, read from the Parquet
  file with :func:`pandas.read_parquet` before the clock starts;
* ``from_counts``: :meth:`Comparisons.from_counts` of the table aggregated per
  ``(judge, item_a, item_b, first)`` with pandas before the clock starts;
* ``from_parquet`` / ``from_csv``: the whole file row by row (record ids kept);
* ``read_comparisons``: the file aggregated chunk by chunk (Parquet, CSV, gzip CSV);
* ``duckdb`` (when installed): the same aggregation as one SQL ``GROUP BY`` over the
  Parquet file, without any validation, as a reference for a columnar engine.

Each line gives the wall time, the CPU time of the process, the peak resident memory
above the input table (the peak is reset after the table is loaded, through
``/proc/self/clear_refs``) and in all, and the 1-minute load average (the machine is
shared).  ``--big ROWS`` writes a Parquet file of ``ROWS`` rows in pieces (never held
whole) and reads it with ``read_comparisons``.

Usage::

    python benchmarks/bench_ingest.py [--sizes 2000000:300,10000000:1000] [--files] [--big 50000000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARQUET_OPS = ("from_frame", "from_counts", "from_parquet", "read_comparisons", "duckdb")
TEXT_OPS = ("from_csv", "read_comparisons")


def long_table(N: int, rows: int, K: int = 10, human: float = 0.01, seed: int = 0, offset: int = 0, text: str = "str"):
    """A long table of ``rows`` judgments of ``N`` items (``K`` LLM judges and people).

    Uniform random pairs ``a != b``, ``P(a wins) = logistic(s_a - s_b)`` with standard
    normal scores ``s`` (fixed by ``seed``, not by ``offset``), first shown at random;
    about ``human`` of the rows are the human judge's.  ``K = 0`` gives people only.
    ``text`` is the dtype of the text columns: ``"str"`` (pandas' Arrow strings) or
    ``"object"`` (Python strings).
    """
    import numpy as np
    import pandas as pd

    s = np.random.default_rng(seed).normal(size=N)
    rng = np.random.default_rng([seed, offset])
    names = np.array([f"model-{k:04d}" for k in range(N)], dtype=object)
    judges = np.array([f"judge-{k:02d}" for k in range(K)] + ["human"], dtype=object)
    a = rng.integers(0, N, rows)
    b = (a + rng.integers(1, N, rows)) % N
    g = np.full(rows, K) if K == 0 else np.where(rng.random(rows) < human, K, rng.integers(0, K, rows))
    win = np.where(rng.random(rows) < 1 / (1 + np.exp(s[b] - s[a])), "a", "b")
    first = np.where(rng.random(rows) < 0.5, "a", "b")
    return pd.DataFrame({"record_id": np.arange(offset, offset + rows), "judge": pd.array(judges[g], dtype=text),
                         "item_a": pd.array(names[a], dtype=text), "item_b": pd.array(names[b], dtype=text),
                         "first": pd.array(first, dtype=text), "winner": pd.array(win, dtype=text)})


def scores(N: int, seed: int = 0):
    """The true scores of :func:`long_table`."""
    import numpy as np

    return np.random.default_rng(seed).normal(size=N)


# ------------------------------------------------------------ child side
def peak_reset() -> None:
    """Reset the peak resident memory of this process (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def mem_gb(field: str) -> float:
    """``VmRSS`` or ``VmHWM`` (peak) of this process, in GB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / 1e9
    raise RuntimeError(field)


def child(spec: dict) -> dict:
    """Run one reader of ``spec`` in this (fresh) process and measure it."""
    import pandas as pd

    import pydial

    path, op = spec["path"], spec["op"]
    table = None
    if op == "from_frame":
        table = pd.read_parquet(path)
        if spec.get("text") == "object":
            table = table.astype({c: object for c in ("judge", "item_a", "item_b", "first", "winner")})
    elif op == "from_counts":
        f = pd.read_parquet(path)
        f["first"] = f["first"].where(f["judge"] != "human", "")
        w = f["winner"]
        table = (f.assign(wins_a=w.eq("a").astype("int64"), wins_b=w.eq("b").astype("int64"),
                          ties=w.eq("tie").astype("int64"), both_bad=w.eq("both_bad").astype("int64"))
                 .groupby(["judge", "item_a", "item_b", "first"], as_index=False)[["wins_a", "wins_b", "ties", "both_bad"]]
                 .sum())
        del f, w
    import gc

    gc.collect()
    base = mem_gb("VmRSS")
    peak_reset()
    t0, c0 = time.perf_counter(), time.process_time()
    if op == "from_frame":
        data = pydial.Comparisons.from_frame(table)
    elif op == "from_counts":
        data = pydial.Comparisons.from_counts(table)
    elif op == "from_parquet":
        data = pydial.Comparisons.from_parquet(path)
    elif op == "from_csv":
        data = pydial.Comparisons.from_csv(path)
    elif op == "read_comparisons":
        data = pydial.read_comparisons(path)
    elif op == "duckdb":
        import duckdb

        data = duckdb.sql(f"SELECT judge, item_a, item_b, first, winner, count(*) AS n FROM '{path}' "
                          "GROUP BY ALL").df()
    else:
        raise ValueError(op)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = len(data) if op == "duckdb" else data.n_llm + data.n_human
    return {"op": op, "file": Path(path).name, "wall": wall, "cpu": cpu, "peak_above": mem_gb("VmHWM") - base,
            "peak": mem_gb("VmHWM"), "input": base, "n": n, "load": os.getloadavg()[0]}


def run_child(spec: dict) -> dict:
    """Run :func:`child` in a fresh interpreter."""
    code = f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import bench_ingest as b; " \
           f"print(json.dumps(b.child(json.loads({json.dumps(json.dumps(spec))}))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode:
        return {"op": spec["op"], "file": Path(spec["path"]).name, "error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_files(N: int, rows: int, K: int, folder: Path, files: bool) -> list[Path]:
    """Write the table of ``(N, rows, K)`` as Parquet (and CSV, gzip CSV with ``files``), in a fresh process."""
    stem = folder / f"long_{N}_{rows}_{K}"
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); import bench_ingest as b; "
            f"t = b.long_table({N}, {rows}, K={K}); t.to_parquet('{stem}.parquet', index=False)")
    if files:
        code += f"; t.to_csv('{stem}.csv', index=False); t.to_csv('{stem}.csv.gz', index=False)"
    subprocess.run([sys.executable, "-c", code], check=True)
    return [Path(f"{stem}.parquet")] + ([Path(f"{stem}.csv"), Path(f"{stem}.csv.gz")] if files else [])


def write_big(rows: int, N: int, path: Path, piece: int = 5_000_000) -> None:
    """Write a Parquet file of ``rows`` rows piece by piece (never the whole table in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    for lo in range(0, rows, piece):
        t = pa.Table.from_pandas(long_table(N, min(piece, rows - lo), offset=lo), preserve_index=False)
        writer = writer or pq.ParquetWriter(path, t.schema)
        writer.write_table(t)
    assert writer is not None
    writer.close()


def show(r: dict) -> None:
    """Print one measurement."""
    if "error" in r:
        print(f"  {r['op']:18s} {r['file']:28s} failed: {r['error']}")
        return
    print(f"  {r['op']:18s} {r['file']:28s} {r['wall']:7.2f} s wall {r['cpu']:7.2f} s cpu  peak +{r['peak_above']:.2f} GB "
          f"(in all {r['peak']:.2f} GB, input {r['input']:.2f} GB)  load {r['load']:.2f}", flush=True)


def main() -> None:
    """Generate the files and time every reader on them."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="2000000:300,10000000:1000", help="ROWS:N pairs")
    p.add_argument("--judges", type=int, default=10, help="LLM judges K (0: people only, as in bench_peers.py)")
    p.add_argument("--text", choices=("str", "object"), default="str", help="dtype of the text columns of from_frame's table")
    p.add_argument("--files", action="store_true", help="also write and read CSV and gzip CSV")
    p.add_argument("--ops", default=",".join(PARQUET_OPS + TEXT_OPS[:1]))
    p.add_argument("--big", type=int, default=0, help="rows of a Parquet file read only by read_comparisons")
    p.add_argument("--dir", default=None, help="folder for the files (default: a temporary one)")
    args = p.parse_args()
    ops = args.ops.split(",")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        for size in filter(None, args.sizes.split(",")):
            rows, N = (int(x) for x in size.split(":"))
            who = f"K {args.judges} (+1% human rows)" if args.judges else "people only"
            print(f"rows {rows:,}, N {N}, {who}; load {os.getloadavg()[0]:.2f}", flush=True)
            paths = write_files(N, rows, args.judges, folder, args.files)
            for path in paths:
                for op in ops:
                    if op in (PARQUET_OPS if path.suffix == ".parquet" else TEXT_OPS):
                        show(run_child({"op": op, "path": str(path), "text": args.text}))
        if args.big:
            path = folder / f"big_{args.big}.parquet"
            t0 = time.perf_counter()
            write_big(args.big, 300, path)
            print(f"rows {args.big:,}, N 300: wrote {path.stat().st_size / 1e9:.2f} GB of Parquet in "
                  f"{time.perf_counter() - t0:.0f} s; load {os.getloadavg()[0]:.2f}", flush=True)
            show(run_child({"op": "read_comparisons", "path": str(path)}))
            if "duckdb" in ops:
                show(run_child({"op": "duckdb", "path": str(path)}))


if __name__ == "__main__":
    main()
