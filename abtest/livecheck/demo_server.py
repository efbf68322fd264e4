"""A small real chat assistant to point `abtest live` at (stdlib http.server only).

One server = one prompt variant over the local index and a model reached through
abtest's Gateway (default: the embedded local/smollm2). Start two, one per variant:

    python scripts/demo_server.py --index results/index.duckdb --variant variants/b.yaml \\
        --port 0 --max-seconds 600
    listening on http://127.0.0.1:PORT            (always the first line of stdout)

API:
    POST /chat  {"message": "...", "conversationId": "eval-1", "stream"?: true}
         ->     {"answer": "...", "chunks": [{"id", "text", "score"}, ...],
                 "version": "<variant name>@<sha256[:12] of the variant file>",
                 "conversationId": "eval-1"}
         with "stream": true the reply is text/event-stream: `data: {"delta": "..."}`
         events, then `data: {"answer", "chunks", "version"}` and `data: [DONE]`
         (the answer is generated first, then streamed word by word).
    GET  /health -> {"ok": true, "version": ...}

Bound to 127.0.0.1 only. Lifetime is bounded by --max-seconds and/or --max-requests
(after that many answers the server closes its socket: later calls are refused,
which is also how tests simulate an endpoint that goes away mid-run).
In-process: `with DemoChatServer(index, variant, model="fake/gen") as srv: srv.url`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from abtest.llm import Gateway
from abtest.core.models import ModelSpec
from abtest.retrieval import get_retriever
from abtest.retrieval.local import LocalRetriever
from abtest.prompts.variants import check_context_template, load_variant
from abtest.core.models import Case, Chunk
from abtest.prompts.variants import render_context, render_messages
from abtest.errors import UserError

DEFAULT_CONTEXT_TEMPLATE = "[{{ chunk.id }}] {{ chunk.text }}"


class DemoChatServer:
    """The chat server; `start()` serves in a daemon thread, `stop()` closes the socket."""

    def __init__(self, index: str | os.PathLike, variant: str | os.PathLike, *,
                 model: str = "local/smollm2", k: int = 3, host: str = "127.0.0.1", port: int = 0,
                 max_seconds: float | None = None, max_requests: int | None = None,
                 temperature: float = 0.0, max_tokens: int = 200,
                 context_template: str = DEFAULT_CONTEXT_TEMPLATE, timeout_s: float = 120,
                 max_retries: int = 2, auth_token: str | None = None, quiet: bool = True,
                 spec=None):

        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the demo server binds to loopback only")
        self.variant = load_variant(variant)
        check_context_template(context_template)
        self.context_template = context_template
        self.k = k
        self.index_path = str(Path(index).resolve())
        retriever = get_retriever(f"local:{self.index_path}", k=k)
        assert isinstance(retriever, LocalRetriever)  # a local: spec
        self.retriever = retriever
        _ = retriever.store  # open the index now, not racily in the first two requests
        # a full spec (api_base, api_key_env, …) from the project's config, or just a model name
        self.spec = spec or ModelSpec(model=model, temperature=temperature, max_tokens=max_tokens)
        self.gateway = Gateway(None, concurrency=1, timeout_s=timeout_s, max_retries=max_retries,
                               backoff_base_s=0.05)
        self.version = f"{self.variant.name}@{self.variant.sha256[:12]}"
        self.max_seconds = max_seconds
        self.max_requests = max_requests
        self.auth_token = auth_token
        self.quiet = quiet
        self.served = 0
        self.closing = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._stopped = threading.Event()
        self._closed = False
        self._closed_done = threading.Event()
        self._serving_thread: threading.Thread | None = None
        self.httpd = ThreadingHTTPServer((host, port), self._handler_class())
        # non-daemon handlers, joined on close: a generation in flight when the lifetime
        # ends finishes cleanly instead of the native runtime aborting at interpreter exit
        self.httpd.daemon_threads = False
        self.httpd.block_on_close = True

    # -- lifecycle -----------------------------------------------------------
    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "DemoChatServer":
        self._thread = threading.Thread(target=self.serve_forever, name="demo-chat-server",
                                        daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._serving_thread = threading.current_thread()
        if self.max_seconds:
            self._timer = threading.Timer(self.max_seconds, self.stop)
            self._timer.daemon = True
            self._timer.start()
        try:
            self.httpd.serve_forever(poll_interval=0.05)
        finally:
            self._stopped.set()

    def stop(self) -> None:
        """Stop serving and close the listening socket (new connections are refused)."""
        with self._lock:
            first = not self._closed
            self._closed = True
            self.closing = True
        if not first:  # another thread is closing: return once it has finished
            self._closed_done.wait()
            return
        if self._timer is not None:
            self._timer.cancel()
        serving = self._serving_thread
        if serving is not None and serving is not threading.current_thread() \
                and not self._stopped.is_set():
            self.httpd.shutdown()
        self.httpd.server_close()
        try:
            self.retriever.close()
        except Exception:
            pass
        self._closed_done.set()

    def __enter__(self) -> "DemoChatServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the assistant -------------------------------------------------------
    def answer(self, message: str, conversation_id: str | None = None) -> dict[str, Any]:

        hits = self.retriever.retrieve(message, self.k)
        case = Case(id=conversation_id or "chat", question=message,
                    context=[Chunk(id=h.id, text=h.text) for h in hits], corpus_version="live",
                    retriever=self.retriever.name, answerable=True)
        ctx = render_context(case, self.context_template)
        msgs = render_messages(self.variant, case, ctx)
        res = self.gateway.complete(self.spec, msgs, purpose="demo-server", case_id=case.id)
        if not res.ok or res.content is None:  # ok: an answer came
            raise RuntimeError(res.error or "no answer")
        return {"answer": res.content.strip(), "conversationId": conversation_id,
                "chunks": [{"id": h.id, "text": h.text, "score": h.score} for h in hits],
                "version": self.version}

    def _count(self) -> None:
        with self._lock:
            self.served += 1
            done = self.max_requests is not None and self.served >= self.max_requests
            if done:
                self.closing = True
        if done:
            threading.Thread(target=self.stop, daemon=True).start()

    def _handler_class(self):
        server = self

        class DemoRequestHandler(BaseHTTPRequestHandler):
            server_version = "abtest-demo-chat/1"

            def log_message(self, fmt, *args):
                if not server.quiet:
                    sys.stderr.write("demo-server: " + (fmt % args) + "\n")

            def _json(self, code: int, obj: dict) -> None:
                body = json.dumps(obj, ensure_ascii=False).encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Assistant-Version", server.version)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.rstrip("/") == "/health":
                    self._json(200, {"ok": True, "version": server.version})
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self):
                if server.closing:  # past its lifetime: answer nothing
                    self.close_connection = True
                    return
                if self.path.split("?")[0].rstrip("/") != "/chat":
                    self._json(404, {"error": "POST /chat"})
                    return
                if server.auth_token is not None and \
                        self.headers.get("Authorization") != f"Bearer {server.auth_token}":
                    self._json(401, {"error": "unauthorized"})
                    return
                try:
                    n = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(n) or b"{}")
                    message = body.get("message") or body.get("question")
                    if not isinstance(message, str) or not message.strip():
                        raise ValueError("missing 'message'")
                except (ValueError, AttributeError) as exc:
                    self._json(400, {"error": f"bad request: {exc}"})
                    return
                try:
                    out = server.answer(message, body.get("conversationId"))
                except Exception as exc:  # the model failed: a 502 the client may retry
                    self._json(502, {"error": f"{type(exc).__name__}: {exc}"[:300]})
                    return
                if body.get("stream"):
                    self._stream(out)
                else:
                    self._json(200, out)
                server._count()

            def _stream(self, out: dict) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("X-Assistant-Version", server.version)
                self.end_headers()
                self.close_connection = True
                words = out["answer"].split(" ")
                for i, w in enumerate(words):
                    delta = w if i == len(words) - 1 else w + " "
                    self.wfile.write(f"data: {json.dumps({'delta': delta})}\n\n".encode("utf-8"))
                    self.wfile.flush()
                self.wfile.write(f"data: {json.dumps(out, ensure_ascii=False)}\n\n".encode("utf-8"))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        return DemoRequestHandler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Demo chat server over the local index "
                                             "(target for `abtest live`).")
    ap.add_argument("--index", required=True, help="index built by `abtest index`")
    ap.add_argument("--variant", required=True, help="prompt variant YAML")
    ap.add_argument("--model", default="local/smollm2", help="litellm model [local/smollm2]")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--port", type=int, default=0, help="0 = any free port")
    ap.add_argument("--max-seconds", type=float, default=600.0, help="lifetime (0 = unbounded)")
    ap.add_argument("--max-requests", type=int, default=None,
                    help="close after this many answers")
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--auth-env", default=None,
                    help="require 'Authorization: Bearer $NAME' (the variable's value)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    token = None
    if args.auth_env:
        token = os.environ.get(args.auth_env)
        if not token:
            print(f"demo-server: environment variable {args.auth_env} is not set", file=sys.stderr)
            return 2
    try:
        srv = DemoChatServer(args.index, args.variant, model=args.model, k=args.k, port=args.port,
                             max_seconds=args.max_seconds or None, max_requests=args.max_requests,
                             max_tokens=args.max_tokens, auth_token=token, quiet=not args.verbose)
    except Exception as exc:

        msg = exc.line() if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        print(f"demo-server: error: {msg}", file=sys.stderr)
        return 2
    print(f"listening on {srv.url}", flush=True)
    print(f"demo-server: variant {srv.version}, model {args.model}, index {srv.index_path}",
          file=sys.stderr, flush=True)
    t0 = time.monotonic()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
    print(f"demo-server: stopped after {srv.served} answer(s), {time.monotonic() - t0:.1f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
