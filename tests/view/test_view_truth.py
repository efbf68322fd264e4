"""`abtest view` tells the truth about every run (issue 33): a server that answers only its
own address, plots and their numbers, one count of incidents, unfinished cases, the report's
links. The interactive items, in Debian's Chromium, are in test_view_truth_browser.py."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

import pytest

from support.viewtruth import finished as _finished
from support.viewtruth import incidents_from_rows as _incidents_from_rows
from support.viewtruth import incidents_store as _incidents_store
from support.viewtruth import plots_store as _plots_store
from support.viewtruth import text as _text


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

from support.viewstore import SCase, Side, make_store, report  # noqa: E402

C_B, C_A = "#0072B2", "#D55E00"   # the report's colours for B and for A (Okabe–Ito)



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
    from abtest.core.fmt import interval
    from abtest.reporting.pages import environment

    judge_validation = environment().get_template("_macros.html").module.judge_validation

    assert interval(-1.8e-09, 1.8e-09) == "[0.000, 0.000]"
    assert interval(-0.00004, 0.25) == "[0.000, 0.250]"
    html = judge_validation({"faithfulness": {"n_labels": 40, "kappa": 1.0,
                                              "ci_low": -1.8e-09, "ci_high": 1.8e-09,
                                              "validated": False, "reason": "r"}})
    assert "[0.000, 0.000]" in html and "e-09" not in html


# ----------------------------------------------------------------- 3, 4: incidents, unfinished


def _shown(html):
    """Case ids of the cases page's rows the server does not hide."""
    import re

    return [m.group(2) for m in re.finditer(
        r'<tr class="case-row([^"]*)"[^>]*>\s*<td><a class="case-link[^"]*" href="[^"]*">([^<]+)</a>',
        html) if "hidden" not in m.group(1)]



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
