"""The gateway's concurrency bound, held on the wire (OpenAI-SDK path) or around the whole call.

The fake server counts requests it serves at once, so these tests see what a provider sees.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from fake_llm_server import FakeLLMServer

from abtest.llm import Gateway, register_scripted_provider
from abtest.core.models import ModelSpec
from abtest.store import Store


def _msgs(i: int) -> list[dict]:
    return [{"role": "user", "content": f"question {i}"}]


@pytest.fixture
def server():
    srv = FakeLLMServer(latency=0.05, max_seconds=120, keep_alive=True)
    srv.start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("concurrency", [1, 3])
def test_wire_slot_never_exceeds_concurrency(tmp_path, server, concurrency):
    store = Store(tmp_path / "s.duckdb")
    gw = Gateway(store, concurrency=concurrency, run_id="r")
    spec = ModelSpec(model="openai/fake-model", api_base=server.base_url, max_tokens=16)
    with ThreadPoolExecutor(12) as pool:  # far more callers than slots
        results = list(pool.map(lambda i: gw.complete(spec, _msgs(i), purpose="generate:A"),
                                range(40)))
    store.close()
    assert all(r.ok for r in results)
    assert len(server.requests) == 40
    assert server.max_in_flight == concurrency  # saturated, never exceeded
    # the calls went through the wire-level slot (litellm's CPU work happened outside it)
    assert (spec.model, spec.api_base) in gw._on_wire
    # the recorded latency is time on the wire, not time queued for a slot
    assert max(r.latency_ms for r in results) < 300


def test_wire_latency_excludes_queueing(tmp_path, server):
    store = Store(tmp_path / "s.duckdb")
    gw = Gateway(store, concurrency=1, run_id="r")
    spec = ModelSpec(model="openai/fake-model", api_base=server.base_url, max_tokens=16)
    gw.complete(spec, _msgs(-1), purpose="warm")  # learn the wire path
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda i: gw.complete(spec, _msgs(i), purpose="generate:A"),
                                range(12)))
    store.close()
    # with one slot and 12 callers, the last call waited ~11 x 50 ms; its latency must not say so
    assert max(r.latency_ms for r in results) < 300
    assert min(r.latency_ms for r in results) >= 45


def test_custom_provider_holds_slot_for_whole_call(tmp_path):
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def reply(messages, req):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        threading.Event().wait(0.02)
        with lock:
            state["now"] -= 1
        return "ok"

    register_scripted_provider("wirecheck", reply)
    store = Store(tmp_path / "s.duckdb")
    gw = Gateway(store, concurrency=2, run_id="r")
    spec = ModelSpec(model="wirecheck/m", max_tokens=8)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: gw.complete(spec, _msgs(i), purpose="generate:A"),
                                range(16)))
    store.close()
    assert all(r.ok for r in results)
    assert state["max"] == 2
    assert gw._on_wire == set()  # no HTTP through the transport: the strict bound applies


def test_fake_server_keep_alive_reuses_connections(server):
    import httpx

    with httpx.Client() as client:
        for i in range(3):
            r = client.post(server.base_url + "/chat/completions",
                            json={"model": "m", "messages": _msgs(i)})
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
            assert r.http_version == "HTTP/1.1"
    assert len(server.requests) == 3
    # replies leave at arrival + latency, not later
    assert all(0.04 < r.elapsed.total_seconds() < 0.5 for r in [r])


def test_one_event_loop_per_calling_thread(tmp_path, server, monkeypatch):
    """litellm's sync timing hook would build (and tear down) an event loop on every call from a
    thread without one; the gateway gives each calling thread one loop instead."""
    import asyncio.base_events as be

    created = []
    orig = be.BaseEventLoop.__init__

    def counting_init(self, *a, **k):
        created.append(threading.current_thread().name)
        orig(self, *a, **k)

    store = Store(tmp_path / "s.duckdb")
    gw = Gateway(store, concurrency=2, run_id="r")
    spec = ModelSpec(model="openai/fake-model", api_base=server.base_url, max_tokens=16)
    monkeypatch.setattr(be.BaseEventLoop, "__init__", counting_init)
    with ThreadPoolExecutor(3, thread_name_prefix="caller") as pool:
        results = list(pool.map(lambda i: gw.complete(spec, _msgs(i), purpose="generate:A"),
                                range(24)))
    store.close()
    assert all(r.ok for r in results) and len(server.requests) == 24
    callers = [n for n in created if n.startswith("caller")]
    assert 0 < len(callers) <= 3, created  # one per thread, not one per call (24)
