"""The time of `import abtest` in a fresh interpreter, median of several (target < 50 ms).

Each sample is one new `python -c` process timing only the import itself (not interpreter
start-up), so what is measured is what a notebook or script pays for `import abtest`.
Usage: python scripts/bench_import.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

CODE = ("import time; t = time.perf_counter(); import abtest; "
        "print((time.perf_counter() - t) * 1000)")
TARGET_MS = 50.0


def sample() -> float:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    times = [sample() for _ in range(args.runs)]
    med = statistics.median(times)
    print(f"import abtest: median {med:.1f} ms over {args.runs} fresh interpreters "
          f"(min {min(times):.1f}, max {max(times):.1f}); target < {TARGET_MS:.0f} ms: "
          f"{'ok' if med < TARGET_MS else 'OVER'}")
    return 0 if med < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
