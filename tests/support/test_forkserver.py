"""The preloaded interpreter the CLI-process tests use (tests/support/forkserver.py) gives what
a cold `python -m abtest.cli` gives: its own process (pid, signals, exit status), the
caller's cwd, environment, stdin, stdout and stderr, and the interpreter's exit path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from support.cli import (abtest_popen, abtest_run, cold_popen, cold_run, python_popen, python_run,
                         with_abtest_on_path)


def test_exit_status_output_and_arguments_are_the_cold_processes():
    hot, cold = abtest_run(["--version"]), cold_run(["--version"])
    assert (hot.returncode, hot.stdout, hot.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    hot, cold = abtest_run(["report", "x"], cwd="/"), cold_run(["report", "x"], cwd="/")
    assert hot.returncode == cold.returncode == 2
    assert hot.stderr == cold.stderr and hot.stdout == cold.stdout


def test_cwd_env_stdin_and_argv_are_the_callers(tmp_path):
    code = ("import os, sys; print(os.getcwd()); print(os.environ.get('X_FORK'), "
            "'LITELLM_MODE' in os.environ); print(sys.argv[1:]); print(sys.stdin.read()); "
            "print(sys.path[0] == '', sys.executable); sys.exit(7)")
    r = python_run(code, ["a b", "c"], cwd=tmp_path, env={"X_FORK": "1", "PATH": "/bin"},
                   input="from stdin")
    assert r.returncode == 7, r.stderr
    assert r.stdout.splitlines() == [str(tmp_path), "1 False", "['a b', 'c']", "from stdin",
                                     f"True {sys.executable}"]


def test_an_exception_is_a_traceback_and_exit_1_and_atexit_runs():
    r = python_run("import atexit; atexit.register(print, 'bye'); raise KeyError('k')")
    assert r.returncode == 1 and "KeyError: 'k'" in r.stderr and r.stdout == "bye\n"


def test_signals_reach_the_commands_own_process():
    code = ("import os, sys, time; print(os.getpid(), flush=True); "
            "time.sleep(60)")
    for sig, want in ((signal.SIGTERM, -signal.SIGTERM), (signal.SIGKILL, -signal.SIGKILL)):
        p = python_popen(code, stdout=subprocess.PIPE, text=True)
        assert int(p.stdout.readline()) == p.pid != os.getpid()
        p.send_signal(sig)
        assert p.wait(30) == want
        p.stdout.close()
    # Ctrl-C raises KeyboardInterrupt, as in a fresh interpreter (exit -2 when uncaught)
    p = python_popen("import time; print('up', flush=True); time.sleep(60)",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "up\n"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGINT and "KeyboardInterrupt" in err


def test_a_timeout_kills_and_raises_as_subprocess_run_does():
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        python_run("import time; time.sleep(60)", timeout=1)
    assert time.monotonic() - t0 < 30


def test_the_shim_runs_abtest_from_a_shell_and_passes_its_status_on(tmp_path):
    env = with_abtest_on_path()
    r = subprocess.run("abtest --version && cd / && abtest report x; echo code=$?", shell=True,
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.stdout.splitlines() == ["abtest, version " + r.stdout.split("version ")[1]
                                     .splitlines()[0], "code=2"]
    assert "results store not found" in r.stderr
    # SIGTERM to the shim is passed on; the shim ends as the command did
    p = subprocess.Popen(["abtest", "view", "--port", "0"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        p.wait(30)   # no store here: `abtest view` says so and exits 2
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 2


def test_a_closed_pipe_ends_it_as_it_ends_a_cold_process():
    def closed(popen):
        p = popen(["--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()
        err = p.stderr.read().decode()
        p.stderr.close()
        return p.wait(30), err

    assert closed(abtest_popen) == closed(cold_popen)
