"""`abtest view` in Chromium (issue 33, the interactive half of test_view_truth.py): the
runs list, claim ↔ chunk, filters and sorting in the URL, previous/next case, a running
run's pages, review while a run writes. Screenshots go to $ABTEST_SCREENSHOTS (default:
the test's tmp folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.cli import abtest_popen, python_popen
from support.viewstore import SCase, Side, make_store, report, served
from support.viewtruth import db as _db, finished as _finished
from support.viewtruth import incidents_from_rows as _incidents_from_rows
from support.viewtruth import incidents_store as _incidents_store
from support.viewtruth import plots_store as _plots_store, shots as _shots
from support.viewtruth import text as _text
from support.waiting import wait_until


def _won_from_rows(path, run_id):
    """Pairwise outcomes from the stored verdicts (a win needs both orders to agree)."""
    v = {}
    for c, subj, verdict in _db(path, "SELECT case_id, subject, verdict FROM judgments WHERE "
                                      "run_id = ? AND judge = 'pairwise'", [run_id]):
        v.setdefault(c, {})[subj] = verdict
    fin = _finished(path, run_id)
    b = sum(1 for c, x in v.items() if c in fin and x.get("AB") == x.get("BA") == "B")
    a = sum(1 for c, x in v.items() if c in fin and x.get("AB") == x.get("BA") == "A")
    n = sum(1 for c in v if c in fin)
    return b, a, n - a - b


@pytest.mark.chromium
def test_runs_list_says_who_won_and_every_reason(chromium, tmp_path):
    import re

    path, _ = _plots_store(tmp_path)
    rep = report(path, "r1")
    b, a, ties = _won_from_rows(path, "r1")
    reasons = rep["claim"]["reasons"]
    assert len(reasons) >= 3 and not rep["claim"]["licensed"]
    f = rep["metrics"]["faithfulness"]
    shots = _shots(tmp_path)
    with served(path) as url, chromium.pages() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(url)
        # no summary is stored (a store filled by hand): the row fills in after the page
        page.wait_for_function("() => !document.querySelector('tr[data-pending]')")
        row = page.locator("#runs-table tbody tr", has_text="r1")
        won = row.locator("td.won").inner_text()
        assert re.search(rf"B {b}\s*·\s*A {a}\s*·\s*= {ties}", won), won
        assert f"faith. {f['difference']:+.3f} [{f['ci_low']:.3f}, {f['ci_high']:.3f}]" in won
        claim = row.locator("td.claim-cell")
        assert "no" in claim.get_attribute("class").split()      # coloured: not licensed
        bg = claim.evaluate("e => getComputedStyle(e).backgroundColor")
        assert bg not in ("rgba(0, 0, 0, 0)", "transparent")
        # every reason, when expanded
        assert claim.locator("summary").inner_text().startswith(reasons[0])
        assert not claim.locator("li").first.is_visible()
        claim.locator("summary").click()
        assert [li.strip() for li in claim.locator("li").all_inner_texts()] == reasons[1:]
        assert claim.locator("li").first.is_visible()
        # the date on one line
        created = row.locator("td.created")
        lines = created.evaluate("e => { const r = document.createRange(); "
                                 "r.selectNodeContents(e); "
                                 "return new Set([...r.getClientRects()]"
                                 ".map(x => Math.round(x.top))).size; }")
        assert lines == 1
        page.screenshot(path=str(shots / "12-runs.png"), full_page=True)


# ----------------------------------------------------------------- 7: claim ↔ chunk

def _in_view(page, locator) -> bool:
    box = locator.bounding_box()
    vp = page.viewport_size
    return box is not None and box["y"] >= 0 and box["y"] + min(box["height"], 40) <= vp["height"] \
        and box["x"] >= 0 and box["x"] < vp["width"]


@pytest.mark.chromium
def test_a_claim_pins_its_chunk_in_view_by_click_or_key(chromium, tmp_path):
    filler = " ".join(f"Sentence {k} of this chunk says something about depots." for k in range(12))
    chunks = [(f"c{k}", f"{filler} Chunk {k} ends here.") for k in range(1, 13)]
    answer = " ".join(f"Depot {k} opens at {k} o'clock." for k in range(60))
    claims = [(f"Depot {k} opens at {k} o'clock.", "supported", "c12" if k % 2 else "c1")
              for k in range(30)]
    path = make_store(tmp_path / "claims", {"r1": [SCase(
        id="long", chunks=chunks, a=Side(answer=answer, claims=claims),
        b=Side(answer="Depot 1 opens at 1 o'clock.", claims=[("Depot 1 opens at 1 o'clock.",
                                                             "supported", "c1")]))]})
    shots = _shots(tmp_path)
    with served(path) as url, chromium.pages() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{url}runs/r1/cases/long")
        claim = page.locator("#claim-A29")           # the last claim, far down the page
        chunk = page.locator(".chunk[data-chunk='c12']")
        claim.scroll_into_view_if_needed()
        assert not _in_view(page, chunk)
        claim.click()
        assert "lit" in chunk.get_attribute("class").split()
        assert _in_view(page, chunk), chunk.bounding_box()   # the chunk came into view
        assert _in_view(page, claim)                        # and the claim stayed
        page.mouse.move(5, 5)                                # moving the mouse keeps it
        page.mouse.move(700, 450)
        assert "lit" in chunk.get_attribute("class").split()
        assert claim.get_attribute("aria-pressed") == "true"
        page.screenshot(path=str(shots / "7-claim-pinned.png"))
        # from the keyboard: focus another claim, Enter pins its chunk, Space too
        other = page.locator("#claim-A28")                   # checked against c1
        other.focus()
        page.keyboard.press("Enter")
        c1 = page.locator(".chunk[data-chunk='c1']")
        assert "lit" in c1.get_attribute("class").split() and _in_view(page, c1)
        assert "lit" not in chunk.get_attribute("class").split()
        y = page.evaluate("window.scrollY")
        page.locator("#claim-A27").focus()
        page.keyboard.press(" ")
        assert "lit" in chunk.get_attribute("class").split() and _in_view(page, chunk)
        assert abs(page.evaluate("window.scrollY") - y) < 200   # Space did not page down
        page.keyboard.press(" ")                                # again: lets go
        assert "lit" not in chunk.get_attribute("class").split()


# ----------------------------------------------------------------- 8, 9, 11: list, order, keys

def _visible_ids(page):
    return page.locator("#cases-table tbody tr.case-row:not(.hidden) a.case-link").all_inner_texts()


def _faith(path, variant, run_id="r1"):
    return {c: s for c, s in _db(path, "SELECT case_id, score FROM judgments WHERE run_id = ? "
                                       "AND judge = 'faithfulness' AND subject = ?",
                                 [run_id, variant])}


@pytest.mark.chromium
def test_filters_and_sort_live_in_the_url_survive_back_and_work_without_script(chromium, tmp_path):
    path, cases = _incidents_store(tmp_path)
    want = _incidents_from_rows(path)
    in_a = sorted(c for v, c in want if v == "A")
    fa = _faith(path, "A")
    # A's incidents by A's faithfulness, highest first (ties in case id order, blanks last)
    by_fa_desc = [c for c in sorted(in_a, key=lambda c: -fa[c])]
    shots = _shots(tmp_path)
    with served(path) as url, chromium.pages() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{url}runs/r1/cases")
        assert len(_visible_ids(page)) == len(cases)
        # a filter, a case, Back: the control and the list still agree
        fb = _faith(path, "B")
        flipped = sorted(c for c in _finished(path) if fa.get(c) is not None and
                         fb.get(c) is not None and (fa[c] >= 0.85) != (fb[c] >= 0.85))
        page.check("#only-flipped")
        assert sorted(_visible_ids(page)) == flipped
        page.locator("#cases-table tbody tr.case-row:not(.hidden) a.case-link").first.click()
        page.wait_for_selector("#context")
        page.go_back()
        page.wait_for_selector("#cases-table")
        assert (page.is_checked("#only-flipped"), sorted(_visible_ids(page))) == (True, flipped)
        page.uncheck("#only-flipped")
        page.select_option("#filter-incident", "A")
        assert sorted(_visible_ids(page)) == in_a
        assert "incident=A" in page.url                      # the state is in the URL
        # sort by A's faithfulness from the keyboard: its header is a link, Enter twice
        header = page.locator("th[data-key='faith_a'] a.sort")
        header.focus()
        page.keyboard.press("Enter")
        assert page.locator("th[data-key='faith_a']").get_attribute("aria-sort") == "ascending"
        page.keyboard.press("Enter")
        th = page.locator("th[data-key='faith_a']")
        assert th.get_attribute("aria-sort") == "descending" and "▼" in th.inner_text()
        assert page.locator("th[data-key='case']").get_attribute("aria-sort") == "none"
        assert _visible_ids(page) == by_fa_desc
        assert "sort=faith_a" in page.url and "dir=desc" in page.url
        listed = page.url
        page.screenshot(path=str(shots / "8-cases-filtered-sorted.png"), full_page=True)
        # into a case and Back: the controls and the list agree, as they left
        page.locator("#cases-table tbody tr.case-row:not(.hidden) a.case-link").first.click()
        page.wait_for_selector("#case-nav")
        page.go_back()
        page.wait_for_selector("#cases-table")
        assert page.url == listed
        assert page.input_value("#filter-incident") == "A"
        assert _visible_ids(page) == by_fa_desc
        # Back within the list undoes a filter change too
        page.check("#only-flipped")
        page.go_back()
        assert not page.is_checked("#only-flipped") and _visible_ids(page) == by_fa_desc
        # the same URL without JavaScript: the server filters and sorts alike
        nojs = browser.new_context(java_script_enabled=False,
                                   viewport={"width": 1440, "height": 900}).new_page()
        nojs.goto(listed)
        assert _visible_ids(nojs) == by_fa_desc
        assert nojs.locator("#cases-table tbody tr.case-row:not(.hidden)").count() == \
            nojs.locator("#cases-table tbody tr.case-row:visible").count()
        # the run page's link, followed without JavaScript, lists just those incidents
        nojs.goto(f"{url}runs/r1")
        nojs.click("#incidents-a-link")
        assert sorted(nojs.locator("#cases-table tbody tr.case-row:visible a.case-link")
                      .all_inner_texts()) == in_a
        # free-text search over questions, answers and ids (Enter submits it)
        page.fill("#search", "alpha answer number 17")
        page.press("#search", "Enter")
        page.wait_for_url("**q=alpha*")
        assert _visible_ids(page) == ["c17"]
        page.goto(f"{url}runs/r1/cases?q=c2")
        assert sorted(_visible_ids(page)) == [f"c2{i}" for i in range(10)]


@pytest.mark.chromium
def test_previous_and_next_follow_the_filtered_order_with_buttons_and_keys(chromium, tmp_path):
    path, cases = _incidents_store(tmp_path)
    in_a = sorted(c for v, c in _incidents_from_rows(path) if v == "A")
    fa = _faith(path, "A")
    order = sorted(in_a, key=lambda c: -fa[c])      # what the list shows, highest A first
    with served(path) as url, chromium.pages() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{url}runs/r1/cases?incident=A&sort=faith_a&dir=desc")
        page.click(f"a.case-link:text-is('{order[0]}')")
        page.wait_for_selector("#case-nav")
        n = len(order)
        assert page.inner_text("#position") == f"1 of {n}"
        assert page.locator("#prev-case").count() == 0      # the first has no previous
        page.keyboard.press("j")
        page.wait_for_url(f"**/cases/{order[1]}?*")
        assert page.inner_text("#position") == f"2 of {n}"
        page.keyboard.press("j")
        page.wait_for_url(f"**/cases/{order[2]}?*")
        page.keyboard.press("k")
        page.wait_for_url(f"**/cases/{order[1]}?*")
        page.click("#next-case")
        page.wait_for_url(f"**/cases/{order[2]}?*")
        assert page.inner_text("#position") == f"3 of {n}"
        # typing in a field is not a key press for the list
        page.goto(f"{url}runs/r1/cases/{order[-1]}?incident=A&sort=faith_a&dir=desc")
        assert page.inner_text("#position") == f"{n} of {n}"
        assert page.locator("#next-case").count() == 0
        page.click("#prev-case")
        page.wait_for_url(f"**/cases/{order[-2]}?*")
        # back to the list it came from, as it was
        page.click("#back-to-list")
        assert _visible_ids(page) == order


@pytest.mark.chromium
def test_case_ids_sort_as_strings_and_headers_are_keyboard_buttons(chromium, tmp_path):
    ids = ["5ad0e1", "56d0e1", "q10", "q2", "A7", "b3"]
    faith_b = {"5ad0e1": 0.9, "56d0e1": None, "q10": 0.2, "q2": 0.7, "A7": 0.2, "b3": 0.95}
    path = make_store(tmp_path / "ids", {"r1": [
        SCase(id=c, b=Side(faith=faith_b[c])) for c in ids]})
    as_strings = sorted(ids, key=str.lower)
    with served(path) as url, chromium.pages() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{url}runs/r1/cases")
        assert _visible_ids(page) == as_strings and as_strings.index("56d0e1") < \
            as_strings.index("5ad0e1")
        # sorted by another column, then by case id again: still as strings ('56d…' first)
        page.locator("#cases-table thead th", has_text="faith. B").click()
        page.locator("#cases-table thead th").first.click()
        assert _visible_ids(page) == as_strings
        case_th = page.locator("th[data-key='case']")
        assert case_th.get_attribute("aria-sort") == "ascending" and "▲" in case_th.inner_text()
        # Tab reaches the headers; Enter sorts, again reverses
        page.locator("th[data-key='faith_b'] a.sort").focus()
        page.keyboard.press("Enter")
        asc = [c for c in sorted((c for c in ids if faith_b[c] is not None),
                                 key=lambda c: (faith_b[c], ids.index(c)))]
        # ties (q10, A7) keep the list's case-id order; the blank goes last
        asc = sorted(asc, key=lambda c: (faith_b[c], as_strings.index(c)))
        assert _visible_ids(page) == asc + ["56d0e1"]
        page.keyboard.press("Enter")
        desc = sorted(asc, key=lambda c: (-faith_b[c], as_strings.index(c)))
        assert _visible_ids(page) == desc + ["56d0e1"]
        th = page.locator("th[data-key='faith_b']")
        assert th.get_attribute("aria-sort") == "descending"
        assert page.locator("th[aria-sort='none']").count() == \
            page.locator("th[data-key]").count() - 1
        # the server sorts the same way (a reload, or a page without JavaScript)
        page.reload()
        assert _visible_ids(page) == desc + ["56d0e1"]


# ----------------------------------------------------------------- 1: a running run

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


@pytest.mark.chromium
def test_a_running_runs_pages_show_progress_follow_it_and_never_say_resume(
        chromium, tmp_path, monkeypatch):
    import re
    import subprocess
    import urllib.request

    from support.fakes import make_project
    from support.fakes import brain_llm_server as FakeLLMServer, llm_config as config, many_cases

    n = 12
    out_of_scope = sum(1 for c in many_cases(n) if not c.answerable)
    srv = FakeLLMServer(latency=0.12, max_seconds=300)
    llm = srv.start()
    proj = make_project(tmp_path / "p", many_cases(n),
                        config=config(llm).replace("concurrency: 2", "concurrency: 1"))
    monkeypatch.chdir(proj)
    store = proj / "results" / "abtest.duckdb"
    env = {**os.environ, "FAKE_LLM_KEY": "sk-x-123456789"}
    proc = abtest_popen([*RUN, "--run-id", "run1"], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True, env=env)   # a real process, preloaded
    shots = _shots(tmp_path)
    try:
        wait_until(store.exists, 120, "the run's store")
        with served(store) as url, chromium.pages() as browser:
            def a_case_finished():   # the run has started and finished a case
                try:
                    page_html = urllib.request.urlopen(url + "runs/run1").read().decode()
                except OSError:
                    return False
                return re.search(r"[1-9]\d*\s*(of|/)\s*\d+ (cases )?finished", page_html)

            wait_until(a_case_finished, 120, "a finished case on run1's page", every=0.2)
            assert proc.poll() is None, proc.communicate()[1]
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            polls: list[float] = []
            # when the browser sent each progress request (its own clock: events reach
            # this thread in batches)
            page.on("requestfinished", lambda r: polls.append(r.timing["startTime"] / 1000)
                    if r.url.endswith("/runs/run1/progress") else None)
            page.goto(f"{url}runs/run1")
            page.evaluate("window.__same = 1")   # gone if the page reloads
            body = page.inner_text("main")
            for false in ("--resume", "No pairwise judgment", "No check applied",
                          "no out-of-scope", "incomplete"):
                assert false not in body, false
            line = page.inner_text("#progress-line")
            m = re.fullmatch(rf"running: (\d+) of {n} cases finished(, \d+ with an error)?", line)
            assert m, line
            first = int(m.group(1))
            assert "No claim yet" in page.inner_text("#claim")
            assert page.locator("svg").count() == 0          # no estimate drawn
            assert f"{n} cases: {n - out_of_scope} answerable, {out_of_scope} out of scope" \
                in body
            page.screenshot(path=str(shots / "1-running.png"), full_page=True)
            # the cases page of the running run says the same, and no resume either
            other = browser.new_page()
            other.goto(f"{url}runs/run1/cases")
            assert other.inner_text("#progress-line").startswith("running: ")
            assert "--resume" not in other.inner_text("main")
            other.close()
            # it follows the run in place (no reload) while it runs
            page.wait_for_function(
                "n => { const m = /running: (\\d+)/.exec("
                "document.getElementById('progress-line').textContent); "
                "return m && +m[1] > n; }", arg=first, timeout=60_000)
            assert page.evaluate("window.__same") == 1
            # the run ends: the page shows the result in place (every section redrawn from
            # the server, no reload), and stops asking
            proc.wait(timeout=240)
            page.wait_for_function("() => !document.getElementById('progress') && "
                                   "document.getElementById('status').textContent"
                                   ".startsWith('complete')", timeout=30_000)
            assert page.evaluate("window.__same") == 1
            assert page.locator("#gate").inner_text() in ("PASS", "FAIL")
            assert page.locator("#progress").count() == 0
            ended = len(polls)
            page.wait_for_timeout(5000)
            assert len(polls) == ended                       # no more polling
            gaps = [b - a for a, b in zip(polls, polls[1:])]
            assert gaps and min(gaps) >= 1.9, gaps          # at most every 2 s
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
        srv.stop()
    assert proc.returncode == 0, err


def test_an_interrupted_run_is_told_how_to_resume_and_is_not_called_running(tmp_path):
    import re

    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    # a run left "running" by a process that died: half its cases, and nobody writing it
    cases = [SCase(id=f"q{i}", started=i < 3) for i in range(6)]
    path = make_store(tmp_path / "dead", {"r9": cases}, status="running")
    client = TestClient(create_app(path))
    run = _text(client.get("/runs/r9").text)
    assert "interrupted: 3 of 6 cases finished" in run
    assert re.search(r"abtest run --fixture \S+ --a \S+ --b \S+ --run-id r9 --resume", run)
    assert "running:" not in run
    row = re.search(r'<tr [^>]*>\s*<td><a class="run-link mono" href="/runs/r9">.*?</tr>',
                    client.get("/").text, re.S).group(0)
    assert 'class="status-interrupted">interrupted<' in row
    assert "3 of 6 cases finished" in _text(row)
    assert "INCOMPLETE" in _text(row) and "--run-id r9 --resume" in _text(row)


# ----------------------------------------------------------------- 13: review while a run writes

HOLD = r"""
import sys, time
from abtest.store import Store
s = Store(sys.argv[1])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
s.close()
"""


@pytest.mark.chromium
def test_a_label_saved_while_a_run_writes_is_kept_and_saved_when_it_finishes(
        chromium, server, tmp_path):
    import subprocess
    import time

    from abtest.store import Store

    url, rep = server
    rid = rep["run_id"]
    store_path = Path.cwd() / "results" / "abtest.duckdb"
    assert CliRunner().invoke(cli, ["review", "export", rid, "--n", "3"]).exit_code == 0
    shots = _shots(tmp_path)
    with chromium.pages() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        saves = []
        page.on("request", lambda r: saves.append(r.url) if r.method == "POST" else None)
        page.goto(f"{url}runs/{rid}/review?reviewer=ann")
        page.evaluate("window.__same = 1")
        n_items = page.locator("section.review-item").count()
        first = page.locator("section.review-item").first
        item = first.get_attribute("data-item")
        label = first.locator("input[name=label]").first.get_attribute("value")
        # another process takes the store for writing (a run), for a few seconds
        holder = python_popen(HOLD, [store_path, "6"], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            first.locator(f"input[name=label][value='{label}']").check()
            first.locator("button[type=submit]").click()
            page.wait_for_function("() => { const s = document.querySelector("
                                   "'section.review-item .save-status'); "
                                   "return !s || /busy/.test(s.textContent); }",
                                   timeout=20_000)
            assert page.evaluate("window.__same") == 1            # still the same page
            status = first.locator(".save-status")
            assert "saved as soon as the run finishes" in status.inner_text()
            assert first.locator(f"input[name=label][value='{label}']").is_checked()
            assert "todo" in first.get_attribute("class").split()
            page.screenshot(path=str(shots / "13-busy.png"))
            t0 = time.monotonic()
        finally:
            holder.wait(timeout=60)
        # the writer is done: the page saves it by itself, in place
        page.wait_for_function("e => e.classList.contains('done')",
                               arg=first.element_handle(), timeout=30_000)
        assert time.monotonic() - t0 < 30
        assert page.evaluate("window.__same") == 1                # no reload of the page
        assert page.inner_text("#review-progress") == f"1 of {n_items} labelled by ann"
        assert first.locator(".badge.given").inner_text() == f"labelled {label}"
        assert first.locator(f"input[name=label][value='{label}']").is_checked()
        assert len(saves) >= 2                                    # tried again by itself
        page.screenshot(path=str(shots / "13-saved.png"))
    s = Store(store_path, read_only=True, create=False)
    try:
        stored = [(r["item_id"], r["reviewer"]) for r in s.human_labels(rid)]
    finally:
        s.close()
    assert stored == [(item, "ann")]


@pytest.mark.chromium
def test_runs_filters_live_in_the_url_and_the_server_applies_them_without_script(
        chromium, tmp_path):
    """The runs page's filters (fixture, variant, date) are URL parameters: typing updates the
    URL, a reload or a shared link shows the same runs, and without JavaScript the server
    hides the same rows."""
    from abtest.store import Store
    from support.viewstore import write_run

    cases = [SCase(id=f"c{i}", a=Side(answer="a", faith=0.8), b=Side(answer="b", faith=0.9),
                   pairwise=("B", "B")) for i in range(3)]
    root = tmp_path / "runs"
    path = make_store(root, {"alpha-1": cases, "alpha-2": cases})
    s = Store(path)
    try:
        write_run(s, root, "beta-1", cases, variants=("terse", "Verbose"))
    finally:
        s.close()

    def shown(page):
        return sorted(page.locator("#runs-table tbody tr:not(.hidden) a.run-link").all_inner_texts())

    with served(path) as url, chromium.pages() as browser:
        nojs = browser.new_context(java_script_enabled=False).new_page()
        nojs.goto(f"{url}?fixture=ALPHA")
        assert shown(nojs) == ["alpha-1", "alpha-2"]
        assert sorted(nojs.locator("#runs-table tbody tr:visible a.run-link")
                      .all_inner_texts()) == ["alpha-1", "alpha-2"]
        assert nojs.input_value("#filter-fixture") == "ALPHA"
        assert nojs.locator("#runs-shown").inner_text() == "2 of 3 runs shown"
        nojs.fill("#filter-fixture", "")
        nojs.fill("#filter-variant", "verbose")
        nojs.click("#runs-filter-go")                    # the form, submitted to the server
        nojs.wait_for_url("**variant=verbose*")
        assert shown(nojs) == ["beta-1"]

        page = browser.new_page()
        page.goto(url)
        assert shown(page) == ["alpha-1", "alpha-2", "beta-1"]
        assert not page.locator("#runs-shown").is_visible()
        page.fill("#filter-variant", "verb")
        assert shown(page) == ["beta-1"] and page.locator("#runs-shown").is_visible()
        assert page.url.endswith("/?variant=verb")       # in the URL as one types
        page.reload()
        assert shown(page) == ["beta-1"] and page.input_value("#filter-variant") == "verb"
        page.fill("#filter-variant", "")
        page.fill("#filter-date", "2099")
        assert shown(page) == [] and page.url.endswith("/?created=2099")
        page.fill("#filter-date", "")
        assert shown(page) == ["alpha-1", "alpha-2", "beta-1"] and page.url == url
