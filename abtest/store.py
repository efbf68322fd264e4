"""The results store and the local retrieval index: the ONLY module with SQL.

DuckDB, one writer process at a time. Every row is written (autocommit) as soon
as it exists, so a crash or kill -9 loses nothing finished. The schema evolves as
an ordered list of small migrations recorded in `_abtest_migrations`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import itertools
import json
import os
import re
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import numpy as np

from .errors import UserError
from .retrieval.query import (TOKENIZER_VERSION, And, Node, Not, Or, Phrase, Term, positive_terms,
                              to_dnf, tokenize)

MIGRATIONS: list[tuple[str, Callable]] = []


def migration(fn: Callable) -> Callable:
    MIGRATIONS.append((fn.__name__, fn))
    return fn


# columns of the two tables m003 re-creates without their key (one text for both migrations)
_LLM_CALLS_COLUMNS = """call_hash VARCHAR NOT NULL,
        run_id VARCHAR, purpose VARCHAR, case_id VARCHAR, model_requested VARCHAR,
        model_resolved VARCHAR, system_fingerprint VARCHAR, prompt_tokens INTEGER,
        completion_tokens INTEGER, cost DOUBLE, latency_ms DOUBLE, error VARCHAR,
        attempt INTEGER, cached BOOLEAN, created_at TIMESTAMP"""
# and of the response cache, which m004 re-keys
_CACHE_COLUMNS = """call_hash VARCHAR NOT NULL, model_requested VARCHAR, model_resolved VARCHAR,
        system_fingerprint VARCHAR, content VARCHAR, prompt_tokens INTEGER,
        completion_tokens INTEGER, cost DOUBLE, latency_ms DOUBLE, created_at TIMESTAMP"""
_CHECKS_COLUMNS = """run_id VARCHAR NOT NULL, case_id VARCHAR NOT NULL, variant VARCHAR NOT NULL,
        name VARCHAR NOT NULL, passed BOOLEAN, detail VARCHAR, data_json VARCHAR"""


@migration
def m001_initial(con) -> None:
    con.execute("""
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL DEFAULT 'frozen',
        created_at TIMESTAMP NOT NULL, finished_at TIMESTAMP, status VARCHAR NOT NULL,
        fixture_name VARCHAR, fixture_path VARCHAR, fixture_sha256 VARCHAR, corpus_version VARCHAR,
        retriever VARCHAR, n_cases INTEGER,
        variant_a_name VARCHAR, variant_a_sha256 VARCHAR, variant_a_path VARCHAR,
        variant_b_name VARCHAR, variant_b_sha256 VARCHAR, variant_b_path VARCHAR,
        generator_model VARCHAR, judge_model VARCHAR, comparison_kind VARCHAR,
        git_commit VARCHAR, config_json VARCHAR, info_json VARCHAR)""")
    con.execute("""
    CREATE TABLE generations (
        run_id VARCHAR NOT NULL, case_id VARCHAR NOT NULL, variant VARCHAR NOT NULL,
        context_sha256 VARCHAR, prompt_sha256 VARCHAR, messages_json VARCHAR, answer VARCHAR,
        error VARCHAR, call_hash VARCHAR, model_requested VARCHAR, model_resolved VARCHAR,
        latency_ms DOUBLE, prompt_tokens INTEGER, overflow BOOLEAN, created_at TIMESTAMP,
        PRIMARY KEY (run_id, case_id, variant))""")
    con.execute("CREATE SEQUENCE llm_calls_seq")
    con.execute(f"""
    CREATE TABLE llm_calls (
        id BIGINT PRIMARY KEY DEFAULT nextval('llm_calls_seq'), {_LLM_CALLS_COLUMNS})""")
    con.execute(f"CREATE TABLE response_cache ({_CACHE_COLUMNS}, PRIMARY KEY (call_hash))")
    con.execute(f"""
    CREATE TABLE checks (
        {_CHECKS_COLUMNS},
        PRIMARY KEY (run_id, case_id, variant, name))""")
    con.execute("""
    CREATE TABLE judgments (
        run_id VARCHAR NOT NULL, case_id VARCHAR NOT NULL, judge VARCHAR NOT NULL,
        subject VARCHAR NOT NULL, sample INTEGER NOT NULL DEFAULT 0, verdict VARCHAR,
        score DOUBLE, margin DOUBLE, rationale VARCHAR, result_json VARCHAR, error VARCHAR,
        prompt_sha256 VARCHAR, call_hashes VARCHAR, model_resolved VARCHAR, created_at TIMESTAMP,
        PRIMARY KEY (run_id, case_id, judge, subject, sample))""")
    con.execute("""
    CREATE TABLE claims (
        run_id VARCHAR NOT NULL, case_id VARCHAR NOT NULL, variant VARCHAR NOT NULL,
        idx INTEGER NOT NULL, claim VARCHAR, verdict VARCHAR, chunk_id VARCHAR,
        PRIMARY KEY (run_id, case_id, variant, idx))""")
    con.execute("""
    CREATE TABLE human_labels (
        run_id VARCHAR NOT NULL, item_id VARCHAR NOT NULL, judge VARCHAR, case_id VARCHAR,
        label VARCHAR NOT NULL, reviewer VARCHAR, created_at TIMESTAMP,
        PRIMARY KEY (run_id, item_id, reviewer))""")
    con.execute("""
    CREATE TABLE review_items (
        run_id VARCHAR NOT NULL, item_id VARCHAR NOT NULL, judge VARCHAR, case_id VARCHAR,
        mapping_json VARCHAR, judge_label VARCHAR, created_at TIMESTAMP,
        PRIMARY KEY (run_id, item_id))""")


# --- live runs (issue #8: `abtest live`) -------------------------------------------------
@migration
def m002_live(con) -> None:
    """One row per question per variant of a live run, written as soon as it exists."""
    con.execute("""
    CREATE TABLE live_items (
        run_id VARCHAR NOT NULL, case_id VARCHAR NOT NULL, variant VARCHAR NOT NULL,
        idx INTEGER, question VARCHAR, answer VARCHAR, retrieved_json VARCHAR,
        scores_json VARCHAR, latency_ms DOUBLE, latency_kind VARCHAR, assistant_version VARCHAR,
        attempts INTEGER, error VARCHAR, created_at TIMESTAMP,
        PRIMARY KEY (run_id, case_id, variant))""")
# --- end live runs ------------------------------------------------------------------------


@migration
def m003_lean_keys(con) -> None:
    """Drop the primary keys on `checks` and `llm_calls`: DuckDB keeps every key index in
    memory and re-serialises it at each checkpoint, and these two were most of it (a run
    writes ~8 check rows per case). llm_calls.id comes from a sequence; a check row is
    written in one transaction with its generation, whose key turns a re-write into
    delete-then-insert (Store._check_ops); standalone check writes delete first."""
    con.execute(f"CREATE TABLE checks__lean ({_CHECKS_COLUMNS})")
    con.execute(f"""
    CREATE TABLE llm_calls__lean (
        id BIGINT NOT NULL DEFAULT nextval('llm_calls_seq'), {_LLM_CALLS_COLUMNS})""")
    for table in ("checks", "llm_calls"):
        con.execute(f"INSERT INTO {table}__lean SELECT * FROM {table}")
        con.execute(f"DROP TABLE {table}")
        con.execute(f"ALTER TABLE {table}__lean RENAME TO {table}")


def cache_key(call_hash: str) -> int:
    """The response cache's index key: 64 bits of a hash of the call hash.

    DuckDB keeps a key index in memory and re-serialises it at every checkpoint; over the
    64-character hex call hashes it took ~120 bytes a row (24 MB at 100,000 cases, two calls
    each), over a BIGINT ~45. The row still holds the full call hash and a lookup matches both,
    so two call hashes sharing a key (odds ~1e-8 at a million rows) never mix up answers:
    the second is just not cached (first writer wins)."""
    return int.from_bytes(hashlib.blake2b(call_hash.encode("utf-8"), digest_size=8).digest(),
                          "big", signed=True)


@migration
def m004_cache_key(con) -> None:
    """Key `response_cache` by a BIGINT (cache_key) instead of the call hash text."""
    con.create_function("abtest_cache_key", cache_key, ["VARCHAR"], "BIGINT", side_effects=False)
    try:
        con.execute(f"CREATE TABLE response_cache__keyed ({_CACHE_COLUMNS}, "
                    "hash_key BIGINT PRIMARY KEY)")
        # first writer wins, as on insert: of rows sharing a key (never seen) the earliest stays
        con.execute("INSERT INTO response_cache__keyed SELECT *, abtest_cache_key(call_hash) "
                    "FROM response_cache QUALIFY row_number() OVER (PARTITION BY "
                    "abtest_cache_key(call_hash) ORDER BY created_at NULLS LAST, call_hash) = 1")
        con.execute("DROP TABLE response_cache")
        con.execute("ALTER TABLE response_cache__keyed RENAME TO response_cache")
    finally:
        con.remove_function("abtest_cache_key")


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).replace(tzinfo=None)


class _Op(NamedTuple):
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


class _GroupCommit:
    """One thread applies every write; writes that arrive together share one transaction.

    A DuckDB commit (WAL write + fsync) and a single-row statement each cost about a
    millisecond, and a run's threads write small rows constantly; committing each alone
    serialised the whole run on the store. Each caller still waits until its own write is
    committed, so "durable when the call returns" holds. A batch that fails is re-applied one
    write at a time, so one bad write fails alone and every write stays all-or-nothing.
    A write is a list of _Op and/or callables taking the connection.
    """

    _STOP = object()

    def __init__(self, con, gate: "_ReadGate"):
        import queue

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
        import queue

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
                    if isinstance(op, _Op):
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
            if not isinstance(op, _Op):
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
_CATALOG = "abtest_store"
# Writes between cache trims (0: never). DuckDB keeps every data page it has written or read
# cached until its memory_limit (80 % of RAM), so a long run's memory grew with the store
# file. Store API alone, 100,000 cases (scripts/bench_store_memory.py): resting at the end
# 206 → 125 MB, highest peak 259 → 208 MB; full run (bench_memory.py): peak 510 → 444 MB.
TRIM_EVERY = 1000
# What a trim leaves beside the memory DuckDB cannot evict (key indexes, unsaved rows). No
# read runs during a trim (_ReadGate) and writes run on the trimming thread, so little is needed.
_TRIM_SLACK_MIB = 4


class _ReadGate:
    """Lets the writer trim DuckDB's page cache only while no read is in flight.

    A trim lowers DuckDB's memory limit for a moment to make it evict cached pages; a read
    running under that limit could fail, so reads wait out a trim and a trim waits for a
    moment without reads (it is skipped, not queued, when one is running).
    """

    def __init__(self):
        self._cv = threading.Condition()
        self._reads = 0
        self._trimming = False

    @contextmanager
    def read(self):
        with self._cv:
            while self._trimming:
                self._cv.wait()
            self._reads += 1
        try:
            yield
        finally:
            with self._cv:
                self._reads -= 1

    def trim(self, con) -> bool:
        """Evict DuckDB's cached data pages; False if a read was running (try again later)."""
        import duckdb

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


