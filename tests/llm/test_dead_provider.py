"""A dead provider fails fast (issue 42, item 5): a model whose endpoint refuses the connection
or whose host name does not resolve ends the run within seconds, incomplete (exit 3), with one
line naming the model, its api_base and the error; 429s, 5xx and timeouts keep their retries.

The configs here retry slowly (max_retries 6, backoff 2 s: about a minute of retries before
this change), so a run that ends in seconds shows that the retries were not used up. Hermetic:
the refused port is a loopback port nothing listens on; the DNS failure is a host under
`.invalid` (RFC 6761: never resolves) whose resolution is made to fail as the resolver says so,
at `socket.getaddrinfo`, with no network.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from fake_llm_server import FakeLLMServer
from support.fakes import llm_config, make_project, many_cases
from support.cli import abtest_run

SECRET = "sk-test-DEAD-provider-0123456789"
RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slow_retries(url: str) -> str:
    return llm_config(url).replace("max_retries: 3", "max_retries: 6") \
        .replace("retry_backoff_s: 0.01", "retry_backoff_s: 2")


def stored_run(store_path: Path, run_id: str | None = None) -> dict:
    from abtest.store import Store

    s = Store(store_path, read_only=True)
    try:
        runs = s._rows("SELECT * FROM runs ORDER BY created_at", [])
        run = next(r for r in runs if run_id in (None, r["run_id"]))
        calls = s._rows("SELECT call_hash, error, attempt FROM llm_calls WHERE run_id = ?",
                        [run["run_id"]])
        gens = s._rows("SELECT case_id, variant, error FROM generations WHERE run_id = ?",
                       [run["run_id"]])
    finally:
        s.close()
    return {"run": run, "calls": calls, "generations": gens}


@pytest.fixture
def key(monkeypatch):
    """The models' key set, and litellm imported: the seconds measured are the run's, not
    the import's (a process's first run imports it meanwhile; the CLI test counts that)."""
    from abtest.llm.provider import get_litellm

    monkeypatch.setenv("FAKE_LLM_KEY", SECRET)
    get_litellm()


def run_in_process(proj: Path):
    """`abtest.running.runner.run` on the project: (the exception it raised, seconds it took)."""
    from abtest.core.config import load_config
    from abtest.running.runner import run

    lines: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(Exception) as info:
        run(load_config(str(proj / "abtest.yaml")), str(proj / "fixtures/small"),
            str(proj / "variants/a.yaml"), str(proj / "variants/b.yaml"), progress=lines.append)
    return info.value, time.monotonic() - t0, lines


# --------------------------------------------------------------------------- connection refused
def test_a_refused_port_ends_the_cli_run_in_seconds_incomplete_with_one_line(tmp_path):
    base = f"http://127.0.0.1:{free_port()}/v1"
    proj = make_project(tmp_path / "p", many_cases(40), config=slow_retries(base))
    env = {**os.environ, "FAKE_LLM_KEY": SECRET}
    t0 = time.monotonic()
    out = abtest_run(RUN, cwd=proj, env=env, timeout=300)   # a real process, preloaded
    wall = time.monotonic() - t0
    assert out.returncode == 3, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"abtest: incomplete: openai/fake-gen at {base} is unreachable: "
                           "connection refused ("), last
    assert "Connection refused" in last and "--resume --retry-errors" in last
    assert SECRET not in out.stdout + out.stderr
    # the store holds the run as incomplete; from its start to its end it took seconds (the
    # process's own start, importing litellm on 2 shared cores, is not the provider's doing)
    st = stored_run(proj / "results/abtest.duckdb")
    run = st["run"]
    assert run["status"] == "incomplete" and run["finished_at"] is not None
    took = (run["finished_at"] - run["created_at"]).total_seconds()
    assert took < 10, took
    assert wall < 30, wall   # the retries this config allows would take 30.5 to 61 s alone
    # at most 3 attempts of a call (1 + 2 quick retries), and no new case after the first
    # failures: far fewer cases tried than the fixture holds
    per_call: dict[str, int] = {}
    for c in st["calls"]:
        per_call[c["call_hash"]] = per_call.get(c["call_hash"], 0) + 1
        assert c["error"]
    assert per_call and max(per_call.values()) <= 3, per_call
    tried = {g["case_id"] for g in st["generations"]}
    assert 0 < len(tried) < 40 and all(g["error"] for g in st["generations"])
    # the report and the gate say incomplete too
    rep = abtest_run(["report", run["run_id"], "--format", "json"], cwd=proj, env=env)
    assert json.loads(rep.stdout)["status"] == "incomplete"
    gate = abtest_run(["gate", run["run_id"]], cwd=proj, env=env)
    assert gate.returncode == 3
    print(f"refused port via the CLI: {wall:.2f} s wall, run {took:.2f} s")


def test_a_refused_port_ends_a_library_run_within_10_s(tmp_path, key):
    from abtest.errors import IncompleteRunError
    from abtest.llm import ProviderUnreachable

    base = f"http://127.0.0.1:{free_port()}/v1"
    proj = make_project(tmp_path / "p", many_cases(40), config=slow_retries(base))
    exc, took, lines = run_in_process(proj)
    assert isinstance(exc, ProviderUnreachable) and isinstance(exc, IncompleteRunError)
    assert took < 10, took
    msg = str(exc)
    assert "\n" not in msg and SECRET not in msg and SECRET not in "\n".join(lines)
    assert msg.startswith(f"openai/fake-gen at {base} is unreachable: connection refused (")
    assert exc.model == "openai/fake-gen" and exc.api_base == base
    assert stored_run(proj / "results/abtest.duckdb")["run"]["status"] == "incomplete"
    print(f"refused port in process: {took:.2f} s")


def test_a_dead_judge_alone_also_ends_the_run(tmp_path, key, server):
    """The generator answers; the judge's endpoint refuses: the run ends naming the judge."""
    _, url = server
    base = f"http://127.0.0.1:{free_port()}/v1"
    cfg = slow_retries(url).replace(
        f'judge: {{model: openai/fake-judge, api_base: "{url}"',
        f'judge: {{model: openai/fake-judge, api_base: "{base}"')
    assert base in cfg
    proj = make_project(tmp_path / "p", many_cases(40), config=cfg)
    exc, took, _ = run_in_process(proj)
    assert str(exc).startswith(f"openai/fake-judge at {base} is unreachable: connection refused")
    assert took < 10, took
    st = stored_run(proj / "results/abtest.duckdb")
    assert st["run"]["status"] == "incomplete"
    assert 0 < len({g["case_id"] for g in st["generations"]}) < 40


