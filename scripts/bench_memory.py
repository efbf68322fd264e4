#!/usr/bin/env python3
"""Peak memory and time of the runner for many cases on the fake server at zero latency.

Generations and deterministic checks only (judges: []), so the measure is abtest's own
bookkeeping per case, not the judges' prompts.

A process's peak RSS as the kernel reports it (getrusage, wait4) starts from its parent's
peak: at exec the child inherits the spawning process's high-water mark. Building 100,000
cases takes ~620 MB, so the fixture is written by a helper process and the run is spawned
from this small one; the child's own figure is read with os.wait4 (RUSAGE_CHILDREN would
take the maximum over every child, helper included).

    python scripts/bench_memory.py --n 100000
    python scripts/bench_memory.py --n 100000 --trace   # the peak of each end-of-run step
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import responder
from fake_llm_server import FakeLLMServer


def _rss_mb(pid: int) -> tuple[float, float]:
    """Current and peak resident set of a running process (Linux /proc)."""
    try:
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
        return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024
    except (OSError, KeyError, ValueError):
        return float("nan"), float("nan")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--every", type=int, default=10_000, help="print RSS every this many cases")
    ap.add_argument("--trace", action="store_true",
                    help="run through scripts/memtrace.py: the peak of each step after the last case")
    args = ap.parse_args()
    srv = FakeLLMServer(latency=0.0, responder=responder, max_seconds=7200, keep_alive=True)
    url = srv.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            proj = Path(tmp)
            subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                            "from benchlib import make_project; "
                            "make_project(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], "
                            "int(sys.argv[4]), judges='[]')", tmp, str(args.n), url,
                            str(args.concurrency)], cwd=Path(__file__).parent, check=True)
            setup = time.monotonic() - t0
            floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            t0 = time.monotonic()
            cmd = [sys.executable, str(Path(__file__).with_name("memtrace.py"))] if args.trace else \
                [sys.executable, "-m", "abtest.cli"]
            proc = subprocess.Popen(cmd + ["run", "--fixture", "fixtures/bench",
                                     "--a", "variants/a.yaml", "--b", "variants/b.yaml"], cwd=proj,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            tail: list[str] = []
            peak_cases = float("nan")  # the peak (a high-water mark) read at the last case
            for line in proc.stderr:  # progress lines: "[k/n] case: ok"
                tail = (tail + [line])[-20:]
                if line.startswith("memtrace:"):
                    print(f"  {line.strip()}", flush=True)
                    continue
                m = re.search(r"\[(\d+)/(\d+)\]", line)
                if m and m.group(1) == m.group(2):
                    peak_cases = _rss_mb(proc.pid)[1]
                if m and int(m.group(1)) % args.every == 0:
                    rss, hwm = _rss_mb(proc.pid)
                    print(f"  {int(m.group(1)):>7,} cases  {time.monotonic() - t0:7.0f} s  "
                          f"RSS {rss:.0f} MB (peak so far {hwm:.0f} MB)", flush=True)
            _, status, usage = os.wait4(proc.pid, 0)  # this child's rusage alone
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - t0
            if proc.returncode != 0:
                sys.exit("".join(tail))
            print(f"{args.n} cases ({len(srv.requests)} provider requests), fixture written in {setup:.1f} s")
            what = "after the last atexit handler (--trace resets the peak)" if args.trace else \
                "over the whole process"
            print(f"run: {wall:.1f} s ({args.n / wall:.0f} cases/s), peak RSS {usage.ru_maxrss / 1024:.0f} MB "
                  f"{what} (target < 500 MB); {peak_cases:.0f} MB read at the last case; the "
                  f"spawning process's own peak, which the child's figure cannot go below: {floor:.0f} MB")
    finally:
        srv.stop()
