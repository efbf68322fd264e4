"""Crash safety against a real loopback OpenAI-compatible server: SIGKILL mid-run, then
--resume completes without re-sending finished calls and matches an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path


from support.fakes import brain_llm_server as FakeLLMServer
from support.fakes import llm_config as config
from support.fakes import make_project, many_cases
from support.fakes import run_results as results
from support.cli import abtest_popen, abtest_run


SECRET = "sk-test-SECRET-abc123456789"


def abtest(*args, env=None, wait=True):
    """A real `abtest` process (forked from the preloaded interpreter: tests/support/cli.py)."""
    if wait:
        return abtest_run(args, env=env, timeout=300)
    return abtest_popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def saved_calls(store_path: Path) -> dict[str, list]:
    """call hash -> its llm_calls rows (a successful row means the answer is saved)."""
    from abtest.store import Store

    s = Store(store_path, read_only=True)
    try:
        rows = s._rows("SELECT call_hash, error, cached FROM llm_calls ORDER BY id", [])
    finally:
        s.close()
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(r["call_hash"], []).append(r)
    return out


def test_sigkill_then_resume_repeats_no_finished_call(tmp_path, server, monkeypatch):
    srv, url = server
    env = {**os.environ, "FAKE_LLM_KEY": SECRET}
    proj = make_project(tmp_path / "p", many_cases(24), config=config(url))
    run = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]
    monkeypatch.chdir(proj)  # restored after the test
    kills = 0
    for threshold in (15, 60):  # kill twice, at different points
        proc = abtest(*run, *(["--resume"] if kills else []), env=env, wait=False)
        deadline = time.time() + 60
        while not srv.wait_for_requests(threshold, timeout=0.5) and time.time() < deadline \
                and proc.poll() is None:
            pass
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
    before_resume = dict(srv.counts)
    store_path = proj / "results" / "abtest.duckdb"
    before = saved_calls(store_path)
    saved = {h for h, rows in before.items() if any(r["error"] is None for r in rows)}
    n_rows_before = sum(len(rows) for rows in before.values())
    out = abtest(*run, "--resume", env=env)
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip().splitlines()[-1]
    assert sum(before_resume.values()) > 0 and saved
    # per request: no call whose answer was already saved reaches the provider again; the
    # resumed process serves each of them from the store (a cache hit), and sends only the rest
    after = saved_calls(store_path)
    new_rows = [r for rows in after.values() for r in rows]
    assert len(new_rows) > n_rows_before
    sent_again = {h for h, rows in after.items() if h in saved
                  for r in rows[len(before.get(h, [])):] if not r["cached"]}
    assert sent_again == set(), sent_again

    # identical to an uninterrupted run in a separate store
    (proj / "clean.yaml").write_text(config(url, "results/clean.duckdb"))
    clean = abtest("--config", "clean.yaml", *run, env=env)
    assert clean.returncode == 0, clean.stderr
    clean_id = clean.stdout.strip().splitlines()[-1]
    assert results(proj / "results/abtest.duckdb", run_id) == results(proj / "results/clean.duckdb", clean_id)

    rep = abtest("report", run_id, "--format", "json", env=env)
    assert json.loads(rep.stdout)["status"] == "complete"
    # the API key never reaches the store, a report or the output
    for p in (proj / "results").rglob("*"):
        if p.is_file():
            assert SECRET.encode() not in p.read_bytes(), p
    for text in (out.stdout, out.stderr, rep.stdout, rep.stderr):
        assert SECRET not in text


def test_injected_faults_same_results_as_clean(tmp_path):
    faulty = FakeLLMServer(latency=0.0, faults={"429": 0.1, "500": 0.05, "503": 0.05,
                                                "malformed": 0.05, "empty": 0.05},
                           retry_after=0.01, seed=7, deterministic_faults_by_hash=True,
                           max_seconds=300)
    clean = FakeLLMServer(latency=0.0, max_seconds=300)
    fu, cu = faulty.start(), clean.start()
    try:
        env = {**os.environ, "FAKE_LLM_KEY": SECRET}
        pf = make_project(tmp_path / "f", many_cases(12), config=config(fu).replace(
            "max_retries: 3", "max_retries: 8"))
        pc = make_project(tmp_path / "c", many_cases(12), config=config(cu))
        run = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]
        os.chdir(pf)
        of = abtest(*run, env=env)
        os.chdir(pc)
        oc = abtest(*run, env=env)
        assert oc.returncode == 0, oc.stderr
        assert of.returncode == 0, of.stderr
        assert sum(faulty.fault_counts.values()) > 0
        rf = results(pf / "results/abtest.duckdb", of.stdout.strip().splitlines()[-1])
        rc = results(pc / "results/abtest.duckdb", oc.stdout.strip().splitlines()[-1])
        assert rf == rc
    finally:
        faulty.stop()
        clean.stop()


def test_retries_exhausted_is_incomplete_exit_3(tmp_path):
    srv = FakeLLMServer(latency=0.0, faults={"503": 1.0}, max_seconds=120)
    url = srv.start()
    try:
        env = {**os.environ, "FAKE_LLM_KEY": SECRET}
        os.chdir(make_project(tmp_path / "p", many_cases(3), config=config(url).replace(
            "max_retries: 3", "max_retries: 1")))
        out = abtest("run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b",
                     "variants/b.yaml", env=env)
        assert out.returncode == 3
        assert "unfinished cases: q000, q001, q002" in out.stderr
        run_id = out.stdout.strip().splitlines()[-1]
        rep = json.loads(abtest("report", run_id, "--format", "json", env=env).stdout)
        assert rep["status"] == "incomplete" and rep["n_finished"] == 0
        assert rep["metrics"].get("pairwise") is None
        gate = abtest("gate", run_id, env=env)
        assert gate.returncode == 3 and "INCOMPLETE" in gate.stdout
    finally:
        srv.stop()
