"""`abtest capture --from-traces`: OTLP (OpenInference), Phoenix and Langfuse exports become
sealed fixtures, every skipped retrieval step said why; the expectations below were worked
out by hand from the sample files (tests/data/traces, see SOURCE.md)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain, install, make_project
from support.fakes import DATA as TEST_DATA

DATA = TEST_DATA / "traces"
T1, T2 = "5b8efff798038103d269b633813fc60c", "6c9f00a8a9149214e37ac744924ed71d"
T5 = "9fc233dbdc47c547b6adf077c5711a40"          # sent base64-encoded in the export
ROTATE = "To rotate a key, open Settings > API keys and click Rotate next to the key."
EXPIRE = "API keys expire after 90 days unless rotated earlier."
EXPIRED = "Expired keys return HTTP 401 with code key_expired."


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _cases(name: str, **kw):
    from abtest.imports.traces import cases_from_traces, read_traces

    read = read_traces(DATA / name, **kw)
    cases, skipped, counts = cases_from_traces(read, corpus_version="kb-1", source_name=name)
    return read, {c.id: c for c in cases}, skipped, counts


def test_otlp_openinference_export():
    read, cases, skipped, counts = _cases("otlp.jsonl")
    assert read.fmt == "otlp"
    # 5 traces in the file (counted by hand): one repeats a question, one retrieved nothing
    assert counts == {"spans": 11, "retrieval_steps": 6, "traces": 5, "cases": 3,
                      "repeated": 1, "skipped": 1}
    assert sorted(cases) == sorted(f"t-{t}" for t in (T1, T2, T5))
    c1 = cases[f"t-{T1}"]
    # the question is the trace's (root span's) input, not the retriever's rewritten query
    assert c1.question == "How do I rotate an API key?"
    assert [(ch.id, ch.text) for ch in c1.context] == [("kb-42#3", ROTATE), ("kb-17#1", EXPIRE)]
    assert c1.retrieval_scores == [0.87, 0.74] and c1.answerable is True
    assert c1.meta["trace_id"] == T1 and c1.meta["span_ids"] == ["eee19b7ec3c1b174"]
    assert c1.retriever == "otlp:VectorStoreRetriever"
    assert c1.meta["retrieved_at"] == "2024-12-04T08:13:20.050000+00:00"
    # two retrievals in one trace: joined in time order, a chunk kept once; an id from the
    # metadata (chunk_id) or, with none, from the text
    c2 = cases[f"t-{T2}"]
    assert c2.question == "When do API keys expire?"          # root input was a JSON object
    assert [ch.id for ch in c2.context] == ["kb-17#1", _sha(EXPIRED), "kb-88#2"]
    assert c2.retriever == "otlp:KeywordRetriever+VectorStoreRetriever"
    assert cases[f"t-{T5}"].question == "Can I restore a deleted project?"
    why = " | ".join(w for _, w in skipped)
    assert f"same question as trace {T1}" in why and "retrieved no document" in why


def test_phoenix_span_export():
    read, cases, skipped, counts = _cases("phoenix_spans.json")
    assert read.fmt == "phoenix" and counts["spans"] == 3 and not skipped
    assert [(ch.id, ch.text) for ch in cases[f"t-{T1}"].context] == [("kb-42#3", ROTATE),
                                                                    ("kb-17#1", EXPIRE)]
    c2 = cases[f"t-{T2}"]   # attributes nested, as the legacy export wrote them
    assert c2.question == "When do API keys expire?"
    assert [ch.id for ch in c2.context] == ["kb-17#1", "kb-19#4"]
    assert c2.retrieval_scores == [0.91, 0.66]


def test_langfuse_trace_export():
    read, cases, skipped, counts = _cases("langfuse_traces.json")
    assert read.fmt == "langfuse" and counts["spans"] == 5
    lc = cases["t-7f3c9a2e-1b4d-4e8a-9c1f-2d5e6a7b8c9d"]
    assert lc.question == "How do I rotate an API key?"       # the trace input's "query"
    # LangChain sends Documents without ids: from the metadata, else from the text
    assert [(ch.id, ch.text) for ch in lc.context] == [("kb-42#3", ROTATE), (_sha(EXPIRE), EXPIRE)]
    assert lc.retrieval_scores is None and lc.retriever == "langfuse:VectorStoreRetriever"
    li = cases["t-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"]      # LlamaIndex nodes, raw JSON strings
    assert [ch.id for ch in li.context] == ["dr-1", "dr-7"] and li.retrieval_scores == [0.82, 0.55]
    assert len(skipped) == 1 and "retrieved no document" in skipped[0][1]


def test_capture_from_traces_seals_a_fixture_that_runs(tmp_path, monkeypatch):
    from abtest.capturing import load_fixture

    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    shutil.copy(DATA / "otlp.jsonl", p / "traces.jsonl")
    r = CliRunner().invoke(cli, ["capture", "--from-traces", "traces.jsonl", "--out",
                                 "fixtures/prod", "--corpus-version", "kb-2024-12"])
    assert r.exit_code == 0, r.stderr
    assert "captured 3 cases" in r.stdout and "from 5 trace(s)" in r.stdout
    assert "1 repeated question(s) kept once, 1 skipped" in r.stdout
    assert "5 trace(s), 6 retrieval step(s), 3 case(s), 1 repeated question(s) kept once, " \
           "1 skipped (the first: " in r.stderr
    assert r.stderr.count("skipped line ") == 1 and r.stderr.count("repeated line ") == 1
    fx = load_fixture(p / "fixtures" / "prod")               # sealed: the seal verifies
    manifest = json.loads((p / "fixtures/prod/manifest.json").read_text())
    notes = manifest["notes"]["from_traces"]
    assert notes["format"] == "otlp" and len(notes["skipped"]) == 1
    assert len(notes["repeated"]) == 1 and notes["traces"] == 5
    assert "assumed" in notes["answerable"]
    assert {c.corpus_version for c in fx.cases} == {"kb-2024-12"}
    run = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/prod", "--a", "variants/a.yaml",
                                   "--b", "variants/b.yaml"])
    assert run.exit_code in (0, 1), run.stderr                # complete (gate PASS or FAIL)
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    assert rep["status"] == "complete" and rep["n_finished"] == 3


@pytest.mark.parametrize("content, args, says", [
    ('{"hello": 1}\n', [], "not a trace export"),
    ("{not json\n", [], "line 1"),
    (None, ["--trace-format", "langfuse"], "no case could be made"),
    ("", [], "no trace records"),
])
def test_bad_trace_files_exit_2_with_one_line(tmp_path, monkeypatch, content, args, says):
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    f = p / "t.json"
    if content is None:   # a Langfuse export whose only retrieval returned nothing
        f.write_text(json.dumps([{"id": "x", "input": "q?", "observations": [
            {"id": "o", "traceId": "x", "type": "RETRIEVER", "name": "r", "output": []}]}]))
    else:
        f.write_text(content)
    r = CliRunner().invoke(cli, ["capture", "--from-traces", "t.json", "--out", "fixtures/t",
                                 *args])
    assert r.exit_code == 2, r.output
    assert says in r.stderr and r.stderr.strip().count("\n") <= 1 and "Traceback" not in r.stderr
    assert not (p / "fixtures" / "t").exists()


def test_traces_and_a_retriever_are_not_mixed(tmp_path, monkeypatch):
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    shutil.copy(DATA / "otlp.jsonl", p / "t.jsonl")
    (p / "q.jsonl").write_text('{"id": "q", "question": "x?"}\n')
    r = CliRunner().invoke(cli, ["capture", "q.jsonl", "--from-traces", "t.jsonl", "--out", "fixtures/x"])
    assert r.exit_code == 2 and "--from-traces" in r.stderr
