"""`abtest view` tells the truth about every run and is quick to work in (issue 33): pages of
running, interrupted and incomplete runs, one count of incidents, filters and sorting in the
URL, previous/next case, claim ↔ chunk, the runs list, review while a run writes, and a
server that answers only its own address. Interactive items run in Debian's Chromium through
Playwright; screenshots go to $ABTEST_SCREENSHOTS (default: the test's tmp folder)."""

from __future__ import annotations

import http.client
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from browser import playwright_or_skip as _browser

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _shots(tmp_path) -> Path:
    d = Path(os.environ.get("ABTEST_SCREENSHOTS") or tmp_path / "screens")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _get(url: str, path: str, host: str | None):
    """GET with a Host header of our choosing (a rebinding page's browser sends its own)."""
    u = urlsplit(url)
    con = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        con.putrequest("GET", path, skip_host=True)
        con.putheader("Host", host if host is not None else u.netloc)
        con.endheaders()
        resp = con.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode()
    finally:
        con.close()


# ----------------------------------------------------------------- 15: DNS rebinding, framing

def test_only_the_bound_address_is_answered_and_no_page_can_be_framed(server):
    url, rep = server
    port = urlsplit(url).port
    rid = rep["run_id"]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}",
                 f"[::1]:{port}"):
        status, headers, _ = _get(url, "/", host)
        assert status == 200, host
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1",
                 f"localhost.evil.example:{port}", ""):
        status, _, body = _get(url, f"/runs/{rid}", host)
        assert status == 400, host
        assert rid not in body
    for path in ("/", f"/runs/{rid}", f"/runs/{rid}/report", f"/runs/{rid}/cases",
                 "/runs/nope"):
        status, headers, _ = _get(url, path, None)
        assert status in (200, 404)
        assert "frame-ancestors 'none'" in headers["content-security-policy"], path
        assert headers["x-frame-options"] == "DENY", path


# ----------------------------------------------------------------- 5, 6: plots and numbers

from viewstore import SCase, Side, make_store, report, served  # noqa: E402

C_B, C_A = "#0072B2", "#D55E00"   # the report's colours for B and for A (Okabe–Ito)


def _plots_store(tmp_path):
    """60 answerable cases: B refuses 13 that A answers (higher is worse there), B's answers
    are more faithful; one case has A at 0 and B at 1."""
    cases = []
    for i in range(60):
        refuse = i < 13
        a = Side(answer=f"A answers {i}.", faith=0.0 if i == 20 else 0.7 + (i % 3) * 0.05)
        b = Side(answer="I don't know." if refuse else f"B answers {i}.",
                 faith=None if refuse else (1.0 if i == 20 else 0.9 + (i % 2) * 0.1),
                 abstained=refuse)
        cases.append(SCase(id=f"c{i:02d}", a=a, b=b, pairwise=("B", "B") if i % 2 else ("A", "A")))
    return make_store(tmp_path / "plots", {"r1": cases}), cases


def _svg(html: str, svg_id: str):
    import re
    import xml.etree.ElementTree as ET

    m = re.search(rf'<svg id="{svg_id}".*?</svg>', html, re.S)
    assert m, svg_id
    return ET.fromstring(m.group(0))


def test_forest_rows_are_coloured_by_what_the_difference_means_for_b(tmp_path):
    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    path, cases = _plots_store(tmp_path)
    rep = report(path, "r1")
    html = TestClient(create_app(path)).get("/runs/r1").text
    forest = _svg(html, "forest-plot")
    rows = {g.get("data-metric"): g for g in forest.iter("{http://www.w3.org/2000/svg}g")
            if g.get("data-metric")} or {g.get("data-metric"): g for g in forest.iter("g")
                                         if g.get("data-metric")}
    # B refuses 13 answerable questions A answers: B − A = +13/60 refusals, worse for B
    ab = rep["metrics"]["abstention"]["answerable"]
    assert ab["difference"] == pytest.approx(13 / 60) and ab["ci_low"] > 0
    row = rows["abstention_answerable"]
    ci = next(e for e in row.iter() if e.get("class") == "ci")
    assert ci.get("stroke") == C_A                       # drawn in A's colour: worse for B
    text = " ".join(t.text or "" for t in row.iter() if t.tag.endswith("text"))
    assert "lower is better" in text and "worse for B" in text
    # faithfulness: B higher, and higher is better: B's colour
    f = rep["metrics"]["faithfulness"]
    assert f["difference"] > 0 and f["ci_low"] > 0
    ci = next(e for e in rows["faithfulness"].iter() if e.get("class") == "ci")
    assert ci.get("stroke") == C_B
    text = " ".join(t.text or "" for t in rows["faithfulness"].iter() if t.tag.endswith("text"))
    assert "higher is better" in text and "better for B" in text


