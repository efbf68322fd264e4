"""A run's state is told the same, and truly, everywhere (issue 42).

A real `abtest run` process against the loopback provider is stopped by SIGKILL, SIGINT or
SIGTERM at four points: mid-generation, after every generation but before any judgment,
mid-judging, and after judging but before the run is marked complete (while the judge noise
sample is asked). After each, the test counts the finished cases itself from the store's
rows, and the report (JSON, Markdown, HTML), the gate, `abtest runs`, compare, the view's
pages and the Python API must all give the same state and that count; then the resume
command the run printed, run from another folder, finishes it without re-sending a
finished call.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import brain_responder, llm_config, make_project, many_cases
from support.cli import abtest_popen, abtest_run, with_abtest_on_path
from support.waiting import wait_until

N = 6            # every case in flight at once (concurrency 2, two models: 8 workers)
RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def config(url: str, repeats: int = 1) -> str:
    return llm_config(url, timeout_s=60, max_retries=1,
                      more=f"judge_repeats: {repeats}\njudge_repeat_cases: 2\n")


class Valve:
    """The provider's tap: lets the first `gen` generation and `judge` judge requests through
    and holds the rest until opened (or 60 s), so a run can be stopped at a known point."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.allow = {"fake-gen": None, "fake-judge": None}
        self.seen = {"fake-gen": 0, "fake-judge": 0}
        self.held = 0

    def set(self, gen: int | None, judge: int | None) -> None:
        with self.cond:
            self.allow = {"fake-gen": gen, "fake-judge": judge}
            self.seen = {"fake-gen": 0, "fake-judge": 0}
            self.held = 0
            self.cond.notify_all()

    def open(self) -> None:
        self.set(None, None)

    def __call__(self, body: dict):
        model = str(body.get("model", "")).split("/")[-1]
        with self.cond:
            n = self.seen.get(model, 0)
            self.seen[model] = n + 1
            limit = self.allow.get(model)
            if limit is not None and n >= limit:
                self.held += 1
                self.cond.notify_all()
                self.cond.wait_for(lambda: self.allow.get(model) is None, timeout=60)
        return brain_responder(body)

    def answered(self) -> int:
        """Requests let through so far (each is answered at once: no latency)."""
        with self.cond:
            return sum(n if self.allow.get(m) is None else min(n, self.allow[m])
                       for m, n in self.seen.items())

    def wait_held(self, timeout: float = 60) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.held > 0, timeout=timeout), self.seen


@pytest.fixture(scope="module")
def provider():
    from support.fakes import _Server

    valve = Valve()
    srv = _Server(responder=valve, latency=0.0, max_seconds=900)
    url = srv.start()
    yield srv, url, valve
    valve.open()
    srv.stop()


def store_counts(store_path: Path, run_id: str, fixture: Path) -> tuple[int, str]:
    """(finished cases, stored status), counted here from the rows: both answers without
    error, and every judgment the four judges make (sample 0, no error): pairwise both
    orders, faithfulness and abstention per answer, coverage per answer of an answerable
    case with a reference."""
    import duckdb

    cases = [json.loads(x) for x in (fixture / "cases.jsonl").read_text().splitlines() if x]
    con = duckdb.connect(str(store_path), read_only=True)
    try:
        gens = con.execute("SELECT case_id, variant FROM generations WHERE run_id = ? AND "
                           "error IS NULL AND answer IS NOT NULL", [run_id]).fetchall()
        judg = con.execute("SELECT case_id, judge, subject FROM judgments WHERE run_id = ? AND "
                           "sample = 0 AND error IS NULL", [run_id]).fetchall()
        status = con.execute("SELECT status FROM runs WHERE run_id = ?", [run_id]).fetchone()[0]
    finally:
        con.close()
    done = 0
    for c in cases:
        need = {("pairwise", "AB"), ("pairwise", "BA")}
        for v in "AB":
            need |= {("faithfulness", v), ("abstention", v)}
            if c["answerable"] and c.get("reference_answer"):
                need.add(("coverage", v))
        have = {(j, s) for cid, j, s in judg if cid == c["id"]}
        if {(c["id"], "A"), (c["id"], "B")} <= set(gens) and need <= have:
            done += 1
    return done, status


def saved_so_far(store_path: Path) -> int:
    """Calls answered without error in the store of a run still writing it (abtest's own
    read, which the writing process serves)."""
    from abtest.store import Store

    s = Store(store_path, read_only=True, create=False)
    try:
        return s.query("SELECT count(*) AS n FROM llm_calls WHERE error IS NULL")[0]["n"]
    finally:
        s.close()


