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
