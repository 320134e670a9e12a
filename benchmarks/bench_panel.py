"""Time and peak memory of :func:`pydial.read_judge_responses` on a generated judge-panel collection.

:func:`write_collection` writes ``results/<judge>/responses.jsonl`` files in the released
format of the DIAL collection (every field of a real line, about 1.7 kB each): ``K``
judges, ``records`` records, both display orders, verdicts from the order-effect BTL model
(normal scores, judge position effects ``b_k``, 5% ties), a few unparseable verdicts and
missing swapped lines.  The reader then runs in a fresh process; the line gives the wall
time, lines per second, and the peak resident memory (``VmHWM``) above the interpreter
with pydial imported.  The default, 22 judges x 9,320 records x 2 orders, is about 410k
lines (0.7 GB), the size of the paper's collection.

Usage::

    python benchmarks/bench_panel.py [--judges 22] [--records 9320] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

MODELS = [f"model-{k:02d}" for k in range(20)]


def _line(record: str, judge: str, a: str, b: str, human: str, a_first: bool, choice: str) -> str:
    """One response line with every field of the released format."""
    shown = ("model_a", "model_b") if a_first else ("model_b", "model_a")
    verdict = {"a": shown[0], "b": shown[1], "c": "tie", "d": "both_bad"}.get(choice)
    return json.dumps({
        "record_id": record, "dataset_index": 0, "evaluation_session_id": str(uuid.uuid4()), "evaluation_order": 1,
        "human_winner": human, "model_a": a, "model_b": b, "language": "English", "is_code": False,
        "main_category": None, "judge": judge, "judge_model": judge + ":latest", "judge_provider": "openai_chat",
        "api_id": "ollama-local", "api_base": "http://127.0.0.1:11434", "account_id": "ollama-local",
        "inference": {"temperature": 0.0, "max_output_tokens": 16, "reasoning": {"mode": "disabled", "effort": None}},
        "provider_options": {}, "config_fingerprint": "ccb070473f20a2b1", "experiment_fingerprint": "ccb070473f20a2b1",
        "routing_fingerprint": "04fb47d9fdef1bbb", "generation_seed": 0, "prompt_version": "position_and_anonymity",
        "prompt_spec_fingerprint": "41d9716bc333a1c650d0bfebadbb0b55106d19e4224327d0632d55e45e6b47bb",
        "prompt_hash": "f6b4d4b491c9c5c83188434ac9a5ec449e79507cf3eb3d706d082fc494759bdc",
        "condition_id": "original_anonymous" if a_first else "swapped_anonymous", "response_order_default": a_first,
        "is_anonymous": True, "displayed_a_original_side": shown[0], "displayed_b_original_side": shown[1],
        "query_index": 0, "choice": choice if verdict else None, "canonical_verdict": verdict, "confidence": 4,
        "raw_response": f"{choice} 4", "usage": {"prompt_tokens": 898, "completion_tokens": 4, "total_tokens": 902},
        "cost": None, "provider_response_id": "chatcmpl-526", "attempts": 1, "latency_seconds": 4.21,
        "completed_at": "2026-08-09T08:35:06.017460+00:00", "source_run": "local-run"}, separators=(",", ":"))


def write_collection(folder: Path, K: int, records: int, seed: int = 0) -> int:
    """Write a ``K``-judge collection of ``records`` records under ``folder/results``; return the lines written."""
    import numpy as np

    rng = np.random.default_rng(seed)
    s = rng.normal(size=len(MODELS))
    b = rng.normal(0.0, 0.8, size=K)
    pairs = np.array([rng.choice(len(MODELS), 2, replace=False) for _ in range(records)])
    ids = [str(uuid.UUID(int=int(rng.integers(1 << 62)) * 4 + r % 4)) for r in range(records)]
    humans = rng.choice(["model_a", "model_b", "tie", "both_bad"], size=records, p=[0.36, 0.34, 0.1, 0.2])
    n = 0
    for k in range(K):
        judge = f"ollama-judge-{k:02d}-direct"
        path = folder / "results" / judge / "responses.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as fh:
            for r in range(records):
                a, c = MODELS[pairs[r, 0]], MODELS[pairs[r, 1]]
                d = s[pairs[r, 0]] - s[pairs[r, 1]]
                for a_first in (True, False):
                    if not a_first and rng.random() < 0.002:  # a missing swapped query
                        continue
                    u = rng.random()
                    p_first = 1 / (1 + np.exp(-((d if a_first else -d) + b[k])))
                    choice = "c" if u < 0.05 else "x" if u < 0.051 else "a" if rng.random() < p_first else "b"
                    fh.write(_line(ids[r], judge, a, c, str(humans[r]), a_first, choice) + "\n")
                    n += 1
    return n


CHILD = """
import json, time, sys
import pydial
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1e6
open("/proc/self/clear_refs", "w").write("5")
base = rss("VmHWM")
t = time.perf_counter()
data = pydial.read_judge_responses(sys.argv[1])
wall = time.perf_counter() - t
print(json.dumps({"wall": wall, "peak_above": rss("VmHWM") - base, "peak": rss("VmHWM"), "K": data.K,
                  "n_llm": data.n_llm, "n_human": data.n_human, "lines": data.summary().loc["panel: lines read", "value"]}))
"""


def main() -> None:
    """Write the collection, read it in a fresh process and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--judges", type=int, default=22)
    ap.add_argument("--records", type=int, default=9320)
    ap.add_argument("--keep", type=Path, help="write the collection here and keep it (default: a temporary folder)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        lines = write_collection(folder, args.judges, args.records)
        size = sum(p.stat().st_size for p in folder.rglob("*.jsonl")) / 1e9
        out = subprocess.run([sys.executable, "-c", CHILD, str(folder / "results")], capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{args.judges} judges, {lines:,} lines ({size:.2f} GB): {r['wall']:.1f} s, "
              f"{lines / r['wall']:,.0f} lines/s, peak RSS {r['peak']:.2f} GB ({r['peak_above']:.2f} GB above the "
              f"interpreter); K={r['K']}, n_LLM={r['n_llm']:,}, n_H={r['n_human']:,}")


if __name__ == "__main__":
    main()
