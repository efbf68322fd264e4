#!/usr/bin/env python3
"""Peak memory and time of the runner for many cases on the fake server at zero latency.

Generations and deterministic checks only (judges: []), so the measure is abtest's own
bookkeeping per case, not the judges' prompts.

    python scripts/bench_memory.py --n 100000
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import make_project, responder
from fake_llm_server import FakeLLMServer

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    srv = FakeLLMServer(latency=0.0, responder=responder, max_seconds=7200, keep_alive=True)
    url = srv.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            proj = make_project(Path(tmp), args.n, url, args.concurrency, judges="[]")
            setup = time.monotonic() - t0
            t0 = time.monotonic()
            out = subprocess.run([sys.executable, "-m", "abtest.cli", "run", "--fixture", "fixtures/bench",
                                  "--a", "variants/a.yaml", "--b", "variants/b.yaml"], cwd=proj,
                                 capture_output=True, text=True)
            wall = time.monotonic() - t0
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            if out.returncode != 0:
                sys.exit(out.stderr[-2000:])
            print(f"{args.n} cases ({len(srv.requests)} provider requests), fixture written in {setup:.1f} s")
            print(f"run: {wall:.1f} s ({args.n / wall:.0f} cases/s), peak RSS {usage.ru_maxrss / 1024:.0f} MB "
                  f"(target < 500 MB)")
    finally:
        srv.stop()
