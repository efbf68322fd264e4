#!/usr/bin/env python3
"""`abtest --help` start-up time against `python -c pass`, measured in one run (median of 15).

    python scripts/bench_startup.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def median_time(cmd: list[str], n: int = 15) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


if __name__ == "__main__":
    base = median_time([sys.executable, "-c", "pass"])
    helpt = median_time([sys.executable, "-m", "abtest.cli", "--help"])
    print(f"python -c pass: {base * 1000:.0f} ms")
    print(f"abtest --help:  {helpt * 1000:.0f} ms  (ratio {helpt / base:.2f}; extra {1000 * (helpt - base):.0f} ms; "
          f"target < 300 ms absolute)")
