"""Reads of a store that another process is writing: the writer answers them.

DuckDB lets one process open a file read-write and no other process open it at all, so
`abtest report`, `history` or `view` would fail while `abtest run` writes. The writing
process therefore serves reads: it listens on loopback (a free port), and only then writes
the address and a random token to `<store>.readers` (mode 0600, removed when it closes), and
runs each read on its own read cursors beside its writes (DuckDB's MVCC: a read sees committed
rows). A reader that finds the file locked asks there instead; when no address answers yet (a
writer between taking the file and listening, or an address a dead writer left behind) it
waits for one, bounded, saying so on stderr, instead of failing. The address file also names
the runs the process is writing now, so a run left "running" by a process that died is told
apart from one that is running. Nothing a run writes can be lost or
corrupted by a reader: readers never write, and the writer runs one SELECT per request and
refuses anything else. This is simpler than publishing snapshot copies (which cost a full
copy of the file per refresh) and keeps every row current.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import date, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterable, Protocol

from abtest.errors import UserError
from abtest.store.writer import StoreClosing
import duckdb

MAX_BODY = 1 << 20


class Served(Protocol):
    """What the read service needs of the store it serves (`results.Store`, which imports
    this module)."""

    path: Path

    def _raw(self, sql: str, params: Iterable = (), *, served: bool = False
             ) -> tuple[list[str], list[tuple]]: ...


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".readers")


def _encode(v: Any) -> Any:
    if isinstance(v, datetime):
        return {"$dt": v.isoformat()}
    if isinstance(v, date):
        return {"$d": v.isoformat()}
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"$b": bytes(v).hex()}
    raise TypeError(f"cannot send {type(v).__name__}")


def _decode(obj: dict) -> Any:
    if len(obj) == 1:
        if "$dt" in obj:
            return datetime.fromisoformat(obj["$dt"])
        if "$d" in obj:
            return date.fromisoformat(obj["$d"])
        if "$b" in obj:
            return bytes.fromhex(obj["$b"])
    return obj


def read_only_sql(sql: str) -> bool:
    """One SELECT (or WITH … SELECT) statement, nothing else."""
    s = sql.strip().rstrip(";").strip()
    return bool(s) and ";" not in s and s.split(None, 1)[0].lower() in ("select", "with")


class ReadService:
    """The writer's side: serve `Store._rows` to other processes until `stop()`."""

    def __init__(self, store: Served):
        self.store = store
        self.token = secrets.token_hex(16)
        service = self

        class ReadRequestHandler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet: a run's output is its progress lines
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                if self.path != "/rows" or n > MAX_BODY:
                    return self._send(404, {"error": "POST /rows"})
                try:
                    req = json.loads(self.rfile.read(n))
                    token, sql, params = req["token"], req["sql"], req.get("params") or []
                except (ValueError, KeyError, TypeError):
                    return self._send(400, {"error": "bad request"})
                if not hmac.compare_digest(str(token), service.token):
                    return self._send(403, {"error": "bad token"})
                if not isinstance(sql, str) or not read_only_sql(sql):
                    return self._send(400, {"error": "only a single SELECT is served"})
                try:
                    names, rows = service.store._raw(sql, params, served=True)
                except StoreClosing:   # this process is letting go of the file: read it there
                    return self._send(503, {"error": "closing"})
                except Exception as exc:  # the reader shows it as a bad read
                    return self._send(400, {"error": f"{type(exc).__name__}: {exc}"[:500]})
                if req.get("shape") == "columns":   # names once, then lists: less to encode
                    return self._send(200, {"columns": names, "data": rows})
                self._send(200, {"rows": [dict(zip(names, r)) for r in rows]})

            def _send(self, code, obj):
                body = json.dumps(obj, default=_encode).encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        # the constructor binds and listens: connections made from here on wait in the
        # backlog until the serving thread accepts them, so the address is published only now
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), ReadRequestHandler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="abtest-store-readers", daemon=True)
        self.thread.start()
        self.file = sidecar(store.path)
        self._publish_lock = threading.Lock()
        self.publish(())

    def publish(self, runs) -> None:
        """Write (or rewrite) the address file: where to ask, the token, and the runs this
        process is writing now. Replaced atomically: a reader never sees half of it."""
        info = {"pid": os.getpid(), "url": f"http://127.0.0.1:{self.httpd.server_address[1]}/rows",
                "token": self.token, "runs": sorted(runs)}
        with self._publish_lock:
            tmp = self.file.with_name(self.file.name + f".{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(info, fh)
            os.replace(tmp, self.file)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        try:  # only our own file: a later writer may have replaced it
            if json.loads(self.file.read_text(encoding="utf-8")).get("token") == self.token:
                self.file.unlink()
        except (OSError, ValueError):
            pass


def wait_flag(path: Path) -> Path:
    """A writer kept out by a reader touches this: `abtest view` (which keeps its read-only
    handle between requests) lets go as soon as it sees it."""
    return path.with_name(path.name + ".wait")


def find_service(path: Path) -> dict | None:
    """The writer's address, when a live process published one for this store."""
    try:
        info = json.loads(sidecar(path).read_text(encoding="utf-8"))
        pid = int(info["pid"])
        os.kill(pid, 0)  # alive? (a killed writer leaves its file behind)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if isinstance(info.get("url"), str) and info["url"].startswith(
        "http://127.0.0.1:") else None


