"""The results store: the ONLY module with SQL.

DuckDB, one writer process at a time. Every row is written (autocommit) as soon
as it exists, so a crash or kill -9 loses nothing finished. The schema evolves as
an ordered list of small migrations recorded in `_abtest_migrations`.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

from .errors import UserError

MIGRATIONS: list[tuple[str, Callable]] = []


def migration(fn: Callable) -> Callable:
    MIGRATIONS.append((fn.__name__, fn))
    return fn


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
    con.execute("""
    CREATE TABLE llm_calls (
        id BIGINT PRIMARY KEY DEFAULT nextval('llm_calls_seq'), call_hash VARCHAR NOT NULL,
        run_id VARCHAR, purpose VARCHAR, case_id VARCHAR, model_requested VARCHAR,
        model_resolved VARCHAR, system_fingerprint VARCHAR, prompt_tokens INTEGER,
        completion_tokens INTEGER, cost DOUBLE, latency_ms DOUBLE, error VARCHAR,
        attempt INTEGER, cached BOOLEAN, created_at TIMESTAMP)""")
    con.execute("""
    CREATE TABLE response_cache (
        call_hash VARCHAR PRIMARY KEY, model_requested VARCHAR, model_resolved VARCHAR,
        system_fingerprint VARCHAR, content VARCHAR, prompt_tokens INTEGER,
        completion_tokens INTEGER, cost DOUBLE, latency_ms DOUBLE, created_at TIMESTAMP)""")
    con.execute("""
    CREATE TABLE checks (
        run_id VARCHAR NOT NULL, case_id VARCHAR NOT NULL, variant VARCHAR NOT NULL,
        name VARCHAR NOT NULL, passed BOOLEAN, detail VARCHAR, data_json VARCHAR,
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


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).replace(tzinfo=None)


class Store:
    """A thread-safe handle on one DuckDB file (one writer process)."""

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False, create: bool = True):
        import duckdb

        self.path = Path(path)
        if not self.path.exists():
            if read_only or not create:
                raise UserError("results store not found (run `abtest run` first)", file=str(self.path))
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
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
        if not read_only:
            self._migrate()
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
        with self.lock:
            self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- generic helpers -------------------------------------------------
    def _insert(self, table: str, row: dict[str, Any], *, replace: bool = False) -> None:
        cols = list(row)
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        sql = f"{verb} INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        with self.lock:
            self.con.execute(sql, [row[c] for c in cols])

    def _rows(self, sql: str, params: Iterable = ()) -> list[dict[str, Any]]:
        with self.lock:
            cur = self.con.execute(sql, list(params))
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]

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
        with self.lock:
            self.con.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", [*fields.values(), run_id])

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
        row = dict(row)
        row.setdefault("created_at", _now())
        self._insert("generations", row, replace=True)

    def generations(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM generations WHERE run_id = ? ORDER BY case_id, variant",
                          [run_id])

    def put_checks(self, run_id: str, case_id: str, variant: str, results: list[dict]) -> None:
        with self.lock:
            self.con.execute("BEGIN TRANSACTION")
            try:
                self.con.execute("DELETE FROM checks WHERE run_id=? AND case_id=? AND variant=?",
                                 [run_id, case_id, variant])
                for r in results:
                    self.con.execute(
                        "INSERT INTO checks VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [run_id, case_id, variant, r["name"], r["passed"], r.get("detail"),
                         json.dumps(r.get("data") or {}, sort_keys=True)])
                self.con.execute("COMMIT")
            except Exception:
                self.con.execute("ROLLBACK")
                raise

    def checks(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM checks WHERE run_id = ? ORDER BY case_id, variant, name",
                          [run_id])

    def put_judgment(self, row: dict[str, Any], claims: list[dict] | None = None) -> None:
        """A judgment and its claims land together or not at all."""
        row = dict(row)
        row.setdefault("created_at", _now())
        row.setdefault("sample", 0)
        with self.lock:
            self.con.execute("BEGIN TRANSACTION")
            try:
                cols = list(row)
                self.con.execute(
                    f"INSERT OR REPLACE INTO judgments ({', '.join(cols)}) "
                    f"VALUES ({', '.join('?' * len(cols))})", [row[c] for c in cols])
                if claims is not None:
                    self.con.execute("DELETE FROM claims WHERE run_id=? AND case_id=? AND variant=?",
                                     [row["run_id"], row["case_id"], row["subject"]])
                    for i, c in enumerate(claims):
                        self.con.execute("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?)",
                                         [row["run_id"], row["case_id"], row["subject"], i,
                                          c.get("claim"), c.get("verdict"), c.get("chunk_id")])
                self.con.execute("COMMIT")
            except Exception:
                self.con.execute("ROLLBACK")
                raise

    def judgments(self, run_id: str, judge: str | None = None) -> list[dict[str, Any]]:
        if judge:
            return self._rows("SELECT * FROM judgments WHERE run_id = ? AND judge = ? "
                              "ORDER BY case_id, subject, sample", [run_id, judge])
        return self._rows("SELECT * FROM judgments WHERE run_id = ? ORDER BY case_id, judge, subject, "
                          "sample", [run_id])

    def claims(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM claims WHERE run_id = ? ORDER BY case_id, variant, idx",
                          [run_id])

    # -- llm calls and the response cache --------------------------------
    def cached_response(self, call_hash: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM response_cache WHERE call_hash = ?", [call_hash])
        return rows[0] if rows else None

    def put_cache(self, row: dict[str, Any]) -> None:
        row = dict(row)
        row.setdefault("created_at", _now())
        self._insert("response_cache", row, replace=True)

    def log_call(self, row: dict[str, Any]) -> None:
        row = dict(row)
        row.setdefault("created_at", _now())
        self._insert("llm_calls", row)

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
    def put_review_items(self, rows: list[dict[str, Any]]) -> None:
        with self.lock:
            self.con.execute("BEGIN TRANSACTION")
            try:
                for r in rows:
                    r = dict(r)
                    r.setdefault("created_at", _now())
                    cols = list(r)
                    self.con.execute(
                        f"INSERT OR REPLACE INTO review_items ({', '.join(cols)}) "
                        f"VALUES ({', '.join('?' * len(cols))})", [r[c] for c in cols])
                self.con.execute("COMMIT")
            except Exception:
                self.con.execute("ROLLBACK")
                raise

    def review_items(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM review_items WHERE run_id = ? ORDER BY item_id", [run_id])

    def put_human_labels(self, rows: list[dict[str, Any]]) -> None:
        with self.lock:
            self.con.execute("BEGIN TRANSACTION")
            try:
                for r in rows:
                    r = dict(r)
                    r.setdefault("created_at", _now())
                    cols = list(r)
                    self.con.execute(
                        f"INSERT OR REPLACE INTO human_labels ({', '.join(cols)}) "
                        f"VALUES ({', '.join('?' * len(cols))})", [r[c] for c in cols])
                self.con.execute("COMMIT")
            except Exception:
                self.con.execute("ROLLBACK")
                raise

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
            with self.lock:
                self.con.execute(f"COPY (SELECT * FROM {t} WHERE run_id = ?) TO '{esc}' {opts}",
                                 [run_id])
            written.append(target)
        return written
