"""`abtest run --batch`: provider batches through litellm's files + batches interface, against
the loopback fake provider's /v1/files and /v1/batches. The fake answers a request the same
whether it comes in a batch or alone, so a batch run must end with the report of a run made
with single calls, key for key."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess

import pytest

from fake_llm_server import FakeLLMServer
from support.fakes import make_project
from support.fakes import llm_config as config, many_cases
from support.cli import abtest_popen, abtest_run

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]
ENV = {**os.environ, "FAKE_LLM_KEY": "sk-x-123456789"}
SAME = ("run_id", "created_at", "finished_at", "calls", "abtest_version", "duration_s",
        "budget", "store", "generated_at")


def _abtest(cwd, *args, wait=True):
    """A real `abtest` process (forked from the preloaded interpreter: tests/support/cli.py)."""
    if wait:
        return abtest_run(args, cwd=cwd, env=ENV, timeout=300)
    return abtest_popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True, env=ENV)


def _report(cwd, run_id) -> dict:
    r = _abtest(cwd, "report", run_id, "--format", "json")
    assert r.returncode in (0, 1, 3), r.stderr
    return json.loads(r.stdout)


def _comparable(rep: dict) -> dict:
    return {k: v for k, v in rep.items() if k not in SAME}


def _direct_report(proj) -> dict:
    """The same comparison made with single calls: a copy of the project (the same fixture
    files), its own store and its own fake provider."""
    other = proj.parent / "direct"
    shutil.copytree(proj, other, ignore=shutil.ignore_patterns("results"))
    (other / "results").mkdir()
    with FakeLLMServer(max_seconds=300) as srv:
        (other / "abtest.yaml").write_text(config(srv.base_url))
        r = _abtest(other, *RUN, "--run-id", "direct")
        assert r.returncode in (0, 1), r.stderr
        return _report(other, "direct")


def _batch_project(tmp_path, srv):
    return make_project(tmp_path / "p", many_cases(6),
                        config=config(srv.base_url) + "batch_poll_s: 0.2\n")


def _chat_paths(srv) -> tuple[list[str], list[str]]:
    """Hashes of the chat requests the fake answered in a batch, and alone."""
    batched = [r["hash"] for r in srv.requests if r["path"].startswith("/batch")]
    alone = [r["hash"] for r in srv.requests if r["path"] == "/chat/completions"]
    return batched, alone


def test_a_batch_run_survives_a_kill_between_submit_and_collect(tmp_path):
    with FakeLLMServer(max_seconds=300, batch_seconds=1.5) as srv:
        proj = _batch_project(tmp_path, srv)
        p = _abtest(proj, *RUN, "--run-id", "b1", "--batch", wait=False)
        seen = []
        for line in p.stderr:       # wait until the first batch is submitted and stored
            seen.append(line)
            if "submitted" in line:
                break
        assert any("submitted" in x for x in seen), "".join(seen)
        assert srv.batches and srv.batches[next(iter(srv.batches))]["batch"]["status"] == \
            "in_progress"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        # a new process collects the batch from the ids in the store, and goes on
        r = _abtest(proj, *RUN, "--run-id", "b1", "--resume", "--batch")
        assert r.returncode in (0, 1), r.stderr
        assert "collected" in r.stderr
        batched, alone = _chat_paths(srv)
        assert batched and not alone                 # every call went in a batch
        assert len(batched) == len(set(batched))     # and none twice
        assert len(srv.batches) >= 2   # the answers first, then the judges of them
    rep = _report(proj, "b1")
    assert rep["status"] == "complete"
    assert _comparable(rep) == _comparable(_direct_report(proj))


def _error_lines(srv) -> list[dict]:
    """Every line of every error file the fake wrote (independent of abtest's bookkeeping)."""
    out = []
    for entry in srv.batches.values():
        fid = entry["batch"]["error_file_id"]
        if fid:
            out += [json.loads(x) for x in srv.files[fid]["content"].decode().splitlines()]
    return out


def test_an_expired_batch_and_failed_lines_are_made_as_single_calls(tmp_path):
    # each batch expires with half its requests done, and its first request fails outright
    with FakeLLMServer(max_seconds=300, batch_expire=True, batch_fail_first_n=1) as srv:
        proj = _batch_project(tmp_path, srv)
        r = _abtest(proj, *RUN, "--run-id", "b2", "--batch")
        assert r.returncode in (0, 1), r.stderr
        assert "expired" in r.stderr and "single calls" in r.stderr
        errors = _error_lines(srv)
        codes = {(e.get("error") or {}).get("code") or e["response"]["status_code"]
                 for e in errors}
        assert codes == {"batch_expired", 500}
        batched, alone = _chat_paths(srv)
        # each request a batch did not answer was made once alone, and nothing else was
        assert len(alone) == len(errors) == len({e["custom_id"] for e in errors})
        assert len(set(alone)) == len(alone)
    rep = _report(proj, "b2")
    assert rep["status"] == "complete"
    assert _comparable(rep) == _comparable(_direct_report(proj))


def test_requests_no_batch_or_single_call_answers_leave_the_run_incomplete(tmp_path):
    with FakeLLMServer(max_seconds=300, batch_fail_first_n=10**6, fault_first_n=10**6,
                       fault_first_n_kind="500") as srv:
        proj = _batch_project(tmp_path, srv)
        r = _abtest(proj, *RUN, "--run-id", "b3", "--batch")
        assert r.returncode == 3, r.stderr
        batched, alone = _chat_paths(srv)
        assert len(srv.batches) == 1 and len(batched) == 12     # the 12 answers, once each
        assert len(set(alone)) == 12                            # then each alone, and retried
    rep = _report(proj, "b3")
    assert rep["status"] == "incomplete" and rep["n_finished"] == 0
    assert sorted(rep["unfinished_cases"]) == [f"q{i:03d}" for i in range(6)]
    assert all("InternalServerError" in " ".join(why) and "after 4 attempts" in " ".join(why)
               for why in rep["unfinished_reasons"].values())


def test_no_wait_exits_3_while_a_batch_is_out_and_resume_finishes_it(tmp_path):
    with FakeLLMServer(max_seconds=300, batch_seconds=600) as srv:
        proj = _batch_project(tmp_path, srv)
        r = _abtest(proj, *RUN, "--run-id", "b4", "--batch", "--no-wait")
        assert r.returncode == 3, r.stderr
        assert "waiting for 1 batch(es)" in r.stderr and "--resume --batch" in r.stderr
        assert _report(proj, "b4")["status"] == "incomplete"
        # still out: a resume without waiting says so again
        r = _abtest(proj, *RUN, "--run-id", "b4", "--resume", "--batch", "--no-wait")
        assert r.returncode == 3 and "waiting for" in r.stderr, r.stderr
        for _stage in range(4):   # generations, then the judges' calls (and their repairs)
            assert srv.make_batches_due() == 1   # the provider's clock moves on: batch done
            r = _abtest(proj, *RUN, "--run-id", "b4", "--resume", "--batch", "--no-wait")
            if r.returncode != 3:
                break
            assert "waiting for 1 batch(es)" in r.stderr, r.stderr
        assert r.returncode in (0, 1), r.stderr
        assert _chat_paths(srv)[1] == []
    assert _report(proj, "b4")["status"] == "complete"
    # flags that do not go together, refused with one line
    for args, says in ((["--no-wait"], "--no-wait goes with --batch"),
                       (["--models", "openai/fake-gen,openai/fake-judge", "--batch"],
                        "--batch works on one run")):
        bad = [a for a in RUN if a not in ("--b", "variants/b.yaml")] if "--models" in args \
            else RUN
        r = _abtest(proj, *bad, *args)
        assert r.returncode == 2 and says in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_a_batch_run_holds_the_budget_and_bills_what_the_provider_reports(tmp_path):
    from support.fakes import IN_PRICE, OUT_PRICE, billed as _billed, priced_config as _priced

    with FakeLLMServer(max_seconds=300) as srv:
        proj = make_project(tmp_path / "p", many_cases(6),
                            config=_priced(srv.base_url) + "batch_poll_s: 0.2\n")
        store = proj / "results" / "abtest.duckdb"
        # room for the answers' batch (12 x worst case), not for every judge call after it
        r = _abtest(proj, *RUN, "--run-id", "bb", "--batch", "--max-cost", "4.0")
        assert r.returncode == 3, r.stderr
        assert "stopped at budget" in r.stderr and "--batch" in r.stderr
        rows, billed = _billed(store, "bb")
        assert len(rows) >= 12 and billed <= 4.0        # what batches answered, never over
        # the usage the fake reported in its batch output files, priced by hand
        want = 0.0
        for entry in srv.batches.values():
            fid = entry["batch"]["output_file_id"]
            for x in srv.files[fid]["content"].decode().splitlines() if fid else []:
                u = json.loads(x)["response"]["body"]["usage"]
                want += u["prompt_tokens"] * IN_PRICE / 1e6 + u["completion_tokens"] * OUT_PRICE / 1e6
        rep = _report(proj, "bb")
        assert rep["budget"]["spent_usd"] == pytest.approx(want, abs=0.005)
        r = _abtest(proj, *RUN, "--run-id", "bb", "--resume", "--batch", "--max-cost", "1000")
        assert r.returncode in (0, 1), r.stderr
        assert _chat_paths(srv)[1] == []
    rep = _report(proj, "bb")
    assert rep["status"] == "complete"
    assert rep["calls"]["cost_usd"]["total"] == pytest.approx(_billed(store, "bb")[1], abs=1e-6)


def test_a_waiting_run_says_so_and_is_not_resumed_without_batch(tmp_path):
    with FakeLLMServer(max_seconds=300, batch_seconds=60) as srv:
        proj = _batch_project(tmp_path, srv)
        r = _abtest(proj, *RUN, "--run-id", "b5", "--batch", "--no-wait")
        assert r.returncode == 3, r.stderr
        bid = next(iter(srv.batches))
        rep = _report(proj, "b5")
        assert rep["status"] == "incomplete" and rep["metrics"] == {}
        assert all(why == [f"waiting for provider batch {bid} (`abtest run --run-id b5 "
                           "--resume --batch` collects it)"]
                   for why in rep["unfinished_reasons"].values())
        # resumed without --batch, the requests out in the batch would be paid for twice
        n = len(srv.requests)
        r = _abtest(proj, *RUN, "--run-id", "b5", "--resume")
        assert r.returncode == 2 and f"has 1 batch(es) out at the provider ({bid})" in r.stderr
        assert r.stderr.count("\n") == 1 and len(srv.requests) == n
        assert _report(proj, "b5")["status"] == "incomplete"


def test_an_endpoint_without_a_batch_api_is_refused_before_anything_is_stored(tmp_path):
    with FakeLLMServer(max_seconds=300, batch_api=False) as srv:
        proj = _batch_project(tmp_path, srv)
        r = _abtest(proj, *RUN, "--run-id", "b6", "--batch")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "openai/fake-gen at http://127.0.0.1:" in r.stderr and "has no Batch API" in r.stderr
        assert "sk-x-123456789" not in r.stderr
        assert not [x for x in srv.requests if "chat" in x["path"]]
    assert not (proj / "results" / "abtest.duckdb").exists()
    # a run whose models have no OpenAI-compatible batch interface at all is refused too
    other = "{model: anthropic/claude-3-5-haiku-20241022, api_key_env: FAKE_LLM_KEY}"
    (proj / "abtest.yaml").write_text(f"generator: {other}\njudge: {other}\n"
                                      "store: results/abtest.duckdb\n")
    r = _abtest(proj, *RUN, "--batch", "--allow-self-judge")
    assert r.returncode == 2 and "no model of this run has an OpenAI-compatible Batch API" \
        in r.stderr, r.stderr


def test_batch_answers_are_priced_at_the_providers_batch_prices():
    from abtest.llm.provider import batch_cost, get_litellm
    from abtest.core.models import ModelSpec

    litellm = get_litellm()
    row = litellm.model_cost["gpt-4o-mini"]
    want = 1200 * row["input_cost_per_token_batches"] + 300 * row["output_cost_per_token_batches"]
    got = batch_cost(ModelSpec(model="openai/gpt-4o-mini"), 1200, 300)
    assert got == pytest.approx(want) and got < 1200 * row["input_cost_per_token"] + \
        300 * row["output_cost_per_token"]
    # a configured price is what the user says they pay
    spec = ModelSpec(model="openai/fake", price={"input_per_mtok": 1.0, "output_per_mtok": 2.0})
    assert batch_cost(spec, 1_000_000, 1_000_000) == pytest.approx(3.0)
