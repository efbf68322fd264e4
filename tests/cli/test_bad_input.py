"""Bad input: exit 2, one line naming file / line or case / field, no traceback, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain, install
from support.badinput import expect_bad

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


@pytest.fixture(autouse=True)
def _brain():
    return install(Brain())


def write_cases(path: Path, lines: list[str]):
    path.mkdir(parents=True, exist_ok=True)
    (path / "cases.jsonl").write_text("\n".join(lines) + "\n")


GOOD = {"id": "x", "question": "q?", "context": [{"id": "c", "text": "t"}], "corpus_version": "v",
        "retriever": "r", "answerable": True}


def test_malformed_jsonl_line(project):
    write_cases(Path("fixtures/bad"), [json.dumps(GOOD), "{not json"])
    expect_bad(["fixtures", "seal", "fixtures/bad"], "cases.jsonl", "line 2", "invalid JSON")


def test_missing_required_field(project):
    g = dict(GOOD)
    del g["answerable"]
    write_cases(Path("fixtures/bad"), [json.dumps(g)])
    expect_bad(["fixtures", "seal", "fixtures/bad"], "line 1", "case x", "answerable", "missing")


def test_duplicate_case_id(project):
    write_cases(Path("fixtures/bad"), [json.dumps(GOOD), json.dumps(GOOD)])
    expect_bad(["fixtures", "seal", "fixtures/bad"], "line 2", "duplicate case id")


def test_unknown_case_key(project):
    write_cases(Path("fixtures/bad"), [json.dumps({**GOOD, "contxt": []})])
    expect_bad(["fixtures", "seal", "fixtures/bad"], "contxt", "unknown key")


def test_chunk_without_text(project):
    write_cases(Path("fixtures/bad"), [json.dumps({**GOOD, "context": [{"id": "c", "text": ""}]})])
    expect_bad(["fixtures", "seal", "fixtures/bad"], "context.0.text")


def test_unknown_variant_key(project):
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text() + "temprature: 0\n")
    expect_bad(RUN, "variants/b.yaml", "temprature", "unknown key")


def test_template_variable_that_does_not_exist(project):
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text().replace(
        "{{ question }}", "{{ questoin }}"))
    expect_bad(RUN, "variants/b.yaml", "questoin", "field 'user'")


def test_missing_variant_file(project):
    expect_bad(["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b",
                "variants/nope.yaml"], "variants/nope.yaml", "not found")


def test_missing_fixture(project):
    expect_bad(["run", "--fixture", "fixtures/nope", "--a", "variants/a.yaml", "--b",
                "variants/b.yaml"], "fixtures/nope", "not found")


def test_yaml_syntax_error(project):
    Path("variants/a.yaml").write_text("name: x\nuser: [unclosed\n")
    expect_bad(RUN, "variants/a.yaml", "YAML syntax error", "line")


def test_config_key_typo(project):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text() + "concurency: 3\n")
    expect_bad(RUN, "abtest.yaml", "concurency", "unknown key")


def test_missing_api_key_env_for_remote_model(project):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text().replace(
        "judge: {model: fake/judge, temperature: 0}",
        "judge: {model: openai/gpt-4o-mini, api_key_env: ABTEST_TEST_MISSING_KEY}"))
    err = expect_bad(RUN, "ABTEST_TEST_MISSING_KEY", "is not set")
    assert "judge" in err


def test_tampered_fixture_names_the_case(project):
    p = Path("fixtures/small/cases.jsonl")
    p.write_text(p.read_text().replace("Rollo was a Viking leader.", "Rollo was a Frankish king.", 1))
    expect_bad(["fixtures", "verify", "fixtures/small"], "case q1", "tampered")
    expect_bad(RUN, "case q1", "tampered")


def test_resume_with_changed_variant_refused(project):
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0
    run_id = r.stdout.strip().splitlines()[-1]
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text() + "\n# edited\n")
    expect_bad(RUN + ["--run-id", run_id, "--resume"], "variant B changed", "b.yaml")


def test_unknown_run_id(project):
    CliRunner().invoke(cli, RUN)
    expect_bad(["report", "nope"], "no run 'nope'")


def test_report_without_store(project):
    expect_bad(["report", "x"], "results store not found")


def test_bad_config_value_type(project):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text().replace("concurrency: 4",
                                                                           "concurrency: many"))
    expect_bad(RUN, "abtest.yaml", "concurrency")


def test_unknown_judge_name(project):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text().replace(
        "judges: [pairwise", "judges: [pairwize"))
    expect_bad(RUN, "abtest.yaml", "pairwize")


def test_non_utf8_cases(project):
    Path("fixtures/bad").mkdir()
    Path("fixtures/bad/cases.jsonl").write_bytes(json.dumps(GOOD).encode() + b"\n\xff\xfe\n")
    expect_bad(["fixtures", "seal", "fixtures/bad"], "not valid UTF-8", "line 2")


def test_second_writer_gets_clear_message(project, tmp_path):
    """A second process on the same store: exit 2 with one clear line."""
    import duckdb

    Path("results").mkdir(exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import duckdb,sys,time; c=duckdb.connect('results/abtest.duckdb'); "
        "print('ready', flush=True); time.sleep(30)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        r = CliRunner().invoke(cli, RUN)
        assert r.exit_code == 2, r.stderr
        assert "in use by another abtest process" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    finally:
        holder.kill()
        holder.wait()
    del duckdb


def test_capture_refuses_to_overwrite(project, tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "x", "question": "q"}) + "\n")
    imp = tmp_path / "cap.jsonl"
    imp.write_text(json.dumps({"id": "x", "question": "q", "context": [{"id": "c", "text": "t"}]}) + "\n")
    expect_bad(["capture", str(q), "--retriever", f"jsonl:{imp}", "--out", "fixtures/small"],
               "already exists", "--force")


def test_questions_bad_rows(project, tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "x", "question": "  "}) + "\n")
    expect_bad(["capture", str(q), "--retriever", "jsonl:whatever", "--out", "fixtures/new"],
               "q.jsonl", "line 1", "question")
    q.write_text(json.dumps({"id": "x", "question": "a"}) + "\n" + json.dumps({"id": "x", "question": "b"}) + "\n")
    expect_bad(["capture", str(q), "--retriever", "jsonl:whatever", "--out", "fixtures/new"],
               "line 2: field 'id': id 'x' is also at line 1, with different content")
    assert not Path("fixtures/new").exists()


def test_debug_env_shows_traceback_only_when_asked(project):
    env = {**os.environ, "ABTEST_DEBUG": ""}
    out = subprocess.run([sys.executable, "-m", "abtest.cli", "report", "x"], capture_output=True,
                         text=True, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr


def test_store_file_that_is_not_duckdb(project):
    Path("results").mkdir(exist_ok=True)
    Path("results/abtest.duckdb").write_bytes(b"this is not a database" * 100)
    expect_bad(["report", "x"], "results/abtest.duckdb")


def test_corrupted_manifest(project):
    Path("fixtures/small/manifest.json").write_text("{broken")
    expect_bad(["fixtures", "verify", "fixtures/small"], "manifest.json", "invalid JSON")


def test_variant_output_format_invalid(project):
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text() + "output: {format: xml}\n")
    expect_bad(RUN, "variants/b.yaml", "output.format")


def test_variant_bad_citation_regex(project):
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text()
                                       + 'checks: {citation_pattern: "[unclosed"}\n')
    expect_bad(RUN, "variants/b.yaml", "citation_pattern")


def test_unknown_retriever_kind(project, tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "x", "question": "q"}) + "\n")
    expect_bad(["capture", str(q), "--retriever", "ftp://x", "--out", "fixtures/new"],
               "unknown retriever kind")


def test_corpus_row_without_text(project, tmp_path):
    c = tmp_path / "c.jsonl"
    c.write_text(json.dumps({"id": "a", "text": "ok"}) + "\n" + json.dumps({"id": "b"}) + "\n")
    expect_bad(["index", str(c), "--index", "results/idx.duckdb"], "c.jsonl", "line 2", "text")
    assert not Path("results/idx.duckdb").exists()


def test_search_unbalanced_parentheses(project, tmp_path):
    c = tmp_path / "c.jsonl"
    c.write_text(json.dumps({"id": "a", "text": "cats and dogs"}) + "\n")
    assert CliRunner().invoke(cli, ["index", str(c), "--index", "results/idx.duckdb"]).exit_code == 0
    expect_bad(["search", "results/idx.duckdb", "(cats OR dogs"], "position")


def test_gate_thresholds_unknown_key(project):
    r = CliRunner().invoke(cli, RUN)
    run_id = r.stdout.strip().splitlines()[-1]
    Path("t.yaml").write_text("faithfullness: 0.8\n")
    expect_bad(["gate", run_id, "--thresholds", "t.yaml"], "t.yaml", "faithfullness")


def test_retry_errors_without_resume(project):
    expect_bad(RUN + ["--retry-errors"], "--retry-errors goes with --resume")


def test_context_template_unknown_variable(project):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text()
                                   + 'context_template: "[{{ chunk.id }}] {{ chnk.text }}"\n')
    expect_bad(RUN, "context_template", "chnk")


def test_review_labels_unknown_item(project, tmp_path):
    r = CliRunner().invoke(cli, RUN)
    run_id = r.stdout.strip().splitlines()[-1]
    assert CliRunner().invoke(cli, ["review", "export", run_id, "--out", str(tmp_path / "pack")]).exit_code == 0
    bad = tmp_path / "labels.csv"
    bad.write_text("item_id,label\nno-such-item,1\n")
    expect_bad(["review", "import", run_id, str(bad)], "labels.csv", "no-such-item")


def test_golden_file_not_a_list(project, tmp_path):
    g = tmp_path / "golden.json"
    g.write_text(json.dumps({"nope": 1}))
    expect_bad(["capture", str(g), "--retriever", "jsonl:x", "--out", "fixtures/new"],
               "golden.json", "not a questions file abtest knows", "this row has: nope")


def test_an_error_after_litellm_starts_loading_is_one_line_on_stderr(project):
    """A run starts importing litellm in the background while it checks its inputs; when a
    check fails (here the generator's key variable is unset), the process's whole stderr is
    the error line: litellm's import-time pydantic warnings (~144 lines) are not printed."""
    cfg = Path("abtest.yaml")
    cfg.write_text(cfg.read_text().replace(
        "generator: {model: fake/gen,", "generator: {model: openai/gpt-4o-mini, "
        "api_key_env: ABTEST_TEST_UNSET_KEY,"))
    env = {k: v for k, v in os.environ.items() if k != "ABTEST_TEST_UNSET_KEY"}
    out = subprocess.run([sys.executable, "-m", "abtest.cli", *RUN], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        "abtest: error: field 'generator.api_key_env': environment variable "
        "ABTEST_TEST_UNSET_KEY is not set (API key for model openai/gpt-4o-mini)"], out.stderr
