"""The view's web app: Starlette routes over the store, pages rendered from Jinja2 templates.

Starlette (with uvicorn) is used rather than a hand-written http.server: routing, path
parameters, error handling and a real ASGI server come from a well-kept library, and the
view stays a few functions. Every page opens the store read-only for its request and
closes it, so the view never holds the file between requests. Templates autoescape: model
output and chunk text are data, never markup.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from abtest.errors import UserError
from abtest.reporting.pages import environment
from urllib.parse import quote
import hashlib
import secrets
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.routing import Route
from abtest.view.held import Holder
from abtest.view.routes import (ASSETS, ViewState, asset, case, cases, compare, error,
                                    progress, report_page, review, review_draw, review_label,
                                    row, run_page, runs, states, summary)
import socket
import uvicorn
from abtest.core import background
import importlib
from starlette.responses import PlainTextResponse

def _env():

    return environment()


# Host names an app made without serve() answers (tests' TestClient, in-process use): the
# loopback names on any port. serve() narrows this to the address it bound.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "testserver")


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The Host headers the server bound to host:port answers: the loopback names with its
    port, and --host's own name. Any other name is a page that rebound its DNS name to this
    machine (DNS rebinding) to read the store: refused."""
    own = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return frozenset(f"{h}:{port}".lower() for h in ("127.0.0.1", "localhost", "[::1]", own))


def case_href(base: str, case_id: object, qs: str = "") -> str:
    """A case page's URL under `base` (/runs/RUN): the id percent-encoded whole ("/", "%",
    spaces and any unicode included), so every id reaches its page; an id that is a dot
    segment ("." or "..", which a browser resolves away) goes in the query instead."""

    q = quote(str(case_id), safe="")
    if q in (".", ".."):
        return f"{base}/case?id={q}" + (f"&{qs[1:]}" if qs.startswith("?") else qs)
    return f"{base}/cases/{q}{qs}"


POLL_MS = 2000   # how often a page of a run that may still move asks whether it did


def create_app(store_path: str | Path, hosts: frozenset[str] | None = None,
               poll_ms: int = POLL_MS):
    """The ASGI app for one results store; `hosts` are the Host headers it answers (None:
    the loopback names on any port, for an app not bound by serve()); `poll_ms` how often
    its pages ask whether a run moved."""



    env = _env()
    env.globals["case_href"] = case_href
    store_path = Path(store_path)
    body_of = {name: resources.files("abtest.view").joinpath("assets", name).read_bytes()
               for name in ASSETS}
    state = ViewState(store_path, env, Holder(store_path), secrets.token_urlsafe(24), body_of,
                      hashlib.sha256(b"".join(body_of.values())).hexdigest()[:12], int(poll_ms))

    routes = [Route("/", runs), Route("/states", states), Route("/runs/{run_id}", run_page),
              Route("/runs/{run_id}/progress", progress), Route("/runs/{run_id}/row", row),
              Route("/runs/{run_id}/report", report_page),
              Route("/runs/{run_id}/summary", summary),
              Route("/runs/{run_id}/cases", cases),
              Route("/runs/{run_id}/review", review),
              Route("/runs/{run_id}/review/label", review_label, methods=["POST"]),
              Route("/runs/{run_id}/review/draw", review_draw, methods=["POST"]),
              Route("/runs/{run_id}/cases/{case_id:path}", case),
              Route("/runs/{run_id}/case", case),   # ?id=…: ids a path cannot carry (".", "..")
              Route("/compare", compare), Route("/assets/{name}", asset)]

    def host_ok(request) -> bool:
        got = (request.headers.get("host") or "").strip().lower()
        if hosts is not None:
            return got in hosts
        name = got.rsplit(":", 1)[0] if not got.endswith("]") else got
        return name in LOOPBACK_NAMES

    async def headers(request, call_next):
        if not host_ok(request):

            resp = PlainTextResponse("abtest view answers only the address it serves on "
                                     "(Host header refused)\n", status_code=400)
        else:
            resp = await call_next(request)
        # nothing is fetched from the network; model output can never run a script (the
        # full report is a self-contained page with its style inline and no script at all)
        if request.url.path.endswith("/report"):
            resp.headers["Content-Security-Policy"] = ("default-src 'none'; style-src "
                                                       "'unsafe-inline'; img-src data:; "
                                                       "base-uri 'none'; form-action 'none'; "
                                                       "frame-ancestors 'none'")
        else:
            # inline style attributes only: the report's figures colour their labels so
            resp.headers["Content-Security-Policy"] = ("default-src 'self'; img-src 'self' "
                                                       "data:; style-src 'self' 'unsafe-inline'; "
                                                       "base-uri 'none'; form-action 'self'; "
                                                       "frame-ancestors 'none'")
        # no other site may frame a page (a click on a framed review form would label an item)
        resp.headers["X-Frame-Options"] = "DENY"
        resp.headers["Referrer-Policy"] = "no-referrer"
        resp.headers["X-Content-Type-Options"] = "nosniff"
        return resp

    app = Starlette(routes=routes, exception_handlers={HTTPException: error},
                    middleware=[Middleware(BaseHTTPMiddleware, dispatch=headers)])
    app.state.view = state
    return app


def serve(store_path: str | Path, *, host: str = "127.0.0.1", port: int = 0,
          on_ready=None, poll_ms: int = POLL_MS) -> None:
    """Bind first (port 0 picks a free one), tell `on_ready(url)`, then serve until stopped."""



    # the report's statistics (scipy, statsmodels) import in the background while the first
    # page is read, so the first run page opened does not wait for them (~0.1 s)
    background.start(_warm, "abtest-view-warm")

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror}", field="--port") from None
    sock.listen(128)  # connections made before uvicorn starts wait in the backlog
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    config = uvicorn.Config(create_app(store_path, hosts=allowed_hosts(host, bound),
                                       poll_ms=poll_ms),
                            log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    if on_ready is not None:
        on_ready(f"http://{shown}:{bound}/", server)
    server.run(sockets=[sock])


def _warm() -> None:

    for name in ("abtest.reporting.build", "abtest.reporting.html", "abtest.stats", "scipy.stats",
                 "statsmodels.stats.power"):
        try:
            importlib.import_module(name)
        except Exception:  # a failed warm-up only means the first page imports it itself
            pass
