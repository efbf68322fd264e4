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

from ..errors import UserError

ASSETS = ("view.css", "view.js")


def _env():
    from ..reporting.pages import environment

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
    from urllib.parse import quote

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
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import HTMLResponse, RedirectResponse, Response
    from starlette.routing import Route

    from . import data

    env = _env()
    store_path = Path(store_path)
    # assets are fetched once per browser: their URLs carry a digest of their bytes
    body_of = {name: resources.files("abtest.view").joinpath("assets", name).read_bytes()
               for name in ASSETS}
    import hashlib

    env.globals["asset_version"] = hashlib.sha256(b"".join(body_of.values())).hexdigest()[:12]
    env.globals["case_href"] = case_href
    env.globals["poll_ms"] = int(poll_ms)
    # forms that write (review labels) carry this, so another site cannot post to the view
    import secrets

    form_token = secrets.token_urlsafe(24)

    def page(name: str, **ctx) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(store=str(store_path), **ctx))

    from .held import Holder

    holder = Holder(store_path)

    def open_store():
        try:
            return holder.borrow()
        except UserError as exc:
            raise HTTPException(503, exc.line()) from None

    def with_run(request):
        from ..runs import load_run

        store = open_store()
        try:
            run = load_run(store, request.path_params["run_id"])
            return store, run, data.report_of(store, run)
        except UserError as exc:
            store.close()
            raise HTTPException(404, exc.line()) from None

    async def runs(request):
        query = {k: (request.query_params.get(k) or "").strip() for k in data.RUN_FILTERS}
        store = open_store()
        try:
            rows = data.runs_overview(store)
        finally:
            store.close()
        return page("runs.html", runs=rows, query=query, n_shown=data.filter_runs(rows, query))

    async def summary(request):
        from starlette.responses import JSONResponse

        from ..runs import load_run

        store = open_store()
        try:
            run = load_run(store, request.path_params["run_id"])
            out = data.summary_of(store, run)
        except UserError as exc:
            return JSONResponse({"claim": f"report unavailable: {exc.message}", "gate": "—",
                                 "licensed": False, "resolved": ""})
        finally:
            store.close()
        return JSONResponse(out)

    async def states(request):
        """Every run's version (data.versions): the runs page redraws the rows that moved
        (not under /runs/: a run may be named "states")."""
        from starlette.responses import JSONResponse

        store = open_store()
        try:
            out = data.versions(store)
        finally:
            store.close()
        return JSONResponse(out, headers={"Cache-Control": "no-store"})

    def run_and_progress(request):
        """The run, where it is (progress), and its report: a running run's too, whose page
        shows what exists so far (counts, its sequential looks, never an estimate)."""
        from ..runs import load_run

        store = open_store()
        try:
            run = load_run(store, request.path_params["run_id"])
            prog = data.progress(store, run)
            rep = data.report_of(store, run)
        except UserError as exc:
            raise HTTPException(404, exc.line()) from None
        finally:
            store.close()
        return run, prog, rep

    async def row(request):
        from ..runs import load_run

        store = open_store()
        try:
            run = load_run(store, request.path_params["run_id"])
            r = data.run_row(store, run)
        except UserError as exc:
            raise HTTPException(404, exc.line()) from None
        finally:
            store.close()
        return HTMLResponse(env.get_template("runs_row.html").render(r=r))

    async def run_page(request):
        from ..reporting import incidents
        from ..runs import run_config

        run, prog, rep = run_and_progress(request)
        licensed, claim, inc = False, "", {}
        if rep is not None:
            licensed, claim = data.claim_line(rep)
            inc = {v: incidents.of(rep, v) for v in ("B", "A")}
        try:
            threshold = run_config(run).gates.incident_faithfulness
        except Exception:  # a run stored by an older abtest: the report says it in words
            threshold = None
        # a complete run shows the report's own sections (its macros): one rendering of the
        # figures
        return page("run.html", run=run, rep=rep, prog=prog, licensed=licensed, claim=claim,
                    incidents=inc, threshold=threshold,
                    fixture=data.fixture_counts(run) if prog["state"] != "complete" else None)

    async def progress(request):
        from starlette.responses import JSONResponse

        from ..runs import load_run

        store = open_store()
        try:
            run = load_run(store, request.path_params["run_id"])
            prog = data.progress(store, run)
        except UserError as exc:
            raise HTTPException(404, exc.line()) from None
        finally:
            store.close()
        return JSONResponse({k: prog[k] for k in ("state", "line", "counts", "finished",
                                                  "errored", "started", "n_cases", "n_used",
                                                  "not_needed", "version")},
                            headers={"Cache-Control": "no-store"})

    async def report_page(request):
        from ..reporting.html import render_within

        store, run, _ = with_run(request)
        try:
            rep = data.typed_report_of(store, run)
        finally:
            store.close()
        # the report as `abtest report --format html` writes it, with a way back to the view
        return HTMLResponse(render_within("report_back.html", rep, run=run))

    async def cases(request):
        from . import cases as listing

        store, run, rep = with_run(request)
        try:
            prog = data.progress(store, run)
        finally:
            store.close()
        query = listing.Query.parse(request.query_params)
        shown = listing.listing(rep, query)
        return page("cases.html", run=run, rep=rep, prog=prog, query=query, listing=shown,
                    flags=listing.FLAGS, columns=listing.COLUMNS,
                    categories=sorted({r["attrs"]["category"] for r in shown["rows"]} - {""}),
                    issues=sorted(rep.get("taxonomy") or {}))

    async def case(request):
        from . import cases as listing

        store, run, rep = with_run(request)
        try:
            cid = request.path_params.get("case_id")
            if cid is None:
                cid = request.query_params.get("id") or ""
            detail = data.case_detail(store, run, rep, cid)
            prog = data.progress(store, run)
        except UserError as exc:
            raise HTTPException(404, exc.line()) from None
        finally:
            store.close()
        query = listing.Query.parse(request.query_params)
        return page("case.html", run=run, c=detail, prog=prog, query=query,
                    nav=listing.position(rep, query, detail["case_id"]))

    async def compare(request):
        from ..runs import resolve_run

        run1 = (request.query_params.get("run1") or "").strip()
        run2 = (request.query_params.get("run2") or "").strip()
        store = open_store()
        try:
            problem = None
            if run1 and run2:
                try:
                    r1, r2 = resolve_run(store, run1), resolve_run(store, run2)
                except UserError as exc:
                    r1 = r2 = None
                    problem = exc.line()
                if r1 is not None and r1 == r2:
                    problem = (f"run {r1} cannot be compared with itself: pick two different "
                               "runs")
                if problem is None:
                    try:
                        cmp = data.compare(store, r1, r2)
                    except UserError as exc:
                        problem = exc.line()
                    else:
                        return page("compare.html", cmp=cmp)
            # the form, saying what a comparison is (and what was wrong with this one)
            runs = data.runs_overview(store)
        finally:
            store.close()
        resp = page("compare_form.html", runs=runs, run1=run1, run2=run2, problem=problem)
        resp.status_code = 400 if problem else 200
        return resp

    def writable_store():
        from ..store import Store

        holder.drop()  # the view's own read-only handle first
        try:
            return Store(store_path, read_only=False, create=False)
        except UserError as exc:
            raise HTTPException(409, exc.line() + " — labels can be saved once it finishes") from None

    async def posted(request) -> dict[str, str]:
        """The urlencoded form of a POST from one of the view's own pages (token checked)."""
        from urllib.parse import parse_qs

        # the token is the guard; the browser's own word on where the form came from is a
        # second one (its Origin is "null" here: the pages send no referrer)
        origin = request.headers.get("origin")
        site = request.headers.get("sec-fetch-site")
        if (site not in (None, "same-origin", "none") or (origin not in (None, "null") and
                origin.rstrip("/") != f"{request.url.scheme}://{request.url.netloc}")):
            raise HTTPException(403, "form posted from another site")
        raw = await request.body()
        if len(raw) > 65536:
            raise HTTPException(413, "form too large")
        body = raw.decode("utf-8", "replace")
        form = {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
        if not secrets.compare_digest(form.get("token", ""), form_token):
            raise HTTPException(403, "stale or foreign form (reload the page and try again)")
        return form

    def review_url(run_id: str, reviewer: str, anchor: str = "") -> str:
        from urllib.parse import quote

        return (f"/runs/{quote(run_id, safe='')}/review?reviewer={quote(reviewer, safe='')}"
                + (f"#{quote(anchor, safe='')}" if anchor else ""))

    async def review(request):
        from ..review.labels import default_reviewer
        from ..runs import load_run

        reviewer = (request.query_params.get("reviewer") or "").strip() or default_reviewer()
        store = open_store()
        try:
            run = load_run(store, request.path_params["run_id"])
            items = data.review_items(store, run["run_id"], reviewer)
        except UserError as exc:
            raise HTTPException(404 if "not found" in exc.message else 409, exc.line()) from None
        finally:
            store.close()
        return page("review.html", run=run, reviewer=reviewer, token=form_token, **items)

    async def review_label(request):
        from ..review.labels import label_item
        from ..runs import load_run

        from starlette.responses import JSONResponse

        form = await posted(request)
        # the page's script saves in place (JSON); a plain form post gets a page back
        wants_json = "application/json" in (request.headers.get("accept") or "")
        run_id = request.path_params["run_id"]
        reviewer = form.get("reviewer", "").strip()
        if not reviewer or len(reviewer) > 100:
            if wants_json:
                return JSONResponse({"ok": False, "error": "reviewer: give a name of at most "
                                     "100 characters"}, status_code=400)
            raise HTTPException(400, "reviewer: give a name of at most 100 characters")
        try:
            store = writable_store()
        except HTTPException as exc:
            if exc.status_code != 409:
                raise
            # a run writes the store: nothing is lost, the label is kept on the page (the
            # script tries again by itself; without it, this page posts it again)
            if wants_json:
                return JSONResponse({"ok": False, "busy": True, "error": exc.detail},
                                    status_code=409)
            resp = page("busy.html", run_id=run_id, detail=exc.detail, form=form,
                        token=form_token)
            resp.status_code = 409
            return resp
        try:
            run_id = load_run(store, run_id)["run_id"]
            label_item(store, run_id, form.get("item_id", ""), form.get("label", ""), reviewer)
            if wants_json:
                mine = {r["item_id"] for r in store.human_labels(run_id)
                        if r["reviewer"] == reviewer}
                items = [r["item_id"] for r in store.review_items(run_id)]
        except UserError as exc:
            if wants_json:
                return JSONResponse({"ok": False, "error": exc.line()}, status_code=400)
            raise HTTPException(400, exc.line()) from None
        finally:
            store.close()
        if wants_json:
            return JSONResponse({"ok": True, "item_id": form.get("item_id"),
                                 "label": form.get("label"),
                                 "n_labelled": sum(1 for i in items if i in mine),
                                 "n_items": len(items), "reviewer": reviewer})
        return RedirectResponse(review_url(run_id, reviewer, form.get("next", "")), 303)

    async def review_draw(request):
        from ..review.pack import export_pack
        from ..runs import load_run

        form = await posted(request)
        try:
            n = int(form.get("n", "40"))
        except ValueError:
            raise HTTPException(400, "n: give a whole number of items per judge") from None
        store = writable_store()
        try:
            run_id = load_run(store, request.path_params["run_id"])["run_id"]
            # the same draw and pack folder as `abtest review export RUN_ID --n N`
            export_pack(store, run_id, store_path.parent / "review" / run_id, n=n)
        except UserError as exc:
            raise HTTPException(400, exc.line()) from None
        finally:
            store.close()
        return RedirectResponse(review_url(run_id, form.get("reviewer", "")), 303)

    async def asset(request):
        name = request.path_params["name"]
        if name not in ASSETS:
            raise HTTPException(404, "no such asset")
        kind = "text/css" if name.endswith(".css") else "text/javascript"
        return Response(body_of[name], media_type=kind,
                        headers={"Cache-Control": "public, max-age=31536000, immutable"})

    async def error(request, exc):
        resp = page("error.html", status=exc.status_code, detail=exc.detail)
        resp.status_code = exc.status_code
        return resp

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
            from starlette.responses import PlainTextResponse

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

    return Starlette(routes=routes, exception_handlers={HTTPException: error},
                     middleware=[Middleware(BaseHTTPMiddleware, dispatch=headers)])


def serve(store_path: str | Path, *, host: str = "127.0.0.1", port: int = 0,
          on_ready=None, poll_ms: int = POLL_MS) -> None:
    """Bind first (port 0 picks a free one), tell `on_ready(url)`, then serve until stopped."""
    import socket

    import uvicorn

    from .. import background

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
    import importlib

    for name in ("abtest.reporting.build", "abtest.reporting.html", "abtest.stats", "scipy.stats",
                 "statsmodels.stats.power"):
        try:
            importlib.import_module(name)
        except Exception:  # a failed warm-up only means the first page imports it itself
            pass
