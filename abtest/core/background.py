"""Background imports that the process waits for before it exits.

A daemon thread still importing when the interpreter shuts down is frozen holding that
module's import lock; a finalizer that imports the same module (litellm's HTTP handlers do in
`__del__`) then waits on it forever, and the process never exits. So every background import
is joined at exit, while threads can still run.
"""

from __future__ import annotations

import atexit
import threading
from typing import Callable

_STARTED: list[threading.Thread] = []


def start(target: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    if not _STARTED:
        atexit.register(_join_all)
    _STARTED.append(thread)
    thread.start()
    return thread


def _join_all() -> None:
    for thread in _STARTED:
        thread.join(timeout=120)
