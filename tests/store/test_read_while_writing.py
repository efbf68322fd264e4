"""Reports, history and the view read a store while `abtest run` writes it (the writer
answers reads over loopback); nothing the run writes is lost or changed by a reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import make_project
from support.waiting import wait_until
from support.cli import abtest_popen, abtest_run   # real `abtest` processes, preloaded
from support.fakes import brain_llm_server as FakeLLMServer, llm_config as config, many_cases, run_results as results

RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def test_report_history_and_view_work_while_a_run_writes(tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from abtest.store.readers import sidecar
    from abtest.view.app import create_app

    import itertools
    import threading

    from support.fakes import _Server, brain_responder

    # the provider answers the first 30 requests (two cases or more) and holds the rest
    # until the reads below are done: the run is still writing while they read, however
    # slow this machine is, and then finishes at once
    release = threading.Event()
    numbers = itertools.count()

    def held_after_30(body):
        if next(numbers) >= 30:
            release.wait(120)
        return brain_responder(body)

    srv = _Server(responder=held_after_30, latency=0.0, max_seconds=300)
    url = srv.start()
    try:
        proj = make_project(tmp_path / "p", many_cases(16),
                            config=config(url).replace("concurrency: 2", "concurrency: 1"))
        monkeypatch.chdir(proj)
        env = {**os.environ, "FAKE_LLM_KEY": "sk-x-123456789"}
        store = proj / "results" / "abtest.duckdb"
        proc = abtest_popen([*RUN, "--run-id", "live1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
        try:
            def two_finished():
                assert proc.poll() is None, "the run ended before it was read"
                r = CliRunner().invoke(cli, ["report", "live1", "--format", "json"])
                rep = json.loads(r.stdout) if r.exit_code == 0 else None
                return rep if rep and rep["n_finished"] >= 2 else None

            seen = wait_until(two_finished, 120, "a read of the running run with 2 cases "
                                                  "finished", every=0.1)
            assert sidecar(store).exists()
            # mid-run: the run is unfinished, so nothing is estimated, but what is saved shows
            assert seen["status"] == "running" and 2 <= seen["n_finished"] < 16
            assert seen["metrics"] == {} and seen["gate"]["decision"] == "INCOMPLETE"
            h = CliRunner().invoke(cli, ["history", "--format", "json"])
            assert h.exit_code == 0 and "live1" in h.stdout
            page = TestClient(create_app(store)).get("/")
            assert page.status_code == 200 and "live1" in page.text and "running" in page.text
            assert "of 16 cases finished" in page.text
            # what cannot be served over the wire says so, in one line
            e = CliRunner().invoke(cli, ["export", "live1", "--out", "exp"])
            assert e.exit_code == 2 and "export once it finishes" in e.stderr
            assert proc.poll() is None    # every read above was of the run as it wrote
        finally:
            release.set()
            out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    finally:
        srv.stop()
    assert not sidecar(store).exists()  # the writer removed its address when it closed
    rep = json.loads(CliRunner().invoke(cli, ["report", "live1", "--format", "json"]).stdout)
    assert rep["status"] == "complete" and rep["n_finished"] == 16
    # the readers changed nothing: the same answers as a run nobody read during
    clean_srv = FakeLLMServer(latency=0.0, max_seconds=300)
    curl = clean_srv.start()
    try:
        (proj / "clean.yaml").write_text(config(curl, "results/clean.duckdb"))
        r = abtest_run(["--config", "clean.yaml", *RUN, "--run-id", "clean1"], env=env)
        assert r.returncode == 0, r.stderr
    finally:
        clean_srv.stop()
    assert results(store, "live1") == results(proj / "results" / "clean.duckdb", "clean1")


def test_the_writer_serves_one_select_to_the_holder_of_its_token(tmp_path):
    from abtest.store import Store
    from abtest.store.readers import find_service, read_only_sql, remote_rows, sidecar

    assert read_only_sql("SELECT 1") and read_only_sql(" with x as (select 1) select * from x;")
    for bad in ("DELETE FROM runs", "SELECT 1; DROP TABLE runs", "", "update runs set x=1",
                "COPY runs TO 'x.csv'", "ATTACH 'x'"):
        assert not read_only_sql(bad), bad
    path = tmp_path / "s.duckdb"
    st = Store(path)
    try:
        st.create_run({"run_id": "r1", "kind": "frozen"})
        info = find_service(path)
        assert info and info["url"].startswith("http://127.0.0.1:")
        assert oct(sidecar(path).stat().st_mode & 0o777) == "0o600"
        rows = remote_rows(info, "SELECT run_id, created_at FROM runs", [], path=path)
        assert rows[0]["run_id"] == "r1" and rows[0]["created_at"].year >= 2026
        from abtest.errors import UserError

        with pytest.raises(UserError, match="only a single SELECT"):
            remote_rows(info, "DELETE FROM runs", [], path=path)
        with pytest.raises(UserError, match="bad token"):
            remote_rows(dict(info, token="0" * 32), "SELECT 1", [], path=path)
        assert st.get_run("r1") is not None  # nothing was deleted
    finally:
        st.close()
    assert not sidecar(path).exists() and find_service(path) is None


def test_a_run_started_while_the_view_holds_the_store_gets_it(tmp_path, monkeypatch):
    """`abtest view` keeps its read-only handle between requests; a writer raises the wait
    flag and the view lets go, so the run starts instead of failing on the lock."""
    from starlette.testclient import TestClient

    from abtest.view import held
    from abtest.view.app import create_app

    monkeypatch.setattr(held, "IDLE_S", 600)   # only the writer's flag can make it let go
    srv = FakeLLMServer(latency=0.0, max_seconds=300)
    url = srv.start()
    try:
        proj = make_project(tmp_path / "p", many_cases(4), config=config(url))
        monkeypatch.chdir(proj)
        env = {**os.environ, "FAKE_LLM_KEY": "sk-x-123456789"}
        first = abtest_run([*RUN, "--run-id", "one"], env=env)
        assert first.returncode == 0, first.stderr
        store = proj / "results" / "abtest.duckdb"
        client = TestClient(create_app(store))
        assert "one" in client.get("/").text
        # the view holds the file now: a plain writer (no flag) is refused
        probe = subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1])",
                                str(store)], capture_output=True, text=True, timeout=60)
        assert probe.returncode != 0 and "lock" in probe.stderr.lower()
        second = abtest_run([*RUN, "--run-id", "two"], env=env)
        assert second.returncode == 0, second.stderr
        page = client.get("/").text
        assert 'href="/runs/two"' in page and 'href="/runs/one"' in page
        assert not (store.parent / "abtest.duckdb.wait").exists()
    finally:
        srv.stop()


WRITER = r"""
import sys, time
from abtest.store import Store

