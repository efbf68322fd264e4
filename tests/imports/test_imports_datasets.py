"""Eval datasets of DeepEval, Inspect, Phoenix and Langfuse's @observe traces, as their
authors meant them, through the real `abtest capture`: gold answers become references, the
app's answers are not imported, repeats are kept once, and detection never guesses. The
files are the tools' own (tests/data/imports/README.md says where each came from); every
expectation is read from the file here with json/csv, never with abtest's readers."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from support.fakes import DATA as TEST_DATA
from support.importing import cases_of, chunk_id, contexts_for, manifest_of, refused, run, sha_id

DATA = TEST_DATA / "imports"
DE = DATA / "deepeval"
INSPECT = DATA / "inspect"
PXD = DATA / "phoenix" / "datasets"
RAGAS = DATA / "ragas"
LI = DATA / "llamaindex"


# --------------------------------------------------------------------------- DeepEval

def _deepeval_rows() -> list[dict]:
    """The goldens as the JSON file holds them (the CSV was written from the same goldens)."""
    return json.loads((DE / "goldens.save_as.json").read_text())


@pytest.mark.parametrize("name", ["goldens.save_as.json", "goldens.save_as.csv"])
def test_deepeval_goldens_expected_output_is_the_reference(proj, name):
    shutil.copy(DE / name, proj / name)
    r = run("capture", name, "--retriever", f"jsonl:{name}", "--out", "fixtures/de")
    assert r.exit_code == 0, r.stderr
    assert "actual_output (the answer the app gave" in r.stderr
    cases = cases_of(proj, "de")
    gold = _deepeval_rows()
    by_q: dict[str, list[dict]] = {}
    for g in gold:
        by_q.setdefault(g["input"], []).append(g)
    assert len(cases) == len(gold)   # every golden is a case: none repeats another whole
    for q, goldens in by_q.items():
        got = sorted((c for c in cases if c["question"] == q), key=lambda c: c["id"])
        base = sha_id("de", q)
        assert [c["id"] for c in got] == [base] + [f"{base}-{i}" for i in
                                                   range(2, len(goldens) + 1)]
        for c, g in zip(got, goldens):
            assert c["reference_answer"] == g["expected_output"]
            assert [ch["text"] for ch in c["context"]] == (g["retrieval_context"]
                                                          or g["context"])
            assert [ch["id"] for ch in c["context"]] == [chunk_id(ch["text"])
                                                         for ch in c["context"]]
        if len(goldens) > 1:   # one question, two goldens: one group, said
            assert {c.get("group") for c in got} == {base}
            assert "asked again with different gold content" in r.stderr


def test_deepeval_csv_and_json_make_the_same_cases(proj):
    for name in ("goldens.save_as.json", "goldens.save_as.csv"):
        shutil.copy(DE / name, proj / name)
        assert run("capture", name, "--retriever", f"jsonl:{name}", "--out",
                   f"fixtures/{name.split('.')[-1]}").exit_code == 0
    strip = [{k: v for k, v in c.items() if k != "retriever"} for c in cases_of(proj, "csv")]
    assert strip == [{k: v for k, v in c.items() if k != "retriever"}
                     for c in cases_of(proj, "json")]
    # the CSV splits its list cells on "|", as DeepEval's own reader does
    with open(DE / "goldens.save_as.csv", newline="", encoding="utf-8") as fh:
        first = next(csv.DictReader(fh))
    case = next(c for c in cases_of(proj, "csv") if c["question"] == first["input"])
    assert first["retrieval_context"].split("|") == [ch["text"] for ch in case["context"]]


def test_a_golden_without_contexts_cannot_be_its_own_capture(proj):
    shutil.copy(DE / "test_confident_goldens.json", proj / "g.json")
    err = refused(run("capture", "g.json", "--retriever", "jsonl:g.json", "--out",
                      "fixtures/g"), proj, "g")
    assert "g.json: item 3 (line 127): this deepeval row has no contexts to import" in err


# --------------------------------------------------------------------------- Inspect

def test_inspect_examples_answer_is_the_reference(proj):
    rows = [json.loads(x) for x in (INSPECT / "biology_qa.jsonl").read_text().splitlines()]
    shutil.copy(INSPECT / "biology_qa.jsonl", proj / "b.jsonl")
    spec = contexts_for(proj, [r["question"] for r in rows])
    r = run("capture", "b.jsonl", "--retriever", spec, "--out", "fixtures/b")
    assert r.exit_code == 0, r.stderr
    assert "read `answer` as the expected answer" in r.stderr and "--answer-is response" in r.stderr
    got = {c["id"]: c for c in cases_of(proj, "b")}
    assert sorted(got) == sorted(r["id"] for r in rows)
    for row in rows:
        assert got[row["id"]]["reference_answer"] == row["answer"]
        assert got[row["id"]]["question"] == row["question"]
    # --answer-is response: the same column is the app's and is not imported
    r = run("capture", "b.jsonl", "--retriever", spec, "--out", "fixtures/b2",
            "--answer-is", "response")
    assert r.exit_code == 0, r.stderr
    assert all("reference_answer" not in c for c in cases_of(proj, "b2"))
    assert "not imported: answer (read as the answers the app gave, --answer-is response" \
        in r.stderr


def test_inspect_chat_inputs_and_target_lists(proj):
    chat = [json.loads(x) for x in (INSPECT / "security_guide.jsonl").read_text().splitlines()]
    images = [json.loads(x) for x in (INSPECT / "images.jsonl").read_text().splitlines()]
    questions = [[m for m in s["input"] if m["role"] == "user"][-1]["content"] for s in chat]
    questions += [next(p["text"] for p in s["input"][-1]["content"] if p["type"] == "text")
                  for s in images]
    spec = contexts_for(proj, questions)
    for name in ("security_guide.jsonl", "images.jsonl"):
        shutil.copy(INSPECT / name, proj / name)
        r = run("capture", name, "--retriever", spec, "--out", f"fixtures/{name[:3]}")
        assert r.exit_code == 0, r.stderr
    got = {c["question"]: c for c in cases_of(proj, "sec") + cases_of(proj, "ima")}
    for q, s in zip(questions, chat + images):
        target = s["target"][0] if isinstance(s["target"], list) else s["target"]
        assert got[q]["reference_answer"] == target and got[q]["id"] == sha_id("in", q)
    assert "1 sample(s) list several targets (alternatives): the first is the reference" \
        in r.stderr


def test_inspect_csv_samples(proj):
    for name in ("samples.csv", "samples-md.csv", "samples-mcq.csv"):
        with open(INSPECT / name, newline="", encoding="utf-8") as fh:
            row = next(csv.DictReader(fh))
        shutil.copy(INSPECT / name, proj / name)
        r = run("capture", name, "--retriever", contexts_for(proj, [row["input"]]), "--out",
                f"fixtures/{name[:-4]}")
        assert r.exit_code == 0, r.stderr
        (case,) = cases_of(proj, name[:-4])
        assert (case["question"], case["reference_answer"]) == (row["input"], row["target"])
        extra = sorted(set(row) - {"input", "target"})
        assert all(k in r.stderr.split("not imported (a fixture has no place for them):")[1]
                   for k in extra)


# --------------------------------------------------------------------------- Phoenix

def test_phoenix_dataset_examples_nested_with_integer_ids(proj):
    rows = [json.loads(x) for x in (PXD / "upload_fixture_nested.jsonl").read_text().splitlines()]
    shutil.copy(PXD / "upload_fixture_nested.jsonl", proj / "px.jsonl")
    r = run("capture", "px.jsonl", "--retriever", "jsonl:px.jsonl", "--out", "fixtures/px")
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of(proj, "px")}
    assert sorted(got) == sorted(str(r["id"]) for r in rows)
    for row in rows:
        c = got[str(row["id"])]
        assert c["question"] == row["input"]["question"]
        assert c["reference_answer"] == row["output"]["answer"]
        assert [ch["text"] for ch in c["context"]] == [row["input"]["context"]]


@pytest.mark.parametrize("name", ["news-article-summaries-2024-11-04_11_08_10.download.csv",
                                  "qa-dataset.csv"])
def test_phoenix_dataset_csv_downloads(proj, name):
    with open(PXD / name, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    qcol, acol = ("input_article", "output_summary") if "example_id" in rows[0] else (
        "question", "answer")
    shutil.copy(PXD / name, proj / "d.csv")
    r = run("capture", "d.csv", "--retriever", contexts_for(proj, [r[qcol] for r in rows]),
            "--out", "fixtures/d")
    assert r.exit_code == 0, r.stderr
    got = {c["question"]: c for c in cases_of(proj, "d")}
    assert len(got) == len(rows)
    for row in rows:
        assert got[row[qcol]]["reference_answer"] == row[acol].strip()
        if "example_id" in row:
            assert got[row[qcol]]["id"] == row["example_id"]


# --------------------------------------------------------------------------- LlamaIndex

def test_a_labelled_rag_dataset_is_questions_references_and_contexts(proj):
    examples = json.loads((LI / "labelled_rag_dataset.json").read_text())["examples"]
    shutil.copy(LI / "labelled_rag_dataset.json", proj / "rag.json")
    r = run("capture", "rag.json", "--retriever", "jsonl:rag.json", "--out", "fixtures/li")
    assert r.exit_code == 0, r.stderr
    cases = cases_of(proj, "li")
    assert len(cases) == len(examples)
    seen: dict[str, int] = {}
    for e in examples:
        base = sha_id("li", e["query"])
        seen[base] = seen.get(base, 0) + 1
        cid = base if seen[base] == 1 else f"{base}-{seen[base]}"
        (c,) = [c for c in cases if c["id"] == cid]
        assert (c["question"], c["reference_answer"]) == (e["query"], e["reference_answer"])
        assert [ch["text"] for ch in c["context"]] == e["reference_contexts"]
    # one passage, two questions: one group; one question text twice: one group
    by_passage: dict[str, set] = {}
    for c in cases:
        by_passage.setdefault(c["context"][0]["text"], set()).add(c["group"])
    assert all(len(g) == 1 for g in by_passage.values())
    repeated = [c for c in cases if c["id"].startswith(next(b for b, n in seen.items() if n > 1))]
    assert len(repeated) == 2 and len({c["group"] for c in repeated}) == 1
    assert "query_by (who wrote the query)" in r.stderr


def test_a_query_response_dataset_keeps_its_ids_and_responses(proj):
    doc = json.loads((LI / "query_response_dataset.json").read_text())
    shutil.copy(LI / "query_response_dataset.json", proj / "qr.json")
    r = run("capture", "qr.json", "--retriever",
            contexts_for(proj, list(doc["queries"].values())), "--out", "fixtures/qr")
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of(proj, "qr")}
    assert got.keys() == doc["queries"].keys()
    for qid, q in doc["queries"].items():
        assert (got[qid]["question"], got[qid]["reference_answer"]) == (q, doc["responses"][qid])


# --------------------------------------------------------------------------- repeats

def test_identical_rows_are_kept_once_and_recorded(proj):
    text = (RAGAS / "scientist_biographies.csv").read_text(encoding="utf-8")
    head, first, *rest = text.splitlines(keepends=True)
    (proj / "rep.csv").write_text(head + first + first + first + first + "".join(rest),
                                  encoding="utf-8")
    with open(RAGAS / "scientist_biographies.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    spec = contexts_for(proj, [r["user_input"] for r in rows])
    r = run("capture", "rep.csv", "--retriever", spec, "--out", "fixtures/rep")
    assert r.exit_code == 0, r.stderr
    assert "rep.csv: 3 repeated question(s) kept once: lines 3–5 repeat line 2" in r.stderr
    assert len(cases_of(proj, "rep")) == len(rows)
    notes = manifest_of(proj, "rep")["notes"]["questions_repeated"]
    assert notes["rows"] == 3 and notes["kept_once"] == ["lines 3–5 repeat line 2"]


def test_promptfoo_tests_without_ids_repeated_are_kept_once(proj):
    test = {"vars": {"question": "How long do API keys last?"},
            "assert": [{"type": "contains", "value": "90 days"}]}
    (proj / "t.jsonl").write_text(json.dumps(test) + "\n" + json.dumps(test) + "\n")
    r = run("capture", "t.jsonl", "--retriever",
            contexts_for(proj, ["How long do API keys last?"]), "--out", "fixtures/t")
    assert r.exit_code == 0, r.stderr
    (case,) = cases_of(proj, "t")
    assert case["id"] == sha_id("pf", "How long do API keys last?")
    assert "line 2 repeats line 1" in r.stderr


def test_one_user_id_with_two_contents_names_both_rows(proj):
    (proj / "q.jsonl").write_text('{"id": "a", "question": "x?"}\n{"id": "b", "question": "y?"}\n'
                                  '{"id": "a", "question": "z?"}\n')
    err = refused(run("capture", "q.jsonl", "--retriever",
                      contexts_for(proj, ["x?", "y?", "z?"]), "--out", "fixtures/q"), proj, "q")
    assert err.endswith("q.jsonl: line 3: field 'id': id 'a' is also at line 1, with different "
                        "content (rows with one id must be the same question)")


# --------------------------------------------------------------------------- references

def test_ragas_not_present_in_context_ground_truth_is_unanswerable(proj):
    src = (RAGAS / "written" / "ragas_evaluation_dataset.to_jsonl.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in src]
    rows[1]["reference"] = "The answer to given question is not present in context"
    (proj / "r.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    r = run("capture", "r.jsonl", "--retriever", "jsonl:r.jsonl", "--out", "fixtures/r")
    assert r.exit_code == 0, r.stderr
    got = {c["question"]: c for c in cases_of(proj, "r")}
    c = got[rows[1]["user_input"]]
    assert c["answerable"] is False and "reference_answer" not in c and "key_points" not in c
    assert all(got[x["user_input"]]["answerable"] for i, x in enumerate(rows) if i != 1)
    assert "1 question(s) whose ground truth says the context holds no answer" in r.stderr


def test_answer_is_reference_beside_a_reference_column_is_refused(proj):
    shutil.copy(RAGAS / "written" / "ragas_evaluation_dataset.to_jsonl.jsonl", proj / "r.jsonl")
    rows = [json.loads(x) for x in (proj / "r.jsonl").read_text().splitlines()]
    rows[0]["answer"] = "an answer"
    (proj / "r.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    err = refused(run("capture", "r.jsonl", "--retriever", "jsonl:r.jsonl", "--out",
                      "fixtures/r", "--answer-is", "reference"), proj, "r")
    assert "field '--answer-is': --answer-is 'reference': the file already has a reference" in err


# --------------------------------------------------------------------------- detection

def test_an_unknown_csv_is_refused_listing_what_was_tried(proj):
    (proj / "u.csv").write_text("topic,language\nbilling,en\n")
    err = refused(run("capture", "u.csv", "--retriever", "jsonl:u.csv", "--out", "fixtures/u"),
                  proj, "u")
    assert "u.csv: line 2: not a questions file abtest knows (tried: abtest questions" in err
    assert "DeepEval goldens" in err and "Inspect samples" in err and "Phoenix dataset" in err
    assert err.endswith("this row has: topic, language")


@pytest.mark.parametrize("src,where,field,mutate", [
    (DE / "goldens.save_as.json", "item 0 (line 2)", "expected_output",
     lambda rows: rows[0].update(expected_output=42)),
    (INSPECT / "security_guide.jsonl", "line 1", "input",
     lambda rows: rows[0].update(input=[{"role": "system", "content": "hi"}])),
    # the nested field is blamed by its own name, not the object holding it
    (PXD / "upload_fixture_nested.jsonl", "line 2", "input.question",
     lambda rows: rows[1]["input"].update(question=["not", "text"])),
    (PXD / "upload_fixture_nested.jsonl", "line 1", "input.question",
     lambda rows: rows[0]["input"].update(question=7)),
    (LI / "labelled_rag_dataset.json", "examples[1]", "reference_answer",
     lambda doc: doc["examples"][1].update(reference_answer=["Rollo"])),
])
def test_a_field_of_the_wrong_type_is_named(proj, src, where, field, mutate):
    text = src.read_text()
    rows = json.loads(text) if src.suffix == ".json" else [json.loads(x)
                                                           for x in text.splitlines()]
    mutate(rows)
    out = proj / f"bad{src.suffix}"
    out.write_text(json.dumps(rows, indent=1) if src.suffix == ".json"
                   else "".join(json.dumps(x) + "\n" for x in rows))
    err = refused(run("capture", out.name, "--retriever", f"jsonl:{out.name}", "--out",
                      "fixtures/bad"), proj, "bad")
    assert f"bad{src.suffix}: {where}: field '{field}'" in err, err


@pytest.mark.parametrize("src", [DE / "goldens.save_as.json", INSPECT / "security_guide.jsonl",
                                 LI / "labelled_rag_dataset.json",
                                 PXD / "upload_fixture_nested.jsonl", DE / "goldens.save_as.csv"])
def test_cut_and_wrongly_encoded_files_are_refused(proj, src):
    raw = src.read_bytes()
    cut = raw[: len(raw) * 2 // 3]
    last_line = cut.count(b"\n") + 1
    (proj / f"cut{src.suffix}").write_bytes(cut)
    err = refused(run("capture", f"cut{src.suffix}", "--retriever", "jsonl:ctx.jsonl", "--out",
                      "fixtures/cut"), proj, "cut")
    # every format, a CSV too (its last row, one line each here, is the one cut)
    assert err.endswith(f"cut{src.suffix}: the file ends mid-record (line {last_line}); "
                        "was it cut short?"), err
    (proj / f"latin{src.suffix}").write_bytes(raw.replace(b"e", b"\xe9", 1))
    err = refused(run("capture", f"latin{src.suffix}", "--retriever", "jsonl:ctx.jsonl",
                      "--out", "fixtures/latin"), proj, "latin")
    assert "not valid UTF-8" in err and f"latin{src.suffix}" in err


# --------------------------------------------------------------------------- Langfuse @observe

LF_OBSERVE = DATA / "langfuse" / "observe" / "openai-assistants-2024-05-29.json"


def test_an_observe_trace_without_retrieval_says_so_not_its_input(proj):
    shutil.copy(LF_OBSERVE, proj / "t.json")
    err = refused(run("capture", "--from-traces", "t.json", "--out", "fixtures/t"), proj, "t")
    assert "no retrieval span found" in err and "input" not in err


def test_an_observe_call_gives_its_first_text_argument_as_the_question(proj):
    doc = json.loads(LF_OBSERVE.read_text())
    call = json.loads(json.loads(doc["trace"]["input"]))
    assert set(call) == {"args", "kwargs"}
    span = next(o for o in doc["observations"] if o["type"] == "SPAN")
    span["type"] = "RETRIEVER"
    span["output"] = [{"id": "d1", "text": "Subtract 11, then divide by 3."}]
    (proj / "t.json").write_text(json.dumps(doc))
    r = run("capture", "--from-traces", "t.json", "--out", "fixtures/t")
    assert r.exit_code == 0, r.stderr
    (case,) = cases_of(proj, "t")
    assert case["question"] == call["args"][0]


def test_a_forced_trace_format_on_another_shape_says_what_the_file_is(proj):
    shutil.copy(LF_OBSERVE, proj / "t.json")
    err = refused(run("capture", "--from-traces", "t.json", "--trace-format", "phoenix",
                      "--out", "fixtures/t"), proj, "t")
    assert "t.json: field '--trace-format': this is not a Phoenix spans export: it looks like " \
           "Langfuse traces" in err


def test_the_python_api_takes_answer_is_and_names_it_in_its_errors(proj):
    import abtest

    shutil.copy(INSPECT / "biology_qa.jsonl", proj / "b.jsonl")
    rows = [json.loads(x) for x in (proj / "b.jsonl").read_text().splitlines()]
    spec = contexts_for(proj, [r["question"] for r in rows])
    fx = abtest.capture("b.jsonl", spec, "fixtures/api", answer_is="response", progress=False)
    assert all(c.reference_answer is None for c in fx.cases)
    with pytest.raises(abtest.UserError) as info:
        abtest.capture("b.jsonl", spec, "fixtures/api2", answer_is="gold", progress=False)
    assert "field 'answer_is': expected one of reference, response, got 'gold'" in str(info.value)
    assert not (proj / "fixtures" / "api2").exists()


def test_a_csv_of_promptfoo_vars_is_read_as_tests_only_when_a_var_names_the_question(proj):
    (proj / "t.csv").write_text("query,language\nHow long do API keys last?,en\n")
    r = run("capture", "t.csv", "--retriever", contexts_for(proj, ["How long do API keys last?"]),
            "--out", "fixtures/t")
    assert r.exit_code == 0, r.stderr
    (case,) = cases_of(proj, "t")
    assert case["id"] == sha_id("pf", "How long do API keys last?")
    assert "t.csv: not imported: vars.language (a case has no field for it) (line 2)" in r.stderr
