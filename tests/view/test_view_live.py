"""`abtest view` over a live run: its run page, its cases (each variant's own retrieved
chunks), and frozen vs live in the compare page."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.livetools import CORPUS, RETRIEVED, frozen_then_live


@pytest.fixture
def live_and_frozen(live_project, brain):
    fid, (code, out, err) = frozen_then_live()
    assert code == 0, err
    return fid, out.strip().splitlines()[-1]


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#39;", "'")


def test_live_run_pages(live_and_frozen):
    from starlette.testclient import TestClient

    from abtest.core.config import load_config
    from abtest.view.app import create_app

    fid, lid = live_and_frozen
    rep = json.loads(CliRunner().invoke(cli, ["report", lid, "--format", "json"]).stdout)
    client = TestClient(create_app(load_config().store_path))
    runs = client.get("/")
    assert runs.status_code == 200 and lid in runs.text
    page = client.get(f"/runs/{lid}")
    assert page.status_code == 200
    text = _text(page.text)
    assert "Frozen vs live" in text and "Live metrics" in text
    assert rep["claim"]["statement"] in text
    cases = client.get(f"/runs/{lid}/cases")
    assert cases.status_code == 200
    assert sorted(re.findall(r'class="case-link[^"]*" href="[^"]+">([^<]+)<', cases.text)) == \
        sorted(RETRIEVED)
    case = client.get(f"/runs/{lid}/cases/q1")
    assert case.status_code == 200
    body = case.text
    # each variant's own retrieved chunks, with their text, and both answers
    for cid in RETRIEVED["q1"]:
        assert f'data-chunk="{cid}"' in body
        assert next(c["text"] for c in CORPUS if c["id"] == cid) in body
    row = next(r for r in rep["per_case"] if r["case_id"] == "q1")
    assert row["answer_a"] in _text(body) and row["answer_b"] in _text(body)
    # frozen vs live, side by side in the compare page
    cmp = client.get(f"/compare?run1={fid}&run2={lid}")
    assert cmp.status_code == 200, _text(cmp.text)[:300]
    assert "compare-metrics" in cmp.text
    assert "frozen-live-note" in cmp.text
    # the deltas are each report's own B − A, and the change their difference
    frozen = json.loads(CliRunner().invoke(cli, ["report", fid, "--format", "json"]).stdout)
    row = re.search(r"<tr><td>faithfulness</td>.*?</tr>", cmp.text, re.S).group(0)
    d1 = frozen["metrics"]["faithfulness"]["difference"]
    d2 = rep["metrics"]["faithfulness"]["difference"]
    assert f"{d1:+.3f}" in row and f"{d2:+.3f}" in row and f"{d2 - d1:+.3f}" in row
    # `abtest compare` lines them up the same way, over the cases both have
    out = CliRunner().invoke(cli, ["compare", fid, lid, "--format", "json"])
    assert out.exit_code == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["kinds"] == ["frozen", "live"]
    assert sorted(c["case_id"] for c in got["cases"]) == sorted(
        set(r["case_id"] for r in frozen["per_case"]) & set(r["case_id"] for r in rep["per_case"]))