@pytest.mark.serial   # a 0.1 s wall-clock bound: run alone
def test_later_calls_to_an_unreachable_model_fail_at_once_without_the_network():
    from abtest.llm import Gateway
    from abtest.llm.provider import get_litellm
    from abtest.core.models import ModelSpec

    base = f"http://127.0.0.1:{free_port()}/v1"
    spec = ModelSpec(model="openai/dead", api_base=base)
    gw = Gateway(None, max_retries=6, backoff_base_s=2.0)
    get_litellm()   # its import (2-3 s in a fresh process) is not what is timed
    t0 = time.monotonic()
    first = gw.complete(spec, [{"role": "user", "content": "one"}], purpose="t")
    took = time.monotonic() - t0
    assert took < 3, took   # 3 attempts, 0.25 s + 0.5 s apart: not 6 retries of 1-30 s
    assert first.error and first.error.startswith("unreachable: connection refused (")
    assert "(after 3 attempts)" in first.error
    assert gw.stats.provider_calls == 3
    dead = gw.unreachable()
    assert dead is not None and dead.model == "openai/dead" and dead.api_base == base
    t0 = time.monotonic()
    second = gw.complete(spec, [{"role": "user", "content": "two"}], purpose="t")
    assert time.monotonic() - t0 < 0.1
    assert second.error == dead.error() and gw.stats.provider_calls == 3   # no new attempt
    # max_retries: 0 means no retry at all, even a quick one
    gw0 = Gateway(None, max_retries=0)
    res = gw0.complete(ModelSpec(model="openai/dead0", api_base=base),
                       [{"role": "user", "content": "x"}], purpose="t")
    assert res.error and gw0.stats.provider_calls == 1 and gw0.unreachable() is not None


def test_an_endpoint_that_answered_and_then_refuses_keeps_the_usual_retries():
    """It may be restarting: an endpoint that has answered is never given up on early."""
    from abtest.llm import Gateway
    from abtest.core.models import ModelSpec

    srv = FakeLLMServer(max_seconds=120)
    url = srv.start()
    spec = ModelSpec(model="openai/m", api_base=url)
    gw = Gateway(None, max_retries=3, backoff_base_s=0.01)
    try:
        assert gw.complete(spec, [{"role": "user", "content": "hi"}], purpose="t").ok
    finally:
        srv.stop()
    res = gw.complete(spec, [{"role": "user", "content": "again"}], purpose="t")
    assert res.error and "(after 4 attempts)" in res.error      # 1 + max_retries
    assert gw.unreachable() is None


