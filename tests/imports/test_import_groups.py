"""Importers fill a case's `group` where the source has one, say so, and change nothing else:
a trace's session (Phoenix `session.id`, Langfuse `sessionId`, OpenInference `session.id`), a
dataset's grouping column (`group`, `doc_id`, `document_id`, `document`), a RAGAS testset's
source document or shared `reference_contexts`; promptfoo has none. The real files are those
of tests/data/imports (README.md there: origin and licence); the expected sessions are read
from the raw JSON here with `json`, not with abtest."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from abtest.core.groups import case_groups, group_summary
from support.fakes import DATA as TEST_DATA
from support.importing import run   # the project fixture `proj` is tests/imports/conftest.py's

IMPORTS = TEST_DATA / "imports"
PHX_REST = IMPORTS / "phoenix" / "rest_spans_pxi_turn_trace.json"
LF_WORKER = IMPORTS / "langfuse" / "worker-chatml" / "llamaindex-2025-06-05.trace.json"
LF_SEEDER = IMPORTS / "langfuse" / "seeder" / "llamaindex-2025-06-05.json"
LF_GRAPH = IMPORTS / "langfuse" / "worker-chatml" / "langgraph-js-2025-10-30.trace.json"
PARQUET = IMPORTS / "phoenix" / "spans_dataframe_llamaindex_rag.parquet"
CLAPNQ = TEST_DATA / "clapnq" / "cases.jsonl"




def cases_of(name: str) -> list[dict]:
    return [json.loads(line) for line in Path(f"fixtures/{name}/cases.jsonl").read_text(
        encoding="utf-8").splitlines()]


# --------------------------------------------------------------------------- traces

def test_the_sessions_of_real_phoenix_and_langfuse_exports_are_read():
    from abtest.imports.traces import read_traces

    raw = json.loads(PHX_REST.read_text(encoding="utf-8"))
    want = {s["context"]["trace_id"]: s["attributes"]["session.id"] for s in raw
            if "session.id" in (s.get("attributes") or {})}
    assert want == {"fixture-trace-1": "fixture-session"}
    assert read_traces(PHX_REST).sessions == want
    for f in (LF_WORKER, LF_SEEDER):
        doc = json.loads(f.read_text(encoding="utf-8"))
        got = read_traces(f)
        assert got.sessions == {doc["trace"]["id"]: doc["trace"]["sessionId"]}
        assert got.session_fields == {"sessionId"}
    doc = json.loads(LF_GRAPH.read_text(encoding="utf-8"))
    assert doc["trace"]["sessionId"] is None and read_traces(LF_GRAPH).sessions == {}


def _with_retrieval(doc: dict, trace_id: str) -> dict:
    """The real Langfuse trace with one LangChain retriever observation added (no real
    Langfuse export holds one: tests/data/imports/README.md); its session is the file's."""
    obs = {"id": "added-retriever", "traceId": trace_id, "type": "RETRIEVER",
           "name": "retriever", "startTime": doc["trace"]["timestamp"],
           "parentObservationId": None, "input": "What is Langfuse?",
           "output": [{"page_content": "Langfuse is an open source LLM engineering platform.",
                       "metadata": {"source": "langfuse.md"}, "id": "lf#1"}]}
    return {**doc, "observations": [*doc["observations"], obs]}


def test_a_langfuse_session_becomes_the_cases_group_and_is_said(proj):
    doc = json.loads(LF_WORKER.read_text(encoding="utf-8"))
    session, trace_id = doc["trace"]["sessionId"], doc["trace"]["id"]
    Path("lf.json").write_text(json.dumps(_with_retrieval(doc, trace_id)), encoding="utf-8")
    r = run("capture", "--from-traces", "lf.json", "--out", "fixtures/lf")
    assert r.exit_code == 0, r.stderr
    (c,) = cases_of("lf")
    assert c["group"] == session == "session_abc"
    assert c["question"] == "What is Langfuse?"
    assert [(ch["id"], ch["text"]) for ch in c["context"]] == [
        ("lf#1", "Langfuse is an open source LLM engineering platform.")]
    line = "group: each case's session (sessionId): 1 of 1 case(s) in 1 session(s)"
    assert f"abtest: {line}" in r.stderr.splitlines()
    notes = json.loads(Path("fixtures/lf/manifest.json").read_text())["notes"]["from_traces"]
    assert notes["group"] == line


