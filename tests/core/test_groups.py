"""Case groups (abtest.core.groups): repeats, `group`, `group_by` (a field, meta.KEY, document), the
merge of repeats across labels, bad input (exit 2 naming the case and field, nothing written),
the config and the commands that take `--group-by`. Expected values are written out by hand
from the cases each test builds, never taken from abtest."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from abtest.errors import UserError
from abtest.capturing import write_fixture
from abtest.core.groups import (CaseGroups, case_groups, check_group_by, content_key, document_of,
                           group_summary, parse_group_by)
from abtest.core.models import Case, Chunk, Config
from support.fakes import Brain, install
from support.badinput import expect_bad

BASE = dict(corpus_version="v1", retriever="test", answerable=True)


def case(cid: str, question: str, chunks: list[tuple[str, str]], **kw) -> Case:
    return Case(id=cid, question=question, context=[Chunk(id=i, text=t) for i, t in chunks],
                **{**BASE, **kw})


# --------------------------------------------------------------------------- repeats

def test_repeats_under_other_ids_are_one_group_and_the_line_says_so():
    """40 distinct questions, each written 3 times under other ids: 120 cases, 40 groups,
    80 repeats (the issue's own figures)."""
    cases = [case(f"copy{k}-q{i}", f"Question number {i}?", [(f"d{i}#c1", f"text {i}")])
             for k in range(3) for i in range(40)]
    groups = case_groups(cases)
    assert isinstance(groups, CaseGroups) and isinstance(groups, dict)
    assert len(groups) == 120 and len(set(groups.values())) == 40
    for i in range(40):   # the three copies of question i share one key, another's differs
        assert groups[f"copy0-q{i}"] == groups[f"copy1-q{i}"] == groups[f"copy2-q{i}"]
    assert groups["copy0-q0"] != groups["copy0-q1"]
    assert groups.repeat_of["copy2-q7"] == "copy0-q7" and len(groups.repeat_of) == 80
    s = group_summary(groups)
    assert s["text"] == "120 cases in 40 groups (80 repeats)"
    assert (s["n_cases"], s["n_groups"], s["n_repeats"], s["n_singletons"]) == (120, 40, 80, 0)
    assert s["largest"]["n"] == 3


def test_the_same_question_with_other_context_is_not_a_repeat():
    cases = [case("a", "Who was Rollo?", [("c1", "Rollo was a Viking.")]),
             case("b", "Who was Rollo?", [("c2", "Rollo was a Viking.")]),        # other id
             case("c", "Who was Rollo?", [("c1", "Rollo was a Norse leader.")]),  # other text
             case("d", "Who was Rollo?", [("c1", "Rollo was a Viking."), ("c2", "x")]),
             case("e", "Who was Rollo?", [("c2", "x"), ("c1", "Rollo was a Viking.")]),
             case("f", "Who was Rollo?", [])]
    groups = case_groups(cases)
    assert groups == {k: f"case:{k}" for k in "abcdef"}
    assert groups.repeat_of == {}
    assert group_summary(groups)["text"] == "6 cases in 6 groups"


def test_a_repeat_is_the_same_question_up_to_whitespace_and_any_other_field():
    cases = [case("a", "Who was  Rollo?", [("c1", "t")], category="factual"),
             case("b", " Who was Rollo?\n", [("c1", "t")], answerable=False, tags=["x"]),
             case("c", "who was Rollo?", [("c1", "t")])]                    # case differs
    groups = case_groups(cases)
    assert groups["a"] == groups["b"] == "case:a" and groups["c"] == "case:c"
    assert groups.repeat_of == {"b": "a"}
    assert content_key(cases[0]) == content_key(cases[1]) != content_key(cases[2])


def test_dicts_and_cases_group_alike():
    cases = [case("a", "Q?", [("d#1", "t")], group="g"), case("b", "R?", [("d#2", "u")])]
    dicts = [json.loads(c.model_dump_json(exclude_none=True)) for c in cases]
    for group_by in (None, "document"):
        assert case_groups(cases, group_by) == case_groups(dicts, group_by)


# --------------------------------------------------------------------------- labels

def test_the_group_field_names_the_group_and_a_case_without_one_is_alone():
    cases = [case("a", "Q1?", [("c1", "t1")], group="doc-1"),
             case("b", "Q2?", [("c2", "t2")], group="doc-1"),
             case("c", "Q3?", [("c3", "t3")], group="doc-2"),
             case("d", "Q4?", [("c4", "t4")])]
    assert case_groups(cases) == {"a": "group:doc-1", "b": "group:doc-1", "c": "group:doc-2",
                                  "d": "case:d"}
    s = group_summary(case_groups(cases))
    assert s["text"] == "4 cases in 3 groups" and s["n_singletons"] == 2
    assert s["largest"] == {"group": "group:doc-1", "n": 2}


def test_a_user_group_named_like_a_case_never_meets_that_case():
    cases = [case("x", "Q1?", [("c1", "t1")], group="y"), case("y", "Q2?", [("c2", "t2")])]
    g = case_groups(cases)
    assert g["x"] != g["y"]


def test_group_by_a_field_and_a_meta_key():
    cases = [case("a", "Q1?", [("c1", "t1")], category="factual", meta={"src": {"doc": "A"}}),
             case("b", "Q2?", [("c2", "t2")], category="factual", meta={"src": {"doc": 7}}),
             case("c", "Q3?", [("c3", "t3")], category="edge", meta={"src": {"doc": "A"}})]
    assert case_groups(cases, "category") == {"a": "category:factual", "b": "category:factual",
                                              "c": "category:edge"}
    assert case_groups(cases, "meta.src.doc") == {"a": "meta.src.doc:A", "b": "meta.src.doc:7",
                                                  "c": "meta.src.doc:A"}


@pytest.mark.parametrize("group_by, field", [("category", "category"),
                                             ("meta.source", "meta.source"),
                                             ("group", "group")])
def test_a_group_by_field_some_case_lacks_is_bad_input_naming_case_and_field(group_by, field):
    cases = [case("a", "Q1?", [("c1", "t1")], category="factual", meta={"source": "w"},
                  group="g"),
             case("b2", "Q2?", [("c2", "t2")])]
    with pytest.raises(UserError) as exc:
        case_groups(cases, group_by, file="fixtures/x/cases.jsonl")
    line = exc.value.line()
    assert line.startswith("fixtures/x/cases.jsonl: case b2: field '" + field + "': ")
    assert "\n" not in line


def test_group_by_a_list_or_object_value_is_refused_naming_case_and_field():
    cases = [case("a", "Q1?", [("c1", "t1")], meta={"source": ["x", "y"]})]
    with pytest.raises(UserError) as exc:
        case_groups(cases, "meta.source")
    assert "case a" in exc.value.line() and "field 'meta.source'" in exc.value.line()


@pytest.mark.parametrize("bad", ["context", "tags", "contex", "meta.", "meta..x", "document:", ""])
def test_what_cannot_be_grouped_by_is_named(bad):
    with pytest.raises(ValueError):
        parse_group_by(bad)
    with pytest.raises(UserError) as exc:
        check_group_by(bad, "--group-by")
    assert "field '--group-by'" in exc.value.line()


# --------------------------------------------------------------------------- document

@pytest.mark.parametrize("chunk_id, sep, doc", [
    ("normans#p4", "#", "normans"), ("policy-returns-v3#sec-2", "#", "policy-returns-v3"),
    ("doc-7#sha256:0123456789ab", "#", "doc-7"), ("a#b#c", "#", "a"),
    ("sha256:0123456789abcdef", "#", "sha256:0123456789abcdef"), ("#p1", "#", "#p1"),
    ("820769473_15895-16818", "_", "820769473"), ("normans_p4_c1", "_", "normans"),
    ("normans#p4", "_", "normans#p4")])
def test_the_document_of_a_chunk_id(chunk_id, sep, doc):
    assert document_of(chunk_id, sep) == doc


def test_group_by_document_reads_the_relevant_chunk_else_the_top_ranked_one():
    cases = [case("a", "Q1?", [("normans#p0", "t0"), ("rollo#p1", "t1")]),
             case("b", "Q2?", [("normans#p3", "t3")]),
             case("c", "Q3?", [("rollo#p0", "u0"), ("normans#p1", "u1")]),
             case("d", "Q4?", [("rollo#p2", "u2")], relevant_chunk_ids=["normans#p9"]),
             case("e", "Q5?", [], answerable=False)]
    assert case_groups(cases, "document") == {
        "a": "document:normans", "b": "document:normans", "c": "document:rollo",
        "d": "document:normans", "e": "case:e"}
    s = group_summary(case_groups(cases, "document"))
    assert s["text"] == "5 cases in 3 groups" and s["group_by"] == "document"
    assert s["largest"] == {"group": "document:normans", "n": 3}


def test_group_by_document_with_another_separator():
    cases = [case("a", "Q1?", [("820769473_15895-16818", "t")]),
             case("b", "Q2?", [("820769473_0-900", "u")]),
             case("c", "Q3?", [("11_5", "v")])]
    assert case_groups(cases, "document:_") == {"a": "document:_:820769473",
                                                "b": "document:_:820769473",
                                                "c": "document:_:11"}


# --------------------------------------------------------------------------- merges

def test_repeats_with_different_groups_merge_those_groups():
    """x (group g2) repeats a (group g1): g1 and g2 become one group, with b and y, named by
    the smaller label; z (group g3) stays apart; a case of its own that repeats a labelled
    one joins that label."""
    cases = [case("a", "Same?", [("c1", "t")], group="g1"),
             case("b", "Other?", [("c2", "u")], group="g1"),
             case("x", "Same?", [("c1", "t")], group="g2"),
             case("y", "Third?", [("c3", "v")], group="g2"),
             case("z", "Fourth?", [("c4", "w")], group="g3"),
             case("s", "Fourth?", [("c4", "w")])]
    groups = case_groups(cases)
    assert groups == {"a": "group:g1", "b": "group:g1", "x": "group:g1", "y": "group:g1",
                      "z": "group:g3", "s": "group:g3"}
    assert groups.repeat_of == {"x": "a", "s": "z"}
    assert group_summary(groups)["text"] == "6 cases in 2 groups (2 repeats)"


def test_repeats_merge_across_group_by_labels_too():
    cases = [case("a", "Same?", [("doc1#c1", "t")], relevant_chunk_ids=["doc1#c1"]),
             case("b", "Same?", [("doc1#c1", "t")], relevant_chunk_ids=["doc2#c5"]),
             case("c", "Else?", [("doc2#c9", "u")])]
    assert case_groups(cases, "document") == {"a": "document:doc1", "b": "document:doc1",
                                              "c": "document:doc1"}


@pytest.mark.serial   # a CPU time bound on the wall clock: run alone (scripts/test's last pass)
def test_ten_thousand_cases_group_well_under_a_second():
    cases = [case(f"c{i}", f"Question {i % 4000}?",
                  [(f"doc{i % 4000 % 300}#p{j}", f"text {i % 4000} {j}") for j in range(5)],
                  group=None if i % 7 else f"g{i % 50}")
             for i in range(10_000)]
    t0 = time.perf_counter()
    groups = case_groups(cases)
    took = time.perf_counter() - t0
    assert len(groups) == 10_000 and len(groups.repeat_of) == 6000
    t0 = time.perf_counter()
    case_groups(cases, "document")
    took = max(took, time.perf_counter() - t0)
    assert took < 0.6, took


# --------------------------------------------------------------------------- shapes, config

@pytest.mark.parametrize("value", [3, 1.5, True, ["a"], {"a": 1}, "", "  "])
def test_a_case_group_must_be_text(value):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as exc:
        Case.model_validate({"id": "x", "question": "q?", "context": [], **BASE,
                             "group": value})
    assert exc.value.errors()[0]["loc"] == ("group",)


def test_config_group_by_is_checked_when_read():
    assert Config().group_by is None
    assert Config(group_by="document").group_by == "document"
    assert Config(group_by="meta.source").group_by == "meta.source"
    from abtest.errors import UserError

    with pytest.raises(UserError, match="field 'group_by': .*cannot group by 'contxt'"):
        Config(group_by="contxt")


# --------------------------------------------------------------------------- commands

@pytest.fixture(autouse=True)
def _brain():
    return install(Brain())


GOOD = {"id": "x", "question": "q?", "context": [{"id": "c", "text": "t"}], "corpus_version": "v",
        "retriever": "r", "answerable": True}


@pytest.mark.parametrize("value, says", [(3, "string"), (["a"], "string"), ("", "empty")])
def test_a_fixture_case_whose_group_is_not_text_is_exit_2(project, value, says):
    folder = Path("fixtures/bad")
    folder.mkdir(parents=True)
    (folder / "cases.jsonl").write_text(json.dumps(GOOD) + "\n" + json.dumps(
        {**GOOD, "id": "y", "group": value}) + "\n")
    expect_bad(["fixtures", "seal", "fixtures/bad"], "cases.jsonl", "line 2", "case y",
               "field 'group'", says)
    assert not (folder / "manifest.json").exists()


def test_a_sealed_fixture_edited_to_a_bad_group_is_exit_2_on_load(project):
    lines = Path("fixtures/small/cases.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "group": 42})
    Path("fixtures/small/cases.jsonl").write_text("\n".join(lines) + "\n")
    expect_bad(["fixtures", "verify", "fixtures/small"], f"case {first['id']}", "field 'group'")


def test_capture_of_a_question_whose_group_is_not_text_is_exit_2(project):
    Path("qs.jsonl").write_text(json.dumps({"id": "q1", "question": "Who?"}) + "\n"
                                + json.dumps({"id": "q2", "question": "What?", "group": 7}) + "\n")
    Path("ctx.jsonl").write_text(json.dumps({"id": "q1", "contexts": ["a"]}) + "\n"
                                 + json.dumps({"id": "q2", "contexts": ["b"]}) + "\n")
    expect_bad(["capture", "qs.jsonl", "--retriever", "jsonl:ctx.jsonl", "--out",
                "fixtures/new"], "qs.jsonl", "line 2", "question q2", "field 'group'")


def test_capture_copies_a_questions_group_onto_its_case(project):
    Path("qs.jsonl").write_text(json.dumps({"id": "q1", "question": "Who?", "group": "d1"}) + "\n"
                                + json.dumps({"id": "q2", "question": "What?"}) + "\n")
    Path("ctx.jsonl").write_text(json.dumps({"id": "q1", "contexts": ["a"]}) + "\n"
                                 + json.dumps({"id": "q2", "contexts": ["b"]}) + "\n")
    r = CliRunner().invoke(cli, ["capture", "qs.jsonl", "--retriever", "jsonl:ctx.jsonl",
                                 "--out", "fixtures/new"])
    assert r.exit_code == 0, r.stderr
    got = {c["id"]: c.get("group") for c in map(json.loads, Path(
        "fixtures/new/cases.jsonl").read_text().splitlines())}
    assert got == {"q1": "d1", "q2": None}
    assert "group (which questions are not independent): from group for 1 of 2" in r.stderr


def test_fixtures_status_prints_the_groups_line(project):
    cases = [case(f"k{k}-{i}", f"Question {i}?", [(f"doc{i % 2}#c{i}", f"t{i}")])
             for k in range(3) for i in range(4)]
    write_fixture(Path("fixtures/rep"), cases, corpus_version="v1", retriever="test")
    r = CliRunner().invoke(cli, ["fixtures", "status", "fixtures/rep"])
    assert r.exit_code == 0, r.stderr
    assert "groups: 12 cases in 4 groups (8 repeats); the largest, case:k0-0, holds 3" \
        in r.stdout
    r = CliRunner().invoke(cli, ["fixtures", "status", "fixtures/rep", "--group-by", "document"])
    assert r.exit_code == 0, r.stderr
    assert ("groups: 12 cases in 2 groups (8 repeats); the largest, document:doc0, holds 6 "
            "(group_by document)") in r.stdout
    r = CliRunner().invoke(cli, ["fixtures", "status", "fixtures/rep", "--format", "json"])
    assert json.loads(r.stdout)["groups"]["text"] == "12 cases in 4 groups (8 repeats)"


def test_fixtures_status_reads_group_by_from_the_config(project):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text() + "group_by: category\n")
    r = CliRunner().invoke(cli, ["fixtures", "status", "fixtures/small", "--format", "json"])
    assert r.exit_code == 0, r.stderr
    g = json.loads(r.stdout)["groups"]
    assert g["group_by"] == "category" and g["n_groups"] == 2   # factual ×3, out_of_scope


def test_status_run_and_report_refuse_a_group_by_field_a_case_lacks(project):
    expect_bad(["fixtures", "status", "fixtures/small", "--group-by", "meta.source"],
               "cases.jsonl", "case q1", "field 'meta.source'")
    expect_bad(["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b",
                "variants/b.yaml", "--group-by", "reference_answer"],
               "case q2", "field 'reference_answer'")
    expect_bad(["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b",
                "variants/b.yaml", "--group-by", "contxt"], "field '--group-by'", "contxt")


def test_a_bad_group_by_in_the_config_is_exit_2_naming_it(project):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text() + "group_by: chunks\n")
    expect_bad(["fixtures", "status", "fixtures/small"], "abtest.yaml", "field 'group_by'",
               "cannot group by 'chunks'")
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text().replace(
        "group_by: chunks", "group_by: meta.source"))
    expect_bad(["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b",
                "variants/b.yaml"], "case q1", "field 'meta.source'")


def test_a_run_stores_its_group_by_and_report_can_regroup(project):
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml", "--group-by", "document"])
    assert r.exit_code == 0, r.stderr
    run_id = r.stdout.strip().splitlines()[-1]
    from abtest.store import Store

    st = Store("results/abtest.duckdb", read_only=True, create=False)
    try:
        stored = json.loads(st.get_run(run_id)["config_json"])
    finally:
        st.close()
    assert stored["group_by"] == "document"
    expect_bad(["report", run_id, "--group-by", "meta.source"], "case q1",
               "field 'meta.source'")
    expect_bad(["report", run_id, "--group-by", "chunks"], "field '--group-by'")
    r = CliRunner().invoke(cli, ["report", run_id, "--group-by", "category", "--format", "json"])
    assert r.exit_code == 0, r.stderr