# --------------------------------------------------------------------------- DNS failure
@pytest.fixture
def no_such_host(monkeypatch):
    """Resolving a host under .invalid fails as a resolver says (EAI_NONAME), without asking
    one; every other name resolves as usual. Returns the names looked up."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host, *args, **kw):
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name.rstrip(".").endswith(".invalid"):
            asked.append(name)
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def test_a_host_name_that_does_not_resolve_ends_the_run_within_10_s(tmp_path, key, no_such_host):
    from abtest.llm import ProviderUnreachable

    base = "http://abtest-dead-provider.invalid/v1"
    proj = make_project(tmp_path / "p", many_cases(40), config=slow_retries(base))
    exc, took, lines = run_in_process(proj)
    assert isinstance(exc, ProviderUnreachable), exc
    assert took < 10, took
    msg = str(exc)
    assert msg.startswith(f"openai/fake-gen at {base} is unreachable: host name does not "
                          "resolve ("), msg
    assert "Name or service not known" in msg and SECRET not in msg
    assert no_such_host and all(h == "abtest-dead-provider.invalid" for h in no_such_host)
    assert stored_run(proj / "results/abtest.duckdb")["run"]["status"] == "incomplete"
    print(f"DNS failure in process: {took:.2f} s")


# --------------------------------------------------------------------------- what keeps retrying
def test_a_503_is_still_retried_up_to_max_retries():
    from abtest.llm import Gateway
    from abtest.core.models import ModelSpec

    with FakeLLMServer(fault_first_n=3, fault_first_n_kind="503", max_seconds=120) as srv:
        gw = Gateway(None, max_retries=4, backoff_base_s=0.01)
        res = gw.complete(ModelSpec(model="openai/m", api_base=srv.base_url),
                          [{"role": "user", "content": "hi"}], purpose="t")
        assert res.ok, res.error
        assert list(srv.counts.values()) == [4]         # three 503s, then the answer
        assert srv.fault_counts == {"503": 3}
    with FakeLLMServer(faults={"503": 1.0}, max_seconds=120) as srv:
        gw = Gateway(None, max_retries=5, backoff_base_s=0.01)
        res = gw.complete(ModelSpec(model="openai/m", api_base=srv.base_url),
                          [{"role": "user", "content": "hi"}], purpose="t")
        assert res.error and "(after 6 attempts)" in res.error
        assert list(srv.counts.values()) == [6] and gw.unreachable() is None


def test_a_429_and_a_500_are_still_retried():
    from abtest.llm import Gateway
    from abtest.core.models import ModelSpec

    with FakeLLMServer(fault_first_n=2, fault_first_n_kind=["429", "500"], retry_after=0.05,
                       max_seconds=120) as srv:
        gw = Gateway(None, max_retries=2, backoff_base_s=0.01)
        res = gw.complete(ModelSpec(model="openai/m", api_base=srv.base_url),
                          [{"role": "user", "content": "hi"}], purpose="t")
        assert res.ok, res.error
        assert list(srv.counts.values()) == [3] and gw.unreachable() is None


def test_a_timeout_is_still_retried():
    from abtest.llm import Gateway
    from abtest.core.models import ModelSpec

    with FakeLLMServer(fault_first_n=2, fault_first_n_kind="timeout", hang_seconds=5,
                       max_seconds=120) as srv:
        gw = Gateway(None, timeout_s=0.5, max_retries=3, backoff_base_s=0.01)
        res = gw.complete(ModelSpec(model="openai/m", api_base=srv.base_url),
                          [{"role": "user", "content": "hi"}], purpose="t")
        assert res.ok, res.error
        assert list(srv.counts.values()) == [3] and gw.unreachable() is None


# --------------------------------------------------------------------------- classification
def test_what_counts_as_unreachable():
    import httpx

    from abtest.llm.provider import get_litellm, shown_base, unreachable_cause

    def wrapped(root: BaseException) -> Exception:
        try:
            try:
                raise root
            except BaseException as e:
                raise httpx.ConnectError(str(e)) from e
        except httpx.ConnectError as e:
            return e

    assert unreachable_cause(wrapped(ConnectionRefusedError(111, "Connection refused"))) \
        .startswith("connection refused ([Errno 111] Connection refused")
    assert unreachable_cause(wrapped(socket.gaierror(-2, "Name or service not known"))) \
        .startswith("host name does not resolve ([Errno -2] Name or service not known")
    # the texts alone, in a connection error (another SDK's wrapping)
    assert unreachable_cause(httpx.ConnectError("nodename nor servname provided, or not known"))
    assert unreachable_cause(httpx.ConnectError("[WinError 10061] No connection could be made "
                                                "because the target machine actively refused it"))
    # not: a timeout, a reset, a TLS failure, or a 503 whose body mentions a refused connection
    assert unreachable_cause(httpx.ConnectTimeout("timed out")) is None
    assert unreachable_cause(ConnectionResetError(104, "Connection reset by peer")) is None
    assert unreachable_cause(httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED]")) is None
    litellm = get_litellm()
    busy = litellm.ServiceUnavailableError("upstream: connection refused", llm_provider="openai",
                                           model="m")
    assert unreachable_cause(busy) is None
    # the endpoint as the line shows it: a password or a query string is never printed
    assert shown_base("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
    assert shown_base(f"https://user:{SECRET}@llm.example/v1?key={SECRET}") \
        == "https://user:***@llm.example/v1?***"
    assert shown_base(None) == "its provider's default endpoint"
