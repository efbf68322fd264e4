"""Sequential runs end to end against the fake provider: a run stops for a decision, for
futility, or when it runs out of cases; it makes the calls of the cases it took and no
other; a run stopped partway resumes at its unfinished look, in the same order; and its
report tells the looks. Expected orders and looks are recomputed here from the seed with
abtest.store.sequential_record's order function and checked against the calls the provider saw."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import abtest
from abtest.cli import cli
from abtest.core.groups import case_groups
from abtest.store.sequential_record import taken_cases
from abtest.store.sequential_record import unit_order as _unit_order
from support.fakes import Brain, install, make_project, many_cases

REFUSAL = "I don't know based on the provided documents."


def unit_order(ids: list[str], _groups: None, seed: int) -> list[list[str]]:
    """The order a run takes many_cases(len(ids)) in: its groups as abtest.core.groups gives them."""
    return _unit_order(ids, case_groups(many_cases(len(ids))), seed)


@pytest.fixture
def proj(tmp_path, monkeypatch):
    def make(n: int, brain: Brain | None = None, cases=None):
        b = install(brain or Brain())
        p = make_project(tmp_path / "p", cases or many_cases(n))
        monkeypatch.chdir(p)
        return p, b
    return make


def run(*extra, **kw):
    return abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml",
                      sequential=kw.pop("sequential", True), progress=False, **kw)


def asked(brain: Brain) -> set[str]:
    """The questions the generator was asked (the judges' prompts hold them too)."""
    import re

    out = set()
    for c in brain.calls:
        if c["req"].get("response_format"):
            continue
        m = re.search(r"What is fact number (\d+)\?", c["messages"][-1]["content"])
        if m:
            out.add(f"q{int(m.group(1)):03d}")
    return out


def report(run_id: str) -> dict:
    r = CliRunner().invoke(cli, ["report", run_id, "--format", "json"])
    assert r.exit_code in (0, 1), r.stderr
    return json.loads(r.stdout)


def test_a_decided_run_stops_at_the_first_look_and_calls_nothing_more(proj):
    brain = Brain()
    plain_generate = brain.generate

    def refusing_b(messages):   # B declines every question: refusals rise, shown at once
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        return REFUSAL if "Answer only from the context" in system else plain_generate(messages)

    brain.generate = refusing_b   # type: ignore[method-assign]
    p, b = proj(140, brain)
    h = run()
    assert h.status == "complete"
    rep = report(h.run_id)
    seq = rep["sequential"]
    first = set(taken_cases(unit_order([f"q{i:03d}" for i in range(140)], None, 0), 20))
    assert (seq["stop"], seq["looks_done"], seq["cases_used"]) == ("decision", 1, 20)
    assert seq["looks"][0]["conditions"]["abstention_answerable"] == "fails"
    assert asked(b) == first                  # the 120 cases not taken were never asked
    assert (rep["n_cases"], rep["n_used"], rep["n_not_needed"]) == (140, 20, 120)
    assert rep["progress"]["not_needed"] == 120
    assert rep["progress"]["counts"] == "20 of 140 used, 120 not needed (decision)"
    assert not rep["claim"]["licensed"]
    # a finished sequential run's claim rests on its last look's anytime-valid intervals, never
    # on the fixed-N ones of the same cases (reporting.build; a mutant that swapped them lived)
    assert any("anytime-valid limit" in r for r in rep["claim"]["reasons"]), rep["claim"]
    assert seq["calls_saved"] == round(rep["calls"]["calls_per_case"] * 120)


def test_equal_variants_stop_for_futility(proj):
    p, b = proj(140)
    h = run()
    rep = report(h.run_id)
    seq = rep["sequential"]
    assert seq["stop"] == "futility" and h.status == "complete"
    last = seq["looks"][-1]
    f = last["sequences"]["faithfulness"]
    assert -0.05 < f["ci_low"] and f["ci_high"] < 0.05
    assert all(lk["stop"] is None for lk in seq["looks"][:-1])   # no earlier look stopped
    units = unit_order([f"q{i:03d}" for i in range(140)], None, 0)
    assert asked(b) == set(taken_cases(units, last["units"]))
    assert rep["claim"]["licensed"] is False
    md = CliRunner().invoke(cli, ["report", h.run_id]).stdout
    assert "## Sequential run" in md and "Stopped for futility" in md
    # looks are incremental: a later look never sends an earlier look's case again, not even
    # to the cache (the store logs a cache hit as a row of its own). Each case's answers and
    # pairwise verdicts were asked once; only claim checks A and B share within a case may
    # come from the cache.
    assert len(seq["looks"]) >= 3
    rows = call_rows(p, h.run_id)
    per: dict[tuple, int] = {}
    for r in rows:
        key = (r["case_id"], r["purpose"], r["cached"])
        per[key] = per.get(key, 0) + 1
    taken = set(taken_cases(units, last["units"]))
    assert {c for c, _, _ in per} == taken
    for cid in taken:
        assert (per[(cid, "generate:A", False)], per[(cid, "generate:B", False)],
                per[(cid, "judge:pairwise", False)]) == (1, 1, 2)
    assert {p_ for _, p_, cached in per if cached} <= {"judge:verify"}


def call_rows(p, run_id: str) -> list[dict]:
    from abtest.store import Store

    st = Store(p / "results" / "abtest.duckdb", read_only=True)
    try:
        return st.query("SELECT case_id, purpose, cached FROM llm_calls WHERE run_id = ?",
                        [run_id])
    finally:
        st.close()


# margins a 30-case fixture can decide at (8 unanswerable cases; the floor at 0.4 is 7)
LOOSE = {"margins": {"coverage": 0.4, "abstention_answerable": 0.4,
                     "abstention_unanswerable": 0.4}}


def test_a_small_fixture_runs_out_and_max_cases_caps_it(proj):
    p, b = proj(30)
    h = run(config={**fake_config(), **LOOSE})
    seq = report(h.run_id)["sequential"]
    assert (seq["stop"], [lk["units"] for lk in seq["looks"]]) == ("exhausted", [20, 30])
    assert seq["cases_not_needed"] == 0 and len(asked(b)) == 30
    h2 = run(sequential={"max_cases": 25, "seed": 7}, config={**fake_config(), **LOOSE})
    rep2 = report(h2.run_id)
    seq2 = rep2["sequential"]
    assert (seq2["stop"], seq2["cases_used"], seq2["seed"]) == ("max_cases", 25, 7)
    assert rep2["progress"]["counts"] == "25 of 30 used, 5 not needed (max_cases)"


def fake_config() -> dict:
    import yaml

    from support.fakes import CONFIG

    return yaml.safe_load(CONFIG)


def test_a_fixture_that_cannot_measure_a_condition_stops_undecided_at_once(proj):
    """No unanswerable case: correct abstention on them can never be shown, so neither can
    the claim; the run stops at its first look and says why, not after every case."""
    from abtest.core.models import Case, Chunk

    cases = [Case(id=f"q{i:03d}", question=f"What is fact number {i}?", answerable=True,
                  corpus_version="v1", retriever="test", reference_answer=f"fact {i}",
                  context=[Chunk(id=f"c{i}", text=f"Fact number {i} is that {i} is a number.")])
             for i in range(100)]
    proj(0, cases=cases)
    h = run()
    rep = report(h.run_id)
    seq = rep["sequential"]
    assert (seq["stop"], seq["looks_done"], seq["cases_used"]) == ("undecidable", 1, 20)
    assert "no unanswerable case" in seq["stop_text"]
    assert seq["looks"][0]["why"]["undecidable"].startswith("correct abstention on unanswerable")
    assert rep["progress"]["counts"] == "20 of 100 used, 80 not needed (undecidable)"
    assert not rep["claim"]["licensed"]


def test_a_condition_measured_on_no_pair_stops_the_run_after_three_looks(proj):
    """Both variants decline every question: faithfulness has no pair with a score on both
    sides, look after look; the run stops undecided at the third look (not at the end)."""
    brain = Brain()
    brain.generate = lambda messages: REFUSAL   # type: ignore[method-assign]
    p, b = proj(200, brain)
    h = run()
    rep = report(h.run_id)
    seq = rep["sequential"]
    assert (seq["stop"], seq["looks_done"], seq["cases_used"]) == ("undecidable", 3, 60)
    assert [lk["sequences"]["faithfulness"]["n"] for lk in seq["looks"]] == [0, 0, 0]
    assert seq["looks"][-1]["why"]["undecidable"] == (
        "faithfulness was measured on 0 of the 60 such cases taken over 3 looks (no pair had a "
        "score on both sides)")
    assert all(lk["stop"] is None for lk in seq["looks"][:2])
    assert len(asked(b)) == 60


def test_a_stopped_run_resumes_at_its_unfinished_look_in_the_same_order(proj):
    brain = Brain()
    units = unit_order([f"q{i:03d}" for i in range(140)], None, 0)
    second_look = taken_cases(units, 40)[20:]
    victim = second_look[3]
    fail = {"on": True}
    plain_generate = brain.generate

    def flaky(messages):   # one case of look 2 cannot be answered, until the provider is back
        if fail["on"] and f"fact number {int(victim[1:])}?" in messages[-1]["content"]:
            raise RuntimeError("provider down")
        return plain_generate(messages)

    brain.generate = flaky   # type: ignore[method-assign]
    p, b = proj(140, brain)
    h = run()
    assert h.status == "incomplete"
    st = abtest.open_store()
    try:
        info = json.loads(st.get_run(h.run_id)["info_json"])["sequential"]
    finally:
        st.close()
    assert info["boundaries"] == [20] and info["taking"] == 40 and info["stop"] is None
    # unfinished, its finished look is shown (valid whenever read), nothing else estimated
    partial = report(h.run_id)
    assert partial["status"] == "incomplete" and partial["metrics"] == {}
    assert [lk["units"] for lk in partial["sequential"]["looks"]] == [20]
    assert partial["sequential"]["stop"] is None and "Still looking" in CliRunner().invoke(
        cli, ["report", h.run_id]).stdout
    before = len(b.calls)
    fail["on"] = False
    h2 = abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id=h.run_id,
                    resume=True, retry_errors=True, progress=False)   # no sequential flag
    assert h2.status == "complete"
    seq = report(h.run_id)["sequential"]
    assert [lk["units"] for lk in seq["looks"]][:2] == [20, 40]
    new = b.calls[before:]
    first_look = set(taken_cases(units, 20))
    again = {c for c in first_look
             if any(f"fact number {int(c[1:])}?" in x["messages"][-1]["content"] for x in new)}
    assert again == set()   # look 1's cases were not asked again
    assert seq["stop"] in ("futility", "decision", "exhausted")


