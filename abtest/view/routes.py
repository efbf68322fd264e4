"""The view's pages and endpoints, one function a route: each reads the store for its request
(read-only, borrowed from the view's holder, never kept between requests) and renders a
template of the one Jinja environment; what the whole view shares (the store's path, its
holder, the form token, the assets) is `request.app.state.view`."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from abtest.errors import UserError
from abtest.view import data
from abtest.store.runs import load_run
from abtest.reporting import incidents
from abtest.store.runs import run_config
from abtest.reporting.html import render_within
from abtest.view import cases as listing
from abtest.store.runs import resolve_run
from abtest.store import Store
from urllib.parse import parse_qs
from urllib.parse import quote
from abtest.review.labels import default_reviewer
from abtest.review.labels import label_item
from abtest.review.pack import export_pack

ASSETS = ("view.css", "view.js")


@dataclass
class ViewState:
    """What every route of one view shares."""

    store_path: Path
    env: Any                    # the Jinja environment (abtest.reporting.pages)
    holder: Any                 # abtest.view.held.Holder: the store, borrowed per request
    form_token: str             # forms that write (review labels) carry it: no other site can
    assets: dict[str, bytes]
    asset_version: str          # asset URLs carry a digest of their bytes: fetched once
    poll_ms: int


def view_of(request) -> ViewState:
    return request.app.state.view


def page(request, name: str, **ctx) -> HTMLResponse:
    """A template rendered with what every page of this view shows (its store, the assets' version,
    how often it polls)."""
    v = view_of(request)
    return HTMLResponse(v.env.get_template(name).render(
        store=str(v.store_path), asset_version=v.asset_version, poll_ms=v.poll_ms, **ctx))

def open_store(request):
    try:
        return view_of(request).holder.borrow()
    except UserError as exc:
        raise HTTPException(503, exc.line()) from None

def with_run(request):

    store = open_store(request)
    try:
        run = load_run(store, request.path_params["run_id"])
        return store, run, data.report_of(store, run)
    except UserError as exc:
        store.close()
        raise HTTPException(404, exc.line()) from None

async def runs(request):
    query = {k: (request.query_params.get(k) or "").strip() for k in data.RUN_FILTERS}
    store = open_store(request)
    try:
        rows = data.runs_overview(store)
    finally:
        store.close()
    return page(request, "runs.html", runs=rows, query=query, n_shown=data.filter_runs(rows, query))

async def summary(request):


    store = open_store(request)
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

    store = open_store(request)
    try:
        out = data.versions(store)
    finally:
        store.close()
    return JSONResponse(out, headers={"Cache-Control": "no-store"})

def read_run(request, read):
    """`read(store, run)` for the run the path names, the store closed after it; an unknown
    run (or one the read cannot find its way in) is a 404 with abtest's own line."""

    store = open_store(request)
    try:
        return read(store, load_run(store, request.path_params["run_id"]))
    except UserError as exc:
        raise HTTPException(404, exc.line()) from None
    finally:
        store.close()

def run_and_progress(request):
    """The run, where it is (progress), and its report: a running run's too, whose page
    shows what exists so far (counts, its sequential looks, never an estimate)."""

    return read_run(request, lambda store, run: (run, data.progress(store, run),
                                                 data.report_of(store, run)))

async def row(request):

    r = read_run(request, data.run_row)
    v = view_of(request)
    return HTMLResponse(v.env.get_template("runs_row.html").render(r=r, poll_ms=v.poll_ms))

async def run_page(request):

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
    return page(request, "run.html", run=run, rep=rep, prog=prog, licensed=licensed, claim=claim,
                incidents=inc, threshold=threshold,
                fixture=data.fixture_counts(run) if prog["state"] != "complete" else None)

async def progress(request):

    prog = read_run(request, data.progress)
    return JSONResponse({k: prog[k] for k in ("state", "line", "counts", "finished",
                                              "errored", "started", "n_cases", "n_used",
                                              "not_needed", "version")},
                        headers={"Cache-Control": "no-store"})

