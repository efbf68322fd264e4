"""Gold answers under any common name, formats recognised beside extra columns, promptfoo's
inline contexts frozen, cut files said as cut, foreign labels kept: through the real
`abtest capture`, on the tools' own files (tests/data/imports/README.md says where each came
from) and variants of them made here. Every expectation is read from the file with
json/csv/yaml, never with abtest's readers."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from support.fakes import DATA as TEST_DATA
from support.importing import cases_of, chunk_id, contexts_for, refused, run, sha_id

DATA = TEST_DATA / "imports"
HF = DATA / "ragas" / "hf_doc_qa_eval.csv"
BT = DATA / "braintrust" / "bt_datasets_upload.jsonl"
OPIK = DATA / "opik" / "dataset.jsonl"
RAGAS_JSONL = DATA / "ragas" / "written" / "ragas_evaluation_dataset.to_jsonl.jsonl"
RAGAS_CSV = DATA / "ragas" / "written" / "ragas_evaluation_dataset.to_csv.csv"
DE = DATA / "deepeval"
RAG_EVAL = DATA / "promptfoo" / "rag-eval"
BIOLOGY = DATA / "inspect" / "biology_qa.jsonl"


def hf_rows() -> list[dict]:
    with open(HF, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([header, *rows])


def lines_of(r) -> list[str]:
    return r.stderr.splitlines()


# --------------------------------------------------------------------------- gold names

def test_ragas_examples_expected_answer_is_the_reference(proj):
    rows = hf_rows()
    shutil.copy(HF, proj / "hf.csv")
    r = run("capture", "hf.csv", "--retriever",
            contexts_for(proj, [x["question"] for x in rows]), "--out", "fixtures/hf")
    assert r.exit_code == 0, r.stderr
    with_gold = [x for x in rows if x["expected_answer"]]
    assert lines_of(r)[0] == f"abtest: hf.csv: read as RAGAS rows: {len(rows)} question(s)"
    assert (f"abtest: hf.csv: read `expected_answer` ({len(with_gold)} rows) as the expected "
            "answer (reference_answer, its sentences the key points)") in lines_of(r)
    assert "not imported" not in r.stderr   # the header's unnamed last column is empty
    got = {c["id"]: c for c in cases_of(proj, "hf")}
    assert len(got) == len(rows)
    for x in rows:
        c = got[sha_id("r", x["question"])]
        assert c["question"] == x["question"]          # its trailing line break kept
        if not x["expected_answer"]:
            assert "reference_answer" not in c
            continue
        assert c["reference_answer"] == x["expected_answer"].strip()
        if ". " not in x["expected_answer"]:
            assert c["key_points"] == [x["expected_answer"].strip()]


@pytest.mark.parametrize("name", ["reference", "ground_truth", "expected", "expected_output",
                                  "expected_answer", "gold", "gold_answer", "true_answer",
                                  "correct_answer", "reference_answer"])
def test_every_common_gold_name_is_the_reference(proj, name):
    rows = hf_rows()[:6]
    write_csv(proj / "g.csv", ["question", name], [[x["question"], x["expected_answer"]]
                                                   for x in rows])
    r = run("capture", "g.csv", "--retriever",
            contexts_for(proj, [x["question"] for x in rows]), "--out", "fixtures/g")
    assert r.exit_code == 0, r.stderr
    got = {c["question"]: c for c in cases_of(proj, "g")}
    for x in rows:
        assert got[x["question"]]["reference_answer"] == x["expected_answer"].strip()
    if name not in ("reference", "ground_truth"):   # RAGAS's own names need no word
        assert f"read `{name}` ({len(rows)} rows) as the expected answer" in r.stderr
    assert "not imported" not in r.stderr


def test_beside_a_gold_column_answer_is_the_apps_and_a_second_gold_column_is_said(proj):
    rows = hf_rows()[:3]
    write_csv(proj / "g.csv", ["id", "question", "true_answer", "answer", "correct_answer"],
              [[f"q{i}", x["question"], x["expected_answer"], "what the app said", "other"]
               for i, x in enumerate(rows)])
    r = run("capture", "g.csv", "--retriever",
            contexts_for(proj, [x["question"] for x in rows]), "--out", "fixtures/g")
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of(proj, "g")}
    assert [got[f"q{i}"]["reference_answer"] for i in range(3)] == [
        x["expected_answer"].strip() for x in rows]
    assert "not imported: answer (read as the answers the app gave, beside the reference " \
           "column" in r.stderr
    assert "correct_answer (a second gold answer: the reference comes from the first of" \
        in r.stderr


def test_a_ragas_answers_list_gives_its_first_as_the_reference(proj):
    rows = hf_rows()[:4]
    lines = [{"question": x["question"], "answers": [x["expected_answer"], "an alias"]
              if i == 0 else [x["expected_answer"]]} for i, x in enumerate(rows)]
    (proj / "h.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = run("capture", "h.jsonl", "--retriever",
            contexts_for(proj, [x["question"] for x in rows]), "--out", "fixtures/h")
    assert r.exit_code == 0, r.stderr
    got = {c["question"]: c for c in cases_of(proj, "h")}
    assert [got[x["question"]]["reference_answer"] for x in rows] == [
        x["expected_answer"] for x in rows]
    assert "h.jsonl: 1 row(s) list several gold answers (alternatives): the first is the " \
           "reference answer" in r.stderr


def test_a_gold_answer_that_is_not_text_is_refused_naming_it(proj):
    rows = hf_rows()[:2]
    (proj / "n.jsonl").write_text("".join(json.dumps({"question": x["question"],
                                                      "true_answer": 7 if i else "x"}) + "\n"
                                          for i, x in enumerate(rows)))
    err = refused(run("capture", "n.jsonl", "--retriever", "jsonl:n.jsonl", "--out",
                      "fixtures/n"), proj, "n")
    assert err == "abtest: error: n.jsonl: line 2: field 'true_answer': the expected answer " \
                  "is a number, not text"


def test_inspect_example_answers_are_their_own_key_points_in_order(proj):
    rows = [json.loads(x) for x in BIOLOGY.read_text().splitlines()]
    rows[0]["answer"] = "Leprosy. It is caused by bacteria. Treatment works!"
    (proj / "b.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    r = run("capture", "b.jsonl", "--retriever",
            contexts_for(proj, [x["question"] for x in rows]), "--out", "fixtures/b")
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of(proj, "b")}
    assert got["q1"]["key_points"] == ["Leprosy.", "It is caused by bacteria.", "Treatment works!"]
    for x in rows[1:]:
        assert got[x["id"]]["key_points"] == [x["answer"]]


# --------------------------------------------------------------------------- detection

def test_braintrust_input_expected_items_are_questions_with_references(proj):
    items = [json.loads(x) for x in BT.read_text().splitlines()]
    # Braintrust's `bt datasets` rows: their own id, `input` an object whose `prompt` is the
    # question, `expected` text; the first row also has metadata, tags and an origin
    shutil.copy(BT, proj / "bt.jsonl")
    r = run("capture", "bt.jsonl", "--retriever",
            contexts_for(proj, [x["input"]["prompt"] for x in items]), "--out", "fixtures/bt")
    assert r.exit_code == 0, r.stderr
    assert lines_of(r)[0] == ("abtest: bt.jsonl: read as Braintrust/Langfuse/Opik dataset items "
                              f"(input, expected): {len(items)} question(s)")
    (line,) = [x for x in lines_of(r) if "not imported (a fixture has no place for them)" in x]
    assert "metadata (the item's metadata)" in line and "origin (" in line
    got = {c["id"]: c for c in cases_of(proj, "bt")}
    assert sorted(got) == sorted(x["id"] for x in items)   # the items' own ids
    for x in items:
        c = got[x["id"]]
        assert (c["question"], c["reference_answer"]) == (x["input"]["prompt"], x["expected"])
        assert c["key_points"] == [x["expected"]]   # one sentence each in these items
        assert (c.get("tags") or []) == x.get("tags", [])   # text tags are abtest's own


def test_langfuse_expected_output_and_input_objects(proj):
    items = [json.loads(x) for x in BT.read_text().splitlines()][:3]
    # Langfuse's API names the gold answer expectedOutput; input and expected may be objects
    lf = [{"id": f"item-{i}", "input": {"question": x["input"]["prompt"]},
           "expectedOutput": {"answer": x["expected"]},
           **({"metadata": x["metadata"]} if "metadata" in x else {})}
          for i, x in enumerate(items)]
    (proj / "lf.json").write_text(json.dumps(lf, indent=2))
    r = run("capture", "lf.json", "--retriever",
            contexts_for(proj, [x["input"]["prompt"] for x in items]), "--out", "fixtures/lf")
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c for c in cases_of(proj, "lf")}
    assert {k: (c["question"], c["reference_answer"]) for k, c in got.items()} == {
        f"item-{i}": (x["input"]["prompt"], x["expected"]) for i, x in enumerate(items)}
    lf[1]["expectedOutput"] = 3
    text = json.dumps(lf, indent=2)
    (proj / "lf.json").write_text(text)
    line = [i for i, x in enumerate(text.split("\n"), start=1) if x == "  {"][1]
    err = refused(run("capture", "lf.json", "--retriever", "jsonl:ctx.jsonl", "--out",
                      "fixtures/lf2"), proj, "lf2")
    assert err.endswith(f"lf.json: item 1 (line {line}): field 'expectedOutput': expected "
                        "text, got a number"), err


def test_ragas_columns_beside_an_id_and_a_metric_are_ragas(proj):
    rows = [json.loads(x) for x in RAGAS_JSONL.read_text().splitlines()]
    keyed = [{"id": f"case-{i}", "metric_focus": "faithfulness", "user_input": x["user_input"],
              "reference": x["reference"]} for i, x in enumerate(rows)]
    (proj / "k.jsonl").write_text("".join(json.dumps(x) + "\n" for x in keyed))
    r = run("capture", "k.jsonl", "--retriever",
            contexts_for(proj, [x["user_input"] for x in rows]), "--out", "fixtures/k")
    assert r.exit_code == 0, r.stderr
    assert lines_of(r)[0] == f"abtest: k.jsonl: read as RAGAS rows: {len(rows)} question(s)"
    assert "not imported (a fixture has no place for them): metric_focus" in r.stderr
    got = {c["id"]: c for c in cases_of(proj, "k")}
    assert {k: (c["question"], c["reference_answer"]) for k, c in got.items()} == {
        f"case-{i}": (x["user_input"], x["reference"].strip()) for i, x in enumerate(rows)}


# --------------------------------------------------------------------------- foreign fields

def test_deepeval_users_own_categories_are_kept_in_meta(proj):
    goldens = json.loads((DE / "goldens.save_as.json").read_text())
    for i, g in enumerate(goldens):
        g["category"] = "factual" if i == 0 else f"normal-{i:02d}"
    (proj / "g.json").write_text(json.dumps(goldens, indent=4))
    r = run("capture", "g.json", "--retriever", "jsonl:g.json", "--out", "fixtures/g")
    assert r.exit_code == 0, r.stderr
    (line,) = [x for x in lines_of(r) if "meta.category" in x]
    assert line.startswith(f"abtest: g.json: category in {len(goldens) - 1} row(s) (item 1 "
                           "(line ")
    assert "e.g. 'normal-01') is not one of abtest's categories" in line
    cases = cases_of(proj, "g")
    by_label = {c.get("category") or c["meta"]["category"]: c for c in cases}
    assert sorted(by_label) == sorted(g["category"] for g in goldens)
    assert "meta" not in by_label["factual"]          # abtest's own value stays abtest's
    for g in goldens[1:]:
        c = by_label[g["category"]]
        assert "category" not in c and c["reference_answer"] == g["expected_output"]


def test_deepeval_ideal_context_is_said_and_serves_where_nothing_was_retrieved(proj):
    goldens = json.loads((DE / "goldens.save_as.json").read_text())
    both = sum(1 for g in goldens if g["retrieval_context"] and g["context"])
    goldens[0]["retrieval_context"] = None    # this one recorded no retrieval
    (proj / "g.json").write_text(json.dumps(goldens, indent=4))
    r = run("capture", "g.json", "--retriever", "jsonl:g.json", "--out", "fixtures/g")
    assert r.exit_code == 0, r.stderr
    assert "g.json: 1 golden(s) have no retrieval_context: their `context` (DeepEval's ideal " \
           "context) is their contexts" in r.stderr
    assert f"not imported: context in {both - 1} golden(s) (DeepEval's ideal context" in r.stderr
    first = [c for c in cases_of(proj, "g") if c["question"] == goldens[0]["input"]]
    assert [ch["text"] for ch in first[0]["context"]] == goldens[0]["context"]


# --------------------------------------------------------------------------- promptfoo

def _inline_config(proj: Path, as_list: bool) -> dict:
    """rag-eval's config with each test's context file inlined (text, or its paragraphs)."""
    doc = yaml.safe_load((RAG_EVAL / "promptfooconfig.yaml").read_text())
    for t in doc["tests"]:
        text = (RAG_EVAL / t["vars"]["context"][len("file://"):]).read_text()
        t["vars"]["context"] = ([p for p in text.split("\n\n") if p.strip()] if as_list
                                else text)
    (proj / "pf.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return doc


@pytest.mark.parametrize("as_list", [False, True])
def test_promptfoo_inline_contexts_become_the_frozen_context(proj, as_list):
    doc = _inline_config(proj, as_list)
    r = run("capture", "pf.yaml", "--retriever", "jsonl:pf.yaml", "--out", "fixtures/pf")
    assert r.exit_code == 0, r.stderr
    assert lines_of(r)[0] == "abtest: pf.yaml: read as promptfoo tests: 2 question(s)"
    assert "pf.yaml: vars.context of 2 test(s) is their frozen context, one chunk per passage, " \
           "each chunk's id sha1(text)[:12]" in r.stderr
    got = {c["question"]: c for c in cases_of(proj, "pf")}
    for t in doc["tests"]:
        ctx = t["vars"]["context"]
        passages = ctx if isinstance(ctx, list) else [ctx]
        assert [(ch["id"], ch["text"]) for ch in got[t["vars"]["query"]]["context"]] == [
            (chunk_id(p), p) for p in passages]


def test_promptfoo_notices_are_grouped_and_a_top_level_assert_is_said(proj):
    doc = _inline_config(proj, False)
    doc["tests"] = doc["tests"] * 2 + [
        {"vars": {"query": f"q{i}", "context": 5, "target_language": "es"}} for i in range(2)]
    doc["assert"] = [{"type": "contains", "value": "Fred"}]
    (proj / "pf.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run("capture", "pf.yaml", "--retriever", contexts_for(proj, ["q0", "q1"] + [
        t["vars"]["query"] for t in doc["tests"][:2]]), "--out", "fixtures/pf")
    assert r.exit_code == 0, r.stderr
    listed = [x for x in lines_of(r) if "not imported:" in x]
    assert ("abtest: pf.yaml: not imported: assert type 'context-faithfulness' (no per-case "
            "mapping): 4 tests (tests[0], tests[1], tests[2], … 1 more)") in listed
    assert ("abtest: pf.yaml: not imported: vars.target_language (a case has no field for it): "
            "2 tests (tests[4], tests[5])") in listed
    assert ("abtest: pf.yaml: not imported: vars.context (not text or a list of text): 2 tests "
            "(tests[4], tests[5])") in listed
    assert any(x.startswith("abtest: pf.yaml: not imported: `assert:` (promptfoo reads asserts "
                            "under a test or under defaultTest:") for x in listed)
    # one line each, never one per test: 4 unmapped assert types, the var, the context
    # that is no text, the top-level assert
    assert len(listed) == len(set(listed)) == 7
    # frozen from its own contexts, a test without one is named (never a half-written fixture)
    err = refused(run("capture", "pf.yaml", "--retriever", "jsonl:pf.yaml", "--out",
                      "fixtures/own"), proj, "own")
    assert err.endswith("pf.yaml: tests[4]: this promptfoo row has no contexts to import as "
                        "the retrieval (vars.context); capture these questions with a "
                        "retriever (local:, http(s)://, python:)"), err


def test_the_python_api_freezes_a_promptfoo_csv_context_with_its_question_var(proj):
    import abtest

    shutil.copytree(DATA / "promptfoo" / "eval-customer-support-rubric", proj / "cs")
    with open(proj / "cs" / "tests.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    fx = abtest.capture("cs/promptfooconfig.yaml", "jsonl:cs/promptfooconfig.yaml",
                        "fixtures/cs", question_var="customer_message", progress=False)
    got = {c.question: c for c in fx.cases}
    assert sorted(got) == sorted(x["customer_message"] for x in rows)
    for x in rows:
        assert [(ch.id, ch.text) for ch in got[x["customer_message"]].context] == [
            (chunk_id(x["context"]), x["context"])]


# --------------------------------------------------------------------------- cut and bad

def _record_starts(text: str) -> list[tuple[int, int]]:
    """(offset, line) where each CSV record starts, found with the csv module line by line."""
    lines = text.splitlines(keepends=True)
    starts, offset, line = [], 0, 1
    buf = ""
    for ln in lines:
        if not buf:
            starts.append((offset, line))
        buf += ln
        try:
            rows = list(csv.reader([buf], strict=True))
            complete = len(rows) == 1
        except csv.Error:
            complete = False
        if complete:
            buf = ""
        offset += len(ln)
        line += 1
    return starts


def test_a_csv_cut_inside_a_contexts_cell_says_cut_short(proj):
    text = RAGAS_CSV.read_text(encoding="utf-8")
    offset, line = _record_starts(text)[3]             # the third data record
    cut = text[: offset + 300]                          # inside its quoted contexts cell
    assert cut.count('"') % 2 == 1
    (proj / "cut.csv").write_text(cut, encoding="utf-8")
    err = refused(run("capture", "cut.csv", "--retriever", "jsonl:cut.csv", "--out",
                      "fixtures/cut"), proj, "cut")
    assert err == f"abtest: error: cut.csv: the file ends mid-record (line {line}); was it " \
                  "cut short?"


def test_a_yaml_cut_inside_a_quoted_value_says_cut_short(proj):
    shutil.copytree(RAG_EVAL, proj / "pf")
    text = (RAG_EVAL / "promptfooconfig.yaml").read_text()
    quote = text.index("'$500'")
    (proj / "pf" / "promptfooconfig.yaml").write_text(text[: quote + 3])
    err = refused(run("capture", "pf/promptfooconfig.yaml", "--retriever", "jsonl:x.jsonl",
                      "--out", "fixtures/pf"), proj, "pf")
    line = text[:quote].count("\n") + 1
    assert err == (f"abtest: error: pf/promptfooconfig.yaml: the file ends mid-record (line "
                   f"{line}); was it cut short?")


def test_a_csv_whose_contexts_cell_is_an_object_is_refused(proj):
    write_csv(proj / "d.csv", ["question", "contexts"],
              [["where?", "['here']"], ["why?", "{'text': 'because', 'id': 'c1'}"]])
    err = refused(run("capture", "d.csv", "--retriever", "jsonl:d.csv", "--out", "fixtures/d"),
                  proj, "d")
    assert err == "abtest: error: d.csv: line 3: field 'contexts': expected a list of passages " \
                  "(or one passage as text), got an object"


# --------------------------------------------------------------------------- hints

@pytest.mark.parametrize("src", [
    RAG_EVAL,                                                     # a config, file:// contexts
    DATA / "promptfoo" / "eval-customer-support-rubric",          # a tests.csv with `context`
    RAGAS_JSONL, DE / "goldens.save_as.csv", DATA / "llamaindex" / "labelled_rag_dataset.json",
    "vars.csv"])                                                  # a CSV of promptfoo vars
def test_every_capture_hint_works_when_followed(proj, src):
    """Capturing with another retriever, the import says how to freeze the file's own
    contexts instead; that command, run as said, captures them (never an error)."""
    args: list[str] = []
    if src == "vars.csv":
        write_csv(proj / "vars.csv", ["query", "context"],
                  [["How long do keys last?", "Keys last 90 days."]])
        name = "vars.csv"
    elif isinstance(src, Path) and src.is_dir():
        shutil.copytree(src, proj / "pf")
        name = "pf/promptfooconfig.yaml"
        if src.name == "eval-customer-support-rubric":
            args = ["--question-var", "customer_message"]
    else:
        shutil.copy(src, proj / src.name)
        name = src.name
    (proj / "empty.jsonl").write_text("")
    r = run("capture", name, "--retriever", "jsonl:empty.jsonl", "--out", "fixtures/x", *args)
    hints = re.findall(r"--retriever (jsonl:\S+?)(?: to|\))", r.stderr)
    assert hints == [f"jsonl:{name}"], r.stderr
    r = run("capture", name, "--retriever", hints[0], "--out", "fixtures/own", *args)
    assert r.exit_code == 0, r.stderr
    assert all(c["context"] for c in cases_of(proj, "own"))


def test_opik_items_keep_their_gold_answer_objects(proj):
    """Opik's dataset items (an `input` object beside an `expected_output` object) were read
    as Phoenix examples, which look for the answer in `output`: every gold answer was dropped
    with exit 0. They are input/expected items, the answer the object's only field."""
    items = [json.loads(x) for x in OPIK.read_text().splitlines()]
    shutil.copy(OPIK, proj / "opik.jsonl")
    questions = [x["input"]["user_question"] for x in items]
    r = run("capture", "opik.jsonl", "--retriever", contexts_for(proj, questions), "--out",
            "fixtures/opik")
    assert r.exit_code == 0, r.stderr
    assert lines_of(r)[0] == ("abtest: opik.jsonl: read as Braintrust/Langfuse/Opik dataset "
                              f"items (input, expected): {len(items)} question(s)")
    got = cases_of(proj, "opik")
    assert sorted((c["question"], c["reference_answer"]) for c in got) == \
        sorted((x["input"]["user_question"], x["expected_output"]["assistant_answer"])
               for x in items)
