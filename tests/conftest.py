"""Hermetic tests: no network beyond loopback, no real keys, offline litellm."""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

os.environ["LITELLM_OFFLINE_MODE"] = "true"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_MODE"] = "PRODUCTION"
# every report the suite builds (in-process or in an `abtest` subprocess) proves that its JSON
# shape is its model's dump (abtest.reporting.model._checked)
os.environ["ABTEST_CHECK_REPORT_SHAPE"] = "1"
for _k in list(os.environ):
    if _k.endswith("_API_KEY") or _k in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        del os.environ[_k]

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0]
    if host in ("localhost", "", None):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self, address):
    if not _is_local(address):
        raise RuntimeError(f"network access blocked in tests: {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if not _is_local(address):
        raise RuntimeError(f"network access blocked in tests: {address!r}")
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect
socket.socket.connect_ex = _guarded_connect_ex


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A working directory with abtest.yaml using the scripted fake provider."""
    from fakes import make_project

    p = make_project(tmp_path)
    monkeypatch.chdir(p)
    return p


@pytest.fixture(autouse=True)
def _store_trims_often(monkeypatch):
    """Every in-process test that writes a store also trims DuckDB's page cache (every 7
    writes instead of 1,000), beside the test's own reads and writes, so a trim that
    deadlocked with them would hang the suite. Tests that count trims set their own."""
    import abtest.store.writer

    monkeypatch.setattr(abtest.store.writer, "TRIM_EVERY", 7)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a skipped test is a failure: a test CI skips proves nothing, so what it
    needs (Chromium, node, ../shared data, the embedded model) must be installed there."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and _in_ci() and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"skipped under CI=true (a skip proves nothing in CI): {reason}"


@pytest.fixture
def brain():
    """The scripted fake provider (`fake/…` models), installed for this test."""
    from fakes import Brain, install

    return install(Brain())


@pytest.fixture
def server():
    """The loopback OpenAI-compatible fake provider answering like the Brain: (server, url)."""
    from fakes import brain_llm_server

    srv = brain_llm_server(latency=0.03, max_seconds=300)
    url = srv.start()
    yield srv, url
    srv.stop()


@pytest.fixture
def live_project(project, brain):
    """A project with a tiny corpus indexed and a golden set (tests/livetools.py)."""
    from livetools import make_live_project

    make_live_project()
    return project