async def report_page(request):

    store, run, _ = with_run(request)
    try:
        rep = data.typed_report_of(store, run)
    finally:
        store.close()
    # the report as `abtest report --format html` writes it, with a way back to the view
    return HTMLResponse(render_within("report_back.html", rep, run=run))

async def cases(request):

    store, run, rep = with_run(request)
    try:
        prog = data.progress(store, run)
    finally:
        store.close()
    query = listing.Query.parse(request.query_params)
    shown = listing.listing(rep, query)
    return page(request, "cases.html", run=run, rep=rep, prog=prog, query=query, listing=shown,
                flags=listing.FLAGS, columns=listing.COLUMNS,
                categories=sorted({r["attrs"]["category"] for r in shown["rows"]} - {""}),
                issues=sorted(rep.get("taxonomy") or {}))

async def case(request):

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
    return page(request, "case.html", run=run, c=detail, prog=prog, query=query,
                nav=listing.position(rep, query, detail["case_id"]))

async def compare(request):

    run1 = (request.query_params.get("run1") or "").strip()
    run2 = (request.query_params.get("run2") or "").strip()
    store = open_store(request)
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
                    return page(request, "compare.html", cmp=cmp)
        # the form, saying what a comparison is (and what was wrong with this one)
        runs = data.runs_overview(store)
    finally:
        store.close()
    resp = page(request, "compare_form.html", runs=runs, run1=run1, run2=run2, problem=problem)
    resp.status_code = 400 if problem else 200
    return resp

def writable_store(request):

    view_of(request).holder.drop()  # the view's own read-only handle first
    try:
        return Store(view_of(request).store_path, read_only=False, create=False)
    except UserError as exc:
        raise HTTPException(409, exc.line() + " — labels can be saved once it finishes") from None

async def posted(request) -> dict[str, str]:
    """The urlencoded form of a POST from one of the view's own pages (token checked)."""

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
    if not secrets.compare_digest(form.get("token", ""), view_of(request).form_token):
        raise HTTPException(403, "stale or foreign form (reload the page and try again)")
    return form

def review_url(run_id: str, reviewer: str, anchor: str = "") -> str:

    return (f"/runs/{quote(run_id, safe='')}/review?reviewer={quote(reviewer, safe='')}"
            + (f"#{quote(anchor, safe='')}" if anchor else ""))

async def review(request):

    reviewer = (request.query_params.get("reviewer") or "").strip() or default_reviewer()
    store = open_store(request)
    try:
        run = load_run(store, request.path_params["run_id"])
        items = data.review_items(store, run["run_id"], reviewer)
    except UserError as exc:
        raise HTTPException(404 if "not found" in exc.message else 409, exc.line()) from None
    finally:
        store.close()
    return page(request, "review.html", run=run, reviewer=reviewer, token=view_of(request).form_token, **items)

async def review_label(request):


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
        store = writable_store(request)
    except HTTPException as exc:
        if exc.status_code != 409:
            raise
        # a run writes the store: nothing is lost, the label is kept on the page (the
        # script tries again by itself; without it, this page posts it again)
        if wants_json:
            return JSONResponse({"ok": False, "busy": True, "error": exc.detail},
                                status_code=409)
        resp = page(request, "busy.html", run_id=run_id, detail=exc.detail, form=form,
                    token=view_of(request).form_token)
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

    form = await posted(request)
    try:
        n = int(form.get("n", "40"))
    except ValueError:
        raise HTTPException(400, "n: give a whole number of items per judge") from None
    store = writable_store(request)
    try:
        run_id = load_run(store, request.path_params["run_id"])["run_id"]
        # the same draw and pack folder as `abtest review export RUN_ID --n N`
        export_pack(store, run_id, view_of(request).store_path.parent / "review" / run_id, n=n)
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
    return Response(view_of(request).assets[name], media_type=kind,
                    headers={"Cache-Control": "public, max-age=31536000, immutable"})

async def error(request, exc):
    resp = page(request, "error.html", status=exc.status_code, detail=exc.detail)
    resp.status_code = exc.status_code
    return resp
