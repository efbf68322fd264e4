"""`abtest view` in a real browser: Debian's Chromium driven by Playwright, clicking through
a stored run; screenshots go to $ABTEST_SCREENSHOTS (default: the test's tmp folder)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from fakes import VARIANT_A, VARIANT_B, Brain, install, make_project

CHROMIUM = Path("/usr/bin/chromium")
RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


@pytest.fixture
def stored_run(tmp_path, monkeypatch):
    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    # B bans a word its answer to q1 uses: a newly failing check, so q1 flips
    (p / "variants" / "b.yaml").write_text(VARIANT_B + "checks:\n  must_not_say: [Normandy]\n")
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0, r.stderr
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    # a second run of the same fixture whose B is the plain prompt under another name
    (p / "variants" / "b2.yaml").write_text(VARIANT_A.replace("name: plain", "name: plain-too"))
    r = CliRunner().invoke(cli, RUN[:-1] + ["variants/b2.yaml"])
    assert r.exit_code == 0, r.stderr
    rep["second"] = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"])
                               .stdout)
    return p, rep


@pytest.fixture
def server(stored_run):
    from abtest.view.app import serve

    p, rep = stored_run
    box = {}
    ready = threading.Event()

    def on_ready(url, srv):
        box.update(url=url, srv=srv)
        ready.set()

    t = threading.Thread(target=serve, args=(p / "results" / "abtest.duckdb",),
                         kwargs={"on_ready": on_ready}, daemon=True)
    t.start()
    assert ready.wait(30)
    yield box["url"], rep
    box["srv"].should_exit = True
    t.join(10)


def test_pages_and_errors_over_http(server):
    import urllib.error
    import urllib.request

    url, rep = server
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url) as resp:
        page = resp.read().decode()
        assert "default-src 'self'" in resp.headers["Content-Security-Policy"]
    assert rep["run_id"] in page and "<script src=\"/assets/view.js?v=" in page
    import re

    asset = re.search(r'src="/(assets/view\.js\?v=[0-9a-f]{12})"', page).group(1)
    with urllib.request.urlopen(url + asset) as resp:  # fetched once: its URL names its bytes
        assert "immutable" in resp.headers["Cache-Control"] and b"applyFilters" in resp.read()
    for path, code in ((f"runs/{rep['run_id']}", 200), ("runs/nope", 404),
                       (f"runs/{rep['run_id']}/cases/nope", 404), ("assets/../x", 404)):
        try:
            with urllib.request.urlopen(url + path) as resp:
                got = resp.status
        except urllib.error.HTTPError as exc:
            got = exc.code
        assert got == code, path


def _browser():
    pw = pytest.importorskip("playwright.sync_api", reason="playwright not installed "
                                                            "(scripts/setup installs the dev extra)")
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium not installed (scripts/test installs Debian 'chromium')")
    return pw


@pytest.mark.chromium
def test_click_through_a_run_in_chromium(server, tmp_path):
    pw = _browser()
    url, rep = server
    shots = Path(os.environ.get("ABTEST_SCREENSHOTS") or tmp_path / "screens")
    shots.mkdir(parents=True, exist_ok=True)
    flipped = [r["case_id"] for r in rep["per_case"] if r.get("flipped")]
    assert flipped, "the fixture needs a flipped case for this test"
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.screenshot(path=str(shots / "1-runs.png"), full_page=True)
            # the runs page: this run, its claim line and gate decision
            assert page.locator("#runs-table tbody tr").count() == 2  # newest first
            assert rep["second"]["run_id"] in page.locator("#runs-table tbody tr").first.inner_text()
            row = page.locator("#runs-table tbody tr", has_text=rep["run_id"])
            assert rep["claim"]["reasons"][0] in row.inner_text()
            assert rep["gate"]["decision"] in row.inner_text()
            page.click(f"a.run-link:has-text('{rep['run_id']}')")
            page.wait_for_selector("#claim")
            assert "No claim is licensed" in page.inner_text("#claim")
            assert rep["claim"]["reasons"][0] in page.inner_text("#claim")
            page.screenshot(path=str(shots / "2-run.png"), full_page=True)
            # the cases: filter to the flipped ones
            page.click("#cases-link")
            page.wait_for_selector("#cases-table")
            assert page.locator("tr.case-row:not(.hidden)").count() == len(rep["per_case"])
            page.check("#only-flipped")
            visible = page.locator("tr.case-row:not(.hidden) a.case-link")
            assert sorted(visible.all_inner_texts()) == sorted(flipped)
            assert page.inner_text("#shown-count") == f"{len(flipped)} of {len(rep['per_case'])} shown"
            page.screenshot(path=str(shots / "3-cases-flipped.png"), full_page=True)
            # one case, side by side: hover a claim, its chunk lights up
            visible.first.click()
            page.wait_for_selector("#context")
            claim = page.locator(".claim[data-chunk]:not([data-chunk=''])").first
            chunk_id = claim.get_attribute("data-chunk")
            chunk = page.locator(f".chunk[data-chunk='{chunk_id}']")
            assert "lit" not in (chunk.get_attribute("class") or "")
            claim.hover()
            page.wait_for_function("id => [...document.querySelectorAll('.chunk')]"
                                   ".some(c => c.dataset.chunk === id && c.classList.contains('lit'))",
                                   arg=chunk_id)
            page.screenshot(path=str(shots / "4-case-hover.png"), full_page=True)
            page.mouse.move(0, 0)
            assert "lit" not in (chunk.get_attribute("class") or "")
            # click the chunk: the claims checked against it light up
            chunk.click()
            lit = page.locator(".claim.lit")
            assert lit.count() >= 1
            assert all(c == chunk_id for c in [lit.nth(i).get_attribute("data-chunk")
                                               for i in range(lit.count())])
            # both answers, both pairwise orders
            assert page.locator("#answer-a .answer").inner_text().strip()
            assert page.locator("#answer-b .answer").inner_text().strip()
            assert page.locator("#order-AB").count() == 1 and page.locator("#order-BA").count() == 1
            # compare the two runs: per-metric deltas and the cases whose verdict changed
            second = rep["second"]
            f1 = {r["case_id"]: r for r in rep["per_case"]}
            f2 = {r["case_id"]: r for r in second["per_case"]}

            def verdict(row):
                f = row.get("faithfulness_b")
                return None if f is None else f >= 0.85
            want = sorted(c for c in f1 if f1[c].get("pairwise") != f2[c].get("pairwise")
                          or (verdict(f1[c]) is not None and verdict(f2[c]) is not None
                              and verdict(f1[c]) != verdict(f2[c])))
            assert want
            page.goto(url)
            page.fill("#run1", rep["run_id"])
            page.fill("#run2", second["run_id"])
            page.click("#compare-go")
            page.wait_for_selector("#compare-metrics")
            got = sorted(page.locator("tr.changed-case a").all_inner_texts())
            assert got == want
            pw_row = page.locator("#compare-metrics tr", has_text="pairwise").inner_text()
            d1 = rep["metrics"]["pairwise"]["difference"]
            d2 = second["metrics"]["pairwise"]["difference"]
            assert f"{d1:+.3f}" in pw_row and f"{d2:+.3f}" in pw_row and f"{d2 - d1:+.3f}" in pw_row
            page.screenshot(path=str(shots / "5-compare.png"), full_page=True)
        finally:
            browser.close()
    print(f"screenshots: {shots}")


def test_model_and_chunk_text_are_escaped_on_every_page(tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from abtest.models import Chunk
    from abtest.view.app import create_app
    from fakes import small_cases

    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    cases = [c.model_copy(update={"question": c.question + evil,
                                  "context": [Chunk(id=ch.id, text=ch.text + evil)
                                              for ch in c.context]})
             for c in small_cases()]
    install(Brain())
    p = make_project(tmp_path / "p", cases=cases)
    monkeypatch.chdir(p)
    assert CliRunner().invoke(cli, RUN).exit_code in (0, 1, 3)
    client = TestClient(create_app(p / "results" / "abtest.duckdb"))
    rid = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"])
                     .stdout)["run_id"]
    pages = [client.get(f"/runs/{rid}"), client.get(f"/runs/{rid}/cases"),
             client.get(f"/runs/{rid}/cases/q1"), client.get(f"/runs/{rid}/report")]
    for resp in pages:
        assert resp.status_code == 200
        text = resp.text
        assert "<script>alert" not in text and "<img src=x" not in text
    case_page = pages[2].text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in case_page  # the chunk, as text
