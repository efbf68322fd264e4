"""Errors (issue 45, item 6): one base `abtest.AbtestError`; the CLI's exit codes by kind; a
message that names an option names the Python argument (`resume=True`) when raised through
the API and the flag (`--resume`) when the command line prints it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import abtest
from abtest.cli import cli
from support.fakes import Brain, install, make_project

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def test_every_kind_is_an_abtest_error_with_the_clis_exit_code():
    from abtest.cli.common import EXIT_BAD_INPUT, EXIT_INCOMPLETE, exit_for

    assert issubclass(abtest.UserError, abtest.AbtestError)
    for kind in (abtest.IncompleteRunError, abtest.DriftError, abtest.ProviderError):
        assert issubclass(kind, abtest.AbtestError)
        assert exit_for(kind("x")) == EXIT_INCOMPLETE
    assert exit_for(abtest.UserError("x")) == EXIT_BAD_INPUT
    # the names the rest of the package raises are these classes
    from abtest import errors
    from abtest.llm import ProviderUnreachable

    assert errors.IncompleteRunError is abtest.IncompleteRunError
    assert issubclass(ProviderUnreachable, abtest.AbtestError)


def test_an_option_is_spelled_by_the_surface_that_shows_it():
    e = abtest.UserError("run exists; use {resume} with {run_id}", file="f", field="{shard}",
                         opts={"resume": True, "run_id": "r1", "shard": None})
    assert str(e) == "f: field 'shard': run exists; use resume=True with run_id='r1'"
    assert e.line("cli") == "f: field '--shard': run exists; use --resume with --run-id r1"
    # braces that are not a named option are the message's own
    assert abtest.UserError("{{ context }} and {x}", opts={"force": True}).line("cli") == \
        "{{ context }} and {x}"
    stop = abtest.RunStopped("r9", "SIGINT", "abtest run --resume --run-id r9")
    assert "`run(..., run_id='r9', resume=True)` continues it" in str(stop)
    assert "`abtest run --resume --run-id r9` continues it" in stop.line("cli")


@pytest.fixture
def project(tmp_path, monkeypatch):
    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    return p


def test_a_run_id_taken_says_resume_true_in_python_and_resume_on_the_command_line(project):
    h = abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id="r1",
                   progress=None)
    assert h.status == "complete"
    with pytest.raises(abtest.AbtestError) as ei:
        abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id="r1")
    assert isinstance(ei.value, abtest.UserError)
    assert "use resume=True to continue it" in str(ei.value) and "--" not in str(ei.value)
    r = CliRunner().invoke(cli, RUN + ["--run-id", "r1"])
    assert r.exit_code == 2
    assert r.stderr.strip() == "abtest: error: run id 'r1' already exists; use --resume to " \
                               "continue it"


def test_a_fixture_in_the_way_says_force_true_in_python_and_force_on_the_command_line(project):
    qs = [{"id": "q1", "question": "where is the harbour"}]

    def retrieve(question, k):
        return [{"id": "c1", "text": "The harbour is north."}]

    abtest.capture(qs, retrieve, "fixtures/cap", k=1)
    with pytest.raises(abtest.UserError) as ei:
        abtest.capture(qs, retrieve, "fixtures/cap", k=1)
    assert str(ei.value).endswith("pass force=True to replace it deliberately")
    (project / "q.jsonl").write_text('{"id": "q1", "question": "where is the harbour"}\n')
    (project / "ctx.jsonl").write_text(
        '{"id": "q1", "chunks": [{"id": "c1", "text": "The harbour is north."}]}\n')
    r = CliRunner().invoke(cli, ["capture", "q.jsonl", "--retriever", "jsonl:ctx.jsonl",
                                 "--out", "fixtures/cap"])
    assert r.exit_code == 2, r.stderr
    assert r.stderr.strip().endswith("pass --force to replace it deliberately"), r.stderr


def test_an_unreachable_provider_is_a_provider_error_that_says_how_to_go_on(tmp_path, monkeypatch):
    import socket

    from support.fakes import llm_config
    from abtest.llm import ProviderUnreachable

    with socket.socket() as s:   # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-test-errors-0123456789")
    p = make_project(tmp_path / "p", config=llm_config(f"http://127.0.0.1:{port}/v1"))
    monkeypatch.chdir(p)
    with pytest.raises(abtest.ProviderError) as ei:
        abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id="dead")
    e = ei.value
    assert isinstance(e, ProviderUnreachable) and isinstance(e, abtest.IncompleteRunError)
    assert str(e).endswith("`run(..., run_id='dead', resume=True, retry_errors=True)` goes on "
                           "once it answers"), str(e)
    cli_line = e.line("cli")
    assert "--resume" in cli_line and cli_line.endswith("--retry-errors` goes on once it answers")
    assert "unreachable" in cli_line and "\n" not in cli_line
