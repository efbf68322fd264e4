"""`abtest view` tells the truth about every run and is quick to work in (issue 33): pages of
running, interrupted and incomplete runs, one count of incidents, filters and sorting in the
URL, previous/next case, claim ↔ chunk, the runs list, review while a run writes, and a
server that answers only its own address. Interactive items run in Debian's Chromium through
Playwright; screenshots go to $ABTEST_SCREENSHOTS (default: the test's tmp folder)."""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from test_view import _browser, server, stored_run  # noqa: F401  (fixtures)

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
    from abtest.report.html import judge_validation_html

    assert interval(-1.8e-09, 1.8e-09) == "[0.000, 0.000]"
    assert interval(-0.00004, 0.25) == "[0.000, 0.250]"
    html = judge_validation_html({"faithfulness": {"n_labels": 40, "kappa": 1.0,
                                                   "ci_low": -1.8e-09, "ci_high": 1.8e-09,
                                                   "validated": False, "reason": "r"}})
    assert "[0.000, 0.000]" in html and "e-09" not in html
