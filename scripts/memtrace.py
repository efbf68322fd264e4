#!/usr/bin/env python3
"""Run the abtest CLI with the peak memory of each end-of-run step printed to stderr.

bench_memory.py --trace runs the child through this: the peak (VmHWM) is read before
and after each step and reset in between (/proc/self/clear_refs), so each "memtrace:"
line gives the step's own peak; interpreter exit is split into the thread joins and each
atexit handler. The last reset is after the last handler, so the peak the parent reads from
getrusage after the child exits is that of module teardown alone.

    python scripts/memtrace.py run --fixture … --a … --b …
"""

from __future__ import annotations

import functools
import sys
import time


def _status() -> tuple[float, float]:
    with open("/proc/self/status") as f:
        st = dict(line.split(":", 1) for line in f)
    return int(st["VmRSS"].split()[0]) / 1024, int(st["VmHWM"].split()[0]) / 1024


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _say(msg: str) -> None:
    print(f"memtrace: {msg}", file=sys.stderr, flush=True)


def mark(label: str) -> None:
    """Peak since the last mark, then reset it."""
    rss, hwm = _status()
    _say(f"{label:<34} peak {hwm:6.0f} MB  now {rss:6.0f} MB")
    _reset_peak()


def _traced(fn, label: str):
    """fn, with its own peak marked (and its time given) around each call."""
    @functools.wraps(fn)
    def traced(*args, **kw):
        mark(f"before {label}")
        t0 = time.monotonic()
        try:
            return fn(*args, **kw)
        finally:
            mark(f"{label} ({time.monotonic() - t0:.2f} s)")

    return traced


def _wrap(owner, name: str, label: str) -> None:
    setattr(owner, name, _traced(getattr(owner, name), label))


def _trace_shutdown() -> None:
    """Interpreter exit: the thread joins, then each atexit handler, traced one by one."""
    import atexit
    import threading

    register = atexit.register

    def traced_register(fn, *args, **kw):
        name = f"{getattr(fn, '__module__', '') or ''}.{getattr(fn, '__qualname__', repr(fn))}"
        register(_traced(fn, f"atexit {name}"[:60]), *args, **kw)
        return fn

    atexit.register = traced_register
    _wrap(threading, "_shutdown", "joining threads at exit")


def install() -> None:
    from abtest import store
    from abtest.store import writer

    _trace_shutdown()

    _wrap(store.Store, "update_run", "store.update_run")
    _wrap(store.Store, "count_distinct_calls", "store.count_distinct_calls")
    _wrap(writer.GroupCommit, "close", "writer drain and stop")
    _wrap(store.Store, "close", "store.close (incl. writer)")


if __name__ == "__main__":
    install()
    from abtest.cli import cli

    code = 0
    try:
        cli.main(args=sys.argv[1:], prog_name="abtest", standalone_mode=False)
    except SystemExit as exc:
        code = exc.code or 0
    mark("after the command returned")
    sys.exit(code)