def test_a_phoenix_session_becomes_the_cases_group(proj):
    raw = json.loads(PHX_REST.read_text(encoding="utf-8"))
    root = next(s for s in raw if s["parent_id"] is None)
    added = {"id": "added", "name": "retrieve", "context": {"trace_id": "fixture-trace-1",
                                                             "span_id": "s99"},
             "span_kind": "RETRIEVER", "parent_id": root["context"]["span_id"],
             "start_time": root["start_time"],
             "attributes": {"input.value": "datasets",
                            "retrieval.documents": [{"document.id": "docs#1",
                                                     "document.content": "Save traces."}]}}
    Path("phx.json").write_text(json.dumps([*raw, added]), encoding="utf-8")
    r = run("capture", "--from-traces", "phx.json", "--out", "fixtures/phx")
    assert r.exit_code == 0, r.stderr
    (c,) = cases_of("phx")
    assert c["group"] == root["attributes"]["session.id"] == "fixture-session"
    assert c["question"] == root["attributes"]["input.value"]
    assert "group: each case's session (session.id): 1 of 1 case(s)" in r.stderr


def test_an_otlp_session_id_attribute_groups_its_traces(proj):
    """The hand-made OTLP export (tests/data/traces) with `session.id` on two traces' spans."""
    from abtest.imports.traces import cases_from_traces, read_traces

    lines = (TEST_DATA / "traces" / "otlp.jsonl").read_text(encoding="utf-8").splitlines()
    out, sessions = [], {}
    for n, line in enumerate(lines):
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    if n < 2:
                        sp.setdefault("attributes", []).append(
                            {"key": "session.id", "value": {"stringValue": "sess-A"}})
                        sessions[sp["traceId"]] = "sess-A"
        out.append(json.dumps(doc))
    Path("otlp.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
    read = read_traces(Path("otlp.jsonl"))
    assert read.sessions == sessions and read.session_fields == {"session.id"}
    cases, _, _ = cases_from_traces(read, corpus_version="v", source_name="otlp.jsonl")
    for c in cases:
        assert c.group == sessions.get(c.meta["trace_id"])
    assert any(c.group is None for c in cases) and any(c.group == "sess-A" for c in cases)


def test_a_phoenix_export_without_sessions_gives_no_group(proj):
    shutil.copy(PARQUET, "spans.parquet")
    r = run("capture", "--from-traces", "spans.parquet", "--out", "fixtures/phx")
    assert r.exit_code == 0, r.stderr
    assert all("group" not in c for c in cases_of("phx"))
    assert "group:" not in r.stderr
    assert "group" not in json.loads(Path("fixtures/phx/manifest.json").read_text())[
        "notes"]["from_traces"]


# --------------------------------------------------------------------------- question files

def _capture(qfile: str, ctx_rows: list[dict], name: str = "q"):
    Path("ctx.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ctx_rows),
                                 encoding="utf-8")
    return run("capture", qfile, "--retriever", "jsonl:ctx.jsonl", "--out", f"fixtures/{name}")


def test_a_datasets_doc_id_column_becomes_group_and_nothing_else_changes(proj):
    Path("qs.csv").write_text("id,question,doc_id\nq1,Who was Rollo?,normans\n"
                              "q2,Where is Normandy?,normans\nq3,What is BM25?,ir-book\n"
                              "q4,What is a token?,\n", encoding="utf-8")
    r = _capture("qs.csv", [{"id": f"q{i}", "contexts": [f"text {i}"]} for i in range(1, 5)])
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of("q")}
    assert {k: c.get("group") for k, c in got.items()} == {
        "q1": "normans", "q2": "normans", "q3": "ir-book", "q4": None}
    assert got["q1"]["question"] == "Who was Rollo?"
    assert [ch["text"] for ch in got["q3"]["context"]] == ["text 3"]
    assert ("qs.csv: group (which questions are not independent): from doc_id for 3 of 4 "
            "question(s), 2 group(s); 1 without one (each its own group)") in r.stderr
    assert "doc_id (no case field" not in r.stderr      # imported, as the group


def test_a_grouping_column_that_is_not_text_is_exit_2_naming_row_and_column(proj):
    Path("qs.jsonl").write_text(json.dumps({"id": "q1", "question": "A?", "document_id": "d"})
                                + "\n" + json.dumps({"id": "q2", "question": "B?",
                                                     "document_id": ["d", "e"]}) + "\n")
    r = _capture("qs.jsonl", [{"id": "q1", "contexts": ["a"]}, {"id": "q2", "contexts": ["b"]}])
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "line 2" in err and "field 'document_id'" in err, err
    assert not Path("fixtures/q").exists()