def test_sequential_refuses_shards_and_batches(proj):
    proj(30)
    with pytest.raises(abtest.UserError, match="cannot be split into shards"):
        run(shard="1/2")
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml", "--sequential", "--batch"])
    assert r.exit_code == 2 and "field '--batch'" in r.stderr


def test_the_view_and_the_html_report_show_the_looks_in_a_browser(chromium, proj, tmp_path):
    from support.viewstore import served

    p, _ = proj(140)
    h = run()
    rep = report(h.run_id)
    looks = rep["sequential"]["looks"]
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", h.run_id, "--format", "html", "--out",
                                    str(out)]).exit_code in (0, 1)
    with served(p / "results" / "abtest.duckdb") as url, chromium.pages() as browser:
        page = browser.new_page()
        for target in (f"{url}runs/{h.run_id}", out.as_uri()):
            page.goto(target)
            sec = page.locator("#sequential")
            assert "Stopped for futility" in sec.inner_text()
            assert page.locator("#sequence-plot g.look").count() == len(looks)
            charted = page.locator("svg.sequence-plot").evaluate_all(
                "els => els.map(e => e.dataset.metric)")
            assert charted == ["faithfulness", "coverage", "abstention_answerable",
                               "abstention_unanswerable"]
            # the refusal chart's dotted line is the margin, above zero (y grows down)
            zero = float(page.locator("#sequence-plot-abstention_answerable line.zero")
                         .get_attribute("y1"))
            guide = float(page.locator("#sequence-plot-abstention_answerable line.guide")
                          .get_attribute("y1"))
            assert guide < zero
            # the margin line says what it is, the axes have ticks, the chart the page's width
            chart = page.locator("#sequence-plot-abstention_answerable")
            assert chart.locator("text.guide-label").text_content() == "margin +0.05"
            assert page.locator("#sequence-plot text.guide-label").all_text_contents() == \
                ["futility +0.05", "futility −0.05"]
            ticks = page.locator("#sequence-plot text.tick-y").all_text_contents()
            assert len(ticks) >= 3 and "0" in ticks
            xs = [int(t) for t in page.locator("#sequence-plot text.tick-x")
                  .all_text_contents()]
            assert xs[0] == 0 and xs == sorted(xs) and xs[-1] <= looks[-1]["units"]
            width = page.locator("#sequence-plot").evaluate(
                "e => e.getBoundingClientRect().width / e.closest('section')"
                ".getBoundingClientRect().width")
            assert width > 0.95, width
            rows = page.locator("#sequential table.looks tbody tr")
            assert rows.count() == len(looks)
            assert rows.nth(len(looks) - 1).inner_text().split("\t")[1] == \
                str(looks[-1]["units"])
        page.goto(f"{url}runs/{h.run_id}")
        page.click("#report-link")
        page.wait_for_load_state()
        assert page.locator("#sequence-plot").count() == 1