def clear_stale(path: Path) -> None:
    """Called by a process that has just taken the file for writing: any address file there
    is a dead writer's (one writer at a time), and must not send readers to a closed port
    while this one starts."""
    try:
        sidecar(path).unlink()
    except OSError:
        pass


class WriterGone(UserError):
    """The writing process no longer answers (it finished, or died)."""


_OPENER = None


def _opener():
    global _OPENER
    if _OPENER is None:
        _OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
    return _OPENER


def remote_rows(info: dict, sql: str, params, *, path: Path,
                timeout: float = 120) -> list[dict[str, Any]]:
    body = json.dumps({"token": info["token"], "sql": sql, "params": list(params),
                       "shape": "columns"}, default=_encode).encode("utf-8")
    req = urllib.request.Request(info["url"], data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    # a busy writer (a run starting, its threads at work) may take seconds to answer: say so
    # within a second, once per process, rather than sit silent
    timer = threading.Timer(SLOW_READ_NOTICE_S, _say_slow, args=(info, path))
    timer.daemon = True
    timer.start()
    try:
        with _opener().open(req, timeout=timeout) as resp:
            got = json.loads(resp.read(), object_hook=_decode)
        if "columns" in got:
            names = got["columns"]
            return [dict(zip(names, r)) for r in got["data"]]
        return got["rows"]   # a writer from an abtest before columns
    except urllib.error.HTTPError as exc:
        if exc.code == 503:   # the writer is letting go of the file: the reader opens it
            raise WriterGone("the process writing the results store is closing it",
                             file=str(path)) from None
        try:
            msg = json.loads(exc.read()).get("error")
        except ValueError:
            msg = exc.reason
        raise UserError(f"the writing process refused a read: {msg}", file=str(path)) from None
    except (urllib.error.URLError, OSError) as exc:
        raise WriterGone("results store is in use by another abtest process, which stopped "
                         f"answering reads ({exc}); wait for it to finish", file=str(path)) from None
    finally:
        timer.cancel()


SLOW_READ_NOTICE_S = 1.0
_SAID_SLOW = threading.Event()


def _say_slow(info: dict, path: Path) -> None:
    if not _SAID_SLOW.is_set():
        _SAID_SLOW.set()
        notice(f"reading {path} through the abtest process writing it (pid {info.get('pid')}); "
               "it is busy and answers slowly, waiting for it")


def answers(info: dict, path: Path) -> bool:
    """Does the published address answer a read (with its token)? A dead writer's does not."""
    try:
        remote_rows(info, "SELECT 1 AS x", [], path=path, timeout=5)
    except UserError:
        return False
    return True


# how long a reader that finds the file locked waits for the writer to answer reads: the
# writer publishes its address right after taking the file (migrations first, on an old store)
READER_WAIT_S = 60.0
NOTICE_AFTER_S = 0.5   # a wait this short goes unsaid
NOTICE_EVERY_S = 5.0


def _holder_pid(exc: Exception) -> str | None:
    m = re.search(r"\(PID (\d+)\)", str(exc))
    return m.group(1) if m else None


def notice(line: str) -> None:
    """A progress line on stderr (a reader's output is its report: stdout stays clean)."""
    try:
        sys.stderr.write(f"abtest: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def await_writer(path: Path, open_file, first_exc: Exception, *,
                 timeout: float | None = None):
    """The file is locked: wait for the writer's address (and that it answers), or for the
    file to come free. Returns ("remote", info) or ("local", connection); raises UserError
    when neither happens within `timeout` (READER_WAIT_S)."""

    timeout = READER_WAIT_S if timeout is None else timeout
    start = time.monotonic()
    told: float | None = None   # when the last progress line was written
    pid = _holder_pid(first_exc)
    while True:
        info = find_service(path)
        if info is not None and answers(info, path):
            if told is not None:
                notice("the writing process answers reads now")
            return "remote", info
        try:
            return "local", open_file()
        except duckdb.Error as exc:
            if "lock" not in str(exc).lower():
                raise
            pid = _holder_pid(exc) or pid
        waited = time.monotonic() - start
        if waited >= timeout:
            raise UserError(f"results store is in use by another abtest process"
                            f"{f' (pid {pid})' if pid else ''}, which has not answered reads for "
                            f"{timeout:.0f} s; wait for it to finish", file=str(path))
        if waited >= NOTICE_AFTER_S and (told is None or waited - told >= NOTICE_EVERY_S):
            notice(f"results store {path} is being opened for writing by another abtest process"
                   f"{f' (pid {pid})' if pid else ''}; waiting for it to answer reads "
                   f"({waited:.0f} of at most {timeout:.0f} s)")
            told = waited
        time.sleep(0.1)