def test_scatter_ticks_name_their_gridlines_and_every_dot_is_whole(tmp_path):
    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    path, cases = _plots_store(tmp_path)
    html = TestClient(create_app(path)).get("/runs/r1").text
    sc = _svg(html, "case-scatter")
    faith = {c.id: (c.a.faith, c.b.faith) for c in cases}
    dots = [(e.get("data-case"), float(e.get("cx")), float(e.get("cy")), float(e.get("r")))
            for e in sc.iter() if e.get("class") == "case-point"]
    assert len(dots) == sum(1 for a, b in faith.values() if a is not None and b is not None)
    # the value → pixel map, from the two dots furthest apart (A's value on x, from the store)
    (ida, xa, *_), (idb, xb, *_) = (min(dots, key=lambda d: faith[d[0]][0]),
                                    max(dots, key=lambda d: faith[d[0]][0]))
    scale = (xb - xa) / (faith[idb][0] - faith[ida][0])

    def x_of(v):
        return xa + (v - faith[ida][0]) * scale

    ticks = [(float(t.text), float(t.get("x"))) for t in sc.iter()
             if t.tag.endswith("text") and t.get("text-anchor") == "middle"
             and (t.text or "").replace(".", "").replace("-", "").isdigit()]
    assert len(ticks) >= 3
    # a label names its own gridline
    assert [(v, round(x_of(v) - x, 1)) for v, x in ticks if abs(x_of(v) - x) > 0.6] == []
    assert all(0 <= v <= 1 for v, _ in ticks), ticks     # scores live in [0, 1]
    frame = next(e for e in sc.iter() if e.tag.endswith("rect") and e.get("fill") == "none")
    fx, fy = float(frame.get("x")), float(frame.get("y"))
    fw, fh = float(frame.get("width")), float(frame.get("height"))
    for cid, cx, cy, r in dots:                          # a dot at 1.0 is drawn whole
        assert fx <= cx - r and cx + r <= fx + fw and fy <= cy - r and cy + r <= fy + fh, cid


def test_intervals_round_through_the_one_formatter():
    from abtest.fmt import interval
    from abtest.reporting.pages import environment

    judge_validation = environment().get_template("_macros.html").module.judge_validation

    assert interval(-1.8e-09, 1.8e-09) == "[0.000, 0.000]"
    assert interval(-0.00004, 0.25) == "[0.000, 0.250]"
    html = judge_validation({"faithfulness": {"n_labels": 40, "kappa": 1.0,
                                              "ci_low": -1.8e-09, "ci_high": 1.8e-09,
                                              "validated": False, "reason": "r"}})
    assert "[0.000, 0.000]" in html and "e-09" not in html


# ----------------------------------------------------------------- 3, 4: incidents, unfinished

def _incidents_store(tmp_path, status="incomplete"):
    """34 fixture cases: A's answers to c00–c23 score below 0.85 (24 incidents in A), B's to
    c05 too (1 in B: 25 incidents in 24 cases); c30 sits exactly at 0.85 (no incident); c31's
    A judge failed and c32's B answer failed (unfinished, B scores 0.1 on c31: not counted);
    c33 never started."""
    cases = []
    for i in range(34):
        cid = f"c{i:02d}"
        a = Side(answer=f"Alpha answer number {i} about the harbour.",
                 faith=0.5 + (i % 5) * 0.05 if i < 24 else (0.85 if i == 30 else 0.95),
                 claims=[(f"claim {i} of A", "not_in_context" if i < 24 else "supported",
                          None if i < 24 else "c1")])
        b = Side(answer=f"Bravo answer number {i} about the harbour.",
                 faith=0.5 if i == 5 else (0.1 if i == 31 else 0.9),
                 claims=[(f"claim {i} of B", "supported", "c1")])
        if i == 31:
            a.judge_error = "judge timed out after 3 attempts"
        if i == 32:
            b.error = "provider 503 after 6 retries"
        cases.append(SCase(id=cid, question=f"Question {i} about the harbour?", a=a, b=b,
                           pairwise=("B", "B") if i % 3 == 0 else ("A", "B"),
                           started=i != 33))
    path = make_store(tmp_path / "inc", {"r1": cases}, status=status)
    return path, cases