def test_an_early_stopped_runs_counts_are_the_same_on_every_surface(proj):
    """One count model (runstate.RunProgress): the fixture's cases, those used, those not
    needed and why, said alike by the runner, `abtest runs`, the runs list, the run page and
    its progress endpoint, the report in every format, list_runs(), get_run() and Report."""
    import re

    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    p, b = proj(140)
    h = run(sequential={"max_cases": 40})
    want = "40 of 140 used, 100 not needed (max_cases)"
    assert (h.result.n_cases, h.result.n_used, h.result.n_not_needed) == (140, 40, 100)
    assert h.result.line == f"complete: {want}"
    r = CliRunner()
    rep = report(h.run_id)
    assert (rep["n_cases"], rep["n_finished"], rep["n_used"], rep["n_not_needed"]) == \
        (140, 40, 40, 100)
    assert rep["progress"]["counts"] == want and rep["sequential"]["cases_not_needed"] == 100
    assert f"- Status: **complete** — {want}" in r.invoke(cli, ["report", h.run_id]).stdout
    html = r.invoke(cli, ["report", h.run_id, "--format", "html"]).stdout
    assert f"<strong>complete</strong> — {want}" in html
    assert f"complete: {want}" in r.invoke(cli, ["report", h.run_id, "--format",
                                                 "github"]).stdout
    table = r.invoke(cli, ["runs"]).stdout
    assert re.search(rf"{h.run_id}\s+frozen\s+complete\s+{re.escape(want)}", table), table
    rows = json.loads(r.invoke(cli, ["runs", "--format", "json"]).stdout)
    for row in (rows[0], abtest.list_runs()[0]):
        assert (row["n_cases"], row["n_finished"], row["n_used"], row["n_not_needed"],
                row["counts"]) == (140, 40, 40, 100, want)
    got = abtest.get_run(h.run_id)
    assert (got.result.n_cases, got.result.n_used, got.result.n_not_needed,
            got.result.counts) == (140, 40, 100, want)
    typed = abtest.report(h.run_id)
    assert (typed.n_cases, typed.n_used, typed.n_not_needed, typed.progress.counts) == \
        (140, 40, 100, want)
    client = TestClient(create_app(p / "results" / "abtest.duckdb"))
    assert want in client.get("/").text
    assert f"complete — {want}" in client.get(f"/runs/{h.run_id}").text
    prog = client.get(f"/runs/{h.run_id}/progress").json()
    assert (prog["n_cases"], prog["n_used"], prog["not_needed"], prog["counts"]) == \
        (140, 40, 100, want)
