"""Reads of a store that another process is writing: the writer answers them.

DuckDB lets one process open a file read-write and no other process open it at all, so
`abtest report`, `history` or `view` would fail while `abtest run` writes. The writing
process therefore serves reads: it listens on loopback (a free port), writes the address
and a random token to `<store>.readers` (mode 0600, removed when it closes), and runs each
read on its own read cursors beside its writes (DuckDB's MVCC: a read sees committed rows).
A reader that finds the file locked asks there instead. Nothing a run writes can be lost or
corrupted by a reader: readers never write, and the writer runs one SELECT per request and
refuses anything else. This is simpler than publishing snapshot copies (which cost a full
copy of the file per refresh) and keeps every row current.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
import urllib.error
import urllib.request
from datetime import date, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..errors import UserError

MAX_BODY = 1 << 20


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

    def __init__(self, store):
        self.store = store
        self.token = secrets.token_hex(16)
        service = self

        class Handler(BaseHTTPRequestHandler):
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
                    rows = service.store._rows(sql, params)
                except Exception as exc:  # the reader shows it as a bad read
                    return self._send(400, {"error": f"{type(exc).__name__}: {exc}"[:500]})
                self._send(200, {"rows": rows})

            def _send(self, code, obj):
                body = json.dumps(obj, default=_encode).encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="abtest-store-readers", daemon=True)
        self.thread.start()
        self.file = sidecar(store.path)
        info = {"pid": os.getpid(), "url": f"http://127.0.0.1:{self.httpd.server_address[1]}/rows",
                "token": self.token}
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


def remote_rows(info: dict, sql: str, params, *, path: Path) -> list[dict[str, Any]]:
    body = json.dumps({"token": info["token"], "sql": sql, "params": list(params)},
                      default=_encode).encode("utf-8")
    req = urllib.request.Request(info["url"], data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, no proxy
    try:
        with opener.open(req, timeout=120) as resp:
            return json.loads(resp.read(), object_hook=_decode)["rows"]
    except urllib.error.HTTPError as exc:
        try:
            msg = json.loads(exc.read()).get("error")
        except ValueError:
            msg = exc.reason
        raise UserError(f"the writing process refused a read: {msg}", file=str(path)) from None
    except (urllib.error.URLError, OSError) as exc:
        raise UserError("results store is in use by another abtest process, which stopped "
                        f"answering reads ({exc}); wait for it to finish", file=str(path)) from None