def _db(path, sql, params=()):
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def _finished(path, run_id="r1"):
    """Finished cases from the store's rows (both answers, no answer or judge error)."""
    gens = _db(path, "SELECT case_id, variant, error FROM generations WHERE run_id = ?", [run_id])
    errs = {c for c, in _db(path, "SELECT case_id FROM judgments WHERE run_id = ? AND "
                                  "error IS NOT NULL", [run_id])}
    by: dict[str, list] = {}
    for c, _v, e in gens:
        by.setdefault(c, []).append(e)
    return {c for c, es in by.items() if len(es) == 2 and not any(es) and c not in errs}


def _incidents_from_rows(path, run_id="r1", threshold=0.85):
    fin = _finished(path, run_id)
    return {(v, c) for c, v, score in _db(
        path, "SELECT case_id, subject, score FROM judgments WHERE run_id = ? AND judge = "
              "'faithfulness' AND score IS NOT NULL", [run_id])
            if c in fin and score < threshold}


def _shown(html):
    """Case ids of the cases page's rows the server does not hide."""
    import re

    return [m.group(2) for m in re.finditer(
        r'<tr class="case-row([^"]*)"[^>]*>\s*<td><a class="case-link[^"]*" href="[^"]*">([^<]+)</a>',
        html) if "hidden" not in m.group(1)]


def _text(html):
    import re

    import html as _h

    return re.sub(r"\s+", " ", _h.unescape(re.sub(r"<[^>]+>", " ", html)))


def test_one_count_of_incidents_feeds_gate_report_link_and_filter(tmp_path):
    import re

    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    path, _ = _incidents_store(tmp_path, status="complete")
    want = _incidents_from_rows(path)
    in_b = sorted(c for v, c in want if v == "B")
    in_a = sorted(c for v, c in want if v == "A")
    assert (len(in_b), len(in_a), len({c for _, c in want})) == (1, 24, 24)
    rep = report(path, "r1")
    assert {(i["variant"], i["case_id"]) for i in rep["incidents"]} == want
    assert rep["gate"]["incidents_b"] == 1
    assert "1 hallucination incident(s) in B (faithfulness < 0.85)" in rep["gate"]["reasons"]
    client = TestClient(create_app(path))
    run = client.get("/runs/r1").text
    assert _text(re.search(r'<a id="incidents-b-link"[^>]*>.*?</a>', run).group(0)).strip() == "1 in B"
    assert _text(re.search(r'<a id="incidents-a-link"[^>]*>.*?</a>', run).group(0)).strip() == "24 in A"
    # the list says whose each is, and keeps B's apart from A's
    listed_b = re.findall(r'<li data-variant="B">.*?<a href="[^"]+">([^<]+)</a>',
                          re.search(r'<ul class="incidents" id="incidents-b">.*?</ul>', run, re.S).group(0))
    listed_a = re.findall(r'<li data-variant="A">.*?<a href="[^"]+">([^<]+)</a>',
                          re.search(r'<ul class="incidents" id="incidents-a">.*?</ul>', run, re.S).group(0))
    assert listed_b == in_b and listed_a == in_a[:20]
    # the links lead to the filter, and the filter shows as many
    for sel, ids in (("B", in_b), ("A", in_a), ("any", sorted({c for _, c in want}))):
        href = re.search(rf'href="(/runs/r1/cases\?incident={sel})"', run)
        assert href, sel
        page = client.get(href.group(1)).text
        assert sorted(_shown(page)) == ids, sel
        shown = _text(re.search(r'<p class="count".*?</p>', page, re.S).group(0))
        nb = sum(1 for v, c in want if v == "B" and c in ids)
        na = sum(1 for v, c in want if v == "A" and c in ids)
        assert shown.strip().startswith(f"{len(ids)} of 34 cases shown; incidents in them: {nb} in B, "
                                f"{na} in A"), shown
    # the backlog names B's incident as B's
    assert [x["item"] for x in rep["remediation"] if "hallucination incident" in x["item"]] == \
        ["hallucination incident in B, case c05 (faithfulness 0.50)"]


