#!/usr/bin/env python3
"""abtest's overhead against a provider with fixed latency, as ratios measured in one run.

theoretical minimum = provider requests × latency / concurrency
in-flight ratio     = (last response − first request) / theoretical
whole-process ratio = (process start → exit) / theoretical

Also prints LLM calls per case and the cache check: re-running with only B changed
must make 0 provider calls for A's side.

    python scripts/bench_overhead.py --n 40 --latency 0.2 --concurrency 4
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

from benchlib import make_project, responder
from fake_llm_server import FakeLLMServer


def abtest(*args, cwd):
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "abtest.cli", *args], cwd=cwd, capture_output=True,
                         text=True)
    if out.returncode != 0:
        sys.exit(f"abtest {' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    srv = FakeLLMServer(latency=args.latency, responder=responder, max_seconds=3600,
                        keep_alive=True)
    url = srv.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            proj = make_project(Path(tmp), args.n, url, args.concurrency)
            run = ["run", "--fixture", "fixtures/bench", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]
            out, wall = abtest(*run, cwd=proj)
            requests = len(srv.requests)
            first = srv.first_request_at
            last = srv.last_request_at + args.latency  # the last request's response
            theo = requests * args.latency / args.concurrency
            run_id = out.stdout.strip().splitlines()[-1]
            rep = json.loads(abtest("report", run_id, "--format", "json", cwd=proj)[0].stdout)
            print(f"N = {args.n} cases, latency {args.latency} s, concurrency {args.concurrency}")
            print(f"provider requests: {requests} ({rep['calls']['calls_per_case']} LLM calls per case)")
            print(f"theoretical minimum: {theo:.2f} s")
            print(f"in-flight: {last - first:.2f} s  → ratio {(last - first) / theo:.3f}")
            print(f"whole process: {wall:.2f} s  → ratio {wall / theo:.3f}")
            # cache reuse: only B changes → A's generations come from the cache
            b = proj / "variants" / "b.yaml"
            b.write_text(b.read_text().replace("Cite chunks", "Always cite chunks"))
            out2, _ = abtest(*run, cwd=proj)
            run2 = out2.stdout.strip().splitlines()[-1]
            from abtest.store import Store

            s = Store(proj / "results" / "abtest.duckdb", read_only=True)
            calls = s.llm_calls(run2)
            s.close()
            a_provider = sum(1 for c in calls if c["purpose"] == "generate:A" and not c["cached"])
            b_provider = sum(1 for c in calls if c["purpose"] == "generate:B" and not c["cached"])
            print(f"re-run with only B changed: provider calls for A's generations = {a_provider} "
                  f"(target 0), for B's = {b_provider}")
    finally:
        srv.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
