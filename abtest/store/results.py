"""The results API: every run, generation, check, judgment, claim and label, read and written.

DuckDB, one writer process at a time. Every row is written as soon as it exists, so a crash
or kill -9 loses nothing finished. Writes go through the writer thread (`writer`), the schema
through `migrations`; this module is the only place with SQL over results.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from abtest.errors import UserError
from abtest.store import migrations
from abtest.store.migrations import MIGRATIONS
from abtest.store.writer import CATALOG, GroupCommit, ReadGate, WriteOp, connect
from datetime import datetime, timezone
import duckdb
from abtest.store.readers import find_service, wait_flag
from abtest.store.readers import await_writer
from abtest.store.readers import clear_stale
from abtest.store.readers import ReadService
from abtest.store.readers import WriterGone, remote_rows

def _now():

    return datetime.now(timezone.utc).replace(tzinfo=None)




_TABLES_SEEN: set[tuple] = set()   # (store file, its inode, table) known to exist


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

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False, create: bool = True,
                 through: dict | None = None):
        """`through`: read through this writer's published address (readers.find_service)
        without trying the file first, for a reader that already knows a run writes it."""

        self.path = Path(path)
        self._remote: dict | None = None  # the writing process, when it answers our reads
        self._readers = None
        self.lock = threading.RLock()
        self._local = threading.local()
        self._cursors: list = []
        self._spare: list = []   # pooled cursors of reads served to other processes
        self._writer: GroupCommit | None = None
        self._gate = ReadGate()
        self._active: set[str] = set()  # runs this process writes now (status "running")
        if through is not None and read_only:
            self._remote, self.con = through, None
            return
        if not self.path.exists():
            if read_only or not create:
                raise UserError("results store not found (run `abtest run` first)", file=str(self.path))
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = self._connect(read_only)
        except duckdb.IOException as exc:
            msg = str(exc)
            if "lock" in msg.lower() and read_only:
                # a writer holds the file: read through it once it answers (a reader is never
                # refused while the writer starts), or open the file should it come free
                self.con = None
                self._attach_reader(exc)
                return
            if "lock" in msg.lower():
                raise UserError("results store is in use by another abtest process (one writer at a "
                                "time); wait for it to finish", file=str(self.path)) from None
            raise UserError(f"cannot open results store: {msg.splitlines()[0]}",
                            file=str(self.path)) from None
        except duckdb.Error as exc:
            if "Unique file handle conflict" in str(exc):
                raise UserError("results store is held by a reader in this process that did not "
                                "let go; try again", file=str(self.path)) from None
            raise UserError(f"not a valid results store: {str(exc).splitlines()[0]}",
                            file=str(self.path)) from None
        if not read_only:

            clear_stale(self.path)  # the file is ours: an address left there is a dead writer's
            self._migrate()
            self._writer = GroupCommit(self.con, self._gate)

            self._readers = ReadService(self)  # other processes read through us meanwhile
        else:
            self._check_schema()

    # a writer kept out only by readers (no writer serves reads) waits this long for them
    READER_WAIT_S = 5.0

    def _connect(self, read_only: bool):
        """Open the file. A writer that finds it locked by readers only (a report, or `abtest
        view` between requests) raises the wait flag and retries: readers hold it briefly and
        the view lets go when it sees the flag. Locked by a writer, it fails at once."""


        def held(exc: Exception) -> bool:  # by another process, or by this one (the view)
            return (isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()) or \
                "Unique file handle conflict" in str(exc)

        try:
            return connect(self.path, read_only)
        except duckdb.Error as exc:
            if read_only or not held(exc) or find_service(self.path):
                raise
        flag = wait_flag(self.path)
        deadline = time.monotonic() + self.READER_WAIT_S
        try:
            flag.touch()
            while True:
                time.sleep(0.05)
                try:
                    return connect(self.path, read_only)
                except duckdb.Error as exc:
                    if not held(exc) or time.monotonic() > deadline or find_service(self.path):
                        raise
        finally:
            try:
                flag.unlink()
            except OSError:
                pass

    def _attach_reader(self, exc: Exception) -> None:
        """Read through the writing process, or open the file if it came free meanwhile.
        Raises UserError when the writer does not answer within readers.READER_WAIT_S."""

        how, got = await_writer(self.path, lambda: connect(self.path, True), exc)
        if how == "remote":
            self._remote, self.con = got, None
            return
        self._remote, self.con = None, got
        self._check_schema()

    def _writer_gone(self) -> None:
        """The writing process stopped answering mid-way (it finished, or died): read the file
        itself now, or through whichever process writes it next."""

        with self.lock:
            self._remote = None
            try:
                self.con = connect(self.path, True)
                self._check_schema()
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise UserError(f"cannot open results store: {str(exc).splitlines()[0]}",
                                    file=str(self.path)) from None
                self._attach_reader(exc)

    def writing_runs(self) -> set[str] | None:
        """The runs a live process is writing now: a run whose status says "running" but is
        not among them was left so by a process that died (resume it). None when the writing
        process does not say (an abtest from before it did)."""
        if self._writer is not None:
            return set(self._active)
        if self._remote is None:
            return set()   # this process reads the file itself: nobody is writing it

        info = find_service(self.path)   # fresh: the writer republishes as runs start and end
        if info is None:
            return set()
        runs = info.get("runs")
        return None if runs is None else set(runs)

    def _note_status(self, run_id: str, status: Any) -> None:
        if status is None:
            return
        before = set(self._active)
        if status == "running":
            self._active.add(run_id)
        else:
            self._active.discard(run_id)
        if self._active != before and self._readers is not None:
            self._readers.publish(self._active)

    @property
    def remote_address(self) -> dict | None:
        """The writing process's published address this handle reads through (else None)."""
        return self._remote

    @property
    def is_remote(self) -> bool:
        """Reads go to the process writing the store (it holds the file)."""
        return self._remote is not None

    @property
    def writable(self) -> bool:
        return self._writer is not None

    # -- lifecycle -------------------------------------------------------
    def _migrate(self) -> None:
        con = self.con
        assert con is not None  # only a writer migrates, and a writer holds the file
        with self.lock:
            con.execute("CREATE TABLE IF NOT EXISTS _abtest_migrations "
                        "(name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
            done = {r[0] for r in con.execute("SELECT name FROM _abtest_migrations").fetchall()}
            for name, fn in MIGRATIONS:
                if name in done:
                    continue
                con.execute("BEGIN TRANSACTION")
                try:
                    fn(con)
                    con.execute("INSERT INTO _abtest_migrations VALUES (?, ?)", [name, _now()])
                    con.execute("COMMIT")
                except Exception:
                    con.execute("ROLLBACK")
                    raise

    def _check_schema(self) -> None:
        assert self.con is not None  # checked right after opening the file
        try:
            self.con.execute("SELECT count(*) FROM _abtest_migrations").fetchone()
        except Exception:
            raise UserError("not an abtest results store", file=str(self.path)) from None

    def close(self) -> None:
        if self._readers is not None:
            self._readers.stop()
            self._readers = None
        if self.con is None:  # a remote reader holds nothing
            return
        self._gate.close()   # another process's reads through us finish before the file goes
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
                cur.execute(f"USE {CATALOG}")  # a cursor starts in the in-memory catalog
                self._cursors.append(cur)
            self._local.cursor = cur
        return cur

    def _write(self, ops: list) -> None:
        """Apply ops (see WriteOp) in one committed transaction, batched with concurrent writes."""
        if self._writer is None:
            raise UserError("results store is open read-only", file=str(self.path))
        self._writer.run(ops)

    _KEYS = {"generations": ("run_id", "case_id", "variant"), "response_cache": ("hash_key",),
             "judgments": ("run_id", "case_id", "judge", "subject", "sample"),
             "checks": ("run_id", "case_id", "variant", "name"),
             "live_items": ("run_id", "case_id", "variant"),
             "review_items": ("run_id", "item_id"), "human_labels": ("run_id", "item_id", "reviewer"),
             "run_summaries": ("run_id",)}

    def _op(self, table: str, row: dict[str, Any], *, replace: bool = False,
            ignore: bool = False) -> WriteOp:
        cols = list(row)
        sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        if not (replace or ignore):
            return WriteOp(sql, [row[c] for c in cols])
        key = self._KEYS[table]
        where = " AND ".join(f"{k} = ?" for k in key)
        kv = [row[k] for k in key]
        if replace:
            return WriteOp(sql, [row[c] for c in cols], key=(f"DELETE FROM {table} WHERE {where}", kv))
        return WriteOp(sql, [row[c] for c in cols], ignore=(f"SELECT 1 FROM {table} WHERE {where}", kv))

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- generic helpers -------------------------------------------------
    def _insert(self, table: str, row: dict[str, Any], *, replace: bool = False,
                ignore: bool = False) -> None:
        self._write([self._op(table, row, replace=replace, ignore=ignore)])

    def _rows(self, sql: str, params: Iterable = ()) -> list[dict[str, Any]]:
        if self._remote is not None:

            try:
                return remote_rows(self._remote, sql, params, path=self.path)
            except WriterGone:
                self._writer_gone()
                return self._rows(sql, params)
        names, rows = self._raw(sql, params)
        return [dict(zip(names, r)) for r in rows]

    def _raw(self, sql: str, params: Iterable = (), *, served: bool = False
             ) -> tuple[list[str], list[tuple]]:
        """Column names and row tuples of a read on this process's own file (what the read
        service sends another process: one list of names, not a dict per row). `served`: a
        read asked by another process, in a thread of its own that ends with the request,
        takes a cursor from a pool and gives it back (a cursor per thread would pile up one
        per request: thousands over a long run a view polls)."""
        with self._gate.read():
            if not served:
                return self._fetch(self._cursor(), sql, params)
            with self.lock:
                cur = self._spare.pop() if self._spare else None
            if cur is None:
                assert self.con is not None  # a store that serves reads holds its file
                with self.lock:
                    cur = self.con.cursor()
                    cur.execute(f"USE {CATALOG}")
                    self._cursors.append(cur)
            try:
                return self._fetch(cur, sql, params)
            finally:
                with self.lock:
                    self._spare.append(cur)

    @staticmethod
    def _fetch(cur, sql: str, params: Iterable) -> tuple[list[str], list[tuple]]:
        cur = cur.execute(sql, list(params))
        return [d[0] for d in cur.description], cur.fetchall()

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
        if row["status"] == "running":   # among the runs written before it reads "running"
            self._note_status(row["run_id"], "running")
        self._insert("runs", row)
        self._note_status(row["run_id"], row["status"])

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM runs WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def update_run(self, run_id: str, **fields: Any) -> None:
        sets = ", ".join(f"{k} = ?" for k in fields)
        values = [*fields.values(), run_id]
        # the one order a reader relies on (runstate.state_of): a run joins the set of runs
        # this process writes before its row says "running", and its row says how it ended
        # before it leaves the set, so no reader finds "running" with no writer behind it
        if fields.get("status") == "running":
            self._note_status(run_id, "running")
        self._write([lambda con: con.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", values)])
        self._note_status(run_id, fields.get("status"))

    def list_runs(self, fixture_sha256: str | None = None, *,
                  columns: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Runs, oldest first; columns= reads only those named (a run's config and info are
        most of its row: the view's runs page reads 200 of them through a writing process)."""
        sel = _star((), columns)
        if fixture_sha256:
            return self._rows(f"SELECT {sel} FROM runs WHERE fixture_sha256 = ? ORDER BY "
                              "created_at", [fixture_sha256])
        return self._rows(f"SELECT {sel} FROM runs ORDER BY created_at")

    def latest_run_id(self, kind: str | None = None) -> str | None:
        where, args = ("WHERE kind = ? ", [kind]) if kind else ("", [])
        rows = self._rows(f"SELECT run_id FROM runs {where}ORDER BY created_at DESC LIMIT 1", args)
        return rows[0]["run_id"] if rows else None

    def run_ids_starting(self, prefix: str, limit: int = 5) -> list[str]:
        rows = self._rows("SELECT run_id FROM runs WHERE starts_with(run_id, ?) "
                          "ORDER BY created_at DESC LIMIT ?", [prefix, limit])
        return [r["run_id"] for r in rows]

    # -- generations, checks, judgments, claims ---------------------------
    def put_generation(self, row: dict[str, Any]) -> None:
        self.put_generations([row], [])

    def put_generations(self, rows: list[dict[str, Any]],
                        checks: list[tuple[str, str, str, list[dict]]]) -> None:
        """A case's generations and their check results in one committed write."""
        ops: list[WriteOp | Callable] = []
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
                ops.append(WriteOp("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?)",
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

    def case_rows(self, run_id: str, case_id: str, live: bool = False
                  ) -> dict[str, list[dict[str, Any]]]:
        """Everything stored for one case of a run (the view's case page), by table."""
        out = {}
        answers = ("live_items", "variant") if live else ("generations", "variant")
        for table, order in (answers, ("judgments", "judge, subject, sample"),
                             ("claims", "variant, idx"), ("checks", "variant, name")):
            out[table] = self._rows(f"SELECT * FROM {table} WHERE run_id = ? AND case_id = ? "
                                    f"ORDER BY {order}", [run_id, case_id])
        return out

    def claims(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM claims WHERE run_id = ? ORDER BY case_id, variant, idx",
                          [run_id])

    # -- llm calls and the response cache --------------------------------
    def cached_response(self, call_hash: str) -> dict[str, Any] | None:
        # the key alone in SQL: DuckDB takes its index for one equality, not for two
        rows = self._rows("SELECT * EXCLUDE (hash_key) FROM response_cache WHERE hash_key = ?",
                          [migrations.cache_key(call_hash)])
        return next((r for r in rows if r["call_hash"] == call_hash), None)

    def put_cache(self, row: dict[str, Any]) -> None:
        self._write([self._cache_op(row)])

    def _cache_op(self, row: dict[str, Any]) -> WriteOp:
        row = {**row, "hash_key": migrations.cache_key(row["call_hash"])}
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

    def count_distinct_calls(self, run_id: str) -> int:
        """The run's logical LLM calls: each request once, however many attempts, cache hits or
        resumed processes it took (those are `call_summary`'s own figures)."""
        return self._rows("SELECT count(DISTINCT call_hash) AS n FROM llm_calls WHERE run_id = ?",
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

    def billed_cost_by_purpose(self, run_id: str) -> dict[str, float | None]:
        """What the provider billed, per purpose: provider attempts only (a cached answer was
        paid for by the run that first asked); None where no attempt had a known cost."""
        rows = self._rows("SELECT purpose, sum(cost) AS cost FROM llm_calls WHERE run_id = ? "
                          "AND NOT cached GROUP BY purpose ORDER BY purpose", [run_id])
        return {r["purpose"]: r["cost"] for r in rows}

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

    # -- provider batches (abtest run --batch; tables from m007_batches) ------------------
    def put_batch(self, batch: dict[str, Any], requests: list[dict[str, Any]]) -> None:
        """A submitted batch and the requests in it, in one write."""
        batch = {**batch, "created_at": _now()}
        self._write([self._op("batches", batch),
                     *[self._op("batch_requests", {**r, "batch_id": batch["batch_id"],
                                                   "run_id": batch["run_id"], "state": "pending"})
                       for r in requests]])

    def batches(self, run_id: str, *, pending: bool = False) -> list[dict[str, Any]]:
        where = " AND collected_at IS NULL" if pending else ""
        return self._rows(f"SELECT * FROM batches WHERE run_id = ?{where} ORDER BY created_at, "
                          "batch_id", [run_id])

    def batch_requests(self, batch_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM batch_requests WHERE batch_id = ?", [batch_id])

    def waiting_cases(self, run_id: str) -> dict[str, str]:
        """Case id -> the batch still out with a request of that case."""
        if not self.has_table("batch_requests"):
            return {}
        return {r["case_id"]: r["batch_id"] for r in self._rows(
            "SELECT r.case_id, min(r.batch_id) AS batch_id FROM batch_requests r JOIN batches b "
            "USING (batch_id) WHERE r.run_id = ? AND b.collected_at IS NULL AND r.case_id IS "
            "NOT NULL GROUP BY r.case_id", [run_id])}

    def failed_batch_hashes(self, run_id: str) -> set[str]:
        """Requests a batch did not answer: the run makes them as single calls instead."""
        return {r["call_hash"] for r in self._rows(
            "SELECT DISTINCT call_hash FROM batch_requests WHERE run_id = ? AND state = 'failed'",
            [run_id])}

    def collect_batch(self, batch_id: str, status: str, calls: list[tuple[dict, dict]],
                      failed: dict[str, str], note: str | None) -> None:
        """A finished batch's answers (log row, cache row), its failures and its status, in one
        write: a process that dies while collecting leaves the batch to be collected again."""
        ops: list = []
        for row, cache in calls:
            ops += [self._cache_op(cache), self._op("llm_calls", {**row, "created_at": _now()})]
        ok = [r["call_hash"] for r, _ in calls]
        bad = sorted(failed.items())
        n_ok, n_failed = len(ok), len(bad)

        def mark(con) -> None:
            if ok:
                con.execute("UPDATE batch_requests SET state = 'ok' WHERE batch_id = ? AND "
                            "list_contains(?, call_hash)", [batch_id, ok])
            if bad:   # one statement, not one per request (an expired batch: thousands)
                con.execute("UPDATE batch_requests SET state = 'failed', error = f.err FROM "
                            "(SELECT unnest(?) AS h, unnest(?) AS err) f WHERE batch_id = ? "
                            "AND call_hash = f.h", [[h for h, _ in bad], [e for _, e in bad],
                                                    batch_id])
            con.execute("UPDATE batches SET status = ?, n_ok = ?, n_failed = ?, note = ?, "
                        "collected_at = ? WHERE batch_id = ?",
                        [status, n_ok, n_failed, note, _now(), batch_id])
        self._write([*ops, mark])

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

    def labels_states(self, run_id: str | None = None) -> dict[str, tuple]:
        """A cheap fingerprint of each run's review items and labels (of one run, or of every
        run that has review items), in one query: a report that reads them (judge validation,
        PPI) is stale once it changes."""
        where, args = ("WHERE run_id = $1 ", [run_id]) if run_id is not None else ("", [])
        rows = self._rows(
            "SELECT i.run_id, i.items, coalesce(l.labels, 0) AS labels, "
            "coalesce(l.digest, '0') AS digest FROM "
            f"(SELECT run_id, count(*) AS items FROM review_items {where}GROUP BY run_id) i "
            "LEFT JOIN (SELECT run_id, count(*) AS labels, "
            "sum(hash(item_id, label, reviewer))::VARCHAR AS digest FROM human_labels "
            f"{where}GROUP BY run_id) l USING (run_id)", args)
        return {r["run_id"]: (r["items"], r["labels"], r["digest"]) for r in rows}

    def labels_state(self, run_id: str) -> tuple:
        return self.labels_states(run_id).get(run_id, (0, 0, "0"))

    # -- run summaries (the view's runs page) ----------------------------
    def put_run_summary(self, run_id: str, state: str, summary: dict[str, Any]) -> None:
        self._upsert_many("run_summaries", [{"run_id": run_id, "state": state,
                                             "summary_json": json.dumps(summary)}])

    def has_table(self, name: str) -> bool:
        """False for a table a newer migration adds, on an older store opened read-only. A
        table a store has, it keeps (migrations only add): that is remembered per file."""
        try:
            key = (str(self.path.resolve()), os.stat(self.path).st_ino, name)
        except OSError:
            key = None
        if key in _TABLES_SEEN:
            return True
        found = bool(self._rows("SELECT 1 AS x FROM duckdb_tables() WHERE table_name = ? AND "
                                "schema_name = 'main'", [name]))
        if found and key is not None:
            _TABLES_SEEN.add(key)
        return found

    def run_summaries(self) -> dict[str, dict[str, Any]]:
        """Stored summaries by run id, each with the state it was built from ({} on a store
        written by an abtest from before they existed, opened read-only)."""
        if not self.has_table("run_summaries"):
            return {}
        return {r["run_id"]: {"state": r["state"], **json.loads(r["summary_json"])}
                for r in self._rows("SELECT run_id, state, summary_json FROM run_summaries")}

    def answered_counts(self, run_ids: Iterable[str]) -> dict[str, int]:
        """Per run, the cases with an answer from both variants (a running run's progress)."""
        ids = list(run_ids)
        if not ids:
            return {}
        rows = self._rows("SELECT run_id, count(*) AS n FROM (SELECT run_id, case_id FROM "
                          "generations WHERE list_contains(?, run_id) GROUP BY run_id, case_id "
                          "HAVING count(DISTINCT variant) = 2) GROUP BY run_id", [ids])
        return {r["run_id"]: r["n"] for r in rows}

    # -- export -------------------------------------------------------------
    RUN_TABLES: tuple[str, ...] = ("runs", "generations", "llm_calls", "checks", "judgments",
                                   "claims", "human_labels", "review_items")

    def export_run(self, run_id: str | None, out_dir: Path, fmt: str) -> list[Path]:
        """One file per run table: the run's rows, or every run's (run_id None)."""
        if self._remote is not None:  # DuckDB's COPY needs the file; rows over the wire do not
            raise UserError(f"a run is writing this store (process {self._remote.get('pid')}); "
                            "export once it finishes (report, history and view work meanwhile)",
                            file=str(self.path))
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        opts = {"parquet": "(FORMAT parquet)", "csv": "(FORMAT csv, HEADER)",
                "jsonl": "(FORMAT json)"}[fmt]
        for t in self.RUN_TABLES:
            target = out_dir / f"{t}.{fmt}"
            esc = str(target).replace("'", "''")
            where, args = ("WHERE run_id = ? ", [run_id]) if run_id is not None else ("", [])
            with self._gate.read():
                self._cursor().execute(f"COPY (SELECT * FROM {t} {where}ORDER BY run_id) TO "
                                       f"'{esc}' {opts}", args)
            written.append(target)
        return written

    # -- merging shards (abtest merge) ---------------------------------------------------
    MERGED_TABLES = ("generations", "llm_calls", "checks", "judgments", "claims")

    def run_rows(self, run_id: str) -> dict[str, list[dict[str, Any]]]:
        """A frozen run's rows in every table `abtest merge` carries over."""
        return {t: self._rows(f"SELECT * FROM {t} WHERE run_id = ?", [run_id])
                for t in self.MERGED_TABLES}

    def put_merged_run(self, run_row: dict[str, Any], rows: dict[str, list[dict[str, Any]]]
                       ) -> None:
        """The merged run and all its rows in one write: all of it is stored, or none."""
        rid = run_row["run_id"]
        ops = [self._op("runs", run_row)]
        for table, items in rows.items():
            ops += [self._op(table, {**r, "run_id": rid}) for r in items]
        self._write(ops)

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


def read_export(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """The runs and rows an `abtest export --format parquet` folder holds, by table."""

    con = duckdb.connect()
    try:
        out: dict[str, Any] = {}
        for t in ("runs",) + Store.MERGED_TABLES:
            f = folder / f"{t}.parquet"
            if not f.is_file():
                raise UserError(f"no {t}.parquet here (a folder `abtest export --format parquet` "
                                "wrote)", file=str(folder))
            cur = con.execute("SELECT * FROM read_parquet(?)", [str(f)])
            names = [d[0] for d in cur.description]
            out[t] = [dict(zip(names, r)) for r in cur.fetchall()]
        return out
    except duckdb.Error as exc:
        raise UserError(f"cannot read the export: {str(exc).splitlines()[0]}",
                        file=str(folder)) from None
    finally:
        con.close()