def test_a_ragas_testset_groups_questions_written_from_one_reference_context(proj):
    """RAGAS testsets (`user_input`, `reference_contexts`, `reference`, `synthesizer_name`):
    questions sharing a reference context text are one group; the texts are ClapNQ's."""
    clap = [json.loads(x) for x in CLAPNQ.read_text(encoding="utf-8").splitlines()]
    p1, p2, p3 = (c["context"][0]["text"] for c in clap[:3])
    rows = [{"user_input": "Q one?", "reference_contexts": [p1], "reference": "A.",
             "synthesizer_name": "single_hop_specific_query_synthesizer"},
            {"user_input": "Q two?", "reference_contexts": [p1], "reference": "B.",
             "synthesizer_name": "single_hop_specific_query_synthesizer"},
            {"user_input": "Q three?", "reference_contexts": [p2, p3], "reference": "C.",
             "synthesizer_name": "multi_hop_abstract_query_synthesizer"},
            {"user_input": "Q four?", "reference_contexts": [p3], "reference": "D.",
             "synthesizer_name": "single_hop_specific_query_synthesizer"}]
    Path("testset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ctx = [{"question": row["user_input"], "contexts": ["retrieved"]} for row in rows]
    r = _capture("testset.jsonl", ctx, "rg")
    assert r.exit_code == 0, r.stderr
    got = {c["question"]: c.get("group") for c in cases_of("rg")}

    def key(texts):
        return "rc-" + hashlib.sha256(min(texts).encode()).hexdigest()[:12]

    assert got == {"Q one?": key([p1]), "Q two?": key([p1]), "Q three?": key([p2, p3]),
                   "Q four?": key([p2, p3])}
    assert "from reference_contexts for 4 of 4 question(s), 2 group(s)" in r.stderr


def test_a_ragas_v01_testset_groups_by_its_metadata_source(proj):
    rows = [{"question": "A?", "ground_truth": "a", "metadata": [{"source": "data/pg.txt"}]},
            {"question": "B?", "ground_truth": "b", "metadata": [{"source": "data/pg.txt"}]},
            {"question": "C?", "ground_truth": "c", "metadata": [{"file_path": "x.pdf"}]}]
    Path("ts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = _capture("ts.jsonl", [{"question": f"{q}?", "contexts": ["t"]} for q in "ABC"])
    assert r.exit_code == 0, r.stderr
    assert {c["question"]: c.get("group") for c in cases_of("q")} == {
        "A?": "data/pg.txt", "B?": "data/pg.txt", "C?": "x.pdf"}
    assert "from metadata source for 2, metadata file_path for 1 of 3" in r.stderr


@pytest.mark.parametrize("name", ["scientist_biographies.csv", "rag_eval_test_dataset.csv"])
def test_real_ragas_csvs_without_a_grouping_give_no_group(proj, name):
    shutil.copy(IMPORTS / "ragas" / name, name)
    import csv

    with open(name, newline="", encoding="utf-8") as f:
        qs = [row.get("user_input") or row["question"] for row in csv.DictReader(f)]
    r = _capture(name, [{"question": q, "contexts": ["t"]} for q in qs])
    assert r.exit_code == 0, r.stderr
    assert all("group" not in c for c in cases_of("q")) and "group (which" not in r.stderr


def test_promptfoo_tests_have_no_group(proj):
    src = IMPORTS / "promptfoo" / "rag-eval"
    shutil.copytree(src, "rag-eval")
    from abtest.capturing import load_questions

    said: list[str] = []
    qs = load_questions(Path("rag-eval/promptfooconfig.yaml"), warn=said.append)
    assert qs and all(q.group is None for q in qs)
    assert not any("group (which" in s for s in said)


# --------------------------------------------------------------------------- a real fixture

def test_clapnq_cases_grouped_by_the_document_of_their_chunk_ids():
    """ClapNQ passage ids are `<wikipedia doc id>_<span>`: `document:_` groups by the doc."""
    rows = [json.loads(x) for x in CLAPNQ.read_text(encoding="utf-8").splitlines()]
    want = {r["id"]: "document:_:" + r["context"][0]["id"].split("_")[0] for r in rows}
    got = case_groups(rows, "document:_")
    assert got == want
    s = group_summary(got)
    assert s["n_groups"] == len(set(want.values())) and s["n_repeats"] == 0
