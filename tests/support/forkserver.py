"""`abtest` processes without paying for their imports: a preloaded interpreter that forks one
real process per command (stdlib only; the server half runs as a script).

A cold `python -m abtest.cli run …` spends 5–7 s importing litellm, scipy and the rest before
it does anything; a suite that starts ~100 of them waits ten minutes for imports. Here one
server process per test process (per xdist worker) imports every abtest module, litellm,
scipy and statsmodels once, then serves requests on a UNIX socket: for each it forks a
supervisor, which forks the command's process and reports that process's pid and, when it
ends, its exit status (`Popen.returncode`'s convention: the exit code, or -N after signal N).

The command's process is as real as `subprocess.Popen([sys.executable, "-m", "abtest.cli",
*args])` would give: its own pid (signals sent by the test reach it), the caller's stdin,
stdout and stderr (the file descriptors themselves, passed over the socket), the caller's cwd
and environment (exactly: `os.environ` is replaced), `sys.argv` as `-m` sets it, signal
dispositions as a fresh interpreter has them (SIGINT raises KeyboardInterrupt, SIGTERM and
SIGHUP default, SIGPIPE ignored), and the interpreter's own exit path (non-daemon threads
joined, atexit handlers run, streams flushed). What differs from a cold start: the modules
are already imported (a test of import time or of what `--help` imports must start a cold
process: `cold_cli`), the parent pid is the supervisor's, and the hash seed is the server's.

Two ways in:
- `CliProcess` / `run` (tests/support/cli.py gives them a session server): a Popen-like
  handle whose `pid` is the command's own process;
- `write_shim`: an `abtest` executable (a tiny client) for commands a test runs through a
  shell, e.g. the resume hint a run prints; it forwards SIGINT/SIGTERM/SIGHUP to the command
  and exits as it did (or dies of the same signal).
"""

from __future__ import annotations

import array
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_LEN = struct.Struct("!I")
PRELOAD = ("litellm", "scipy.stats", "statsmodels.api", "duckdb", "numpy", "click", "starlette",
           "uvicorn", "jinja2", "pydantic", "yaml")


# --------------------------------------------------------------------------- wire

def _send(sock: socket.socket, obj: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode()
    msg = _LEN.pack(len(data)) + data
    if fds:
        sock.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        sock.sendall(msg)


def _recv_exact(sock: socket.socket, n: int, fds: list[int] | None = None) -> bytes:
    buf = b""
    while len(buf) < n:
        if fds is not None:
            chunk, anc, _flags, _addr = sock.recvmsg(n - len(buf), socket.CMSG_SPACE(16 * 4))
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(payload[: len(payload) - len(payload) % a.itemsize])
                    fds.extend(a)
        else:
            chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("forkserver connection closed")
        buf += chunk
    return buf


def _recv(sock: socket.socket, fds: list[int] | None = None) -> dict:
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size, fds))
    return json.loads(_recv_exact(sock, n, fds))


# --------------------------------------------------------------------------- server

def _preload() -> None:
    import importlib
    import pkgutil

    import abtest

    for name in PRELOAD:
        importlib.import_module(name)
    for m in pkgutil.walk_packages(abtest.__path__, "abtest."):
        if not m.name.endswith("__main__"):
            importlib.import_module(m.name)


def serve(sock_path: str) -> dict:
    """Import everything, then fork a command per request. Returns only in a command's own
    process (with its request); the server itself exits when its stdin closes (the test
    process ended) or on SIGTERM."""
    _preload()
    import gc

    gc.collect()
    gc.freeze()   # forked processes do not copy the preloaded objects' pages to count them
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # supervisors are reaped by the kernel
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 4096):
            os._exit(0)
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        fds: list[int] = []
        try:
            req = _recv(conn, fds)
        except (EOFError, OSError, ValueError):
            conn.close()
            for fd in fds:
                os.close(fd)
            continue
        pid = os.fork()
        if pid == 0:
            listener.close()
            return _supervise(conn, req, fds)
        conn.close()
        for fd in fds:
            os.close(fd)


