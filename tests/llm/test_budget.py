"""`--max-cost`: a hard budget checked before every provider call, tallied from the usage the
(loopback fake) provider reports, stopping the run before the call that could cross it."""

from __future__ import annotations

import json
import os

import pytest

from support.fakes import IN_PRICE, OUT_PRICE, make_project
from support.fakes import billed as _billed
from support.fakes import priced_config as _priced
from support.fakes import llm_config as config, many_cases
from support.cli import abtest_run


RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def _abtest(*args, env):
    """A real `abtest` process (forked from the preloaded interpreter: tests/support/cli.py)."""
    return abtest_run(args, env=env, timeout=300)


def test_the_run_stops_before_the_call_that_could_cross_the_budget(tmp_path, monkeypatch,
                                                                   server):
    srv, url = server
    proj = make_project(tmp_path / "p", many_cases(6), config=_priced(url))
    monkeypatch.chdir(proj)
    env = {**os.environ, "FAKE_LLM_KEY": "sk-x-123456789"}
    store = proj / "results" / "abtest.duckdb"
    # the dry run prices the estimate with the configured price and says it does not fit
    dry = json.loads(_abtest(*RUN, "--dry-run", "--max-cost", "0.05", env=env).stdout)
    tok = dry["estimated_tokens"]
    want = tok["generator_prompt"] * IN_PRICE / 1e6 + tok["generator_completion_max"] * OUT_PRICE / 1e6
    assert dry["estimated_cost_usd"]["generator"] == pytest.approx(want)
    assert dry["max_cost_usd"] == 0.05 and dry["fits_budget"] is False

    budget = 1.50
    r = _abtest(*RUN, "--run-id", "tight", "--max-cost", str(budget), env=env)
    assert r.returncode == 3, r.stderr
    assert "stopped at budget" in r.stderr and "--resume" in r.stderr
    rows, billed = _billed(store, "tight")
    assert rows and all(p is not None and c is not None for p, c in rows)
    assert billed <= budget                                   # never crossed
    rep = json.loads(_abtest("report", "tight", "--format", "json", env=env).stdout)
    assert rep["status"] == "incomplete" and rep["budget"]["max_usd"] == budget
    assert rep["budget"]["spent_usd"] == pytest.approx(billed, abs=0.005)   # to the cent
    assert rep["budget"]["stopped"].startswith("stopped at budget")
    cost = rep["calls"]["cost_usd"]
    assert cost["total"] == pytest.approx(billed, abs=0.005)
    assert sum(cost["by_variant"].values()) + sum(cost["by_judge"].values()) == \
        pytest.approx(cost["total"])
    # finished work is kept: the answers given before the budget stopped; a case counts as
    # finished only once its judgments exist too (none were made here)
    assert rep["progress"]["started"] > 0 and rep["n_finished"] < 6
    judged = {r["case_id"] for r in rows_of(store, "judgments", "tight") if not r["error"]}
    assert rep["n_finished"] <= len(judged)
    md = _abtest("report", "tight", env=env).stdout
    assert "**" in md and "stopped at budget" in md

    # more budget, --resume: it finishes, and no answered call is sent again
    answered = {x["hash"] for x in srv.requests}
    n_before = len(srv.requests)
    r = _abtest(*RUN, "--run-id", "tight", "--resume", "--max-cost", "1000", env=env)
    assert r.returncode in (0, 1), r.stderr
    rep = json.loads(_abtest("report", "tight", "--format", "json", env=env).stdout)
    assert rep["status"] == "complete" and rep["budget"]["stopped"] is None
    rows2, billed2 = _billed(store, "tight")
    assert rep["budget"]["spent_usd"] == pytest.approx(billed2, abs=0.005)
    assert not answered & {x["hash"] for x in srv.requests[n_before:]}


def test_a_budget_over_a_model_without_a_price_is_refused_before_any_call(tmp_path, monkeypatch,
                                                                           server):
    srv, url = server
    proj = make_project(tmp_path / "p", many_cases(2), config=config(url) + "max_cost_usd: 5\n")
    monkeypatch.chdir(proj)
    env = {**os.environ, "FAKE_LLM_KEY": "sk-x-123456789"}
    r = _abtest(*RUN, env=env)
    assert r.returncode == 2 and "no price is known for model openai/fake-gen" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert not (proj / "results" / "abtest.duckdb").exists()


def rows_of(store, table: str, run_id: str) -> list[dict]:
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        cur = con.execute(f"SELECT * FROM {table} WHERE run_id = ?", [run_id])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row)) for row in cur.fetchall()]
    finally:
        con.close()
