"""Waiting on a condition instead of sleeping a guessed time: a fixed sleep is too short on a
loaded machine (a flaky test) and too long on an idle one (a slow suite). A test waits for
what it needs to be true; `tests/test_ci_policy.py` keeps bare sleeps out of the tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str, *,
               every: float = 0.02) -> T:
    """`condition()`'s first truthy value, checked every `every` seconds; an AssertionError
    naming `what` if it is still falsy after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)