def _supervise(conn: socket.socket, req: dict, fds: list[int]) -> dict:
    """In the supervisor: fork the command, tell its pid, wait for it, tell its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _become_command(req, fds)
        return req
    for fd in fds:
        os.close(fd)
    try:
        _send(conn, {"pid": pid})
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    try:
        _send(conn, {"returncode": os.waitstatus_to_exitcode(status)})
    except OSError:
        pass
    os._exit(0)


def _become_command(req: dict, fds: list[int]) -> None:
    sys.stdin.close()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)          # inheritable, as a child's 0/1/2 are
    for fd in fds:
        if fd > 2:
            os.close(fd)
    sys.stdin = open(0, "r", closefd=False)   # noqa: SIM115 (the process's own stdin)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGQUIT, signal.SIGUSR1,
                signal.SIGUSR2, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    sys.path[0] = os.getcwd()     # `python -m` puts the working directory first


def run_command(req: dict) -> None:
    """What `python -m abtest.cli ARGS` (or `python -c CODE ARGS`) runs, in the forked
    process; it ends as the interpreter does (the exit status of SystemExit, 1 and a
    traceback for an exception)."""
    if req.get("code") is not None:
        import types

        sys.argv = ["-c", *req["args"]]
        sys.path[0] = ""              # `python -c` puts "" first
        main_mod = types.ModuleType("__main__")
        main_mod.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main_mod
        exec(compile(req["code"], "<string>", "exec"), main_mod.__dict__)
        sys.exit(0)
    import runpy

    import abtest.cli

    main = str(Path(abtest.cli.__file__).with_name("__main__.py"))
    sys.argv = [main, *req["args"]]
    runpy.run_module("abtest.cli", run_name="__main__", alter_sys=True)
    sys.exit(0)


# --------------------------------------------------------------------------- client

class Server:
    """One preloaded server (started by `start`, stopped with the test process)."""

    def __init__(self) -> None:
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="abtest-fork-")
        self.path = os.path.join(self.dir, "s")
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": os.environ.get(
            "PYTHONDONTWRITEBYTECODE", "")}
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", self.path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._ready = False
        self.shim_dir: str | None = None

    def wait_ready(self, timeout: float = 300) -> None:
        if self._ready:
            return
        assert self.proc.stdout is not None
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if r else b""
        if line.strip() != b"ready":
            self.proc.kill()
            raise RuntimeError(f"abtest forkserver did not start (exit {self.proc.poll()})")
        self._ready = True

    def connect(self) -> socket.socket:
        self.wait_ready()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.path)
        return s

    def shim(self) -> str:
        """A folder holding an `abtest` executable that runs through this server (put it
        first on PATH)."""
        self.wait_ready()
        if self.shim_dir is None:
            self.shim_dir = os.path.join(self.dir, "bin")
            os.makedirs(self.shim_dir, exist_ok=True)
            write_shim(Path(self.shim_dir) / "abtest", self.path)
        return self.shim_dir

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def _fd_for(spec: Any, default_fd: int, mode: str) -> tuple[int, Any, bool]:
    """(fd to pass, our end for PIPE or None, whether to close the passed fd after)."""
    if spec == subprocess.PIPE:
        r, w = os.pipe()
        return (r, os.fdopen(w, "wb"), True) if mode == "r" else (w, os.fdopen(r, "rb"), True)
    if spec == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDWR), None, True
    if spec is None:
        return default_fd, None, False
    if isinstance(spec, int):
        return spec, None, False
    return spec.fileno(), None, False


class CliProcess:
    """`subprocess.Popen([sys.executable, "-m", "abtest.cli", *args], …)` served by a
    preloaded `Server`: the same attributes and methods the tests use (pid, returncode,
    stdin/stdout/stderr, poll, wait, communicate, send_signal, terminate, kill)."""

    def __init__(self, server: Server, args: list[str], *, cwd: str | os.PathLike | None = None,
                 env: dict | None = None, stdin: Any = None, stdout: Any = None,
                 stderr: Any = None, text: bool = False, code: str | None = None) -> None:
        self.args = ["abtest", *map(str, args)] if code is None else \
            [sys.executable, "-c", code, *map(str, args)]
        self.returncode: int | None = None
        self.text = text
        fd_in, self._in, c_in = _fd_for(stdin, 0, "r")
        fd_out, out, c_out = _fd_for(stdout, 1, "w")
        if stderr == subprocess.STDOUT:
            fd_err, err, c_err = fd_out, None, False
        else:
            fd_err, err, c_err = _fd_for(stderr, 2, "w")
        self.stdin = self._wrap(self._in, "w")
        self.stdout = self._wrap(out, "r")
        self.stderr = self._wrap(err, "r")
        self._sock = server.connect()
        try:
            _send(self._sock, {"args": [str(a) for a in args], "code": code,
                               "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
                               "env": dict(os.environ if env is None else env)},
                  [fd_in, fd_out, fd_err])
        finally:
            for fd, close in ((fd_in, c_in), (fd_out, c_out), (fd_err, c_err)):
                if close:
                    os.close(fd)
        self.pid: int = _recv(self._sock)["pid"]
        self._readers: dict[str, threading.Thread] = {}
        self._chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}

    def _wrap(self, f: Any, mode: str) -> Any:
        if f is None or not self.text:
            return f
        import io

        return io.TextIOWrapper(f, encoding="utf-8", errors="strict",
                                line_buffering=(mode == "w"))

    # ------------------------------------------------------------------ status
    def poll(self) -> int | None:
        if self.returncode is None:
            r, _, _ = select.select([self._sock], [], [], 0)
            if r:
                self._read_status()
        return self.returncode

    def _read_status(self) -> None:
        try:
            self.returncode = _recv(self._sock)["returncode"]
        except EOFError:
            self.returncode = -signal.SIGKILL     # the supervisor itself was killed
        self._sock.close()

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            r, _, _ = select.select([self._sock], [], [], timeout)
            if not r:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    # ------------------------------------------------------------------ output
    def _start_readers(self) -> None:
        for name in ("stdout", "stderr"):
            f = getattr(self, name)
            if f is None or name in self._readers:
                continue
            raw = f.buffer if self.text else f
            chunks = self._chunks[name]

            def pump(raw: Any = raw, chunks: list[bytes] = chunks) -> None:
                while True:
                    b = raw.read1(65536) if hasattr(raw, "read1") else raw.read(65536)
                    if not b:
                        return
                    chunks.append(b)

            t = threading.Thread(target=pump, daemon=True)
            t.start()
            self._readers[name] = t

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.stdin is not None and not self.stdin.closed:
            if input:
                try:
                    self.stdin.write(input)
                except BrokenPipeError:
                    pass
            try:
                self.stdin.close()
            except BrokenPipeError:
                pass
        self._start_readers()
        for t in self._readers.values():
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        outs = []
        for name in ("stdout", "stderr"):
            f = getattr(self, name)
            if f is None:
                outs.append(None)
                continue
            data = b"".join(self._chunks[name])
            f.close()
            outs.append(data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
                        if self.text else data)
        return outs[0], outs[1]

    def __enter__(self) -> "CliProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        for f in (self.stdout, self.stderr, self.stdin):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self.wait()


def run(server: Server, args: list[str], *, cwd: Any = None, env: dict | None = None,
        input: Any = None, timeout: float | None = None, capture_output: bool = True,
        text: bool = True, check: bool = False, code: str | None = None
        ) -> subprocess.CompletedProcess:
    """`subprocess.run([sys.executable, "-m", "abtest.cli", *args], …)` through `server` (or
    `[sys.executable, "-c", code, *args]` given `code`)."""
    pipe = subprocess.PIPE if capture_output else None
    p = CliProcess(server, args, cwd=cwd, env=env, text=text, stdout=pipe, stderr=pipe,
                   stdin=subprocess.PIPE if input is not None else None, code=code)
    try:
        out, err = p.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise
    cp = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    if check:
        cp.check_returncode()
    return cp


# --------------------------------------------------------------------------- shim

_SHIM = """#!{python} -S
# `abtest` through the test suite's preloaded server (tests/support/forkserver.py)
import sys
sys.path.insert(0, {support!r})
from forkserver import shim_main
shim_main({sock!r})
"""


def write_shim(path: Path, sock_path: str) -> None:
    path.write_text(_SHIM.format(python=sys.executable, support=str(Path(__file__).parent),
                                 sock=sock_path))
    path.chmod(0o755)


def shim_main(sock_path: str) -> None:
    """The shim: this process's own stdin/stdout/stderr, cwd, environment and arguments go to
    a forked `abtest`; SIGINT, SIGTERM and SIGHUP are passed on; its status becomes ours."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    _send(s, {"args": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}, [0, 1, 2])
    pid = _recv(s)["pid"]

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    try:
        code = _recv(s)["returncode"]
    except EOFError:
        code = -signal.SIGKILL
    sys.stdout.flush()
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
        os._exit(128 - code)
    os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        request = serve(sys.argv[2])
        run_command(request)
