"""How the results store writes: one thread, group commits, and a page cache kept small.

A run's threads write small rows constantly; committing each alone serialised the whole run
on DuckDB's ~1 ms commit. This module owns the writer thread, the read gate that lets it
trim DuckDB's page cache safely, and the connection settings that bound a long run's memory.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple
import duckdb
import queue

class WriteOp(NamedTuple):
    """One row insert for the group-commit writer.

    Inserts with the same SQL in one batch go to DuckDB as one multi-row statement (a
    fraction of the cost of single statements). `INSERT OR REPLACE`/`ON CONFLICT` cost ~4x a plain insert
    even when nothing conflicts, so rows are inserted plainly and an existing row (a resumed
    or re-tried case) is handled on the slow path: `key` deletes it first (replace) or,
    with `ignore`, the new row is dropped (first writer wins: the response cache).
    """

    sql: str
    values: list
    key: tuple[str, list] | None = None  # (DELETE … WHERE key, params) for replace semantics
    ignore: tuple[str, list] | None = None  # (SELECT 1 … WHERE key, params) for insert-if-absent


class GroupCommit:
    """One thread applies every write; writes that arrive together share one transaction.

    A DuckDB commit (WAL write + fsync) and a single-row statement each cost about a
    millisecond, and a run's threads write small rows constantly; committing each alone
    serialised the whole run on the store. Each caller still waits until its own write is
    committed, so "durable when the call returns" holds. A batch that fails is re-applied one
    write at a time, so one bad write fails alone and every write stays all-or-nothing.
    A write is a list of WriteOp and/or callables taking the connection.
    """

    _STOP = object()

    def __init__(self, con, gate: "ReadGate"):

        self.con = con
        self.gate = gate
        self.since_trim = 0
        self.q: "queue.SimpleQueue" = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="abtest-store-writer", daemon=True)
        self.thread.start()

    def run(self, ops: list) -> None:
        if threading.current_thread() is self.thread:
            self._slow(ops)
            return
        box: dict[str, Any] = {"done": threading.Event()}
        self.q.put((ops, box))
        box["done"].wait()
        if "exc" in box:
            raise box["exc"]

    def close(self) -> None:
        self.q.put(self._STOP)
        self.thread.join()

    def _loop(self) -> None:

        stop = False
        while not stop:
            item = self.q.get()
            if item is self._STOP:
                return
            batch = [item]
            while len(batch) < 2048:
                try:
                    nxt = self.q.get_nowait()
                except queue.Empty:
                    break
                if nxt is self._STOP:
                    stop = True
                    break
                batch.append(nxt)
            self._apply(batch)
            self.since_trim += len(batch)
            if TRIM_EVERY and self.since_trim >= TRIM_EVERY and self.gate.trim(self.con):
                self.since_trim = 0

    def _apply(self, batch: list) -> None:
        con = self.con
        try:
            con.execute("BEGIN TRANSACTION")
            groups: dict[str, list] = {}
            for ops, _ in batch:
                for op in ops:
                    if isinstance(op, WriteOp):
                        groups.setdefault(op.sql, []).append(op.values)
                        continue
                    self._flush(groups)  # a statement that is not a plain insert keeps its order
                    op(con)
            self._flush(groups)
            con.execute("COMMIT")
        except Exception:
            try:
                con.execute("ROLLBACK")
            except Exception:
                pass
            for ops, box in batch:  # the slow path: each write alone, existing rows handled
                try:
                    con.execute("BEGIN TRANSACTION")
                    self._slow(ops)
                    con.execute("COMMIT")
                except Exception as exc:
                    try:
                        con.execute("ROLLBACK")
                    except Exception:
                        pass
                    box["exc"] = exc
                box["done"].set()
            return
        for _, box in batch:
            box["done"].set()

    def _flush(self, groups: dict[str, list]) -> None:
        # one multi-row VALUES statement per table: for the handful of rows a batch holds it
        # costs a fraction of executemany, which executes row by row
        for sql, rows in groups.items():
            head, one = sql.rsplit(" VALUES ", 1)
            for i in range(0, len(rows), 256):
                part = rows[i:i + 256]
                self.con.execute(f"{head} VALUES {', '.join([one] * len(part))}",
                                 [v for r in part for v in r])
        groups.clear()

    def _slow(self, ops: list) -> None:
        con = self.con
        for op in ops:
            if not isinstance(op, WriteOp):
                op(con)
                continue
            if op.ignore is not None and con.execute(*op.ignore).fetchone() is not None:
                continue
            if op.key is not None:
                con.execute(*op.key)
            con.execute(op.sql, op.values)


# Rows per DuckDB row group in the results store (DuckDB's default is 122,880). A checkpoint
# re-compresses a table's last, growing row group, so with the default the checkpoints of a
# long run held more and more prompt text at once (100,000-case benchmark: peak during the run
# 566 → 534 MB; Store API alone at 50,000 cases: 228 → 194 MB). Scans do not notice.
ROW_GROUP_SIZE = 16_384
# WAL size that triggers a checkpoint (DuckDB's default is 16 MB). Rows not yet checkpointed
# are held in memory as well as in the WAL, and a checkpoint briefly holds more beside them,
# so a smaller WAL lowers a long run's peak (Store API, 50,000 cases: −10 MB).
CHECKPOINT_THRESHOLD = "4MB"
CATALOG = "abtest_store"
# Writes between cache trims (0: never). DuckDB keeps every data page it has written or read
# cached until its memory_limit (80 % of RAM), so a long run's memory grew with the store
# file. Store API alone, 100,000 cases (scripts/bench_store_memory.py): resting at the end
# 206 → 125 MB, highest peak 259 → 208 MB; full run (bench_memory.py): peak 510 → 444 MB.
TRIM_EVERY = 1000
# What a trim leaves beside the memory DuckDB cannot evict (key indexes, unsaved rows). No
# read runs during a trim (ReadGate) and writes run on the trimming thread, so little is needed.
_TRIM_SLACK_MIB = 4


class StoreClosing(Exception):
    """A read asked of a store that is closing (the writing process ends): read elsewhere."""


class ReadGate:
    """Lets the writer trim DuckDB's page cache only while no read is in flight.

    A trim lowers DuckDB's memory limit for a moment to make it evict cached pages; a read
    running under that limit could fail, so reads wait out a trim and a trim waits for a
    moment without reads (it is skipped, not queued, when one is running).
    """

    def __init__(self):
        self._cv = threading.Condition()
        self._reads = 0
        self._trimming = False
        self._closing = False

    @contextmanager
    def read(self):
        with self._cv:
            while self._trimming:
                self._cv.wait()
            if self._closing:   # the store is closing: its connection may be gone already
                raise StoreClosing()
            self._reads += 1
        try:
            yield
        finally:
            with self._cv:
                self._reads -= 1
                self._cv.notify_all()

    def close(self, timeout: float = 30.0) -> None:
        """No read starts from now on, and the reads in flight (another process's, served by
        this one) finish first: DuckDB refuses to close a connection a read is using."""
        with self._cv:
            self._closing = True
            self._cv.wait_for(lambda: self._reads == 0, timeout=timeout)

    def trim(self, con) -> bool:
        """Evict DuckDB's cached data pages; False if a read was running (try again later)."""
        with self._cv:
            if self._reads:
                return False
            self._trimming = True
        try:
            pinned = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory() "
                                 "WHERE tag <> 'BASE_TABLE'").fetchone()[0] or 0
            try:
                # MiB: DuckDB reads "MB" as 10^6 bytes, which would cut below what is pinned
                con.execute(f"SET memory_limit = '{(int(pinned) >> 20) + _TRIM_SLACK_MIB}MiB'")
            finally:
                con.execute("RESET memory_limit")
        except Exception:  # e.g. could not evict down to it: the writer must go on, and only
            pass           # memory is at stake (DuckDB keeps its limit when a SET fails)
        finally:
            with self._cv:
                self._trimming = False
                self._cv.notify_all()
        return True


def connect(path: Path, read_only: bool):
    """Open the store file, attached with a bounded row-group size (only ATTACH takes one)."""

    con = duckdb.connect(":memory:", config={"temp_directory": f"{path}.tmp",
                                             "checkpoint_threshold": CHECKPOINT_THRESHOLD})
    try:
        quoted = str(path).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS {CATALOG} (ROW_GROUP_SIZE {ROW_GROUP_SIZE}"
                    f"{', READ_ONLY' if read_only else ''})")
        con.execute(f"USE {CATALOG}")
    except BaseException:
        con.close()
        raise
    return con
