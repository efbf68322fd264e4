"""Run `abtest` as a real process, fast: through one preloaded interpreter per test process
(tests/support/forkserver.py), or cold where a test is about startup itself.

    abtest_run(["report", rid, "--format", "json"], cwd=proj, env=env, timeout=300)
        # like subprocess.run([sys.executable, "-m", "abtest.cli", ...], capture_output=True,
        # text=True): a CompletedProcess
    abtest_popen([...], cwd=proj, env=env, stdout=PIPE, stderr=PIPE, text=True)
        # like subprocess.Popen: pid is the command's own process (signals reach it)
    with_abtest_on_path(env)
        # env whose PATH finds an `abtest` that runs through the server (for commands a test
        # runs through a shell, as a user would paste them)
    python_run(code, args) / python_popen(code, args)
        # like `python -c CODE ARGS`, forked from the same preloaded interpreter
    cold_run([...]) / cold_popen([...])
        # a fresh `python -m abtest.cli` (pays the imports; for startup and what it imports)

The server starts at the first use, or before the first test when a collected test carries
the `cli_process` mark (conftest), so its ~6 s of imports overlap other tests.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
from typing import Any

from .forkserver import CliProcess, Server, run

_server: Server | None = None
_lock = threading.Lock()


def server() -> Server:
    global _server
    with _lock:
        if _server is None:
            _server = Server()
            atexit.register(stop)
    return _server


def stop() -> None:
    global _server
    with _lock:
        if _server is not None:
            _server.stop()
            _server = None


def abtest_run(args: list, *, cwd: Any = None, env: dict | None = None, input: Any = None,
               timeout: float | None = 300, capture_output: bool = True, text: bool = True,
               check: bool = False) -> subprocess.CompletedProcess:
    return run(server(), [str(a) for a in args], cwd=cwd, env=env, input=input,
               timeout=timeout, capture_output=capture_output, text=text, check=check)


def abtest_popen(args: list, *, cwd: Any = None, env: dict | None = None, stdin: Any = None,
                 stdout: Any = None, stderr: Any = None, text: bool = False) -> CliProcess:
    return CliProcess(server(), [str(a) for a in args], cwd=cwd, env=env, stdin=stdin,
                      stdout=stdout, stderr=stderr, text=text)


def python_run(code: str, args: list = (), **kw: Any) -> subprocess.CompletedProcess:
    """`subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)`
    in a process forked from the preloaded interpreter (abtest, litellm, scipy imported)."""
    kw.setdefault("timeout", 300)
    return run(server(), [str(a) for a in args], code=code, **kw)


def python_popen(code: str, args: list = (), *, cwd: Any = None, env: dict | None = None,
                 stdin: Any = None, stdout: Any = None, stderr: Any = None,
                 text: bool = False) -> CliProcess:
    """`subprocess.Popen([sys.executable, "-c", code, *args], …)`, forked preloaded."""
    return CliProcess(server(), [str(a) for a in args], cwd=cwd, env=env, stdin=stdin,
                      stdout=stdout, stderr=stderr, text=text, code=code)


def with_abtest_on_path(env: dict | None = None) -> dict:
    """`env` (default: this process's) with an `abtest` first on PATH that runs through the
    preloaded server."""
    env = dict(os.environ if env is None else env)
    env["PATH"] = f"{server().shim()}{os.pathsep}{env.get('PATH', '')}"
    return env


COLD = [sys.executable, "-m", "abtest.cli"]


def cold_run(args: list, **kw: Any) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 300)
    return subprocess.run([*COLD, *map(str, args)], **kw)


def cold_popen(args: list, **kw: Any) -> subprocess.Popen:
    return subprocess.Popen([*COLD, *map(str, args)], **kw)