path, hold = sys.argv[1], float(sys.argv[2])
real_migrate = Store._migrate

def slow_migrate(self):   # a writer that has taken the file but does not listen yet
    real_migrate(self)
    print("locked", flush=True)
    sys.stdin.readline()  # until the test has seen a reader wait for it

Store._migrate = slow_migrate
s = Store(path)
s.create_run({"run_id": "w1", "kind": "frozen"})
print("listening", flush=True)
time.sleep(hold)
s.update_run("w1", status="complete")
s.close()
"""


def test_a_reader_waits_for_a_starting_writer_instead_of_being_refused(tmp_path, monkeypatch):
    """`abtest report` of a finished run, started while another process has just taken the
    store for writing (it holds the file, but does not answer reads yet) and a dead writer's
    address is still there: the reader waits, saying so on stderr, and reads through the
    writer once it answers."""
    from support.fakes import Brain, install

    from abtest.store.readers import sidecar

    install(Brain())
    proj = make_project(tmp_path / "p")
    monkeypatch.chdir(proj)
    r = CliRunner().invoke(cli, RUN + ["--run-id", "one"])
    assert r.exit_code == 0, r.stderr
    want = json.loads(CliRunner().invoke(cli, ["report", "one", "--format", "json"]).stdout)
    store = proj / "results" / "abtest.duckdb"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store), "1"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "locked", writer.stderr.read()
        # an address a dead writer left (a live pid, a closed port), as after a kill -9 of a
        # process nobody reaped
        import socket

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        dead_port = sock.getsockname()[1]
        sock.close()
        sidecar(store).write_text(json.dumps({"pid": os.getpid(), "token": "0" * 32,
                                              "url": f"http://127.0.0.1:{dead_port}/rows"}))
        t0 = time.monotonic()
        reader = abtest_popen(["report", "one", "--format", "json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        said = []
        for line in reader.stderr:          # the progress line, while the writer is deaf
            said.append(line)
            if "waiting for it to answer reads" in line:
                break
        assert said and "waiting for it to answer reads" in said[-1], said
        writer.stdin.write("listen\n")      # now the writer answers reads
        writer.stdin.flush()
        out, err = reader.communicate(timeout=120)
        waited = time.monotonic() - t0
        assert reader.returncode == 0, err
        got = json.loads(out)
        for k in ("generated_at",):
            got.pop(k), want.pop(k, None)
        assert got == {k: v for k, v in want.items() if k != "generated_at"}
        assert writer.poll() is None and waited < 60            # read while the writer ran
    finally:
        # "listen" again for a test that failed before it let the writer on (a second line
        # is never read); closing stdin is communicate's
        out, err = writer.communicate("listen\n", timeout=60)
    assert writer.returncode == 0, err
    assert "listening" in out


def test_a_reader_waits_only_so_long_for_a_writer_that_never_answers(tmp_path, monkeypatch):
    from abtest.errors import UserError
    from abtest.store import Store
    from abtest.store import readers

    path = tmp_path / "s.duckdb"
    Store(path).close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; "
                               "c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
                               "time.sleep(30)", str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(readers, "READER_WAIT_S", 1.5)
        t0 = time.monotonic()
        with pytest.raises(UserError, match=rf"pid {holder.pid}\), which has not answered reads "
                                            r"for 2 s"):
            Store(path, read_only=True, create=False)
        assert 1.4 < time.monotonic() - t0 < 15
    finally:
        holder.kill()
        holder.wait()


def test_a_slow_answer_from_the_writer_is_said_within_a_second(tmp_path, monkeypatch):
    """A busy writer that takes seconds to answer a read: the reader says so within a second
    (once), instead of sitting silent."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from abtest.store import readers

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(2.0)
            body = json.dumps({"columns": ["x"], "data": [[1]]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    said: list[tuple[float, str]] = []
    t0 = time.monotonic()
    monkeypatch.setattr(readers, "notice", lambda line: said.append((time.monotonic() - t0, line)))
    monkeypatch.setattr(readers, "_SAID_SLOW", threading.Event())
    info = {"url": f"http://127.0.0.1:{srv.server_address[1]}/", "token": "t", "pid": 4242}
    try:
        rows = readers.remote_rows(info, "SELECT 1 AS x", [], path=tmp_path / "s.duckdb")
        readers.remote_rows(info, "SELECT 1 AS x", [], path=tmp_path / "s.duckdb")
    finally:
        srv.shutdown()
    assert rows == [{"x": 1}]
    assert len(said) == 1, said                       # once per process
    when, line = said[0]
    assert 0.9 <= when <= 1.6 and "pid 4242" in line and "busy" in line


HOLDER = r"""
import sys
from abtest.store import Store

s = Store(sys.argv[1])
s.create_run({"run_id": sys.argv[2], "kind": "frozen"})
print("listening", flush=True)
sys.stdin.readline()
s.close()
"""


def test_a_reader_whose_writer_finished_reads_through_the_next_writer(tmp_path):
    """A reader attached to one writing process, which then finishes while another process
    takes the file for writing: the reader's next read goes through the new writer."""
    from abtest.store import Store

    path = tmp_path / "s.duckdb"
    Store(path).close()

    def writer(run_id):
        p = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), run_id],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "listening", p.stderr.read()
        return p

    first = writer("w1")
    second = None
    reader = Store(path, read_only=True, create=False)
    try:
        assert reader.is_remote and reader.get_run("w1")["run_id"] == "w1"
        out, err = first.communicate("close\n", timeout=60)   # the first writer finishes …
        assert first.returncode == 0, err
        second = writer("w2")                                 # … and another takes the file
        assert reader.get_run("w2")["run_id"] == "w2"          # read through the second
        assert reader.is_remote
    finally:
        reader.close()
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.communicate("close\n", timeout=60)
    assert second.returncode == 0
