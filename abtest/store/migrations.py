"""The results store's schema, as an ordered list of small migrations.

Each migration runs once per store file and is recorded in `_abtest_migrations`, so an
older store is brought up to date when it is opened and nothing is ever re-created by hand.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

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


@migration
def m005_model_detail(con) -> None:
    """`llm_calls.model_detail`: what the provider said when model_resolved shortens it (a local
    server's model file path; the id shown is the file's name)."""
    con.execute("ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS model_detail VARCHAR")


@migration
def m006_run_summaries(con) -> None:
    """`run_summaries`: each finished run's claim line and gate, kept with the state of the run
    they were built from (abtest version, status, finish time, labels), so `abtest view` lists
    hundreds of runs without building each report; a summary whose state differs is rebuilt."""
    con.execute("""
    CREATE TABLE IF NOT EXISTS run_summaries (
        run_id VARCHAR PRIMARY KEY, state VARCHAR NOT NULL, summary_json VARCHAR NOT NULL,
        created_at TIMESTAMP)""")


@migration
def m007_batches(con) -> None:
    """`batches` and `batch_requests`: a run's provider batches (`abtest run --batch`), kept so
    that the run survives its process over the batch window and `--resume` collects them."""
    con.execute("""
    CREATE TABLE IF NOT EXISTS batches (
        batch_id VARCHAR PRIMARY KEY, run_id VARCHAR NOT NULL, model VARCHAR, api_base VARCHAR,
        input_file_id VARCHAR, status VARCHAR NOT NULL, n_requests INTEGER, n_ok INTEGER,
        n_failed INTEGER, note VARCHAR, created_at TIMESTAMP, collected_at TIMESTAMP)""")
    con.execute("""
    CREATE TABLE IF NOT EXISTS batch_requests (
        batch_id VARCHAR NOT NULL, call_hash VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
        purpose VARCHAR, case_id VARCHAR, state VARCHAR NOT NULL, error VARCHAR)""")