def _connect(path: Path, read_only: bool):
    """Open the store file, attached with a bounded row-group size (only ATTACH takes one)."""
    import duckdb

    con = duckdb.connect(":memory:", config={"temp_directory": f"{path}.tmp",
                                             "checkpoint_threshold": CHECKPOINT_THRESHOLD})
    try:
        quoted = str(path).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS {_CATALOG} (ROW_GROUP_SIZE {ROW_GROUP_SIZE}"
                    f"{', READ_ONLY' if read_only else ''})")
        con.execute(f"USE {_CATALOG}")
    except BaseException:
        con.close()
        raise
    return con


def _star(exclude: Iterable[str] = (), columns: Iterable[str] | None = None) -> str:
    """`*`, `* EXCLUDE (…)` or the named columns: each column read costs (DuckDB → Python),
    a wide text column most of a read."""
    cols, keep = list(exclude), None if columns is None else list(columns)
    bad = [c for c in cols + (keep or []) if not c.isidentifier()]
    if bad:
        raise ValueError(f"not a column name: {bad[0]!r}")
    if keep is not None:
        if cols or not keep:
            raise ValueError("name the columns to read, or those to leave out, not both")
        return ", ".join(keep)
    return f"* EXCLUDE ({', '.join(cols)})" if cols else "*"


