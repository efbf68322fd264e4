#!/usr/bin/env python3
"""A sequential run that uses every case against a fixed-N run over the same cases: wall time
and provider requests, as ratios measured in one run (issue 52: each look runs only the cases
it adds, so the looks cost at most a little bookkeeping; target ≤ 1.2×).

Each run gets a project and store of its own (no shared response cache) against one loopback
fake provider with fixed latency. The sequential run is set never to stop early (a futility
band no interval can fit in, and variants the judges score alike, so no condition is decided):
it takes every case, a look after each `--look` of them.

    python scripts/bench_sequential.py --n 208 --latency 0.01 --look 20
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import make_project, responder
from fake_llm_server import FakeLLMServer

RUN = ["run", "--fixture", "fixtures/bench", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def timed_run(proj: Path, *extra: str) -> tuple[float, str]:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "abtest.cli", *RUN, *extra], cwd=proj,
                         capture_output=True, text=True)
    wall = time.monotonic() - t0
    if out.returncode != 0:
        sys.exit(f"abtest run {' '.join(extra)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return wall, out.stdout.strip().splitlines()[-1]


def report(proj: Path, run_id: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "abtest.cli", "report", run_id, "--format",
                          "json"], cwd=proj, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=208)
    ap.add_argument("--latency", type=float, default=0.01)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--look", type=int, default=20)
    args = ap.parse_args()
    srv = FakeLLMServer(latency=args.latency, responder=responder, max_seconds=3600,
                        keep_alive=True)
    url = srv.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            fixed = make_project(Path(tmp) / "fixed", args.n, url, args.concurrency)
            seq = make_project(Path(tmp) / "sequential", args.n, url, args.concurrency)
            with open(seq / "abtest.yaml", "a", encoding="utf-8") as fh:
                fh.write(f"sequential: {{look: {args.look}, futility: 0.000001}}\n")
            before = len(srv.requests)
            t_fixed, _ = timed_run(fixed)
            r_fixed = len(srv.requests) - before
            before = len(srv.requests)
            t_seq, rid = timed_run(seq, "--sequential")
            r_seq = len(srv.requests) - before
            s = report(seq, rid)["sequential"]
    finally:
        srv.stop()
    print(f"N = {args.n} cases, latency {args.latency} s, concurrency {args.concurrency}, "
          f"a look every {args.look} groups")
    print(f"fixed-N run:      {t_fixed:7.1f} s, {r_fixed} provider requests")
    print(f"sequential run:   {t_seq:7.1f} s, {r_seq} provider requests, "
          f"{s['looks_done']} looks, {s['cases_used']} of {s['cases_total']} cases used "
          f"(stop: {s['stop']})")
    if s["cases_used"] != args.n:
        sys.exit("the sequential run stopped early: the comparison needs it to use every case")
    ratio = t_seq / t_fixed
    print(f"wall-time ratio sequential / fixed-N: {ratio:.2f} (target ≤ 1.20)")
    print(f"request ratio: {r_seq / r_fixed:.2f} (1.00: no case asked twice)")
    sys.exit(0 if ratio <= 1.2 and r_seq == r_fixed else 1)


if __name__ == "__main__":
    main()