def test_unfinished_cases_show_their_state_and_the_failed_call(tmp_path):
    import re

    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    path, cases = _incidents_store(tmp_path)
    fixture_ids = {c.id for c in cases}
    unfinished = sorted(fixture_ids - _finished(path))
    assert unfinished == ["c31", "c32", "c33"]
    client = TestClient(create_app(path))
    page = client.get("/runs/r1/cases?finished=no").text
    assert sorted(_shown(page)) == unfinished
    assert "finished" in re.search(r"<thead>.*?</thead>", page, re.S).group(0)
    assert sorted(_shown(client.get("/runs/r1/cases?finished=yes").text)) == \
        sorted(fixture_ids - set(unfinished))
    # the case page says the case is unfinished, with the error of the call that failed
    c31 = _text(client.get("/runs/r1/cases/c31").text)
    assert "Unfinished case" in c31 and "judge timed out after 3 attempts" in c31
    assert "not scored: the judge failed" in c31
    c32 = _text(client.get("/runs/r1/cases/c32").text)
    assert "provider 503 after 6 retries" in c32 and "the answer failed" in c32
    c33 = _text(client.get("/runs/r1/cases/c33").text)
    assert "Unfinished case" in c33 and "not started" in c33
    # the resume hint names the run (and never the bare `abtest run --resume`)
    run = _text(client.get("/runs/r1").text)
    hint = re.search(r"abtest run --fixture \S+ --a \S+ --b \S+ --run-id r1 --resume", run)
    assert hint, run[:2000]
    assert "`abtest run --resume`" not in run
    assert f"incomplete: {34 - len(unfinished)} of 34 cases finished" in run


# ----------------------------------------------------------------- 10, 14: diff, compare, report

def test_dissimilar_answers_are_set_side_by_side_similar_ones_diffed_by_word(tmp_path):
    import re

    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    a = "The depot opens at nine. Parking is free on Sundays. Bring your receipt."
    b = "Returns need a receipt within thirty days! Refunds go to the original card."
    near = "The depot opens at ten. Parking is free on Sundays. Bring your receipt."
    path = make_store(tmp_path / "diff", {"r1": [
        SCase(id="far", a=Side(answer=a), b=Side(answer=b)),
        SCase(id="near", a=Side(answer=a), b=Side(answer=near))]})
    client = TestClient(create_app(path))
    far = client.get("/runs/r1/cases/far").text
    # the answers share no word: their sentences side by side, and the page says why
    assert 'id="sentence-diff"' in far and 'id="word-diff"' not in far
    assert "share little" in _text(re.search(r'<p class="note" id="diff-note">.*?</p>', far,
                                              re.S).group(0))
    table = re.search(r'<table id="sentence-diff".*?</table>', far, re.S).group(0)
    cells = [(_text(x).strip(), _text(y).strip()) for x, y in
             re.findall(r"<tr[^>]*><td>(.*?)</td><td>(.*?)</td></tr>", table, re.S)]
    assert [x for x, _ in cells if x] == ["The depot opens at nine.", "Parking is free on Sundays.",
                                         "Bring your receipt."]
    assert [y for _, y in cells if y] == ["Returns need a receipt within thirty days!",
                                         "Refunds go to the original card."]
    # one word changed: a word diff, with just that word struck and inserted
    near_page = client.get("/runs/r1/cases/near").text
    assert 'id="word-diff"' in near_page and 'id="sentence-diff"' not in near_page
    assert re.findall(r'<span class="del">([^<]*)</span>', near_page) == ["nine."]
    assert re.findall(r'<span class="ins">([^<]*)</span>', near_page) == ["ten."]


