"""A store with two stored runs of the small fixture, and `abtest view` serving it on loopback."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import VARIANT_A, VARIANT_B, Brain, install, make_project

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


@pytest.fixture
def stored_run(tmp_path, monkeypatch):
    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    # B bans a word its answer to q1 uses: a newly failing check, so q1 flips
    (p / "variants" / "b.yaml").write_text(VARIANT_B + "checks:\n  must_not_say: [Normandy]\n")
    r = CliRunner().invoke(cli, RUN)
    assert r.exit_code == 0, r.stderr
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    # a second run of the same fixture whose B is the plain prompt under another name
    (p / "variants" / "b2.yaml").write_text(VARIANT_A.replace("name: plain", "name: plain-too"))
    r = CliRunner().invoke(cli, RUN[:-1] + ["variants/b2.yaml"])
    assert r.exit_code == 0, r.stderr
    rep["second"] = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"])
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
