"""The store's storage layout and the report's fast paths give the same results as the slow ones."""

from __future__ import annotations

import gc
import json
import threading

import pytest
from tabulate import tabulate

from abtest import stats as S
from abtest.capturing import read_manifest, write_fixture
from abtest.core.gcpause import gc_paused
from abtest.core.models import Case, Chunk
from abtest.reporting import build as B
from abtest.reporting import render
from abtest.reporting.markdown import _text_table
from abtest.store import Store
from abtest.store.writer import ROW_GROUP_SIZE
from support.fakes import DATA


def test_store_row_groups_are_bounded_and_every_thread_reads_the_store(tmp_path):
    n = 2 * ROW_GROUP_SIZE + 100
    s = Store(tmp_path / "s.duckdb")
    s.bulk_insert("checks", [{"run_id": "r", "case_id": f"q{i:06d}", "variant": "A", "name": "length",
                              "passed": True, "detail": "", "data_json": "{}"} for i in range(n)])
    s.close()
    s = Store(tmp_path / "s.duckdb", read_only=True)
    groups = s.con.execute("SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('checks')").fetchone()[0]
    assert groups == 3  # DuckDB's default (122,880 rows) would keep these rows in one group
    seen = []
    t = threading.Thread(target=lambda: seen.append(len(s.checks("r"))))  # a cursor of its own
    t.start()
    t.join()
    assert seen == [n]
    s.close()


@pytest.mark.parametrize("rows", [
    [["P1", "hallucination incident in case q1 (faithfulness 0.12)", "cause", "remedy"]],
    [["P2", "a", "bb", "ccc"], ["P3", "longer item text", "", "x"], ["P1", " padded ", "é", "—"]],
])
def test_text_table_is_tabulates_github_layout(rows):
    headers = ["priority", "item", "likely cause", "remedy"]
    assert _text_table(rows, headers) == tabulate(rows, headers=headers, tablefmt="github",
                                                  disable_numparse=True)


def test_text_table_escapes_pipes_and_line_breaks():
    out = _text_table([["P1", "a | b", "two\nlines", None]], ["priority", "item", "cause", "remedy"])
    body = out.splitlines()[2]
    assert body.count(" | ") == 3 and "a \\| b" in body and "two lines" in body
    assert len(out.splitlines()) == 3


def test_gc_is_paused_while_a_report_is_built_and_restored_after(tmp_path, monkeypatch):
    states = []
    sample = json.loads((DATA / "sample_report.json").read_text())
    monkeypatch.setattr(B, "_build_report",
                        lambda *a, **k: states.append(gc.isenabled()) or sample)
    assert gc.isenabled()
    B.build_report(None, "r")
    assert states == [False] and gc.isenabled()

    def boom(*a, **k):
        raise RuntimeError("x")

    monkeypatch.setattr(B, "_build_report", boom)
    with pytest.raises(RuntimeError):
        B.build_report(None, "r")
    assert gc.isenabled()
    gc.disable()  # a caller that runs without the collector keeps it off
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ValueError):
        render({}, "xml")
    assert gc.isenabled()