def test_report_links_back_and_compare_explains_itself(tmp_path):
    import re

    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    path = make_store(tmp_path / "cmp", {"r1": [SCase(id="q1")], "r2": [SCase(id="q1")]})
    client = TestClient(create_app(path))
    rep = client.get("/runs/r1/report")
    assert rep.status_code == 200
    assert re.search(r'<a href="/runs/r1">[^<]*r1[^<]*</a>', rep.text)   # back to the view
    # the empty form explains what a comparison is, instead of a 400
    empty = client.get("/compare")
    assert empty.status_code == 200
    assert "Pick two different runs" in _text(empty.text)
    assert 'name="run1"' in empty.text and 'name="run2"' in empty.text
    # a run is not compared with itself (nor by a prefix that names the same run)
    same = client.get("/compare?run1=r1&run2=r1")
    assert same.status_code == 400 and "cannot be compared with itself" in _text(same.text)
    assert 'id="compare-metrics"' not in same.text
    ok = client.get("/compare?run1=r1&run2=r2")
    assert ok.status_code == 200 and 'id="compare-metrics"' in ok.text


# ----------------------------------------------------------------- 12: the runs list

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
def test_runs_list_says_who_won_and_every_reason(tmp_path):
    import re

    pw = _browser()
    path, _ = _plots_store(tmp_path)
    rep = report(path, "r1")
    b, a, ties = _won_from_rows(path, "r1")
    reasons = rep["claim"]["reasons"]
    assert len(reasons) >= 3 and not rep["claim"]["licensed"]
    f = rep["metrics"]["faithfulness"]
    shots = _shots(tmp_path)
    with served(path) as url, pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
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
                                     "return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; }")
            assert lines == 1
            page.screenshot(path=str(shots / "12-runs.png"), full_page=True)
        finally:
            browser.close()


# ----------------------------------------------------------------- 7: claim ↔ chunk

def _in_view(page, locator) -> bool:
    box = locator.bounding_box()
    vp = page.viewport_size
    return box is not None and box["y"] >= 0 and box["y"] + min(box["height"], 40) <= vp["height"] \
        and box["x"] >= 0 and box["x"] < vp["width"]


@pytest.mark.chromium
def test_a_claim_pins_its_chunk_in_view_by_click_or_key(tmp_path):
    pw = _browser()
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
    with served(path) as url, pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
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
        finally:
            browser.close()


# ----------------------------------------------------------------- 8, 9, 11: list, order, keys

def _visible_ids(page):
    return page.locator("#cases-table tbody tr.case-row:not(.hidden) a.case-link").all_inner_texts()


def _faith(path, variant, run_id="r1"):
    return {c: s for c, s in _db(path, "SELECT case_id, score FROM judgments WHERE run_id = ? "
                                       "AND judge = 'faithfulness' AND subject = ?",
                                 [run_id, variant])}


@pytest.mark.chromium
def test_filters_and_sort_live_in_the_url_survive_back_and_work_without_script(tmp_path):
    pw = _browser()
    path, cases = _incidents_store(tmp_path)
    want = _incidents_from_rows(path)
    in_a = sorted(c for v, c in want if v == "A")
    fa = _faith(path, "A")
    # A's incidents by A's faithfulness, highest first (ties in case id order, blanks last)
    by_fa_desc = [c for c in sorted(in_a, key=lambda c: -fa[c])]
    shots = _shots(tmp_path)
    with served(path) as url, pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
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
        finally:
            browser.close()


@pytest.mark.chromium
def test_previous_and_next_follow_the_filtered_order_with_buttons_and_keys(tmp_path):
    pw = _browser()
    path, cases = _incidents_store(tmp_path)
    in_a = sorted(c for v, c in _incidents_from_rows(path) if v == "A")
    fa = _faith(path, "A")
    order = sorted(in_a, key=lambda c: -fa[c])      # what the list shows, highest A first
    with served(path) as url, pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
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
        finally:
            browser.close()


