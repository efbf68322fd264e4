"""Sequential runs end to end against the fake provider: a run stops for a decision, for
futility, or when it runs out of cases; it makes the calls of the cases it took and no
other; a run stopped partway resumes at its unfinished look, in the same order; and its
report tells the looks. Expected orders and looks are recomputed here from the seed with
abtest.sequential's order function and checked against the calls the provider saw."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import abtest
from abtest.cli import cli
from abtest.groups import case_groups
from abtest.sequential import taken_cases
from abtest.sequential import unit_order as _unit_order
from fakes import Brain, install, make_project, many_cases

REFUSAL = "I don't know based on the provided documents."


def unit_order(ids: list[str], _groups: None, seed: int) -> list[list[str]]:
    """The order a run takes many_cases(len(ids)) in: its groups as abtest.groups gives them."""
    return _unit_order(ids, case_groups(many_cases(len(ids))), seed)


@pytest.fixture
def proj(tmp_path, monkeypatch):
    def make(n: int, brain: Brain | None = None):
        b = install(brain or Brain())
        p = make_project(tmp_path / "p", many_cases(n))
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
    p, b = proj(100, brain)
    h = run()
    assert h.status == "complete"
    rep = report(h.run_id)
    seq = rep["sequential"]
    first = set(taken_cases(unit_order([f"q{i:03d}" for i in range(100)], None, 0), 20))
    assert (seq["stop"], seq["looks_done"], seq["cases_used"]) == ("decision", 1, 20)
    assert seq["looks"][0]["conditions"]["abstention_answerable"] == "fails"
    assert asked(b) == first                  # the 80 cases not taken were never asked
    assert rep["n_cases"] == 20 and rep["progress"]["not_needed"] == 80
    assert not rep["claim"]["licensed"]
    assert seq["calls_saved"] == round(rep["calls"]["calls_per_case"] * 80)


def test_equal_variants_stop_for_futility(proj):
    p, b = proj(100)
    h = run()
    rep = report(h.run_id)
    seq = rep["sequential"]
    assert seq["stop"] == "futility" and h.status == "complete"
    last = seq["looks"][-1]
    f = last["sequences"]["faithfulness"]
    assert -0.05 < f["ci_low"] and f["ci_high"] < 0.05
    assert all(lk["stop"] is None for lk in seq["looks"][:-1])   # no earlier look stopped
    units = unit_order([f"q{i:03d}" for i in range(100)], None, 0)
    assert asked(b) == set(taken_cases(units, last["units"]))
    assert rep["claim"]["licensed"] is False
    md = CliRunner().invoke(cli, ["report", h.run_id]).stdout
    assert "## Sequential run" in md and "Stopped for futility" in md


def test_a_small_fixture_runs_out_and_max_cases_caps_it(proj):
    p, b = proj(30)
    h = run()
    seq = report(h.run_id)["sequential"]
    assert (seq["stop"], [lk["units"] for lk in seq["looks"]]) == ("exhausted", [20, 30])
    assert seq["cases_not_needed"] == 0 and len(asked(b)) == 30
    h2 = run(sequential={"max_cases": 25, "seed": 7})
    seq2 = report(h2.run_id)["sequential"]
    assert (seq2["stop"], seq2["cases_used"], seq2["seed"]) == ("max_cases", 25, 7)


def test_a_stopped_run_resumes_at_its_unfinished_look_in_the_same_order(proj):
    brain = Brain()
    units = unit_order([f"q{i:03d}" for i in range(100)], None, 0)
    second_look = taken_cases(units, 40)[20:]
    victim = second_look[3]
    fail = {"on": True}
    plain_generate = brain.generate

    def flaky(messages):   # one case of look 2 cannot be answered, until the provider is back
        if fail["on"] and f"fact number {int(victim[1:])}?" in messages[-1]["content"]:
            raise RuntimeError("provider down")
        return plain_generate(messages)

    brain.generate = flaky   # type: ignore[method-assign]
    p, b = proj(100, brain)
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


def test_the_view_and_the_html_report_show_the_looks_in_a_browser(proj, tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "view"))
    from browser import playwright_or_skip
    from viewstore import served

    pw = playwright_or_skip()
    p, _ = proj(100)
    h = run()
    rep = report(h.run_id)
    looks = rep["sequential"]["looks"]
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", h.run_id, "--format", "html", "--out",
                                    str(out)]).exit_code in (0, 1)
    args = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    with served(p / "results" / "abtest.duckdb") as url, pw.sync_playwright() as play:
        browser = play.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        try:
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
                rows = page.locator("#sequential table.looks tbody tr")
                assert rows.count() == len(looks)
                assert rows.nth(len(looks) - 1).inner_text().split("\t")[1] == \
                    str(looks[-1]["units"])
            page.goto(f"{url}runs/{h.run_id}")
            page.click("#report-link")
            page.wait_for_load_state()
            assert page.locator("#sequence-plot").count() == 1
        finally:
            browser.close()
