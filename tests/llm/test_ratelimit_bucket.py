"""Pacing by rate against a provider that enforces its limit as hosted ones do: a continuous
bucket holding a few seconds' worth, a request charged on arrival (characters / 4 +
max_tokens). A low limit and a short latency, where concurrency is a poor control (the
issue's case: 4 requests a second, 0.3 s), binding on requests and, apart, on tokens; time-
scaled x10 so that it takes seconds."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from fake_llm_server import FakeLLMServer

from abtest.llm import Gateway
from abtest.core.models import ModelSpec

# they measure a rate against the wall clock (at least 0.85 of the limit): run after the
# parallel pass (scripts/test), where a busy machine cannot make a paced run look slow; each
# waits on its pace more than it computes (~40 % of a core), so they share that pass with each
# other (`paced`), not with the CPU-bound serial tests
pytestmark = [pytest.mark.serial, pytest.mark.paced]

SCALE = 10
RPM = 240 * SCALE            # 4 requests a second, scaled: 40
LATENCY = 0.3 / SCALE
BUCKET_S = 3.0 / SCALE       # the provider holds 3 s' worth (scaled)
MINUTE = 60.0 / SCALE


def _after_the_first_minute(rows: list[dict]) -> tuple[list[dict], float]:
    """The answered requests after the first (scaled) minute and their span, once the 429s
    among all sent then are shown to be at most 2 %."""
    start = rows[0]["ts"]
    later = [r for r in rows if r["ts"] >= start + MINUTE]
    rejected = sum(r["status"] == 429 for r in later)
    assert rejected <= 0.02 * len(later), (rejected, len(later))
    ok = [r for r in later if r["status"] == 200]
    return ok, ok[-1]["ts"] - ok[0]["ts"]


@pytest.mark.parametrize("headers", [True, False], ids=["headers", "no headers"])
def test_a_run_at_a_low_limit_and_short_latency_stays_under_the_429_bound(headers):
    n = 560     # 14 scaled seconds at the limit: the first (scaled) minute and as much again
    with FakeLLMServer(limits={"m": {"rpm": RPM}}, bucket_s=BUCKET_S, charge="estimate",
                       latency=LATENCY, rate_headers=headers, max_seconds=300,
                       keep_alive=True) as srv:
        gw = Gateway(None, concurrency=8, max_retries=0)
        spec = ModelSpec(model="openai/m", api_base=srv.base_url, max_tokens=8)
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda i: gw.complete(
                spec, [{"role": "user", "content": f"question {i}"}], purpose="x"), range(n)))
        rows = [r for r in srv.requests if r.get("model") == "m"]
        source = gw.limits.get(spec).status()["source"]
    assert all(r.ok for r in results)           # every 429 was waited out
    assert source == ("headers" if headers else "429s")
    # unpaced, 8 in flight at 0.03 s would send ~260 a second against 40: most answered 429
    ok, span = _after_the_first_minute(rows)
    # and it runs near the limit (0.9 of it, less the tail's last slow answers)
    assert (len(ok) - 1) / span * 60 >= 0.85 * RPM, (len(ok) - 1) / span * 60 / RPM


TPM = 48_000 * SCALE          # tokens bind: 800 a second, scaled 8,000
MAX_TOKENS = 100


def _long(i: int) -> list[dict]:
    # 14 + 76 x 5 = 394 characters or so: charged ceil(chars / 4) + max_tokens 100 = ~199, of
    # which the fake's answer uses a small part (the prompt's words and a short reply)
    return [{"role": "user", "content": f"question {i:04d} " + "word " * 76}]


@pytest.mark.parametrize("mode", ["limits set", "headers", "no headers"])
def test_a_run_bound_by_tokens_charged_on_arrival_stays_under_the_429_bound(mode):
    # ~40 calls a second (8,000 tokens / ~199): the provider holds 0.3 s' worth, 2,400 tokens.
    # Charged ~199 on arrival and using far less, a call must not be counted as its usage:
    # what it did not use the provider keeps. Giving that back (and taking it back only from
    # the calls sent after the one whose remaining tokens were said, not from those still
    # waiting for their turn) answered ~16 % of these calls 429.
    n = 560
    headers = mode != "no headers"
    with FakeLLMServer(limits={"m": {"tpm": TPM}}, bucket_s=BUCKET_S, charge="estimate",
                       latency=LATENCY, rate_headers=headers, max_seconds=300,
                       keep_alive=True) as srv:
        gw = Gateway(None, concurrency=8, max_retries=0)
        spec = ModelSpec(model="openai/m", api_base=srv.base_url, max_tokens=MAX_TOKENS,
                         tpm=TPM if mode == "limits set" else None)
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda i: gw.complete(spec, _long(i), purpose="x"),
                                    range(n)))
        rows = [r for r in srv.requests if r.get("model") == "m"]
        lim = gw.limits.get(spec)
        source = lim.status()["source"]
    assert all(r.ok for r in results)
    assert source == {"limits set": "set", "headers": "headers", "no headers": "429s"}[mode]
    assert lim.tokens is not None and lim.requests is None    # tokens bind, nothing else
    charged = [r["tokens"] for r in rows]
    assert 190 <= min(charged) and max(charged) <= 210
    ok, span = _after_the_first_minute(rows)
    # near the limit: tokens charged (what the provider counts) per minute
    rate = sum(r["tokens"] for r in ok[1:]) / span * 60
    assert rate >= 0.85 * TPM, rate / TPM


def test_what_a_limiter_learned_is_kept_in_the_run_for_resume(tmp_path):
    import json

    from abtest.store import Store

    store = Store(tmp_path / "abtest.duckdb")
    try:
        store.create_run({"run_id": "r1", "info_json": json.dumps({"cwd": "/x"})})
        spec = ModelSpec(model="openai/m", api_base="http://127.0.0.1:9/v1")
        gw = Gateway(store, run_id="r1")
        lim = gw.limits.get(spec)
        lease = lim.lease(100)
        with lease:
            lim.settle(lease, "ok", used=50, headers={"x-ratelimit-limit-requests": "600"})
        info = json.loads(store.get_run("r1")["info_json"])
        assert info["cwd"] == "/x"     # the run's other info is kept
        assert info["rate_limits"] == {"openai/m http://127.0.0.1:9/v1": {"requests_seen": 600}}
        # a resumed run's gateway starts from it
        again = Gateway(store, run_id="r1").limits.get(spec)
        assert again.rpm == 600 and again.status()["source"] == "headers"
        assert again.requests is not None and again.requests.per_minute == 600
    finally:
        store.close()