def saved_calls(store_path: Path) -> dict[str, int]:
    import duckdb

    con = duckdb.connect(str(store_path), read_only=True)
    try:
        rows = con.execute("SELECT call_hash, count(*) FROM llm_calls WHERE error IS NULL "
                           "GROUP BY call_hash").fetchall()
    finally:
        con.close()
    return dict(rows)


def sent_calls(store_path: Path) -> list[tuple[str, bool]]:
    import duckdb

    con = duckdb.connect(str(store_path), read_only=True)
    try:
        return con.execute("SELECT call_hash, cached FROM llm_calls ORDER BY id").fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def baseline(provider, tmp_path_factory):
    """A clean run of the same fixture: how many judge requests the per-case judging makes
    (without the noise sample), and a complete run to compare with."""
    srv, url, valve = provider
    valve.open()
    root = tmp_path_factory.mktemp("state")
    proj = make_project(root / "clean", many_cases(N), config=config(url, repeats=0))
    env = {**os.environ, "FAKE_LLM_KEY": "k"}
    out = abtest_run(RUN, cwd=proj, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    judge_requests = valve.seen["fake-judge"]
    assert judge_requests >= N * 6
    return {"root": root, "judge_requests": judge_requests, "env": env}


POINTS = {
    # name: (generation requests let through, judge requests let through)
    "mid_generation": (5, 0),
    "after_generation": (None, 0),
    "mid_judging": (None, "half"),
    "before_complete": (None, "all"),
}
SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


@pytest.mark.parametrize("point", list(POINTS))
@pytest.mark.parametrize("sig", list(SIGNALS))
def test_stopped_run_is_told_the_same_everywhere_and_resumes_from_anywhere(
        provider, baseline, point, sig, monkeypatch):
    srv, url, valve = provider
    proj = make_project(baseline["root"] / f"{point}-{sig}", many_cases(N), config=config(url))
    env = baseline["env"]
    gen, judge = POINTS[point]
    jr = baseline["judge_requests"]
    valve.set(gen, {"half": jr // 2, "all": jr}.get(judge, judge) if judge is not None else None)
    # a real process (forked from the preloaded interpreter, tests/support/forkserver.py),
    # with Ctrl-C as in a terminal (SIGINT raises KeyboardInterrupt, even when this suite was
    # started in the background with SIGINT ignored)
    proc = abtest_popen(RUN, cwd=proj, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True)
    try:
        valve.wait_held()
        # what the provider answered lands in the store (read through the running writer)
        wait_until(lambda: saved_so_far(proj / "results" / "abtest.duckdb") >= valve.answered(),
                   60, "the answered calls in the store")
        proc.send_signal(SIGNALS[sig])
        if sig != "SIGKILL":
            time.sleep(0.3)
        valve.open()      # held requests answer (a stopped process finishes what is in flight)
        out, err = proc.communicate(timeout=120)
    finally:
        valve.open()
        if proc.poll() is None:
            proc.kill()
    store_path = proj / "results" / "abtest.duckdb"
    rid = _only_run(store_path)
    count, stored = store_counts(store_path, rid, proj / "fixtures" / "small")
    state = "interrupted" if sig == "SIGKILL" else "stopped"
    if sig == "SIGKILL":
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == (130 if sig == "SIGINT" else 143), err
        assert stored == "stopped", err
        assert f"run {rid} stopped ({sig})" in err
        # the last lines give the store's count, not the per-case lines'
        assert f"finished work is saved ({count} of {N} cases finished" in err, err[-600:]
    if point == "before_complete":
        assert count == N   # every case judged; only the run's end was not reached
    if point in ("mid_generation", "after_generation"):
        assert count < N

    monkeypatch.chdir(proj)
    runner = CliRunner()

    # the report, in every format
    rep = json.loads(runner.invoke(cli, ["report", rid, "--format", "json"]).stdout)
    assert (rep["status"], rep["n_finished"], rep["n_cases"]) == (state, count, N)
    assert rep["progress"]["state"] == state and rep["progress"]["finished"] == count
    assert len(rep["unfinished_cases"]) == N - count
    assert rep["metrics"] == {} and not rep["claim"]["licensed"]
    md = runner.invoke(cli, ["report", rid, "--format", "md"]).stdout
    assert f"- Status: **{state}** — {count} of {N} cases finished" in md
    html = runner.invoke(cli, ["report", rid, "--format", "html"]).stdout
    assert re.search(rf"<strong>{state}</strong> — {count} of {N} cases finished", html)
    if count < N and rep["progress"]["judged"].get("faithfulness"):
        assert "No metric was measured" not in html and "metrics-progress" in html
    gh = runner.invoke(cli, ["report", rid, "--format", "github"]).stdout
    assert f"{state}: {count} of {N} cases finished" in gh
    # the gate: INCOMPLETE for every state but complete
    assert runner.invoke(cli, ["gate", rid]).exit_code == 3
    # abtest runs
    rows = json.loads(runner.invoke(cli, ["runs", "--format", "json"]).stdout)
    row = next(r for r in rows if r["run_id"] == rid)
    assert (row["status"], row["n_finished"], row["n_cases"]) == (state, count, N)
    # the Python API
    import abtest

    h = abtest.get_run(rid)
    assert (h.status, h.result.n_finished) == (state, count)
    assert abtest.report(rid).status == state
    # the view: the run page's progress line and the runs list
    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    client = TestClient(create_app(store_path))
    page = client.get(f"/runs/{rid}").text
    assert f"{state}: {count} of {N} cases finished" in page
    listing = client.get("/").text
    assert re.search(rf'class="status-{state}">{state}<', listing)
    assert f"{count} of {N} cases finished" in listing
    # compare: only cases finished in both runs are lined up (here the run with itself)
    from abtest.reporting.compare import compare_runs
    from abtest.store import Store

    st = Store(store_path, read_only=True, create=False)
    try:
        cmp = compare_runs(st, rid, rid)
    finally:
        st.close()
    assert cmp["n_cases"] == count and cmp["left_out"]["n"] == N - count
    assert f"left out: {N - count} case(s)" in runner.invoke(cli, ["compare", rid, rid]).stdout \
        or count == N

    # the resume command, as printed (stderr for Ctrl-C/SIGTERM, the report otherwise),
    # run from another folder
    printed = re.search(r"`([^`]*--resume[^`]*)` continues it", err) if sig != "SIGKILL" else None
    hint = printed.group(1) if printed else \
        re.search(r"\(`([^`]*--resume[^`]*)`\)", rep["estimates_withheld"]).group(1)
    assert "--config" in hint and str(proj) in hint
    # `abtest runs` prints it whole, on a line of its own; the list and the report agree
    assert f"  {hint}" in runner.invoke(cli, ["runs"]).stdout.splitlines()
    assert row["resume"] == rep["resume"] == hint and row["gate"] == "INCOMPLETE"
    elsewhere = baseline["root"] / f"elsewhere-{point}-{sig}"
    elsewhere.mkdir()
    saved = saved_calls(store_path)
    n_before = len(sent_calls(store_path))
    # as a user pastes it into a shell: `abtest` on PATH (one that runs through the preloaded
    # interpreter, tests/support/forkserver.py)
    path = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    res = subprocess.run(hint, shell=True, cwd=elsewhere,
                         env=with_abtest_on_path({**env, "PATH": path}),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, (hint, res.stderr)
    resent = [h for h, cached in sent_calls(store_path)[n_before:] if h in saved and not cached]
    assert len(resent) <= 2, resent     # at most `concurrency` finished calls asked again
    count, stored = store_counts(store_path, rid, proj / "fixtures" / "small")
    assert (count, stored) == (N, "complete")
    monkeypatch.chdir(elsewhere)
    assert not (elsewhere / "results").exists()   # the run's own store, not a new one here
    monkeypatch.chdir(proj)
    rep = json.loads(runner.invoke(cli, ["report", rid, "--format", "json"]).stdout)
    assert (rep["status"], rep["n_finished"]) == ("complete", N)


def _only_run(store_path: Path) -> str:
    import duckdb

    con = duckdb.connect(str(store_path), read_only=True)
    try:
        return con.execute("SELECT run_id FROM runs").fetchone()[0]
    finally:
        con.close()


def test_resume_hint_is_exact_and_quoted(tmp_path):
    from abtest.store.runs import resume_hint

    run = {"run_id": "r 1", "kind": "frozen", "fixture_path": "/a b/fx",
           "variant_a_path": "variants/a.yaml", "variant_b_path": "/v/b's.yaml",
           "info_json": json.dumps({"cwd": "/p q", "config_path": "/p q/my.yaml",
                                    "shard": [2, 3]})}
    words = shlex.split(resume_hint(run, batch=True))
    assert words == ["abtest", "run", "--fixture", "/a b/fx", "--a", "/p q/variants/a.yaml",
                     "--b", "/v/b's.yaml", "--config", "/p q/my.yaml", "--run-id", "r 1",
                     "--resume", "--shard", "2/3", "--batch"]
    # on defaults (no config file) the store is under the folder the run started in: cd first
    run["info_json"] = json.dumps({"cwd": "/p q"})
    assert shlex.split(resume_hint(run))[:3] == ["cd", "/p q", "&&"]