def test_holm_skips_the_full_collection_statsmodels_runs_and_puts_gc_collect_back(monkeypatch):
    """statsmodels' Holm branch calls gc.collect(): a full collection over all the caller
    holds (0.14 s a call after litellm and scipy loaded, once per look of a sequential run).
    The adjustment makes no cycle, so the collection is skipped for the call, and the
    caller's gc.collect is the real one again after it, even when the call fails."""
    collected = []
    real_collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda generation=2: collected.append(generation) or 0)
    fake_collect = gc.collect
    real = S.multipletests

    def holm_collecting(*a, **k):
        gc.collect()   # what statsmodels does in its Holm branch
        return real(*a, **k)

    monkeypatch.setattr(S, "multipletests", holm_collecting)
    assert S.holm([0.01, 0.04, 0.03]).p_adjusted == pytest.approx((0.03, 0.06, 0.06))
    assert collected == [] and gc.collect is fake_collect
    monkeypatch.setattr(S, "multipletests", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        S.holm([0.2, 0.01])
    assert gc.collect is fake_collect
    assert real_collect is not fake_collect


def test_closing_a_writer_waits_for_another_processs_read_through_it(tmp_path):
    """A run's process closes its store as it ends; a reader (the view, polling) may be
    reading through it at that moment: the read finishes first, and one asked after the
    close began is told the writer is gone (the reader opens the file), never a crash."""
    import threading

    from abtest.store import Store
    from abtest.store.readers import WriterGone, find_service, remote_rows

    st = Store(tmp_path / "s.duckdb")
    info = find_service(st.path)
    assert info is not None
    got: dict = {}

    def slow_read():
        try:
            got["rows"] = remote_rows(info, "SELECT count(*) AS n FROM range(300000000)", [],
                                      path=st.path)
        except Exception as exc:   # noqa: BLE001 - what the reader saw is the test
            got["error"] = exc

    t = threading.Thread(target=slow_read)
    t.start()
    while not st._gate._reads and t.is_alive():
        threading.Event().wait(0.005)
    assert st._gate._reads == 1          # the read is in flight as the writer closes
    st.close()                           # no DuckDB "connection is busy" here
    t.join(60)
    assert got == {"rows": [{"n": 300000000}]}
    with pytest.raises(WriterGone):      # after the close: gone, never a half-answer
        remote_rows(info, "SELECT 1 AS x", [], path=st.path, timeout=5)


def test_manifest_read_without_its_case_seals_keeps_dates_and_refuses_bad_fields(tmp_path):
    cases = [Case(id=f"q{i}", question="Q?", answerable=True, corpus_version="v", retriever="r",
                  context=[Chunk(id="c1", text="t")]) for i in range(3)]
    fx = write_fixture(tmp_path / "fx", cases, corpus_version="v", retriever="r", refresh_every_days=7)
    full = read_manifest(fx.path / "manifest.json")
    light = read_manifest(fx.path / "manifest.json", cases=False)
    assert len(full.cases) == 3 and light.cases == []
    assert (light.captured_at, light.refresh_every_days, light.n_cases) == \
        (full.captured_at, 7, 3)
    data = json.loads((fx.path / "manifest.json").read_text())
    data["refresh_every_days"] = "weekly"
    (fx.path / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(Exception, match="refresh_every_days"):
        read_manifest(fx.path / "manifest.json", cases=False)


def test_report_reads_cases_jsonl_as_plain_json_with_their_display_fields(tmp_path):
    cases = [Case(id="q1", question="Why?", answerable=False, category="out_of_scope",
                  corpus_version="v", retriever="r", context=[Chunk(id="c9", text="t")])]
    fx = write_fixture(tmp_path / "fx", cases, corpus_version="v", retriever="r")
    got = B._fixture_cases({"fixture_path": str(fx.path)})
    assert got["q1"]["question"] == "Why?" and got["q1"]["answerable"] is False
    assert got["q1"]["category"] == "out_of_scope" and [c["id"] for c in got["q1"]["context"]] == ["c9"]
    good = '{"id": "q1", "context": [{"id": "c1"}]}'
    for bad in ('{"id": "q1", "context": "not a list"}',  # a field the report reads is wrong
                '[1, 2]', '{"context": []}', '{"id": "q2", "context": [{"text": "no id"}]}',
                '{"id": "q2", "context": []}, {"id": "q3", "context": []}',  # two values, one line
                '{"id": "q2", "context": [}', ']'):  # not JSON, or JSON only once lines are joined
        (fx.path / "cases.jsonl").write_text(f"{good}\n\n{bad}\n")
        assert B._fixture_cases({"fixture_path": str(fx.path)}) == {}, bad
    (fx.path / "cases.jsonl").write_bytes(b'{"id": "q1", "context": []}\n\xff\n')
    assert B._fixture_cases({"fixture_path": str(fx.path)}) == {}
    (fx.path / "cases.jsonl").write_text(f"{good}\n\n  \n" + good.replace("q1", "q2") + "\n")
    assert list(B._fixture_cases({"fixture_path": str(fx.path)})) == ["q1", "q2"]
    assert B._fixture_cases({"fixture_path": str(tmp_path / "gone")}) == {}


def test_generations_without_prompts_and_the_one_prompt_pair_the_report_shows(tmp_path):
    s = Store(tmp_path / "s.duckdb")
    msgs = {("q1", "A"): "[]", ("q1", "B"): "",  # q1 lacks B's prompt: not a pair
            ("q2", "A"): json.dumps([{"role": "user", "content": "a"}]),
            ("q2", "B"): json.dumps([{"role": "user", "content": "b"}]),
            ("q3", "A"): "[]", ("q3", "B"): "[]", ("q0", "A"): "[]"}
    s.bulk_insert("generations", [{"run_id": "r", "case_id": c, "variant": v, "answer": f"{c}{v}",
                                   "messages_json": m or None} for (c, v), m in msgs.items()])
    light = s.generations("r", exclude=("messages_json",))
    full = s.generations("r")
    assert "messages_json" not in light[0] and "messages_json" in full[0]
    assert [{k: v for k, v in g.items() if k != "messages_json"} for g in full] == light
    assert s.prompt_pair("r") == ("q2", msgs[("q2", "A")], msgs[("q2", "B")])
    assert s.prompt_pair("other") is None
    diff = B._prompt_diff(s.prompt_pair("r"))
    assert diff["case_id"] == "q2" and diff["changed_parts"] == ["user"]
    s.close()


def test_reads_of_named_columns_or_without_the_columns_named(tmp_path):
    s = Store(tmp_path / "s.duckdb")
    s.put_judgment({"run_id": "r", "case_id": "q1", "judge": "faithfulness", "subject": "A",
                    "verdict": "scored", "score": 0.5, "rationale": "long text"})
    full = s.judgments("r")[0]
    light = s.judgments("r", "faithfulness", exclude=("rationale", "created_at"))[0]
    assert full["rationale"] == "long text" and "rationale" not in light
    assert light == {k: v for k, v in full.items() if k not in ("rationale", "created_at")}
    only = s.judgments("r", columns=B._JUDGMENT_COLUMNS)[0]
    assert list(only) == list(B._JUDGMENT_COLUMNS) and only == {k: full[k] for k in only}
    s.put_generations([{"run_id": "r", "case_id": "q1", "variant": "A", "answer": "x",
                        "messages_json": "[]"}], [("r", "q1", "A", [{"name": "json", "passed": False}])])
    assert s.generations("r", columns=B._GENERATION_COLUMNS) == \
        [{"case_id": "q1", "variant": "A", "answer": "x", "error": None}]
    assert s.checks("r", columns=B._CHECK_COLUMNS) == \
        [{"case_id": "q1", "variant": "A", "name": "json", "passed": False}]
    for bad in ({"exclude": ("score; DROP TABLE runs",)}, {"columns": ("score, 1",)}):
        with pytest.raises(ValueError, match="not a column"):
            s.judgments("r", **bad)
    for bad in ({"columns": ()}, {"columns": ("score",), "exclude": ("rationale",)}):
        with pytest.raises(ValueError, match="not both"):
            s.judgments("r", **bad)
    s.close()


def _check_rows(s, run_id="r"):
    return sorted((c["case_id"], c["variant"], c["name"], c["passed"]) for c in s.checks(run_id))


def test_checks_are_replaced_not_duplicated_without_a_key(tmp_path):
    s = Store(tmp_path / "s.duckdb")
    gen = {"run_id": "r", "case_id": "q1", "variant": "A", "answer": "x"}
    first = [{"name": "length", "passed": False}, {"name": "json", "passed": True}]
    s.put_generations([gen], [("r", "q1", "A", first)])
    s.put_generations([{**gen, "answer": "y"}], [("r", "q1", "A", [{**c, "passed": True} for c in first])])
    assert _check_rows(s) == [("q1", "A", "json", True), ("q1", "A", "length", True)]
    assert [g["answer"] for g in s.generations("r")] == ["y"]
    # checks without their generation in the same write, and the live runs' standalone writes
    s.put_generations([], [("r", "q1", "A", [{"name": "length", "passed": False}])])
    assert _check_rows(s) == [("q1", "A", "length", False)]
    for passed in (True, False):
        s.put_checks("r", "q2", "B", [{"name": "length", "passed": passed}])
    assert _check_rows(s)[-1:] == [("q2", "B", "length", False)] and len(_check_rows(s)) == 2
    s.close()


def test_an_older_store_gets_lean_keys_and_keeps_its_rows(tmp_path):
    import duckdb

    from abtest.store import migrations as st

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE _abtest_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    for name, fn in st.MIGRATIONS[:2]:  # the store as m001/m002 left it, with rows in it
        fn(con)
        con.execute("INSERT INTO _abtest_migrations VALUES (?, now())", [name])
    con.execute("INSERT INTO checks VALUES ('r', 'q1', 'A', 'length', true, '', '{}')")
    con.execute("INSERT INTO llm_calls (call_hash, run_id, attempt) VALUES ('h1', 'r', 1)")
    con.close()
    s = Store(path)
    assert _check_rows(s) == [("q1", "A", "length", True)]
    s.log_call({"call_hash": "h2", "run_id": "r", "attempt": 1})
    assert [(c["id"], c["call_hash"]) for c in s.llm_calls("r")] == [(1, "h1"), (2, "h2")]
    keys = s.con.execute("SELECT table_name FROM duckdb_constraints() WHERE constraint_type = "
                         "'PRIMARY KEY' AND database_name = current_database()").fetchall()
    assert {"generations", "judgments", "response_cache"} <= {k[0] for k in keys}
    assert not {"checks", "llm_calls"} & {k[0] for k in keys}
    s.close()


def test_an_older_store_gets_the_cache_keyed_by_a_bigint_and_keeps_its_rows(tmp_path):
    import duckdb

    from abtest.store import migrations as st

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE _abtest_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    names = [name for name, _ in st.MIGRATIONS]
    for name, fn in st.MIGRATIONS[:names.index("m004_cache_key")]:
        fn(con)
        con.execute("INSERT INTO _abtest_migrations VALUES (?, now())", [name])
    con.execute("INSERT INTO response_cache (call_hash, content, created_at) VALUES "
                "('h1', 'one', now()), ('h2', 'two', now())")
    con.close()
    s = Store(path)
    assert s.cached_response("h1")["content"] == "one" and s.cached_response("h2")["content"] == "two"
    assert "hash_key" not in s.cached_response("h1") and s.cached_response("h3") is None
    s.put_cache({"call_hash": "h1", "content": "again"})  # first writer wins
    s.log_call({"call_hash": "h3", "run_id": "r", "attempt": 1}, cache={"call_hash": "h3", "content": "3"})
    assert s.cached_response("h1")["content"] == "one" and s.cached_response("h3")["content"] == "3"
    keys = dict(s.con.execute(
        "SELECT table_name, constraint_column_names FROM duckdb_constraints() WHERE "
        "constraint_type = 'PRIMARY KEY' AND database_name = current_database()").fetchall())
    assert keys["response_cache"] == ["hash_key"]
    assert dict(s.con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = "
                              "'response_cache' AND database_name = current_database()").fetchall()
                )["hash_key"] == "BIGINT"
    assert s.con.execute("SELECT count(*) FROM response_cache").fetchone()[0] == 3
    s.close()


def test_two_call_hashes_sharing_a_cache_key_never_mix_up_answers(tmp_path, monkeypatch):
    from abtest.store import migrations as st

    s = Store(tmp_path / "s.duckdb")
    monkeypatch.setattr(st, "cache_key", lambda call_hash: 7)  # force the (~1e-8) collision
    s.put_cache({"call_hash": "first", "content": "A"})
    s.log_call({"call_hash": "second", "run_id": "r", "attempt": 1},
               cache={"call_hash": "second", "content": "B"})
    assert s.cached_response("first")["content"] == "A"
    assert s.cached_response("second") is None  # not cached: asked again on resume, never "A"
    assert [c["call_hash"] for c in s.llm_calls("r")] == ["second"]  # the call is still logged
    monkeypatch.undo()
    assert st.cache_key("first") != st.cache_key("second")
    assert st.cache_key("x") == st.cache_key("x") and -2 ** 63 <= st.cache_key("x") < 2 ** 63
    s.close()


def _cached_mb(s: Store) -> float:
    return s.con.execute("SELECT sum(memory_usage_bytes) / 2 ** 20 FROM duckdb_memory() "
                         "WHERE tag = 'BASE_TABLE'").fetchone()[0] or 0.0


def _rows_of_text(n: int) -> list[dict]:
    return [{"run_id": "r", "case_id": f"q{i:06d}", "variant": "A", "name": "length", "passed": True,
             "detail": f"{i:08x}" * 40, "data_json": "{}"} for i in range(n)]


def test_trim_evicts_cached_pages_and_restores_the_memory_limit(tmp_path):
    import duckdb

    default = duckdb.connect().execute("SELECT current_setting('memory_limit')").fetchone()[0]
    s = Store(tmp_path / "s.duckdb")
    s.bulk_insert("checks", _rows_of_text(60_000))
    s.con.execute("CHECKPOINT")
    assert len(s.checks("r", columns=["detail"])) == 60_000  # every page read into the cache
    before = _cached_mb(s)
    assert before > 8
    with s._gate.read():  # a read in flight: no trim under it
        assert s._gate.trim(s.con) is False
    assert _cached_mb(s) == before
    assert s._gate.trim(s.con) is True
    assert _cached_mb(s) <= before / 2
    assert s.con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == default
    assert len(s.checks("r", columns=["detail"])) == 60_000  # pages come back from the file
    s.close()


def test_the_writer_trims_every_trim_every_writes_and_loses_nothing(tmp_path, monkeypatch):
    import abtest.store.writer as st

    trims = []
    real = st.ReadGate.trim
    monkeypatch.setattr(st, "TRIM_EVERY", 3)
    monkeypatch.setattr(st.ReadGate, "trim", lambda self, con: trims.append(1) or real(self, con))
    s = Store(tmp_path / "s.duckdb")
    rows = _rows_of_text(500)
    for k in range(0, 500, 50):
        s.bulk_insert("checks", rows[k:k + 50])  # one write each, committed alone: 10 writes, 3 trims
    assert len(trims) == 3
    assert len(s.checks("r")) == 500
    s.close()
    monkeypatch.setattr(st, "TRIM_EVERY", 0)
    s = Store(tmp_path / "s.duckdb")
    s.bulk_insert("checks", _rows_of_text(10))
    s.close()
    assert len(trims) == 3


def test_a_read_waits_out_a_trim(tmp_path):
    s = Store(tmp_path / "s.duckdb")
    s.bulk_insert("checks", _rows_of_text(100))
    in_set, go, done = threading.Event(), threading.Event(), []

    class Held:  # the store's connection, held inside the trim's SET until told to go on
        def execute(self, sql, *args):
            if sql.startswith("SET memory_limit"):
                in_set.set()
                go.wait(10)
            return s.con.execute(sql, *args)

    trim = threading.Thread(target=lambda: done.append(s._gate.trim(Held())))
    trim.start()
    assert in_set.wait(10)
    read = threading.Thread(target=lambda: done.append(len(s.checks("r"))))
    read.start()
    read.join(0.3)
    assert read.is_alive() and done == []  # the read waits while DuckDB's limit is low
    go.set()
    trim.join(10)
    read.join(10)
    assert done == [True, 100]
    s.close()


def test_reads_served_to_other_processes_reuse_their_cursors(tmp_path):
    """Each read another process asks comes in a thread of its own; a cursor per thread piled
    up one per request (a view polling a long run every few seconds: thousands)."""
    from abtest.store import Store
    from abtest.store.readers import find_service, remote_rows

    st = Store(tmp_path / "s.duckdb")
    try:
        info = find_service(st.path)
        assert info is not None
        before = len(st._cursors)
        for i in range(40):
            assert remote_rows(info, "SELECT ? AS x", [i], path=st.path) == [{"x": i}]
        assert len(st._cursors) - before == 1
    finally:
        st.close()
