"""Tests for scripts/fake_llm_server.py (hermetic: loopback only, a few seconds)."""

from __future__ import annotations

import base64
import importlib.util
import json
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "fake_llm_server.py"


def _load():
    spec = importlib.util.spec_from_file_location("fake_llm_server", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fake_llm_server", mod)
    spec.loader.exec_module(mod)
    return mod


fls = _load()
FakeLLMServer = fls.FakeLLMServer


def post(url: str, body: dict, timeout: float = 5):
    """POST JSON; returns (status, headers, raw bytes) also for HTTP errors."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def chat_body(text: str = "What is the refund window?", **extra) -> dict:
    return {"model": "fake-model", "messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": text}], **extra}


@pytest.fixture
def server():
    with FakeLLMServer(max_seconds=30) as srv:
        yield srv


def test_chat_completion_shape(server):
    status, _, raw = post(server.base_url + "/chat/completions", chat_body(temperature=0))
    assert status == 200
    data = json.loads(raw)
    assert data["object"] == "chat.completion"
    assert data["id"].startswith("chatcmpl-")
    assert isinstance(data["created"], int)
    assert data["model"] == "fake-model"
    assert data["system_fingerprint"] == "fp_fake_1"
    choice = data["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "Answer to: What is the refund window?"
    u = data["usage"]
    assert u["prompt_tokens"] == 2 + 5
    assert u["completion_tokens"] == len(choice["message"]["content"].split())
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    # same reply without the /v1 prefix, deterministic
    root = server.base_url[: -len("/v1")]
    status2, _, raw2 = post(root + "/chat/completions", chat_body(temperature=0))
    assert status2 == 200
    assert json.loads(raw2)["choices"][0]["message"]["content"] == choice["message"]["content"]


def test_counts_per_hash_and_request_log(server):
    url = server.base_url + "/chat/completions"
    t0 = time.time()
    post(url, chat_body("q1"))
    post(url, chat_body("q1", user="someone", metadata={"run": 1}))  # volatile fields ignored
    post(url, chat_body("q2"))
    h1 = fls.request_hash(chat_body("q1"))
    h2 = fls.request_hash(chat_body("q2"))
    assert h1 == fls.request_hash(chat_body("q1", stream=False, user="u"))
    assert server.counts == {h1: 2, h2: 1}
    assert [r["attempt"] for r in server.requests] == [0, 1, 0]
    assert server.requests[0]["body"] == chat_body("q1")
    assert all(r["ts"] >= t0 for r in server.requests)
    assert t0 <= server.first_request_at <= server.last_request_at <= time.time()


def test_json_reply_from_schema(server):
    schema = {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["A", "B", "tie"]},
            "score": {"type": "number"},
            "count": {"type": "integer", "minimum": 1},
            "reasons": {"type": "array", "items": {"type": "string"}},
            "ok": {"type": "boolean"},
            "detail": {"$ref": "#/$defs/Detail"},
            "note": {"anyOf": [{"type": "null"}, {"type": "string"}]},
            "optional": {"type": "string"},
        },
        "required": ["verdict", "score", "count", "reasons", "ok", "detail", "note"],
        "$defs": {"Detail": {"type": "object", "properties": {
            "claim": {"type": "string"}, "extra": {"type": "number"}}, "required": ["claim"]}},
    }
    body = chat_body("Judge these answers.",
                     response_format={"type": "json_schema",
                                      "json_schema": {"name": "verdict", "schema": schema}})
    _, _, raw = post(server.base_url + "/chat/completions", body)
    content = json.loads(json.loads(raw)["choices"][0]["message"]["content"])
    assert content == {"verdict": "A", "score": 0.5, "count": 1, "reasons": [], "ok": False,
                       "detail": {"claim": "x"}, "note": "x"}

    # no response_format, but the prompt asks for JSON and shows an example
    body = chat_body('Reply in JSON only: {"winner": "A|B|tie", "reason": "short"}')
    _, _, raw = post(server.base_url + "/chat/completions", body)
    content = json.loads(json.loads(raw)["choices"][0]["message"]["content"])
    assert content == {"winner": "A", "reason": "short"}


@pytest.mark.parametrize("kind", ["429", "500", "503", "malformed", "truncated_json", "empty"])
def test_fault_kinds_first_n(kind):
    with FakeLLMServer(fault_first_n=1, fault_first_n_kind=kind, retry_after=0.05,
                       max_seconds=30) as srv:
        url = srv.base_url + "/chat/completions"
        body = chat_body(response_format={"type": "json_schema", "json_schema": {
            "name": "s", "schema": {"type": "object", "properties": {
                "verdict": {"type": "string"}, "score": {"type": "number"}},
                "required": ["verdict", "score"]}}})
        status, headers, raw = post(url, body)
        if kind in ("429", "500", "503"):
            assert status == int(kind)
            err = json.loads(raw)["error"]
            assert err["message"] and err["type"]
            if kind == "429":
                assert headers["Retry-After"] == "0.05"
                assert err["type"] == "rate_limit_error"
        elif kind == "malformed":
            assert status == 200
            with pytest.raises(ValueError):
                json.loads(raw)
        else:
            assert status == 200
            content = json.loads(raw)["choices"][0]["message"]["content"]
            if kind == "empty":
                assert content == ""
            else:
                assert content.startswith("{")
                with pytest.raises(ValueError):
                    json.loads(content)
        # the second attempt of the same request succeeds
        status, _, raw = post(url, body)
        assert status == 200
        assert json.loads(json.loads(raw)["choices"][0]["message"]["content"]) == {
            "verdict": "x", "score": 0.5}
        assert srv.fault_counts == {kind: 1}
        assert srv.counts == {fls.request_hash(body): 2}


@pytest.mark.serial   # wall-clock bounds of 0.5 s and 1 s: run alone
def test_timeout_fault_hangs_without_blocking_and_stops_promptly():
    srv = FakeLLMServer(fault_first_n=1, fault_first_n_kind="timeout", hang_seconds=20,
                        max_seconds=30)
    url = srv.start() + "/chat/completions"
    outcome = []

    def hanging_client():
        try:
            outcome.append(post(url, chat_body("hang 2"), timeout=5)[0])
        except Exception as e:  # connection dropped when the server stops
            outcome.append(type(e).__name__)

    t = threading.Thread(target=hanging_client)
    try:
        with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
            post(url, chat_body("hang me"), timeout=0.3)
        # the retry is served at once although the first handler is still hanging
        t0 = time.monotonic()
        status, _, _ = post(url, chat_body("hang me"), timeout=2)
        assert status == 200 and time.monotonic() - t0 < 0.5
        t.start()  # attempt 0 of another hash: hangs until stop
        assert srv.wait_for_requests(3, timeout=10)   # it has arrived and hangs
    finally:
        t0 = time.monotonic()
        srv.stop()
        assert time.monotonic() - t0 < 1.0
    t.join(timeout=2)
    assert not t.is_alive() and outcome and outcome[0] != 200
    assert srv.fault_counts == {"timeout": 2}


@pytest.mark.serial   # a wall-clock bound of 0.6 s for 0.2 s of latency: run alone
def test_latency_is_concurrent():
    with FakeLLMServer(latency=0.2, max_seconds=30) as srv:
        url = srv.base_url + "/chat/completions"
        results = []

        def go(i):
            results.append(post(url, chat_body(f"q{i}"))[0])

        threads = [threading.Thread(target=go, args=(i,)) for i in range(4)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
    assert results == [200] * 4
    assert 0.2 <= elapsed < 0.6


def test_watchdog_stops_server():
    srv = FakeLLMServer(max_seconds=0.3)
    url = srv.start() + "/models"
    with urllib.request.urlopen(url, timeout=2) as r:
        assert json.loads(r.read())["object"] == "list"
    assert srv.wait(timeout=3)
    assert srv.stopped_by_watchdog and not srv.running
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=1)
    srv.stop()  # idempotent


def test_embeddings_and_models(server):
    url = server.base_url + "/embeddings"
    status, _, raw = post(url, {"model": "emb", "input": ["alpha", "beta", "alpha"]})
    assert status == 200
    data = json.loads(raw)["data"]
    vecs = [d["embedding"] for d in data]
    assert [len(v) for v in vecs] == [16, 16, 16]
    assert vecs[0] == vecs[2] != vecs[1]
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-9 for v in vecs)
    _, _, raw = post(url, {"model": "emb", "input": "alpha", "encoding_format": "base64"})
    b64 = json.loads(raw)["data"][0]["embedding"]
    unpacked = struct.unpack("<16f", base64.b64decode(b64))
    assert all(abs(a - b) < 1e-6 for a, b in zip(unpacked, vecs[0]))
    with urllib.request.urlopen(server.base_url + "/models", timeout=2) as r:
        assert json.loads(r.read())["data"][0]["id"] == "fake"


def test_responder_override():
    def responder(body):
        text = body["messages"][-1]["content"]
        if text == "raw":
            return {"status": 418, "headers": {"X-Test": "1"}, "body": {"error": {"message": "teapot"}}}
        return "custom:" + text

    with FakeLLMServer(responder=responder, max_seconds=30) as srv:
        url = srv.base_url + "/chat/completions"
        _, _, raw = post(url, chat_body("hi"))
        assert json.loads(raw)["choices"][0]["message"]["content"] == "custom:hi"
        status, headers, raw = post(url, chat_body("raw"))
        assert status == 418 and headers["X-Test"] == "1"
        assert json.loads(raw)["error"]["message"] == "teapot"


def test_rate_faults_deterministic_by_hash():
    faults = {"429": 0.2, "500": 0.2, "malformed": 0.2}
    bodies = [chat_body(f"q{i}") for i in range(12)]

    def run(order):
        with FakeLLMServer(faults=faults, seed=7, deterministic_faults_by_hash=True,
                           retry_after=0, max_seconds=30) as srv:
            for i in order:
                for _ in range(2):
                    post(srv.base_url + "/chat/completions", bodies[i])
            return sorted((r["hash"], r["attempt"], r["fault"]) for r in srv.requests)

    a = run(range(12))
    b = run(reversed(range(12)))
    assert a == b
    assert any(f for *_, f in a) and not all(f for *_, f in a)


def test_cli_prints_url_and_dumps(tmp_path):
    dump = tmp_path / "dump.json"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--port", "0", "--latency", "0",
                             "--fault-rate", "0", "--max-seconds", "20", "--dump", str(dump)],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:") and line.endswith("/v1")
        base_url = line.split(" ", 2)[2]
        status, _, _ = post(base_url + "/chat/completions", chat_body("cli"))
        assert status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)
    saved = json.loads(dump.read_text())
    assert saved["n_requests"] == 1
    assert list(saved["counts"].values()) == [1]


def test_parse_faults_arg():
    assert fls.parse_faults_arg("429=0.1,500=0.05") == {"429": 0.1, "500": 0.05}
    with pytest.raises(ValueError):
        fls.parse_faults_arg("teapot=0.1")
    with pytest.raises(ValueError):
        fls.parse_faults_arg("429=0.8,500=0.5")


def test_through_litellm(server):
    os.environ["LITELLM_OFFLINE_MODE"] = "true"
    os.environ["LITELLM_MODE"] = "PRODUCTION"
    import litellm

    resp = litellm.completion(model="openai/fake", api_base=server.base_url, api_key="sk-test",
                              messages=[{"role": "user", "content": "Hello from litellm"}],
                              max_retries=0, timeout=5)
    assert resp.choices[0].message.content == "Answer to: Hello from litellm"
    assert server.requests[-1]["body"]["model"] == "fake"
    assert sum(server.counts.values()) == 1


def test_rate_window_arithmetic():
    # 6 requests and 60 tokens a minute, counted over 20 s: 2 requests and 20 tokens a window
    w = fls.RateWindow(6, 60, window_s=20.0)
    assert w.admit(8, 0.0) == (True, None, None)
    assert w.admit(8, 5.0) == (True, None, None)
    h = w.headers(5.0)
    assert h == {"x-ratelimit-limit-requests": "6", "x-ratelimit-remaining-requests": "0",
                 "x-ratelimit-reset-requests": "20s", "x-ratelimit-limit-tokens": "60",
                 "x-ratelimit-remaining-tokens": "4", "x-ratelimit-reset-tokens": "20s"}
    # a third request: room again when the first leaves the window, at t = 20
    ok, why, wait = w.admit(1, 6.0)
    assert (ok, why) == (False, "requests") and wait == pytest.approx(14.0)
    # the rejected one counts against the requests (as OpenAI says): two must leave now
    ok, why, wait = w.admit(1, 21.0)
    assert (ok, why) == (False, "requests") and wait == pytest.approx(4.0)
    assert w.admit(5, 26.0) == (True, None, None)          # those at 5 and 6 have left
    # tokens alone: 20 a window; 8 + 8, then 8 more must wait for the first 8 to leave (t = 20)
    t = fls.RateWindow(None, 60, window_s=20.0)
    assert t.admit(8, 0.0)[0] and t.admit(8, 5.0)[0]
    ok, why, wait = t.admit(8, 6.0)
    assert (ok, why) == (False, "tokens") and wait == pytest.approx(14.0)
    assert t.admit(30, 7.0)[:2] == (False, "too_large")     # more than a window can ever hold
    assert fls.go_duration(0.12) == "120ms" and fls.go_duration(360) == "6m0s"
    assert fls.go_duration(1.5) == "1.5s"
    assert fls.parse_limit_arg("judge=600/120000") == ("judge", {"rpm": 600, "tpm": 120000})
    assert fls.parse_limit_arg("*=-/5000") == ("*", {"rpm": None, "tpm": 5000})


def test_rate_limits_over_http():
    with FakeLLMServer(limits={"fake-model": {"rpm": 6}}, window_s=20.0, max_seconds=30) as srv:
        url = srv.base_url + "/chat/completions"
        for i in range(2):
            status, headers, _ = post(url, chat_body(f"q{i}"))
            assert status == 200 and headers["x-ratelimit-limit-requests"] == "6"
            assert headers["x-ratelimit-remaining-requests"] == str(1 - i)
        status, headers, raw = post(url, chat_body("q2"))
        assert status == 429 and 19 < float(headers["Retry-After"]) <= 20
        assert int(headers["retry-after-ms"]) == pytest.approx(
            float(headers["Retry-After"]) * 1000, abs=2)
        err = json.loads(raw)["error"]
        assert err["code"] == "rate_limit_exceeded"
        assert "requests per min (RPM): Limit 6" in err["message"]
        # another model is not limited, and gets no rate headers
        status, headers, _ = post(url, {**chat_body("free"), "model": "other"})
        assert status == 200 and "x-ratelimit-limit-requests" not in headers
        # tokens: "Be brief." + "q0" (3 words) and "Answer to: q0" (3), twice
        assert srv.rate_stats["fake-model"] == {"requests": 3, "rejected": 1, "tokens": 12}
        assert [r["status"] for r in srv.requests[:3]] == [200, 200, 429]


def test_rate_bucket_arithmetic():
    # 60 requests and 600 tokens a minute, in buckets holding 2 s' worth: 2 requests and 20
    # tokens at most, refilled at 1 request and 10 tokens a second
    b = fls.RateBucket(60, 600, bucket_s=2.0)
    assert b.admit(8, 0.0) == (True, None, None)
    assert b.admit(8, 0.0) == (True, None, None)           # requests 0 left, tokens 4
    assert b.headers(0.0) == {
        "x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "2s", "x-ratelimit-limit-tokens": "600",
        "x-ratelimit-remaining-tokens": "4", "x-ratelimit-reset-tokens": "1.6s"}
    # at 0.5 s: half a request and 9 tokens: the request waits 0.5 s more (the tokens bind
    # less: 9 of 8 are there)
    ok, why, wait = b.admit(8, 0.5)
    assert (ok, why) == (False, "requests") and wait == pytest.approx(0.5)
    # the rejected one took its half request (as OpenAI counts them): at 1.5 s one is there
    # (0 + 1.0), and 4 + 1.5 x 10 = 19 tokens
    ok, why, wait = b.admit(12, 1.5)
    assert ok and why is None
    ok, why, wait = b.admit(12, 1.5)                        # 0 requests, 7 tokens left
    assert (ok, why) == (False, "requests") and wait == pytest.approx(1.0)
    assert b.admit(30, 9.0)[:2] == (False, "too_large")      # more than 20 ever held


def test_estimate_charging_counts_characters_and_max_tokens():
    # 6,000 tokens a minute, a bucket of 60 s' worth: holds 6,000, 100 a second back
    with FakeLLMServer(limits={"fake-model": {"tpm": 6000}}, bucket_s=60.0, charge="estimate",
                       max_seconds=30) as srv:
        url = srv.base_url + "/chat/completions"
        # "Be brief." (9) + "x" * 91 = 100 characters: 25, plus max_tokens 5,000
        status, headers, _ = post(url, {**chat_body("x" * 91), "max_tokens": 5000})
        assert status == 200 and headers["x-ratelimit-remaining-tokens"] == str(6000 - 5025)
        # no max_tokens: the default 4,096 is charged, more than the 975 left
        status, headers, raw = post(url, chat_body("x" * 91))
        assert status == 429 and "tokens per min (TPM)" in json.loads(raw)["error"]["message"]
        # 25 + 4,096 - 975 = 3,146 tokens short, at 100 a second
        assert float(headers["Retry-After"]) == pytest.approx(31.46, abs=0.1)
