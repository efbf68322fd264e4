"""`abtest view` in a real browser: Debian's Chromium driven by Playwright, clicking through
a stored run; screenshots go to $ABTEST_SCREENSHOTS (default: the test's tmp folder)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain, install, make_project

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


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
        assert "immutable" in resp.headers["Cache-Control"] and b"rowPasses" in resp.read()
    for path, code in ((f"runs/{rep['run_id']}", 200), ("runs/nope", 404),
                       (f"runs/{rep['run_id']}/cases/nope", 404), ("assets/../x", 404)):
        try:
            with urllib.request.urlopen(url + path) as resp:
                got = resp.status
        except urllib.error.HTTPError as exc:
            got = exc.code
        assert got == code, path


@pytest.mark.chromium
def test_click_through_a_run_in_chromium(chromium, server, tmp_path):
    url, rep = server
    shots = Path(os.environ.get("ABTEST_SCREENSHOTS") or tmp_path / "screens")
    shots.mkdir(parents=True, exist_ok=True)
    flipped = [r["case_id"] for r in rep["per_case"] if r.get("flipped")]
    assert flipped, "the fixture needs a flipped case for this test"
    with chromium.pages() as browser:
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
        assert page.inner_text("#n-shown") == str(len(flipped))
        assert page.inner_text("#shown-count").startswith(
            f"{len(flipped)} of {len(rep['per_case'])} cases shown")
        page.screenshot(path=str(shots / "3-cases-flipped.png"), full_page=True)
        # a link can preset a filter (the run page's "all incidents" link does)
        page.goto(f"{url}runs/{rep['run_id']}/cases?only=incident")
        want = sorted({i["case_id"] for i in rep["incidents"]})
        assert want and page.input_value("#filter-incident") == "any"
        assert sorted(page.locator("tr.case-row:not(.hidden) a.case-link")
                      .all_inner_texts()) == want
        page.go_back()
        page.wait_for_selector("#cases-table")
        visible = page.locator("tr.case-row:not(.hidden) a.case-link")
        # one case, side by side: click a claim, its chunk lights up and stays lit
        visible.first.click()
        page.wait_for_selector("#context")
        claim = page.locator(".claim[data-chunk]:not([data-chunk=''])").first
        chunk_id = claim.get_attribute("data-chunk")
        chunk = page.locator(f".chunk[data-chunk='{chunk_id}']")
        assert "lit" not in (chunk.get_attribute("class") or "")
        claim.click()
        page.wait_for_function("id => [...document.querySelectorAll('.chunk')]"
                               ".some(c => c.dataset.chunk === id && c.classList.contains('lit'))",
                               arg=chunk_id)
        page.screenshot(path=str(shots / "4-case-pinned.png"), full_page=True)
        page.mouse.move(0, 0)
        assert "lit" in (chunk.get_attribute("class") or "")
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
    print(f"screenshots: {shots}")


def test_model_and_chunk_text_are_escaped_on_every_page(tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from abtest.core.models import Chunk
    from abtest.view.app import create_app
    from support.fakes import small_cases

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
    assert CliRunner().invoke(cli, ["review", "export", rid, "--n", "3"]).exit_code == 0
    pages = [client.get(f"/runs/{rid}"), client.get(f"/runs/{rid}/cases"),
             client.get(f"/runs/{rid}/cases/q1"), client.get(f"/runs/{rid}/report"),
             client.get(f"/runs/{rid}/review")]
    for resp in pages:
        assert resp.status_code == 200
        text = resp.text
        assert "<script>alert" not in text and "<img src=x" not in text
    case_page = pages[2].text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in case_page  # the chunk, as text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in pages[4].text


def _kappa(pairs):
    """Cohen's kappa from its definition (independent of abtest.stats)."""
    n = len(pairs)
    cats = sorted({x for p in pairs for x in p})
    po = sum(a == b for a, b in pairs) / n
    pe = sum((sum(a == c for a, _ in pairs) / n) * (sum(b == c for _, b in pairs) / n)
             for c in cats)
    return (po - pe) / (1 - pe)


