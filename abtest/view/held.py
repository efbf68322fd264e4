"""The view's read-only handle on the store, kept between requests.

Opening a DuckDB file costs ~20 ms, a third of a case page, so the view keeps its read-only
handle while pages are being asked for. A read-only handle keeps any writer out, so it is let
go after a second with no request, and at once when a writer raises the store's wait flag
(`Store._connect` does, and retries for a few seconds). While a run writes, the view reads
through that run (`store.readers`) and keeps nothing.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING
from abtest.store.readers import wait_flag
from abtest.store import Store
from abtest.store.readers import find_service

if TYPE_CHECKING:
    from abtest.store import Store

IDLE_S = 1.0
_HOLDERS: "weakref.WeakSet[Holder]" = weakref.WeakSet()


@atexit.register
def _let_go_at_exit() -> None:
    """Close every held handle before the interpreter stops its daemon threads: a watcher
    caught inside DuckDB's C++ code at that moment would abort the process."""
    for holder in list(_HOLDERS):
        holder.shutdown()


class Borrowed:
    """The held store, lent for one request: `close()` gives it back."""

    def __init__(self, holder: Holder | _Own, store: Store | None):
        self._holder = holder
        self._store: Store | None = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    def close(self) -> None:
        if self._store is not None:
            self._holder.give_back(self._store)
            self._store = None


class Holder:
    def __init__(self, path: Path):

        self.path, self.flag = Path(path), wait_flag(Path(path))
        self._lock = threading.Lock()
        self._store: Store | None = None
        self._users = 0
        self._last = 0.0
        self._watcher: threading.Thread | None = None
        self._closed = False
        self._through: dict | None = None   # the writer's address, while a run writes
        _HOLDERS.add(self)

    def borrow(self) -> Borrowed:

        with self._lock:
            if self._store is not None and self._users == 0 and self.flag.exists():
                self._close()
            if self._store is None and self._through is not None:
                # a run was writing at the last request: while the same process publishes the
                # same address, read through it at once (trying the file first costs ~20 ms)

                info = find_service(self.path)
                if info is not None and info.get("token") == self._through.get("token"):
                    return Borrowed(_Own(), Store(self.path, read_only=True, create=False,
                                                  through=info))
                self._through = None
            if self._store is None or self.flag.exists() or self._closed:
                # a writer is waiting (or nothing is held): a handle for this request only
                store = Store(self.path, read_only=True, create=False)
                if store.is_remote:
                    self._through = store.remote_address
                if (self._store is None and not self.flag.exists() and not store.is_remote
                        and not self._closed):
                    self._store = store
                    if self._watcher is None or not self._watcher.is_alive():
                        self._watcher = threading.Thread(target=self._watch, daemon=True,
                                                         name="abtest-view-release")
                        self._watcher.start()
                else:
                    return Borrowed(_Own(), store)
            self._users += 1
            return Borrowed(self, self._store)

    def give_back(self, store) -> None:
        with self._lock:
            self._users -= 1
            self._last = time.monotonic()
            if self._users == 0 and self.flag.exists():
                self._close()

    def _close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def _watch(self) -> None:
        """Lets the handle go when idle or asked; ends once nothing is held."""
        while True:
            time.sleep(0.05)
            with self._lock:
                if self._store is None:
                    return
                if self._users == 0 and (self.flag.exists()
                                         or time.monotonic() - self._last > IDLE_S):
                    self._close()
                    return

    def shutdown(self) -> None:
        """Hold nothing from now on (the process is ending)."""
        with self._lock:
            self._closed = True
            if self._users == 0:
                self._close()

    def drop(self) -> None:
        """Let go now: this process is about to open the store for writing."""
        with self._lock:
            if self._users == 0:
                self._close()


class _Own:
    """For a handle opened for one request only: giving it back closes it."""

    def give_back(self, store) -> None:
        store.close()
