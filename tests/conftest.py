"""Hermetic tests: no network beyond loopback, no real keys, offline litellm."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# tests/ and scripts/ are on sys.path by pyproject.toml's `pythonpath` (tests/support is a
# package: `from support.fakes import …`; scripts/ modules import by their names)

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
    from support.fakes import make_project

    p = make_project(tmp_path)
    monkeypatch.chdir(p)
    return p


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """Projects built once per test process, a copy per test (tests/support/built.py)."""
    from support.built import Built

    return Built(tmp_path_factory.mktemp)


def _small_run(root):
    from click.testing import CliRunner

    from abtest.cli import cli
    from support.fakes import Brain, install, make_project

    b = install(Brain())
    make_project(root)
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    assert r.exit_code == 0, r.stderr
    return r.stdout.strip().splitlines()[-1], b.calls


@pytest.fixture
def ran(built, tmp_path, monkeypatch, brain):
    """The small fixture's run of the default project, as if this test had run it in its own
    folder `tmp_path / "p"` (its working directory; built once per process and copied): the
    run's id. `brain` is the installed fake provider, its `calls` those of the run."""
    from support.fakes import install

    p, (run_id, calls) = built.copy("small-run", _small_run, tmp_path / "p")
    install(brain)
    brain.calls.extend(calls)
    monkeypatch.chdir(p)
    return run_id


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium per test module and process; a test opens its pages with
    `with chromium.pages() as browser:` (a new context each, tests/support/browser.py).
    Module scope, not session: sync Playwright keeps an event loop running on this thread
    while it is open, and a test of another module that calls asyncio.run() would fail beside
    it; pytest closes a module's fixtures before it runs another module's tests."""
    from support.browser import ARGS, CHROMIUM, Chromium, playwright_or_skip

    pw = playwright_or_skip()
    with pw.sync_playwright() as play:
        browser = play.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield Chromium(browser)
        finally:
            browser.close()


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
    from support.fakes import Brain, install

    return install(Brain())


@pytest.fixture
def server():
    """The loopback OpenAI-compatible fake provider answering like the Brain: (server, url)."""
    from support.fakes import brain_llm_server

    srv = brain_llm_server(latency=0.03, max_seconds=300)
    url = srv.start()
    yield srv, url
    srv.stop()


@pytest.fixture
def live_project(project, brain):
    """A project with a tiny corpus indexed and a golden set (tests/support/livetools.py)."""
    from support.livetools import make_live_project

    make_live_project()
    return project


# --------------------------------------------------------------------------- tiers and order
# `slow`: left out of `scripts/test --fast` (the edit loop). A test is slow when it is marked
# so, or renders in Chromium, runs the embedded model, or lives in one of these modules (each
# starts `abtest` processes, runs whole experiments over HTTP, or waits on real time).
SLOW_MODULES = {
    "tests/running/test_run_state.py", "tests/running/test_resume.py", "tests/reporting/test_github_action.py",
    "tests/scripts/test_validity_sim.py", "tests/running/test_sequential_run.py", "tests/core/test_background.py",
    "tests/api/test_python_api_types.py", "tests/project/test_doctor.py",
    "tests/llm/test_batch.py", "tests/llm/test_budget.py", "tests/llm/test_dead_provider.py",
    "tests/llm/test_embedded.py", "tests/llm/test_ratelimit.py",
    "tests/llm/test_ratelimit_bucket.py", "tests/store/test_read_while_writing.py",
    "tests/view/test_view_state.py", "tests/view/test_run_truth_browser.py",
    "tests/view/test_view_truth_browser.py", "tests/support/test_forkserver.py",
}


def _rel(item) -> str:
    return Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()


def pytest_collection_modifyitems(config, items):
    """Mark the slow tier; run the slow tests first (a parallel pass then ends on short tests
    instead of waiting on one long one); start the preloaded `abtest` interpreter
    (tests/support/cli.py) now, beside the first tests, when a collected test needs it."""
    for item in items:
        if item.get_closest_marker("embedded"):
            # the real model computes on every core (llama.cpp's threads wait for each other
            # at every token): beside other tests a 40 s test took 9 minutes
            item.add_marker(pytest.mark.serial)
        if (_rel(item) in SLOW_MODULES or item.get_closest_marker("chromium")
                or item.get_closest_marker("embedded")):
            item.add_marker(pytest.mark.slow)
    slow = [i for i in items if i.get_closest_marker("slow")]
    rest = [i for i in items if not i.get_closest_marker("slow")]
    items[:] = slow + rest


def pytest_collection_finish(session):
    from support import cli as support_cli

    selected = session.items
    if session.config.option.collectonly or not selected:
        return
    if any(getattr(getattr(i, "module", None), name, None) is fn
           for i in selected
           for name, fn in vars(support_cli).items() if callable(fn) and name.startswith(
               ("abtest_", "python_", "with_abtest"))):
        support_cli.server()     # started, not waited for: its imports overlap the first tests


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """ABTEST_TEST_TIMELINE=DIR: each test's start, end and CPU seconds (this process, every
    thread) in DIR/<worker>.jsonl, for docs/PERFORMANCE.md's look at where the time goes."""
    out = os.environ.get("ABTEST_TEST_TIMELINE")
    if not out:
        yield
        return
    import json
    import time

    t0, c0 = time.time(), time.process_time()
    yield
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(Path(out) / f"{worker}.jsonl", "a") as fh:
        fh.write(json.dumps({"test": item.nodeid, "start": t0, "end": time.time(),
                             "cpu": time.process_time() - c0}) + "\n")