@pytest.mark.chromium
def test_label_review_items_in_chromium_and_see_agreement_change(chromium, server, tmp_path):
    from abtest.store import Store

    url, rep = server
    rid = rep["run_id"]
    store_path = Path.cwd() / "results" / "abtest.duckdb"
    shots = Path(os.environ.get("ABTEST_SCREENSHOTS") or tmp_path / "screens")
    shots.mkdir(parents=True, exist_ok=True)

    def judge_row(page, judge):
        return page.locator("#judge-validation tr", has=page.locator(f"td:text-is('{judge}')"))

    with chromium.pages() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}runs/{rid}")
        # no labels yet: the run page's agreement table says so
        assert judge_row(page, "faithfulness").inner_text().split("\t")[2].strip() == "0"
        page.click("#review-link")
        page.wait_for_selector("#no-items")
        page.fill("#reviewer", "ann")
        page.click("#reviewer-form button")
        page.wait_for_selector("#draw")
        page.click("#draw")   # the same draw as `abtest review export`
        page.wait_for_selector("#review-progress")
        n_items = page.locator("section.review-item").count()
        assert page.inner_text("#review-progress") == f"0 of {n_items} labelled by ann"
        # what the judge said about each claim item, from the store (hidden on the page)
        s = Store(store_path, read_only=True, create=False)
        try:
            judge_says = {r["item_id"]: r["judge_label"] for r in s.review_items(rid)
                          if r["judge"] == "faithfulness"}
        finally:
            s.close()
        assert len(judge_says) >= 3 and len(set(judge_says.values())) == 2
        claim_items = [i for i in page.locator("section.review-item").evaluate_all(
            "els => els.map(e => e.dataset.item)") if i in judge_says]
        assert sorted(claim_items) == sorted(judge_says)
        # the page is blind: neither variant's name is on it (beyond the fixed task text)
        body = page.inner_text("main").lower()
        for task in page.locator(".task").all_inner_texts():
            body = body.replace(task.lower(), "")
        assert rep["variants"]["a"]["name"].lower() not in body
        assert rep["variants"]["b"]["name"].lower() not in body
        pairs = []
        for k, item in enumerate(claim_items):
            other = {"supported": "unsupported", "unsupported": "supported"}
            given = other[judge_says[item]] if k == 0 else judge_says[item]
            box = page.locator(f"section.review-item[data-item='{item}']")
            box.locator(f"input[name=label][value={given}]").check()
            box.locator("button[type=submit]").click()
            page.wait_for_selector(f"section.review-item.done[data-item='{item}']")
            pairs.append((judge_says[item], given))
            if k == 0:
                page.screenshot(path=str(shots / "6-review-labelled.png"), full_page=True)
        assert page.inner_text("#review-progress") == \
            f"{len(claim_items)} of {n_items} labelled by ann"
        page.click(".crumbs a.mono")
        page.wait_for_selector("#judge-validation")
        row = judge_row(page, "faithfulness").inner_text()
        cells = row.split("\t")
        assert cells[2].strip() == str(len(pairs))
        # kappa and its interval in one cell, worded as on every page (fmt.kappa_text)
        assert cells[3].strip().split(" ")[0] == f"{_kappa(pairs):.3f}"
        assert judge_row(page, "pairwise").inner_text().split("\t")[2].strip() == "0"
        page.screenshot(path=str(shots / "7-run-agreement.png"), full_page=True)
        # the labels made the run's stored summary stale: the runs page asks for a fresh
        # one after it renders, and shows the claim line of the report as it now is
        now = json.loads(CliRunner().invoke(cli, ["report", rid, "--format", "json"]).stdout)
        want = now["claim"]["sentence"] if now["claim"]["licensed"] else \
            now["claim"]["reasons"][0]
        page.goto(url)
        page.wait_for_function("() => !document.querySelector('tr[data-pending]')")
        row = page.locator("#runs-table tbody tr", has_text=rid)
        assert want in row.locator(".claim-cell").inner_text()
        assert row.locator(".gate-cell").inner_text() == now["gate"]["decision"]
    # what the browser stored is what `review import` stores: the same rows, mapped alike
    s = Store(store_path, read_only=True, create=False)
    try:
        stored = {(r["item_id"], r["label"], r["reviewer"]) for r in s.human_labels(rid)}
    finally:
        s.close()
    assert stored == {(i, g, "ann") for i, (_, g) in zip(claim_items, pairs)}


