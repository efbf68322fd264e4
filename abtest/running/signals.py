"""Stopping a run the way Ctrl-C does when SIGTERM arrives, so its state is recorded as
"stopped" rather than left "running"."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING
import signal
import threading


if TYPE_CHECKING:
    pass


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so a run stops as on Ctrl-C."""


@contextmanager
def stop_on_sigterm():
    """While a run writes, SIGTERM stops it the way Ctrl-C does (its state is recorded as
    "stopped"); Python's default would end the process with the run left "running". Only
    the main thread can take signals: elsewhere (a worker thread) nothing changes."""

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        raise Terminated()

    before = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
