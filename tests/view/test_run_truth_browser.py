"""Watched live, a run tells one truth (issue 52), in Chromium: the runs list and a run page,
read every 0.1 s while runs end one after another (each end a moment when a writer leaves),
never say "interrupted"; a page opened on an interrupted run follows another process's
resume to the end without a reload, every section redrawn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from support.cli import abtest_popen, python_popen, with_abtest_on_path
from support.viewstore import served
from support.waiting import wait_until

# three runs back to back, each with its own wording of A (so none answers from the cache)
RUNS = """
import abtest, pathlib
a = pathlib.Path("variants/a.yaml").read_text()
for i in range(3):
    pathlib.Path(f"variants/a{i}.yaml").write_text(a.replace("helpful", f"helpful ({i})"))
    abtest.run("fixtures/small", f"variants/a{i}.yaml", "variants/b.yaml", run_id=f"r{i}",
               progress=False)
"""
RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def _get(url: str) -> str:
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except Exception:   # a row not there yet
        return ""


@pytest.mark.chromium
def test_pages_read_every_tenth_of_a_second_as_runs_end_never_say_interrupted(
        chromium, tmp_path, monkeypatch):
    from support.fakes import brain_llm_server, llm_config, make_project, many_cases

    srv = brain_llm_server(latency=0.08, max_seconds=600)
    llm = srv.start()
    proj = make_project(tmp_path / "p", many_cases(30), config=llm_config(llm))
    monkeypatch.chdir(proj)
    store = proj / "results" / "abtest.duckdb"
    env = {**os.environ, "FAKE_LLM_KEY": "sk-x-123456789"}
    proc = python_popen(RUNS, cwd=proj, env=env, stdout=subprocess.PIPE,   # preloaded
                        stderr=subprocess.PIPE, text=True)
    reads = 0
    seen_running: set[str] = set()
    try:
        deadline = time.time() + 240
        wait_until(store.exists, 240, "the run's store")
        with served(store, poll_ms=100) as url, chromium.pages() as browser:
            listing = browser.new_page()
            listing.goto(url)
            run_page = browser.new_page()
            opened: list[str] = []
            while time.time() < deadline:
                done = proc.poll() is not None
                texts = {"runs list": listing.inner_text("main")}
                for rid in ("r0", "r1", "r2"):   # follow the newest run's page
                    if rid not in opened and \
                            listing.locator(f"tr[data-run='{rid}']").count():
                        run_page.goto(f"{url}runs/{rid}")
                        opened.append(rid)
                if opened:   # the newest run: its page, its row and its progress
                    rid = opened[-1]
                    texts["run page"] = run_page.inner_text("main")
                    texts["row"] = _get(f"{url}runs/{rid}/row")
                    texts["progress"] = _get(f"{url}runs/{rid}/progress")
                    if '"state":"running"' in texts["progress"].replace(" ", ""):
                        seen_running.add(rid)   # read while it ran
                reads += 1
                for where, text in texts.items():
                    assert "interrupted" not in text, (where, text[:2000])
                if done and listing.locator("td.status-complete").count() == 3 and \
                        "running" not in texts["runs list"]:
                    break
                listing.wait_for_timeout(100)
            assert proc.wait(30) == 0, proc.communicate()[1]
            assert opened == ["r0", "r1", "r2"]
            # the last run's page came to its end in place
            run_page.wait_for_function("() => !document.getElementById('progress')",
                                       timeout=15_000)
            assert run_page.inner_text("#status").startswith("complete")
    finally:
        if proc.poll() is None:
            proc.kill()
        srv.stop()
    # it read while the runs ran and through their ends, not once at the end of all three (a
    # busy machine reads slower: one run may pass between two reads)
    assert len(seen_running) >= 2 and reads >= 10, (seen_running, reads)


@pytest.mark.chromium
def test_an_interrupted_runs_page_follows_a_resume_by_another_process_to_its_end(
        chromium, tmp_path, monkeypatch):
    from support.fakes import brain_llm_server, llm_config, make_project, many_cases

    n = 16
    srv = brain_llm_server(latency=0.1, max_seconds=600)
    llm = srv.start()
    proj = make_project(tmp_path / "p", many_cases(n), config=llm_config(llm))
    monkeypatch.chdir(proj)
    store = proj / "results" / "abtest.duckdb"
    env = {**os.environ, "FAKE_LLM_KEY": "sk-x-123456789"}
    first = abtest_popen([*RUN, "--run-id", "r9"], cwd=proj, env=env,   # a real process, preloaded
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(store.exists, 240, "the run's store")
        with served(store, poll_ms=200) as url:
            def two_finished():   # a case or two finished, then kill -9
                got = _get(f"{url}runs/r9/progress")
                return got and json.loads(got)["finished"] >= 2

            wait_until(two_finished, 240, "two finished cases of r9", every=0.05)
            first.kill()
            first.wait(30)
            with chromium.pages() as browser:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{url}runs/r9")
                page.evaluate("window.__same = 1")   # gone if the page reloads
                line = page.inner_text("#progress-line")
                assert line.startswith("interrupted: "), line
                finished = int(line.split(": ")[1].split(" of ")[0])
                assert finished < n
                assert page.inner_text("#gate") == "INCOMPLETE"
                assert f"From the {finished} finished case(s) only" in \
                    page.inner_text("#backlog-basis")
                hint = page.inner_text("#resume-hint")
                listing = browser.new_page(viewport={"width": 1280, "height": 900})
                listing.goto(url)
                listing.evaluate("window.__same = 1")
                row = listing.locator("tr[data-run='r9']")
                assert row.locator("td.gate-cell").inner_text() == "INCOMPLETE"
                assert row.locator("code.resume-cmd").inner_text() == hint
                # the command wraps inside the page (a 1280 px window never scrolls sideways)
                assert listing.evaluate("document.documentElement.scrollWidth") <= 1280
                # another process resumes it, from another folder, by the page's command
                elsewhere = tmp_path / "elsewhere"
                elsewhere.mkdir()
                # as pasted into a shell: `abtest` on PATH (through the preloaded
                # interpreter, tests/support/forkserver.py)
                path = f"{os.path.dirname(sys.executable)}{os.pathsep}{env['PATH']}"
                res = subprocess.run(hint, shell=True, cwd=elsewhere,
                                     env=with_abtest_on_path({**env, "PATH": path}),
                                     capture_output=True, text=True, timeout=300)
                assert res.returncode == 0, res.stderr
                assert f"resuming r9: {finished} of {n} finished, {n - finished} to go" \
                    in res.stderr
                page.wait_for_function(
                    "() => !document.getElementById('progress') && document"
                    ".getElementById('status').textContent.startsWith('complete')",
                    timeout=30_000)
                assert page.evaluate("window.__same") == 1          # redrawn, not reloaded
                assert page.inner_text("#gate") in ("PASS", "FAIL")
                assert page.inner_text("#cases-link") == f"Cases ({n})"
                assert page.locator("#withheld").count() == 0
                assert page.locator("#backlog-basis").count() == 0
                listing.wait_for_function(
                    "() => document.querySelector(\"tr[data-run='r9'] td.status-complete\")",
                    timeout=30_000)
                assert listing.evaluate("window.__same") == 1
                assert listing.locator("tr[data-run='r9'] code.resume-cmd").count() == 0
    finally:
        if first.poll() is None:
            first.kill()
        srv.stop()
