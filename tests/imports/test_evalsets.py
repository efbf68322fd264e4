"""Eval sets from other tools become sealed fixtures and complete runs: a RAGAS file (as the
questions and as the capture input) and a promptfoo test file (asserts mapped where a case
field means the same; the rest listed). Expected values were worked out by hand from the
files in tests/data/evalsets (see SOURCE.md)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain, install, make_project
from support.fakes import DATA as TEST_DATA

DATA = TEST_DATA / "evalsets"


def _id(prefix: str, question: str) -> str:
    return f"{prefix}-{hashlib.sha256(question.encode()).hexdigest()[:12]}"


def _chunk_id(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def _project(tmp_path, monkeypatch):
    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    for f in DATA.iterdir():
        shutil.copy(f, p / f.name)
    return p


def _cases(p: Path, name: str) -> dict:
    return {c["id"]: c for c in (json.loads(line) for line in
                                 (p / "fixtures" / name / "cases.jsonl").read_text().splitlines())}


def _runs(p: Path, fixture: str):
    r = CliRunner().invoke(cli, ["run", "--fixture", f"fixtures/{fixture}", "--a",
                                 "variants/a.yaml", "--b", "variants/b.yaml"])
    assert r.exit_code in (0, 1), r.stderr
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    return rep


def test_a_ragas_file_is_both_the_questions_and_the_capture(tmp_path, monkeypatch):
    p = _project(tmp_path, monkeypatch)
    r = CliRunner().invoke(cli, ["capture", "ragas.jsonl", "--retriever", "jsonl:ragas.jsonl",
                                 "--out", "fixtures/ragas", "--corpus-version", "kb-1"])
    assert r.exit_code == 0, r.stderr
    # the contexts are imported (this file is the capture input): only the recorded answers
    # are not, and the line says why
    said = [line for line in r.stderr.splitlines() if "not imported" in line]
    assert said == ["abtest: ragas.jsonl: not imported: answer, response (read as the answers "
                    "the app gave, beside the reference column; abtest generates A's and B's)"]
    cases = _cases(p, "ragas")
    q1, q3 = "How long do API keys last?", "Can a deleted project be restored?"
    assert sorted(cases) == sorted(_id("r", q) for q in (q1, "Where is customer data stored?", q3))
    c1 = cases[_id("r", q1)]
    assert c1["reference_answer"] == "API keys expire after 90 days. Admins can shorten that."
    assert c1["key_points"] == ["API keys expire after 90 days.", "Admins can shorten that."]
    assert [(ch["id"], ch["text"]) for ch in c1["context"]] == [
        (_chunk_id(t), t) for t in ("API keys expire after 90 days unless rotated earlier.",
                                    "Admins can set a shorter expiry under Security.")]
    c3 = cases[_id("r", q3)]   # older column names: question, contexts, ground_truths
    assert c3["reference_answer"] == "Yes, within 30 days from the trash."
    assert c3["context"][0]["text"] == "Deleted projects can be restored for 30 days from the trash."
    rep = _runs(p, "ragas")
    assert rep["status"] == "complete" and rep["n_finished"] == 3


def test_a_promptfoo_file_maps_its_asserts_and_lists_the_rest(tmp_path, monkeypatch):
    p = _project(tmp_path, monkeypatch)
    r = CliRunner().invoke(cli, ["capture", "promptfooconfig.yaml", "--retriever",
                                 "jsonl:contexts.jsonl", "--out", "fixtures/pf"])
    assert r.exit_code == 0, r.stderr
    cases = _cases(p, "pf")
    rot = cases[_id("pf", "How do I rotate an API key?")]
    assert rot["key_points"] == ["Settings", "API keys", "Rotate"]
    assert rot["must_not_say"] == ["as an AI language model"]          # from defaultTest
    exp = cases[_id("pf", "How long do API keys last?")]               # question from vars.query
    assert exp["reference_answer"] == "API keys expire after 90 days. Admins can shorten that."
    assert exp["key_points"] == ["API keys expire after 90 days.", "Admins can shorten that."]
    assert exp["must_not_say"] == ["as an AI language model", "forever"]
    assert len(cases) == 2
    listed = [line for line in r.stderr.splitlines() if "not imported:" in line]
    # one line per thing not imported, naming the test; the context file this test names
    # is not there, which matters only to a capture from this file's own contexts
    for what in ("not imported: vars.context ('file://kb/keys.md': file not found (looked for "
                 "kb/keys.md)) (tests[0] (key rotation))",
                 "not imported: assert type 'llm-rubric' (no per-case mapping) (tests[0] (key "
                 "rotation))",
                 "not imported: assert type 'is-json' (no per-case mapping; a variant's checks "
                 "cover it) (tests[1] (expiry, with a reference))",
                 "not imported: the test (no question var: looked for question, query, "
                 "user_input, input, prompt, or a single text var; it has topic, tone; name one "
                 "with --question-var) (tests[2] (no question var))"):
        assert any(line.endswith(what) for line in listed), what
    assert len(listed) == 4
    rep = _runs(p, "pf")
    assert rep["status"] == "complete" and rep["n_finished"] == 2


def test_a_promptfoo_reference_to_a_missing_file_is_one_line(tmp_path, monkeypatch):
    p = _project(tmp_path, monkeypatch)
    (p / "sub").mkdir()
    (p / "sub" / "pf.yaml").write_text("tests: file://tests.csv\n")
    r = CliRunner().invoke(cli, ["capture", "sub/pf.yaml", "--retriever", "jsonl:contexts.jsonl",
                                 "--out", "fixtures/x"])
    assert r.exit_code == 2, r.stderr
    # looked for beside the config, as promptfoo does, not in the working directory
    assert "sub/pf.yaml: field 'tests': 'file://tests.csv': file not found (looked for " \
           "sub/tests.csv)" in r.stderr
    assert r.stderr.count("\n") == 1 and not (p / "fixtures" / "x").exists()