class Store:
    """A thread-safe handle on one DuckDB file (one writer process).

    Reads run on a cursor per thread (DuckDB's MVCC lets them proceed beside writes); writes
    go through one group-commit thread.
    """

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False, create: bool = True):
        import duckdb

        self.path = Path(path)
        if not self.path.exists():
            if read_only or not create:
                raise UserError("results store not found (run `abtest run` first)", file=str(self.path))
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = _connect(self.path, read_only)
        except duckdb.IOException as exc:
            msg = str(exc)
            if "lock" in msg.lower():
                raise UserError("results store is in use by another abtest process (one writer at a "
                                "time); wait for it to finish", file=str(self.path)) from None
            raise UserError(f"cannot open results store: {msg.splitlines()[0]}",
                            file=str(self.path)) from None
        except duckdb.Error as exc:
            raise UserError(f"not a valid results store: {str(exc).splitlines()[0]}",
                            file=str(self.path)) from None
        self.lock = threading.RLock()
        self._local = threading.local()
        self._cursors: list = []
        self._writer: _GroupCommit | None = None
        self._gate = _ReadGate()
        if not read_only:
            self._migrate()
            self._writer = _GroupCommit(self.con, self._gate)
        else:
            self._check_schema()

    # -- lifecycle -------------------------------------------------------
    def _migrate(self) -> None:
        with self.lock:
            self.con.execute("CREATE TABLE IF NOT EXISTS _abtest_migrations "
                             "(name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
            done = {r[0] for r in self.con.execute("SELECT name FROM _abtest_migrations").fetchall()}
            for name, fn in MIGRATIONS:
                if name in done:
                    continue
                self.con.execute("BEGIN TRANSACTION")
                try:
                    fn(self.con)
                    self.con.execute("INSERT INTO _abtest_migrations VALUES (?, ?)", [name, _now()])
                    self.con.execute("COMMIT")
                except Exception:
                    self.con.execute("ROLLBACK")
                    raise

    def _check_schema(self) -> None:
        try:
            self.con.execute("SELECT count(*) FROM _abtest_migrations").fetchone()
        except Exception:
            raise UserError("not an abtest results store", file=str(self.path)) from None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        with self.lock:
            for cur in self._cursors:
                try:
                    cur.close()
                except Exception:
                    pass
            self._cursors.clear()
            self.con.close()

    def _cursor(self):
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            with self.lock:
                cur = self.con.cursor()
                cur.execute(f"USE {_CATALOG}")  # a cursor starts in the in-memory catalog
                self._cursors.append(cur)
            self._local.cursor = cur
        return cur

    def _write(self, ops: list) -> None:
        """Apply ops (see _Op) in one committed transaction, batched with concurrent writes."""
        if self._writer is None:
            raise UserError("results store is open read-only", file=str(self.path))
        self._writer.run(ops)

    _KEYS = {"generations": ("run_id", "case_id", "variant"), "response_cache": ("hash_key",),
             "judgments": ("run_id", "case_id", "judge", "subject", "sample"),
             "checks": ("run_id", "case_id", "variant", "name"),
             "live_items": ("run_id", "case_id", "variant"),
             "review_items": ("run_id", "item_id"), "human_labels": ("run_id", "item_id", "reviewer")}

    def _op(self, table: str, row: dict[str, Any], *, replace: bool = False,
            ignore: bool = False) -> _Op:
        cols = list(row)
        sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        if not (replace or ignore):
            return _Op(sql, [row[c] for c in cols])
        key = self._KEYS[table]
        where = " AND ".join(f"{k} = ?" for k in key)
        kv = [row[k] for k in key]
        if replace:
            return _Op(sql, [row[c] for c in cols], key=(f"DELETE FROM {table} WHERE {where}", kv))
        return _Op(sql, [row[c] for c in cols], ignore=(f"SELECT 1 FROM {table} WHERE {where}", kv))

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- generic helpers -------------------------------------------------
    def _insert(self, table: str, row: dict[str, Any], *, replace: bool = False,
                ignore: bool = False) -> None:
        self._write([self._op(table, row, replace=replace, ignore=ignore)])

    def _rows(self, sql: str, params: Iterable = ()) -> list[dict[str, Any]]:
        with self._gate.read():
            cur = self._cursor().execute(sql, list(params))
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        return [dict(zip(names, r)) for r in rows]

    def bulk_insert(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Many rows of one table in one transaction (imports, synthetic benchmarks)."""
        if not rows:
            return
        if table not in self.RUN_TABLES:
            raise ValueError(f"not a run table: {table}")
        cols = list(rows[0])
        self._write([self._op(table, {c: r.get(c) for c in cols}) for r in rows])

    def query(self, sql: str, params: Iterable = ()) -> list[dict[str, Any]]:
        """Read-only SQL for users and the export command."""
        return self._rows(sql, params)

    # -- runs ------------------------------------------------------------
    def create_run(self, row: dict[str, Any]) -> None:
        row = dict(row)
        row.setdefault("created_at", _now())
        row.setdefault("status", "running")
        self._insert("runs", row)

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM runs WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def update_run(self, run_id: str, **fields: Any) -> None:
        sets = ", ".join(f"{k} = ?" for k in fields)
        values = [*fields.values(), run_id]
        self._write([lambda con: con.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", values)])

    def list_runs(self, fixture_sha256: str | None = None) -> list[dict[str, Any]]:
        if fixture_sha256:
            return self._rows("SELECT * FROM runs WHERE fixture_sha256 = ? ORDER BY created_at",
                              [fixture_sha256])
        return self._rows("SELECT * FROM runs ORDER BY created_at")

    def latest_run_id(self) -> str | None:
        rows = self._rows("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 1")
        return rows[0]["run_id"] if rows else None

    # -- generations, checks, judgments, claims ---------------------------
    def put_generation(self, row: dict[str, Any]) -> None:
        self.put_generations([row], [])

    def put_generations(self, rows: list[dict[str, Any]],
                        checks: list[tuple[str, str, str, list[dict]]]) -> None:
        """A case's generations and their check results in one committed write."""
        ops = []
        for row in rows:
            row = dict(row)
            row.setdefault("created_at", _now())
            ops.append(self._op("generations", row, replace=True))
        written = {(r["run_id"], r["case_id"], r["variant"]) for r in rows}
        for run_id, case_id, variant, results in checks:
            if (run_id, case_id, variant) not in written:  # no generation key guards these
                ops.append(self._clear_checks(run_id, case_id, variant))
            ops.extend(self._check_ops(run_id, case_id, variant, results))
        self._write(ops)

    def generations(self, run_id: str, *, exclude: Iterable[str] = (),
                    columns: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """A run's generations; exclude=("messages_json",) leaves out the rendered prompts,
        which hold every case's context: most of a run's bytes, needed by few readers.
        columns= reads only those named."""
        return self._rows(f"SELECT {_star(exclude, columns)} FROM generations WHERE run_id = ? "
                          "ORDER BY case_id, variant", [run_id])

    def prompt_pair(self, run_id: str) -> tuple[str, str, str] | None:
        """(case_id, A's messages_json, B's) for the first case with both prompts stored."""
        rows = self._rows(
            "SELECT a.case_id, a.messages_json AS a, b.messages_json AS b FROM generations a "
            "JOIN generations b ON b.run_id = a.run_id AND b.case_id = a.case_id AND b.variant = 'B' "
            "WHERE a.run_id = ? AND a.variant = 'A' AND coalesce(a.messages_json, '') <> '' "
            "AND coalesce(b.messages_json, '') <> '' ORDER BY a.case_id LIMIT 1", [run_id])
        return (rows[0]["case_id"], rows[0]["a"], rows[0]["b"]) if rows else None

    def put_checks(self, run_id: str, case_id: str, variant: str, results: list[dict]) -> None:
        """A variant's check results alone (live runs), replacing any earlier ones."""
        self._write([self._clear_checks(run_id, case_id, variant),
                     *self._check_ops(run_id, case_id, variant, results)])

    @staticmethod
    def _clear_checks(run_id: str, case_id: str, variant: str) -> Callable:
        def clear(con):  # no key on checks (m003): an earlier attempt's rows go first
            con.execute("DELETE FROM checks WHERE run_id = ? AND case_id = ? AND variant = ?",
                        [run_id, case_id, variant])
        return clear

    def _check_ops(self, run_id: str, case_id: str, variant: str, results: list[dict]) -> list:
        # a variant's checks are the same names on every attempt (a resumed run refuses a
        # changed variant), so replacing row by row leaves nothing stale. checks has no key
        # (m003): in put_generations the generation's key makes a re-write fail the fast
        # path, and the slow path runs each row's DELETE before its INSERT.
        return [self._op("checks", {
            "run_id": run_id, "case_id": case_id, "variant": variant, "name": r["name"],
            "passed": r["passed"], "detail": r.get("detail"),
            "data_json": json.dumps(r.get("data") or {}, sort_keys=True)}, replace=True)
            for r in results]

    def checks(self, run_id: str, *, columns: Iterable[str] | None = None) -> list[dict[str, Any]]:
        return self._rows(f"SELECT {_star((), columns)} FROM checks WHERE run_id = ? "
                          "ORDER BY case_id, variant, name", [run_id])

    def put_judgment(self, row: dict[str, Any], claims: list[dict] | None = None) -> None:
        """A judgment and its claims land together or not at all."""
        row = dict(row)
        row.setdefault("created_at", _now())
        row.setdefault("sample", 0)
        ops: list = [self._op("judgments", row, replace=True)]
        if claims is not None:
            key = [row["run_id"], row["case_id"], row["subject"]]
            delete = ("DELETE FROM claims WHERE run_id=? AND case_id=? AND variant=?", key)
            if not claims:  # nothing to insert, so nothing would reveal an earlier set: delete
                ops.append(lambda con: con.execute(*delete))
            for i, c in enumerate(claims):
                # claim 0 exists whenever an earlier set does: that conflict sends the write to
                # the slow path, where the earlier set is deleted first
                ops.append(_Op("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?)",
                               [*key, i, c.get("claim"), c.get("verdict"), c.get("chunk_id")],
                               key=delete if i == 0 else None))
        self._write(ops)

    def judgments(self, run_id: str, judge: str | None = None, *, exclude: Iterable[str] = (),
                  columns: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """A run's judgments (of one judge); exclude names columns not to read (rationales),
        or columns names the only ones to read."""
        sel = _star(exclude, columns)
        if judge:
            return self._rows(f"SELECT {sel} FROM judgments WHERE run_id = ? AND judge = ? "
                              "ORDER BY case_id, subject, sample", [run_id, judge])
        return self._rows(f"SELECT {sel} FROM judgments WHERE run_id = ? "
                          "ORDER BY case_id, judge, subject, sample", [run_id])

    def claims(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM claims WHERE run_id = ? ORDER BY case_id, variant, idx",
                          [run_id])

    # -- llm calls and the response cache --------------------------------
    def cached_response(self, call_hash: str) -> dict[str, Any] | None:
        # the key alone in SQL: DuckDB takes its index for one equality, not for two
        rows = self._rows("SELECT * EXCLUDE (hash_key) FROM response_cache WHERE hash_key = ?",
                          [cache_key(call_hash)])
        return next((r for r in rows if r["call_hash"] == call_hash), None)

    def put_cache(self, row: dict[str, Any]) -> None:
        self._write([self._cache_op(row)])

    def _cache_op(self, row: dict[str, Any]) -> _Op:
        row = {**row, "hash_key": cache_key(row["call_hash"])}
        row.setdefault("created_at", _now())
        return self._op("response_cache", row, ignore=True)  # same key: the first writer wins

    def log_call(self, row: dict[str, Any], cache: dict[str, Any] | None = None) -> None:
        """A call's log row, and its response for the cache when it succeeded, in one write."""
        row = dict(row)
        row.setdefault("created_at", _now())
        ops = [self._op("llm_calls", row)]
        if cache is not None:
            ops.insert(0, self._cache_op(cache))
        self._write(ops)

    def count_first_attempts(self, run_id: str) -> int:
        """LLM calls of a run, retries not counted (cache hits are attempt 0)."""
        return self._rows("SELECT count(*) AS n FROM llm_calls WHERE run_id = ? AND attempt IN (0, 1)",
                          [run_id])[0]["n"]

    def errored_case_ids(self, run_id: str) -> set[str]:
        rows = self._rows("SELECT case_id FROM generations WHERE run_id = ? AND error IS NOT NULL "
                          "UNION SELECT case_id FROM judgments WHERE run_id = ? AND error IS NOT NULL",
                          [run_id, run_id])
        return {r["case_id"] for r in rows}

    def llm_calls(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM llm_calls WHERE run_id = ? ORDER BY id", [run_id])

    def call_summary(self, run_id: str) -> dict[str, Any]:
        rows = self._rows(
            "SELECT purpose, count(*) FILTER (WHERE NOT cached) AS provider_attempts, "
            "count(*) FILTER (WHERE cached) AS cache_hits, "
            "count(*) FILTER (WHERE error IS NOT NULL) AS errors, "
            "sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens, "
            "sum(cost) AS cost FROM llm_calls WHERE run_id = ? GROUP BY purpose ORDER BY purpose",
            [run_id])
        return {r["purpose"]: r for r in rows}

    def resolved_models(self, run_id: str) -> dict[str, list[str]]:
        rows = self._rows(
            "SELECT DISTINCT model_requested, model_resolved, system_fingerprint FROM llm_calls "
            "WHERE run_id = ? AND error IS NULL ORDER BY 1, 2, 3", [run_id])
        out: dict[str, list[str]] = {}
        for r in rows:
            out.setdefault(r["model_requested"], [])
            label = r["model_resolved"] or "?"
            if r["system_fingerprint"]:
                label += f" ({r['system_fingerprint']})"
            if label not in out[r["model_requested"]]:
                out[r["model_requested"]].append(label)
        return out

    # -- human review -----------------------------------------------------
    def _upsert_many(self, table: str, rows: list[dict[str, Any]]) -> None:
        """All rows or none (labels are imported all-or-nothing)."""
        ops = []
        for r in rows:
            r = dict(r)
            r.setdefault("created_at", _now())
            ops.append(self._op(table, r, replace=True))
        self._write(ops)

    def put_review_items(self, rows: list[dict[str, Any]]) -> None:
        self._upsert_many("review_items", rows)

    def review_items(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM review_items WHERE run_id = ? ORDER BY item_id", [run_id])

    def put_human_labels(self, rows: list[dict[str, Any]]) -> None:
        self._upsert_many("human_labels", rows)

    def human_labels(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM human_labels WHERE run_id = ? ORDER BY item_id", [run_id])

    # -- export -------------------------------------------------------------
    RUN_TABLES = ("runs", "generations", "llm_calls", "checks", "judgments", "claims",
                  "human_labels", "review_items")

    def export_run(self, run_id: str, out_dir: Path, fmt: str) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        opts = {"parquet": "(FORMAT parquet)", "csv": "(FORMAT csv, HEADER)",
                "jsonl": "(FORMAT json)"}[fmt]
        for t in self.RUN_TABLES:
            target = out_dir / f"{t}.{fmt}"
            esc = str(target).replace("'", "''")
            with self._gate.read():
                self._cursor().execute(f"COPY (SELECT * FROM {t} WHERE run_id = ?) TO '{esc}' "
                                       f"{opts}", [run_id])
            written.append(target)
        return written

    # -- live runs (issue #8: `abtest live`; table from m002_live) --------------------------
    RUN_TABLES = RUN_TABLES + ("live_items",)

    def put_live_item(self, row: dict[str, Any]) -> None:
        """One answer (or error) of a live target; replaces an earlier attempt at the item."""
        row = dict(row)
        row.setdefault("created_at", _now())
        self._insert("live_items", row, replace=True)

    def live_items(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM live_items WHERE run_id = ? ORDER BY idx, case_id, variant",
                          [run_id])
    # -- end live runs ----------------------------------------------------------------------


# =========================================================================== local index
# The local retrieval index (`abtest index`, `local:` retriever).
#
# Layout of an index file (plain tables, so users can inspect it with SQL):
#
#     meta    (schema_version, tokenizer, n_docs, avgdl, k1, b, created_at, corpus_sha256)
#     chunks  (doc, id, title, text, metadata JSON, length, terms)
#     terms   (term, df, idf, topw: the largest 32 weights of the term, for pruning)
#     tokens  (doc, term, tf, w)
#
# `doc` is a dense integer numbered in `id` order, so ranking ties break by chunk id
# without a join. `chunks.terms` is the space-joined token stream produced by
# `abtest.retrieval.query.tokenize` (Python is the single tokeniser, so queries and
# documents can never disagree); SQL splits it into `tokens`. `w` is the BM25 weight of
# the term in the document, fixed at build time:
#
#     idf = ln(1 + (N - df + 0.5) / (df + 0.5))
#     w   = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))
#
# A query's score for a matching chunk is the sum of `w` over the query's distinct
# positive terms (terms not under NOT; phrase words count individually), rounded to 6
# decimals so ties are exact and ordering is reproducible.

INDEX_SCHEMA_VERSION = 1
K1 = 1.2
B = 0.75
DNF_LIMIT = 256  # beyond this many alternatives a query is evaluated on its own
_BATCH_ROWS = 20_000
_TOPW = 32  # per-term top weights kept for pruning; k above this disables pruning
_SCORE_MARGIN = 1e-5  # keeps pruning exact despite 6-decimal rounding of scores


class IndexHit(NamedTuple):
    id: str
    score: float
    title: str | None
    text: str
    metadata: dict | None


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


_counter = itertools.count()


class IndexStore:
    """One DuckDB index file. A writer holds it exclusively; readers use read_only=True."""

    def __init__(self, path: str | os.PathLike, read_only: bool = False):
        self.path = os.fspath(path)
        self.read_only = read_only
        self._lock = threading.Lock()
        if read_only and not os.path.exists(self.path):
            if os.path.exists(self.path + ".building"):
                raise UserError("index not found; `abtest index` may still be building it "
                                f"({self.path}.building exists): wait and retry", file=self.path)
            raise UserError("index not found; build it with `abtest index CORPUS.jsonl --index "
                            f"{self.path}`", file=self.path)
        try:
            self.con = duckdb.connect(self.path, read_only=read_only)
        except duckdb.Error as exc:
            raise _open_error(self.path, exc) from None
        self.con.execute("SET enable_progress_bar = false")  # it would draw on the user's terminal
        self._meta: dict[str, Any] | None = None
        if read_only:
            self._meta = self._read_meta()

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        con, self.con = getattr(self, "con", None), None
        if con is not None:
            con.close()

    def __enter__(self) -> "IndexStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_meta(self) -> dict[str, Any]:
        try:
            cur = self.con.execute("SELECT * FROM meta")
        except duckdb.CatalogException:
            raise UserError("not an abtest index (it has no 'meta' table); build one with "
                            "`abtest index`", file=self.path) from None
        cols = [d[0] for d in cur.description]
        rows = cur.fetchall()
        row = rows[0] if rows else None
        if row is None:
            raise UserError("index is incomplete (empty 'meta' table); rebuild it", file=self.path)
        meta = dict(zip(cols, row))
        if meta.get("schema_version") != INDEX_SCHEMA_VERSION or meta.get("tokenizer") != TOKENIZER_VERSION:
            raise UserError(
                f"index was built by another abtest version (schema {meta.get('schema_version')}, "
                f"tokenizer {meta.get('tokenizer')}; this one needs schema {INDEX_SCHEMA_VERSION}, "
                f"tokenizer {TOKENIZER_VERSION}); rebuild it with `abtest index`", file=self.path)
        return meta

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = self._read_meta()
        return self._meta

    # ------------------------------------------------------------ build

    def build(self, chunks: Iterable[Any], *,
              corpus_sha256: str | Callable[[], str | None] | None = None) -> dict[str, Any]:
        """Replace the index contents with `chunks` (dicts or objects: id, text, title?, metadata?).

        `corpus_sha256` may be a callable, read once `chunks` is exhausted, so a caller
        can hash the corpus file while streaming it.

        Tokenising happens here in Python; everything else (posting lists, df, BM25
        weights) is set-based SQL inside one transaction, so a crash leaves the old
        contents or the new ones, never a mix.
        """
        if self.read_only:
            raise RuntimeError("IndexStore opened read-only")
        con = self.con
        with self._lock:
            con.execute("BEGIN TRANSACTION")
            try:
                for t in ("meta", "tokens", "terms", "chunks", "_stage"):
                    con.execute(f"DROP TABLE IF EXISTS {t}")
                con.execute("CREATE TABLE _stage (seq BIGINT, id VARCHAR, title VARCHAR, "
                            "text VARCHAR, metadata VARCHAR, length INTEGER, terms VARCHAR)")
                seq = 0
                batch: list[Any] = []
                for item in chunks:
                    batch.append(item)
                    if len(batch) >= _BATCH_ROWS:
                        seq = self._insert_stage(batch, seq)
                        batch = []
                if batch:
                    self._insert_stage(batch, seq)
                dup = con.execute("SELECT id FROM _stage GROUP BY id HAVING count(*) > 1 "
                                  "ORDER BY id LIMIT 1").fetchall()
                if dup:
                    raise UserError(f"duplicate chunk id {dup[0][0]!r}", file=self.path, field="id")
                con.execute("""
                    CREATE TABLE chunks AS
                    SELECT (row_number() OVER (ORDER BY id) - 1)::INTEGER AS doc, id, title, text,
                           metadata::JSON AS metadata, length, terms
                    FROM _stage ORDER BY doc""")
                con.execute("DROP TABLE _stage")
                if callable(corpus_sha256):
                    corpus_sha256 = corpus_sha256()
                n_docs, avgdl = con.execute(
                    "SELECT count(*), coalesce(avg(length), 0) FROM chunks").fetchall()[0]
                con.execute("""
                    CREATE TEMP TABLE _postings AS
                    SELECT doc, term, count(*)::INTEGER AS tf
                    FROM (SELECT doc, unnest(string_split(terms, ' ')) AS term FROM chunks)
                    WHERE term <> '' GROUP BY doc, term""")
                con.execute("""
                    CREATE TABLE terms AS
                    SELECT term, count(*)::INTEGER AS df,
                           ln(1 + ($n - count(*) + 0.5) / (count(*) + 0.5)) AS idf
                    FROM _postings GROUP BY term ORDER BY term""", {"n": n_docs})
                con.execute("""
                    CREATE TABLE tokens AS
                    SELECT p.doc, p.term, p.tf,
                           t.idf * p.tf * ($k1 + 1)
                             / (p.tf + $k1 * (1 - $b + $b * c.length / $avgdl)) AS w
                    FROM _postings p JOIN terms t USING (term) JOIN chunks c USING (doc)
                    ORDER BY p.term, p.doc""",
                            {"k1": K1, "b": B, "avgdl": avgdl if avgdl > 0 else 1.0})
                con.execute("DROP TABLE _postings")
                con.execute(f"""
                    CREATE TABLE _terms2 AS
                    SELECT t.term, t.df, t.idf, w.topw
                    FROM terms t JOIN (SELECT term, list(w ORDER BY w DESC)[1:{_TOPW}] AS topw
                                       FROM tokens GROUP BY term) w USING (term)
                    ORDER BY t.term""")
                con.execute("DROP TABLE terms")
                con.execute("ALTER TABLE _terms2 RENAME TO terms")
                # No ART index on tokens(term): measured, hash joins over the term-sorted
                # table were as fast or faster, and the index costs build time and space.
                con.execute("""
                    CREATE TABLE meta AS SELECT
                      $schema::INTEGER AS schema_version, $tok::VARCHAR AS tokenizer,
                      $n::BIGINT AS n_docs, $avgdl::DOUBLE AS avgdl,
                      $k1::DOUBLE AS k1, $b::DOUBLE AS b,
                      $created::VARCHAR AS created_at, $sha::VARCHAR AS corpus_sha256""",
                            {"schema": INDEX_SCHEMA_VERSION, "tok": TOKENIZER_VERSION, "n": n_docs,
                             "avgdl": avgdl, "k1": K1, "b": B, "sha": corpus_sha256,
                             "created": _dt.datetime.now(_dt.timezone.utc)
                             .isoformat(timespec="seconds").replace("+00:00", "Z")})
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        con.execute("CHECKPOINT")
        self._meta = None
        return self.stats()

    def _insert_stage(self, batch: list[Any], seq0: int) -> int:
        n = len(batch)
        ids = np.empty(n, dtype=object)
        titles = np.empty(n, dtype=object)
        texts = np.empty(n, dtype=object)
        metas = np.empty(n, dtype=object)
        terms = np.empty(n, dtype=object)
        lengths = np.empty(n, dtype=np.int32)
        for i, item in enumerate(batch):
            text = _field(item, "text")
            toks = tokenize(text)
            ids[i] = _field(item, "id")
            texts[i] = text
            titles[i] = _field(item, "title")
            md = _field(item, "metadata")
            metas[i] = None if md is None else json.dumps(md, ensure_ascii=False, sort_keys=True)
            terms[i] = " ".join(toks)
            lengths[i] = len(toks)
        name = f"_stage_in_{next(_counter)}"
        self.con.register(name, {"seq": np.arange(seq0, seq0 + n, dtype=np.int64), "id": ids,
                                 "title": titles, "text": texts, "metadata": metas,
                                 "length": lengths, "terms": terms})
        try:
            self.con.execute(f"INSERT INTO _stage SELECT seq, id, title, text, metadata, length, "
                             f"terms FROM {name}")
        finally:
            self.con.unregister(name)
        return seq0 + n

    # ------------------------------------------------------------ search

    def search(self, ast: Node, k: int) -> list[IndexHit]:
        return self.search_many([(0, ast)], k)[0]

    def search_many(self, queries: Sequence[tuple[Hashable, Node]], k: int
                    ) -> dict[Hashable, list[IndexHit]]:
        """Top-k per query, best first (score desc, then chunk id), all in a few statements.

        Plain `a OR b OR c` queries (what capture sends) share one pruned statement.
        Other queries are put in disjunctive normal form; their atoms, clauses and
        positive terms become small tables joined once with the posting lists. A query
        whose DNF is too large is evaluated alone with INTERSECT/UNION/EXCEPT.
        """
        if k < 1:
            raise UserError(f"k must be at least 1, got {k}", field="k")
        out: dict[Hashable, list[IndexHit]] = {qid: [] for qid, _ in queries}
        simple: list[tuple[Hashable, list[str]]] = []
        batch: list[tuple[Hashable, Node, list]] = []
        alone: list[tuple[Hashable, Node]] = []
        for qid, ast in queries:
            terms = _or_of_terms(ast)
            if terms is not None:
                simple.append((qid, terms))
                continue
            dnf = to_dnf(ast, DNF_LIMIT)
            if dnf is None:
                alone.append((qid, ast))
            else:
                batch.append((qid, ast, dnf))
        with self._lock:
            if simple:
                out.update(self._search_simple(simple, k))
            if batch:
                out.update(self._search_batch(batch, k))
            for qid, ast in alone:
                out[qid] = self._search_one(ast, k)
        return out

    def _search_simple(self, batch: list[tuple[Hashable, list[str]]], k: int
                       ) -> dict[Hashable, list[IndexHit]]:
        """Plain OR of terms (what capture sends), with exact MaxScore-style pruning.

        Scores are sums of non-negative weights, so lower bounds on the k-th best score
        let most postings of common words be skipped without changing the result:
        1. L = the k-th largest weight in any one query term's posting list (k distinct
           docs score at least L). Terms whose summed maximum weights stay below L are
           "non-essential": a doc holding only those cannot reach the top k.
        2. Docs holding an essential term get a partial score s from essential terms;
           theta = the k-th best s is another lower bound. A doc whose s plus the
           non-essential maxima stays below max(L, theta) is dropped.
        3. Survivors get their exact score by looking up only their own
           (term, doc) postings for the non-essential terms.
        The result equals scoring every posting (tests check this against the
        unpruned path); the margin keeps it exact under 6-decimal rounding.
        """
        terms = sorted({t for _, ts in batch for t in ts})
        info = {t: (maxw, kth) for t, maxw, kth in self.con.execute(
            "SELECT term, topw[1], CASE WHEN len(topw) >= $k THEN topw[$k] ELSE 0 END "
            "FROM terms WHERE term IN (SELECT unnest($t::VARCHAR[]))",
            {"k": k, "t": terms}).fetchall()}
        qess: list[tuple[int, str]] = []
        qnon: list[tuple[int, str]] = []
        qinfo: list[tuple[int, float, float]] = []
        for qi, (_, ts) in enumerate(batch):
            ts = [t for t in ts if t in info]
            lower = max((info[t][1] for t in ts), default=0.0)
            cum = rest = 0.0
            for t in sorted(ts, key=lambda t: (info[t][0], t)):
                cum += info[t][0]
                if cum >= lower - _SCORE_MARGIN:
                    qess.append((qi, t))
                else:
                    qnon.append((qi, t))
                    rest += info[t][0]
            qinfo.append((qi, rest, lower))
        if not qess:
            return {qid: [] for qid, _ in batch}

        def view(rows: list[tuple], names: tuple[str, ...], types: tuple) -> dict[str, np.ndarray]:
            return {n: np.array([r[i] for r in rows], dtype=t)
                    for i, (n, t) in enumerate(zip(names, types))}

        tag = next(_counter)
        views = {f"_qess{tag}": view(qess, ("qi", "term"), (np.int32, object)),
                 f"_qnon{tag}": view(qnon, ("qi", "term"), (np.int32, object)),
                 f"_qinfo{tag}": view(qinfo, ("qi", "rest", "lower"),
                                      (np.int32, np.float64, np.float64))}
        for name, data in views.items():
            self.con.register(name, data)
        sql = f"""
        WITH ess AS MATERIALIZED (
            SELECT e.qi, t.doc, sum(t.w) AS s
            FROM _qess{tag} e JOIN tokens t ON t.term = e.term GROUP BY e.qi, t.doc
        ),
        theta AS (
            SELECT qi, max(s, $k) AS top FROM ess GROUP BY qi
        ),
        cand AS MATERIALIZED (
            SELECT e.qi, e.doc, e.s
            FROM ess e JOIN _qinfo{tag} i ON i.qi = e.qi JOIN theta th ON th.qi = e.qi
            WHERE e.s + i.rest >= greatest(i.lower, CASE WHEN len(th.top) >= $k
                                                     THEN th.top[$k] ELSE 0 END) - $margin
        ),
        pairs AS MATERIALIZED (  -- materialised so the join below is (term, doc) lookups
            SELECT c.qi, c.doc, n.term FROM cand c JOIN _qnon{tag} n ON n.qi = c.qi
        ),
        extra AS (
            SELECT p.qi, p.doc, sum(t.w) AS s
            FROM pairs p JOIN tokens t ON t.term = p.term AND t.doc = p.doc
            GROUP BY p.qi, p.doc
        ),
        scored AS (
            SELECT c.qi, c.doc, round(c.s + coalesce(x.s, 0), 6) AS score
            FROM cand c LEFT JOIN extra x ON x.qi = c.qi AND x.doc = c.doc
        ),
        top AS (
            SELECT qi, doc, score FROM scored
            QUALIFY row_number() OVER (PARTITION BY qi ORDER BY score DESC, doc) <= $k
        )
        SELECT t.qi, c.id, t.score, c.title, c.text, c.metadata
        FROM top t JOIN chunks c ON c.doc = t.doc
        ORDER BY t.qi, t.score DESC, t.doc
        """
        try:
            rows = self.con.execute(sql, {"k": k, "margin": _SCORE_MARGIN}).fetchall()
        finally:
            for name in views:
                self.con.unregister(name)
        return _collect(rows, [qid for qid, _ in batch])

    def _search_batch(self, batch: list, k: int) -> dict[Hashable, list[IndexHit]]:
        qterm: list[tuple[int, str]] = []
        qatom: list[tuple[int, int, str | None, str | None]] = []
        qword: list[tuple[int, int, str, int]] = []
        qclause: list[tuple[int, int, int, bool, int]] = []
        qzero: list[tuple[int, int]] = []
        qpos: list[tuple[int, str]] = []
        for qi, (_qid, ast, dnf) in enumerate(batch):
            atoms: dict[Any, int] = {}
            words: set[str] = set()
            for ci, (pos, neg) in enumerate(dnf):
                for atom, is_neg in [(a, False) for a in pos] + [(a, True) for a in neg]:
                    if atom not in atoms:
                        ai = atoms[atom] = len(atoms)
                        if isinstance(atom, Term):
                            qatom.append((qi, ai, atom.term, None))
                            words.add(atom.term)
                        else:
                            ws = sorted(set(atom.terms))
                            qatom.append((qi, ai, None, " " + " ".join(atom.terms) + " "))
                            qword.extend((qi, ai, w, len(ws)) for w in ws)
                            words.update(ws)
                    qclause.append((qi, ci, atoms[atom], is_neg, len(pos)))
                if not pos:
                    qzero.append((qi, ci))
            pos_terms = positive_terms(ast)
            words.update(pos_terms)  # DNF may drop contradictory clauses; scoring must not
            qterm.extend((qi, w) for w in sorted(words))
            qpos.extend((qi, t) for t in pos_terms)

        def cols(rows: list[tuple], names: list[str], types: list[Any]) -> dict[str, np.ndarray]:
            return {n: np.array([r[i] for r in rows], dtype=t) for i, (n, t) in
                    enumerate(zip(names, types))}

        tag = next(_counter)
        views = {
            f"_qterm{tag}": cols(qterm, ["qi", "term"], [np.int32, object]),
            f"_qatom{tag}": cols(qatom, ["qi", "atom", "term", "pattern"],
                                 [np.int32, np.int32, object, object]),
            f"_qword{tag}": cols(qword, ["qi", "atom", "term", "nwords"],
                                 [np.int32, np.int32, object, np.int32]),
            f"_qclause{tag}": cols(qclause, ["qi", "clause", "atom", "neg", "npos"],
                                   [np.int32, np.int32, np.int32, bool, np.int32]),
            f"_qzero{tag}": cols(qzero, ["qi", "clause"], [np.int32, np.int32]),
            f"_qpos{tag}": cols(qpos, ["qi", "term"], [np.int32, object]),
        }
        for name, data in views.items():
            self.con.register(name, data)
        sql = f"""
        WITH hits AS MATERIALIZED (
            SELECT q.qi, t.doc, t.term, t.w FROM _qterm{tag} q JOIN tokens t ON t.term = q.term
        ),
        phrase_cand AS (
            SELECT h.qi, h.doc, w.atom FROM hits h
            JOIN _qword{tag} w ON w.qi = h.qi AND w.term = h.term
            GROUP BY h.qi, h.doc, w.atom HAVING count(*) = any_value(w.nwords)
        ),
        present AS MATERIALIZED (
            SELECT h.qi, h.doc, a.atom FROM hits h
            JOIN _qatom{tag} a ON a.qi = h.qi AND a.term = h.term
            UNION ALL
            SELECT p.qi, p.doc, p.atom FROM phrase_cand p
            JOIN _qatom{tag} a ON a.qi = p.qi AND a.atom = p.atom
            JOIN chunks c ON c.doc = p.doc
            WHERE contains(' ' || c.terms || ' ', a.pattern)
        ),
        cand AS (
            SELECT p.qi, p.doc, c.clause FROM present p
            JOIN _qclause{tag} c ON c.qi = p.qi AND c.atom = p.atom AND NOT c.neg
            GROUP BY p.qi, p.doc, c.clause HAVING count(*) = any_value(c.npos)
            UNION ALL
            SELECT z.qi, ch.doc, z.clause FROM _qzero{tag} z CROSS JOIN chunks ch
        ),
        bad AS (
            SELECT p.qi, p.doc, c.clause FROM present p
            JOIN _qclause{tag} c ON c.qi = p.qi AND c.atom = p.atom AND c.neg
        ),
        matched AS (
            SELECT DISTINCT qi, doc FROM (SELECT * FROM cand EXCEPT SELECT * FROM bad)
        ),
        scored AS (
            SELECT h.qi, h.doc, sum(h.w) AS score FROM hits h
            JOIN _qpos{tag} p ON p.qi = h.qi AND p.term = h.term
            GROUP BY h.qi, h.doc
        ),
        top AS (
            SELECT m.qi, m.doc, round(coalesce(s.score, 0), 6) AS score
            FROM matched m LEFT JOIN scored s ON s.qi = m.qi AND s.doc = m.doc
            QUALIFY row_number() OVER (PARTITION BY m.qi ORDER BY score DESC, m.doc) <= $k
        )
        SELECT t.qi, c.id, t.score, c.title, c.text, c.metadata
        FROM top t JOIN chunks c ON c.doc = t.doc
        ORDER BY t.qi, t.score DESC, t.doc
        """
        try:
            rows = self.con.execute(sql, {"k": k}).fetchall()
        finally:
            for name in views:
                self.con.unregister(name)
        return _collect(rows, [qid for qid, _, _ in batch])

    def _search_one(self, ast: Node, k: int) -> list[IndexHit]:
        params: list[Any] = []
        setsql = _set_sql(ast, params)
        pos = positive_terms(ast)
        sql = f"""
        WITH m AS ({setsql}),
        s AS (SELECT doc, sum(w) AS score FROM tokens
              WHERE term IN (SELECT unnest(?::VARCHAR[])) AND doc IN (SELECT doc FROM m)
              GROUP BY doc)
        SELECT c.id, round(coalesce(s.score, 0), 6) AS score, c.title, c.text, c.metadata
        FROM (SELECT DISTINCT doc FROM m) m2 JOIN chunks c ON c.doc = m2.doc
        LEFT JOIN s ON s.doc = m2.doc
        ORDER BY score DESC, c.doc LIMIT ?"""
        rows = self.con.execute(sql, params + [pos, k]).fetchall()
        return [IndexHit(cid, float(sc), title, text, _load(md)) for cid, sc, title, text, md in rows]

    # ------------------------------------------------------------ lookups

    def all_texts(self) -> tuple[list[str], list[str]]:
        """Every chunk's id and text in id order (for embedding the whole corpus once)."""
        with self._lock:
            rows = self.con.execute("SELECT id, text FROM chunks ORDER BY doc").fetchall()
        return [r[0] for r in rows], [r[1] for r in rows]

    def get_chunks(self, ids: Sequence[str]) -> dict[str, IndexHit]:
        """Chunks by id (score None); unknown ids are simply absent from the result."""
        if not ids:
            return {}
        with self._lock:
            rows = self.con.execute(
                "SELECT id, title, text, metadata FROM chunks "
                "WHERE id IN (SELECT unnest(?::VARCHAR[]))", [list(ids)]).fetchall()
        found = {r[0]: IndexHit(r[0], None, r[1], r[2], _load(r[3])) for r in rows}
        return {i: found[i] for i in ids if i in found}

    def stats(self) -> dict[str, Any]:
        with self._lock:
            meta = dict(self.meta)
            n_terms = self.con.execute("SELECT count(*) FROM terms").fetchall()[0][0]
            n_postings = self.con.execute("SELECT count(*) FROM tokens").fetchall()[0][0]
        return {"path": self.path, "n_docs": meta["n_docs"], "avgdl": meta["avgdl"],
                "n_terms": n_terms, "n_postings": n_postings,
                "schema_version": meta["schema_version"], "tokenizer": meta["tokenizer"],
                "k1": meta["k1"], "b": meta["b"], "created_at": meta["created_at"],
                "corpus_sha256": meta["corpus_sha256"]}


def _or_of_terms(ast: Node) -> list[str] | None:
    """The distinct terms of a plain `a OR b OR c` query, else None."""
    if isinstance(ast, Term):
        return [ast.term]
    if isinstance(ast, Or) and all(isinstance(x, Term) for x in ast.items):
        return list(dict.fromkeys(x.term for x in ast.items))
    return None


def _collect(rows: list[tuple], qids: list[Hashable]) -> dict[Hashable, list[IndexHit]]:
    out: dict[Hashable, list[IndexHit]] = {qid: [] for qid in qids}
    for qi, cid, score, title, text, md in rows:
        out[qids[qi]].append(IndexHit(cid, float(score), title, text, _load(md)))
    return out


def _load(md: Any) -> dict | None:
    if md is None:
        return None
    return json.loads(md) if isinstance(md, str) else md


def _set_sql(node: Node, params: list[Any]) -> str:
    """The set of `doc`s matching `node`, as INTERSECT/UNION/EXCEPT over posting lists."""
    if isinstance(node, Term):
        params.append(node.term)
        return "SELECT doc FROM tokens WHERE term = ?"
    if isinstance(node, Phrase):
        inner = " INTERSECT ".join(_set_sql(Term(t), params) for t in sorted(set(node.terms)))
        params.append(" " + " ".join(node.terms) + " ")
        return (f"SELECT doc FROM chunks WHERE doc IN ({inner}) "
                f"AND contains(' ' || terms || ' ', ?)")
    if isinstance(node, Not):
        return f"SELECT doc FROM chunks EXCEPT ({_set_sql(node.item, params)})"
    op = " INTERSECT " if isinstance(node, And) else " UNION "
    assert isinstance(node, (And, Or))
    return op.join(f"({_set_sql(x, params)})" for x in node.items)


def _open_error(path: str, exc: Exception) -> UserError:
    msg = str(exc)
    if "Could not set lock" in msg or "Conflicting lock" in msg:
        pid = re.search(r"PID (\d+)", msg)
        who = f" (PID {pid.group(1)})" if pid else ""
        return UserError(f"the index is in use by another process{who}, probably still being "
                         "written by `abtest index`; wait for it to finish and retry", file=path)
    first = msg.splitlines()[0] if msg else type(exc).__name__
    if not os.path.exists(path):
        return UserError(f"cannot create the index file ({first})", file=path)
    return UserError(f"cannot open the index as a DuckDB file ({first})", file=path)
