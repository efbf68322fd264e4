"""The view tells a run's state as every other surface does (issue 42), in a real browser:
the runs list follows a running run without a reload; an unfinished run's pages show what
exists so far (never "No metric was measured") and the command that resumes it; every case
id reaches its own page from its link, whatever characters it holds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request

from click.testing import CliRunner

from abtest.cli import cli
from support.cli import abtest_popen
from support.viewstore import served
from support.waiting import wait_until

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]
ODD_IDS = ["..", ".", "a/b", "50%", "with space", "café-ü", "x/../y"]


def test_runs_list_follows_a_running_run_without_a_reload(chromium, tmp_path, monkeypatch):
    from support.fakes import brain_llm_server, llm_config, make_project, many_cases

    n = 10
    srv = brain_llm_server(latency=0.15, max_seconds=300)
    llm = srv.start()
    proj = make_project(tmp_path / "p", many_cases(n),
                        config=llm_config(llm).replace("concurrency: 2", "concurrency: 1"))
    monkeypatch.chdir(proj)
    store = proj / "results" / "abtest.duckdb"
    env = {**os.environ, "FAKE_LLM_KEY": "sk-x-123456789"}
    proc = abtest_popen([*RUN, "--run-id", "run1"], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True, env=env)   # a real process, preloaded
    try:
        deadline = time.time() + 120
        wait_until(store.exists, 120, "the run's store")
        with served(store) as url, chromium.pages() as browser:
            def listed_running():
                try:
                    return "status-running" in urllib.request.urlopen(url).read().decode()
                except OSError:
                    return False

            wait_until(listed_running, 120, "run1 listed as running", every=0.2)
            page = browser.new_page()
            page.goto(url)
            page.evaluate("window.__same = 1")   # gone if the page reloads
            row = page.locator("tr", has=page.locator("a.run-link", has_text="run1"))
            assert row.locator("td.status-running").count() == 1
            seen = set()
            while time.time() < deadline:
                txt = row.inner_text()
                m = re.search(rf"(\d+) of {n} cases finished", txt)
                if m:
                    seen.add(int(m.group(1)))
                if row.locator("td.status-complete").count():
                    break
                page.wait_for_timeout(300)   # the next sample of the row
            assert proc.wait(60) == 0, proc.communicate()[1]
            page.wait_for_selector("tr td.status-complete", timeout=15000)
            assert page.evaluate("window.__same") == 1          # followed in place
            assert len(seen) >= 2, seen                          # it moved as the run did
            final = row.inner_text()
            assert "running" not in final and "…" not in final
            gate = json.loads(CliRunner().invoke(cli, ["report", "run1", "--format",
                                                       "json"]).stdout)["gate"]["decision"]
            assert row.locator("td.gate-cell").inner_text().strip() == gate
    finally:
        if proc.poll() is None:
            proc.kill()
        srv.stop()


def _odd_cases():
    from abtest.core.models import Case, Chunk

    return [Case(id=cid, question=f"What is fact {i}?", answerable=True, corpus_version="v1",
                 retriever="test", reference_answer=f"fact {i}",
                 context=[Chunk(id=f"c{i}", text=f"Fact {i} is that {i} is a number.")])
            for i, cid in enumerate(ODD_IDS)]


def test_an_unfinished_runs_pages_show_progress_and_every_case_id_opens(
        chromium, tmp_path, monkeypatch):
    from support.fakes import Brain, install, make_project

    brain = Brain()

    def fail_one(messages, req):   # the pairwise judge fails on one case, in one order
        name = ((req.get("response_format") or {}).get("json_schema") or {}).get("name")
        if name == "pairwiseverdict" and "Fact 3 is" in messages[-1]["content"]:
            raise RuntimeError("provider error: judge unavailable")
        return None

    brain.override = fail_one
    install(brain)
    proj = make_project(tmp_path / "p", _odd_cases())
    monkeypatch.chdir(proj)
    r = CliRunner().invoke(cli, RUN + ["--run-id", "odd"])
    assert r.exit_code == 3, r.stderr
    rep = json.loads(CliRunner().invoke(cli, ["report", "odd", "--format", "json"]).stdout)
    assert rep["status"] == "incomplete" and rep["unfinished_cases"] == ["50%"], rep
    assert any(x.startswith("pairwise AB: ") for x in rep["unfinished_reasons"]["50%"])
    n_fin, n = rep["n_finished"], rep["n_cases"]
    assert 0 < n_fin < n
    with served(proj / "results" / "abtest.duckdb") as url, chromium.pages() as browser:
        page = browser.new_page()
        page.goto(f"{url}runs/odd")
        assert page.inner_text("#progress-line").startswith(f"incomplete: {n_fin} of {n} "
                                                             "cases finished")
        body = page.inner_text("main")
        assert "No metric was measured" not in body and "No check applied" not in body
        assert f"{n_fin} of {n} cases finished" in page.inner_text("#metrics-progress")
        assert "abtest run --fixture" in body and "--resume" in body
        # the full report of the unfinished run says the same: what exists, labelled
        page.click("#report-link")
        page.wait_for_load_state()
        full = page.inner_text("body")
        assert "No metric was measured" not in full and "No check applied" not in full
        assert f"incomplete: {n_fin} of {n} cases finished" in \
            page.inner_text("#metrics-progress")
        assert "pairwise" in page.inner_text("#metrics-progress")
        # every case opens from its link in the cases list, by a real click
        for cid in ODD_IDS:
            page.goto(f"{url}runs/odd/cases")
            link = page.locator("a.case-link", has_text=re.compile(rf"^{re.escape(cid)}$"))
            assert link.count() == 1, cid
            link.click()
            page.wait_for_load_state()
            crumbs = page.inner_text("p.crumbs")
            assert crumbs.rstrip().endswith(cid), (cid, page.url, crumbs)
            i = ODD_IDS.index(cid)
            assert page.inner_text("#question") == f"What is fact {i}?", (cid, page.url)
        # the abstention judge's own reason shows beside its verdict (the fake judge's
        # honest rule: an answer that states the fact answers the question)
        assert page.inner_text("#abstention-b") == \
            "abstention judge: answered — it states an answer"


def test_the_judges_abstention_reason_shows_only_after_the_reviewers_label(tmp_path,
                                                                          monkeypatch):
    """Blind before, adjudicable after: an abstention item shows what the judge said and
    why once this reviewer has labelled it, never before (it would lean the label)."""
    import html as _html

    from starlette.testclient import TestClient

    from abtest.view.app import create_app
    from support.fakes import Brain, install, make_project

    install(Brain())
    proj = make_project(tmp_path / "p")
    monkeypatch.chdir(proj)
    assert CliRunner().invoke(cli, RUN + ["--run-id", "rv"]).exit_code in (0, 1)
    assert CliRunner().invoke(cli, ["review", "export", "rv", "--n", "20"]).exit_code == 0
    client = TestClient(create_app(proj / "results" / "abtest.duckdb"))
    page = client.get("/runs/rv/review?reviewer=ann").text
    items = re.findall(r'<section class="review-item todo" id="item-([^"]+)" data-item="[^"]+">'
                       r'\s*<h2><span class="mono">[^<]+</span> · ([a-z]+)', page)
    abst = [i for i, kind in items if kind == "abstention"]
    assert abst, items
    assert "judge-after" not in page                       # blind before any label
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    r = client.post("/runs/rv/review/label", data={"token": token, "item_id": abst[0],
                                                   "reviewer": "ann", "label": "answered"},
                    follow_redirects=False)
    assert r.status_code == 303, r.text
    page = _html.unescape(client.get("/runs/rv/review?reviewer=ann").text)
    shown = re.findall(r'id="judge-after-([^"]+)"', page)
    assert shown == [abst[0]]                                # only the labelled one
    said = re.search(rf'id="judge-after-{re.escape(abst[0])}">(.*?)</p>', page, re.S).group(1)
    assert re.sub(r"<[^>]+>", "", said).startswith("After your label: the judge said ")
    # the fake judge's own reasons (tests/support/fakes.py Brain.answers_question), one of three
    reasons = ("it says the documents do not give the answer", "it states no answer",
               "it states an answer")
    assert sum(said.rstrip().endswith(f"— {x}") for x in reasons) == 1, said
