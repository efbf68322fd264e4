"""A store with two stored runs of the small fixture, and `abtest view` serving it on loopback."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import VARIANT_A, VARIANT_B, Brain, install, make_project

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def _two_runs(p):
    install(Brain())
    make_project(p)
    # B bans a word its answer to q1 uses: a newly failing check, so q1 flips
    (p / "variants" / "b.yaml").write_text(VARIANT_B + "checks:\n  must_not_say: [Normandy]\n")
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0, r.stderr
    first = r.stdout.strip().splitlines()[-1]
    # a second run of the same fixture whose B is the plain prompt under another name
    (p / "variants" / "b2.yaml").write_text(VARIANT_A.replace("name: plain", "name: plain-too"))
    r = CliRunner().invoke(cli, RUN[:-1] + ["variants/b2.yaml"])
    assert r.exit_code == 0, r.stderr
    return first, r.stdout.strip().splitlines()[-1]


@pytest.fixture
def stored_run(built, tmp_path, monkeypatch):
    """The project (built once per process, copied here) and its two runs' JSON reports, as
    this test's copy reports them."""
    p, (first, second) = built.copy("view-two-runs", _two_runs, tmp_path / "p")
    install(Brain())
    monkeypatch.chdir(p)
    rep = json.loads(CliRunner().invoke(cli, ["report", first, "--format", "json"]).stdout)
    rep["second"] = json.loads(CliRunner().invoke(cli, ["report", second, "--format", "json"])
                               .stdout)
    return p, rep


@pytest.fixture
def server(stored_run):
    from abtest.view.app import serve

    p, rep = stored_run
    box = {}
    ready = threading.Event()

    def on_ready(url, srv):
        box.update(url=url, srv=srv)
        ready.set()

    t = threading.Thread(target=serve, args=(p / "results" / "abtest.duckdb",),
                         kwargs={"on_ready": on_ready}, daemon=True)
    t.start()
    assert ready.wait(30)
    yield box["url"], rep
    box["srv"].should_exit = True
    t.join(10)
