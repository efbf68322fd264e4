#!/usr/bin/env python3
"""The results store alone under a run's write pattern: resting and peak RSS per 1,000 cases.

No litellm and no HTTP, so DuckDB's share of a long run's memory shows on its own, in
minutes instead of an hour. Each case writes what `abtest run` writes for generations and
deterministic checks (judges: []): two llm_calls rows with their response_cache rows, two
generations with their rendered prompts, and 16 check rows, from 8 threads as the runner's
workers do. The peak (VmHWM) is reset before every 1,000 cases, so each line's peak belongs
to those cases alone; a line is printed every 2,000 cases and whenever the peak rose more
than 8 MB above resting.

    python scripts/bench_store_memory.py --n 30000
    python scripts/bench_store_memory.py --n 30000 --row-group-size 8192
    python scripts/bench_store_memory.py --n 30000 --set max_vacuum_tasks=0
    python scripts/bench_store_memory.py --n 30000 --trim-every 0   # no page-cache trims
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHECKS = ("json", "citations_present", "citations_resolve", "banned_phrases", "length",
          "must_say", "must_not_say", "snapshot")
SYSTEM = "You answer questions using only the context. Cite chunks as [id]. " * 3
ANSWER = "Fact number 1 says that 1 is a number. [c1-0]"


def _status() -> tuple[int, int]:
    """(VmRSS, VmHWM) in MB."""
    d = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(d["VmRSS"].split()[0]) // 1024, int(d["VmHWM"].split()[0]) // 1024


def _write_case(store, run_id: str, i: int) -> None:
    cid = f"q{i:06d}"
    ctx = "\n\n".join(f"[c{i}-{j}] Fact number {i}.{j} says that {i} is a number." for j in range(3))
    rows, checks = [], []
    for v in "AB":
        msgs = [{"role": "system", "content": SYSTEM + v},
                {"role": "user", "content": f"Context:\n{ctx}\n\nQuestion: What is fact number {i}?"}]
        h = hashlib.sha256(f"{cid}{v}".encode()).hexdigest()
        store.log_call({"call_hash": h, "run_id": run_id, "purpose": f"generate:{v}", "case_id": cid,
                        "model_requested": "openai/bench-gen", "attempt": 1, "latency_ms": 1.0},
                       cache={"call_hash": h, "model_requested": "openai/bench-gen", "content": ANSWER,
                              "prompt_tokens": 80, "completion_tokens": 12})
        rows.append({"run_id": run_id, "case_id": cid, "variant": v,
                     "context_sha256": hashlib.sha256(ctx.encode()).hexdigest(), "prompt_sha256": h,
                     "messages_json": json.dumps(msgs), "answer": ANSWER, "call_hash": h,
                     "model_requested": "openai/bench-gen", "model_resolved": "bench-gen",
                     "latency_ms": 1.0, "prompt_tokens": 80, "overflow": False})
        checks.append((run_id, cid, v, [{"name": n, "passed": True, "detail": "", "data": {"n": 1}}
                                        for n in CHECKS]))
    store.put_generations(rows, checks)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30_000)
    ap.add_argument("--row-group-size", type=int, help="override store.ROW_GROUP_SIZE")
    ap.add_argument("--trim-every", type=int, help="override store.TRIM_EVERY (0: no trims)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a DuckDB setting for the store's connection (repeatable); a "
                         "memory_limit is reset by the first trim, so pair it with --trim-every 0")
    args = ap.parse_args()
    import abtest.store.writer as st
    from abtest.store import Store

    if args.row_group_size:
        st.ROW_GROUP_SIZE = args.row_group_size
    if args.trim_every is not None:
        st.TRIM_EVERY = args.trim_every
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "abtest.duckdb")
        for item in args.set:
            name, value = item.split("=", 1)
            store.con.execute(f"SET {name} = ?", [value])
        run_id = "20261203-170000-abcdef"
        store.create_run({"run_id": run_id, "fixture_name": "bench", "n_cases": args.n})
        print(f"row groups of {st.ROW_GROUP_SIZE:,} rows, checkpoint threshold "
              f"{store.con.execute('SELECT current_setting(?)', ['checkpoint_threshold']).fetchone()[0]}, "
              f"page-cache trim every {st.TRIM_EVERY:,} writes" + "".join(f", {s}" for s in args.set),
              flush=True)
        t0, top = time.monotonic(), 0
        with ThreadPoolExecutor(8) as pool:
            for k in range(0, args.n, 1000):
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # reset VmHWM to the current RSS
                list(pool.map(lambda i: _write_case(store, run_id, i), range(k, min(args.n, k + 1000))))
                rss, hwm = _status()
                top = max(top, hwm)
                if (k // 1000) % 2 == 1 or hwm - rss > 8:
                    print(f"  {k + 1000:>7,} cases  RSS {rss} MB  peak in these 1,000 {hwm} MB "
                          f"(+{hwm - rss})", flush=True)
        cache = store.query("SELECT tag, memory_usage_bytes >> 20 AS mb FROM duckdb_memory() "
                            "WHERE memory_usage_bytes >= 1048576 ORDER BY 2 DESC")
        store.close()
        print("DuckDB's buffer pool at the end: "
              + ", ".join(f"{r['tag']} {r['mb']} MB" for r in cache))
        print(f"{args.n:,} cases in {time.monotonic() - t0:.0f} s; highest peak {top} MB, "
              f"resting at the end {rss} MB")