def test_review_forms_refuse_foreign_posts_and_bad_labels(stored_run):
    import re

    from starlette.testclient import TestClient

    from abtest.store import Store
    from abtest.view.app import create_app

    p, rep = stored_run
    rid = rep["run_id"]
    store_path = p / "results" / "abtest.duckdb"
    client = TestClient(create_app(store_path))
    page = client.get(f"/runs/{rid}/review?reviewer=bo").text
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    draw = f"/runs/{rid}/review/draw"
    # another site's form: refused by the token, or by the browser's word on where it came from
    assert client.post(draw, data={"token": "guess", "n": "3"}).status_code == 403
    assert client.post(draw, data={"token": token, "n": "3"},
                       headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert client.post(draw, data={"token": token, "n": "3"},
                       headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.post(draw, data={"token": token, "n": "many"}).status_code == 400
    r = client.post(draw, data={"token": token, "n": "3", "reviewer": "bo"}, follow_redirects=False)
    assert r.status_code == 303
    # the pack folder `abtest review export` would write, written by the same code
    assert sorted(x.name for x in (p / "results" / "review" / rid).iterdir()) == \
        ["items.jsonl", "labels.csv", "review.html"]
    items = [json.loads(line) for line in
             (p / "results" / "review" / rid / "items.jsonl").read_text().splitlines()]
    page = client.get(f"/runs/{rid}/review?reviewer=bo").text
    shown = re.findall(r'data-item="([^"]+)"', page)
    assert shown == [it["item_id"] for it in items]   # same items, same order as the pack
    pw = next(it for it in items if it["kind"] == "pairwise")
    label = f"/runs/{rid}/review/label"
    bad = client.post(label, data={"token": token, "item_id": pw["item_id"], "label": "supported",
                                   "reviewer": "bo"})
    assert bad.status_code == 400 and "not one of 1, 2, tie" in bad.text
    assert client.post(label, data={"token": token, "item_id": "nope", "label": "1",
                                    "reviewer": "bo"}).status_code == 400
    assert client.post(label, data={"token": token, "item_id": pw["item_id"], "label": "1",
                                    "reviewer": "x" * 101}).status_code == 400
    # "1" is stored as the variant answer 1 was, by the secret side mapping
    ok = client.post(label, data={"token": token, "item_id": pw["item_id"], "label": "1",
                                  "reviewer": "bo"}, follow_redirects=False)
    assert ok.status_code == 303
    s = Store(store_path, read_only=True, create=False)
    try:
        sides = json.loads(next(r["mapping_json"] for r in s.review_items(rid)
                                if r["item_id"] == pw["item_id"]))["sides"]
        got = [(r["item_id"], r["label"], r["reviewer"]) for r in s.human_labels(rid)]
        answer = {g["variant"]: g["answer"] for g in s.generations(rid)
                  if g["case_id"] == pw["case_id"]}
    finally:
        s.close()
    assert got == [(pw["item_id"], sides["1"], "bo")]
    assert pw["answer_1"] == answer[sides["1"]] and pw["answer_2"] == answer[sides["2"]]
    # while another process writes the store, a label cannot be saved: 409, said plainly
    holder = Store(store_path)
    try:
        busy = client.post(label, data={"token": token, "item_id": pw["item_id"], "label": "2",
                                        "reviewer": "bo"})
    finally:
        holder.close()
    assert busy.status_code == 409 and "once it finishes" in busy.text
