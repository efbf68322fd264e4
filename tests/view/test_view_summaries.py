"""Run summaries: `abtest view`'s runs page lists runs from summaries kept in the store, and
never shows one that no longer matches its run (another abtest, status or set of labels)."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain, install, make_project

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def _report(rid):
    return json.loads(CliRunner().invoke(cli, ["report", rid, "--format", "json"]).stdout)


def _expected(rep):
    """The runs page's claim line, from the JSON report (not from abtest's summary code)."""
    c = rep["claim"]
    return c["sentence"] if c["licensed"] else c["reasons"][0]


def _row(html, rid):
    return re.search(r'<tr [^>]*>\s*<td><a class="run-link mono" href="/runs/%s">.*?</tr>' % rid,
                     html, re.S).group(0)


def test_a_run_keeps_its_summary_and_labels_make_it_stale(tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from abtest.reporting.summary import state_of
    from abtest.store import Store
    from abtest.view.app import create_app

    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0, r.stderr
    rid = r.stdout.strip().splitlines()[-1]
    rep = _report(rid)
    path = p / "results" / "abtest.duckdb"
    s = Store(path, read_only=True, create=False)
    try:
        kept = s.run_summaries()[rid]
        run = s.get_run(rid)
        assert kept["state"] == state_of(run, s.labels_state(rid))
    finally:
        s.close()
    assert kept["claim"] == _expected(rep) and kept["gate"] == rep["gate"]["decision"]
    client = TestClient(create_app(path))
    row = _row(client.get("/").text, rid)
    assert "data-pending" not in row                       # listed from the stored summary
    assert _expected(rep) in row.replace("&#39;", "'").replace("&#34;", '"')

    # labels change the state: the stored summary is stale, the page asks for a fresh one
    assert CliRunner().invoke(cli, ["review", "export", rid, "--n", "2"]).exit_code == 0
    items = [json.loads(line) for line in
             (p / "results" / "review" / rid / "items.jsonl").read_text().splitlines()]
    claim = next(it for it in items if it["kind"] == "claim")
    s = Store(path)
    try:
        from abtest.review.labels import label_item

        label_item(s, rid, claim["item_id"], "unsupported", "cy")   # what the view's form calls
    finally:
        s.close()
    row = _row(client.get("/").text, rid)
    assert f'data-pending="/runs/{rid}/summary"' in row and "…" in row
    fresh = client.get(f"/runs/{rid}/summary").json()
    rep = _report(rid)
    assert fresh["claim"] == _expected(rep) and fresh["gate"] == rep["gate"]["decision"]
    assert "data-pending" not in _row(client.get("/").text, rid)   # now from memory

    # `review import` stores the summary again, for the labels as they now are
    (tmp_path / "l.csv").write_text(f"item_id,label\n{claim['item_id']},supported\n")
    r = CliRunner().invoke(cli, ["review", "import", rid, str(tmp_path / "l.csv"),
                                 "--reviewer", "cy"])
    assert r.exit_code == 0, r.stderr
    s = Store(path, read_only=True, create=False)
    try:
        kept = s.run_summaries()[rid]
        assert kept["state"] == state_of(s.get_run(rid), s.labels_state(rid))
    finally:
        s.close()
    assert "data-pending" not in _row(TestClient(create_app(path)).get("/").text, rid)


def test_runs_page_reads_a_store_from_before_summaries(tmp_path, monkeypatch):
    """A store written before migration m006 (no run_summaries table), opened read-only."""
    import duckdb
    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    r = CliRunner().invoke(cli, RUN)
    rid = r.stdout.strip().splitlines()[-1]
    path = p / "results" / "abtest.duckdb"
    con = duckdb.connect(str(path))
    con.execute("DROP TABLE run_summaries")
    con.execute("DELETE FROM _abtest_migrations WHERE name = 'm006_run_summaries'")
    con.close()
    client = TestClient(create_app(path))
    page = client.get("/")
    assert page.status_code == 200 and f'data-pending="/runs/{rid}/summary"' in page.text
    assert client.get(f"/runs/{rid}/summary").json()["claim"] == _expected(_report(rid))


def test_the_case_rows_cache_keeps_the_32_reports_read_last():
    """A view serving many runs keeps the rows of the 32 reports it read last, and builds a
    report's rows once while it is kept."""
    from abtest.view import cases

    cases._CACHE.clear()
    made: list[int] = []

    def make(i):
        return lambda: made.append(i) or f"rows {i}"

    reps = [{"run_id": f"r{i}"} for i in range(33)]
    for i, rep in enumerate(reps):
        assert cases._cached(rep, ("rows",), make(i)) == f"rows {i}"
    assert len(cases._CACHE) == 32 and made == list(range(33))
    assert cases._cached(reps[32], ("rows",), make(99)) == "rows 32" and made[-1] == 32  # kept
    assert cases._cached(reps[0], ("rows",), make(0)) == "rows 0" and made[-1] == 0      # rebuilt
    cases._CACHE.clear()