@pytest.mark.chromium
def test_case_ids_sort_as_strings_and_headers_are_keyboard_buttons(tmp_path):
    pw = _browser()
    ids = ["5ad0e1", "56d0e1", "q10", "q2", "A7", "b3"]
    faith_b = {"5ad0e1": 0.9, "56d0e1": None, "q10": 0.2, "q2": 0.7, "A7": 0.2, "b3": 0.95}
    path = make_store(tmp_path / "ids", {"r1": [
        SCase(id=c, b=Side(faith=faith_b[c])) for c in ids]})
    as_strings = sorted(ids, key=str.lower)
    with served(path) as url, pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
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
        finally:
            browser.close()


# ----------------------------------------------------------------- 1: a running run

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


@pytest.mark.chromium
def test_a_running_runs_pages_show_progress_follow_it_and_never_say_resume(tmp_path, monkeypatch):
    import re
    import subprocess
    import sys
    import time
    import urllib.request

    from fakes import make_project
    from fakes import brain_llm_server as FakeLLMServer, llm_config as config, many_cases

    pw = _browser()
    n = 12
    out_of_scope = sum(1 for c in many_cases(n) if not c.answerable)
    srv = FakeLLMServer(latency=0.12, max_seconds=300)
    llm = srv.start()
    proj = make_project(tmp_path / "p", many_cases(n),
                        config=config(llm).replace("concurrency: 2", "concurrency: 1"))
    monkeypatch.chdir(proj)
    store = proj / "results" / "abtest.duckdb"
    env = {**os.environ, "FAKE_LLM_KEY": "sk-x-123456789"}
    proc = subprocess.Popen([sys.executable, "-m", "abtest.cli", *RUN, "--run-id", "run1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    shots = _shots(tmp_path)
    try:
        deadline = time.time() + 120
        while not store.exists() and time.time() < deadline:
            time.sleep(0.1)
        with served(store) as url, pw.sync_playwright() as p:
            while time.time() < deadline:   # the run has started and finished a case
                try:
                    page_html = urllib.request.urlopen(url + "runs/run1").read().decode()
                    if re.search(r"[1-9]\d*\s*(of|/)\s*\d+ (cases )?finished", page_html):
                        break
                except Exception:
                    pass
                time.sleep(0.2)
            assert proc.poll() is None, proc.communicate()[1]
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
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
                # the run ends: the page shows the result, and stops asking
                proc.wait(timeout=240)
                page.wait_for_function("() => window.__same === undefined && "
                                       "document.getElementById('status')", timeout=30_000)
                assert page.inner_text("#status").startswith("complete")
                assert page.locator("#progress").count() == 0
                ended = len(polls)
                page.wait_for_timeout(5000)
                assert len(polls) == ended                       # no more polling
                gaps = [b - a for a, b in zip(polls, polls[1:])]
                assert gaps and min(gaps) >= 1.9, gaps          # at most every 2 s
            finally:
                browser.close()
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
    assert "3 of 6 finished" in _text(row)


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
def test_a_label_saved_while_a_run_writes_is_kept_and_saved_when_it_finishes(server, tmp_path):
    import subprocess
    import sys
    import time

    from abtest.store import Store

    pw = _browser()
    url, rep = server
    rid = rep["run_id"]
    store_path = Path.cwd() / "results" / "abtest.duckdb"
    assert CliRunner().invoke(cli, ["review", "export", rid, "--n", "3"]).exit_code == 0
    shots = _shots(tmp_path)
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
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
            holder = subprocess.Popen([sys.executable, "-c", HOLD, str(store_path), "6"],
                                      stdout=subprocess.PIPE, text=True)
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
        finally:
            browser.close()
    s = Store(store_path, read_only=True, create=False)
    try:
        stored = [(r["item_id"], r["reviewer"]) for r in s.human_labels(rid)]
    finally:
        s.close()
    assert stored == [(item, "ann")]


@pytest.mark.chromium
def test_runs_filters_live_in_the_url_and_the_server_applies_them_without_script(tmp_path):
    """The runs page's filters (fixture, variant, date) are URL parameters: typing updates the
    URL, a reload or a shared link shows the same runs, and without JavaScript the server
    hides the same rows."""
    from abtest.store import Store
    from viewstore import write_run

    pw = _browser()
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

    with served(path) as url, pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
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
        finally:
            browser.close()
